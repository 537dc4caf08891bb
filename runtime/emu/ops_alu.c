/* Integer, logic, comparison and floating-point arithmetic (PTX ISA §9.7.1
 * integer, §9.7.3 floating point, §9.7.4 half precision, §9.7.6
 * comparison and selection, §9.7.7 logic and shift). Operands are raw bits;
 * each instruction reinterprets them in its type. Floating point follows
 * IEEE with the instruction's rounding mode (round-to-nearest-even by
 * default); .approx functions are computed accurately, which stays within
 * the documented error bounds. */
#include <fenv.h>
#include <math.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

static uint64_t
mask(uint64_t v, int bits)
{
	return bits >= 64 ? v : v & ((UINT64_C(1) << bits) - 1);
}

static int64_t
sext(uint64_t v, int bits)
{
	if (bits >= 64)
		return (int64_t)v;
	uint64_t m = UINT64_C(1) << (bits - 1);
	v = mask(v, bits);
	return (int64_t)((v ^ m) - m);
}

static int
kind(const EmuInsn *in)
{
	return emu_types[in->t[0]].kind;
}

static int
bits(const EmuInsn *in)
{
	return emu_types[in->t[0]].bits;
}

int
emu_chk_alu(EmuInsn *in, EmuParse *p)
{
	if (in->ntypes < 1)
		return emu_parse_fail(p, "%s needs a type", in->def->name);
	if (in->ntypes > 1)
		return emu_parse_fail(p, "%s takes one type", in->def->name);
	EmuType ty = in->t[0];
	if (ty == T_B128 || ty == T_TF32 || ty == T_E4M3 || ty == T_E5M2 || ty == T_E4M3X2 ||
	    ty == T_E5M2X2)
		return emu_parse_fail(p, "%s.%s is not supported by the emulator", in->def->name,
		                      emu_types[ty].name);
	/* packed f32 pairs: add, sub, mul and fma only (PTX ISA §9.7.3, sm_100) */
	if (ty == T_F32X2 && strcmp(in->def->name, "add") && strcmp(in->def->name, "sub") &&
	    strcmp(in->def->name, "mul") && strcmp(in->def->name, "fma"))
		return emu_parse_fail(p, "%s.f32x2 does not exist: .f32x2 is an add, sub, mul and fma type",
		                      in->def->name);
	return 0;
}

int
emu_chk_setp(EmuInsn *in, EmuParse *p)
{
	if (emu_chk_alu(in, p))
		return -1;
	if ((in->bop != BOP_NONE) != (in->nop == 4))
		return emu_parse_fail(p, "setp: a combining .and/.or/.xor takes a fourth predicate "
		                      "operand, and only then");
	return 0;
}

/* ---- floats ----------------------------------------------------------------- */

enum { FADD, FSUB, FMUL, FDIV, FMIN, FMAX, FFMA, FNEG, FABS, FRCP, FSQRT, FRSQRT, FEX2,
       FLG2, FSIN, FCOS, FTANH, FCOPYSIGN };

static float
ftz32(float x, int ftz)
{
	if (ftz && fpclassify(x) == FP_SUBNORMAL)
		return copysignf(0.0f, x);
	return x;
}

