/* The decode family's cache formats (gen/decode_format.c) against byte
 * layouts derived by hand (docs/ABI.md, "Cache formats"): row bytes, the
 * RoPE and scale offsets, the scale entry a producer loads, page bytes and
 * a token's scale offset in its page; the errors for a head_dim_qk a
 * format does not store; and the numbers `kgen plan decode` prints (the
 * B200 bound on sm_100a, where each target dequantizes). */
#include <math.h>
#include <stdlib.h>

#include "gen/decode.h"
#include "gen/kgen.h"

#include "expect.h"

static void
test_layouts(void)
{
	/* fp8-v4: 448 E4M3 + 128 RoPE bytes = 576; page 64: 64·584 = 37376
	 * rounds up to 65·576 = 37440; token 5's scales after the 64 rows at
	 * 64·576 + 5·8 = 36904. fp8-v32: 512 + 16 + 128 = 656. fp8-token: 448
	 * + 16 (4 scale + 12 pad) + 128 = 592 (512: 656). bf16: 2·D. */
	static const struct {
		int format, d_qk;
		int d_nope, row, rope_at, scale_at, entry, tail, nscales, group;
		uint32_t page64, page1, scale5;
	} want[] = {
		{DEC_FMT_FP8_V4, 0, 448, 576, 448, -1, 8, 8, 7, 64, 37440, 1152, 36904},
		{DEC_FMT_FP8_V32, 0, 512, 656, 528, 512, 16, 0, 4, 128, 41984, 656, 5 * 656 + 512},
		{DEC_FMT_FP8_TOKEN, 512, 448, 592, 464, 448, 4, 0, 1, 448, 37888, 592, 5 * 592 + 448},
		{DEC_FMT_FP8_TOKEN, 576, 512, 656, 528, 512, 4, 0, 1, 512, 41984, 656, 5 * 656 + 512},
		{DEC_FMT_BF16, 512, 448, 1024, 896, -1, 0, 0, 0, 0, 65536, 1024, 0},
		{DEC_FMT_BF16, 576, 512, 1152, 1024, -1, 0, 0, 0, 0, 73728, 1152, 0},
	};
	KgErr err = {{0}};

	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		DecodeFormat f;
		EXPECT(decode_format_resolve(want[i].format, want[i].d_qk, &f, &err) == 0);
		EXPECT(f.d_nope == want[i].d_nope && f.d_rope == 64 && f.d_qk == f.d_nope + 64);
		EXPECT(f.row_bytes == want[i].row && f.rope_at == want[i].rope_at && f.scale_at == want[i].scale_at);
		EXPECT(f.scale_entry == want[i].entry && f.scale_bytes == want[i].tail);
		EXPECT(f.nscales == want[i].nscales && f.group == want[i].group);
		EXPECT(decode_page_bytes(&f, 64) == want[i].page64 && decode_page_bytes(&f, 1) == want[i].page1);
		if (f.nscales)
			EXPECT(decode_scale_offset(&f, 64, 5) == want[i].scale5);
		/* every row and page keeps 16-byte loads aligned */
		EXPECT(f.row_bytes % 16 == 0 && f.rope_at % 16 == 0 && decode_page_bytes(&f, 61) % 16 == 0);
	}
}

static void
test_errors(void)
{
	KgErr err = {{0}};
	DecodeFormat f;

	EXPECT(decode_format_resolve(DEC_FMT_FP8_V4, 576, &f, &err) < 0);
	EXPECT_MSG(err.msg, "--head-dim-qk=576", "fp8-v4", "512");
	EXPECT(decode_format_resolve(DEC_FMT_FP8_V32, 512, &f, &err) < 0);
	EXPECT_MSG(err.msg, "--head-dim-qk=512", "fp8-v32", "576");
	EXPECT(decode_format_resolve(DEC_FMT_BF16, 640, &f, &err) < 0);
	EXPECT_MSG(err.msg, "--head-dim-qk=640", "bf16", "512 or 576");
	EXPECT(decode_format_resolve(DEC_FMT_FP8_V32, 0, &f, &err) == 0 && f.d_qk == 576);
	EXPECT(decode_format_resolve(DEC_FMT_FP8_TOKEN, 0, &f, &err) == 0 && f.d_qk == 512);
}

/* The plan text of a decode configuration (NULL: kgen refused it). */
static char *
plan_of(const char *const *args, int n)
{
	char *text = NULL;
	KgErr err = {{0}};

	if (kgen_plan_text("decode", n, args, &text, &err)) {
		fprintf(stderr, "  kgen plan decode refuses: %s\n", err.msg);
		return NULL;
	}
	return text;
}

/* The number printed right after `key` in text; NAN if absent. */
static double
num_after(const char *text, const char *key)
{
	const char *at = text ? strstr(text, key) : NULL;
	return at ? strtod(at + strlen(key), NULL) : NAN;
}

/* The printed figure equals the hand-derived value to its printed digits. */
#define EXPECT_NEAR(got, want, tol) EXPECT(fabs((got) - (want)) <= (tol))

/* sm_100a's B200 bound (gen/sm100/decode.c, gen/sm100/rates.h: 8192 FLOP,
 * 128 smem bytes, 128 thread-instructions, 16 ex2 per clock and SM; 148
 * SMs at 1850 MHz, 8 TB/s), per key of a query row, derived by hand:
 * HBM clocks = bytes·148·1.85e9/8e12 = bytes·0.034225; per CTA, tensor
 * 2·128·(D + 256)/8192, shared memory (128·D/64 + D + 256 + D)·2/128,
 * issue (128·3.5 + D_nope/4·16)/128 (3.5 softmax instructions per score,
 * gen/sm100/fmha_cost.h), ex2 128/16; two O-column halves per
 * head block. Two stages: the CTA takes the largest. One stage (D 576):
 * gather max(D_nope/4·16/128, D·2/128) + the largest of tensor, softmax
 * issue 128·3.5/128 and the MMA's shared memory (128·D/64 + D + 256)·2/128.
 * TB/s = 148·1.85e9/clk·bytes; TFLOP/s = 148·1.85e9/clk·2·Hq·(D + 512). */
