/* The indexer family (gen/indexer.h): parameters, key-cache formats, the
 * configuration, the prologue (query heads and weights into shared memory,
 * the row's visible keys), the -inf fill of masked logits, the top-k select
 * (a radix select over the row's logits), ABI and plan. The scoring is the
 * target's (IndexerOps.score). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "family.h"
#include "indexer.h"
#include "ops.h"
#include "select.h"

#define P(f) offsetof(IndexerParams, f)

/* Columns: name, key elements, key bytes, scale bytes, value bits, values
 * per scale. A page of ps keys holds the ps key rows, then the ps keys'
 * scales. fp8: 128 E4M3 bytes and one fp32 scale per key (DeepGEMM's
 * paged indexer cache, docs/ABI.md "indexer"); fp4: 64 bytes of E2M1 (two
 * a byte) and four UE8M0 exponents, one per 32 values (docs/indexer.md,
 * "FP4 keys"); nvfp4: the same 64 bytes of E2M1, eight UE4M3 scales, one
 * per 16 values, and one fp32 scale for the whole cache (docs/indexer.md,
 * "NVFP4 keys"). */
const IndexerFormat indexer_formats[] = {
	[IDX_FMT_FP8] = {"fp8", 128, 128, 4, 8, 0, 0},
	[IDX_FMT_FP4] = {"fp4", 128, 64, 4, 4, 32, 0},
	[IDX_FMT_NVFP4] = {"nvfp4", 128, 64, 8, 4, 16, 1},
};

uint32_t
indexer_page_bytes(const IndexerFormat *fmt, int ps)
{
	return (uint32_t)ps * (uint32_t)(fmt->key_bytes + fmt->scale_bytes);
}

/* See family.h for the columns. */
static const ParamSpec indexer_params[] = {
	{"target", PK_TARGET, P(target), "sm_90a,sm_100a", 0, 0, 0, "sm_90a",
	 "CTAs of 256 threads per query row (splits at run time), FMA or tensor-core scoring, radix top-k", NULL},
	{"format", PK_ENUM, P(format), "fp8,fp4,nvfp4", 0, 0, 0, "fp8",
	 "key cache format (docs/ABI.md \"indexer\")", NULL},
	{"heads", PK_INT, P(heads), NULL, 1, 128, 1, "64", "indexer query heads", NULL},
	{"topk", PK_INT, P(topk), NULL, 1, 2048, 1, "512", "indices kept per query row", NULL},
	{"page-size", PK_INT, P(page_size), "16,32,64,128", 0, 0, 0, "64", "keys per cache page", NULL},
	{"score", PK_ENUM, P(score), "fma,wgmma,tcgen05", 0, 0, 0, "fma",
	 "fma: f32 FMA, one key per thread; wgmma (sm_90a), tcgen05 (sm_100a): FP8 tensor cores over key tiles (fp8 keys, at most 64 heads)",
	 NULL},
};