static double
fcalc(int op, double a, double b, double c3, int is32)
{
	switch (op) {
	case FADD: return is32 ? (double)((float)a + (float)b) : a + b;
	case FSUB: return is32 ? (double)((float)a - (float)b) : a - b;
	case FMUL: return is32 ? (double)((float)a * (float)b) : a * b;
	case FDIV: return is32 ? (double)((float)a / (float)b) : a / b;
	case FMIN: return is32 ? (double)fminf((float)a, (float)b) : fmin(a, b);
	case FMAX: return is32 ? (double)fmaxf((float)a, (float)b) : fmax(a, b);
	case FFMA: return is32 ? (double)fmaf((float)a, (float)b, (float)c3) : fma(a, b, c3);
	case FNEG: return -a;
	case FABS: return fabs(a);
	case FRCP: return is32 ? (double)(1.0f / (float)a) : 1.0 / a;
	case FSQRT: return is32 ? (double)sqrtf((float)a) : sqrt(a);
	case FRSQRT: return is32 ? (double)(1.0f / sqrtf((float)a)) : 1.0 / sqrt(a);
	case FEX2: return is32 ? (double)exp2f((float)a) : exp2(a);
	case FLG2: return is32 ? (double)log2f((float)a) : log2(a);
	case FSIN: return is32 ? (double)sinf((float)a) : sin(a);
	case FCOS: return is32 ? (double)cosf((float)a) : cos(a);
	case FTANH: return is32 ? (double)tanhf((float)a) : tanh(a);
	case FCOPYSIGN: return copysign(b, a);
	default: return NAN;
	}
}

static int
cround(int rnd)
{
	switch (rnd) {
	case RND_RZ: return FE_TOWARDZERO;
	case RND_RM: return FE_DOWNWARD;
	case RND_RP: return FE_UPWARD;
	default: return FE_TONEAREST;
	}
}

/* One scalar element of type ty (f16/bf16/f32/f64). */
static uint64_t
fone(const EmuInsn *in, EmuType ty, int op, uint64_t a, uint64_t b, uint64_t c3)
{
	int rnd = in->rnd;
	/* directed rounding is rare: only then touch the FP environment */
	int directed = rnd > RND_RN && rnd <= RND_RP;
	if (ty == T_F64) {
		int old = directed ? fegetround() : 0;
		if (directed)
			fesetround(cround(rnd));
		double r = fcalc(op, emu_f64(a), emu_f64(b), emu_f64(c3), 0);
		if (directed)
			fesetround(old);
		return emu_f64_bits(r);
	}
	float x = emu_to_f32(a, ty), y = emu_to_f32(b, ty), z = emu_to_f32(c3, ty);
	if (ty == T_F32) {
		x = ftz32(x, in->ftz);
		y = ftz32(y, in->ftz);
		z = ftz32(z, in->ftz);
	}
	double r;
	if (ty == T_F32) {
		int old = directed ? fegetround() : 0;
		if (directed)
			fesetround(cround(rnd));
		r = fcalc(op, x, y, z, 1);
		if (directed)
			fesetround(old);
	} else {
		/* half types: exact in double, one rounding to the format */
		r = op == FFMA ? fma((double)x, (double)y, (double)z) : fcalc(op, x, y, z, 0);
	}
	float rf = (float)r;
	if (in->sat) {
		if (isnan(rf))
			rf = 0.0f;
		rf = rf < 0.0f ? 0.0f : rf > 1.0f ? 1.0f : rf;
	}
	if (ty == T_F32)
		return emu_f32_bits(ftz32(rf, in->ftz));
	if (ty == T_F16)
		return emu_f32_to_f16((float)r, rnd, 0);
	return emu_f32_to_bf16((float)r, rnd);
}

static int
fop(EmuCta *c, EmuThread *t, const EmuInsn *in, int op, int nsrc)
{
	uint64_t s[3] = {0, 0, 0};
	for (int i = 0; i < nsrc; i++)
		if (emu_geti(c, t, in, 1 + i, &s[i]))
			return EMU_STOP;
	EmuType ty = in->t[0];
	uint64_t r;
	if (ty == T_F16X2 || ty == T_BF16X2) {
		EmuType h = ty == T_F16X2 ? T_F16 : T_BF16;
		uint64_t lo = fone(in, h, op, s[0] & 0xffff, s[1] & 0xffff, s[2] & 0xffff);
		uint64_t hi = fone(in, h, op, s[0] >> 16 & 0xffff, s[1] >> 16 & 0xffff, s[2] >> 16 & 0xffff);
		r = (hi & 0xffff) << 16 | (lo & 0xffff);
	} else if (ty == T_F32X2) {
		/* each half as the f32 operation, same rounding and ftz */
		uint64_t lo = fone(in, T_F32, op, s[0] & 0xffffffffu, s[1] & 0xffffffffu, s[2] & 0xffffffffu);
		uint64_t hi = fone(in, T_F32, op, s[0] >> 32, s[1] >> 32, s[2] >> 32);
		r = (hi & 0xffffffffu) << 32 | (lo & 0xffffffffu);
	} else {
		r = fone(in, ty, op, s[0], s[1], s[2]);
	}
	if (emu_set(c, t, in, emu_opnd(c, in, 0), r))
		return EMU_STOP;
	return EMU_NEXT;
}

