/* Unit test of the references themselves: the half-precision conversions
 * (exhaustive round trips, the bit path against the float64 path on random
 * and half-way values, the named corner cases), the random generator, the
 * gemm reference against a naive triple loop, and the attention reference
 * against hand-computed cases and a naive loop over every key with the
 * mask written out as a predicate. No GPU needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_ref.h"
#include "fmha_ref.h"
#include "gemm_ref.h"
#include "indexer_ref.h"
#include "num.h"

static int failures;

#define EXPECT(cond, ...)                                                   \
	do {                                                                \
		if (!(cond)) {                                              \
			failures++;                                         \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);     \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
		}                                                           \
	} while (0)

static float
f32_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Columns: name, f32 -> half, f64 -> half, half -> f32, exponent mask. */
static const struct {
	const char *name;
	uint16_t (*from_f32)(float);
	uint16_t (*from_f64)(double);
	float (*to_f32)(uint16_t);
	uint16_t exp_mask;
} halfs[] = {
	{"bf16", num_f32_to_bf16, num_f64_to_bf16, num_bf16_to_f32, 0x7f80},
	{"fp16", num_f32_to_fp16, num_f64_to_fp16, num_fp16_to_f32, 0x7c00},
};

static int
is_nan16(uint16_t h, uint16_t exp_mask)
{
	return (h & exp_mask) == exp_mask && (h & (uint16_t)~(exp_mask | 0x8000u)) != 0;
}

static void
test_round_trip(int t)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = halfs[t].to_f32((uint16_t)h);
		uint16_t back = halfs[t].from_f32(f);
		if (is_nan16((uint16_t)h, halfs[t].exp_mask))
			EXPECT(isnan(f) && is_nan16(back, halfs[t].exp_mask),
			       "%s 0x%04x: NaN lost", halfs[t].name, h);
		else
			EXPECT(back == h, "%s 0x%04x -> %a -> 0x%04x", halfs[t].name, h, f, back);
	}
}

/* The midpoint of two neighbours (and a hair either side) must go to the
 * even one, and to the nearer one respectively. */
static void
test_midpoints(int t)
{
	for (uint32_t h = 0; h < 0x8000; h++) {
		uint16_t lo = (uint16_t)h, hi = (uint16_t)(h + 1);
		double a = halfs[t].to_f32(lo), b = halfs[t].to_f32(hi);
		if (isnan(a) || isnan(b) || isinf(a))
			continue;
		if (isinf(b)) /* past the largest finite: midpoint vs Inf */
			b = 2 * a - halfs[t].to_f32((uint16_t)(h - 1));
		double mid = (a + b) / 2;
		uint16_t even = (lo & 1) ? hi : lo;
		if (isinf(halfs[t].to_f32(hi)) && even == hi)
			even = hi;
		EXPECT(halfs[t].from_f64(mid) == even, "%s mid(0x%04x) = %a -> 0x%04x",
		       halfs[t].name, h, mid, halfs[t].from_f64(mid));
		if ((float)mid == mid)
			EXPECT(halfs[t].from_f32((float)mid) == even, "%s f32 mid(0x%04x)",
			       halfs[t].name, h);
		EXPECT(halfs[t].from_f64(nextafter(mid, 0)) == lo, "%s below mid 0x%04x",
		       halfs[t].name, h);
		EXPECT(halfs[t].from_f64(nextafter(mid, INFINITY)) == hi, "%s above mid 0x%04x",
		       halfs[t].name, h);
	}
}

/* Random float bit patterns: the bit path must agree with the f64 path. */
static void
test_random_floats(int t, NumRng *r)
{
	for (int i = 0; i < 2000000; i++) {
		uint32_t u = (uint32_t)num_rng_u64(r);
		if (t == 1 && (i & 1)) /* half of them near fp16's range */
			u = (u & 0x807fffffu) | ((uint32_t)(95 + num_rng_below(r, 50)) << 23);
		float f = f32_of(u);
		if (isnan(f))
			continue;
		uint16_t a = halfs[t].from_f32(f), b = halfs[t].from_f64(f);
		EXPECT(a == b, "%s %a: f32 path 0x%04x, f64 path 0x%04x", halfs[t].name, f, a, b);
		if (a != b)
			return;
	}
}

static void
test_corners(void)
{
	EXPECT(num_f32_to_fp16(65520.0f) == 0x7c00, "fp16(65520) is Inf");
	EXPECT(num_f32_to_fp16(65519.996f) == 0x7bff, "fp16(65519.996) is 65504");
	EXPECT(num_f32_to_fp16(-65536.0f) == 0xfc00, "fp16(-65536) is -Inf");
	EXPECT(num_f32_to_fp16(0x1p-25f) == 0x0000, "fp16(2^-25) ties to 0");
	EXPECT(num_f32_to_fp16(0x1.000002p-25f) == 0x0001, "fp16(2^-25+) is 2^-24");
	EXPECT(num_f32_to_fp16(0x1.8p-24f) == 0x0002, "fp16(1.5*2^-24) ties to 2");
	EXPECT(num_f32_to_fp16(-0.0f) == 0x8000, "fp16(-0)");
	EXPECT(num_f32_to_fp16(0x1p-14f) == 0x0400, "fp16 smallest normal");
	EXPECT(num_f32_to_fp16(0x1.ff8p-15f) == 0x03ff, "fp16 largest subnormal");
	EXPECT(num_f32_to_fp16(0x1.ffcp-15f) == 0x0400, "fp16 subnormal ties up to normal");
	EXPECT(is_nan16(num_f32_to_fp16(NAN), 0x7c00), "fp16(NaN)");
	EXPECT(num_f32_to_fp16(INFINITY) == 0x7c00, "fp16(Inf)");
	EXPECT(num_f32_to_bf16(INFINITY) == 0x7f80, "bf16(Inf)");
	EXPECT(num_f32_to_bf16(0x1.fffffep127f) == 0x7f80, "bf16(FLT_MAX) is Inf");
	EXPECT(num_f32_to_bf16(0x1.fep127f) == 0x7f7f, "bf16 largest");
	EXPECT(is_nan16(num_f32_to_bf16(f32_of(0x7f800001u)), 0x7f80), "bf16(sNaN) stays NaN");
	EXPECT(num_f32_to_bf16(f32_of(0x00010000u)) == 0x0001, "bf16 subnormal");
	EXPECT(num_f32_to_bf16(1.00390625f) == 0x3f80, "bf16(1+2^-8) ties to 1");
	EXPECT(num_f32_to_bf16(1.01171875f) == 0x3f82, "bf16(1+3*2^-8) ties to even up");
	EXPECT(num_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40) == 0x3f81,
	       "f64 -> bf16 rounds once (f32 first would tie to 1)");
}

