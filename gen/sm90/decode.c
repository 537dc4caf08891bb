/* Decode on sm_90a: the producer warpgroup of fmha's split-O plan,
 * gathering instead of TMA (tokens are scattered one per index, so no
 * tiled box fits). Its 128 threads load Q once (on sm_90a the consumers
 * copy it in the prologue, decode_issue_q), then per K=V tile of 64 keys
 * read each token's row and scales with 16-byte ld.global.nc (four or
 * eight threads per token, coalesced), dequantize E4M3 -> f16 (cvt, exact)
 * -> f32 times the scale (UE8M0 or fp32) -> bf16 (exact for a power of
 * two: three mantissa bits), and st.shared the bf16 rows into the 128-byte
 * swizzled K-major layout a TMA box would have written (gen/layout.h), so the
 * consumers' descriptors are fmha's. Generic-proxy stores read by wgmma
 * need fence.proxy.async before the full barrier's arrival (PTX ISA
 * "Asynchronous proxy"). Where it fits, the rows reach registers from a
 * ring in shared memory that cp.async.bulk fills two tiles ahead instead
 * (emit_tiles_staged below). */
#include <stdio.h>
#include <string.h>

#include "../decode.h"
#include "../ops.h"

/* The gather's threads per token T: four where one pass of 128/T tokens
 * keeps at most PASS_REGS data registers per thread (fp8-v4: 7 NoPE + 2
 * RoPE chunks of 16 bytes and 8 scale bytes = 38), else eight; two passes
 * are in flight beside addresses and the dequantization's scratch; the
 * consumers keep (168·384 - 128·104) / 256 = 200 (plan_regs_split). */
enum { GATHER_REGS = 104, PASS_REGS = 40, MAX_CHUNKS = 16 };
/* At eight threads per token with at most one scale register a pass holds
 * at most 36 data registers: 96 leave the consumers 208, which
 * head_dim_qk 576's longer S wants (fp8-token at 576 spills at 200);
 * fp8-v32's four scales keep its producer at 104 (ptxas -v). */
enum { GATHER_REGS_T8 = 96 };

/* addr = addr ^ ((addr & mask) >> 3): the tile's swizzle at run time */
static void
emit_swizzle(Emit *e, Reg addr, Reg t, uint32_t mask)
{
	emitf(e, "\tand.b32 %s, %s, %u;\n\tshr.u32 %s, %s, 3;\n\txor.b32 %s, %s, %s;\n", t.s, addr.s, mask,
	      t.s, t.s, addr.s, addr.s, t.s);
}

/* Q [.., Hq, D] bf16 rows h..h+63 of query row qs into the Q tile, 16-byte
 * chunks [c0, c0 + w) of each row (w = 64 or 8) by nthr threads: thread
 * tix takes chunk c0 + tix%w of rows tix/w + (nthr/w)·i; heads past Hq are
 * zeros. maxb > 0: through registers, at most maxb loads in flight; 0: by
 * cp.async (PTX ISA "cp.async"), a source size of 0 zero-filling the
 * heads past Hq, complete at the thread's cp.async.wait_all. */
static void
emit_q_part(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg q0, int c0, int w, Reg tix, int nthr, int maxb)
{
	const FmhaCfg *f = &d->f;
	uint32_t mask = swizzle_mask(SWZ_128B);
	Reg src = reg_new(e, RC_B64), o = reg_new(e, RC_B64), ch = reg_new(e, RC_B32);
	Reg row0 = reg_new(e, RC_B32), dst0 = reg_new(e, RC_B32), dst = reg_new(e, RC_B32);
	Reg t = reg_new(e, RC_B32), hl = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	Reg v[16][4];
	int step = nthr / w, n = 64 / step, batch = n < maxb ? n : maxb;

	for (int i = 0; i < batch; i++)
		reg_array(e, RC_B32, v[i], 4);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tshr.u32 %s, %s, %d;\n", ch.s, tix.s, w - 1, row0.s, tix.s,
	      w == 64 ? 6 : 3);
	if (c0)
		emitf(e, "\tadd.u32 %s, %s, %d;\n", ch.s, ch.s, c0);
	/* element ((qs·Hq + h + row0)·D + 8·ch) */
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %s;\n", t.s, r->qrow.s, d->hq, r->h.s, t.s, t.s,
	      row0.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n", o.s, t.s, 2 * f->d);
	op_param_global(e, src, "Q");
	emitf(e, "\tadd.u64 %s, %s, %s;\n", src.s, src.s, o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 16;\n\tadd.u64 %s, %s, %s;\n", o.s, ch.s, src.s, src.s, o.s);
	/* heads left for this thread's rows: step·i < Hq - h - row0 (row0
	 * counts: with an odd Hq the second row of the last pair is past Hq) */
	emitf(e, "\tmov.u32 %s, %d;\n\tsub.u32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", t.s, d->hq, hl.s, t.s,
	      r->h.s, hl.s, hl.s, row0.s);
	/* dst0 = Q + (ch/8)·slice + row0·128 + (ch%8)·16 */
	emitf(e, "\tshr.u32 %s, %s, 3;\n\tmul.lo.u32 %s, %s, %u;\n", t.s, ch.s, dst0.s, t.s, f->lq.slice_bytes);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tmad.lo.u32 %s, %s, 128, %s;\n", dst0.s, dst0.s, q0.s, dst0.s, row0.s,
	      dst0.s);
	emitf(e, "\tand.b32 %s, %s, 7;\n\tmad.lo.u32 %s, %s, 16, %s;\n", t.s, ch.s, dst0.s, t.s, dst0.s);
	if (maxb == 0) {
		for (int i = 0; i < n; i++) {
			emitf(e, "\tsetp.lt.s32 %s, %d, %s;\n\tselp.u32 %s, 16, 0, %s;\n", p.s, step * i, hl.s, ch.s,
			      p.s);
			emitf(e, "\tadd.u32 %s, %s, %d;\n", dst.s, dst0.s, step * i * 128);
			emit_swizzle(e, dst, t, mask);
			emitf(e, "\tcp.async.cg.shared.global [%s], [%s+%d], 16, %s;\n", dst.s, src.s,
			      step * i * 2 * f->d, ch.s);
		}
		return;
	}
	for (int i0 = 0; i0 < n; i0 += batch) {
		for (int i = 0; i < batch; i++) {
			int row = step * (i0 + i);
			emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", v[i][0].s,
			      v[i][1].s, v[i][2].s, v[i][3].s);
			emitf(e, "\tsetp.lt.s32 %s, %d, %s;\n", p.s, row, hl.s);
			emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", p.s, v[i][0].s, v[i][1].s,
			      v[i][2].s, v[i][3].s, src.s, row * 2 * f->d);
		}
		for (int i = 0; i < batch; i++) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", dst.s, dst0.s, step * (i0 + i) * 128);
			emit_swizzle(e, dst, t, mask);
			emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", dst.s, v[i][0].s, v[i][1].s,
			      v[i][2].s, v[i][3].s);
		}
	}
}

