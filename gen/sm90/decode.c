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

/* 38 data registers per half-tile (7 NoPE + 2 RoPE chunks of 16 bytes, 8
 * scale bytes), two in flight, beside addresses and the dequantization's
 * scratch; the consumers keep (168·384 - 128·104) / 256 = 200
 * (plan_regs_split). */
enum { GATHER_REGS = 104 };

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
emit_q(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg q0)
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
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %s;\n", t.s, r->qrow.s, d->hq, r->h.s, t.s, t.s,
	      row0.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n", o.s, t.s, 2 * f->d);
	emitf(e, "\tld.param.u64 %s, [p_Q];\n\tcvta.to.global.u64 %s, %s;\n\tadd.u64 %s, %s, %s;\n", src.s,
	      src.s, src.s, src.s, src.s, o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 16;\n\tadd.u64 %s, %s, %s;\n", o.s, ch.s, src.s, src.s, o.s);
	/* heads left for this thread's rows: 2i < Hq - h - row0 (row0 counts:
	 * with an odd Hq the second row of the last pair is past Hq) */
	emitf(e, "\tmov.u32 %s, %d;\n\tsub.u32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", t.s, d->hq, hl.s,
	      t.s, r->h.s, hl.s, hl.s, row0.s);
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
	/* published with the first K=V tile (gen/sm90/fmha_split.c, "Q full") */
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

/* One half-tile of 32 keys in flight: the thread's token data. */
typedef struct Pass {
	Reg sw[2], nope[8][4], rope[4][4];
} Pass;

/* The producer's registers across the loop. */
typedef struct Gather {
	const DecodeCfg *d;
	const FmhaRegs *r;
	int nch, rch;              /* NoPE, RoPE 16-byte chunks per thread: 7, 2 */
	Reg tq, q4, list, k0, kv[2];
	Reg lim;                   /* keys past min(list length, this CTA's last tile) load nothing */
	Reg ok, pos, ent, idx, page, off, t, ps, pbytes, srcp;
	Reg pb, a, o;
	Reg d0, d1, dr, sc[8], h[4], y[2], x[4], out[8];
	Pass pass[2];
} Gather;

/* Issues the loads of keys 64j + 32·half + tid/4 of the list into
 * g->pass[half]: the token's scale entry, NoPE chunks 4c + q4 (64 bytes
 * apart, so the token's four threads read 64 contiguous bytes per c) and
 * RoPE chunks q4 + 4c. A key past the list's end (also every key of tile
 * n_total, which the pipeline asks for once) loads nothing: zeros, so its
 * P·V adds 0 instead of 0·garbage. */
static void
emit_pass_load(Emit *e, Gather *g, Reg j, int half)
{
	const DecodeCfg *d = g->d;
	const DecodeFormat *fmt = d->fmt;
	Pass *ps = &g->pass[half];

	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %d;\n", g->pos.s, j.s, d->f.bn, g->tq.s,
	      g->pos.s, g->pos.s, 32 * half);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tmov.u32 %s, 0;\n", g->ok.s, g->pos.s, g->lim.s, g->ent.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s ld.shared.u32 %s, [%s];\n", g->t.s, g->pos.s, g->list.s,
	      g->ok.s, g->ent.s, g->t.s);
	emitf(e, "\tand.b32 %s, %s, 0x7fffffff;\n", g->idx.s, g->ent.s);
	if (d->nsrc > 1) {
		emitf(e, "\tsetp.lt.s32 %s, %s, 0;\n", g->srcp.s, g->ent.s);
		emitf(e, "\tselp.u32 %s, %d, %d, %s;\n\tselp.u32 %s, %u, %u, %s;\n", g->ps.s, d->ps[1], d->ps[0],
		      g->srcp.s, g->pbytes.s, d->page_bytes[1], d->page_bytes[0], g->srcp.s);
		emitf(e, "\tselp.b64 %s, %s, %s, %s;\n", g->pb.s, g->kv[1].s, g->kv[0].s, g->srcp.s);
		emitf(e, "\tdiv.u32 %s, %s, %s;\n", g->page.s, g->idx.s, g->ps.s);
	} else {
		emitf(e, "\tmov.u32 %s, %d;\n\tmov.u32 %s, %u;\n\tmov.b64 %s, %s;\n", g->ps.s, d->ps[0], g->pbytes.s,
		      d->page_bytes[0], g->pb.s, g->kv[0].s);
		emitf(e, "\tdiv.u32 %s, %s, %d;\n", g->page.s, g->idx.s, d->ps[0]);
	}
	/* token row: page·page_bytes + off·row_bytes; its scales:
	 * page·page_bytes + ps·row_bytes + off·scale_bytes */
	emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", g->t.s, g->page.s, g->ps.s, g->off.s,
	      g->idx.s, g->t.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->page.s, g->pbytes.s, g->pb.s,
	      g->pb.s, g->o.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %d, %s;\n", g->t.s, g->ps.s, fmt->row_bytes,
	      g->t.s, g->off.s, fmt->scale_bytes, g->t.s);
	emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->t.s, g->a.s, g->pb.s, g->o.s);
	emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", ps->sw[0].s, ps->sw[1].s);
	emitf(e, "\t@%s ld.global.nc.v2.b32 {%s, %s}, [%s];\n", g->ok.s, ps->sw[0].s, ps->sw[1].s, g->a.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 16, %s;\n", g->t.s, g->off.s, fmt->row_bytes,
	      g->t.s, g->q4.s, g->t.s);
	emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->t.s, g->a.s, g->pb.s, g->o.s);
	for (int c = 0; c < g->nch + g->rch; c++) {
		const Reg *v = c < g->nch ? ps->nope[c] : ps->rope[c - g->nch];
		int at = c < g->nch ? 64 * c : fmt->d_nope + 64 * (c - g->nch);
		emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", v[0].s, v[1].s,
		      v[2].s, v[3].s);
		emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", g->ok.s, v[0].s, v[1].s, v[2].s,
		      v[3].s, g->a.s, at);
	}
}

