/* GEMM on sm_100a (docs/hardware.md, "Order of a warp-specialized GEMM"): warp 4
 * produces (TMA), warp 5 allocates TMEM and one elected lane issues tcgen05.mma (M=128, N=tile-n)
 * into it, committing each stage to its empty barrier and the last to the
 * accumulator barrier; warps 0-3 (one warpgroup, so warp w owns TMEM lanes
 * 32w..32w+31) read the accumulator with tcgen05.ld and store C.
 *
 * With --cta-pair 1 (docs/cta-pair.md) two CTAs of a cluster share one
 * tcgen05.mma.cta_group::2 of M = 256: both producers load their own A rows
 * and B half and complete on the leader's full barrier; the leader's MMA
 * thread issues and commits to both CTAs' empty/accumulator barriers; each
 * CTA's epilogue reads its own TMEM. */
#include <stdio.h>
#include <string.h>

#include "../desc.h"
#include "../gemm.h"
#include "../ops.h"
#include "mma.h"

enum { WARP_PRODUCER = 4, WARP_MMA = 5, CHUNK = 32 };

/* The MMA's instruction descriptor: kind::f16, or block-scaled (mx32:
 * kind::mxf8f6f4 with UE8M0 factors) whose scale-factor id is the byte of
 * the TMEM word MMA k of the stage starts at (gen/layout.h,
 * layout_sf_pick; docs/hardware.md, "Block-scaled instruction descriptor"
 * and "Scale-factor images"). */
static int
mma_idesc(const GemmCfg *g, int k, uint32_t *out, KgErr *err)
{
	Idesc d = {0};
	SfPick pk;

	if (!g->sfvec)
		return sm100_idesc_f16_group(g->in, g->tile_rows, g->tn, 0, 1 + g->pair, out, err);
	if (layout_sf_pick(&pk, g->tk, g->kmma, g->sfvec, k) < 0)
		return kg_fail(err, "--tile-k=%d: MMA %d of K %d with %d-wide scale vectors reads no whole "
		               "scale-factor image (docs/hardware.md, \"Scale-factor images\")", g->tk, k,
		               g->kmma, g->sfvec);
	d.kind = (IdescKind)g->kind;
	d.a = g->in;
	d.b = g->in_b;
	d.scale = g->sftype;
	d.m = g->tile_rows;
	d.n = g->tn;
	d.cta_group = 1;
	d.sfa_id = d.sfb_id = pk.id;
	return idesc_encode(out, &d, err);
}

static int
sm100_plan(GemmCfg *g, KgErr *err)
{
	Plan *p = &g->plan;
	uint32_t idesc;
	char does[96];

	if (g->sblock)
		return kg_fail(err, "--scale=block128: the sm_100a gemm has no block-scaled path yet "
		               "(tcgen05.mma kind::mxf8f6f4 with TMEM scales); use --target sm_90a");

	if (g->tm != 128)
		return kg_fail(err, "--tile-m=%d: the sm_100a gemm issues one M=128 tcgen05.mma per tile (cta_group::1, TMEM layout D); use 128",
		               g->tm);
	if (g->sfvec && g->pair)
		return kg_fail(err, "--scale=mx32 with --cta-pair=1: the block-scaled gemm is cta_group::1 "
		               "only so far; use --cta-pair 0");
	if (mma_idesc(g, 0, &idesc, err) < 0)
		return -1;
	p->threads = 192;
	plan_role(p, "epilogue", 0, 4, 0, "tcgen05.ld 32x32b (warp w: lanes 32w..), convert, store C");
	plan_role(p, "producer", WARP_PRODUCER, 1, 0, "one elected lane: TMA A/B boxes");
	snprintf(does, sizeof does, "TMEM alloc/dealloc; one elected lane%s: tcgen05.mma M=%d N=%d",
	         g->pair ? " of rank 0" : "", g->tile_rows, g->tn);
	plan_role(p, "mma", WARP_MMA, 1, 0, does);
	p->regs_need_max = CHUNK + 48;
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "epilogue");
	g->r_slot = plan_smem(p, "TMEM address", 4, 16, 1);
	plan_tmem(p, "accumulator", 0, g->tn, 128);
	if (g->sfvec) {
		/* one slot per stage, so a stage's copy never overwrites factors
		 * an MMA of another stage still reads */
		int acols = SF_COLS * g->sf_imgs * (g->tm / SF_ROWS);
		plan_tmem(p, "A scale factors", g->tn, g->stages * acols, 128);
		plan_tmem(p, "B scale factors", g->tn + g->stages * acols,
		          g->stages * SF_COLS * g->sf_imgs * (g->tn / SF_ROWS), 128);
	}
	/* a pair: both CTAs' producers arrive on the leader's full barrier,
	 * each with its own bytes */
	g->b_full = plan_barrier(p, "full", g->stages, 1 + g->pair, g->stage_bytes * (1 + g->pair),
	                         g->pair ? "both producers: arrive.expect_tx on rank 0's, TMA complete_tx"
	                                 : "producer: arrive.expect_tx, then TMA complete_tx");
	/* cn = 2: a CTA's A stage also feeds the other pair: both leaders'
	 * commits free it */
	g->b_empty = plan_barrier(p, "empty", g->stages, g->cn, 0, g->cn > 1
	                          ? "both leaders' tcgen05.commit multicast after the stage's MMAs"
	                          : g->pair ? "rank 0's tcgen05.commit multicast after the stage's MMAs"
	                          : "tcgen05.commit after the stage's MMAs");
	g->b_acc = plan_barrier(p, "accumulator", 1, 1, 0, "tcgen05.commit after the last MMA");
	return 0;
}

