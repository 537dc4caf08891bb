/* The decode family of the checker (check.h): decode attention as
 * docs/ABI.md "decode" defines it, against tests/ref/decode_ref.
 *
 * The configuration comes from the ABI's `//@args` line (heads, top-k and
 * page size of each source, topk-length, sink). The shape is batch x s_q
 * [x pages x pages_extra x full x splits] (0 pages: 2·topk + 17 tokens'
 * worth; 0 splits: 1, no split-KV). Each case
 * builds real caches of the kernel's format (--format, --head-dim-qk) with
 * the reference quantizer from BF16 values
 * of mixed magnitudes, and index lists with -1 entries, indices outside
 * [0, capacity) (also skipped), duplicates, pages in random order, and
 * per-row lengths below top-k, past it and negative (clamped); the first query row skips every key, so it
 * must give O = 0 and LSE = -inf (with a sink, LSE = the sink). full = 1
 * draws what a model's decode step sees instead (kbench's shape): every
 * entry valid, distinct within its row, all lengths top-k. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_ref.h"
#include "tools/check_internal.h"

/* Split-KV parts a launch may have (docs/ABI.md "decode"; gen/decode.h
 * DEC_MAX_SPLITS, python/kgen/_decode.py MAX_SPLITS). */
enum { DECODE_MAX_SPLITS = 256 };

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

enum { D_MAX = 576, D_V = 512 };

typedef struct Src {
	int topk, ps;
	int paged;         /* a block table and lengths instead of index lists */
	uint32_t pages, capacity, max_pages;
	uint8_t *cache;    /* host copies, owned by the bufs */
	int32_t *idx, *len;
	int32_t *bt, *seqlens; /* paged: [batch, max_pages], [batch] */
} Src;

typedef struct Decode {
	DecodeRefFormat fmt;
	uint32_t hq, batch, sq;
	int nsrc, has_len, sink;
	Src src[2];
	int full;
	int unnorm;        /* --unnormalized 1: O f32 without 1/rowsum, and M; no split-KV */
	uint32_t splits;
	float scale;
	uint16_t *q;
	float *sinkv;
	uint64_t unique_tokens; /* distinct (source, token) pairs per row, summed */
} Decode;

static int
read_config(CheckCase *c, Decode *d, KrtErr *err)
{
	static const char *const need[] = {"heads-q", "page-size", "topk"};
	char fmt[32] = "", addr[2][16];
	const char *f = strstr(c->abi->args, "--format ");

	check_arg_word(c, "addressing", addr[0], sizeof addr[0]);
	check_arg_word(c, "addressing-extra", addr[1], sizeof addr[1]);
	d->src[0].paged = strcmp(addr[0], "paged") == 0;
	d->src[1].paged = strcmp(addr[1], "paged") == 0;
	for (int i = 0; i < COUNT(need) - d->src[0].paged; i++)
		if (check_arg_int(c, need[i]) <= 0)
			return check_fail(err, KRT_EABI, "%s: args \"%s\" lack --%s, which the decode checker needs",
			                  c->abi->kernel, c->abi->args, need[i]);
	if (f)
		sscanf(f + 9, "%31s", fmt);
	if (decode_ref_format(fmt, check_arg_int(c, "head-dim-qk") > 0 ? (int)check_arg_int(c, "head-dim-qk") : 0, &d->fmt) < 0)
		return check_fail(err, KRT_EABI, "%s: --format %s --head-dim-qk %ld: not a cache format the decode checker knows",
		                  c->abi->kernel, fmt[0] ? fmt : "(none)", check_arg_int(c, "head-dim-qk"));
	d->hq = (uint32_t)check_arg_int(c, "heads-q");
	d->src[0].topk = (int)check_arg_int(c, "topk");
	d->src[0].ps = (int)check_arg_int(c, "page-size");
	d->src[1].topk = (int)(check_arg_int(c, "topk-extra") > 0 ? check_arg_int(c, "topk-extra") : 0);
	d->src[1].ps = (int)check_arg_int(c, "page-size-extra");
	d->nsrc = d->src[1].topk || d->src[1].paged ? 2 : 1;
	for (int s = 0; s < 2; s++)
		if (d->src[s].paged)
			d->src[s].topk = 0;
	d->has_len = check_arg_int(c, "topk-length") == 1;
	d->unnorm = check_arg_int(c, "unnormalized") == 1;
	d->sink = check_arg_int(c, "sink") == 1;
	if (d->nsrc > 1 && d->src[1].ps <= 0)
		return check_fail(err, KRT_EABI, "%s: an extra source without --page-size-extra", c->abi->kernel);
	return 0;
}

