/* The indexer family (gen/indexer.h): parameters, key-cache formats, the
 * configuration, the prologue (query heads and weights into shared memory,
 * the row's visible keys), ABI and plan. The scoring is the target's
 * (IndexerOps.score); the fused top-k after it is gen/indexer_topk.c. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "family.h"
#include "indexer.h"
#include "ops.h"
#include "select.h"
#include "w4a8.h"

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
	{"topk", PK_INT, P(topk), NULL, 0, 2048, 1, "512",
	 "indices kept per query row; 0: the scoring alone, writing the logits and no indices", NULL},
	{"page-size", PK_INT, P(page_size), "16,32,64,128", 0, 0, 0, "64", "keys per cache page", NULL},
	{"score", PK_ENUM, P(score), "fma,wgmma,tcgen05", 0, 0, 0, "fma",
	 "fma: f32 FMA, one key per thread; wgmma (sm_90a), tcgen05 (sm_100a): FP8 tensor cores over key tiles (fp8 keys, at most 64 heads)",
	 NULL},
};

/* Why --score refuses a key format (by IndexerOps.mma_fp4): the rest of
 * "takes fp8 keys..." */
static const char *const fp4_refusal[] = {
	[IDX_MMA_FP4_NONE] = " (E4M3 operands)",
	[IDX_MMA_FP4_BLOCK_SCALED] = " or fp4 (NVFP4's UE4M3 factors per 16 need kind::mxf4nvf4, E2M1 on both "
	                             "operands, and Q is E4M3)",
	[IDX_MMA_FP4_E4M3] = " or fp4 (an NVFP4 value, E2M1 times a UE4M3 factor, has up to 6 significant bits; "
	                     "E4M3 holds 4)",
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
	c->log2ps = log2_ceil(c->ps);
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
	if (c->mma && c->fmt->value_bits != 8 && (c->t->indexer->mma_fp4 == IDX_MMA_FP4_NONE || c->fmt->nv))
		return kg_fail(err, "--format=%s: --score %s takes fp8 keys%s", c->fmt->name, score,
		               fp4_refusal[c->t->indexer->mma_fp4]);
	c->fp4_e4m3 = c->mma && c->fmt->value_bits == 4 && c->t->indexer->mma_fp4 == IDX_MMA_FP4_E4M3;
	plan_init(&c->plan, c->t);
	c->plan.threads = IDX_THREADS;
	if (c->mma) {
		/* 128-byte swizzled K-major tiles: rows of 128 E4M3 (docs/hardware.md,
		 * "Canonical layouts, LBO and SBO"); one Q tile, and `bufs` key
		 * tiles per warpgroup (a ring where fp8 tiles are copied ahead) */
		c->bufs = c->t->indexer->copy_bufs && c->fmt->value_bits == 8 ? c->t->indexer->copy_bufs : 1;
		c->r_q = plan_smem(&c->plan, "query heads (E4M3 tile)", 64u * 128u, 1024, 1);
		c->r_tiles = plan_smem(&c->plan, "key tiles (E4M3)", (uint32_t)IDX_TILE * 128u, 1024,
		                       IDX_THREADS / 128 * c->bufs);
		c->r_scales = plan_smem(&c->plan, "key tile scales", 4u * IDX_TILE, 16, IDX_THREADS / 128 * c->bufs);
		if (c->t->indexer->head_sums)
			c->r_sums = plan_smem(&c->plan, "per-warp head sums", 4u * 4u * IDX_TILE, 16, IDX_THREADS / 128);
		c->r_w = plan_smem(&c->plan, "head weights (f32)", 4u * 64u, 16, 1);
		if (c->fp4_e4m3)
			c->r_lut = plan_smem(&c->plan, "E2M1 -> E4M3 byte tables", 8u * W4A8_NLUT, 16, 1);
	} else {
		c->r_q = plan_smem(&c->plan, "query heads (f32)", 4u * (uint32_t)(c->heads * c->fmt->d), 16, 1);
		c->r_w = plan_smem(&c->plan, "head weights (f32)", 4u * (uint32_t)c->heads, 16, 1);
	}
	/* the fused top-k (docs/indexer.md, "Fused top-k"): windows A and B,
	 * each keys then row positions (the first round's 2·win keys alone
	 * in both), and three sets of histograms; none for the logits alone */
	c->unit = c->mma ? c->t->indexer->unit_mma : IDX_THREADS;
	if (c->topk) {
		c->win = 2 * c->topk > IDX_WIN_MIN ? pow2_ceil(2 * c->topk) : IDX_WIN_MIN;
		c->r_keys = plan_smem(&c->plan, "top-k windows (keys, positions)", 16u * (uint32_t)c->win, 16, 1);
		c->r_hist = plan_smem(&c->plan, "radix histograms", 4u * SEL_BINS, 16, IDX_HISTS);
		c->r_scan = plan_smem(&c->plan, "bin scan warp totals", 4u * SEL_BINS / 32, 16, 1);
		c->r_state = plan_smem(&c->plan, "select state", 32, 16, 1);
	}
	if (c->mma && c->t->indexer->plan_mma && c->t->indexer->plan_mma(c, err) < 0)
		return -1;
	plan_role(&c->plan, "all", 0, IDX_THREADS / 32, 0,
	          c->topk ? "score keys (one per thread), then select the top-k together"
	                  : "score keys (one per thread), then fill the masked logits with -inf");
	if (c->topk)
		snprintf(c->name, sizeof c->name, "indexer_%s_h%d_k%dp%d%s_%s", c->fmt->name, c->heads, c->topk, c->ps,
		         c->mma ? "_mma" : "", c->t->tag);
	else
		snprintf(c->name, sizeof c->name, "indexer_%s_h%d_logits_p%d%s_%s", c->fmt->name, c->heads, c->ps,
		         c->mma ? "_mma" : "", c->t->tag);
	return plan_check(&c->plan, err);
}

