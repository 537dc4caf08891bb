/* The fmha family of the checker (check.h): attention forward as
 * docs/ABI.md "fmha" defines it, against tests/ref/fmha_ref.
 *
 * The kernel's configuration comes from its ABI header: head dims, head
 * counts, mask, softmax scale, kv-shared and LSE from the `//@args` line
 * (the kgen arguments that made it), element types from the parameters.
 * The shape is batch x seqlen_q x seqlen_k [x varlen]: varlen 0 gives every
 * sequence seqlen_q queries and seqlen_k keys; 1 and 2 draw per-sequence
 * lengths (see draw_lengths), so the same kernel runs packed batches of
 * ragged sequences. The seed decides the lengths too, so `kcheck --seed S
 * --shape BxSQxSKxV` replays a varlen case exactly. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmha_ref.h"
#include "tools/check_internal.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The configuration of one case: what the kernel was generated for, and the
 * sequence lengths drawn for this shape. Lives in c->priv. */
typedef struct Fmha {
	NumType in, out;       /* Q, K, V; O */
	uint32_t d, dv, hq, hkv;
	FmhaMask mask;
	int64_t window_left, window_right; /* -1: none */
	double scale;          /* as the kernel applies it */
	int kv_shared, lse;
	uint32_t varlen;
	uint32_t batch, total_q, total_k, max_q, max_k;
	int32_t *cu_q, *cu_k;  /* the uploaded host copies, owned by the bufs */
} Fmha;

/* ---- the ABI's args line ------------------------------------------------ */

enum {
	ARG_HEAD_DIM,
	ARG_HEAD_DIM_V,
	ARG_HEADS_Q,
	ARG_HEADS_KV,
	ARG_MASK,
	ARG_KV_SHARED,
	ARG_LSE,
	ARG_WINDOW_LEFT,
	ARG_WINDOW_RIGHT,
	NARGS
};

typedef enum ArgKind {
	AK_COUNT,  /* 0 .. 65536 */
	AK_FLAG,   /* 0 or 1 */
	AK_MASK,   /* a mask name (fmha_ref.h), or its index */
	AK_WINDOW, /* -1 (none) or a count */
	NKINDS
} ArgKind;

/* The values each kind accepts: lo .. hi, whole numbers or not. */
static const struct {
	double lo, hi;
	int whole;
} arg_kinds[NKINDS] = {
	[AK_COUNT] = {0, 65536, 1},
	[AK_FLAG] = {0, 1, 1},
	[AK_MASK] = {0, FMHA_NMASKS - 1, 1},
	[AK_WINDOW] = {-1, 1 << 30, 1},
};

/* The kgen fmha arguments the checker reads, as gen/fmha.c names them;
 * every other one (target, tiles, stages, dtype) changes how the kernel
 * computes, not what, and is skipped. Columns: name, kind, required. The
 * window pair is for later sliding-window kernels: absent means none. */
static const struct {
	const char *name;
	ArgKind kind;
	int required;
} fmha_args[NARGS] = {
	[ARG_HEAD_DIM] = {"head-dim", AK_COUNT, 1},
	[ARG_HEAD_DIM_V] = {"head-dim-v", AK_COUNT, 0}, /* 0 or absent: head-dim */
	[ARG_HEADS_Q] = {"heads-q", AK_COUNT, 1},
	[ARG_HEADS_KV] = {"heads-kv", AK_COUNT, 0},     /* absent: heads-q */
	[ARG_MASK] = {"mask", AK_MASK, 0},              /* absent: none */
	[ARG_KV_SHARED] = {"kv-shared", AK_FLAG, 0},    /* absent: no V parameter */
	[ARG_LSE] = {"lse", AK_FLAG, 0},                /* absent: an LSE parameter */
	[ARG_WINDOW_LEFT] = {"window-left", AK_WINDOW, 0},
	[ARG_WINDOW_RIGHT] = {"window-right", AK_WINDOW, 0},
};

typedef struct ArgVals {
	double v[NARGS];
	int given[NARGS];
} ArgVals;

static int
parse_arg_value(const CheckCase *c, int a, const char *s, double *out, KrtErr *err)
{
	ArgKind k = fmha_args[a].kind;
	char *end;
	FmhaMask m;

	if (k == AK_MASK && fmha_mask_parse(s, &m) == 0) {
		*out = (double)m;
		return 0;
	}
	double v = strtod(s, &end);
	if (end == s || *end || !isfinite(v) || v < arg_kinds[k].lo || v > arg_kinds[k].hi ||
	    (arg_kinds[k].whole && v != floor(v)))
		return check_fail(err, KRT_EABI, "%s: args: --%s %s: the fmha checker does not "
		                  "understand this value", c->abi->kernel, fmha_args[a].name, s);
	*out = v;
	return 0;
}

