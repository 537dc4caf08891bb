/* The W4A8 gemm on sm_90a (--scale w4a8; docs/ABI.md, "W4A8 weights"):
 * the weights are wgmma's A from registers, the tokens its B from smem.
 * Warpgroup 0 produces (gemm.c's TMA loop: the tile's tile-m token rows of
 * A and tile-n rows of E2M1 bytes of B per 128-K stage); consumer
 * warpgroup w owns weight rows 64w..64w+63 of the tile. Per K block each
 * consumer thread folds its two rows' four UE8M0 exponents into one power
 * of two (gen/w4a8.h), turns its FP4 bytes into E4M3 A fragments by the
 * group's byte table, runs four m64nTk32 wgmmas into a temporary, and adds
 * it scaled by 2^(e_ref-127) per row and SA per token into the f32
 * accumulator: D^T[weight row, token], stored transposed into C. The
 * scales come one block ahead, and a block's wgmmas run while the next
 * block is expanded (two register sets, the loop unrolled by two). */
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
	/* the accumulator and two temporaries (tile-m/2 each), two sets of 16
	 * A fragment registers, the scales, the expansion's scratch and the
	 * addresses (about 48: ptxas spills nothing at 104 with tile-m 16) */
	p->regs_need_max = 3 * g->tm / 2 + 32 + 48;
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "consumer");
	g->r_lut = plan_smem(p, "W4A8 E4M3 byte tables", 8 * W4A8_NLUT, 16, 1);
	if (g->out == DT_E4M3) /* each consumer warp's token amax (emit_store_fp8) */
		g->r_amax = plan_smem(p, "token amax exchange", 4 * g->consumers * g->tm * 4, 16, 1);
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
	Reg row0;        /* its first fragment row: 64w + 16(warp%4) + lane/4 */
	Reg gate;        /* swiglu: the gate/up pair its rows row0, row0+8 hold, 32w + 8(warp%4) + lane/4 */
	Reg fp4[2];      /* smem offset in a B stage of the K bytes of its fragment rows row0, row0+8 */
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

/* FP4 bytes from a row's first to its registers 2 and 3 (K 16 on, wgmma_afrag8) */
static int
hi_half_bytes(void)
{
	int row, k;

	wgmma_afrag8(0, 2, 0, &row, &k);
	return k / 2;
}

