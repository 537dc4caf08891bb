/* The launch-time estimate (gen/estimate.h, docs/estimate.md): the overlap
 * law, CTAs placed in launch order, and `kgen plan`'s figures for one fmha
 * and one gemm plan against values derived by hand in the comments from
 * the rates in gen/sm90/rates.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/estimate.h"
#include "gen/kgen.h"

static int fails;

#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fails++;                                                         \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                      \
			printf(__VA_ARGS__);                                             \
			printf("\n");                                                    \
		}                                                                        \
	} while (0)

static void
test_overlap(void)
{
	CHECK(fabs(est_overlap(3, 4, 2) - 5) < 1e-12, "p=2 of 3,4: %g, want 5", est_overlap(3, 4, 2));
	CHECK(fabs(est_overlap(3, 4, 1) - 7) < 1e-12, "p=1 is the sum: %g", est_overlap(3, 4, 1));
	CHECK(est_overlap(9, 0, 1.8) == 9, "an idle unit adds nothing: %g", est_overlap(9, 0, 1.8));
	/* equal units at p = 1.8: 2^(1/1.8) = 1.4697 times one */
	CHECK(fabs(est_overlap(100, 100, 1.8) - 146.97) < 0.01, "p=1.8 of equals: %g",
	      est_overlap(100, 100, 1.8));
}

static const double cta_list[] = {5, 3, 3, 1};

static double
list_clk(uint64_t i, void *arg, double *tiles)
{
	(void)arg;
	*tiles = 1;
	return cta_list[i];
}

static void
test_schedule(void)
{
	EstGpu gpu = {"two SMs", 2, 1000, 1, 1000};
	Estimate e;

	/* 5 -> SM0, 3 -> SM1, 3 -> SM1 (frees at 3, ends 6), 1 -> SM0 (5, ends
	 * 6): the last SM is done at 6 clk = 0.006 us, + 1 us launch */
	est_init(&e, &gpu);
	est_schedule(&e, 4, list_clk, NULL);
	CHECK(e.makespan_clk == 6, "makespan %g, want 6", e.makespan_clk);
	CHECK(e.busy_clk == 6, "busy %g, want 12/2", e.busy_clk);
	CHECK(fabs(e.us - 1.006) < 1e-9, "us %g, want 1.006", e.us);
	CHECK(e.ctas == 4 && e.tiles == 4 && e.tiles_max == 1, "counts %llu %g %g",
	      (unsigned long long)e.ctas, e.tiles, e.tiles_max);
	/* the HBM floor: 1 MB at 1000 GB/s is 1 us, above 0.006 */
	e.hbm_bytes = 1e6;
	est_schedule(&e, 4, list_clk, NULL);
	CHECK(fabs(e.us - 2.0) < 1e-9, "us with the HBM floor %g, want 2", e.us);
}

/* The number after `key` on the plan's estimate lines. */
static double
field(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	return p ? strtod(p + strlen(key), NULL) : -1;
}

static char *
plan(const char *family, const char *const *args, int n)
{
	char *text = NULL;
	KgErr err = {{0}};

	if (kgen_plan_text(family, n, args, &text, &err) < 0) {
		CHECK(0, "kgen plan %s: %s", family, err.msg);
		return NULL;
	}
	return text;
}

