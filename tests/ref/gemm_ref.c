/* The plainest gemm there is, in float64 (see gemm_ref.h). The loops run
 * over B's rows outermost so that each row of B is decoded once per call
 * and the selected rows of A, decoded up front, are reused from cache. */
#include <math.h>
#include <stdlib.h>

#include "decode_ref.h"
#include "gemm_ref.h"
#include "indexer_ref.h"

static void
decode_row(NumType t, const void *base, uint64_t row, uint32_t K, double *out)
{
	for (uint32_t k = 0; k < K; k++)
		out[k] = num_load(t, base, row * K + k);
}

/* Four partial sums: the loop runs at the adder's throughput rather than
 * its latency (3-4x here), and float64 keeps any order exact enough. */
static double
dot(const double *a, const double *b, uint32_t K)
{
	double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
	uint32_t k = 0;

	for (; k + 4 <= K; k += 4) {
		s0 += a[k] * b[k];
		s1 += a[k + 1] * b[k + 1];
		s2 += a[k + 2] * b[k + 2];
		s3 += a[k + 3] * b[k + 3];
	}
	for (; k < K; k++)
		s0 += a[k] * b[k];
	return (s0 + s1) + (s2 + s3);
}

/* Four rows of A (lda = K) against one row of B: each b[k] loaded once
 * for four independent sums. out[i * ldo] gets row i's result. */
static void
dot4(const double *a, uint32_t K, const double *b, double *out, uint32_t ldo)
{
	const double *a0 = a, *a1 = a + K, *a2 = a + 2 * (size_t)K, *a3 = a + 3 * (size_t)K;
	double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;

	for (uint32_t k = 0; k < K; k++) {
		double bk = b[k];
		s0 += a0[k] * bk;
		s1 += a1[k] * bk;
		s2 += a2[k] * bk;
		s3 += a3[k] * bk;
	}
	out[0] = s0;
	out[ldo] = s1;
	out[2 * (size_t)ldo] = s2;
	out[3 * (size_t)ldo] = s3;
}

/* At most this many rows of A are decoded at once: 64 rows of K = 65536
 * doubles is 32 MiB, and row blocks cost only one more decode of B each. */
enum { REF_ROW_BLOCK = 64 };

static void
ref_block(NumType in, const void *A, const void *B, uint32_t N, uint32_t K,
          const uint32_t *rows, uint32_t nrows, double *out, double *arows, double *brow)
{
	for (uint32_t i = 0; i < nrows; i++)
		decode_row(in, A, rows[i], K, arows + (size_t)i * K);
	for (uint32_t n = 0; n < N; n++) {
		uint32_t i = 0;
		decode_row(in, B, n, K, brow);
		for (; i + 4 <= nrows; i += 4)
			dot4(arows + (size_t)i * K, K, brow, out + (size_t)i * N + n, N);
		for (; i < nrows; i++)
			out[(size_t)i * N + n] = dot(arows + (size_t)i * K, brow, K);
	}
}

void
gemm_ref_rows(NumType in, const void *A, const void *B, uint32_t N, uint32_t K,
              const uint32_t *rows, uint32_t nrows, double *out)
{
	size_t kk = K ? K : 1;
	double *arows = malloc(sizeof(double) * kk * REF_ROW_BLOCK);
	double *brow = malloc(sizeof(double) * kk);

	if (!arows || !brow) {
		/* Out of memory for a few rows of K doubles: leave NaN so that
		 * the comparison fails loudly instead of passing on garbage. */
		for (uint64_t i = 0; i < (uint64_t)nrows * N; i++)
			out[i] = NAN;
	} else {
		for (uint32_t i = 0; i < nrows; i += REF_ROW_BLOCK) {
			uint32_t nb = nrows - i < REF_ROW_BLOCK ? nrows - i : REF_ROW_BLOCK;
			ref_block(in, A, B, N, K, rows + i, nb, out + (size_t)i * N, arows, brow);
		}
	}
	free(arows);
	free(brow);
}

void
gemm_ref(NumType in, const void *A, const void *B, uint32_t M, uint32_t N,
         uint32_t K, double *C)
{
	uint32_t rows[REF_ROW_BLOCK];

	for (uint32_t m = 0; m < M; m += REF_ROW_BLOCK) {
		uint32_t nb = M - m < REF_ROW_BLOCK ? M - m : REF_ROW_BLOCK;
		for (uint32_t i = 0; i < nb; i++)
			rows[i] = m + i;
		gemm_ref_rows(in, A, B, N, K, rows, nb, C + (size_t)m * N);
	}
}

