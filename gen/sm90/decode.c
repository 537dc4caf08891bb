/* Decode on sm_90a: the producer warpgroup of fmha's split-O plan,
 * gathering instead of TMA (tokens are scattered one per index, so no
 * tiled box fits). Its 128 threads load Q once, then per K=V tile of 64
 * keys read each token's row and scales with 16-byte ld.global.nc (four
 * threads per token, coalesced), dequantize E4M3 -> f16 (cvt, exact) ->
 * f32 times the UE8M0 scale (a power of two: exact) -> bf16 (exact: three
 * mantissa bits), and st.shared the bf16 rows into the 128-byte swizzled
 * K-major layout a TMA box would have written (gen/layout.h), so the
 * consumers' descriptors are fmha's. Generic-proxy stores read by wgmma
 * need fence.proxy.async before the full barrier's arrival (PTX ISA
 * "Asynchronous proxy"). */
#include <stdio.h>
#include <string.h>

#include "../decode.h"
#include "../ops.h"

/* 38 data registers per pass (7 NoPE + 2 RoPE chunks of 16 bytes, 8 scale
 * bytes) beside addresses; the consumers keep (65536 - 128·96) / 256 = 208. */
enum { GATHER_REGS = 96 };

/* addr = addr ^ ((addr & mask) >> 3): the tile's swizzle at run time */
static void
emit_swizzle(Emit *e, Reg addr, Reg t, uint32_t mask)
{
	emitf(e, "\tand.b32 %s, %s, %u;\n\tshr.u32 %s, %s, 3;\n\txor.b32 %s, %s, %s;\n", t.s, addr.s, mask,
	      t.s, t.s, addr.s, addr.s, t.s);
}

/* Q [.., Hq, 512] bf16 rows h..h+63 of query row qs into the Q tile: thread
 * tid takes 16-byte chunk tid%64 of rows tid/64 + 2i; heads past Hq are
 * zeros. */
static int
emit_q(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg q0, Reg qbar)
{
	const FmhaCfg *f = &d->f;
	uint32_t mask = swizzle_mask(SWZ_128B);
	Reg src = reg_new(e, RC_B64), o = reg_new(e, RC_B64), ch = reg_new(e, RC_B32);
	Reg row0 = reg_new(e, RC_B32), dst0 = reg_new(e, RC_B32), dst = reg_new(e, RC_B32);
	Reg t = reg_new(e, RC_B32), hl = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	Reg v[8][4];
	int batch = 8;

	emit_block(e, "sm90.decode_q");
	for (int i = 0; i < batch; i++)
		reg_array(e, RC_B32, v[i], 4);
	emitf(e, "\tand.b32 %s, %s, 63;\n\tshr.u32 %s, %s, 6;\n", ch.s, r->tid.s, row0.s, r->tid.s);
	/* element ((qs·Hq + h + row0)·D + 8·ch) */
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %s;\n", t.s, r->qs.s, d->hq, r->h.s, t.s, t.s,
	      row0.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n", o.s, t.s, 2 * f->d);
	emitf(e, "\tld.param.u64 %s, [p_Q];\n\tcvta.to.global.u64 %s, %s;\n\tadd.u64 %s, %s, %s;\n", src.s,
	      src.s, src.s, src.s, src.s, o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 16;\n\tadd.u64 %s, %s, %s;\n", o.s, ch.s, src.s, src.s, o.s);
	/* heads left for this thread's rows: row0 + 2i < Hq - h */
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tmov.u32 %s, %d;\n\tsub.u32 %s, %s, %s;\n", hl.s, t.s, t.s, t.s,
	      d->hq, hl.s, t.s, r->h.s);
	/* dst0 = Q + (ch/8)·slice + row0·128 + (ch%8)·16 */
	emitf(e, "\tshr.u32 %s, %s, 3;\n\tmul.lo.u32 %s, %s, %u;\n", t.s, ch.s, dst0.s, t.s, f->lq.slice_bytes);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tmad.lo.u32 %s, %s, 128, %s;\n", dst0.s, dst0.s, q0.s, dst0.s, row0.s,
	      dst0.s);
	emitf(e, "\tand.b32 %s, %s, 7;\n\tmad.lo.u32 %s, %s, 16, %s;\n", t.s, ch.s, dst0.s, t.s, dst0.s);
	for (int i0 = 0; i0 < 32; i0 += batch) {
		for (int i = 0; i < batch; i++) {
			int row = 2 * (i0 + i);
			emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", v[i][0].s,
			      v[i][1].s, v[i][2].s, v[i][3].s);
			emitf(e, "\tsetp.lt.s32 %s, %d, %s;\n", p.s, row, hl.s);
			emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", p.s, v[i][0].s, v[i][1].s,
			      v[i][2].s, v[i][3].s, src.s, row * 2 * f->d);
		}
		for (int i = 0; i < batch; i++) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", dst.s, dst0.s, 2 * (i0 + i) * 128);
			emit_swizzle(e, dst, t, mask);
			emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", dst.s, v[i][0].s, v[i][1].s,
			      v[i][2].s, v[i][3].s);
		}
	}
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	op_mbar_arrive(e, qbar, NULL);
	return 0;
}

