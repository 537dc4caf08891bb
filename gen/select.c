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

/* Pass p's digit: the key's bits shift .. shift+bits-1, the prefix bits
 * above it (`above`), its histogram's unit in the set and its bins (a
 * pass under 8 bits still scans SEL_BINS, the top ones empty). */
typedef struct SelDigit {
	int shift, bits, unit, bins;
	uint32_t above;
} SelDigit;

static SelDigit
sel_digit(const Sel *s, int pass)
{
	int b0 = s->first_bits ? s->first_bits : 8, top = pass ? 32 - b0 - 8 * (pass - 1) : 32;
	SelDigit d;

	d.bits = pass ? (top < 8 ? top : 8) : b0;
	d.shift = top - d.bits;
	d.above = top == 32 ? 0 : 0xffffffffu << top;
	d.unit = pass ? (1 << b0) / SEL_BINS + pass - 1 : 0;
	d.bins = d.bits > 8 ? 1 << d.bits : SEL_BINS;
	return d;
}

int
sel_hist_units(const Sel *s)
{
	SelDigit last = sel_digit(s, SEL_PASSES - 1);

	return last.unit + 1;
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
			emitf(e, "\tshr.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s red.shared.add.u32 [%s], 1;\n",
			      t.s, v[i - b0].s, sel_digit(s, 0).shift, t.s, t.s, ha.s, p.s, t.s);
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

/* The registers of one select. */
typedef struct SelRegs {
	Reg j, u, t, prefix, kk, hp, b, cnt, incl, x, w, pos, sc, a32;
	Reg mask; /* the key bits the placing compares with the prefix */
	Reg p, q, hi, pg, pe;
	Reg src, n, jj, pm, cn; /* cand_cap: the keys the later passes read, their count, a key's position, the
	                         * bin's prefix; the candidates */
	Reg cm;                 /* cand_cap: the candidates fit */
	Reg c[8];               /* a wide scan's bins */
} SelRegs;

/* Histogram d of the keys src[0 .. n-1] whose bits above it equal the
 * prefix. A thread takes keys j + threads·i, i < s->hist_keys, a step:
 * all their loads before the first count, so a step waits for one
 * shared-memory latency, not hist_keys. */
static void
emit_hist(Emit *e, const Sel *s, const SelRegs *r, Reg src, Reg n, SelDigit d)
{
	Reg u[SEL_HIST_KEYS_MAX], in[SEL_HIST_KEYS_MAX];
	int nk = s->hist_keys > 1 ? s->hist_keys : 1;
	char lp[48], lpd[48];

	if (nk > SEL_HIST_KEYS_MAX)
		kg_bug("select: %d keys a histogram step", nk);
	u[0] = r->u;
	for (int i = 1; i < nk; i++) {
		u[i] = reg_new(e, RC_B32);
		in[i] = reg_new(e, RC_PRED); /* key i of the step exists (key 0 does: the loop's test) */
	}
	label_new(e, lp, sizeof lp, "hist");
	label_new(e, lpd, sizeof lpd, "hist_done");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", r->j.s, s->tid.s, r->p.s, r->j.s, n.s,
	      r->p.s, lpd);
	emit_label(e, lp);
	emit_load_key(e, src, r->j, u[0], r->a32);
	for (int i = 1; i < nk; i++)
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s ld.shared.u32 %s, [%s+%d];\n", r->t.s,
		      r->j.s, s->threads * i, in[i].s, r->t.s, n.s, in[i].s, u[i].s, r->a32.s, 4 * s->threads * i);
	for (int i = 0; i < nk; i++) {
		emitf(e, "\tand.b32 %s, %s, 0x%08x;\n\tsetp.eq.u32 %s, %s, %s;\n", r->t.s, u[i].s, d.above, r->p.s,
		      r->t.s, r->prefix.s);
		if (i)
			emitf(e, "\tand.pred %s, %s, %s;\n", r->p.s, r->p.s, in[i].s);
		emitf(e, "\tshr.u32 %s, %s, %d;\n\tand.b32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n", r->t.s, u[i].s,
		      d.shift, r->t.s, r->t.s, (1 << d.bits) - 1, r->t.s, r->t.s, r->hp.s);
		emitf(e, "\t@%s red.shared.add.u32 [%s], 1;\n", r->p.s, r->t.s);
	}
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", r->j.s, r->j.s, s->threads * nk,
	      r->p.s, r->j.s, n.s, r->p.s, lp);
	emit_label(e, lpd);
	op_bar_sync_why(e, 0, s->threads, "histogram complete");
}

