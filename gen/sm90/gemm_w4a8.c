/* The W4A8 gemm on sm_90a (--scale w4a8; docs/ABI.md, "W4A8 weights"):
 * the weights are wgmma's A from registers, the tokens its B from smem.
 * Warpgroup 0 produces (gemm.c's TMA loop: the tile's tile-m token rows of
 * A and tile-n rows of E2M1 bytes of B per 128-K stage); consumer
 * warpgroup w owns weight rows 64w..64w+63 of the tile. Per K block each
 * consumer thread folds its two rows' four UE8M0 exponents into one power
 * of two (gen/w4a8.h), turns its FP4 bytes into E4M3 A fragments by the
 * group's byte table, runs four m64nTk32 wgmmas into a temporary, and adds
 * it scaled by 2^(e_ref-127) per row and SA per token into the f32
 * accumulator: D^T[weight row, token], stored transposed into C. */
#include <stdio.h>

#include "../gemm.h"
#include "../ops.h"
#include "../w4a8.h"
#include "gemm_w4a8.h"
#include "mma.h"

enum { W4A8_PRODUCER_REGS = 40 };

int
sm90_w4a8_plan(GemmCfg *g, KgErr *err)
{
	Plan *p = &g->plan;
	char does[160];
	int regs;

	(void)err;
	g->consumers = g->tn / 64;
	p->threads = 128 * (1 + g->consumers);
	regs = plan_regs_split(p, 128 * g->consumers, 128, W4A8_PRODUCER_REGS);
	plan_role(p, "producer", 0, 4, W4A8_PRODUCER_REGS, "warp 0, one elected lane: TMA token and FP4 boxes");
	snprintf(does, sizeof does, "64 weight rows each: FP4 -> E4M3 fragments, wgmma m64n%dk32 RS, x 2^e * SA per K block",
	         g->tm);
	plan_role(p, "consumer", 4, 4 * g->consumers, regs, does);
	/* the accumulator and its temporary (tile-m/2 each), 16 A fragment
	 * registers, the expansion's scratch and the addresses (about 60) */
	p->regs_need_max = g->tm + 16 + 60;
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "consumer");
	g->r_lut = plan_smem(p, "W4A8 E4M3 byte tables", 8 * W4A8_NLUT, 16, 1);
	g->b_full = plan_barrier(p, "full", g->stages, 1, g->stage_bytes,
	                         "producer: arrive.expect_tx, then TMA complete_tx");
	snprintf(does, sizeof does, "lane 0 of each of the %d consumer warps after wgmma.wait_group",
	         4 * g->consumers);
	g->b_empty = plan_barrier(p, "empty", g->stages, 4 * g->consumers, 0, does);
	return 0;
}

int
sm90_w4a8_setup(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	Reg p = reg_new(e, RC_PRED), t = reg_new(e, RC_B32);
	Reg lut = op_plan_smem(e, &g->plan, r->base, g->r_lut);
	char skip[48];

	(void)err;
	emit_block(e, "sm90.w4a8_tables");
	label_new(e, skip, sizeof skip, "w4a8_tables_done");
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->tid.s, p.s, skip);
	w4a8_emit_tables(e, lut, t);
	emit_label(e, skip);
	return 0;
}

/* One consumer thread's fixed addresses and per-row state. */
typedef struct W4a8Thread {
	Reg row0;        /* its first weight row in the tile: 64w + 16(warp%4) + lane/4 */
	Reg fp4[2];      /* smem offset in a B stage of its K bytes of rows row0, row0+8 */
	Reg xo[4];       /* the swizzled offset of 32-K step c inside a row: (16c) ^ key */
	Reg psb[2];      /* &SB[row][4kt] of its two rows */
	Reg psa[4];      /* &SA[kt][token] of its tokens (tile-m/4 of them) */
	Reg sastride;    /* bytes from SA[kt] to SA[kt+1] */
	int ntok;        /* tokens per thread */
} W4a8Thread;

/* Token index (0..ntok-1) of accumulator register i: its column
 * wgmma_acc_col(t) + dcol, dcol in {0, 1, 8, 9}. */
static int
tok_of_acc(int i)
{
	int drow, dcol;

	wgmma_acc_reg(i, &drow, &dcol);
	return dcol % 8 + 2 * (dcol / 8);
}

static int
row_of(int i)
{
	int drow, dcol;

	wgmma_acc_reg(i, &drow, &dcol);
	return drow / 8;
}