static void
test_rng(void)
{
	NumRng a, b;
	num_rng_seed(&a, 42);
	num_rng_seed(&b, 42);
	for (int i = 0; i < 100; i++)
		EXPECT(num_rng_u64(&a) == num_rng_u64(&b), "same seed, same stream");
	double s = 0, s2 = 0;
	int n = 1000000;
	for (int i = 0; i < n; i++) {
		double x = num_rng_normal(&a);
		s += x;
		s2 += x * x;
	}
	EXPECT(fabs(s / n) < 0.01, "normal mean %g", s / n);
	EXPECT(fabs(s2 / n - 1) < 0.01, "normal variance %g", s2 / n);
	for (int i = 0; i < 1000; i++)
		EXPECT(num_rng_below(&a, 7) < 7, "below");
	EXPECT(num_mix(1, 2, 3, 4) != num_mix(1, 2, 3, 5), "mix");
}

static void
test_gemm(NumType t, NumRng *r)
{
	enum { M = 37, N = 29, K = 24 };
	uint16_t A[M * K], B[N * K];
	double C[M * N], R[3 * N];
	uint32_t rows[3] = {36, 0, 17};

	for (int i = 0; i < M * K; i++)
		num_store(t, A, i, num_rng_normal(r));
	for (int i = 0; i < N * K; i++)
		num_store(t, B, i, num_rng_normal(r));
	gemm_ref(t, A, B, M, N, K, C);
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++) {
			long double acc = 0;
			for (int k = 0; k < K; k++)
				acc += (long double)num_load(t, A, m * K + k) * num_load(t, B, n * K + k);
			EXPECT(fabs(C[m * N + n] - (double)acc) <= 1e-12 * (1 + fabsl(acc)),
			       "%s gemm_ref C[%d][%d] = %g, want %Lg", num_type_name(t), m, n,
			       C[m * N + n], acc);
		}
	gemm_ref_rows(t, A, B, N, K, rows, 3, R);
	for (int i = 0; i < 3; i++)
		EXPECT(memcmp(R + i * N, C + rows[i] * N, N * sizeof(double)) == 0,
		       "gemm_ref_rows row %u", rows[i]);
}

/* ---- fmha ---------------------------------------------------------------- */

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * (1.0 + fabs(b)))

/* Stores doubles (exact in bf16 where the tests need it) into a bf16 array. */
static void
put(uint16_t *dst, const double *v, int n)
{
	for (int i = 0; i < n; i++)
		num_store(NUM_BF16, dst, (size_t)i, v[i]);
}

static FmhaProblem
problem(const void *q, const void *k, const void *v, const int32_t *cu_q, const int32_t *cu_k,
        uint32_t batch, uint32_t hq, uint32_t hkv, uint32_t d, uint32_t dv, FmhaMask mask,
        double scale)
{
	FmhaProblem p = {
		.type = NUM_BF16, .q = q, .k = k, .v = v, .cu_q = cu_q, .cu_k = cu_k,
		.batch = batch, .hq = hq, .hkv = hkv, .d = d, .dv = dv, .mask = mask,
		.window_left = -1, .window_right = -1, .scale = scale,
	};
	return p;
}

/* One key: the softmax is 1, O is that key's V row, LSE its score. */
static void
test_fmha_one_key(void)
{
	static const double qv[4] = {1, -2, 0.5, 3}, kv[4] = {2, 1, -4, 0.25};
	static const double vv[3] = {0.75, -1.5, 8};
	static const int32_t cu[2] = {0, 1};
	uint16_t q[4], k[4], v[3];
	double o[3], lse;

	put(q, qv, 4);
	put(k, kv, 4);
	put(v, vv, 3);
	FmhaProblem p = problem(q, k, v, cu, cu, 1, 1, 1, 4, 3, FMHA_MASK_NONE, 0.5);
	EXPECT(fmha_ref(&p, o, &lse) == 0, "fmha one key: rc");
	for (int c = 0; c < 3; c++)
		EXPECT(o[c] == vv[c], "fmha one key: O[%d] = %g, want %g", c, o[c], vv[c]);
	/* q·k = 2 - 2 - 2 + 0.75 = -1.25; times 0.5 */
	EXPECT(NEAR(lse, -0.625), "fmha one key: LSE %.17g, want -0.625", lse);
}

/* Two keys with the same K: equal weights, O the mean of the V rows, LSE
 * the score plus log 2. */
static void
test_fmha_equal_keys(void)
{
	static const double qv[2] = {1, 2}, kv[4] = {3, -1, 3, -1};
	static const double vv[4] = {1, 10, 3, -2};
	static const int32_t cq[2] = {0, 1}, ck[2] = {0, 2};
	uint16_t q[2], k[4], v[4];
	double o[2], lse;

	put(q, qv, 2);
	put(k, kv, 4);
	put(v, vv, 4);
	FmhaProblem p = problem(q, k, v, cq, ck, 1, 1, 1, 2, 2, FMHA_MASK_NONE, 1.0);
	EXPECT(fmha_ref(&p, o, &lse) == 0, "fmha equal keys: rc");
	EXPECT(NEAR(o[0], 2.0) && NEAR(o[1], 4.0), "fmha equal keys: O = (%g, %g), want (2, 4)",
	       o[0], o[1]);
	EXPECT(NEAR(lse, 1.0 + log(2.0)), "fmha equal keys: LSE %.17g, want 1 + log 2", lse);
}

/* Causal, bottom-right: with sq = sk row 0 sees key 0 only and the last
 * row all; with sq = 4 > sk = 2 rows 0 and 1 see nothing (O = 0, LSE =
 * -inf), row 2 key 0, row 3 both. */
