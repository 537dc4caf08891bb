/* The gemm_moe family of the checker (check.h): block-scaled gemm kernels
 * with a MoE layout (docs/ABI.md, "MoE layouts"), E experts in one launch,
 * against the float64 product of each expert's dequantized operands
 * (tests/ref/gemm_ref.h). The expert table is drawn with an expert of 0
 * rows, one of 1 row, a full one (masked) and random others; rows no
 * expert owns must keep the poison, and their A rows hold E4M3 NaNs so
 * that a kernel that lets them into an owned row's result shows. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_ref.h"
#include "gemm_ref.h"
#include "gen/w4a8.h"
#include "tools/check_gemm.h"
#include "tools/check_internal.h"

enum { MOE_BLK = 128, MOE_IMAGE = 512, MOE_DEFAULT_E = 6, E4M3_NAN = 0x7f };

static int
moe_masked(const CheckCase *c)
{
	const char *v = krt_abi_shape(c->abi, "moe");
	return v && strcmp(v, "masked") == 0;
}

/* The SwiGLU epilogue (docs/ABI.md, "SwiGLU epilogue"): C is N/2 wide. */
static int
moe_swiglu(const CheckCase *c)
{
	const char *v = krt_abi_shape(c->abi, "epilogue");
	return v && strcmp(v, "swiglu") == 0;
}

/* An MXFP8 C with factor images CS (the SwiGLU output for the down GEMM). */
static int
moe_fp8(const CheckCase *c)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, "C");
	return p && strcmp(p->dtype, "e4m3") == 0;
}

/* FP4 experts (A, B e2m1 packed two per byte; docs/ABI.md, "gemm") */
static int
moe_fp4(const CheckCase *c)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, "A");
	return p && strcmp(p->dtype, "e2m1") == 0;
}

/* K per stage of scale blocks: //@shape kblock (128, or 256 for FP4) */
static uint64_t
moe_kblock(const KrtAbi *abi)
{
	const char *v = krt_abi_shape(abi, "kblock");
	return v ? strtoull(v, NULL, 10) : MOE_BLK;
}

static int moe_prepare_fp4(CheckCase *c, KrtErr *err);

/* The sm_90a W4A8 kernel (docs/ABI.md, "W4A8 weights"): B is E2M1 bytes
 * with SB UE8M0 [E*N, K/32], A and SA DeepSeek's block-scaled FP8. */
static int
moe_w4a8_bs(const CheckCase *c)
{
	const char *v = krt_abi_shape(c->abi, "weights");
	return v && strcmp(v, "e2m1") == 0;
}

/* One expert's W4A8 weights: N rows of K random E2M1 codes (every code
 * equally likely, drawn 16 at a time: kbench fills hundreds of MB of them)
 * whose 32-groups get UE8M0 exponents 127 + s, s in -r..r (r = 3, or 6 for
 * the edge fill: spans up to 12, inside the exact fold of docs/hardware.md,
 * "FP4 weights as E4M3"). The edge fill also makes every fifth group 2^16
 * to 2^23 times smaller: blocks that break the fold, whose small group
 * rounds into E4M3's subnormals or to zero (the tables below d = -13
 * included), far below the tolerance; a kernel that reads the wrong table
 * there is not. (gemm_w4a8_quantize, the reference quantizer, is checked
 * by hand in tests/ref/test_ref.c.) */
static void
moe_draw_w4a8(CheckCase *c, uint64_t N, uint64_t K, int r, int wide, uint8_t *b, uint8_t *sb)
{
	for (uint64_t n = 0; n < N; n++)
		for (uint64_t g = 0; g < K / 32; g++) {
			int s = (int)num_rng_below(&c->rng, (uint64_t)(2 * r + 1)) - r;
			if (wide && g % 5 == 4)
				s = -16 - (int)num_rng_below(&c->rng, 8);
			sb[n * (K / 32) + g] = (uint8_t)(127 + s);
			for (int h = 0; h < 2; h++) {
				uint64_t x = num_rng_u64(&c->rng);
				memcpy(b + n * (K / 2) + 16 * g + 8 * h, &x, 8);
			}
		}
}

/* DeepSeek-V4's swiglu_limit, the value the checker passes */
#define MOE_SWIGLU_LIMIT 10.0

static uint32_t
moe_experts(const CheckCase *c)
{
	return c->shape.d[3] ? (uint32_t)c->shape.d[3] : MOE_DEFAULT_E;
}

/* Contiguous: offsets[E+1] over M rows, the last M/16 owned by no expert;
 * expert 0 empty, expert 1 one row, the rest cut at random. Masked:
 * counts[E], expert 0 empty, 1 one row, 2 full, the rest random. */
static int32_t *
moe_draw_table(CheckCase *c, int masked, uint32_t E, uint32_t M)
{
	int32_t *v = malloc(sizeof *v * (E + 1));
	if (!v)
		return NULL;
	if (masked) {
		for (uint32_t e = 0; e < E; e++)
			v[e] = e == 0 && E > 1 ? 0 : e == 1 ? (M ? 1 : 0) : e == 2 || E == 1
			       ? (int32_t)M : (int32_t)num_rng_below(&c->rng, (uint64_t)M + 1);
		return v;
	}
	uint32_t owned = M - (M >= 16 ? M / 16 : 0), at = 0;
	v[0] = 0;
	for (uint32_t e = 0; e < E; e++) {
		uint32_t rem = owned - at, n;
		if (e == E - 1)
			n = rem;
		else if (e == 0)
			n = 0;
		else if (e == 1)
			n = rem ? 1 : 0;
		else
			n = (uint32_t)num_rng_below(&c->rng, 2 * (uint64_t)rem / (E - e) + 1);
		n = n > rem ? rem : n;
		at += n;
		v[e + 1] = (int32_t)at;
	}
	return v;
}

