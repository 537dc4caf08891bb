/* GEMM on sm_90a: warpgroup 0 produces (one elected thread issues TMA),
 * warpgroups 1..C each own 64 rows of the tile and issue wgmma SS with the
 * f32 accumulators in registers, then store their fragment to C. Block
 * scaled (--scale block128): each stage's MMAs go into a temporary
 * accumulator that is scaled and added into the f32 one. */
#include <stdio.h>
#include <string.h>

#include "../gemm.h"
#include "../ops.h"
#include "gemm_w4a8.h"
#include "mma.h"

enum { PRODUCER_REGS = 40 }; /* TMA loop: addresses, coordinates, parity */

static int
sm90_plan(GemmCfg *g, KgErr *err)
{
	Plan *p = &g->plan;
	char does[160]; /* plan_role keeps 95 characters */
	int regs;

	if (g->sfvec)
		return kg_fail(err, "--scale=mx32: per-32 UE8M0 scales are applied by tcgen05.mma "
		               "kind::mxf8f6f4; use --target sm_100a (or --scale block128 here)");
	if (g->pair)
		return kg_fail(err, "--cta-pair=1: sm_90a has no CTA-pair MMA (tcgen05.mma.cta_group::2 "
		               "is sm_100a); use --target sm_100a or --cta-pair 0");
	if (g->w4a8)
		return sm90_w4a8_plan(g, err);
	g->consumers = g->split ? 2 : g->tm / 64;
	p->threads = 128 * (1 + g->consumers);
	regs = plan_regs_split(p, 128 * g->consumers, 128, PRODUCER_REGS);
	plan_role(p, "producer", 0, 4, PRODUCER_REGS, "warp 0, one elected lane: TMA A/B boxes");
	snprintf(does, sizeof does, "64 rows each: wgmma m64n%dk%d SS%s, epilogue from registers", g->wn,
	         g->kmma, g->sblock ? ", x SA*SB per K block" : "");
	plan_role(p, "consumer", 4, 4 * g->consumers, regs, does);
	/* tn/2 f32 accumulators (twice that with the block-scaled temporary)
	 * plus addresses, descriptors and epilogue predicates (about 48
	 * measured from ptxas reports; the scales' addresses 16 more). */
	p->regs_need_max = g->wn / 2 * (g->sblock ? 2 : 1) + 48 + (g->sblock ? 16 : 0);
	if (g->split) /* each warpgroup's row amax for the other (docs/ABI.md, "SwiGLU epilogue") */
		g->r_amax = plan_smem(p, "row amax exchange", 2 * 64 * 4, 16, 1);
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "consumer");
	g->b_full = plan_barrier(p, "full", g->stages, 1, g->stage_bytes,
	                         "producer: arrive.expect_tx, then TMA complete_tx");
	/* cluster-n 2: either producer refills a stage's A in both CTAs, so
	 * both CTAs' consumers free it (docs/estimate.md, "A multicast") */
	snprintf(does, sizeof does, "lane 0 of each of the %d consumer warps%s after wgmma.wait_group",
	         4 * g->consumers, g->cn > 1 ? " of both CTAs" : "");
	g->b_empty = plan_barrier(p, "empty", g->stages, 4 * g->consumers * g->cn, 0, does);
	return 0;
}

/* Stores a consumer's accumulator fragment. Pair i, i+1 of a thread are
 * adjacent columns (docs/hardware.md, "wgmma accumulator fragment"), so they go out as
 * one 2-element store where the row exists, both columns are inside N and N is even
 * (alignment); otherwise each column alone where it is inside N. */
