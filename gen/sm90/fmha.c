/* FMHA forward on sm_90a. Warpgroup 0 produces (one elected thread issues
 * TMA for Q once and K/V per tile); warpgroups 1..W each own 64 query rows:
 * S = Q·K^T with wgmma SS into registers, online softmax with exp2 and the
 * scale folded in, P converted in registers to the A fragment of O += P·V
 * (wgmma RS, V read N-major from the same swizzled rows TMA wrote). */
#include <stdio.h>
#include <string.h>

#include "../desc.h"
#include "../fmha.h"
#include "../ops.h"
#include "fmha_int.h"
#include "mma.h"

/* The producer is one elected thread issuing TMA. Three consumer
 * warpgroups leave it less: 32 keeps 160 for each of them. */
static int
producer_regs(const FmhaCfg *f)
{
	return f->wgs > 2 ? 32 : 40;
}


static int
sm90_fmha_tiles(FmhaCfg *f, const FmhaParams *p, KgErr *err)
{
	/* Beyond 256 columns O does not fit one warpgroup's registers: two
	 * warpgroups share 64 query rows, one computing S and P, both
	 * accumulating half of O's columns (the split-O plan). */
	f->split = f->d > 256 || f->dv > 256;
	if (p->tile_m == 256)
		return kg_fail(err, "--tile-m=256: sm_90a fmha runs one to three 64-row warpgroups per CTA; use 64, 128 or 192");
	/* Three warpgroups (192 rows) where a consumer's S, O and P fit the
	 * 160 registers each gets then: O of 64 columns at 128 keys. More
	 * warpgroups in the MMA ring keep the tensor cores fed while each
	 * runs its softmax (H100, hd64: 566 vs 476 TFLOP/s without a mask,
	 * 505 vs 443 causal, BENCHMARKS.md). */
	if (p->tile_m || f->split) {
		f->bm = p->tile_m ? p->tile_m : 64;
	} else {
		/* packed heads: as many Q tiles as the group has head blocks;
		 * three only while their 160 registers hold the KV tile */
		int qb = f->dv <= 64 && (!p->tile_n || p->tile_n <= 128) ? 3 : 2;
		while (qb > 1 && p->pack_heads > 1 && f->group % (qb * p->pack_heads))
			qb--;
		f->bm = 64 * qb;
	}
	if (f->split && f->bm != 64)
		return kg_fail(err, "--tile-m=%d with --head-dim=%d --head-dim-v=%d: the split-O plan works on 64 query rows per CTA",
		               f->bm, f->d, f->dv);
	f->wgs = f->split ? 2 : f->bm / 64;
	/* one 64-row Q tile per consumer warpgroup (wgmma M = 64) */
	f->q_rows = 64;
	f->qblocks = f->bm / 64;
	/* KV tile: the longest whose S (bn/2), P (bn/4) and O (dv/2)
	 * registers fit a consumer thread beside ~32 of state: 176 keys at dv
	 * 128, 80 at 256, 128 at 64 with three warpgroups (160 registers), 192
	 * with two and no mask (a mask's limits spill it). Longer tiles spread
	 * the per-tile softmax and barrier overhead; H100 (BENCHMARKS.md):
	 * hd256 803 vs 673 TFLOP/s at 80 vs 64 keys, causal 736 vs 710; hd128
	 * causal 663 vs 627 at 176 vs 128; hd64 480 vs 454 at 192 vs 128. */
	if (p->tile_n)
		f->bn = p->tile_n;
	else if (f->split)
		f->bn = 64;
	else if (f->dv <= 64)
		f->bn = f->wgs == 2 && f->mask == MASK_NONE ? 192 : 128;
	else
		f->bn = f->dv <= 128 ? 176 : 80;
	if (f->split && f->bn != 64)
		return kg_fail(err, "--tile-n=%d: the split-O plan stages P as 64-key, 128-byte swizzled rows; use 64", f->bn);
	/* exp2-fma stays off by default here: H100 has as much MUFU ex2 as
	 * its tensor cores need at hd64 (512 clocks each per 64x128 tile),
	 * and each eighth of the exponentials moved to the polynomial cost
	 * ~8% (hd64 563 -> 522 -> 485 TFLOP/s at 0, 1, 2 of 8; BENCHMARKS.md). */
	/* a K=V tile stays busy from S_j to P_j·V_j, a tile later: one more slot */
	f->stages = p->stages ? p->stages : f->split ? (f->kv_shared ? 2 : 1) : (f->kv_shared ? 3 : 2);
	return 0;
}

