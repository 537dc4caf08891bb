/* The indexer's fused top-k (docs/indexer.md, "Fused top-k"; docs/ABI.md
 * "indexer"), shared by every target and scoring: after its scoring, each
 * of a row's CTAs selects the top-K of its own keys' logits by the shared
 * radix select (gen/select.c) and writes them as candidates (key, row
 * position) to the work planes; the row's last CTA to finish (counters)
 * merges the splits·K candidates into the list by the same select. One
 * CTA per row writes the list from its own select. Also the join and
 * the short rows (n <= K). */
#include <stdio.h>
#include <string.h>

#include "indexer.h"
#include "ops.h"
#include "select.h"

/* The registers of the top-k, beside the prologue's. */
typedef struct IdxTk {
	const IndexerCfg *c;
	const IndexerRegs *r;
	Sel sl;              /* keys: window A; hist: the 12 histograms */
	Reg out;             /* global: indices[row, 0 ..] */
	Reg ck, ci, pk, pi;  /* global: the row's candidate keys and indices, this part's slots */
	Reg one;             /* pred: one CTA per row (splits == 1) */
	Reg lb, kb, ko, ho;  /* the chunk's rounds: its keys consumed, this and the other window, the other's histograms */
	Reg last, first;     /* pred: the chunk's last round, its first (the kept keys, positions implied) */
} IdxTk;

/* v = block_table[b, j / page_size]·page_size + j % page_size: key j as
 * the decode family's index (page·page_size + offset), in two steps so
 * that a caller can have several loads in flight: the page (guard: a
 * predicate prefix or ""), then the index. */
static void
emit_translate_load(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg v, Reg j, Reg t, Reg a,
                    const char *guard)
{
	emitf(e, "\t%sshr.u32 %s, %s, %d;\n\t%smul.wide.u32 %s, %s, 4;\n\t%sadd.u64 %s, %s, %s;\n", guard, t.s, j.s,
	      c->log2ps, guard, a.s, t.s, guard, a.s, r->bt.s, a.s);
	emitf(e, "\t%sld.global.nc.u32 %s, [%s];\n", guard, v.s, a.s);
}

static void
emit_translate_index(Emit *e, const IndexerCfg *c, Reg v, Reg j, Reg t, const char *guard)
{
	emitf(e, "\t%sand.b32 %s, %s, %d;\n\t%smad.lo.u32 %s, %s, %d, %s;\n", guard, t.s, j.s, c->ps - 1, guard, v.s,
	      v.s, c->ps, t.s);
}

static void
emit_translate(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg v, Reg j, Reg t, Reg a)
{
	emit_translate_load(e, c, r, v, j, t, a, "");
	emit_translate_index(e, c, v, j, t, "");
}

void
indexer_emit_keep(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg l, Reg logit, const Reg *pred)
{
	Reg u, m, a, p;
	uint32_t keys, hist;

	if (!c->topk)
		return;
	u = reg_new(e, RC_B32);
	m = reg_new(e, RC_B32);
	a = reg_new(e, RC_B32);
	p = reg_new(e, RC_PRED);
	keys = c->plan.smem[c->r_keys].offset;
	hist = c->plan.smem[c->r_hist].offset;
	emit_block(e, "indexer.keep");
	emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n", p.s, l.s, 2 * c->win);
	if (pred)
		emitf(e, "\tand.pred %s, %s, %s;\n", p.s, p.s, pred->s);
	emitf(e, "\tmov.b32 %s, %s;\n", u.s, logit.s);
	sel_emit_key(e, u, m);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.u32 [%s+%u], %s;\n", a.s, l.s, r->base.s, p.s, a.s, keys,
	      u.s);
	emitf(e, "\tshr.u32 %s, %s, 24;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s red.shared.add.u32 [%s+%u], 1;\n", m.s, u.s,
	      m.s, m.s, r->base.s, p.s, m.s, hist);
}

/* The list's pointer, the work planes (work[0, row, :] keys, work[1, row,
 * :] indices, splits·K each; this part's K from split·K) and the shared
 * select's registers. */
