/* The standalone top-k family (gen/topk.h): parameters, the configuration,
 * and the kernel, all shared by every target (docs/ABI.md "topk";
 * the design: docs/indexer.md, "Standalone top-k"). CTA (x, y) stages
 * chunk x of row y (TK_CHUNK logits, as order-preserving 32-bit keys) in
 * shared memory, building the first radix pass's histogram as it goes,
 * and selects the chunk's top-K by radix select; one CTA per row writes
 * the indices at once, several write their candidates (key and index) to
 * the work buffer, and the last of a row to finish merges the row's
 * candidates by the same select. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "family.h"
#include "ops.h"
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
	Reg ck, ci;                      /* global: the row's candidate keys and indices */
	Reg pk, pi;                      /* global: this part's candidate slots */
	Reg j0;                          /* first logit of the chunk in the row */
	/* the merge's rounds: staged indices (shared), the last round, the
	 * next round's first K candidate slots (global) */
	Reg idx, last, nk, ni;
} TkRegs;

/* Where a selected key goes: element j of the select's array, its slot
 * pos in the list, its key u. */
typedef void (*TkPlace)(Emit *e, const TopkCfg *c, const TkRegs *r, Reg j, Reg pos, Reg u);

static int
topk_configure(TopkCfg *c, const TopkParams *p, KgErr *err)
{
	memset(c, 0, sizeof *c);
	c->t = &targets[p->target];
	c->topk = p->topk;
	plan_init(&c->plan, c->t);
	c->plan.threads = TK_THREADS;
	c->r_keys = plan_smem(&c->plan, "chunk keys (u32)", 4u * TK_CHUNK, 16, 1);
	/* passes 0-3 of the chunk's select, then 4-7 of the merge */
	c->r_hist = plan_smem(&c->plan, "radix histograms", 4u * TK_BINS, 16, 2 * TK_PASSES);
	c->r_scan = plan_smem(&c->plan, "bin scan warp totals", 4u * TK_BINS / 32, 16, 1);
	c->r_state = plan_smem(&c->plan, "select state", 32, 16, 1);
	plan_role(&c->plan, "all", 0, TK_THREADS / 32, 0,
	          "stage a chunk of logits, select its top-k together; the row's last CTA merges");
	snprintf(c->name, sizeof c->name, "topk_k%d_%s", c->topk, c->t->tag);
	return plan_check(&c->plan, err);
}

static void
load_param_ptr(Emit *e, Reg dst, const char *name)
{
	emitf(e, "\tld.param.u64 %s, [p_%s];\n\tcvta.to.global.u64 %s, %s;\n", dst.s, name, dst.s, dst.s);
}

/* u = the logit's bits in an order where a larger unsigned u is a larger
 * float: negatives inverted, positives with the sign bit set. */
static void
emit_key(Emit *e, Reg u, Reg m)
{
	emitf(e, "\tshr.s32 %s, %s, 31;\n\tor.b32 %s, %s, 0x80000000;\n\txor.b32 %s, %s, %s;\n", m.s, u.s, m.s,
	      m.s, u.s, u.s, m.s);
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
	load_param_ptr(e, r->out, "indices");
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, 4 * K, r->out.s, r->out.s, o.s);
	/* work planes: m = parts·K candidates per row */
	load_param_ptr(e, w, "work");
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n", m.s, r->parts.s, K,
	      o.s, r->row.s, m.s, o.s, o.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n",
	      r->ck.s, w.s, o.s, a.s, rows.s, m.s, a.s, a.s, r->ci.s, r->ck.s, a.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, r->part.s, 4 * K,
	      r->pk.s, r->ck.s, o.s, r->pi.s, r->ci.s, o.s);
	/* histograms zeroed, one per pass, so no pass waits for a clear;
	 * the state (prefix, kk, two placing counters, the join's flag) */
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", h.s, r->tid.s, r->hist.s);
	for (int i = 0; i < 2 * TK_PASSES * TK_BINS / TK_THREADS; i++)
		emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", h.s, 4 * TK_THREADS * i);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", p.s, r->tid.s);
	emitf(e, "\t@%s st.shared.v4.u32 [%s], {%s, %s, %s, %s};\n\t@%s st.shared.u32 [%s+16], 0;\n", p.s, r->state.s,
	      r->zero.s, r->zero.s, r->zero.s, r->zero.s, p.s, r->state.s);
	op_bar_sync_why(e, 0, TK_THREADS, "histograms and state zeroed");
}

