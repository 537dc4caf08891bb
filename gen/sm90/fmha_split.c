/* FMHA forward on sm_90a for head dims above 256: the split-O plan.
 *
 * A 64-row warpgroup cannot hold 64 x 512 f32 of O (256 registers per
 * thread) and wgmma N stops at 256. So two consumer warpgroups share the
 * CTA's 64 query rows: warpgroup 1 ("scores") computes S = Q·K^T over the
 * whole head dim, runs the online softmax and stages P (bf16) and the
 * rescale factors in shared memory; both warpgroups then accumulate
 * O[:, half] += P·V[:, half] with wgmma SS (P and V from shared memory),
 * each holding dv/2 columns of O. P is double-buffered so the scores
 * warpgroup computes S_{j+1} while P_j·V_j runs. */
#include <stdio.h>
#include <string.h>

#include "../desc.h"
#include "../fmha.h"
#include "../ops.h"
#include "consumer.h"
#include "fmha_split.h"
#include "mma.h"

enum { PRODUCER_REGS = 40, PBUFS = 2 };

int
fmha90_split_plan(FmhaCfg *f, KgErr *err)
{
	Plan *p = &f->plan;
	char does[160];
	int regs;

	int preg = f->producer_regs ? f->producer_regs : PRODUCER_REGS;

	/* one shared K=V stage runs each P·V right after its P (split_serial) */
	if (f->s_ahead && f->kv_shared && f->stages == 1)
		return kg_fail(err, "--s-ahead=1 with one shared K=V stage: S ahead overlaps P·V with the next "
		               "S, which needs a second stage");
	p->threads = 384;
	regs = plan_regs_split(p, 256, 128, preg);
	plan_role(p, "producer", 0, 4, preg,
	          f->load_q   ? "warpgroup 0: gathers and dequantizes K=V tiles (st.shared)"
	          : f->gather ? "warpgroup 0: Q, then gathers and dequantizes K=V tiles (st.shared)"
	                      : "warp 0, one elected lane: TMA Q, then K/V tiles");
	snprintf(does, sizeof does, "%sS=QK^T (SS, N=%d), softmax, P to smem, O cols 0-%d += PV (SS)%s",
	         f->load_q ? "Q (with warps 8-11), " : "", f->bn, f->dv / 2 - 1, f->o_stage ? ", O via smem" : "");
	plan_role(p, "scores", 4, 4, regs, does);
	snprintf(does, sizeof does, "%sO cols %d-%d += PV (SS), P and rescale from smem%s",
	         f->load_q ? "Q (with warps 4-7), " : "", f->dv / 2, f->dv - 1, f->o_stage ? ", O via smem" : "");
	plan_role(p, "output", 8, 4, regs, does);
	/* S (bn/2), O half (dv/4), row state, P pairs and addresses */
	p->regs_need_max = f->bn / 2 + f->dv / 4 + f->bn / 4 + 56;
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "scores");
	/* P tile j%2 in K=V stage j%2's last slice: written after S_j has read
	 * it (the scores warpgroup waited for S), read by P·V_j, and the
	 * stage is refilled only after both warpgroups' P·V_j */
	if (f->p_in_kv && (!f->kv_shared || f->d - f->dv != 64 || f->bn != 64 || f->stages != PBUFS))
		return kg_fail(err, "P in the K=V stages needs kv-shared, head-dim = head-dim-v + 64, 64-key tiles and %d stages",
		               PBUFS);
	f->r_p = f->p_in_kv ? -1 : plan_smem(p, "P tiles", 64u * (uint32_t)f->bn * (uint32_t)f->esz, 1024, PBUFS);
	f->r_corr = plan_smem(p, "rescale", 64 * 4, 16, PBUFS);
	f->r_lsum = plan_smem(p, "row sums", 64 * 4, 16, 1);
	if (f->gather && !f->kv_shared)
		return kg_fail(err, "a gathered K=V tile serves both operands: kv-shared is required");
	if (f->kv_shared) {
		f->b_kfree = f->b_vfree = plan_barrier(p, "K=V free", f->stages, 8, 0,
		                                       "lane 0 of the 8 consumer warps after their P·V");
	} else {
		/* mcast: both CTAs' consumers free a stage the peer refills too */
		f->b_kfree = plan_barrier(p, "K free", f->stages, 4 << f->mcast, 0,
		                          f->mcast ? "lane 0 of the 4 scores warps of both CTAs after S"
		                                   : "lane 0 of the 4 scores warps after S");
		f->b_vfree = plan_barrier(p, "V free", f->stages, 8 << f->mcast, 0,
		                          f->mcast ? "lane 0 of the 8 consumer warps of both CTAs after their P·V"
		                                   : "lane 0 of the 8 consumer warps after their P·V");
	}
	f->b_pfull = plan_barrier(p, "P full", PBUFS, 128, 0,
	                          "every scores thread after its P stores and proxy fence");
	/* No "P free" barrier: P buffer j%2 is rewritten at tile j, after the
	 * scores warpgroup has waited for V_{j-1} (separate V, one slot) or
	 * K=V_j (at most two slots). Those loads waited for their slot, freed
	 * only when both warpgroups had finished P·V of tile j-2, the last
	 * reader of that P buffer. The plan keeps the stage counts that make
	 * this hold. */
	if (f->stages > (f->kv_shared ? PBUFS : 1))
		return kg_fail(err, "--stages=%d: the split-O plan takes %s, so that a KV slot being refilled proves the P buffer it reuses has been read",
		               f->stages, f->kv_shared ? "1 or 2 with kv-shared" : "1 without kv-shared");
	f->b_lsum = plan_barrier(p, "row sums", 1, 128, 0, "every scores thread after the row sums");
	return 0;
}

