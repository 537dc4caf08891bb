/* The attention reference: O = softmax(scale·Q·Kᵀ + mask)·V in float64,
 * with the layout and conventions of the kgen fmha kernel (docs/ABI.md
 * "fmha"):
 *
 *   Q [total_q, hq, d], K [total_k, hkv, d], V [total_k, hkv, dv], row-major,
 *   O [total_q, hq, dv], LSE [hq, total_q];
 *   sequence b owns query rows cu_q[b] .. cu_q[b+1]-1 and key rows
 *   cu_k[b] .. cu_k[b+1]-1 (packed varlen; fixed length is equal steps);
 *   query head h reads key/value head h / (hq / hkv) (MHA, GQA, MQA);
 *   masks are aligned bottom-right: with sq queries and sk keys, query i
 *   sits on the diagonal at key i + sk - sq.
 *
 * Per (query head, query row): scores s_j = scale·q·k_j over the visible
 * keys, p = softmax(s), O = Σ p_j v_j, LSE = log Σ exp(s_j) (natural log).
 * A row with no visible key gets O = 0 and LSE = -inf.
 *
 * Inputs decode exactly to double and the products q_i·k_i are exact; the
 * error here is float64 summation and exp/log (~1e-15 relative), nothing
 * next to a kernel's fp32 accumulation and bf16 P. */
#ifndef KGEN_REF_FMHA_REF_H
#define KGEN_REF_FMHA_REF_H

#include <stddef.h>
#include <stdint.h>

#include "num.h"

typedef enum FmhaMask {
	FMHA_MASK_NONE,   /* every key of the sequence */
	FMHA_MASK_CAUSAL, /* keys j <= i + sk - sq */
	FMHA_MASK_WINDOW, /* keys i + sk - sq - left <= j <= i + sk - sq + right */
	FMHA_NMASKS
} FmhaMask;

const char *fmha_mask_name(FmhaMask m);          /* "none", "causal", "window" */
int fmha_mask_parse(const char *s, FmhaMask *m); /* 0, or -1 */

typedef struct FmhaProblem {
	NumType type;          /* of Q, K and V */
	const void *q, *k, *v; /* v may be k (kv-shared; then dv == d) */
	const int32_t *cu_q;   /* [batch + 1], non-decreasing from 0 */
	const int32_t *cu_k;   /* [batch + 1] */
	uint32_t batch;
	uint32_t hq, hkv;      /* hq a multiple of hkv */
	uint32_t d, dv;
	FmhaMask mask;
	/* Sliding window, bottom-right aligned like the mask: query i sees key
	 * j only if diag - window_left <= j <= diag + window_right, diag =
	 * i + sk - sq. Negative: unlimited on that side. Causal is the same
	 * as window_right = 0, and the two combine. */
	int64_t window_left, window_right;
	double scale;
} FmhaProblem;

/* One output row: query head `head` of global query row `row` (0 ..
 * total_q - 1; its sequence is found from cu_q). */
typedef struct FmhaRow {
	uint32_t head;
	uint32_t row;
} FmhaRow;

/* Keys [*lo, *hi) of its sequence (local indices) that local query i of a
 * sequence with sq queries and sk keys sees; empty when *lo >= *hi. */
void fmha_ref_visible(const FmhaProblem *p, uint32_t i, uint32_t sq, uint32_t sk, uint32_t *lo,
                      uint32_t *hi);

/* The sequence of global query row `row`: b with cu_q[b] <= row < cu_q[b+1]
 * (empty sequences skipped). row must be below cu_q[batch]. */
uint32_t fmha_ref_seq_of(const FmhaProblem *p, uint32_t row);

/* Selected rows: o[i*dv .. i*dv+dv-1] and lse[i] for rows[i]. Any order
 * and repeats are fine; rows sorted by (sequence, KV head) decode each
 * sequence's K and V block once. lse may be NULL. Returns 0, or -1 when out
 * of memory (the outputs are then NaN, so that a comparison fails loudly). */
int fmha_ref_rows(const FmhaProblem *p, const FmhaRow *rows, size_t nrows, double *o,
                  double *lse);

/* Everything: o [total_q, hq, dv] and lse [hq, total_q] (lse may be NULL). */
int fmha_ref(const FmhaProblem *p, double *o, double *lse);

/* Multiply-adds the reference spends on every row of the problem: Σ over
 * sequences and query heads of visible keys · (d + dv). */
double fmha_ref_work(const FmhaProblem *p);

#endif
