/* The sm_90a indexer (docs/ABI.md "indexer"): the shared FMA scoring
 * (gen/indexer_fma.c) and the FP8 wgmma scoring (gen/sm90/indexer_mma.c). */
#include "../indexer.h"
#include "indexer_mma.h"

const IndexerOps indexer_sm90 = {
	.score = indexer_score_fma,
	.how = indexer_how_fma,
	.score_mma = sm90_indexer_score_mma,
	.how_mma = "FP8 wgmma m64n64k32: 64-key tiles (A, 128-byte swizzled smem) against the heads (B), S^T in registers; fp8 keys copied by cp.async two tiles ahead into a ring of three a warpgroup (each warp the rows its MMA reads, no loop barrier), fp4 keys loaded into registers two tiles ahead and turned into E4M3 as they are stored (each key's four UE8M0 exponents folded into one scale); relu, weights and the sum over a quad's heads in registers",
	.unit_mma = 2 * IDX_TILE,
	.mma_score = IDX_SCORE_WGMMA,
	.mma_fp4 = IDX_MMA_FP4_E4M3,
	.copy_bufs = 3,
};