/* Reads "--name value" and "--name=value" words of abi->args. */
static int
parse_args(const CheckCase *c, ArgVals *av, KrtErr *err)
{
	char buf[sizeof c->abi->args];
	char *save = NULL;

	memset(av, 0, sizeof *av);
	snprintf(buf, sizeof buf, "%s", c->abi->args);
	for (char *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		char *val = NULL, *eq;
		if (strncmp(w, "--", 2) != 0)
			continue;
		w += 2;
		if ((eq = strchr(w, '='))) {
			*eq = 0;
			val = eq + 1;
		}
		for (int a = 0; a < NARGS; a++) {
			if (strcmp(w, fmha_args[a].name) != 0)
				continue;
			if (!val)
				val = strtok_r(NULL, " \t", &save);
			if (!val)
				return check_fail(err, KRT_EABI, "%s: args: --%s has no value",
				                  c->abi->kernel, w);
			int rc = parse_arg_value(c, a, val, &av->v[a], err);
			if (rc)
				return rc;
			av->given[a] = 1;
			break;
		}
	}
	for (int a = 0; a < NARGS; a++)
		if (fmha_args[a].required && !av->given[a])
			return check_fail(err, KRT_EABI, "%s: args \"%s\" lack --%s, which the fmha "
			                  "checker needs", c->abi->kernel, c->abi->args, fmha_args[a].name);
	return 0;
}

/* The element type of parameter `name` of kind `kind`; absent is an error
 * when `need`, else *present = 0. */
static int
param_type(const CheckCase *c, const char *name, KrtArgKind kind, int need, int *present,
           NumType *t, KrtErr *err)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, name);

	*present = p != NULL;
	if (!p)
		return need ? check_fail(err, KRT_EABI, "%s: family fmha needs a %s parameter named %s",
		                         c->abi->kernel, kind == KRT_ARG_TMAP ? "tmap" : "ptr", name)
		            : 0;
	if (p->kind != kind)
		return check_fail(err, KRT_EABI, "%s: parameter %s: the fmha ABI makes it a %s",
		                  c->abi->kernel, name, kind == KRT_ARG_TMAP ? "tmap" : "ptr");
	if (num_type_parse(p->dtype, t))
		return check_fail(err, KRT_EABI, "%s: %s dtype=%s: the fmha checker knows bf16, fp16, "
		                  "f32", c->abi->kernel, name, p->dtype);
	return 0;
}

/* The configuration from the ABI: the args line for the numbers, the
 * parameter list for the types and for which of V and LSE exist. */