/* Per-warpgroup state of the P double buffer. */
typedef struct Split {
	Reg pb, pbph, ppb;      /* buffer of tile j, its phase, buffer of tile j-1 */
	Reg pfull0;             /* barrier array */
	Reg p0, corr0;          /* shared addresses of the P tiles and factors */
	Reg x16;                /* (row % 8) << 4: this thread's 128B-swizzle XOR (§1.2) */
	Reg rowt[2];            /* rows g, g+8 within the 64-row tile */
	Reg c4;                 /* lane % 4 */
	uint32_t p_bytes;
} Split;

static void
split_init(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, Split *s)
{
	s->pb = reg_new(e, RC_B32);
	s->pbph = reg_new(e, RC_B32);
	s->ppb = reg_new(e, RC_B32);
	s->x16 = reg_new(e, RC_B32);
	s->c4 = reg_new(e, RC_B32);
	s->pfull0 = op_plan_bar(e, &f->plan, r->base, f->b_pfull);
	if (f->p_in_kv) {
		s->p_bytes = f->k_bytes;
		s->p0 = op_plan_smem(e, &f->plan, r->base, f->r_k);
		emitf(e, "\tadd.u32 %s, %s, %u;\n", s->p0.s, s->p0.s, (uint32_t)(f->dv / 64) * f->lk.slice_bytes);
	} else {
		s->p_bytes = f->plan.smem[f->r_p].bytes;
		s->p0 = op_plan_smem(e, &f->plan, r->base, f->r_p);
	}
	s->corr0 = op_plan_smem(e, &f->plan, r->base, f->r_corr);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", s->pb.s, s->pbph.s, s->ppb.s);
	emitf(e, "\tand.b32 %s, %s, 3;\n", s->c4.s, r->lane.s);
	emitf(e, "\tshr.u32 %s, %s, 2;\n\tand.b32 %s, %s, 7;\n\tshl.b32 %s, %s, 4;\n", s->x16.s, r->lane.s,
	      s->x16.s, s->x16.s, s->x16.s, s->x16.s);
	for (int k = 0; k < 2; k++)
		s->rowt[k] = c->trow[k];
}

static void
split_advance_p(Emit *e, Split *s)
{
	Reg p = reg_new(e, RC_PRED);

	emitf(e, "\tmov.u32 %s, %s;\n\txor.b32 %s, %s, 1;\n", s->ppb.s, s->pb.s, s->pb.s, s->pb.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@%s xor.b32 %s, %s, 1;\n", p.s, s->pb.s, p.s, s->pbph.s,
	      s->pbph.s);
}