static void
emit_store_fragment(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg wgc, const Reg *acc, int ncols,
                    Reg N)
{
	Reg row = reg_new(e, RC_B32), col = reg_new(e, RC_B32), t = reg_new(e, RC_B32);
	Reg addr[2], prow[2], pfull = reg_new(e, RC_PRED), pone = reg_new(e, RC_PRED);
	Reg neven = reg_new(e, RC_PRED), pc2 = reg_new(e, RC_PRED), pc1 = reg_new(e, RC_PRED);
	Reg ra = reg_new(e, RC_B64), pk = reg_new(e, RC_B32), h = reg_new(e, RC_B16);
	Reg h2 = reg_new(e, RC_B16), phi = reg_new(e, RC_PRED), ptwo = reg_new(e, RC_PRED);
	int bf16 = g->out == DT_BF16, esz = g->esz_out;

	emit_block(e, "sm90.gemm_epilogue");
	/* row = m0 + 64*wgc + 16*(warp%4) + lane/4; col = n0 + 2*(lane%4) */
	sm90_acc_row0(e, row, wgc, r->warp, r->lane, t);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", row.s, row.s, r->m0.s);
	sm90_acc_col0(e, t, r->lane);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", col.s, t.s, r->n0.s);
	emitf(e, "\tand.b32 %s, %s, 1;\n\tsetp.eq.u32 %s, %s, 0;\n", t.s, N.s, neven.s, t.s);
	for (int h8 = 0; h8 < 2; h8++) {
		Reg rr = reg_new(e, RC_B32);
		addr[h8] = reg_new(e, RC_B64);
		prow[h8] = reg_new(e, RC_PRED);
		emitf(e, "\tadd.u32 %s, %s, %d;\n", rr.s, row.s, 8 * h8);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", prow[h8].s, rr.s, r->mhi.s);
		if (g->moe) /* MoE: the expert's rows only */
			emitf(e, "\tsetp.ge.and.u32 %s, %s, %s, %s;\n", prow[h8].s, rr.s, r->mlo.s, prow[h8].s);
		/* element offset row*N + col, in 64 bits: M*N may exceed 2^32 */
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n", addr[h8].s, rr.s, N.s);
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", ra.s, col.s, addr[h8].s, addr[h8].s, ra.s);
		emitf(e, "\tmad.lo.u64 %s, %s, %d, %s;\n", addr[h8].s, addr[h8].s, esz, r->c.s);
	}
	for (int q = 0; q < ncols / 8; q++) {
		/* columns c = col + 8q and c + 1: a pair store, or each alone */
		emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, col.s, 8 * q + 1);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", phi.s, t.s, N.s);
		emitf(e, "\tand.pred %s, %s, %s;\n", pc2.s, phi.s, neven.s);
		emitf(e, "\txor.pred %s, %s, %s;\n", phi.s, phi.s, pc2.s);
		emitf(e, "\tsub.u32 %s, %s, 1;\n", t.s, t.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", pc1.s, t.s, N.s);
		emitf(e, "\txor.pred %s, %s, %s;\n", pc1.s, pc1.s, pc2.s);
		for (int h8 = 0; h8 < 2; h8++) {
			int i = 4 * q + 2 * h8, off = 8 * q * esz;
			emitf(e, "\tand.pred %s, %s, %s;\n", pfull.s, prow[h8].s, pc2.s);
			emitf(e, "\tand.pred %s, %s, %s;\n", pone.s, prow[h8].s, pc1.s);
			emitf(e, "\tand.pred %s, %s, %s;\n", ptwo.s, prow[h8].s, phi.s);
			if (bf16) {
				/* cvt.rn.bf16x2.f32 d, a, b puts a in the upper half */
				emitf(e, "\tcvt.rn.bf16x2.f32 %s, %s, %s;\n", pk.s, acc[i + 1].s, acc[i].s);
				emitf(e, "\t@%s st.global.b32 [%s+%d], %s;\n", pfull.s, addr[h8].s, off, pk.s);
				emitf(e, "\tmov.b32 {%s, %s}, %s;\n", h.s, h2.s, pk.s);
				emitf(e, "\t@%s st.global.b16 [%s+%d], %s;\n", pone.s, addr[h8].s, off, h.s);
				emitf(e, "\t@%s st.global.b16 [%s+%d], %s;\n", ptwo.s, addr[h8].s, off + esz, h2.s);
			} else {
				emitf(e, "\t@%s st.global.v2.f32 [%s+%d], {%s, %s};\n", pfull.s, addr[h8].s, off,
				      acc[i].s, acc[i + 1].s);
				emitf(e, "\t@%s st.global.f32 [%s+%d], %s;\n", pone.s, addr[h8].s, off, acc[i].s);
				emitf(e, "\t@%s st.global.f32 [%s+%d], %s;\n", ptwo.s, addr[h8].s, off + esz,
				      acc[i + 1].s);
			}
		}
	}
}

/* Block scaling (docs/ABI.md, "gemm"): the scales one consumer thread
 * applies. Its accumulator rows are g and g+8 (row_of_acc); the tile's
 * columns lie in one 128-column block of B (tile-n divides 128). */