static int
sm100_setup(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	return sm100_setup_tmem_group(e, err, "sm100.gemm_tmem_alloc", r->warp, WARP_MMA, &g->plan,
	                              r->base, g->r_slot, 1 + g->pair);
}

/* mx32: the MMA thread's scale-factor state (gen/layout.h). */
typedef struct Sf {
	Reg idesc[SF_BLOCKS]; /* per MMA of the stage: its scale-factor id (layout_sf_pick) */
	Reg sa0, sb0;         /* smem of the stage-0 images */
	Reg dhi;              /* high word of the images' descriptor */
	uint32_t dlo;         /* its low word at address 0 */
	Reg ta, tb;           /* this stage's TMEM slots */
	Reg lo, d;            /* scratch */
} Sf;

static int
sf_init(Emit *e, const GemmCfg *g, const GemmRegs *r, Sf *sf, KgErr *err)
{
	TileLayout l;
	uint64_t d;

	/* one image: 32 rows of 16 bytes, K-major without swizzle, rows 16
	 * bytes apart (core-matrix rows; docs/hardware.md, "tcgen05.cp") */
	if (layout_canonical(&l, MAJOR_K, SWZ_NONE, 8, SF_IMAGE_BYTES / 16, 16, err) < 0 ||
	    desc_for_tile(&d, g->t->desc, &l, 0, err) < 0)
		return -1;
	emit_block(e, "sm100.gemm_sf_setup");
	for (int kk = 0; kk < g->tk / g->kmma; kk++) {
		uint32_t v;
		char what[48];
		if (mma_idesc(g, kk, &v, err) < 0)
			return -1;
		sf->idesc[kk] = reg_new(e, RC_B32);
		snprintf(what, sizeof what, "D += A*B scaled, K block %d", kk);
		op_idesc(e, sf->idesc[kk], (IdescKind)g->kind, v, what);
	}
	sf->sa0 = op_plan_smem(e, &g->plan, r->base, g->r_sfa);
	sf->sb0 = op_plan_smem(e, &g->plan, r->base, g->r_sfb);
	sf->dhi = reg_new(e, RC_B32);
	op_desc_hi(e, sf->dhi, g->t->desc, d, "scale-factor image");
	sf->dlo = (uint32_t)d;
	sf->ta = reg_new(e, RC_B32);
	sf->tb = reg_new(e, RC_B32);
	sf->lo = reg_new(e, RC_B32);
	sf->d = reg_new(e, RC_B64);
	return 0;
}

