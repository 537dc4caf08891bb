/* Instruction idioms both targets emit (ops.h): mbarrier init, arrive,
 * expect-tx and wait, TMA loads, elect, named barriers, setmaxnreg, ring
 * advance, the parameter address, and the softmax exponentials. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

void
op_mbar_init(Emit *e, Reg addr, int arrivals)
{
	emitf(e, "\tmbarrier.init.shared::cta.b64 [%s], %d;\n", addr.s, arrivals);
}

void
op_fence_mbar_init(Emit *e)
{
	/* Makes the inits visible to the async proxy (TMA complete_tx) and to
	 * other threads before they use the barriers (docs/hardware.md, "mbarrier"). */
	emitf(e, "\tfence.mbarrier_init.release.cluster;\n");
	emit_need_ptx(e, 80);
}

Reg
op_plan_smem(Emit *e, const Plan *plan, Reg base, int region)
{
	Reg a = reg_new(e, RC_B32);

	emitf(e, "\tadd.u32 %s, %s, %u;\n", a.s, base.s, plan->smem[region].offset);
	return a;
}

Reg
op_plan_bar(Emit *e, const Plan *plan, Reg base, int bar)
{
	Reg a = reg_new(e, RC_B32);

	/* slot s of the ring is 8*s further (one .b64 mbarrier each) */
	emitf(e, "\tadd.u32 %s, %s, %u; // mbar %s[0]\n", a.s, base.s, plan->bars[bar].offset,
	      plan->bars[bar].name);
	return a;
}

void
op_ring_advance(Emit *e, Reg stage, Reg phase, int stages, Reg p)
{
	emitf(e, "\tadd.u32 %s, %s, 1;\n", stage.s, stage.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, %d;\n", p.s, stage.s, stages);
	emitf(e, "\t@%s mov.u32 %s, 0;\n", p.s, stage.s);
	emitf(e, "\t@%s xor.b32 %s, %s, 1;\n", p.s, phase.s, phase.s);
}

void
op_init_barriers(Emit *e, const Plan *plan, Reg base, Reg tid, const char *block)
{
	Reg p = reg_new(e, RC_PRED);
	char skip[48];

	emit_block(e, block);
	label_new(e, skip, sizeof skip, "init_done");
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, tid.s, p.s, skip);
	for (int i = 0; i < plan->nbars; i++)
		for (int s = 0; s < plan->bars[i].count; s++) {
			Reg a = reg_new(e, RC_B32);
			emitf(e, "\tadd.u32 %s, %s, %u; // %s[%d]\n", a.s, base.s,
			      plan->bars[i].offset + 8u * (uint32_t)s, plan->bars[i].name, s);
			op_mbar_init(e, a, plan->bars[i].arrivals);
		}
	op_fence_mbar_init(e);
	emit_label(e, skip);
}

int
op_mbar_wait(Emit *e, KgErr *err, Reg bar, const char *parity)
{
	char label[48];
	Reg p = reg_new(e, RC_PRED);

	label_new(e, label, sizeof label, "wait");
	emit_need_ptx(e, 78);
	return emit_template(e, err, "mbarrier_wait", "label", label, "pred", p.s, "bar", bar.s,
	                     "parity", parity, (char *)NULL);
}

void
op_mbar_arrive(Emit *e, Reg bar, const char *guard)
{
	emitf(e, "\t%smbarrier.arrive.shared::cta.b64 _, [%s];\n", guard ? guard : "", bar.s);
}

void
op_mbar_arrive_expect_tx(Emit *e, Reg bar, uint32_t bytes)
{
	emitf(e, "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%s], %u;\n", bar.s, bytes);
}

void
op_mbar_arrive_cluster(Emit *e, Reg bar)
{
	emitf(e, "\tmbarrier.arrive.release.cluster.shared::cluster.b64 _, [%s];\n", bar.s);
}

void
op_mbar_arrive_expect_tx_cluster(Emit *e, Reg bar, uint32_t bytes)
{
	emitf(e, "\tmbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%s], %u;\n",
	      bar.s, bytes);
}

void
op_bulk_load(Emit *e, Reg dst, Reg src, uint32_t bytes, Reg bar)
{
	emitf(e, "\tcp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s], %u, [%s];\n",
	      dst.s, src.s, bytes, bar.s);
}

/* "c0, c1, ..": a TMA instruction's coordinate list */
static void
coord_list(char *out, size_t cap, const Reg *c, int n)
{
	for (int i = 0; i < n; i++)
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? ", " : "", c[i].s);
}