/* O[:, ocol0..] += P(buffer pbuf)·V(stage), both from shared memory. */
static void
split_pv_issue(Emit *e, const FmhaCfg *f, Consumer *c, Split *s, Reg pbuf, Reg stage)
{
	Reg pa = reg_new(e, RC_B32);
	uint32_t vslice = (uint32_t)(c->ocol0 / 64) * f->lv.slice_bytes;

	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", pa.s, pbuf.s, s->p_bytes, s->p0.s);
	op_desc_start(e, pa, fmha_clustered(f));
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", c->vlo.s, stage.s, f->kv_shared ? f->k_bytes : f->v_bytes,
	      c->v0.s);
	op_desc_start(e, c->vlo, fmha_clustered(f));
	for (int kk = 0; kk < f->bn / 16; kk++) {
		/* P: K-major SW128 like Q, +32 bytes per 16 keys; V: N-major, +2*SBO */
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", c->lo.s, pa.s,
		      (uint32_t)(2 * kk) + c->dq_lo, c->ad.s, c->lo.s, c->dhi.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", c->lo.s, c->vlo.s,
		      ((vslice + (uint32_t)kk * 2048) >> 4) + c->dv_lo, c->bd.s, c->lo.s, c->vhi.s);
		sm90_wgmma(e, c->ocols, f->in, c->O, &c->ad, NULL, c->bd, 1, 1);
	}
	sm90_wgmma_commit(e);
}

/* After its P·V: the V (or K=V) slot; the P buffer with it (see the plan).
 * The slot is of tile c->j - prev. */
static void
split_release(Emit *e, const FmhaCfg *f, Consumer *c, Split *s, Reg pbuf, Reg stage, int prev)
{
	(void)s;
	(void)pbuf;
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, stage.s, c->vfree0.s);
	fmha90_free(e, f, c, prev);
}

/* Stages P_j (the exp'd S registers) as bf16 in the 128B-swizzled K-major
 * layout an SS wgmma reads, and the rescale factors, in buffer pb: generic
 * stores read by the async proxy need fence.proxy.async (§5.5) before
 * split_arrive_p publishes them. */
static int
split_store(Emit *e, KgErr *err, const FmhaCfg *f, Consumer *c, Split *s)
{
	Reg base[2], a = reg_new(e, RC_B32), pk = reg_new(e, RC_B32);
	Reg pc = reg_new(e, RC_PRED);

	emit_block(e, "sm90.fmha_split_publish");
	if (f->p_in_kv)
		op_bar_sync_why(e, 2, 128, "every scores warp's S_j has read the RoPE keys that P_j overwrites");
	for (int k = 0; k < 2; k++) {
		base[k] = reg_new(e, RC_B32);
		/* P[pb] + 128*row + 4*(lane%4) */
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", base[k].s, s->pb.s, s->p_bytes, s->p0.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", base[k].s, s->rowt[k].s,
		      base[k].s, base[k].s, s->c4.s, base[k].s);
	}
	for (int i = 0; i < f->bn / 2; i += 2) {
		int q = col_of(i) / 8; /* 16-byte chunk of the P row */
		emitf(e, "\tcvt.rn.%s.f32 %s, %s, %s;\n", f->in == DT_BF16 ? "bf16x2" : "f16x2", pk.s,
		      c->S[i + 1].s, c->S[i].s);
		emitf(e, "\txor.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n", a.s, s->x16.s, q << 4, a.s, a.s,
		      base[row_of(i)].s);
		emitf(e, "\tst.shared.b32 [%s], %s;\n", a.s, pk.s);
	}
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", pc.s, s->c4.s);
	for (int k = 0; k < 2; k++) {
		emitf(e, "\tmad.lo.u32 %s, %s, 256, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", a.s, s->pb.s,
		      s->corr0.s, a.s, s->rowt[k].s, a.s);
		emitf(e, "\t@%s st.shared.f32 [%s], %s;\n", pc.s, a.s, c->corr[k].s);
	}
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	(void)err;
	return 0;
}

/* P full of buffer pbuf: every scores thread's stores are fenced. */
static void
split_arrive_p(Emit *e, Consumer *c, Split *s, Reg pbuf)
{
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, pbuf.s, s->pfull0.s);
	op_mbar_arrive(e, c->bar, NULL);
}

static int
split_publish(Emit *e, KgErr *err, const FmhaCfg *f, Consumer *c, Split *s)
{
	if (split_store(e, err, f, c, s) < 0)
		return -1;
	split_arrive_p(e, c, s, s->pb);
	return 0;
}

/* The wait for V_{j-1} (separate V; K=V_j's full barrier covered it) */
static int
split_wait_pv(Emit *e, KgErr *err, const FmhaCfg *f, Consumer *c)
{
	if (f->kv_shared)
		return 0;
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->pstage.s, c->vbar0.s);
	return op_mbar_wait(e, err, c->bar, c->pphase.s);
}