static uint64_t
gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static uint16_t
draw_bf16(NumRng *r, double scale)
{
	return num_f64_to_bf16(num_rng_normal(r) * scale);
}

/* A cache of `pages` pages: every token quantized from BF16 values whose
 * magnitude varies by token (1, 1/64, 30) and by group, so the UE8M0
 * scales differ; the padding after the scale tail is garbage. */
static int
build_cache(CheckCase *c, const DecodeRefFormat *fm, Src *s, const char *name, KrtErr *err)
{
	size_t pb = decode_ref_page_bytes(fm, s->ps), bytes = (size_t)s->pages * pb;
	uint8_t *cache = malloc(bytes + 1);
	uint16_t v[D_MAX];

	if (!cache)
		return check_fail(err, KRT_ENOMEM, "decode: no host memory for %s", name);
	for (size_t i = 0; i < bytes; i++)
		cache[i] = (uint8_t)num_rng_below(&c->rng, 256);
	for (uint32_t t = 0; t < s->capacity; t++) {
		static const double mag[3] = {1.0, 1.0 / 64, 30.0};
		double m = mag[num_rng_below(&c->rng, 3)];
		for (int i = 0; i < fm->d_qk; i++)
			v[i] = draw_bf16(&c->rng, m * (1.0 + (double)(i / 64)));
		decode_ref_quantize(fm, v, decode_ref_token(fm, cache, s->ps, t), decode_ref_token_scales(fm, cache, s->ps, t));
	}
	s->cache = cache;
	return check_add_raw_input(c, name, "u8", 1, bytes, cache, err);
}

/* Index lists [batch, s_q, topk]: mostly uniform tokens (so pages come in
 * random order), about 1 in 10 -1, 1 in 20 outside [0, capacity) (other
 * negatives, capacity and above: skipped too), 1 in 10 a duplicate of an
 * earlier entry. Row 0 skips everything. Lengths: uniform in 0 .. topk,
 * every third row the whole list; rows 2, 8, .. past it and rows 5, 11,
 * .. negative (both clamped). */
static int
build_indices(CheckCase *c, Decode *d, Src *s, const char *sfx, KrtErr *err)
{
	uint64_t rows = (uint64_t)d->batch * d->sq;
	int32_t *idx = malloc(sizeof *idx * rows * (uint64_t)s->topk + 1);
	int32_t *len = malloc(sizeof *len * rows + 1);
	char name[32];
	int rc;

	if (!idx || !len) {
		free(idx);
		free(len);
		return check_fail(err, KRT_ENOMEM, "decode: no host memory for the indices");
	}
	for (uint64_t r = 0; r < rows && d->full; r++) {
		/* distinct: a random stride coprime to the capacity from a random start */
		int32_t *x = idx + r * (uint64_t)s->topk;
		uint64_t cap = s->capacity, st = 1 + num_rng_below(&c->rng, cap), at = num_rng_below(&c->rng, cap);
		while (cap > 1 && gcd(st, cap) != 1)
			st++;
		for (int i = 0; i < s->topk; i++)
			x[i] = (int32_t)((at + (uint64_t)i * st) % cap);
		len[r] = s->topk;
	}
	for (uint64_t r = 0; r < rows && !d->full; r++) {
		int32_t *x = idx + r * (uint64_t)s->topk;
		for (int i = 0; i < s->topk; i++) {
			uint64_t u = num_rng_below(&c->rng, 100);
			if (r == 0 && rows > 1)
				x[i] = -1;
			else if (u < 10)
				x[i] = -1;
			else if (u < 13)
				x[i] = (int32_t)(s->capacity + num_rng_below(&c->rng, 1000));
			else if (u < 15)
				x[i] = -2 - (int32_t)num_rng_below(&c->rng, 1u << 30);
			else if (u < 25 && i > 0)
				x[i] = x[num_rng_below(&c->rng, (uint64_t)i)];
			else
				x[i] = (int32_t)num_rng_below(&c->rng, s->capacity);
		}
		/* bad lengths are clamped to [0, topk] (docs/ABI.md "decode"):
		 * rows 2, 8, 14, .. past the list (up to 2^30 over), rows 5, 11,
		 * .. negative */
		len[r] = r % 3 == 1 ? s->topk : (int32_t)num_rng_below(&c->rng, (uint64_t)s->topk + 1);
		if (r % 6 == 2)
			len[r] = s->topk + 1 + (int32_t)num_rng_below(&c->rng, 1u << 30);
		else if (r % 6 == 5)
			len[r] = -1 - (int32_t)num_rng_below(&c->rng, 1u << 30);
	}
	s->idx = idx;
	s->len = d->has_len ? len : NULL;
	snprintf(name, sizeof name, "indices%s", sfx);
	rc = check_add_raw_input(c, name, "s32", 4, rows * (uint64_t)s->topk, idx, err);
	if (!d->has_len) {
		free(len);
		return rc;
	}
	if (rc) {
		free(len);
		return rc;
	}
	snprintf(name, sizeof name, "topk_length%s", sfx);
	return check_add_raw_input(c, name, "s32", 4, rows, len, err);
}