static int
sm90_fmha_plan(FmhaCfg *f, KgErr *err)
{
	Plan *p = &f->plan;
	char does[96];
	int regs;

	if (f->split)
		return fmha90_split_plan(f, err);
	p->threads = 128 * (1 + f->wgs);
	regs = plan_regs_split(p, 128 * f->wgs, 128, producer_regs(f));
	plan_role(p, "producer", 0, 4, producer_regs(f), "warp 0, one elected lane: TMA Q, then K/V tiles");
	snprintf(does, sizeof does, "64 query rows each: S=QK^T (SS), softmax, O+=PV (RS, N=%d)", f->dv);
	plan_role(p, "consumer", 4, 4 * f->wgs, regs, does);
	/* S (bn/2) and O (dv/2) f32 accumulators, P as bf16 pairs (bn/4), row
	 * statistics, addresses and descriptors (~32; ptxas has the last word,
	 * and tests/ptxas.sh holds every emitted kernel to no spills). */
	p->regs_need_max = f->bn / 2 + f->dv / 2 + f->bn / 4 + 32;
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "consumer");
	f->b_q = plan_barrier(p, "Q full", 1, 1, f->q_bytes, "producer: expect_tx + TMA");
	f->b_k = plan_barrier(p, f->kv_shared ? "K=V full" : "K full", f->stages, 1, f->k_bytes,
	                      "producer: expect_tx + TMA");
	f->b_v = f->kv_shared ? f->b_k
	                      : plan_barrier(p, "V full", f->stages, 1, f->v_bytes, "producer: expect_tx + TMA");
	snprintf(does, sizeof does, "lane 0 of each of the %d consumer warps after S=QK^T", 4 * f->wgs);
	if (f->kv_shared) {
		snprintf(does, sizeof does, "lane 0 of each of the %d consumer warps after O+=PV", 4 * f->wgs);
		f->b_kfree = f->b_vfree = plan_barrier(p, "K=V free", f->stages, 4 * f->wgs, 0, does);
	} else {
		f->b_kfree = plan_barrier(p, "K free", f->stages, 4 * f->wgs, 0, does);
		snprintf(does, sizeof does, "lane 0 of each of the %d consumer warps after O+=PV", 4 * f->wgs);
		f->b_vfree = plan_barrier(p, "V free", f->stages, 4 * f->wgs, 0, does);
	}
	return 0;
}


/* S = Q·K^T: K-major Q (A) and K (B), 32 bytes of head-dim per MMA; the
 * first MMA overwrites S (scale-d 0). Issued, not waited. */
void
fmha90_scores_issue(Emit *e, const FmhaCfg *f, Consumer *c)
{
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tshr.u32 %s, %s, 4;\n", c->klo.s, c->stage.s, f->k_bytes,
	      c->k0.s, c->klo.s, c->klo.s);
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

/* O += P·V of the previous tile (stage pstage): P from registers (RS). */
static void
emit_pv_issue(Emit *e, const FmhaCfg *f, Consumer *c)
{
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tshr.u32 %s, %s, 4;\n", c->vlo.s, c->pstage.s,
	      f->kv_shared ? f->k_bytes : f->v_bytes, c->v0.s, c->vlo.s, c->vlo.s);
	for (int kk = 0; kk < f->bn / 16; kk++) {
		/* 16 keys = two 8-row groups of the N-major V atoms: +2*SBO (§1.5) */
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", c->lo.s, c->vlo.s,
		      ((uint32_t)(kk * 2048) >> 4) + c->dv_lo, c->bd.s, c->lo.s, c->vhi.s);
		sm90_wgmma(e, f->dv, f->in, c->O, NULL, &c->P[4 * kk], c->bd, 1, 1);
	}
	sm90_wgmma_commit(e);
}