/* How one operand's rows are stored: E4M3 values or packed E2M1 codes,
 * and their scale factors. The columns say which fields each form reads:
 *   E4M3_BLOCK  X, SF32, blk, M   fp32 per blk of K, [cdiv(K,blk)][M] (A)
 *               or per blk x blk, [cdiv(rows,blk)][cdiv(K,blk)] (B: M = 0)
 *   E4M3_MX     X, S              UE8M0 per 32 of K in 512-byte images
 *   FP4_PACKED  X, S, ue8m0, vec  E2M1 pairs, UE8M0 or UE4M3 per vec, images
 *   W4A8        X, S              E2M1 pairs, UE8M0 per 32, [rows][K/32] */
typedef enum { E4M3_BLOCK, E4M3_MX, FP4_PACKED, W4A8 } RowForm;

typedef struct RowSrc {
	RowForm form;
	const uint8_t *X, *S;
	const float *SF32;
	uint32_t blk, M, vec;
	int ue8m0;
} RowSrc;

/* Element (r, k) of each form, dequantized exactly (UE8M0 0xFF is NaN) */
static uint8_t
fp4_code(const RowSrc *s, uint32_t r, uint32_t k, uint32_t K)
{
	return (uint8_t)(s->X[(size_t)r * (K / 2) + k / 2] >> (4 * (k % 2)) & 15);
}

static double
e4m3_block(const RowSrc *s, uint32_t r, uint32_t k, uint32_t K)
{
	uint32_t nkb = (K + s->blk - 1) / s->blk;
	float f = s->M ? s->SF32[(size_t)(k / s->blk) * s->M + r] : s->SF32[(size_t)(r / s->blk) * nkb + k / s->blk];

	return decode_e4m3_to_f64(s->X[(size_t)r * K + k]) * (double)f;
}

static double
e4m3_mx(const RowSrc *s, uint32_t r, uint32_t k, uint32_t K)
{
	return decode_e4m3_to_f64(s->X[(size_t)r * K + k]) * gemm_sf_value(s->S[gemm_mx_sf_index(r, k, K)], 1);
}

static double
fp4_packed(const RowSrc *s, uint32_t r, uint32_t k, uint32_t K)
{
	return indexer_e2m1_to_f64(fp4_code(s, r, k, K)) * gemm_sf_value(s->S[gemm_sf_index(r, k, K, s->vec)], s->ue8m0);
}

static double
w4a8(const RowSrc *s, uint32_t r, uint32_t k, uint32_t K)
{
	return indexer_e2m1_to_f64(fp4_code(s, r, k, K)) * gemm_sf_value(s->S[(size_t)r * (K / 32) + k / 32], 1);
}

static double (*const form_value[])(const RowSrc *, uint32_t, uint32_t, uint32_t) = {
	[E4M3_BLOCK] = e4m3_block, [E4M3_MX] = e4m3_mx, [FP4_PACKED] = fp4_packed, [W4A8] = w4a8,
};

/* Row r of an operand, dequantized: K values into v */
static void
src_row(const RowSrc *s, uint32_t r, uint32_t K, double *v)
{
	for (uint32_t k = 0; k < K; k++)
		v[k] = form_value[s->form](s, r, k, K);
}

/* out[i*N + n] = alpha · Σ_k a[rows[i]][k]·b[n][k] over the dequantized
 * operands (NaN everywhere without memory for the rows) */
static void
scaled_ref_rows(const RowSrc *a, const RowSrc *b, double alpha, uint32_t N, uint32_t K, const uint32_t *rows,
                uint32_t nrows, double *out)
{
	size_t kk = K ? K : 1;
	double *arows = malloc(sizeof(double) * kk * (nrows ? nrows : 1));
	double *brow = malloc(sizeof(double) * kk);

	if (!arows || !brow) {
		for (uint64_t i = 0; i < (uint64_t)nrows * N; i++)
			out[i] = NAN;
	} else {
		for (uint32_t i = 0; i < nrows; i++)
			src_row(a, rows[i], K, arows + (size_t)i * K);
		for (uint32_t n = 0; n < N; n++) {
			src_row(b, n, K, brow);
			for (uint32_t i = 0; i < nrows; i++)
				out[(size_t)i * N + n] = alpha * dot(arows + (size_t)i * K, brow, K);
		}
	}
	free(arows);
	free(brow);
}

void
gemm_bs_ref_rows(const uint8_t *A, const uint8_t *B, const float *SA, const float *SB,
                 uint32_t M, uint32_t N, uint32_t K, uint32_t blk, const uint32_t *rows,
                 uint32_t nrows, double *out)
{
	RowSrc a = {.form = E4M3_BLOCK, .X = A, .SF32 = SA, .blk = blk, .M = M};
	RowSrc b = {.form = E4M3_BLOCK, .X = B, .SF32 = SB, .blk = blk};

	scaled_ref_rows(&a, &b, 1.0, N, K, rows, nrows, out);
}

