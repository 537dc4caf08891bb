/* ops: the FMA-pipe exp2 (op_exp2_fma) modelled instruction by instruction
 * in f32 against exp2 in double, and the spread of exp2_fma_takes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

static int fails;

static float
bits_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t
f_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

/* The emitted sequence, one C statement per instruction (f32 throughout,
 * fmaf for fma.rn). */
static float
exp2_fma_model(float x)
{
	volatile float j = x + 12582912.0f; /* add.rn 0f4B400000 */
	volatile float f = j - 12582912.0f;
	f = x - f;
	int below = x < -125.0f;
	float pb = fmaf(f, exp2_poly[3], exp2_poly[2]);
	pb = fmaf(pb, f, exp2_poly[1]);
	pb = fmaf(pb, f, exp2_poly[0]);
	uint32_t jb = f_bits(j) << 23;
	return below ? 0.0f : bits_f(f_bits(pb) + jb);
}

static void
test_exp2_fma(void)
{
	double worst = 0, at = 0;
	long n = 0;

	/* every 2^-12 step over the softmax's range, plus the edges */
	for (double x = -125.0; x <= 0.0; x += 1.0 / 4096, n++) {
		float xf = (float)x;
		double want = exp2((double)xf), got = exp2_fma_model(xf);
		double rel = fabs(got - want) / want;
		if (rel > worst)
			worst = rel, at = xf;
	}
	if (worst > 8e-5) {
		printf("FAIL test_ops.c: exp2 polynomial: max rel err %.3g at x = %.9g over %ld points, want <= 8e-5\n",
		       worst, at, n);
		fails++;
	}
	static const float zero_at[] = {-125.001f, -126.0f, -127.0f, -150.0f, -1e30f, -INFINITY};
	for (size_t i = 0; i < sizeof zero_at / sizeof zero_at[0]; i++) {
		float got = exp2_fma_model(zero_at[i]);
		if (got != 0.0f) {
			printf("FAIL test_ops.c: exp2 at %g: got %g, want 0 (masked scores)\n",
			       (double)zero_at[i], (double)got);
			fails++;
		}
	}
	/* small positive x (rounding can leave the row maximum a hair above
	 * the scaled max) stays accurate */
	for (float x = 0; x <= 1.0f; x += 0.125f) {
		double rel = fabs(exp2_fma_model(x) - exp2(x)) / exp2(x);
		if (rel > 8e-5) {
			printf("FAIL test_ops.c: exp2 at %g: rel err %.3g\n", (double)x, rel);
			fails++;
		}
	}
}

static void
test_takes(void)
{
	for (int k = 0; k <= 8; k++) {
		for (int base = 0; base < 64; base += 8) {
			int n = 0, run = 0, maxrun = 0;
			for (int i = base; i < base + 8; i++) {
				n += exp2_fma_takes(i, k);
				run = exp2_fma_takes(i, k) ? run + 1 : 0;
				maxrun = run > maxrun ? run : maxrun;
			}
			/* k of every 8, never two in a row while k <= 4 */
			if (n != k || (k <= 4 && maxrun > 1)) {
				printf("FAIL test_ops.c: exp2_fma_takes k=%d, elements %d..%d: %d taken, longest run %d\n",
				       k, base, base + 7, n, maxrun);
				fails++;
			}
		}
	}
}

int
main(void)
{
	test_exp2_fma();
	test_takes();
	if (!fails)
		printf("ops: all passed\n");
	return fails != 0;
}
