/* The blocks of one sm_90a FMHA consumer warpgroup, used by both plans:
 * the ring of one to three warpgroups taking MMA turns (fmha.c) and the
 * split-O plan for head-dim 512 (fmha_split.c). Each emits one step of a
 * KV tile for the registers a Consumer holds: S = Q·K^T, masking, the
 * online softmax, stage release and advance, the loop head and foot, the
 * epilogue, and the set-up of all of it. */
#include <stdio.h>
#include <string.h>

#include "../desc.h"
#include "../fmha.h"
#include "../ops.h"
#include "consumer.h"
#include "mma.h"

/* S = Q·K^T: K-major Q (A) and K (B), 32 bytes of head-dim per MMA; the
 * first MMA overwrites S (scale-d 0). Issued, not waited. */
void
fmha90_scores_issue(Emit *e, const FmhaCfg *f, Consumer *c)
{
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", c->klo.s, c->stage.s, f->k_bytes, c->k0.s);
	op_desc_start(e, c->klo, fmha_clustered(f));
	for (int kk = 0; kk < f->d / 16; kk++) {
		uint32_t qa = layout_offset(&f->lq, 0, 16 * kk) >> 4, ka = layout_offset(&f->lk, 0, 16 * kk) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", c->lo.s, c->qlo.s, qa, c->ad.s,
		      c->lo.s, c->dhi.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", c->lo.s, c->klo.s, ka + c->dq_lo,
		      c->bd.s, c->lo.s, c->dhi.s);
		sm90_wgmma(e, f->bn, f->in, c->S, &c->ad, NULL, c->bd, kk > 0, 0);
	}
	sm90_wgmma_commit(e);
}

void
fmha90_mask(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c)
{
	emit_block(e, "sm90.fmha_mask");
	sm90_acc_col0(e, c->t, r->lane);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", c->colb.s, c->j.s, f->bn, c->t.s);
	for (int i = 0; i < f->bn / 2; i++) {
		emitf(e, "\tadd.s32 %s, %s, %d;\n", c->t.s, c->colb.s, col_of(i));
		emitf(e, "\tsetp.ge.s32 %s, %s, %s;\n", c->p.s, c->t.s, c->lim[row_of(i)].s);
		if (f->mask == MASK_WINDOW)
			emitf(e, "\tsetp.lt.or.s32 %s, %s, %s, %s;\n", c->p.s, c->t.s, c->klo_row[row_of(i)].s, c->p.s);
		emitf(e, "\t@%s mov.f32 %s, %s;\n", c->p.s, c->S[i].s, NEG_INF);
	}
}

/* Online softmax, first half (FA2): new row max, the rescale factor of
 * the running sum and O, P = exp2(S·scale·log2e - max·scale·log2e) in the
 * S registers and its row sums. Touches neither O nor P, so it overlaps
 * the previous tile's P·V. A row that has seen only masked keys keeps max
 * -inf; its offset is taken as 0 so no -inf - -inf NaN appears. */
