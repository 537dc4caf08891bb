/* B200 rates per SM and clock, the one place `kgen plan` estimates take
 * them from (docs/hardware.md, "Limits and peak rates": 2.25 PFLOP/s dense
 * bf16 and about 8 TB/s HBM on 148 SMs at ~1.85 GHz; 16 ex2/clk MUFU; 128
 * B/clk shared memory; four schedulers issuing one warp instruction each,
 * 128 thread-instructions). */
#ifndef KGEN_SM100_RATES_H
#define KGEN_SM100_RATES_H

enum {
	B200_MMA_FLOP_CLK = 8192,
	B200_EX2_CLK = 16,
	B200_SMEM_B_CLK = 128,
	B200_ISSUE_CLK = 128,
	B200_SMS = 148,
	B200_CLK_MHZ = 1850,
	B200_HBM_GB_S = 8000,
	/* the gemm bound (gen/sm100/estimate.c): FP8 and FP4 dense MMA rates,
	 * 4.5 and 9 PFLOP/s over bf16's 2.25 (docs/hardware.md, "Limits and
	 * peak rates"), 228 KiB of shared memory and 512 TMEM columns per SM */
	B200_MMA_FP8_FLOP_CLK = 2 * B200_MMA_FLOP_CLK,
	B200_MMA_FP4_FLOP_CLK = 4 * B200_MMA_FLOP_CLK,
	B200_SM_SMEM_BYTES = 233472,
	B200_TMEM_COLS = 512,
};

#endif
