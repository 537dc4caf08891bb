/* The E2M1 table (gen/e2m1.h) against values derived by hand: every one
 * of the 16 codes, and the packed f16 high bytes the kernels' prmt
 * lookups use. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "gen/e2m1.h"

static int failures;

#define EXPECT(cond)                                                              \
	do {                                                                          \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond);     \
			failures++;                                                           \
		}                                                                         \
	} while (0)

static float
f16_to_f32(uint16_t h)
{
	int e = (h >> 10) & 31, f = h & 1023;
	float v = e ? ldexpf(1.0f + (float)f / 1024, e - 15) : ldexpf((float)f, -24);
	return h & 0x8000 ? -v : v;
}

int
main(void)
{
	/* sign s, exponent e, mantissa m: e = 0: m·0.5; else (1 + m/2)·2^(e-1) */
	static const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
	/* f16 of 0.5 = 0x3800, 1 = 0x3C00, 1.5 = 0x3E00, 2 = 0x4000, 3 = 0x4200,
	 * 4 = 0x4400, 6 = 0x4600 */
	uint32_t t[2];

	EXPECT(e2m1_f16_hi_bytes(t) == 0);
	EXPECT(t[0] == 0x3E3C3800u);
	EXPECT(t[1] == 0x46444240u);
	for (int c = 0; c < 16; c++) {
		uint16_t h = e2m1_f16_bits(c);
		float v = f16_to_f32(h);
		EXPECT(v == want[c]);
		EXPECT(!!(h & 0x8000) == (c >= 8)); /* -0 keeps its sign */
		EXPECT((h & 0xff) == 0);
		if (c < 8)
			EXPECT(e2m1_magnitude(c) == want[c]);
	}
	if (failures)
		fprintf(stderr, "test_e2m1: %d failures\n", failures);
	else
		printf("test_e2m1: ok\n");
	return failures ? 1 : 0;
}