/* The Q tile: the first 64 chunks of each row, then the rest (head_dim_qk
 * 576: 8 more), by nthr threads (tix: 0..nthr-1): through registers, maxb
 * 16-byte loads in flight per thread, or by cp.async (maxb 0). */
static void
emit_q(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg q0, Reg tix, int nthr, int maxb)
{
	emit_block(e, "sm90.decode_q");
	emit_q_part(e, d, r, q0, 0, 64, tix, nthr, maxb);
	if (d->f.d > 512)
		emit_q_part(e, d, r, q0, 64, (d->f.d - 512) / 8, tix, nthr, maxb);
}

/* The producer's 128 threads load the Q tile, 8 loads in flight each,
 * unless this part has no tiles: then no one reads Q, and its consumers
 * stage O in the Q tile right away (FmhaCfg.o_stage). */
static void
emit_q_unless_empty(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg q0)
{
	Reg p = reg_new(e, RC_PRED);
	char noq[48];

	label_new(e, noq, sizeof noq, "no_tiles");
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, r->j0.s, r->n_total.s, p.s, noq);
	emit_q(e, d, r, q0, r->tid, 128, 8);
	emit_label(e, noq);
}

/* DecodeOps.issue_q: the 256 consumer threads copy the Q tile by cp.async
 * in the prologue, before the key list is compacted, so Q arrives while
 * the indices are read; decode_load_q waits for the copies. A part with no
 * tiles copies Q too (its tile count is known only after compaction). */
static void
decode_issue_q(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg q0)
{
	Reg tix = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	char skip[48];

	label_new(e, skip, sizeof skip, "no_q_copy");
	emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->tid.s, d->cons_tid0, p.s, skip);
	emitf(e, "\tsub.u32 %s, %s, %d;\n", tix.s, r->tid.s, d->cons_tid0);
	emit_q(e, d, r, q0, tix, d->cons_threads, 0);
	emit_label(e, skip);
}

/* FmhaCfg.load_q: each consumer thread waits for its copies of the Q tile
 * (decode_issue_q); the caller publishes them (gen/sm90/fmha_split.c). */
static int
decode_load_q(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg q0, KgErr *err)
{
	(void)f;
	(void)r;
	(void)q0;
	(void)err;
	emitf(e, "\tcp.async.wait_all;\n");
	return 0;
}

/* Four E4M3 (one 32-bit word) times a scale into two bf16x2. */
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

/* The gather's shape for a cache format (docs/ABI.md,
 * "decode (attention over a paged FP8 KV cache)"): T threads per token, each loading the token's 16-byte chunks
 * T·c + q (q = tid % T) of the NoPE bytes and of the RoPE bytes, and the
 * token's whole scale entry. */
typedef struct Shape {
	int T, passes, tokens;     /* threads per token; passes per 64-key tile; tokens per pass */
	int nn, nr;                /* NoPE, RoPE chunks per thread */
	int sregs;                 /* scale-entry registers */
} Shape;

static int
shape_for(const DecodeFormat *fm, int T, Shape *s)
{
	int nope_chunks = fm->d_nope * (fm->nope_fp8 ? 1 : 2) / 16, rope_chunks = fm->d_rope * 2 / 16;

	s->T = T;
	s->passes = T / 2;
	s->tokens = 128 / T;
	s->nn = nope_chunks / T;
	s->nr = rope_chunks / T;
	s->sregs = (fm->scale_entry + 3) / 4;
	/* every chunk T·c + q of a thread shares chunk c's scale: 16·T
	 * values divide a scale group */
	return nope_chunks % T == 0 && rope_chunks % T == 0 && s->nn + s->nr <= MAX_CHUNKS &&
	       (!fm->nscales || !fm->nope_fp8 || fm->group % (16 * T) == 0);
}

static int
choose_shape(const DecodeFormat *fm, Shape *s, KgErr *err)
{
	if (shape_for(fm, 4, s) && 4 * (s->nn + s->nr) + s->sregs <= PASS_REGS)
		return 0;
	if (shape_for(fm, 8, s))
		return 0;
	return kg_fail(err, "--format=%s --head-dim-qk=%d: no gather shape of 4 or 8 threads per token fits the row",
	               fm->name, fm->d_qk);
}

/* One pass of 128/T keys in flight: the thread's token data. */
typedef struct Pass {
	Reg sc[4], nope[MAX_CHUNKS][4], rope[MAX_CHUNKS][4];
} Pass;

/* The producer's registers across the loop. */
typedef struct Gather {
	const DecodeCfg *d;
	const FmhaRegs *r;
	Shape sh;
	Reg tq, qt, list, k0, kv[2];
	Reg lim;                   /* keys past min(list length, this CTA's last tile) load nothing */
	Reg ok, pos, ent, idx, page, off, t, ps, pbytes, srcp, pf;
	Reg pb, a, o;


	Reg rb, a0, a1, a2, dsl, sc, h[4], y[2], x[4], out[8];
	Pass pass[2];
	Reg kq, pr, psc;           /* staged gather: the key tid % 64 a thread copies; row and scale copy */
} Gather;