void
fmha90_mask(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c)
{
	emit_block(e, "sm90.fmha_mask");
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, 1;\n", c->t.s, r->lane.s, c->t.s, c->t.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", c->colb.s, c->j.s, f->bn, c->t.s);
	for (int i = 0; i < f->bn / 2; i++) {
		emitf(e, "\tadd.s32 %s, %s, %d;\n", c->t.s, c->colb.s, (i % 2) + 8 * (i / 4));
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
			/* the 4 lanes of a quad hold the same two rows (§4.2) */
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
 * kk (hardware-facts §4.2 and §4.3). */
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

/* Ping-pong (FA3), as a ring of up to three: the consumer warpgroups take turns issuing their MMAs
 * in a ring, so one's softmax runs while another's MMAs hold the tensor
 * cores. Named barrier 1+w is warpgroup w's turn; the warpgroup before it
 * in the ring arrives on it once it has issued. */
static void
emit_turn_wait(Emit *e, const FmhaCfg *f, Consumer *c)
{
	if (f->wgs > 1)
		emitf(e, "\tbar.sync %s, 256;\n", c->myturn.s);
}

static void
emit_turn_pass(Emit *e, const FmhaCfg *f, Consumer *c)
{
	if (f->wgs > 1)
		emitf(e, "\tbar.arrive %s, 256;\n", c->otherturn.s);
}

/* V (or K=V) of the previous tile: its P·V has completed */
static void
emit_release_prev(Emit *e, Consumer *c)
{
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->pstage.s, c->vfree0.s);
	op_mbar_arrive(e, c->bar, c->guard0);
}

/* K of the current tile: S has completed (separate K and V) */
void
fmha90_release_k(Emit *e, const FmhaCfg *f, Consumer *c)
{
	if (f->kv_shared)
		return;
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->stage.s, c->kfree0.s);
	op_mbar_arrive(e, c->bar, c->guard0);
}

void
fmha90_advance(Emit *e, const FmhaCfg *f, Consumer *c)
{
	emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", c->pstage.s, c->stage.s, c->pphase.s,
	      c->phase.s);
	op_ring_advance(e, c->stage, c->phase, f->stages, c->p);
	emitf(e, "\tadd.u32 %s, %s, 1;\n", c->j.s, c->j.s);
}

/* Tile 0 has no previous P·V to overlap: S, softmax, P. It is always
 * masked (cheap once) so the steady-state loops below need no branch: a
 * branch between wgmma issue and wait makes ptxas drain every group at
 * the join, which would serialize the overlap. */
static int
emit_first_tile(Emit *e, KgErr *err, const FmhaCfg *f, const FmhaRegs *r, Consumer *c)
{
	emit_block(e, "sm90.fmha_tile_first");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->stage.s, c->kbar0.s);
	if (op_mbar_wait(e, err, c->bar, c->phase.s) < 0)
		return -1;
	emit_turn_wait(e, f, c);
	sm90_wgmma_fence(e);
	fmha90_scores_issue(e, f, c);
	emit_turn_pass(e, f, c);
	sm90_wgmma_wait(e, 0);
	fmha90_release_k(e, f, c);
	fmha90_mask(e, f, r, c);
	fmha90_softmax_exp(e, f, c);
	fmha90_softmax_rescale(e, f, c, 1);
	fmha90_advance(e, f, c);
	return 0;
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

/* Tiles 1.., software-pipelined inside the warpgroup: issue S_j and the
 * previous tile's P·V together, wait for S_j only, run the exp half of the
 * softmax while P·V runs, then wait, release the previous stage and
 * rescale (FA3 intra-warpgroup overlap). */
