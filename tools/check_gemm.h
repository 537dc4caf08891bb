/* The gemm checker's parts that its MoE form (check_moe.c) shares:
 * DeepSeek's block quantization and OCP MX's, the per-row comparison and
 * the tolerances (check_gemm.c says why each is what it is). */
#ifndef KGEN_TOOLS_CHECK_GEMM_H
#define KGEN_TOOLS_CHECK_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "num.h"
#include "tools/check_internal.h"

extern const double gemm_tol[NUM_NTYPES];

/* The dtype of ptr or tmap param `name` as a NumType (bf16, fp16, f32). */
int gemm_dtype(const CheckCase *c, const char *name, KrtArgKind kind, NumType *out, KrtErr *err);
/* Compares row m of C (N elements of buffer cb) with ref, normwise by the
 * row's largest |ref|; fills res and the report. */
void gemm_compare_row(CheckCase *c, const CheckBuf *cb, uint32_t m, uint64_t N, const double *ref,
                      CheckResult *res);
/* N(0,1) values times 2^u per block, u uniform in -r..r (the edge fill
 * adds zeros and ±4·2^u spikes). */
void bs_draw(CheckCase *c, double *v, size_t n, int r);
/* The fp32 scale amax/448 of n values, and the values as E4M3 at scale s. */
float bs_scale(const double *v, size_t n);
void bs_quantize(const double *v, size_t n, float s, uint8_t *q);
/* rows x K of E4M3 into q with their UE8M0 factors per 32 of K in the
 * 512-byte images sf (sfbytes of them; docs/ABI.md, "gemm"). */
void mx_draw(CheckCase *c, uint64_t rows, uint64_t K, int r, uint8_t *q, uint8_t *sf, size_t sfbytes);

/* FP4 operands: rows x K of E2M1 packed two per byte (K/2 bytes a row)
 * into q, their factors (UE8M0 per 32, or UE4M3 per 16) into the images sf
 * (gemm_sf_index; factors of rows past `rows` are 1); fp4_format reads
 * the kernel's from its SA param (-1 if SA is neither); fp4_alpha draws
 * NVFP4's per-tensor scales. */
int fp4_format(const CheckCase *c, int *ue8m0, uint32_t *vec);
void fp4_draw(CheckCase *c, uint64_t rows, uint64_t K, int r, int ue8m0, uint32_t vec, uint8_t *q, uint8_t *sf,
              size_t sfbytes);
void fp4_alpha(CheckCase *c, float *alpha, uint32_t n);
/* Whether B is FP4 under FP8 A (tmap dtype e2m1p, docs/ABI.md "gemm"). */
int gemm_is_w4a8(const KrtAbi *abi);

#endif