void
fmha90_softmax_exp(Emit *e, const FmhaCfg *f, Consumer *c)
{
	emit_block(e, "sm90.fmha_softmax");
	for (int r = 0; r < 2; r++)
		emitf(e, "\tmov.f32 %s, %s;\n", c->mx[r].s, c->m[r].s);
	for (int i = 0; i < f->bn / 2; i++)
		emitf(e, "\tmax.f32 %s, %s, %s;\n", c->mx[row_of(i)].s, c->mx[row_of(i)].s, c->S[i].s);
	for (int r = 0; r < 2; r++)
		for (int x = 1; x <= 2; x *= 2) {
			/* the 4 lanes of a quad hold the same two rows
			 * (docs/hardware.md, "wgmma accumulator fragment") */
			emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n", c->t.s, c->mx[r].s, x);
			emitf(e, "\tmov.b32 %s, %s;\n", c->nms[r].s, c->t.s);
			emitf(e, "\tmax.f32 %s, %s, %s;\n", c->mx[r].s, c->mx[r].s, c->nms[r].s);
		}
	for (int r = 0; r < 2; r++) {
		emitf(e, "\tsetp.eq.f32 %s, %s, %s;\n", c->p.s, c->mx[r].s, NEG_INF);
		emitf(e, "\tmul.f32 %s, %s, %s;\n", c->ms[r].s, c->mx[r].s, c->sc.s);
		emitf(e, "\tselp.f32 %s, 0f00000000, %s, %s;\n", c->ms[r].s, c->ms[r].s, c->p.s);
		emitf(e, "\tneg.f32 %s, %s;\n", c->nms[r].s, c->ms[r].s);
		emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", c->corr[r].s, c->m[r].s, c->sc.s, c->nms[r].s);
		emitf(e, "\tex2.approx.ftz.f32 %s, %s;\n", c->corr[r].s, c->corr[r].s);
		emitf(e, "\tmov.f32 %s, %s;\n", c->m[r].s, c->mx[r].s);
	}
	emitf(e, "\tmov.f32 %s, 0f00000000;\n\tmov.f32 %s, 0f00000000;\n", c->mx[0].s, c->mx[1].s);
	for (int i = 0; i < f->bn / 2; i++) {
		emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", c->S[i].s, c->S[i].s, c->sc.s, c->nms[row_of(i)].s);
		op_exp2_mix(e, &c->ex, i, c->S[i]);
		emitf(e, "\tadd.f32 %s, %s, %s;\n", c->mx[row_of(i)].s, c->mx[row_of(i)].s, c->S[i].s);
	}
}

/* Second half, once the previous P·V has completed: rescale l and O, and
 * convert P to the RS A fragment. l stays a per-thread partial sum (corr
 * is the same for the quad; the epilogue adds the quad's partials). The S
 * accumulator of columns 16kk.. is, pair by pair, the A fragment of k-chunk
 * kk (docs/hardware.md, "wgmma accumulator fragment" and "wgmma A fragment"). */
void
fmha90_softmax_rescale(Emit *e, const FmhaCfg *f, Consumer *c, int pack)
{
	emit_block(e, "sm90.fmha_rescale");
	for (int r = 0; r < 2; r++)
		emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", c->l[r].s, c->l[r].s, c->corr[r].s, c->mx[r].s);
	for (int i = 0; i < c->ocols / 2; i++)
		emitf(e, "\tmul.f32 %s, %s, %s;\n", c->O[i].s, c->O[i].s, c->corr[row_of(i)].s);
	for (int kk = 0; pack && kk < f->bn / 16; kk++)
		for (int q = 0; q < 4; q++)
			emitf(e, "\tcvt.rn.%s.f32 %s, %s, %s;\n", f->in == DT_BF16 ? "bf16x2" : "f16x2",
			      c->P[4 * kk + q].s, c->S[8 * kk + 2 * q + 1].s, c->S[8 * kk + 2 * q].s);
}

/* K of the current tile: S has completed (separate K and V) */
void
fmha90_release_k(Emit *e, const FmhaCfg *f, Consumer *c)
{
	if (f->kv_shared)
		return;
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->stage.s, c->kfree0.s);
	fmha90_free(e, f, c, 0);
}

void
fmha90_free(Emit *e, const FmhaCfg *f, Consumer *c, int prev)
{
	Reg t, p;
	char guard[16];

	if (!f->mcast) {
		op_mbar_arrive(e, c->bar, c->guard0);
		return;
	}
	t = reg_new(e, RC_B32);
	p = reg_new(e, RC_PRED);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", t.s, c->j.s, 1 - prev, p.s, t.s,
	      c->ntot.s);
	emitf(e, "\tand.pred %s, %s, %s;\n", p.s, p.s, c->lane0.s);
	snprintf(guard, sizeof guard, "@%s ", p.s);
	op_mbar_arrive(e, c->bar, guard);
	emitf(e, "\tmapa.shared::cluster.u32 %s, %s, %s;\n", c->bar.s, c->bar.s, c->peer.s);
	op_mbar_arrive_peer(e, c->bar, guard);
}