/* CTA (x, y, z) = part z of query row x of sequence y. n = the keys the
 * row sees:
 * L = seq_lens[y] clamped to [0, min(max_len, max_pages·page_size)], row x
 * of s_q is position L - s_q + x, so it sees keys 0 .. L - s_q + x (n
 * clamped to [0, L]). The query heads go to shared memory as f32 (E4M3 ->
 * f16 -> f32, exact) for the FMA scoring, as the E4M3 tile the MMAs read
 * for the tensor-core scorings; the weights as they are. */
static void
emit_prologue(Emit *e, const IndexerCfg *c, IndexerRegs *r)
{
	int words = c->heads * c->fmt->d / 4, iters = (words + IDX_THREADS - 1) / IDX_THREADS;
	Reg t = reg_new(e, RC_B32), sq = reg_new(e, RC_B32), len = reg_new(e, RC_B32), mp = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), cap = reg_new(e, RC_B64), x = reg_new(e, RC_B32);
	Reg qs = reg_new(e, RC_B32), ws = reg_new(e, RC_B32), w = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	Reg hb[2], hf[2], hh[4], f[4];
	char skip[48];

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
	op_param_global(e, a, "seq_lens");
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
	op_param_global(e, r->bt, "block_table");
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n", o.s, r->b.s, mp.s,
	      o.s, o.s, r->bt.s, r->bt.s, o.s);
	op_param_global(e, r->kv, "K");
	if (c->fmt->nv) {
		r->kglobal = reg_new(e, RC_F32);
		op_param_global(e, a, "K_global");
		emitf(e, "\tld.global.nc.f32 %s, [%s];\n", r->kglobal.s, a.s);
	}
	op_param_global(e, r->logits, "logits");
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s,
	      r->max_len.s, o.s, o.s, r->logits.s, r->logits.s, o.s);
	if (c->mma) {
		/* the tensor-core scorings' Q tile (64 rows, the heads' E4M3 and
		 * zero rows past them), read by the async proxy (their MMAs)
		 * after the barrier below, and fenced for it here unless the
		 * scoring fences every thread's writes before a CTA barrier
		 * anyway (IndexerOps.q_fenced) */
		emitf(e, "\tadd.u32 %s, %s, %u;\n", qs.s, r->base.s, c->plan.smem[c->r_q].offset);
		indexer_emit_q_tile(e, c, r, qs, r->tid, 64, IDX_THREADS);
		if (!c->t->indexer->q_fenced)
			emitf(e, "\tfence.proxy.async.shared::cta;\n");
	} else {
		/* Q row: heads·128 E4M3; thread tid converts words tid + 256i */
		op_param_global(e, a, "Q");
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, c->heads * c->fmt->d,
		      a.s, a.s, o.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r->tid.s, a.s, a.s, o.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 16, %s;\n", qs.s, r->base.s,
		      c->plan.smem[c->r_q].offset, qs.s, r->tid.s, qs.s);
		for (int i = 0; i < iters; i++) {
			emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n", p.s, r->tid.s, words - IDX_THREADS * i);
			emitf(e, "\t@%s ld.global.nc.u32 %s, [%s+%d];\n", p.s, w.s, a.s, 4 * IDX_THREADS * i);
			/* byte 2k+1 of a pair lands in the upper f16 (PTX ISA "cvt") */
			emitf(e, "\tmov.b32 {%s, %s}, %s;\n", hb[0].s, hb[1].s, w.s);
			emitf(e, "\tcvt.rn.f16x2.e4m3x2 %s, %s;\n\tcvt.rn.f16x2.e4m3x2 %s, %s;\n", hf[0].s, hb[0].s,
			      hf[1].s, hb[1].s);
			emitf(e, "\tmov.b32 {%s, %s}, %s;\n\tmov.b32 {%s, %s}, %s;\n", hh[0].s, hh[1].s, hf[0].s,
			      hh[2].s, hh[3].s, hf[1].s);
			for (int k = 0; k < 4; k++)
				emitf(e, "\tcvt.f32.f16 %s, %s;\n", f[k].s, hh[k].s);
			emitf(e, "\t@%s st.shared.v4.f32 [%s+%d], {%s, %s, %s, %s};\n", p.s, qs.s, 16 * IDX_THREADS * i,
			      f[0].s, f[1].s, f[2].s, f[3].s);
		}
	}
	/* weights[row, 0 .. heads-1] */
	op_param_global(e, a, "weights");
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
	if (c->topk) {
		/* the join's flag (state word 4): no part has finished yet */
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s st.shared.u32 [%s+16], 0;\n", qs.s,
		      r->base.s, c->plan.smem[c->r_state].offset, p.s, r->tid.s, p.s, qs.s);
		/* the top-k's histograms, one per pass of each set, so no pass
		 * waits for a clear */
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 4, %s;\n", ws.s, r->base.s,
		      c->plan.smem[c->r_hist].offset, ws.s, r->tid.s, ws.s);
		for (int i = 0; i < SEL_BINS * IDX_HISTS / IDX_THREADS; i++)
			emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", ws.s, 4 * IDX_THREADS * i);
	}
	if (c->fp4_e4m3) {
		/* the E4M3 byte tables the key gather looks fp4 codes up in */
		label_new(e, skip, sizeof skip, "fp4_tables_done");
		emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->tid.s, p.s, skip);
		emitf(e, "\tadd.u32 %s, %s, %u;\n", qs.s, r->base.s, c->plan.smem[c->r_lut].offset);
		w4a8_emit_tables(e, qs, w);
		emit_label(e, skip);
	}
	op_bar_sync_why(e, 0, IDX_THREADS,
	                c->topk ? "query heads, weights and zeroed histograms in shared memory"
	                        : "query heads and weights in shared memory");
}

