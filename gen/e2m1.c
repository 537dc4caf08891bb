/* The f16 high-byte table of E2M1 (e2m1.h); the values themselves come from
 * the one decode table of the narrow formats (dtype.c). */
#include <math.h>
#include <string.h>

#include "dtype.h"
#include "e2m1.h"

float
e2m1_magnitude(int c)
{
	double v = 0;

	dtype_decode(DT_E2M1, (uint32_t)(c & 7), &v);
	return (float)v;
}

/* The f16 bits of a magnitude that f16 holds exactly (all of the table). */
static uint16_t
f16_of(float v)
{
	int e;
	float m;

	if (v == 0)
		return 0;
	m = frexpf(v, &e); /* v = m·2^e, m in [0.5, 1) */
	/* f16: (1 + f/1024)·2^(E-15), so E = e - 1 + 15, f = (2m - 1)·1024 */
	return (uint16_t)((unsigned)(e + 14) << 10 | (unsigned)((2 * m - 1) * 1024));
}

int
e2m1_f16_hi_bytes(uint32_t out[2])
{
	out[0] = out[1] = 0;
	for (int c = 0; c < 8; c++) {
		uint16_t h = f16_of(e2m1_magnitude(c));
		if (h & 0xff)
			return -1;
		out[c / 4] |= (uint32_t)(h >> 8) << (8 * (c % 4));
	}
	return 0;
}

uint16_t
e2m1_f16_bits(int c)
{
	uint32_t t[2];

	if (e2m1_f16_hi_bytes(t) < 0)
		return 0xffff;
	return (uint16_t)(((t[(c & 7) / 4] >> (8 * (c & 3))) & 0xff) << 8 | (c & 8) << 12);
}