/* `count` keys at src (global) into shared memory at keys, thread tid
 * taking keys tid + 512i (i < per), all of its loads issued before the
 * first store. Logits become keys (emit_key) when `convert`; candidates
 * are keys already, and come with their indices (isrc, stored at idx):
 * both written by other CTAs or threads of this launch, so plain loads,
 * never .nc. Histogram `h` counts each key's top byte: pass 0 of the
 * select. */
static void
emit_stage(Emit *e, const TkRegs *r, Reg src, const Reg *isrc, Reg idx, Reg count, int per, int convert, int h)
{
	Reg v[TK_PER], w[TK_PER], j = reg_new(e, RC_B32), t = reg_new(e, RC_B32), m = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), ai = reg_new(e, RC_B64), ka = reg_new(e, RC_B32), ia = reg_new(e, RC_B32);
	Reg ha = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);

	reg_array(e, RC_B32, v, per);
	if (isrc)
		reg_array(e, RC_B32, w, per);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, r->tid.s, a.s, src.s, a.s);
	if (isrc)
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", ai.s, r->tid.s, ai.s, isrc->s, ai.s);
	for (int i = 0; i < per; i++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", j.s, r->tid.s, TK_THREADS * i, p.s, j.s,
		      count.s);
		emitf(e, "\t@%s ld.global%s.b32 %s, [%s+%d];\n", p.s, convert ? ".nc" : "", v[i].s, a.s, 4 * TK_THREADS * i);
		if (isrc)
			emitf(e, "\t@%s ld.global.b32 %s, [%s+%d];\n", p.s, w[i].s, ai.s, 4 * TK_THREADS * i);
	}
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tadd.u32 %s, %s, %u;\n", ka.s, r->tid.s, r->keys.s, ha.s, r->hist.s,
	      (unsigned)(4 * TK_BINS * h));
	if (isrc)
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", ia.s, r->tid.s, idx.s);
	for (int i = 0; i < per; i++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", j.s, r->tid.s, TK_THREADS * i, p.s, j.s,
		      count.s);
		if (convert)
			emit_key(e, v[i], m);
		emitf(e, "\t@%s st.shared.u32 [%s+%d], %s;\n", p.s, ka.s, 4 * TK_THREADS * i, v[i].s);
		if (isrc)
			emitf(e, "\t@%s st.shared.u32 [%s+%d], %s;\n", p.s, ia.s, 4 * TK_THREADS * i, w[i].s);
		emitf(e, "\tshr.u32 %s, %s, 24;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s red.shared.add.u32 [%s], 1;\n", t.s,
		      v[i].s, t.s, t.s, ha.s, p.s, t.s);
	}
	op_bar_sync_why(e, 0, TK_THREADS, "keys and their first histogram in shared memory");
}

/* u = key j (shared memory). */
static void
emit_load_key(Emit *e, Reg keys, Reg j, Reg u, Reg a32)
{
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n", a32.s, j.s, keys.s, u.s, a32.s);
}

/* The top-K of `count` (> K) keys by radix select, 8 bits a pass from the
 * top: each pass histograms the digit of the keys whose higher bits equal
 * the prefix found so far (histogram h + pass; pass 0's is built already
 * when hist0), then the 256 bins are scanned from the top by the first 256
 * threads (one bin each: a warp scan by shfl.up, the 8 warp totals through
 * shared memory) and the one thread whose bin holds the kk-th largest key
 * (kk: how many are still to pick below the prefix) publishes the new
 * prefix and kk. After 4 passes the prefix is the K-th largest key u* and
 * kk the number of keys equal to u* to take: a final pass places every
 * key above u* (K - kk of them) at slots from one counter and the first
 * kk keys equal to u* to win the second counter after them, so a tie at
 * the K-th key is broken by arrival. */