static int
indexer_configure(IndexerCfg *c, const IndexerParams *p, KgErr *err)
{
	char score[16], want[16];

	memset(c, 0, sizeof *c);
	c->t = &targets[p->target];
	if (!c->t->indexer)
		return kg_fail(err, "--target=%s: indexer is not generated for this target yet", c->t->name);
	c->fmt = &indexer_formats[p->format];
	c->heads = p->heads;
	c->topk = p->topk;
	c->ps = p->page_size;
	while ((1 << c->log2ps) < c->ps)
		c->log2ps++;
	c->page_bytes = indexer_page_bytes(c->fmt, c->ps);
	c->mma = p->score != IDX_SCORE_FMA;
	family_list_word(indexer_params[5].allowed, p->score, score, sizeof score);
	if (c->mma && !c->t->indexer->score_mma)
		return kg_fail(err, "--score=%s: %s has no tensor-core indexer scoring yet", score, c->t->name);
	if (c->mma && p->score != c->t->indexer->mma_score) {
		family_list_word(indexer_params[5].allowed, c->t->indexer->mma_score, want, sizeof want);
		return kg_fail(err, "--score=%s: %s scores on the tensor cores with --score %s", score, c->t->name, want);
	}
	if (c->mma && c->heads > 64)
		return kg_fail(err, "--heads=%d: --score %s takes at most 64 heads (one N = 64 MMA operand)", c->heads,
		               score);
	if (c->mma && c->fmt->value_bits != 8)
		return kg_fail(err, "--format=%s: --score %s takes fp8 keys (E4M3 operands)", c->fmt->name, score);
	plan_init(&c->plan, c->t);
	c->plan.threads = IDX_THREADS;
	if (c->mma) {
		/* 128-byte swizzled K-major tiles: rows of 128 E4M3 (docs/hardware.md,
		 * "Canonical layouts, LBO and SBO"); one key tile per warpgroup */
		c->r_q = plan_smem(&c->plan, "query heads (E4M3 tiles)", 64u * 128u, 1024, IDX_THREADS / 128);
		c->r_tiles = plan_smem(&c->plan, "key tiles (E4M3)", (uint32_t)IDX_TILE * 128u, 1024, IDX_THREADS / 128);
		c->r_scales = plan_smem(&c->plan, "key tile scales", 4u * IDX_TILE, 16, IDX_THREADS / 128);
		c->r_sums = plan_smem(&c->plan, "per-warp head sums", 4u * 4u * IDX_TILE, 16, IDX_THREADS / 128);
		c->r_w = plan_smem(&c->plan, "head weights (f32)", 4u * 64u, 16, 1);
	} else {
		c->r_q = plan_smem(&c->plan, "query heads (f32)", 4u * (uint32_t)(c->heads * c->fmt->d), 16, 1);
		c->r_w = plan_smem(&c->plan, "head weights (f32)", 4u * (uint32_t)c->heads, 16, 1);
	}
	c->r_hist = plan_smem(&c->plan, "radix histograms", 4u * IDX_BINS, 16, IDX_PASSES);
	c->r_state = plan_smem(&c->plan, "select state", 16, 16, 1);
	if (c->mma && c->t->indexer->plan_mma && c->t->indexer->plan_mma(c, err) < 0)
		return -1;
	plan_role(&c->plan, "all", 0, IDX_THREADS / 32, 0,
	          "score keys (one per thread), then select the top-k together");
	snprintf(c->name, sizeof c->name, "indexer_%s_h%d_k%dp%d%s_%s", c->fmt->name, c->heads, c->topk, c->ps,
	         c->mma ? "_mma" : "", c->t->tag);
	return plan_check(&c->plan, err);
}

static void
load_param_ptr(Emit *e, Reg dst, const char *name)
{
	emitf(e, "\tld.param.u64 %s, [p_%s];\n\tcvta.to.global.u64 %s, %s;\n", dst.s, name, dst.s, dst.s);
}

/* CTA (x, y, z) = part z of query row x of sequence y. n = the keys the
 * row sees:
 * L = seq_lens[y] clamped to [0, min(max_len, max_pages·page_size)], row x
 * of s_q is position L - s_q + x, so it sees keys 0 .. L - s_q + x (n
 * clamped to [0, L]). The query heads go to shared memory as f32 (E4M3 ->
 * f16 -> f32, exact), the weights as they are. */