/* incl = the inclusive sum of incl over the warp's lanes (shfl.up), the
 * warp's total (lane 31's) stored at scan[warp w]. */
static void
emit_warp_scan(Emit *e, const Sel *s, const SelRegs *r)
{
	for (int dd = 1; dd < 32; dd *= 2)
		emitf(e, "\tshfl.sync.up.b32 %s|%s, %s, %d, 0, 0xffffffff;\n\t@%s add.u32 %s, %s, %s;\n", r->x.s, r->q.s,
		      r->incl.s, dd, r->q.s, r->incl.s, r->incl.s, r->x.s);
	emitf(e, "\tand.b32 %s, %s, 31;\n\tsetp.eq.u32 %s, %s, 31;\n\tmad.lo.u32 %s, %s, 4, %s;\n", r->t.s, s->tid.s,
	      r->q.s, r->t.s, r->t.s, r->w.s, s->scan.s);
	emitf(e, "\t@%s st.shared.u32 [%s], %s;\n", r->q.s, r->t.s, r->incl.s);
}

/* incl += the totals of the warps before warp w among the first nwarps
 * (emit_warp_scan stored them): the count from the top through this
 * thread's bins. */
static void
emit_add_warp_totals(Emit *e, const Sel *s, const SelRegs *r, int nwarps)
{
	for (int v = 0; v < nwarps - 1; v++)
		emitf(e, "\tld.shared.u32 %s, [%s+%d];\n\tsetp.gt.u32 %s, %s, %d;\n\t@%s add.u32 %s, %s, %s;\n", r->x.s,
		      s->scan.s, 4 * v, r->q.s, r->w.s, v, r->q.s, r->incl.s, r->incl.s, r->x.s);
}

/* The thread whose bin holds the kk-th largest key (excl < kk <= incl,
 * counts from the top) publishes prefix | bin << shift and kk - excl,
 * zeroing the placing counters. */
static void
emit_publish(Emit *e, const Sel *s, const SelRegs *r, SelDigit d, Reg bin)
{
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tsetp.lt.u32 %s, %s, %s;\n\tsetp.ge.and.u32 %s, %s, %s, %s;\n", r->x.s,
	      r->incl.s, r->cnt.s, r->q.s, r->x.s, r->kk.s, r->q.s, r->incl.s, r->kk.s, r->q.s);
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tor.b32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", r->t.s, bin.s, d.shift, r->t.s,
	      r->t.s, r->prefix.s, r->x.s, r->kk.s, r->x.s);
	/* the whole bin taken: flagged in kk's top bit (emit_early_exit) */
	emitf(e, "\tsetp.eq.u32 %s, %s, %s;\n\t@%s or.b32 %s, %s, 0x80000000;\n", r->pe.s, r->x.s, r->cnt.s, r->pe.s,
	      r->x.s, r->x.s);
	emitf(e, "\t@%s st.shared.v4.u32 [%s], {%s, %s, %s, %s};\n", r->q.s, s->state.s, r->t.s, r->x.s, s->zero.s,
	      s->zero.s);
}

/* The scan of SEL_BINS bins: thread t < 256 takes bin 255 - t, incl =
 * keys in bins >= it by a warp scan (shfl.up) and the warp totals. */
static void
emit_scan(Emit *e, const Sel *s, const SelRegs *r, SelDigit d)
{
	char sk1[48], sk2[48];

	label_new(e, sk1, sizeof sk1, "scanned");
	label_new(e, sk2, sizeof sk2, "found");
	emitf(e, "\t@%s bra %s;\n", r->hi.s, sk1);
	emitf(e, "\tsub.u32 %s, %d, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n\tmov.u32 %s, %s;\n",
	      r->b.s, SEL_BINS - 1, s->tid.s, r->t.s, r->b.s, r->hp.s, r->cnt.s, r->t.s, r->incl.s, r->cnt.s);
	emit_warp_scan(e, s, r);
	emit_label(e, sk1);
	op_bar_sync_why(e, 0, s->threads, "warp totals of the bin scan");
	emitf(e, "\t@%s bra %s;\n", r->hi.s, sk2);
	emit_add_warp_totals(e, s, r, SEL_BINS / 32);
	/* the bin where the count from the top reaches kk: excl < kk <= incl */
	emit_publish(e, s, r, d, r->b);
	emit_label(e, sk2);
}