static void
emit_setup(Emit *e, const IndexerCfg *c, const IndexerRegs *r, IdxTk *k)
{
	int K = c->topk;
	Reg m = reg_new(e, RC_B32), rows = reg_new(e, RC_B32), w = reg_new(e, RC_B64), o = reg_new(e, RC_B64);
	Reg a = reg_new(e, RC_B64);

	k->c = c;
	k->r = r;
	k->out = reg_new(e, RC_B64);
	k->ck = reg_new(e, RC_B64);
	k->ci = reg_new(e, RC_B64);
	k->pk = reg_new(e, RC_B64);
	k->pi = reg_new(e, RC_B64);
	k->one = reg_new(e, RC_PRED);
	k->sl.threads = IDX_THREADS;
	k->sl.topk = K;
	k->sl.batch = 16; /* the merge of top-k 2048 stages 32 a thread: 16 in flight keep its registers near the scoring's */
	k->sl.hist_keys = SEL_HIST_KEYS_MAX; /* registers stay under the 128 of two CTAs an SM (emitted/ *.ptxas.txt) */
	k->sl.tid = r->tid;
	k->sl.zero = reg_new(e, RC_B32);
	emit_block(e, "indexer.topk_setup");
	k->sl.keys = op_plan_smem(e, &c->plan, r->base, c->r_keys);
	k->sl.hist = op_plan_smem(e, &c->plan, r->base, c->r_hist);
	k->sl.scan = op_plan_smem(e, &c->plan, r->base, c->r_scan);
	k->sl.state = op_plan_smem(e, &c->plan, r->base, c->r_state);
	emitf(e, "\tmov.u32 %s, 0;\n\tsetp.eq.u32 %s, %s, 1;\n", k->sl.zero.s, k->one.s, r->splits.s);
	op_param_global(e, k->out, "indices");
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, 4 * K, k->out.s, k->out.s, o.s);
	/* m = splits·K candidates per row, rows = batch·s_q */
	op_param_global(e, w, "work");
	emitf(e, "\tld.param.u32 %s, [p_batch];\n\tld.param.u32 %s, [p_s_q];\n\tmul.lo.u32 %s, %s, %s;\n", rows.s, m.s,
	      rows.s, rows.s, m.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n", m.s, r->splits.s, K,
	      o.s, r->row.s, m.s, o.s, o.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\tmul.wide.u32 %s, %s, %s;\n\tshl.b64 %s, %s, 2;\n\tadd.u64 %s, %s, %s;\n",
	      k->ck.s, w.s, o.s, a.s, rows.s, m.s, a.s, a.s, k->ci.s, k->ck.s, a.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, r->split.s, 4 * K,
	      k->pk.s, k->ck.s, o.s, k->pi.s, k->ci.s, o.s);
}

/* w = the row position of the CTA's local key l:
 * (split + splits·(l / unit))·unit + l % unit (the scorings' order:
 * docs/ABI.md "indexer", "Split rows"), under p (NULL: always). */
static void
emit_position(Emit *e, const IdxTk *k, Reg l, Reg w, const Reg *p)
{
	const IndexerCfg *c = k->c;
	const IndexerRegs *r = k->r;
	Reg t = reg_new(e, RC_B32);
	char g[48] = "";
	int lu = log2_ceil(c->unit);

	if (p)
		snprintf(g, sizeof g, "@%s ", p->s);
	emitf(e, "\t%sshr.u32 %s, %s, %d;\n\t%smad.lo.u32 %s, %s, %s, %s;\n\t%sshl.b32 %s, %s, %d;\n", g, t.s, l.s,
	      lu, g, t.s, t.s, r->splits.s, r->split.s, g, t.s, t.s, lu);
	emitf(e, "\t%sand.b32 %s, %s, %d;\n\t%sadd.u32 %s, %s, %s;\n", g, w.s, l.s, c->unit - 1, g, w.s, w.s, t.s);
}

/* Element i of a chunk round (number el of the round's new keys, under p):
 * the CTA's local key L = lb + el; its logit, stored by this CTA's
 * scoring (a plain load: never .nc, which may miss this kernel's stores),
 * into v and its row position into w. */