static void
emit_prologue(Emit *e, const IndexerCfg *c, IndexerRegs *r)
{
	int words = c->heads * c->fmt->d / 4, iters = (words + IDX_THREADS - 1) / IDX_THREADS;
	Reg t = reg_new(e, RC_B32), sq = reg_new(e, RC_B32), len = reg_new(e, RC_B32), mp = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), cap = reg_new(e, RC_B64), x = reg_new(e, RC_B32);
	Reg qs = reg_new(e, RC_B32), ws = reg_new(e, RC_B32), w = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	Reg hb[2], hf[2], hh[4], f[4];

	r->tid = reg_new(e, RC_B32);
	r->b = reg_new(e, RC_B32);
	r->row = reg_new(e, RC_B32);
	r->n = reg_new(e, RC_B32);
	r->base = reg_new(e, RC_B32);
	r->bt = reg_new(e, RC_B64);
	r->kv = reg_new(e, RC_B64);
	r->logits = reg_new(e, RC_B64);
	r->max_len = reg_new(e, RC_B32);
	r->split = reg_new(e, RC_B32);
	r->splits = reg_new(e, RC_B32);
	reg_array(e, RC_B16, hb, 2);
	reg_array(e, RC_B32, hf, 2);
	reg_array(e, RC_B16, hh, 4);
	reg_array(e, RC_F32, f, 4);

	emit_block(e, "indexer.prologue");
	emitf(e, "\tmov.u32 %s, %%tid.x;\n\tmov.u32 %s, %%ctaid.x;\n\tmov.u32 %s, %%ctaid.y;\n", r->tid.s, t.s,
	      r->b.s);
	emitf(e, "\tld.param.u32 %s, [p_s_q];\n\tmad.lo.u32 %s, %s, %s, %s;\n", sq.s, r->row.s, r->b.s, sq.s, t.s);
	emitf(e, "\tmov.u32 %s, %%ctaid.z;\n\tld.param.u32 %s, [p_splits];\n", r->split.s, r->splits.s);
	emitf(e, "\tmov.u32 %s, kg_smem;\n\tadd.u32 %s, %s, %u;\n\tand.b32 %s, %s, %d;\n", x.s, r->base.s, x.s,
	      c->plan.smem_align - 1, r->base.s, r->base.s, -(int)c->plan.smem_align);
	/* L, clamped; the bound in 64 bits so max_pages·page_size cannot wrap */
	load_param_ptr(e, a, "seq_lens");
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tld.global.nc.s32 %s, [%s];\n", o.s, r->b.s,
	      a.s, a.s, o.s, len.s, a.s);
	emitf(e, "\tld.param.u32 %s, [p_max_len];\n\tld.param.u32 %s, [p_max_pages];\n", r->max_len.s, mp.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tcvt.u64.u32 %s, %s;\n\tmin.u64 %s, %s, %s;\n", cap.s, mp.s, c->ps,
	      o.s, r->max_len.s, cap.s, cap.s, o.s);
	emitf(e, "\tcvt.u32.u64 %s, %s;\n\tmax.s32 %s, %s, 0;\n\tmin.u32 %s, %s, %s;\n", x.s, cap.s, len.s, len.s,
	      len.s, len.s, x.s);
	emitf(e, "\tsub.s32 %s, %s, %s;\n\tadd.s32 %s, %s, %s;\n\tadd.s32 %s, %s, 1;\n", r->n.s, len.s, sq.s,
	      r->n.s, r->n.s, t.s, r->n.s, r->n.s);
	emitf(e, "\tmax.s32 %s, %s, 0;\n\tmin.s32 %s, %s, %s;\n", r->n.s, r->n.s, r->n.s, r->n.s, len.s);
	/* the row's block table, the cache, the row's logits (row·max_len) */
	load_param_ptr(e, r->bt, "block_table");
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n", o.s, r->b.s, mp.s,
	      o.s, o.s, r->bt.s, r->bt.s, o.s);
	load_param_ptr(e, r->kv, "K");
	if (c->fmt->nv) {
		r->kglobal = reg_new(e, RC_F32);
		load_param_ptr(e, a, "K_global");
		emitf(e, "\tld.global.nc.f32 %s, [%s];\n", r->kglobal.s, a.s);
	}
	load_param_ptr(e, r->logits, "logits");
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s,
	      r->max_len.s, o.s, o.s, r->logits.s, r->logits.s, o.s);
	/* Q row: heads·128 E4M3; thread tid converts words tid + 256i (the
	 * tensor-core scoring stages Q itself) */
	load_param_ptr(e, a, "Q");
	if (c->mma)
		iters = 0;
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, c->heads * c->fmt->d, a.s,
	      a.s, o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r->tid.s, a.s, a.s, o.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 16, %s;\n", qs.s, r->base.s,
	      c->plan.smem[c->r_q].offset, qs.s, r->tid.s, qs.s);
	for (int i = 0; i < iters; i++) {
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n", p.s, r->tid.s, words - IDX_THREADS * i);
		emitf(e, "\t@%s ld.global.nc.u32 %s, [%s+%d];\n", p.s, w.s, a.s, 4 * IDX_THREADS * i);
		/* byte 2k+1 of a pair lands in the upper f16 (PTX ISA "cvt") */
		emitf(e, "\tmov.b32 {%s, %s}, %s;\n", hb[0].s, hb[1].s, w.s);
		emitf(e, "\tcvt.rn.f16x2.e4m3x2 %s, %s;\n\tcvt.rn.f16x2.e4m3x2 %s, %s;\n", hf[0].s, hb[0].s, hf[1].s,
		      hb[1].s);
		emitf(e, "\tmov.b32 {%s, %s}, %s;\n\tmov.b32 {%s, %s}, %s;\n", hh[0].s, hh[1].s, hf[0].s, hh[2].s,
		      hh[3].s, hf[1].s);
		for (int k = 0; k < 4; k++)
			emitf(e, "\tcvt.f32.f16 %s, %s;\n", f[k].s, hh[k].s);
		emitf(e, "\t@%s st.shared.v4.f32 [%s+%d], {%s, %s, %s, %s};\n", p.s, qs.s, 16 * IDX_THREADS * i,
		      f[0].s, f[1].s, f[2].s, f[3].s);
	}
	/* weights[row, 0 .. heads-1] */
	load_param_ptr(e, a, "weights");
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, 4 * c->heads, a.s, a.s,
	      o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r->tid.s, a.s, a.s, o.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 4, %s;\n", ws.s, r->base.s,
	      c->plan.smem[c->r_w].offset, ws.s, r->tid.s, ws.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\t@%s ld.global.nc.f32 %s, [%s];\n\t@%s st.shared.f32 [%s], %s;\n",
	      p.s, r->tid.s, c->heads, p.s, f[0].s, a.s, p.s, ws.s, f[0].s);
	if (c->mma) {
		/* the MMA's rows past the heads: weight 0 (their Q rows are 0 too) */
		emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\tsetp.lt.and.u32 %s, %s, 64, %s;\n", p.s, r->tid.s, c->heads, p.s,
		      r->tid.s, p.s);
		emitf(e, "\t@%s st.shared.f32 [%s], 0f00000000;\n", p.s, ws.s);
	}
	/* the join's flag (state word 3): no part has finished yet */
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s st.shared.u32 [%s+12], 0;\n", qs.s, r->base.s,
	      c->plan.smem[c->r_state].offset, p.s, r->tid.s, p.s, qs.s);
	/* the select's histograms, one per pass, so no pass waits for a clear */
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 4, %s;\n", ws.s, r->base.s,
	      c->plan.smem[c->r_hist].offset, ws.s, r->tid.s, ws.s);
	for (int i = 0; i < IDX_BINS * IDX_PASSES / IDX_THREADS; i++)
		emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", ws.s, 4 * IDX_THREADS * i);
	op_bar_sync_why(e, 0, IDX_THREADS, "query heads, weights and zeroed histograms in shared memory");
}

