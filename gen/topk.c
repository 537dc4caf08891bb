/* The standalone top-k family (gen/topk.h): parameters, the configuration,
 * and the kernel, all shared by every target (docs/ABI.md "topk";
 * the design: docs/indexer.md, "Standalone top-k"). CTA (x, y) stages
 * chunk x of row y (TK_CHUNK logits, as order-preserving 32-bit keys) in
 * shared memory, building the first radix pass's histogram as it goes,
 * and selects the chunk's top-K by radix select; one CTA per row writes
 * the indices at once, several write their candidates (key and index) to
 * the work buffer, and the last of a row to finish merges the row's
 * candidates by the same select (gen/select.c, the block it shares with
 * the indexer). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "family.h"
#include "ops.h"
#include "select.h"
#include "topk.h"

#define P(f) offsetof(TopkParams, f)

/* See family.h for the columns. */
static const ParamSpec topk_params[] = {
	{"target", PK_TARGET, P(target), "sm_90a,sm_100a", 0, 0, 0, "sm_90a",
	 "any target: CTAs of 512 threads over chunks of 16384 logits, radix select, a merge per row", NULL},
	{"topk", PK_INT, P(topk), NULL, 1, 2048, 1, "512", "indices kept per row", NULL},
};

/* The registers the prologue sets. */
typedef struct TkRegs {
	Reg tid, row, part, parts, n, c; /* c: the keys of this CTA's chunk */
	Reg one;                         /* pred: one CTA per row (parts == 1) */
	Reg base, keys, hist, scan, state, zero;
	Reg out;                         /* global: indices of the row */
	Reg dst;                         /* global: out with one CTA per row, else pk (set after the staging) */
	Reg ck, ci;                      /* global: the row's candidate keys and indices */
	Reg pk, pi;                      /* global: this part's candidate slots */
	Reg j0;                          /* first logit of the chunk in the row */
} TkRegs;

/* Histogram units (TK_BINS words) of one select's set (gen/select.h). */
static int
hist_units(void)
{
	Sel s = {.first_bits = SEL_WIDE_BITS};

	return sel_hist_units(&s);
}

static int
topk_configure(TopkCfg *c, const TopkParams *p, KgErr *err)
{
	memset(c, 0, sizeof *c);
	c->t = &targets[p->target];
	c->topk = p->topk;
	plan_init(&c->plan, c->t);
	c->plan.threads = TK_THREADS;
	c->r_keys = plan_smem(&c->plan, "chunk keys (u32)", 4u * TK_CHUNK, 16, 1);
	/* a set for the chunk's select, then one for the merge */
	c->r_hist = plan_smem(&c->plan, "radix histograms", 4u * TK_BINS, 16, 2 * hist_units());
	c->r_scan = plan_smem(&c->plan, "bin scan warp totals", 4u * TK_THREADS / 32, 16, 1);
	c->r_cand = plan_smem(&c->plan, "candidates (keys, positions)", 8u * TK_CAND, 16, 1);
	c->r_state = plan_smem(&c->plan, "select state", 32, 16, 1);
	plan_role(&c->plan, "all", 0, TK_THREADS / 32, 0,
	          "stage a chunk of logits, select its top-k together; the row's last CTA merges");
	snprintf(c->name, sizeof c->name, "topk_k%d_%s", c->topk, c->t->tag);
	return plan_check(&c->plan, err);
}

/* CTA (x, y) = chunk x of row y, of nctaid.x chunks. The histograms and
 * the state are zeroed; the candidate planes of the work buffer are
 * work[0, y, :] (keys) and work[1, y, :] (indices), parts·K each. */
