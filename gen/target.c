/* The table of targets (target.h): the one place that names an sm, its
 * limits and its family building blocks. */
#include <string.h>

#include "target.h"
#include "decode.h"
#include "estimate.h"
#include "fmha.h"
#include "gemm.h"
#include "indexer.h"

/* Columns: name, tag used in kernel names, compute capability, lowest PTX ISA with the target (PTX ISA
 * release notes: sm_90a in 8.0, sm_100a in 8.6; docs/hardware.md, "Targets and PTX versions"),
 * features, opt-in smem per block (227 KiB on both), TMEM columns (docs/hardware.md,
 * "TMEM addressing"), threads per block, registers per SM and per thread, descriptor format
 * (docs/hardware.md, "Shared-memory descriptor (sm_90)"), family building blocks (gemm, fmha, decode, indexer), launch-time models (docs/estimate.md). */
const Target targets[] = {
	{"sm_90a", "sm90a", 90, 80, FEAT_WGMMA | FEAT_SETMAXNREG | FEAT_TMA, 232448, 0, 1024, 65536, 255,
	 DESC_SM90, &gemm_sm90, &fmha_sm90, &decode_sm90, &indexer_sm90, &est_sm90},
	{"sm_100a", "sm100a", 100, 86, FEAT_TCGEN05 | FEAT_SETMAXNREG | FEAT_TMA, 232448, 512, 1024, 65536,
	 255, DESC_SM100, &gemm_sm100, &fmha_sm100, &decode_sm100, &indexer_sm100, &est_sm100},
};
const int ntargets = sizeof targets / sizeof targets[0];

const Target *
target_find(const char *name)
{
	for (int i = 0; i < ntargets; i++)
		if (strcmp(targets[i].name, name) == 0)
			return &targets[i];
	return NULL;
}