/* Issues the loads of key 64j + pass·tokens + tid/T of the list into
 * g->pass[pass % 2]: the token's scale entry and its chunks T·c + q. A
 * key past the list's end (also every key of tile n_total, which the
 * pipeline asks for once) loads nothing: zeros, so its P·V adds 0 instead
 * of 0·garbage. */
/* The tile-keys ring slot of tile j: keys + (j % 3)·256, computed at each
 * use so no register holds it across the loop (the producer has none to
 * spare at fp8-v4). */
static Reg
emit_keys_slot(Emit *e, const Gather *g, Reg j)
{
	const DecodeCfg *d = g->d;
	Reg a = op_plan_smem(e, &d->f.plan, g->r->base, d->r_keys), t = reg_new(e, RC_B32);

	emitf(e, "\trem.u32 %s, %s, 3;\n\tmad.lo.u32 %s, %s, 256, %s;\n", t.s, j.s, a.s, t.s, a.s);
	return a;
}

/* Resolves key 64j + kt + add of the tile's list for this thread (guard:
 * only where that predicate holds, or NULL): g->ok (a key to load), g->off
 * (its row in the page), g->pb (the page's first byte), g->ps (the page's
 * tokens). */
static void
emit_key_page(Emit *e, Gather *g, Reg j, Reg kt, int add, const Reg *guard)
{
	const DecodeCfg *d = g->d;

	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %d;\n", g->pos.s, j.s, d->f.bn, kt.s, g->pos.s,
	      g->pos.s, add);
	if (guard)
		emitf(e, "\tsetp.lt.and.u32 %s, %s, %s, %s;\n\tmov.u32 %s, 0;\n", g->ok.s, g->pos.s, g->lim.s,
		      guard->s, g->ent.s);
	else
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tmov.u32 %s, 0;\n", g->ok.s, g->pos.s, g->lim.s, g->ent.s);
	if (d->nsparse < d->nsrc) {
		/* the tile's resolved keys: word kt + add of its slot */
		Reg slot = emit_keys_slot(e, g, j);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", g->t.s, kt.s, slot.s);
		emitf(e, "\t@%s ld.shared.u32 %s, [%s+%d];\n", g->ok.s, g->ent.s, g->t.s, 4 * add);
		emitf(e, "\tsetp.ne.and.u32 %s, %s, -1, %s;\n", g->ok.s, g->ent.s, g->ok.s);
		emitf(e, "\tand.b32 %s, %s, 0x7fffffff;\n", g->idx.s, g->ent.s);
		if (d->nsrc > 1)
			emitf(e, "\tsetp.lt.s32 %s, %s, 0;\n", g->srcp.s, g->ent.s);
	} else {
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s ld.shared.u32 %s, [%s];\n", g->t.s, g->pos.s, g->list.s,
		      g->ok.s, g->ent.s, g->t.s);
		emitf(e, "\tand.b32 %s, %s, 0x7fffffff;\n", g->idx.s, g->ent.s);
		if (d->nsrc > 1)
			emitf(e, "\tsetp.lt.s32 %s, %s, 0;\n", g->srcp.s, g->ent.s);
	}
	if (d->nsrc > 1) {
		emitf(e, "\tselp.u32 %s, %d, %d, %s;\n\tselp.u32 %s, %u, %u, %s;\n", g->ps.s, d->ps[1], d->ps[0],
		      g->srcp.s, g->pbytes.s, d->page_bytes[1], d->page_bytes[0], g->srcp.s);
		emitf(e, "\tselp.b64 %s, %s, %s, %s;\n", g->pb.s, g->kv[1].s, g->kv[0].s, g->srcp.s);
		emitf(e, "\tdiv.u32 %s, %s, %s;\n", g->page.s, g->idx.s, g->ps.s);
	} else {
		emitf(e, "\tmov.u32 %s, %d;\n\tmov.u32 %s, %u;\n\tmov.b64 %s, %s;\n", g->ps.s, d->ps[0], g->pbytes.s,
		      d->page_bytes[0], g->pb.s, g->kv[0].s);
		emitf(e, "\tdiv.u32 %s, %s, %d;\n", g->page.s, g->idx.s, d->ps[0]);
	}
	/* the page: page·page_bytes; off = idx - page·ps */
	emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", g->t.s, g->page.s, g->ps.s, g->off.s,
	      g->idx.s, g->t.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->page.s, g->pbytes.s, g->pb.s,
	      g->pb.s, g->o.s);
}

/* An L2 prefetch of tile j's token rows, in one of two forms:
 * - rows on 64-byte boundaries (row and page bytes multiples of 64): one
 *   cp.async.bulk.prefetch.L2 of the row (rows start 16-byte aligned and
 *   are a multiple of 16 bytes, gen/decode_format.c; PTX ISA
 *   "cp.async.bulk.prefetch"). It takes a uniform address, so ptxas loops
 *   it over a warp's distinct rows: with sparse sources each even thread
 *   tid takes key 64j + tid/2, 16 rows in each of the four warps instead
 *   of 32 in two of them, which halves the loop the tile waits for (H100:
 *   V3.2 -1.7 %); with a paged source (keys from the resolved-keys ring)
 *   threads tid < 64 take key 64j + tid (the spread mapping's register
 *   spills the gatherer, fp8-token).
 * - otherwise (fp8-v32's 656-byte rows, fp8-token's 592): threads tid < 64
 *   take key 64j + tid and prefetch.global.L2 each 128-byte line of its
 *   row (PTX ISA "prefetch": at bytes 0, 128, .. and its last byte's).
 *   Measured on the H200 (BENCHMARKS.md "decode"): V3.2 9 % and fp8-token
 *   13 % faster than the bulk form, while fp8-v4 was no faster and its
 *   gatherer has no register to spare for it.
 * Each thread with a key also prefetches the line of its tail scales.
 * Issued decode_prefetch_tiles tiles before the tile's loads, so they find
 * the rows in L2 instead of each pass waiting on HBM with only its own
 * rows in flight; nothing is written, so nothing waits. */
