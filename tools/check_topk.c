/* The topk family of the checker (check.h): the standalone top-k as
 * docs/ABI.md "topk" defines it, against the exact reference
 * (tests/ref/indexer_ref.h, indexer_topk_check: the list is a top-k of
 * the row as a set, -1 padding past n, a tie at the k-th value broken
 * either way, with no tolerance: the kernel selects over the very f32
 * values it is given).
 *
 * The configuration (top-k) comes from the ABI's `//@args` line. The
 * shape is rows x n. The normal fill draws N(0,1) logits where about 1 in
 * 8 copies an earlier logit of its row (ties at the k-th value); in even
 * rows the others keep only their top 12 bits (sign, exponent, 3 mantissa
 * bits) and take a random low byte, so dozens of logits share the top 24
 * bits of the k-th, spread over the low byte, and the last radix pass
 * decides; the edge
 * fill gives each row its own power-of-two scale, copies one of the row's
 * first four logits into 3 in 4 places (the k-th value shared by many,
 * in every radix pass), and mixes in -inf, +inf, ±0, subnormals and the
 * largest finite floats. The work buffer starts as garbage, the counters
 * at zero; they must be zero again after the launch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexer_ref.h"
#include "tools/check_internal.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

enum { TOPK_POISON = 0x7b }; /* 0x7b7b7b7b: an index no row here reaches */

typedef struct Topk {
	int topk;
	uint32_t rows, n, chunk, parts;
	float *x;
} Topk;

static float
edge_value(NumRng *r, double scale)
{
	switch (num_rng_below(r, 8)) {
	case 0:
		return -INFINITY;
	case 1:
		return num_rng_below(r, 2) ? 0.0f : -0.0f;
	case 2:
		return (float)((num_rng_below(r, 2) ? 1 : -1) * ldexp(1 + (double)num_rng_below(r, 8), -140));
	case 3:
		return num_rng_below(r, 4) ? (num_rng_below(r, 2) ? 3.4028235e38f : -3.4028235e38f) : INFINITY;
	default:
		return (float)(num_rng_normal(r) * scale);
	}
}

/* v's top 12 bits and the low byte b. */
static float
low_byte_only(float v, uint32_t b)
{
	uint32_t u;

	memcpy(&u, &v, 4);
	u = (u & 0xfff00000u) | b;
	memcpy(&v, &u, 4);
	return v;
}

static int
topk_prepare(CheckCase *c, KrtErr *err)
{
	Topk *x = calloc(1, sizeof *x);

	if (!x)
		return check_fail(err, KRT_ENOMEM, "topk: out of memory");
	c->priv = x;
	x->topk = (int)check_arg_int(c, "topk");
	if (x->topk <= 0)
		return check_fail(err, KRT_EABI, "%s: args \"%s\" lack --topk", c->abi->kernel, c->abi->args);
	const char *ch = krt_abi_shape(c->abi, "chunk");
	x->chunk = ch ? (uint32_t)strtoul(ch, NULL, 10) : 0;
	if (!x->chunk)
		return check_fail(err, KRT_EABI, "%s: //@shape has no chunk (logits per CTA)", c->abi->kernel);
	x->rows = (uint32_t)c->shape.d[0];
	x->n = (uint32_t)c->shape.d[1];
	if (!x->rows || x->rows > 65535 || !x->n || c->shape.d[1] > (1u << 26))
		return check_fail(err, KRT_EINVAL, "topk: rows %llu, n %llu: rows must be in 1..65535 (grid y), n in 1..2^26",
		                  (unsigned long long)c->shape.d[0], (unsigned long long)c->shape.d[1]);
	x->parts = (x->n + x->chunk - 1) / x->chunk;
	uint64_t count = (uint64_t)x->rows * x->n, work = 2ull * x->rows * x->parts * (uint64_t)x->topk;
	float *v = malloc(sizeof *v * count + 1);
	int32_t *w = malloc(sizeof *w * work + 1), *ctr = calloc(x->rows + 1ull, sizeof *ctr);
	if (!v || !w || !ctr) {
		free(v);
		free(w);
		free(ctr);
		return check_fail(err, KRT_ENOMEM, "topk: no host memory for %llu logits", (unsigned long long)count);
	}
	for (uint32_t r = 0; r < x->rows; r++) {
		float *row = v + (uint64_t)r * x->n;
		int edge = c->fill == CHECK_FILL_EDGE;
		double scale = edge ? ldexp(1, (int)num_rng_below(&c->rng, 61) - 30) : 1;
		for (uint32_t j = 0; j < x->n; j++) {
			if (edge && j >= 4 && num_rng_below(&c->rng, 4) != 0)
				row[j] = row[num_rng_below(&c->rng, 4)];
			else if (!edge && j > 0 && num_rng_below(&c->rng, 8) == 0)
				row[j] = row[num_rng_below(&c->rng, j)];
			else if (edge)
				row[j] = edge_value(&c->rng, scale);
			else if (r % 2 == 0)
				row[j] = low_byte_only((float)num_rng_normal(&c->rng), (uint32_t)num_rng_below(&c->rng, 256));
			else
				row[j] = (float)num_rng_normal(&c->rng);
		}
	}
	for (uint64_t i = 0; i < work; i++)
		w[i] = (int32_t)num_rng_u64(&c->rng);
	x->x = v;
	/* the bufs own the host copies from here; the reference reads x->x */
	int rc = check_add_input(c, "logits", NUM_F32, count, v, err);
	if (!rc)
		rc = check_add_raw_input(c, "work", "s32", 4, work, w, err);
	else
		free(w);
	if (!rc)
		rc = check_add_raw_input(c, "counters", "s32", 4, x->rows, ctr, err);
	else
		free(ctr);
	if (!rc)
		rc = check_set_var(c, "rows", x->rows, err);
	if (!rc)
		rc = check_set_var(c, "n", x->n, err);
	if (!rc)
		rc = check_add_raw_output(c, "indices", "s32", 4, (uint64_t)x->rows * (uint64_t)x->topk, 65536,
		                          TOPK_POISON, err);
	return rc;
}