/* A paged source (docs/ABI.md "decode"): each sequence's block-table row
 * is a random permutation of the cache's pages (so pages come in random
 * order), the column past them random in [-3, pages + 3); about 1 row in
 * 8 also has one out-of-range entry among its pages (its tokens read as
 * zero keys). Lengths: sequence 0 none (with one sequence: all but 5,
 * so a single-sequence case such as the mutation test's has keys and a
 * partial last tile), every third
 * one past max_pages·ps (clamped), every sixth from sequence 5 negative
 * (none), else uniform in 0 .. max_pages·ps;
 * full = 1: the capacity. */
static int
build_paged(CheckCase *c, Decode *d, Src *s, const char *sfx, KrtErr *err)
{
	int32_t *bt = malloc(sizeof *bt * (size_t)d->batch * s->max_pages + 1);
	int32_t *sl = malloc(sizeof *sl * (size_t)d->batch + 1);
	char name[32];
	int rc;

	if (!bt || !sl) {
		free(bt);
		free(sl);
		return check_fail(err, KRT_ENOMEM, "decode: no host memory for the block table");
	}
	for (uint32_t b = 0; b < d->batch; b++) {
		int32_t *row = bt + (size_t)b * s->max_pages;
		uint64_t span = (uint64_t)s->max_pages * (uint64_t)s->ps;
		for (uint32_t i = 0; i < s->pages; i++)
			row[i] = (int32_t)i;
		for (uint32_t i = s->pages; i > 1; i--) {
			uint32_t j = (uint32_t)num_rng_below(&c->rng, i);
			int32_t t = row[i - 1];
			row[i - 1] = row[j];
			row[j] = t;
		}
		for (uint32_t i = s->pages; i < s->max_pages; i++)
			row[i] = (int32_t)num_rng_below(&c->rng, (uint64_t)s->pages + 6) - 3;
		if (!d->full && num_rng_below(&c->rng, 8) == 0)
			row[num_rng_below(&c->rng, s->pages)] = num_rng_below(&c->rng, 2) ? -5 : (int32_t)s->pages + 2;
		if (d->full)
			sl[b] = (int32_t)s->capacity;
		else if (b == 0 && d->batch > 1)
			sl[b] = 0;
		else if (d->batch == 1)
			sl[b] = (int32_t)(span > 5 ? span - 5 : span);
		else if (b % 3 == 1)
			sl[b] = (int32_t)(span + 7);
		else if (b % 6 == 5)
			sl[b] = -1 - (int32_t)num_rng_below(&c->rng, 1u << 30);
		else
			sl[b] = (int32_t)num_rng_below(&c->rng, span + 1);
	}
	s->bt = bt;
	s->seqlens = sl;
	snprintf(name, sizeof name, "block_table%s", sfx);
	rc = check_add_raw_input(c, name, "s32", 4, (uint64_t)d->batch * s->max_pages, bt, err);
	if (rc) {
		free(sl);
		return rc;
	}
	snprintf(name, sizeof name, "seqlens%s", sfx);
	return check_add_raw_input(c, name, "s32", 4, d->batch, sl, err);
}