static void
test_fmha_causal(void)
{
	static const int32_t c3[2] = {0, 3}, c4[2] = {0, 4}, c2[2] = {0, 2};
	double qv[4], kv[3], vv[3];
	uint16_t q[4], k[3], v[3];
	double o[4], lse[4];
	uint32_t lo, hi;

	for (int i = 0; i < 4; i++)
		qv[i] = 0.5 * (i + 1);
	for (int i = 0; i < 3; i++) {
		kv[i] = 1.0 - i;
		vv[i] = 4.0 * (i + 1);
	}
	put(q, qv, 4);
	put(k, kv, 3);
	put(v, vv, 3);
	FmhaProblem p = problem(q, k, v, c3, c3, 1, 1, 1, 1, 1, FMHA_MASK_CAUSAL, 1.0);
	EXPECT(fmha_ref(&p, o, lse) == 0, "fmha causal: rc");
	EXPECT(o[0] == vv[0] && NEAR(lse[0], qv[0] * kv[0]), "fmha causal row 0: O %g LSE %g",
	       o[0], lse[0]);
	double s[3], sum = 0, acc = 0;
	for (int j = 0; j < 3; j++)
		s[j] = qv[2] * kv[j];
	for (int j = 0; j < 3; j++)
		sum += exp(s[j]), acc += exp(s[j]) * vv[j];
	EXPECT(NEAR(o[2], acc / sum) && NEAR(lse[2], log(sum)), "fmha causal row 2: O %g LSE %g",
	       o[2], lse[2]);
	fmha_ref_visible(&p, 1, 3, 3, &lo, &hi);
	EXPECT(lo == 0 && hi == 2, "fmha causal visible(1, 3, 3) = [%u, %u)", lo, hi);

	p = problem(q, k, v, c4, c2, 1, 1, 1, 1, 1, FMHA_MASK_CAUSAL, 1.0);
	EXPECT(fmha_ref(&p, o, lse) == 0, "fmha causal sq > sk: rc");
	for (int i = 0; i < 2; i++)
		EXPECT(o[i] == 0.0 && isinf(lse[i]) && lse[i] < 0,
		       "fmha causal sq > sk row %d: O %g LSE %g, want 0 and -inf", i, o[i], lse[i]);
	EXPECT(o[2] == vv[0] && NEAR(lse[2], qv[2] * kv[0]), "fmha causal sq > sk row 2: O %g",
	       o[2]);
	EXPECT(NEAR(lse[3], log(exp(qv[3] * kv[0]) + exp(qv[3] * kv[1]))),
	       "fmha causal sq > sk row 3: LSE %g", lse[3]);
	/* A sliding window on top: left 0 keeps the diagonal key only. */
	p.window_left = 0;
	fmha_ref_visible(&p, 3, 4, 2, &lo, &hi);
	EXPECT(lo == 1 && hi == 2, "fmha window left 0: [%u, %u), want [1, 2)", lo, hi);
	fmha_ref_visible(&p, 0, 4, 2, &lo, &hi);
	EXPECT(lo == hi, "fmha window: row 0 of 4 over 2 keys sees nothing");
}

/* GQA: 4 query heads over 2 KV heads; head h reads KV head h / 2. One key
 * whose V is 1s in KV head 0 and 2s in KV head 1. Also the fmha_ref_rows
 * path and the sequence search. */
static void
test_fmha_gqa_varlen(void)
{
	/* two sequences: queries {0,1} and {2,3,4}; keys {0,1,2} and {3} */
	static const int32_t cq[3] = {0, 2, 5}, ck[3] = {0, 3, 4};
	enum { TQ = 5, TK = 4, HQ = 4, HKV = 2, D = 2 };
	double qv[TQ * HQ * D], kv[TK * HKV * D], vv[TK * HKV * D];
	uint16_t q[TQ * HQ * D], k[TK * HKV * D], v[TK * HKV * D];
	double o[TQ * HQ * D], lse[HQ * TQ], o2[D], l2;

	for (int i = 0; i < TQ * HQ * D; i++)
		qv[i] = (double)((i * 7) % 5) - 2.0;
	for (int r = 0; r < TK; r++)
		for (int g = 0; g < HKV; g++)
			for (int c = 0; c < D; c++) {
				kv[(r * HKV + g) * D + c] = (double)((r + c + g) % 3) - 1.0;
				vv[(r * HKV + g) * D + c] = 10.0 * r + g + 1;
			}
	put(q, qv, TQ * HQ * D);
	put(k, kv, TK * HKV * D);
	put(v, vv, TK * HKV * D);
	FmhaProblem p = problem(q, k, v, cq, ck, 2, HQ, HKV, D, D, FMHA_MASK_NONE, 0.25);
	EXPECT(fmha_ref(&p, o, lse) == 0, "fmha gqa: rc");
	EXPECT(fmha_ref_seq_of(&p, 1) == 0 && fmha_ref_seq_of(&p, 2) == 1 &&
	       fmha_ref_seq_of(&p, 4) == 1, "fmha_ref_seq_of");
	/* sequence 1 has one key (global row 3): O = V[3][kv head] exactly */
	for (int r = 2; r < 5; r++)
		for (int h = 0; h < HQ; h++) {
			int g = h / 2;
			double score = 0;
			for (int c = 0; c < D; c++)
				score += qv[(r * HQ + h) * D + c] * kv[(3 * HKV + g) * D + c];
			EXPECT(o[(r * HQ + h) * D] == 31.0 + g && o[(r * HQ + h) * D + 1] == 31.0 + g,
			       "fmha gqa row %d head %d: O[0] %g, want %g", r, h,
			       o[(r * HQ + h) * D], 31.0 + g);
			EXPECT(NEAR(lse[h * TQ + r], 0.25 * score), "fmha gqa LSE[%d][%d]", h, r);
		}
	/* sequence 0 averages keys 0..2 only: V between 1 and 22 */
	for (int h = 0; h < HQ; h++)
		EXPECT(o[h * D] > 1.0 && o[h * D] < 23.0, "fmha varlen: row 0 head %d O %g", h,
		       o[h * D]);
	FmhaRow rows[1] = {{3, 1}};
	EXPECT(fmha_ref_rows(&p, rows, 1, o2, &l2) == 0, "fmha_ref_rows: rc");
	EXPECT(memcmp(o2, o + (1 * HQ + 3) * D, sizeof o2) == 0 && l2 == lse[3 * TQ + 1],
	       "fmha_ref_rows matches fmha_ref");
}

/* One row the naive way: every key of the sequence tested against the mask
 * as docs/ABI.md words it, long double sums, no maximum subtracted (the
 * scores here are small). Returns the number of visible keys. */
static int
naive_row(const FmhaProblem *p, uint32_t b, uint32_t i, uint32_t h, double *o, double *lse)
{
	int sq = p->cu_q[b + 1] - p->cu_q[b], sk = p->cu_k[b + 1] - p->cu_k[b];
	size_t row = (size_t)p->cu_q[b] + i;
	uint32_t g = h / (p->hq / p->hkv);
	long double sum = 0, acc[64] = {0};
	long long diag = (long long)i + sk - sq;
	int n = 0;

	for (int j = 0; j < sk; j++) {
		size_t key = (size_t)p->cu_k[b] + (size_t)j;
		int vis = (p->mask != FMHA_MASK_CAUSAL || j <= diag) &&
		          (p->window_left < 0 || j >= diag - p->window_left) &&
		          (p->window_right < 0 || j <= diag + p->window_right);
		long double dot = 0;
		if (!vis)
			continue;
		for (uint32_t c = 0; c < p->d; c++)
			dot += (long double)num_load(p->type, p->q, (row * p->hq + h) * p->d + c) *
			       num_load(p->type, p->k, (key * p->hkv + g) * p->d + c);
		long double e = expl(p->scale * dot);
		sum += e;
		for (uint32_t c = 0; c < p->dv; c++)
			acc[c] += e * num_load(p->type, p->v, (key * p->hkv + g) * p->dv + c);
		n++;
	}
	for (uint32_t c = 0; c < p->dv; c++)
		o[c] = n ? (double)(acc[c] / sum) : 0.0;
	*lse = n ? (double)logl(sum) : -INFINITY;
	return n;
}