static void
emit_prologue(Emit *e, const TopkCfg *c, TkRegs *r)
{
	int K = c->topk;
	Reg x = reg_new(e, RC_B32), m = reg_new(e, RC_B32), rows = reg_new(e, RC_B32), a = reg_new(e, RC_B64);
	Reg o = reg_new(e, RC_B64), w = reg_new(e, RC_B64), p = reg_new(e, RC_PRED), h = reg_new(e, RC_B32);

	r->tid = reg_new(e, RC_B32);
	r->row = reg_new(e, RC_B32);
	r->part = reg_new(e, RC_B32);
	r->parts = reg_new(e, RC_B32);
	r->n = reg_new(e, RC_B32);
	r->c = reg_new(e, RC_B32);
	r->one = reg_new(e, RC_PRED);
	r->base = reg_new(e, RC_B32);
	r->zero = reg_new(e, RC_B32);
	r->out = reg_new(e, RC_B64);
	r->dst = reg_new(e, RC_B64);
	r->ck = reg_new(e, RC_B64);
	r->ci = reg_new(e, RC_B64);
	r->pk = reg_new(e, RC_B64);
	r->pi = reg_new(e, RC_B64);
	r->j0 = reg_new(e, RC_B32);

	emit_block(e, "topk.prologue");
	emitf(e, "\tmov.u32 %s, %%tid.x;\n\tmov.u32 %s, %%ctaid.x;\n\tmov.u32 %s, %%nctaid.x;\n", r->tid.s, r->part.s,
	      r->parts.s);
	emitf(e, "\tmov.u32 %s, %%ctaid.y;\n\tmov.u32 %s, %%nctaid.y;\n\tld.param.u32 %s, [p_n];\n", r->row.s, rows.s,
	      r->n.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tsetp.eq.u32 %s, %s, 1;\n", r->zero.s, r->one.s, r->parts.s);
	emitf(e, "\tmov.u32 %s, kg_smem;\n\tadd.u32 %s, %s, %u;\n\tand.b32 %s, %s, %d;\n", x.s, r->base.s, x.s,
	      c->plan.smem_align - 1, r->base.s, r->base.s, -(int)c->plan.smem_align);
	r->keys = op_plan_smem(e, &c->plan, r->base, c->r_keys);
	r->hist = op_plan_smem(e, &c->plan, r->base, c->r_hist);
	r->scan = op_plan_smem(e, &c->plan, r->base, c->r_scan);
	r->state = op_plan_smem(e, &c->plan, r->base, c->r_state);
	/* c = min(TK_CHUNK, n - x·TK_CHUNK): the grid has cdiv(n, TK_CHUNK)
	 * chunks, so it is at least 1 */
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tsub.u32 %s, %s, %s;\n\tmin.u32 %s, %s, %d;\n", r->j0.s, r->part.s,
	      TK_CHUNK, r->c.s, r->n.s, r->j0.s, r->c.s, r->c.s, TK_CHUNK);
	/* indices[y, 0 .. K-1] */
	op_param_global(e, r->out, "indices");
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, 4 * K, r->out.s, r->out.s, o.s);
	/* work planes: m = parts·K candidates per row */
	op_param_global(e, w, "work");
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n", m.s, r->parts.s, K,
	      o.s, r->row.s, m.s, o.s, o.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n",
	      r->ck.s, w.s, o.s, a.s, rows.s, m.s, a.s, a.s, r->ci.s, r->ck.s, a.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, r->part.s, 4 * K,
	      r->pk.s, r->ck.s, o.s, r->pi.s, r->ci.s, o.s);
	/* histograms zeroed, one per pass, so no pass waits for a clear;
	 * the state (prefix, kk, two placing counters, the join's flag) */
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", h.s, r->tid.s, r->hist.s);
	for (int i = 0; i < 2 * hist_units() * TK_BINS / TK_THREADS; i++)
		emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", h.s, 4 * TK_THREADS * i);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", p.s, r->tid.s);
	emitf(e, "\t@%s st.shared.v4.u32 [%s], {%s, %s, %s, %s};\n\t@%s st.shared.u32 [%s+16], 0;\n", p.s, r->state.s,
	      r->zero.s, r->zero.s, r->zero.s, r->zero.s, p.s, r->state.s);
	op_bar_sync_why(e, 0, TK_THREADS, "histograms and state zeroed");
}

/* The chunk's select: one CTA per row writes indices[y, pos] = j; else
 * the candidate (key u, index x·TK_CHUNK + j) goes to slot pos of this
 * part's K in the work planes. */
static void
place_chunk(Emit *e, const void *ctx, Reg j, Reg pos, Reg u)
{
	const TkRegs *r = ctx;
	Reg a = reg_new(e, RC_B64), b = reg_new(e, RC_B64), x = reg_new(e, RC_B32);

	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, pos.s, b.s, r->dst.s, a.s);
	emitf(e, "\t@%s st.global.s32 [%s], %s;\n\t@!%s st.global.u32 [%s], %s;\n", r->one.s, b.s, j.s, r->one.s, b.s,
	      u.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s add.u32 %s, %s, %s;\n\t@!%s st.global.s32 [%s], %s;\n", r->one.s,
	      b.s, r->pi.s, a.s, r->one.s, x.s, r->j0.s, j.s, r->one.s, b.s, x.s);
}

/* A chunk of at most K keys: one CTA per row (n <= K) writes indices 0 ..
 * n-1, then -1; one of several writes its keys as candidates, the slots
 * past them key 0 (below every logit but NaN) and index -1. */
