/* The sm_90a indexer (docs/ABI.md "indexer"): the shared FMA scoring
 * (gen/indexer_fma.c) and the FP8 wgmma scoring (gen/sm90/indexer_mma.c). */
#include "../indexer.h"
#include "indexer_mma.h"

const IndexerOps indexer_sm90 = {
	indexer_score_fma,
	indexer_how_fma,
	sm90_indexer_score_mma,
	"FP8 wgmma m64n64k32: the heads (A) against 64-key tiles (B) that each warpgroup gathers into 128-byte swizzled smem; relu, weights and the head sum in the epilogue",
};