/* S ahead (f->s_ahead, --s-ahead 1), tile j: S_j is issued first, then
 * P_{j-1} is handed on and this warpgroup's O rescaled by corr_{j-1} for
 * its P_{j-1}·V_{j-1}. Meant to run softmax_j under P_{j-1}·V_{j-1}, but
 * the warpgroups' wgmmas share the tensor core, so S_j completes with
 * them: the H100 measured it slower than the hand-off first
 * (docs/estimate.md, "Split O with S ahead"). P_j and corr_j are stored and fenced here and handed on at
 * tile j+1 (or the tail). The P double buffer's rule holds as in the
 * hand-off-first order: P_j overwrites P_{j-2}'s buffer after this
 * warpgroup waited for K_j (K=V: its slot freed by both warpgroups'
 * P_{j-2}·V_{j-2}) or, separate V, for V_{j-1} (one slot, freed likewise). */
static int
split_ahead_loop(Emit *e, KgErr *err, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, Split *s,
                 int masked, Reg endr)
{
	char loop[48], done[48];

	label_new(e, loop, sizeof loop, masked ? "ahead_masked" : "ahead");
	label_new(e, done, sizeof done, masked ? "ahead_masked_done" : "ahead_done");
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", c->p.s, c->j.s, endr.s, c->p.s, done);
	emit_label(e, loop);
	emit_block(e, masked ? "sm90.fmha_ahead_tile_masked" : "sm90.fmha_ahead_tile");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->stage.s, c->kbar0.s);
	if (op_mbar_wait(e, err, c->bar, c->phase.s) < 0)
		return -1;
	sm90_wgmma_fence(e);
	fmha90_scores_issue(e, f, c);
	if (split_wait_pv(e, err, f, c) < 0)
		return -1;
	split_arrive_p(e, c, s, s->ppb);
	fmha90_softmax_rescale(e, f, c, 0);
	sm90_wgmma_fence(e);
	split_pv_issue(e, f, c, s, s->ppb, c->pstage);
	sm90_wgmma_wait(e, 1);
	fmha90_release_k(e, f, c);
	if (masked)
		fmha90_mask(e, f, r, c);
	fmha90_softmax_exp(e, f, c);
	if (split_store(e, err, f, c, s) < 0)
		return -1;
	sm90_wgmma_wait(e, 0);
	split_release(e, f, c, s, s->ppb, c->pstage, 1);
	fmha90_advance(e, f, c);
	split_advance_p(e, s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", c->p.s, c->j.s, endr.s, c->p.s, loop);
	emit_label(e, done);
	return 0;
}

/* With one shared K=V stage the next tile cannot arrive before this one
 * is released, so P·V_j follows P_j at once instead of overlapping
 * S_{j+1} (decode's staged gather, gen/decode.c); O was rescaled, so
 * fence. Separate K and V stages keep the overlap. */
static int
split_serial(const FmhaCfg *f)
{
	return f->kv_shared && f->stages == 1;
}

static void
split_pv_serial(Emit *e, const FmhaCfg *f, Consumer *c, Split *s)
{
	sm90_wgmma_fence(e);
	split_pv_issue(e, f, c, s, s->pb, c->stage);
	sm90_wgmma_wait(e, 0);
	split_release(e, f, c, s, s->pb, c->stage, 0);
}

static int
split_scores_loop(Emit *e, KgErr *err, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, Split *s,
                  int masked, Reg endr)
{
	FmhaLoop l;

	if (fmha90_loop_head(e, err, f, c, masked ? "split_masked" : "split",
	                     masked ? "sm90.fmha_split_tile_masked" : "sm90.fmha_split_tile", endr, &l) < 0)
		return -1;
	/* serial: the fence before P·V_{j-1} already follows every write of
	 * S and O since */
	if (!split_serial(f))
		sm90_wgmma_fence(e);
	fmha90_scores_issue(e, f, c);
	if (!split_serial(f))
		split_pv_issue(e, f, c, s, s->ppb, c->pstage);
	sm90_wgmma_wait(e, !split_serial(f));
	fmha90_release_k(e, f, c);
	if (masked)
		fmha90_mask(e, f, r, c);
	fmha90_softmax_exp(e, f, c);
	if (!split_serial(f)) {
		sm90_wgmma_wait(e, 0);
		split_release(e, f, c, s, s->ppb, c->pstage, 1);
	}
	fmha90_softmax_rescale(e, f, c, 0);
	if (split_publish(e, err, f, c, s) < 0)
		return -1;
	if (split_serial(f))
		split_pv_serial(e, f, c, s);
	fmha90_advance(e, f, c);
	split_advance_p(e, s);
	fmha90_loop_foot(e, c, &l);
	return 0;
}