/* B's 128x128 scales of one expert, drawn as bs_prepare does (check_gemm.c). */
static void
moe_draw_b_bs(CheckCase *c, uint64_t N, uint64_t K, int r, int e8, uint8_t *b, void *sb, double *v)
{
	uint64_t nkb = K / MOE_BLK, nnb = (N + MOE_BLK - 1) / MOE_BLK;

	for (uint64_t nb = 0; nb < nnb; nb++) {
		uint64_t rows = N - nb * MOE_BLK < MOE_BLK ? N - nb * MOE_BLK : MOE_BLK;
		for (uint64_t kb = 0; kb < nkb; kb++) {
			bs_draw(c, v, rows * MOE_BLK, r);
			float s = bs_scale(v, rows * MOE_BLK);
			if (e8) {
				int x = (int)ceil(log2((double)s)) + 127;
				x = x < 1 ? 1 : x > 254 ? 254 : x;
				((uint8_t *)sb)[nb * nkb + kb] = (uint8_t)x;
				s = ldexpf(1.0f, x - 127);
			} else {
				((float *)sb)[nb * nkb + kb] = s;
			}
			for (uint64_t i = 0; i < rows; i++)
				bs_quantize(v + i * MOE_BLK, MOE_BLK, s, b + (nb * MOE_BLK + i) * K + kb * MOE_BLK);
		}
	}
}

static int
moe_prepare(CheckCase *c, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	uint32_t E = moe_experts(c);
	int masked = moe_masked(c), r = c->fill == CHECK_FILL_EDGE ? 8 : 3, rc;
	const KrtAbiParam *psa = krt_abi_find(c->abi, "SA"), *psb = krt_abi_find(c->abi, "SB");
	NumType out;

	if (!psa || !psb)
		return check_fail(err, KRT_EABI, "%s: gemm_moe needs SA and SB params (block-scaled)",
		                  c->abi->kernel);
	if (moe_fp4(c))
		return moe_prepare_fp4(c, err);
	int mx = strcmp(psa->dtype, "ue8m0") == 0, e8 = strcmp(psb->dtype, "ue8m0") == 0;
	int fp8 = moe_fp8(c), wbs = moe_w4a8_bs(c);
	if (!fp8 && (rc = gemm_dtype(c, "C", KRT_ARG_PTR, &out, err)) != 0)
		return rc;
	if (!N || !K || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "gemm_moe %llux%llux%llu: N, K must be in 1..2^32-1, M in "
		                  "0..2^32-1", (unsigned long long)M, (unsigned long long)N,
		                  (unsigned long long)K);
	if (K % MOE_BLK)
		return check_fail(err, KRT_EINVAL, "gemm_moe K=%llu: must be a multiple of %d (the kernel's "
		                  "scale block, //@shape kblock)", (unsigned long long)K, MOE_BLK);
	int sw = moe_swiglu(c);
	if (sw && N % (2 * MOE_BLK))
		return check_fail(err, KRT_EINVAL, "gemm_moe N=%llu: must be a multiple of %d (gate and up "
		                  "halves of whole scale blocks, //@shape nmult)", (unsigned long long)N,
		                  2 * MOE_BLK);
	uint64_t R = masked ? (uint64_t)E * M : M; /* rows of A, SA and C */
	if (!R || R > UINT32_MAX || (uint64_t)E * N > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "gemm_moe M=%llu E=%u: the rows of A (%llu) must be in "
		                  "1..2^32-1", (unsigned long long)M, E, (unsigned long long)R);
	int32_t *tab = moe_draw_table(c, masked, E, (uint32_t)M);
	if (!tab)
		return check_fail(err, KRT_ENOMEM, "gemm_moe: no host memory for the expert table");
	/* the table the kernel gets is one libkrt lets through */
	if ((rc = krt_moe_check(c->abi, tab, E, (uint32_t)M, err)) != 0) {
		free(tab);
		return rc;
	}
	uint64_t nkb = K / MOE_BLK, nnb = (N + MOE_BLK - 1) / MOE_BLK, mb = (M + MOE_BLK - 1) / MOE_BLK;
	size_t sfa = mx ? (size_t)(masked ? E * mb : (R + MOE_BLK - 1) / MOE_BLK) * nkb * MOE_IMAGE
	                : sizeof(float) * nkb * R;
	size_t sfb = wbs ? (size_t)E * N * (K / 32) : (size_t)E * nnb * nkb * (mx ? MOE_IMAGE : e8 ? 1 : sizeof(float));
	int w4 = gemm_is_w4a8(c->abi); /* FP4 B under MXFP8 A: K/2 bytes a row */
	size_t bbytes = wbs ? E * N * K / 2 : E * N * K >> w4;
	uint8_t *a = malloc(R * K), *b = malloc(bbytes), *sa = malloc(sfa), *sb = malloc(sfb);
	double *v = malloc(sizeof *v * MOE_BLK * MOE_BLK);
	if (!a || !b || !sa || !sb || !v) {
		free(a), free(b), free(sa), free(sb), free(v), free(tab);
		return check_fail(err, KRT_ENOMEM, "gemm_moe: no host memory for the inputs");
	}
	if (mx && masked) {
		for (uint32_t e = 0; e < E; e++)
			mx_draw(c, M, K, r, a + e * M * K, sa + e * mb * nkb * MOE_IMAGE, mb * nkb * MOE_IMAGE);
	} else if (mx) {
		mx_draw(c, R, K, r, a, sa, sfa);
	} else {
		float *s = (float *)sa;
		for (uint64_t m = 0; m < R; m++)
			for (uint64_t kb = 0; kb < nkb; kb++) {
				bs_draw(c, v, MOE_BLK, r);
				s[kb * R + m] = bs_scale(v, MOE_BLK);
				bs_quantize(v, MOE_BLK, s[kb * R + m], a + m * K + kb * MOE_BLK);
			}
	}
	for (uint64_t m = 0; m < R; m++)
		if (gemm_moe_owner(masked, tab, E, (uint32_t)M, (uint32_t)m) < 0)
			memset(a + m * K, E4M3_NAN, K);
	for (uint32_t e = 0; e < E; e++) {
		if (wbs)
			moe_draw_w4a8(c, N, K, r == 8 ? 6 : 3, r == 8, b + e * N * K / 2, sb + e * N * (K / 32));
		else if (w4)
			fp4_draw(c, N, K, r, 1, 32, b + e * N * K / 2, sb + e * nnb * nkb * MOE_IMAGE, nnb * nkb * MOE_IMAGE);
		else if (mx)
			mx_draw(c, N, K, r, b + e * N * K, sb + e * nnb * nkb * MOE_IMAGE, nnb * nkb * MOE_IMAGE);
		else
			moe_draw_b_bs(c, N, K, r, e8, b + e * N * K, sb + e * nnb * nkb * (e8 ? 1 : sizeof(float)), v);
	}
	free(v);
	if (wbs) {
		/* the products are exact only where the fold is (docs/hardware.md) */
		int64_t bad = w4a8_inexact_blocks(sb, (uint64_t)E * N, (uint32_t)K);
		if (bad)
			check_report(c, "  W4A8: %lld (row, 128-K) blocks of B do not fold exactly into E4M3\n",
			             (long long)bad);
	}
	rc = check_set_var(c, "E", E, err);
	if (!rc)
		rc = check_set_var(c, "E*N", (uint64_t)E * N, err);
	if (!rc)
		rc = check_set_var(c, "E*M", R, err);
	if (!rc && wbs)
		rc = check_set_var(c, "K/2", K / 2, err);
	if (!rc && wbs)
		rc = check_set_var(c, "K/32", K / 32, err);
	if (rc) {
		free(a), free(b), free(sa), free(sb), free(tab);
		return rc;
	}
	rc = check_add_raw_input(c, "A", "e4m3", 1, R * K, a, err);
	if (!rc)
		rc = check_add_raw_input(c, "B", wbs ? "u8" : w4 ? "e2m1p" : "e4m3", 1, bbytes, b, err);
	else
		free(b);
	if (!rc)
		rc = mx ? check_add_raw_input(c, "SA", "ue8m0", 1, sfa, sa, err)
		        : check_add_input(c, "SA", NUM_F32, nkb * R, sa, err);
	else
		free(sa);
	if (!rc)
		rc = mx || e8 ? check_add_raw_input(c, "SB", "ue8m0", 1, sfb, sb, err)
		              : check_add_input(c, "SB", NUM_F32, E * nnb * nkb, sb, err);
	else
		free(sb);
	if (!rc)
		rc = check_add_raw_input(c, masked ? "counts" : "offsets", "s32", 4, masked ? E : E + 1, tab, err);
	else
		free(tab);
	if (!rc && sw)
		rc = check_set_f32(c, "swiglu_limit", (float)MOE_SWIGLU_LIMIT, err);
	if (!rc && fp8) {
		/* MXFP8 C and its factor images (docs/ABI.md, "SwiGLU epilogue");
		 * 0xff is a NaN of both, never written */
		uint64_t nki = (N / 2 + MOE_BLK - 1) / MOE_BLK;
		uint64_t imgs = masked ? E * mb : (R + MOE_BLK - 1) / MOE_BLK;
		rc = check_add_raw_output(c, "C", "e4m3", 1, R * (N / 2), 256 * N + 65536, CHECK_POISON_BYTE, err);
		if (!rc && mx)
			rc = check_add_raw_output(c, "CS", "ue8m0", 1, imgs * nki * MOE_IMAGE, 65536, CHECK_POISON_BYTE,
			                          err);
		else if (!rc) /* block128: fp32 per 1x128 of C, [cdiv(N/2,128), rows] as SA */
			rc = check_add_output(c, "CS", NUM_F32, nki * R, 65536, err);
		return rc;
	}
	if (!rc)
		rc = check_add_output(c, "C", out, R * (N >> sw), 256 * N * (size_t)num_type_size(out) + 65536, err);
	return rc;
}