void
fmha90_advance(Emit *e, const FmhaCfg *f, Consumer *c)
{
	emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", c->pstage.s, c->stage.s, c->pphase.s,
	      c->phase.s);
	op_ring_advance(e, c->stage, c->phase, f->stages, c->p);
	emitf(e, "\tadd.u32 %s, %s, 1;\n", c->j.s, c->j.s);
}

/* The head of a KV loop over tiles j .. end-1 (labels `name`, `name`_done,
 * provenance block `block`): skip it when empty, then wait for K_j and,
 * with separate V, for the previous tile's V. */
int
fmha90_loop_head(Emit *e, KgErr *err, const FmhaCfg *f, Consumer *c, const char *name,
                 const char *block, Reg end, FmhaLoop *l)
{
	char done_name[40];

	snprintf(done_name, sizeof done_name, "%s_done", name);
	label_new(e, l->loop, sizeof l->loop, name);
	label_new(e, l->done, sizeof l->done, done_name);
	l->end = end;
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", c->p.s, c->j.s, end.s, c->p.s, l->done);
	emit_label(e, l->loop);
	emit_block(e, block);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->stage.s, c->kbar0.s);
	if (op_mbar_wait(e, err, c->bar, c->phase.s) < 0)
		return -1;
	if (!f->kv_shared) {
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->pstage.s, c->vbar0.s);
		if (op_mbar_wait(e, err, c->bar, c->pphase.s) < 0)
			return -1;
	}
	return 0;
}

/* Back to the loop head while j < end. */
void
fmha90_loop_foot(Emit *e, Consumer *c, const FmhaLoop *l)
{
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", c->p.s, c->j.s, l->end.s, c->p.s, l->loop);
	emit_label(e, l->done);
}

/* The attention sink (decode): exp(sink[head]) joins row r2's sum, in
 * the sum's units 2^(s·scale·log2e - ms): l += 2^(sink·log2e - ms). A row
 * that saw no key has ms = 0, so l = e^sink, O = 0 and LSE = sink. Rows
 * of heads from r->sink_hq on (past hq; every head of a split-KV part,
 * whose combine adds the sink once) read no sink. */
static void
emit_sink(Emit *e, const FmhaRegs *r, Consumer *c, int r2, Reg x)
{
	Reg a = reg_new(e, RC_B64), ok = reg_new(e, RC_PRED);

	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", ok.s, c->hrow[r2].s, r->sink_hq.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, c->hrow[r2].s, a.s, a.s, r->sink.s);
	emitf(e, "\tmov.f32 %s, %s;\n\t@%s ld.global.nc.f32 %s, [%s];\n", x.s, NEG_INF, ok.s, x.s, a.s);
	emitf(e, "\tmul.f32 %s, %s, 0f3FB8AA3B;\n\tsub.f32 %s, %s, %s;\n", x.s, x.s, x.s, x.s, c->ms[r2].s);
	emitf(e, "\tex2.approx.ftz.f32 %s, %s;\n\tadd.f32 %s, %s, %s;\n", x.s, x.s, c->l[r2].s, c->l[r2].s, x.s);
}

/* O through shared memory (FmhaCfg.o_stage). Consumer warp w (warps 4..11
 * of the split-O plan) owns bytes [8192·(w - 4), +8192) of the Q tile,
 * which no one reads once the CTA's last S is done: the scores warpgroup
 * waited for it and meets, and the output warpgroup acquired the last P,
 * published after it (a part with no tiles loads no Q). Its 16 accumulator rows
 * (docs/hardware.md, "wgmma accumulator fragment") go in rounds of 8192 /
 * row bytes rows: 16 bf16 rows of 256 columns, or 8 fp32 rows (rows g,
 * then g + 8). Row i's 16-byte chunk k sits at k ^ (i % 8), so a quad's
 * 4-byte pieces of eight rows fall in distinct banks. After bar.warp.sync
 * (which orders the warp's shared-memory accesses, PTX ISA
 * "bar.warp.sync") every lane takes 16 bytes of one row: the warp stores
 * a row's 512 contiguous bytes per st.global.v4, the row's address and
 * guard shuffled from its owner (lane 4·(i % 8), whose first column is the
 * warpgroup's first). Direct 4-byte stores scatter each instruction over
 * eight rows and, all CTAs finishing together, stall on the LSU queue
 * (ncu, BENCHMARKS.md "decode"). */