static int
emit_kv_loop(Emit *e, KgErr *err, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, int masked,
             Reg endr)
{
	FmhaLoop l;

	if (fmha90_loop_head(e, err, f, c, masked ? "kv_masked" : "kv",
	                     masked ? "sm90.fmha_tile_masked" : "sm90.fmha_tile", endr, &l) < 0)
		return -1;
	emit_turn_wait(e, f, c);
	sm90_wgmma_fence(e);
	fmha90_scores_issue(e, f, c);
	emit_pv_issue(e, f, c);
	emit_turn_pass(e, f, c);
	sm90_wgmma_wait(e, 1);
	fmha90_release_k(e, f, c);
	if (masked)
		fmha90_mask(e, f, r, c);
	fmha90_softmax_exp(e, f, c);
	sm90_wgmma_wait(e, 0);
	emit_release_prev(e, c);
	fmha90_softmax_rescale(e, f, c, 1);
	fmha90_advance(e, f, c);
	fmha90_loop_foot(e, c, &l);
	return 0;
}

/* The last tile's P·V, then the final turn bookkeeping: the last
 * warpgroup's last pass leaves one arrival on warpgroup 0's barrier,
 * consumed here so every named barrier ends balanced (each warpgroup takes
 * as many turns as the others: all visit the CTA's KV tiles). */
static int
emit_kv_tail(Emit *e, KgErr *err, const FmhaCfg *f, const FmhaRegs *r, Consumer *c)
{
	char skip[48];

	label_new(e, skip, sizeof skip, "no_tail");
	emit_block(e, "sm90.fmha_tail");
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", c->p.s, r->j0.s, r->n_total.s, c->p.s, skip);
	if (!f->kv_shared) {
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->pstage.s, c->vbar0.s);
		if (op_mbar_wait(e, err, c->bar, c->pphase.s) < 0)
			return -1;
	}
	emit_turn_wait(e, f, c);
	sm90_wgmma_fence(e);
	emit_pv_issue(e, f, c);
	emit_turn_pass(e, f, c);
	sm90_wgmma_wait(e, 0);
	emit_release_prev(e, c);
	emit_label(e, skip);
	if (f->wgs > 1) {
		char not0[48];
		label_new(e, not0, sizeof not0, "turns_balanced");
		emitf(e, "\tsetp.ne.u32 %s, %s, 1;\n\t@%s bra %s;\n", c->p.s, c->myturn.s, c->p.s, not0);
		emitf(e, "\tbar.sync 1, 256;\n");
		emit_label(e, not0);
	}
	return 0;
}

/* Normalizes O by the row sums and stores this warpgroup's columns; writes
 * LSE. Row sums are the quad's partials added up, or, for the second half
 * of a split O, the first half's published sums. */
void
fmha90_epilogue(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, KgErr *err)
{
	Reg inv[2], addr[2], prow[2], pk = reg_new(e, RC_B32), a = reg_new(e, RC_B64);
	Reg t64 = reg_new(e, RC_B64), lse = reg_new(e, RC_F32), pl = reg_new(e, RC_PRED);
	Reg c4 = reg_new(e, RC_B32), sa = reg_new(e, RC_B32);
	int esz = f->esz;

	emit_block(e, "sm90.fmha_epilogue");
	emitf(e, "\tand.b32 %s, %s, 3;\n", c4.s, r->lane.s);
	if (c->l_from_smem && op_mbar_wait(e, err, c->lbar, "0") < 0)
		return;
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
			if (c->l_to_smem) {
				emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", pl.s, c4.s);
				emitf(e, "\t@%s st.shared.f32 [%s], %s;\n", pl.s, sa.s, c->l[r2].s);
			}
		}
		emitf(e, "\tsetp.gt.f32 %s, %s, 0f00000000;\n", c->p.s, c->l[r2].s);
		emitf(e, "\trcp.rn.f32 %s, %s;\n\tselp.f32 %s, %s, 0f00000000, %s;\n", inv[r2].s, c->l[r2].s,
		      inv[r2].s, inv[r2].s, c->p.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", prow[r2].s, c->rowq[r2].s, r->sq.s);
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
			      r->total_q.s, r->qs.s, c->lo.s, c->lo.s, c->rowq[r2].s);
			emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, c->lo.s, a.s, a.s, r->lse.s);
			emitf(e, "\t@%s st.global.f32 [%s], %s;\n", pl.s, a.s, lse.s);
		}
	}
	if (c->l_to_smem)
		op_mbar_arrive(e, c->lbar, NULL);
	for (int i = 0; i < c->ocols / 2; i += 2) {
		int rr = row_of(i), off = 8 * (i / 4) * esz;
		emitf(e, "\tmul.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n", c->O[i].s, c->O[i].s, inv[rr].s,
		      c->O[i + 1].s, c->O[i + 1].s, inv[rr].s);
		emitf(e, "\tcvt.rn.%s.f32 %s, %s, %s;\n", f->in == DT_BF16 ? "bf16x2" : "f16x2", pk.s,
		      c->O[i + 1].s, c->O[i].s);
		emitf(e, "\t@%s st.global.b32 [%s+%d], %s;\n", prow[rr].s, addr[rr].s, off, pk.s);
	}
}

