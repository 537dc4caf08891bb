/* The decode_merge family of the checker (check.h): (docs/ABI.md,
 * "decode_merge (combining partial decode outputs)") against a float64
 * softmax over the union of the parts' keys.
 *
 * Each case draws, per head row and part, a few keys (none for some parts:
 * an empty part has O = 0, LSE = -inf and an arbitrary M) with scores
 * spread over ±20 and N(0,1) values, and writes the part as
 * `decode --unnormalized 1` would: O_p = Σ e^(s - M_p) V (f32), LSE_p and a
 * reference M_p = max s + δ (δ in [-2, 2], so the merge must use M_p and
 * not assume the maximum). The reference attends all the parts' keys in
 * one softmax with the sink in the denominator. The shape is batch x s_q
 * [x parts] (0 or absent: 3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/check_internal.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

enum { D_V = 512, MAX_KEYS = 4 };

typedef struct Merge {
	uint32_t hq, batch, sq, parts;
	int sink;
	float *sinkv;
	/* per (part, row) the keys' scores and values, row = (b·s_q + y)·Hq + h */
	int *nkeys;
	double *score;
	float *val;        /* the keys' values, as exact floats */
} Merge;

static size_t
kidx(const Merge *m, uint32_t part, uint64_t row)
{
	return ((size_t)part * (size_t)m->batch * m->sq * m->hq + (size_t)row) * MAX_KEYS;
}

static int
merge_prepare(CheckCase *c, KrtErr *err)
{
	uint32_t batch = (uint32_t)c->shape.d[0], sq = (uint32_t)c->shape.d[1];
	uint32_t parts = c->shape.n > 2 && c->shape.d[2] ? (uint32_t)c->shape.d[2] : 3;
	long hq = check_arg_int(c, "heads-q");
	uint64_t rows, n;
	float *op, *lp, *mp;
	Merge *m;
	char *block;
	int rc = 0;

	if (hq <= 0)
		return check_fail(err, KRT_EABI, "%s: args \"%s\" lack --heads-q", c->abi->kernel, c->abi->args);
	if (!batch || !sq)
		return check_fail(err, KRT_EINVAL, "decode_merge: batch %u, s_q %u: both must be at least 1", batch, sq);
	rows = (uint64_t)batch * sq * (uint64_t)hq;
	n = rows * parts;
	/* the case frees priv as one block: the keys live in it */
	block = calloc(1, sizeof *m + sizeof(double) * n * MAX_KEYS + sizeof(float) * n * MAX_KEYS * D_V + sizeof(int) * n);
	if (!block)
		return check_fail(err, KRT_ENOMEM, "decode_merge: no host memory for %u parts", parts);
	m = (Merge *)(void *)block;
	c->priv = m;
	m->hq = (uint32_t)hq;
	m->sink = check_arg_int(c, "sink") == 1;
	m->batch = batch;
	m->sq = sq;
	m->parts = parts;
	m->score = (double *)(void *)(block + sizeof *m);
	m->val = (float *)(void *)(m->score + n * MAX_KEYS);
	m->nkeys = (int *)(void *)(m->val + n * MAX_KEYS * D_V);
	op = malloc(sizeof *op * n * D_V + 1);
	lp = malloc(sizeof *lp * n + 1);
	mp = malloc(sizeof *mp * n + 1);
	if (!op || !lp || !mp) {
		free(op);
		free(lp);
		free(mp);
		return check_fail(err, KRT_ENOMEM, "decode_merge: no host memory for %u parts", m->parts);
	}
	for (uint32_t p = 0; p < m->parts; p++)
		for (uint64_t r = 0; r < rows; r++) {
			size_t k = kidx(m, p, r);
			uint32_t h = (uint32_t)(r % m->hq), bq = (uint32_t)(r / m->hq);
			uint64_t li = ((uint64_t)(bq / m->sq) * m->hq + h) * m->sq + bq % m->sq;
			float *o = op + ((uint64_t)p * rows + r) * D_V;
			double mx = -INFINITY, l = 0, mref;
			/* row 0 is empty in every part; else 1 part in 4 */
			int nk = r == 0 || num_rng_below(&c->rng, 4) == 0 ? 0 : 1 + (int)num_rng_below(&c->rng, MAX_KEYS);
			m->nkeys[(size_t)p * rows + r] = nk;
			for (int i = 0; i < nk; i++) {
				m->score[k + (size_t)i] = 20 * (2 * num_rng_uniform(&c->rng) - 1);
				mx = fmax(mx, m->score[k + (size_t)i]);
				for (int j = 0; j < D_V; j++)
					m->val[(k + (size_t)i) * D_V + (size_t)j] = (float)num_rng_normal(&c->rng);
			}
			mref = nk ? mx + 4 * num_rng_uniform(&c->rng) - 2 : 10 * num_rng_normal(&c->rng);
			for (int j = 0; j < D_V; j++)
				o[j] = 0;
			for (int i = 0; i < nk; i++) {
				double w = exp(m->score[k + (size_t)i] - mref);
				l += exp(m->score[k + (size_t)i] - mx);
				for (int j = 0; j < D_V; j++)
					o[j] += (float)(w * (double)m->val[(k + (size_t)i) * D_V + (size_t)j]);
			}
			lp[(uint64_t)p * rows + li] = nk ? (float)(mx + log(l)) : -INFINITY;
			mp[(uint64_t)p * rows + li] = (float)mref;
		}
	rc = check_add_input(c, "O_parts", NUM_F32, n * D_V, op, err);
	if (!rc)
		rc = check_add_input(c, "LSE_parts", NUM_F32, n, lp, err);
	else
		free(lp);
	if (!rc)
		rc = check_add_input(c, "M_parts", NUM_F32, n, mp, err);
	else
		free(mp);
	if (!rc && m->sink) {
		float *sk = malloc(sizeof *sk * m->hq + 1);
		if (!sk)
			return check_fail(err, KRT_ENOMEM, "decode_merge: no host memory for the sink");
		for (uint32_t h = 0; h < m->hq; h++)
			sk[h] = (float)(5 * num_rng_normal(&c->rng));
		m->sinkv = sk;
		rc = check_add_input(c, "sink", NUM_F32, m->hq, sk, err);
	}
	static const char *const names[] = {"batch", "s_q", "Hq", "parts"};
	uint64_t vals[] = {m->batch, m->sq, m->hq, m->parts};
	for (int i = 0; i < COUNT(names) && !rc; i++)
		rc = check_set_var(c, names[i], vals[i], err);
	if (!rc)
		rc = check_add_output(c, "O", NUM_BF16, rows * D_V, 65536, err);
	if (!rc)
		rc = check_add_output(c, "LSE", NUM_F32, rows, 65536, err);
	return rc;
}

