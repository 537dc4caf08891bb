/* Every code of every small float and scale format (dtype_decode) against
 * values derived by hand from the format definitions (docs/hardware.md,
 * "Number formats"). The rules below are written independently of
 * gen/dtype.c's table, as integer significands times powers of two:
 *
 *   E2M1  s.ee.m,   bias 1:  e = 0: m * 2^-1 (subnormal: 0, 0.5);
 *                            else (2 + m) * 2^(e - 2). No Inf, no NaN.
 *                            Codes 0-7: 0 0.5 1 1.5 2 3 4 6; 8-15 negated.
 *                            (The earlier attempt's (nibble & 7) * scale
 *                            gives 0..7: wrong for every nonzero code.)
 *   E4M3  s.eeee.mmm, bias 7: e = 0: m * 2^-9; else (8 + m) * 2^(e - 10);
 *                            s.1111.111 is NaN; no Inf; max 0x7E = 448.
 *   E5M2  s.eeeee.mm, bias 15: e = 0: m * 2^-16; else (4 + m) * 2^(e - 17);
 *                            e = 31: Inf if m = 0, else NaN; max 0x7B = 57344.
 *   UE8M0 eeeeeeee, bias 127: 2^(e - 127), 0xFF NaN; no zero (0 is 2^-127).
 *   UE4M3 eeee.mmm, bias 7:  E4M3 without its sign bit; 0x7F NaN; 8-bit
 *                            codes above 0x7F are not UE4M3 codes.
 */
#include <math.h>
#include <stdio.h>

#include "dtype.h"

static int fails;

/* Same value, or both NaN; zeros compare their sign too. */
static int
same(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return a == b && signbit(a) == signbit(b);
}

static void
check(DType t, uint32_t code, double want, int line)
{
	double got = -12345.0;

	if (dtype_decode(t, code, &got) != 0 || !same(got, want)) {
		printf("FAIL test_dtype.c:%d: %s code 0x%02x: expected %.17g, got %.17g\n", line,
		       dtype_name(t), code, want, got);
		fails++;
	}
}

static double
sgn(uint32_t code, int bit)
{
	return code >> bit & 1 ? -1.0 : 1.0;
}