static int
read_config(const CheckCase *c, Fmha *f, KrtErr *err)
{
	const char *k = c->abi->kernel;
	ArgVals av;
	NumType tk, tv = NUM_BF16, tl = NUM_F32;
	int have, have_v, have_lse;
	int rc = parse_args(c, &av, err);

	if (!rc)
		rc = param_type(c, "Q", KRT_ARG_TMAP, 1, &have, &f->in, err);
	if (!rc)
		rc = param_type(c, "K", KRT_ARG_TMAP, 1, &have, &tk, err);
	if (!rc)
		rc = param_type(c, "V", KRT_ARG_TMAP, 0, &have_v, &tv, err);
	if (!rc)
		rc = param_type(c, "O", KRT_ARG_PTR, 1, &have, &f->out, err);
	if (!rc)
		rc = param_type(c, "LSE", KRT_ARG_PTR, 0, &have_lse, &tl, err);
	if (rc)
		return rc;
	if (f->in == NUM_F32 || tk != f->in || (have_v && tv != f->in))
		return check_fail(err, KRT_EABI, "%s: Q, K, V are %s, %s, %s: the fmha checker wants "
		                  "one type, bf16 or fp16", k, num_type_name(f->in), num_type_name(tk),
		                  have_v ? num_type_name(tv) : "(none)");
	if (have_lse && tl != NUM_F32)
		return check_fail(err, KRT_EABI, "%s: LSE dtype=%s: the ABI says f32", k,
		                  num_type_name(tl));
	f->d = (uint32_t)av.v[ARG_HEAD_DIM];
	f->dv = av.v[ARG_HEAD_DIM_V] > 0 ? (uint32_t)av.v[ARG_HEAD_DIM_V] : f->d;
	f->hq = (uint32_t)av.v[ARG_HEADS_Q];
	f->hkv = av.given[ARG_HEADS_KV] ? (uint32_t)av.v[ARG_HEADS_KV] : f->hq;
	f->mask = (FmhaMask)av.v[ARG_MASK];
	f->kv_shared = av.given[ARG_KV_SHARED] ? (int)av.v[ARG_KV_SHARED] : !have_v;
	f->lse = av.given[ARG_LSE] ? (int)av.v[ARG_LSE] : have_lse;
	/* kgen prints the window extents in //@args only with --mask window,
	 * where they mean something */
	f->window_left = f->mask == FMHA_MASK_WINDOW && av.given[ARG_WINDOW_LEFT]
	                         ? (int64_t)av.v[ARG_WINDOW_LEFT] : -1;
	f->window_right = f->mask == FMHA_MASK_WINDOW && av.given[ARG_WINDOW_RIGHT]
	                          ? (int64_t)av.v[ARG_WINDOW_RIGHT] : -1;
	/* The kernel takes the scale as an f32 argument (softmax_scale,
	 * docs/ABI.md); 1/sqrt(D) rounded to one is what it gets here, and the
	 * reference uses the same number, so the comparison measures the
	 * kernel's arithmetic and not a rounding of its input. */
	f->scale = (double)(float)(1.0 / sqrt((double)f->d));
	if (f->kv_shared == have_v)
		return check_fail(err, KRT_EABI, "%s: --kv-shared %d but the ABI %s a V parameter", k,
		                  f->kv_shared, have_v ? "has" : "lacks");
	if (f->lse != have_lse)
		return check_fail(err, KRT_EABI, "%s: --lse %d but the ABI %s an LSE parameter", k,
		                  f->lse, have_lse ? "has" : "lacks");
	/* The header's //@shape (docs/ABI.md, "Shape fields") states the same
	 * numbers for libkrt; a header whose two lines disagree is malformed. */
	const struct {
		const char *field;
		int64_t v;
	} shape[] = {
		{"Hq", f->hq}, {"Hkv", f->hkv}, {"D", f->d}, {"Dv", f->dv},
		{"lse", f->lse}, {"kv-shared", f->kv_shared},
	};
	for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
		const char *v = krt_abi_shape(c->abi, shape[i].field);
		if (v && strtoll(v, NULL, 10) != shape[i].v)
			return check_fail(err, KRT_EABI, "%s: //@shape %s=%s but //@args give %lld", k,
			                  shape[i].field, v, (long long)shape[i].v);
	}
	const char *sm = krt_abi_shape(c->abi, "mask"), *sw = krt_abi_shape(c->abi, "window");
	FmhaMask m;
	long long wl, wr;
	if (sm && (fmha_mask_parse(sm, &m) != 0 || m != f->mask))
		return check_fail(err, KRT_EABI, "%s: //@shape mask=%s but //@args give another mask",
		                  k, sm);
	if (sw && (sscanf(sw, "%lld,%lld", &wl, &wr) != 2 || wl != f->window_left ||
	           wr != f->window_right))
		return check_fail(err, KRT_EABI, "%s: //@shape window=%s but //@args give %lld,%lld", k,
		                  sw, (long long)f->window_left, (long long)f->window_right);
	if (!f->d || !f->hq || !f->hkv || f->hq % f->hkv)
		return check_fail(err, KRT_EABI, "%s: head-dim %u, heads-q %u, heads-kv %u: want "
		                  "nonzero, heads-q a multiple of heads-kv", k, f->d, f->hq, f->hkv);
	if (f->kv_shared && f->dv != f->d)
		return check_fail(err, KRT_EABI, "%s: kv-shared with head-dim %u != head-dim-v %u", k,
		                  f->d, f->dv);
	/* TMA row strides (D and Dv elements) must be multiples of 16 bytes. */
	uint32_t es = (uint32_t)num_type_size(f->in);
	if ((f->d * es) % 16 || (f->dv * es) % 16)
		return check_fail(err, KRT_EINVAL, "%s: head-dim %u / head-dim-v %u: rows of %s must "
		                  "be multiples of 16 bytes for TMA", k, f->d, f->dv,
		                  num_type_name(f->in));
	return 0;
}

/* ---- sequence lengths --------------------------------------------------- */

/* The shape's varlen dimension. Fixed is the plain batch. The random modes
 * place one sequence of exactly seqlen_q x seqlen_k at a random index (so
 * max_seqlen_q is seqlen_q and the whole grid runs) and draw the others'
 * query and key lengths independently in 1 .. seqlen, moved off multiples
 * of 16 so that every sequence ends inside a tile; independent draws give
 * sq > sk too, where a causal mask leaves rows with no visible key (O = 0,
 * LSE = -inf). Mode 2 also empties about one sequence in four of queries
 * and, independently, of keys, which the ABI allows. */