/* Split rows (splits > 1): every thread, its logits stored, counts itself
 * in counters[row] with an acq_rel atomic (PTX ISA "Memory consistency
 * model": the release covers its own stores, and the thread that brings
 * the count to splits·256 acquires every other's). That last thread
 * raises its CTA's flag (zeroed in the prologue) and sets the counter back
 * to 0, so the counters stay zero between launches (docs/ABI.md
 * "indexer"); after a CTA barrier its CTA selects over every part's
 * logits and the other parts exit. One part: the tensor-core scoring still
 * needs a CTA barrier before the select (its logits are stored by other
 * threads), the FMA scoring none. */
static void
emit_join(Emit *e, const IndexerCfg *c, const IndexerRegs *r)
{
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), f = reg_new(e, RC_B32), all = reg_new(e, RC_B32);
	Reg p = reg_new(e, RC_PRED), st;
	char single[48], joined[48];
	int lg = 0;

	emit_block(e, "indexer.join");
	st = op_plan_smem(e, &c->plan, r->base, c->r_state);
	label_new(e, single, sizeof single, "one_part");
	label_new(e, joined, sizeof joined, "joined");
	emitf(e, "\tsetp.le.u32 %s, %s, 1;\n\t@%s bra %s;\n", p.s, r->splits.s, p.s, single);
	load_param_ptr(e, a, "counters");
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, a.s, a.s, o.s);
	emitf(e, "\tatom.acq_rel.gpu.global.add.u32 %s, [%s], 1;\n\tadd.u32 %s, %s, 1;\n", f.s, a.s, f.s, f.s);
	while ((1 << lg) < IDX_THREADS)
		lg++;
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tsetp.eq.u32 %s, %s, %s;\n", all.s, r->splits.s, lg, p.s, f.s, all.s);
	emitf(e, "\t@%s st.shared.u32 [%s+12], 1;\n\t@%s st.global.u32 [%s], 0;\n", p.s, st.s, p.s, a.s);
	op_bar_sync_why(e, 0, IDX_THREADS, "the last part's flag raised");
	emitf(e, "\tld.shared.u32 %s, [%s+12];\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s exit;\n\tbra.uni %s;\n", f.s, st.s,
	      p.s, f.s, p.s, joined);
	emit_label(e, single);
	if (c->mma)
		op_bar_sync_why(e, 0, IDX_THREADS, "every tile's logits stored");
	emit_label(e, joined);
}

