/* The gemm family of the checker (check.h): C[M,N] = A[M,K]·B[N,K]ᵀ with
 * A, B bf16 or fp16 and C bf16, fp16 or f32, against tests/ref/gemm_ref;
 * and its block-scaled form (A, B e4m3 with fp32 SA, SB: docs/ABI.md,
 * "gemm") against the float64 product of the dequantized operands. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_ref.h"
#include "gemm_ref.h"
#include "indexer_ref.h"
#include "tools/check_gemm.h"
#include "tools/check_internal.h"

int
gemm_dtype(const CheckCase *c, const char *name, KrtArgKind kind, NumType *out, KrtErr *err)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, name);

	if (!p || p->kind != kind)
		return check_fail(err, KRT_EABI, "%s: family gemm needs a %s parameter named %s",
		                  c->abi->kernel, kind == KRT_ARG_TMAP ? "tmap" : "ptr", name);
	if (num_type_parse(p->dtype, out))
		return check_fail(err, KRT_EABI, "%s: %s dtype=%s: the gemm checker knows bf16, fp16, f32",
		                  c->abi->kernel, name, p->dtype);
	return 0;
}

static int
gemm_types(const CheckCase *c, NumType *in, NumType *out, KrtErr *err)
{
	NumType b;
	int rc = gemm_dtype(c, "A", KRT_ARG_TMAP, in, err);

	if (!rc)
		rc = gemm_dtype(c, "B", KRT_ARG_TMAP, &b, err);
	if (!rc)
		rc = gemm_dtype(c, "C", KRT_ARG_PTR, out, err);
	if (rc)
		return rc;
	if (*in == NUM_F32 || b != *in)
		return check_fail(err, KRT_EABI, "%s: A is %s and B %s: gemm inputs are both bf16 or both "
		                  "fp16", c->abi->kernel, num_type_name(*in), num_type_name(b));
	return 0;
}

/* The scale block of a block-scaled kernel (//@shape kblock), else 0. */
static uint32_t
gemm_kblock(const CheckCase *c)
{
	const char *v = krt_abi_shape(c->abi, "kblock");
	return v ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

static int bs_prepare(CheckCase *c, uint32_t blk, KrtErr *err);
static int mx_prepare(CheckCase *c, KrtErr *err);

/* MXFP8 kernels (--scale mx32) have UE8M0 scale-factor images SA, SB. */
static int
gemm_is_mx(const CheckCase *c)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, "SA");
	return p && strcmp(p->dtype, "ue8m0") == 0;
}

/* FP4 kernels (--dtype e2m1 with --scale mx32 or nv16): packed E2M1 A, B. */
static int
gemm_is_fp4(const CheckCase *c)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, "A");
	return p && strcmp(p->dtype, "e2m1") == 0;
}

static int fp4_prepare(CheckCase *c, KrtErr *err);

/* FP4 weights under FP8 activations (--dtype e4m3 --dtype-b e2m1 --scale
 * mx32): B is packed E2M1 the TMA expands (tmap dtype e2m1p). */
int
gemm_is_w4a8(const KrtAbi *abi)
{
	const KrtAbiParam *p = krt_abi_find(abi, "B");
	return p && strcmp(p->dtype, "e2m1p") == 0;
}