static const char *const varlen_modes[] = {
	"fixed",
	"random lengths",
	"random lengths with empty sequences",
};

static uint32_t
draw_len(NumRng *r, uint32_t max)
{
	uint32_t v = 1 + (uint32_t)num_rng_below(r, max);
	return v > 1 && v % 16 == 0 ? v - 1 : v;
}

static int
draw_lengths(CheckCase *c, Fmha *f, KrtErr *err)
{
	uint64_t B = c->shape.d[0], SQ = c->shape.d[1], SK = c->shape.d[2];
	uint64_t tq = 0, tk = 0;
	NumRng r;

	if (!B || !SQ || !SK || f->varlen >= (uint32_t)COUNT(varlen_modes))
		return check_fail(err, KRT_EINVAL, "fmha %llux%llux%llux%u: batch, seqlen_q, "
		                  "seqlen_k must be >= 1 and varlen 0..%d", (unsigned long long)B,
		                  (unsigned long long)SQ, (unsigned long long)SK, f->varlen,
		                  COUNT(varlen_modes) - 1);
	/* refused here, before any buffer: grid z is the batch (docs/ABI.md) */
	if (B > 65535 || B * SQ > INT32_MAX || B * SK > INT32_MAX)
		return check_fail(err, KRT_EINVAL, "fmha %llux%llux%llu: batch up to 65535 (grid z "
		                  "is the batch; CUDA's grid z limit) and batch·seqlen below 2^31 "
		                  "(cu_seqlens are s32)",
		                  (unsigned long long)B, (unsigned long long)SQ,
		                  (unsigned long long)SK);
	f->batch = (uint32_t)B;
	f->cu_q = malloc(sizeof(int32_t) * (B + 1));
	f->cu_k = malloc(sizeof(int32_t) * (B + 1));
	if (!f->cu_q || !f->cu_k)
		return check_fail(err, KRT_ENOMEM, "fmha: out of memory");
	num_rng_seed(&r, num_mix(c->seed, 0x6c656e73u, B, f->varlen)); /* "lens" */
	uint64_t full = f->varlen ? num_rng_below(&r, B) : 0;
	f->cu_q[0] = f->cu_k[0] = 0;
	for (uint64_t b = 0; b < B; b++) {
		uint64_t sq = SQ, sk = SK;
		if (f->varlen && b != full) {
			sq = draw_len(&r, (uint32_t)SQ);
			sk = draw_len(&r, (uint32_t)SK);
			if (f->varlen == 2 && num_rng_below(&r, 4) == 0)
				sq = 0;
			if (f->varlen == 2 && num_rng_below(&r, 4) == 0)
				sk = 0;
		}
		tq += sq;
		tk += sk;
		f->cu_q[b + 1] = (int32_t)tq;
		f->cu_k[b + 1] = (int32_t)tk;
		f->max_q = sq > f->max_q ? (uint32_t)sq : f->max_q;
		f->max_k = sk > f->max_k ? (uint32_t)sk : f->max_k;
	}
	f->total_q = (uint32_t)tq;
	f->total_k = (uint32_t)tk;
	return 0;
}

/* ---- prepare ------------------------------------------------------------ */

/* Q and K under the edge pattern: rows of 2^-3 .. 2^3 with spikes of 4..8x,
 * so scores reach a few hundred (a softmax that is all but an argmax, the
 * running maximum moving late) and a few hundredths (nearly uniform), while
 * fp32 score errors stay ~1e-4 absolute, far below what moves a weight by
 * the tolerance. V takes gemm's ranges (wide row scales, subnormals,
 * spikes): O is a convex combination of V rows, so what V's type holds the
 * output holds too. */
static const CheckEdge qk_edge = {3, 4.0};

static int
draw_input(CheckCase *c, const char *name, NumType t, CheckEdge e, uint64_t rows, uint64_t cols,
           KrtErr *err)
{
	void *host = malloc((size_t)(rows * cols) * (size_t)num_type_size(t) + 1);

	if (!host)
		return check_fail(err, KRT_ENOMEM, "fmha: no host memory for %s", name);
	check_draw_matrix(&c->rng, c->fill, t, e, rows, cols, host);
	return check_add_input(c, name, t, rows * cols, host, err);
}

