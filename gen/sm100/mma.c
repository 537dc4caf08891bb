/* tcgen05 building blocks on sm_100a (mma.h): TMEM allocation and release,
 * instruction descriptors, MMA issue and commit, TMEM loads and stores, and
 * the fences around thread synchronization. */
#include <stdio.h>

#include "../desc.h"
#include "../ops.h"
#include "mma.h"

int
sm100_tmem_alloc_group(Emit *e, KgErr *err, Reg slot, int ncols, int cta_group)
{
	char n[16], g[4];

	snprintf(n, sizeof n, "%d", ncols);
	snprintf(g, sizeof g, "%d", cta_group);
	emit_need_ptx(e, 86);
	return emit_template(e, err, "sm100_tmem_alloc", "slot", slot.s, "ncols", n, "group", g,
	                     (char *)NULL);
}

int
sm100_tmem_alloc(Emit *e, KgErr *err, Reg slot, int ncols)
{
	return sm100_tmem_alloc_group(e, err, slot, ncols, 1);
}

int
sm100_tmem_dealloc_group(Emit *e, KgErr *err, Reg taddr, int ncols, int cta_group)
{
	char n[16], g[4];

	snprintf(n, sizeof n, "%d", ncols);
	snprintf(g, sizeof g, "%d", cta_group);
	return emit_template(e, err, "sm100_tmem_dealloc", "taddr", taddr.s, "ncols", n, "group", g,
	                     (char *)NULL);
}

int
sm100_tmem_dealloc(Emit *e, KgErr *err, Reg taddr, int ncols)
{
	return sm100_tmem_dealloc_group(e, err, taddr, ncols, 1);
}

int
sm100_idesc_f16(DType in, int m, int n, int b_mn, uint32_t *out, KgErr *err)
{
	return sm100_idesc_f16_group(in, m, n, b_mn, 1, out, err);
}

int
sm100_idesc_f16_group(DType in, int m, int n, int b_mn, int cta_group, uint32_t *out, KgErr *err)
{
	Idesc d = {0};

	d.kind = IK_F16;
	d.a = d.b = in;
	d.d = DT_F32;
	d.m = m;
	d.n = n;
	d.cta_group = cta_group;
	d.b_major_mn = b_mn;
	return idesc_encode(out, &d, err);
}

void
sm100_mma_f16_ss(Emit *e, Reg d, Reg adesc, Reg bdesc, Reg idesc, const char *enable_d)
{
	/* Single-thread semantics: issued by one elected lane (pitfall 5). */
	emitf(e, "\ttcgen05.mma.cta_group::1.kind::f16 [%s], %s, %s, %s, %s;\n", d.s, adesc.s, bdesc.s,
	      idesc.s, enable_d);
	emit_need_ptx(e, 86);
}

void
sm100_mma_mx_ss(Emit *e, IdescKind kind, int block, Reg d, Reg adesc, Reg bdesc, Reg idesc, Reg sfa,
                Reg sfb, const char *enable_d)
{
	emitf(e, "\ttcgen05.mma.cta_group::1.kind::%s.block_scale.block%d [%s], %s, %s, %s, [%s], [%s], %s;\n",
	      idesc_kind_name(kind), block, d.s, adesc.s, bdesc.s, idesc.s, sfa.s, sfb.s, enable_d);
	emit_need_ptx(e, 88);
}

void
sm100_cp_32x128b_x4(Emit *e, Reg taddr, Reg sdesc)
{
	emitf(e, "\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%s], %s;\n", taddr.s, sdesc.s);
	emit_need_ptx(e, 86);
}

void
sm100_mma_f16_ss_pair(Emit *e, Reg d, Reg adesc, Reg bdesc, Reg idesc, const char *enable_d)
{
	/* one thread of the pair issues for both CTAs (docs/cta-pair.md) */
	emitf(e, "\ttcgen05.mma.cta_group::2.kind::f16 [%s], %s, %s, %s, %s;\n", d.s, adesc.s, bdesc.s,
	      idesc.s, enable_d);
	emit_need_ptx(e, 86);
}

void
sm100_mma_f16_ts(Emit *e, Reg d, Reg a, Reg bdesc, Reg idesc, const char *enable_d)
{
	emitf(e, "\ttcgen05.mma.cta_group::1.kind::f16 [%s], [%s], %s, %s, %s;\n", d.s, a.s, bdesc.s,
	      idesc.s, enable_d);
	emit_need_ptx(e, 86);
}

void
sm100_mma_f16_ts_pair(Emit *e, Reg d, Reg a, Reg bdesc, Reg idesc, const char *enable_d)
{
	/* M = 128: A in each CTA's TMEM, duplicated in both lane halves
	 * (docs/hardware.md, "Accumulator layout of the CTA pair") */
	emitf(e, "\ttcgen05.mma.cta_group::2.kind::f16 [%s], [%s], %s, %s, %s;\n", d.s, a.s, bdesc.s,
	      idesc.s, enable_d);
	emit_need_ptx(e, 86);
}