/* FmhaCfg.load_q: both consumer warpgroups complete the Q tile; each
 * thread's generic stores (or its completed cp.async copies) reach the
 * async proxy (fence.proxy.async, PTX ISA "Asynchronous proxy") before the
 * 256 threads meet, after which the scores warpgroup's S reads Q. */
static int
split_load_q(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, KgErr *err)
{
	if (f->load_q(e, f, r, c->q0, err) < 0)
		return -1;
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	op_bar_sync_why(e, 1, 256, "both consumer warpgroups' Q stores before the first S");
	/* back in the consumer's block, so the set-up after the Q load keeps
	 * its register names (gen/emit.h, "Naming") */
	emit_block(e, "sm90.fmha_consumer");
	return 0;
}

static int
emit_scores_wg(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg zero, KgErr *err)
{
	Consumer c;
	Split s;
	char none[48];

	if (fmha90_consumer_init(e, f, r, &c, zero, zero, 0, f->dv / 2, err) < 0 ||
	    (f->load_q && split_load_q(e, f, r, &c, err) < 0) ||
	    (f->b_q >= 0 && op_mbar_wait(e, err, c.qbar, "0") < 0))
		return -1;
	c.l_to_smem = 1;
	c.lsum0 = op_plan_smem(e, &f->plan, r->base, f->r_lsum);
	c.lbar = op_plan_bar(e, &f->plan, r->base, f->b_lsum);
	split_init(e, f, r, &c, &s);
	label_new(e, none, sizeof none, "split_no_keys");
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", c.p.s, r->j0.s, r->n_total.s, c.p.s, none);
	/* tile 0: no previous P·V; always masked (see fmha.c) */
	emit_block(e, "sm90.fmha_split_first");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c.bar.s, c.stage.s, c.kbar0.s);
	if (op_mbar_wait(e, err, c.bar, c.phase.s) < 0)
		return -1;
	sm90_wgmma_fence(e);
	fmha90_scores_issue(e, f, &c);
	sm90_wgmma_wait(e, 0);
	fmha90_release_k(e, f, &c);
	fmha90_mask(e, f, r, &c);
	fmha90_softmax_exp(e, f, &c);
	if (f->s_ahead) {
		/* P_0 is handed on, and l and O rescaled, at tile 1 or the tail */
		if (split_store(e, err, f, &c, &s) < 0)
			return -1;
	} else {
		fmha90_softmax_rescale(e, f, &c, 0);
		if (split_publish(e, err, f, &c, &s) < 0)
			return -1;
		if (split_serial(f))
			split_pv_serial(e, f, &c, &s);
	}
	fmha90_advance(e, f, &c);
	split_advance_p(e, &s);
	if (f->s_ahead) {
		if ((f->mask == MASK_WINDOW && split_ahead_loop(e, err, f, r, &c, &s, 1, r->n_lead) < 0) ||
		    (fmha_has_unmasked_tiles(f) && split_ahead_loop(e, err, f, r, &c, &s, 0, r->n_full) < 0) ||
		    split_ahead_loop(e, err, f, r, &c, &s, 1, r->n_total) < 0)
			return -1;
	} else if ((f->mask == MASK_WINDOW && split_scores_loop(e, err, f, r, &c, &s, 1, r->n_lead) < 0) ||
	           (fmha_has_unmasked_tiles(f) && split_scores_loop(e, err, f, r, &c, &s, 0, r->n_full) < 0) ||
	           split_scores_loop(e, err, f, r, &c, &s, 1, r->n_total) < 0) {
		return -1;
	}
	/* the last tile's P·V (S ahead: after its hand-off and the rescale) */
	emit_block(e, "sm90.fmha_split_tail");
	if (split_wait_pv(e, err, f, &c) < 0)
		return -1;
	if (f->s_ahead) {
		split_arrive_p(e, &c, &s, s.ppb);
		fmha90_softmax_rescale(e, f, &c, 0);
	}
	if (!split_serial(f)) {
		sm90_wgmma_fence(e);
		split_pv_issue(e, f, &c, &s, s.ppb, c.pstage);
		sm90_wgmma_wait(e, 0);
		split_release(e, f, &c, &s, s.ppb, c.pstage, 1);
	}
	emit_label(e, none);
	if (fmha90_epilogue(e, f, r, &c, err) < 0)
		return -1;
	return f->finish ? f->finish(e, f, r, err) : 0;
}