static void
emit_thread_setup(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg wgc, W4a8Thread *th)
{
	Reg t = reg_new(e, RC_B32), u = reg_new(e, RC_B32), key = reg_new(e, RC_B32);
	Reg w = reg_new(e, RC_B64), col = reg_new(e, RC_B32), last = reg_new(e, RC_B32);

	emit_block(e, "sm90.w4a8_thread");
	th->row0 = reg_new(e, RC_B32);
	sm90_acc_row0(e, th->row0, wgc, r->warp, r->lane, t);
	/* the 8-bit A fragment (docs/hardware.md, "wgmma A fragment"): register
	 * i byte 0 holds K 4(lane%4) + 16(i/2) of row row0 + 8(i%2): FP4 bytes
	 * 2(lane%4) and 8 + 2(lane%4) of the row's 16 per 32-K step */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, 1;\n", u.s, r->lane.s, u.s, u.s);
	/* 64B swizzle (docs/hardware.md, "TMA swizzle"): the row's address
	 * bits swizzle_mask move down by 3 onto the 16-byte chunk index; a B
	 * stage is a whole number of swizzle periods, rows row0 and row0 + 8
	 * share the bits */
	emitf(e, "\tshl.b32 %s, %s, %d;\n", t.s, th->row0.s, 6);
	emitf(e, "\tand.b32 %s, %s, 0x%x;\n\tshr.u32 %s, %s, 3;\n", key.s, t.s, swizzle_mask(SWZ_64B), key.s,
	      key.s);
	for (int h = 0; h < 2; h++) {
		th->fp4[h] = reg_new(e, RC_B32);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tadd.u32 %s, %s, %s;\n", th->fp4[h].s, t.s,
		      layout_offset(&g->lb, 8 * h, 0), th->fp4[h].s, th->fp4[h].s, u.s);
	}
	for (int c = 0; c < 4; c++) {
		th->xo[c] = reg_new(e, RC_B32);
		emitf(e, "\txor.b32 %s, %s, %d;\n", th->xo[c].s, key.s, 16 * c);
	}
	/* SB rows of this expert (nb - n0 + n), n clamped to N-1: rows past N
	 * are never stored */
	emitf(e, "\tsub.u32 %s, %s, 1;\n\tshr.u32 %s, %s, 5;\n", last.s, r->N.s, u.s, r->K.s);
	for (int h = 0; h < 2; h++) {
		th->psb[h] = reg_new(e, RC_B64);
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %d;\n", t.s, r->n0.s, th->row0.s, t.s, t.s, 8 * h);
		emitf(e, "\tmin.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", t.s, t.s, last.s,
		      t.s, t.s, r->nb.s, t.s, t.s, r->n0.s);
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", w.s, t.s, u.s, th->psb[h].s, r->sb.s,
		      w.s);
	}
	/* SA of the thread's tokens m0 + col, clamped to the rows of A */
	th->ntok = g->tm / 4;
	th->sastride = reg_new(e, RC_B64);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n", th->sastride.s, r->rows.s);
	sm90_acc_col0(e, col, r->lane);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tsub.u32 %s, %s, 1;\n", col.s, col.s, r->m0.s, last.s, r->rows.s);
	for (int j = 0; j < th->ntok; j++) {
		th->psa[j] = reg_new(e, RC_B64);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tmin.u32 %s, %s, %s;\n", t.s, col.s, j % 2 + 8 * (j / 2), t.s, t.s,
		      last.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", w.s, t.s, th->psa[j].s, r->sa.s, w.s);
	}
}

/* C[token][weight row] from the accumulator D^T: tokens m0 + col inside
 * the expert's rows [mlo, mhi), weight rows n0 + row < N. */