static int
topk_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	const Topk *x = c->priv;
	const CheckBuf *ib = check_find_buf_const(c, "indices");
	const int32_t *ix = (const int32_t *)((const char *)ib->host + ib->guard);
	uint64_t max_report = (uint64_t)(c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT);
	double *s = malloc(sizeof *s * x->n + 1);
	char why[256];

	res->tol = 0;
	if (!s)
		return check_fail(err, KRT_ENOMEM, "topk: no host memory for the reference");
	for (uint32_t r = 0; r < x->rows; r++) {
		for (uint32_t j = 0; j < x->n; j++)
			s[j] = (double)x->x[(uint64_t)r * x->n + j];
		res->checked += (uint64_t)x->topk;
		if (indexer_topk_check(s, x->n, 0, ix + (uint64_t)r * (uint64_t)x->topk, x->topk, why, sizeof why)) {
			res->max_err = INFINITY;
			if (res->bad++ < max_report)
				check_report(c, "  row %u (n %u, top-k %d): %s\n", r, x->n, x->topk, why);
		}
	}
	free(s);
	/* the counters are back at zero for the next launch */
	return check_counters_zero(c, res, err);
}

/* No floating-point operations: kbench reports the rate in bytes. */
static double
topk_flops(const CheckCase *c)
{
	(void)c;
	return 0;
}

/* The logits read once. */
static double
topk_bytes(const CheckCase *c)
{
	const Topk *x = c->priv;

	return 4.0 * x->rows * (double)x->n;
}

/* "topk ROWS N K ITERS WARMUP": tools/peers.py times torch.topk. */
static int
topk_peer_args(const CheckCase *c, int iters, int warmup, char *buf, size_t n)
{
	const Topk *x = c->priv;
	int len = snprintf(buf, n, "topk %u %u %d %d %d", x->rows, x->n, x->topk, iters, warmup);

	return len < 0 || (size_t)len >= n ? -1 : 0;
}

static void
topk_describe(const CheckCase *c, FILE *out)
{
	const Topk *x = c->priv;

	if (x)
		fprintf(out, "  topk: top-%d of %u rows of %u logits, %u chunks of %d a row\n", x->topk, x->rows, x->n,
		        x->parts, x->chunk);
}

/* Small and odd: rows x n. Fewer logits than k (padding), one chunk,
 * a chunk and one logit, a last chunk of fewer than k logits. */
static const CheckShape topk_shapes[] = {
	{2, {3, 77}},
	{2, {2, 3001}},
	{2, {1, 16385}},
	{2, {2, 2 * 16384 + 100}},
	{2, {1, 3 * 16384 - 5}},
};

const CheckFamily check_family_topk = {
	.name = "topk",
	.dims = "rows,n",
	.ndims = 2,
	.nrequired = 2,
	.shapes = topk_shapes,
	.nshapes = COUNT(topk_shapes),
	/* the case: 64 rows of 262144 logits */
	.bench = {2, {64, 262144}},
	.prepare = topk_prepare,
	.compare = topk_compare,
	.flops = topk_flops,
	.peer_args = topk_peer_args,
	.bytes = topk_bytes,
	.describe = topk_describe,
};