/* Dequantizes g->pass[half] and stores it into rows 32·half + tid/4 of
 * the K=V stage. */
static void
emit_pass_store(Emit *e, Gather *g, Reg stage, int half)
{
	const DecodeCfg *d = g->d;
	const FmhaCfg *f = &d->f;
	uint32_t mask = swizzle_mask(SWZ_128B), slice = f->lk.slice_bytes;
	Pass *ps = &g->pass[half];

	/* UE8M0 e is 2^(e-127): as an f32 its bits are e << 23 */
	for (int c = 0; c < g->nch; c++)
		emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n\tshl.b32 %s, %s, 23;\n\tmov.b32 %s, %s;\n", g->t.s,
		      ps->sw[c / 4].s, 8 * (c % 4), g->t.s, g->t.s, g->sc[c].s, g->t.s);
	/* smem: stage + row·128 + chunk·16, swizzled; NoPE chunk 4c+q4
	 * is columns 16(4c+q4).. = slice c, 16-byte chunks 2q4, 2q4+1 */
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tadd.u32 %s, %s, %d;\n", g->d0.s, stage.s, f->k_bytes,
	      g->k0.s, g->d0.s, g->d0.s, 32 * 128 * half);
	emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tmov.u32 %s, %s;\n", g->d0.s, g->tq.s, g->d0.s, g->dr.s,
	      g->d0.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 32, %s;\n\tadd.u32 %s, %s, 16;\n", g->d0.s, g->q4.s, g->d0.s, g->d1.s,
	      g->d0.s);
	emit_swizzle(e, g->d0, g->t, mask);
	emit_swizzle(e, g->d1, g->t, mask);
	for (int c = 0; c < g->nch; c++) {
		for (int k = 0; k < 4; k++)
			emit_dequant_word(e, ps->nope[c][k], g->sc[c], g->out[2 * k], g->out[2 * k + 1], g->h, g->y,
			                  g->x);
		emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", g->d0.s, (uint32_t)c * slice,
		      g->out[0].s, g->out[1].s, g->out[2].s, g->out[3].s);
		emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", g->d1.s, (uint32_t)c * slice,
		      g->out[4].s, g->out[5].s, g->out[6].s, g->out[7].s);
	}
	/* RoPE chunk q4 + 4c: slice d_nope/64, 16-byte chunk q4 + 4c */
	emitf(e, "\tmad.lo.u32 %s, %s, 16, %s;\n", g->dr.s, g->q4.s, g->dr.s);
	for (int c = 0; c < g->rch; c++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n", g->d0.s, g->dr.s, 64 * c);
		emit_swizzle(e, g->d0, g->t, mask);
		emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", g->d0.s,
		      (uint32_t)(d->fmt->d_nope / 64) * slice, ps->rope[c][0].s, ps->rope[c][1].s,
		      ps->rope[c][2].s, ps->rope[c][3].s);
	}
}

/* The K=V tiles, software-pipelined by half-tiles so that one half's
 * loads are always in flight while the other is dequantized: half 0 of
 * tile j was issued in the previous iteration; issue half 1, wait for the
 * slot, store half 0, issue half 0 of tile j+1, store half 1, publish. */
