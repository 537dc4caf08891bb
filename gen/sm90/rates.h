/* H100 SXM rates per SM and clock, the one place the sm_90a launch-time
 * estimate (gen/sm90/estimate.c) takes them from; each with its source in
 * docs/estimate.md, "H100 rates". Datasheet rates: 989 TFLOP/s dense
 * bf16/fp16 and 1979 fp8 on 132 SMs at 1830 MHz are 4096 and 8192 FLOP per
 * clock and SM; 16 MUFU ex2, 128 shared-memory bytes and four schedulers
 * of one warp instruction (128 thread-instructions) per clock and SM. The
 * rest were measured on this project's H100 (docs/estimate.md,
 * "Calibration"). */
#ifndef KGEN_SM90_RATES_H
#define KGEN_SM90_RATES_H

enum {
	H100_MMA_FLOP_CLK = 4096,
	H100_MMA_FP8_FLOP_CLK = 8192,
	H100_EX2_CLK = 16,
	H100_ISSUE_CLK = 128,
	H100_SMEM_B_CLK = 128,
	H100_SMS = 132,
	H100_HBM_GB_S = 3350,
	H100_SM_SMEM_BYTES = 233472, /* shared memory per SM, 1 KiB of it reserved per CTA */
	H100_SM_REGS = 65536,
	H100_SM_THREADS = 2048,
	/* fitted to one H100 run (docs/estimate.md, "Calibration"): the clock
	 * at which the rates above reproduce kbench's times */
	H100_CLK_MHZ = 1650,
	/* assumed; checked only through the rows they enter (docs/estimate.md) */
	H100_L2_B_CLK = 64,         /* TMA bytes from L2 per clock and SM */
	H100_LOAD_LAT_CLK = 1500,   /* a TMA load's latency from issue to mbarrier */
	/* fitted (docs/estimate.md, "Calibration") */
	H100_WGMMA_LAT_CLK = 260,   /* wgmma issue to wait_group completing, beyond its rate */
	H100_STORE_B_CLK = 16,      /* epilogue st.global from registers, bytes per clock and SM */
	/* how two units that take turns overlap: the tile takes the p-norm
	 * of their clocks (est_overlap), p in tenths: the MMA ring against the
	 * softmax of the warpgroups waiting for their turn, and wgmma against
	 * its shared-memory operand reads */
	H100_SOFTMAX_OVERLAP_P10 = 18,
	H100_SMEM_OVERLAP_P10 = 30,
	H100_HANDOFF_CLK = 400,     /* split O, P through smem: st.shared, fence.proxy.async, mbarrier (assumed) */
	H100_CTA_CLK = 500,         /* per CTA: launch on the SM, prologue, barrier init */
	H100_LAUNCH_NS = 4000,      /* per launch, host-visible (events around one launch; assumed) */
};

/* wgmma operand reads from shared memory, bytes per clock and SM, by the
 * swizzle span of the layout (16: none; gen/layout.h swizzle_span):
 * narrower swizzles serve a core matrix's rows from fewer banks. Measured
 * (docs/estimate.md, "Calibration"). */
static const struct {
	int span, b_clk;
} h100_smem_by_span[] = {{16, 16}, {32, 26}, {64, 32}, {128, H100_SMEM_B_CLK}};

#endif