static void
emit_store(Emit *e, const GemmCfg *g, const GemmRegs *r, const W4a8Thread *th, const Reg *acc)
{
	Reg col = reg_new(e, RC_B32), n = reg_new(e, RC_B32), m = reg_new(e, RC_B32);
	Reg pn = reg_new(e, RC_PRED), pm = reg_new(e, RC_PRED), p = reg_new(e, RC_PRED);
	Reg a = reg_new(e, RC_B64), w = reg_new(e, RC_B64), h16 = reg_new(e, RC_B16);
	int esz = g->esz_out;

	emit_block(e, "sm90.w4a8_store");
	sm90_acc_col0(e, col, r->lane);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", col.s, col.s, r->m0.s);
	for (int i = 0; i < g->tm / 2; i++) {
		int drow, dcol;
		wgmma_acc_reg(i, &drow, &dcol);
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %d;\n", n.s, r->n0.s, th->row0.s, n.s, n.s, drow);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", pn.s, n.s, r->N.s);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", m.s, col.s, dcol, pm.s, m.s, r->mhi.s);
		if (g->moe)
			emitf(e, "\tsetp.ge.and.u32 %s, %s, %s, %s;\n", pm.s, m.s, r->mlo.s, pm.s);
		emitf(e, "\tand.pred %s, %s, %s;\n", p.s, pm.s, pn.s);
		/* element m*N + n in 64 bits */
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", a.s, m.s, r->N.s,
		      w.s, n.s, a.s, a.s, w.s);
		emitf(e, "\tmad.lo.u64 %s, %s, %d, %s;\n", a.s, a.s, esz, r->c.s);
		if (g->out == DT_BF16) {
			emitf(e, "\tcvt.rn.bf16.f32 %s, %s;\n", h16.s, acc[i].s);
			emitf(e, "\t@%s st.global.b16 [%s], %s;\n", p.s, a.s, h16.s);
		} else {
			emitf(e, "\t@%s st.global.f32 [%s], %s;\n", p.s, a.s, acc[i].s);
		}
	}
}