/* Copies this stage's images into its TMEM slots: A's image i of its 128
 * rows to columns 4i.., and image i of B's row block j to columns
 * 4(i·nb + j).. of B's slot, so that the nb row blocks one MMA reads are
 * adjacent (row n's factors in column n / 32); the MMAs that follow on
 * this thread are ordered after the copies (docs/hardware.md, "tcgen05.cp"
 * and "Scale-factor images"). */
static void
sf_copy(Emit *e, const GemmCfg *g, Sf *sf, Reg stage, Reg tmem)
{
	int nb = g->tn / SF_ROWS, acols = SF_COLS * g->sf_imgs * (g->tm / SF_ROWS);
	int bcols = SF_COLS * g->sf_imgs * nb;

	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %d;\n", sf->ta.s, stage.s, acols, tmem.s,
	      sf->ta.s, sf->ta.s, g->tn);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %d;\n", sf->tb.s, stage.s, bcols, tmem.s,
	      sf->tb.s, sf->tb.s, g->tn + g->stages * acols);
	for (int i = 0; i < g->sf_imgs; i++) {
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", sf->lo.s, stage.s, g->sfa_bytes, sf->sa0.s);
		if (i)
			emitf(e, "\tadd.u32 %s, %s, %d;\n", sf->lo.s, sf->lo.s, i * SF_IMAGE_BYTES);
		op_desc_start(e, sf->lo, gemm_clustered(g));
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", sf->lo.s, sf->lo.s, sf->dlo, sf->d.s,
		      sf->lo.s, sf->dhi.s);
		if (i) {
			Reg t = reg_new(e, RC_B32);
			emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, sf->ta.s, i * SF_COLS);
			sm100_cp_32x128b_x4(e, t, sf->d);
		} else {
			sm100_cp_32x128b_x4(e, sf->ta, sf->d);
		}
	}
	for (int j = 0; j < nb; j++)
		for (int i = 0; i < g->sf_imgs; i++) {
			Reg t = reg_new(e, RC_B32);
			emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tadd.u32 %s, %s, %u;\n", sf->lo.s, stage.s,
			      g->sfb_bytes, sf->sb0.s, sf->lo.s, sf->lo.s, (uint32_t)(j * g->sf_imgs + i) * SF_IMAGE_BYTES);
			op_desc_start(e, sf->lo, gemm_clustered(g));
			emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", sf->lo.s, sf->lo.s, sf->dlo,
			      sf->d.s, sf->lo.s, sf->dhi.s);
			emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, sf->tb.s, (i * nb + j) * SF_COLS);
			sm100_cp_32x128b_x4(e, t, sf->d);
		}
}