/* Random problems against naive_row: GQA, kv-shared, windows, varlen with
 * empty sequences; fmha_ref and fmha_ref_rows (rows in reverse order) both. */
static void
test_fmha_random(NumRng *r)
{
	enum { B = 4, HQ = 6, HKV = 2, D = 16, DV = 8 };
	static const int sqs[B] = {23, 0, 5, 17}, sks[B] = {9, 4, 0, 23};
	static const struct {
		FmhaMask mask;
		int64_t left, right;
		int shared;
	} cfgs[] = {
		{FMHA_MASK_NONE, -1, -1, 0}, {FMHA_MASK_CAUSAL, -1, -1, 0},
		{FMHA_MASK_NONE, 3, 2, 0},   {FMHA_MASK_CAUSAL, 4, -1, 1},
		{FMHA_MASK_NONE, -1, -1, 1},
	};
	int32_t cq[B + 1] = {0}, ck[B + 1] = {0};

	for (int b = 0; b < B; b++) {
		cq[b + 1] = cq[b] + sqs[b];
		ck[b + 1] = ck[b] + sks[b];
	}
	size_t tq = (size_t)cq[B], tk = (size_t)ck[B];
	uint16_t *q = malloc(2 * tq * HQ * D), *k = malloc(2 * tk * HKV * D);
	uint16_t *v = malloc(2 * tk * HKV * DV);
	double *o = malloc(sizeof(double) * tq * HQ * D), *lse = malloc(sizeof(double) * tq * HQ);
	double *o2 = malloc(sizeof(double) * tq * HQ * D), *l2 = malloc(sizeof(double) * tq * HQ);
	FmhaRow *rows = malloc(sizeof *rows * tq * HQ);

	for (size_t i = 0; i < tq * HQ * D; i++)
		num_store(NUM_BF16, q, i, 2.0 * num_rng_normal(r));
	for (size_t i = 0; i < tk * HKV * D; i++)
		num_store(NUM_BF16, k, i, num_rng_normal(r));
	for (size_t i = 0; i < tk * HKV * DV; i++)
		num_store(NUM_BF16, v, i, num_rng_normal(r));
	for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
		uint32_t dv = cfgs[ci].shared ? D : DV;
		FmhaProblem p = problem(q, k, cfgs[ci].shared ? (const void *)k : v, cq, ck, B, HQ, HKV,
		                        D, dv, cfgs[ci].mask, 0.3);
		double keys = 0, want[D], want_l;
		p.window_left = cfgs[ci].left;
		p.window_right = cfgs[ci].right;
		EXPECT(fmha_ref(&p, o, lse) == 0, "fmha random cfg %zu: rc", ci);
		for (uint32_t b = 0; b < B; b++)
			for (uint32_t i = 0; i < (uint32_t)sqs[b]; i++)
				for (uint32_t h = 0; h < HQ; h++) {
					size_t row = (size_t)cq[b] + i;
					double got_l = lse[h * tq + row];
					keys += naive_row(&p, b, i, h, want, &want_l);
					EXPECT(got_l == want_l || fabs(got_l - want_l) <= 1e-12 * (1 + fabs(want_l)),
					       "fmha random cfg %zu: b %u i %u h %u: LSE %.17g, want %.17g", ci, b, i,
					       h, got_l, want_l);
					for (uint32_t c = 0; c < dv; c++) {
						double got = o[(row * HQ + h) * dv + c];
						EXPECT(fabs(got - want[c]) <= 1e-12 * (1 + fabs(want[c])),
						       "fmha random cfg %zu: b %u i %u h %u c %u: O %.17g, want %.17g",
						       ci, b, i, h, c, got, want[c]);
					}
				}
		/* keys is summed over heads already */
		EXPECT(fmha_ref_work(&p) == keys * (D + dv), "fmha_ref_work %g, want %g",
		       fmha_ref_work(&p), keys * (D + dv));
		size_t nr = 0;
		for (size_t row = tq; row-- > 0;)
			for (uint32_t h = HQ; h-- > 0;)
				rows[nr++] = (FmhaRow){h, (uint32_t)row};
		EXPECT(fmha_ref_rows(&p, rows, nr, o2, l2) == 0, "fmha_ref_rows rc");
		for (size_t i = 0; i < nr; i++) {
			size_t at = ((size_t)rows[i].row * HQ + rows[i].head) * dv;
			EXPECT(memcmp(o2 + i * dv, o + at, sizeof(double) * dv) == 0 &&
			       memcmp(&l2[i], &lse[rows[i].head * tq + rows[i].row], sizeof(double)) == 0,
			       "fmha random cfg %zu: the rows path differs at row %u head %u", ci,
			       rows[i].row, rows[i].head);
		}
	}
	free(q);
	free(k);
	free(v);
	free(o);
	free(lse);
	free(o2);
	free(l2);
	free(rows);
}

/* E4M3 by hand: every finite code decodes and re-encodes to itself; ties
 * go to the even mantissa; the largest is 448 = 1.75·2^8, the smallest
 * subnormal 2^-9. */
static void
test_e4m3(void)
{
	for (int b = 0; b < 256; b++) {
		if ((b & 0x7f) == 0x7f)
			continue;
		EXPECT(decode_f64_to_e4m3(decode_e4m3_to_f64((uint8_t)b)) == b, "e4m3 round trip 0x%02x", b);
	}
	EXPECT(decode_e4m3_to_f64(0x7e) == 448, "e4m3 max");
	EXPECT(decode_e4m3_to_f64(0x01) == ldexp(1, -9), "e4m3 min subnormal");
	EXPECT(decode_e4m3_to_f64(0x38) == 1, "e4m3 one is 0x38");
	EXPECT(decode_f64_to_e4m3(1.0625) == 0x38, "tie 1.0625 -> 1 (even)");
	EXPECT(decode_f64_to_e4m3(1.1875) == 0x3a, "tie 1.1875 -> 1.25 (even)");
	EXPECT(decode_f64_to_e4m3(-3.0 * ldexp(1, -10)) == 0x82, "subnormal tie -1.5·2^-9 -> -2·2^-9");
	EXPECT(decode_f64_to_e4m3(1000) == 0x7e, "saturates at 448");
	EXPECT(decode_f64_to_e4m3(15.5) == 0x58, "15.5 rounds up a binade to 16");
}

/* Each format's layout by hand (docs/ABI.md, "Cache formats"):
 * row bytes, RoPE and scale offsets, page bytes (fp8-v4 page of 64: 64·584
 * = 37376 -> 65·576). */