void
gemm_w4a8_bs_ref_rows(const uint8_t *A, const float *SA, const uint8_t *B, const uint8_t *SB,
                      uint32_t M, uint32_t N, uint32_t K, const uint32_t *rows, uint32_t nrows,
                      double *out)
{
	RowSrc a = {.form = E4M3_BLOCK, .X = A, .SF32 = SA, .blk = 128, .M = M};
	RowSrc b = {.form = W4A8, .X = B, .S = SB};

	scaled_ref_rows(&a, &b, 1.0, N, K, rows, nrows, out);
}

void
gemm_w4a8_quantize(const double *W, uint32_t rows, uint32_t K, uint8_t *B, uint8_t *SB)
{
	for (uint32_t r = 0; r < rows; r++)
		for (uint32_t g = 0; g < K / 32; g++) {
			const double *w = W + (size_t)r * K + 32 * g;
			double amax = 0;
			int e = 127;
			for (int i = 0; i < 32; i++)
				amax = fabs(w[i]) > amax ? fabs(w[i]) : amax;
			if (amax > 0) {
				int x;
				double m = frexp(amax / 6, &x); /* amax/6 = m·2^x, m in [0.5, 1) */
				e = 127 + (m == 0.5 ? x - 1 : x);
				e = e < 0 ? 0 : e > 254 ? 254 : e;
			}
			SB[(size_t)r * (K / 32) + g] = (uint8_t)e;
			for (int i = 0; i < 32; i += 2) {
				uint8_t lo = indexer_e2m1_nearest(ldexp(w[i], 127 - e));
				uint8_t hi = indexer_e2m1_nearest(ldexp(w[i + 1], 127 - e));
				B[(size_t)r * (K / 2) + 16 * g + i / 2] = (uint8_t)(lo | hi << 4);
			}
		}
}

size_t
gemm_mx_sf_index(uint32_t r, uint32_t k, uint32_t K)
{
	size_t kb = (K + 127) / 128;

	return ((size_t)(r / 128) * kb + k / 128) * 512 + 16 * (r % 32) + 4 * ((r % 128) / 32) + (k % 128) / 32;
}

size_t
gemm_sf_index(uint32_t r, uint32_t k, uint32_t K, uint32_t vec)
{
	size_t span = 4 * (size_t)vec, kb = (K + span - 1) / span;

	return ((size_t)(r / 128) * kb + k / span) * 512 + 16 * (r % 32) + 4 * ((r % 128) / 32) + (k % span) / vec;
}

double
gemm_sf_value(uint8_t code, int ue8m0)
{
	if (ue8m0)
		return code == 0xff ? NAN : ldexp(1.0, (int)code - 127);
	return code >= 0x7f ? NAN : decode_e4m3_to_f64(code);
}

void
gemm_mx_ref_rows(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB,
                 uint32_t N, uint32_t K, const uint32_t *rows, uint32_t nrows, double *out)
{
	RowSrc a = {.form = E4M3_MX, .X = A, .S = SA}, b = {.form = E4M3_MX, .X = B, .S = SB};

	scaled_ref_rows(&a, &b, 1.0, N, K, rows, nrows, out);
}

void
gemm_fp4_ref_rows(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB,
                  int ue8m0, uint32_t vec, double alpha, uint32_t N, uint32_t K,
                  const uint32_t *rows, uint32_t nrows, double *out)
{
	RowSrc a = {.form = FP4_PACKED, .X = A, .S = SA, .vec = vec, .ue8m0 = ue8m0};
	RowSrc b = {.form = FP4_PACKED, .X = B, .S = SB, .vec = vec, .ue8m0 = ue8m0};

	scaled_ref_rows(&a, &b, alpha, N, K, rows, nrows, out);
}

void
gemm_w4a8_ref_rows(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB, uint32_t N,
                   uint32_t K, const uint32_t *rows, uint32_t nrows, double *out)
{
	RowSrc a = {.form = E4M3_MX, .X = A, .S = SA};
	RowSrc b = {.form = FP4_PACKED, .X = B, .S = SB, .vec = 32, .ue8m0 = 1};

	scaled_ref_rows(&a, &b, 1.0, N, K, rows, nrows, out);
}

int
gemm_moe_owner(int masked, const int32_t *lay, uint32_t E, uint32_t M, uint32_t r)
{
	if (masked) {
		uint32_t e = M ? r / M : E;
		return e < E && (int64_t)(r % M) < (int64_t)lay[e] ? (int)e : -1;
	}
	for (uint32_t e = 0; e < E; e++)
		if ((int64_t)r >= lay[e] && (int64_t)r < lay[e + 1])
			return (int)e;
	return -1;
}