/* FP4 experts: A [R, K/2] and B [E*N, K/2] of packed E2M1 with MXFP4 or
 * NVFP4 factor images (per slab when masked, as MXFP8's), alpha[E] for
 * NVFP4. E2M1 has no NaN: rows no expert owns get NaN factors instead
 * (UE4M3 0x7f, UE8M0 0xff), so a kernel that lets them into an owned
 * row's result shows. */
static int
moe_prepare_fp4(CheckCase *c, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2], kb = moe_kblock(c->abi);
	uint32_t E = moe_experts(c), vec;
	int masked = moe_masked(c), r = c->fill == CHECK_FILL_EDGE ? 8 : 3, ue8m0, rc, sw = moe_swiglu(c);
	NumType out;

	if ((rc = gemm_dtype(c, "C", KRT_ARG_PTR, &out, err)) != 0)
		return rc;
	if (fp4_format(c, &ue8m0, &vec))
		return check_fail(err, KRT_EABI, "%s: FP4 gemm_moe: SA must be ue8m0 (MXFP4) or ue4m3 (NVFP4) "
		                  "images", c->abi->kernel);
	if (!N || !K || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX || K % kb)
		return check_fail(err, KRT_EINVAL, "gemm_moe %llux%llux%llu: N, K must be in 1..2^32-1, M in "
		                  "0..2^32-1, K a multiple of %llu (//@shape kblock)", (unsigned long long)M,
		                  (unsigned long long)N, (unsigned long long)K, (unsigned long long)kb);
	if (sw && N % (2 * MOE_BLK))
		return check_fail(err, KRT_EINVAL, "gemm_moe N=%llu: must be a multiple of %d (gate and up "
		                  "halves of whole scale blocks, //@shape nmult)", (unsigned long long)N,
		                  2 * MOE_BLK);
	uint64_t R = masked ? (uint64_t)E * M : M;
	if (!R || R > UINT32_MAX || (uint64_t)E * N > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "gemm_moe M=%llu E=%u: the rows of A (%llu) must be in "
		                  "1..2^32-1", (unsigned long long)M, E, (unsigned long long)R);
	int32_t *tab = moe_draw_table(c, masked, E, (uint32_t)M);
	if (!tab)
		return check_fail(err, KRT_ENOMEM, "gemm_moe: no host memory for the expert table");
	if ((rc = krt_moe_check(c->abi, tab, E, (uint32_t)M, err)) != 0) {
		free(tab);
		return rc;
	}
	uint64_t nki = K / (4 * vec), nnb = (N + MOE_BLK - 1) / MOE_BLK, mb = (M + MOE_BLK - 1) / MOE_BLK;
	uint64_t aimg = masked ? E * mb : (R + MOE_BLK - 1) / MOE_BLK;
	size_t sfa = (size_t)aimg * nki * MOE_IMAGE, sfb = (size_t)E * nnb * nki * MOE_IMAGE;
	uint8_t *a = malloc(R * K / 2), *b = malloc(E * N * K / 2), *sa = malloc(sfa), *sb = malloc(sfb);
	float *al = malloc(sizeof *al * E);
	if (!a || !b || !sa || !sb || !al) {
		free(a), free(b), free(sa), free(sb), free(al), free(tab);
		return check_fail(err, KRT_ENOMEM, "gemm_moe: no host memory for the inputs");
	}
	if (masked)
		for (uint32_t e = 0; e < E; e++)
			fp4_draw(c, M, K, r, ue8m0, vec, a + e * M * K / 2, sa + e * mb * nki * MOE_IMAGE,
			         mb * nki * MOE_IMAGE);
	else
		fp4_draw(c, R, K, r, ue8m0, vec, a, sa, sfa);
	for (uint64_t m = 0; m < R; m++) {
		if (gemm_moe_owner(masked, tab, E, (uint32_t)M, (uint32_t)m) >= 0)
			continue;
		uint64_t row = masked ? m % M : m, img = masked ? (m / M) * mb * nki * MOE_IMAGE : 0;
		for (uint64_t k = 0; k < K; k += vec)
			sa[img + gemm_sf_index((uint32_t)row, (uint32_t)k, (uint32_t)K, vec)] = ue8m0 ? 0xff : 0x7f;
	}
	for (uint32_t e = 0; e < E; e++)
		fp4_draw(c, N, K, r, ue8m0, vec, b + e * N * K / 2, sb + e * nnb * nki * MOE_IMAGE,
		         nnb * nki * MOE_IMAGE);
	fp4_alpha(c, al, E);
	rc = check_set_var(c, "E", E, err);
	if (!rc)
		rc = check_set_var(c, "E*N", (uint64_t)E * N, err);
	if (!rc)
		rc = check_set_var(c, "E*M", R, err);
	if (!rc)
		rc = check_set_var(c, "K/2", K / 2, err);
	if (rc) {
		free(a), free(b), free(sa), free(sb), free(al), free(tab);
		return rc;
	}
	const char *st = ue8m0 ? "ue8m0" : "ue4m3";
	rc = check_add_raw_input(c, "A", "e2m1", 1, R * K / 2, a, err);
	if (!rc)
		rc = check_add_raw_input(c, "B", "e2m1", 1, E * N * K / 2, b, err);
	else
		free(b);
	if (!rc)
		rc = check_add_raw_input(c, "SA", st, 1, sfa, sa, err);
	else
		free(sa);
	if (!rc)
		rc = check_add_raw_input(c, "SB", st, 1, sfb, sb, err);
	else
		free(sb);
	if (!rc && krt_abi_find(c->abi, "alpha"))
		rc = check_add_input(c, "alpha", NUM_F32, E, al, err);
	else
		free(al);
	if (!rc)
		rc = check_add_raw_input(c, masked ? "counts" : "offsets", "s32", 4, masked ? E : E + 1, tab, err);
	else
		free(tab);
	if (!rc && sw)
		rc = check_set_f32(c, "swiglu_limit", (float)MOE_SWIGLU_LIMIT, err);
	if (!rc)
		rc = check_add_output(c, "C", out, R * (N >> sw), 256 * N * (size_t)num_type_size(out) + 65536, err);
	return rc;
}

