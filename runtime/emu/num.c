/* Number formats: bit patterns <-> float for f32/f64, bf16, f16, the fp8
 * formats and tf32, with the rounding modes of cvt (PTX ISA §9.7.9.21,
 * §5.2.5 "Alternate floating point data formats"); decoders of the fp6/fp4
 * MMA element formats and the block-scale formats (PTX ISA §5.2.3,
 * docs/hardware.md, "Number formats"). */
#include <math.h>
#include <string.h>

#include "emu.h"

float
emu_f32(uint32_t bits)
{
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

uint32_t
emu_f32_bits(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

double
emu_f64(uint64_t bits)
{
	double d;
	memcpy(&d, &bits, 8);
	return d;
}

uint64_t
emu_f64_bits(double d)
{
	uint64_t b;
	memcpy(&b, &d, 8);
	return b;
}

float
emu_bf16_to_f32(uint16_t h)
{
	return emu_f32((uint32_t)h << 16);
}

/* A binary format with E exponent bits, M mantissa bits and exponent bias;
 * inf: it has infinities (else overflow saturates or gives NaN). */
typedef struct Fmt {
	int e, m, bias, inf;
	uint32_t nan;    /* the canonical NaN code (magnitude) */
	uint32_t maxfin; /* largest finite magnitude code */
} Fmt;

static const Fmt fmt_f16 = {5, 10, 15, 1, 0x7fff, 0x7bff};
static const Fmt fmt_bf16 = {8, 7, 127, 1, 0x7fff, 0x7f7f};
static const Fmt fmt_e4m3 = {4, 3, 7, 0, 0x7f, 0x7e};
static const Fmt fmt_e5m2 = {5, 2, 15, 1, 0x7f, 0x7b};
/* no infinities and no NaN: nan is out of the code range */
static const Fmt fmt_e2m3 = {2, 3, 1, 0, UINT32_MAX, 0x1f};
static const Fmt fmt_e3m2 = {3, 2, 3, 0, UINT32_MAX, 0x1f};
static const Fmt fmt_e2m1 = {2, 1, 1, 0, UINT32_MAX, 0x7};

/* Rounds a non-negative magnitude q (an exact double) to an integer: mode
 * RND_RN ties to even, RZ toward zero, RM/RP toward -inf/+inf given sign. */
static double
round_int(double q, int rnd, int neg)
{
	switch (rnd) {
	case RND_RZ:
		return trunc(q);
	case RND_RM:
		return neg ? ceil(q) : floor(q);
	case RND_RP:
		return neg ? floor(q) : ceil(q);
	case RND_RNA:
		return floor(q + 0.5);
	default: {
		double r = floor(q);
		double d = q - r;
		if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0))
			r += 1.0;
		return r;
	}
	}
}

/* sat: 1 .sat (clamp to [0,1] for floats is the caller's), 2 .satfinite. */
static uint32_t
encode(double x, const Fmt *f, int rnd, int satfinite)
{
	uint32_t sign = signbit(x) ? 1u << (f->e + f->m) : 0;
	if (isnan(x))
		return sign | f->nan;
	int neg = sign != 0;
	double a = fabs(x);
	uint32_t infcode = ((1u << f->e) - 1) << f->m;
	if (isinf(a)) {
		if (satfinite || !f->inf)
			return sign | (satfinite ? f->maxfin : f->nan);
		return sign | infcode;
	}
	if (a == 0)
		return sign;
	int ex;
	frexp(a, &ex); /* a = s * 2^ex, s in [0.5, 1) */
	int e = ex - 1;
	int emin = 1 - f->bias;
	uint32_t code;
	if (e < emin) {
		double q = round_int(ldexp(a, f->m - emin), rnd, neg);
		code = (uint32_t)q; /* 2^m rolls into the smallest normal */
	} else {
		double q = round_int(ldexp(a, f->m - e), rnd, neg);
		if (q >= ldexp(1.0, f->m + 1)) {
			q = ldexp(1.0, f->m);
			e++;
		}
		long field = (long)e + f->bias;
		if (field >= (1L << f->e) - (f->inf ? 1 : 0))
			code = UINT32_MAX; /* overflow */
		else
			code = ((uint32_t)field << f->m) | ((uint32_t)q - (1u << f->m));
	}
	if (code == UINT32_MAX || code > f->maxfin) {
		/* overflow: RZ and the rounding away from infinity stay finite */
		int to_max = satfinite || rnd == RND_RZ || (rnd == RND_RM && !neg) || (rnd == RND_RP && neg);
		if (!f->inf && !satfinite)
			return sign | f->nan;
		return sign | (to_max || !f->inf ? f->maxfin : infcode);
	}
	return sign | code;
}

