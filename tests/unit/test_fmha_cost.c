/* The sm_100a fmha cost model (gen/sm100/fmha_cost.h; docs/estimate.md,
 * "sm_100a fmha plans") against figures derived by hand in the comments
 * from the B200 rates of gen/sm100/rates.h: 8192 FLOP (4096 at M = 64),
 * 16 ex2, 128 thread-instructions, 128 shared-memory bytes and an assumed
 * 64 L2 bytes per clock and SM. */
#include <math.h>
#include <stdio.h>

#include "gen/sm100/fmha_cost.h"

static int fails;

#define NEAR(got, want, what)                                                                \
	do {                                                                                 \
		double g_ = (got), w_ = (want);                                              \
		if (fabs(g_ - w_) > 1e-6 * (fabs(w_) + 1)) {                                 \
			printf("FAIL test_fmha_cost.c:%d: %s: expected %.6g, got %.6g\n", __LINE__, \
			       what, w_, g_);                                                \
			fails++;                                                             \
		}                                                                            \
	} while (0)

static FmhaCost
cost(FmhaPlanKind k, int d, int dv, int kv_shared, int qt, int bn, int stages, int e2f)
{
	FmhaCand c = {k, d, dv, 2, kv_shared, qt, bn, stages, e2f};
	FmhaCost o;

	sm100_fmha_cost(&c, &o);
	return o;
}

/* Today's hd512 plan: one 128-row Q tile, 32 keys, 2 stages, O split over
 * a pair. MMA 2·128·32·(512+256) = 6291456 FLOP, 768 clk; smem (128·512 +
 * 32·512 + 32·256)·2 = 180224 B, 1408 clk; ex2 128·33 = 4224, 264 clk;
 * issue 128·32·3.5 = 14336, 112 clk; L2 (32·512 + 32·256)·2 = 49152 B,
 * 768 clk. Useful 2·128·32·1024/2 = 4194304: 4194304/8192/1408 = 36.4 %. */
static void
test_osplit(void)
{
	FmhaCost o = cost(FP_OSPLIT, 512, 512, 0, 1, 32, 2, 0);

	NEAR(o.mma, 6291456, "o-split MMA FLOPs");
	NEAR(o.c_mma, 768, "o-split MMA clk");
	NEAR(o.smem, 180224, "o-split smem bytes");
	NEAR(o.c_smem, 1408, "o-split smem clk");
	NEAR(o.c_ex2, 264, "o-split ex2 clk");
	NEAR(o.c_issue, 112, "o-split issue clk");
	NEAR(o.c_l2, 768, "o-split L2 clk");
	NEAR(o.clk, 1408, "o-split tile clk");
	NEAR(sm100_fmha_peak(&o), 4194304.0 / 8192 / 1408, "o-split peak");
}

/* pair64 at hd512, 64 keys, 2 stages, K != V. Per CTA: MMA 2·64·64·1024 =
 * 8388608 FLOP, 1024 clk; ex2 64·64 + 128 = 4224, 264 clk; issue
 * 64·64·3.5 + 128·(4 + 32) = 18944, 148 clk; smem Q 64·512 + K 32·512 +
 * V 64·256 elements (131072 B) + the P hand-off 128·64·2 = 16384 B:
 * 147456 B, 1152 clk; L2 (32·512 + 64·256)·2 = 65536 B, 1024 clk. Bound
 * smem: 1024/1152 = 88.9 %. TMEM 2·32 + 256 = 320 columns; smem Q 65536 +
 * 2 stages 131072 + hand-off 8192 + 2048 = 206848 B. K=V loads the same
 * (the key half for S and the V half apart): L2 1024 clk. */
static void
test_pair64(void)
{
	FmhaCost o = cost(FP_PAIR64, 512, 512, 0, 1, 64, 2, 0);

	NEAR(o.mma, 8388608, "pair64 MMA FLOPs");
	NEAR(o.c_mma, 1024, "pair64 MMA clk");
	NEAR(o.ex2, 4224, "pair64 ex2");
	NEAR(o.c_issue, 148, "pair64 issue clk");
	NEAR(o.smem, 147456, "pair64 smem bytes");
	NEAR(o.c_smem, 1152, "pair64 smem clk");
	NEAR(o.c_l2, 1024, "pair64 L2 clk");
	NEAR(o.c_exposed, 0, "pair64 exposed (2 stages)");
	NEAR(o.clk, 1152, "pair64 tile clk");
	NEAR(sm100_fmha_peak(&o), 1024.0 / 1152, "pair64 peak");
	NEAR(o.tmem_cols, 320, "pair64 TMEM columns");
	NEAR(o.smem_bytes, 206848, "pair64 smem bytes held");
	o = cost(FP_PAIR64, 512, 512, 1, 1, 64, 2, 0);
	NEAR(o.c_l2, 1024, "pair64 K=V L2 clk");
	/* one stage of 128 keys: L2 (64·512 + 128·256)·2 = 131072 B, 2048
	 * clk, all exposed; MMA 2·64·128·1024 / 8192 = 2048 clk: 4096 clk,
	 * 50 % */
	o = cost(FP_PAIR64, 512, 512, 0, 1, 128, 1, 0);
	NEAR(o.c_exposed, 2048, "pair64 single-stage exposure");
	NEAR(o.clk, 4096, "pair64 single-stage tile clk");
	NEAR(sm100_fmha_peak(&o), 0.5, "pair64 single-stage peak");
}