static void
load_chunk(Emit *e, const void *ctx, int i, Reg el, Reg p, Reg v, Reg w)
{
	const IdxTk *k = ctx;
	const IndexerRegs *r = k->r;
	Reg l = reg_new(e, RC_B32), a = reg_new(e, RC_B64);

	(void)i;
	emitf(e, "\tadd.u32 %s, %s, %s;\n", l.s, k->lb.s, el.s);
	emit_position(e, k, l, w, NULL);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\t@%s ld.global.b32 %s, [%s];\n", a.s, w.s, a.s,
	      a.s, r->logits.s, p.s, v.s, a.s);
}

/* A key of the chunk's select (element j of window kb, key u; its row
 * position implied by j in the first round, else stored beside it) at
 * slot pos: before the last round into the other window's first K (its
 * position beside it, its top byte counted in the other window's first
 * histogram); in the last round to the list (one CTA per row) or to this
 * part's candidate slots. */
static void
place_chunk(Emit *e, const void *ctx, Reg j, Reg pos, Reg u)
{
	const IdxTk *k = ctx;
	Reg a32 = reg_new(e, RC_B32), x = reg_new(e, RC_B32), t = reg_new(e, RC_B32), v = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), b = reg_new(e, RC_B64);
	char fin[48], work[48], done[48];

	label_new(e, fin, sizeof fin, "chunk_final");
	label_new(e, work, sizeof work, "chunk_work");
	label_new(e, done, sizeof done, "chunk_placed");
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@!%s ld.shared.u32 %s, [%s+%d];\n", a32.s, j.s, k->kb.s, k->first.s,
	      x.s, a32.s, 4 * k->c->win);
	emit_position(e, k, j, x, &k->first);
	emitf(e, "\t@%s bra %s;\n", k->last.s, fin);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tst.shared.u32 [%s], %s;\n\tst.shared.u32 [%s+%d], %s;\n", a32.s, pos.s,
	      k->ko.s, a32.s, u.s, a32.s, 4 * k->c->win, x.s);
	emitf(e, "\tshr.u32 %s, %s, 24;\n\tmad.lo.u32 %s, %s, 4, %s;\n\tred.shared.add.u32 [%s], 1;\n\tbra %s;\n", t.s,
	      u.s, t.s, t.s, k->ho.s, t.s, done);
	emit_label(e, fin);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\t@!%s bra %s;\n", a.s, pos.s, k->one.s, work);
	emit_translate(e, k->c, k->r, v, x, t, b);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\tst.global.s32 [%s], %s;\n\tbra %s;\n", b.s, k->out.s, a.s, b.s, v.s, done);
	emit_label(e, work);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\tst.global.u32 [%s], %s;\n", b.s, k->pk.s, a.s, b.s, u.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\tst.global.s32 [%s], %s;\n", b.s, k->pi.s, a.s, b.s, x.s);
	emit_label(e, done);
}

/* The merge's last round: candidate index x (a row position) to slot
 * pos (a = 4·pos) of the list staged in the chunk selects' histograms
 * (units 0-7: 2048 words, free once every chunk round is done; the
 * merge's own set is units 8-11). emit_list_out translates them: done
 * here, each key's block-table load held up the placing loop's next key. */
static void
final_merge(Emit *e, const void *ctx, Reg last, Reg a, Reg b, Reg x)
{
	const IdxTk *k = ctx;
	Reg t = reg_new(e, RC_B32);

	(void)b;
	emitf(e, "\t@%s cvt.u32.u64 %s, %s;\n\t@%s add.u32 %s, %s, %s;\n\t@%s st.shared.u32 [%s], %s;\n", last.s,
	      t.s, a.s, last.s, t.s, t.s, k->sl.hist.s, last.s, t.s, x.s);
}

/* The merged list, staged by final_merge, to indices[row, ..] as the
 * decode family's indices: a thread takes slots tid + 256·i, all of its
 * block-table loads in flight at once. */
