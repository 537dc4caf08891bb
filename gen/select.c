/* The shared radix top-k select (gen/select.h; docs/indexer.md,
 * "Standalone top-k"): staging, the four-pass select with its placing
 * pass, and the merge in rounds. Every instruction exists on every
 * target. */
#include <stdio.h>

#include "ops.h"
#include "select.h"

void
sel_emit_key(Emit *e, Reg u, Reg m)
{
	emitf(e, "\tshr.s32 %s, %s, 31;\n\tor.b32 %s, %s, 0x80000000;\n\txor.b32 %s, %s, %s;\n", m.s, u.s, m.s,
	      m.s, u.s, u.s, m.s);
}

void
sel_emit_stage(Emit *e, const Sel *s, Reg src, const Reg *isrc, Reg idx, Reg count, int per, int convert, int h,
               const SelLoad *ld)
{
	Reg v[64], w[64], j = reg_new(e, RC_B32), t = reg_new(e, RC_B32), m = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), ai = reg_new(e, RC_B64), ka = reg_new(e, RC_B32), ia = reg_new(e, RC_B32);
	Reg ha = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	int nb = s->batch > 0 && s->batch < per ? s->batch : per;

	if (per > 64)
		kg_bug("sel_emit_stage: %d keys a thread, at most 64", per);
	if (ld)
		isrc = &src; /* indices come with the keys */
	reg_array(e, RC_B32, v, nb);
	if (isrc)
		reg_array(e, RC_B32, w, nb);
	if (!ld) {
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, s->tid.s, a.s, src.s, a.s);
		if (isrc)
			emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", ai.s, s->tid.s, ai.s, isrc->s, ai.s);
	}
	for (int b0 = 0; b0 < per; b0 += nb) {
		int b1 = b0 + nb < per ? b0 + nb : per;

		for (int i = b0; i < b1; i++) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", j.s, s->tid.s, s->threads * i, p.s,
			      j.s, count.s);
			if (ld) {
				ld->load(e, ld->ctx, i, j, p, v[i - b0], w[i - b0]);
				continue;
			}
			emitf(e, "\t@%s ld.global%s.b32 %s, [%s+%d];\n", p.s, convert ? ".nc" : "", v[i - b0].s, a.s,
			      4 * s->threads * i);
			if (isrc)
				emitf(e, "\t@%s ld.global.b32 %s, [%s+%d];\n", p.s, w[i - b0].s, ai.s, 4 * s->threads * i);
		}
		if (b0 == 0) {
			emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tadd.u32 %s, %s, %u;\n", ka.s, s->tid.s, s->keys.s, ha.s,
			      s->hist.s, (unsigned)(4 * SEL_BINS * h));
			if (isrc)
				emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", ia.s, s->tid.s, idx.s);
		}
		for (int i = b0; i < b1; i++) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", j.s, s->tid.s, s->threads * i, p.s,
			      j.s, count.s);
			if (convert)
				sel_emit_key(e, v[i - b0], m);
			emitf(e, "\t@%s st.shared.u32 [%s+%d], %s;\n", p.s, ka.s, 4 * s->threads * i, v[i - b0].s);
			if (isrc)
				emitf(e, "\t@%s st.shared.u32 [%s+%d], %s;\n", p.s, ia.s, 4 * s->threads * i, w[i - b0].s);
			emitf(e, "\tshr.u32 %s, %s, 24;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s red.shared.add.u32 [%s], 1;\n",
			      t.s, v[i - b0].s, t.s, t.s, ha.s, p.s, t.s);
		}
	}
	op_bar_sync_why(e, 0, s->threads, "keys and their first histogram in shared memory");
}

/* u = key j (shared memory). */
static void
emit_load_key(Emit *e, Reg keys, Reg j, Reg u, Reg a32)
{
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n", a32.s, j.s, keys.s, u.s, a32.s);
}