static void
emit_prefetch_tile(Emit *e, Gather *g, Reg j)
{
	const DecodeCfg *d = g->d;
	const DecodeFormat *fm = d->fmt;
	int lines = fm->row_bytes % 64 != 0;

	for (int s = 0; s < d->nsrc; s++)
		lines |= d->page_bytes[s] % 64 != 0;
	if (lines || d->nsparse < d->nsrc) {
		emitf(e, "\tsetp.lt.u32 %s, %s, 64;\n", g->pf.s, g->r->tid.s);
		emit_key_page(e, g, j, g->r->tid, 0, &g->pf);
	} else {
		/* tid/2 in idx, which emit_key_page reads before it writes it
		 * (the key page's registers only: gen/emit.h, "Naming") */
		emitf(e, "\tand.b32 %s, %s, 1;\n\tsetp.eq.u32 %s, %s, 0;\n\tshr.u32 %s, %s, 1;\n", g->t.s,
		      g->r->tid.s, g->pf.s, g->t.s, g->idx.s, g->r->tid.s);
		emit_key_page(e, g, j, g->idx, 0, &g->pf);
	}
	if (fm->nscales && fm->scale_at < 0) {
		emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %d, %s;\n", g->t.s, g->ps.s, fm->row_bytes,
		      g->t.s, g->off.s, fm->scale_bytes, g->t.s);
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n\t@%s prefetch.global.L2 [%s];\n", g->o.s,
		      g->t.s, g->a.s, g->pb.s, g->o.s, g->ok.s, g->a.s);
	}
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->off.s, fm->row_bytes, g->a.s,
	      g->pb.s, g->o.s);
	if (!lines) {
		emitf(e, "\t@%s cp.async.bulk.prefetch.L2.global [%s], %d;\n", g->ok.s, g->a.s, fm->row_bytes);
		return;
	}
	for (int b = 0; b < fm->row_bytes; b += 128)
		emitf(e, "\t@%s prefetch.global.L2 [%s+%d];\n", g->ok.s, g->a.s, b);
	emitf(e, "\t@%s prefetch.global.L2 [%s+%d];\n", g->ok.s, g->a.s, fm->row_bytes - 1);
}

static void
emit_pass_load(Emit *e, Gather *g, Reg j, int pass)
{
	const DecodeCfg *d = g->d;
	const DecodeFormat *fm = d->fmt;
	const Shape *sh = &g->sh;
	Pass *ps = &g->pass[pass % 2];
	static const char *const vec[] = {"", ".b32", ".v2.b32", "", ".v4.b32"};

	emit_key_page(e, g, j, g->tq, sh->tokens * pass, NULL);
	if (fm->nscales) {
		/* the scales (gen/decode_format.c): inline at off·row_bytes +
		 * scale_at, or in the tail at ps·row_bytes + off·scale_bytes */
		if (fm->scale_at >= 0)
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %d;\n", g->t.s, g->off.s, fm->row_bytes, fm->scale_at);
		else
			emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %d, %s;\n", g->t.s, g->ps.s,
			      fm->row_bytes, g->t.s, g->off.s, fm->scale_bytes, g->t.s);
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->t.s, g->a.s, g->pb.s, g->o.s);
		for (int i = 0; i < sh->sregs; i++)
			emitf(e, "\tmov.b32 %s, 0;\n", ps->sc[i].s);
		if (sh->sregs == 1)
			emitf(e, "\t@%s ld.global.nc.b32 %s, [%s];\n", g->ok.s, ps->sc[0].s, g->a.s);
		else if (sh->sregs == 2)
			emitf(e, "\t@%s ld.global.nc%s {%s, %s}, [%s];\n", g->ok.s, vec[2], ps->sc[0].s, ps->sc[1].s,
			      g->a.s);
		else
			emitf(e, "\t@%s ld.global.nc%s {%s, %s, %s, %s}, [%s];\n", g->ok.s, vec[4], ps->sc[0].s,
			      ps->sc[1].s, ps->sc[2].s, ps->sc[3].s, g->a.s);
	}
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 16, %s;\n", g->t.s, g->off.s, fm->row_bytes,
	      g->t.s, g->qt.s, g->t.s);
	emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->t.s, g->a.s, g->pb.s, g->o.s);
	for (int c = 0; c < sh->nn + sh->nr; c++) {
		const Reg *v = c < sh->nn ? ps->nope[c] : ps->rope[c - sh->nn];
		int at = c < sh->nn ? 16 * sh->T * c : fm->rope_at + 16 * sh->T * (c - sh->nn);
		emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", v[0].s, v[1].s,
		      v[2].s, v[3].s);
		emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", g->ok.s, v[0].s, v[1].s, v[2].s,
		      v[3].s, g->a.s, at);
	}
}

/* Stores BF16 chunk T·c + q of the values from element e0 (a multiple of
 * 64) on: element e0 + 8(T·c + q) is slice e0/64 + T·c/8, byte 16((T·c)%8 +
 * q) of the row (T·c%8 + q < 8), so g->rb (the row + 16q) plus the static
 * part, swizzled. */
static void
emit_store_bf16(Emit *e, Gather *g, int e0, int c, const Reg v[4])
{
	const FmhaCfg *f = &g->d->f;
	int T = g->sh.T;

	emitf(e, "\tadd.u32 %s, %s, %d;\n", g->a0.s, g->rb.s, 16 * ((T * c) % 8));
	emit_swizzle(e, g->a0, g->t, swizzle_mask(SWZ_128B));
	emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", g->a0.s,
	      (uint32_t)(e0 / 64 + T * c / 8) * f->lk.slice_bytes, v[0].s, v[1].s, v[2].s, v[3].s);
}

/* Dequantizes g->pass[pass % 2] and stores it into rows pass·tokens + tid/T
 * of the K=V stage. */