/* ---- integers ------------------------------------------------------------------ */

static int
src2(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t *a, uint64_t *b)
{
	return emu_geti(c, t, in, 1, a) || emu_geti(c, t, in, 2, b) ? EMU_STOP : 0;
}

static int
put(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t v)
{
	return emu_set(c, t, in, emu_opnd(c, in, 0), v) ? EMU_STOP : EMU_NEXT;
}

static uint64_t
sat32(int64_t v, int sat)
{
	if (sat) {
		if (v > INT32_MAX)
			v = INT32_MAX;
		if (v < INT32_MIN)
			v = INT32_MIN;
	}
	return (uint64_t)v;
}

int
emu_op_add(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, FADD, 2);
	uint64_t a, b;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in);
	if (in->sat && kind(in) == TK_SINT)
		return put(c, t, in, mask(sat32(sext(a, n) + sext(b, n), 1), n));
	return put(c, t, in, mask(a + b, n));
}

int
emu_op_sub(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, FSUB, 2);
	uint64_t a, b;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in);
	if (in->sat && kind(in) == TK_SINT)
		return put(c, t, in, mask(sat32(sext(a, n) - sext(b, n), 1), n));
	return put(c, t, in, mask(a - b, n));
}

/* The full product of two n-bit values as (hi, lo) 64-bit halves. */
static void
mulfull(uint64_t a, uint64_t b, int n, int sign, uint64_t *hi, uint64_t *lo)
{
	if (n <= 32) {
		uint64_t p = sign ? (uint64_t)(sext(a, n) * sext(b, n)) : mask(a, n) * mask(b, n);
		*lo = mask(p, n);
		*hi = mask(sign ? (uint64_t)((int64_t)p >> n) : p >> n, n);
		return;
	}
	__int128 x = sign ? (__int128)(int64_t)a : (__int128)(unsigned __int128)a;
	__int128 y = sign ? (__int128)(int64_t)b : (__int128)(unsigned __int128)b;
	unsigned __int128 p = sign ? (unsigned __int128)(x * y)
	                           : (unsigned __int128)a * (unsigned __int128)b;
	*lo = (uint64_t)p;
	*hi = (uint64_t)(p >> 64);
}

int
emu_op_mul(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, FMUL, 2);
	uint64_t a, b, hi, lo;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in), sign = kind(in) == TK_SINT;
	if (in->mul == MUL_WIDE) {
		uint64_t p = sign ? (uint64_t)(sext(a, n) * sext(b, n)) : mask(a, n) * mask(b, n);
		return put(c, t, in, mask(p, 2 * n));
	}
	mulfull(a, b, n, sign, &hi, &lo);
	return put(c, t, in, in->mul == MUL_HI ? hi : lo);
}

int
emu_op_mad(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, FFMA, 3);
	uint64_t a, b, d, hi, lo;
	if (src2(c, t, in, &a, &b) || emu_geti(c, t, in, 3, &d))
		return EMU_STOP;
	int n = bits(in), sign = kind(in) == TK_SINT;
	if (in->mul == MUL_WIDE) {
		uint64_t p = sign ? (uint64_t)(sext(a, n) * sext(b, n)) : mask(a, n) * mask(b, n);
		return put(c, t, in, mask(p + d, 2 * n));
	}
	mulfull(a, b, n, sign, &hi, &lo);
	uint64_t r = (in->mul == MUL_HI ? hi : lo) + d;
	if (in->sat && sign && in->mul == MUL_HI)
		return put(c, t, in, mask(sat32(sext(hi, n) + sext(d, n), 1), n));
	return put(c, t, in, mask(r, n));
}

