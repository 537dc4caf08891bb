#include <math.h>
#include <string.h>

#include "decode_ref.h"
#include "num.h"

uint8_t
decode_f64_to_e4m3(double v)
{
	uint8_t sign = signbit(v) ? 0x80 : 0;
	double a = fabs(v), q, r;
	int e;

	if (isnan(v))
		return 0x7f;
	if (a == 0)
		return sign;
	/* quantum: 2^-9 below the normal range (2^-6), else 2^(E-3) */
	e = ilogb(a);
	q = e < -6 ? ldexp(1, -9) : ldexp(1, e - 3);
	r = nearbyint(a / q) * q; /* the default rounding mode: to nearest even */
	if (r > 448)
		r = 448;
	if (r == 0)
		return sign;
	if (r < ldexp(1, -6))
		return (uint8_t)(sign | (uint8_t)(r / ldexp(1, -9)));
	e = ilogb(r);
	return (uint8_t)(sign | (uint8_t)((e + 7) << 3) | (uint8_t)(r / ldexp(1, e - 3) - 8));
}

double
decode_e4m3_to_f64(uint8_t b)
{
	int e = (b >> 3) & 15, m = b & 7;
	double v;

	if ((b & 0x7f) == 0x7f)
		return NAN;
	v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
	return b & 0x80 ? -v : v;
}

size_t
decode_v4_page_bytes(int ps)
{
	size_t b = (size_t)ps * (DECODE_V4_ROW + DECODE_V4_SCALES);

	return (b + DECODE_V4_ROW - 1) / DECODE_V4_ROW * DECODE_V4_ROW;
}

uint8_t *
decode_v4_row(uint8_t *cache, int ps, uint32_t idx)
{
	return cache + (idx / (uint32_t)ps) * decode_v4_page_bytes(ps) + (idx % (uint32_t)ps) * DECODE_V4_ROW;
}

uint8_t *
decode_v4_scales(uint8_t *cache, int ps, uint32_t idx)
{
	return cache + (idx / (uint32_t)ps) * decode_v4_page_bytes(ps) + (size_t)ps * DECODE_V4_ROW +
	       (idx % (uint32_t)ps) * DECODE_V4_SCALES;
}

void
decode_v4_quantize(const uint16_t *bf16, uint8_t *row, uint8_t *scales)
{
	for (int g = 0; g < DECODE_V4_NOPE / DECODE_V4_GROUP; g++) {
		double amax = 0, s;
		int e;
		for (int i = 0; i < DECODE_V4_GROUP; i++)
			amax = fmax(amax, fabs((double)num_bf16_to_f32(bf16[g * DECODE_V4_GROUP + i])));
		/* 2^ceil(log2(x)): frexp gives x = f·2^e with f in [0.5, 1) */
		s = fmax(amax / 448, 1e-4);
		(void)frexp(s, &e);
		if (ldexp(1, e - 1) == s)
			e--;
		scales[g] = (uint8_t)(e + 127);
		for (int i = 0; i < DECODE_V4_GROUP; i++)
			row[g * DECODE_V4_GROUP + i] =
			    decode_f64_to_e4m3((double)num_bf16_to_f32(bf16[g * DECODE_V4_GROUP + i]) / ldexp(1, e));
	}
	scales[DECODE_V4_SCALES - 1] = 0;
	memcpy(row + DECODE_V4_NOPE, bf16 + DECODE_V4_NOPE, 2 * DECODE_V4_ROPE);
}

void
decode_v4_dequantize(const uint8_t *row, const uint8_t *scales, double *out)
{
	for (int i = 0; i < DECODE_V4_NOPE; i++)
		out[i] = decode_e4m3_to_f64(row[i]) * ldexp(1, (int)scales[i / DECODE_V4_GROUP] - 127);
	for (int i = 0; i < DECODE_V4_ROPE; i++) {
		uint16_t h;
		memcpy(&h, row + DECODE_V4_NOPE + 2 * i, 2);
		out[DECODE_V4_NOPE + i] = (double)num_bf16_to_f32(h);
	}
}

void
decode_ref_row(const double *q, const double *k, size_t n, int d, int dv, double scale,
               int has_sink, double sink, double *o, double *lse)
{
	double m = has_sink ? sink : -INFINITY, l = 0;

	for (int c = 0; c < dv; c++)
		o[c] = 0;
	for (size_t i = 0; i < n; i++) {
		double s = 0;
		for (int c = 0; c < d; c++)
			s += q[c] * k[i * (size_t)d + c];
		m = fmax(m, s * scale);
	}
	if (m == -INFINITY) {
		*lse = -INFINITY;
		return;
	}
	if (has_sink)
		l = exp(sink - m);
	for (size_t i = 0; i < n; i++) {
		double s = 0, p;
		for (int c = 0; c < d; c++)
			s += q[c] * k[i * (size_t)d + c];
		p = exp(s * scale - m);
		l += p;
		for (int c = 0; c < dv; c++)
			o[c] += p * k[i * (size_t)d + c];
	}
	for (int c = 0; c < dv; c++)
		o[c] /= l;
	*lse = m + log(l);
}