/* Four E4M3 (one 32-bit word) times a power of two into two bf16x2. */
static void
emit_dequant_word(Emit *e, Reg w, Reg sc, Reg out0, Reg out1, Reg h[4], Reg y[2], Reg x[4])
{
	emitf(e, "\tmov.b32 {%s, %s}, %s;\n", h[0].s, h[1].s, w.s);
	/* byte 2k+1 of a pair lands in the upper f16 */
	emitf(e, "\tcvt.rn.f16x2.e4m3x2 %s, %s;\n\tcvt.rn.f16x2.e4m3x2 %s, %s;\n", y[0].s, h[0].s, y[1].s,
	      h[1].s);
	emitf(e, "\tmov.b32 {%s, %s}, %s;\n\tmov.b32 {%s, %s}, %s;\n", h[0].s, h[1].s, y[0].s, h[2].s, h[3].s,
	      y[1].s);
	for (int k = 0; k < 4; k++)
		emitf(e, "\tcvt.f32.f16 %s, %s;\n\tmul.f32 %s, %s, %s;\n", x[k].s, h[k].s, x[k].s, x[k].s, sc.s);
	emitf(e, "\tcvt.rn.bf16x2.f32 %s, %s, %s;\n\tcvt.rn.bf16x2.f32 %s, %s, %s;\n", out0.s, x[1].s, x[0].s,
	      out1.s, x[3].s, x[2].s);
}