/* The MXFP8 SwiGLU output's tolerance, normwise per row as gemm_tol: an
 * E4M3 value of the kernel's f32 result v' is within 2^-4·|v'| of it (3
 * fraction bits; the factor keeps every value of its block at most 448,
 * and values below E4M3's normal range lose at most 2^-10 of the factor,
 * ~4.4e-6 of the block's largest), and v' is within ~1e-6 of the float64
 * value: 0.07 bounds a correct kernel; a factor off by one power of two,
 * a value from the wrong column or row, or a lost clamp is far above it. */
#define MOE_FP8_TOL 0.07

/* Element of CS holding the scale of row m (expert e), column j: the SA
 * layout of the down GEMM with K = N/2. UE8M0 (mx32): the byte of image
 * (row block, j/128) for columns j..j+31 (masked: a slab's own row blocks;
 * docs/ABI.md, "MoE layouts"); fp32 (block128): [j/128][m]. */
static uint64_t
moe_cs_index(const CheckCase *c, uint32_t e, uint64_t m, uint64_t j)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1];
	const CheckBuf *cs = check_find_buf_const(c, "CS");
	if (cs && cs->is_num)
		return j / MOE_BLK * (moe_masked(c) ? moe_experts(c) * M : M) + m;
	uint64_t nki = (N / 2 + MOE_BLK - 1) / MOE_BLK, mb = (M + MOE_BLK - 1) / MOE_BLK, rb, r;
	if (moe_masked(c)) {
		rb = e * mb + (m - e * M) / MOE_BLK;
		r = (m - e * M) % MOE_BLK;
	} else {
		rb = m / MOE_BLK;
		r = m % MOE_BLK;
	}
	return (rb * nki + j / MOE_BLK) * MOE_IMAGE + 16 * (r % 32) + 4 * (r / 32) + (j % MOE_BLK) / 32;
}

