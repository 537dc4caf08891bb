/* cvt (PTX ISA §9.7.9.21): integer widening/narrowing, float <-> integer,
 * float <-> float with rounding, and the packed forms. In the packed forms
 * from two f32 sources (cvt.rn.bf16x2.f32 d, a, b) the FIRST source goes to
 * the UPPER half of d. */
#include <math.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

enum { CVT_RELU = 1 };

int
emu_mod_cvt(EmuInsn *in, const char *m, EmuParse *p)
{
	if (strcmp(m, "relu") == 0) {
		in->aux[0] |= CVT_RELU;
		return 1;
	}
	return 0;
}

static int
is_float(EmuType t)
{
	return emu_types[t].kind == TK_FLOAT;
}

int
emu_chk_cvt(EmuInsn *in, EmuParse *p)
{
	if (in->ntypes != 2)
		return emu_parse_fail(p, "cvt needs a destination and a source type");
	EmuType d = in->t[0], s = in->t[1];
	int packed2 = d == T_F16X2 || d == T_BF16X2 || d == T_E4M3X2 || d == T_E5M2X2;
	if (packed2 && s == T_F32) {
		if (in->nop != 3)
			return emu_parse_fail(p, "cvt.%s.f32 takes two sources", emu_types[d].name);
		if ((d == T_E4M3X2 || d == T_E5M2X2) && in->sat != 2)
			return emu_parse_fail(p, "cvt to %s needs .satfinite", emu_types[d].name);
		return 0;
	}
	if (in->nop != 2)
		return emu_parse_fail(p, "cvt takes one source here");
	if (d == T_F16X2 && (s == T_E4M3X2 || s == T_E5M2X2))
		return 0;
	if (packed2 || s == T_F16X2 || s == T_BF16X2 || s == T_E4M3X2 || s == T_E5M2X2)
		return emu_parse_fail(p, "cvt.%s.%s is not supported by the emulator", emu_types[d].name,
		                      emu_types[s].name);
	if (d == T_PRED || s == T_PRED || d == T_B128 || s == T_B128)
		return emu_parse_fail(p, "cvt.%s.%s: invalid types", emu_types[d].name, emu_types[s].name);
	/* float -> integer needs an integer rounding; float -> narrower float
	 * needs a float rounding (PTX ISA §9.7.9.21 rules) */
	if (is_float(s) && !is_float(d) && in->rnd && in->rnd < RND_RNI)
		return emu_parse_fail(p, "cvt float->integer takes .rni/.rzi/.rmi/.rpi");
	if (is_float(s) && is_float(d) && emu_types[d].bits < emu_types[s].bits && d != T_TF32 &&
	    !in->rnd)
		return emu_parse_fail(p, "cvt.%s.%s needs a rounding modifier (.rn, ...)",
		                      emu_types[d].name, emu_types[s].name);
	return 0;
}

static double
round_to_int(double x, int rnd)
{
	switch (rnd) {
	case RND_RZI: return trunc(x);
	case RND_RMI: return floor(x);
	case RND_RPI: return ceil(x);
	case RND_RNI: return nearbyint(x);
	default: return x;
	}
}

static uint64_t
to_int(double x, EmuType d)
{
	int n = emu_types[d].bits;
	int sign = emu_types[d].kind == TK_SINT;
	if (isnan(x))
		return 0;
	/* saturate to the destination range (PTX: float->int conversions saturate) */
	double lo = sign ? -ldexp(1.0, n - 1) : 0.0;
	double hi = sign ? ldexp(1.0, n - 1) - 1 : ldexp(1.0, n) - 1;
	if (x < lo)
		x = lo;
	if (x > hi)
		x = hi;
	uint64_t v = sign ? (uint64_t)(int64_t)x : (uint64_t)x;
	return n >= 64 ? v : v & ((UINT64_C(1) << n) - 1);
}