/* Each pass histograms the digit of the keys whose higher bits equal the
 * prefix found so far (histogram h + pass), then the 256 bins are scanned
 * from the top by the first 256 threads (one bin each: a warp scan by
 * shfl.up, the 8 warp totals through shared memory) and the one thread
 * whose bin holds the kk-th largest key (kk: how many are still to pick
 * below the prefix) publishes the new prefix and kk. After 4 passes the
 * prefix is the K-th largest key u* and kk the number of keys equal to u*
 * to take: a final pass places every key above u* (K - kk of them) at
 * slots from one counter and the first kk keys equal to u* to win the
 * second counter after them, so a tie at the K-th key is broken by
 * arrival. */
void
sel_emit_select(Emit *e, const Sel *s, Reg keys, Reg count, int h, int hist0, SelPlace place, const void *ctx)
{
	int K = s->topk;
	Reg j = reg_new(e, RC_B32), u = reg_new(e, RC_B32), t = reg_new(e, RC_B32), prefix = reg_new(e, RC_B32);
	Reg kk = reg_new(e, RC_B32), hp = reg_new(e, RC_B32), b = reg_new(e, RC_B32), cnt = reg_new(e, RC_B32);
	Reg incl = reg_new(e, RC_B32), x = reg_new(e, RC_B32), w = reg_new(e, RC_B32), pos = reg_new(e, RC_B32);
	Reg sc = reg_new(e, RC_B32), a32 = reg_new(e, RC_B32);
	Reg p = reg_new(e, RC_PRED), q = reg_new(e, RC_PRED), hi = reg_new(e, RC_PRED), pg = reg_new(e, RC_PRED);
	Reg pe = reg_new(e, RC_PRED);
	char lp[48], lpd[48], sk1[48], sk2[48], fin[48], fin_next[48], fin_end[48];

	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, %d;\n", prefix.s, kk.s, K);
	emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 5;\n", hi.s, s->tid.s, SEL_BINS, w.s, s->tid.s);
	for (int pass = 0; pass < SEL_PASSES; pass++) {
		int shift = 24 - 8 * pass;
		uint32_t mask = pass ? 0xffffffffu << (32 - 8 * pass) : 0;

		emitf(e, "\tadd.u32 %s, %s, %u;\n", hp.s, s->hist.s, (unsigned)(4 * SEL_BINS * (h + pass)));
		if (!(pass == 0 && hist0)) {
			label_new(e, lp, sizeof lp, "hist");
			label_new(e, lpd, sizeof lpd, "hist_done");
			emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, s->tid.s, p.s, j.s,
			      count.s, p.s, lpd);
			emit_label(e, lp);
			emit_load_key(e, keys, j, u, a32);
			emitf(e, "\tand.b32 %s, %s, 0x%08x;\n\tsetp.eq.u32 %s, %s, %s;\n", t.s, u.s, mask, p.s, t.s,
			      prefix.s);
			emitf(e, "\tshr.u32 %s, %s, %d;\n\tand.b32 %s, %s, 255;\n\tmad.lo.u32 %s, %s, 4, %s;\n", t.s, u.s,
			      shift, t.s, t.s, t.s, t.s, hp.s);
			emitf(e, "\t@%s red.shared.add.u32 [%s], 1;\n", p.s, t.s);
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, s->threads,
			      p.s, j.s, count.s, p.s, lp);
			emit_label(e, lpd);
			op_bar_sync_why(e, 0, s->threads, "histogram complete");
		}
		/* thread t < 256 takes bin 255 - t: incl = keys in bins >= it */
		label_new(e, sk1, sizeof sk1, "scanned");
		label_new(e, sk2, sizeof sk2, "found");
		emitf(e, "\t@%s bra %s;\n", hi.s, sk1);
		emitf(e, "\tsub.u32 %s, %d, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n\tmov.u32 %s, %s;\n",
		      b.s, SEL_BINS - 1, s->tid.s, t.s, b.s, hp.s, cnt.s, t.s, incl.s, cnt.s);
		for (int d = 1; d < 32; d *= 2)
			emitf(e, "\tshfl.sync.up.b32 %s|%s, %s, %d, 0, 0xffffffff;\n\t@%s add.u32 %s, %s, %s;\n", x.s, q.s,
			      incl.s, d, q.s, incl.s, incl.s, x.s);
		emitf(e, "\tand.b32 %s, %s, 31;\n\tsetp.eq.u32 %s, %s, 31;\n\tmad.lo.u32 %s, %s, 4, %s;\n", t.s, s->tid.s,
		      q.s, t.s, t.s, w.s, s->scan.s);
		emitf(e, "\t@%s st.shared.u32 [%s], %s;\n", q.s, t.s, incl.s);
		emit_label(e, sk1);
		op_bar_sync_why(e, 0, s->threads, "warp totals of the bin scan");
		emitf(e, "\t@%s bra %s;\n", hi.s, sk2);
		for (int v = 0; v < SEL_BINS / 32 - 1; v++)
			emitf(e, "\tld.shared.u32 %s, [%s+%d];\n\tsetp.gt.u32 %s, %s, %d;\n\t@%s add.u32 %s, %s, %s;\n", x.s,
			      s->scan.s, 4 * v, q.s, w.s, v, q.s, incl.s, incl.s, x.s);
		/* the bin where the count from the top reaches kk: excl < kk <= incl */
		emitf(e, "\tsub.u32 %s, %s, %s;\n\tsetp.lt.u32 %s, %s, %s;\n\tsetp.ge.and.u32 %s, %s, %s, %s;\n", x.s,
		      incl.s, cnt.s, q.s, x.s, kk.s, q.s, incl.s, kk.s, q.s);
		emitf(e, "\tshl.b32 %s, %s, %d;\n\tor.b32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", t.s, b.s, shift, t.s, t.s,
		      prefix.s, x.s, kk.s, x.s);
		emitf(e, "\t@%s st.shared.v4.u32 [%s], {%s, %s, %s, %s};\n", q.s, s->state.s, t.s, x.s, s->zero.s,
		      s->zero.s);
		emit_label(e, sk2);
		op_bar_sync_why(e, 0, s->threads, "prefix and kk published");
		emitf(e, "\tld.shared.v2.u32 {%s, %s}, [%s];\n", prefix.s, kk.s, s->state.s);
	}
	/* place: state+8 counts keys above u*, state+12 keys equal (zeroed
	 * with the last prefix) */
	label_new(e, fin, sizeof fin, "place");
	label_new(e, fin_next, sizeof fin_next, "place_next");
	label_new(e, fin_end, sizeof fin_end, "placed");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, s->tid.s, p.s, j.s, count.s, p.s,
	      fin_end);
	emit_label(e, fin);
	emit_load_key(e, keys, j, u, a32);
	emitf(e, "\tsetp.gt.u32 %s, %s, %s;\n\tsetp.eq.u32 %s, %s, %s;\n", pg.s, u.s, prefix.s, pe.s, u.s, prefix.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+8], 1;\n", pg.s, pos.s, s->state.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+12], 1;\n", pe.s, sc.s, s->state.s);
	emitf(e, "\t@%s setp.lt.u32 %s, %s, %s;\n", pe.s, pe.s, sc.s, kk.s);
	emitf(e, "\t@%s sub.u32 %s, %d, %s;\n\t@%s add.u32 %s, %s, %s;\n", pe.s, pos.s, K, kk.s, pe.s, pos.s, pos.s,
	      sc.s);
	emitf(e, "\tor.pred %s, %s, %s;\n\t@!%s bra %s;\n", p.s, pg.s, pe.s, p.s, fin_next);
	place(e, ctx, j, pos, u);
	emit_label(e, fin_next);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, s->threads, p.s, j.s,
	      count.s, p.s, fin);
	emit_label(e, fin_end);
}

