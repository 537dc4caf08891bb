/* The indexer family of the checker (check.h): the lightning indexer as
 * docs/ABI.md "indexer" defines it, against tests/ref/indexer_ref.
 *
 * The configuration comes from the ABI's `//@args` line (heads, top-k,
 * page size; top-k 0: the logits alone, no list). The shape is batch x
 * s_q x max_len [x full x splits] (max_len 0: 2·topk + 37 keys, 301 for
 * the logits alone; full 1: every sequence max_len keys, kbench's shape;
 * splits: CTAs per query row, 0 or 1 one).
 * Each case draws per-sequence lengths (sequence 0 the longest, max_len;
 * sequence 1 shorter than s_q, so its first rows see no key; sequence 2
 * fewer keys than top-k; the rest uniform in 0 .. max_len), gives every
 * sequence's pages distinct physical pages in random order, fills block
 * table entries past a sequence's pages with page numbers far outside the
 * cache (a kernel that reads them faults), and writes keys quantized from
 * values of mixed magnitudes where about 1 key in 8 copies an earlier key of
 * its sequence (equal scores: ties at the k-th score); with the edge fill 3
 * keys in 4 copy one of the sequence's first four, so the k-th score is
 * shared by many keys (fp8: half of the copies with a scale a few ulps
 * off, so many logits share their top 24 bits and differ below). The logits are
 * compared key by key, held to a tolerance of the key's bound
 * Σ_h |w|·|s|·Σ|q·k| (INDEXER_TOL_F32: f32 sums of 128 and H terms;
 * INDEXER_TOL_WGMMA for `--score wgmma`, whose FP8 MMA keeps fewer bits:
 * docs/hardware.md, "wgmma accumulation"), masked ones exactly -inf;
 * the index list as a set (indexer_topk_check) against the reference with
 * twice the row's largest bound times that tolerance as the tie window
 * (the kernel ranks its own scores, each off by up to one tolerance), and
 * exactly against the logits the kernel stored (docs/ABI.md "indexer":
 * the list is a top-k of that output). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_ref.h"
#include "indexer_ref.h"
#include "tools/check_internal.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

enum { IDX_POISON = 0x7b }; /* 0x7b7b7b7b: an index no cache here reaches */

typedef struct Indexer {
	int heads, topk, ps;
	int fp4, nv, kb, sb; /* the format: E2M1 keys (nv: NVFP4); bytes of a key's values, of its scales */
	float global;       /* NVFP4: K_global, the per-tensor scale */
	uint32_t batch, sq, max_len, max_pages, pages;
	int full;           /* every sequence max_len keys (kbench's shape) */
	uint32_t splits;    /* CTAs per query row (run time) */
	double tol;         /* of a logit, relative to its bound */
	uint8_t *q, *cache;
	float *w;
	int32_t *bt, *lens;
	int32_t *owner;     /* physical page -> b·max_pages + logical page, -1 if unused */
	uint64_t keys_read; /* Σ over rows of the visible keys */
} Indexer;

/* The keys row t of sequence b sees (docs/ABI.md "indexer"). */
static uint32_t
visible(const Indexer *x, uint32_t b, uint32_t t)
{
	int64_t len = x->lens[b], cap = (int64_t)x->max_pages * x->ps, n;

	if (cap > x->max_len)
		cap = x->max_len;
	len = len < 0 ? 0 : len > cap ? cap : len;
	n = len - (int64_t)x->sq + t + 1;
	return (uint32_t)(n < 0 ? 0 : n > len ? len : n);
}