typedef struct Scales {
	Reg tmp[128];     /* the K block's product before scaling */
	Reg pa[2];        /* &SA[kb][row g], &SA[kb][row g+8] (rows clamped to M-1) */
	Reg pb;           /* &SB[n0/128][kb] */
	Reg stride;       /* bytes from SA[kb] to SA[kb+1]: 4*M */
	Reg a[2], b;      /* this K block's scales */
	Reg pbu, bu;      /* swiglu: the up half's SB, &SB[(N/2 + n0)/128][kb] and its value */
	Reg abu[2];       /* swiglu: a[row] * bu */
	Reg na[2], nb, nbu; /* the next K block's scales as loaded (UE8M0: the byte) */
	Reg more;         /* whether there is a next K block */
	Reg e8, e8p;      /* UE8M0 SB: its byte, and a predicate */
	Reg ab[2];        /* a[row] * b */
} Scales;

static void emit_scale_fetch(Emit *e, const GemmCfg *g, Scales *sc);

static void
emit_scale_addrs(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg wgc, Scales *sc)
{
	Reg row = reg_new(e, RC_B32), t = reg_new(e, RC_B32), last = reg_new(e, RC_B32);
	Reg w = reg_new(e, RC_B64);

	emit_block(e, "sm90.gemm_scale_addrs");
	reg_array(e, RC_F32, sc->tmp, g->wn / 2);
	sc->stride = reg_new(e, RC_B64);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n", sc->stride.s, r->rows.s);
	sm90_acc_row0(e, row, wgc, r->warp, r->lane, t);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tsub.u32 %s, %s, 1;\n", row.s, row.s, r->m0.s, last.s, r->rows.s);
	for (int h = 0; h < 2; h++) {
		/* rows past M are never stored; clamped they read a real scale */
		sc->pa[h] = reg_new(e, RC_B64);
		sc->a[h] = reg_new(e, RC_F32);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tmin.u32 %s, %s, %s;\n", t.s, row.s, 8 * h, t.s, t.s, last.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", w.s, t.s, sc->pa[h].s, r->sa.s, w.s);
	}
	/* SB row n0 / 128 (n0 < N: the tile exists, but for cluster-n 2; MoE: of its expert), K block 0 */
	sc->pb = reg_new(e, RC_B64);
	sc->b = reg_new(e, RC_F32);
	sc->e8 = reg_new(e, RC_B32);
	sc->e8p = reg_new(e, RC_PRED);
	if (g->moe) {
		emitf(e, "\tmov.u32 %s, %s;\n", t.s, r->sbrow.s);
	} else if (g->cn > 1) {
		/* a cluster's second CTA may start past N (its columns are not
		 * stored): clamped, it reads a real scale */
		emitf(e, "\tsub.u32 %s, %s, 1;\n\tmin.u32 %s, %s, %s;\n", t.s, r->N.s, t.s, t.s, r->n0.s);
		emitf(e, "\tdiv.u32 %s, %s, %d;\n", t.s, t.s, g->sblock);
	} else {
		emitf(e, "\tdiv.u32 %s, %s, %d;\n", t.s, r->n0.s, g->sblock);
	}
	emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", t.s, t.s,
	      r->nk.s, w.s, t.s, dtype_bits(g->sbtype) / 8, sc->pb.s, r->sb.s, w.s);
	for (int h = 0; h < 2; h++)
		sc->ab[h] = reg_new(e, RC_F32);
	if (g->swiglu) {
		/* the up half's row block: (N/2)/128 past the gate's (N/2 is whole blocks: nmult) */
		sc->pbu = reg_new(e, RC_B64);
		sc->bu = reg_new(e, RC_F32);
		for (int h = 0; h < 2; h++)
			sc->abu[h] = reg_new(e, RC_F32);
		emitf(e, "\tshr.u32 %s, %s, 8;\n\tmul.lo.u32 %s, %s, %s;\n", t.s, r->N.s, t.s, t.s, r->nk.s);
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", w.s, t.s, dtype_bits(g->sbtype) / 8,
		      sc->pbu.s, sc->pb.s, w.s);
	}
	/* K block 0's scales, ahead of the loop (emit_scale_loads) */
	for (int h = 0; h < 2; h++)
		sc->na[h] = reg_new(e, RC_F32);
	sc->nb = reg_new(e, RC_B32);
	sc->nbu = reg_new(e, RC_B32);
	sc->more = reg_new(e, RC_PRED);
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n", sc->more.s, r->nk.s);
	emit_scale_fetch(e, g, sc);
}