int
emu_op_fma(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FFMA, 3);
}

int
emu_op_div(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, FDIV, 2);
	uint64_t a, b;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in);
	/* division by zero is unspecified; the hardware gives all ones */
	if (mask(b, n) == 0)
		return put(c, t, in, mask(UINT64_MAX, n));
	if (kind(in) == TK_SINT) {
		int64_t x = sext(a, n), y = sext(b, n);
		if (y == -1)
			return put(c, t, in, mask((uint64_t)0 - (uint64_t)x, n));
		return put(c, t, in, mask((uint64_t)(x / y), n));
	}
	return put(c, t, in, mask(a, n) / mask(b, n));
}

int
emu_op_rem(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, b;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in);
	if (mask(b, n) == 0)
		return put(c, t, in, mask(a, n));
	if (kind(in) == TK_SINT) {
		int64_t x = sext(a, n), y = sext(b, n);
		if (y == -1)
			return put(c, t, in, 0);
		return put(c, t, in, mask((uint64_t)(x % y), n));
	}
	return put(c, t, in, mask(a, n) % mask(b, n));
}

static int
minmax(EmuCta *c, EmuThread *t, const EmuInsn *in, int max)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, max ? FMAX : FMIN, 2);
	uint64_t a, b;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in);
	int a_less = kind(in) == TK_SINT ? sext(a, n) < sext(b, n) : mask(a, n) < mask(b, n);
	return put(c, t, in, mask(a_less == !max ? a : b, n));
}

int
emu_op_min(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return minmax(c, t, in, 0);
}

int
emu_op_max(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return minmax(c, t, in, 1);
}

int
emu_op_abs(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, FABS, 1);
	uint64_t a;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	int64_t x = sext(a, bits(in));
	return put(c, t, in, mask((uint64_t)(x < 0 ? -x : x), bits(in)));
}

int
emu_op_neg(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (kind(in) == TK_FLOAT)
		return fop(c, t, in, FNEG, 1);
	uint64_t a;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	return put(c, t, in, mask((uint64_t)0 - a, bits(in)));
}

static int
logic(EmuCta *c, EmuThread *t, const EmuInsn *in, int op)
{
	uint64_t a, b = 0;
	if (emu_geti(c, t, in, 1, &a) || (in->nop > 2 && emu_geti(c, t, in, 2, &b)))
		return EMU_STOP;
	uint64_t r = op == 0 ? a & b : op == 1 ? a | b : op == 2 ? a ^ b : ~a;
	if (in->t[0] == T_PRED)
		r &= 1;
	return put(c, t, in, mask(r, bits(in)));
}

int
emu_op_and(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return logic(c, t, in, 0);
}

int
emu_op_or(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return logic(c, t, in, 1);
}

int
emu_op_xor(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return logic(c, t, in, 2);
}

int
emu_op_not(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return logic(c, t, in, 3);
}

int
emu_op_cnot(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	return put(c, t, in, mask(a, bits(in)) == 0);
}

int
emu_op_shl(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, b;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in);
	uint32_t s = (uint32_t)b;
	return put(c, t, in, s >= (uint32_t)n ? 0 : mask(a << s, n));
}

int
emu_op_shr(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, b;
	if (src2(c, t, in, &a, &b))
		return EMU_STOP;
	int n = bits(in);
	uint32_t s = (uint32_t)b;
	if (kind(in) == TK_SINT) {
		int64_t x = sext(a, n);
		return put(c, t, in, mask((uint64_t)(x >> (s >= (uint32_t)n ? (uint32_t)n - 1 : s)), n));
	}
	return put(c, t, in, s >= (uint32_t)n ? 0 : mask(a, n) >> s);
}