static void
emit_all(Emit *e, const TopkCfg *c, const TkRegs *r)
{
	int K = c->topk;
	Reg j = reg_new(e, RC_B32), u = reg_new(e, RC_B32), x = reg_new(e, RC_B32), a = reg_new(e, RC_B64);
	Reg b = reg_new(e, RC_B64), a32 = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), q = reg_new(e, RC_PRED);
	char lp[48], done[48];

	label_new(e, lp, sizeof lp, "all");
	label_new(e, done, sizeof done, "all_done");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s, K, p.s, done);
	emit_label(e, lp);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tmul.wide.u32 %s, %s, 4;\n", q.s, j.s, r->c.s, a.s, j.s);
	emitf(e, "\tmov.u32 %s, -1;\n\tmov.u32 %s, 0;\n\t@%s add.u32 %s, %s, %s;\n", x.s, u.s, q.s, x.s, r->j0.s, j.s);
	emitf(e, "\t@%s mad.lo.u32 %s, %s, 4, %s;\n\t@%s ld.shared.u32 %s, [%s];\n", q.s, a32.s, j.s, r->keys.s, q.s,
	      u.s, a32.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s st.global.s32 [%s], %s;\n\t@!%s st.global.u32 [%s], %s;\n", b.s,
	      r->dst.s, a.s, r->one.s, b.s, x.s, r->one.s, b.s, u.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.s32 [%s], %s;\n", r->one.s, b.s, r->pi.s, a.s, r->one.s,
	      b.s, x.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, j.s, TK_THREADS, p.s, j.s, K,
	      p.s, lp);
	emit_label(e, done);
}

/* Several CTAs per row: the row's counter joined (sel_emit_join); the
 * last part's CTA merges, the others exit. */
static void
emit_join(Emit *e, const TkRegs *r)
{
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64);

	op_param_global(e, a, "counters");
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, a.s, a.s, o.s);
	sel_emit_join(e, r->tid, TK_THREADS, r->state, a, r->parts);
}

/* The merge's last round: candidate index x to indices[y, pos]. */
static void
final_merge(Emit *e, const void *ctx, Reg last, Reg a, Reg b, Reg x)
{
	const TkRegs *r = ctx;

	emitf(e, "\t@%s add.u64 %s, %s, %s;\n\t@%s st.global.s32 [%s], %s;\n", last.s, b.s, r->out.s, a.s, last.s, b.s,
	      x.s);
}

static int
topk_emit(Emit *e, const TopkCfg *c)
{
	TkRegs r;
	Sel sl;
	SelMerge mg;
	Reg src = reg_new(e, RC_B64), o = reg_new(e, RC_B64), p = reg_new(e, RC_PRED);
	char sel[48], joined[48], done[48];

	emit_prologue(e, c, &r);
	/* one key a histogram step: the passes after the first read only the
	 * candidates, and four keys' registers make ptxas spill at 64 a
	 * thread */
	sl = (Sel){TK_THREADS, c->topk, r.tid, r.zero, r.keys, r.hist, r.scan, r.state, 0, SEL_WIDE_BITS, r.zero,
	           TK_CAND, TK_PER, 1};
	emit_block(e, "topk.chunk");
	label_new(e, sel, sizeof sel, "select");
	label_new(e, joined, sizeof joined, "chunk_done");
	label_new(e, done, sizeof done, "done");
	/* logits[y, x·TK_CHUNK ..] */
	op_param_global(e, src, "logits");
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n", o.s, r.row.s, r.n.s, o.s,
	      o.s, src.s, src.s, o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r.j0.s, src.s, src.s, o.s);
	sel_emit_stage(e, &sl, src, NULL, r.keys, r.c, TK_PER, 1, 0, NULL);
	/* one base for the indices or the candidate keys, so that the select
	 * keeps neither out nor pk live (the merge gets them back) */
	emitf(e, "\tselp.b64 %s, %s, %s, %s;\n", r.dst.s, r.out.s, r.pk.s, r.one.s);
	emitf(e, "\tsetp.gt.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r.c.s, c->topk, p.s, sel);
	emit_all(e, c, &r);
	emitf(e, "\tbra.uni %s;\n", joined);
	emit_label(e, sel);
	/* the candidates' address after the staging, whose 32 loads a thread
	 * take every register it can spare */
	sl.cand = op_plan_smem(e, &c->plan, r.base, c->r_cand);
	sel_emit_select(e, &sl, r.keys, r.c, 0, 1, place_chunk, &r);
	emit_label(e, joined);
	emitf(e, "\t@%s bra %s;\n", r.one.s, done);

	emit_block(e, "topk.merge");
	/* the CTA's coordinates again, for the registers of the select */
	emitf(e, "\tmov.u32 %s, %%ctaid.x;\n\tmov.u32 %s, %%nctaid.x;\n\tmov.u32 %s, %%ctaid.y;\n", r.part.s, r.parts.s,
	      r.row.s);
	emit_join(e, &r);
	/* again: a chunk of at most K keys came here without the select */
	sl.cand = op_plan_smem(e, &c->plan, r.base, c->r_cand);
	/* the row's indices and candidate planes again (dst is pk here: not
	 * kept live through the chunk's select, for its registers) */
	op_param_global(e, r.out, "indices");
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r.row.s, 4 * c->topk, r.out.s, r.out.s,
	      o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tsub.u64 %s, %s, %s;\n\tsub.u64 %s, %s, %s;\n", o.s, r.part.s,
	      4 * c->topk, r.ck.s, r.dst.s, o.s, r.ci.s, r.pi.s, o.s);
	mg = (SelMerge){.parts = r.parts, .ck = r.ck, .ci = r.ci, .win = TK_WIN, .h = hist_units(), .final = final_merge,
	                .ctx = &r};
	sel_emit_merge(e, &sl, &mg);
	emit_label(e, done);
	emitf(e, "\tret;\n");
	return 0;
}