/* The tokens row r (= b·s_q + y) attends in source x, in key order, into
 * out (-1: a zero key, a paged entry outside the cache); returns the count. */
static size_t
row_tokens(const Decode *d, const Src *x, uint64_t r, int32_t *out)
{
	size_t n = 0;

	if (x->paged) {
		uint64_t b = r / d->sq, span = (uint64_t)x->max_pages * (uint64_t)x->ps;
		int64_t len = x->seqlens[b];
		len = len < 0 ? 0 : (uint64_t)len > span ? (int64_t)span : len;
		for (int64_t i = 0; i < len; i++) {
			int32_t pg = x->bt[b * x->max_pages + (uint64_t)i / (uint64_t)x->ps];
			out[n++] = pg < 0 || (uint32_t)pg >= x->pages ? -1 : pg * x->ps + (int32_t)(i % x->ps);
		}
		return n;
	}
	int len = x->len ? x->len[r] : x->topk;
	len = len < 0 ? 0 : len > x->topk ? x->topk : len;
	for (int i = 0; i < len; i++) {
		int32_t v = x->idx[r * (uint64_t)x->topk + (uint64_t)i];
		if (v >= 0 && (uint32_t)v < x->capacity)
			out[n++] = v;
	}
	return n;
}

/* The most keys a row can attend in source x. */
static size_t
src_max_keys(const Src *x)
{
	return x->paged ? (size_t)x->max_pages * (size_t)x->ps : (size_t)x->topk;
}

/* Split-KV scratch (docs/ABI.md "decode"): the parts' O and LSE hold
 * garbage before the launch, the counters zeros (the kernel leaves them
 * zero). */
static int
add_split_scratch(CheckCase *c, const Decode *d, uint64_t no, KrtErr *err)
{
	uint64_t np = no * d->splits, hb = (d->hq + 63) / 64;
	int rc;
	uint16_t *opart = malloc(sizeof *opart * np * D_V + 1);
	float *lpart = malloc(sizeof *lpart * np + 1);
	int32_t *ctr = calloc(d->batch * (uint64_t)d->sq * hb + 1, sizeof *ctr);
	if (!opart || !lpart || !ctr) {
		free(opart);
		free(lpart);
		free(ctr);
		return check_fail(err, KRT_ENOMEM, "decode: no host memory for the split-KV scratch");
	}
	memset(opart, 0x7b, sizeof *opart * np * D_V);
	memset(lpart, 0x7b, sizeof *lpart * np);
	rc = check_add_input(c, "O_partial", NUM_BF16, np * D_V, opart, err);
	if (!rc)
		rc = check_add_input(c, "LSE_partial", NUM_F32, np, lpart, err);
	else
		free(lpart);
	if (!rc)
		rc = check_add_raw_input(c, "counters", "s32", 4, d->batch * (uint64_t)d->sq * hb, ctr, err);
	else
		free(ctr);
	return rc;
}