static void
emit_thread_setup(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg wgc, W4a8Thread *th)
{
	Reg t = reg_new(e, RC_B32), u = reg_new(e, RC_B32), key = reg_new(e, RC_B32);
	Reg w = reg_new(e, RC_B64), col = reg_new(e, RC_B32), last = reg_new(e, RC_B32);
	int row, k;

	emit_block(e, "sm90.w4a8_thread");
	th->row0 = reg_new(e, RC_B32);
	sm90_acc_row0(e, th->row0, wgc, r->warp, r->lane, t);
	/* which tile rows the fragment rows hold: rows row0 and row0 + 8, or
	 * with swiglu gate row g and up row tile-n/2 + g (B's gate box, then
	 * its up box: gen/gemm.c's producer), g = row0/16·8 + row0%8, so that
	 * one thread's accumulators hold both of each of its outputs (A comes
	 * from registers: any weight row can be any fragment row) */
	Reg trow = th->row0;
	int hrow = 8;
	if (g->swiglu) {
		th->gate = trow = reg_new(e, RC_B32);
		hrow = g->tn / 2;
		emitf(e, "\tshr.u32 %s, %s, 4;\n\tand.b32 %s, %s, 7;\n\tmad.lo.u32 %s, %s, 8, %s;\n", trow.s,
		      th->row0.s, u.s, th->row0.s, trow.s, trow.s, u.s);
	}
	/* the 8-bit A fragment (docs/hardware.md, "wgmma A fragment"): register
	 * i byte 0 holds K 4(lane%4) + 16(i/2) of row row0 + 8(i%2): FP4 bytes
	 * 2(lane%4) and 8 + 2(lane%4) of the row's 16 per 32-K step (the lane's
	 * step from wgmma_afrag8 of thread 1, a power of two) */
	wgmma_afrag8(1, 0, 0, &row, &k);
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, %d;\n", u.s, r->lane.s, u.s, u.s, log2_ceil(k / 2));
	/* 64B swizzle (docs/hardware.md, "TMA swizzle"): the row's address
	 * bits swizzle_mask move down by 3 onto the 16-byte chunk index; a B
	 * stage is a whole number of swizzle periods, the thread's two rows
	 * (8 or tile-n/2 apart) share the bits */
	emitf(e, "\tshl.b32 %s, %s, %d;\n", t.s, trow.s, 6);
	emitf(e, "\tand.b32 %s, %s, 0x%x;\n\tshr.u32 %s, %s, 3;\n", key.s, t.s, swizzle_mask(SWZ_64B), key.s,
	      key.s);
	for (int h = 0; h < 2; h++) {
		th->fp4[h] = reg_new(e, RC_B32);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tadd.u32 %s, %s, %s;\n", th->fp4[h].s, t.s,
		      layout_offset(&g->lb, hrow * h, 0), th->fp4[h].s, th->fp4[h].s, u.s);
	}
	for (int c = 0; c < 4; c++) {
		th->xo[c] = reg_new(e, RC_B32);
		emitf(e, "\txor.b32 %s, %s, %d;\n", th->xo[c].s, key.s, 16 * c);
	}
	/* SB rows of this expert (nb - n0 + n), n clamped to N-1: rows past N
	 * are never stored; with swiglu n0 is C's column, the rows n0 + g and
	 * N/2 + n0 + g */
	emitf(e, "\tsub.u32 %s, %s, 1;\n\tshr.u32 %s, %s, 5;\n", last.s, r->N.s, u.s, r->K.s);
	for (int h = 0; h < 2; h++) {
		th->psb[h] = reg_new(e, RC_B64);
		emitf(e, "\tadd.u32 %s, %s, %s;\n", t.s, r->n0.s, trow.s);
		if (!g->swiglu)
			emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, t.s, 8 * h);
		else if (h)
			emitf(e, "\tshr.u32 %s, %s, 1;\n\tadd.u32 %s, %s, %s;\n", col.s, r->N.s, t.s, t.s, col.s);
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

/* The accumulator register of the same token as register i, 8 fragment
 * rows down (wgmma_acc_reg; n of them): with swiglu, the up value of gate
 * value i. */
static int
acc_below(int i, int n)
{
	int drow, dcol, r, c;

	wgmma_acc_reg(i, &drow, &dcol);
	for (int j = 0; j < n; j++) {
		wgmma_acc_reg(j, &r, &c);
		if (c == dcol && r == drow + 8)
			return j;
	}
	kg_bug("w4a8 store: no accumulator 8 rows below register %d", i);
	return -1;
}

/* C[token][weight row] from the accumulator D^T: tokens m0 + col inside
 * the expert's rows [mlo, mhi), weight rows n0 + row < N; with swiglu
 * C[token][n0 + g] = silu(min(gate, L))·clamp(up, -L, L) of the thread's
 * gate and up rows (emit_thread_setup) for n0 + g < N/2, C rows of N/2
 * (docs/ABI.md, "SwiGLU epilogue"). */