enum { O_STAGE_WARP_BYTES = 8192 };

static void
emit_o_staged(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, const Reg inv[2],
              const Reg addr[2], const Reg prow[2], Reg pk, int esz)
{
	int rowb = c->ocols * esz, rows = O_STAGE_WARP_BYTES / rowb, rounds = 16 / rows;
	Reg base, wr, t, l16, a, lo, hi, pv, ga, g64, pr, v[4];

	/* the block first: its registers take its prefix */
	emit_block(e, "sm90.fmha_epilogue_staged");
	base = reg_new(e, RC_B32), wr = reg_new(e, RC_B32), t = reg_new(e, RC_B32);
	l16 = reg_new(e, RC_B32), a = reg_new(e, RC_B32);
	lo = reg_new(e, RC_B32), hi = reg_new(e, RC_B32), pv = reg_new(e, RC_B32);
	ga = reg_new(e, RC_B64), g64 = reg_new(e, RC_B64), pr = reg_new(e, RC_PRED);
	reg_array(e, RC_B32, v, 4);
	/* a wgmma's warps read every row of A, and a warp's wait covers its
	 * own part only: the scores warpgroup (the one that publishes row sums)
	 * meets before any warp overwrites Q, unless it already met after its
	 * last S (P in the K=V stages: every P store waits for the scores
	 * warps' S, gen/sm90/fmha_split.c split_store) */
	if (c->l_to_smem && !f->p_in_kv)
		op_bar_sync_why(e, 2, 128, "every scores warp's last S has read Q, which O is staged over");
	/* base = Q + 8192·(warp - 4); the write address of row g (q = lane % 4,
	 * g = lane / 4, b = 2·esz·q the thread's byte in a column pair): base +
	 * g·rowb + b % 16 + ((b / 16 ^ g) << 4); a column's byte offset, a
	 * multiple of 16 below rowb, goes in by xor */
	emitf(e, "\tsub.u32 %s, %s, 4;\n\tmad.lo.u32 %s, %s, %d, %s;\n", base.s, r->warp.s, base.s, base.s,
	      O_STAGE_WARP_BYTES, c->q0.s);
	emitf(e, "\tand.b32 %s, %s, 3;\n\tmul.lo.u32 %s, %s, %d;\n", t.s, r->lane.s, t.s, t.s, 2 * esz);
	emitf(e, "\tshr.u32 %s, %s, 2;\n\tshr.u32 %s, %s, 4;\n\txor.b32 %s, %s, %s;\n", a.s, r->lane.s, l16.s, t.s,
	      l16.s, l16.s, a.s);
	emitf(e, "\tand.b32 %s, %s, 15;\n\tmad.lo.u32 %s, %s, 16, %s;\n", t.s, t.s, l16.s, l16.s, t.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %s;\n", wr.s, a.s, rowb, l16.s, wr.s, wr.s,
	      base.s);
	emitf(e, "\tshl.b32 %s, %s, 4;\n", l16.s, r->lane.s);
	for (int k = 0; k < rounds; k++) {
		if (k)
			emitf(e, "\tbar.warp.sync 0xffffffff;\n");
		for (int i = 0; i < c->ocols / 2; i += 2) {
			int rr = row_of(i), at = rounds == 1 ? rr * 8 * rowb : 0;
			if (rounds > 1 && rr != k)
				continue;
			emitf(e, "\txor.b32 %s, %s, %d;\n", a.s, wr.s, col_of(i) * esz);
			if (f->o_unnorm) {
				emitf(e, "\tst.shared.v2.f32 [%s+%d], {%s, %s};\n", a.s, at, c->O[i].s, c->O[i + 1].s);
				continue;
			}
			emitf(e, "\tmul.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n", c->O[i].s, c->O[i].s, inv[rr].s,
			      c->O[i + 1].s, c->O[i + 1].s, inv[rr].s);
			emitf(e, "\tcvt.rn.%s.f32 %s, %s, %s;\n", f->in == DT_BF16 ? "bf16x2" : "f16x2", pk.s,
			      c->O[i + 1].s, c->O[i].s);
			emitf(e, "\tst.shared.b32 [%s+%d], %s;\n", a.s, at, pk.s);
		}
		emitf(e, "\tbar.warp.sync 0xffffffff;\n");
		for (int i = 0; i < rows; i++) {
			int r2 = rounds == 1 ? i / 8 : k, owner = 4 * (i % 8);
			emitf(e, "\tmov.b64 {%s, %s}, %s;\n\tselp.u32 %s, 1, 0, %s;\n", lo.s, hi.s, addr[r2].s, pv.s,
			      prow[r2].s);
			emitf(e, "\tshfl.sync.idx.b32 %s, %s, %d, 0x1f, 0xffffffff;\n", lo.s, lo.s, owner);
			emitf(e, "\tshfl.sync.idx.b32 %s, %s, %d, 0x1f, 0xffffffff;\n", hi.s, hi.s, owner);
			emitf(e, "\tshfl.sync.idx.b32 %s, %s, %d, 0x1f, 0xffffffff;\n", pv.s, pv.s, owner);
			emitf(e, "\tmov.b64 %s, {%s, %s};\n\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", ga.s, lo.s,
			      hi.s, g64.s, l16.s, ga.s, ga.s, g64.s);
			emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\txor.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n", pr.s, pv.s,
			      a.s, l16.s, (i % 8) << 4, a.s, a.s, base.s);
			for (int x = 0; x < rowb / 512; x++) {
				emitf(e, "\tld.shared.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", v[0].s, v[1].s, v[2].s, v[3].s,
				      a.s, i * rowb + 512 * x);
				emitf(e, "\t@%s st.global.v4.b32 [%s+%d], {%s, %s, %s, %s};\n", pr.s, ga.s, 512 * x, v[0].s,
				      v[1].s, v[2].s, v[3].s);
			}
		}
	}
}

