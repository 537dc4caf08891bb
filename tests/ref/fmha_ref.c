/* The plainest attention there is, in float64 (see fmha_ref.h): two passes
 * over the visible keys per row (scores and their maximum, then
 * exponentials and the weighted sum of V), no online rescaling, so nothing
 * here resembles the kernel it checks. K and V of one (sequence, KV head)
 * are decoded to doubles once and reused by every row of that group that
 * comes next. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_ref.h"

static const char *const mask_names[FMHA_NMASKS] = {
	[FMHA_MASK_NONE] = "none",
	[FMHA_MASK_CAUSAL] = "causal",
	[FMHA_MASK_WINDOW] = "window",
};

const char *
fmha_mask_name(FmhaMask m)
{
	return (unsigned)m < FMHA_NMASKS ? mask_names[m] : "?";
}

int
fmha_mask_parse(const char *s, FmhaMask *m)
{
	for (int i = 0; i < FMHA_NMASKS; i++)
		if (strcmp(s, mask_names[i]) == 0) {
			*m = (FmhaMask)i;
			return 0;
		}
	return -1;
}

void
fmha_ref_visible(const FmhaProblem *p, uint32_t i, uint32_t sq, uint32_t sk, uint32_t *lo,
                 uint32_t *hi)
{
	int64_t diag = (int64_t)i + (int64_t)sk - (int64_t)sq;
	int64_t l = 0, h = (int64_t)sk; /* [l, h) */
	int64_t right = p->window_right;

	if (p->mask == FMHA_MASK_CAUSAL) /* min(right, 0), unlimited included */
		right = 0;
	if (right >= 0 && diag + right + 1 < h)
		h = diag + right + 1;
	if (p->window_left >= 0 && diag - p->window_left > l)
		l = diag - p->window_left;
	if (h < l)
		h = l;
	*lo = (uint32_t)(l < 0 ? 0 : l > (int64_t)sk ? sk : l);
	*hi = (uint32_t)(h < 0 ? 0 : h);
	if (*lo > *hi)
		*lo = *hi;
}

uint32_t
fmha_ref_seq_of(const FmhaProblem *p, uint32_t row)
{
	uint32_t lo = 0, hi = p->batch; /* cu_q[lo] <= row < cu_q[hi] */

	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if ((uint32_t)p->cu_q[mid] <= row)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* The decoded K and V of one (sequence, KV head), and room for one row's
 * query and scores. */
typedef struct Ctx {
	const FmhaProblem *p;
	uint32_t b, kvh; /* the group held; b = UINT32_MAX: none */
	uint32_t sk;
	double *k, *v;   /* [sk][d], [sk][dv]; v == k when kv-shared */
	double *q, *s;   /* [d], [max sk] */
	size_t cap_k, cap_v, cap_s;
} Ctx;

static int
grow(double **a, size_t *cap, size_t n)
{
	if (n <= *cap)
		return 0;
	double *na = realloc(*a, sizeof(double) * n);
	if (!na)
		return -1;
	*a = na;
	*cap = n;
	return 0;
}

/* n rows of `cols` elements, the first at element `first`, the next ones
 * `stride` elements apart. */
static void
decode_rows(NumType t, const void *base, uint64_t first, uint32_t n, uint64_t stride,
            uint32_t cols, double *out)
{
	for (uint32_t j = 0; j < n; j++)
		for (uint32_t c = 0; c < cols; c++)
			out[(size_t)j * cols + c] = num_load(t, base, first + j * stride + c);
}

static int
load_group(Ctx *x, uint32_t b, uint32_t kvh)
{
	const FmhaProblem *p = x->p;
	uint32_t k0 = (uint32_t)p->cu_k[b], sk = (uint32_t)p->cu_k[b + 1] - k0;
	int shared = p->v == p->k && p->dv == p->d;

	if (x->b == b && x->kvh == kvh)
		return 0;
	x->b = UINT32_MAX;
	if (grow(&x->k, &x->cap_k, (size_t)sk * p->d + 1) ||
	    (!shared && grow(&x->v, &x->cap_v, (size_t)sk * p->dv + 1)) ||
	    grow(&x->s, &x->cap_s, (size_t)sk + 1))
		return -1;
	/* Row r of K for head g starts at element (r * hkv + g) * d. */
	decode_rows(p->type, p->k, ((uint64_t)k0 * p->hkv + kvh) * p->d, sk,
	            (uint64_t)p->hkv * p->d, p->d, x->k);
	if (!shared)
		decode_rows(p->type, p->v, ((uint64_t)k0 * p->hkv + kvh) * p->dv, sk,
		            (uint64_t)p->hkv * p->dv, p->dv, x->v);
	x->b = b;
	x->kvh = kvh;
	x->sk = sk;
	return 0;
}

/* Four partial sums: the loop runs at the adder's throughput rather than
 * its latency, and float64 keeps any order exact enough. */
static double
dot(const double *a, const double *b, uint32_t n)
{
	double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4) {
		s0 += a[i] * b[i];
		s1 += a[i + 1] * b[i + 1];
		s2 += a[i + 2] * b[i + 2];
		s3 += a[i + 3] * b[i + 3];
	}
	for (; i < n; i++)
		s0 += a[i] * b[i];
	return (s0 + s1) + (s2 + s3);
}