static int
emit_mma(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg tmem, KgErr *err)
{
	Reg idr = reg_new(e, RC_B32), ahr = reg_new(e, RC_B32), bhr = reg_new(e, RC_B32);
	Reg stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32), kt = reg_new(e, RC_B32);
	Reg full = reg_new(e, RC_B32), empty = reg_new(e, RC_B32), as = reg_new(e, RC_B32);
	Reg bs = reg_new(e, RC_B32), lo = reg_new(e, RC_B32), ad = reg_new(e, RC_B64);
	Reg bd = reg_new(e, RC_B64), p = reg_new(e, RC_PRED), acc = reg_new(e, RC_PRED);
	Reg full0, empty0, a0, b0, accbar, both = {0}, all = {0};
	uint32_t idesc, alo, ahi, blo, bhi;
	char loop[48], done[48];

	Sf sf;
	if (g->sfvec && sf_init(e, g, r, &sf, err) < 0)
		return -1;
	if (mma_idesc(g, 0, &idesc, err) < 0 ||
	    gemm_desc_words(g, &g->la, &alo, &ahi, err) < 0 ||
	    gemm_desc_words(g, &g->lb, &blo, &bhi, err) < 0)
		return -1;
	emit_block(e, "sm100.gemm_mma");
	full0 = op_plan_bar(e, &g->plan, r->base, g->b_full);
	empty0 = op_plan_bar(e, &g->plan, r->base, g->b_empty);
	accbar = op_plan_bar(e, &g->plan, r->base, g->b_acc);
	a0 = op_plan_smem(e, &g->plan, r->base, g->r_a);
	b0 = op_plan_smem(e, &g->plan, r->base, g->r_b);
	if (!g->sfvec)
		op_idesc(e, idr, IK_F16, idesc, "D = A*B");
	op_desc_hi(e, ahr, g->t->desc, (uint64_t)ahi << 32 | alo, "A");
	op_desc_hi(e, bhr, g->t->desc, (uint64_t)bhi << 32 | blo, "B");
	if (g->pair) {
		both = reg_new(e, RC_B16);
		emitf(e, "\tmov.b16 %s, 3;\n", both.s);
		all = both;
	}
	if (g->cn > 1) {
		/* empties of every CTA (their A went to both pairs), the
		 * accumulators of this pair only (ranks rank, rank + 1) */
		Reg t = reg_new(e, RC_B32);
		all = reg_new(e, RC_B16);
		emitf(e, "\tmov.b16 %s, %d;\n", all.s, (1 << (2 * g->cn)) - 1);
		emitf(e, "\tshl.b32 %s, 3, %s;\n\tcvt.u16.u32 %s, %s;\n", t.s, r->rank.s, both.s, t.s);
	}
	if (gemm_mma_loop_head(e, err, r, stage, phase, kt, full0, full, p, loop, done, sizeof loop) < 0)
		return -1;
	/* orders the MMAs after the wait that saw the TMA data (docs/hardware.md,
	 * "tcgen05 ordering") */
	sm100_fence_after(e);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", as.s, stage.s, g->la.bytes, a0.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", bs.s, stage.s, g->lb.bytes, b0.s);
	op_desc_start(e, as, gemm_clustered(g));
	op_desc_start(e, bs, gemm_clustered(g));
	if (g->sfvec)
		sf_copy(e, g, &sf, stage, tmem);
	/* the first MMA of the tile overwrites the accumulator */
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n", acc.s, kt.s);
	for (int k16 = 0; k16 < g->tk / g->kmma; k16++) {
		uint32_t da = layout_offset(&g->la, 0, g->kmma * k16) >> 4;
		uint32_t db = layout_offset(&g->lb, 0, g->kmma * k16) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, as.s, alo + da, ad.s, lo.s, ahr.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, bs.s, blo + db, bd.s, lo.s, bhr.s);
		if (g->sfvec) {
			/* this MMA's image of A's and of B's factors (layout_sf_pick) */
			SfPick pk;
			Reg fa = sf.ta, fb = sf.tb;
			layout_sf_pick(&pk, g->tk, g->kmma, g->sfvec, k16);
			if (pk.image) {
				fa = reg_new(e, RC_B32);
				fb = reg_new(e, RC_B32);
				emitf(e, "\tadd.u32 %s, %s, %d;\n\tadd.u32 %s, %s, %d;\n", fa.s, sf.ta.s,
				      pk.image * SF_COLS, fb.s, sf.tb.s, pk.image * SF_COLS * (g->tn / SF_ROWS));
			}
			sm100_mma_mx_ss(e, (IdescKind)g->kind, g->sfvec, tmem, ad, bd, sf.idesc[k16], fa, fb,
			                k16 ? "1" : acc.s);
		}
		else if (g->pair)
			sm100_mma_f16_ss_pair(e, tmem, ad, bd, idr, k16 ? "1" : acc.s);
		else
			sm100_mma_f16_ss(e, tmem, ad, bd, idr, k16 ? "1" : acc.s);
	}
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", empty.s, stage.s, empty0.s,
	      g->plan.bars[g->b_empty].name);
	if (g->pair)
		sm100_commit_pair(e, empty, all);
	else
		sm100_commit(e, empty);
	op_ring_advance(e, stage, phase, g->stages, reg_new(e, RC_PRED));
	emitf(e, "\tadd.u32 %s, %s, 1;\n", kt.s, kt.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, kt.s, r->nk.s, p.s, loop);
	emit_label(e, done);
	if (g->pair)
		sm100_commit_pair(e, accbar, both);
	else
		sm100_commit(e, accbar);
	return 0;
}