/* Normalizes O by the row sums and stores this warpgroup's columns; writes
 * LSE. Row sums are the quad's partials added up, or, for the second half
 * of a split O, the first half's published sums. */
int
fmha90_epilogue(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, KgErr *err)
{
	Reg inv[2], addr[2], prow[2], pk = reg_new(e, RC_B32), a = reg_new(e, RC_B64);
	Reg t64 = reg_new(e, RC_B64), lse = reg_new(e, RC_F32), pl = reg_new(e, RC_PRED);
	Reg c4 = reg_new(e, RC_B32), sa = reg_new(e, RC_B32);
	int esz = f->o_unnorm ? 4 : f->esz;

	emit_block(e, "sm90.fmha_epilogue");
	emitf(e, "\tand.b32 %s, %s, 3;\n", c4.s, r->lane.s);
	if (c->l_from_smem && op_mbar_wait(e, err, c->lbar, "0") < 0)
		return -1;
	for (int r2 = 0; r2 < 2; r2++) {
		inv[r2] = reg_new(e, RC_F32);
		addr[r2] = reg_new(e, RC_B64);
		prow[r2] = reg_new(e, RC_PRED);
		/* shared address of this row's sum: lsum0 + 4*trow */
		if (c->l_from_smem || c->l_to_smem)
			emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", sa.s, c->trow[r2].s, c->lsum0.s);
		if (c->l_from_smem) {
			emitf(e, "\tld.shared.f32 %s, [%s];\n", c->l[r2].s, sa.s);
		} else {
			for (int x = 1; x <= 2; x *= 2) {
				emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n", c->t.s, c->l[r2].s, x);
				emitf(e, "\tmov.b32 %s, %s;\n\tadd.f32 %s, %s, %s;\n", inv[r2].s, c->t.s, c->l[r2].s,
				      c->l[r2].s, inv[r2].s);
			}
			if (r->sink.s[0])
				emit_sink(e, r, c, r2, inv[r2]);
			if (c->l_to_smem) {
				emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", pl.s, c4.s);
				emitf(e, "\t@%s st.shared.f32 [%s], %s;\n", pl.s, sa.s, c->l[r2].s);
			}
		}
		emitf(e, "\tsetp.gt.f32 %s, %s, 0f00000000;\n", c->p.s, c->l[r2].s);
		emitf(e, "\trcp.rn.f32 %s, %s;\n\tselp.f32 %s, %s, 0f00000000, %s;\n", inv[r2].s, c->l[r2].s,
		      inv[r2].s, inv[r2].s, c->p.s);
		if (f->o_unnorm)
			emitf(e, "\tmov.f32 %s, 0f3F800000;\n", inv[r2].s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", prow[r2].s, c->rowq[r2].s, r->sq.s);
		if (f->head_guard)
			emitf(e, "\tsetp.lt.and.u32 %s, %s, %d, %s;\n", prow[r2].s, c->hrow[r2].s, f->hq, prow[r2].s);
		/* element ((qs + row) * Hq + head) * Dv + ocol0 + 2*(lane%4) */
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tmul.wide.u32 %s, %s, %d;\n", c->t.s, c->rowq[r2].s, r->qs.s,
		      addr[r2].s, c->t.s, f->hq * f->dv);
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", t64.s, c->hrow[r2].s, f->dv, addr[r2].s,
		      addr[r2].s, t64.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 2, %d;\n\tcvt.u64.u32 %s, %s;\n", c->t.s, c4.s, c->ocol0, t64.s,
		      c->t.s);
		emitf(e, "\tadd.u64 %s, %s, %s;\n\tmad.lo.u64 %s, %s, %d, %s;\n", addr[r2].s, addr[r2].s, t64.s,
		      addr[r2].s, addr[r2].s, esz, r->o.s);
		if (f->lse && !c->l_from_smem) {
			/* LSE = ln(sum exp(scale s)) = (max·scale·log2e + log2 l)·ln 2 */
			emitf(e, "\tlg2.approx.f32 %s, %s;\n\tadd.f32 %s, %s, %s;\n", lse.s, c->l[r2].s, lse.s,
			      lse.s, c->ms[r2].s);
			emitf(e, "\tmul.f32 %s, %s, 0f3F317218;\n", lse.s, lse.s);
			emitf(e, "\tselp.f32 %s, %s, %s, %s;\n", lse.s, lse.s, NEG_INF, c->p.s);
			emitf(e, "\tsetp.eq.and.u32 %s, %s, 0, %s;\n", pl.s, c4.s, prow[r2].s);
			emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", c->lo.s, c->hrow[r2].s,
			      r->total_q.s, r->lse_q0.s[0] ? r->lse_q0.s : r->qs.s, c->lo.s, c->lo.s, c->rowq[r2].s);
			emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, c->lo.s, a.s, a.s, r->lse.s);
			emitf(e, "\t@%s st.global.f32 [%s], %s;\n", pl.s, a.s, lse.s);
			if (f->o_unnorm) {
				/* M = the row max, max·scale·log2e·ln 2 (0 for a row with no key) */
				emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, c->lo.s, a.s, a.s, r->mref.s);
				emitf(e, "\tmul.f32 %s, %s, 0f3F317218;\n", lse.s, c->ms[r2].s);
				emitf(e, "\t@%s st.global.f32 [%s], %s;\n", pl.s, a.s, lse.s);
			}
		}
	}
	if (c->l_to_smem)
		op_mbar_arrive(e, c->lbar, NULL);
	if (f->o_stage) {
		/* decode's Q tile is 64 rows of head_dim_qk >= 512 */
		if (f->lq.bytes < 8 * O_STAGE_WARP_BYTES)
			kg_bug("o_stage: a Q tile of %u bytes cannot stage 8 warps' %d bytes of O", f->lq.bytes,
			       O_STAGE_WARP_BYTES);
		emit_o_staged(e, f, r, c, inv, addr, prow, pk, esz);
		return 0;
	}
	for (int i = 0; i < c->ocols / 2; i += 2) {
		int rr = row_of(i), off = col_of(i) * esz;
		if (f->o_unnorm) {
			emitf(e, "\t@%s st.global.v2.f32 [%s+%d], {%s, %s};\n", prow[rr].s, addr[rr].s, off, c->O[i].s,
			      c->O[i + 1].s);
			continue;
		}
		emitf(e, "\tmul.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n", c->O[i].s, c->O[i].s, inv[rr].s,
		      c->O[i + 1].s, c->O[i + 1].s, inv[rr].s);
		emitf(e, "\tcvt.rn.%s.f32 %s, %s, %s;\n", f->in == DT_BF16 ? "bf16x2" : "f16x2", pk.s,
		      c->O[i + 1].s, c->O[i].s);
		emitf(e, "\t@%s st.global.b32 [%s+%d], %s;\n", prow[rr].s, addr[rr].s, off, pk.s);
	}
	return 0;
}