static void
test_fmha(void)
{
	static const char *const args[] = {"--target", "sm_90a", "--head-dim", "128", "--mask", "causal",
	                                   "--batch", "1", "--seqlen-q", "256", "--seqlen-k", "256"};
	char *t = plan("fmha", args, 12);

	if (!t)
		return;
	/* m128n176: two warpgroups of 64 rows, 176 keys, D = Dv = 128, bf16.
	 * Per warpgroup and tile: MMA 2*64*176*256/4096 = 1408 clk; ex2
	 * 64*177/16 = 708 clk; issue (64*176*4.5 + 128*(64+90))/128 = 550,
	 * so the softmax takes 708. The ring: (2816^1.8 + 1416^1.8)^(1/1.8)
	 * = 2816 * 1.15202 = 3244.1 clk; smem 2*(240*128 + 176*128)*2/128 =
	 * 1664; K/V 176*256*2/64 = 1408; chain 1408 + 708 = 2116. Masked:
	 * 2*64*176*3/128 = 528. Fill 500 + 1500 + (32768 + 90112)/64 + 704
	 * = 4624; drain 704 + 260 + 2*64*128*2/16 = 3012. Grid 2 row blocks
	 * x 16 heads = 32 CTAs on 132 SMs: the longest CTA (rows 128..255)
	 * visits both tiles, both masked: 4624 + 3012 + 2*3244.1 + 2*528 =
	 * 15180 clk; the other 1 tile: 48 tiles. 15180/1650 + 4 = 13.2 us. */
	CHECK(fabs(field(t, "MMA ring with softmax ") - 3244) < 0.6, "ring %g", field(t, "MMA ring with softmax "));
	CHECK(field(t, ", shared memory ") == 1664, "smem %g", field(t, ", shared memory "));
	CHECK(field(t, "K/V from L2 ") == 1408, "K/V %g", field(t, "K/V from L2 "));
	CHECK(field(t, "one warpgroup's chain ") == 2116, "chain %g", field(t, "one warpgroup's chain "));
	CHECK(field(t, "a masked tile adds ") == 528, "masked %g", field(t, "a masked tile adds "));
	CHECK(field(t, "fill ") == 4624, "fill %g", field(t, "fill "));
	CHECK(field(t, "drain ") == 3012, "drain %g", field(t, "drain "));
	CHECK(field(t, "launch          ") == 32, "CTAs %g", field(t, "launch          "));
	CHECK(field(t, "CTAs, ") == 48, "tiles %g", field(t, "CTAs, "));
	CHECK(fabs(field(t, "last SM done at ") - 15180) <= 1, "makespan %g", field(t, "last SM done at "));
	CHECK(fabs(field(t, "predicted       ") - 13.2) < 0.05, "predicted %g us", field(t, "predicted       "));
	free(t);
}

/* head-dim 512, split O (docs/estimate.md, "Split O with S ahead", "K/V
 * multicast"): separate K and V with and without multicast, and K=V with
 * the hand-off first and with S ahead. */