int
op_tma_load_group(Emit *e, KgErr *err, Reg dst, Reg tmap, const Reg *c, int n, Reg bar,
                  int cta_group)
{
	char coords[128] = "";

	if (cta_group == 1)
		return op_tma_load(e, err, dst, tmap, c, n, bar);
	coord_list(coords, sizeof coords, c, n);
	emit_need_ptx(e, 86);
	emitf(e, "\tcp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
	      ".cta_group::2 [%s], [%s, {%s}], [%s];\n", n, dst.s, tmap.s, coords, bar.s);
	return 0;
}

int
op_tma_load_mcast(Emit *e, KgErr *err, Reg dst, Reg tmap, const Reg *c, int n, Reg bar, Reg mask,
                  int cta_group)
{
	char coords[128] = "";

	(void)err;
	coord_list(coords, sizeof coords, c, n);
	emit_need_ptx(e, cta_group == 2 ? 86 : 80);
	emitf(e, "\tcp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
	      ".multicast::cluster%s [%s], [%s, {%s}], [%s], %s;\n", n, cta_group == 2 ? ".cta_group::2" : "",
	      dst.s, tmap.s, coords, bar.s, mask.s);
	return 0;
}

void
op_cluster_sync(Emit *e)
{
	emitf(e, "\tbarrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n");
	emit_need_ptx(e, 80);
}

int
op_tma_load(Emit *e, KgErr *err, Reg dst, Reg tmap, const Reg *c, int n, Reg bar)
{
	char dim[4], coords[128] = "";

	snprintf(dim, sizeof dim, "%dd", n);
	coord_list(coords, sizeof coords, c, n);
	emit_need_ptx(e, 80);
	return emit_template(e, err, "tma_load", "dim", dim, "dst", dst.s, "tmap", tmap.s, "coords",
	                     coords, "bar", bar.s, (char *)NULL);
}

void
op_elect_one(Emit *e, Reg pred)
{
	/* elect.sync rather than lane == 0: correct whichever lanes are active
	 * (docs/hardware.md, "elect.sync"). */
	emitf(e, "\telect.sync _|%s, 0xffffffff;\n", pred.s);
	emit_need_ptx(e, 80);
}

void
op_bar_sync(Emit *e, int id, int threads)
{
	emitf(e, "\tbar.sync %d, %d;\n", id, threads);
}

void
op_bar_sync_why(Emit *e, int id, int threads, const char *why)
{
	emitf(e, "\tbar.sync %d, %d; // bar %d: %s\n", id, threads, id, why);
}

void
op_desc_hi(Emit *e, Reg dst, DescArch arch, uint64_t desc, const char *what)
{
	char t[160];

	desc_text(t, sizeof t, arch, desc);
	emitf(e, "\tmov.u32 %s, %u; // desc %s: %s\n", dst.s, (uint32_t)(desc >> 32), what, t);
}

/* The default .release.cta: what the arrive orders are async-proxy reads
 * that wgmma.wait_group already completed. A .release.cluster arrive also
 * waits for this thread's other memory operations to be performed cluster
 * wide (the consumers' scale prefetch) and measured far slower on the H100
 * (docs/estimate.md, "A multicast"). */
void
op_mbar_arrive_peer(Emit *e, Reg bar, const char *guard)
{
	emitf(e, "\t%smbarrier.arrive.shared::cluster.b64 _, [%s];\n", guard, bar.s);
}

void
op_desc_start(Emit *e, Reg lo, int clustered)
{
	if (clustered)
		emitf(e, "\tand.b32 %s, %s, 0x%X; // descriptor address bits, not the CTA rank\n", lo.s, lo.s,
		      DESC_ADDR_MASK);
	emitf(e, "\tshr.u32 %s, %s, 4;\n", lo.s, lo.s);
}

void
op_idesc(Emit *e, Reg dst, IdescKind kind, uint32_t idesc, const char *what)
{
	char t[160];

	idesc_text(t, sizeof t, kind, idesc);
	emitf(e, "\tmov.u32 %s, 0x%08X; // idesc %s: %s\n", dst.s, idesc, what, t);
}

void
op_param_addr(Emit *e, Reg dst, const char *sym)
{
	/* The tensor map stays in param space; its generic address is the TMA
	 * operand (docs/hardware.md, "Tensor map parameter"; cvta.param needs PTX 7.7). */
	emitf(e, "\tmov.b64 %s, %s;\n", dst.s, sym);
	emitf(e, "\tcvta.param.u64 %s, %s;\n", dst.s, dst.s);
	emit_need_ptx(e, 77);
}