int
sm90_w4a8_consumer(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	Reg acc[8], tmp[8], afr[16], sa[4], f[2][4], ew[2], emax[2], base[2], sc[2];
	Reg wgc = reg_new(e, RC_B32), stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32);
	Reg kt = reg_new(e, RC_B32), full = reg_new(e, RC_B32), rel = reg_new(e, RC_B32);
	Reg as = reg_new(e, RC_B32), bs = reg_new(e, RC_B32), lo = reg_new(e, RC_B32);
	Reg bd = reg_new(e, RC_B64), p = reg_new(e, RC_PRED), lane0 = reg_new(e, RC_PRED);
	Reg bhr = reg_new(e, RC_B32), ec = reg_new(e, RC_B32), idx = reg_new(e, RC_B32);
	Reg t0 = reg_new(e, RC_B32), t1 = reg_new(e, RC_B32), x = reg_new(e, RC_B32);
	Reg h0 = reg_new(e, RC_B16), h1 = reg_new(e, RC_B16), addr = reg_new(e, RC_B32);
	Reg st = reg_new(e, RC_B32), st2 = reg_new(e, RC_B32), sp = reg_new(e, RC_PRED);
	Reg full0, empty0, a0, b0, lut;
	W4a8Thread th;
	W4a8Regs wr;
	uint32_t blo, bhi;
	char loop[48], done[48], guard[16];
	int nacc = g->tm / 2;

	/* the tokens' tile is wgmma's B: K-major, 128B swizzle, tile-m rows */
	if (gemm_desc_words(g, &g->la, &blo, &bhi, err) < 0)
		return -1;
	reg_array(e, RC_F32, acc, nacc);
	reg_array(e, RC_F32, tmp, nacc);
	reg_array(e, RC_B32, afr, 16);
	emit_block(e, "sm90.w4a8_consumer");
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tsub.u32 %s, %s, 1;\n", wgc.s, r->tid.s, wgc.s, wgc.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", lane0.s, r->lane.s);
	full0 = op_plan_bar(e, &g->plan, r->base, g->b_full);
	empty0 = op_plan_bar(e, &g->plan, r->base, g->b_empty);
	a0 = op_plan_smem(e, &g->plan, r->base, g->r_a);
	b0 = op_plan_smem(e, &g->plan, r->base, g->r_b);
	lut = op_plan_smem(e, &g->plan, r->base, g->r_lut);
	op_desc_hi(e, bhr, g->t->desc, (uint64_t)bhi << 32 | blo, "B (tokens)");
	for (int i = 0; i < nacc; i++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", acc[i].s);
	for (int h = 0; h < 2; h++) {
		ew[h] = reg_new(e, RC_B32);
		emax[h] = reg_new(e, RC_B32);
		base[h] = reg_new(e, RC_B32);
		sc[h] = reg_new(e, RC_F32);
		for (int j = 0; j < g->tm / 4; j++)
			f[h][j] = reg_new(e, RC_F32);
	}
	for (int j = 0; j < g->tm / 4; j++)
		sa[j] = reg_new(e, RC_F32);
	w4a8_emit_init(e, &wr);
	emit_thread_setup(e, g, r, wgc, &th);
	emit_block(e, "sm90.w4a8_loop");
	if (gemm_mma_loop_head(e, err, r, stage, phase, kt, full0, full, p, loop, done, sizeof loop) < 0)
		return -1;
	/* this K block's scales: the rows' four UE8M0 (one word: byte c is the
	 * group of K step c) and the tokens' SA */
	for (int h = 0; h < 2; h++)
		emitf(e, "\tld.global.nc.u32 %s, [%s];\n\tadd.u64 %s, %s, 4;\n", ew[h].s, th.psb[h].s, th.psb[h].s,
		      th.psb[h].s);
	for (int j = 0; j < th.ntok; j++)
		emitf(e, "\tld.global.nc.f32 %s, [%s];\n\tadd.u64 %s, %s, %s;\n", sa[j].s, th.psa[j].s, th.psa[j].s,
		      th.psa[j].s, th.sastride.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", as.s, stage.s, g->la.bytes, a0.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", bs.s, stage.s, g->lb.bytes, b0.s);
	emit_block(e, "sm90.w4a8_fold");
	for (int h = 0; h < 2; h++) {
		/* emax of the block's four exponents, the table base, the scale */
		emitf(e, "\tand.b32 %s, %s, 0xff;\n", emax[h].s, ew[h].s);
		for (int c = 1; c < 4; c++)
			emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n\tmax.u32 %s, %s, %s;\n", ec.s, ew[h].s, 8 * c, emax[h].s,
			      emax[h].s, ec.s);
		w4a8_emit_base(e, base[h], emax[h]);
		w4a8_emit_scale(e, st, emax[h], idx, st2, sp);
		emitf(e, "\tmov.b32 %s, %s;\n", sc[h].s, st.s);
	}
	emit_block(e, "sm90.w4a8_expand");
	for (int c = 0; c < 4; c++)
		for (int h = 0; h < 2; h++) {
			/* the group's table, then the row's 2 + 2 bytes of step c */
			emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n", ec.s, ew[h].s, 8 * c);
			w4a8_emit_index(e, idx, ec, base[h]);
			emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n\tld.shared.v2.b32 {%s, %s}, [%s];\n", addr.s, idx.s, lut.s,
			      t0.s, t1.s, addr.s);
			emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", addr.s, bs.s, th.fp4[h].s, addr.s,
			      addr.s, th.xo[c].s);
			emitf(e, "\tld.shared.b16 %s, [%s];\n\tld.shared.b16 %s, [%s+8];\n", h0.s, addr.s, h1.s, addr.s);
			emitf(e, "\tmov.b32 %s, {%s, %s};\n", x.s, h0.s, h1.s);
			/* registers h (K 4(lane%4)..) and h + 2 (16 + 4(lane%4)..) of step c */
			w4a8_emit_expand(e, &wr, afr[4 * c + h], afr[4 * c + h + 2], x, t0, t1);
		}
	emit_block(e, "sm90.w4a8_mma");
	emitf(e, "\tshr.u32 %s, %s, 4;\n", as.s, as.s);
	sm90_wgmma_fence(e);
	for (int c = 0; c < 4; c++) {
		uint32_t db = layout_offset(&g->la, 0, 32 * c) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, as.s, blo + db, bd.s, lo.s, bhr.s);
		/* the block's first MMA overwrites the temporary */
		sm90_wgmma(e, g->tm, DT_E4M3, tmp, NULL, &afr[4 * c], bd, c > 0, 0);
	}
	sm90_wgmma_commit(e);
	sm90_wgmma_wait(e, 0);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", rel.s, stage.s, empty0.s,
	      g->plan.bars[g->b_empty].name);
	snprintf(guard, sizeof guard, "@%s ", lane0.s);
	op_mbar_arrive(e, rel, guard);
	emit_block(e, "sm90.w4a8_promote");
	for (int h = 0; h < 2; h++)
		for (int j = 0; j < th.ntok; j++)
			emitf(e, "\tmul.f32 %s, %s, %s;\n", f[h][j].s, sc[h].s, sa[j].s);
	for (int i = 0; i < nacc; i++)
		emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", acc[i].s, tmp[i].s, f[row_of(i)][tok_of_acc(i)].s, acc[i].s);
	op_ring_advance(e, stage, phase, g->stages, reg_new(e, RC_PRED));
	emitf(e, "\tadd.u32 %s, %s, 1;\n", kt.s, kt.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, kt.s, r->nk.s, p.s, loop);
	emit_label(e, done);
	emit_store(e, g, r, &th, acc);
	return 0;
}