/* One SB value as loaded into raw from *pb (guarded), which steps to the
 * next K block. */
static void
emit_sb_fetch(Emit *e, const GemmCfg *g, Reg raw, Reg pb, const char *guard)
{
	int ue8 = g->sbtype == DT_UE8M0;
	emitf(e, "\t%sld.global.nc.%s %s, [%s];\n\tadd.u64 %s, %s, %d;\n", guard, ue8 ? "u8" : "b32", raw.s, pb.s,
	      pb.s, pb.s, ue8 ? 1 : 4);
}

/* The SB value b of a loaded raw one. */
static void
emit_sb_decode(Emit *e, const GemmCfg *g, Scales *sc, Reg b, Reg raw)
{
	if (g->sbtype != DT_UE8M0) {
		emitf(e, "\tmov.b32 %s, %s;\n", b.s, raw.s);
		return;
	}
	/* 2^(e-127) as f32 bits: e << 23 for e = 1..254; e = 0 is the
	 * subnormal 2^-127, 255 NaN (docs/hardware.md, "Number formats") */
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", sc->e8p.s, raw.s);
	emitf(e, "\tshl.b32 %s, %s, 23;\n\t@%s mov.b32 %s, 0x00400000;\n", sc->e8.s, raw.s, sc->e8p.s, sc->e8.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0x7f800000;\n\t@%s mov.b32 %s, 0x7fc00000;\n", sc->e8p.s, sc->e8.s,
	      sc->e8p.s, sc->e8.s);
	emitf(e, "\tmov.b32 %s, %s;\n", b.s, sc->e8.s);
}

/* A K block's scales into na/nb/nbu, guarded by `more`; the pointers step
 * to the block after it. */
static void
emit_scale_fetch(Emit *e, const GemmCfg *g, Scales *sc)
{
	char guard[32];
	snprintf(guard, sizeof guard, "@%s ", sc->more.s);
	for (int h = 0; h < 2; h++)
		emitf(e, "\t%sld.global.nc.f32 %s, [%s];\n\tadd.u64 %s, %s, %s;\n", guard, sc->na[h].s, sc->pa[h].s,
		      sc->pa[h].s, sc->pa[h].s, sc->stride.s);
	emit_sb_fetch(e, g, sc->nb, sc->pb, guard);
	if (g->swiglu)
		emit_sb_fetch(e, g, sc->nbu, sc->pbu, guard);
}

/* K block kt's scales, loaded one block ahead: their loads were issued
 * before block kt-1's MMAs, which hide the latency of global memory (ncu
 * on the H100: loaded just before their own block's MMAs, they were the
 * largest stall); then block kt+1's loads, if it exists. */
static void
emit_scale_loads(Emit *e, const GemmCfg *g, const GemmRegs *r, Scales *sc, Reg kt)
{
	emit_block(e, "sm90.gemm_scale_loads");
	for (int h = 0; h < 2; h++)
		emitf(e, "\tmov.f32 %s, %s;\n", sc->a[h].s, sc->na[h].s);
	emit_sb_decode(e, g, sc, sc->b, sc->nb);
	if (g->swiglu)
		emit_sb_decode(e, g, sc, sc->bu, sc->nbu);
	emitf(e, "\tadd.u32 %s, %s, 1;\n", sc->e8.s, kt.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", sc->more.s, sc->e8.s, r->nk.s);
	emit_scale_fetch(e, g, sc);
}

/* Which of the thread's rows (g, g+8) accumulator register i is in
 * (docs/hardware.md, "wgmma accumulator fragment"). */
static int
row_of_acc(int i)
{
	int drow, dcol;

	wgmma_acc_reg(i, &drow, &dcol);
	return drow / 8;
}

/* Whether accumulator register i is in the tile's up half (swiglu: columns
 * tn/2..; the thread's own columns step by 8 per 4 registers). */
static int
up_half(const GemmCfg *g, int i)
{
	int drow, dcol;

	wgmma_acc_reg(i, &drow, &dcol);
	return g->swiglu && dcol >= g->wn / 2;
}

/* acc += tmp * SA[row] * SB[column block], once per K block. */
static void
emit_promote(Emit *e, const GemmCfg *g, Scales *sc, const Reg *acc)
{
	emit_block(e, "sm90.gemm_promote");
	for (int h = 0; h < 2; h++)
		emitf(e, "\tmul.f32 %s, %s, %s;\n", sc->ab[h].s, sc->a[h].s, sc->b.s);
	for (int h = 0; g->swiglu && h < 2; h++)
		emitf(e, "\tmul.f32 %s, %s, %s;\n", sc->abu[h].s, sc->a[h].s, sc->bu.s);
	for (int i = 0; i < g->wn / 2; i++)
		emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", acc[i].s, sc->tmp[i].s,
		      (up_half(g, i) ? sc->abu : sc->ab)[row_of_acc(i)].s, acc[i].s);
}

