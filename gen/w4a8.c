/* The W4A8 folding rule (w4a8.h; docs/hardware.md, "FP4 weights as
 * E4M3"). The E4M3 bytes are found by search over the E4M3 codes that
 * dtype_decode gives, so no bit pattern here is written by hand. */
#include <math.h>

#include "dtype.h"
#include "w4a8.h"

int
w4a8_ref_exponent(const uint8_t *e, int n)
{
	int mx = 0;

	for (int i = 0; i < n; i++) {
		if (e[i] == 0xFF)
			return -1000;
		mx = e[i] > mx ? e[i] : mx;
	}
	return mx - W4A8_DMAX;
}

int
w4a8_block_exact(const uint8_t *e, int n)
{
	int mn = 255, mx = 0;

	for (int i = 0; i < n; i++) {
		if (e[i] == 0xFF)
			return 0;
		mn = e[i] < mn ? e[i] : mn;
		mx = e[i] > mx ? e[i] : mx;
	}
	return mx - mn <= W4A8_SPAN;
}

int64_t
w4a8_inexact_blocks(const uint8_t *s, uint64_t rows, uint32_t K)
{
	int64_t n = 0;
	uint32_t g = K / W4A8_VEC, per = W4A8_BLOCK / W4A8_VEC;

	if (K % W4A8_BLOCK)
		return -1;
	for (uint64_t r = 0; r < rows; r++)
		for (uint32_t b = 0; b < g; b += per)
			n += !w4a8_block_exact(s + r * g + b, (int)per);
	return n;
}

int
w4a8_e4m3(int c, int d)
{
	double v, best = INFINITY;
	int code = 0;

	if (c < 0 || c > 15 || d > W4A8_DMAX || dtype_decode(DT_E2M1, (uint32_t)(c & 7), &v) < 0)
		return -1;
	v = ldexp(v, d < W4A8_DZERO ? W4A8_DZERO : d);
	/* the finite positive E4M3 codes in increasing order: 0x00..0x7E */
	for (int k = 0; k < 0x7F; k++) {
		double x, dist;
		dtype_decode(DT_E4M3, (uint32_t)k, &x);
		dist = fabs(x - v);
		/* strictly nearer wins; a tie goes to the even code (mantissa lsb 0) */
		if (dist < best || (dist == best && !(k & 1))) {
			best = dist;
			code = k;
		}
	}
	return code | (c & 8) << 4;
}

int
w4a8_lut(int d, uint32_t out[2])
{
	out[0] = out[1] = 0;
	if (d > W4A8_DMAX)
		return -1;
	for (int c = 0; c < 8; c++)
		out[c / 4] |= (uint32_t)w4a8_e4m3(c, d) << (8 * (c % 4));
	return 0;
}