/* The SwiGLU output as MXFP8 (docs/ABI.md, "SwiGLU epilogue"): the thread
 * owns one row of the tile and its 128 columns of C (tile-n 256, N/2 whole
 * 128-column blocks, so every column exists); per 32 columns, the UE8M0
 * factor e = ceil(log2(amax/448)) + 127 (1..254; 127 for a zero block) and
 * the values times 2^(127-e) to E4M3 (satfinite: none exceeds 448). The
 * factor byte goes to the image of the row's 128-row block at
 * 16·(row%32) + 4·((row%128)/32) + column block: the images an mx32 gemm
 * with K = N/2 reads as SA (its masked slabs' too: the walk's sfa_rb). */
static int
emit_epilogue_mx(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg tmem, KgErr *err)
{
	Reg v[CHUNK], u[CHUNK], q[CHUNK / 4], h[2], tw = reg_new(e, RC_B32), ta = reg_new(e, RC_B32);
	Reg row = reg_new(e, RC_B32), t = reg_new(e, RC_B32), prow = reg_new(e, RC_PRED);
	Reg N = reg_new(e, RC_B32), lim = reg_new(e, RC_F32), nlim = reg_new(e, RC_F32);
	Reg st = reg_new(e, RC_F32), amax = reg_new(e, RC_F32), x = reg_new(e, RC_F32);
	Reg ex = reg_new(e, RC_B32), inv = reg_new(e, RC_F32), p = reg_new(e, RC_PRED);
	Reg ra = reg_new(e, RC_B64), rb = reg_new(e, RC_B64), cs = reg_new(e, RC_B64), accbar;

	reg_array(e, RC_F32, v, CHUNK);
	reg_array(e, RC_F32, u, CHUNK);
	reg_array(e, RC_B32, q, CHUNK / 4);
	for (int i = 0; i < 2; i++)
		h[i] = reg_new(e, RC_B16);
	emit_block(e, "sm100.gemm_epilogue_mxfp8");
	emitf(e, "\tshr.u32 %s, %s, 1;\n", N.s, r->N.s);
	emitf(e, "\tld.param.f32 %s, [p_swiglu_limit];\n\tneg.f32 %s, %s;\n", lim.s, nlim.s, lim.s);
	op_param_global(e, cs, "CS");
	accbar = op_plan_bar(e, &g->plan, r->base, g->b_acc);
	if (op_mbar_wait(e, err, accbar, "0") < 0)
		return -1;
	sm100_fence_after(e);
	sm100_quarter_taddr(e, tw, r->warp, tmem, 0);
	sm100_quarter_row(e, row, r->warp, r->lane, 0);
	/* the factor bytes' place: image (sfa_rb, n0/128) of cdiv(N/2,128) per
	 * row block, byte 16·lane + 4·warp (+ the column block) */
	emitf(e, "\tshr.u32 %s, %s, 8;\n\tmul.lo.u32 %s, %s, %s;\n", t.s, r->N.s, t.s, t.s, r->sfa_rb.s);
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tadd.u32 %s, %s, %s;\n", ex.s, r->n0.s, t.s, t.s, ex.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", rb.s, t.s, SF_IMAGE_BYTES, cs.s, cs.s, rb.s);
	emitf(e, "\tshl.b32 %s, %s, 4;\n\tmad.lo.u32 %s, %s, 4, %s;\n", t.s, r->lane.s, t.s, r->warp.s, t.s);
	emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", rb.s, t.s, cs.s, cs.s, rb.s);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", row.s, row.s, r->m0.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", prow.s, row.s, r->mhi.s);
	emitf(e, "\tsetp.ge.and.u32 %s, %s, %s, %s;\n", prow.s, row.s, r->mlo.s, prow.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n", ra.s, row.s, N.s);
	emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", rb.s, r->n0.s, ra.s, ra.s, rb.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n", ra.s, ra.s, r->c.s);
	for (int col = 0; col < g->tn / 2; col += CHUNK) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n", ta.s, tw.s, col);
		sm100_ld_32x32b(e, v, CHUNK, ta);
		emitf(e, "\tadd.u32 %s, %s, %d;\n", ta.s, tw.s, col + g->tn / 2);
		sm100_ld_32x32b(e, u, CHUNK, ta);
		sm100_wait_ld(e);
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", amax.s);
		for (int j = 0; j < CHUNK; j++) {
			op_swiglu(e, v[j], v[j], u[j], lim, nlim, st);
			emitf(e, "\tabs.f32 %s, %s;\n\tmax.f32 %s, %s, %s;\n", x.s, v[j].s, amax.s, amax.s, x.s);
		}
		/* amax = 1.f · 2^(E-127): amax/448 = (1.f/1.75) · 2^(E-135), so
		 * e = E - 8, one more when 1.f > 1.75 (fraction bits > 0x600000) */
		emitf(e, "\tmov.b32 %s, %s;\n\tshr.u32 %s, %s, 23;\n", t.s, amax.s, ex.s, t.s);
		emitf(e, "\tand.b32 %s, %s, 0x7fffff;\n\tsetp.gt.u32 %s, %s, 0x600000;\n", t.s, t.s, p.s, t.s);
		emitf(e, "\tsub.s32 %s, %s, 8;\n\t@%s add.s32 %s, %s, 1;\n", ex.s, ex.s, p.s, ex.s, ex.s);
		emitf(e, "\tmax.s32 %s, %s, 1;\n\tmin.s32 %s, %s, 254;\n", ex.s, ex.s, ex.s, ex.s);
		emitf(e, "\tsetp.eq.f32 %s, %s, 0f00000000;\n\t@%s mov.u32 %s, 127;\n", p.s, amax.s, p.s, ex.s);
		emitf(e, "\t@%s st.global.u8 [%s+%d], %s;\n", prow.s, cs.s, col / CHUNK, ex.s);
		/* 2^(127-e) (e <= 247 for any finite amax: a normal float) */
		emitf(e, "\tsub.u32 %s, 254, %s;\n\tshl.b32 %s, %s, 23;\n\tmov.b32 %s, %s;\n", t.s, ex.s, t.s, t.s,
		      inv.s, t.s);
		for (int k = 0; k < CHUNK / 4; k++) {
			for (int i = 0; i < 2; i++) {
				int j = 4 * k + 2 * i;
				emitf(e, "\tmul.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n", v[j].s, v[j].s, inv.s, v[j + 1].s,
				      v[j + 1].s, inv.s);
				/* the first source goes to the upper byte */
				emitf(e, "\tcvt.rn.satfinite.e4m3x2.f32 %s, %s, %s;\n", h[i].s, v[j + 1].s, v[j].s);
			}
			emitf(e, "\tmov.b32 %s, {%s, %s};\n", q[k].s, h[0].s, h[1].s);
		}
		for (int k = 0; k < CHUNK / 16; k++)
			emitf(e, "\t@%s st.global.v4.b32 [%s+%d], {%s, %s, %s, %s};\n", prow.s, ra.s, col + 16 * k,
			      q[4 * k].s, q[4 * k + 1].s, q[4 * k + 2].s, q[4 * k + 3].s);
	}
	return 0;
}