static int
indexer_prepare(CheckCase *c, KrtErr *err)
{
	Indexer *x = calloc(1, sizeof *x);
	char fmt[32] = "";
	const char *f = strstr(c->abi->args, "--format ");
	uint32_t *perm;
	int rc;

	if (!x)
		return check_fail(err, KRT_ENOMEM, "indexer: out of memory");
	c->priv = x;
	if (f)
		sscanf(f + 9, "%31s", fmt);
	if (strcmp(fmt, "fp8") != 0 && strcmp(fmt, "fp4") != 0 && strcmp(fmt, "nvfp4") != 0)
		return check_fail(err, KRT_EABI, "%s: --format %s: the indexer checker knows fp8, fp4 and nvfp4", c->abi->kernel,
		                  fmt[0] ? fmt : "(none)");
	x->nv = strcmp(fmt, "nvfp4") == 0;
	x->fp4 = x->nv || strcmp(fmt, "fp4") == 0;
	x->sb = x->nv ? INDEXER_NVFP4_SCALE : INDEXER_SCALE;
	/* tensor-core scoring: Hopper's FP8 MMA keeps fewer bits than f32;
	 * sm_100a's tcgen05 is held to the same until a B200 measures it */
	x->tol = strstr(c->abi->args, "--score wgmma") || strstr(c->abi->args, "--score tcgen05") ? INDEXER_TOL_WGMMA
	                                                                                           : INDEXER_TOL_F32;
	x->kb = x->fp4 ? INDEXER_FP4_KEY : INDEXER_FP8_KEY;
	x->heads = (int)check_arg_int(c, "heads");
	x->topk = (int)check_arg_int(c, "topk");
	x->ps = (int)check_arg_int(c, "page-size");
	if (x->heads <= 0 || x->topk < 0 || x->ps <= 0)
		return check_fail(err, KRT_EABI, "%s: args \"%s\" lack --heads, --topk or --page-size", c->abi->kernel,
		                  c->abi->args);
	x->batch = (uint32_t)c->shape.d[0];
	x->sq = (uint32_t)c->shape.d[1];
	x->max_len = c->shape.d[2] ? (uint32_t)c->shape.d[2] : x->topk ? (uint32_t)(2 * x->topk + 37) : 301u;
	x->full = c->shape.d[3] != 0;
	x->splits = c->shape.d[4] ? (uint32_t)c->shape.d[4] : 1;
	if (c->shape.d[4] > 65535)
		return check_fail(err, KRT_EINVAL, "indexer: splits %llu: must be in 1..65535 (grid z)",
		                  (unsigned long long)c->shape.d[4]);
	if (!x->batch || !x->sq || x->batch > 65535)
		return check_fail(err, KRT_EINVAL, "indexer: batch %u, s_q %u: both must be in 1..65535 (grid y and x)",
		                  x->batch, x->sq);
	if (c->shape.d[2] > (1u << 24))
		return check_fail(err, KRT_EINVAL, "indexer: max_len %llu: the checker takes at most 2^24 keys",
		                  (unsigned long long)c->shape.d[2]);
	x->max_pages = (x->max_len + (uint32_t)x->ps - 1) / (uint32_t)x->ps + 1;

	/* lengths, then distinct physical pages in random order */
	x->lens = malloc(sizeof *x->lens * x->batch + 1);
	x->bt = malloc(sizeof *x->bt * x->batch * (uint64_t)x->max_pages + 1);
	if (!x->lens || !x->bt)
		return check_fail(err, KRT_ENOMEM, "indexer: no host memory for the block table");
	uint64_t used = 0;
	for (uint32_t b = 0; b < x->batch; b++) {
		uint32_t l = (uint32_t)num_rng_below(&c->rng, (uint64_t)x->max_len + 1);
		if (b == 0 || x->full)
			l = x->max_len;
		else if (b == 1)
			l = x->sq > 1 ? (uint32_t)num_rng_below(&c->rng, x->sq) : 0;
		else if (b == 2)
			l = (uint32_t)num_rng_below(&c->rng, (uint64_t)x->topk + 1);
		x->lens[b] = (int32_t)(l < x->max_len ? l : x->max_len);
		used += ((uint64_t)x->lens[b] + (uint64_t)x->ps - 1) / (uint64_t)x->ps;
	}
	uint32_t pages = (uint32_t)used + 3;
	/* the page map lives in the case's one private block (freed with it) */
	Indexer *grown = realloc(c->priv, sizeof *grown + sizeof *grown->owner * pages);
	if (!grown)
		return check_fail(err, KRT_ENOMEM, "indexer: no host memory for the page map");
	c->priv = x = grown;
	x->pages = pages;
	x->owner = (int32_t *)(x + 1);
	if (!(perm = malloc(sizeof *perm * x->pages)))
		return check_fail(err, KRT_ENOMEM, "indexer: no host memory for the page map");
	for (uint32_t i = 0; i < x->pages; i++) {
		uint32_t k = (uint32_t)num_rng_below(&c->rng, (uint64_t)i + 1);
		perm[i] = perm[k];
		perm[k] = i;
		x->owner[i] = -1;
	}
	used = 0;
	for (uint32_t b = 0; b < x->batch; b++) {
		uint32_t np = ((uint32_t)x->lens[b] + (uint32_t)x->ps - 1) / (uint32_t)x->ps;
		for (uint32_t lp = 0; lp < x->max_pages; lp++) {
			int32_t *e = &x->bt[(uint64_t)b * x->max_pages + lp];
			if (lp < np) {
				*e = (int32_t)perm[used++];
				x->owner[*e] = (int32_t)(b * x->max_pages + lp);
			} else {
				*e = 0x40000000 + (int32_t)num_rng_below(&c->rng, 1u << 28);
			}
		}
	}
	free(perm);

	/* NVFP4's per-tensor scale: sized so that the normal fill's groups
	 * (amax up to about 30·4) keep UE4M3 scales under 448 */
	x->global = x->nv ? (float)(0.04 * (1 + num_rng_uniform(&c->rng))) : 1.0f;
	/* the cache: garbage everywhere, then every used key */
	size_t pb = indexer_ref_page_bytes(x->ps, x->kb, x->sb), bytes = (size_t)x->pages * pb;
	if (!(x->cache = malloc(bytes + 1)))
		return check_fail(err, KRT_ENOMEM, "indexer: no host memory for the cache");
	for (size_t i = 0; i < bytes; i++)
		x->cache[i] = (uint8_t)num_rng_below(&c->rng, 256);
	for (uint32_t b = 0; b < x->batch; b++)
		for (int32_t j = 0; j < x->lens[b]; j++) {
			const int32_t *row = x->bt + (uint64_t)b * x->max_pages;
			uint8_t *key = indexer_ref_key(x->cache, x->ps, x->kb, x->sb, (uint32_t)row[j / x->ps], j % x->ps);
			uint8_t *sc = indexer_ref_scale(x->cache, x->ps, x->kb, x->sb, (uint32_t)row[j / x->ps], j % x->ps);
			/* ties: a copy of an earlier key (edge fill: 3 in 4 keys
			 * copy one of the first four, so every radix pass sees
			 * large groups of equal logits) */
			int edge = c->fill == CHECK_FILL_EDGE && j >= 4;
			if (edge ? num_rng_below(&c->rng, 4) != 0 : j > 0 && num_rng_below(&c->rng, 8) == 0) {
				int32_t i = (int32_t)num_rng_below(&c->rng, edge ? 4 : (uint64_t)j);
				memcpy(key, indexer_ref_key(x->cache, x->ps, x->kb, x->sb, (uint32_t)row[i / x->ps], i % x->ps), (size_t)x->kb);
				memcpy(sc, indexer_ref_scale(x->cache, x->ps, x->kb, x->sb, (uint32_t)row[i / x->ps], i % x->ps),
				       (size_t)x->sb);
				/* fp8, edge: half the copies take a scale up to 128 ulps
				 * off, either way, so their logits share the top 24 bits
				 * with the exact copies among them, and the select's last
				 * passes decide among many */
				if (edge && !x->fp4 && num_rng_below(&c->rng, 2)) {
					uint32_t bits;
					memcpy(&bits, sc, 4);
					bits += (uint32_t)num_rng_below(&c->rng, 257) - 128u;
					memcpy(sc, &bits, 4);
				}
				/* fp4 (not NVFP4), edge: half the copies change one code
				 * of group 3, which the first four keys scale 2^-18 below
				 * their largest group (below), so their logits mostly
				 * share the top 24 bits with the exact copies */
				if (edge && x->fp4 && !x->nv && num_rng_below(&c->rng, 2)) {
					int byte = 48 + (int)num_rng_below(&c->rng, 16);
					key[byte] ^= (uint8_t)(1 + num_rng_below(&c->rng, 15));
				}
				continue;
			}
			static const double mag[3] = {1.0, 1.0 / 64, 30.0};
			double v[INDEXER_D], m = mag[num_rng_below(&c->rng, 3)];
			if (x->nv && c->fill == CHECK_FILL_EDGE) {
				/* every E2M1 code, every UE4M3 scale but NaN (0x7f):
				 * zero, the subnormals 2^-9 .. 7·2^-9, up to 448 */
				for (int i = 0; i < INDEXER_FP4_KEY; i++)
					key[i] = (uint8_t)num_rng_below(&c->rng, 256);
				for (int g = 0; g < INDEXER_NVFP4_SCALE; g++)
					sc[g] = (uint8_t)num_rng_below(&c->rng, 127);
				continue;
			}
			if (x->nv) {
				for (int i = 0; i < INDEXER_D; i++)
					v[i] = num_rng_normal(&c->rng) * m;
				indexer_nvfp4_quantize(v, x->global, key, sc);
				continue;
			}
			if (x->fp4) {
				/* every E2M1 code, -0 included; exponents 2^-9 .. 2^9,
				 * or under the edge fill the extremes too: 2^-127 (the
				 * f32 denormal), 2^-126, 2^-125, and up to 2^43 */
				static const uint8_t ex[7] = {0, 1, 2, 64, 127, 128, 170};
				for (int i = 0; i < INDEXER_FP4_KEY; i++)
					key[i] = (uint8_t)num_rng_below(&c->rng, 256);
				for (int g = 0; g < 4; g++)
					sc[g] = c->fill == CHECK_FILL_EDGE ? ex[num_rng_below(&c->rng, 7)]
					                                   : (uint8_t)(118 + num_rng_below(&c->rng, 19));
				if (c->fill == CHECK_FILL_EDGE && j < 4) {
					/* the keys the others copy: group 3 a small term
					 * (see the copies above) */
					uint8_t hi = sc[0] > sc[1] ? sc[0] : sc[1];
					hi = hi > sc[2] ? hi : sc[2];
					sc[3] = hi > 18 ? (uint8_t)(hi - 18) : 0;
				}
				continue;
			}
			float fs;
			for (int i = 0; i < INDEXER_D; i++)
				v[i] = num_rng_normal(&c->rng) * m;
			indexer_fp8_quantize(v, key, &fs);
			memcpy(sc, &fs, 4);
		}
	uint64_t rows = (uint64_t)x->batch * x->sq, nq = rows * (uint64_t)x->heads * INDEXER_D;
	x->q = malloc(nq + 1);
	x->w = malloc(sizeof *x->w * rows * (uint64_t)x->heads + 1);
	if (!x->q || !x->w)
		return check_fail(err, KRT_ENOMEM, "indexer: no host memory for Q");
	for (uint64_t i = 0; i < nq; i++)
		x->q[i] = decode_f64_to_e4m3(2 * num_rng_normal(&c->rng));
	for (uint64_t i = 0; i < rows * (uint64_t)x->heads; i++)
		x->w[i] = num_rng_below(&c->rng, 16) == 0 ? 0.0f : (float)(0.25 * num_rng_normal(&c->rng));
	for (uint32_t b = 0; b < x->batch; b++)
		for (uint32_t t = 0; t < x->sq; t++)
			x->keys_read += visible(x, b, t);

	/* the bufs own the host copies from here */
	rc = check_add_raw_input(c, "Q", "e4m3", 1, nq, x->q, err);
	if (!rc)
		rc = check_add_input(c, "weights", NUM_F32, rows * (uint64_t)x->heads, x->w, err);
	if (!rc)
		rc = check_add_raw_input(c, "K", "u8", 1, bytes, x->cache, err);
	if (!rc && x->nv) {
		float *g = malloc(sizeof *g);
		if (!g)
			return check_fail(err, KRT_ENOMEM, "indexer: no host memory for K_global");
		*g = x->global;
		rc = check_add_input(c, "K_global", NUM_F32, 1, g, err);
	}
	if (!rc)
		rc = check_add_raw_input(c, "block_table", "s32", 4, x->batch * (uint64_t)x->max_pages, x->bt, err);
	if (!rc)
		rc = check_add_raw_input(c, "seq_lens", "s32", 4, x->batch, x->lens, err);
	/* split rows: a completion counter per row, zero before the launch
	 * (compare checks the kernel leaves them zero) */
	if (!rc && x->topk) {
		int32_t *ctr = calloc(rows + 1, sizeof *ctr);
		if (!ctr)
			return check_fail(err, KRT_ENOMEM, "indexer: no host memory for the counters");
		rc = check_add_raw_input(c, "counters", "s32", 4, rows, ctr, err);
	}
	/* the fused top-k's candidates: splits·topk (key, position) pairs per
	 * row, garbage before the launch */
	if (!rc && x->topk) {
		uint64_t work = 2 * rows * x->splits * (uint64_t)x->topk;
		int32_t *wk = malloc(sizeof *wk * work + 1);
		if (!wk)
			return check_fail(err, KRT_ENOMEM, "indexer: no host memory for the work planes");
		for (uint64_t i = 0; i < work; i++)
			wk[i] = (int32_t)num_rng_u64(&c->rng);
		rc = check_add_raw_input(c, "work", "s32", 4, work, wk, err);
	}
	static const char *const names[] = {"batch", "s_q", "max_len", "max_pages", "pages", "H", "splits"};
	uint64_t vals[] = {x->batch, x->sq, x->max_len, x->max_pages, x->pages, (uint64_t)x->heads, x->splits};
	for (int i = 0; i < COUNT(names) && !rc; i++)
		rc = check_set_var(c, names[i], vals[i], err);
	if (!rc)
		rc = check_add_output(c, "logits", NUM_F32, rows * x->max_len, 65536, err);
	if (!rc && x->topk)
		rc = check_add_raw_output(c, "indices", "s32", 4, rows * (uint64_t)x->topk, 65536, IDX_POISON, err);
	return rc;
}