/* The scan of a wide pass (d.bins > SEL_BINS): every thread takes
 * per = bins / threads adjacent bins from the top (thread t: bins
 * bins-1 - per·t down), sums them, scans the sums as above, then walks
 * its own bins downwards from the count above them. */
static void
emit_scan_wide(Emit *e, const Sel *s, const SelRegs *r, SelDigit d)
{
	int per = d.bins / s->threads; /* checked where r->c was allocated */

	/* b: the thread's top bin; t: the address of its lowest, b - per + 1;
	 * c[i]: bin b - i */
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tsub.u32 %s, %d, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", r->b.s, s->tid.s,
	      per, r->b.s, d.bins - 1, r->b.s, r->t.s, r->b.s, r->hp.s);
	emitf(e, "\tsub.u32 %s, %s, %d;\n", r->t.s, r->t.s, 4 * (per - 1));
	for (int i = 0; i < per; i++)
		emitf(e, "\tld.shared.u32 %s, [%s+%d];\n", r->c[i].s, r->t.s, 4 * (per - 1 - i));
	emitf(e, "\tmov.u32 %s, %s;\n", r->cnt.s, r->c[0].s);
	for (int i = 1; i < per; i++)
		emitf(e, "\tadd.u32 %s, %s, %s;\n", r->cnt.s, r->cnt.s, r->c[i].s);
	emitf(e, "\tmov.u32 %s, %s;\n", r->incl.s, r->cnt.s);
	emit_warp_scan(e, s, r);
	op_bar_sync_why(e, 0, s->threads, "warp totals of the bin scan");
	emit_add_warp_totals(e, s, r, s->threads / 32);
	/* incl: the keys in this thread's bins and above; walk them from the
	 * top with incl = the count through bin b - i */
	emitf(e, "\tsub.u32 %s, %s, %s;\n", r->incl.s, r->incl.s, r->cnt.s);
	for (int i = 0; i < per; i++) {
		emitf(e, "\tmov.u32 %s, %s;\n\tadd.u32 %s, %s, %s;\n", r->cnt.s, r->c[i].s, r->incl.s, r->incl.s,
		      r->c[i].s);
		if (i)
			emitf(e, "\tsub.u32 %s, %s, 1;\n", r->b.s, r->b.s);
		emit_publish(e, s, r, d, r->b);
	}
}

/* cand_cap: after pass 0 every key in its bin or above (at most K - 1
 * above it) is copied to the candidates; the later passes and the placing
 * read them when all fit in cand_cap, else every key as without (r->src,
 * r->n, and the positions r->cm picks). No atomics: each thread marks its
 * keys (tid + threads·i, i < cand_per) in a mask, the CTA scans the
 * threads' counts (a warp scan by shfl.up, the warp totals through the
 * scan words), and each thread copies its marked keys to its slots. */