static void
emit_pass_store(Emit *e, Gather *g, Reg stage, int pass)
{
	const DecodeCfg *d = g->d;
	const DecodeFormat *fm = d->fmt;
	const FmhaCfg *f = &d->f;
	const Shape *sh = &g->sh;
	uint32_t mask = swizzle_mask(SWZ_128B), slice = f->lk.slice_bytes;
	Pass *ps = &g->pass[pass % 2];

	/* the row: stage + (pass·tokens + tid/T)·128; rb = the row + 16q */
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tadd.u32 %s, %s, %d;\n", g->a2.s, stage.s, f->k_bytes,
	      g->k0.s, g->a2.s, g->a2.s, sh->tokens * 128 * pass);
	emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tmad.lo.u32 %s, %s, 16, %s;\n", g->a2.s, g->tq.s, g->a2.s,
	      g->rb.s, g->qt.s, g->a2.s);
	if (!fm->nope_fp8) {
		for (int c = 0; c < sh->nn; c++)
			emit_store_bf16(e, g, 0, c, ps->nope[c]);
	} else {
		/* E4M3 chunk T·c + q: elements 16(T·c + q).. = slice T·c/4 +
		 * q/4, bytes 32(q%4) and 32(q%4) + 16 of the row */
		emitf(e, "\tand.b32 %s, %s, 3;\n\tmad.lo.u32 %s, %s, 32, %s;\n\tadd.u32 %s, %s, 16;\n", g->t.s,
		      g->qt.s, g->a0.s, g->t.s, g->a2.s, g->a1.s, g->a0.s);
		emit_swizzle(e, g->a0, g->t, mask);
		emit_swizzle(e, g->a1, g->t, mask);
		if (sh->T > 4) {
			emitf(e, "\tshr.u32 %s, %s, 2;\n\tmul.lo.u32 %s, %s, %u;\n", g->t.s, g->qt.s, g->dsl.s, g->t.s,
			      slice);
			emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", g->a0.s, g->a0.s, g->dsl.s, g->a1.s,
			      g->a1.s, g->dsl.s);
		}
		for (int c = 0; c < sh->nn; c++) {
			int gi = 16 * sh->T * c / fm->group;
			if (fm->scale == DEC_SCALE_UE8M0) {
				/* UE8M0 e is 2^(e-127): as an f32 its bits are e << 23 */
				emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n\tshl.b32 %s, %s, 23;\n\tmov.b32 %s, %s;\n", g->t.s,
				      ps->sc[gi / 4].s, 8 * (gi % 4), g->t.s, g->t.s, g->sc.s, g->t.s);
			} else {
				emitf(e, "\tmov.b32 %s, %s;\n", g->sc.s, ps->sc[gi].s);
			}
			for (int k = 0; k < 4; k++)
				emit_dequant_word(e, ps->nope[c][k], g->sc, g->out[2 * k], g->out[2 * k + 1], g->h, g->y,
				                  g->x);
			emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", g->a0.s, (uint32_t)(sh->T * c / 4) * slice,
			      g->out[0].s, g->out[1].s, g->out[2].s, g->out[3].s);
			emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", g->a1.s, (uint32_t)(sh->T * c / 4) * slice,
			      g->out[4].s, g->out[5].s, g->out[6].s, g->out[7].s);
		}
	}
	for (int c = 0; c < sh->nr; c++)
		emit_store_bf16(e, g, fm->d_nope, c, ps->rope[c]);
}

/* The gather's registers across the loop, the key limit, the caches'
 * bases and this thread's token and chunk (q = tid % T). */
static void
gather_init(Emit *e, Gather *g)
{
	const DecodeCfg *d = g->d;
	const FmhaCfg *f = &d->f;
	const FmhaRegs *r = g->r;

	g->lim = reg_new(e, RC_B32);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmin.u32 %s, %s, %s;\n", g->lim.s, r->n_total.s, f->bn, g->lim.s,
	      g->lim.s, r->sk.s);
	g->tq = reg_new(e, RC_B32);
	g->qt = reg_new(e, RC_B32);
	g->ok = reg_new(e, RC_PRED);
	g->srcp = reg_new(e, RC_PRED);
	g->pf = reg_new(e, RC_PRED);
	reg_array(e, RC_B32, &g->pos, 8);
	g->pb = reg_new(e, RC_B64);
	g->a = reg_new(e, RC_B64);
	g->o = reg_new(e, RC_B64);
	reg_array(e, RC_B32, &g->rb, 5);
	g->sc = reg_new(e, RC_F32);
	reg_array(e, RC_B16, g->h, 4);
	reg_array(e, RC_B32, g->y, 2);
	reg_array(e, RC_F32, g->x, 4);
	reg_array(e, RC_B32, g->out, 8);
	for (int hf = 0; hf < 2; hf++) {
		reg_array(e, RC_B32, g->pass[hf].sc, g->sh.sregs ? g->sh.sregs : 1);
		for (int c = 0; c < g->sh.nn; c++)
			reg_array(e, RC_B32, g->pass[hf].nope[c], 4);
		for (int c = 0; c < g->sh.nr; c++)
			reg_array(e, RC_B32, g->pass[hf].rope[c], 4);
	}
	for (int s = 0; s < d->nsrc; s++) {
		g->kv[s] = reg_new(e, RC_B64);
		op_param_global(e, g->kv[s], "KV%s", s ? "_extra" : "");
	}
	/* T threads per token: q = tid % T */
	emitf(e, "\tand.b32 %s, %s, %d;\n\tshr.u32 %s, %s, %d;\n", g->qt.s, r->tid.s, g->sh.T - 1, g->tq.s, r->tid.s,
	      g->sh.T == 4 ? 2 : 3);
}

/* The K=V tiles, software-pipelined by passes so that one pass's loads
 * are always in flight while the previous one is dequantized: pass 0 of
 * tile j was issued in the previous iteration; for each pass k, issue
 * pass k+1 (after the last: pass 0 of tile j+1), wait for the slot before
 * the first store, store pass k; then publish. */