int
fmha90_consumer_init(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *cp, Reg wgc,
                     Reg row_block, int ocol0, int ocols, KgErr *err)
{
	Consumer c;
	Reg qbar;
	uint64_t dq, dv;
	SmemDesc vd = {0};

	memset(&c, 0, sizeof c);
	c.ocol0 = ocol0;
	c.ocols = ocols;
	if (desc_for_tile(&dq, f->t->desc, &f->lq, 0, err) < 0)
		return -1;
	/* V as B of P·V: N (head dim) contiguous in 128-byte swizzled rows, K
	 * (keys) across rows. MN-major SW128: SBO = 1024 between 8-key groups,
	 * LBO = the next 64 columns' slice (hardware-facts §1.4, §5.6). */
	vd.lbo = f->lv.slice_bytes;
	vd.sbo = 1024;
	vd.swz = SWZ_128B;
	if (desc_encode(&dv, f->t->desc, &vd, err) < 0)
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
	c.q0 = op_plan_smem(e, &f->plan, r->base, f->r_q);
	c.k0 = op_plan_smem(e, &f->plan, r->base, f->r_k);
	c.v0 = op_plan_smem(e, &f->plan, r->base, f->r_v);
	qbar = op_plan_bar(e, &f->plan, r->base, f->b_q);
	c.kbar0 = op_plan_bar(e, &f->plan, r->base, f->b_k);
	c.vbar0 = op_plan_bar(e, &f->plan, r->base, f->b_v);
	c.kfree0 = op_plan_bar(e, &f->plan, r->base, f->b_kfree);
	c.vfree0 = op_plan_bar(e, &f->plan, r->base, f->b_vfree);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", c.lane0.s, r->lane.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tshr.u32 %s, %s, 4;\n", c.qlo.s, row_block.s, f->lq.bytes,
	      c.q0.s, c.qlo.s, c.qlo.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n", c.qlo.s, c.qlo.s, (uint32_t)dq);
	emitf(e, "\tmov.u32 %s, %u;\n\tmov.u32 %s, %u;\n", c.dhi.s, (uint32_t)(dq >> 32), c.vhi.s,
	      (uint32_t)(dv >> 32));
	/* rows g = 64*block + 16*(warp%4) + lane/4 and g + 8 of the CTA's tile */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, 4;\n", c.t.s, r->warp.s, c.t.s, c.t.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 64, %s;\n", c.trow[0].s, row_block.s, c.t.s);
	emitf(e, "\tshr.u32 %s, %s, 2;\n\tadd.u32 %s, %s, %s;\n", c.t.s, r->lane.s, c.trow[0].s,
	      c.trow[0].s, c.t.s);
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