static void
emit_filter(Emit *e, const Sel *s, const SelRegs *r, Reg keys, Reg count)
{
	SelDigit d = sel_digit(s, 0);
	uint32_t bin = 0xffffffffu << d.shift;
	Reg mk = reg_new(e, RC_B32), ex = reg_new(e, RC_B32), pin = reg_new(e, RC_PRED);
	char lp[48], end[48];

	if (s->cand_per < 1 || s->cand_per > 32)
		kg_bug("select: %d keys a thread to filter", s->cand_per);
	label_new(e, lp, sizeof lp, "copy");
	label_new(e, end, sizeof end, "copied");
	emitf(e, "\tand.b32 %s, %s, 0x%08x;\n\tmov.u32 %s, 0;\n\tmad.lo.u32 %s, %s, 4, %s;\n", r->pm.s, r->prefix.s, bin,
	      mk.s, r->a32.s, s->tid.s, keys.s);
	for (int i = 0; i < s->cand_per; i++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s ld.shared.u32 %s, [%s+%d];\n", r->j.s,
		      s->tid.s, s->threads * i, pin.s, r->j.s, count.s, pin.s, r->u.s, r->a32.s, 4 * s->threads * i);
		emitf(e, "\tand.b32 %s, %s, 0x%08x;\n\tsetp.ge.and.u32 %s, %s, %s, %s;\n\t@%s or.b32 %s, %s, 0x%08x;\n",
		      r->t.s, r->u.s, bin, pin.s, r->t.s, r->pm.s, pin.s, pin.s, mk.s, mk.s, 1u << i);
	}
	/* ex = the marked keys of the threads before this one; cn = all */
	emitf(e, "\tpopc.b32 %s, %s;\n\tmov.u32 %s, %s;\n", r->cnt.s, mk.s, r->incl.s, r->cnt.s);
	emit_warp_scan(e, s, r);
	op_bar_sync_why(e, 0, s->threads, "the filter's warp totals");
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tmov.u32 %s, 0;\n", ex.s, r->incl.s, r->cnt.s, r->cn.s);
	for (int v = 0; v < s->threads / 32; v++)
		emitf(e, "\tld.shared.u32 %s, [%s+%d];\n\tsetp.gt.u32 %s, %s, %d;\n\t@%s add.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n",
		      r->x.s, s->scan.s, 4 * v, r->q.s, r->w.s, v, r->q.s, ex.s, ex.s, r->x.s, r->cn.s, r->cn.s, r->x.s);
	emitf(e, "\tsetp.le.u32 %s, %s, %d;\n", r->cm.s, r->cn.s, s->cand_cap);
	/* copy the marked keys, highest i first, when they all fit */
	emitf(e, "\tsetp.eq.or.u32 %s, %s, 0, !%s;\n\t@%s bra %s;\n", r->p.s, mk.s, r->cm.s, r->p.s, end);
	emit_label(e, lp);
	emitf(e, "\tclz.b32 %s, %s;\n\tsub.u32 %s, 31, %s;\n\tshl.b32 %s, 1, %s;\n\txor.b32 %s, %s, %s;\n", r->t.s,
	      mk.s, r->t.s, r->t.s, r->x.s, r->t.s, mk.s, mk.s, r->x.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.u32 %s, [%s];\n", r->j.s, r->t.s,
	      s->threads, s->tid.s, r->a32.s, r->j.s, keys.s, r->u.s, r->a32.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tst.shared.u32 [%s], %s;\n\tst.shared.u32 [%s+%d], %s;\n", r->a32.s, ex.s,
	      s->cand.s, r->a32.s, r->u.s, r->a32.s, 4 * s->cand_cap, r->j.s);
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", ex.s, ex.s, r->p.s, mk.s, r->p.s, lp);
	emit_label(e, end);
	op_bar_sync_why(e, 0, s->threads, "the keys of pass 0's bin and above copied");
	emitf(e, "\tselp.b32 %s, %s, %s, %s;\n\tselp.b32 %s, %s, %s, %s;\n", r->src.s, s->cand.s, keys.s, r->cm.s, r->n.s,
	      r->cn.s, count.s, r->cm.s);
}

/* After pass d's publish: kk's top bit says the bin the prefix ends in
 * holds exactly kk keys (emit_publish), so every key of it is selected
 * and the later passes would find nothing new: the placing starts at
 * once, comparing only the bits resolved so far (mask). The flag comes
 * with kk, not from the histogram, whose words a merge zeroes once a
 * thread has placed its keys. Every thread reads the same word, so the
 * branch is uniform over the CTA. */
static void
emit_early_exit(Emit *e, const SelRegs *r, SelDigit d, const char *place)
{
	emitf(e, "\tsetp.ge.u32 %s, %s, 0x80000000;\n\tand.b32 %s, %s, 0x7fffffff;\n", r->q.s, r->kk.s, r->kk.s,
	      r->kk.s);
	if (place)
		emitf(e, "\tmov.u32 %s, 0x%08x;\n\t@%s bra %s;\n", r->mask.s, 0xffffffffu << d.shift, r->q.s, place);
}

/* Each pass histograms the digit of the keys whose higher bits equal the
 * prefix found so far (one histogram a pass), then the bins are scanned
 * from the top (emit_scan, emit_scan_wide) and the one thread whose bin
 * holds the kk-th largest key (kk: how many are still to pick below the
 * prefix) publishes the new prefix and kk. After 4 passes the prefix is
 * the K-th largest key u* and kk the number of keys equal to u* to take:
 * a final pass places every key above u* (K - kk of them) at slots from
 * one counter and the first kk keys equal to u* to win the second counter
 * after them, so a tie at the K-th key is broken by arrival. A pass
 * whose bin is taken whole ends the passes early (emit_early_exit): the
 * placing then compares the bits resolved so far. With cand_cap, passes
 * 1-3 and the placing read pass 0's candidates (emit_filter) where they
 * fit. */
