/* Unit test of the references themselves: the half-precision conversions
 * (exhaustive round trips, the bit path against the float64 path on random
 * and half-way values, the named corner cases), the random generator, and
 * the gemm reference against a naive triple loop. No GPU needed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_ref.h"
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
	if (failures)
		fprintf(stderr, "test_ref: %d failures\n", failures);
	else
		printf("test_ref: ok\n");
	return failures ? 1 : 0;
}
