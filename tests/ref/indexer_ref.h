/* The lightning indexer in float64 (docs/ABI.md "indexer"): one key's
 * logit from E4M3 query heads, fp32 weights and a dequantized key, the
 * bound that the kernel's f32 rounding is held to, the fp8 and fp4 cache
 * layouts and their decodes, and the set comparison of a top-k list with
 * the tie rule. */
#ifndef KGEN_REF_INDEXER_REF_H
#define KGEN_REF_INDEXER_REF_H

#include <stddef.h>
#include <stdint.h>

enum { INDEXER_D = 128, INDEXER_FP8_KEY = 128, INDEXER_FP4_KEY = 64, INDEXER_SCALE = 4, INDEXER_FP4_GROUP = 32 };
/* NVFP4 keys: the fp4 key row, eight UE4M3 scales (one per 16 values) */
enum { INDEXER_NVFP4_SCALE = 8, INDEXER_NVFP4_GROUP = 16 };

/* The tolerances of a logit, relative to its bound (indexer_ref_logit):
 * f32 FMA sums of 128 and H terms stay within 1e-5; the FP8 wgmma scoring
 * (sm_90a `--score wgmma`) keeps 13 fraction bits per k32 step, 2^-11 of
 * Σ|q·k| over a 128-deep dot, plus the f32 part (docs/hardware.md, "wgmma
 * accumulation"). The top-k check's tie window follows from it
 * (indexer_topk_check). */
#define INDEXER_TOL_F32 1e-5
#define INDEXER_TOL_WGMMA (0x1p-11 + INDEXER_TOL_F32)

/* A page of ps keys is ps rows of key_bytes (fp8: 128 E4M3; fp4, nvfp4:
 * 64 bytes of E2M1, value 2i in the low nibble of byte i), then ps scale
 * rows of scale_bytes (fp8: an fp32; fp4: four UE8M0 exponents, byte g for
 * values 32g .. 32g+31; nvfp4: eight UE4M3, byte g for values 16g ..
 * 16g+15); key `off` of page `page`: */
size_t indexer_ref_page_bytes(int ps, int key_bytes, int scale_bytes);
uint8_t *indexer_ref_key(uint8_t *cache, int ps, int key_bytes, int scale_bytes, uint32_t page, int off);
uint8_t *indexer_ref_scale(uint8_t *cache, int ps, int key_bytes, int scale_bytes, uint32_t page, int off);
/* Quantizes 128 values to fp8: scale = amax / 448 (1 when all are 0), E4M3
 * of each value / scale (round to nearest even). */
void indexer_fp8_quantize(const double *v, uint8_t *key, float *scale);
/* E2M1 code c (0..15) from its bits: sign 3, exponent 2..1 (bias 1),
 * mantissa 0; exponent 0 is subnormal (m·0.5). */
double indexer_e2m1_to_f64(uint8_t c);
/* The 128 values a key stands for, its scale(s) applied: fp8 E4M3·s;
 * fp4 E2M1·2^(e_g - 127). */
void indexer_fp8_dequantize(const uint8_t *key, const uint8_t *scale, double *k);
void indexer_fp4_dequantize(const uint8_t *key, const uint8_t *scale, double *k);
/* NVFP4: E2M1·UE4M3(scale byte g)·global, UE4M3 the E4M3 code of the byte
 * (its sign bit clear). */
void indexer_nvfp4_dequantize(const uint8_t *key, const uint8_t *scale, float global, double *k);
/* The E2M1 code nearest x (ties to the even code; beyond ±6: ±6). */
uint8_t indexer_e2m1_nearest(double x);
/* Quantizes 128 values to NVFP4 under the per-tensor scale `global` (> 0):
 * each group of 16 gets the UE4M3 scale nearest amax / (6·global) (at most
 * 448), each value the E2M1 code nearest v / (scale·global); a group whose
 * scale is 0 codes zeros. */
void indexer_nvfp4_quantize(const double *v, float global, uint8_t *key, uint8_t *scale);

/* Σ_h w[h]·max(0, Σ_d q[h,d]·k[d]) over `heads` heads of q (E4M3,
 * [heads,128]) and a dequantized key k (the key's scales applied: for fp8
 * this is relu(s·q·k) as docs/ABI.md "indexer" states, s > 0 or not);
 * *bound = Σ_h |w[h]|·Σ_d |q[h,d]·k[d]|, the size the rounding error of an
 * f32 evaluation scales with. */
double indexer_ref_logit(const uint8_t *q, const float *w, int heads, const double *k, double *bound);

/* Is got[0..k-1] a top-k of s[0..n-1]? m = min(n, k): got[0..m-1] are
 * distinct keys in [0, n), got[m..k-1] are -1; with n > k every key
 * scoring above the k-th largest score τ by more than tol is in the list
 * and every listed key scores at least τ - tol (a tie at the k-th score,
 * within tol, may be broken either way). A kernel that selects exactly
 * over its own scores, each within e of s, needs tol = 2e: it may rank a
 * key e below τ over one e above it. 0 if so, else -1 with the reason in
 * why. */
int indexer_topk_check(const double *s, size_t n, double tol, const int32_t *got, int k, char *why,
                       size_t whylen);

#endif
