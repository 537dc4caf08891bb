/* FMHA forward family: O = softmax(scale·Q·K^T + mask)·V per (sequence,
 * query head), packed varlen sequences, MHA/GQA/MQA, optional LSE
 * (docs/ABI.md, "fmha (attention forward)"). Shared parts (parameters, plan,
 * prologue, TMA producer) live in fmha.c; each target supplies FmhaOps.
 *
 * The order a parameter travels, e.g. --head-dim:
 *   1. CLI: family_parse (family.c) reads `--head-dim 128` against the row
 *      of fmha_params (fmha.c), which names its field, range and default;
 *   2. family table: the value lands in FmhaParams.head_dim;
 *   3. config: fmha_configure copies and derives what every target uses
 *      (FmhaCfg: d, dv, group, element size, the mask's wl/wr);
 *   4. tiles: the target's FmhaOps.tiles picks tile rows, keys per tile,
 *      stages and warpgroups for it;
 *   5. layout: layout_canonical lays out the Q, K and V tiles (lq/lk/lv);
 *   6. plan: the shared-memory regions of Q/K/V, then FmhaOps.plan adds
 *      barriers, TMEM and roles, and plan_check holds it to the limits;
 *   7. name: the kernel name records it (fmha_bf16_d128_...);
 *   8. prologue: emit_prologue loads the parameters, inits the barriers and
 *      computes the CTA's rows and tiles;
 *   9. body: FmhaOps.body emits the producer and consumers from the config
 *      and plan, never from the parameter itself. */
#ifndef KGEN_FMHA_H
#define KGEN_FMHA_H

#include "abi.h"
#include "dtype.h"
#include "emit.h"
#include "layout.h"
#include "plan.h"
#include "target.h"

enum { MASK_NONE, MASK_CAUSAL, MASK_WINDOW };
#define FMHA_MASKS "none,causal,window" /* the MASK_* in order, as --mask spells them */

typedef struct FmhaParams {
	int target;
	int head_dim, head_dim_v;  /* head_dim_v 0: same as head_dim */
	int heads_q, heads_kv;
	int kv_shared;
	int mask;                  /* MASK_* */
	int window_left, window_right; /* MASK_WINDOW extents, keys */
	int lse;
	int tile_m, tile_n, stages;
	int pack_heads;            /* query heads per Q tile (1: one head per CTA) */
	int exp2_fma;              /* of every 8 exponentials, how many op_exp2_fma computes (-1: by target) */
	int s_ahead;               /* sm_90a split O: S_j before P_{j-1}'s hand-off (-1: by target) */
	int kv_multicast;          /* sm_90a split O: K/V tiles multicast in a cluster of 2 (-1: by target) */
	int dtype;
} FmhaParams;

struct FmhaRegs;