static int
emit_consumer(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	Consumer c;
	Reg wgc = reg_new(e, RC_B32);

	emitf(e, "\tshr.u32 %s, %s, 7;\n\tsub.u32 %s, %s, 1;\n", wgc.s, r->tid.s, wgc.s, wgc.s);
	if (fmha90_consumer_init(e, f, r, &c, wgc, wgc, 0, f->dv, err) < 0 ||
	    op_mbar_wait(e, err, c.qbar, "0") < 0)
		return -1;
	/* my turn: barrier 1 + w; the next one's: 1 + (w + 1) % wgs */
	emitf(e, "\tadd.u32 %s, %s, 1;\n\trem.u32 %s, %s, %d;\n\tadd.u32 %s, %s, 1;\n", c.myturn.s, wgc.s,
	      c.otherturn.s, c.myturn.s, f->wgs, c.otherturn.s, c.otherturn.s);
	if (f->wgs > 1) {
		/* warpgroup 0 takes the first turn: the last one passes to it */
		char go[48];
		label_new(e, go, sizeof go, "first_turn");
		emitf(e, "\tsetp.ne.u32 %s, %s, %d;\n\t@%s bra %s;\n", c.p.s, wgc.s, f->wgs - 1, c.p.s, go);
		emitf(e, "\tbar.arrive 1, 256;\n");
		emit_label(e, go);
	}
	{
		char none[48];
		label_new(e, none, sizeof none, "no_keys");
		emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", c.p.s, r->j0.s, r->n_total.s, c.p.s, none);
		/* masked left edge (window), unmasked middle, masked right edge */
		if (emit_first_tile(e, err, f, r, &c) < 0 ||
		    (f->mask == MASK_WINDOW && emit_kv_loop(e, err, f, r, &c, 1, r->n_lead) < 0) ||
		    (fmha_has_unmasked_tiles(f) && emit_kv_loop(e, err, f, r, &c, 0, r->n_full) < 0) ||
		    emit_kv_loop(e, err, f, r, &c, 1, r->n_total) < 0)
			return -1;
		emit_label(e, none);
	}
	if (emit_kv_tail(e, err, f, r, &c) < 0)
		return -1;
	fmha90_epilogue(e, f, r, &c, err);
	return 0;
}

static int
sm90_fmha_body(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	if (f->split)
		return fmha90_split_body(e, f, r, err);
	Reg wg = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), el = reg_new(e, RC_PRED);
	char consumer[48], out[48];

	label_new(e, consumer, sizeof consumer, "consumer");
	label_new(e, out, sizeof out, "exit");
	emit_block(e, "sm90.fmha_roles");
	emitf(e, "\tshr.u32 %s, %s, 7;\n", wg.s, r->tid.s);
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, wg.s, p.s, consumer);
	op_setmaxnreg(e, 0, f->plan.roles[0].regs);
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->warp.s, p.s, out);
	op_elect_one(e, el);
	emitf(e, "\t@!%s bra %s;\n", el.s, out);
	if (fmha_emit_producer(e, f, r, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", out);
	emit_label(e, consumer);
	op_setmaxnreg(e, 1, f->plan.roles[1].regs);
	if (emit_consumer(e, f, r, err) < 0)
		return -1;
	emit_label(e, out);
	emitf(e, "\tret;\n");
	return 0;
}

static void
sm90_fmha_describe(const FmhaCfg *f, Buf *text)
{
	if (f->split)
		buf_printf(text, "tiles           split O: one 64-row Q tile per CTA; warpgroup 1 computes S and P (to smem) and O columns 0-%d, warpgroup 2 O columns %d-%d; %d keys per KV tile, %d stages\n",
		           f->dv / 2 - 1, f->dv / 2, f->dv - 1, f->bn, f->stages);
	else
		buf_printf(text, "tiles           %d Q rows per CTA (%d warpgroup%s x 64%s), %d keys per KV tile, %d stages\n",
		           f->bm, f->wgs, f->wgs > 1 ? "s" : "", f->wgs > 1 ? ", MMA turns in a ring" : "",
		           f->bn, f->stages);
}

const FmhaOps fmha_sm90 = {sm90_fmha_tiles, sm90_fmha_plan, NULL, sm90_fmha_body, sm90_fmha_describe};