static int
emit_tiles(Emit *e, KgErr *err, const DecodeCfg *d, const FmhaRegs *r, Reg k0, Reg kbar0, Reg kfree0,
           Reg list)
{
	const FmhaCfg *f = &d->f;
	Gather g = {.d = d, .r = r, .k0 = k0, .list = list};
	Reg stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32), j = reg_new(e, RC_B32);
	Reg jn = reg_new(e, RC_B32), bar = reg_new(e, RC_B32), par = reg_new(e, RC_B32);
	Reg p = reg_new(e, RC_PRED);
	char loop[48], done[48];

	g.nch = d->fmt->d_nope / 16 / 4;
	g.rch = d->fmt->d_rope * 2 / 16 / 4;
	g.lim = reg_new(e, RC_B32);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmin.u32 %s, %s, %s;\n", g.lim.s, r->n_total.s, f->bn, g.lim.s,
	      g.lim.s, r->sk.s);
	g.tq = reg_new(e, RC_B32);
	g.q4 = reg_new(e, RC_B32);
	g.ok = reg_new(e, RC_PRED);
	g.srcp = reg_new(e, RC_PRED);
	reg_array(e, RC_B32, &g.pos, 8);
	g.pb = reg_new(e, RC_B64);
	g.a = reg_new(e, RC_B64);
	g.o = reg_new(e, RC_B64);
	reg_array(e, RC_B32, &g.d0, 3);
	reg_array(e, RC_F32, g.sc, g.nch);
	reg_array(e, RC_B16, g.h, 4);
	reg_array(e, RC_B32, g.y, 2);
	reg_array(e, RC_F32, g.x, 4);
	reg_array(e, RC_B32, g.out, 8);
	for (int hf = 0; hf < 2; hf++) {
		reg_array(e, RC_B32, g.pass[hf].sw, 2);
		for (int c = 0; c < g.nch; c++)
			reg_array(e, RC_B32, g.pass[hf].nope[c], 4);
		for (int c = 0; c < g.rch; c++)
			reg_array(e, RC_B32, g.pass[hf].rope[c], 4);
	}
	for (int s = 0; s < d->nsrc; s++) {
		g.kv[s] = reg_new(e, RC_B64);
		emitf(e, "\tld.param.u64 %s, [p_KV%s];\n\tcvta.to.global.u64 %s, %s;\n", g.kv[s].s,
		      s ? "_extra" : "", g.kv[s].s, g.kv[s].s);
	}
	/* four threads per token: q4 = tid % 4 */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshr.u32 %s, %s, 2;\n", g.q4.s, r->tid.s, g.tq.s, r->tid.s);
	label_new(e, loop, sizeof loop, "gather");
	label_new(e, done, sizeof done, "gather_done");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, %s;\n", stage.s, phase.s, j.s, r->j0.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->n_total.s, p.s, done);
	emit_pass_load(e, &g, j, 0);
	emit_label(e, loop);
	emit_block(e, "sm90.decode_gather");
	emit_pass_load(e, &g, j, 1);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n\txor.b32 %s, %s, 1;\n", bar.s, stage.s, kfree0.s, par.s,
	      phase.s);
	if (op_mbar_wait(e, err, bar, par.s) < 0)
		return -1;
	emit_pass_store(e, &g, stage, 0);
	emitf(e, "\tadd.u32 %s, %s, 1;\n", jn.s, j.s);
	emit_pass_load(e, &g, jn, 0);
	emit_pass_store(e, &g, stage, 1);
	/* the wgmma reads of this tile are async-proxy reads of generic stores */
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", bar.s, stage.s, kbar0.s);
	op_mbar_arrive(e, bar, NULL);
	op_ring_advance(e, stage, phase, f->stages, p);
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, jn.s, p.s, j.s,
	      r->n_total.s, p.s, loop);
	emit_label(e, done);
	return 0;
}

int
decode_gather_warpgroup(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	const DecodeCfg *d = f->ext;
	Reg q0, k0, kbar0, kfree0, list;

	emit_block(e, "sm90.decode_producer");
	q0 = op_plan_smem(e, &f->plan, r->base, f->r_q);
	k0 = op_plan_smem(e, &f->plan, r->base, f->r_k);
	kbar0 = op_plan_bar(e, &f->plan, r->base, f->b_k);
	kfree0 = op_plan_bar(e, &f->plan, r->base, f->b_kfree);
	list = op_plan_smem(e, &f->plan, r->base, d->r_list);
	if (emit_q(e, d, r, q0) < 0)
		return -1;
	return emit_tiles(e, err, d, r, k0, kbar0, kfree0, list);
}

const DecodeOps decode_sm90 = {
	decode_gather_warpgroup,
	GATHER_REGS,
	"sm_90a: E4M3 -> f16 (cvt) -> f32 x 2^(e-127) -> bf16 in registers of the producer warpgroup, "
	"stored to smem; exact (E4M3 times a power of two fits bf16), so the only rounding is fmha's bf16 P",
	NULL,
	NULL,
};