/* A merge round: candidate j of the window (its index staged beside the
 * keys) goes to the list (m->final) in the last round, else to slot pos
 * of the next round's first K. */
static void
place_merge(Emit *e, const void *ctx, Reg j, Reg pos, Reg u)
{
	const SelMerge *m = ctx;
	Reg a = reg_new(e, RC_B64), b = reg_new(e, RC_B64), x = reg_new(e, RC_B32), a32 = reg_new(e, RC_B32);

	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, 4;\n", a32.s, j.s,
	      m->idx.s, x.s, a32.s, a.s, pos.s);
	m->final(e, m->ctx, m->last, a, b, x);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.u32 [%s], %s;\n", m->last.s, b.s, m->nk.s, a.s,
	      m->last.s, b.s, u.s);
	emitf(e, "\t@!%s add.u64 %s, %s, %s;\n\t@!%s st.global.s32 [%s], %s;\n", m->last.s, b.s, m->ni.s, a.s,
	      m->last.s, b.s, x.s);
}

/* A round selects the window's top-K; the last round writes them to the
 * list, an earlier one over the window's last K candidate slots (staged
 * already, so no thread still reads them), where the next window starts.
 * Each round after the first takes win - K new candidates. */
void
sel_emit_merge(Emit *e, const Sel *sl, SelMerge *mg)
{
	int K = sl->topk, step = mg->win - K;
	Reg m = reg_new(e, RC_B32), s = reg_new(e, RC_B32), cnt = reg_new(e, RC_B32), o = reg_new(e, RC_B64);
	Reg sk = reg_new(e, RC_B64), si = reg_new(e, RC_B64), h = reg_new(e, RC_B32);
	char round[48], done[48];

	mg->idx = reg_new(e, RC_B32);
	mg->last = reg_new(e, RC_PRED);
	mg->nk = reg_new(e, RC_B64);
	mg->ni = reg_new(e, RC_B64);
	label_new(e, round, sizeof round, "round");
	label_new(e, done, sizeof done, "merged");
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmov.u32 %s, 0;\n\tadd.u32 %s, %s, %d;\n", m.s, mg->parts.s, K, s.s,
	      mg->idx.s, sl->keys.s, 4 * mg->win);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", h.s, sl->tid.s, sl->hist.s);
	emit_label(e, round);
	/* window [s, s + cnt), cnt = min(m - s, win) */
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tsetp.le.u32 %s, %s, %d;\n\tmin.u32 %s, %s, %d;\n", cnt.s, m.s, s.s,
	      mg->last.s, cnt.s, mg->win, cnt.s, cnt.s, mg->win);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tadd.u64 %s, %s, %s;\n", o.s, s.s, sk.s, mg->ck.s,
	      o.s, si.s, mg->ci.s, o.s);
	emitf(e, "\tadd.u64 %s, %s, %d;\n\tadd.u64 %s, %s, %d;\n", mg->nk.s, sk.s, 4 * step, mg->ni.s, si.s, 4 * step);
	sel_emit_stage(e, sl, sk, &si, mg->idx, cnt, mg->win / sl->threads, 0, mg->h, NULL);
	sel_emit_select(e, sl, sl->keys, cnt, mg->h, 1, place_merge, mg);
	emitf(e, "\t@%s bra %s;\n", mg->last.s, done);
	for (int i = 0; i < SEL_PASSES * SEL_BINS / sl->threads; i++)
		emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", h.s, 4 * SEL_BINS * mg->h + 4 * sl->threads * i);
	/* the scan's last reads of them were two barriers ago */
	op_bar_sync_why(e, 0, sl->threads, "the round's top-k stored, the window read, its histograms zeroed");
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tbra.uni %s;\n", s.s, s.s, step, round);
	emit_label(e, done);
}
