/* The W4A8 folding rule (w4a8.h; docs/hardware.md, "FP4 weights as
 * E4M3"). The E4M3 bytes are found by search over the E4M3 codes that
 * dtype_decode gives, so no bit pattern here is written by hand. */
#include <math.h>

#include "dtype.h"
#include "emit.h"
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

void
w4a8_emit_init(Emit *e, W4a8Regs *w)
{
	w->sel = reg_new(e, RC_B32);
	w->sg = reg_new(e, RC_B32);
	w->t = reg_new(e, RC_B32);
}

void
w4a8_emit_tables(Emit *e, Reg at, Reg t)
{
	for (int d = W4A8_DZERO; d <= W4A8_DMAX; d++) {
		uint32_t v[2];
		w4a8_lut(d, v);
		emitf(e, "\tmov.b32 %s, 0x%08x;\n\tst.shared.b32 [%s+%d], %s; // d = %d\n", t.s, v[0], at.s,
		      8 * (d - W4A8_DZERO), t.s, d);
		emitf(e, "\tmov.b32 %s, 0x%08x;\n\tst.shared.b32 [%s+%d], %s;\n", t.s, v[1], at.s,
		      8 * (d - W4A8_DZERO) + 4, t.s);
	}
}

void
w4a8_emit_table_base(Emit *e, Reg base, Reg emax, Reg lut)
{
	emitf(e, "\tsub.s32 %s, %d, %s;\n\tmad.lo.s32 %s, %s, 8, %s;\n", base.s, W4A8_DMAX - W4A8_DZERO, emax.s,
	      base.s, base.s, lut.s);
}

void
w4a8_emit_table_addr(Emit *e, Reg addr, Reg ec, Reg base, Reg lut)
{
	/* d = ec - e_ref <= W4A8_DMAX; below W4A8_DZERO every code is 0 */
	emitf(e, "\tmad.lo.s32 %s, %s, 8, %s;\n\tmax.s32 %s, %s, %s;\n", addr.s, ec.s, base.s, addr.s, addr.s,
	      lut.s);
}

void
w4a8_emit_emax(Emit *e, Reg emax, Reg w, Reg t)
{
	emitf(e, "\tand.b32 %s, %s, 0xff;\n", emax.s, w.s);
	for (int c = 1; c < 4; c++)
		emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n\tmax.u32 %s, %s, %s;\n", t.s, w.s, 8 * c, emax.s, emax.s, t.s);
}

void
w4a8_emit_scale(Emit *e, Reg out, Reg emax, Reg t, Reg t2, Reg p)
{
	/* e_ref = emax - 6: f32 bits e_ref << 23 for e_ref >= 1, else the
	 * subnormal 2^-127 (0x00400000) >> -e_ref (e_ref >= -6) */
	emitf(e, "\tsub.s32 %s, %s, %d;\n\tshl.b32 %s, %s, 23;\n", t.s, emax.s, W4A8_DMAX, out.s, t.s);
	emitf(e, "\tsetp.lt.s32 %s, %s, 1;\n\tneg.s32 %s, %s;\n", p.s, t.s, t.s, t.s);
	emitf(e, "\tmov.b32 %s, 0x00400000;\n\tshr.u32 %s, %s, %s;\n", t2.s, t2.s, t2.s, t.s);
	emitf(e, "\tselp.b32 %s, %s, %s, %s;\n", out.s, t2.s, out.s, p.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 255;\n\tselp.b32 %s, 0x7fc00000, %s, %s;\n", p.s, emax.s, out.s,
	      out.s, p.s);
}

void
w4a8_emit_expand(Emit *e, const W4a8Regs *w, Reg lo, Reg hi, Reg x, Reg t0, Reg t1)
{
	/* magnitude: prmt selects byte (code & 7) of {t0, t1} per nibble of
	 * the selector's low 16 bits; a nibble's bit 3 would replicate a sign,
	 * so it is masked off (PTX ISA, "prmt") */
	emitf(e, "\tand.b32 %s, %s, 0x77777777;\n", w->sel.s, x.s);
	emitf(e, "\tprmt.b32 %s, %s, %s, %s;\n\tshr.u32 %s, %s, 16;\n", lo.s, t0.s, t1.s, w->sel.s, w->sel.s,
	      w->sel.s);
	emitf(e, "\tprmt.b32 %s, %s, %s, %s;\n", hi.s, t0.s, t1.s, w->sel.s);
	/* sign: code j's bit 3 is the msb of byte j/2 of x << 4 (j even) or of
	 * x (j odd); prmt's replicate mode (selector bit 3) turns that msb into
	 * a byte of 0xff or 0, and lop3 0xf8 (a | b & c) keeps its bit 7.
	 * Selectors: bytes {a0, b0, a1, b1} = 0xD9C8 for codes 0..3 with
	 * a = x << 4, b = x; {a2, b2, a3, b3} = 0xFBEA for codes 4..7. */
	emitf(e, "\tshl.b32 %s, %s, 4;\n", w->sg.s, x.s);
	emitf(e, "\tprmt.b32 %s, %s, %s, 0xD9C8;\n\tlop3.b32 %s, %s, %s, 0x80808080, 0xf8;\n", w->t.s, w->sg.s,
	      x.s, lo.s, lo.s, w->t.s);
	emitf(e, "\tprmt.b32 %s, %s, %s, 0xFBEA;\n\tlop3.b32 %s, %s, %s, 0x80808080, 0xf8;\n", w->t.s, w->sg.s,
	      x.s, hi.s, hi.s, w->t.s);
}
