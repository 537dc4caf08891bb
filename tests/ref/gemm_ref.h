/* The gemm reference: C = A·Bᵀ in float64 from bf16/fp16 inputs.
 * A is row-major [M,K], B row-major [N,K], C row-major [M,N], the layout of
 * the kgen gemm kernel (docs/ABI.md). Every input decodes exactly to a
 * double and each product of two such values is exact too (at most 22
 * significand bits), so the only error here is the float64 summation,
 * about K·2^-53 relative: nothing next to the kernels' fp32 accumulation. */
#ifndef KGEN_REF_GEMM_REF_H
#define KGEN_REF_GEMM_REF_H

#include <stdint.h>

#include "num.h"

/* The whole product: C[m*N + n] for all m < M, n < N. */
void gemm_ref(NumType in, const void *A, const void *B, uint32_t M, uint32_t N,
              uint32_t K, double *C);

/* Selected rows only, for shapes too large to compute in full: out[i*N + n]
 * is C[rows[i]][n]. rows may be in any order and repeat. */
void gemm_ref_rows(NumType in, const void *A, const void *B, uint32_t N, uint32_t K,
                   const uint32_t *rows, uint32_t nrows, double *out);

/* Hopper's FP8 wgmma (sm_90a) keeps 13 fraction bits below each k32 step's
 * largest term, truncated (docs/hardware.md, "wgmma accumulation"): over a
 * 128-deep block, four steps of 33 truncated terms plus the rounding to
 * f32, each under 2^-13 of the step's largest term, which is at most the
 * block's Σ_k |a_k·b_k|. So a block-scaled FP8 result may be off by this
 * bound times Σ_k |a_k·b_k|·scales (worst case; measured errors on the
 * H100 are about a tenth of it). */
#define GEMM_WGMMA_FP8_BOUND (136.0 * 0x1p-13)

/* Block-scaled (DeepSeek's FP8 scaling): A and B are E4M3 bytes, SA is
 * fp32 [cdiv(K,blk), M] (one scale per 1 x blk of A), SB fp32
 * [cdiv(N,blk), cdiv(K,blk)] (one per blk x blk of B). The operands are
 * dequantized, A[m,k]·SA[k/blk][m] and B[n,k]·SB[n/blk][k/blk], each exact
 * in double (4 + 24 significand bits), and multiplied as gemm_ref_rows
 * does. out[i*N + n] is C[rows[i]][n]. */
void gemm_bs_ref_rows(const uint8_t *A, const uint8_t *B, const float *SA, const float *SB,
                      uint32_t M, uint32_t N, uint32_t K, uint32_t blk, const uint32_t *rows,
                      uint32_t nrows, double *out);

/* MXFP8 (UE8M0 per 32 of K for each row of A and of B): the factors of
 * rows r (A: of M, B: of N) travel as 512-byte images, one per 128 rows by
 * 128 of K, image (r/128, k/128) at ((r/128)·cdiv(K,128) + k/128)·512, the
 * factor of (r, k) at byte 16·(r%32) + 4·((r%128)/32) + (k%128)/32 of it
 * (docs/ABI.md, "gemm"); a factor e means 2^(e-127). */
size_t gemm_mx_sf_index(uint32_t r, uint32_t k, uint32_t K);
void gemm_mx_ref_rows(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB,
                      uint32_t N, uint32_t K, const uint32_t *rows, uint32_t nrows, double *out);

/* The same images for any scale vector: one image holds 4 vectors of
 * `vec` K elements of 128 rows, image (r/128, k/(4vec)) at
 * ((r/128)·cdiv(K,4vec) + k/(4vec))·512, the factor of (r, k) at byte
 * 16·(r%32) + 4·((r%128)/32) + (k%(4vec))/vec (docs/ABI.md, "gemm");
 * gemm_mx_sf_index is vec 32. */
size_t gemm_sf_index(uint32_t r, uint32_t k, uint32_t K, uint32_t vec);
/* A scale-factor code's value: UE8M0 2^(e-127) (0xff NaN), or UE4M3 (the
 * positive E4M3 codes; 0x7f and codes with bit 7 NaN). */
double gemm_sf_value(uint8_t code, int ue8m0);
/* FP4 (MXFP4: UE8M0 per 32, NVFP4: UE4M3 per 16): A [M, K/2] and B
 * [N, K/2] bytes of two E2M1 codes, the even k in the low nibble, each
 * times its factor (gemm_sf_index), exact in double; out[i*N + n] is
 * alpha·C[rows[i]][n]. */
void gemm_fp4_ref_rows(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB,
                       int ue8m0, uint32_t vec, double alpha, uint32_t N, uint32_t K,
                       const uint32_t *rows, uint32_t nrows, double *out);

/* FP4 weights under FP8 activations (MXFP8 A, MXFP4 B): A E4M3 bytes [M,K],
 * B [N, K/2] packed E2M1 as gemm_fp4_ref_rows, both with UE8M0 per 32 of K
 * in the images of gemm_mx_sf_index. out[i*N + n] is C[rows[i]][n]. */
void gemm_w4a8_ref_rows(const uint8_t *A, const uint8_t *B, const uint8_t *SA, const uint8_t *SB,
                        uint32_t N, uint32_t K, const uint32_t *rows, uint32_t nrows, double *out);

/* W4A8 with DeepSeek's FP8 activations (docs/ABI.md, "W4A8 weights", the
 * sm_90a kernel): B is E2M1, two codes per byte, the
 * even K index in the low nibble, rows of K/2 bytes; SB is UE8M0 [N, K/32]
 * row-major, a code e meaning 2^(e-127); A and SA as gemm_bs_ref_rows
 * (blk 128). Each weight is dequantized exactly, E2M1(code)·2^(e-127). */
void gemm_w4a8_bs_ref_rows(const uint8_t *A, const float *SA, const uint8_t *B, const uint8_t *SB,
                           uint32_t M, uint32_t N, uint32_t K, const uint32_t *rows, uint32_t nrows,
                           double *out);
/* The reference quantizer of W [rows, K] (K a multiple of 32) into that
 * layout: each group of 32 gets e = 127 + ceil(log2(amax/6)) clamped to
 * 0..254 (127 for an all-zero group), so amax/2^(e-127) <= 6, and each
 * value the nearest E2M1 code of w/2^(e-127), ties to the even code. */
void gemm_w4a8_quantize(const double *W, uint32_t rows, uint32_t K, uint8_t *B, uint8_t *SB);

/* MoE layouts (docs/ABI.md, "MoE layouts"): the expert owning row r of A
 * and C, -1 for a row no expert owns. Contiguous (masked = 0): lay is
 * offsets[E+1], expert e owns rows offsets[e]..offsets[e+1]-1. Masked: lay
 * is counts[E], row r lies in slab r/M and is live if r%M < counts[r/M].
 * An expert's rows then multiply its own B[e] = B + e·N·K and scales, as
 * the functions above do for one matrix. */
int gemm_moe_owner(int masked, const int32_t *lay, uint32_t E, uint32_t M, uint32_t r);

#endif