static int
emit_tiles(Emit *e, KgErr *err, const DecodeCfg *d, const FmhaRegs *r, Reg k0, Reg kbar0, Reg kfree0,
           Reg list)
{
	const FmhaCfg *f = &d->f;
	Gather g = {.d = d, .r = r, .k0 = k0, .list = list};
	Reg stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32), j = reg_new(e, RC_B32);
	Reg jn = reg_new(e, RC_B32), bar = reg_new(e, RC_B32), par = reg_new(e, RC_B32);
	Reg jd = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	char loop[48], done[48];
	int P, paged = d->nsparse < d->nsrc, D = decode_prefetch_tiles(d), pf = f->t->decode->l2_prefetch;

	if (choose_shape(d->fmt, &g.sh, err) < 0)
		return -1;
	P = g.sh.passes;
	gather_init(e, &g);
	label_new(e, loop, sizeof loop, "gather");
	label_new(e, done, sizeof done, "gather_done");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, %s;\n", stage.s, phase.s, j.s, r->j0.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->n_total.s, p.s, done);
	if (paged) {
		/* ring slots j % 3: three, so that the barrier after resolving
		 * tile j+1 also proves every read of tile j-2's slot done */
		decode_emit_tile_keys(e, d, r, d->nsrc > 1 ? decode_emit_main_count(e, d, r) : r->sk, j, r->tid,
		                      emit_keys_slot(e, &g, j));
		op_bar_sync_why(e, 3, 128, "the producer's resolved keys of its first tile");
	}
	/* the first pass's loads, then the prefetches behind them: tiles
	 * j..j+D now, tile j+1+D at the end of iteration j (gen/decode.h
	 * decode_prefetch_tiles) */
	emit_pass_load(e, &g, j, 0);
	for (int k = 0; pf && k <= D; k++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n", jd.s, j.s, k);
		emit_prefetch_tile(e, &g, jd);
	}
	emit_label(e, loop);
	emit_block(e, "sm90.decode_gather");
	emitf(e, "\tadd.u32 %s, %s, 1;\n", jn.s, j.s);
	if (paged) {
		decode_emit_tile_keys(e, d, r, d->nsrc > 1 ? decode_emit_main_count(e, d, r) : r->sk, jn, r->tid,
		                      emit_keys_slot(e, &g, jn));
		op_bar_sync_why(e, 3, 128, "the producer's resolved keys of the next tile");
	}
	for (int k = 0; k < P; k++) {
		if (k + 1 < P)
			emit_pass_load(e, &g, j, k + 1);
		else
			emit_pass_load(e, &g, jn, 0);
		if (k == 0) {
			emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n\txor.b32 %s, %s, 1;\n", bar.s, stage.s, kfree0.s,
			      par.s, phase.s);
			if (op_mbar_wait(e, err, bar, par.s) < 0)
				return -1;
		}
		emit_pass_store(e, &g, stage, k);
	}
	/* the wgmma reads of this tile are async-proxy reads of generic stores */
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", bar.s, stage.s, kbar0.s);
	op_mbar_arrive(e, bar, NULL);
	op_ring_advance(e, stage, phase, f->stages, p);
	if (pf) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n", jd.s, j.s, D + 1);
		emit_prefetch_tile(e, &g, jd);
	}
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, jn.s, p.s, j.s,
	      r->n_total.s, p.s, loop);
	emit_label(e, done);
	return 0;
}

/* The staged gather (DecodeOps.stage_rows, docs/ABI.md "decode"): each
 * tile's raw token rows reach a slot of a ring in shared memory by
 * cp.async.bulk (PTX ISA "cp.async.bulk"), issued DEC_RAW_SLOTS tiles
 * before the tile is dequantized, so a CTA keeps one to two tiles (fp8-v4:
 * 37-75 KB) in flight instead of the one pass its registers hold; the
 * dequantization then reads shared memory. A slot (gen/decode.c,
 * decode_stage_fits): 64 rows, then with tail scales 64 16-byte pairs
 * (the aligned pair that holds the key's entry), then 64 flag words: -1
 * for no key (its row stays stale: the dequantization loads zeros), else
 * the entry's offset in its pair. */

/* Address of slot `slot` of the ring and of its "token rows full" barrier. */
static void
emit_raw_slot(Emit *e, const Gather *g, Reg slot, Reg raw, Reg bar)
{
	const DecodeCfg *d = g->d;
	Reg a = op_plan_smem(e, &d->f.plan, g->r->base, d->r_raw), b = op_plan_bar(e, &d->f.plan, g->r->base, d->b_raw);

	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tmad.lo.u32 %s, %s, 8, %s;\n", raw.s, slot.s, d->raw_bytes, a.s,
	      bar.s, slot.s, b.s);
}

/* Tile jd's copies into slot `slot`: thread tid takes key 64·jd + tid % 64;
 * threads < 64 write its flag and copy its row, threads >= 64 copy its
 * scale pair (tail scales). Every thread arrives once on the slot's
 * barrier, with expect_tx of the bytes it copies, before copying; its
 * flag store precedes its arrival (a release), so every thread whose wait
 * (an acquire) sees the phase complete sees the flag. */