/* The SwiGLU epilogue (docs/ABI.md, "SwiGLU epilogue"): the up value of
 * the thread's gate column c is column c + tn/2, tn/4 registers on
 * (docs/hardware.md, "wgmma accumulator fragment"); the gate registers
 * take the results and go out as a tn/2-column fragment of C[.., N/2]. */
static void
emit_swiglu(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg wgc, Reg *acc)
{
	Reg lim = reg_new(e, RC_F32), nlim = reg_new(e, RC_F32), t = reg_new(e, RC_F32);
	Reg half = reg_new(e, RC_B32);

	emit_block(e, "sm90.gemm_swiglu");
	emitf(e, "\tld.param.f32 %s, [p_swiglu_limit];\n\tneg.f32 %s, %s;\n", lim.s, nlim.s, lim.s);
	for (int i = 0; i < g->tn / 4; i++)
		op_swiglu(e, acc[i], acc[i], acc[i + g->tn / 4], lim, nlim, t);
	emitf(e, "\tshr.u32 %s, %s, 1;\n", half.s, r->N.s);
	emit_store_fragment(e, g, r, wgc, acc, g->tn / 2, half);
}

/* The split SwiGLU epilogue writing FP8 (docs/ABI.md, "SwiGLU epilogue"):
 * warpgroup w holds C columns n0 + 64w .. +63 of the CTA's 64 rows, a
 * thread rows g and g+8 at 16 columns each. A row's amax over its 128
 * columns: the thread's, then its quad's (shfl.bfly 1, 2: the lanes of one
 * row), then the other warpgroup's through smem; s = amax/448 (1 for an
 * all-zero row) goes to CS[n0/128][row] (warpgroup 0 writes it) and C gets
 * the E4M3 of each value / s (satfinite: none exceeds 448). */