void
sel_emit_select(Emit *e, const Sel *s, Reg keys, Reg count, int h, int hist0, SelPlace place, const void *ctx)
{
	int K = s->topk;
	SelDigit d0 = sel_digit(s, 0);
	SelRegs r;
	Reg src = keys, n = count;
	char fin[48], fin_next[48], fin_end[48], fin_start[48];

	r.j = reg_new(e, RC_B32);
	r.u = reg_new(e, RC_B32);
	r.t = reg_new(e, RC_B32);
	r.prefix = reg_new(e, RC_B32);
	r.kk = reg_new(e, RC_B32);
	r.hp = reg_new(e, RC_B32);
	r.b = reg_new(e, RC_B32);
	r.mask = r.b; /* the scans' bin is dead from the last scan on */
	r.cnt = reg_new(e, RC_B32);
	r.incl = reg_new(e, RC_B32);
	r.x = reg_new(e, RC_B32);
	r.w = reg_new(e, RC_B32);
	r.pos = reg_new(e, RC_B32);
	r.sc = reg_new(e, RC_B32);
	r.a32 = reg_new(e, RC_B32);
	r.p = reg_new(e, RC_PRED);
	r.q = reg_new(e, RC_PRED);
	r.hi = reg_new(e, RC_PRED);
	r.pg = reg_new(e, RC_PRED);
	r.pe = reg_new(e, RC_PRED);
	if (d0.bins > SEL_BINS) {
		/* the wide first pass: its bins, per thread, in r.c */
		int per = d0.bins / s->threads;
		if (per * s->threads != d0.bins || per > (int)(sizeof r.c / sizeof r.c[0]))
			kg_bug("select: a %d-bin scan by %d threads", d0.bins, s->threads);
		reg_array(e, RC_B32, r.c, per);
	}
	if (s->cand_cap) {
		r.src = src = reg_new(e, RC_B32);
		r.n = n = reg_new(e, RC_B32);
		r.jj = reg_new(e, RC_B32);
		r.pm = reg_new(e, RC_B32);
		r.cn = reg_new(e, RC_B32);
		r.cm = reg_new(e, RC_PRED);
	}

	label_new_late(e, fin_start, sizeof fin_start, "place_from");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, %d;\n", r.prefix.s, r.kk.s, K);
	emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 5;\n", r.hi.s, s->tid.s, SEL_BINS, r.w.s, s->tid.s);
	for (int pass = 0; pass < SEL_PASSES; pass++) {
		SelDigit d = sel_digit(s, pass);

		emitf(e, "\tadd.u32 %s, %s, %u;\n", r.hp.s, s->hist.s, (unsigned)(4 * SEL_BINS * (h + d.unit)));
		if (!(pass == 0 && hist0))
			emit_hist(e, s, &r, pass ? src : keys, pass ? n : count, d);
		if (d.bins > SEL_BINS)
			emit_scan_wide(e, s, &r, d);
		else
			emit_scan(e, s, &r, d);
		op_bar_sync_why(e, 0, s->threads, "prefix and kk published");
		emitf(e, "\tld.shared.v2.u32 {%s, %s}, [%s];\n", r.prefix.s, r.kk.s, s->state.s);
		if (pass == 0 && s->cand_cap)
			emit_filter(e, s, &r, keys, count);
		emit_early_exit(e, &r, d, pass < SEL_PASSES - 1 ? fin_start : NULL);
	}
	emitf(e, "\tmov.u32 %s, 0xffffffff;\n", r.mask.s);
	emit_label(e, fin_start);
	/* place: state+8 counts keys above u*, state+12 keys equal (zeroed
	 * with pass 0's prefix) */
	label_new(e, fin, sizeof fin, "place");
	label_new(e, fin_next, sizeof fin_next, "place_next");
	label_new(e, fin_end, sizeof fin_end, "placed");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", r.j.s, s->tid.s, r.p.s, r.j.s, n.s,
	      r.p.s, fin_end);
	emit_label(e, fin);
	emit_load_key(e, src, r.j, r.u, r.a32);
	emitf(e, "\tand.b32 %s, %s, %s;\n\tsetp.gt.u32 %s, %s, %s;\n\tsetp.eq.u32 %s, %s, %s;\n", r.t.s, r.u.s,
	      r.mask.s, r.pg.s, r.t.s, r.prefix.s, r.pe.s, r.t.s, r.prefix.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+8], 1;\n", r.pg.s, r.pos.s, s->state.s);
	emitf(e, "\t@%s atom.shared.add.u32 %s, [%s+12], 1;\n", r.pe.s, r.sc.s, s->state.s);
	emitf(e, "\t@%s setp.lt.u32 %s, %s, %s;\n", r.pe.s, r.pe.s, r.sc.s, r.kk.s);
	emitf(e, "\t@%s sub.u32 %s, %d, %s;\n\t@%s add.u32 %s, %s, %s;\n", r.pe.s, r.pos.s, K, r.kk.s, r.pe.s, r.pos.s,
	      r.pos.s, r.sc.s);
	emitf(e, "\tor.pred %s, %s, %s;\n\t@!%s bra %s;\n", r.p.s, r.pg.s, r.pe.s, r.p.s, fin_next);
	if (s->cand_cap) {
		/* a candidate's position in the array */
		emitf(e, "\tmov.u32 %s, %s;\n\t@%s mad.lo.u32 %s, %s, 4, %s;\n\t@%s ld.shared.u32 %s, [%s+%d];\n", r.jj.s,
		      r.j.s, r.cm.s, r.a32.s, r.j.s, s->cand.s, r.cm.s, r.jj.s, r.a32.s, 4 * s->cand_cap);
		place(e, ctx, r.jj, r.pos, r.u);
	} else {
		place(e, ctx, r.j, r.pos, r.u);
	}
	emit_label(e, fin_next);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", r.j.s, r.j.s, s->threads, r.p.s,
	      r.j.s, n.s, r.p.s, fin);
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
	int words = sel_hist_units(sl) * SEL_BINS, full = words / sl->threads;
	for (int i = 0; i < full; i++)
		emitf(e, "\tst.shared.u32 [%s+%d], 0;\n", h.s, 4 * SEL_BINS * mg->h + 4 * sl->threads * i);
	if (words % sl->threads) {
		/* a set that is not a whole number of the threads' words */
		Reg p = reg_new(e, RC_PRED);
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\t@%s st.shared.u32 [%s+%d], 0;\n", p.s, sl->tid.s,
		      words % sl->threads, p.s, h.s, 4 * SEL_BINS * mg->h + 4 * sl->threads * full);
	}
	/* the scan's last reads of them were two barriers ago */
	op_bar_sync_why(e, 0, sl->threads, "the round's top-k stored, the window read, its histograms zeroed");
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tbra.uni %s;\n", s.s, s.s, step, round);
	emit_label(e, done);
}