/* m64 at hd512, 32 keys: MMA 2·64·32·1024 = 4194304 FLOP at half rate
 * (4096/clk): 1024 clk, the bound; the useful FLOPs are those at 8192:
 * 512/1024 = 50 %. hd64 (2 Q tiles, 64 keys, 2 of 8 exp2 by FMA): ex2
 * 256·(64·6/8 + 1) = 12544, 784 clk; issue 256·64·(3.5 + 2.25) = 94208,
 * 736 clk (with scalar f32 fma and add, 4.5 per score: 864 clk, 59 %);
 * MMA 2·256·64·128 = 4194304, 512 clk: 512/784 = 65.3 %. */
static void
test_m64_and_hd64(void)
{
	FmhaCost o = cost(FP_M64, 512, 512, 0, 1, 32, 2, 0);

	NEAR(o.c_mma, 1024, "m64 MMA clk");
	NEAR(sm100_fmha_peak(&o), 0.5, "m64 peak");
	o = cost(FP_CTA, 64, 64, 0, 2, 64, 4, 2);
	NEAR(o.c_ex2, 784, "hd64 ex2 clk");
	NEAR(o.c_issue, 736, "hd64 issue clk");
	NEAR(sm100_fmha_peak(&o), 512.0 / 784, "hd64 peak");
}

/* The best tile of each kind at hd512 within 232448 B of shared memory:
 * pair64 128 keys fits one stage only (50 %), 32 keys reach 512/832 =
 * 61.5 % (smem (64·512 + 16·512 + 32·256)·2 + 8192 = 106496 B, 832 clk),
 * 64 keys with 2 stages 88.9 % (3 stages need 272384 B). m64: 128 keys
 * need 2·128 + 40 = 296 registers, 64 keys one stage (exposed), 32 keys
 * two stages: 50 %. */
static void
test_best(void)
{
	FmhaCand c;
	FmhaCost o;

	if (!sm100_fmha_best(FP_PAIR64, 512, 512, 2, 0, 232448, &c, &o)) {
		printf("FAIL test_fmha_cost.c:%d: no pair64 plan\n", __LINE__);
		fails++;
	} else {
		NEAR(c.bn, 64, "pair64 best keys");
		NEAR(c.stages, 2, "pair64 best stages");
		NEAR(c.e2f, 0, "pair64 best exp2-fma");
		NEAR(sm100_fmha_peak(&o), 1024.0 / 1152, "pair64 best peak");
	}
	if (!sm100_fmha_best(FP_M64, 512, 512, 2, 0, 232448, &c, &o)) {
		printf("FAIL test_fmha_cost.c:%d: no m64 plan\n", __LINE__);
		fails++;
	} else {
		NEAR(c.bn, 32, "m64 best keys");
		NEAR(c.stages, 2, "m64 best stages");
		NEAR(sm100_fmha_peak(&o), 0.5, "m64 best peak");
	}
	if (sm100_fmha_best(FP_OSPLIT, 512, 512, 2, 0, 232448, &c, &o)) {
		printf("FAIL test_fmha_cost.c:%d: o-split tiles are the generator's to pick\n", __LINE__);
		fails++;
	}
	/* nothing fits 64 KiB: Q alone is 65536 B */
	if (sm100_fmha_best(FP_PAIR64, 512, 512, 2, 0, 65536, &c, &o)) {
		printf("FAIL test_fmha_cost.c:%d: pair64 fit 64 KiB\n", __LINE__);
		fails++;
	}
}

int
main(void)
{
	test_osplit();
	test_pair64();
	test_m64_and_hd64();
	test_best();
	if (fails) {
		printf("test_fmha_cost: %d failure(s)\n", fails);
		return 1;
	}
	printf("test_fmha_cost: ok\n");
	return 0;
}