static int
fmha_prepare(CheckCase *c, KrtErr *err)
{
	Fmha *f = calloc(1, sizeof *f);
	int rc;

	if (!f)
		return check_fail(err, KRT_ENOMEM, "fmha: out of memory");
	c->priv = f;
	f->varlen = (uint32_t)c->shape.d[3];
	rc = read_config(c, f, err);
	if (!rc)
		rc = draw_lengths(c, f, err);
	if (rc) {
		free(f->cu_q);
		free(f->cu_k);
		f->cu_q = f->cu_k = NULL;
		return rc;
	}
	/* The buffers own the length arrays from here (freed with the case). */
	int32_t *cq = f->cu_q, *ck = f->cu_k;
	rc = check_add_raw_input(c, "cu_seqlens_q", "s32", 4, f->batch + 1, cq, err);
	if (rc) {
		free(ck);
		return rc;
	}
	rc = check_add_raw_input(c, "cu_seqlens_k", "s32", 4, f->batch + 1, ck, err);
	if (rc)
		return rc;
	/* The names the ABI's tensors and scalars use (docs/ABI.md). */
	static const char *const names[] = {"max_seqlen_q", "total_q", "total_k", "Hq", "Hkv",
	                                    "D", "Dv"};
	uint64_t vals[] = {f->max_q, f->total_q, f->total_k, f->hq, f->hkv, f->d, f->dv};
	for (int i = 0; i < COUNT(names) && !rc; i++)
		rc = check_set_var(c, names[i], vals[i], err);
	if (!rc)
		rc = check_set_f32(c, "softmax_scale", (float)f->scale, err);
	if (rc)
		return rc;
	/* TMA refuses zero-sized dimensions; a batch of only empty sequences
	 * has nothing to check anyway. */
	if (!f->total_q || !f->total_k)
		return check_fail(err, KRT_EINVAL, "fmha: the drawn lengths total %u queries and %u "
		                  "keys; both must be nonzero", f->total_q, f->total_k);
	uint64_t tq = f->total_q, tk = f->total_k;
	CheckEdge ve = f->kv_shared ? qk_edge : check_edge_range(f->in, f->out);
	rc = draw_input(c, "Q", f->in, qk_edge, tq * f->hq, f->d, err);
	if (!rc)
		rc = draw_input(c, "K", f->in, qk_edge, tk * f->hkv, f->d, err);
	if (!rc && !f->kv_shared)
		rc = draw_input(c, "V", f->in, ve, tk * f->hkv, f->dv, err);
	/* A kernel that stores whole tiles without bounds checks writes up to
	 * tile_m - 1 rows past the last sequence; tiles are at most 256 rows.
	 * LSE is [Hq, total_q]: past the last head's end by as many. */
	size_t osz = (size_t)num_type_size(f->out);
	if (!rc)
		rc = check_add_output(c, "O", f->out, tq * f->hq * f->dv,
		                      256 * (size_t)f->hq * f->dv * osz + 65536, err);
	if (!rc && f->lse)
		rc = check_add_output(c, "LSE", NUM_F32, tq * f->hq, 256 * 4 + 65536, err);
	return rc;
}

/* ---- compare ------------------------------------------------------------ */

/* Tolerances.
 *
 * O is compared normwise per row like gemm's C: a row is one query head of
 * one query row, err = |o - ref| / max |ref| over that row's Dv values, the
 * reported error its maximum. O is a weighted mean of V rows, so its
 * entries share one scale, the row maximum, and near-zero entries are not
 * singled out. A row with no visible key must be exactly 0 (any nonzero
 * value is an infinite error).
 *
 * Why 1e-2 (the bound). Scores in fp32 from exact bf16 products
 * are good to ~1e-6 relative; a flash kernel then rounds P to bf16 (2^-9
 * relative per weight) before P·V, sums in fp32, and rounds O to bf16 (up
 * to 2^-9 ≈ 2e-3 of the row maximum). The P rounding does not average out
 * where a few keys dominate a row and their V values partly cancel (decode,
 * early causal rows, the edge pattern's wide V scales): up to 2^-9 · Σ p|v|
 * against a row maximum that can be a few times smaller. Measured: the
 * sm_90a kernel on an H200 (2026-11-21, 896 cases) had a median near 5e-3
 * and a maximum of 7.6e-3 (edge fill, varlen); a C model of the same
 * arithmetic over 271 seeds: normal at most 6.4e-3, edge at most 8.1e-3.
 * So 1e-2 holds with a margin of about 1.25 at the far tail; a failure
 * near 1e-2 on the edge fill alone is that tail before it is a bug. What
 * the bound catches: a dropped or doubled KV tile (tens of percent), a
 * wrong head or sequence (unrelated values), a mask one key off in the
 * first rows of a sequence, where a row sees few keys and one of them
 * weighs 1/(i+1). (One key more or less among thousands moves O by ~1/Sk,
 * under any fair tolerance: LSE and the small shapes catch those.)
 *
 * LSE is held to |lse - ref| <= 1e-3 · max(1, |ref|): it is a logarithm, so
 * absolute near 0 and relative for the large values of peaked rows. fp32
 * scores and sums give ~1e-6; a kernel that forgets the maximum it
 * subtracted, or a mask one key off, misses by log(1 + 1/n), 1e-3 and up
 * for n < 1000 visible keys, and by ~0.7 in a causal first row. -inf must
 * be exactly -inf. */