static void
emit_store(Emit *e, const GemmCfg *g, const GemmRegs *r, const W4a8Thread *th, const Reg *acc)
{
	Reg col = reg_new(e, RC_B32), n = reg_new(e, RC_B32), m = reg_new(e, RC_B32);
	Reg pn = reg_new(e, RC_PRED), pm = reg_new(e, RC_PRED), p = reg_new(e, RC_PRED);
	Reg a = reg_new(e, RC_B64), w = reg_new(e, RC_B64), h16 = reg_new(e, RC_B16);
	Reg width = r->N, lim = {0}, nlim = {0}, t = {0};
	int esz = g->esz_out;

	emit_block(e, "sm90.w4a8_store");
	if (g->swiglu) {
		width = reg_new(e, RC_B32);
		lim = reg_new(e, RC_F32);
		nlim = reg_new(e, RC_F32);
		t = reg_new(e, RC_F32);
		emitf(e, "\tshr.u32 %s, %s, 1;\n", width.s, r->N.s);
		emitf(e, "\tld.param.f32 %s, [p_swiglu_limit];\n\tneg.f32 %s, %s;\n", lim.s, nlim.s, lim.s);
	}
	sm90_acc_col0(e, col, r->lane);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", col.s, col.s, r->m0.s);
	for (int i = 0; i < g->tm / 2; i++) {
		int drow, dcol;
		wgmma_acc_reg(i, &drow, &dcol);
		if (g->swiglu && drow)
			continue; /* an up value, taken with its gate */
		if (g->swiglu) {
			op_swiglu(e, acc[i], acc[i], acc[acc_below(i, g->tm / 2)], lim, nlim, t);
			emitf(e, "\tadd.u32 %s, %s, %s;\n", n.s, r->n0.s, th->gate.s);
		} else {
			emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %d;\n", n.s, r->n0.s, th->row0.s, n.s, n.s,
			      drow);
		}
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", pn.s, n.s, width.s);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", m.s, col.s, dcol, pm.s, m.s, r->mhi.s);
		if (g->moe)
			emitf(e, "\tsetp.ge.and.u32 %s, %s, %s, %s;\n", pm.s, m.s, r->mlo.s, pm.s);
		emitf(e, "\tand.pred %s, %s, %s;\n", p.s, pm.s, pn.s);
		/* element m*width + n in 64 bits */
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", a.s, m.s,
		      width.s, w.s, n.s, a.s, a.s, w.s);
		emitf(e, "\tmad.lo.u64 %s, %s, %d, %s;\n", a.s, a.s, esz, r->c.s);
		if (g->out == DT_BF16) {
			emitf(e, "\tcvt.rn.bf16.f32 %s, %s;\n", h16.s, acc[i].s);
			emitf(e, "\t@%s st.global.b16 [%s], %s;\n", p.s, a.s, h16.s);
		} else {
			emitf(e, "\t@%s st.global.f32 [%s], %s;\n", p.s, a.s, acc[i].s);
		}
	}
}

/* The SwiGLU output as FP8 (--out-dtype e4m3, tile-n 256; docs/ABI.md,
 * "SwiGLU epilogue"): the CTA's 128 columns of C, n0.., are one scale
 * block. A token's amax over them: each thread's gate value, the warp's
 * eight gate rows (shfl.bfly 4, 8, 16: the lanes of one lane%4), then
 * every consumer warp's through smem ([warp][token] words, a named barrier
 * of the consumers); s = amax/448 (1 for an all-zero token) goes to
 * CS[n0/128][token] (warp 0 of warpgroup 0 writes it) and C gets the E4M3
 * of each value / s (satfinite: none exceeds 448), as the FP8 split
 * epilogue of gen/sm90/gemm.c does. */