uint16_t
emu_f32_to_bf16(float f, int rnd)
{
	uint32_t b = emu_f32_bits(f);
	if (rnd == RND_RN || rnd == RND_NONE) {
		if (isnan(f))
			return 0x7fff; /* canonical NaN, as cvt.rn.bf16.f32 produces */
		b += 0x7fffu + ((b >> 16) & 1u);
		return (uint16_t)(b >> 16);
	}
	return (uint16_t)encode(f, &fmt_bf16, rnd, 0);
}

float
emu_f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31;
	int e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ffu;
	if (e == 0x1f)
		return emu_f32(s | 0x7f800000u | (m << 13));
	if (e == 0) {
		float v = (float)ldexp((double)m, -24);
		return s ? -v : v;
	}
	return emu_f32(s | (uint32_t)(e - 15 + 127) << 23 | m << 13);
}

uint16_t
emu_f32_to_f16(float f, int rnd, int sat)
{
	return (uint16_t)encode(f, &fmt_f16, rnd == RND_NONE ? RND_RN : rnd, sat == 2);
}

/* A code of e + m magnitude bits under a sign bit (sign at bit e + m). */
static float
decode_small(uint32_t v, const Fmt *f)
{
	int w = f->e + f->m;
	int neg = (int)(v >> w & 1);
	uint32_t mag = v & ((1u << w) - 1);
	int e = (int)(mag >> f->m);
	uint32_t m = mag & ((1u << f->m) - 1);
	double r;
	if (!f->inf && mag == f->nan)
		return NAN;
	if (f->inf && e == (1 << f->e) - 1)
		r = m ? NAN : INFINITY;
	else if (e == 0)
		r = ldexp((double)m, 1 - f->bias - f->m);
	else
		r = ldexp((double)((1u << f->m) | m), e - f->bias - f->m);
	return (float)(neg ? -r : r);
}

float
emu_e4m3_to_f32(uint8_t v)
{
	return decode_small(v, &fmt_e4m3);
}

float
emu_e5m2_to_f32(uint8_t v)
{
	return decode_small(v, &fmt_e5m2);
}

float
emu_e2m3_to_f32(uint8_t v)
{
	return decode_small(v & 0x3fu, &fmt_e2m3);
}

float
emu_e3m2_to_f32(uint8_t v)
{
	return decode_small(v & 0x3fu, &fmt_e3m2);
}

float
emu_e2m1_to_f32(uint8_t v)
{
	return decode_small(v & 0xfu, &fmt_e2m1);
}

/* 2^(v - 127); 0xff is the only NaN, there is no zero (docs/hardware.md, "Number formats"). */
float
emu_ue8m0_to_f32(uint8_t v)
{
	return v == 0xff ? NAN : ldexpf(1.0f, (int)v - 127);
}

/* E4M3 without the sign: the code's bit 7 is padding (PTX ISA §5.2.3 ue4m3,
 * docs/hardware.md, "Number formats": cuBLAS ignores it), 0x7f is NaN. */
float
emu_ue4m3_to_f32(uint8_t v)
{
	return decode_small(v & 0x7fu, &fmt_e4m3);
}

uint8_t
emu_f32_to_e4m3(float f, int satfinite)
{
	return (uint8_t)encode(f, &fmt_e4m3, RND_RN, satfinite);
}

uint8_t
emu_f32_to_e5m2(float f, int satfinite)
{
	return (uint8_t)encode(f, &fmt_e5m2, RND_RN, satfinite);
}

/* The tensor core reads tf32 as the top 19 bits of the f32 pattern. */
float
emu_tf32(float f)
{
	return emu_f32(emu_f32_bits(f) & 0xffffe000u);
}

float
emu_to_f32(uint64_t bits, EmuType ty)
{
	switch (ty) {
	case T_F16: return emu_f16_to_f32((uint16_t)bits);
	case T_BF16: return emu_bf16_to_f32((uint16_t)bits);
	case T_E4M3: return emu_e4m3_to_f32((uint8_t)bits);
	case T_E5M2: return emu_e5m2_to_f32((uint8_t)bits);
	case T_TF32: return emu_tf32(emu_f32((uint32_t)bits));
	case T_F64: return (float)emu_f64(bits);
	default: return emu_f32((uint32_t)bits);
	}
}