static void
topk_abi(const TopkCfg *c, const char *args, KernelAbi *k)
{
	memset(k, 0, sizeof *k);
	snprintf(k->kernel, sizeof k->kernel, "%s", c->name);
	k->family = "topk";
	k->target = c->t;
	snprintf(k->args, sizeof k->args, "%s", args);
	abi_shape(k, "topk", "%d", c->topk);
	abi_shape(k, "chunk", "%d", TK_CHUNK);
	k->threads = TK_THREADS;
	k->min_ctas = 2;
	k->cluster[0] = k->cluster[1] = k->cluster[2] = 1;
	k->smem = c->plan.smem_request;
	snprintf(k->grid[0], sizeof k->grid[0], "cdiv(n,%d)", TK_CHUNK);
	snprintf(k->grid[1], sizeof k->grid[1], "rows");
	snprintf(k->grid[2], sizeof k->grid[2], "1");
	abi_ptr(k, "logits", DT_F32, "logits[rows,n]");
	abi_ptr(k, "indices", DT_S32, "indices[rows,%d]", c->topk);
	abi_ptr(k, "work", DT_S32, "work[2,rows,cdiv(n,%d)*%d]", TK_CHUNK, c->topk);
	abi_ptr(k, "counters", DT_S32, "counters[rows]");
	abi_add(k, ABI_U32, "rows");
	abi_add(k, ABI_U32, "n");
}

static int
topk_generate(const void *params, const char *args, Buf *out, KgErr *err)
{
	TopkCfg c;
	KernelAbi k;
	Emit e;
	int rc;

	if (topk_configure(&c, params, err) < 0)
		return -1;
	emit_init(&e);
	rc = topk_emit(&e, &c);
	if (rc == 0 && e.oom)
		rc = kg_fail(err, "out of memory");
	if (rc == 0) {
		topk_abi(&c, args, &k);
		abi_module(&k, &e, out);
	}
	emit_free(&e);
	return rc;
}

static int
topk_plan(const void *params, Buf *text, KgErr *err)
{
	TopkCfg c;

	if (topk_configure(&c, params, err) < 0)
		return -1;
	buf_printf(text, "kernel          %s\n", c.name);
	buf_printf(text, "top-k           %d largest of each row of fp32 logits [rows, n], int32 indices; -1 padding below %d logits\n",
	           c.topk, c.topk);
	buf_printf(text, "grid            cdiv(n, %d) x rows: CTA (x, y) stages chunk x of row y in shared memory as keys\n",
	           TK_CHUNK);
	buf_printf(text, "select          radix, up to 4 passes of 11, 8, 8 and 5 bits, ending once the k-th key's bin is taken whole (the first histogram built while staging: 2048 bins, 4 a thread in the scan); then the keys in the first pass's bin and above are copied aside (up to %d: marked per thread, one CTA scan, no atomics), and the later passes and the placing read only them\n",
	           TK_CAND);
	buf_printf(text, "merge           several chunks: each writes its top-%d (key, index) to work; the row's last CTA (counters) selects over them in rounds of %d staged candidates, each round's top-%d the next round's first\n",
	           c.topk, TK_WIN, c.topk);
	plan_print(&c.plan, text);
	return 0;
}

const Family family_topk = {
	"topk",
	"top-k over fp32 logits [rows, n]: int32 indices of the k largest per row, split over CTAs with a merge",
	topk_params,
	sizeof topk_params / sizeof topk_params[0],
	sizeof(TopkParams),
	topk_generate,
	topk_plan,
};