static void
emit_select(Emit *e, const TopkCfg *c, const TkRegs *r, Reg keys, Reg count, int h, int hist0, TkPlace place)
{
	int K = c->topk;
	Reg j = reg_new(e, RC_B32), u = reg_new(e, RC_B32), t = reg_new(e, RC_B32), prefix = reg_new(e, RC_B32);
	Reg kk = reg_new(e, RC_B32), hp = reg_new(e, RC_B32), b = reg_new(e, RC_B32), cnt = reg_new(e, RC_B32);
	Reg incl = reg_new(e, RC_B32), x = reg_new(e, RC_B32), w = reg_new(e, RC_B32), pos = reg_new(e, RC_B32);
	Reg s = reg_new(e, RC_B32), a32 = reg_new(e, RC_B32);
	Reg p = reg_new(e, RC_PRED), q = reg_new(e, RC_PRED), hi = reg_new(e, RC_PRED), pg = reg_new(e, RC_PRED);
	Reg pe = reg_new(e, RC_PRED);
	char lp[48], lpd[48], sk1[48], sk2[48], fin[48], fin_next[48], fin_end[48];

	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, %d;\n", prefix.s, kk.s, K);
	emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 5;\n", hi.s, r->tid.s, TK_BINS, w.s, r->tid.s);
	for (int pass = 0; pass < TK_PASSES; pass++) {
		int shift = 24 - 8 * pass;
		uint32_t mask = pass ? 0xffffffffu << (32 - 8 * pass) : 0;

		emitf(e, "\tadd.u32 %s, %s, %u;\n", hp.s, r->hist.s, (unsigned)(4 * TK_BINS * (h + pass)));
		if (!(pass == 0 && hist0)) {
			label_new(e, lp, sizeof lp, "hist");
			label_new(e, lpd, sizeof lpd, "hist_done");
			emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s,
			      count.s, p.s, lpd);
			emit_label(e, lp);
			emit_load_key(e, keys, j, u, a32);
			emitf(e, "\tand.b32 %s, %s, 0x%08x;\n\tsetp.eq.u32 %s, %s, %s;\n", t.s, u.s, mask, p.s, t.s,
			      prefix.s);
			emitf(e, "\tshr.u32 %s, %s, %d;\n\tand.b32 %s, %s, 255;\n\tmad.lo.u32 %s, %s, 4, %s;\n", t.s, u.s,
			      shift, t.s, t.s, t.s, t.s, hp.s);
			emitf(e, "\t@%s red.shared.add.u32 [%s], 1;\n", p.s, t.s);
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, TK_THREADS,
			      p.s, j.s, count.s, p.s, lp);
			emit_label(e, lpd);
			op_bar_sync_why(e, 0, TK_THREADS, "histogram complete");
		}
		/* thread t < 256 takes bin 255 - t: incl = keys in bins >= it */
		label_new(e, sk1, sizeof sk1, "scanned");
		label_new(e, sk2, sizeof sk2, "found");
		emitf(e, "\t@%s bra %s;\n", hi.s, sk1);
		emitf(e, "\tsub.u32 %s, %d, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n\tmov.u32 %s, %s;\n",
		      b.s, TK_BINS - 1, r->tid.s, t.s, b.s, hp.s, cnt.s, t.s, incl.s, cnt.s);
		for (int d = 1; d < 32; d *= 2)
			emitf(e, "\tshfl.sync.up.b32 %s|%s, %s, %d, 0, 0xffffffff;\n\t@%s add.u32 %s, %s, %s;\n", x.s, q.s,
			      incl.s, d, q.s, incl.s, incl.s, x.s);
		emitf(e, "\tand.b32 %s, %s, 31;\n\tsetp.eq.u32 %s, %s, 31;\n\tmad.lo.u32 %s, %s, 4, %s;\n", t.s, r->tid.s,
		      q.s, t.s, t.s, w.s, r->scan.s);
		emitf(e, "\t@%s st.shared.u32 [%s], %s;\n", q.s, t.s, incl.s);
		emit_label(e, sk1);
		op_bar_sync_why(e, 0, TK_THREADS, "warp totals of the bin scan");
		emitf(e, "\t@%s bra %s;\n", hi.s, sk2);
		for (int v = 0; v < TK_BINS / 32 - 1; v++)
			emitf(e, "\tld.shared.u32 %s, [%s+%d];\n\tsetp.gt.u32 %s, %s, %d;\n\t@%s add.u32 %s, %s, %s;\n", x.s,
			      r->scan.s, 4 * v, q.s, w.s, v, q.s, incl.s, incl.s, x.s);
		/* the bin where the count from the top reaches kk: excl < kk <= incl */
		emitf(e, "\tsub.u32 %s, %s, %s;\n\tsetp.lt.u32 %s, %s, %s;\n\tsetp.ge.and.u32 %s, %s, %s, %s;\n", x.s,
		      incl.s, cnt.s, q.s, x.s, kk.s, q.s, incl.s, kk.s, q.s);
		emitf(e, "\tshl.b32 %s, %s, %d;\n\tor.b32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", t.s, b.s, shift, t.s, t.s,
		      prefix.s, x.s, kk.s, x.s);
		emitf(e, "\t@%s st.shared.v4.u32 [%s], {%s, %s, %s, %s};\n", q.s, r->state.s, t.s, x.s, r->zero.s,
		      r->zero.s);
		emit_label(e, sk2);
		op_bar_sync_why(e, 0, TK_THREADS, "prefix and kk published");
		emitf(e, "\tld.shared.v2.u32 {%s, %s}, [%s];\n", prefix.s, kk.s, r->state.s);
	}
	/* place: state+8 counts keys above u*, state+12 keys equal (zeroed
	 * with the last prefix) */
	label_new(e, fin, sizeof fin, "place");
	label_new(e, fin_next, sizeof fin_next, "place_next");
	label_new(e, fin_end, sizeof fin_end, "placed");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s, count.s, p.s,
	      fin_end);
	emit_label(e, fin);
	emit_load_key(e, keys, j, u, a32);
	emitf(e, "\tsetp.gt.u32 %s, %s, %s;\n\tsetp.eq.u32 %s, %s, %s;\n", pg.s, u.s, prefix.s, pe.s, u.s, prefix.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+8], 1;\n", pg.s, pos.s, r->state.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+12], 1;\n", pe.s, s.s, r->state.s);
	emitf(e, "\t@%s setp.lt.u32 %s, %s, %s;\n", pe.s, pe.s, s.s, kk.s);
	emitf(e, "\t@%s sub.u32 %s, %d, %s;\n\t@%s add.u32 %s, %s, %s;\n", pe.s, pos.s, K, kk.s, pe.s, pos.s, pos.s,
	      s.s);
	emitf(e, "\tor.pred %s, %s, %s;\n\t@!%s bra %s;\n", p.s, pg.s, pe.s, p.s, fin_next);
	place(e, c, r, j, pos, u);
	emit_label(e, fin_next);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, TK_THREADS, p.s, j.s,
	      count.s, p.s, fin);
	emit_label(e, fin_end);
}