static int
decode_prepare(CheckCase *c, KrtErr *err)
{
	static const char *const sfx[2] = {"", "_extra"};
	Decode *d = calloc(1, sizeof *d);
	int rc;

	if (!d)
		return check_fail(err, KRT_ENOMEM, "decode: out of memory");
	c->priv = d;
	rc = read_config(c, d, err);
	if (rc)
		return rc;
	/* the launch's limits (docs/ABI.md "decode"), before any buffer is
	 * built: grid z and y, and the 32-bit row index of O_partial's rows
	 * ((b·s_q + y)·splits + s)·Hq */
	if (!c->shape.d[0] || !c->shape.d[1] || c->shape.d[0] > 65535 || c->shape.d[1] > 65535)
		return check_fail(err, KRT_EINVAL, "decode: batch %llu, s_q %llu: both must be in 1..65535 (grid z and y)",
		                  (unsigned long long)c->shape.d[0], (unsigned long long)c->shape.d[1]);
	uint64_t rows = c->shape.d[0] * c->shape.d[1] * (c->shape.d[5] ? c->shape.d[5] : 1) * (uint64_t)d->hq;
	if (rows > INT32_MAX)
		return check_fail(err, KRT_EINVAL, "decode: batch %llu x s_q %llu x splits %llu x Hq %u = %llu: must be below 2^31 (the kernel's 32-bit row index of O_partial and LSE)",
		                  (unsigned long long)c->shape.d[0], (unsigned long long)c->shape.d[1],
		                  (unsigned long long)(c->shape.d[5] ? c->shape.d[5] : 1), d->hq, (unsigned long long)rows);
	d->batch = (uint32_t)c->shape.d[0];
	d->sq = (uint32_t)c->shape.d[1];
	d->full = c->shape.d[4] != 0;
	if (c->shape.d[5] > DECODE_MAX_SPLITS)
		return check_fail(err, KRT_EINVAL,
		                  "decode: splits %llu: at most %d (the completion counter holds 10-bit counts of the parts, docs/ABI.md \"decode\")",
		                  (unsigned long long)c->shape.d[5], DECODE_MAX_SPLITS);
	d->splits = c->shape.d[5] && !d->unnorm ? (uint32_t)c->shape.d[5] : 1;
	for (int s = 0; s < d->nsrc; s++) {
		Src *x = &d->src[s];
		uint64_t pages = c->shape.d[2 + s];
		/* 0: 2·topk + 17 tokens' worth; paged, ~200 tokens */
		if (!pages)
			pages = ((x->paged ? 200 : (uint64_t)2 * (uint64_t)x->topk + 17) + (uint64_t)x->ps - 1) /
			        (uint64_t)x->ps;
		if (d->full && pages * (uint64_t)x->ps < (uint64_t)x->topk)
			return check_fail(err, KRT_EINVAL, "decode: full=1 with pages%s %llu of %d tokens: distinct indices need a capacity of top-k %d",
			                  sfx[s], (unsigned long long)pages, x->ps, x->topk);
		if (pages * (uint64_t)x->ps > INT32_MAX)
			return check_fail(err, KRT_EINVAL, "decode: pages%s %llu of %d tokens: the capacity must fit in int32",
			                  sfx[s], (unsigned long long)pages, x->ps);
		x->pages = (uint32_t)pages;
		x->capacity = x->pages * (uint32_t)x->ps;
		x->max_pages = x->pages + 1;
		char name[32];
		snprintf(name, sizeof name, "KV%s", sfx[s]);
		rc = build_cache(c, &d->fmt, x, name, err);
		if (!rc)
			rc = x->paged ? build_paged(c, d, x, sfx[s], err) : build_indices(c, d, x, sfx[s], err);
		if (rc)
			return rc;
	}
	uint64_t nq = (uint64_t)d->batch * d->sq * d->hq * (uint64_t)d->fmt.d_qk;
	uint16_t *q = malloc(sizeof *q * nq + 1);
	if (!q)
		return check_fail(err, KRT_ENOMEM, "decode: no host memory for Q");
	for (uint64_t i = 0; i < nq; i++)
		q[i] = draw_bf16(&c->rng, 1.0);
	d->q = q;
	rc = check_add_input(c, "Q", NUM_BF16, nq, q, err);
	if (!rc && d->sink) {
		float *sk = malloc(sizeof *sk * d->hq + 1);
		if (!sk)
			return check_fail(err, KRT_ENOMEM, "decode: no host memory for the sink");
		for (uint32_t h = 0; h < d->hq; h++)
			sk[h] = (float)(2.0 * num_rng_normal(&c->rng));
		d->sinkv = sk;
		rc = check_add_input(c, "sink", NUM_F32, d->hq, sk, err);
	}
	/* the scale is a run-time argument: a fresh one per case */
	d->scale = (float)((0.5 + num_rng_uniform(&c->rng)) / sqrt((double)d->fmt.d_qk));
	static const char *const names[] = {"batch", "s_q", "Hq", "capacity", "capacity_extra", "pages",
	                                    "pages_extra", "splits", "max_pages", "max_pages_extra"};
	uint64_t vals[] = {d->batch, d->sq, d->hq, d->src[0].capacity, d->src[1].capacity,
	                   d->src[0].pages, d->src[1].pages, d->splits, d->src[0].max_pages, d->src[1].max_pages};
	for (int i = 0; i < COUNT(names) && !rc; i++)
		rc = check_set_var(c, names[i], vals[i], err);
	if (!rc)
		rc = check_set_f32(c, "softmax_scale", d->scale, err);
	uint64_t no = (uint64_t)d->batch * d->sq * d->hq;
	if (!rc && !d->unnorm)
		rc = add_split_scratch(c, d, no, err);
	if (!rc)
		rc = check_add_output(c, "O", d->unnorm ? NUM_F32 : NUM_BF16, no * D_V, 65536, err);
	if (!rc)
		rc = check_add_output(c, "LSE", NUM_F32, no, 65536, err);
	if (!rc && d->unnorm)
		rc = check_add_output(c, "M", NUM_F32, no, 65536, err);
	return rc;
}

