/* The plainest gemm there is, in float64 (see gemm_ref.h). The loops run
 * over B's rows outermost so that each row of B is decoded once per call
 * and the selected rows of A, decoded up front, are reused from cache. */
#include <math.h>
#include <stdlib.h>

#include "gemm_ref.h"

static void
decode_row(NumType t, const void *base, uint64_t row, uint32_t K, double *out)
{
	for (uint32_t k = 0; k < K; k++)
		out[k] = num_load(t, base, row * K + k);
}

static double
dot(const double *a, const double *b, uint32_t K)
{
	double acc = 0.0;
	for (uint32_t k = 0; k < K; k++)
		acc += a[k] * b[k];
	return acc;
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
		decode_row(in, B, n, K, brow);
		for (uint32_t i = 0; i < nrows; i++)
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