static void
test_fmha_split(void)
{
	static const char *const mc[] = {"--target", "sm_90a", "--head-dim", "512", "--heads-q", "8",
	                                 "--heads-kv", "8", "--batch", "1", "--seqlen-q", "256",
	                                 "--seqlen-k", "256", "--kv-multicast", "1"};
	static const char *const one[] = {"--target", "sm_90a", "--head-dim", "512", "--heads-q", "8",
	                                  "--heads-kv", "8", "--batch", "1", "--seqlen-q", "256",
	                                  "--seqlen-k", "256"};
	static const char *const kv[] = {"--target", "sm_90a", "--head-dim", "512", "--heads-q", "8",
	                                 "--heads-kv", "1", "--kv-shared", "1", "--batch", "1",
	                                 "--seqlen-q", "256", "--seqlen-k", "256"};
	static const char *const kv_sa[] = {"--target", "sm_90a", "--head-dim", "512", "--heads-q", "8",
	                                    "--heads-kv", "1", "--kv-shared", "1", "--batch", "1",
	                                    "--seqlen-q", "256", "--seqlen-k", "256", "--s-ahead", "1"};
	static const struct {
		const char *const *args;
		int n;
	} tiled[] = {{mc, 16}, {one, 14}};
	char *t;

	/* Per 64-key tile, with K/V multicast and without (same figures):
	 * S = P·V = 2*64*64*512/4096 = 1024 clk, tensor 2048; smem
	 * ((64+64)*512 + 2*64*64 + 64*512)*2/128 = 1664; K and V 131072 bytes
	 * land whole in each CTA, multicast or not: 2048 (the H100 ran the
	 * multicast kernels no faster). The chain: ex2 64*65/16 = 260 > issue
	 * 64*64*4.5/128 = 144, + O rescale 128 + loop 90 + hand-off 400 = 878.
	 * One K stage: the next K's load 1500 + 65536/64 = 2524 after S, 878 +
	 * 1024 of it covered: 1500 serial, tile 3548 (H100: 3568 unclustered).
	 * Fill 500 + 1500 + (65536 + 65536)/64 + 2048 = 6096; drain 1024 + 260
	 * + 64*512*2/16 = 5380. 32 CTAs (multicast: 2 clusters x 2 CTAs x 8
	 * heads), each 4 tiles (the first masked, +96): 6096 + 5380 + 4*3548 +
	 * 96 clk. */
	for (size_t i = 0; i < sizeof tiled / sizeof tiled[0]; i++) {
		t = plan("fmha", tiled[i].args, tiled[i].n);
		if (!t)
			return;
		CHECK(field(t, "tensor core ") == 2048, "tensor %g", field(t, "tensor core "));
		CHECK(field(t, ", shared memory ") == 1664, "smem %g", field(t, ", shared memory "));
		CHECK(field(t, "K/V from L2 ") == 2048, "K/V %g", field(t, "K/V from L2 "));
		CHECK(field(t, "bound: tensor core; ") == 3548, "tile %g", field(t, "bound: tensor core; "));
		CHECK(field(t, "clk per tile (") == 1500, "serial %g", field(t, "clk per tile ("));
		CHECK(field(t, "fill ") == 6096, "fill %g", field(t, "fill "));
		CHECK(field(t, "drain ") == 5380, "drain %g", field(t, "drain "));
		CHECK(field(t, "launch          ") == 32, "CTAs %g", field(t, "launch          "));
		CHECK(fabs(field(t, "last SM done at ") - (6096 + 5380 + 4 * 3548 + 96)) <= 1, "makespan %g",
		      field(t, "last SM done at "));
		free(t);
	}
	t = plan("fmha", kv, 16);
	if (!t)
		return;
	/* K=V in two stages: no load waits, the chain follows the MMAs */
	CHECK(field(t, "K/V from L2 ") == 1024, "K=V %g", field(t, "K/V from L2 "));
	CHECK(field(t, "bound: tensor core; ") == 2926, "K=V tile %g", field(t, "bound: tensor core; "));
	free(t);
	t = plan("fmha", kv_sa, 18);
	if (!t)
		return;
	/* S ahead: S completes with P·V (2048), then the chain less the
	 * rescale (750) and P·V's completion (260): 3058 */
	CHECK(field(t, "bound: scores warpgroup cycle; ") == 3058, "S ahead %g",
	      field(t, "bound: scores warpgroup cycle; "));
	free(t);
}

static void
test_gemm(void)
{
	static const char *const args[] = {"--target", "sm_90a"};
	char *t = plan("gemm", args, 2);

	if (!t)
		return;
	/* 128x256x64 bf16, 4 stages, SW128, two consumer warpgroups. Per K
	 * tile: MMA 2*128*256*64/4096 = 1024 clk; operand reads 2*(64+256)*
	 * 64*2 = 81920 bytes at 128/clk = 640; together (1024^3 + 640^3)^(1/3)
	 * = 1101.34; A/B (128+256)*64*2/64 = 768. Fill 500 + 1500 + 768 =
	 * 2768; drain 260 + 128*256*2/16 = 4356. 64 x 32 = 2048 CTAs of 128
	 * K tiles on 132 SMs: 16 rounds (15 full and 68 CTAs) of 2768 + 4356
	 * + 128*1101.344 = 148096.1 clk -> 2369537 clk; /1650 + 4 us =
	 * 1440.1 us. */
	CHECK(field(t, "tensor core with smem reads ") == 1101, "tile %g", field(t, "tensor core with smem reads "));
	CHECK(field(t, "A/B from L2 ") == 768, "A/B %g", field(t, "A/B from L2 "));
	CHECK(field(t, "fill ") == 2768, "fill %g", field(t, "fill "));
	CHECK(field(t, "drain ") == 4356, "drain %g", field(t, "drain "));
	CHECK(field(t, "launch          ") == 2048, "CTAs %g", field(t, "launch          "));
	CHECK(fabs(field(t, "last SM done at ") - 2369537) <= 1, "makespan %g", field(t, "last SM done at "));
	CHECK(fabs(field(t, "predicted       ") - 1440.1) < 0.05, "predicted %g us", field(t, "predicted       "));
	free(t);
}

