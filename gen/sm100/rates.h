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
};

#endif