static void
emit_list_out(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTk *k)
{
	enum { PER_MAX = (2 * SEL_BINS * SEL_PASSES + IDX_THREADS - 1) / IDX_THREADS };
	int K = c->topk, per = (K + IDX_THREADS - 1) / IDX_THREADS;
	Reg x[PER_MAX], v[PER_MAX], p[PER_MAX], a = reg_new(e, RC_B64), t = reg_new(e, RC_B32);
	Reg j = reg_new(e, RC_B32), s = reg_new(e, RC_B32);
	char g[PER_MAX][sizeof(Reg) + 3]; /* "@p[i] ": the guard of slot tid + 256·i */

	if (per > PER_MAX)
		kg_bug("indexer: a list of %d staged in %d histogram words", K, 2 * SEL_BINS * SEL_PASSES);
	emit_block(e, "indexer.list_out");
	reg_array(e, RC_B32, x, per);
	reg_array(e, RC_B32, v, per);
	for (int i = 0; i < per; i++) {
		p[i] = reg_new(e, RC_PRED);
		if (snprintf(g[i], sizeof g[i], "@%s ", p[i].s) >= (int)sizeof g[i])
			kg_bug("indexer: guard of %s truncated", p[i].s);
	}
	op_bar_sync_why(e, 0, IDX_THREADS, "the merged list staged");
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", s.s, r->tid.s, k->sl.hist.s);
	for (int i = 0; i < per; i++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %d;\n", j.s, r->tid.s, IDX_THREADS * i, p[i].s,
		      j.s, K);
		emitf(e, "\t@%s ld.shared.u32 %s, [%s+%d];\n", p[i].s, x[i].s, s.s, 4 * IDX_THREADS * i);
	}
	for (int i = 0; i < per; i++)
		emit_translate_load(e, c, r, v[i], x[i], t, a, g[i]);
	for (int i = 0; i < per; i++)
		emit_translate_index(e, c, v[i], x[i], t, g[i]);
	for (int i = 0; i < per; i++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", j.s, r->tid.s,
		      IDX_THREADS * i, a.s, j.s, a.s, a.s, k->out.s);
		emitf(e, "\t@%s st.global.s32 [%s], %s;\n", p[i].s, a.s, v[i].s);
	}
}

/* The chunk select, rows of n > K only: the CTA's nl keys (its units
 * split + splits·m of `unit` keys, the last one partial) in rounds, with
 * a set of 4 histograms for each of two windows (A, B). The first round
 * selects over the first 2·win keys, kept by the scoring as keys alone
 * in the space of both windows (positions implied by the slot); the
 * later ones over a window of c->win keys with their positions beside
 * them (A: keys at 0, positions at 4·win; B: 8·win on), staging up to
 * win - K new keys after the K carried ones. Before the last round the
 * winners go to the other window's first K slots (B after the first
 * round), their top bytes counted in that window's first histogram, and
 * the windows swap with their histogram sets. A round that is not the
 * last zeroes its own set after its select (the scans, its last readers,
 * are behind the last pass's barrier), ready for the round after next;
 * the next stage's barrier orders the placing writes and the zeroing
 * before the next select. A CTA of at most K keys (its first round holds
 * them all) writes them all, then key 0 and index -1. */