static const double fmha_tol = 1e-2;
static const double fmha_lse_tol = 1e-3;

typedef struct Sel {
	uint32_t b, kvh, head, row;
} Sel;

static int
cmp_sel(const void *x, const void *y)
{
	const Sel *a = x, *b = y;

	if (a->b != b->b)
		return a->b < b->b ? -1 : 1;
	if (a->kvh != b->kvh)
		return a->kvh < b->kvh ? -1 : 1;
	if (a->head != b->head)
		return a->head < b->head ? -1 : 1;
	return (a->row > b->row) - (a->row < b->row);
}

static FmhaProblem
problem(const CheckCase *c, const Fmha *f)
{
	const CheckBuf *v = check_find_buf_const(c, "V");
	FmhaProblem p = {
		.type = f->in,
		.q = check_find_buf_const(c, "Q")->host,
		.k = check_find_buf_const(c, "K")->host,
		.cu_q = f->cu_q,
		.cu_k = f->cu_k,
		.batch = f->batch,
		.hq = f->hq,
		.hkv = f->hkv,
		.d = f->d,
		.dv = f->dv,
		.mask = f->mask,
		.window_left = f->window_left,
		.window_right = f->window_right,
		.scale = f->scale,
	};
	p.v = f->kv_shared ? p.k : v->host;
	return p;
}

static double
row_cost(const FmhaProblem *p, const Fmha *f, uint32_t b, uint32_t row)
{
	uint32_t sq = (uint32_t)(f->cu_q[b + 1] - f->cu_q[b]);
	uint32_t sk = (uint32_t)(f->cu_k[b + 1] - f->cu_k[b]);
	uint32_t lo, hi;

	fmha_ref_visible(p, row - (uint32_t)f->cu_q[b], sq, sk, &lo, &hi);
	return (double)(hi - lo) * (f->d + f->dv) + 1.0;
}

/* Rows compared: all of them while the reference costs at most
 * opts->full_limit multiply-adds. Past that: the first and last query row
 * of every sequence for the first and last head (the edge tiles, and the
 * rows a mask treats differently), then random (head, row) pairs until
 * about 2^31 multiply-adds are spent; sorted by (sequence, KV head) so
 * that the reference decodes each K/V block once. */
static Sel *
select_rows(CheckCase *c, const FmhaProblem *p, const Fmha *f, size_t *n, int *subset)
{
	uint64_t limit = c->opts->full_limit ? c->opts->full_limit : CHECK_FULL_LIMIT;
	uint64_t all = (uint64_t)f->total_q * f->hq;
	uint32_t group = f->hq / f->hkv;
	size_t cap, k = 0;
	Sel *s;

	*subset = fmha_ref_work(p) > (double)limit;
	if (!*subset) {
		if (!(s = malloc(sizeof *s * all)))
			return NULL;
		for (uint32_t b = 0; b < f->batch; b++)
			for (uint32_t h = 0; h < f->hq; h++)
				for (uint32_t r = (uint32_t)f->cu_q[b]; r < (uint32_t)f->cu_q[b + 1]; r++)
					s[k++] = (Sel){b, h / group, h, r};
		*n = k;
		return s;
	}
	NumRng rng;
	double spent = 0;
	cap = 4 * (size_t)f->batch + 4096;
	if (!(s = malloc(sizeof *s * cap)))
		return NULL;
	num_rng_seed(&rng, num_mix(c->seed, 0x726f7773u, f->total_q, f->hq)); /* "rows" */
	for (uint32_t b = 0; b < f->batch; b++) {
		uint32_t q0 = (uint32_t)f->cu_q[b], q1 = (uint32_t)f->cu_q[b + 1];
		uint32_t heads[2] = {0, f->hq - 1}, rows[2] = {q0, q1 - 1};
		if (q1 == q0)
			continue;
		for (int i = 0; i < 4; i++) {
			Sel x = {b, heads[i / 2] / group, heads[i / 2], rows[i % 2]};
			s[k++] = x;
			spent += row_cost(p, f, b, x.row);
		}
	}
	while (spent < 0x1p31 && k < cap) {
		uint32_t row = (uint32_t)num_rng_below(&rng, f->total_q);
		uint32_t h = (uint32_t)num_rng_below(&rng, f->hq);
		uint32_t b = fmha_ref_seq_of(p, row);
		s[k++] = (Sel){b, h / group, h, row};
		spent += row_cost(p, f, b, row);
	}
	qsort(s, k, sizeof *s, cmp_sel);
	*n = k;
	return s;
}