static void
emit_store_fp8(Emit *e, const GemmCfg *g, const GemmRegs *r, const W4a8Thread *th, const Reg *acc, Reg wgc)
{
	Reg lim = reg_new(e, RC_F32), nlim = reg_new(e, RC_F32), t = reg_new(e, RC_F32), x = reg_new(e, RC_F32);
	Reg zero = reg_new(e, RC_F32), col = reg_new(e, RC_B32), wc = reg_new(e, RC_B32), a = reg_new(e, RC_B32);
	Reg m = reg_new(e, RC_B32), n = reg_new(e, RC_B32), half = reg_new(e, RC_B32), b = reg_new(e, RC_B32);
	Reg q0 = reg_new(e, RC_PRED), pm = reg_new(e, RC_PRED), pn = reg_new(e, RC_PRED), p = reg_new(e, RC_PRED);
	Reg cs = reg_new(e, RC_B64), w = reg_new(e, RC_B64), ad = reg_new(e, RC_B64), h16 = reg_new(e, RC_B16);
	Reg ex = op_plan_smem(e, &g->plan, r->base, g->r_amax), am[4], sc[4];
	int nacc = g->tm / 2, warps = 4 * g->consumers;

	emit_block(e, "sm90.w4a8_store_fp8");
	emitf(e, "\tld.param.f32 %s, [p_swiglu_limit];\n\tneg.f32 %s, %s;\n", lim.s, nlim.s, lim.s);
	op_param_global(e, cs, "CS");
	emitf(e, "\tshr.u32 %s, %s, 1;\n\tmov.f32 %s, 0f00000000;\n", half.s, r->N.s, zero.s);
	sm90_acc_col0(e, col, r->lane);
	/* the consumer warp (0..warps-1), and the lanes that hold gate row 0 of it */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tmad.lo.u32 %s, %s, 4, %s;\n", wc.s, r->warp.s, wc.s, wgc.s, wc.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, 4;\n", q0.s, r->lane.s);
	for (int i = 0; i < nacc; i++) {
		int drow, dcol, j = tok_of_acc(i);
		wgmma_acc_reg(i, &drow, &dcol);
		if (drow)
			continue;
		am[j] = reg_new(e, RC_F32);
		sc[j] = reg_new(e, RC_F32);
		op_swiglu(e, acc[i], acc[i], acc[acc_below(i, nacc)], lim, nlim, t);
		emitf(e, "\tabs.f32 %s, %s;\n", am[j].s, acc[i].s);
		for (int d = 4; d < 32; d *= 2)
			emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n\tmax.f32 %s, %s, %s;\n", x.s,
			      am[j].s, d, am[j].s, am[j].s, x.s);
		/* word [wc][col + dcol] */
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %d;\n", a.s, wc.s, g->tm, col.s, a.s, a.s,
		      dcol);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.f32 [%s], %s;\n", a.s, a.s, ex.s, q0.s, a.s,
		      am[j].s);
	}
	op_bar_sync_why(e, 1, 128 * g->consumers, "every consumer warp's token amax written");
	for (int i = 0; i < nacc; i++) {
		int drow, dcol, j = tok_of_acc(i);
		wgmma_acc_reg(i, &drow, &dcol);
		if (drow)
			continue;
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n", a.s, col.s, dcol, a.s, a.s, ex.s);
		for (int v = 0; v < warps; v++)
			emitf(e, "\tld.shared.f32 %s, [%s+%d];\n\tmax.f32 %s, %s, %s;\n", x.s, a.s, 4 * v * g->tm, am[j].s,
			      am[j].s, x.s);
		op_e4m3_scale(e, sc[j], am[j], p);
		/* the token's row m0 + col + dcol, and whether this expert owns it */
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %d;\n", m.s, col.s, r->m0.s, m.s, m.s, dcol);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tsetp.ge.and.u32 %s, %s, %s, %s;\n", pm.s, m.s, r->mhi.s, pm.s,
		      m.s, r->mlo.s, pm.s);
		/* CS[n0/128][m]: warp 0 of the consumers, lanes 0-3 (every token once) */
		emitf(e, "\tshr.u32 %s, %s, 7;\n\tmad.lo.u32 %s, %s, %s, %s;\n", b.s, r->n0.s, b.s, b.s, r->rows.s,
		      m.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", w.s, b.s, w.s, w.s, cs.s);
		emitf(e, "\tsetp.eq.and.u32 %s, %s, 0, %s;\n\tand.pred %s, %s, %s;\n", p.s, wc.s, q0.s, p.s, p.s, pm.s);
		emitf(e, "\t@%s st.global.f32 [%s], %s;\n", p.s, w.s, sc[j].s);
		/* C[m][n0 + gate], n0 + gate < N/2: one E4M3 byte (the low one of the pair) */
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tsetp.lt.and.u32 %s, %s, %s, %s;\n", n.s, r->n0.s, th->gate.s, pn.s,
		      n.s, half.s, pm.s);
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", ad.s, m.s,
		      half.s, w.s, n.s, ad.s, ad.s, w.s);
		emitf(e, "\tadd.u64 %s, %s, %s;\n", ad.s, ad.s, r->c.s);
		emitf(e, "\tdiv.rn.f32 %s, %s, %s;\n", acc[i].s, acc[i].s, sc[j].s);
		emitf(e, "\tcvt.rn.satfinite.e4m3x2.f32 %s, %s, %s;\n\tcvt.u32.u16 %s, %s;\n", h16.s, zero.s,
		      acc[i].s, b.s, h16.s);
		emitf(e, "\t@%s st.global.u8 [%s], %s;\n", pn.s, ad.s, b.s);
	}
}

/* The consumer's registers: two of each per-block set (par = kt % 2), so
 * that block kt's wgmmas run while block kt+1 is expanded. */