/* Thread t of warp w holds row m0 + 32w + t, 32 consecutive columns per
 * load. A full chunk inside N with 16-byte aligned rows goes out as 16-byte
 * vector stores; otherwise element by element under a column predicate. */
static int
emit_epilogue(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg tmem, KgErr *err)
{
	Reg v[CHUNK], pk[CHUNK / 2], tw = reg_new(e, RC_B32), ta = reg_new(e, RC_B32);
	Reg row = reg_new(e, RC_B32), t = reg_new(e, RC_B32), prow = reg_new(e, RC_PRED);
	Reg vec = reg_new(e, RC_PRED), fast = reg_new(e, RC_PRED), pc = reg_new(e, RC_PRED);
	Reg ra = reg_new(e, RC_B64), rb = reg_new(e, RC_B64), h = reg_new(e, RC_B16);
	Reg accbar, u[CHUNK], N = r->N, lim = {0}, nlim = {0}, st = {0}, alpha = {0};
	int esz = g->esz_out, bf16 = g->out == DT_BF16, ncols = g->tn >> g->swiglu;

	reg_array(e, RC_F32, v, CHUNK);
	if (bf16)
		reg_array(e, RC_B32, pk, CHUNK / 2);
	if (g->swiglu) {
		/* C is N/2 wide: column n0 + j of it from accumulator columns j
		 * (gate) and tn/2 + j (up) (docs/ABI.md, "SwiGLU epilogue") */
		reg_array(e, RC_F32, u, CHUNK);
		N = reg_new(e, RC_B32);
		lim = reg_new(e, RC_F32);
		nlim = reg_new(e, RC_F32);
		st = reg_new(e, RC_F32);
	}
	emit_block(e, "sm100.gemm_epilogue");
	if (g->swiglu) {
		emitf(e, "\tshr.u32 %s, %s, 1;\n", N.s, r->N.s);
		emitf(e, "\tld.param.f32 %s, [p_swiglu_limit];\n\tneg.f32 %s, %s;\n", lim.s, nlim.s, lim.s);
	}
	if (g->alpha) {
		/* NVFP4: the MMA applied the UE4M3 factors only; C = alpha[expert]
		 * times the accumulator, before the SwiGLU (its clamp is on the
		 * true values; docs/hardware.md, "Scale-factor images") */
		Reg ap = reg_new(e, RC_B64);
		alpha = reg_new(e, RC_F32);
		op_param_global(e, ap, "alpha");
		if (g->moe)
			emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", ra.s, r->expert.s, ap.s, ap.s,
			      ra.s);
		emitf(e, "\tld.global.nc.f32 %s, [%s];\n", alpha.s, ap.s);
	}
	accbar = op_plan_bar(e, &g->plan, r->base, g->b_acc);
	if (op_mbar_wait(e, err, accbar, "0") < 0)
		return -1;
	sm100_fence_after(e);
	/* lane quarter of this warp: lanes 32w..32w+31 (docs/hardware.md, "Lane quarters") */
	sm100_quarter_taddr(e, tw, r->warp, tmem, 0);
	sm100_quarter_row(e, row, r->warp, r->lane, 0);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", row.s, row.s, r->m0.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", prow.s, row.s, r->mhi.s);
	if (g->moe) /* MoE: the expert's rows only */
		emitf(e, "\tsetp.ge.and.u32 %s, %s, %s, %s;\n", prow.s, row.s, r->mlo.s, prow.s);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tsetp.eq.u32 %s, %s, 0;\n", t.s, N.s, 16 / esz - 1, vec.s, t.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n", ra.s, row.s, N.s);
	emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", rb.s, r->n0.s, ra.s, ra.s, rb.s);
	emitf(e, "\tmad.lo.u64 %s, %s, %d, %s;\n", ra.s, ra.s, esz, r->c.s);
	/* chunks of 32 columns, the last one 16 when tile-n is an odd
	 * multiple of 16 (every column must be loaded and stored) */
	for (int col = 0; col < ncols; col += CHUNK) {
		char slow[48], next[48];
		int w = ncols - col < CHUNK ? ncols - col : CHUNK;
		int base = col * esz;

		label_new(e, slow, sizeof slow, "store_slow");
		label_new(e, next, sizeof next, "store_next");
		emitf(e, "\tadd.u32 %s, %s, %d;\n", ta.s, tw.s, col);
		sm100_ld_32x32b(e, v, w, ta);
		if (g->swiglu) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", ta.s, tw.s, col + ncols);
			sm100_ld_32x32b(e, u, w, ta);
		}
		sm100_wait_ld(e);
		for (int j = 0; g->alpha && j < w; j++) {
			emitf(e, "\tmul.f32 %s, %s, %s;\n", v[j].s, v[j].s, alpha.s);
			if (g->swiglu)
				emitf(e, "\tmul.f32 %s, %s, %s;\n", u[j].s, u[j].s, alpha.s);
		}
		for (int j = 0; g->swiglu && j < w; j++)
			op_swiglu(e, v[j], v[j], u[j], lim, nlim, st);
		emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, r->n0.s, col + w);
		emitf(e, "\tsetp.le.and.u32 %s, %s, %s, %s;\n", fast.s, t.s, N.s, vec.s);
		emitf(e, "\tand.pred %s, %s, %s;\n\t@!%s bra %s;\n", fast.s, fast.s, prow.s, fast.s, slow);
		for (int q = 0; q < w * esz / 16; q++) {
			if (bf16) {
				for (int j = 0; j < 4; j++)
					emitf(e, "\tcvt.rn.bf16x2.f32 %s, %s, %s;\n", pk[4 * q + j].s,
					      v[8 * q + 2 * j + 1].s, v[8 * q + 2 * j].s);
				emitf(e, "\tst.global.v4.b32 [%s+%d], {%s, %s, %s, %s};\n", ra.s, base + 16 * q,
				      pk[4 * q].s, pk[4 * q + 1].s, pk[4 * q + 2].s, pk[4 * q + 3].s);
			} else {
				emitf(e, "\tst.global.v4.f32 [%s+%d], {%s, %s, %s, %s};\n", ra.s, base + 16 * q,
				      v[4 * q].s, v[4 * q + 1].s, v[4 * q + 2].s, v[4 * q + 3].s);
			}
		}
		emitf(e, "\tbra %s;\n", next);
		emit_label(e, slow);
		for (int j = 0; j < w; j++) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, r->n0.s, col + j);
			emitf(e, "\tsetp.lt.and.u32 %s, %s, %s, %s;\n", pc.s, t.s, N.s, prow.s);
			if (bf16) {
				emitf(e, "\tcvt.rn.bf16.f32 %s, %s;\n", h.s, v[j].s);
				emitf(e, "\t@%s st.global.b16 [%s+%d], %s;\n", pc.s, ra.s, base + j * esz, h.s);
			} else {
				emitf(e, "\t@%s st.global.f32 [%s+%d], %s;\n", pc.s, ra.s, base + j * esz, v[j].s);
			}
		}
		emit_label(e, next);
	}
	return 0;
}