static void
emit_chunk(Emit *e, const IndexerCfg *c, const IndexerRegs *r, IdxTk *k)
{
	int K = c->topk, lu = log2_ceil(c->unit);
	Reg u = reg_new(e, RC_B32), x = reg_new(e, RC_B32), t = reg_new(e, RC_B32), nl = reg_new(e, RC_B32);
	Reg off = reg_new(e, RC_B32), nw = reg_new(e, RC_B32), cnt = reg_new(e, RC_B32), hb = reg_new(e, RC_B32);
	Reg kbo = reg_new(e, RC_B32), j = reg_new(e, RC_B32), a32 = reg_new(e, RC_B32), kv = reg_new(e, RC_B32);
	Reg xv = reg_new(e, RC_B32), a = reg_new(e, RC_B64), b = reg_new(e, RC_B64);
	Reg p = reg_new(e, RC_PRED), q = reg_new(e, RC_PRED);
	Sel st, sel;
	SelLoad ld = {load_chunk, k};
	char round[48], sel_l[48], all[48], all_done[48], done[48], staged[48];

	k->lb = reg_new(e, RC_B32);
	k->kb = reg_new(e, RC_B32);
	k->ko = reg_new(e, RC_B32);
	k->ho = reg_new(e, RC_B32);
	k->last = reg_new(e, RC_PRED);
	k->first = reg_new(e, RC_PRED);
	emit_block(e, "indexer.chunk");
	label_new(e, round, sizeof round, "chunk_round");
	label_new(e, sel_l, sizeof sel_l, "chunk_select");
	label_new(e, all, sizeof all, "chunk_all");
	label_new(e, all_done, sizeof all_done, "chunk_all_done");
	label_new(e, done, sizeof done, "chunk_done");
	label_new(e, staged, sizeof staged, "chunk_staged");
	emitf(e, "\tsetp.le.s32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->n.s, K, p.s, done);
	/* nl: u units of the row, this CTA's mu = (u - split - 1) / splits + 1
	 * (0 when u <= split), the last partial when the CTA holds unit u - 1 */
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tshr.u32 %s, %s, %d;\n\tsetp.le.u32 %s, %s, %s;\n", u.s, r->n.s,
	      c->unit - 1, u.s, u.s, lu, q.s, u.s, r->split.s);
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tsub.u32 %s, %s, 1;\n\tdiv.u32 %s, %s, %s;\n", x.s, u.s, r->split.s, x.s,
	      x.s, x.s, x.s, r->splits.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tadd.u32 %s, %s, 1;\n\tshl.b32 %s, %s, %d;\n", t.s, x.s, r->splits.s,
	      r->split.s, nl.s, x.s, nl.s, nl.s, lu);
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.eq.u32 %s, %s, %s;\n\tshl.b32 %s, %s, %d;\n", t.s, t.s, p.s, t.s, u.s,
	      x.s, u.s, lu);
	emitf(e, "\tsub.u32 %s, %s, %s;\n\t@%s sub.u32 %s, %s, %s;\n\t@%s mov.u32 %s, 0;\n", x.s, x.s, r->n.s, p.s, nl.s,
	      nl.s, x.s, q.s, nl.s);
	/* window A and its histograms first; B's set is zeroed (prologue) */
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, %s;\n\tadd.u32 %s, %s, %d;\n", k->lb.s, off.s,
	      k->kb.s, k->sl.keys.s, k->ko.s, k->sl.keys.s, 8 * c->win);
	emitf(e, "\tmov.u32 %s, %s;\n\tadd.u32 %s, %s, %d;\n", hb.s, k->sl.hist.s, k->ho.s, k->sl.hist.s,
	      4 * SEL_BINS * SEL_PASSES);
	emit_label(e, round);
	/* nw = min(nl - lb, win - off) new keys after the off carried; the
	 * first round's 2·win were kept by the scoring (indexer_emit_keep) */
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\tsub.u32 %s, %d, %s;\n\t@%s mov.u32 %s, %d;\n", k->first.s, k->lb.s, t.s,
	      c->win, off.s, k->first.s, t.s, 2 * c->win);
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tmin.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", nw.s, nl.s, k->lb.s, nw.s,
	      nw.s, t.s, cnt.s, off.s, nw.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", kbo.s, off.s, k->kb.s);
	st = k->sl;
	st.keys = kbo;
	st.hist = hb;
	emitf(e, "\tadd.u32 %s, %s, %d;\n\t@%s bra %s;\n", a32.s, kbo.s, 4 * k->c->win, k->first.s, staged);
	sel_emit_stage(e, &st, kbo, NULL, a32, nw, c->win / IDX_THREADS, 1, 0, &ld);
	emit_label(e, staged);
	emitf(e, "\tsetp.gt.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, cnt.s, K, p.s, sel_l);
	/* at most K keys (the first round: one of several CTAs) */
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s, K, p.s,
	      all_done);
	emit_label(e, all);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, -1;\n", p.s, j.s, cnt.s, kv.s, xv.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s ld.shared.u32 %s, [%s];\n", a32.s, j.s, k->kb.s, p.s, kv.s, a32.s);
	emit_position(e, k, j, xv, &p);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.u32 [%s], %s;\n", a.s, j.s, b.s,
	      k->pk.s, a.s, b.s, kv.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\tst.global.s32 [%s], %s;\n", b.s, k->pi.s, a.s, b.s, xv.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS, p.s, j.s,
	      K, p.s, all);
	emit_label(e, all_done);
	emitf(e, "\tbra.uni %s;\n", done);
	emit_label(e, sel_l);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n", t.s, k->lb.s, nw.s, k->last.s, t.s, nl.s);
	sel = k->sl;
	sel.hist = hb;
	sel_emit_select(e, &sel, k->kb, cnt, 0, 1, place_chunk, k);
	emitf(e, "\t@%s bra %s;\n", k->last.s, done);
	/* this round's histograms, read for the last time two barriers ago,
	 * zeroed for the round after next; the windows swap */
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", a32.s, r->tid.s, hb.s);
	for (int i = 0; i < SEL_PASSES * SEL_BINS / IDX_THREADS; i++)
		emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", a32.s, 4 * IDX_THREADS * i);
	emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", t.s, k->kb.s, k->kb.s, k->ko.s, k->ko.s,
	      t.s);
	emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", t.s, hb.s, hb.s, k->ho.s, k->ho.s, t.s);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tmov.u32 %s, %d;\n\tbra.uni %s;\n", k->lb.s, k->lb.s, nw.s, off.s, K, round);
	emit_label(e, done);
}