static void
emit_swiglu_fp8(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg wgc, Reg *acc)
{
	Reg lim = reg_new(e, RC_F32), nlim = reg_new(e, RC_F32), t = reg_new(e, RC_F32);
	Reg am[2], sc[2], x = reg_new(e, RC_F32), row = reg_new(e, RC_B32), ti = reg_new(e, RC_B32);
	Reg xs = reg_new(e, RC_B32), own = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	Reg q0 = reg_new(e, RC_PRED), prow[2], addr[2], w = reg_new(e, RC_B64), h = reg_new(e, RC_B16);
	Reg cs = reg_new(e, RC_B64), half = reg_new(e, RC_B32), col = reg_new(e, RC_B32);
	Reg ex = op_plan_smem(e, &g->plan, r->base, g->r_amax);
	int nv = g->wn / 4; /* result registers: the gate half */

	emit_block(e, "sm90.gemm_swiglu_fp8");
	emitf(e, "\tld.param.f32 %s, [p_swiglu_limit];\n\tneg.f32 %s, %s;\n", lim.s, nlim.s, lim.s);
	op_param_global(e, cs, "CS");
	emitf(e, "\tshr.u32 %s, %s, 1;\n", half.s, r->N.s);
	for (int i = 0; i < nv; i++)
		op_swiglu(e, acc[i], acc[i], acc[i + nv], lim, nlim, t);
	/* the tile row of the thread's first row: 16·(warp%4) + lane/4 */
	emitf(e, "\tmov.u32 %s, 0;\n", own.s);
	sm90_acc_row0(e, row, own, r->warp, r->lane, ti);
	emitf(e, "\tand.b32 %s, %s, 3;\n\tsetp.eq.u32 %s, %s, 0;\n", ti.s, r->lane.s, q0.s, ti.s);
	for (int k = 0; k < 2; k++) {
		am[k] = reg_new(e, RC_F32);
		sc[k] = reg_new(e, RC_F32);
		prow[k] = reg_new(e, RC_PRED);
		addr[k] = reg_new(e, RC_B64);
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", am[k].s);
	}
	for (int i = 0; i < nv; i++)
		emitf(e, "\tabs.f32 %s, %s;\n\tmax.f32 %s, %s, %s;\n", x.s, acc[i].s, am[row_of_acc(i)].s,
		      am[row_of_acc(i)].s, x.s);
	for (int k = 0; k < 2; k++)
		for (int d = 1; d < 4; d *= 2) {
			emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n", x.s, am[k].s, d);
			emitf(e, "\tmax.f32 %s, %s, %s;\n", am[k].s, am[k].s, x.s);
		}
	/* exchange: [warpgroup][tile row], one word per row from lane%4 = 0 */
	for (int k = 0; k < 2; k++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 64, %s;\n", own.s, row.s, 8 * k, xs.s, wgc.s,
		      own.s);
		emitf(e, "\tshl.b32 %s, %s, 2;\n\tadd.u32 %s, %s, %s;\n", xs.s, xs.s, xs.s, xs.s, ex.s);
		emitf(e, "\t@%s st.shared.f32 [%s], %s;\n", q0.s, xs.s, am[k].s);
	}
	op_bar_sync_why(e, 1, 256, "both consumer warpgroups: row amax written");
	for (int k = 0; k < 2; k++) {
		/* the other warpgroup's word: 64 rows away */
		emitf(e, "\tadd.u32 %s, %s, %d;\n\txor.b32 %s, %s, 1;\n\tmad.lo.u32 %s, %s, 64, %s;\n", own.s, row.s,
		      8 * k, xs.s, wgc.s, xs.s, xs.s, own.s);
		emitf(e, "\tshl.b32 %s, %s, 2;\n\tadd.u32 %s, %s, %s;\n", xs.s, xs.s, xs.s, xs.s, ex.s);
		emitf(e, "\tld.shared.f32 %s, [%s];\n\tmax.f32 %s, %s, %s;\n", x.s, xs.s, am[k].s, am[k].s, x.s);
		op_e4m3_scale(e, sc[k], am[k], p);
		/* the global row and whether this expert owns it */
		emitf(e, "\tadd.u32 %s, %s, %s;\n", own.s, own.s, r->m0.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tsetp.ge.and.u32 %s, %s, %s, %s;\n", prow[k].s, own.s,
		      r->mhi.s, prow[k].s, own.s, r->mlo.s, prow[k].s);
		/* CS[n0/128][row]: warpgroup 0, lane%4 = 0 */
		emitf(e, "\tshr.u32 %s, %s, 7;\n\tmad.lo.u32 %s, %s, %s, %s;\n", xs.s, r->n0.s, xs.s, xs.s,
		      r->rows.s, own.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", w.s, xs.s, w.s, w.s, cs.s);
		emitf(e, "\tsetp.eq.and.u32 %s, %s, 0, %s;\n\tand.pred %s, %s, %s;\n", p.s, wgc.s, q0.s, p.s, p.s,
		      prow[k].s);
		emitf(e, "\t@%s st.global.f32 [%s], %s;\n", p.s, w.s, sc[k].s);
		/* &C[row][n0 + 64·wgc + 2·(lane%4)] */
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n", addr[k].s, own.s, half.s);
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", col.s, wgc.s, g->wn / 2, r->n0.s);
		emitf(e, "\tand.b32 %s, %s, 3;\n\tmad.lo.u32 %s, %s, 2, %s;\n", xs.s, r->lane.s, col.s, xs.s, col.s);
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", w.s, col.s,
		      addr[k].s, addr[k].s, w.s, addr[k].s, addr[k].s, r->c.s);
	}
	for (int i = 0; i < nv; i += 2) {
		int k = row_of_acc(i), drow, dcol;
		wgmma_acc_reg(i, &drow, &dcol);
		emitf(e, "\tdiv.rn.f32 %s, %s, %s;\n\tdiv.rn.f32 %s, %s, %s;\n", acc[i].s, acc[i].s, sc[k].s,
		      acc[i + 1].s, acc[i + 1].s, sc[k].s);
		/* the first source goes to the upper byte: column dcol + 1 */
		emitf(e, "\tcvt.rn.satfinite.e4m3x2.f32 %s, %s, %s;\n", h.s, acc[i + 1].s, acc[i].s);
		emitf(e, "\t@%s st.global.b16 [%s+%d], %s;\n", prow[k].s, addr[k].s, dcol, h.s);
	}
}