void
sm100_commit(Emit *e, Reg bar)
{
	/* The CTA-local shared address is valid in the cluster window
	 * (docs/hardware.md, "tcgen05.commit"); commit is implicitly ordered after the MMAs. */
	emitf(e, "\ttcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%s];\n", bar.s);
}

void
sm100_commit_pair(Emit *e, Reg bar, Reg mask)
{
	/* arrives on the barrier at this offset in both CTAs of the pair: each
	 * CTA's waiters learn the MMAs that read its smem / wrote its TMEM are
	 * done (PTX ISA §9.7.16.9.6) */
	emitf(e, "\ttcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster"
	      ".b64 [%s], %s;\n", bar.s, mask.s);
}

void
sm100_ld_32x32b(Emit *e, const Reg *v, int n, Reg taddr)
{
	emitf(e, "\ttcgen05.ld.sync.aligned.32x32b.x%d.b32 %s, [%s];\n", n, reg_vec(e, v, n), taddr.s);
}

void
sm100_wait_ld(Emit *e)
{
	/* tcgen05.ld is asynchronous: its registers are undefined until this
	 * (docs/hardware.md, "tcgen05 ordering"). */
	emitf(e, "\ttcgen05.wait::ld.sync.aligned;\n");
}

void
sm100_st_32x32b(Emit *e, const Reg *v, int n, Reg taddr)
{
	emitf(e, "\ttcgen05.st.sync.aligned.32x32b.x%d.b32 [%s], %s;\n", n, taddr.s, reg_vec(e, v, n));
}

void
sm100_ldst_32x32b_cols(Emit *e, int st, const Reg *v, int n, int max, Reg taddr, Reg scratch)
{
	for (int c = 0, w; c < n; c += w) {
		Reg a = taddr;
		for (w = max; w > n - c; w /= 2)
			;
		if (c) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", scratch.s, taddr.s, c);
			a = scratch;
		}
		if (st)
			sm100_st_32x32b(e, v + c, w, a);
		else
			sm100_ld_32x32b(e, v + c, w, a);
	}
}

void
sm100_wait_st(Emit *e)
{
	/* tcgen05.st is asynchronous: TMEM holds the values only after this,
	 * and an MMA may read them only after it and a fenced sync (docs/hardware.md,
	 * "tcgen05 ordering"). */
	emitf(e, "\ttcgen05.wait::st.sync.aligned;\n");
}

void
sm100_fence_before(Emit *e)
{
	emitf(e, "\ttcgen05.fence::before_thread_sync;\n");
}

void
sm100_fence_after(Emit *e)
{
	emitf(e, "\ttcgen05.fence::after_thread_sync;\n");
}

int
sm100_setup_tmem(Emit *e, KgErr *err, const char *block, Reg warp, int warp_alloc, const Plan *plan,
                 Reg base, int slot_region)
{
	return sm100_setup_tmem_group(e, err, block, warp, warp_alloc, plan, base, slot_region, 1);
}

int
sm100_setup_tmem_group(Emit *e, KgErr *err, const char *block, Reg warp, int warp_alloc,
                       const Plan *plan, Reg base, int slot_region, int cta_group)
{
	Reg p = reg_new(e, RC_PRED), slot;
	char skip[48];

	emit_block(e, block);
	label_new(e, skip, sizeof skip, "alloc_done");
	emitf(e, "\tsetp.ne.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, warp.s, warp_alloc, p.s, skip);
	slot = op_plan_smem(e, plan, base, slot_region);
	if (sm100_tmem_alloc_group(e, err, slot, plan->tmem_alloc, cta_group) < 0)
		return -1;
	emit_label(e, skip);
	/* orders the allocation before the CTA barrier that publishes it */
	sm100_fence_before(e);
	return 0;
}

/* dst = ((warp [mod 4]) << shift) + add */
static void
quarter(Emit *e, Reg dst, Reg warp, int shift, Reg add, int any_warp)
{
	if (any_warp)
		emitf(e, "\tand.b32 %s, %s, %d;\n\tshl.b32 %s, %s, %d;\n", dst.s, warp.s, 4 - 1, dst.s,
		      dst.s, shift);
	else
		emitf(e, "\tshl.b32 %s, %s, %d;\n", dst.s, warp.s, shift);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", dst.s, dst.s, add.s);
}

void
sm100_quarter_taddr(Emit *e, Reg dst, Reg warp, Reg base, int any_warp)
{
	quarter(e, dst, warp, tmem_quarter_addr_shift(), base, any_warp);
}

void
sm100_quarter_row(Emit *e, Reg dst, Reg warp, Reg lane, int any_warp)
{
	quarter(e, dst, warp, tmem_quarter_lane_shift(), lane, any_warp);
}

void
sm100_read_taddr(Emit *e, Reg dst, const Plan *plan, Reg base, int slot)
{
	Reg addr;

	sm100_fence_after(e);
	addr = op_plan_smem(e, plan, base, slot);
	emitf(e, "\tld.shared.u32 %s, [%s];\n", dst.s, addr.s);
}