/* Several CTAs per row: the row's counter joined (sel_emit_join); the
 * last part's CTA merges, the others exit. One CTA per row skips it. */
static void
emit_join(Emit *e, const IndexerRegs *r, const IdxTk *k)
{
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64);
	char joined[48];

	emit_block(e, "indexer.join");
	label_new(e, joined, sizeof joined, "joined");
	emitf(e, "\t@%s bra %s;\n", k->one.s, joined);
	op_param_global(e, a, "counters");
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, a.s, a.s, o.s);
	sel_emit_join(e, r->tid, IDX_THREADS, k->sl.state, a, r->splits);
	emit_label(e, joined);
}

/* The list: n <= K keys 0 .. n-1 in order, then -1; else one CTA per row
 * wrote it in its chunk select, and the last of several merges the
 * splits·K candidates (in windows A and B together: 2·win, with the
 * third set of histograms). */
static void
emit_list(Emit *e, const IndexerCfg *c, const IndexerRegs *r, IdxTk *k)
{
	int K = c->topk;
	Reg a = reg_new(e, RC_B64), j = reg_new(e, RC_B32), v = reg_new(e, RC_B32), t = reg_new(e, RC_B32);
	Reg p = reg_new(e, RC_PRED);
	char small[48], pad[48], small_done[48], sel[48], done[48];
	SelMerge mg;

	emit_block(e, "indexer.topk");
	label_new(e, small, sizeof small, "all_keys");
	label_new(e, pad, sizeof pad, "pad");
	label_new(e, small_done, sizeof small_done, "all_keys_done");
	label_new(e, sel, sizeof sel, "merge");
	label_new(e, done, sizeof done, "topk_done");
	emitf(e, "\tsetp.gt.s32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->n.s, K, p.s, sel);
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, r->tid.s, p.s, j.s, K, p.s,
	      small_done);
	emit_label(e, small);
	emitf(e, "\tmov.u32 %s, -1;\n\tsetp.lt.s32 %s, %s, %s;\n\t@!%s bra %s;\n", v.s, p.s, j.s, r->n.s, p.s, pad);
	emit_translate(e, c, r, v, j, t, a);
	emit_label(e, pad);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.s32 [%s], %s;\n", a.s, j.s, a.s,
	      a.s, k->out.s, a.s, v.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %d;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS, p.s,
	      j.s, K, p.s, small);
	emit_label(e, small_done);
	emitf(e, "\tbra.uni %s;\n", done);
	emit_label(e, sel);
	emitf(e, "\t@%s bra %s;\n", k->one.s, done);
	mg = (SelMerge){.parts = r->splits, .ck = k->ck, .ci = k->ci, .win = 2 * c->win, .h = 2 * SEL_PASSES,
	                .final = final_merge, .ctx = k};
	sel_emit_merge(e, &k->sl, &mg);
	emit_list_out(e, c, r, k);
	emit_label(e, done);
}

void
indexer_emit_topk(Emit *e, const IndexerCfg *c, const IndexerRegs *r)
{
	IdxTk k;

	memset(&k, 0, sizeof k);
	emit_setup(e, c, r, &k);
	emit_chunk(e, c, r, &k);
	emit_join(e, r, &k);
	indexer_emit_fill(e, r, 0);
	emit_list(e, c, r, &k);
}