typedef struct W4a8Cons {
	Reg acc[8], tmp[2][8], afr[2][16];
	Reg f[2][2][4];          /* [par][row][token]: 2^(e_ref-127) · SA, the promotion factors */
	Reg ew[2], sa[4];        /* this block's exponent words and SA (loaded one block ahead) */
	Reg nxt[2], nsa[4];     /* the next block's */
	Reg emax[2], base[2], sc[2], brow[2]; /* brow: this stage's FP4 bytes of the thread's rows */
	Reg stage, phase, kt, prev, full, p, pn, lane0, as, bs, lo, bd, bhr, ec, idx, t0, t1, x;
	Reg h0, h1, addr, st, st2, sp;
	Reg full0, empty0, a0, b0, lut;
	uint32_t blo;
	int nacc;
	W4a8Thread th;
	W4a8Regs wr;
} W4a8Cons;

/* The next block's scales into nxt/nsa, if there is one (pn). */
static void
emit_scale_prefetch(Emit *e, W4a8Cons *k)
{
	for (int h = 0; h < 2; h++)
		emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n\tadd.u64 %s, %s, 4;\n", k->pn.s, k->nxt[h].s,
		      k->th.psb[h].s, k->th.psb[h].s, k->th.psb[h].s);
	for (int j = 0; j < k->th.ntok; j++)
		emitf(e, "\t@%s ld.global.nc.f32 %s, [%s];\n\tadd.u64 %s, %s, %s;\n", k->pn.s, k->nsa[j].s,
		      k->th.psa[j].s, k->th.psa[j].s, k->th.psa[j].s, k->th.sastride.s);
}

/* One K block with parity par: fold, expand into afr[par], issue the four
 * wgmmas into tmp[par]; then finish block kt-1 (tmp[1-par]): wait for it,
 * release its stage, promote it. */