/* ---- compare ------------------------------------------------------------ */

/* Tolerances as fmha's (check_fmha.c says why): O normwise per head row,
 * 1e-2 (the K=V rows are exact in bf16 once dequantized, so the kernel's
 * roundings are fmha's: bf16 P and bf16 O); LSE 1e-3·max(1, |ref|); a row
 * with no key must be exactly O = 0 and LSE = -inf (or the sink). */
static const double decode_tol = 1e-2;
static const double decode_lse_tol = 1e-3;

/* The dequantized keys row r attends, in key order; returns the count. */
static size_t
gather_keys(const Decode *d, uint64_t r, double *k, int32_t *tok)
{
	size_t n = 0;
	int dqk = d->fmt.d_qk;

	for (int s = 0; s < d->nsrc; s++) {
		const Src *x = &d->src[s];
		size_t m = row_tokens(d, x, r, tok);
		for (size_t i = 0; i < m; i++, n++) {
			double *kk = k + n * (size_t)dqk;
			if (tok[i] < 0) {
				for (int z = 0; z < dqk; z++)
					kk[z] = 0;
				continue;
			}
			decode_ref_dequantize(&d->fmt, decode_ref_token(&d->fmt, x->cache, x->ps, (uint32_t)tok[i]),
			                      decode_ref_token_scales(&d->fmt, x->cache, x->ps, (uint32_t)tok[i]), kk);
			/* the attended key is BF16 (docs/ABI.md, "Cache formats"):
			 * an fp32 scale's product rounds */
			if (d->fmt.scale == 2)
				for (int z = 0; z < d->fmt.d_nope; z++)
					kk[z] = num_bf16_to_f32(num_f64_to_bf16(kk[z]));
		}
	}
	return n;
}

