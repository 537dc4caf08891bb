/* GEMM on sm_90a: warpgroup 0 produces (one elected thread issues TMA),
 * warpgroups 1..C each own 64 rows of the tile and issue wgmma SS with the
 * f32 accumulators in registers, then store their fragment to C. */
#include <stdio.h>
#include <string.h>

#include "../gemm.h"
#include "../ops.h"
#include "mma.h"

enum { PRODUCER_REGS = 40 }; /* TMA loop: addresses, coordinates, parity */

static int
sm90_plan(GemmCfg *g, KgErr *err)
{
	Plan *p = &g->plan;
	char does[96];
	int regs;

	if (g->pair)
		return kg_fail(err, "--cta-pair=1: sm_90a has no CTA-pair MMA (tcgen05.mma.cta_group::2 "
		               "is sm_100a); use --target sm_100a or --cta-pair 0");
	g->consumers = g->tm / 64;
	p->threads = 128 * (1 + g->consumers);
	regs = plan_regs_split(p, 128 * g->consumers, 128, PRODUCER_REGS);
	plan_role(p, "producer", 0, 4, PRODUCER_REGS, "warp 0, one elected lane: TMA A/B boxes");
	snprintf(does, sizeof does, "64 rows each: wgmma m64n%dk16 SS, epilogue from registers", g->tn);
	plan_role(p, "consumer", 4, 4 * g->consumers, regs, does);
	/* tn/2 f32 accumulators plus addresses, descriptors and epilogue
	 * predicates (about 48 measured from ptxas reports). */
	p->regs_need_max = g->tn / 2 + 48;
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "consumer");
	g->b_full = plan_barrier(p, "full", g->stages, 1, g->stage_bytes,
	                         "producer: arrive.expect_tx, then TMA complete_tx");
	snprintf(does, sizeof does, "lane 0 of each of the %d consumer warps after wgmma.wait_group",
	         4 * g->consumers);
	g->b_empty = plan_barrier(p, "empty", g->stages, 4 * g->consumers, 0, does);
	return 0;
}

/* Stores a consumer's accumulator fragment. Pair i, i+1 of a thread are
 * adjacent columns (docs/hardware.md, "wgmma accumulator fragment"), so they go out as
 * one 2-element store where the row exists, both columns are inside N and N is even
 * (alignment); otherwise each column alone where it is inside N. */
static void
emit_store_fragment(Emit *e, const GemmCfg *g, const GemmRegs *r, Reg wgc, const Reg *acc)
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
	emitf(e, "\tand.b32 %s, %s, 1;\n\tsetp.eq.u32 %s, %s, 0;\n", t.s, r->N.s, neven.s, t.s);
	for (int h8 = 0; h8 < 2; h8++) {
		Reg rr = reg_new(e, RC_B32);
		addr[h8] = reg_new(e, RC_B64);
		prow[h8] = reg_new(e, RC_PRED);
		emitf(e, "\tadd.u32 %s, %s, %d;\n", rr.s, row.s, 8 * h8);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", prow[h8].s, rr.s, r->M.s);
		/* element offset row*N + col, in 64 bits: M*N may exceed 2^32 */
		emitf(e, "\tmul.wide.u32 %s, %s, %s;\n", addr[h8].s, rr.s, r->N.s);
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", ra.s, col.s, addr[h8].s, addr[h8].s, ra.s);
		emitf(e, "\tmad.lo.u64 %s, %s, %d, %s;\n", addr[h8].s, addr[h8].s, esz, r->c.s);
	}
	for (int q = 0; q < g->tn / 8; q++) {
		/* columns c = col + 8q and c + 1: a pair store, or each alone */
		emitf(e, "\tadd.u32 %s, %s, %d;\n", t.s, col.s, 8 * q + 1);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", phi.s, t.s, r->N.s);
		emitf(e, "\tand.pred %s, %s, %s;\n", pc2.s, phi.s, neven.s);
		emitf(e, "\txor.pred %s, %s, %s;\n", phi.s, phi.s, pc2.s);
		emitf(e, "\tsub.u32 %s, %s, 1;\n", t.s, t.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", pc1.s, t.s, r->N.s);
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
	int nacc = g->tn / 2;

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
	/* this warpgroup's 64 rows: where the layout puts row 64 of each slice */
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", a0.s, wgc.s, layout_offset(&g->la, 64, 0), a0.s);
	op_desc_hi(e, ahr, g->t->desc, (uint64_t)ahi << 32 | alo, "A");
	op_desc_hi(e, bhr, g->t->desc, (uint64_t)bhi << 32 | blo, "B");
	for (int i = 0; i < nacc; i++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", acc[i].s);
	if (gemm_mma_loop_head(e, err, r, stage, phase, kt, full0, full, p, loop, done, sizeof loop) < 0)
		return -1;
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", as.s, stage.s, g->la.bytes, a0.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", bs.s, stage.s, g->lb.bytes, b0.s);
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tshr.u32 %s, %s, 4;\n", as.s, as.s, bs.s, bs.s);
	sm90_wgmma_fence(e);
	for (int k16 = 0; k16 < g->tk / 16; k16++) {
		/* 32 bytes of K per MMA: slice j, offset inside the swizzled row
		 * moves only the start address (docs/hardware.md, "Advancing along K"). */
		uint32_t da = layout_offset(&g->la, 0, 16 * k16) >> 4;
		uint32_t db = layout_offset(&g->lb, 0, 16 * k16) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, as.s, alo + da, ad.s, lo.s, ahr.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, bs.s, blo + db, bd.s, lo.s, bhr.s);
		sm90_wgmma_ss(e, g->tn, g->in, acc, ad, bd);
	}
	sm90_wgmma_commit(e);
	/* Keep one group in flight: once the previous stage's group is done
	 * its smem may be refilled. */
	sm90_wgmma_wait(e, 1);
	emitf(e, "\tsetp.ne.and.u32 %s, %s, 0, %s;\n", rel.s, kt.s, lane0.s);
	snprintf(guard, sizeof guard, "@%s ", rel.s);
	op_mbar_arrive(e, prev, guard);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", prev.s, stage.s, empty0.s,
	      g->plan.bars[g->b_empty].name);
	op_ring_advance(e, stage, phase, g->stages, reg_new(e, RC_PRED));
	emitf(e, "\tadd.u32 %s, %s, 1;\n", kt.s, kt.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, kt.s, r->nk.s, p.s, loop);
	emit_label(e, done);
	sm90_wgmma_wait(e, 0);
	emit_store_fragment(e, g, r, wgc, acc);
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
	if (emit_consumer(e, g, r, err) < 0)
		return -1;
	emit_label(e, out);
	emitf(e, "\tret;\n");
	return 0;
}

const GemmOps gemm_sm90 = {sm90_plan, NULL, sm90_body};