/* logits[row, j] = -inf for the masked keys n <= j < max_len, so the whole
 * row is defined (docs/ABI.md "indexer"). */
static void
emit_fill(Emit *e, const IndexerRegs *r)
{
	Reg j = reg_new(e, RC_B32), a = reg_new(e, RC_B64), p = reg_new(e, RC_PRED);
	char loop[48], done[48];

	emit_block(e, "indexer.fill");
	label_new(e, loop, sizeof loop, "fill");
	label_new(e, done, sizeof done, "fill_done");
	emitf(e, "\tadd.u32 %s, %s, %s;\n", j.s, r->n.s, r->tid.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->max_len.s, p.s, done);
	emit_label(e, loop);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.f32 [%s], 0fFF800000;\n", a.s, j.s,
	      a.s, a.s, r->logits.s, a.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS, p.s,
	      j.s, r->max_len.s, p.s, loop);
	emit_label(e, done);
}

/* v = block_table[b, j / page_size]·page_size + j % page_size: key j as
 * the decode family's index (page·page_size + offset). */
static void
emit_translate(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg v, Reg j, Reg t, Reg a)
{
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", t.s, j.s, c->log2ps,
	      a.s, t.s, a.s, r->bt.s, a.s);
	emitf(e, "\tld.global.nc.u32 %s, [%s];\n\tand.b32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %d, %s;\n", v.s, a.s,
	      t.s, j.s, c->ps - 1, v.s, v.s, c->ps, t.s);
}

/* The top-k of the row's n logits into indices[row, 0 .. K-1].
 * n <= K: keys 0 .. n-1 in order, then -1. Otherwise a radix select over
 * the ordered bits u of the logits (emit_key), 8 bits a pass from the top:
 * each pass histograms the digit of the keys whose higher bits equal the
 * prefix found so far (shared-memory atomics), then thread 0 walks the
 * bins down from 255 to the digit that holds the kk-th largest (kk: how
 * many are still to pick below the prefix). After 4 passes the prefix is
 * the K-th largest key u* and kk the number of keys equal to u* to take:
 * the final pass writes every key above u* (K - kk of them) at slots from
 * one counter and the first kk keys equal to u* that win the second
 * counter after them, so a tie at the K-th score is broken by arrival
 * (docs/ABI.md "indexer": the order within the list is unspecified). */