static void
test_decode_layouts(void)
{
	static const struct {
		const char *name;
		int d_qk;
		size_t row, rope;
		long scale_at;
		size_t page64, page1;
	} want[] = {
		{"bf16", 512, 1024, 896, -1, 65536, 1024},
		{"bf16", 576, 1152, 1024, -1, 73728, 1152},
		{"fp8-token", 512, 592, 464, 448, 37888, 592},
		{"fp8-token", 576, 656, 528, 512, 41984, 656},
		{"fp8-v4", 512, 576, 448, -1, 37440, 1152},
		{"fp8-v32", 576, 656, 528, 512, 41984, 656},
	};
	DecodeRefFormat f;
	static uint8_t cache[2 * 41984];

	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		EXPECT(decode_ref_format(want[i].name, want[i].d_qk, &f) == 0, "%s %d", want[i].name, want[i].d_qk);
		EXPECT(f.row_bytes == want[i].row && f.rope_at == want[i].rope && f.scale_at == want[i].scale_at,
		       "%s %d: row %zu rope %zu scales %ld", want[i].name, want[i].d_qk, f.row_bytes, f.rope_at,
		       f.scale_at);
		EXPECT(decode_ref_page_bytes(&f, 64) == want[i].page64 && decode_ref_page_bytes(&f, 1) == want[i].page1,
		       "%s %d: pages %zu %zu", want[i].name, want[i].d_qk, decode_ref_page_bytes(&f, 64),
		       decode_ref_page_bytes(&f, 1));
	}
	EXPECT(decode_ref_format("fp8-v4", 576, &f) < 0, "fp8-v4 stores 512 only");
	EXPECT(decode_ref_format("fp8-v32", 512, &f) < 0, "fp8-v32 stores 576 only");
	(void)decode_ref_format("fp8-v4", 0, &f);
	EXPECT(decode_ref_token(&f, cache, 64, 65) == cache + 37440 + 576, "v4 row of token 65");
	EXPECT(decode_ref_token_scales(&f, cache, 64, 65) == cache + 37440 + 64 * 576 + 8, "v4 scales of token 65");
	(void)decode_ref_format("fp8-v32", 0, &f);
	EXPECT(decode_ref_token_scales(&f, cache, 64, 65) == cache + 41984 + 656 + 512, "v32 scales of token 65");
	(void)decode_ref_format("bf16", 0, &f);
	EXPECT(decode_ref_token_scales(&f, cache, 64, 65) == NULL, "bf16 has no scales");
}

/* Hand-derived bytes: a NoPE group whose amax is 3·448 gets the fp32 scale
 * 3 (fp8-token) or 4 (2^ceil(log2 3): fp8-v32; UE8M0 byte 127 + 2 = 129
 * for fp8-v4). 1344 / 3 = 448 is E4M3 0x7e; 1344 / 4 = 336 = 1.3125·2^8
 * lies halfway between 0x7a (1.25·2^8 = 320) and 0x7b (352) and rounds to
 * the even 0x7a; 1.5 / 3 = 0.5 is 0x30 (exponent -1 + 7 = 6), 1.5 / 4 =
 * 0.375 = 1.5·2^-2 is 0x2c. */
static void
test_decode_bytes(void)
{
	static const char *const names[] = {"fp8-token", "fp8-v32", "fp8-v4"};
	uint16_t in[576];
	uint8_t row[1152], tail[16];
	double out[576];
	DecodeRefFormat f;

	for (int n = 0; n < 3; n++) {
		float s;
		(void)decode_ref_format(names[n], 0, &f);
		for (int i = 0; i < f.d_qk; i++)
			in[i] = num_f64_to_bf16(i < f.d_nope ? (i % 7 == 0 ? 1.5 : 0.0) : (double)(i - f.d_nope) / 8);
		in[1] = num_f64_to_bf16(1344);
		memset(row, 0xee, sizeof row);
		memset(tail, 0xee, sizeof tail);
		uint8_t *sc = f.scale_at >= 0 ? row + f.scale_at : tail;
		decode_ref_quantize(&f, in, row, sc);
		decode_ref_dequantize(&f, row, sc, out);
		if (n == 2) {
			EXPECT(sc[0] == 129 && row[1] == 0x7a && row[0] == 0x2c, "v4: scale byte %d, 0x%02x 0x%02x", sc[0],
			       row[1], row[0]);
			/* group 1's amax 1.5: 1.5/448 = 0.0033 rounds up to 2^-8 */
			EXPECT(sc[1] == 119 && sc[7] == 0, "v4: group 1 scale byte %d, pad %d", sc[1],
			       sc[7]);
			EXPECT(out[1] == 1280 && out[0] == 1.5, "v4 dequantized %g %g", out[1], out[0]);
		} else {
			memcpy(&s, sc, 4);
			EXPECT(s == (n == 0 ? 3.0f : 4.0f), "%s: scale %g", names[n], (double)s);
			EXPECT(row[1] == (n == 0 ? 0x7e : 0x7a) && row[0] == (n == 0 ? 0x30 : 0x2c), "%s: 0x%02x 0x%02x",
			       names[n], row[1], row[0]);
			EXPECT(out[1] == (n == 0 ? 1344 : 1280) && out[0] == 1.5, "%s dequantized %g %g", names[n], out[1],
			       out[0]);
			if (n == 0)
				EXPECT(sc[4] == 0 && sc[15] == 0, "fp8-token: scale pad zeroed");
		}
		for (int i = f.d_nope; i < f.d_qk; i++)
			EXPECT(out[i] == (double)(i - f.d_nope) / 8, "%s rope %d", names[n], i);
	}
	(void)decode_ref_format("bf16", 576, &f);
	for (int i = 0; i < 576; i++)
		in[i] = num_f64_to_bf16(i * 0.25 - 3);
	decode_ref_quantize(&f, in, row, NULL);
	decode_ref_dequantize(&f, row, NULL, out);
	EXPECT(memcmp(row, in, 1152) == 0 && out[575] == num_bf16_to_f32(in[575]), "bf16 576: the row is the values");
}

/* A token through quantize/dequantize in every format: each NoPE value
 * within half an E4M3 step (2^-4 relative to its group's amax) of its
 * input, RoPE exact; power-of-two scales within [amax/448, 2·amax/448). */