int
emu_op_popc(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	return put(c, t, in, (uint64_t)__builtin_popcountll(mask(a, bits(in))));
}

int
emu_op_clz(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	int n = bits(in);
	a = mask(a, n);
	return put(c, t, in, a ? (uint64_t)(__builtin_clzll(a) - (64 - n)) : (uint64_t)n);
}

int
emu_op_brev(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, r = 0;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	int n = bits(in);
	for (int i = 0; i < n; i++)
		if (a >> i & 1)
			r |= UINT64_C(1) << (n - 1 - i);
	return put(c, t, in, r);
}

/* bfe d, a, pos, len: PTX ISA §9.7.1.18 */
int
emu_op_bfe(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, pb, lb;
	if (emu_geti(c, t, in, 1, &a) || emu_geti(c, t, in, 2, &pb) || emu_geti(c, t, in, 3, &lb))
		return EMU_STOP;
	int n = bits(in);
	uint32_t pos = (uint32_t)pb & 0xff, len = (uint32_t)lb & 0xff;
	int sign = kind(in) == TK_SINT;
	uint64_t r = 0;
	int sbit = sign ? (int)(a >> (pos + len - 1 < (uint32_t)n ? pos + len - 1 : (uint32_t)n - 1) & 1)
	                : 0;
	if (len == 0)
		return put(c, t, in, 0);
	for (uint32_t i = 0; i < (uint32_t)n; i++) {
		uint64_t bit = i < len && pos + i < (uint32_t)n ? a >> (pos + i) & 1 : (uint64_t)sbit;
		r |= bit << i;
	}
	return put(c, t, in, mask(r, n));
}

int
emu_op_bfi(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t f, b, pb, lb;
	if (emu_geti(c, t, in, 1, &f) || emu_geti(c, t, in, 2, &b) || emu_geti(c, t, in, 3, &pb) ||
	    emu_geti(c, t, in, 4, &lb))
		return EMU_STOP;
	int n = bits(in);
	uint32_t pos = (uint32_t)pb & 0xff, len = (uint32_t)lb & 0xff;
	uint64_t r = b;
	for (uint32_t i = 0; i < len && pos + i < (uint32_t)n; i++) {
		r &= ~(UINT64_C(1) << (pos + i));
		r |= (f >> i & 1) << (pos + i);
	}
	return put(c, t, in, mask(r, n));
}

/* prmt.b32 d, a, b, c: default mode (PTX ISA §9.7.9.7) */
int
emu_op_prmt(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, b, s;
	if (emu_geti(c, t, in, 1, &a) || emu_geti(c, t, in, 2, &b) || emu_geti(c, t, in, 3, &s))
		return EMU_STOP;
	uint64_t v = (b & 0xffffffffu) << 32 | (a & 0xffffffffu);
	uint32_t r = 0;
	for (int i = 0; i < 4; i++) {
		uint32_t sel = (uint32_t)(s >> (4 * i)) & 0xf;
		uint32_t byte = (uint32_t)(v >> (8 * (sel & 7))) & 0xff;
		if (sel & 8)
			byte = byte & 0x80 ? 0xff : 0;
		r |= byte << (8 * i);
	}
	return put(c, t, in, r);
}

int
emu_op_lop3(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, b, d, lut;
	if (emu_geti(c, t, in, 1, &a) || emu_geti(c, t, in, 2, &b) || emu_geti(c, t, in, 3, &d) ||
	    emu_geti(c, t, in, 4, &lut))
		return EMU_STOP;
	uint64_t r = 0;
	for (int i = 0; i < 64; i++) {
		int idx = (int)((a >> i & 1) << 2 | (b >> i & 1) << 1 | (d >> i & 1));
		r |= (lut >> idx & 1) << i;
	}
	return put(c, t, in, mask(r, bits(in)));
}

/* ---- comparison and selection ----------------------------------------------------- */