/* cluster-n 2: frees the stage of K tile kt - back (its empty barrier at
 * bar) in this CTA and the peer, where both producers refill it. Only
 * tiles a producer still waits for: at K tile k it waits for tile k -
 * stages, so tiles from nk - stages on are never freed, and every remote
 * arrival is waited for by the peer's producer before its last load, which
 * the peer's consumers wait for: none reaches a CTA that has exited
 * (docs/estimate.md, "A multicast"). */
static void
emit_release_both(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg bar, Reg kt, int back, Reg lane0, Reg p)
{
	Reg t = reg_new(e, RC_B32), peer = reg_new(e, RC_B32);
	char guard[16];

	emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, kt.s, g->stages - back);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tand.pred %s, %s, %s;\n", p.s, t.s, r->nk.s, p.s, p.s, lane0.s);
	if (back)
		emitf(e, "\tsetp.ne.and.u32 %s, %s, 0, %s;\n", p.s, kt.s, p.s);
	snprintf(guard, sizeof guard, "@%s ", p.s);
	op_mbar_arrive(e, bar, guard);
	emitf(e, "\txor.b32 %s, %s, 1;\n\t%smapa.shared::cluster.u32 %s, %s, %s;\n", t.s, r->rank.s, guard,
	      peer.s, bar.s, t.s);
	op_mbar_arrive_peer(e, peer, guard);
}

