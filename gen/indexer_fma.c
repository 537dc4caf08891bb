/* The indexer's FMA scoring, the simple first design, shared by every
 * target (docs/ABI.md "indexer"): each of the CTA's 256 threads takes
 * keys tid, tid + 256, .. of the row, loads the key's 128 values (fp8:
 * 128 E4M3 bytes and an fp32 scale; fp4: 64 bytes of E2M1 and four UE8M0
 * group scales; nvfp4: eight UE4M3 scales and K_global) with 16-byte
 * ld.global.nc, widens them to f32 in registers (E4M3 -> f16 -> f32,
 * exact; E2M1 by a table lookup, times its group's scale, exact), and for
 * each head h reads q[h] from shared memory (the same address in every
 * thread: a broadcast) for 128 FMAs in four chains; relu(dot·scale)
 * weighted by w[h] accumulates the logit. No tensor core: 2·H·128 flops a
 * key on the FMA pipe. Every instruction exists on every target
 * (cvt.rn.f16x2.e4m3x2 from sm_89 on). */
#include <stdio.h>

#include "e2m1.h"
#include "indexer.h"

/* Four E4M3 (one word) -> k[0..3] f32; byte 2k+1 of a pair lands in the
 * upper f16 (PTX ISA "cvt"). */
static void
emit_fp8_word(Emit *e, Reg w, Reg *k, Reg hb[2], Reg hf[2], Reg hh[4])
{
	emitf(e, "\tmov.b32 {%s, %s}, %s;\n", hb[0].s, hb[1].s, w.s);
	emitf(e, "\tcvt.rn.f16x2.e4m3x2 %s, %s;\n\tcvt.rn.f16x2.e4m3x2 %s, %s;\n", hf[0].s, hb[0].s, hf[1].s, hb[1].s);
	emitf(e, "\tmov.b32 {%s, %s}, %s;\n\tmov.b32 {%s, %s}, %s;\n", hh[0].s, hh[1].s, hf[0].s, hh[2].s, hh[3].s,
	      hf[1].s);
	for (int x = 0; x < 4; x++)
		emitf(e, "\tcvt.f32.f16 %s, %s;\n", k[x].s, hh[x].s);
}

/* Scratch of the FP4 decode. */
typedef struct Fp4 {
	Reg t0, t1, zero, x, sel, m, h[2], s, hh[4];
} Fp4;

/* Eight E2M1 codes (one word, value 2i in the low nibble of byte i) times
 * their group's scale gs -> k[0..7] (docs/indexer.md, "FP4 keys"): per
 * four codes, prmt looks the magnitudes' f16 high bytes up in the table
 * (t0, t1: gen/e2m1.h) with the codes' low three bits as selectors, two
 * more prmt interleave them with zero low bytes into f16x2 pairs, and each
 * code's bit 3 moves to its f16's sign bit. */
static void
emit_fp4_word(Emit *e, Reg w, Reg *k, Reg gs, const Fp4 *f)
{
	for (int half = 0; half < 2; half++) {
		if (half)
			emitf(e, "\tshr.u32 %s, %s, 16;\n", f->x.s, w.s);
		else
			emitf(e, "\tmov.b32 %s, %s;\n", f->x.s, w.s);
		emitf(e, "\tand.b32 %s, %s, 0x7777;\n\tprmt.b32 %s, %s, %s, %s;\n", f->sel.s, f->x.s, f->m.s, f->t0.s,
		      f->t1.s, f->sel.s);
		emitf(e, "\tprmt.b32 %s, %s, %s, 0x1404;\n\tprmt.b32 %s, %s, %s, 0x3424;\n", f->h[0].s, f->m.s,
		      f->zero.s, f->h[1].s, f->m.s, f->zero.s);
		/* codes 0, 1: bits 3, 7 -> 15, 31; codes 2, 3: bits 11, 15 -> 15, 31 */
		for (int p = 0; p < 2; p++) {
			emitf(e, "\tshl.b32 %s, %s, %d;\n\tand.b32 %s, %s, 0x8000;\n\tor.b32 %s, %s, %s;\n", f->s.s, f->x.s,
			      p ? 4 : 12, f->s.s, f->s.s, f->h[p].s, f->h[p].s, f->s.s);
			emitf(e, "\tshl.b32 %s, %s, %d;\n\tand.b32 %s, %s, 0x80000000;\n\tor.b32 %s, %s, %s;\n", f->s.s,
			      f->x.s, p ? 16 : 24, f->s.s, f->s.s, f->h[p].s, f->h[p].s, f->s.s);
			emitf(e, "\tmov.b32 {%s, %s}, %s;\n", f->hh[2 * p].s, f->hh[2 * p + 1].s, f->h[p].s);
		}
		for (int x = 0; x < 4; x++)
			emitf(e, "\tcvt.f32.f16 %s, %s;\n\tmul.f32 %s, %s, %s;\n", k[4 * half + x].s, f->hh[x].s,
			      k[4 * half + x].s, k[4 * half + x].s, gs.s);
	}
}