/* O normwise per head row within 1e-2 (the output is bf16), LSE within
 * 1e-3·max(1, |ref|); a row no part attends: O = 0, LSE = -inf (or the
 * sink). */
static int
merge_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	const Merge *m = c->priv;
	const CheckBuf *ob = check_find_buf_const(c, "O"), *lb = check_find_buf_const(c, "LSE");
	const void *out = (const char *)ob->host + ob->guard, *lout = (const char *)lb->host + lb->guard;
	uint64_t max_report = (uint64_t)(c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT);
	uint64_t rows = (uint64_t)m->batch * m->sq * m->hq;
	double ref[D_V];

	(void)err;
	res->tol = 1e-2;
	res->lse_tol = 1e-3;
	for (uint64_t r = 0; r < rows; r++) {
		uint32_t h = (uint32_t)(r % m->hq), bq = (uint32_t)(r / m->hq);
		uint64_t li = ((uint64_t)(bq / m->sq) * m->hq + h) * m->sq + bq % m->sq;
		double g = m->sink ? (double)m->sinkv[h] : -INFINITY, l = 0, lse, rowmax = 0;
		/* float64 softmax over every part's keys, the sink in the sum */
		for (uint32_t p = 0; p < m->parts; p++)
			for (int i = 0; i < m->nkeys[(size_t)p * rows + r]; i++)
				g = fmax(g, m->score[kidx(m, p, r) + (size_t)i]);
		for (int j = 0; j < D_V; j++)
			ref[j] = 0;
		if (g > -INFINITY) {
			l = m->sink ? exp((double)m->sinkv[h] - g) : 0;
			for (uint32_t p = 0; p < m->parts; p++)
				for (int i = 0; i < m->nkeys[(size_t)p * rows + r]; i++) {
					size_t k = kidx(m, p, r) + (size_t)i;
					double w = exp(m->score[k] - g);
					l += w;
					for (int j = 0; j < D_V; j++)
						ref[j] += w * (double)m->val[k * D_V + (size_t)j];
				}
			for (int j = 0; j < D_V; j++)
				ref[j] /= l;
		}
		lse = g > -INFINITY ? g + log(l) : -INFINITY;
		for (int j = 0; j < D_V; j++)
			rowmax = fmax(rowmax, fabs(ref[j]));
		for (int j = 0; j < D_V; j++) {
			uint64_t idx = r * D_V + (uint64_t)j;
			if (num_is_fill(NUM_BF16, out, idx, CHECK_POISON_BYTE))
				continue;
			double got = num_load(NUM_BF16, out, idx), e = check_row_err(got, ref[j], rowmax);
			if (check_count(res, e, res->tol, &res->max_err) && res->bad++ < max_report)
				check_report(c, "  O   row %llu col %d: got %.8g want %.8g rel err %.3e\n", (unsigned long long)r,
				             j, got, ref[j], e);
		}
		if (num_is_fill(NUM_F32, lout, li, CHECK_POISON_BYTE))
			continue;
		double got = num_load(NUM_F32, lout, li), e = check_lse_err(got, lse);
		if (check_count(res, e, res->lse_tol, &res->lse_err) && res->bad++ < max_report)
			check_report(c, "  LSE row %llu: got %.8g want %.8g err %.3e\n", (unsigned long long)r, got, lse, e);
	}
	return 0;
}

/* Reads every part's O, LSE and M, writes O (bf16) and LSE. */
static double
merge_bytes(const CheckCase *c)
{
	const Merge *m = c->priv;
	double rows = (double)m->batch * m->sq * m->hq;

	return rows * ((double)m->parts * (D_V * 4 + 8) + D_V * 2 + 4);
}

static void
merge_describe(const CheckCase *c, FILE *out)
{
	const Merge *m = c->priv;

	if (!m || !m->nkeys)
		return;
	fprintf(out, "  decode_merge: %u heads, %u parts%s\n", m->hq, m->parts, m->sink ? ", sink" : "");
}

static const CheckShape merge_shapes[] = {
	{3, {1, 1, 1}},
	{3, {3, 2, 3}},
	{3, {2, 1, 2}},
	{3, {1, 3, 37}},
};

const CheckFamily check_family_decode_merge = {
	.name = "decode_merge",
	.dims = "batch,s_q,parts",
	.ndims = 3,
	.nrequired = 2,
	.shapes = merge_shapes,
	.nshapes = COUNT(merge_shapes),
	.bench = {3, {64, 1, 2}},
	.prepare = merge_prepare,
	.compare = merge_compare,
	.bytes = merge_bytes,
	.describe = merge_describe,
};