static void
emit_issue_tile(Emit *e, Gather *g, Reg jd, Reg slot)
{
	const DecodeCfg *d = g->d;
	const DecodeFormat *fm = d->fmt;
	const Reg tid = g->r->tid;
	int tail = fm->nscales && fm->scale_at < 0;
	Reg raw = g->rb, bar = g->a0, dst = g->a1, fl = g->a2, sdst = g->dsl;
	const char *cp = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes";

	emit_key_page(e, g, jd, g->kq, 0, NULL);
	emit_raw_slot(e, g, slot, raw, bar);
	if (tail) {
		/* the entry at ps·row_bytes + off·scale_bytes; its pair at that & ~15 */
		emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %d, %s;\n", g->t.s, g->ps.s, fm->row_bytes,
		      g->t.s, g->off.s, fm->scale_bytes, g->t.s);
		emitf(e, "\tand.b32 %s, %s, 15;\n\tand.b32 %s, %s, -16;\n\tselp.b32 %s, %s, -1, %s;\n", fl.s, g->t.s,
		      g->t.s, g->t.s, fl.s, fl.s, g->ok.s);
	} else {
		emitf(e, "\tselp.b32 %s, 0, -1, %s;\n", fl.s, g->ok.s);
	}
	emitf(e, "\tsetp.lt.u32 %s, %s, 64;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.u32 [%s+%u], %s;\n", g->pf.s,
	      tid.s, dst.s, g->kq.s, raw.s, g->pf.s, dst.s, d->raw_flags_at, fl.s);
	/* the row: page + off·row_bytes into raw + kq·row_bytes; the pair:
	 * page + (t & ~15) into raw + scales_at + kq·16 */
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->off.s, fm->row_bytes, g->a.s,
	      g->pb.s, g->o.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", dst.s, g->kq.s, fm->row_bytes, raw.s);
	if (tail) {
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", g->o.s, g->t.s, g->pb.s, g->pb.s, g->o.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 16, %s;\n\tadd.u32 %s, %s, %u;\n", sdst.s, g->kq.s, raw.s, sdst.s, sdst.s,
		      d->raw_scales_at);
		emitf(e, "\tsetp.ge.and.u32 %s, %s, 64, %s;\n", g->psc.s, tid.s, g->ok.s);
	}
	emitf(e, "\tsetp.lt.and.u32 %s, %s, 64, %s;\n", g->pr.s, tid.s, g->ok.s);
	if (tail) {
		emitf(e, "\t@!%s mbarrier.arrive.shared::cta.b64 _, [%s];\n", g->ok.s, bar.s);
		emitf(e, "\t@%s mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %d;\n", g->pr.s, bar.s, fm->row_bytes);
		emitf(e, "\t@%s mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], 16;\n", g->psc.s, bar.s);
	} else {
		emitf(e, "\t@!%s mbarrier.arrive.shared::cta.b64 _, [%s];\n", g->pr.s, bar.s);
		emitf(e, "\t@%s mbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %d;\n", g->pr.s, bar.s, fm->row_bytes);
	}
	emitf(e, "\t@%s %s [%s], [%s], %d, [%s];\n", g->pr.s, cp, dst.s, g->a.s, fm->row_bytes, bar.s);
	if (tail)
		emitf(e, "\t@%s %s [%s], [%s], 16, [%s];\n", g->psc.s, cp, sdst.s, g->pb.s, bar.s);
}

/* Loads pass `pass` of the tile in slot `raw` from shared memory into
 * g->pass[pass % 2], as emit_pass_load does from the cache: token
 * pass·tokens + tid/T, zeros where its flag says no key. */
static void
emit_pass_load_staged(Emit *e, Gather *g, Reg raw, int pass)
{
	const DecodeCfg *d = g->d;
	const DecodeFormat *fm = d->fmt;
	const Shape *sh = &g->sh;
	Pass *ps = &g->pass[pass % 2];
	static const char *const vec[] = {"", ".b32", ".v2.b32", "", ".v4.b32"};

	emitf(e, "\tadd.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n", g->pos.s, g->tq.s, sh->tokens * pass, g->t.s,
	      g->pos.s, raw.s);
	emitf(e, "\tld.shared.u32 %s, [%s+%u];\n\tsetp.ge.s32 %s, %s, 0;\n", g->ent.s, g->t.s, d->raw_flags_at,
	      g->ok.s, g->ent.s);
	if (fm->nscales) {
		if (fm->scale_at >= 0)
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %d;\n", g->t.s, g->pos.s, fm->row_bytes,
			      raw.s, g->t.s, g->t.s, fm->scale_at);
		else
			emitf(e, "\tmad.lo.u32 %s, %s, 16, %s;\n\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %u;\n", g->t.s,
			      g->pos.s, raw.s, g->t.s, g->t.s, g->ent.s, g->t.s, g->t.s, d->raw_scales_at);
		for (int i = 0; i < sh->sregs; i++)
			emitf(e, "\tmov.b32 %s, 0;\n", ps->sc[i].s);
		if (sh->sregs == 1)
			emitf(e, "\t@%s ld.shared.b32 %s, [%s];\n", g->ok.s, ps->sc[0].s, g->t.s);
		else if (sh->sregs == 2)
			emitf(e, "\t@%s ld.shared%s {%s, %s}, [%s];\n", g->ok.s, vec[2], ps->sc[0].s, ps->sc[1].s, g->t.s);
		else
			emitf(e, "\t@%s ld.shared%s {%s, %s, %s, %s}, [%s];\n", g->ok.s, vec[4], ps->sc[0].s, ps->sc[1].s,
			      ps->sc[2].s, ps->sc[3].s, g->t.s);
	}
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmad.lo.u32 %s, %s, 16, %s;\n", g->t.s, g->pos.s, fm->row_bytes,
	      raw.s, g->t.s, g->qt.s, g->t.s);
	for (int c = 0; c < sh->nn + sh->nr; c++) {
		const Reg *v = c < sh->nn ? ps->nope[c] : ps->rope[c - sh->nn];
		int at = c < sh->nn ? 16 * sh->T * c : fm->rope_at + 16 * sh->T * (c - sh->nn);
		emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", v[0].s, v[1].s,
		      v[2].s, v[3].s);
		emitf(e, "\t@%s ld.shared.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", g->ok.s, v[0].s, v[1].s, v[2].s,
		      v[3].s, g->t.s, at);
	}
}

/* The K=V tiles through the ring: tiles j0 and j0+1 are copied before the
 * loop; iteration j waits for tile j's slot, dequantizes it pass by pass
 * into the K=V stage (once the consumers free it), publishes it, then,
 * after a barrier of the producer's threads proves every read of the
 * slot done, copies tile j+2 into it. */