/* Row m of an FP8 C, dequantized with its factors, against ref (W values),
 * normwise as gemm_compare_row, with moe_compare_slack's slack if given. */
static void
moe_compare_fp8(CheckCase *c, const CheckBuf *cb, const CheckBuf *cs, uint32_t m, uint32_t e, uint64_t W,
                const double *ref, const double *slack, CheckResult *res)
{
	const uint8_t *q = (const uint8_t *)cb->host + cb->guard, *f = (const uint8_t *)cs->host + cs->guard;
	int max_report = c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT;
	double rowmax = 0.0;

	for (uint64_t j = 0; j < W; j++)
		rowmax = fmax(rowmax, fabs(ref[j]));
	double denom = rowmax > 0.0 ? rowmax : DBL_MIN;
	for (uint64_t j = 0; j < W; j++) {
		uint8_t b = q[(uint64_t)m * W + j], x = 0;
		if (b == CHECK_POISON_BYTE)
			continue; /* counted as unwritten */
		double s;
		if (cs->is_num) {
			s = num_load(cs->type, f, moe_cs_index(c, e, m, j));
		} else {
			x = f[moe_cs_index(c, e, m, j)];
			s = x == CHECK_POISON_BYTE ? NAN : ldexp(1.0, (int)x - 127);
		}
		double got = decode_e4m3_to_f64(b) * s;
		double den = slack ? denom + slack[j] / res->tol : denom;
		double err = isfinite(got) ? fabs(got - ref[j]) / den : INFINITY;
		if (check_count(res, err, res->tol, &res->max_err) && res->bad++ < (uint64_t)max_report) {
			if (res->bad == 1)
				check_report(c, "  %8s %8s %16s %16s %10s\n", "row", "col", "got", "want", "rel err");
			check_report(c, "  %8u %8llu %16.8g %16.8g %10.3e  (e4m3 0x%02x, scale %g)\n", m,
			             (unsigned long long)j, got, ref[j], err, b, s);
		}
	}
}

/* A row of N = 2I products, gate then up, into its I outputs in place:
 * silu(min(g, L))·clamp(u, -L, L) in float64 (docs/ABI.md, "SwiGLU epilogue"). */
static void
moe_swiglu_row(double *x, uint64_t N)
{
	for (uint64_t j = 0; j < N / 2; j++) {
		double g = fmin(x[j], MOE_SWIGLU_LIMIT), u = fmax(fmin(x[N / 2 + j], MOE_SWIGLU_LIMIT), -MOE_SWIGLU_LIMIT);
		x[j] = g / (1.0 + exp(-g)) * u;
	}
}

/* The slack an sm_90a SwiGLU output needs beyond its tolerance: the FP8
 * wgmma may leave g and u off by δ = GEMM_WGMMA_FP8_BOUND·s (s: each one's
 * Σ |a·b| with the scales; tests/ref/gemm_ref.h); the clamps are
 * 1-Lipschitz and |silu'| < 1.1, so the output may be off by
 * 1.1·δg·(|u| + δu) + |silu(g)|·δu before its own rounding. (Clamping to
 * L = 10 keeps rowmax at most ~100 while δu grows with Σ |a·b|: a normwise
 * test alone fails a correct kernel; kcheck on the H100, 2026-11-27.)
 * x: the N values, gate then up; the N/2 slacks go to s[0 .. N/2-1]. */
static void
moe_swiglu_slack(const double *x, double *s, uint64_t N)
{
	uint64_t I = N / 2;
	for (uint64_t j = 0; j < I; j++) {
		double g = fmin(x[j], MOE_SWIGLU_LIMIT), u = fmax(fmin(x[I + j], MOE_SWIGLU_LIMIT), -MOE_SWIGLU_LIMIT);
		double dg = GEMM_WGMMA_FP8_BOUND * s[j], du = GEMM_WGMMA_FP8_BOUND * s[I + j];
		s[j] = 1.1 * dg * (fabs(u) + du) + fabs(g / (1.0 + exp(-g))) * du;
	}
}

/* A BF16 row against ref, normwise as gemm_compare_row, each element with
 * its slack: err = |got - want| / (rowmax + slack/tol), so err <= tol is
 * |got - want| <= tol·rowmax + slack. */
static void
moe_compare_slack(CheckCase *c, const CheckBuf *cb, uint32_t m, uint64_t W, const double *ref,
                  const double *slack, CheckResult *res)
{
	const void *out = (const char *)cb->host + cb->guard;
	int max_report = c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT;
	double rowmax = 0.0;

	for (uint64_t j = 0; j < W; j++)
		rowmax = fmax(rowmax, fabs(ref[j]));
	for (uint64_t j = 0; j < W; j++) {
		uint64_t idx = (uint64_t)m * W + j;
		if (num_is_fill(cb->type, out, idx, CHECK_POISON_BYTE))
			continue; /* counted as unwritten */
		double denom = rowmax + slack[j] / res->tol;
		double got = num_load(cb->type, out, idx);
		double e = isfinite(got) ? fabs(got - ref[j]) / (denom > 0.0 ? denom : DBL_MIN) : INFINITY;
		if (check_count(res, e, res->tol, &res->max_err) && res->bad++ < (uint64_t)max_report) {
			if (res->bad == 1)
				check_report(c, "  %8s %8s %16s %16s %10s %12s\n", "row", "col", "got", "want", "err",
				             "FP8 slack");
			check_report(c, "  %8u %8llu %16.8g %16.8g %10.3e %12.4g\n", m, (unsigned long long)j, got,
			             ref[j], e, slack[j]);
		}
	}
}