typedef struct FmhaCfg {
	const Target *t;
	int d, dv, hq, hkv, group; /* group = hq / hkv query heads per KV head */
	int kv_shared, mask, lse;
	int wl, wr;                /* visible keys j: i+Sk-Sq-wl <= j <= i+Sk-Sq+wr (causal: wl = inf, wr = 0) */
	int bm, bn, stages;        /* bm: Q-tile rows per CTA (query rows x packed heads) */
	int wgs;                   /* consumer warpgroups */
	int q_rows;                /* rows of one Q tile (one TMA box high, one MMA's M) */
	int qblocks;               /* Q tiles per CTA: bm / q_rows */
	int ohalves;               /* 2: each CTA of a pair computes half of O's columns */
	int dvc;                   /* O (and V) columns one CTA computes: dv / ohalves */
	int split;                 /* split-O plan: two warpgroups share 64 rows, O halved by columns */
	/* split O, --s-ahead 1: the scores warpgroup issues S_j before it
	 * hands P_{j-1} on and rescales its O (gen/sm90/fmha_split.c;
	 * measured slower); 0 (default, decode): the hand-off first */
	int s_ahead;
	/* sm_100a pair64: a cluster of 2 CTAs issuing M = 128 cta_group::2
	 * MMAs (docs/hardware.md, "Accumulator layout of the CTA pair"): rank
	 * h holds query rows 64h..64h+63 of the pair's 128 (q_rows 64, rows
	 * 128: the pair's), K rows h·bn/2.. of each KV tile and, of each
	 * 256-column chunk of V and O, columns 128h..128h+127 (dvc = dv/2);
	 * both CTAs' loads complete on rank 0's full barriers */
	int pair;
	/* sm_90a split O with separate K and V (gen/sm90/fmha_split.c): a
	 * cluster of 2 CTAs, rank h taking query rows 64h..64h+63 of the
	 * cluster's 128 and visiting the KV tiles of all 128; each loads half
	 * of every K and V tile's 64-column boxes and multicasts them to both,
	 * and a stage is refilled once both CTAs' consumers freed it */
	int mcast;
	int r_xrow, r_xp;          /* pair: row max / sum and P halves handed between lane halves */
	/* Head packing: a Q tile's rows are q_rows/pack query rows of pack
	 * heads each, row t = query row t/pack of head t%pack (the order a
	 * 64 x pack x q_rows/pack TMA box lands). Packed, the CTA's Q tiles
	 * take consecutive head blocks (htiles = qblocks) over the same
	 * query rows; unpacked (pack 1, htiles 1) consecutive row blocks of
	 * one head. */
	int pack, htiles;
	int e2f;                   /* exp2_fma resolved: 0..8 (ops.h exp2_fma_takes) */
	int rows;                  /* query rows per CTA: (qblocks/htiles)·q_rows/pack */
	int hcta;                  /* query heads per CTA: pack·htiles (grid y = hq/hcta) */
	DType in;
	int esz;
	TileLayout lq, lk, lv;     /* one warpgroup's Q, one K stage, one V stage */
	uint32_t q_bytes, k_bytes, v_bytes;
	Plan plan;
	int r_q, r_k, r_v;         /* r_v = r_k with kv_shared */
	int b_q, b_k, b_v;         /* full barriers; b_v = b_k with kv_shared */
	int b_kfree, b_vfree;      /* empty barriers; b_vfree = b_kfree with kv_shared */
	int r_p, r_corr, r_lsum;   /* split O: P tiles, rescale factors, row sums */
	int b_pfull, b_lsum;
	/* sm_100a: TMEM address slot; S full, rescale full, O ready, slot
	 * free, O done (one Q tile) and O final barriers (sm100/fmha.c) */
	int r_tslot;
	int b_sfull, b_cfull, b_oready, b_pvdone, b_odone, b_ofinal;
	/* decode (gen/decode.h) reuses the sm_90a split-O consumers: its K=V
	 * tiles come from `gather`, run by the whole producer warpgroup
	 * (every thread arrives on Q full and K=V full), instead of the TMA
	 * producer; NULL for fmha. */
	int (*gather)(Emit *e, const struct FmhaCfg *f, const struct FmhaRegs *r, KgErr *err);
	int producer_regs;         /* setmaxnreg of the producer warpgroup (0: the plan's) */
	/* decode: run by both split-O consumer warpgroups (256 threads) after
	 * their epilogue (the split-KV combine); NULL for fmha */
	int (*finish)(Emit *e, const struct FmhaCfg *f, const struct FmhaRegs *r, KgErr *err);
	int head_guard;            /* store only rows of heads < hq (a head block past hq) */
	/* decode at head_dim_qk = dv + 64 (split O): P tile b lives in the
	 * last 64 columns of K=V stage b, which only S reads (their RoPE
	 * keys), so Q, two K=V stages and P fit shared memory */
	int p_in_kv;
	/* decode --unnormalized 1 (split O): O stored as f32 without the
	 * 1/rowsum, and beside LSE the reference M (natural log) with O·e^(M -
	 * LSE) the normalized output (docs/ABI.md "decode") */
	int o_unnorm;
	/* decode (split O, sm_90a): O leaves through the Q tile's shared
	 * memory, free once the CTA's last S is done, so each warp stores
	 * whole rows with 16-byte st.global instead of the accumulator's
	 * 4-byte pieces (gen/sm90/consumer.c, emit_o_staged) */
	int o_stage;
	/* decode (split O, sm_90a): both consumer warpgroups complete the Q
	 * tile at their start (q0, its shared address: decode waits for the
	 * copies its consumers issued in the prologue), so the producer begins
	 * with the first K=V tile; NULL: the producer loads Q
	 * (gen/sm90/fmha_split.c, split_load_q) */
	int (*load_q)(Emit *e, const struct FmhaCfg *f, const struct FmhaRegs *r, Reg q0, KgErr *err);
	const void *ext;           /* the caller's configuration (decode: DecodeCfg) */
	char name[120];
} FmhaCfg;