static int
emit_tiles(Emit *e, KgErr *err, const DecodeCfg *d, const FmhaRegs *r, Reg k0, Reg kbar0, Reg kfree0,
           Reg list)
{
	const FmhaCfg *f = &d->f;
	const DecodeFormat *fmt = d->fmt;
	uint32_t mask = swizzle_mask(SWZ_128B), slice = f->lk.slice_bytes;
	int nch = fmt->d_nope / 16 / 4; /* NoPE chunks per thread: 7 */
	int rch = fmt->d_rope * 2 / 16 / 4; /* RoPE chunks per thread: 2 */
	Reg stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32), j = reg_new(e, RC_B32);
	Reg bar = reg_new(e, RC_B32), par = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	Reg ok = reg_new(e, RC_PRED), tq = reg_new(e, RC_B32), q4 = reg_new(e, RC_B32);
	Reg pos = reg_new(e, RC_B32), ent = reg_new(e, RC_B32), idx = reg_new(e, RC_B32);
	Reg page = reg_new(e, RC_B32), off = reg_new(e, RC_B32), t = reg_new(e, RC_B32);
	Reg pb = reg_new(e, RC_B64), a = reg_new(e, RC_B64), o = reg_new(e, RC_B64);
	Reg kv[2], ps = reg_new(e, RC_B32), pbytes = reg_new(e, RC_B32), srcp = reg_new(e, RC_PRED);
	Reg d0 = reg_new(e, RC_B32), d1 = reg_new(e, RC_B32), dr = reg_new(e, RC_B32);
	Reg sw[2], sc[8], nope[8][4], rope[4][4], h[4], y[2], x[4], out[8];
	char loop[48], done[48];

	for (int s = 0; s < d->nsrc; s++) {
		kv[s] = reg_new(e, RC_B64);
		emitf(e, "\tld.param.u64 %s, [p_KV%s];\n\tcvta.to.global.u64 %s, %s;\n", kv[s].s,
		      s ? "_extra" : "", kv[s].s, kv[s].s);
	}
	reg_array(e, RC_B32, sw, 2);
	reg_array(e, RC_F32, sc, nch);
	for (int c = 0; c < nch; c++)
		reg_array(e, RC_B32, nope[c], 4);
	for (int c = 0; c < rch; c++)
		reg_array(e, RC_B32, rope[c], 4);
	reg_array(e, RC_B16, h, 4);
	reg_array(e, RC_F32, x, 4);
	reg_array(e, RC_B32, out, 8);
	reg_array(e, RC_B32, y, 2);
	/* four threads per token: q4 = tid % 4 takes NoPE chunks 4c + q4
	 * (scale group c, smem slice c) and RoPE chunks q4 + 4c */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshr.u32 %s, %s, 2;\n", q4.s, r->tid.s, tq.s, r->tid.s);
	label_new(e, loop, sizeof loop, "gather");
	label_new(e, done, sizeof done, "gather_done");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", stage.s, phase.s, j.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->n_total.s, p.s, done);
	emit_label(e, loop);
	emit_block(e, "sm90.decode_gather");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n\txor.b32 %s, %s, 1;\n", bar.s, stage.s, kfree0.s, par.s,
	      phase.s);
	if (op_mbar_wait(e, err, bar, par.s) < 0)
		return -1;
	for (int pass = 0; pass < f->bn / 32; pass++) {
		/* key pos = 64j + 32·pass + tid/4 of the list; past its end: zeros */
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %d;\n", pos.s, j.s, f->bn, tq.s, pos.s,
		      pos.s, 32 * pass);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tmov.u32 %s, 0;\n", ok.s, pos.s, r->sk.s, ent.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s ld.shared.u32 %s, [%s];\n", t.s, pos.s, list.s, ok.s,
		      ent.s, t.s);
		emitf(e, "\tand.b32 %s, %s, 0x7fffffff;\n", idx.s, ent.s);
		if (d->nsrc > 1) {
			emitf(e, "\tsetp.lt.s32 %s, %s, 0;\n", srcp.s, ent.s);
			emitf(e, "\tselp.u32 %s, %d, %d, %s;\n\tselp.u32 %s, %u, %u, %s;\n", ps.s, d->ps[1], d->ps[0],
			      srcp.s, pbytes.s, d->page_bytes[1], d->page_bytes[0], srcp.s);
			emitf(e, "\tselp.b64 %s, %s, %s, %s;\n", pb.s, kv[1].s, kv[0].s, srcp.s);
			emitf(e, "\tdiv.u32 %s, %s, %s;\n", page.s, idx.s, ps.s);
		} else {
			emitf(e, "\tmov.u32 %s, %d;\n\tmov.u32 %s, %u;\n\tmov.b64 %s, %s;\n", ps.s, d->ps[0], pbytes.s,
			      d->page_bytes[0], pb.s, kv[0].s);
			emitf(e, "\tdiv.u32 %s, %s, %d;\n", page.s, idx.s, d->ps[0]);
		}
		/* token row: page·page_bytes + off·row_bytes; its scales:
		 * page·page_bytes + ps·row_bytes + off·scale_bytes */
		emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", t.s, page.s, ps.s, off.s, idx.s, t.s);
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, page.s, pbytes.s, pb.s, pb.s,
		      o.s);
		emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, ps.s, fmt->row_bytes, t.s,
		      off.s, fmt->scale_bytes, t.s);
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, t.s, a.s, pb.s, o.s);
		emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", sw[0].s, sw[1].s);
		emitf(e, "\t@%s ld.global.nc.v2.b32 {%s, %s}, [%s];\n", ok.s, sw[0].s, sw[1].s, a.s);
		emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 16, %s;\n", t.s, off.s, fmt->row_bytes, t.s,
		      q4.s, t.s);
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, t.s, a.s, pb.s, o.s);
		for (int c = 0; c < nch; c++) {
			emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", nope[c][0].s,
			      nope[c][1].s, nope[c][2].s, nope[c][3].s);
			emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", ok.s, nope[c][0].s,
			      nope[c][1].s, nope[c][2].s, nope[c][3].s, a.s, 64 * c);
		}
		for (int c = 0; c < rch; c++) {
			emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", rope[c][0].s,
			      rope[c][1].s, rope[c][2].s, rope[c][3].s);
			emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", ok.s, rope[c][0].s,
			      rope[c][1].s, rope[c][2].s, rope[c][3].s, a.s, fmt->d_nope + 64 * c);
		}
		/* UE8M0 e is 2^(e-127): as an f32 its bits are e << 23 */
		for (int c = 0; c < nch; c++)
			emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n\tshl.b32 %s, %s, 23;\n\tmov.b32 %s, %s;\n", t.s,
			      sw[c / 4].s, 8 * (c % 4), t.s, t.s, sc[c].s, t.s);
		/* smem: stage + row·128 + chunk·16, swizzled; NoPE chunk 4c+q4
		 * is columns 16(4c+q4).. = slice c, 16-byte chunks 2q4, 2q4+1 */
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tadd.u32 %s, %s, %d;\n", d0.s, stage.s, f->k_bytes, k0.s,
		      d0.s, d0.s, 32 * 128 * pass);
		emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tmov.u32 %s, %s;\n", d0.s, tq.s, d0.s, dr.s, d0.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 32, %s;\n\tadd.u32 %s, %s, 16;\n", d0.s, q4.s, d0.s, d1.s, d0.s);
		emit_swizzle(e, d0, t, mask);
		emit_swizzle(e, d1, t, mask);
		for (int c = 0; c < nch; c++) {
			for (int k = 0; k < 4; k++)
				emit_dequant_word(e, nope[c][k], sc[c], out[2 * k], out[2 * k + 1], h, y, x);
			emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", d0.s, (uint32_t)c * slice,
			      out[0].s, out[1].s, out[2].s, out[3].s);
			emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", d1.s, (uint32_t)c * slice,
			      out[4].s, out[5].s, out[6].s, out[7].s);
		}
		/* RoPE chunk q4 + 4c: slice d_nope/64, 16-byte chunk q4 + 4c */
		emitf(e, "\tmad.lo.u32 %s, %s, 16, %s;\n", dr.s, q4.s, dr.s);
		for (int c = 0; c < rch; c++) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", d0.s, dr.s, 64 * c);
			emit_swizzle(e, d0, t, mask);
			emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", d0.s,
			      (uint32_t)(fmt->d_nope / 64) * slice, rope[c][0].s, rope[c][1].s, rope[c][2].s,
			      rope[c][3].s);
		}
	}
	/* the wgmma reads of this tile are async-proxy reads of generic stores */
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", bar.s, stage.s, kbar0.s);
	op_mbar_arrive(e, bar, NULL);
	op_ring_advance(e, stage, phase, f->stages, p);
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, p.s, j.s,
	      r->n_total.s, p.s, loop);
	emit_label(e, done);
	return 0;
}

int
sm90_decode_gather(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	const DecodeCfg *d = f->ext;
	Reg q0, k0, qbar, kbar0, kfree0, list;

	emit_block(e, "sm90.decode_producer");
	q0 = op_plan_smem(e, &f->plan, r->base, f->r_q);
	k0 = op_plan_smem(e, &f->plan, r->base, f->r_k);
	qbar = op_plan_bar(e, &f->plan, r->base, f->b_q);
	kbar0 = op_plan_bar(e, &f->plan, r->base, f->b_k);
	kfree0 = op_plan_bar(e, &f->plan, r->base, f->b_kfree);
	list = op_plan_smem(e, &f->plan, r->base, d->r_list);
	if (emit_q(e, d, r, q0, qbar) < 0)
		return -1;
	return emit_tiles(e, err, d, r, k0, kbar0, kfree0, list);
}

const DecodeOps decode_sm90 = {
	sm90_decode_gather,
	GATHER_REGS,
	"sm_90a: E4M3 -> f16 (cvt) -> f32 x 2^(e-127) -> bf16 in registers of the producer warpgroup, "
	"stored to smem; exact (E4M3 times a power of two fits bf16), so the only rounding is fmha's bf16 P",
};