static int
emit_tiles_staged(Emit *e, KgErr *err, const DecodeCfg *d, const FmhaRegs *r, Reg k0, Reg kbar0, Reg kfree0,
                  Reg list)
{
	const FmhaCfg *f = &d->f;
	Gather g = {.d = d, .r = r, .k0 = k0, .list = list};
	Reg stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32), j = reg_new(e, RC_B32);
	Reg rs = reg_new(e, RC_B32), rph = reg_new(e, RC_B32), raw = reg_new(e, RC_B32);
	Reg bar = reg_new(e, RC_B32), par = reg_new(e, RC_B32), jd = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	char loop[48], done[48], skip[48];
	int P, paged = d->nsparse < d->nsrc, D = decode_prefetch_tiles(d), pf = f->t->decode->l2_prefetch;

	if (choose_shape(d->fmt, &g.sh, err) < 0)
		return -1;
	P = g.sh.passes;
	gather_init(e, &g);
	g.kq = reg_new(e, RC_B32);
	g.pr = reg_new(e, RC_PRED);
	g.psc = reg_new(e, RC_PRED);
	emitf(e, "\tand.b32 %s, %s, 63;\n", g.kq.s, r->tid.s);
	label_new(e, loop, sizeof loop, "gather");
	label_new(e, done, sizeof done, "gather_done");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, %s;\n", stage.s, phase.s, j.s, r->j0.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", rs.s, rph.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->n_total.s, p.s, done);
	/* tiles j0 and j0+1 (the second only if there is one) into slots 0 and 1 */
	for (int k = 0; k < DEC_RAW_SLOTS; k++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n", jd.s, j.s, k);
		if (paged)
			decode_emit_tile_keys(e, d, r, d->nsrc > 1 ? decode_emit_main_count(e, d, r) : r->sk, jd, r->tid,
			                      emit_keys_slot(e, &g, jd));
	}
	if (paged)
		op_bar_sync_why(e, 3, 128, "the producer's resolved keys of its first tiles");
	for (int k = 0; k < DEC_RAW_SLOTS; k++) {
		label_new(e, skip, sizeof skip, "gather_issued");
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tmov.u32 %s, %d;\n", jd.s, j.s, k, rs.s, k);
		emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, jd.s, r->n_total.s, p.s, skip);
		emit_issue_tile(e, &g, jd, rs);
		emit_label(e, skip);
	}
	emitf(e, "\tmov.u32 %s, 0;\n", rs.s);
	/* L2 prefetches beyond the copies: tiles j0+2..j0+1+D now, tile
	 * j+2+D after iteration j's copies (gen/decode.h decode_prefetch_tiles) */
	for (int k = DEC_RAW_SLOTS; pf && k < DEC_RAW_SLOTS + D; k++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n", jd.s, j.s, k);
		emit_prefetch_tile(e, &g, jd);
	}
	emit_label(e, loop);
	emit_block(e, "sm90.decode_gather_staged");
	emit_raw_slot(e, &g, rs, raw, bar);
	if (op_mbar_wait(e, err, bar, rph.s) < 0)
		return -1;
	emit_pass_load_staged(e, &g, raw, 0);
	for (int k = 0; k < P; k++) {
		if (k + 1 < P)
			emit_pass_load_staged(e, &g, raw, k + 1);
		if (k == 0) {
			emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n\txor.b32 %s, %s, 1;\n", bar.s, stage.s, kfree0.s,
			      par.s, phase.s);
			if (op_mbar_wait(e, err, bar, par.s) < 0)
				return -1;
		}
		emit_pass_store(e, &g, stage, k);
	}
	/* the wgmma reads of this tile are async-proxy reads of generic
	 * stores; the fence also orders this thread's reads of the slot
	 * before the copies that refill it */
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", bar.s, stage.s, kbar0.s);
	op_mbar_arrive(e, bar, NULL);
	op_ring_advance(e, stage, phase, f->stages, p);
	emitf(e, "\tadd.u32 %s, %s, %d;\n", jd.s, j.s, DEC_RAW_SLOTS);
	if (paged)
		decode_emit_tile_keys(e, d, r, d->nsrc > 1 ? decode_emit_main_count(e, d, r) : r->sk, jd, r->tid,
		                      emit_keys_slot(e, &g, jd));
	op_bar_sync_why(e, 3, 128, "every producer thread's reads of the slot before its refill");
	label_new(e, skip, sizeof skip, "gather_issued");
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, jd.s, r->n_total.s, p.s, skip);
	emit_issue_tile(e, &g, jd, rs);
	emit_label(e, skip);
	if (pf && D) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n", jd.s, j.s, DEC_RAW_SLOTS + D);
		emit_prefetch_tile(e, &g, jd);
	}
	op_ring_advance(e, rs, rph, DEC_RAW_SLOTS, p);
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, p.s, j.s,
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
	/* Q, published with the first K=V tile (gen/sm90/fmha_split.c, "Q
	 * full"), unless the consumers load it (FmhaCfg.load_q) */
	if (!f->load_q) {
		emit_q_unless_empty(e, d, r, q0);
		/* the gather's registers are the producer's (gen/emit.h, "Naming") */
		emit_block(e, "sm90.decode_producer");
	}
	if (d->raw_slots)
		return emit_tiles_staged(e, err, d, r, k0, kbar0, kfree0, list);
	return emit_tiles(e, err, d, r, k0, kbar0, kfree0, list);
}

static int
gather_regs(const DecodeFormat *fm)
{
	Shape s;
	KgErr err;

	return choose_shape(fm, &s, &err) == 0 && s.T == 8 && s.sregs <= 1 ? GATHER_REGS_T8 : GATHER_REGS;
}

const DecodeOps decode_sm90 = {
	decode_gather_warpgroup,
	GATHER_REGS,
	"sm_90a: E4M3 -> f16 (cvt) -> f32 x scale -> bf16 in registers of the producer warpgroup (bf16 caches: "
	"copied), stored to smem; then the only rounding beyond the key's is fmha's bf16 P. FP8 wgmma is not "
	"taken: it would round Q and P to E4M3 (~2^-4 relative per element), and it reads only K-major "
	"operands, while V, stored key by key, is P.V's MN-major B",
	NULL,
	NULL,
	gather_regs,
	1,
	1, /* +10 % at batch 64-128 on the H100 (BENCHMARKS.md, decode) */
	1, /* ncu, h64 b128: L1TEX-scoreboard-bound with one pass in flight (docs/ABI.md "decode") */
	decode_load_q,
	decode_issue_q,
};