/* Registers of the shared prologue. */
typedef struct FmhaRegs {
	Reg tid, warp, lane, base;
	Reg b, h, hk;              /* sequence, first query head of the CTA, KV head */
	Reg qs, sq, ks, sk;        /* first row and length of this sequence's Q and K */
	Reg m0;                    /* first query row of the CTA within the sequence */
	Reg total_q;               /* rows of Q in all sequences (LSE stride) */
	/* KV tiles: j0 first visited; [j0+1, n_lead) masked (window's left
	 * edge); [.., n_full) unmasked; [.., n_total) masked */
	Reg j0, n_lead, n_full, n_total;
	Reg vcol;                  /* first V/O column of this CTA (ohalves 2) */
	Reg rank;                  /* pair, mcast: %cluster_ctarank (pair: 0 issues the MMAs) */
	Reg tq, tk, tv;            /* generic addresses of the tensor maps */
	Reg o, lse;                /* global addresses */
	/* Optional (decode), unset when .s[0] == 0: the LSE index of head 0
	 * (total_q then holds the head stride); per-head sink logits (global
	 * address, f32 [Hq]) joining the denominator. */
	Reg lse_q0, sink;
	Reg sink_hq;               /* with sink: heads below it add their sink (0: none, split-KV parts) */
	Reg qrow;                  /* decode: the query token's row of Q (qs may name a partial's row) */
	Reg splits, split;         /* decode: split-KV parts of the row, this CTA's part */
	Reg mref;                  /* decode, o_unnorm: global address of M (LSE's layout) */
} FmhaRegs;

typedef struct FmhaOps {
	/* Tile shape, stages and warpgroups from the parameters (bm, bn,
	 * stages, wgs, q_rows, qblocks, split, ohalves), before the shared
	 * Q/K/V regions are laid out. */
	int (*tiles)(FmhaCfg *f, const FmhaParams *p, KgErr *err);
	/* Roles, registers, barriers and the rest of the plan. */
	int (*plan)(FmhaCfg *f, KgErr *err);
	/* Optional: emitted after the barrier inits, before the CTA barrier
	 * that publishes them (TMEM allocation). */
	int (*setup)(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);
	int (*body)(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);
	/* The "tiles" lines of `kgen plan`: how the work is split. */
	void (*describe)(const FmhaCfg *f, Buf *out);
} FmhaOps;

extern const FmhaOps fmha_sm90, fmha_sm100;

/* K and V arrive as one tile (kv_shared), which feeds S and P·V alike; a
 * CTA pair loads K's key half and V's column half apart even then. */
int fmha_kv_one(const FmhaCfg *f);
/* launched in clusters of more than one CTA (pair, mcast) */
int fmha_clustered(const FmhaCfg *f);

/* Lays out Q, K and V for the tiles in f and plans the kernel: the shared
 * Q/K/V regions and the barriers the shared producer fills, then the
 * target's FmhaOps.plan (plan_check is left to
 * the caller). A target's tiles function calls it on a copy of f to learn
 * what a candidate really needs, so no budget is modelled twice. */
int fmha_plan_kernel(FmhaCfg *f, KgErr *err);
/* Whether any KV tile can be visible to every row of a CTA: a window
 * narrower than bm + bn - 1 keys never covers a whole tile for all rows,
 * so no unmasked loop is emitted (it would be dead code). */
int fmha_has_unmasked_tiles(const FmhaCfg *f);
int fmha_emit_producer(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);
/* The query row within the sequence (into rowq) and the head of CTA-tile
 * row trow = q_rows·w + t (Q tile w, tile row t). Returns r->h unpacked,
 * else a new register. */
/* Loads the run-time softmax_scale parameter and returns it times log2(e)
 * in a new f32 register: the softmax computes exp2(s·scale·log2(e) - m)
 * (docs/ABI.md, "fmha (attention forward)"). */
Reg fmha_emit_scale_log2(Emit *e);
/* Allocates the prologue registers fmha and decode share (gen/fmha.c). */
void fmha_regs_new(Emit *e, FmhaRegs *r);
Reg fmha_emit_row_head(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg trow, Reg rowq);

/* The KV tiles the CTA whose first query row is m0 visits (the prologue's
 * tile counts) and how many of them are masked (fmha_est.c). */
void fmha_cta_tiles(const FmhaCfg *f, int64_t sq, int64_t sk, int64_t m0, int64_t *visited,
                    int64_t *masked);
/* Validates the parameters and plans the kernel (tiles, layout, plan,
 * name): what generate and plan start from. */
int fmha_configure(FmhaCfg *f, const FmhaParams *p, KgErr *err);
/* The launch-time estimate of the plan at this shape, `kgen plan`'s
 * "estimate" lines (gen/estimate.h); fmha_predict from the parameters,
 * shape = {batch, seqlen-q, seqlen-k}. */
int fmha_predict(const void *params, const uint64_t *shape, Buf *text, KgErr *err);
int fmha_estimate(const FmhaCfg *f, uint64_t batch, uint64_t sq, uint64_t sk, Buf *out,
                  KgErr *err);

#endif