static void
compare_row(CheckCase *c, const Fmha *f, const FmhaProblem *p, const Sel *s, const double *ref,
            double ref_lse, CheckResult *res)
{
	const CheckBuf *ob = check_find_buf_const(c, "O");
	const void *out = (const char *)ob->host + ob->guard;
	uint64_t max_report = (uint64_t)(c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT);
	uint32_t i = s->row - (uint32_t)f->cu_q[s->b];
	uint32_t sq = (uint32_t)(f->cu_q[s->b + 1] - f->cu_q[s->b]);
	uint32_t sk = (uint32_t)(f->cu_k[s->b + 1] - f->cu_k[s->b]);
	uint32_t lo, hi;
	double rowmax = 0.0;

	fmha_ref_visible(p, i, sq, sk, &lo, &hi);
	for (uint32_t n = 0; n < f->dv; n++)
		rowmax = fmax(rowmax, fabs(ref[n]));
	double denom = rowmax > 0.0 ? rowmax : DBL_MIN;
	for (uint32_t n = 0; n < f->dv; n++) {
		uint64_t idx = ((uint64_t)s->row * f->hq + s->head) * f->dv + n;
		if (num_is_fill(ob->type, out, idx, CHECK_POISON_BYTE))
			continue; /* counted as unwritten */
		double got = num_load(ob->type, out, idx);
		double e = isfinite(got) ? fabs(got - ref[n]) / denom : INFINITY;
		if (check_count(res, e, res->tol, &res->max_err) && res->bad++ < max_report)
			check_report(c, "  O   seq %u row %u (global %u) head %u col %u: got %.8g want "
			             "%.8g rel err %.3e; keys [%u,%u) of %u visible\n", s->b, i, s->row,
			             s->head, n, got, ref[n], e, lo, hi, sk);
	}
	if (!f->lse)
		return;
	const CheckBuf *lb = check_find_buf_const(c, "LSE");
	const void *lout = (const char *)lb->host + lb->guard;
	uint64_t idx = (uint64_t)s->head * f->total_q + s->row;
	if (num_is_fill(NUM_F32, lout, idx, CHECK_POISON_BYTE))
		return;
	double got = num_load(NUM_F32, lout, idx), e = check_lse_err(got, ref_lse);
	if (check_count(res, e, res->lse_tol, &res->lse_err) && res->bad++ < max_report)
		check_report(c, "  LSE seq %u row %u (global %u) head %u: got %.8g want %.8g err "
		             "%.3e; keys [%u,%u) of %u visible\n", s->b, i, s->row, s->head, got,
		             ref_lse, e, lo, hi, sk);
}

static int
fmha_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	const Fmha *f = c->priv;
	FmhaProblem p = problem(c, f);
	enum { BLOCK = 1024 };
	size_t n = 0;
	Sel *sel = select_rows(c, &p, f, &n, &res->subset);
	FmhaRow *rows = malloc(sizeof *rows * BLOCK);
	double *ref = malloc(sizeof *ref * BLOCK * f->dv);
	double *lse = malloc(sizeof *lse * BLOCK);

	res->tol = fmha_tol;
	res->lse_tol = f->lse ? fmha_lse_tol : 0.0;
	if (!sel || !rows || !ref || !lse) {
		free(sel);
		free(rows);
		free(ref);
		free(lse);
		return check_fail(err, KRT_ENOMEM, "fmha: no host memory for the reference");
	}
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t nb = n - i < BLOCK ? n - i : BLOCK;
		for (size_t j = 0; j < nb; j++)
			rows[j] = (FmhaRow){sel[i + j].head, sel[i + j].row};
		fmha_ref_rows(&p, rows, nb, ref, lse);
		for (size_t j = 0; j < nb; j++)
			compare_row(c, f, &p, &sel[i + j], ref + j * f->dv, lse[j], res);
	}
	free(sel);
	free(rows);
	free(ref);
	free(lse);
	return 0;
}

/* ---- flops, peers, description ------------------------------------------ */

