/* The sm_100a indexer (docs/ABI.md "indexer"): the shared FMA scoring
 * (gen/indexer_fma.c) and the tcgen05 scoring (--score tcgen05;
 * docs/indexer.md, "Tensor-core scoring on sm_100a"): a tile of 128 keys
 * is the A operand (M = 128: a key per TMEM lane), Q's heads the B operand
 * (N = 64, rows past the heads zero), so S^T = K·Q^T is four
 * tcgen05.mma kind::f8f6f4 (E4M3 x E4M3 into f32, 32 bytes of K each) into
 * 64 TMEM columns. All 256 threads gather the tile into the 128-byte
 * swizzled K-major layout (as the sm_90a scoring does) with the keys'
 * scales beside, fence their stores for the async proxy and meet at a CTA
 * barrier; thread 0 issues the MMAs and commits them to an mbarrier that
 * every thread waits on. Thread t then holds key row 32·(w % 4) + lane
 * (its warp's lane quarter) and reads half the heads (columns 32·(w / 4)
 * ..) with one tcgen05.ld: Σ w[h]·max(0, S·s_j) over its 32 heads needs no
 * shuffle; warps 0-3 hand their halves to warps 4-7 through shared
 * memory, which store the logits.
 *
 * fp4 keys (E2M1, a UE8M0 per 32 values) are the A operand of the
 * block-scaled kind::mxf8f6f4 (E2M1 x E4M3, docs/hardware.md, "Block-scaled
 * tcgen05.mma"): each 16 codes of a key fill 8 bytes of a 16-byte chunk of
 * the same 128-byte rows, the key's scale word is its row of the A
 * scale-factor image, Q's factors are all 2^0 (0x7F), and thread 0 copies
 * both images into TMEM (tcgen05.cp .32x128b.warpx4) before each tile's
 * MMAs; MMA kk reads factor byte kk (K block kk), so S needs no scale. */
#include <stdio.h>

#include "../desc.h"
#include "../indexer.h"
#include "../layout.h"
#include "../ops.h"
#include "mma.h"

enum { TC_KEYS = 128, TC_HEADS = 64 };

static int
is_fp4(const IndexerCfg *c)
{
	return c->fmt->value_bits == 4;
}

/* The TMEM address slot and the MMA-done barrier; 64 columns of S. */
static int
sm100_indexer_plan(IndexerCfg *c, KgErr *err)
{
	(void)err;
	c->r_tslot = plan_smem(&c->plan, "TMEM address", 4, 16, 1);
	c->b_mma = plan_barrier(&c->plan, "MMA done", 1, 1, 0, "tcgen05.commit after a tile's four MMAs");
	plan_tmem(&c->plan, "S^T (keys x heads)", 0, TC_HEADS, 128);
	if (is_fp4(c)) {
		/* the keys' factors (A, the image in the key tile scales
		 * region) and Q's (B): one 512-byte image of 128 rows each */
		if (c->plan.smem[c->r_scales].bytes * (uint32_t)c->plan.smem[c->r_scales].count < SF_IMAGE_BYTES)
			kg_bug("sm100 indexer: the key tile scales region holds no scale-factor image");
		c->r_sfb = plan_smem(&c->plan, "Q scale-factor image (UE8M0 2^0)", SF_IMAGE_BYTES, 16, 1);
		plan_tmem(&c->plan, "key scale factors", TC_HEADS, SF_COLS, 128);
		plan_tmem(&c->plan, "Q scale factors", TC_HEADS + SF_COLS, SF_COLS, 128);
	}
	return 0;
}