void
op_param_global(Emit *e, Reg dst, const char *name, ...)
{
	char sym[64];
	va_list ap;
	int w;

	va_start(ap, name);
	w = vsnprintf(sym, sizeof sym, name, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= sizeof sym)
		kg_bug("parameter p_%s...: longer than %zu bytes", sym, sizeof sym - 1);
	emitf(e, "\tld.param.u64 %s, [p_%s];\n\tcvta.to.global.u64 %s, %s;\n", dst.s, sym, dst.s, dst.s);
}

void
op_setmaxnreg(Emit *e, int inc, int regs)
{
	emitf(e, "\tsetmaxnreg.%s.sync.aligned.u32 %d;\n", inc ? "inc" : "dec", regs);
	emit_need_ptx(e, 80);
}

/* Fitted by reweighted least squares (Lawson) to the relative error of
 * 2^f on [-1/2, 1/2] and rounded to f32; max relative error 7.5e-5 in f32
 * Horner evaluation (tests/unit/test_ops.c checks it against exp2). */
const float exp2_poly[4] = {0x1.fff692p-1f, 0x1.62f31cp-1f, 0x1.f0de56p-3f, 0x1.c3f796p-5f};

void
op_exp2_fma(Emit *e, Reg dst, Reg x, Reg f, Reg pb, Reg j, Reg p)
{
	char c[4][12];

	for (int i = 0; i < 4; i++)
		fimm(c[i], exp2_poly[i]);
	/* j = x + 1.5·2^23 rounds x to an integer in its low mantissa bits */
	emitf(e, "\tadd.rn.f32 %s, %s, 0f4B400000;\n\tsub.rn.f32 %s, %s, 0f4B400000;\n", j.s, x.s, f.s, j.s);
	emitf(e, "\tsub.rn.f32 %s, %s, %s;\n\tsetp.lt.f32 %s, %s, 0fC2FA0000;\n", f.s, x.s, f.s, p.s, x.s);
	emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", pb.s, f.s, c[3], c[2]);
	emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n\tfma.rn.f32 %s, %s, %s, %s;\n", pb.s, pb.s, f.s, c[1], pb.s,
	      pb.s, f.s, c[0]);
	/* (0x4B400000 + j) << 23 = j << 23: the shifter's bits shift out */
	emitf(e, "\tshl.b32 %s, %s, 23;\n\tadd.s32 %s, %s, %s;\n", j.s, j.s, pb.s, pb.s, j.s);
	emitf(e, "\tselp.f32 %s, 0f00000000, %s, %s;\n", dst.s, pb.s, p.s);
}

int
exp2_fma_takes(int i, int k)
{
	return (i + 1) * k / 8 > i * k / 8;
}

void
exp2_mix_init(Emit *e, Exp2Mix *m, int k)
{
	memset(m, 0, sizeof *m);
	m->k = k;
	if (!k)
		return;
	m->f = reg_new(e, RC_F32);
	m->pb = reg_new(e, RC_B32);
	m->j = reg_new(e, RC_B32);
	m->p = reg_new(e, RC_PRED);
}

void
op_exp2_mix(Emit *e, const Exp2Mix *m, int i, Reg x)
{
	if (exp2_fma_takes(i, m->k))
		op_exp2_fma(e, x, x, m->f, m->pb, m->j, m->p);
	else
		emitf(e, "\tex2.approx.ftz.f32 %s, %s;\n", x.s, x.s);
}

void
op_swiglu(Emit *e, Reg out, Reg gate, Reg up, Reg lim, Reg nlim, Reg t)
{
	emitf(e, "\tmin.f32 %s, %s, %s;\n\tmul.f32 %s, %s, 0fBFB8AA3B;\n", gate.s, gate.s, lim.s, t.s, gate.s);
	emitf(e, "\tex2.approx.f32 %s, %s;\n\tadd.f32 %s, %s, 0f3F800000;\n", t.s, t.s, t.s, t.s);
	emitf(e, "\tdiv.rn.f32 %s, %s, %s;\n", t.s, gate.s, t.s);
	emitf(e, "\tmax.f32 %s, %s, %s;\n\tmin.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n", out.s, up.s, nlim.s,
	      out.s, out.s, lim.s, out.s, out.s, t.s);
}

void
op_e4m3_scale(Emit *e, Reg s, Reg amax, Reg p)
{
	emitf(e, "\tdiv.rn.f32 %s, %s, 0f43E00000;\n", s.s, amax.s);
	emitf(e, "\tsetp.eq.f32 %s, %s, 0f00000000;\n\t@%s mov.f32 %s, 0f3F800000;\n", p.s, amax.s, p.s, s.s);
}