static int
indexer_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	const Indexer *x = c->priv;
	const CheckBuf *lb = check_find_buf_const(c, "logits"), *ib = check_find_buf_const(c, "indices");
	const float *lg = (const float *)((const char *)lb->host + lb->guard);
	const int32_t *ix = ib ? (const int32_t *)((const char *)ib->host + ib->guard) : NULL;
	uint64_t max_report = (uint64_t)(c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT);
	double *s = malloc(sizeof *s * (x->max_len + 1));
	double *own = malloc(sizeof *own * (x->max_len + 1));
	int32_t *got = malloc(sizeof *got * (size_t)x->topk + 1);
	double kd[INDEXER_D];
	char why[256];

	res->tol = x->tol;
	if (!s || !own || !got) {
		free(s);
		free(own);
		free(got);
		return check_fail(err, KRT_ENOMEM, "indexer: no host memory for the reference");
	}
	for (uint32_t b = 0; b < x->batch; b++)
		for (uint32_t t = 0; t < x->sq; t++) {
			uint64_t row = (uint64_t)b * x->sq + t;
			uint32_t n = visible(x, b, t);
			const int32_t *bt = x->bt + (uint64_t)b * x->max_pages;
			double bmax = 0;
			for (uint32_t j = 0; j < x->max_len; j++) {
				uint64_t at = row * x->max_len + j;
				double e, bound = 0, got_v;
				own[j] = (double)lg[at];
				if (num_is_fill(NUM_F32, lg, at, CHECK_POISON_BYTE))
					continue;
				got_v = (double)lg[at];
				if (j >= n) {
					e = got_v == -INFINITY ? 0 : INFINITY;
					s[j] = -INFINITY;
				} else {
					uint32_t pg = (uint32_t)bt[j / (uint32_t)x->ps];
					int off = (int)(j % (uint32_t)x->ps);
					const uint8_t *key = indexer_ref_key(x->cache, x->ps, x->kb, x->sb, pg, off);
					const uint8_t *sc = indexer_ref_scale(x->cache, x->ps, x->kb, x->sb, pg, off);
					if (x->nv)
						indexer_nvfp4_dequantize(key, sc, x->global, kd);
					else if (x->fp4)
						indexer_fp4_dequantize(key, sc, kd);
					else
						indexer_fp8_dequantize(key, sc, kd);
					s[j] = indexer_ref_logit(x->q + row * (uint64_t)x->heads * INDEXER_D,
					                         x->w + row * (uint64_t)x->heads, x->heads, kd, &bound);
					bmax = fmax(bmax, bound);
					e = check_row_err(got_v, s[j], bound);
				}
				if (check_count(res, e, res->tol, &res->max_err) && res->bad++ < max_report)
					check_report(c, "  logits b %u t %u key %u: got %.9g want %.9g err %.3e of the bound; %u keys visible\n",
					             b, t, j, got_v, j < n ? s[j] : -INFINITY, e, n);
			}
			if (!ix)
				continue;
			/* the list, mapped back to the row's keys: a physical index
			 * that is not one of this sequence's pages maps past n */
			for (int i = 0; i < x->topk; i++) {
				int32_t g = ix[row * (uint64_t)x->topk + (uint64_t)i];
				got[i] = g;
				if (g < 0 || (uint32_t)g / (uint32_t)x->ps >= x->pages) {
					if (g != -1)
						got[i] = (int32_t)n;
					continue;
				}
				int32_t o = x->owner[(uint32_t)g / (uint32_t)x->ps];
				if (o < 0 || (uint32_t)o / x->max_pages != b)
					got[i] = (int32_t)n;
				else
					got[i] = (int32_t)(((uint32_t)o % x->max_pages) * (uint32_t)x->ps + (uint32_t)g % (uint32_t)x->ps);
			}
			res->checked += (uint64_t)x->topk;
			if (indexer_topk_check(s, n, 2 * x->tol * bmax, got, x->topk, why, sizeof why) &&
			    res->bad++ < max_report)
				check_report(c, "  indices b %u t %u (%u keys visible, top-k %d): %s\n", b, t, n, x->topk, why);
			else if (indexer_topk_check(own, n, 0, got, x->topk, why, sizeof why) && res->bad++ < max_report)
				check_report(c, "  indices b %u t %u (%u keys visible, top-k %d), against the stored logits: %s\n",
				             b, t, n, x->topk, why);
		}
	free(s);
	free(own);
	free(got);
	/* the counters are back at zero for the next launch */
	return ix ? check_counters_zero(c, res, err) : 0;
}

