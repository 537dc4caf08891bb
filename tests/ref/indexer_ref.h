/* The lightning indexer in float64 (docs/ABI.md "indexer"): one key's
 * logit from E4M3 query heads, fp32 weights and an E4M3 key with its fp32
 * scale, the bound that the kernel's f32 rounding is held to, the fp8
 * cache layout, and the set comparison of a top-k list with the tie rule. */
#ifndef KGEN_REF_INDEXER_REF_H
#define KGEN_REF_INDEXER_REF_H

#include <stddef.h>
#include <stdint.h>

enum { INDEXER_D = 128, INDEXER_FP8_KEY = 128, INDEXER_FP8_SCALE = 4 };

/* fp8 cache: a page of ps keys is ps rows of 128 E4M3 values, then ps
 * fp32 scales; key `off` of page `page`: */
size_t indexer_fp8_page_bytes(int ps);
uint8_t *indexer_fp8_key(uint8_t *cache, int ps, uint32_t page, int off);
uint8_t *indexer_fp8_scale(uint8_t *cache, int ps, uint32_t page, int off);
/* Quantizes 128 values: scale = amax / 448 (1 when all are 0), E4M3 of
 * each value / scale (round to nearest even). */
void indexer_fp8_quantize(const double *v, uint8_t *key, float *scale);

/* Σ_h w[h]·max(0, scale·Σ_d q[h,d]·key[d]) over `heads` heads of q (E4M3,
 * [heads,128]); *bound = Σ_h |w[h]|·|scale|·Σ_d |q[h,d]·key[d]|, the size
 * the rounding error of an f32 evaluation scales with. */
double indexer_ref_logit(const uint8_t *q, const float *w, int heads, const uint8_t *key, float scale,
                         double *bound);

/* Is got[0..k-1] a top-k of s[0..n-1]? m = min(n, k): got[0..m-1] are
 * distinct keys in [0, n), got[m..k-1] are -1; with n > k every key
 * scoring above the k-th largest score τ by more than tol is in the list
 * and every listed key scores at least τ - tol (a tie at the k-th score,
 * within tol, may be broken either way). 0 if so, else -1 with the reason
 * in why. */
int indexer_topk_check(const double *s, size_t n, double tol, const int32_t *got, int k, char *why,
                       size_t whylen);

#endif
