/* The radix top-k select every top-k in kgen shares (docs/indexer.md,
 * "Standalone top-k"): a CTA stages 32-bit
 * order-preserving keys in shared memory, building the first radix
 * pass's histogram as it goes, selects the top K by up to four radix
 * passes (fewer once the K-th key's bin is taken whole) and one placing
 * pass, and hands each selected key to its caller's
 * place callback; a merge selects over candidates (key, index) in global
 * memory in rounds. Used by gen/topk.c and gen/indexer.c. */
#ifndef KGEN_SELECT_H
#define KGEN_SELECT_H

#include "emit.h"

/* Radix bins and passes (8 bits each over 32-bit keys); the most keys a
 * histogram step loads (Sel.hist_keys). */
enum { SEL_BINS = 256, SEL_PASSES = 4, SEL_HIST_KEYS_MAX = 4 };

/* What a select reads, set by its kernel. threads >= SEL_BINS (the scan
 * takes one bin a thread), a multiple of 32. */
typedef struct Sel {
	int threads, topk;
	Reg tid, zero; /* b32: the thread, 0 */
	Reg keys;      /* shared: where sel_emit_stage stores keys (the merge's window) */
	Reg hist;      /* shared: histograms of SEL_BINS words, zero before a select counts in them */
	Reg scan;      /* shared: SEL_BINS / 32 words, the scan's warp totals */
	Reg state;     /* shared: 16 bytes: prefix, kk and the two placing counters */
	int batch;     /* sel_emit_stage's loads in flight a thread (their registers); 0: all */
	/* Pass 0's digit: 0 or 8 bits, or SEL_WIDE_BITS (SEL_WIDE_BINS bins,
	 * SEL_WIDE_BINS / threads a scanning thread; the later passes take 8,
	 * 8 and 5 bits). A set of histograms is sel_hist_units(s) units of
	 * SEL_BINS words: pass 0's first, then passes 1-3, one unit each. */
	int first_bits;
	/* cand_cap > 0: after pass 0 the keys in its bin and above are
	 * copied to cand (cand_cap keys, then their positions); passes 1-3
	 * and the placing read only those, unless more than cand_cap qualify
	 * (then they read every key, as without). cand_per: the most keys a
	 * thread holds in any select of this Sel (count <= threads·cand_per,
	 * at most 32). */
	Reg cand;
	int cand_cap, cand_per;
	/* Keys a thread loads per step of a pass's histogram (0 or 1: one;
	 * at most SEL_HIST_KEYS_MAX): registers for fewer waits. */
	int hist_keys;
} Sel;

enum { SEL_WIDE_BITS = 11, SEL_WIDE_BINS = 1 << SEL_WIDE_BITS };

/* Histogram units (SEL_BINS words) of one select's set of histograms. */
int sel_hist_units(const Sel *s);

/* Where a selected key goes: element j of the select's array, its slot
 * pos in the list (0 .. K-1), its key u. */
typedef void (*SelPlace)(Emit *e, const void *ctx, Reg j, Reg pos, Reg u);

/* u = the logit's bits in an order where a larger unsigned u is a larger
 * float: negatives inverted, positives with the sign bit set (m scratch). */
void sel_emit_key(Emit *e, Reg u, Reg m);

/* A stage's own loads (NULL: contiguous from src): element i, number el
 * (tid + threads·i), under predicate p (el < count), into v (a logit or a
 * key) and w (its index). */
typedef struct SelLoad {
	void (*load)(Emit *e, const void *ctx, int i, Reg el, Reg p, Reg v, Reg w);
	const void *ctx;
} SelLoad;

/* `count` keys at src (global) into shared memory at s->keys, thread tid
 * taking keys tid + threads·i (i < per), all of its loads issued before
 * the first store. Logits become keys (sel_emit_key) when `convert`;
 * candidates are keys already, and come with their indices (isrc, stored
 * at idx): both written by other CTAs or threads of this launch, so plain
 * loads, never .nc. With `ld`, its loads instead of src and isrc, and
 * indices stored at idx. With s->batch, the loads go in batches of that
 * many, each stored before the next is issued. The histogram at unit `h`
 * counts each key's pass-0 digit (its top byte, or top s->first_bits
 * bits). Ends with a CTA barrier. */
void sel_emit_stage(Emit *e, const Sel *s, Reg src, const Reg *isrc, Reg idx, Reg count, int per, int convert,
                    int h, const SelLoad *ld);

/* The top-K of `count` (> K) keys at `keys` (shared) by radix select,
 * the set of histograms at unit h (pass 0's built already when hist0),
 * each selected key handed to place(ctx, ..). */
void sel_emit_select(Emit *e, const Sel *s, Reg keys, Reg count, int h, int hist0, SelPlace place, const void *ctx);

/* The merge of parts·K candidates, keys at ck and indices at ci (global),
 * in rounds over windows of `win` (> K) staged at s->keys (keys, then
 * indices at keys + 4·win), the set of histograms at unit h (zero). The last round's
 * list goes through `final`: candidate index x to slot pos (a = 4·pos;
 * b64 scratch b), under predicate `last`. */
typedef struct SelMerge {
	Reg parts, ck, ci;
	int win, h;
	void (*final)(Emit *e, const void *ctx, Reg last, Reg a, Reg b, Reg x);
	const void *ctx;
	Reg idx, last, nk, ni; /* set by sel_emit_merge: staged indices, the last round, the next round's slots */
} SelMerge;

void sel_emit_merge(Emit *e, const Sel *s, SelMerge *m);

/* The join of a row's parts: counter (global, b64) counts the threads of
 * every part's CTA (threads each, parts CTAs), each CTA's candidates
 * stored before it counts; the last CTA to count goes on, with its
 * state+16 word raised and the counter back at 0, and every other CTA
 * exits. Ends with a CTA barrier. */
void sel_emit_join(Emit *e, Reg tid, int threads, Reg state, Reg counter, Reg parts);

#endif