/* The usual attention count, so that ours and the peers' figures compare:
 * two matrix products per (query, key) pair, 2·Dqk + 2·Dv flops, i.e.
 * 4·B·H·Sq·Sk·D for Dqk = Dv; halved for causal whatever Sq and Sk (the
 * FlashAttention convention; the exact visible fraction differs for Sq !=
 * Sk). Varlen sums Sq·Sk over the sequences. Softmax is not counted. */
static double
fmha_flops(const CheckCase *c)
{
	const Fmha *f = c->priv;
	double pairs = 0;

	for (uint32_t b = 0; b < f->batch; b++)
		pairs += (double)(f->cu_q[b + 1] - f->cu_q[b]) * (double)(f->cu_k[b + 1] - f->cu_k[b]);
	return pairs * f->hq * 2.0 * (f->d + f->dv) * (f->mask == FMHA_MASK_CAUSAL ? 0.5 : 1.0);
}

/* "fmha B SQ SK HQ HKV D DV MASK DTYPE ITERS WARMUP SCALE KVSHARED"; none
 * for varlen or windows, which SDPA does not take in this form. */
static int
fmha_peer_args(const CheckCase *c, int iters, int warmup, char *buf, size_t n)
{
	const Fmha *f = c->priv;

	if (f->varlen || f->window_left >= 0 || f->window_right >= 0)
		return -1;
	int len = snprintf(buf, n, "fmha %u %llu %llu %u %u %u %u %s %s %d %d %.9g %d", f->batch,
	                   (unsigned long long)c->shape.d[1], (unsigned long long)c->shape.d[2],
	                   f->hq, f->hkv, f->d, f->dv, fmha_mask_name(f->mask),
	                   num_type_name(f->in), iters, warmup, f->scale, f->kv_shared);
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

static void
print_lens(FILE *out, const char *what, const int32_t *cu, uint32_t batch)
{
	enum { SHOWN = 24 };

	fprintf(out, "  %s lengths:", what);
	for (uint32_t b = 0; b < batch && b < SHOWN; b++)
		fprintf(out, " %d", cu[b + 1] - cu[b]);
	fprintf(out, "%s (total %d)\n", batch > SHOWN ? " ..." : "", cu[batch]);
}

static void
fmha_describe(const CheckCase *c, FILE *out)
{
	const Fmha *f = c->priv;

	if (!f || !f->cu_q)
		return;
	fprintf(out, "  fmha: %s -> %s, D %u Dv %u, heads %u over %u KV heads, mask %s",
	        num_type_name(f->in), num_type_name(f->out), f->d, f->dv, f->hq, f->hkv,
	        fmha_mask_name(f->mask));
	if (f->window_left >= 0 || f->window_right >= 0)
		fprintf(out, ", window %lld/%lld", (long long)f->window_left,
		        (long long)f->window_right);
	fprintf(out, ", scale %.9g, kv-shared %d, lse %d; %s\n", f->scale, f->kv_shared, f->lse,
	        varlen_modes[f->varlen]);
	print_lens(out, "query", f->cu_q, f->batch);
	print_lens(out, "key", f->cu_k, f->batch);
}

/* ---- the family's row ----------------------------------------------------- */

/* kcheck's default list: decode (seqlen_q 1..7 over up to 300 keys),
 * lengths that are not tile multiples (sq < sk, and sq > sk, where a causal
 * mask leaves rows with no key), one tile-multiple shape, the three varlen
 * modes, and a larger square one. Varlen 0 may be left out: 1x77x300. */
static const CheckShape fmha_shapes[] = {
	{4, {3, 1, 1, 0}},
	{4, {2, 2, 37, 0}},
	{4, {4, 3, 128, 0}},
	{4, {1, 4, 255, 0}},
	{4, {3, 5, 300, 0}},
	{4, {2, 6, 64, 0}},
	{4, {5, 7, 129, 0}},
	{4, {4, 7, 300, 1}},
	{4, {1, 77, 300, 0}},
	{4, {2, 129, 255, 0}},
	{4, {2, 300, 77, 0}},
	{4, {2, 256, 512, 0}},
	{4, {5, 200, 300, 1}},
	{4, {6, 129, 257, 2}},
	{4, {2, 1000, 1000, 0}},
};

const CheckFamily check_family_fmha = {
	.name = "fmha",
	.dims = "batch,seqlen_q,seqlen_k,varlen",
	.ndims = 4,
	.nrequired = 3,
	.shapes = fmha_shapes,
	.nshapes = COUNT(fmha_shapes),
	.bench = {4, {4, 8192, 8192, 0}},
	.prepare = fmha_prepare,
	.compare = fmha_compare,
	.flops = fmha_flops,
	.peer_args = fmha_peer_args,
	.describe = fmha_describe,
};