static int
emit_consumer(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	Reg acc[128], wgc = reg_new(e, RC_B32), stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32);
	Reg kt = reg_new(e, RC_B32), full = reg_new(e, RC_B32), prev = reg_new(e, RC_B32);
	Reg as = reg_new(e, RC_B32), bs = reg_new(e, RC_B32), lo = reg_new(e, RC_B32);
	Reg ad = reg_new(e, RC_B64), bd = reg_new(e, RC_B64), p = reg_new(e, RC_PRED);
	Reg lane0 = reg_new(e, RC_PRED), rel = reg_new(e, RC_PRED);
	Reg ahr = reg_new(e, RC_B32), bhr = reg_new(e, RC_B32);
	Reg full0, empty0, a0, b0;
	uint32_t alo, ahi, blo, bhi;
	char loop[48], done[48], guard[16];
	int nacc = g->wn / 2;
	Scales sc;

	if (gemm_desc_words(g, &g->la, &alo, &ahi, err) < 0 ||
	    gemm_desc_words(g, &g->lb, &blo, &bhi, err) < 0)
		return -1;
	reg_array(e, RC_F32, acc, nacc);
	emit_block(e, "sm90.gemm_consumer");
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tsub.u32 %s, %s, 1;\n", wgc.s, r->tid.s, wgc.s, wgc.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", lane0.s, r->lane.s);
	full0 = op_plan_bar(e, &g->plan, r->base, g->b_full);
	empty0 = op_plan_bar(e, &g->plan, r->base, g->b_empty);
	a0 = op_plan_smem(e, &g->plan, r->base, g->r_a);
	b0 = op_plan_smem(e, &g->plan, r->base, g->r_b);
	/* this warpgroup's 64 rows: where the layout puts row 64 of each slice;
	 * split: the same rows, its 128 B rows (64 gate, 64 up) of the tile */
	Reg rowblk = wgc;
	if (g->split) {
		rowblk = reg_new(e, RC_B32);
		emitf(e, "\tmov.u32 %s, 0;\n", rowblk.s);
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", b0.s, wgc.s, layout_offset(&g->lb, g->wn, 0), b0.s);
	} else {
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", a0.s, wgc.s, layout_offset(&g->la, 64, 0), a0.s);
	}
	op_desc_hi(e, ahr, g->t->desc, (uint64_t)ahi << 32 | alo, "A");
	op_desc_hi(e, bhr, g->t->desc, (uint64_t)bhi << 32 | blo, "B");
	for (int i = 0; i < nacc; i++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", acc[i].s);
	if (g->sblock) {
		emit_scale_addrs(e, g, r, rowblk, &sc);
		emit_block(e, "sm90.gemm_consumer_loop");
	}
	if (gemm_mma_loop_head(e, err, r, stage, phase, kt, full0, full, p, loop, done, sizeof loop) < 0)
		return -1;
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", as.s, stage.s, g->la.bytes, a0.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", bs.s, stage.s, g->lb.bytes, b0.s);
	op_desc_start(e, as, gemm_clustered(g));
	op_desc_start(e, bs, gemm_clustered(g));
	if (g->sblock) {
		emit_scale_loads(e, g, r, &sc, kt);
		emit_block(e, "sm90.gemm_block_mma");
	}
	sm90_wgmma_fence(e);
	for (int kk = 0; kk < g->tk / g->kmma; kk++) {
		/* 32 bytes of K per MMA: slice j, offset inside the swizzled row
		 * moves only the start address (docs/hardware.md, "Advancing along K"). */
		uint32_t da = layout_offset(&g->la, 0, g->kmma * kk) >> 4;
		uint32_t db = layout_offset(&g->lb, 0, g->kmma * kk) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, as.s, alo + da, ad.s, lo.s, ahr.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, bs.s, blo + db, bd.s, lo.s, bhr.s);
		if (g->sblock)
			/* the block's first MMA overwrites the temporary */
			sm90_wgmma(e, g->wn, g->in, sc.tmp, &ad, NULL, bd, kk > 0, 0);
		else
			sm90_wgmma_ss(e, g->wn, g->in, acc, ad, bd);
	}
	sm90_wgmma_commit(e);
	if (g->sblock) {
		/* the temporary is read right away: wait for all, and release this
		 * stage now (its smem is no longer read) */
		sm90_wgmma_wait(e, 0);
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", prev.s, stage.s, empty0.s,
		      g->plan.bars[g->b_empty].name);
		if (g->cn > 1) {
			emit_release_both(e, g, r, prev, kt, 0, lane0, rel);
		} else {
			snprintf(guard, sizeof guard, "@%s ", lane0.s);
			op_mbar_arrive(e, prev, guard);
		}
		emit_promote(e, g, &sc, acc);
	} else {
		/* Keep one group in flight: once the previous stage's group is done
		 * its smem may be refilled. */
		sm90_wgmma_wait(e, 1);
		if (g->cn > 1) {
			emit_release_both(e, g, r, prev, kt, 1, lane0, rel);
		} else {
			emitf(e, "\tsetp.ne.and.u32 %s, %s, 0, %s;\n", rel.s, kt.s, lane0.s);
			snprintf(guard, sizeof guard, "@%s ", rel.s);
			op_mbar_arrive(e, prev, guard);
		}
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", prev.s, stage.s, empty0.s,
		      g->plan.bars[g->b_empty].name);
	}
	op_ring_advance(e, stage, phase, g->stages, reg_new(e, RC_PRED));
	emitf(e, "\tadd.u32 %s, %s, 1;\n", kt.s, kt.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, kt.s, r->nk.s, p.s, loop);
	emit_label(e, done);
	/* block-scaled: every group was waited for inside the loop */
	if (!g->sblock)
		sm90_wgmma_wait(e, 0);
	if (g->split)
		return emit_swiglu_fp8(e, g, r, wgc, acc), 0;
	if (g->swiglu)
		return emit_swiglu(e, g, r, wgc, acc), 0;
	emit_store_fragment(e, g, r, wgc, acc, g->tn, r->N);
	return 0;
}

static int
sm90_body(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	Reg wg = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), el = reg_new(e, RC_PRED);
	char consumer[48], out[48];

	label_new(e, consumer, sizeof consumer, "consumer");
	label_new(e, out, sizeof out, "exit");
	emit_block(e, "sm90.gemm_roles");
	emitf(e, "\tshr.u32 %s, %s, 7;\n", wg.s, r->tid.s);
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, wg.s, p.s, consumer);
	op_setmaxnreg(e, 0, g->plan.roles[0].regs);
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->warp.s, p.s, out);
	op_elect_one(e, el);
	emitf(e, "\t@!%s bra %s;\n", el.s, out);
	if (gemm_emit_producer(e, g, r, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", out);
	emit_label(e, consumer);
	op_setmaxnreg(e, 1, g->plan.roles[1].regs);
	if ((g->w4a8 ? sm90_w4a8_consumer : emit_consumer)(e, g, r, err) < 0)
		return -1;
	emit_label(e, out);
	emitf(e, "\tret;\n");
	return 0;
}

/* Before the CTA barrier: the W4A8 byte tables (nothing otherwise). */
static int
sm90_setup(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	return g->w4a8 ? sm90_w4a8_setup(e, g, r, err) : 0;
}

const GemmOps gemm_sm90 = {sm90_plan, sm90_setup, sm90_body};