static int
emit_iteration(Emit *e, const GemmCfg *g, const GemmRegs *r, W4a8Cons *k, int par, const char *exit_to,
               KgErr *err)
{
	char guard[16];

	emit_block(e, "sm90.w4a8_block");
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", k->full.s, k->stage.s, k->full0.s);
	if (op_mbar_wait(e, err, k->full, k->phase.s) < 0)
		return -1;
	/* this block's scales are the prefetched ones; fetch the next */
	for (int h = 0; h < 2; h++)
		emitf(e, "\tmov.b32 %s, %s;\n", k->ew[h].s, k->nxt[h].s);
	for (int j = 0; j < k->th.ntok; j++)
		emitf(e, "\tmov.f32 %s, %s;\n", k->sa[j].s, k->nsa[j].s);
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.lt.u32 %s, %s, %s;\n", k->idx.s, k->kt.s, k->pn.s, k->idx.s,
	      r->nk.s);
	emit_scale_prefetch(e, k);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", k->as.s, k->stage.s, g->la.bytes, k->a0.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", k->bs.s, k->stage.s, g->lb.bytes, k->b0.s);
	emit_block(e, "sm90.w4a8_fold");
	for (int h = 0; h < 2; h++) {
		/* emax of the block's four exponents, the table base, the scale */
		w4a8_emit_emax(e, k->emax[h], k->ew[h], k->ec);
		w4a8_emit_table_base(e, k->base[h], k->emax[h], k->lut);
		w4a8_emit_scale(e, k->st, k->emax[h], k->idx, k->st2, k->sp);
		emitf(e, "\tmov.b32 %s, %s;\n", k->sc[h].s, k->st.s);
		for (int j = 0; j < k->th.ntok; j++)
			emitf(e, "\tmul.f32 %s, %s, %s;\n", k->f[par][h][j].s, k->sc[h].s, k->sa[j].s);
	}
	emit_block(e, "sm90.w4a8_expand");
	for (int h = 0; h < 2; h++)
		emitf(e, "\tadd.u32 %s, %s, %s;\n", k->brow[h].s, k->bs.s, k->th.fp4[h].s);
	for (int c = 0; c < 4; c++)
		for (int h = 0; h < 2; h++) {
			/* the group's table, then the row's 2 + 2 bytes of step c */
			emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n", k->ec.s, k->ew[h].s, 8 * c);
			w4a8_emit_table_addr(e, k->addr, k->ec, k->base[h], k->lut);
			emitf(e, "\tld.shared.v2.b32 {%s, %s}, [%s];\n", k->t0.s, k->t1.s, k->addr.s);
			emitf(e, "\tadd.u32 %s, %s, %s;\n", k->addr.s, k->brow[h].s, k->th.xo[c].s);
			emitf(e, "\tld.shared.b16 %s, [%s];\n\tld.shared.b16 %s, [%s+%d];\n", k->h0.s, k->addr.s,
			      k->h1.s, k->addr.s, hi_half_bytes());
			emitf(e, "\tmov.b32 %s, {%s, %s};\n", k->x.s, k->h0.s, k->h1.s);
			/* registers h (K 4(lane%4)..) and h + 2 (16 + 4(lane%4)..) of step c */
			w4a8_emit_expand(e, &k->wr, k->afr[par][4 * c + h], k->afr[par][4 * c + h + 2], k->x, k->t0,
			                 k->t1);
		}
	emit_block(e, "sm90.w4a8_mma");
	emitf(e, "\tshr.u32 %s, %s, 4;\n", k->as.s, k->as.s);
	sm90_wgmma_fence(e);
	for (int c = 0; c < 4; c++) {
		uint32_t db = layout_offset(&g->la, 0, 32 * c) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", k->lo.s, k->as.s, k->blo + db,
		      k->bd.s, k->lo.s, k->bhr.s);
		/* the block's first MMA overwrites the temporary */
		sm90_wgmma(e, g->tm, DT_E4M3, k->tmp[par], NULL, &k->afr[par][4 * c], k->bd, c > 0, 0);
	}
	sm90_wgmma_commit(e);
	/* block kt-1: done once at most this block's group is pending; its
	 * stage goes back to the producer (none before block 0: tmp[1] and
	 * its factors start at zero, so its promotion adds nothing) */
	sm90_wgmma_wait(e, 1);
	emitf(e, "\tsetp.ne.and.u32 %s, %s, 0, %s;\n", k->sp.s, k->kt.s, k->lane0.s);
	snprintf(guard, sizeof guard, "@%s ", k->sp.s);
	op_mbar_arrive(e, k->prev, guard);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", k->prev.s, k->stage.s, k->empty0.s,
	      g->plan.bars[g->b_empty].name);
	emit_block(e, "sm90.w4a8_promote");
	for (int i = 0; i < k->nacc; i++)
		emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", k->acc[i].s, k->tmp[1 - par][i].s,
		      k->f[1 - par][row_of(i)][tok_of_acc(i)].s, k->acc[i].s);
	op_ring_advance(e, k->stage, k->phase, g->stages, k->sp);
	emitf(e, "\tadd.u32 %s, %s, 1;\n", k->kt.s, k->kt.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", k->p.s, k->kt.s, r->nk.s, k->p.s, exit_to);
	return 0;
}

/* After the loop: the last block finishes (one wait for both parities,
 * so a shape of either parity exercises it), then its promotion: tmp[0]
 * when the last block kt = nk-1 is even (kt, now nk, odd), else tmp[1]. */
static void
emit_last(Emit *e, W4a8Cons *k, const char *store)
{
	char guard[16], odd[48];

	emit_block(e, "sm90.w4a8_last");
	label_new(e, odd, sizeof odd, "w4a8_last_odd");
	sm90_wgmma_wait(e, 0);
	snprintf(guard, sizeof guard, "@%s ", k->lane0.s);
	op_mbar_arrive(e, k->prev, guard);
	emitf(e, "\tand.b32 %s, %s, 1;\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s bra %s;\n", k->idx.s, k->kt.s, k->p.s,
	      k->idx.s, k->p.s, odd);
	for (int par = 0; par < 2; par++) {
		if (par)
			emit_label(e, odd);
		for (int i = 0; i < k->nacc; i++)
			emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", k->acc[i].s, k->tmp[par][i].s,
			      k->f[par][row_of(i)][tok_of_acc(i)].s, k->acc[i].s);
		if (!par)
			emitf(e, "\tbra %s;\n", store);
	}
}