static int
gemm_prepare(CheckCase *c, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	NumType in, out;
	uint32_t blk = gemm_kblock(c);
	if (gemm_is_fp4(c))
		return fp4_prepare(c, err);
	if (gemm_is_mx(c))
		return mx_prepare(c, err);
	if (blk)
		return bs_prepare(c, blk, err);
	int rc = gemm_types(c, &in, &out, err);

	if (rc)
		return rc;
	if (!M || !N || !K || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "gemm %llux%llux%llu: M, N, K must be in 1..2^32-1",
		                  (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
	if (K % 8)
		return check_fail(err, KRT_EINVAL, "gemm K=%llu: must be a multiple of 8 (TMA row "
		                  "strides are multiples of 16 bytes)", (unsigned long long)K);
	size_t es = (size_t)num_type_size(in);
	void *a = malloc(M * K * es), *b = malloc(N * K * es);
	if (!a || !b) {
		free(a);
		free(b);
		return check_fail(err, KRT_ENOMEM, "gemm: no host memory for the inputs");
	}
	check_draw_matrix(&c->rng, c->fill, in, check_edge_range(in, out), M, K, a);
	check_draw_matrix(&c->rng, c->fill, in, check_edge_range(in, out), N, K, b);
	rc = check_add_input(c, "A", in, M * K, a, err);
	if (!rc)
		rc = check_add_input(c, "B", in, N * K, b, err);
	else
		free(b);
	/* A kernel that stores a whole tile without bounds checks writes up to
	 * tile_m - 1 rows past the end; tiles are at most 256 rows. */
	if (!rc)
		rc = check_add_output(c, "C", out, M * N, 256 * N * (size_t)num_type_size(out) + 65536,
		                      err);
	return rc;
}

/* Tolerances by output type.
 *
 * The error is normwise per row: err(m,n) = |c(m,n) - ref(m,n)| / max_n' |ref(m,n')|,
 * and the reported error is its maximum over the compared elements. Per
 * element relative error would be ill-posed where ref(m,n) is near 0 (a
 * dot product of random vectors often is); the row's largest magnitude is
 * the scale that fp32 accumulation errors are proportional to, and per row
 * (rather than whole matrix) keeps the edge pattern's differently scaled
 * rows each to their own scale.
 *
 * Why these numbers. The inputs are exact in double, and each product of
 * two bf16 (8-bit) or fp16 (11-bit significand) values is exact in fp32
 * too, so the kernel's only errors are the fp32 accumulation and the final
 * rounding to the output type. For N(0,1) inputs, |ref| ~ sqrt(K) with the
 * row maximum ~3.5 sqrt(K), and summation rounding grows like a random walk:
 * about 2^-24 · K / sqrt(2) absolute, i.e. ~ 2^-24 · sqrt(K) / 5 relative
 * to the row maximum, 1e-6 at K = 8192 (tensor cores add in blocks of 16 or
 * more, so less). An f32 output therefore sits near 1e-6, and 1e-3 leaves
 * three orders of margin for any accumulation order (split-K, different
 * block sums) while losing one K-tile of 64 terms (~sqrt(64) = 8 against
 * 3.5 sqrt(K)) shows as >= 2.5e-2 up to K = 8192. A bf16 output adds a
 * rounding of up to 2^-8 ≈ 3.9e-3 relative to |c| <= the row maximum (8
 * significand bits), so its floor is ~4e-3 and 1e-2 is the tightest round
 * number with margin; an fp16 output (2^-11 ≈ 4.9e-4) gets 5e-3. Any NaN
 * or Inf fails. */
const double gemm_tol[NUM_NTYPES] = {
	[NUM_BF16] = 1e-2,
	[NUM_FP16] = 5e-3,
	[NUM_F32] = 1e-3,
};

/* Rows compared: all of them while the reference costs at most
 * opts->full_limit multiply-adds; past that, the first, last and middle
 * rows (the edge tiles) plus random ones, about 2^31 multiply-adds'
 * worth and at least 16. */
static uint32_t *
gemm_rows(CheckCase *c, uint64_t M, uint64_t N, uint64_t K, uint32_t *nrows)
{
	uint64_t limit = c->opts->full_limit ? c->opts->full_limit : CHECK_FULL_LIMIT;
	double work = (double)M * (double)N * (double)K; /* can pass 2^64 */
	uint64_t want = M;

	if (work > (double)limit) {
		double rows = 0x1p31 / ((double)N * (double)K);
		want = rows < 16 ? 16 : rows > (double)M ? M : (uint64_t)rows;
		want = want > M ? M : want;
	}
	uint32_t *rows = malloc(sizeof *rows * want);
	if (!rows)
		return NULL;
	if (want == M) {
		for (uint64_t i = 0; i < M; i++)
			rows[i] = (uint32_t)i;
		*nrows = (uint32_t)M;
		return rows;
	}
	NumRng r;
	num_rng_seed(&r, num_mix(c->seed, 0x726f7773u, M, N)); /* "rows" */
	uint64_t n = 0;
	rows[n++] = 0;
	rows[n++] = (uint32_t)(M - 1);
	rows[n++] = (uint32_t)(M / 2);
	while (n < want) /* duplicates are harmless: want << M here */
		rows[n++] = (uint32_t)num_rng_below(&r, M);
	*nrows = (uint32_t)n;
	return rows;
}

void
gemm_compare_row(CheckCase *c, const CheckBuf *cb, uint32_t m, uint64_t N, const double *ref,
                 CheckResult *res)
{
	const void *out = (const char *)cb->host + cb->guard;
	int max_report = c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT;
	double rowmax = 0.0;

	for (uint64_t n = 0; n < N; n++)
		rowmax = fmax(rowmax, fabs(ref[n]));
	double denom = rowmax > 0.0 ? rowmax : DBL_MIN;
	for (uint64_t n = 0; n < N; n++) {
		uint64_t idx = (uint64_t)m * N + n;
		if (num_is_fill(cb->type, out, idx, CHECK_POISON_BYTE))
			continue; /* counted as unwritten */
		double got = num_load(cb->type, out, idx);
		double e = isfinite(got) ? fabs(got - ref[n]) / denom : INFINITY;
		if (check_count(res, e, res->tol, &res->max_err) && res->bad++ < (uint64_t)max_report) {
			if (res->bad == 1)
				check_report(c, "  %8s %8s %16s %16s %10s\n", "row", "col", "got", "want",
				             "rel err");
			check_report(c, "  %8u %8llu %16.8g %16.8g %10.3e\n", m, (unsigned long long)n,
			             got, ref[n], e);
		}
	}
}

static int bs_compare(CheckCase *c, CheckResult *res, uint32_t blk, KrtErr *err);
static int mx_compare(CheckCase *c, CheckResult *res, KrtErr *err);

static int fp4_compare(CheckCase *c, CheckResult *res, KrtErr *err);

/* One form's float64 reference of nb rows (`rows`) of C into ref[nb][N]. */
typedef void (*GemmRefRows)(const CheckCase *c, const void *ctx, const uint32_t *rows, uint32_t nb, double *ref);

/* Every form's compare: the rows gemm_rows picks, 64 at a time, each
 * against its reference row (gemm_compare_row). */
static int
compare_rows(CheckCase *c, CheckResult *res, GemmRefRows ref_rows, const void *ctx, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	CheckBuf *cb = check_find_buf(c, "C");
	uint32_t nrows = 0;
	enum { BLOCK = 64 };

	res->tol = gemm_tol[cb->type];
	uint32_t *rows = gemm_rows(c, M, N, K, &nrows);
	double *ref = malloc(sizeof *ref * N * BLOCK);
	if (!rows || !ref) {
		free(rows);
		free(ref);
		return check_fail(err, KRT_ENOMEM, "gemm: no host memory for the reference");
	}
	res->subset = nrows < M;
	for (uint32_t i = 0; i < nrows; i += BLOCK) {
		uint32_t nb = nrows - i < BLOCK ? nrows - i : BLOCK;
		ref_rows(c, ctx, rows + i, nb, ref);
		for (uint32_t j = 0; j < nb; j++)
			gemm_compare_row(c, cb, rows[i + j], N, ref + (size_t)j * N, res);
	}
	free(rows);
	free(ref);
	return 0;
}

static void
plain_ref_rows(const CheckCase *c, const void *ctx, const uint32_t *rows, uint32_t nb, double *ref)
{
	const CheckBuf *a = check_find_buf_const(c, "A"), *b = check_find_buf_const(c, "B");

	(void)ctx;
	gemm_ref_rows(a->type, a->host, b->host, (uint32_t)c->shape.d[1], (uint32_t)c->shape.d[2], rows, nb, ref);
}

static int
gemm_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	if (gemm_is_fp4(c))
		return fp4_compare(c, res, err);
	if (gemm_is_mx(c))
		return mx_compare(c, res, err);
	if (gemm_kblock(c))
		return bs_compare(c, res, gemm_kblock(c), err);

	return compare_rows(c, res, plain_ref_rows, NULL, err);
}

/* ---- block-scaled e4m3 ---------------------------------------------------- */

/* DeepSeek's quantization of a block of values: the scale maps the block's
 * largest magnitude to E4M3's largest, 448, and each value is rounded to
 * E4M3 at that scale. The scale is an fp32 and the values are divided by
 * that very fp32, so q·scale is what the kernel multiplies. */
float
bs_scale(const double *v, size_t n)
{
	double amax = 0.0;

	for (size_t i = 0; i < n; i++)
		amax = fmax(amax, fabs(v[i]));
	return amax > 0.0 ? (float)(amax / 448.0) : 1.0f;
}

void
bs_quantize(const double *v, size_t n, float s, uint8_t *q)
{
	for (size_t i = 0; i < n; i++)
		q[i] = decode_f64_to_e4m3(v[i] / (double)s);
}

/* N(0,1) values times 2^u per scale block, u uniform in -r..r, so that the
 * blocks' scales differ by up to 2^(2r) and a scale applied to the wrong
 * block shows; the edge pattern widens r and zeroes or saturates (±amax,
 * E4M3 448 after scaling) one value in 16. */
void
bs_draw(CheckCase *c, double *v, size_t n, int r)
{
	double mul = ldexp(1.0, (int)num_rng_below(&c->rng, (uint64_t)(2 * r + 1)) - r);

	for (size_t i = 0; i < n; i++) {
		v[i] = num_rng_normal(&c->rng) * mul;
		if (c->fill == CHECK_FILL_EDGE && num_rng_below(&c->rng, 16) == 0)
			v[i] = num_rng_below(&c->rng, 2) ? 0.0 : (num_rng_below(&c->rng, 2) ? 4 : -4) * mul;
	}
}

static int
bs_prepare(CheckCase *c, uint32_t blk, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	NumType out;
	const KrtAbiParam *pa = krt_abi_find(c->abi, "A"), *pb = krt_abi_find(c->abi, "B");
	int r = c->fill == CHECK_FILL_EDGE ? 8 : 3, rc;

	const KrtAbiParam *psb = krt_abi_find(c->abi, "SB");
	int e8 = psb && strcmp(psb->dtype, "ue8m0") == 0;
	if (!pa || !pb || strcmp(pa->dtype, "e4m3") || strcmp(pb->dtype, "e4m3"))
		return check_fail(err, KRT_EABI, "%s: block-scaled gemm: A and B must be e4m3 tensor maps",
		                  c->abi->kernel);
	if ((rc = gemm_dtype(c, "C", KRT_ARG_PTR, &out, err)) != 0)
		return rc;
	if (!M || !N || !K || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "gemm %llux%llux%llu: M, N, K must be in 1..2^32-1",
		                  (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
	if (K % blk)
		return check_fail(err, KRT_EINVAL, "gemm K=%llu: must be a multiple of %u (the kernel's "
		                  "scale block, //@shape kblock=%u)", (unsigned long long)K, blk, blk);
	uint64_t nkb = K / blk, nnb = (N + blk - 1) / blk;
	uint8_t *a = malloc(M * K), *b = malloc(N * K);
	float *sa = malloc(sizeof *sa * nkb * M), *sb = malloc(sizeof *sb * nnb * nkb);
	double *v = malloc(sizeof *v * blk * blk);
	if (!a || !b || !sa || !sb || !v) {
		free(a), free(b), free(sa), free(sb), free(v);
		return check_fail(err, KRT_ENOMEM, "gemm: no host memory for the inputs");
	}
	for (uint64_t m = 0; m < M; m++)
		for (uint64_t kb = 0; kb < nkb; kb++) {
			bs_draw(c, v, blk, r);
			sa[kb * M + m] = bs_scale(v, blk);
			bs_quantize(v, blk, sa[kb * M + m], a + m * K + kb * blk);
		}
	for (uint64_t nb = 0; nb < nnb; nb++) {
		uint64_t rows = N - nb * blk < blk ? N - nb * blk : blk;
		for (uint64_t kb = 0; kb < nkb; kb++) {
			bs_draw(c, v, rows * blk, r);
			/* one scale for the rows x blk block, row by row into B; a
			 * UE8M0 one is the power of two at or above amax / 448 */
			float s = bs_scale(v, rows * blk);
			if (e8) {
				int e = (int)ceil(log2((double)s)) + 127;
				e = e < 1 ? 1 : e > 254 ? 254 : e;
				((uint8_t *)sb)[nb * nkb + kb] = (uint8_t)e;
				s = ldexpf(1.0f, e - 127);
			} else {
				sb[nb * nkb + kb] = s;
			}
			for (uint64_t i = 0; i < rows; i++)
				bs_quantize(v + i * blk, blk, s, b + (nb * blk + i) * K + kb * blk);
		}
	}
	free(v);
	rc = check_add_raw_input(c, "A", "e4m3", 1, M * K, a, err);
	if (!rc)
		rc = check_add_raw_input(c, "B", "e4m3", 1, N * K, b, err);
	else
		free(b);
	if (!rc)
		rc = check_add_input(c, "SA", NUM_F32, nkb * M, sa, err);
	else
		free(sa);
	if (!rc)
		rc = e8 ? check_add_raw_input(c, "SB", "ue8m0", 1, nnb * nkb, sb, err)
		        : check_add_input(c, "SB", NUM_F32, nnb * nkb, sb, err);
	else
		free(sb);
	if (!rc)
		rc = check_add_output(c, "C", out, M * N, 256 * N * (size_t)num_type_size(out) + 65536, err);
	return rc;
}

/* Tolerances as for gemm_tol: the E4M3 products are exact in fp32 (4-bit
 * significands), each K block's sum is scaled once, so the kernel's errors
 * are fp32 accumulation, the rounding of SA·SB to fp32 (2^-24) and the
 * output rounding. */
/* bs: the K block and SB as floats (UE8M0 SB: its powers of two, exact:
 * 2^-127..2^127) */
typedef struct BsRef {
	uint32_t blk;
	const void *sb;
} BsRef;

static void
bs_ref_rows(const CheckCase *c, const void *ctx, const uint32_t *rows, uint32_t nb, double *ref)
{
	const BsRef *x = ctx;
	const CheckBuf *a = check_find_buf_const(c, "A"), *b = check_find_buf_const(c, "B");
	const CheckBuf *sa = check_find_buf_const(c, "SA");

	gemm_bs_ref_rows(a->host, b->host, sa->host, x->sb, (uint32_t)c->shape.d[0], (uint32_t)c->shape.d[1],
	                 (uint32_t)c->shape.d[2], x->blk, rows, nb, ref);
}

static int
bs_compare(CheckCase *c, CheckResult *res, uint32_t blk, KrtErr *err)
{
	const CheckBuf *sb = check_find_buf(c, "SB");
	float *sbf = sb->is_num ? NULL : malloc(sizeof *sbf * (sb->count ? sb->count : 1));
	int rc;

	if (!sb->is_num && !sbf)
		return check_fail(err, KRT_ENOMEM, "gemm: no host memory for the reference");
	for (uint64_t i = 0; sbf && i < sb->count; i++)
		sbf[i] = ldexpf(1.0f, (int)((const uint8_t *)sb->host)[i] - 127);
	BsRef x = {blk, sbf ? (const void *)sbf : sb->host};
	rc = compare_rows(c, res, bs_ref_rows, &x, err);
	free(sbf);
	return rc;
}

/* ---- MXFP8: UE8M0 per 32 of K ----------------------------------------------- */

/* OCP MX's quantization of a 32-value block: the factor is the power of
 * two that brings the block's largest magnitude to at most 448. */
static uint8_t
mx_factor(const double *v, size_t n)
{
	double amax = 0.0;

	for (size_t i = 0; i < n; i++)
		amax = fmax(amax, fabs(v[i]));
	if (amax == 0.0)
		return 127;
	int e = (int)ceil(log2(amax / 448.0)) + 127;
	return (uint8_t)(e < 1 ? 1 : e > 254 ? 254 : e);
}

/* rows x K of E4M3 into q, their factors into the images sf (rows past
 * `rows` in the last 128-row block keep factor 127, 2^0). */
void
mx_draw(CheckCase *c, uint64_t rows, uint64_t K, int r, uint8_t *q, uint8_t *sf, size_t sfbytes)
{
	double v[32];

	memset(sf, 127, sfbytes);
	for (uint64_t m = 0; m < rows; m++)
		for (uint64_t k = 0; k < K; k += 32) {
			bs_draw(c, v, 32, r);
			uint8_t e = mx_factor(v, 32);
			sf[gemm_mx_sf_index((uint32_t)m, (uint32_t)k, (uint32_t)K)] = e;
			for (int i = 0; i < 32; i++)
				q[m * K + k + (uint64_t)i] = decode_f64_to_e4m3(ldexp(v[i], 127 - e));
		}
}

static int
mx_prepare(CheckCase *c, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	NumType out;
	int r = c->fill == CHECK_FILL_EDGE ? 8 : 3, rc;

	if ((rc = gemm_dtype(c, "C", KRT_ARG_PTR, &out, err)) != 0)
		return rc;
	if (!M || !N || !K || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "gemm %llux%llux%llu: M, N, K must be in 1..2^32-1",
		                  (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
	if (K % 128)
		return check_fail(err, KRT_EINVAL, "gemm K=%llu: must be a multiple of 128 (the kernel's "
		                  "scale-factor images, //@shape kblock=128)", (unsigned long long)K);
	size_t sfa = (M + 127) / 128 * (K / 128) * 512, sfb = (N + 127) / 128 * (K / 128) * 512;
	int w4 = gemm_is_w4a8(c->abi); /* B: packed E2M1, K/2 bytes a row */
	uint8_t *a = malloc(M * K), *b = malloc(N * K >> w4), *sa = malloc(sfa), *sb = malloc(sfb);
	if (!a || !b || !sa || !sb) {
		free(a), free(b), free(sa), free(sb);
		return check_fail(err, KRT_ENOMEM, "gemm: no host memory for the inputs");
	}
	mx_draw(c, M, K, r, a, sa, sfa);
	if (w4)
		fp4_draw(c, N, K, r, 1, 32, b, sb, sfb);
	else
		mx_draw(c, N, K, r, b, sb, sfb);
	rc = check_add_raw_input(c, "A", "e4m3", 1, M * K, a, err);
	if (!rc)
		rc = check_add_raw_input(c, "B", w4 ? "e2m1p" : "e4m3", 1, N * K >> w4, b, err);
	else
		free(b);
	if (!rc)
		rc = check_add_raw_input(c, "SA", "ue8m0", 1, sfa, sa, err);
	else
		free(sa);
	if (!rc)
		rc = check_add_raw_input(c, "SB", "ue8m0", 1, sfb, sb, err);
	else
		free(sb);
	if (!rc)
		rc = check_add_output(c, "C", out, M * N, 256 * N * (size_t)num_type_size(out) + 65536, err);
	return rc;
}

static void
mx_ref_rows(const CheckCase *c, const void *ctx, const uint32_t *rows, uint32_t nb, double *ref)
{
	const CheckBuf *a = check_find_buf_const(c, "A"), *b = check_find_buf_const(c, "B");
	const CheckBuf *sa = check_find_buf_const(c, "SA"), *sb = check_find_buf_const(c, "SB");
	uint32_t N = (uint32_t)c->shape.d[1], K = (uint32_t)c->shape.d[2];

	(void)ctx;
	if (gemm_is_w4a8(c->abi))
		gemm_w4a8_ref_rows(a->host, b->host, sa->host, sb->host, N, K, rows, nb, ref);
	else
		gemm_mx_ref_rows(a->host, b->host, sa->host, sb->host, N, K, rows, nb, ref);
}

static int
mx_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	return compare_rows(c, res, mx_ref_rows, NULL, err);
}

/* ---- FP4: MXFP4 (UE8M0 per 32) and NVFP4 (UE4M3 per 16, alpha) ------------ */

/* The scale type and vector of an FP4 kernel's SA */
int
fp4_format(const CheckCase *c, int *ue8m0, uint32_t *vec)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, "SA");
	*ue8m0 = p && strcmp(p->dtype, "ue8m0") == 0;
	*vec = *ue8m0 ? 32 : 16;
	return p && (*ue8m0 || strcmp(p->dtype, "ue4m3") == 0) ? 0 : -1;
}

/* A block's factor: the UE8M0 power of two at or above amax/6 (E2M1's
 * largest), or the UE4M3 nearest amax/6 in 2^-9..448 (the values then
 * round to the nearest E2M1, 6 at most); 1 for a zero block. */
static uint8_t
fp4_factor(const double *v, uint32_t n, int ue8m0)
{
	double amax = 0.0;

	for (uint32_t i = 0; i < n; i++)
		amax = fmax(amax, fabs(v[i]));
	if (amax == 0.0)
		return ue8m0 ? 127 : 0x38;
	if (ue8m0) {
		int e = (int)ceil(log2(amax / 6.0)) + 127;
		return (uint8_t)(e < 1 ? 1 : e > 254 ? 254 : e);
	}
	uint8_t code = (uint8_t)(decode_f64_to_e4m3(fmin(fmax(amax / 6.0, 0x1p-9), 448.0)) & 0x7f);
	return code ? code : 1;
}

void
fp4_draw(CheckCase *c, uint64_t rows, uint64_t K, int r, int ue8m0, uint32_t vec, uint8_t *q, uint8_t *sf,
         size_t sfbytes)
{
	double v[32];

	memset(sf, ue8m0 ? 127 : 0x38, sfbytes);
	memset(q, 0, rows * K / 2);
	for (uint64_t m = 0; m < rows; m++)
		for (uint64_t k = 0; k < K; k += vec) {
			bs_draw(c, v, vec, r);
			uint8_t f = fp4_factor(v, vec, ue8m0);
			double s = gemm_sf_value(f, ue8m0);
			sf[gemm_sf_index((uint32_t)m, (uint32_t)k, (uint32_t)K, vec)] = f;
			for (uint32_t i = 0; i < vec; i++) {
				uint64_t at = m * K + k + i;
				q[at / 2] |= (uint8_t)(indexer_e2m1_nearest(v[i] / s) << (4 * (at % 2)));
			}
		}
}

/* NVFP4's alpha per expert: 1/32..2 in steps of 1/32, exact in f32 */
void
fp4_alpha(CheckCase *c, float *alpha, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		alpha[i] = (float)(1 + num_rng_below(&c->rng, 64)) / 32.0f;
}

static int
fp4_prepare(CheckCase *c, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	uint32_t blk = gemm_kblock(c), vec;
	NumType out;
	int r = c->fill == CHECK_FILL_EDGE ? 8 : 3, ue8m0, rc;

	if ((rc = gemm_dtype(c, "C", KRT_ARG_PTR, &out, err)) != 0)
		return rc;
	if (fp4_format(c, &ue8m0, &vec))
		return check_fail(err, KRT_EABI, "%s: FP4 gemm: SA must be ue8m0 (MXFP4) or ue4m3 (NVFP4) images",
		                  c->abi->kernel);
	if (!M || !N || !K || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "gemm %llux%llux%llu: M, N, K must be in 1..2^32-1",
		                  (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
	if (!blk || K % blk)
		return check_fail(err, KRT_EINVAL, "gemm K=%llu: must be a multiple of %u (the kernel's "
		                  "stage of packed FP4, //@shape kblock)", (unsigned long long)K, blk);
	size_t span = 4 * (size_t)vec;
	size_t sfa = (M + 127) / 128 * (K / span) * 512, sfb = (N + 127) / 128 * (K / span) * 512;
	uint8_t *a = malloc(M * K / 2), *b = malloc(N * K / 2), *sa = malloc(sfa), *sb = malloc(sfb);
	float *al = malloc(sizeof *al);
	if (!a || !b || !sa || !sb || !al) {
		free(a), free(b), free(sa), free(sb), free(al);
		return check_fail(err, KRT_ENOMEM, "gemm: no host memory for the inputs");
	}
	fp4_draw(c, M, K, r, ue8m0, vec, a, sa, sfa);
	fp4_draw(c, N, K, r, ue8m0, vec, b, sb, sfb);
	fp4_alpha(c, al, 1);
	rc = check_set_var(c, "K/2", K / 2, err);
	if (!rc)
		rc = check_add_raw_input(c, "A", "e2m1", 1, M * K / 2, a, err);
	else
		free(a);
	if (!rc)
		rc = check_add_raw_input(c, "B", "e2m1", 1, N * K / 2, b, err);
	else
		free(b);
	if (!rc)
		rc = check_add_raw_input(c, "SA", ue8m0 ? "ue8m0" : "ue4m3", 1, sfa, sa, err);
	else
		free(sa);
	if (!rc)
		rc = check_add_raw_input(c, "SB", ue8m0 ? "ue8m0" : "ue4m3", 1, sfb, sb, err);
	else
		free(sb);
	if (!rc && krt_abi_find(c->abi, "alpha"))
		rc = check_add_input(c, "alpha", NUM_F32, 1, al, err);
	else
		free(al);
	if (!rc)
		rc = check_add_output(c, "C", out, M * N, 256 * N * (size_t)num_type_size(out) + 65536, err);
	return rc;
}

static void
fp4_ref_rows(const CheckCase *c, const void *ctx, const uint32_t *rows, uint32_t nb, double *ref)
{
	const CheckBuf *a = check_find_buf_const(c, "A"), *b = check_find_buf_const(c, "B");
	const CheckBuf *sa = check_find_buf_const(c, "SA"), *sb = check_find_buf_const(c, "SB");
	const CheckBuf *al = check_find_buf_const(c, "alpha");
	uint32_t vec;
	int ue8m0;

	(void)ctx;
	fp4_format(c, &ue8m0, &vec);
	gemm_fp4_ref_rows(a->host, b->host, sa->host, sb->host, ue8m0, vec,
	                  al ? (double)((const float *)al->host)[0] : 1.0, (uint32_t)c->shape.d[1],
	                  (uint32_t)c->shape.d[2], rows, nb, ref);
}

static int
fp4_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	return compare_rows(c, res, fp4_ref_rows, NULL, err);
}

static double
gemm_flops(const CheckCase *c)
{
	const uint64_t *d = c->shape.d;
	return 2.0 * (double)d[0] * (double)d[1] * (double)d[2];
}

static int
gemm_peer_args(const CheckCase *c, int iters, int warmup, char *buf, size_t n)
{
	const CheckBuf *a = check_find_buf_const(c, "A");
	const CheckBuf *out = check_find_buf_const(c, "C");
	/* block-scaled: A is raw e4m3 (peers.py times torch._scaled_mm) */
	int len = snprintf(buf, n, "gemm %llu %llu %llu %s %d %d %s",
	                   (unsigned long long)c->shape.d[0], (unsigned long long)c->shape.d[1],
	                   (unsigned long long)c->shape.d[2], a->is_num ? num_type_name(a->type) : a->dtype,
	                   iters, warmup, num_type_name(out->type));
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Sizes that are not multiples of any tile, from one element up. */
static const CheckShape gemm_shapes[] = {
	{3, {1, 1, 8}},
	{3, {7, 13, 24}},
	{3, {127, 129, 72}},
	{3, {257, 383, 520}},
	{3, {300, 256, 1024}},
	{3, {512, 512, 512}},
	{3, {1000, 1000, 1000}},
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Block-scaled kernels take K in whole scale blocks. */
static void
gemm_fit_default(const KrtAbi *abi, CheckShape *s)
{
	const char *v = krt_abi_shape(abi, "kblock");
	uint64_t b = v ? strtoull(v, NULL, 10) : 0;
	if (b)
		s->d[2] = (s->d[2] + b - 1) / b * b;
}

const CheckFamily check_family_gemm = {
	.name = "gemm",
	.dims = "M,N,K",
	.ndims = 3,
	.shapes = gemm_shapes,
	.nshapes = COUNT(gemm_shapes),
	.bench = {3, {8192, 8192, 8192}},
	.prepare = gemm_prepare,
	.compare = gemm_compare,
	.flops = gemm_flops,
	.peer_args = gemm_peer_args,
	.fit_default = gemm_fit_default,
};