static uint64_t
from_double(double x, EmuType d, const EmuInsn *in)
{
	int rnd = in->rnd;
	if (in->aux[0] & CVT_RELU && (x < 0 || isnan(x)))
		x = isnan(x) ? x : 0.0;
	if (in->sat == 1) {
		if (isnan(x))
			x = 0.0;
		x = x < 0 ? 0 : x > 1 ? 1 : x;
	}
	switch (d) {
	case T_F64: return emu_f64_bits(x);
	case T_F32: {
		if (rnd >= RND_RNI && rnd <= RND_RPI)
			return emu_f32_bits((float)round_to_int(x, rnd));
		return emu_f32_bits((float)x);
	}
	case T_TF32: {
		/* cvt.rna.tf32.f32: round to 10 mantissa bits, ties away */
		uint32_t b = emu_f32_bits((float)x);
		if (!isnan(x) && !isinf(x))
			b = (b + 0x1000u) & 0xffffe000u;
		return b;
	}
	case T_F16: return emu_f32_to_f16((float)x, rnd, in->sat);
	case T_BF16: return emu_f32_to_bf16((float)x, rnd);
	default: return 0;
	}
}

int
emu_op_cvt(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuType d = in->t[0], s = in->t[1];
	const EmuOperand *dst = emu_opnd(c, in, 0);
	uint64_t a;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	uint64_t r;
	if (in->nop == 3) {
		uint64_t b;
		if (emu_geti(c, t, in, 2, &b))
			return EMU_STOP;
		double hi = emu_f32((uint32_t)a), lo = emu_f32((uint32_t)b);
		if (d == T_E4M3X2 || d == T_E5M2X2) {
			if (in->aux[0] & CVT_RELU) {
				hi = hi < 0 ? 0 : hi;
				lo = lo < 0 ? 0 : lo;
			}
			uint8_t (*f)(float, int) = d == T_E4M3X2 ? emu_f32_to_e4m3 : emu_f32_to_e5m2;
			r = (uint64_t)f((float)hi, 1) << 8 | f((float)lo, 1);
		} else {
			EmuType h = d == T_F16X2 ? T_F16 : T_BF16;
			r = (from_double(hi, h, in) & 0xffff) << 16 | (from_double(lo, h, in) & 0xffff);
		}
	} else if (d == T_F16X2) {
		/* cvt.rn.f16x2.e4m3x2: each byte to an f16, low byte to the low half */
		float (*f)(uint8_t) = s == T_E4M3X2 ? emu_e4m3_to_f32 : emu_e5m2_to_f32;
		r = (uint64_t)emu_f32_to_f16(f((uint8_t)(a >> 8)), RND_RN, 0) << 16 |
		    emu_f32_to_f16(f((uint8_t)a), RND_RN, 0);
	} else if (is_float(s)) {
		double x = s == T_F64 ? emu_f64(a) : (double)emu_to_f32(a, s);
		if (in->ftz && s == T_F32 && fpclassify(x) == FP_SUBNORMAL)
			x = copysign(0.0, x);
		if (is_float(d))
			r = from_double(x, d, in);
		else
			r = to_int(round_to_int(x, in->rnd ? in->rnd : RND_RZI), d);
	} else {
		int sn = emu_types[s].bits, dn = emu_types[d].bits;
		int ssign = emu_types[s].kind == TK_SINT;
		uint64_t v = sn >= 64 ? a : a & ((UINT64_C(1) << sn) - 1);
		int64_t sv = ssign && sn < 64 ? (int64_t)((v ^ (UINT64_C(1) << (sn - 1))) -
		                                          (UINT64_C(1) << (sn - 1)))
		                              : (int64_t)v;
		if (is_float(d)) {
			double x = ssign ? (double)sv : (double)v;
			r = from_double(x, d, in);
		} else if (in->sat) {
			double x = ssign ? (double)sv : (double)v;
			r = to_int(x, d);
		} else {
			uint64_t w = ssign ? (uint64_t)sv : v;
			r = dn >= 64 ? w : w & ((UINT64_C(1) << dn) - 1);
		}
	}
	if (emu_set(c, t, in, dst, r))
		return EMU_STOP;
	return EMU_NEXT;
}
