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

/* The formats by hand (docs/ABI.md, "Cache formats"). */
static const struct {
	const char *name;
	int dqk_default, dqk_other; /* head_dim_qk stored (other 0: only the default) */
	int nope_fp8, scale, group; /* group 0: one scale per token */
	int tail;                   /* scales in the page's tail, this many bytes per token */
	size_t page_align;
} formats[] = {
	{"bf16", 512, 576, 0, 0, 0, 0, 1},
	{"fp8-token", 512, 576, 1, 2, 0, 0, 1},
	{"fp8-v4", 512, 0, 1, 1, 64, 8, 576},
	{"fp8-v32", 576, 0, 1, 2, 128, 0, 1},
};

int
decode_ref_format(const char *name, int d_qk, DecodeRefFormat *f)
{
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
		size_t nope_bytes, sc_bytes = 0;
		if (strcmp(name, formats[i].name) != 0)
			continue;
		if (!d_qk)
			d_qk = formats[i].dqk_default;
		if (d_qk != formats[i].dqk_default && d_qk != formats[i].dqk_other)
			return -1;
		memset(f, 0, sizeof *f);
		f->name = formats[i].name;
		f->d_qk = d_qk;
		f->d_nope = d_qk - 64;
		f->nope_fp8 = formats[i].nope_fp8;
		f->scale = formats[i].scale;
		f->group = formats[i].group ? formats[i].group : f->d_nope;
		nope_bytes = (size_t)f->d_nope * (f->nope_fp8 ? 1 : 2);
		f->scale_at = -1;
		if (f->scale && !formats[i].tail) {
			/* fp32 scales after the NoPE bytes, padded to 16 */
			f->scale_at = (long)nope_bytes;
			sc_bytes = ((size_t)(f->d_nope / f->group) * 4 + 15) / 16 * 16;
		}
		f->tail_bytes = (size_t)formats[i].tail;
		f->rope_at = nope_bytes + sc_bytes;
		f->row_bytes = f->rope_at + 128;
		f->page_align = formats[i].page_align;
		return 0;
	}
	return -1;
}

size_t
decode_ref_page_bytes(const DecodeRefFormat *f, int ps)
{
	size_t b = (size_t)ps * (f->row_bytes + f->tail_bytes);

	return (b + f->page_align - 1) / f->page_align * f->page_align;
}

uint8_t *
decode_ref_token(const DecodeRefFormat *f, uint8_t *cache, int ps, uint32_t idx)
{
	return cache + (idx / (uint32_t)ps) * decode_ref_page_bytes(f, ps) + (idx % (uint32_t)ps) * f->row_bytes;
}

uint8_t *
decode_ref_token_scales(const DecodeRefFormat *f, uint8_t *cache, int ps, uint32_t idx)
{
	uint8_t *page = cache + (idx / (uint32_t)ps) * decode_ref_page_bytes(f, ps);

	if (!f->scale)
		return NULL;
	if (f->scale_at >= 0)
		return decode_ref_token(f, cache, ps, idx) + f->scale_at;
	return page + (size_t)ps * f->row_bytes + (idx % (uint32_t)ps) * f->tail_bytes;
}

void
decode_ref_quantize(const DecodeRefFormat *f, const uint16_t *bf16, uint8_t *row, uint8_t *scales)
{
	if (!f->nope_fp8) {
		memcpy(row, bf16, 2 * (size_t)f->d_qk);
		return;
	}
	for (int g = 0; g < f->d_nope / f->group; g++) {
		double amax = 0, s;
		int e;
		for (int i = 0; i < f->group; i++)
			amax = fmax(amax, fabs((double)num_bf16_to_f32(bf16[g * f->group + i])));
		s = fmax(amax / 448, 1e-4);
		if (f->scale == 2 && f->group == f->d_nope) {
			/* fp8-token: any fp32 */
			float sf = (float)s;
			s = sf;
			memcpy(scales, &sf, 4);
		} else {
			/* 2^ceil(log2(s)): frexp gives s = m·2^e with m in [0.5, 1) */
			(void)frexp(s, &e);
			if (ldexp(1, e - 1) == s)
				e--;
			s = ldexp(1, e);
			if (f->scale == 1) {
				scales[g] = (uint8_t)(e + 127);
			} else {
				float sf = (float)s;
				memcpy(scales + 4 * g, &sf, 4);
			}
		}
		for (int i = 0; i < f->group; i++)
			row[g * f->group + i] = decode_f64_to_e4m3((double)num_bf16_to_f32(bf16[g * f->group + i]) / s);
	}
	if (f->scale == 1)
		for (size_t i = (size_t)(f->d_nope / f->group); i < f->tail_bytes; i++)
			scales[i] = 0;
	if (f->scale_at >= 0)
		for (size_t i = (size_t)(f->d_nope / f->group) * 4; i < f->rope_at - (size_t)f->scale_at; i++)
			scales[i] = 0;
	memcpy(row + f->rope_at, bf16 + f->d_nope, 128);
}

void
decode_ref_dequantize(const DecodeRefFormat *f, const uint8_t *row, const uint8_t *scales, double *out)
{
	for (int i = 0; i < f->d_nope; i++) {
		uint16_t h;
		float sf;
		if (!f->nope_fp8) {
			memcpy(&h, row + 2 * i, 2);
			out[i] = (double)num_bf16_to_f32(h);
		} else if (f->scale == 1) {
			out[i] = decode_e4m3_to_f64(row[i]) * ldexp(1, (int)scales[i / f->group] - 127);
		} else {
			memcpy(&sf, scales + 4 * (i / f->group), 4);
			out[i] = decode_e4m3_to_f64(row[i]) * (double)sf;
		}
	}
	for (int i = 0; i < 64; i++) {
		uint16_t h;
		memcpy(&h, row + f->rope_at + 2 * i, 2);
		out[f->d_nope + i] = (double)num_bf16_to_f32(h);
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