static int
decode_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	const Decode *d = c->priv;
	const CheckBuf *ob = check_find_buf_const(c, "O"), *lb = check_find_buf_const(c, "LSE");
	const CheckBuf *mb = d->unnorm ? check_find_buf_const(c, "M") : NULL;
	const void *out = (const char *)ob->host + ob->guard, *lout = (const char *)lb->host + lb->guard;
	const void *mout = mb ? (const char *)mb->host + mb->guard : NULL;
	NumType ot = d->unnorm ? NUM_F32 : NUM_BF16;
	uint64_t max_report = (uint64_t)(c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT);
	size_t maxk = src_max_keys(&d->src[0]) + (d->nsrc > 1 ? src_max_keys(&d->src[1]) : 0);
	int dqk = d->fmt.d_qk;
	double *k = malloc(sizeof *k * (maxk + 1) * (size_t)dqk), q[D_MAX], ref[D_V], lse;
	int32_t *tok = malloc(sizeof *tok * (maxk + 1));

	res->tol = decode_tol;
	res->lse_tol = decode_lse_tol;
	if (!k || !tok) {
		free(k);
		free(tok);
		return check_fail(err, KRT_ENOMEM, "decode: no host memory for the reference");
	}
	for (uint32_t b = 0; b < d->batch; b++)
		for (uint32_t s = 0; s < d->sq; s++) {
			uint64_t r = (uint64_t)b * d->sq + s;
			size_t n = gather_keys(d, r, k, tok);
			/* The kernel's softmax weights are fp32, exp2(s - m): a key
			 * whose weight is below 2^-126 of the row's largest adds
			 * nothing there, so up to n·2^-126·vmax of O may be missing
			 * where the float64 reference keeps it (a zero key of weight 1
			 * with every other key 200 nats below: O ~ 1e-88 in float64,
			 * 0 in fp32). Differences within that bound are not errors. */
			double vmax = 0, underflow;
			for (size_t i = 0; i < n; i++)
				for (int z = 0; z < D_V; z++)
					vmax = fmax(vmax, fabs(k[i * (size_t)dqk + (size_t)z]));
			underflow = (double)n * 0x1p-126 * vmax;
			for (uint32_t h = 0; h < d->hq; h++) {
				uint64_t row = r * d->hq + h;
				double rowmax = 0;
				for (int i = 0; i < dqk; i++)
					q[i] = num_bf16_to_f32(d->q[row * (uint64_t)dqk + (uint64_t)i]);
				decode_ref_row(q, k, n, dqk, D_V, (double)d->scale, d->sink,
				               d->sink ? (double)d->sinkv[h] : 0, ref, &lse);
				for (int i = 0; i < D_V; i++)
					rowmax = fmax(rowmax, fabs(ref[i]));
				uint64_t li = ((uint64_t)b * d->hq + h) * d->sq + s;
				/* unnormalized: O·e^(M - LSE) is the normalized output (a
				 * row with no key: O = 0) */
				double w = 1;
				if (d->unnorm) {
					double gl = num_load(NUM_F32, lout, li), gm = num_load(NUM_F32, mout, li);
					w = gl == -INFINITY ? 1 : exp(gm - gl);
					if (num_is_fill(NUM_F32, mout, li, CHECK_POISON_BYTE) || !isfinite(gm))
						w = NAN;
				}
				for (int i = 0; i < D_V; i++) {
					uint64_t idx = row * D_V + (uint64_t)i;
					if (num_is_fill(ot, out, idx, CHECK_POISON_BYTE))
						continue;
					double got = num_load(ot, out, idx) * w;
					double e = fabs(got - ref[i]) <= underflow ? 0 : check_row_err(got, ref[i], rowmax);
					if (check_count(res, e, res->tol, &res->max_err) && res->bad++ < max_report)
						check_report(c, "  O   b %u s %u head %u col %d: got %.8g want %.8g rel err %.3e; %zu keys\n",
						             b, s, h, i, got, ref[i], e, n);
				}
				if (num_is_fill(NUM_F32, lout, li, CHECK_POISON_BYTE))
					continue;
				double got = num_load(NUM_F32, lout, li), e = check_lse_err(got, lse);
				if (check_count(res, e, res->lse_tol, &res->lse_err) && res->bad++ < max_report)
					check_report(c, "  LSE b %u s %u head %u: got %.8g want %.8g err %.3e; %zu keys\n", b,
					             s, h, got, lse, e, n);
			}
		}
	free(k);
	free(tok);
	return d->splits > 1 ? check_counters_zero(c, res, err) : 0; /* split-KV: docs/ABI.md "decode" */
}

/* ---- flops, bytes, description ------------------------------------------ */

/* 2·h_q·attended·(d_qk + d_v): the keys each row attends (duplicates
 * counted as often as they appear), both products. */
static double
decode_flops(const CheckCase *c)
{
	const Decode *d = c->priv;
	double keys = 0;
	size_t maxk = src_max_keys(&d->src[0]) > src_max_keys(&d->src[1]) ? src_max_keys(&d->src[0])
	                                                                    : src_max_keys(&d->src[1]);
	int32_t *tok = malloc(sizeof *tok * (maxk + 1));

	if (!tok)
		return 0;
	for (uint64_t r = 0; r < (uint64_t)d->batch * d->sq; r++)
		for (int s = 0; s < d->nsrc; s++)
			keys += (double)row_tokens(d, &d->src[s], r, tok);
	free(tok);
	return keys * d->hq * 2.0 * (d->fmt.d_qk + D_V);
}

static int
cmp_s32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	return (x > y) - (x < y);
}

/* Q + the distinct tokens each row gathers x bytes per token (row and
 * tail: fp8-v4 584, fp8-v32 656) + O: FlashMLA's accounting of a sparse
 * decode's traffic. */
