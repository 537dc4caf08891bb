/* GEMM family: C[M,N] = A[M,K]·B[N,K]^T, bf16/fp16 in, f32 accumulate,
 * bf16 or f32 out; or e4m3 in with DeepSeek's block scales (--scale
 * block128: fp32 SA per 1x128 of A, SB per 128x128 of B, docs/ABI.md "gemm");
 * on sm_100a MXFP8 (mx32), FP4 (e2m1 with nv16 or mx32) and FP4 weights under
 * MXFP8 activations (--dtype-b e2m1). Shared parts (parameters, plan, prologue, TMA producer)
 * live in gemm.c; each target supplies GemmOps from its folder. */
#ifndef KGEN_GEMM_H
#define KGEN_GEMM_H

#include "abi.h"
#include "dtype.h"
#include "emit.h"
#include "layout.h"
#include "plan.h"
#include "target.h"

typedef struct GemmParams {
	int target; /* index into targets[] */
	int tile_m, tile_n, tile_k, stages;
	int swizzle; /* Swizzle */
	int dtype, out_dtype; /* DType */
	int cta_pair; /* 1: a cluster of 2 CTAs shares one M = 2*tile-m MMA */
	int cluster_n; /* pairs per cluster along N (2: A multicast to both) */
	int scale; /* GemmScale */
	int scale_b; /* block128: B's scale type, DT_F32 or DT_UE8M0 */
	int moe; /* GemmMoe */
	int epilogue; /* GemmEpilogue */
	int dtype_b; /* 0: B as A; 1: e2m1 B under e4m3 A (--dtype-b) */
} GemmParams;

/* What the epilogue writes (the --epilogue values, in order). */
typedef enum GemmEpilogue {
	GE_NONE,   /* C = A·B^T */
	GE_SWIGLU, /* B's N rows are gate then up halves: C[:, j] = silu(clamp gate)·clamp up,
	            * N/2 columns (docs/ABI.md, "SwiGLU epilogue") */
} GemmEpilogue;

/* Mixture-of-experts layouts (the --moe values, in order; docs/ABI.md,
 * "MoE layouts"): one launch for E experts, B [E,N,K] with per-expert
 * scales. */
typedef enum GemmMoe {
	GM_NONE,
	GM_CONTIGUOUS, /* experts' rows concatenated along M, offsets[E+1] */
	GM_MASKED,     /* E slabs of M rows each, counts[E] rows used */
} GemmMoe;

/* How A and B are scaled (the --scale values, in order). */
typedef enum GemmScale {
	GS_NONE,
	GS_BLOCK128, /* fp32 per 1x128 of A (SA) and per 128x128 of B (SB) */
	GS_MX32,     /* UE8M0 per 1x32 of A and of B (MXFP8, or MXFP4 with e2m1), in TMEM for the MMA */
	GS_NV16,     /* NVFP4: e2m1 with UE4M3 per 1x16 of A and of B in TMEM, and a per-tensor
	              * fp32 alpha (the product of A's and B's tensor scales) on the accumulator */
	GS_W4A8,     /* A as block128; B E2M1 with UE8M0 per 1x32, E4M3 on chip (sm_90a;
	              * docs/ABI.md "W4A8 weights") */
} GemmScale;

typedef struct GemmCfg {
	const Target *t;
	int tm, tn, tk, stages;
	Swizzle swz;
	DType in, out;
	int esz_in, esz_out;    /* bytes of one TMA element: e2m1 moves as bytes of two values */
	int ebits;              /* bits of one A/B element: 16, 8 or 4 (e2m1, packed two per byte) */
	DType in_b;             /* B's element type: in, or DT_E2M1 under e4m3 A (--dtype-b e2m1:
	                         * kind::mxf8f6f4, B a byte per value in shared memory) */
	int tk_tma;             /* TMA elements of K per stage: tile-k, or tile-k/2 for e2m1 */
	int alpha;              /* nv16: the f32 param alpha[E] (alpha[1] without --moe) scales C */
	int span;               /* bytes of one swizzled row (16 for none) */
	int kmma;               /* K elements of one MMA: 32 bytes of K */
	int sblock;             /* block128: K (and B's N) elements per scale: 128, else 0 */
	DType sbtype;           /* block128: B's scales, DT_F32 or DT_UE8M0 */
	int sfvec;              /* mx32/nv16: K elements per scale factor: 32 or 16, else 0 */
	DType sftype;           /* mx32/nv16: the factors' type, DT_UE8M0 or DT_UE4M3 */
	int kind;               /* mx32/nv16: the MMA's IdescKind, IK_MXF8F6F4 (e4m3) or IK_MXF4NVF4 (e2m1) */
	int sf_imgs;            /* mx32: 512-byte images per 128 rows per stage (gen/layout.h,
	                         * layout_sf_pick) */
	uint32_t sf_stage;      /* mx32: their bytes, sf_imgs * 512 */
	int w4a8;               /* 1: B is E2M1 bytes (tile-n rows x tile-k/2, 64B swizzle), SB UE8M0
	                         * per 32; the tile's tile-m A rows are the tokens (the MMA's N) */
	int r_lut;              /* w4a8: smem of the E4M3 byte tables (gen/w4a8.h), or -1 */
	uint32_t sfa_bytes, sfb_bytes; /* mx32: scale-factor images of one stage */
	int kslices;            /* TMA boxes per operand per stage: tk*esz/span */
	int pair;               /* CTA pair (docs/cta-pair.md): 1, else 0 */
	int cn;                 /* pairs per cluster along N: 1, or 2 sharing A by multicast */
	int tile_rows;          /* C rows of one tile: tm, or 2*tm for a pair */
	int tn_cta;             /* B rows in one CTA's smem: tn / (1 + pair) */
	TileLayout la, lb;      /* canonical smem tiles of one stage (this CTA's part) */
	uint32_t stage_bytes;   /* A + B bytes landing on one full barrier */
	int group_m;            /* grouped rasterization: M tiles per group */
	int consumers;          /* sm90: consumer warpgroups */
	int moe;                /* GemmMoe */
	int swiglu;             /* 1: the SwiGLU epilogue; a tile's B rows are tn/2 of gate, tn/2 of up */
	int split;              /* sm90 FP8 SwiGLU: 2 consumer warpgroups on the same 64 rows, one per
	                         * half of the tile's columns (B rows 128w..: 64 gate, 64 up) */
	int wn;                 /* sm90: a consumer's wgmma N: tn, or tn/2 when split */
	int r_amax;             /* split (W4A8: FP8 C): smem for the amax the consumers exchange, or -1 */
	Plan plan;
	int r_a, r_b, r_slot;   /* smem region indices (r_slot: TMEM address, or -1) */
	int r_sfa, r_sfb;       /* mx32: scale-factor image stages */
	int b_full, b_empty, b_acc; /* barrier indices (b_acc: accumulator ready, or -1) */
	char name[128];
} GemmCfg;