int
sm90_w4a8_consumer(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	W4a8Cons k;
	Reg wgc = reg_new(e, RC_B32);
	uint32_t bhi;
	char loop[48], odd[48], last[48], store[48];

	/* the tokens' tile is wgmma's B: K-major, 128B swizzle, tile-m rows */
	if (gemm_desc_words(g, &g->la, &k.blo, &bhi, err) < 0)
		return -1;
	k.nacc = g->tm / 2;
	reg_array(e, RC_F32, k.acc, k.nacc);
	for (int par = 0; par < 2; par++) {
		reg_array(e, RC_F32, k.tmp[par], k.nacc);
		reg_array(e, RC_B32, k.afr[par], 16);
	}
	Reg *regs[] = {&k.stage, &k.phase, &k.kt, &k.prev, &k.full, &k.as, &k.bs, &k.lo, &k.bhr,
	               &k.ec, &k.idx, &k.t0, &k.t1, &k.x, &k.addr, &k.st, &k.st2};
	for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
		*regs[i] = reg_new(e, RC_B32);
	k.bd = reg_new(e, RC_B64);
	k.p = reg_new(e, RC_PRED);
	k.pn = reg_new(e, RC_PRED);
	k.sp = reg_new(e, RC_PRED);
	k.lane0 = reg_new(e, RC_PRED);
	k.h0 = reg_new(e, RC_B16);
	k.h1 = reg_new(e, RC_B16);
	emit_block(e, "sm90.w4a8_consumer");
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tsub.u32 %s, %s, 1;\n", wgc.s, r->tid.s, wgc.s, wgc.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", k.lane0.s, r->lane.s);
	k.full0 = op_plan_bar(e, &g->plan, r->base, g->b_full);
	k.empty0 = op_plan_bar(e, &g->plan, r->base, g->b_empty);
	k.a0 = op_plan_smem(e, &g->plan, r->base, g->r_a);
	k.b0 = op_plan_smem(e, &g->plan, r->base, g->r_b);
	k.lut = op_plan_smem(e, &g->plan, r->base, g->r_lut);
	op_desc_hi(e, k.bhr, g->t->desc, (uint64_t)bhi << 32 | k.blo, "B (tokens)");
	for (int i = 0; i < k.nacc; i++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n\tmov.f32 %s, 0f00000000;\n", k.acc[i].s, k.tmp[1][i].s);
	for (int h = 0; h < 2; h++) {
		k.ew[h] = reg_new(e, RC_B32);
		k.nxt[h] = reg_new(e, RC_B32);
		k.emax[h] = reg_new(e, RC_B32);
		k.base[h] = reg_new(e, RC_B32);
		k.brow[h] = reg_new(e, RC_B32);
		k.sc[h] = reg_new(e, RC_F32);
		for (int par = 0; par < 2; par++)
			for (int j = 0; j < g->tm / 4; j++)
				k.f[par][h][j] = reg_new(e, RC_F32);
		for (int j = 0; j < g->tm / 4; j++)
			emitf(e, "\tmov.f32 %s, 0f00000000;\n", k.f[1][h][j].s);
	}
	for (int j = 0; j < g->tm / 4; j++) {
		k.sa[j] = reg_new(e, RC_F32);
		k.nsa[j] = reg_new(e, RC_F32);
	}
	w4a8_emit_init(e, &k.wr);
	emit_thread_setup(e, g, r, wgc, &k.th);
	emit_block(e, "sm90.w4a8_loop");
	label_new(e, loop, sizeof loop, "w4a8_even");
	label_new(e, odd, sizeof odd, "w4a8_odd");
	label_new(e, last, sizeof last, "w4a8_last");
	label_new(e, store, sizeof store, "w4a8_store");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", k.stage.s, k.phase.s, k.kt.s);
	/* no K block: nothing to wait for, C gets zeros */
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n", k.pn.s, r->nk.s);
	emit_scale_prefetch(e, &k);
	emitf(e, "\t@!%s bra %s;\n", k.pn.s, store);
	emit_label(e, loop);
	if (emit_iteration(e, g, r, &k, 0, last, err) < 0)
		return -1;
	emit_label(e, odd);
	if (emit_iteration(e, g, r, &k, 1, last, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", loop);
	emit_label(e, last);
	emit_last(e, &k, store);
	emit_label(e, store);
	if (g->out == DT_E4M3)
		emit_store_fp8(e, g, r, &k.th, k.acc, wgc);
	else
		emit_store(e, g, r, &k.th, k.acc);
	return 0;
}
