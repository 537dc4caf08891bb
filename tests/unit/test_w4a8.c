/* The W4A8 folding rule (gen/w4a8.h) against values derived by hand from
 * the E2M1 and E4M3 formats (docs/hardware.md, "FP4 weights as E4M3"):
 * every (code, offset) pair the kernel can meet, the exactness window and
 * the reference exponent. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "gen/w4a8.h"

static int failures;

#define EXPECT(cond)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond);     \
			failures++;                                                           \
		}                                                                         \
	} while (0)

/* E4M3 byte -> value: exponent field E (bias 7), mantissa M: E = 0 is
 * M·2^-9, else (8 + M)·2^(E-10) */
static double
e4m3_value(int b)
{
	int E = b >> 3 & 15, M = b & 7;
	double v = E ? ldexp(8 + M, E - 10) : ldexp(M, -9);
	return b & 0x80 ? -v : v;
}

int
main(void)
{
	static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
	/* d = 0: 0.5 = 2^-1 -> exponent 6, 1 -> 7, 1.5 -> 7 with mantissa 4,
	 * 2 -> 8, 3 -> 8.4, 4 -> 9, 6 -> 9.4 */
	static const int base[8] = {0x00, 0x30, 0x38, 0x3C, 0x40, 0x44, 0x48, 0x4C};
	/* Below d = -5 the half leaves the normals, below -6 more codes do:
	 * value·2^(d+9) = q is the E4M3 byte while q <= 8 (subnormal k·2^-9,
	 * 8 being 2^-6, exponent 1), rounded to nearest, ties to even:
	 *   d=-6: q = 4, 8, 12, 16, 24, 32, 48 -> 0.5 is 0x04, the rest normal
	 *   d=-7: q = 2, 4, 6, 8, 12, 16, 24
	 *   d=-8: q = 1, 2, 3, 4, 6, 8, 12 (every code still exact)
	 *   d=-9: q = .5, 1, 1.5, 2, 3, 4, 6 -> 0, 1, 2, 2, 3, 4, 6
	 *   d=-10: q = .25, .5, .75, 1, 1.5, 2, 3 -> 0, 0, 1, 1, 2, 2, 3
	 *   d=-11: q = .125, .25, .375, .5, .75, 1, 1.5 -> 0, 0, 0, 0, 1, 1, 2
	 *   d=-12: q = ..., .375, .5, .75 -> 0, 0, 0, 0, 0, 0, 1
	 *   d=-13: q <= .375 -> all 0 */
	static const int low[8][8] = {
		/* d = -6 */ {0x00, 0x04, 0x08, 0x0C, 0x10, 0x14, 0x18, 0x1C},
		/* d = -7 */ {0x00, 0x02, 0x04, 0x06, 0x08, 0x0C, 0x10, 0x14},
		/* d = -8 */ {0x00, 0x01, 0x02, 0x03, 0x04, 0x06, 0x08, 0x0C},
		/* d = -9 */ {0x00, 0x00, 0x01, 0x02, 0x02, 0x03, 0x04, 0x06},
		/* d = -10 */ {0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x02, 0x03},
		/* d = -11 */ {0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02},
		/* d = -12 */ {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01},
		/* d = -13 */ {0, 0, 0, 0, 0, 0, 0, 0},
	};

	EXPECT(W4A8_SPAN == 14 && W4A8_NLUT == 20);
	for (int d = -20; d <= W4A8_DMAX; d++) {
		uint32_t t[2];
		EXPECT(w4a8_lut(d, t) == 0);
		for (int c = 0; c < 16; c++) {
			int m = c & 7, got = w4a8_e4m3(c, d), want;
			if (d >= -5 || (d == -6 && m != 1))
				want = m ? base[m] + 8 * d : 0;
			else
				want = low[-6 - (d < -13 ? -13 : d)][m]; /* below -13 as -13 */
			want |= c & 8 ? 0x80 : 0;
			if (got != want)
				fprintf(stderr, "code %d, d %d: got 0x%02x, want 0x%02x\n", c, d, got, want);
			EXPECT(got == want);
			/* exact exactly on the window [-8, 6] */
			double v = ldexp(c & 8 ? -mag[m] : mag[m], d);
			if (d >= W4A8_DEXACT)
				EXPECT(e4m3_value(got) == v);
			if (d == W4A8_DEXACT - 1 && (m == 1 || m == 3))
				EXPECT(e4m3_value(got) != v); /* 0.5 and 1.5 at d = -9 are ties */
			if (c < 8)
				EXPECT((int)(t[c / 4] >> (8 * (c % 4)) & 0xff) == got);
		}
	}
	/* d = 6: 6·64 = 384 = 1.5·2^8, exponent 15 mantissa 4: 0x7C, below 448 */
	EXPECT(w4a8_e4m3(7, 6) == 0x7C && w4a8_e4m3(15, 6) == 0xFC);
	EXPECT(w4a8_e4m3(7, 7) == -1 && w4a8_e4m3(16, 0) == -1 && w4a8_e4m3(-1, 0) == -1);
	{
		uint32_t t[2];
		EXPECT(w4a8_lut(7, t) == -1);
		EXPECT(w4a8_lut(0, t) == 0 && t[0] == 0x3C383000u && t[1] == 0x4C484440u);
	}
	/* e_ref = max - 6; a span of 14 folds, 15 does not; 0xFF never */
	{
		static const uint8_t a[4] = {127, 120, 113, 126}, b[4] = {127, 112, 127, 127};
		static const uint8_t c[4] = {5, 0, 2, 1}, nan[4] = {127, 0xFF, 127, 127};
		EXPECT(w4a8_ref_exponent(a, 4) == 121 && w4a8_block_exact(a, 4));
		EXPECT(w4a8_ref_exponent(b, 4) == 121 && !w4a8_block_exact(b, 4));
		EXPECT(w4a8_ref_exponent(c, 4) == -1 && w4a8_block_exact(c, 4));
		EXPECT(w4a8_ref_exponent(nan, 4) == -1000 && !w4a8_block_exact(nan, 4));
	}
	/* the host count: 2 rows x 2 blocks (K = 256), one span 15, one NaN */
	{
		static const uint8_t s[2 * 8] = {127, 113, 120, 127, 10, 10, 10, 10,
		                                 112, 127, 127, 127, 1, 0xFF, 1, 1};
		EXPECT(w4a8_inexact_blocks(s, 2, 256) == 2);
		EXPECT(w4a8_inexact_blocks(s, 1, 256) == 0);
		EXPECT(w4a8_inexact_blocks(s, 2, 192) == -1);
	}
	if (failures)
		fprintf(stderr, "test_w4a8: %d failures\n", failures);
	else
		printf("test_w4a8: ok\n");
	return failures ? 1 : 0;
}