/* The chunk's select: one CTA per row writes indices[y, pos] = j; else
 * the candidate (key u, index x·TK_CHUNK + j) goes to slot pos of this
 * part's K in the work planes. */
static void
place_chunk(Emit *e, const TopkCfg *c, const TkRegs *r, Reg j, Reg pos, Reg u)
{
	Reg a = reg_new(e, RC_B64), b = reg_new(e, RC_B64), x = reg_new(e, RC_B32);

	(void)c;
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n", a.s, pos.s);
	emitf(e, "\t@%s add.u64 %s, %s, %s;\n\t@%s st.global.s32 [%s], %s;\n", r->one.s, b.s, r->out.s, a.s, r->one.s,
	      b.s, j.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.u32 [%s], %s;\n", r->one.s, b.s, r->pk.s, a.s, r->one.s,
	      b.s, u.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s add.u32 %s, %s, %s;\n\t@!%s st.global.s32 [%s], %s;\n", r->one.s,
	      b.s, r->pi.s, a.s, r->one.s, x.s, r->j0.s, j.s, r->one.s, b.s, x.s);
}

/* A merge round: candidate j of the window (its index staged beside the
 * keys) goes to indices[y, pos] in the last round, else to slot pos of
 * the next round's first K. */
static void
place_merge(Emit *e, const TopkCfg *c, const TkRegs *r, Reg j, Reg pos, Reg u)
{
	Reg a = reg_new(e, RC_B64), b = reg_new(e, RC_B64), x = reg_new(e, RC_B32), a32 = reg_new(e, RC_B32);

	(void)c;
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, 4;\n", a32.s, j.s,
	      r->idx.s, x.s, a32.s, a.s, pos.s);
	emitf(e, "\t@%s add.u64 %s, %s, %s;\n\t@%s st.global.s32 [%s], %s;\n", r->last.s, b.s, r->out.s, a.s,
	      r->last.s, b.s, x.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.u32 [%s], %s;\n", r->last.s, b.s, r->nk.s, a.s,
	      r->last.s, b.s, u.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.s32 [%s], %s;\n", r->last.s, b.s, r->ni.s, a.s,
	      r->last.s, b.s, x.s);
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
	emitf(e, "\t@%s add.u64 %s, %s, %s;\n\t@%s st.global.s32 [%s], %s;\n", r->one.s, b.s, r->out.s, a.s, r->one.s,
	      b.s, x.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.u32 [%s], %s;\n", r->one.s, b.s, r->pk.s, a.s, r->one.s,
	      b.s, u.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.s32 [%s], %s;\n", r->one.s, b.s, r->pi.s, a.s, r->one.s,
	      b.s, x.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, j.s, TK_THREADS, p.s, j.s, K,
	      p.s, lp);
	emit_label(e, done);
}