static void
test_decode_roundtrip(NumRng *r)
{
	static const char *const names[] = {"bf16", "fp8-token", "fp8-v4", "fp8-v32"};
	uint16_t in[576];
	uint8_t row[1152], tail[16];
	double out[576];
	DecodeRefFormat f;

	for (int n = 0; n < 4; n++) {
		(void)decode_ref_format(names[n], 0, &f);
		for (int i = 0; i < f.d_qk; i++)
			in[i] = num_f64_to_bf16(num_rng_normal(r) * (i < 64 ? 100.0 : i < 128 ? 1e-3 : 1.0));
		uint8_t *sc = f.scale_at >= 0 ? row + f.scale_at : tail;
		decode_ref_quantize(&f, in, row, sc);
		decode_ref_dequantize(&f, row, sc, out);
		for (int g = 0; g < f.d_nope / f.group; g++) {
			double amax = 0;
			for (int i = 0; i < f.group; i++)
				amax = fmax(amax, fabs((double)num_bf16_to_f32(in[f.group * g + i])));
			for (int i = 0; i < f.group; i++) {
				double x = num_bf16_to_f32(in[f.group * g + i]), y = out[f.group * g + i];
				EXPECT(f.nope_fp8 ? fabs(x - y) <= amax / 16 : x == y, "%s group %d value %d: %g -> %g",
				       names[n], g, i, x, y);
			}
		}
		for (int i = f.d_nope; i < f.d_qk; i++)
			EXPECT(out[i] == num_bf16_to_f32(in[i]), "%s rope %d", names[n], i);
	}
}

/* Two keys by hand: scores 0 and ln 3 give weights 1/4, 3/4; a sink of
 * ln 4 doubles the denominator; no keys: O = 0, LSE = -inf or the sink. */
static void
test_decode_row(void)
{
	double q[2] = {1, 0}, k[4] = {0, 2, log(3), 6}, o[2], lse;

	decode_ref_row(q, k, 2, 2, 2, 1.0, 0, 0, o, &lse);
	EXPECT(fabs(o[0] - 0.75 * log(3)) < 1e-15 && fabs(o[1] - (0.5 + 4.5)) < 1e-14 &&
	       fabs(lse - log(4)) < 1e-15, "two keys: o %g %g lse %g", o[0], o[1], lse);
	decode_ref_row(q, k, 2, 2, 2, 1.0, 1, log(4), o, &lse);
	EXPECT(fabs(o[1] - 2.5) < 1e-14 && fabs(lse - log(8)) < 1e-14, "sink: o %g lse %g", o[1], lse);
	decode_ref_row(q, k, 0, 2, 2, 1.0, 0, 0, o, &lse);
	EXPECT(o[0] == 0 && o[1] == 0 && lse == -INFINITY, "no keys");
	decode_ref_row(q, k, 0, 2, 2, 1.0, 1, 0.5, o, &lse);
	EXPECT(o[0] == 0 && o[1] == 0 && lse == 0.5, "no keys, sink: lse %g", lse);
}

/* One head of q = 1, 2, 0.. against a key 1, -1, 0.. (E4M3 0x38 = 1,
 * 0x40 = 2, 0xb8 = -1) with scale 0.5: dot -0.5, relu 0; a second head
 * q = 2, 0.. gives 2·0.5 = 1, times the weight 3: 3. The bound sums |w|·
 * Σ|q·k|: 1·1.5 + 3·1 = 4.5. */
static void
test_indexer_logit(void)
{
	uint8_t q[2 * INDEXER_D] = {0}, key[INDEXER_D] = {0}, sc[4];
	float w[2] = {1, 3}, half = 0.5f;
	double k[INDEXER_D], b, s;

	q[0] = 0x38;
	q[1] = 0x40;
	q[INDEXER_D] = 0x40;
	key[0] = 0x38;
	key[1] = 0xb8;
	memcpy(sc, &half, 4);
	indexer_fp8_dequantize(key, sc, k);
	EXPECT(k[0] == 0.5 && k[1] == -0.5 && k[2] == 0, "fp8 dequantize %g %g", k[0], k[1]);
	s = indexer_ref_logit(q, w, 2, k, &b);
	EXPECT(s == 3 && b == 4.5, "indexer logit %g bound %g", s, b);
	w[1] = -3;
	s = indexer_ref_logit(q, w, 2, k, &b);
	EXPECT(s == -3 && b == 4.5, "negative weight: %g", s);
}

/* Every E2M1 code against the OCP table written out, and the fp4 key
 * layout: value 2i in the low nibble of byte i, group g's exponent in
 * scale byte g. */