static void
indexer_abi(const IndexerCfg *c, const char *args, KernelAbi *k)
{
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
	abi_ptr(k, "Q", DT_E4M3, "Q[batch,s_q,H,%d]", c->fmt->d);
	abi_ptr(k, "weights", DT_F32, "weights[batch,s_q,H]");
	abi_ptr(k, "K", DT_U8, "K[pages,%u]", c->page_bytes);
	if (c->fmt->nv)
		abi_ptr(k, "K_global", DT_F32, "K_global[1]");
	abi_ptr(k, "block_table", DT_S32, "block_table[batch,max_pages]");
	abi_ptr(k, "seq_lens", DT_S32, "seq_lens[batch]");
	abi_ptr(k, "logits", DT_F32, "logits[batch,s_q,max_len]");
	if (c->topk) {
		abi_ptr(k, "indices", DT_S32, "indices[batch,s_q,%d]", c->topk);
		abi_ptr(k, "counters", DT_S32, "counters[batch,s_q]");
		abi_ptr(k, "work", DT_S32, "work[2,batch,s_q,splits*%d]", c->topk);
	}
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
	if (rc == 0 && c.topk) {
		/* the logits and the keys kept for the chunk select's first
		 * round are stored by other threads than it reads them with */
		op_bar_sync_why(&e, 0, IDX_THREADS, "every logit stored and kept");
		indexer_emit_topk(&e, &c, &r);
	} else if (rc == 0) {
		/* the logits alone: the masked ones are positions no part's
		 * scoring stores, so no barrier orders the two */
		indexer_emit_fill(&e, &r, 1);
	}
	if (rc == 0)
		emitf(&e, "\tret;\n");
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
	if (!c.topk) {
		buf_printf(text, "top-k           none (--topk 0): the logits alone, no indices; each of a row's CTAs writes -inf at the masked positions of its share\n");
	} else {
		buf_printf(text, "top-k           %d, fused: each CTA selects the top-%d of its part's logits (radix, up to 4 passes of 8 bits, ending once the k-th key's bin is taken whole, a 256-bin scan; the first %d keys as the scoring kept them, then rounds over two windows of %d keys in shared memory), -1 padding below %d keys\n",
		           c.topk, c.topk, 2 * c.win, c.win, c.topk);
		buf_printf(text, "merge           splits > 1: each CTA writes its %d candidates (key, position) to work[2, batch, s_q, splits*%d]; the row's last CTA (counters) merges them in rounds of %d\n",
		           c.topk, c.topk, 2 * c.win);
	}
	buf_printf(text, "grid            s_q x batch x splits: CTAs of %d threads, splits (run time) per query row, parts of %d keys interleaved\n",
	           IDX_THREADS, c.unit);
	plan_print(&c.plan, text);
	return 0;
}

const Family family_indexer = {
	"indexer",
	"DeepSeek lightning indexer: FP8/FP4 key scoring over a paged cache fused with top-k (decode's sparse indices), or the logits alone",
	indexer_params,
	sizeof indexer_params / sizeof indexer_params[0],
	sizeof(IndexerParams),
	indexer_generate,
	indexer_plan,
};