int
fmha90_consumer_init(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *cp, Reg wgc,
                     Reg row_block, int ocol0, int ocols, KgErr *err)
{
	Consumer c;
	Reg qbar;
	uint64_t dq, dv;

	memset(&c, 0, sizeof c);
	c.ocol0 = ocol0;
	c.ocols = ocols;
	if (desc_for_tile(&dq, f->t->desc, &f->lq, 0, err) < 0)
		return -1;
	/* V as B of P·V: N (head dim) contiguous in 128-byte swizzled rows, K
	 * (keys) across rows */
	if (desc_for_tile_mn(&dv, f->t->desc, &f->lv, 0, err) < 0)
		return -1;
	reg_array(e, RC_F32, c.S, f->bn / 2);
	reg_array(e, RC_F32, c.O, ocols / 2);
	exp2_mix_init(e, &c.ex, f->e2f);
	reg_array(e, RC_B32, c.P, f->bn / 4);
	reg_array(e, RC_F32, c.m, 2);
	reg_array(e, RC_F32, c.l, 2);
	reg_array(e, RC_F32, c.ms, 2);
	reg_array(e, RC_F32, c.nms, 2);
	reg_array(e, RC_F32, c.corr, 2);
	reg_array(e, RC_F32, c.mx, 2);
	reg_array(e, RC_B32, c.lim, 2);
	if (f->mask == MASK_WINDOW)
		reg_array(e, RC_B32, c.klo_row, 2);
	reg_array(e, RC_B32, c.rowq, 2);
	reg_array(e, RC_B32, c.trow, 2);
	c.colb = reg_new(e, RC_B32);
	c.j = reg_new(e, RC_B32);
	c.stage = reg_new(e, RC_B32);
	c.phase = reg_new(e, RC_B32);
	c.pstage = reg_new(e, RC_B32);
	c.pphase = reg_new(e, RC_B32);
	c.myturn = reg_new(e, RC_B32);
	c.otherturn = reg_new(e, RC_B32);
	c.bar = reg_new(e, RC_B32);
	c.qlo = reg_new(e, RC_B32);
	c.klo = reg_new(e, RC_B32);
	c.vlo = reg_new(e, RC_B32);
	c.dhi = reg_new(e, RC_B32);
	c.vhi = reg_new(e, RC_B32);
	c.lo = reg_new(e, RC_B32);
	c.ad = reg_new(e, RC_B64);
	c.bd = reg_new(e, RC_B64);
	c.t = reg_new(e, RC_B32);
	c.p = reg_new(e, RC_PRED);
	c.lane0 = reg_new(e, RC_PRED);
	c.sc = fmha_emit_scale_log2(e);
	snprintf(c.guard0, sizeof c.guard0, "@%s ", c.lane0.s);
	/* K tiles have Q's layout (K-major, SW128): one constant serves both */
	c.dq_lo = (uint32_t)dq;
	c.dv_lo = (uint32_t)dv;

	emit_block(e, "sm90.fmha_consumer");
	if (f->mcast) {
		c.peer = reg_new(e, RC_B32);
		emitf(e, "\txor.b32 %s, %s, 1;\n", c.peer.s, r->rank.s);
		c.ntot = r->n_total;
	}
	c.q0 = op_plan_smem(e, &f->plan, r->base, f->r_q);
	c.k0 = op_plan_smem(e, &f->plan, r->base, f->r_k);
	c.v0 = op_plan_smem(e, &f->plan, r->base, f->r_v);
	qbar = f->b_q >= 0 ? op_plan_bar(e, &f->plan, r->base, f->b_q) : (Reg){{0}};
	c.kbar0 = op_plan_bar(e, &f->plan, r->base, f->b_k);
	c.vbar0 = op_plan_bar(e, &f->plan, r->base, f->b_v);
	c.kfree0 = op_plan_bar(e, &f->plan, r->base, f->b_kfree);
	c.vfree0 = op_plan_bar(e, &f->plan, r->base, f->b_vfree);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", c.lane0.s, r->lane.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", c.qlo.s, row_block.s, f->lq.bytes, c.q0.s);
	op_desc_start(e, c.qlo, fmha_clustered(f));
	emitf(e, "\tadd.u32 %s, %s, %u;\n", c.qlo.s, c.qlo.s, (uint32_t)dq);
	op_desc_hi(e, c.dhi, f->t->desc, dq, "Q and K");
	op_desc_hi(e, c.vhi, f->t->desc, dv, "V, MN-major");
	/* rows g = 64*block + 16*(warp%4) + lane/4 and g + 8 of the CTA's tile */
	sm90_acc_row0(e, c.trow[0], row_block, r->warp, r->lane, c.t);
	emitf(e, "\tadd.u32 %s, %s, 8;\n", c.trow[1].s, c.trow[0].s);
	for (int r2 = 0; r2 < 2; r2++)
		c.hrow[r2] = fmha_emit_row_head(e, f, r, c.trow[r2], c.rowq[r2]);
	for (int r2 = 0; r2 < 2; r2++) {
		if (f->mask != MASK_NONE) {
			/* keys j <= row + Sk - Sq + wr are visible (exclusive limit) */
			emitf(e, "\tsub.s32 %s, %s, %s;\n\tadd.s32 %s, %s, %s;\n", c.lim[r2].s, r->sk.s, r->sq.s,
			      c.lim[r2].s, c.lim[r2].s, c.rowq[r2].s);
			if (f->mask == MASK_WINDOW)
				emitf(e, "\tsub.s32 %s, %s, %d;\n", c.klo_row[r2].s, c.lim[r2].s, f->wl);
			emitf(e, "\tadd.s32 %s, %s, %d;\n\tmin.s32 %s, %s, %s;\n", c.lim[r2].s, c.lim[r2].s,
			      1 + f->wr, c.lim[r2].s, c.lim[r2].s, r->sk.s);
		} else {
			emitf(e, "\tmov.u32 %s, %s;\n", c.lim[r2].s, r->sk.s);
		}
		emitf(e, "\tmov.f32 %s, %s;\n\tmov.f32 %s, 0f00000000;\n\tmov.f32 %s, 0f00000000;\n",
		      c.m[r2].s, NEG_INF, c.l[r2].s, c.ms[r2].s);
	}
	for (int i = 0; i < ocols / 2; i++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", c.O[i].s);
	emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", c.j.s, r->j0.s, c.stage.s, c.phase.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", c.pstage.s, c.pphase.s);
	(void)wgc;
	c.qbar = qbar;
	*cp = c;
	return 0;
}

int
fmha90_producer_role(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg p, Reg el,
                     const char *out, KgErr *err)
{
	op_setmaxnreg(e, 0, f->plan.roles[0].regs);
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->warp.s, p.s, out);
	op_elect_one(e, el);
	emitf(e, "\t@!%s bra %s;\n", el.s, out);
	if (fmha_emit_producer(e, f, r, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", out);
	return 0;
}