/* Several CTAs per row: every thread, its candidates stored, counts
 * itself in counters[y] with an acq_rel atomic (PTX ISA "Memory
 * consistency model": the release covers its own stores, and the thread
 * that brings the count to parts·512 acquires every other's). That thread
 * raises its CTA's flag (state+16) and sets the counter back to 0, so the
 * counters stay zero between launches (docs/ABI.md "topk"); after a CTA
 * barrier its CTA merges and the others exit. */
static void
emit_join(Emit *e, const TkRegs *r)
{
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), f = reg_new(e, RC_B32), all = reg_new(e, RC_B32);
	Reg p = reg_new(e, RC_PRED);
	int lg = 0;

	while ((1 << lg) < TK_THREADS)
		lg++;
	load_param_ptr(e, a, "counters");
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, a.s, a.s, o.s);
	emitf(e, "\tatom.acq_rel.gpu.global.add.u32 %s, [%s], 1;\n\tadd.u32 %s, %s, 1;\n", f.s, a.s, f.s, f.s);
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tsetp.eq.u32 %s, %s, %s;\n", all.s, r->parts.s, lg, p.s, f.s, all.s);
	emitf(e, "\t@%s st.shared.u32 [%s+16], 1;\n\t@%s st.global.u32 [%s], 0;\n", p.s, r->state.s, p.s, a.s);
	op_bar_sync_why(e, 0, TK_THREADS, "the last part's flag raised");
	emitf(e, "\tld.shared.u32 %s, [%s+16];\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s exit;\n", f.s, r->state.s, p.s, f.s,
	      p.s);
}

/* The merge, in rounds over windows of TK_WIN candidates (keys staged
 * beside their indices in the chunk's shared memory): a round selects the
 * window's top-K; the last round writes them to indices, an earlier one
 * over the window's last K candidate slots (staged already, so no thread
 * still reads them), where the next window starts. Each round after the
 * first takes TK_WIN - K new candidates. */