/* 2·H·128 flops per visible key of each row (the scoring; the select is
 * not counted). */
static double
indexer_flops(const CheckCase *c)
{
	const Indexer *x = c->priv;

	return (double)x->keys_read * x->heads * INDEXER_D * 2.0;
}

/* The key bytes each row reads (132 or 68 per visible key), the measure
 * of the scoring's rate. */
static double
indexer_bytes(const CheckCase *c)
{
	const Indexer *x = c->priv;

	return (double)x->keys_read * (x->kb + x->sb);
}

/* "indexer B SQ H TOPK PS LEN ITERS WARMUP FLOPS BYTES": tools/peers.py
 * times the naive PyTorch indexer (einsum, relu, weighted sum, torch.topk)
 * with every sequence LEN keys long, so only full cases (full = 1, every
 * length max_len) compare like with like. */
static int
indexer_peer_args(const CheckCase *c, int iters, int warmup, char *buf, size_t n)
{
	const Indexer *x = c->priv;
	int len;

	if (!x->full)
		return -1;
	len = snprintf(buf, n, "indexer %u %u %d %d %d %u %d %d %.6g %.6g", x->batch, x->sq, x->heads, x->topk, x->ps,
	               x->max_len, iters, warmup, indexer_flops(c), indexer_bytes(c));
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

static void
indexer_describe(const CheckCase *c, FILE *out)
{
	const Indexer *x = c->priv;

	if (!x || !x->lens)
		return;
	fprintf(out, "  indexer: %s, %d heads, top-k %d, page %d, %u pages, max_len %u; lengths",
	        x->nv ? "nvfp4" : x->fp4 ? "fp4" : "fp8",
	        x->heads, x->topk, x->ps, x->pages, x->max_len);
	for (uint32_t b = 0; b < x->batch && b < 16; b++)
		fprintf(out, " %d", x->lens[b]);
	fprintf(out, "%s\n", x->batch > 16 ? " .." : "");
}

/* Small and odd: batch x s_q x max_len (0: 2·topk + 37) [x full x splits]. */
static const CheckShape indexer_shapes[] = {
	{3, {1, 1, 0}},
	{3, {3, 2, 0}},
	{3, {4, 3, 77}},
	{3, {2, 4, 0}},
	{5, {3, 2, 0, 0, 3}},
	{5, {2, 1, 1500, 1, 7}},
};

const CheckFamily check_family_indexer = {
	.name = "indexer",
	.dims = "batch,s_q,max_len,full,splits",
	.ndims = 5,
	.nrequired = 2,
	.shapes = indexer_shapes,
	.nshapes = COUNT(indexer_shapes),
	/* the fused case: 64 sequences of 16384 keys, one query row */
	.bench = {5, {64, 1, 16384, 1, 4}},
	.prepare = indexer_prepare,
	.compare = indexer_compare,
	.flops = indexer_flops,
	.peer_args = indexer_peer_args,
	.bytes = indexer_bytes,
	.describe = indexer_describe,
};