static int
sm100_indexer_score_mma(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err)
{
	TileLayout la, lb, lsf;
	uint64_t da, db, dsf;
	uint32_t idv, idx[4];
	Idesc id = {.kind = IK_F8F6F4, .a = DT_E4M3, .b = DT_E4M3, .d = DT_F32, .m = TC_KEYS, .n = TC_HEADS,
	            .cta_group = 1};
	int fp4 = is_fp4(c);
	Reg idk[4], sfa = {{0}}, sfb = {{0}}, sfd = {{0}}, sfhi = {{0}}, sfb0 = {{0}};
	Reg s[32], wt[32], v[4];
	Reg warp = reg_new(e, RC_B32), lane = reg_new(e, RC_B32), half = reg_new(e, RC_B32), krow = reg_new(e, RC_B32);
	Reg i = reg_new(e, RC_B32), j = reg_new(e, RC_B32), x = reg_new(e, RC_B32), key = reg_new(e, RC_B32);
	Reg pt = reg_new(e, RC_B32), d = reg_new(e, RC_B32), pg = reg_new(e, RC_B32), ph = reg_new(e, RC_B32);
	Reg q0 = reg_new(e, RC_B32), tile = reg_new(e, RC_B32), scs = reg_new(e, RC_B32), sums = reg_new(e, RC_B32);
	Reg alo = reg_new(e, RC_B32), blo = reg_new(e, RC_B32), hi = reg_new(e, RC_B32), lo = reg_new(e, RC_B32);
	Reg stride = reg_new(e, RC_B32), tmem = reg_new(e, RC_B32), ta = reg_new(e, RC_B32), idr = reg_new(e, RC_B32);
	Reg ws = reg_new(e, RC_B32), bar = reg_new(e, RC_B32), l = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), ad = reg_new(e, RC_B64), bd = reg_new(e, RC_B64);
	Reg sc = reg_new(e, RC_F32), y = reg_new(e, RC_F32), acc = reg_new(e, RC_F32);
	Reg p = reg_new(e, RC_PRED), pl = reg_new(e, RC_PRED), p0 = reg_new(e, RC_PRED), lowh = reg_new(e, RC_PRED);
	char loop[48], done[48], issued[48], freed[48];

	if (layout_canonical(&la, MAJOR_K, SWZ_128B, 8, TC_KEYS, 128, err) < 0 ||
	    layout_canonical(&lb, MAJOR_K, SWZ_128B, 8, TC_HEADS, 128, err) < 0 ||
	    desc_for_tile(&da, c->t->desc, &la, 0, err) < 0 || desc_for_tile(&db, c->t->desc, &lb, 0, err) < 0 ||
	    idesc_encode(&idv, &id, err) < 0)
		return -1;
	/* fp4: MMA kk of a tile reads K block kk's factor byte of both images
	 * (docs/hardware.md, "Block-scaled instruction descriptor"); an image
	 * is 32 rows of 16 bytes, K-major without swizzle ("tcgen05.cp") */
	for (int kk = 0; fp4 && kk < 4; kk++) {
		Idesc mx = {.kind = IK_MXF8F6F4, .a = DT_E2M1, .b = DT_E4M3, .scale = DT_UE8M0, .m = TC_KEYS,
		            .n = TC_HEADS, .cta_group = 1, .sfa_id = kk, .sfb_id = kk};
		if (idesc_encode(&idx[kk], &mx, err) < 0)
			return -1;
	}
	if (fp4 && (layout_canonical(&lsf, MAJOR_K, SWZ_NONE, 8, SF_IMAGE_BYTES / 16, 16, err) < 0 ||
	            desc_for_tile(&dsf, c->t->desc, &lsf, 0, err) < 0))
		return -1;
	if ((uint32_t)(da >> 32) != (uint32_t)(db >> 32))
		kg_bug("sm100 indexer: key and Q tiles must share the descriptor's high word");
	reg_array(e, RC_F32, s, 32);
	reg_array(e, RC_F32, wt, 32);
	reg_array(e, RC_B32, v, 4);
	IdxTileScratch ts = {x, key, pt, j, d, pg, a, o, {v[0], v[1], v[2], v[3]}, sc, p, pl};

	emit_block(e, "sm100.indexer_mma");
	label_new(e, loop, sizeof loop, "tile");
	label_new(e, done, sizeof done, "tiles_done");
	label_new(e, freed, sizeof freed, "tmem_freed");
	emitf(e, "\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n\tshr.u32 %s, %s, 2;\n", warp.s, r->tid.s, lane.s,
	      r->tid.s, half.s, warp.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\tsetp.eq.u32 %s, %s, 0;\n", p0.s, r->tid.s, lowh.s, half.s);
	/* the barrier (thread 0), the TMEM (warp 0), Q (everyone) */
	/* the weights of this thread's 32 heads (0 past the heads: the
	 * prologue, whose barrier published them) */
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 128, %s;\n", ws.s, r->base.s, c->plan.smem[c->r_w].offset,
	      ws.s, half.s, ws.s);
	for (int h = 0; h < 32; h++)
		emitf(e, "\tld.shared.f32 %s, [%s+%d];\n", wt[h].s, ws.s, 4 * h);
	op_init_barriers(e, &c->plan, r->base, r->tid, "sm100.indexer_barrier_init");
	if (sm100_setup_tmem(e, err, "sm100.indexer_tmem_alloc", warp, 0, &c->plan, r->base, c->r_tslot) < 0)
		return -1;
	emit_block(e, "sm100.indexer_mma");
	/* Q is the MMA's B tile (TC_HEADS rows, staged by the prologue) */
	emitf(e, "\tadd.u32 %s, %s, %u;\n", q0.s, r->base.s, c->plan.smem[c->r_q].offset);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tadd.u32 %s, %s, %u;\n", tile.s, r->base.s, c->plan.smem[c->r_tiles].offset,
	      scs.s, r->base.s, c->plan.smem[c->r_scales].offset);
	emitf(e, "\tadd.u32 %s, %s, %u;\n", sums.s, r->base.s, c->plan.smem[c->r_sums].offset);
	op_bar_sync_why(e, 0, IDX_THREADS, "MMA barrier initialized, TMEM allocated");
	bar = op_plan_bar(e, &c->plan, r->base, c->b_mma);
	sm100_read_taddr(e, tmem, &c->plan, r->base, c->r_tslot);
	/* this thread's TMEM quarter and columns: lane 32·(w % 4) + l holds
	 * key row 32·(w % 4) + l, columns 32·(w / 4) .. its half of the heads */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, 5;\n\tadd.u32 %s, %s, %s;\n", krow.s, warp.s, krow.s, krow.s,
	      krow.s, krow.s, lane.s);
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, 21;\n\tadd.u32 %s, %s, %s;\n\tmad.lo.u32 %s, %s, 32, %s;\n",
	      ta.s, warp.s, ta.s, ta.s, ta.s, ta.s, tmem.s, ta.s, half.s, ta.s);
	/* descriptors: start address >> 4 in the low word (gen/desc) */
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n", alo.s, tile.s, alo.s, alo.s, (uint32_t)da);
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n", blo.s, q0.s, blo.s, blo.s, (uint32_t)db);
	op_desc_hi(e, hi, c->t->desc, da, fp4 ? "key (E2M1, 16 per 16 bytes) and Q (E4M3) tiles, K-major"
	                                      : "key and Q tiles, K-major E4M3");
	if (fp4) {
		/* the factors' TMEM columns, the images' descriptors, Q's image
		 * (every factor 2^0: 0x7F) written once by threads 0-127 */
		sfa = reg_new(e, RC_B32);
		sfb = reg_new(e, RC_B32);
		sfd = reg_new(e, RC_B64);
		sfhi = reg_new(e, RC_B32);
		sfb0 = reg_new(e, RC_B32);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tadd.u32 %s, %s, %d;\n", sfa.s, tmem.s, TC_HEADS, sfb.s, tmem.s,
		      TC_HEADS + SF_COLS);
		op_desc_hi(e, sfhi, c->t->desc, dsf, "scale-factor image");
		emitf(e, "\tadd.u32 %s, %s, %u;\n", sfb0.s, r->base.s, c->plan.smem[c->r_sfb].offset);
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n", p.s, r->tid.s,
		      SF_IMAGE_BYTES / 4, d.s, r->tid.s, sfb0.s);
		emitf(e, "\tmov.b32 %s, 0x7F7F7F7F;\n\t@%s st.shared.b32 [%s], %s;\n", x.s, p.s, d.s, x.s);
		for (int kk = 0; kk < 4; kk++) {
			char what[48];
			idk[kk] = reg_new(e, RC_B32);
			snprintf(what, sizeof what, "S^T = K*Q^T scaled, K block %d", kk);
			op_idesc(e, idk[kk], IK_MXF8F6F4, idx[kk], what);
		}
	} else {
		op_idesc(e, idr, IK_F8F6F4, idv, "S^T = K*Q^T");
	}
	/* tiles split + splits·m; the part's local keys l = 128·m + krow */
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", ph.s, i.s, r->split.s,
	      stride.s, r->splits.s, l.s, krow.s);
	emit_label(e, loop);
	emitf(e, "\tshl.b32 %s, %s, 7;\n\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", x.s, i.s, p.s, x.s, r->n.s, p.s,
	      done);
	indexer_emit_key_tile(e, c, r, &ts, i, r->tid, tile, scs, TC_KEYS, IDX_THREADS);
	/* the tile (and Q, before the first) read by the async proxy; the
	 * previous tile's TMEM loads are complete (wait::ld) before the
	 * barrier, after which thread 0's MMAs overwrite S (docs/hardware.md,
	 * "tcgen05 ordering") */
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	op_bar_sync_why(e, 0, IDX_THREADS, "the key tile stored, the last S read");
	/* thread 0: S^T = K·Q^T, 32 bytes of K a MMA, the first overwriting */
	label_new(e, issued, sizeof issued, "issued");
	emitf(e, "\t@!%s bra %s;\n", p0.s, issued);
	sm100_fence_after(e);
	if (fp4) {
		/* both images into TMEM, in issue order before the MMAs */
		emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, scs.s, lo.s,
		      lo.s, (uint32_t)dsf, sfd.s, lo.s, sfhi.s);
		sm100_cp_32x128b_x4(e, sfa, sfd);
		emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, sfb0.s, lo.s,
		      lo.s, (uint32_t)dsf, sfd.s, lo.s, sfhi.s);
		sm100_cp_32x128b_x4(e, sfb, sfd);
	}
	for (int kk = 0; kk < 4; kk++) {
		uint32_t off = layout_offset(&la, 0, 32 * kk) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, alo.s, off, ad.s, lo.s, hi.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, blo.s, off, bd.s, lo.s, hi.s);
		if (fp4)
			sm100_mma_mx_ss(e, IK_MXF8F6F4, 32, tmem, ad, bd, idk[kk], sfa, sfb, kk > 0 ? "1" : "0");
		else
			emitf(e, "\ttcgen05.mma.cta_group::1.kind::f8f6f4 [%s], %s, %s, %s, %d;\n", tmem.s, ad.s, bd.s,
			      idr.s, kk > 0);
	}
	sm100_commit(e, bar);
	emit_label(e, issued);
	if (op_mbar_wait(e, err, bar, ph.s) < 0)
		return -1;
	emitf(e, "\txor.b32 %s, %s, 1;\n", ph.s, ph.s);
	sm100_fence_after(e);
	sm100_ld_32x32b(e, s, 32, ta);
	sm100_wait_ld(e);
	/* Σ over this thread's 32 heads of w[h]·max(0, S·s_j) (fp4: the MMA
	 * applied the keys' factors) */
	if (fp4) {
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", acc.s);
		for (int h = 0; h < 32; h++)
			emitf(e, "\tmax.f32 %s, %s, 0f00000000;\n\tfma.rn.f32 %s, %s, %s, %s;\n", y.s, s[h].s, acc.s,
			      wt[h].s, y.s, acc.s);
	} else {
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.f32 %s, [%s];\n\tmov.f32 %s, 0f00000000;\n", d.s,
		      krow.s, scs.s, sc.s, d.s, acc.s);
		for (int h = 0; h < 32; h++)
			emitf(e, "\tmul.f32 %s, %s, %s;\n\tmax.f32 %s, %s, 0f00000000;\n\tfma.rn.f32 %s, %s, %s, %s;\n",
			      y.s, s[h].s, sc.s, y.s, y.s, acc.s, wt[h].s, y.s, acc.s);
	}
	/* warps 0-3 hand their half to warps 4-7, which store the logits
	 * (threads 128.. : other threads than the select reads them with,
	 * so the join's barrier publishes them) */
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.f32 [%s], %s;\n", d.s, krow.s, sums.s, lowh.s, d.s,
	      acc.s);
	op_bar_sync_why(e, 0, IDX_THREADS, "the lower heads' sums stored");
	emitf(e, "\tshl.b32 %s, %s, 7;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n\tand.pred %s, %s, !%s;\n",
	      j.s, i.s, j.s, j.s, krow.s, pl.s, j.s, r->n.s, pl.s, pl.s, lowh.s);
	emitf(e, "\t@%s ld.shared.f32 %s, [%s];\n\t@%s add.f32 %s, %s, %s;\n", pl.s, y.s, d.s, pl.s, acc.s, acc.s, y.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\t@%s st.global.f32 [%s], %s;\n", a.s, j.s, a.s,
	      a.s, r->logits.s, pl.s, a.s, acc.s);
	indexer_emit_keep(e, c, r, l, acc, &pl);
	emit_block(e, "sm100.indexer_mma");
	emitf(e, "\tadd.u32 %s, %s, %d;\n", l.s, l.s, TC_KEYS);
	/* no barrier here: the next tile's scales and sums are stored after
	 * the next tile barrier, which the readers above reach first */
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tbra.uni %s;\n", i.s, i.s, stride.s, loop);
	emit_label(e, done);
	/* every TMEM load was complete (wait::ld) before the last sums
	 * barrier, which warp 0 passed too: it frees the columns; the join's
	 * barrier publishes the last tile's logits */
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@!%s bra %s;\n", p.s, warp.s, p.s, freed);
	sm100_fence_after(e);
	if (sm100_tmem_dealloc(e, err, tmem, c->plan.tmem_alloc) < 0)
		return -1;
	emit_label(e, freed);
	return 0;
}

const IndexerOps indexer_sm100 = {
	.score = indexer_score_fma,
	.how = indexer_how_fma,
	.score_mma = sm100_indexer_score_mma,
	.how_mma = "FP8 tcgen05.mma kind::f8f6f4 M=128 N=64 (fp4 keys: kind::mxf8f6f4.block_scale, E2M1 x E4M3, the keys' UE8M0 per 32 copied into TMEM per tile): 128-key tiles (A, gathered into 128-byte swizzled smem by all threads) against the heads (B), S^T in 64 TMEM columns; a thread reads its key's row (32 heads) with tcgen05.ld, relu, weights and the head sum in registers",
	.unit_mma = TC_KEYS,
	.mma_score = IDX_SCORE_TCGEN05,
	.mma_fp4 = IDX_MMA_FP4_BLOCK_SCALED,
	.plan_mma = sm100_indexer_plan,
	.head_sums = 1,
	.q_fenced = 1,
};
