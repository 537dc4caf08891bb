/* The lightning indexer in float64 (indexer_ref.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_ref.h"
#include "indexer_ref.h"

size_t
indexer_ref_page_bytes(int ps, int key_bytes, int scale_bytes)
{
	return (size_t)ps * (size_t)(key_bytes + scale_bytes);
}

uint8_t *
indexer_ref_key(uint8_t *cache, int ps, int key_bytes, int scale_bytes, uint32_t page, int off)
{
	return cache + page * indexer_ref_page_bytes(ps, key_bytes, scale_bytes) + (size_t)off * (size_t)key_bytes;
}

uint8_t *
indexer_ref_scale(uint8_t *cache, int ps, int key_bytes, int scale_bytes, uint32_t page, int off)
{
	return cache + page * indexer_ref_page_bytes(ps, key_bytes, scale_bytes) + (size_t)ps * (size_t)key_bytes +
	       (size_t)off * (size_t)scale_bytes;
}

void
indexer_fp8_quantize(const double *v, uint8_t *key, float *scale)
{
	double amax = 0;

	for (int i = 0; i < INDEXER_D; i++)
		amax = fmax(amax, fabs(v[i]));
	*scale = amax > 0 ? (float)(amax / 448) : 1.0f;
	for (int i = 0; i < INDEXER_D; i++)
		key[i] = decode_f64_to_e4m3(v[i] / (double)*scale);
}

double
indexer_e2m1_to_f64(uint8_t c)
{
	int e = (c >> 1) & 3, m = c & 1;
	double v = e ? (1 + 0.5 * m) * ldexp(1, e - 1) : 0.5 * m;

	return c & 8 ? -v : v;
}

void
indexer_fp8_dequantize(const uint8_t *key, const uint8_t *scale, double *k)
{
	float s;

	memcpy(&s, scale, 4);
	for (int i = 0; i < INDEXER_D; i++)
		k[i] = decode_e4m3_to_f64(key[i]) * (double)s;
}

void
indexer_fp4_dequantize(const uint8_t *key, const uint8_t *scale, double *k)
{
	for (int i = 0; i < INDEXER_D; i++) {
		uint8_t c = (uint8_t)(key[i / 2] >> (4 * (i % 2)) & 15);
		k[i] = indexer_e2m1_to_f64(c) * ldexp(1, (int)scale[i / INDEXER_FP4_GROUP] - 127);
	}
}

void
indexer_nvfp4_dequantize(const uint8_t *key, const uint8_t *scale, float global, double *k)
{
	for (int i = 0; i < INDEXER_D; i++) {
		uint8_t c = (uint8_t)(key[i / 2] >> (4 * (i % 2)) & 15);
		k[i] = indexer_e2m1_to_f64(c) * decode_e4m3_to_f64(scale[i / INDEXER_NVFP4_GROUP] & 0x7f) * (double)global;
	}
}

uint8_t
indexer_e2m1_nearest(double x)
{
	uint8_t best = 0;
	double a = fabs(x), d = INFINITY;

	for (uint8_t c = 0; c < 8; c++) {
		double e = fabs(indexer_e2m1_to_f64(c) - a);
		if (e < d || (e == d && (c & 1) == 0 && (best & 1) == 1)) {
			d = e;
			best = c;
		}
	}
	return (uint8_t)(best | (x < 0 ? 8 : 0));
}

void
indexer_nvfp4_quantize(const double *v, float global, uint8_t *key, uint8_t *scale)
{
	memset(key, 0, INDEXER_FP4_KEY);
	for (int g = 0; g < INDEXER_D / INDEXER_NVFP4_GROUP; g++) {
		double amax = 0, s;
		for (int i = 0; i < INDEXER_NVFP4_GROUP; i++)
			amax = fmax(amax, fabs(v[g * INDEXER_NVFP4_GROUP + i]));
		s = fmin(amax / (6 * (double)global), 448);
		scale[g] = (uint8_t)(decode_f64_to_e4m3(s) & 0x7f);
		s = decode_e4m3_to_f64(scale[g]) * (double)global;
		for (int i = 0; i < INDEXER_NVFP4_GROUP && s > 0; i++) {
			int at = g * INDEXER_NVFP4_GROUP + i;
			key[at / 2] |= (uint8_t)(indexer_e2m1_nearest(v[at] / s) << (4 * (at % 2)));
		}
	}
}

double
indexer_ref_logit(const uint8_t *q, const float *w, int heads, const double *k, double *bound)
{
	double s = 0, b = 0;

	for (int h = 0; h < heads; h++) {
		double dot = 0, mag = 0;
		for (int i = 0; i < INDEXER_D; i++) {
			double x = decode_e4m3_to_f64(q[h * INDEXER_D + i]) * k[i];
			dot += x;
			mag += fabs(x);
		}
		s += (double)w[h] * fmax(0.0, dot);
		b += fabs((double)w[h]) * mag;
	}
	*bound = b;
	return s;
}

static int
cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

int
indexer_topk_check(const double *s, size_t n, double tol, const int32_t *got, int k, char *why, size_t whylen)
{
	size_t m = n < (size_t)k ? n : (size_t)k;
	unsigned char *seen = calloc(n + 1, 1);
	double *sorted = NULL, tau = -INFINITY;
	int rc = -1;

	if (!seen) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < (size_t)k; i++) {
		int32_t g = got[i];
		if (i >= m) {
			if (g != -1) {
				snprintf(why, whylen, "entry %zu is %d: entries from %zu (min(keys %zu, top-k %d)) must be -1", i,
				         g, m, n, k);
				goto out;
			}
			continue;
		}
		if (g < 0 || (size_t)g >= n) {
			snprintf(why, whylen, "entry %zu is key %d: not one of the row's %zu visible keys", i, g, n);
			goto out;
		}
		if (seen[g]) {
			snprintf(why, whylen, "entry %zu: key %d listed twice", i, g);
			goto out;
		}
		seen[g] = 1;
	}
	if (n > (size_t)k) {
		if (!(sorted = malloc(sizeof *sorted * n))) {
			snprintf(why, whylen, "out of memory");
			goto out;
		}
		memcpy(sorted, s, sizeof *sorted * n);
		qsort(sorted, n, sizeof *sorted, cmp_desc);
		tau = sorted[k - 1];
		for (size_t j = 0; j < n; j++) {
			if (seen[j] && s[j] < tau - tol) {
				snprintf(why, whylen, "key %zu listed with score %.9g, below the %d-th largest %.9g by more than %.3g",
				         j, s[j], k, tau, tol);
				goto out;
			}
			if (!seen[j] && s[j] > tau + tol) {
				snprintf(why, whylen, "key %zu missing: score %.9g, above the %d-th largest %.9g by more than %.3g",
				         j, s[j], k, tau, tol);
				goto out;
			}
		}
	}
	rc = 0;
out:
	free(seen);
	free(sorted);
	return rc;
}