static void
emit_topk(Emit *e, const IndexerCfg *c, const IndexerRegs *r)
{
	int K = c->topk;
	Reg out = reg_new(e, RC_B64), a = reg_new(e, RC_B64), j = reg_new(e, RC_B32), v = reg_new(e, RC_B32);
	Reg t = reg_new(e, RC_B32), u = reg_new(e, RC_B32), m = reg_new(e, RC_B32), prefix = reg_new(e, RC_B32);
	Reg kk = reg_new(e, RC_B32), d = reg_new(e, RC_B32), above = reg_new(e, RC_B32), s = reg_new(e, RC_B32);
	Reg pos = reg_new(e, RC_B32);
	Reg p = reg_new(e, RC_PRED), pg = reg_new(e, RC_PRED), pe = reg_new(e, RC_PRED);
	Reg hist, state;
	char small[48], pad[48], small_done[48], sel[48], done[48], lp[48], walk[48], walked[48], fin[48];
	char fin_done[48], lpd[48], fin_end[48];

	emit_block(e, "indexer.topk");
	hist = op_plan_smem(e, &c->plan, r->base, c->r_hist);
	state = op_plan_smem(e, &c->plan, r->base, c->r_state);
	label_new(e, small, sizeof small, "all_keys");
	label_new(e, pad, sizeof pad, "pad");
	label_new(e, small_done, sizeof small_done, "all_keys_done");
	label_new(e, sel, sizeof sel, "select");
	label_new(e, done, sizeof done, "topk_done");
	load_param_ptr(e, out, "indices");
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", a.s, r->row.s, 4 * K, out.s, out.s, a.s);
	emitf(e, "\tsetp.gt.s32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->n.s, K, p.s, sel);
	/* n <= K: every visible key, then -1 */
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s, K, p.s,
	      small_done);
	emit_label(e, small);
	emitf(e, "\tmov.u32 %s, -1;\n\tsetp.lt.s32 %s, %s, %s;\n\t@!%s bra %s;\n", v.s, p.s, j.s, r->n.s, p.s, pad);
	emit_translate(e, c, r, v, j, t, a);
	emit_label(e, pad);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.s32 [%s], %s;\n", a.s, j.s, a.s,
	      a.s, out.s, a.s, v.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS, p.s,
	      j.s, K, p.s, small);
	emit_label(e, small_done);
	emitf(e, "\tbra.uni %s;\n", done);

	emit_label(e, sel);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, %d;\n", prefix.s, kk.s, K);
	for (int pass = 0; pass < 4; pass++) {
		int shift = 24 - 8 * pass;
		uint32_t mask = pass ? 0xffffffffu << (32 - 8 * pass) : 0;

		label_new(e, lp, sizeof lp, "hist");
		label_new(e, lpd, sizeof lpd, "hist_done");
		label_new(e, walk, sizeof walk, "walk");
		label_new(e, walked, sizeof walked, "walked");
		/* this pass's histogram, zeroed in the prologue */
		if (pass)
			emitf(e, "\tadd.u32 %s, %s, %d;\n", hist.s, hist.s, 4 * IDX_BINS);
		emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s,
		      r->n.s, p.s, lpd);
		emit_label(e, lp);
		/* key j's logit, stored by this thread: a plain load (never
		 * .nc, which may miss this kernel's own stores) */
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tld.global.b32 %s, [%s];\n", a.s, j.s,
		      a.s, a.s, r->logits.s, u.s, a.s);
		sel_emit_key(e, u, m);
		emitf(e, "\tand.b32 %s, %s, 0x%08x;\n\tsetp.eq.u32 %s, %s, %s;\n", t.s, u.s, mask, p.s, t.s,
		      prefix.s);
		emitf(e, "\tshr.u32 %s, %s, %d;\n\tand.b32 %s, %s, 255;\n\tmad.lo.u32 %s, %s, 4, %s;\n", t.s, u.s,
		      shift, t.s, t.s, t.s, t.s, hist.s);
		emitf(e, "\t@%s red.shared.add.u32 [%s], 1;\n", p.s, t.s);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.s32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS,
		      p.s, j.s, r->n.s, p.s, lp);
		emit_label(e, lpd);
		op_bar_sync_why(e, 0, IDX_THREADS, "histogram complete");
		/* thread 0: the bin d where the count from 255 down reaches kk */
		emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->tid.s, p.s, walked);
		emitf(e, "\tmov.u32 %s, 255;\n\tmov.u32 %s, 0;\n", d.s, above.s);
		emit_label(e, walk);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n\tadd.u32 %s, %s, %s;\n", t.s, d.s,
		      hist.s, t.s, t.s, s.s, above.s, t.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tsetp.ne.and.u32 %s, %s, 0, %s;\n", p.s, s.s, kk.s, p.s, d.s,
		      p.s);
		emitf(e, "\t@%s mov.u32 %s, %s;\n\t@%s sub.u32 %s, %s, 1;\n\t@%s bra %s;\n", p.s, above.s, s.s, p.s, d.s,
		      d.s, p.s, walk);
		emitf(e, "\tsub.u32 %s, %s, %s;\n\tshl.b32 %s, %s, %d;\n\tor.b32 %s, %s, %s;\n", kk.s, kk.s, above.s,
		      t.s, d.s, shift, prefix.s, prefix.s, t.s);
		emitf(e, "\tst.shared.v4.u32 [%s], {%s, %s, %s, %s};\n", state.s, prefix.s, kk.s, r->tid.s, r->tid.s);
		emit_label(e, walked);
		op_bar_sync_why(e, 0, IDX_THREADS, "prefix and kk published");
		emitf(e, "\tld.shared.v2.u32 {%s, %s}, [%s];\n", prefix.s, kk.s, state.s);
	}
	/* the final pass: state+8 counts keys above u*, state+12 keys equal
	 * (thread 0 stored zeros there with the last prefix) */
	label_new(e, fin, sizeof fin, "place");
	label_new(e, fin_done, sizeof fin_done, "place_next");
	label_new(e, fin_end, sizeof fin_end, "placed");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s, r->n.s,
	      p.s, fin_end);
	emit_label(e, fin);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tld.global.b32 %s, [%s];\n", a.s, j.s, a.s,
	      a.s, r->logits.s, u.s, a.s);
	sel_emit_key(e, u, m);
	emitf(e, "\tsetp.gt.u32 %s, %s, %s;\n\tsetp.eq.u32 %s, %s, %s;\n", pg.s, u.s, prefix.s, pe.s, u.s, prefix.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+8], 1;\n", pg.s, pos.s, state.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+12], 1;\n", pe.s, s.s, state.s);
	emitf(e, "\t@%s setp.lt.u32 %s, %s, %s;\n", pe.s, pe.s, s.s, kk.s);
	emitf(e, "\t@%s sub.u32 %s, %d, %s;\n\t@%s add.u32 %s, %s, %s;\n", pe.s, pos.s, K, kk.s, pe.s, pos.s, pos.s,
	      s.s);
	emitf(e, "\tor.pred %s, %s, %s;\n\t@!%s bra %s;\n", p.s, pg.s, pe.s, p.s, fin_done);
	emit_translate(e, c, r, v, j, t, a);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.s32 [%s], %s;\n", a.s, pos.s, a.s,
	      a.s, out.s, a.s, v.s);
	emit_label(e, fin_done);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.s32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS, p.s,
	      j.s, r->n.s, p.s, fin);
	emit_label(e, fin_end);
	emit_label(e, done);
}