static const int32_t *
moe_table(const CheckCase *c)
{
	const CheckBuf *t = check_find_buf_const(c, moe_masked(c) ? "counts" : "offsets");
	return t ? t->host : NULL;
}

/* Rows owned, and of them the ones compared: all while the reference
 * costs at most opts->full_limit multiply-adds, else each expert's first
 * and last row plus a random share (about 2^31 multiply-adds). */
static uint64_t
moe_owned(const CheckCase *c)
{
	const int32_t *t = moe_table(c);
	uint32_t E = moe_experts(c);
	uint64_t n = 0;

	for (uint32_t e = 0; t && e < E; e++)
		n += moe_masked(c) ? (uint64_t)t[e] : (uint64_t)(t[e + 1] - t[e]);
	return n;
}

static int
moe_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	uint32_t E = moe_experts(c);
	int masked = moe_masked(c);
	const int32_t *tab = moe_table(c);
	const CheckBuf *a = check_find_buf(c, "A"), *b = check_find_buf(c, "B");
	const CheckBuf *sa = check_find_buf(c, "SA"), *sb = check_find_buf(c, "SB");
	CheckBuf *cb = check_find_buf(c, "C");
	uint64_t R = masked ? (uint64_t)E * M : M, nkb = K / MOE_BLK, nnb = (N + MOE_BLK - 1) / MOE_BLK;
	uint64_t mb = (M + MOE_BLK - 1) / MOE_BLK, limit = c->opts->full_limit ? c->opts->full_limit
	                                                                       : CHECK_FULL_LIMIT;
	int mx = !sa->is_num, sw = moe_swiglu(c), fp8 = moe_fp8(c), fp4 = moe_fp4(c), ue8m0 = 0;
	int wbs = moe_w4a8_bs(c);
	CheckBuf *cs = check_find_buf(c, "CS");
	const CheckBuf *al = check_find_buf(c, "alpha");
	uint32_t vec = 32;
	if (fp4)
		fp4_format(c, &ue8m0, &vec);
	uint64_t nki = K / (4 * vec);
	enum { BLOCK = 64 };

	res->tol = fp8 ? MOE_FP8_TOL : gemm_tol[cb->type];
	double work = (double)moe_owned(c) * (double)N * (double)K;
	double keep = work > (double)limit ? 0x1p31 / work : 1.0;
	double *ref = malloc(sizeof *ref * N * BLOCK);
	uint32_t *rows = malloc(sizeof *rows * BLOCK);
	float *sbf = NULL;
	if (!fp4 && !wbs && !mx && !sb->is_num && (sbf = malloc(sizeof *sbf * (sb->count ? sb->count : 1))) != NULL)
		for (uint64_t i = 0; i < sb->count; i++)
			sbf[i] = ldexpf(1.0f, (int)((const uint8_t *)sb->host)[i] - 127);
	if (!ref || !rows || (!fp4 && !wbs && !mx && !sb->is_num && !sbf)) {
		free(ref), free(rows), free(sbf);
		return check_fail(err, KRT_ENOMEM, "gemm_moe: no host memory for the reference");
	}
	const float *sbs = sbf ? sbf : sb->host;
	/* sm_90a SwiGLU: |A|, |B| and their scales give each g and u its Σ |a·b|
	 * for the FP8 wgmma's error bound (moe_swiglu_slack) */
	int wg = sw && !mx && !wbs;
	uint8_t *aa = NULL, *ab = NULL;
	float *asa = NULL, *asb = NULL;
	double *sref = NULL;
	if (wbs) {
		/* W4A8: every output is an FP8 wgmma sum, its slack GEMM_WGMMA_FP8_BOUND
		 * of Σ |a·b|·scales (|A|: E4M3 without bit 7; |B|: E2M1 without the
		 * nibbles' bit 3; SB is unsigned) */
		uint64_t bb = (uint64_t)E * N * K / 2;
		aa = malloc(R * K), ab = malloc(bb), sref = malloc(sizeof *sref * N * BLOCK);
		asa = malloc(sizeof *asa * (sa->count ? sa->count : 1));
		if (!aa || !ab || !sref || !asa) {
			free(aa), free(ab), free(sref), free(asa), free(ref), free(rows), free(sbf);
			return check_fail(err, KRT_ENOMEM, "gemm_moe: no host memory for the reference");
		}
		for (uint64_t i = 0; i < R * K; i++)
			aa[i] = ((const uint8_t *)a->host)[i] & 0x7f;
		for (uint64_t i = 0; i < bb; i++)
			ab[i] = ((const uint8_t *)b->host)[i] & 0x77;
		for (uint64_t i = 0; i < sa->count; i++)
			asa[i] = fabsf(((const float *)sa->host)[i]);
	}
	if (wg) {
		aa = malloc(R * K), ab = malloc((uint64_t)E * N * K), sref = malloc(sizeof *sref * N * BLOCK);
		asa = malloc(sizeof *asa * (sa->count ? sa->count : 1));
		asb = malloc(sizeof *asb * (sb->count ? sb->count : 1));
		if (!aa || !ab || !sref || !asa || !asb) {
			free(aa), free(ab), free(sref), free(asa), free(asb), free(ref), free(rows), free(sbf);
			return check_fail(err, KRT_ENOMEM, "gemm_moe: no host memory for the reference");
		}
		/* E4M3: bit 7 is the sign */
		for (uint64_t i = 0; i < R * K; i++)
			aa[i] = ((const uint8_t *)a->host)[i] & 0x7f;
		for (uint64_t i = 0; i < (uint64_t)E * N * K; i++)
			ab[i] = ((const uint8_t *)b->host)[i] & 0x7f;
		for (uint64_t i = 0; i < sa->count; i++)
			asa[i] = fabsf(((const float *)sa->host)[i]);
		for (uint64_t i = 0; i < sb->count; i++)
			asb[i] = fabsf(sbs[i]);
	}
	for (uint32_t e = 0; e < E; e++) {
		uint64_t lo = masked ? (uint64_t)e * M : (uint64_t)tab[e];
		uint64_t hi = masked ? lo + (uint64_t)tab[e] : (uint64_t)tab[e + 1];
		int w4 = gemm_is_w4a8(c->abi);
		const uint8_t *be = (const uint8_t *)b->host + ((uint64_t)e * N * K >> w4);
		uint32_t n = 0;
		for (uint64_t m = lo; m < hi; m++) {
			int take = m == lo || m + 1 == hi || keep >= 1.0 ||
			           (double)num_rng_below(&c->rng, 1u << 30) < keep * 0x1p30;
			if (take)
				rows[n++] = (uint32_t)m;
			if (n < BLOCK && !(m + 1 == hi && n))
				continue;
			if (wbs) {
				const uint8_t *sbe = (const uint8_t *)sb->host + (uint64_t)e * N * (K / 32);
				gemm_w4a8_bs_ref_rows(a->host, sa->host, (const uint8_t *)b->host + (uint64_t)e * N * K / 2,
				                      sbe, (uint32_t)R, (uint32_t)N, (uint32_t)K, rows, n, ref);
				gemm_w4a8_bs_ref_rows(aa, asa, ab + (uint64_t)e * N * K / 2, sbe, (uint32_t)R, (uint32_t)N,
				                      (uint32_t)K, rows, n, sref);
				/* with swiglu moe_swiglu_slack takes the sums as they are */
				for (uint64_t i = 0; !sw && i < (uint64_t)n * N; i++)
					sref[i] *= GEMM_WGMMA_FP8_BOUND;
			} else if (fp4) {
				/* masked: a slab's rows and SA images are its own */
				uint64_t ro = masked ? lo : 0;
				for (uint32_t i = 0; i < n; i++)
					rows[i] -= (uint32_t)ro;
				gemm_fp4_ref_rows((const uint8_t *)a->host + ro * K / 2,
				                  (const uint8_t *)b->host + (uint64_t)e * N * K / 2,
				                  (const uint8_t *)sa->host + (masked ? e * mb * nki * MOE_IMAGE : 0),
				                  (const uint8_t *)sb->host + e * nnb * nki * MOE_IMAGE, ue8m0, vec,
				                  al ? (double)((const float *)al->host)[e] : 1.0, (uint32_t)N,
				                  (uint32_t)K, rows, n, ref);
				for (uint32_t i = 0; i < n; i++)
					rows[i] += (uint32_t)ro;
			} else if (mx && masked) {
				/* a slab's rows and SA images are its own (docs/ABI.md) */
				for (uint32_t i = 0; i < n; i++)
					rows[i] -= (uint32_t)lo;
				(w4 ? gemm_w4a8_ref_rows : gemm_mx_ref_rows)((const uint8_t *)a->host + lo * K, be,
				                 (const uint8_t *)sa->host + e * mb * nkb * MOE_IMAGE,
				                 (const uint8_t *)sb->host + e * nnb * nkb * MOE_IMAGE, (uint32_t)N,
				                 (uint32_t)K, rows, n, ref);
				for (uint32_t i = 0; i < n; i++)
					rows[i] += (uint32_t)lo;
			} else if (mx) {
				(w4 ? gemm_w4a8_ref_rows : gemm_mx_ref_rows)(a->host, be, sa->host,
				                 (const uint8_t *)sb->host + e * nnb * nkb * MOE_IMAGE, (uint32_t)N,
				                 (uint32_t)K, rows, n, ref);
			} else {
				gemm_bs_ref_rows(a->host, be, sa->host, sbs + e * nnb * nkb, (uint32_t)R, (uint32_t)N,
				                 (uint32_t)K, MOE_BLK, rows, n, ref);
				if (wg)
					gemm_bs_ref_rows(aa, ab + (uint64_t)e * N * K, asa, asb + e * nnb * nkb, (uint32_t)R,
					                 (uint32_t)N, (uint32_t)K, MOE_BLK, rows, n, sref);
			}
			for (uint32_t i = 0; i < n; i++) {
				double *x = ref + (size_t)i * N;
				double *slack = wg || wbs ? sref + (size_t)i * N : NULL;
				if (sw && slack)
					moe_swiglu_slack(x, slack, N);
				if (sw)
					moe_swiglu_row(x, N);
				if (fp8)
					moe_compare_fp8(c, cb, cs, rows[i], e, N >> 1, x, slack, res);
				else if (wbs || wg)
					moe_compare_slack(c, cb, rows[i], N >> sw, x, slack, res);
				else
					gemm_compare_row(c, cb, rows[i], N >> sw, x, res);
			}
			n = 0;
		}
	}
	res->subset = keep < 1.0;
	/* rows no expert owns: never written; their poison is not "unwritten" */
	const void *out = (const char *)cb->host + cb->guard;
	uint64_t kept = 0, wrote = 0;
	for (uint64_t m = 0; m < R; m++) {
		if (gemm_moe_owner(masked, tab, E, (uint32_t)M, (uint32_t)m) >= 0)
			continue;
		uint64_t w = N >> sw;
		for (uint64_t n = 0; n < w; n++) {
			if (fp8 ? ((const uint8_t *)out)[m * w + n] == CHECK_POISON_BYTE
			        : num_is_fill(cb->type, out, m * w + n, CHECK_POISON_BYTE)) {
				kept++;
			} else if (wrote++ == 0) {
				check_report(c, "  row %llu (no expert's) col %llu: written (%g), should keep the "
				             "poison\n", (unsigned long long)m, (unsigned long long)n,
				             fp8 ? decode_e4m3_to_f64(((const uint8_t *)out)[m * w + n])
				                 : num_load(cb->type, out, m * w + n));
			}
		}
	}
	res->bad += wrote;
	res->checked += wrote;
	res->unwritten -= kept < res->unwritten ? kept : res->unwritten;
	cb->unwritten -= kept < cb->unwritten ? kept : cb->unwritten;
	if (fp8) {
		/* CS: the factor bytes of owned rows must be written; the others
		 * (no expert's rows, an image's rows past M) keep the poison */
		uint64_t left = 0;
		for (uint32_t e = 0; e < E; e++) {
			uint64_t lo = masked ? (uint64_t)e * M : (uint64_t)tab[e];
			uint64_t hi = masked ? lo + (uint64_t)tab[e] : (uint64_t)tab[e + 1];
			for (uint64_t m = lo; m < hi; m++)
				for (uint64_t j = 0; j < N / 2; j += cs->is_num ? MOE_BLK : 32)
					left += cs->is_num ? num_is_fill(cs->type, (const char *)cs->host + cs->guard,
					                                 moe_cs_index(c, e, m, j), CHECK_POISON_BYTE)
					                   : ((const uint8_t *)cs->host + cs->guard)[moe_cs_index(c, e, m, j)] ==
					                     CHECK_POISON_BYTE;
		}
		res->unwritten -= cs->unwritten < res->unwritten ? cs->unwritten : res->unwritten;
		res->unwritten += left;
		cs->unwritten = left;
	}
	free(ref), free(rows), free(sbf), free(aa), free(ab), free(sref), free(asa), free(asb);
	return 0;
}