/* Registers set up by the shared prologue, used by every role. */
typedef struct GemmRegs {
	Reg tid, warp, lane;
	Reg base;            /* aligned dynamic smem base (shared window address) */
	Reg M, N, K, nk;     /* problem size, K tiles */
	Reg m0, n0;          /* this CTA's tile origin (its own rows of a pair's tile) */
	Reg rank;            /* pair: %cluster_ctarank (0 leads: issues the MMAs) */
	Reg prank;           /* pair: rank inside the pair (rank, or rank & 1 when cn = 2) */
	Reg pairid;          /* cn = 2: which pair of the cluster (rank >> 1) */
	Reg tmap_a, tmap_b;  /* generic addresses of the tensor-map params */
	Reg c;               /* global address of C */
	Reg sa, sb;          /* scaled: global addresses of SA and SB */
	/* C rows this CTA may write: [mlo, mhi) (--moe only; mhi is M without) */
	Reg mlo, mhi;
	Reg rows;            /* rows of A, SA and C: M, or E*M when masked */
	/* n0: this tile's first column of C; with --epilogue swiglu also its
	 * first gate row of B (its up rows start at N/2 + n0) */
	Reg nb;              /* B's first row of this tile: n0, or expert*N + n0 */
	Reg sbrow;           /* SB's row block of this tile: n0/128 (+ expert*cdiv(N,128)) */
	Reg sfa_rb;          /* mx32: SA's image row block of this tile: m0/128, or masked
	                      * expert*cdiv(M,128) + m-tile */
	Reg expert;          /* --moe: this tile's expert */
} GemmRegs;

typedef struct GemmOps {
	/* Adds roles, threads, target regions/barriers and register needs. */
	int (*plan)(GemmCfg *g, KgErr *err);
	/* Runs before the prologue's CTA barrier (e.g. TMEM allocation). */
	int (*setup)(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err);
	/* Role dispatch and everything after the prologue. */
	int (*body)(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err);
} GemmOps;

extern const GemmOps gemm_sm90, gemm_sm100;

/* Shared building blocks for the target bodies. */
/* The TMA producer loop for one elected thread. */
int gemm_emit_producer(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err);
/* The head of the MMA warp's K loop, on both targets: stage, phase and kt
 * start at 0, the loop is skipped when there is no K tile, and each round
 * starts by waiting on its stage's "full" barrier (full0: the ring's first;
 * full, p: scratch). Writes the loop's labels into loop and done (n bytes
 * each); the caller emits the body and the back edge. */
int gemm_mma_loop_head(Emit *e, KgErr *err, const GemmRegs *r, Reg stage, Reg phase, Reg kt,
                       Reg full0, Reg full, Reg p, char *loop, char *done, size_t n);
/* Low/high words of the K-major smem descriptor of operand `l` whose start
 * is `addr_reg` + byte offset; see gen/desc.h. */
/* launched in clusters of more than one CTA (pair, cn = 2) */
int gemm_clustered(const GemmCfg *g);
int gemm_desc_words(const GemmCfg *g, const TileLayout *l, uint32_t *lo0, uint32_t *hi,
                    KgErr *err);

/* Validates the parameters and plans the kernel: what generate and plan
 * start from. */
int gemm_configure(GemmCfg *g, const GemmParams *p, KgErr *err);
/* The launch-time estimate of the plan at M x N x K, `kgen plan`'s
 * "estimate" lines (gemm_est.c, gen/estimate.h); gemm_predict from the
 * parameters, shape = {m, n, k}. */
int gemm_predict(const void *params, const uint64_t *shape, Buf *text, KgErr *err);
int gemm_estimate(const GemmCfg *g, uint64_t m, uint64_t n, uint64_t k, Buf *out, KgErr *err);

#endif
