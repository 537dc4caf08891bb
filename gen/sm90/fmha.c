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
#include "consumer.h"
#include "fmha_split.h"
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
	/* the hand-off first unless asked for S ahead, which the H100
	 * measured slower (docs/estimate.md, "Split O with S ahead") */
	if (p->s_ahead == 1 && !f->split)
		return kg_fail(err, "--s-ahead=1 with --head-dim=%d --head-dim-v=%d: S ahead is an order of the split-O plan, for head dims above 256",
		               f->d, f->dv);
	f->s_ahead = f->split && p->s_ahead == 1;
	/* K/V multicast in a cluster of 2 (docs/estimate.md, "K/V multicast"):
	 * split O with separate K and V, one head per row block, no window
	 * (both CTAs visit the tiles of their 128 rows) */
	{
		int can = f->split && !f->kv_shared && f->mask != MASK_WINDOW && p->pack_heads == 1;
		if (p->kv_multicast == 1 && !can)
			return kg_fail(err, "--kv-multicast=1: multicast pairs split-O CTAs (head-dim above 256) with separate K and V, --pack-heads 1 and no window");
		/* opt-in: slower on the H100 (docs/estimate.md, "K/V multicast") */
		f->mcast = can && p->kv_multicast == 1;
	}
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


/* O += P·V of the previous tile (stage pstage): P from registers (RS). */
static void
emit_pv_issue(Emit *e, const FmhaCfg *f, Consumer *c)
{
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", c->vlo.s, c->pstage.s,
	      f->kv_shared ? f->k_bytes : f->v_bytes, c->v0.s);
	op_desc_start(e, c->vlo, fmha_clustered(f));
	for (int kk = 0; kk < f->bn / 16; kk++) {
		/* 16 keys = two 8-row groups of the N-major V atoms: +2*SBO
		 * (docs/hardware.md, "Advancing along K") */
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", c->lo.s, c->vlo.s,
		      ((uint32_t)(kk * 2048) >> 4) + c->dv_lo, c->bd.s, c->lo.s, c->vhi.s);
		sm90_wgmma(e, f->dv, f->in, c->O, NULL, &c->P[4 * kk], c->bd, 1, 1);
	}
	sm90_wgmma_commit(e);
}

/* Ping-pong (FA3), as a ring of up to three: the consumer warpgroups take turns issuing their MMAs
 * in a ring, so one's softmax runs while another's MMAs hold the tensor
 * cores. Named barrier 1+w is warpgroup w's turn; the warpgroup before it
 * in the ring arrives on it once it has issued. */
static void
emit_turn_wait(Emit *e, const FmhaCfg *f, Consumer *c)
{
	if (f->wgs > 1)
		emitf(e, "\tbar.sync %s, 256; // bar 1+w: this warpgroup's MMA turn\n", c->myturn.s);
}

static void
emit_turn_pass(Emit *e, const FmhaCfg *f, Consumer *c)
{
	if (f->wgs > 1)
		emitf(e, "\tbar.arrive %s, 256; // bar 1+w': pass the MMA turn on\n", c->otherturn.s);
}

/* V (or K=V) of the previous tile: its P·V has completed */
static void
emit_release_prev(Emit *e, Consumer *c)
{
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", c->bar.s, c->pstage.s, c->vfree0.s);
	op_mbar_arrive(e, c->bar, c->guard0);
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
		op_bar_sync_why(e, 1, 256, "closes the MMA-turn ring");
		emit_label(e, not0);
	}
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
	return fmha90_epilogue(e, f, r, &c, err);
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
	if (fmha90_producer_role(e, f, r, p, el, out, err) < 0)
		return -1;
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
		buf_printf(text, "tiles           split O: one 64-row Q tile per CTA; warpgroup 1 computes S and P (to smem) and O columns 0-%d, warpgroup 2 O columns %d-%d; %d keys per KV tile, %d stages%s\n",
		           f->dv / 2 - 1, f->dv / 2, f->dv - 1, f->bn, f->stages,
		           f->s_ahead ? "; S_j issued before P_{j-1}'s hand-off (S ahead)" : "");
	else
		buf_printf(text, "tiles           %d Q rows per CTA (%d warpgroup%s x 64%s), %d keys per KV tile, %d stages\n",
		           f->bm, f->wgs, f->wgs > 1 ? "s" : "", f->wgs > 1 ? ", MMA turns in a ring" : "",
		           f->bn, f->stages);
}

const FmhaOps fmha_sm90 = {sm90_fmha_tiles, sm90_fmha_plan, NULL, sm90_fmha_body, sm90_fmha_describe};