/* 2·N·K per owned row: the work of the experts' rows, not of the tiles. */
static double
moe_flops(const CheckCase *c)
{
	return 2.0 * (double)moe_owned(c) * (double)c->shape.d[1] * (double)c->shape.d[2];
}

/* The bytes a decode launch must move at least: the weights and their
 * scales of every expert with a row, the owned rows of A, and C. */
static double
moe_bytes(const CheckCase *c)
{
	const int32_t *t = moe_table(c);
	uint32_t E = moe_experts(c);
	double N = (double)c->shape.d[1], K = (double)c->shape.d[2], live = 0;
	const CheckBuf *cb = check_find_buf_const(c, "C");
	const CheckBuf *sb = check_find_buf_const(c, "SB");

	for (uint32_t e = 0; t && e < E; e++)
		live += (moe_masked(c) ? t[e] : t[e + 1] - t[e]) > 0;
	double rows = (double)moe_owned(c), kbytes = moe_fp4(c) ? K / 2 : K; /* FP4: two per byte */
	double wbytes = moe_fp4(c) || gemm_is_w4a8(c->abi) || moe_w4a8_bs(c) ? K / 2 : K;
	double sbytes = sb ? (double)(sb->count * (uint64_t)sb->esize) / E : 0;
	return live * (N * wbytes + sbytes) + rows * (kbytes + N / (moe_swiglu(c) ? 2 : 1) * (cb ? cb->esize : 2));
}