/* Every warp, its lanes' candidates stored, meets at bar.warp.sync (which
 * orders its lanes' stores before lane 0's next operations), and lane 0
 * counts the warp's 32 threads in the row's counter with a release
 * atomic (PTX ISA "Memory consistency model": the release covers what its
 * thread has observed); the lane that brings the count to
 * parts·threads acquires every other's by an acquire load of the word
 * (the increments form one release sequence it reads the end of;
 * acquiring in one thread keeps the L1 invalidation of an acquire out of
 * the others). That lane raises its CTA's flag (state+16) and sets the
 * counter back to 0, so the counters stay zero between launches; after a
 * CTA barrier its CTA goes on to merge and the others exit. One atomic a
 * warp, not a thread: threads/32 release fences a CTA. */
void
sel_emit_join(Emit *e, Reg tid, int threads, Reg state, Reg counter, Reg parts)
{
	Reg f = reg_new(e, RC_B32), all = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), l0 = reg_new(e, RC_PRED);
	int lg = log2_ceil(threads);

	if (threads != 1 << lg || threads % 32)
		kg_bug("select: a join of %d threads", threads);
	emitf(e, "\tand.b32 %s, %s, 31;\n\tsetp.eq.u32 %s, %s, 0;\n\tbar.warp.sync 0xffffffff;\n", f.s, tid.s, l0.s,
	      f.s);
	emitf(e, "\t@%s atom.release.gpu.global.add.u32 %s, [%s], 32;\n\tadd.u32 %s, %s, 32;\n", l0.s, f.s,
	      counter.s, f.s, f.s);
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tsetp.eq.and.u32 %s, %s, %s, %s;\n", all.s, parts.s, lg, p.s, f.s, all.s,
	      l0.s);
	emitf(e, "\t@%s ld.acquire.gpu.global.u32 %s, [%s];\n", p.s, f.s, counter.s);
	emitf(e, "\t@%s st.shared.u32 [%s+16], 1;\n\t@%s st.global.u32 [%s], 0;\n", p.s, state.s, p.s, counter.s);
	op_bar_sync_why(e, 0, threads, "the last part's flag raised");
	emitf(e, "\tld.shared.u32 %s, [%s+16];\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s exit;\n", f.s, state.s, p.s, f.s,
	      p.s);
}