static void
indexer_abi(const IndexerCfg *c, const char *args, KernelAbi *k)
{
	AbiParam *p;

	memset(k, 0, sizeof *k);
	snprintf(k->kernel, sizeof k->kernel, "%s", c->name);
	k->family = "indexer";
	k->target = c->t;
	snprintf(k->args, sizeof k->args, "%s", args);
	abi_shape(k, "H", "%d", c->heads);
	abi_shape(k, "topk", "%d", c->topk);
	abi_shape(k, "page", "%d", c->ps);
	k->threads = IDX_THREADS;
	k->min_ctas = 1;
	k->cluster[0] = k->cluster[1] = k->cluster[2] = 1;
	k->smem = c->plan.smem_request;
	snprintf(k->grid[0], sizeof k->grid[0], "s_q");
	snprintf(k->grid[1], sizeof k->grid[1], "batch");
	snprintf(k->grid[2], sizeof k->grid[2], "splits");
	p = abi_add(k, ABI_PTR, "Q");
	p->dtype = DT_E4M3;
	snprintf(p->tensor, sizeof p->tensor, "Q[batch,s_q,H,%d]", c->fmt->d);
	p = abi_add(k, ABI_PTR, "weights");
	p->dtype = DT_F32;
	snprintf(p->tensor, sizeof p->tensor, "weights[batch,s_q,H]");
	p = abi_add(k, ABI_PTR, "K");
	p->dtype = DT_U8;
	snprintf(p->tensor, sizeof p->tensor, "K[pages,%u]", c->page_bytes);
	if (c->fmt->nv) {
		p = abi_add(k, ABI_PTR, "K_global");
		p->dtype = DT_F32;
		snprintf(p->tensor, sizeof p->tensor, "K_global[1]");
	}
	p = abi_add(k, ABI_PTR, "block_table");
	p->dtype = DT_S32;
	snprintf(p->tensor, sizeof p->tensor, "block_table[batch,max_pages]");
	p = abi_add(k, ABI_PTR, "seq_lens");
	p->dtype = DT_S32;
	snprintf(p->tensor, sizeof p->tensor, "seq_lens[batch]");
	p = abi_add(k, ABI_PTR, "logits");
	p->dtype = DT_F32;
	snprintf(p->tensor, sizeof p->tensor, "logits[batch,s_q,max_len]");
	p = abi_add(k, ABI_PTR, "indices");
	p->dtype = DT_S32;
	snprintf(p->tensor, sizeof p->tensor, "indices[batch,s_q,%d]", c->topk);
	p = abi_add(k, ABI_PTR, "counters");
	p->dtype = DT_S32;
	snprintf(p->tensor, sizeof p->tensor, "counters[batch,s_q]");
	abi_add(k, ABI_U32, "batch");
	abi_add(k, ABI_U32, "s_q");
	abi_add(k, ABI_U32, "max_len");
	abi_add(k, ABI_U32, "max_pages");
	abi_add(k, ABI_U32, "splits");
}