/* The sm_100a bound (gen/sm100/estimate.c, rates from gen/sm100/rates.h):
 * NVFP4 128x256, tile-k 256, 4 stages at the default 8192^3. Per K stage:
 * MMA 2*128*256*256 / (4*8192) = 512 clk (FP4 at four times bf16); operand
 * bytes (128+256)*256/2 = 49152 at 128/clk = 384. Drain 128*256*2/128 =
 * 512, no fill. 64 x 32 = 2048 CTAs, one per SM (222288 + 1024 bytes of
 * the 233472, 512 TMEM columns), of 32 stages: 16896 clk each, 14 rounds
 * on 148 SMs = 236544 clk; / 1850 MHz = 127.86 us. MXFP8 at tile-k 128
 * takes the same 512 clk per stage (FP8 at twice bf16) over 64 stages. */
static void
test_gemm_b200(void)
{
	static const char *const nv[] = {"--target", "sm_100a", "--dtype", "e2m1", "--scale", "nv16",
	                                 "--tile-k", "256", "--tile-n", "256", "--stages", "4"};
	static const char *const mx[] = {"--target", "sm_100a", "--dtype", "e4m3", "--scale", "mx32",
	                                 "--tile-k", "128", "--tile-n", "256", "--stages", "4"};
	char *t = plan("gemm", nv, 12);

	if (!t)
		return;
	CHECK(field(t, "tensor core ") == 512, "fp4 tile %g", field(t, "tensor core "));
	CHECK(field(t, "smem reads by the MMA ") == 384, "fp4 smem %g", field(t, "smem reads by the MMA "));
	CHECK(field(t, "drain ") == 512, "drain %g", field(t, "drain "));
	CHECK(field(t, "last SM done at ") == 236544, "makespan %g", field(t, "last SM done at "));
	CHECK(fabs(field(t, "predicted       ") - 127.9) < 0.05, "predicted %g us", field(t, "predicted       "));
	free(t);
	if (!(t = plan("gemm", mx, 12)))
		return;
	CHECK(field(t, "tensor core ") == 512, "fp8 tile %g", field(t, "tensor core "));
	CHECK(field(t, "last SM done at ") == 2 * 236544 - 14 * 512, "fp8 makespan %g", field(t, "last SM done at "));
	free(t);
}

static void
test_bad_shape(void)
{
	static const char *const zero[] = {"--target", "sm_90a", "--batch", "0"};
	static const char *const junk[] = {"--m", "12x"};
	static const char *const huge[] = {"--m", "1000000", "--n", "1000000"};
	char *text = NULL;
	KgErr err = {{0}};

	CHECK(kgen_plan_text("fmha", 4, zero, &text, &err) < 0 && strstr(err.msg, "--batch=0"),
	      "batch 0: %s", err.msg);
	memset(&err, 0, sizeof err);
	CHECK(kgen_plan_text("gemm", 2, junk, &text, &err) < 0 && strstr(err.msg, "--m"),
	      "m 12x: %s", err.msg);
	memset(&err, 0, sizeof err);
	CHECK(kgen_plan_text("gemm", 4, huge, &text, &err) < 0 && strstr(err.msg, "at most 4194304"),
	      "1e6 x 1e6: %s", err.msg);
}

int
main(void)
{
	test_overlap();
	test_schedule();
	test_fmha();
	test_fmha_split();
	test_gemm();
	test_gemm_b200();
	test_bad_shape();
	if (fails)
		printf("%d failure(s)\n", fails);
	else
		printf("estimate: all passed\n");
	return fails != 0;
}