static int
moe_peer_args(const CheckCase *c, int iters, int warmup, char *buf, size_t n)
{
	const CheckBuf *out = check_find_buf_const(c, "C");
	/* the flops of the drawn table, so that the peers' TFLOP/s count the
	 * same work as ours (tools/peers.py, gemm_moe) */
	int len = snprintf(buf, n, "gemm_moe %llu %llu %llu %u %s %d %d %s %.17g",
	                   (unsigned long long)c->shape.d[0], (unsigned long long)c->shape.d[1],
	                   (unsigned long long)c->shape.d[2], moe_experts(c),
	                   moe_masked(c) ? "masked" : "contiguous", iters, warmup, num_type_name(out->type),
	                   moe_flops(c));
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

static void
moe_describe(const CheckCase *c, FILE *f)
{
	const int32_t *t = moe_table(c);
	uint32_t E = moe_experts(c);

	fprintf(f, "  %s:", moe_masked(c) ? "counts" : "offsets");
	for (uint32_t e = 0; t && e < (moe_masked(c) ? E : E + 1) && e < 40; e++)
		fprintf(f, " %d", (int)t[e]);
	fputc('\n', f);
}

/* M (contiguous: all rows; masked: a slab's), N, K, E: odd sizes, an
 * expert with a single row, the smallest K. */
static const CheckShape moe_shapes[] = {
	{4, {1, 136, 128, 2}},
	{4, {131, 200, 128, 5}},
	{4, {300, 256, 384, 7}},
	{4, {77, 128, 256, 40}},
};

static void
moe_fit_default(const KrtAbi *abi, CheckShape *s)
{
	const char *ep = krt_abi_shape(abi, "epilogue");
	uint64_t kb = moe_kblock(abi);
	s->d[2] = (s->d[2] + kb - 1) / kb * kb;
	if (ep && strcmp(ep, "swiglu") == 0) /* N: gate and up halves of whole blocks */
		s->d[1] = (s->d[1] + 2 * MOE_BLK - 1) / (2 * MOE_BLK) * (2 * MOE_BLK);
}

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

const CheckFamily check_family_gemm_moe = {
	.name = "gemm_moe",
	.kgen = "gemm",
	.dims = "M,N,K,E",
	.ndims = 4,
	.nrequired = 3,
	.shapes = moe_shapes,
	.nshapes = COUNT(moe_shapes),
	.bench = {4, {32768, 4096, 7168, 4}},
	.prepare = moe_prepare,
	.compare = moe_compare,
	.flops = moe_flops,
	.peer_args = moe_peer_args,
	.bytes = moe_bytes,
	.describe = moe_describe,
	.fit_default = moe_fit_default,
};