static double
decode_bytes(const CheckCase *c)
{
	const Decode *d = c->priv;
	uint64_t rows = (uint64_t)d->batch * d->sq, tokens = 0;
	size_t maxk = src_max_keys(&d->src[0]) > src_max_keys(&d->src[1]) ? src_max_keys(&d->src[0])
	                                                                    : src_max_keys(&d->src[1]);
	int32_t *seen = malloc(sizeof *seen * (maxk + 1));

	if (!seen)
		return 0;
	for (uint64_t r = 0; r < rows; r++)
		for (int s = 0; s < d->nsrc; s++) {
			size_t n = row_tokens(d, &d->src[s], r, seen);
			qsort(seen, n, sizeof *seen, cmp_s32);
			for (size_t i = 0; i < n; i++)
				tokens += seen[i] >= 0 && (i == 0 || seen[i] != seen[i - 1]);
		}
	free(seen);
	return (double)rows * d->hq * (d->fmt.d_qk + D_V) * 2 +
	       (double)tokens * (double)(d->fmt.row_bytes + d->fmt.tail_bytes);
}

/* "decode B SQ HQ TOPK PS TOPKX PSX PAGES PAGESX SINK ITERS WARMUP FLOPS
 * BYTES": tools/peers.py times a naive PyTorch decode (gather, dequantize,
 * matmul, softmax, matmul) on its own caches of the same shape, full
 * lists, and a device-to-device copy for the rate limit. */
static int
decode_peer_args(const CheckCase *c, int iters, int warmup, char *buf, size_t n)
{
	const Decode *d = c->priv;
	int len = snprintf(buf, n, "decode %u %u %u %d %d %d %d %u %u %d %d %d %.6g %.6g", d->batch, d->sq,
	                   d->hq, d->src[0].topk, d->src[0].ps, d->src[1].topk, d->nsrc > 1 ? d->src[1].ps : 1,
	                   d->src[0].pages, d->nsrc > 1 ? d->src[1].pages : 0, d->sink, iters, warmup,
	                   decode_flops(c), decode_bytes(c));
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

static void
decode_describe(const CheckCase *c, FILE *out)
{
	const Decode *d = c->priv;

	if (!d || !d->q)
		return;
	fprintf(out, "  decode: %s d_qk %d, %u heads, %u split%s, scale %.9g%s%s%s", d->fmt.name, d->fmt.d_qk, d->hq,
	        d->splits, d->splits > 1 ? "s" : "", (double)d->scale, d->unnorm ? ", unnormalized" : "",
	        d->sink ? ", sink" : "", d->has_len ? ", topk_length" : "");
	for (int s = 0; s < d->nsrc; s++)
		if (d->src[s].paged)
			fprintf(out, "; source %d: paged, page %d, %u pages, block table of %u", s, d->src[s].ps,
			        d->src[s].pages, d->src[s].max_pages);
		else
			fprintf(out, "; source %d: top-k %d, page %d, %u pages", s, d->src[s].topk, d->src[s].ps,
			        d->src[s].pages);
	fprintf(out, "\n");
}

/* Small and odd: batch x s_q [x pages x pages_extra]. */
static const CheckShape decode_shapes[] = {
	{5, {1, 1, 0, 0, 0}},
	{5, {3, 2, 0, 0, 0}},
	{5, {2, 1, 3, 2, 0}},
	{5, {5, 2, 0, 0, 0}},
	{5, {4, 2, 0, 0, 1}},
	{6, {3, 2, 0, 0, 0, 3}},
	{6, {1, 1, 0, 0, 1, 4}},
};

const CheckFamily check_family_decode = {
	.name = "decode",
	.dims = "batch,s_q,pages,pages_extra,full,splits",
	.ndims = 6,
	.nrequired = 2,
	.shapes = decode_shapes,
	.nshapes = COUNT(decode_shapes),
	/* V4 decode step: 64 rows, pages to hold 128K main / 16K extra tokens
	 * (76 MB + 9 MB at page 64 / 256: more than L2) */
	.bench = {6, {64, 1, 2048, 64, 1, 1}},
	.prepare = decode_prepare,
	.compare = decode_compare,
	.flops = decode_flops,
	.peer_args = decode_peer_args,
	.bytes = decode_bytes,
	.describe = decode_describe,
};