static int
emit_output_wg(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg zero, KgErr *err)
{
	Consumer c;
	Split s;
	Reg par = reg_new(e, RC_B32), a = reg_new(e, RC_B32);
	char loop[48], done[48];

	if (fmha90_consumer_init(e, f, r, &c, zero, zero, f->dv / 2, f->dv / 2, err) < 0 ||
	    (f->load_q && split_load_q(e, f, r, &c, err) < 0))
		return -1;
	c.l_from_smem = 1;
	c.lsum0 = op_plan_smem(e, &f->plan, r->base, f->r_lsum);
	c.lbar = op_plan_bar(e, &f->plan, r->base, f->b_lsum);
	split_init(e, f, r, &c, &s);
	label_new(e, loop, sizeof loop, "output");
	label_new(e, done, sizeof done, "output_done");
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", c.p.s, c.j.s, r->n_total.s, c.p.s, done);
	emit_label(e, loop);
	emit_block(e, "sm90.fmha_split_output");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c.bar.s, s.pb.s, s.pfull0.s);
	if (op_mbar_wait(e, err, c.bar, s.pbph.s) < 0)
		return -1;
	for (int k = 0; k < 2; k++) {
		emitf(e, "\tmad.lo.u32 %s, %s, 256, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", a.s, s.pb.s, s.corr0.s,
		      a.s, s.rowt[k].s, a.s);
		emitf(e, "\tld.shared.f32 %s, [%s];\n", c.corr[k].s, a.s);
	}
	for (int i = 0; i < c.ocols / 2; i++)
		emitf(e, "\tmul.f32 %s, %s, %s;\n", c.O[i].s, c.O[i].s, c.corr[row_of(i)].s);
	/* With K=V one tile, P_j was published after the scores warpgroup
	 * waited for that tile's full barrier: the acquire of P full orders
	 * this warpgroup after the tile's arrival (causality is transitive), so
	 * only a separate V needs its own wait, and with S ahead not even that:
	 * the scores warpgroup hands P_j on after its wait for V_j. */
	if (!f->kv_shared && !f->s_ahead) {
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c.bar.s, c.stage.s, c.vbar0.s);
		if (op_mbar_wait(e, err, c.bar, c.phase.s) < 0)
			return -1;
	}
	sm90_wgmma_fence(e);
	split_pv_issue(e, f, &c, &s, s.pb, c.stage);
	sm90_wgmma_wait(e, 0);
	split_release(e, f, &c, &s, s.pb, c.stage, 0);
	fmha90_advance(e, f, &c);
	split_advance_p(e, &s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", c.p.s, c.j.s, r->n_total.s, c.p.s, loop);
	emit_label(e, done);
	(void)par;
	if (fmha90_epilogue(e, f, r, &c, err) < 0)
		return -1;
	return f->finish ? f->finish(e, f, r, err) : 0;
}

int
fmha90_split_body(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	Reg wg = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), el = reg_new(e, RC_PRED);
	Reg zero = reg_new(e, RC_B32);
	char scores[48], output[48], out[48];

	label_new(e, scores, sizeof scores, "scores");
	label_new(e, output, sizeof output, "output_wg");
	label_new(e, out, sizeof out, "exit");
	emit_block(e, "sm90.fmha_split_roles");
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tmov.u32 %s, 0;\n", wg.s, r->tid.s, zero.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 1;\n\t@%s bra %s;\n", p.s, wg.s, p.s, scores);
	emitf(e, "\tsetp.eq.u32 %s, %s, 2;\n\t@%s bra %s;\n", p.s, wg.s, p.s, output);
	if (f->gather) {
		/* decode: the whole warpgroup gathers (gen/decode.h) */
		op_setmaxnreg(e, 0, f->plan.roles[0].regs);
		if (f->gather(e, f, r, err) < 0)
			return -1;
		emitf(e, "\tbra %s;\n", out);
	} else if (fmha90_producer_role(e, f, r, p, el, out, err) < 0) {
		return -1;
	}
	emit_label(e, scores);
	op_setmaxnreg(e, 1, f->plan.roles[1].regs);
	if (emit_scores_wg(e, f, r, zero, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", out);
	emit_label(e, output);
	op_setmaxnreg(e, 1, f->plan.roles[2].regs);
	if (emit_output_wg(e, f, r, zero, err) < 0)
		return -1;
	emit_label(e, out);
	emitf(e, "\tret;\n");
	return 0;
}
