/* The sm_100a launch-time bound for the gemm (docs/estimate.md, "sm_100a
 * gemm bound"): one K stage of an output tile, unit by unit at B200 rates
 * (rates.h), with no fill or latency terms: the slowest unit over every
 * tile and the HBM floor, a bound the kernel cannot beat, uncalibrated
 * (no B200 here). gen/estimate.c lays the CTAs onto the SMs. */
#include <stdio.h>

#include "../estimate.h"
#include "../gemm.h"
#include "rates.h"

static const EstGpu b200 = {"B200", B200_SMS, B200_CLK_MHZ, 0.0, B200_HBM_GB_S};

/* Dense tcgen05.mma FLOPs per clock and SM by operand width: FP8 twice
 * bf16, FP4 (kind::mxf4nvf4) twice FP8 (docs/hardware.md, "Limits and
 * peak rates"). */
static double
mma_rate(int ebits)
{
	return ebits == 4 ? B200_MMA_FP4_FLOP_CLK : ebits == 8 ? B200_MMA_FP8_FLOP_CLK : B200_MMA_FLOP_CLK;
}

/* CTAs resident per SM: shared memory (1 KiB reserved per CTA) and TMEM
 * columns (512 per SM). */
static int
per_sm(const Plan *p)
{
	int n = B200_SM_SMEM_BYTES / (int)(p->smem_request + 1024);
	int by_tmem = p->tmem_alloc ? B200_TMEM_COLS / p->tmem_alloc : n;

	if (by_tmem < n)
		n = by_tmem;
	return n < 1 ? 1 : n;
}

/* One K stage: the MMAs (tile_rows x tile-n x tile-k), the operand bytes
 * they read from shared memory (A and this CTA's B, FP4 packed), and the
 * drain: the accumulator's tile of C leaving through the epilogue's stores
 * at the shared-memory rate. */
static void
gemm(const GemmCfg *g, Estimate *e)
{
	double tm = g->tm, tn = g->tn, tk = g->tk, bytes = (tm + g->tn_cta) * tk * g->ebits / 8;

	e->per_sm = per_sm(&g->plan);
	snprintf(e->tile, sizeof e->tile, "K stage of %d (a %dx%d output tile)", g->tk, g->tile_rows, g->tn);
	est_unit(e, "tensor core", 2 * tm * tn * tk / mma_rate(g->ebits));
	est_unit(e, "smem reads by the MMA", bytes / B200_SMEM_B_CLK);
	e->drain_clk = tm * (tn / (1 + g->swiglu)) * g->esz_out / B200_SMEM_B_CLK;
}

const EstOps est_sm100 = {&b200, NULL, gemm};