static void
emit_merge(Emit *e, const TopkCfg *c, TkRegs *r)
{
	int K = c->topk, step = TK_WIN - K;
	Reg m = reg_new(e, RC_B32), s = reg_new(e, RC_B32), cnt = reg_new(e, RC_B32), o = reg_new(e, RC_B64);
	Reg sk = reg_new(e, RC_B64), si = reg_new(e, RC_B64), h = reg_new(e, RC_B32);
	char round[48], done[48];

	r->idx = reg_new(e, RC_B32);
	r->last = reg_new(e, RC_PRED);
	r->nk = reg_new(e, RC_B64);
	r->ni = reg_new(e, RC_B64);
	label_new(e, round, sizeof round, "round");
	label_new(e, done, sizeof done, "merged");
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmov.u32 %s, 0;\n\tadd.u32 %s, %s, %d;\n", m.s, r->parts.s, K, s.s,
	      r->idx.s, r->keys.s, 4 * TK_WIN);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", h.s, r->tid.s, r->hist.s);
	emit_label(e, round);
	/* window [s, s + cnt), cnt = min(m - s, TK_WIN) */
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tsetp.le.u32 %s, %s, %d;\n\tmin.u32 %s, %s, %d;\n", cnt.s, m.s, s.s,
	      r->last.s, cnt.s, TK_WIN, cnt.s, cnt.s, TK_WIN);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, s.s, sk.s, r->ck.s,
	      o.s, si.s, r->ci.s, o.s);
	emitf(e, "\tadd.u64 %s, %s, %d;\n\tadd.u64 %s, %s, %d;\n", r->nk.s, sk.s, 4 * step, r->ni.s, si.s, 4 * step);
	emit_stage(e, r, sk, &si, r->idx, cnt, TK_WIN / TK_THREADS, 0, TK_PASSES);
	emit_select(e, c, r, r->keys, cnt, TK_PASSES, 1, place_merge);
	emitf(e, "\t@%s bra %s;\n", r->last.s, done);
	for (int i = 0; i < TK_PASSES * TK_BINS / TK_THREADS; i++)
		emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", h.s, 4 * TK_BINS * TK_PASSES + 4 * TK_THREADS * i);
	/* the scan's last reads of them were two barriers ago */
	op_bar_sync_why(e, 0, TK_THREADS, "the round's top-k stored, the window read, its histograms zeroed");
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tbra.uni %s;\n", s.s, s.s, step, round);
	emit_label(e, done);
}

static int
topk_emit(Emit *e, const TopkCfg *c)
{
	TkRegs r;
	Reg src = reg_new(e, RC_B64), o = reg_new(e, RC_B64), p = reg_new(e, RC_PRED);
	char sel[48], joined[48], done[48];

	emit_prologue(e, c, &r);
	emit_block(e, "topk.chunk");
	label_new(e, sel, sizeof sel, "select");
	label_new(e, joined, sizeof joined, "chunk_done");
	label_new(e, done, sizeof done, "done");
	/* logits[y, x·TK_CHUNK ..] */
	load_param_ptr(e, src, "logits");
	emitf(e, "\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n", o.s, r.row.s, r.n.s, o.s,
	      o.s, src.s, src.s, o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r.j0.s, src.s, src.s, o.s);
	emit_stage(e, &r, src, NULL, r.keys, r.c, TK_PER, 1, 0);
	emitf(e, "\tsetp.gt.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r.c.s, c->topk, p.s, sel);
	emit_all(e, c, &r);
	emitf(e, "\tbra.uni %s;\n", joined);
	emit_label(e, sel);
	emit_select(e, c, &r, r.keys, r.c, 0, 1, place_chunk);
	emit_label(e, joined);
	emitf(e, "\t@%s bra %s;\n", r.one.s, done);

	emit_block(e, "topk.merge");
	emit_join(e, &r);
	emit_merge(e, c, &r);
	emit_label(e, done);
	emitf(e, "\tret;\n");
	return 0;
}

static void
topk_abi(const TopkCfg *c, const char *args, KernelAbi *k)
{
	AbiParam *p;

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
	p = abi_add(k, ABI_PTR, "logits");
	p->dtype = DT_F32;
	snprintf(p->tensor, sizeof p->tensor, "logits[rows,n]");
	p = abi_add(k, ABI_PTR, "indices");
	p->dtype = DT_S32;
	snprintf(p->tensor, sizeof p->tensor, "indices[rows,%d]", c->topk);
	p = abi_add(k, ABI_PTR, "work");
	p->dtype = DT_S32;
	snprintf(p->tensor, sizeof p->tensor, "work[2,rows,cdiv(n,%d)*%d]", TK_CHUNK, c->topk);
	p = abi_add(k, ABI_PTR, "counters");
	p->dtype = DT_S32;
	snprintf(p->tensor, sizeof p->tensor, "counters[rows]");
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
	buf_printf(text, "select          radix, 4 passes of 8 bits (the first histogram built while staging), a 256-bin scan by 8 warps, one placing pass\n");
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
