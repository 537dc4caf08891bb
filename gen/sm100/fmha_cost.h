/* The static cost model of the sm_100a fmha plans (docs/estimate.md,
 * "sm_100a fmha plans"): one KV tile of one CTA priced unit by unit at
 * the B200 rates of rates.h (tensor core, MUFU ex2, instruction issue,
 * shared-memory reads, the TMA fill from L2, the load a single stage
 * exposes), the slowest unit bounding the tile. The one place these
 * costs are written down: the tile choice (sm100/fmha.c) and `kgen plan`'s
 * ranked candidates both come from here. */
#ifndef KGEN_SM100_FMHA_COST_H
#define KGEN_SM100_FMHA_COST_H

#include <stdint.h>

/* Softmax thread-instructions per score of the sm_100a softmax
 * (gen/sm100/fmha.c): max, ex2, half a bf16x2 cvt, the tcgen05.ld/st
 * share, and half each of the packed f32x2 scale fma and sum add (the .b64
 * pairs they need are register pairs to ptxas, counted free): ~3.5. */
#define SM100_SOFTMAX_ISSUE_PER_SCORE 3.5

/* The plans the model knows. */
typedef enum FmhaPlanKind {
	FP_CTA,    /* one CTA: qt 128-row Q tiles (M = 128, cta_group::1), all of O */
	FP_OSPLIT, /* a CTA pair, each CTA half of O's columns, both computing S */
	FP_M64,    /* one CTA, a 64-row Q tile (M = 64, Layout F: half the data path) */
	FP_PAIR64, /* a CTA pair, M = 128 cta_group::2 (Layout B): 64 rows per CTA,
	            * S computed once, each CTA loading half of K and of V */
	FP_COUNT
} FmhaPlanKind;

/* One candidate: the attention's dims and a tile shape. */
typedef struct FmhaCand {
	FmhaPlanKind kind;
	int d, dv, esz, kv_shared;
	int qt;              /* FP_CTA/FP_OSPLIT: 128-row Q tiles per CTA */
	int bn, stages, e2f; /* keys per KV tile, KV stages, exp2 by FMA of every 8 */
} FmhaCand;

/* One KV tile of one CTA: amounts, then clocks at B200 rates. */
typedef struct FmhaCost {
	double mma;      /* FLOPs of the tensor core */
	double ex2;      /* MUFU exponentials */
	double issue;    /* softmax thread-instructions */
	double smem;     /* bytes the MMAs (and a pair's hand-offs) read from shared memory */
	double tmem;     /* bytes of S loaded and P stored */
	double l2;       /* bytes the CTA's TMA loads bring in */
	double c_mma, c_ex2, c_issue, c_smem, c_l2, c_exposed;
	double clk;      /* the slowest unit plus the exposed load */
	const char *bound;
	double useful;   /* the attention's FLOPs the tile computes (no recomputed S) */
	int rows;        /* query rows per CTA */
	int tmem_cols;   /* columns the plan needs (before rounding up to a power of two) */
	uint32_t smem_bytes; /* Q and the KV stages (the plan's other regions excluded) */
} FmhaCost;

/* Fills o for c; o->clk 0 and o->bound "-" when c is no plan (bn 0). */
void sm100_fmha_cost(const FmhaCand *c, FmhaCost *o);
/* useful FLOPs / (tensor-core peak x clk): the fraction of the tensor
 * peak the tile can reach. */
double sm100_fmha_peak(const FmhaCost *o);
const char *sm100_fmha_kind_name(FmhaPlanKind k);
/* Of the tile shapes of kind (keys 128, 64, 32; stages as many as fit
 * smem_max, up to 4, 3 with K=V), the best that fits 512 TMEM columns,
 * smem_max bytes and a softmax thread's 240 registers; 0 if none fits,
 * else *best and *cost are set. FP_M64 and FP_PAIR64 only: the other kinds'
 * limits are the generator's own plan (sm100/fmha.c). */
int sm100_fmha_best(FmhaPlanKind kind, int d, int dv, int esz, int kv_shared, uint32_t smem_max,
                    FmhaCand *best, FmhaCost *cost);

#endif