static void
test_indexer_fp4(void)
{
	static const double want[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
	uint8_t key[INDEXER_FP4_KEY] = {0}, sc[4] = {127, 128, 120, 254};
	double k[INDEXER_D];

	for (int c = 0; c < 16; c++)
		EXPECT(indexer_e2m1_to_f64((uint8_t)c) == want[c] && !!signbit(indexer_e2m1_to_f64((uint8_t)c)) == (c >= 8),
		       "e2m1 code %d: %g, want %g", c, indexer_e2m1_to_f64((uint8_t)c), want[c]);
	key[0] = 0x2f;  /* value 0: code 0xf = -6, value 1: code 2 = 1 */
	key[16] = 0x07; /* value 32 (group 1): 6 */
	key[40] = 0x90; /* value 81 (group 2): code 9 = -0.5 */
	key[63] = 0x30; /* value 127 (group 3): code 3 = 1.5 */
	indexer_fp4_dequantize(key, sc, k);
	EXPECT(k[0] == -6 && k[1] == 1 && k[2] == 0, "fp4 group 0: %g %g", k[0], k[1]);
	EXPECT(k[32] == 12, "fp4 group 1 (x2): %g", k[32]);
	EXPECT(k[80] == 0 && k[81] == -0.5 * ldexp(1, -7), "fp4 group 2 (x2^-7): %g", k[81]);
	EXPECT(k[126] == 0 && k[127] == 1.5 * ldexp(1, 127), "fp4 group 3 (x2^127): %g", k[127]);
}

/* NVFP4: the UE4M3 scales written out (zero, the subnormals m·2^-9, 1,
 * the largest, 448), the layout (group g of 16 values in scale byte g),
 * the per-tensor scale; the nearest E2M1 code with ties to the even code,
 * and a quantized key that decodes back within half a code step. */
static void
test_indexer_nvfp4(void)
{
	static const struct {
		uint8_t code;
		double v;
	} ue4m3[] = {{0x00, 0}, {0x01, 0x1p-9}, {0x07, 7 * 0x1p-9}, {0x08, 0x1p-6}, {0x38, 1}, {0x39, 1.125},
	             {0x77, 240}, {0x7e, 448}};
	uint8_t key[INDEXER_FP4_KEY] = {0}, sc[INDEXER_NVFP4_SCALE] = {0};
	double k[INDEXER_D], v[INDEXER_D];

	for (size_t i = 0; i < sizeof ue4m3 / sizeof ue4m3[0]; i++) {
		memset(sc, ue4m3[i].code, sizeof sc);
		memset(key, 0x77, sizeof key); /* every value 6 */
		indexer_nvfp4_dequantize(key, sc, 0.5f, k);
		EXPECT(k[0] == 3 * ue4m3[i].v && k[127] == 3 * ue4m3[i].v, "UE4M3 0x%02x: %g, want %g", ue4m3[i].code,
		       k[0] / 3, ue4m3[i].v);
	}
	memset(key, 0, sizeof key);
	memset(sc, 0x38, sizeof sc);
	sc[1] = 0x40; /* values 16..31: x2 */
	sc[7] = 0x30; /* values 112..127: x0.5 */
	key[8] = 0x0d;  /* value 16: code 0xd = -3 */
	key[63] = 0x20; /* value 127: code 2 = 1 */
	key[0] = 0x05;  /* value 0: 3 */
	indexer_nvfp4_dequantize(key, sc, 0.25f, k);
	EXPECT(k[0] == 0.75 && k[16] == -1.5 && k[127] == 0.125 && k[1] == 0, "nvfp4 layout: %g %g %g", k[0], k[16],
	       k[127]);
	EXPECT(indexer_e2m1_nearest(0.25) == 0 && indexer_e2m1_nearest(0.75) == 2 && indexer_e2m1_nearest(2.5) == 4 &&
	       indexer_e2m1_nearest(5) == 6 && indexer_e2m1_nearest(-7) == 15 && indexer_e2m1_nearest(-1.2) == 10,
	       "nearest E2M1: 0.25 -> %d, 0.75 -> %d, 2.5 -> %d, 5 -> %d, -7 -> %d, -1.2 -> %d",
	       indexer_e2m1_nearest(0.25), indexer_e2m1_nearest(0.75), indexer_e2m1_nearest(2.5),
	       indexer_e2m1_nearest(5), indexer_e2m1_nearest(-7), indexer_e2m1_nearest(-1.2));
	for (int i = 0; i < INDEXER_D; i++)
		v[i] = (i % 7 - 3) * (1 + i / 16) * 0.37;
	indexer_nvfp4_quantize(v, 0.05f, key, sc);
	indexer_nvfp4_dequantize(key, sc, 0.05f, k);
	for (int g = 0; g < INDEXER_D / INDEXER_NVFP4_GROUP; g++) {
		double s = decode_e4m3_to_f64(sc[g]) * (double)0.05f, amax = 0, e = 0;
		for (int i = 0; i < INDEXER_NVFP4_GROUP; i++) {
			amax = fmax(amax, fabs(v[16 * g + i]));
			e = fmax(e, fabs(k[16 * g + i] - v[16 * g + i]));
		}
		/* the scale puts amax near 6 (UE4M3: within 2^-4); codes are
		 * at most 1 apart below 4, 2 above */
		EXPECT(fabs(amax / s - 6) <= 6 * 0x1p-4 + 1e-12 && e <= s * 1.0 + 1e-12 && e <= amax / 4,
		       "nvfp4 quantize group %d: amax %g scale %g max err %g", g, amax, s, e);
	}
}

/* The set comparison: order free, a tie at the k-th score either way, -1
 * padding exactly past min(n, k); duplicates, strays, missing keys and
 * wrong padding fail. */
static void
test_indexer_topk(void)
{
	const double s[6] = {5, 1, 3, 3, 0, 7};
	char why[256];
	struct {
		int32_t got[4];
		int k, n, ok;
	} cases[] = {
		{{5, 0, 2, -1}, 3, 6, 1},  /* 7 5 3: either 3 */
		{{3, 5, 0, -1}, 3, 6, 1},
		{{0, 5, 2, -1}, 3, 6, 1},
		{{5, 0, 1, -1}, 3, 6, 0},  /* 1 is below the tie */
		{{5, 5, 2, -1}, 3, 6, 0},  /* duplicate */
		{{5, 0, 6, -1}, 3, 6, 0},  /* past n */
		{{2, 3, 0, 5}, 4, 6, 1},
		{{2, 3, 0, 1}, 4, 6, 0},   /* 5 (7) missing */
		{{1, 0, -1, -1}, 4, 2, 1}, /* fewer keys than k */
		{{1, 0, 2, -1}, 4, 2, 0},  /* key 2 is not visible */
		{{1, -1, 0, -1}, 4, 2, 0}, /* -1 before the end of the keys */
		{{-1, -1, -1, -1}, 4, 0, 1},
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = indexer_topk_check(s, (size_t)cases[i].n, 0, cases[i].got, cases[i].k, why, sizeof why);
		EXPECT((rc == 0) == cases[i].ok, "topk case %zu: rc %d (%s)", i, rc, rc ? why : "passed");
	}
	/* within tol of the k-th score counts as a tie */
	{
		const double t[3] = {1.0, 0.99999, 2};
		int32_t g[2] = {2, 1};
		EXPECT(indexer_topk_check(t, 3, 1e-4, g, 2, why, sizeof why) == 0, "near tie: %s", why);
		EXPECT(indexer_topk_check(t, 3, 1e-6, g, 2, why, sizeof why) != 0, "not a tie at tol 1e-6");
	}
}

/* MoE row owners by hand: contiguous offsets {0,0,1,1,4} (experts 0 and 2
 * empty, 1 owns row 0, 3 owns 1..3, rows 4.. nobody's), masked slabs of 3
 * with counts {0,1,3}. */
/* The FP4 gemm reference against a product worked by hand: K = 64, A's
 * codes all 0x2 (1.0) with NVFP4 factors 1, 2, 0.5, 1.5 (UE4M3 0x38, 0x40,
 * 0x30, 0x3c) per 16 of K, B's all 0x7 (6.0) at factor 1: 16·6·(1 + 2 +
 * 0.5 + 1.5) = 480, times alpha 0.25 = 120; and MXFP4 (UE8M0 per 32) with
 * B's code 0xf (-6) at 2^1 and 2^-1: 32·(-12) + 32·(-3) = -480. The
 * images' bytes (docs/ABI.md, "gemm"): row 0's factors are bytes 0.. of
 * image 0, row 33's byte 16 + 4 of it, k = 90 of a K = 256 NVFP4 row in
 * image 1 (64 of K per image), byte 1. */
static void
test_gemm_fp4(void)
{
	uint8_t a[32], b[32], sa[512], sb[512];
	uint32_t row = 0;
	double out;
	static const uint8_t nv[4] = {0x38, 0x40, 0x30, 0x3c};

	EXPECT(gemm_sf_index(0, 17, 64, 16) == 1, "nv16 (0, 17): byte 1");
	EXPECT(gemm_sf_index(33, 0, 64, 16) == 20, "nv16 (33, 0): byte 16 + 4");
	EXPECT(gemm_sf_index(0, 90, 256, 16) == 513, "nv16 (0, 90) of K 256: image 1, byte 1");
	EXPECT(gemm_sf_index(130, 40, 256, 32) == 1024 + 16 * 2 + 1, "mx32 (130, 40) of K 256: row block 1");
	EXPECT(gemm_sf_index(5, 100, 256, 32) == gemm_mx_sf_index(5, 100, 256), "mx32 = gemm_mx_sf_index");
	memset(a, 0x22, sizeof a);
	memset(b, 0x77, sizeof b);
	memset(sa, 0x38, sizeof sa);
	memset(sb, 0x38, sizeof sb);
	memcpy(sa, nv, 4);
	gemm_fp4_ref_rows(a, b, sa, sb, 0, 16, 0.25, 1, 64, &row, 1, &out);
	EXPECT(out == 120.0, "nvfp4 hand product: %g, want 120", out);
	memset(b, 0xff, sizeof b);
	memset(sa, 127, sizeof sa);
	memset(sb, 127, sizeof sb);
	sb[0] = 128, sb[1] = 126;
	gemm_fp4_ref_rows(a, b, sa, sb, 1, 32, 1.0, 1, 64, &row, 1, &out);
	EXPECT(out == -480.0, "mxfp4 hand product: %g, want -480", out);
	EXPECT(isnan(gemm_sf_value(0x7f, 0)) && isnan(gemm_sf_value(0xff, 1)), "NaN factors");
	/* W4A8, K = 32: A's E4M3 0x38 (1.0) at 2^2, B's 0xf (-6) at 2^1 (sb[0] = 128): 32·4·(-12) */
	uint8_t a8[32];
	memset(a8, 0x38, sizeof a8);
	memset(sa, 127, sizeof sa);
	sa[0] = 129;
	gemm_w4a8_ref_rows(a8, b, sa, sb, 1, 32, &row, 1, &out);
	EXPECT(out == -1536.0, "w4a8 hand product: %g, want -1536", out);
}

static void
test_moe_owner(void)
{
	static const int32_t offs[] = {0, 0, 1, 1, 4}, counts[] = {0, 1, 3};
	static const int want_c[] = {1, 3, 3, 3, -1, -1};
	static const int want_m[] = {-1, -1, -1, 1, -1, -1, 2, 2, 2, -1};

	for (uint32_t r = 0; r < 6; r++)
		EXPECT(gemm_moe_owner(0, offs, 4, 6, r) == want_c[r], "contiguous row %u: %d, want %d", r,
		       gemm_moe_owner(0, offs, 4, 6, r), want_c[r]);
	for (uint32_t r = 0; r < 10; r++)
		EXPECT(gemm_moe_owner(1, counts, 3, 3, r) == want_m[r], "masked row %u: %d, want %d", r,
		       gemm_moe_owner(1, counts, 3, 3, r), want_m[r]);
}

/* W4A8 by hand: one row, K = 64. Group 0 holds 3 and -0.25 (amax 3: e =
 * 127 + ceil(log2 0.5) = 126; 3/0.5 = 6 is code 7, -0.25/0.5 code 0b1001), group
 * 1 holds 12 (e = 128, code 6·2 = 12: 0b0111) and 5 (5/2 = 2.5, a tie
 * between 2 and 3: the even code 0b0100, 2, so 4). A has 1 at k = 0, 1, 32,
 * 33 with scale 2: C = 2·(3 - 0.25 + 12 + 4). */
static void
test_w4a8_bs(NumRng *r)
{
	double W[64] = {0};
	uint8_t B[32], SB[2], A[64] = {0};
	float SA[1] = {2};
	uint32_t row = 0;
	double c;

	W[0] = 3;
	W[1] = -0.25;
	W[32] = 12;
	W[33] = 5;
	gemm_w4a8_quantize(W, 1, 64, B, SB);
	EXPECT(SB[0] == 126 && SB[1] == 128, "w4a8 scales %u %u, want 126 128", SB[0], SB[1]);
	EXPECT(B[0] == (7 | 9 << 4), "w4a8 byte 0: 0x%02x, want 0x97", B[0]);
	EXPECT(B[16] == (7 | 4 << 4), "w4a8 byte 16: 0x%02x, want 0x47", B[16]);
	EXPECT(B[1] == 0 && B[17] == 0, "w4a8 zeros: 0x%02x 0x%02x", B[1], B[17]);
	A[0] = A[1] = A[32] = A[33] = 0x38; /* E4M3 1.0 */
	gemm_w4a8_bs_ref_rows(A, SA, B, SB, 1, 1, 64, &row, 1, &c);
	EXPECT(c == 2 * (3 - 0.25 + 12 + 4), "w4a8 product %g, want %g", c, 2 * (3 - 0.25 + 12 + 4));
	/* random rows: every value is within half a step of its group's grid
	 * (the largest step is 2·2^(e-127), between 4 and 6) and its scale keeps
	 * amax <= 6·2^(e-127) */
	{
		enum { R = 3, K = 256 };
		static double w[R * K];
		static uint8_t q[R * K / 2], s[R * K / 32];
		for (int i = 0; i < R * K; i++)
			w[i] = num_rng_normal(r) * ldexp(1.0, (i / 32) % 7 - 3);
		gemm_w4a8_quantize(w, R, K, q, s);
		for (uint32_t n = 0; n < R; n++) {
			uint32_t one = 0;
			uint8_t ones[K];
			float sa[K / 128];
			double d[1];
			for (int k = 0; k < K; k++)
				ones[k] = 0;
			for (int kb = 0; kb < K / 128; kb++)
				sa[kb] = 1;
			for (int k = 0; k < K; k++) {
				double sc = ldexp(1.0, s[n * K / 32 + k / 32] - 127), v;
				/* C = the one weight k of row n: A = e_k */
				ones[k] = 0x38;
				gemm_w4a8_bs_ref_rows(ones, sa, q + n * K / 2, s + n * K / 32, 1, 1, K, &one, 1, d);
				ones[k] = 0;
				v = w[n * K + k];
				EXPECT(fabs(d[0] - v) <= sc + 1e-300 && fabs(v) <= 6 * sc,
				       "w4a8 row %u k %d: %g quantized to %g, scale %g", n, k, v, d[0], sc);
			}
		}
	}
}

int
main(void)
{
	NumRng r;
	num_rng_seed(&r, 1);
	for (int t = 0; t < 2; t++) {
		test_round_trip(t);
		test_midpoints(t);
		test_random_floats(t, &r);
	}
	test_corners();
	test_rng();
	test_gemm(NUM_BF16, &r);
	test_gemm(NUM_FP16, &r);
	test_moe_owner();
	test_gemm_fp4();
	test_w4a8_bs(&r);
	test_fmha_one_key();
	test_fmha_equal_keys();
	test_fmha_causal();
	test_fmha_gqa_varlen();
	test_fmha_random(&r);
	test_e4m3();
	test_decode_layouts();
	test_decode_bytes();
	test_decode_roundtrip(&r);
	test_decode_row();
	test_indexer_logit();
	test_indexer_fp4();
	test_indexer_nvfp4();
	test_indexer_topk();
	if (failures)
		fprintf(stderr, "test_ref: %d failures\n", failures);
	else
		printf("test_ref: ok\n");
	return failures ? 1 : 0;
}