int
indexer_score_fma(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err)
{
	int D = c->fmt->d, fp4 = c->fmt->value_bits == 4, nv = c->fmt->nv, words = c->fmt->key_bytes / 4;
	Reg k[128], w[32], q[4], dot[4], gs[8];
	Reg j = reg_new(e, RC_B32), t = reg_new(e, RC_B32), pg = reg_new(e, RC_B32), hl = reg_new(e, RC_B32);
	Reg qa = reg_new(e, RC_B32), wa = reg_new(e, RC_B32), a = reg_new(e, RC_B64), pb = reg_new(e, RC_B64);
	Reg o = reg_new(e, RC_B64), sc = reg_new(e, RC_F32), acc = reg_new(e, RC_F32), wv = reg_new(e, RC_F32);
	Reg ex = reg_new(e, RC_B32), stride = reg_new(e, RC_B32), hb[2], hf[2], hh[4], p = reg_new(e, RC_PRED);
	Reg l = reg_new(e, RC_B32);
	Fp4 f;
	uint32_t tab[2];
	char loop[48], heads[48], done[48];

	(void)err;
	if (D != 128 || c->fmt->key_bytes * 8 != D * c->fmt->value_bits ||
	    (fp4 && c->fmt->group != (nv ? 16 : 32)))
		kg_bug("indexer FMA scoring: format %s is not 128 values of 8 bits, of 4 in groups of 32 (UE8M0) or of 16 (UE4M3)",
		       c->fmt->name);
	if (e2m1_f16_hi_bytes(tab) < 0)
		kg_bug("E2M1 magnitudes are not f16 values with zero low bytes");
	reg_array(e, RC_F32, k, 128);
	reg_array(e, RC_B32, w, words);
	reg_array(e, RC_F32, q, 4);
	reg_array(e, RC_F32, dot, 4);
	reg_array(e, RC_B16, hb, 2);
	reg_array(e, RC_B32, hf, 2);
	reg_array(e, RC_B16, hh, 4);
	if (fp4) {
		reg_array(e, RC_F32, gs, nv ? 8 : 4);
		f.t0 = reg_new(e, RC_B32);
		f.t1 = reg_new(e, RC_B32);
		f.zero = reg_new(e, RC_B32);
		f.x = reg_new(e, RC_B32);
		f.sel = reg_new(e, RC_B32);
		f.m = reg_new(e, RC_B32);
		f.s = reg_new(e, RC_B32);
		reg_array(e, RC_B32, f.h, 2);
		reg_array(e, RC_B16, f.hh, 4);
	}

	emit_block(e, "indexer.score");
	label_new(e, loop, sizeof loop, "key");
	label_new(e, heads, sizeof heads, "head");
	label_new(e, done, sizeof done, "keys_done");
	if (fp4)
		emitf(e, "\tmov.b32 %s, 0x%08x;\n\tmov.b32 %s, 0x%08x;\n\tmov.b32 %s, 0;\n", f.t0.s, tab[0], f.t1.s,
		      tab[1], f.zero.s);
	/* keys tid + 256·(split + splits·m), the part's local keys l = tid + 256·m */
	emitf(e, "\tshl.b32 %s, %s, 8;\n\tmad.lo.u32 %s, %s, %d, %s;\n\tmov.u32 %s, %s;\n", stride.s, r->splits.s, j.s,
	      r->split.s, IDX_THREADS, r->tid.s, l.s, r->tid.s);
	emitf(e, "\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->n.s, p.s, done);
	emit_label(e, loop);
	/* the key's page: K + block_table[b, j / ps]·page_bytes */
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", t.s, j.s, c->log2ps,
	      a.s, t.s, a.s, r->bt.s, a.s);
	emitf(e, "\tld.global.nc.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", pg.s, a.s, o.s,
	      pg.s, c->page_bytes, pb.s, r->kv.s, o.s);
	/* row j % ps at key_bytes·offset, its scale at ps·key_bytes + 4·offset */
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", t.s, j.s, c->ps - 1,
	      o.s, t.s, c->fmt->key_bytes, a.s, pb.s, o.s);
	for (int i = 0; i < words / 4; i++)
		emitf(e, "\tld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", w[4 * i].s, w[4 * i + 1].s,
		      w[4 * i + 2].s, w[4 * i + 3].s, a.s, 16 * i);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, t.s, c->fmt->scale_bytes, a.s, pb.s, o.s);
	if (!fp4) {
		emitf(e, "\tld.global.nc.f32 %s, [%s+%d];\n", sc.s, a.s, c->ps * c->fmt->key_bytes);
		for (int i = 0; i < 32; i++)
			emit_fp8_word(e, w[i], k + 4 * i, hb, hf, hh);
	} else if (nv) {
		/* eight UE4M3 scales, byte g for values 16g..16g+15: E4M3 codes
		 * with the sign bit clear, so the FP8 widening decodes them
		 * exactly (docs/indexer.md, "NVFP4 keys"); K_global applies to
		 * the dot product, as the fp8 key's scale */
		emitf(e, "\tld.global.nc.v2.u32 {%s, %s}, [%s+%d];\n", ex.s, t.s, a.s, c->ps * c->fmt->key_bytes);
		emit_fp8_word(e, ex, gs, hb, hf, hh);
		emit_fp8_word(e, t, gs + 4, hb, hf, hh);
		for (int i = 0; i < 16; i++)
			emit_fp4_word(e, w[i], k + 8 * i, gs[i / 2], &f);
	} else {
		/* four UE8M0 exponents, byte g for values 32g..32g+31: 2^(e-127)
		 * as f32 bits e << 23 (e = 0: 2^-127, the denormal 0x00400000) */
		emitf(e, "\tld.global.nc.u32 %s, [%s+%d];\n", ex.s, a.s, c->ps * c->fmt->key_bytes);
		for (int g = 0; g < 4; g++) {
			emitf(e, "\tbfe.u32 %s, %s, %d, 8;\n\tshl.b32 %s, %s, 23;\n", t.s, ex.s, 8 * g, t.s, t.s);
			emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\tselp.b32 %s, 0x00400000, %s, %s;\n\tmov.b32 %s, %s;\n", p.s,
			      t.s, t.s, t.s, p.s, gs[g].s, t.s);
		}
		for (int i = 0; i < 16; i++)
			emit_fp4_word(e, w[i], k + 8 * i, gs[i / 4], &f);
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
	if (!fp4)
		emitf(e, "\tmul.f32 %s, %s, %s;\n", dot[0].s, dot[0].s, sc.s);
	else if (nv)
		emitf(e, "\tmul.f32 %s, %s, %s;\n", dot[0].s, dot[0].s, r->kglobal.s);
	emitf(e, "\tmax.f32 %s, %s, 0f00000000;\n", dot[0].s, dot[0].s);
	emitf(e, "\tld.shared.f32 %s, [%s];\n\tfma.rn.f32 %s, %s, %s, %s;\n", wv.s, wa.s, acc.s, wv.s, dot[0].s,
	      acc.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tadd.u32 %s, %s, 4;\n", qa.s, qa.s, 4 * D, wa.s, wa.s);
	emitf(e, "\tsub.u32 %s, %s, 1;\n\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", hl.s, hl.s, p.s, hl.s, p.s,
	      heads);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.f32 [%s], %s;\n", a.s, j.s, a.s,
	      a.s, r->logits.s, a.s, acc.s);
	indexer_emit_keep(e, c, r, l, acc, NULL);
	emit_block(e, "indexer.score");
	emitf(e, "\tadd.u32 %s, %s, %d;\n", l.s, l.s, IDX_THREADS);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, stride.s, p.s, j.s,
	      r->n.s, p.s, loop);
	emit_label(e, done);
	return 0;
}

const char indexer_how_fma[] =
	"f32 FMA, one key per thread: 128 values widened to f32 in registers, each head's q read from shared memory (broadcast)";