static int
ref_row(Ctx *x, uint32_t head, uint32_t row, double *o, double *lse)
{
	const FmhaProblem *p = x->p;
	uint32_t b = fmha_ref_seq_of(p, row);
	uint32_t kvh = head / (p->hq / p->hkv);
	uint32_t i = row - (uint32_t)p->cu_q[b];
	uint32_t sq = (uint32_t)p->cu_q[b + 1] - (uint32_t)p->cu_q[b];
	uint32_t lo, hi;

	if (load_group(x, b, kvh))
		return -1;
	fmha_ref_visible(p, i, sq, x->sk, &lo, &hi);
	memset(o, 0, sizeof(double) * p->dv);
	if (lo >= hi) {
		if (lse)
			*lse = -INFINITY;
		return 0;
	}
	decode_rows(p->type, p->q, ((uint64_t)row * p->hq + head) * p->d, 1, 0, p->d, x->q);
	double m = -INFINITY;
	for (uint32_t j = lo; j < hi; j++) {
		x->s[j] = p->scale * dot(x->q, x->k + (size_t)j * p->d, p->d);
		m = fmax(m, x->s[j]);
	}
	/* Subtracting the maximum keeps every exponential in (0, 1]; the sum
	 * is then at least 1, so its logarithm and the division are safe. */
	const double *v = p->v == p->k && p->dv == p->d ? x->k : x->v;
	double sum = 0.0;
	for (uint32_t j = lo; j < hi; j++) {
		double e = exp(x->s[j] - m);
		const double *vj = v + (size_t)j * p->dv;
		sum += e;
		for (uint32_t c = 0; c < p->dv; c++)
			o[c] += e * vj[c];
	}
	for (uint32_t c = 0; c < p->dv; c++)
		o[c] /= sum;
	if (lse)
		*lse = m + log(sum);
	return 0;
}

static int
ctx_init(Ctx *x, const FmhaProblem *p)
{
	memset(x, 0, sizeof *x);
	x->p = p;
	x->b = UINT32_MAX;
	x->q = malloc(sizeof(double) * (p->d + 1));
	return x->q ? 0 : -1;
}

static void
ctx_free(Ctx *x)
{
	free(x->k);
	free(x->v);
	free(x->q);
	free(x->s);
}

int
fmha_ref_rows(const FmhaProblem *p, const FmhaRow *rows, size_t nrows, double *o, double *lse)
{
	Ctx x;
	int rc = ctx_init(&x, p);

	for (size_t i = 0; i < nrows && !rc; i++)
		rc = ref_row(&x, rows[i].head, rows[i].row, o + i * p->dv, lse ? lse + i : NULL);
	ctx_free(&x);
	if (rc) {
		for (size_t i = 0; i < nrows * p->dv; i++)
			o[i] = NAN;
		for (size_t i = 0; lse && i < nrows; i++)
			lse[i] = NAN;
	}
	return rc;
}

int
fmha_ref(const FmhaProblem *p, double *o, double *lse)
{
	uint32_t total_q = (uint32_t)p->cu_q[p->batch];
	Ctx x;
	int rc = ctx_init(&x, p);

	/* Sequence, then query head: the heads of one KV head are adjacent,
	 * so each (sequence, KV head) is decoded once. */
	for (uint32_t b = 0; b < p->batch && !rc; b++)
		for (uint32_t h = 0; h < p->hq && !rc; h++)
			for (uint32_t r = (uint32_t)p->cu_q[b]; r < (uint32_t)p->cu_q[b + 1] && !rc; r++) {
				double l;
				rc = ref_row(&x, h, r, o + ((size_t)r * p->hq + h) * p->dv, &l);
				if (lse)
					lse[(size_t)h * total_q + r] = l;
			}
	ctx_free(&x);
	if (rc) {
		for (size_t i = 0; i < (size_t)total_q * p->hq * p->dv; i++)
			o[i] = NAN;
		for (size_t i = 0; lse && i < (size_t)total_q * p->hq; i++)
			lse[i] = NAN;
	}
	return rc;
}

double
fmha_ref_work(const FmhaProblem *p)
{
	double keys = 0.0;

	for (uint32_t b = 0; b < p->batch; b++) {
		uint32_t sq = (uint32_t)(p->cu_q[b + 1] - p->cu_q[b]);
		uint32_t sk = (uint32_t)(p->cu_k[b + 1] - p->cu_k[b]);
		for (uint32_t i = 0; i < sq; i++) {
			uint32_t lo, hi;
			fmha_ref_visible(p, i, sq, sk, &lo, &hi);
			keys += hi - lo;
		}
	}
	return keys * p->hq * (double)(p->d + p->dv);
}