static void
test_e2m1(void)
{
	static const double pos[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

	for (uint32_t c = 0; c < 16; c++) {
		uint32_t e = c >> 1 & 3, m = c & 1;
		double rule = sgn(c, 3) * (e == 0 ? m * 0.5 : (2 + m) * ldexp(1.0, (int)e - 2));
		check(DT_E2M1, c, sgn(c, 3) * pos[c & 7], __LINE__);
		check(DT_E2M1, c, rule, __LINE__);
	}
	/* the bug this table rules out: 0b0111 is 6, not 7; 0b0101 is 3, not 5; 0b0001 is 0.5 */
	check(DT_E2M1, 0x7, 6.0, __LINE__);
	check(DT_E2M1, 0x5, 3.0, __LINE__);
	check(DT_E2M1, 0x1, 0.5, __LINE__);
	check(DT_E2M1, 0xF, -6.0, __LINE__);
	check(DT_E2M1, 0x8, -0.0, __LINE__);
}

static void
test_e4m3(void)
{
	for (uint32_t c = 0; c < 256; c++) {
		uint32_t e = c >> 3 & 15, m = c & 7;
		double v = (c & 0x7f) == 0x7f ? NAN
		         : sgn(c, 7) * (e == 0 ? m * ldexp(1.0, -9) : (8 + m) * ldexp(1.0, (int)e - 10));
		check(DT_E4M3, c, v, __LINE__);
	}
	check(DT_E4M3, 0x7E, 448.0, __LINE__);
	check(DT_E4M3, 0xFE, -448.0, __LINE__);
	check(DT_E4M3, 0x38, 1.0, __LINE__);
	check(DT_E4M3, 0x08, 0.015625, __LINE__);          /* smallest normal 2^-6 */
	check(DT_E4M3, 0x01, 0.001953125, __LINE__);       /* smallest subnormal 2^-9 */
	check(DT_E4M3, 0x78, 256.0, __LINE__);             /* exponent 15 is finite */
	check(DT_E4M3, 0xFF, NAN, __LINE__);
}

static void
test_e5m2(void)
{
	for (uint32_t c = 0; c < 256; c++) {
		uint32_t e = c >> 2 & 31, m = c & 3;
		double v = e == 31 ? (m == 0 ? sgn(c, 7) * INFINITY : NAN)
		         : sgn(c, 7) * (e == 0 ? m * ldexp(1.0, -16) : (4 + m) * ldexp(1.0, (int)e - 17));
		check(DT_E5M2, c, v, __LINE__);
	}
	check(DT_E5M2, 0x7B, 57344.0, __LINE__);
	check(DT_E5M2, 0x3C, 1.0, __LINE__);
	check(DT_E5M2, 0x04, 0.00006103515625, __LINE__);  /* 2^-14 */
	check(DT_E5M2, 0x01, 0.0000152587890625, __LINE__); /* 2^-16 */
	check(DT_E5M2, 0x7C, INFINITY, __LINE__);
	check(DT_E5M2, 0xFC, -INFINITY, __LINE__);
	check(DT_E5M2, 0x7D, NAN, __LINE__);
}

static void
test_scales(void)
{
	double v = 0.0;

	for (uint32_t c = 0; c < 256; c++)
		check(DT_UE8M0, c, c == 0xff ? NAN : ldexp(1.0, (int)c - 127), __LINE__);
	check(DT_UE8M0, 0x7F, 1.0, __LINE__);
	check(DT_UE8M0, 0x80, 2.0, __LINE__);
	check(DT_UE8M0, 0x00, ldexp(1.0, -127), __LINE__);
	check(DT_UE8M0, 0xFE, ldexp(1.0, 127), __LINE__);
	for (uint32_t c = 0; c < 128; c++) {
		uint32_t e = c >> 3, m = c & 7;
		check(DT_UE4M3, c, c == 0x7f ? NAN : e == 0 ? m * ldexp(1.0, -9) : (8 + m) * ldexp(1.0, (int)e - 10),
		      __LINE__);
	}
	check(DT_UE4M3, 0x7E, 448.0, __LINE__);
	for (uint32_t c = 128; c < 256; c++)
		if (dtype_decode(DT_UE4M3, c, &v) != -1) {
			printf("FAIL test_dtype.c:%d: ue4m3 accepted 8-bit code 0x%02x\n", __LINE__, c);
			fails++;
		}
}

/* The 6-bit formats share the table: their extremes. */
static void
test_fp6_and_refusals(void)
{
	double v = 0.0;

	check(DT_E2M3, 0x1F, 7.5, __LINE__);   /* (8 + 7) * 2^(3 - 1 - 3) */
	check(DT_E2M3, 0x01, 0.125, __LINE__); /* subnormal 1 * 2^(1 - 1 - 3) */
	check(DT_E3M2, 0x1F, 28.0, __LINE__);  /* (4 + 3) * 2^(7 - 3 - 2) */
	check(DT_E3M2, 0x01, 0.0625, __LINE__); /* 2^(1 - 3 - 2) */
	check(DT_E3M2, 0x3F, -28.0, __LINE__);
	if (dtype_decode(DT_E2M1, 16, &v) != -1 || dtype_decode(DT_BF16, 0, &v) != -1 ||
	    dtype_decode(DT_S8, 1, &v) != -1 || dtype_decode(DT_COUNT, 0, &v) != -1) {
		printf("FAIL test_dtype.c:%d: decoded a code or type that is not a small float\n", __LINE__);
		fails++;
	}
}

int
main(void)
{
	test_e2m1();
	test_e4m3();
	test_e5m2();
	test_scales();
	test_fp6_and_refusals();
	if (fails)
		printf("%d failures\n", fails);
	return fails != 0;
}
