/* Indexer scoring on sm_90a, the simple first design (docs/ABI.md
 * "indexer"): each of the CTA's 256 threads takes keys tid, tid + 256, ..
 * of the row, loads the key's 128 E4M3 bytes (eight 16-byte ld.global.nc)
 * and its fp32 scale, widens the values to f32 in registers (E4M3 -> f16
 * -> f32, exact), and for each head h reads q[h] from shared memory (the
 * same address in every thread: a broadcast) for 128 FMAs in four chains;
 * relu(dot·scale) weighted by w[h] accumulates the logit. No tensor core:
 * 2·H·128 flops a key on the FMA pipe. */
#include <stdio.h>

#include "../indexer.h"

static int
sm90_indexer_score(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err)
{
	int D = c->fmt->d;
	Reg k[128], w[32], q[4], dot[4];
	Reg j = reg_new(e, RC_B32), t = reg_new(e, RC_B32), pg = reg_new(e, RC_B32), hl = reg_new(e, RC_B32);
	Reg qa = reg_new(e, RC_B32), wa = reg_new(e, RC_B32), a = reg_new(e, RC_B64), pb = reg_new(e, RC_B64);
	Reg o = reg_new(e, RC_B64), sc = reg_new(e, RC_F32), acc = reg_new(e, RC_F32), wv = reg_new(e, RC_F32);
	Reg hb[2], hf[2], hh[4], p = reg_new(e, RC_PRED);
	char loop[48], heads[48], done[48];

	(void)err;
	if (D != 128 || c->fmt->key_bytes != 128)
		kg_bug("sm90 indexer scoring assumes 128 one-byte values per key, format %s has %d", c->fmt->name, D);
	reg_array(e, RC_F32, k, 128);
	reg_array(e, RC_B32, w, 32);
	reg_array(e, RC_F32, q, 4);
	reg_array(e, RC_F32, dot, 4);
	reg_array(e, RC_B16, hb, 2);
	reg_array(e, RC_B32, hf, 2);
	reg_array(e, RC_B16, hh, 4);

	emit_block(e, "sm90.indexer_score");
	label_new(e, loop, sizeof loop, "key");
	label_new(e, heads, sizeof heads, "head");
	label_new(e, done, sizeof done, "keys_done");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s, r->n.s,
	      p.s, done);
	emit_label(e, loop);
	/* the key's page: K + block_table[b, j / ps]·page_bytes */
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", t.s, j.s, c->log2ps,
	      a.s, t.s, a.s, r->bt.s, a.s);
	emitf(e, "\tld.global.nc.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", pg.s, a.s, o.s,
	      pg.s, c->page_bytes, pb.s, r->kv.s, o.s);
	/* row j % ps at 128·offset, its scale at ps·128 + 4·offset */
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", t.s, j.s, c->ps - 1,
	      o.s, t.s, c->fmt->key_bytes, a.s, pb.s, o.s);
	for (int i = 0; i < 8; i++)
		emitf(e, "\tld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", w[4 * i].s, w[4 * i + 1].s,
		      w[4 * i + 2].s, w[4 * i + 3].s, a.s, 16 * i);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n\tld.global.nc.f32 %s, [%s+%d];\n", o.s, t.s,
	      c->fmt->scale_bytes, a.s, pb.s, o.s, sc.s, a.s, c->ps * c->fmt->key_bytes);
	/* byte 2k+1 of a pair lands in the upper f16 (PTX ISA "cvt") */
	for (int i = 0; i < 32; i++) {
		emitf(e, "\tmov.b32 {%s, %s}, %s;\n", hb[0].s, hb[1].s, w[i].s);
		emitf(e, "\tcvt.rn.f16x2.e4m3x2 %s, %s;\n\tcvt.rn.f16x2.e4m3x2 %s, %s;\n", hf[0].s, hb[0].s, hf[1].s,
		      hb[1].s);
		emitf(e, "\tmov.b32 {%s, %s}, %s;\n\tmov.b32 {%s, %s}, %s;\n", hh[0].s, hh[1].s, hf[0].s, hh[2].s,
		      hh[3].s, hf[1].s);
		for (int x = 0; x < 4; x++)
			emitf(e, "\tcvt.f32.f16 %s, %s;\n", k[4 * i + x].s, hh[x].s);
	}
	emitf(e, "\tmov.f32 %s, 0f00000000;\n\tmov.u32 %s, %d;\n", acc.s, hl.s, c->heads);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tadd.u32 %s, %s, %u;\n", qa.s, r->base.s, c->plan.smem[c->r_q].offset,
	      wa.s, r->base.s, c->plan.smem[c->r_w].offset);
	emit_label(e, heads);
	for (int x = 0; x < 4; x++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", dot[x].s);
	for (int i = 0; i < 32; i++) {
		emitf(e, "\tld.shared.v4.f32 {%s, %s, %s, %s}, [%s+%d];\n", q[0].s, q[1].s, q[2].s, q[3].s, qa.s, 16 * i);
		for (int x = 0; x < 4; x++)
			emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", dot[x].s, q[x].s, k[4 * i + x].s, dot[x].s);
	}
	/* relu(q·k·scale), weighted */
	emitf(e, "\tadd.f32 %s, %s, %s;\n\tadd.f32 %s, %s, %s;\n\tadd.f32 %s, %s, %s;\n", dot[0].s, dot[0].s,
	      dot[1].s, dot[2].s, dot[2].s, dot[3].s, dot[0].s, dot[0].s, dot[2].s);
	emitf(e, "\tmul.f32 %s, %s, %s;\n\tmax.f32 %s, %s, 0f00000000;\n", dot[0].s, dot[0].s, sc.s, dot[0].s,
	      dot[0].s);
	emitf(e, "\tld.shared.f32 %s, [%s];\n\tfma.rn.f32 %s, %s, %s, %s;\n", wv.s, wa.s, acc.s, wv.s, dot[0].s,
	      acc.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tadd.u32 %s, %s, 4;\n", qa.s, qa.s, 4 * D, wa.s, wa.s);
	emitf(e, "\tsub.u32 %s, %s, 1;\n\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", hl.s, hl.s, p.s, hl.s, p.s,
	      heads);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.f32 [%s], %s;\n", a.s, j.s, a.s,
	      a.s, r->logits.s, a.s, acc.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.s32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS, p.s,
	      j.s, r->n.s, p.s, loop);
	emit_label(e, done);
	return 0;
}

const IndexerOps indexer_sm90 = {
	sm90_indexer_score,
	"f32 FMA, one key per thread: 128 E4M3 values widened to f32 in registers, each head's q read from shared memory (broadcast)",
};