static int
fcmp(int cmp, double a, double b)
{
	int un = isnan(a) || isnan(b);
	switch (cmp) {
	case CMP_EQ: return !un && a == b;
	case CMP_NE: return !un && a != b;
	case CMP_LT: return !un && a < b;
	case CMP_LE: return !un && a <= b;
	case CMP_GT: return !un && a > b;
	case CMP_GE: return !un && a >= b;
	case CMP_EQU: return un || a == b;
	case CMP_NEU: return un || a != b;
	case CMP_LTU: return un || a < b;
	case CMP_LEU: return un || a <= b;
	case CMP_GTU: return un || a > b;
	case CMP_GEU: return un || a >= b;
	case CMP_NUM: return !un;
	case CMP_NAN: return un;
	default: return 0;
	}
}

static int
icmp(int cmp, uint64_t a, uint64_t b, int sign, int n)
{
	int64_t x = sext(a, n), y = sext(b, n);
	uint64_t u = mask(a, n), v = mask(b, n);
	switch (cmp) {
	case CMP_EQ: return u == v;
	case CMP_NE: return u != v;
	case CMP_LT: return sign ? x < y : u < v;
	case CMP_LE: return sign ? x <= y : u <= v;
	case CMP_GT: return sign ? x > y : u > v;
	case CMP_GE: return sign ? x >= y : u >= v;
	case CMP_LO: return u < v;
	case CMP_LS: return u <= v;
	case CMP_HI: return u > v;
	case CMP_HS: return u >= v;
	default: return -1;
	}
}

int
emu_op_setp(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, b, pc = 0;
	if (src2(c, t, in, &a, &b) || (in->nop == 4 && emu_geti(c, t, in, 3, &pc)))
		return EMU_STOP;
	int r;
	EmuType ty = in->t[0];
	if (kind(in) == TK_FLOAT) {
		if (ty == T_F16X2 || ty == T_BF16X2)
			return emu_fault(c, t, in, "setp on packed halves is not supported by the emulator");
		double x = ty == T_F64 ? emu_f64(a) : (double)emu_to_f32(a, ty);
		double y = ty == T_F64 ? emu_f64(b) : (double)emu_to_f32(b, ty);
		r = fcmp(in->cmp, x, y);
	} else {
		r = icmp(in->cmp, a, b, kind(in) == TK_SINT, bits(in));
		if (r < 0)
			return emu_fault(c, t, in, "comparison not valid for integers");
	}
	int q = !r;
	if (in->bop != BOP_NONE) {
		int p3 = (int)(pc & 1);
		if (in->bop == BOP_AND) {
			r = r && p3;
			q = q && p3;
		} else if (in->bop == BOP_OR) {
			r = r || p3;
			q = q || p3;
		} else {
			r ^= p3;
			q ^= p3;
		}
	}
	const EmuOperand *d = emu_opnd(c, in, 0);
	if (d->kind == OPK_PAIR) {
		if (emu_set(c, t, in, emu_sub(c, d, 0), (uint64_t)r) ||
		    emu_set(c, t, in, emu_sub(c, d, 1), (uint64_t)q))
			return EMU_STOP;
		return EMU_NEXT;
	}
	return put(c, t, in, (uint64_t)r);
}

int
emu_op_selp(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, b, p;
	if (src2(c, t, in, &a, &b) || emu_geti(c, t, in, 3, &p))
		return EMU_STOP;
	return put(c, t, in, mask(p & 1 ? a : b, bits(in)));
}

/* ---- float functions ------------------------------------------------------------ */

int
emu_op_rcp(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FRCP, 1);
}

int
emu_op_sqrt(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FSQRT, 1);
}

int
emu_op_rsqrt(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FRSQRT, 1);
}

int
emu_op_ex2(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FEX2, 1);
}

int
emu_op_lg2(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FLG2, 1);
}

int
emu_op_sin(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FSIN, 1);
}

int
emu_op_cos(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FCOS, 1);
}

int
emu_op_tanh(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FTANH, 1);
}

int
emu_op_copysign(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return fop(c, t, in, FCOPYSIGN, 2);
}