static void
test_plan_bound(void)
{
	static const struct {
		const char *args[16];
		double hbm, hbm_clk, tensor, smem, issue, clk, tbs, tfs;
		const char *bound;
	} want[] = {
		/* fp8-v4, 64 heads: 576 + 8 bytes; 24, 36, 17.5 (448/4 words) -> 2·36 */
		{{"--target", "sm_100a", "--heads-q", "64", "--topk", "512", "--page-size", "64", "--topk-extra", "128",
		  "--page-size-extra", "256", "--sink", "1"},
		 584, 19.99, 24.0, 36.0, 17.5, 72.0, 2.22, 498, "shared-memory-bound"},
		/* 128 heads: two head blocks, 4 CTAs per key */
		{{"--target", "sm_100a", "--heads-q", "128", "--topk", "1024", "--page-size", "64", "--topk-extra", "128",
		  "--page-size-extra", "256", "--sink", "1", "--topk-length", "1"},
		 584, 19.99, 24.0, 36.0, 17.5, 144.0, 1.11, 498, "shared-memory-bound"},
		/* fp8-token: 592 bytes, scales inline */
		{{"--target", "sm_100a", "--format", "fp8-token", "--addressing", "paged", "--heads-q", "64",
		  "--page-size", "64"},
		 592, 20.26, 24.0, 36.0, 17.5, 72.0, 2.25, 498, "shared-memory-bound"},
		/* fp8-v32 (D 576, one stage): 656 bytes; tensor 26, smem 40, issue
		 * (448 + 128·16)/128 = 19.5; gather max(16, 9) + max(26, 3.5, 31) = 47 -> 94 */
		{{"--target", "sm_100a", "--format", "fp8-v32", "--heads-q", "64", "--topk", "512", "--page-size", "64"},
		 656, 22.45, 26.0, 40.0, 19.5, 94.0, 1.91, 406, "serialized-gather-bound"},
	};

	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		int n = 0;
		while (n < 16 && want[i].args[n])
			n++;
		char *text = plan_of(want[i].args, n), *t = text ? strstr(text, "bound           B200") : NULL;
		EXPECT(t != NULL);
		EXPECT_NEAR(num_after(t, "per token of a query row: "), want[i].hbm, 0.5);
		EXPECT_NEAR(num_after(t, "HBM bytes ("), want[i].hbm_clk, 0.051);
		EXPECT_NEAR(num_after(t, "(tensor "), want[i].tensor, 0.051);
		EXPECT_NEAR(num_after(t, "shared memory "), want[i].smem, 0.051);
		EXPECT_NEAR(num_after(t, "issue "), want[i].issue, 0.051);
		EXPECT_NEAR(num_after(t, "ex2 "), 8.0, 0.051);
		EXPECT_NEAR(num_after(t, " clk) = "), want[i].clk, 0.051);
		EXPECT_NEAR(num_after(t, "at most "), want[i].tbs, 0.0051);
		EXPECT_NEAR(num_after(t, "unique KV ("), 100.0 * want[i].hbm_clk / want[i].clk, 0.5);
		EXPECT_NEAR(num_after(t, "of HBM), "), want[i].tfs, 0.5);
		EXPECT(t && strstr(t, want[i].bound));
		free(text);
	}
}

/* Where each target dequantizes, and the accuracy cost (docs/ABI.md,
 * "Cache formats"): sm_90a in the producer's registers, FP8 wgmma not
 * taken; sm_100a likewise, kind::f8f6f4 not taken; fp8-token's fp32
 * scale costs up to 2^-9 relative, fp8-v4's power of two nothing. */
static void
test_plan_dequant(void)
{
	const char *a90[] = {"--target", "sm_90a", "--format", "fp8-token", "--topk", "64"};
	const char *a100[] = {"--target", "sm_100a", "--topk", "64"};
	char *t = plan_of(a90, 6);

	EXPECT(t && strstr(t, "dequant         sm_90a: E4M3 -> f16 (cvt) -> f32 x scale -> bf16 in registers of the producer warpgroup"));
	EXPECT(t && strstr(t, "FP8 wgmma is not taken"));
	EXPECT(t && strstr(t, "accuracy        E4M3 times an fp32 scale rounds to BF16 (2^-9 relative per value"));
	EXPECT(t && !strstr(t, "bound           B200"));
	free(t);
	t = plan_of(a100, 4);
	EXPECT(t && strstr(t, "dequant         sm_100a: E4M3 -> f16 -> f32 x 2^(e-127) -> bf16"));
	EXPECT(t && strstr(t, "kind::f8f6f4 with FP8 Q") && strstr(t, "not taken"));
	EXPECT(t && strstr(t, "accuracy        E4M3 times a power of two is exact in BF16"));
	free(t);
}

int
main(void)
{
	test_layouts();
	test_errors();
	test_plan_bound();
	test_plan_dequant();
	if (failures) {
		fprintf(stderr, "test_decode: %d failure%s\n", failures, failures == 1 ? "" : "s");
		return 1;
	}
	printf("decode: all passed\n");
	return 0;
}