static int
sm100_body(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	Reg tmem = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), el = reg_new(e, RC_PRED);
	char mma[48], epi[48], join[48], out[48];

	label_new(e, mma, sizeof mma, "role_mma");
	label_new(e, epi, sizeof epi, "role_epilogue");
	label_new(e, join, sizeof join, "join");
	label_new(e, out, sizeof out, "exit");
	emit_block(e, "sm100.gemm_roles");
	sm100_read_taddr(e, tmem, &g->plan, r->base, g->r_slot);
	emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, WARP_PRODUCER, p.s, epi);
	emitf(e, "\tsetp.eq.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, WARP_MMA, p.s, mma);
	op_elect_one(e, el);
	emitf(e, "\t@!%s bra %s;\n", el.s, join);
	if (gemm_emit_producer(e, g, r, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", join);
	emit_label(e, mma);
	op_elect_one(e, el);
	emitf(e, "\t@!%s bra %s;\n", el.s, join);
	if (g->pair)
		/* the pair's MMAs are issued by its first CTA alone */
		emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->prank.s, p.s, join);
	if (emit_mma(e, g, r, tmem, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", join);
	emit_label(e, epi);
	if ((g->out == DT_E4M3 ? emit_epilogue_mx(e, g, r, tmem, err) : emit_epilogue(e, g, r, tmem, err)) < 0)
		return -1;
	emit_label(e, join);
	emit_block(e, "sm100.gemm_teardown");
	/* every TMEM access is complete before the allocating warp frees it
	 * (docs/hardware.md, "Order of a warp-specialized GEMM" step 6): the epilogue
	 * waited for the last MMA's commit and its loads with wait::ld, so the CTA barrier needs no
	 * fence::before_thread_sync */
	if (g->pair)
		/* the peer's TMEM and barriers are in use until rank 0's last
		 * commit landed; both CTAs free their columns together */
		op_cluster_sync(e);
	else
		op_bar_sync_why(e, 0, g->plan.threads, "CTA: TMEM no longer accessed");
	sm100_fence_after(e);
	emitf(e, "\tsetp.ne.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, WARP_MMA, p.s, out);
	if (sm100_tmem_dealloc_group(e, err, tmem, g->plan.tmem_alloc, 1 + g->pair) < 0)
		return -1;
	emit_label(e, out);
	emitf(e, "\tret;\n");
	return 0;
}

const GemmOps gemm_sm100 = {sm100_plan, sm100_setup, sm100_body};