static int
indexer_generate(const void *params, const char *args, Buf *out, KgErr *err)
{
	IndexerCfg c;
	IndexerRegs r;
	KernelAbi k;
	Emit e;
	int rc;

	if (indexer_configure(&c, params, err) < 0)
		return -1;
	emit_init(&e);
	emit_prologue(&e, &c, &r);
	rc = c.mma ? c.t->indexer->score_mma(&e, &c, &r, err) : c.t->indexer->score(&e, &c, &r, err);
	if (rc == 0) {
		emit_join(&e, &c, &r);
		emit_fill(&e, &r);
		emit_topk(&e, &c, &r);
		emitf(&e, "\tret;\n");
	}
	if (rc == 0 && e.oom)
		rc = kg_fail(err, "out of memory");
	if (rc == 0) {
		indexer_abi(&c, args, &k);
		abi_module(&k, &e, out);
	}
	emit_free(&e);
	return rc;
}

static int
indexer_plan(const void *params, Buf *text, KgErr *err)
{
	IndexerCfg c;

	if (indexer_configure(&c, params, err) < 0)
		return -1;
	buf_printf(text, "kernel          %s\n", c.name);
	if (c.fmt->nv)
		buf_printf(text, "cache           %s: %d E2M1 values per key (%d bytes), then (after the page's %d key rows) %d UE4M3 scales per key, one per %d values; times K_global (fp32, the whole cache); %u bytes per page of %d keys\n",
		           c.fmt->name, c.fmt->d, c.fmt->key_bytes, c.ps, c.fmt->d / c.fmt->group, c.fmt->group,
		           c.page_bytes, c.ps);
	else if (c.fmt->group)
		buf_printf(text, "cache           %s: %d E2M1 values per key (%d bytes), then (after the page's %d key rows) %d UE8M0 exponents per key, one per %d values; %u bytes per page of %d keys\n",
		           c.fmt->name, c.fmt->d, c.fmt->key_bytes, c.ps, c.fmt->d / c.fmt->group, c.fmt->group,
		           c.page_bytes, c.ps);
	else
		buf_printf(text, "cache           %s: %d E4M3 values per key, then (after the page's %d key rows) one fp32 scale per key; %u bytes per page of %d keys\n",
		           c.fmt->name, c.fmt->d, c.ps, c.page_bytes, c.ps);
	buf_printf(text, "logits          sum over %d heads of w[h]*relu(q[h].k*scale), every visible key; -inf up to max_len\n",
	           c.heads);
	buf_printf(text, "scoring         %s\n", c.mma ? c.t->indexer->how_mma : c.t->indexer->how);
	buf_printf(text, "top-k           %d: radix select, 4 passes of 8 bits over the row's logits (smem histogram), then one placing pass; -1 padding below %d keys\n",
	           c.topk, c.topk);
	buf_printf(text, "grid            s_q x batch x splits: CTAs of %d threads, splits (run time) per query row, the last to finish selects\n",
	           IDX_THREADS);
	plan_print(&c.plan, text);
	return 0;
}

const Family family_indexer = {
	"indexer",
	"DeepSeek lightning indexer: FP8 key scoring over a paged cache fused with top-k (decode's sparse indices)",
	indexer_params,
	sizeof indexer_params / sizeof indexer_params[0],
	sizeof(IndexerParams),
	indexer_generate,
	indexer_plan,
};
