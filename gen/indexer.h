/* The lightning-indexer family (docs/ABI.md "indexer"): DeepSeek-V3.2/V4's
 * key scoring over a paged FP8 indexer cache, fused with a top-k select
 * that writes the decode family's `sparse` index lists. Shared code holds
 * the configuration and the prologue (gen/indexer.c), the FMA scoring
 * (gen/indexer_fma.c), the tensor-core scorings' tiles
 * (gen/indexer_tile.c), the -inf fill of masked logits
 * (gen/indexer_fill.c) and the top-k (gen/indexer_topk.c); a target
 * supplies the scoring. */
#ifndef KGEN_INDEXER_H
#define KGEN_INDEXER_H

#include "emit.h"
#include "err.h"
#include "plan.h"
#include "target.h"

enum { IDX_FMT_FP8, IDX_FMT_FP4, IDX_FMT_NVFP4 };

/* A key-cache format: the one place its byte layout is described
 * (docs/ABI.md "indexer"). */
typedef struct IndexerFormat {
	const char *name;
	int d;           /* key elements */
	int key_bytes;   /* bytes of one key's values */
	int scale_bytes; /* bytes of one key's scale(s), in the page's tail */
	int value_bits;  /* 8: E4M3; 4: E2M1 */
	int group;       /* values per group scale; 0: one fp32 scale per key */
	int nv;          /* NVFP4: UE4M3 group scales (else UE8M0) and a per-tensor fp32 scale, K_global */
} IndexerFormat;

extern const IndexerFormat indexer_formats[];

typedef struct IndexerParams {
	int target;
	int format;
	int heads;
	int topk;
	int page_size;
	int score;     /* IDX_SCORE_*: how keys are scored */
} IndexerParams;

enum { IDX_SCORE_FMA, IDX_SCORE_WGMMA, IDX_SCORE_TCGEN05 };

/* How a tensor-core scoring takes fp4 keys (E2M1 with UE8M0 per 32):
 * not at all; as the block-scaled MMA's E2M1 operand with the exponents
 * as its scale factors; or turned into E4M3 as they are gathered, the
 * key's four exponents folded into one scale (gen/w4a8.h,
 * docs/indexer.md "FP4 keys as E4M3"). */
enum { IDX_MMA_FP4_NONE, IDX_MMA_FP4_BLOCK_SCALED, IDX_MMA_FP4_E4M3 };

/* IDX_HISTS: the fused top-k's radix histograms, a set of 4 for each of
 * its two windows and one for the merge (docs/indexer.md, "Fused top-k");
 * IDX_WIN_MIN: the least keys of a window. */
enum { IDX_THREADS = 256, IDX_TILE = 64, IDX_HISTS = 12, IDX_WIN_MIN = 2048 };

typedef struct IndexerCfg {
	const Target *t;
	const IndexerFormat *fmt;
	int heads, topk, ps, log2ps;
	int mma;                       /* tensor-core scoring (IDX_SCORE_WGMMA, IDX_SCORE_TCGEN05) */
	uint32_t page_bytes;
	Plan plan;
	int unit;                      /* keys a CTA takes in a row before the next part's (split + splits·m) */
	int win;                       /* keys of a top-k window: a power of two >= max(2·topk, IDX_WIN_MIN) */
	int r_q, r_w, r_hist, r_state; /* smem regions */
	int r_keys, r_scan;            /* the top-k's windows (keys, then their row positions), its scan */
	int r_tiles, r_scales, r_sums; /* mma: key tiles, their scales, per-warp head sums (IndexerOps.head_sums) */
	int bufs;                      /* key tiles (and scales) a warpgroup, consecutive in r_tiles (r_scales) */
	int r_tslot, b_mma;            /* the target's own (IndexerOps.plan_mma): TMEM address, MMA barrier */
	int r_sfb;                     /* sm_100a fp4: Q's scale-factor image (all 2^0) */
	int fp4_e4m3;                  /* fp4 keys gathered as E4M3 (IDX_MMA_FP4_E4M3) */
	int r_lut;                     /* ... by these byte tables (gen/w4a8.h) */
	char name[96];
} IndexerCfg;

/* The registers the prologue sets, which the scoring and the top-k read. */
typedef struct IndexerRegs {
	Reg tid, b, row, n;     /* thread, sequence, query row b·s_q + t, visible keys */
	Reg base;               /* aligned shared base */
	Reg bt;                 /* global: block_table row of sequence b */
	Reg kv;                 /* global: the key cache */
	Reg logits;             /* global: logits row of this query row */
	Reg max_len;
	Reg kglobal;            /* f32: the per-tensor key scale (NVFP4 only) */
	Reg split, splits;      /* this CTA's part of the row's keys, of how many */
} IndexerRegs;

typedef struct IndexerOps {
	/* logits[row, j] for the visible keys j < n of this CTA's part
	 * (split of splits: keys or tiles split + splits·m, interleaved):
	 * each thread scores its keys against the H query heads in shared
	 * memory (f32) */
	int (*score)(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err);
	const char *how; /* `kgen plan`: how the scores are computed */
	/* The same on the tensor cores, NULL where there is none: Q staged as
	 * E4M3 by the function itself, keys in tiles of IDX_TILE; logits of a
	 * tile are stored by other threads than the select reads them with,
	 * so the caller puts a CTA barrier after it. */
	int (*score_mma)(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err);
	const char *how_mma;
	int mma_score; /* the --score value that selects score_mma */
	int mma_fp4;   /* IDX_MMA_FP4_*: whether and how score_mma takes fp4 keys */
	int unit_mma;  /* score_mma's keys per part before the next part's (docs/ABI.md "indexer", "Split rows") */
	int head_sums; /* score_mma sums the heads of a key across warps: the shared plan gives it IndexerCfg.r_sums */
	int copy_bufs; /* fp8 key tiles a warpgroup's copies rotate through (0: one tile, filled before its MMAs) */
	int q_fenced;  /* every thread fences its generic writes and meets the others at a CTA barrier before the
	                * first MMA, so the prologue's Q tile needs no proxy fence of its own */
	/* NULL, or what score_mma needs beyond the shared regions (TMEM,
	 * barriers), added to the plan before it is checked */
	int (*plan_mma)(IndexerCfg *c, KgErr *err);
} IndexerOps;

extern const IndexerOps indexer_sm90, indexer_sm100;

/* The FMA scoring every target shares (gen/indexer_fma.c): IndexerOps.score
 * and its `how`. */
int indexer_score_fma(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err);

/* Scratch of the tile functions below (the caller's registers, so that
 * its kernel names them). */
typedef struct IdxTileScratch {
	Reg x, key, pt, j, d, pg; /* b32 */
	Reg a, o;                 /* b64 */
	Reg v[4];                 /* b32: one 16-byte chunk */
	Reg sc;                   /* f32 */
	Reg p, pl;                /* pred */
} IdxTileScratch;

/* The tensor-core scorings' key tile i (keys i·keys ..) from the paged
 * cache into shared memory: `threads` threads (this one `id`) copy 16-byte
 * chunks, chunk id + threads·k being part (chunk % 8) of key (chunk / 8),
 * into the K-major 128-byte-swizzled tile at `tile` (zeros past n); then
 * thread id < keys stores its key's fp32 scale at scs + 4·id (0 past n).
 * fp4 keys, block-scaled: each chunk holds 16 E2M1 codes in its low 8
 * bytes, 8 bytes of padding after (the operand image kind::mxf8f6f4 reads,
 * docs/hardware.md, "Scale-factor images"), and the key's UE8M0 word goes
 * to the A scale-factor image at scs, byte layout_sf_offset(id, 0) (0 past
 * n). fp4 keys as E4M3 (c->fp4_e4m3) go through the two-step form
 * below. */
void indexer_emit_key_tile(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                           Reg i, Reg id, Reg tile, Reg scs, int keys, int threads);

/* fp4 keys as E4M3 (c->fp4_e4m3) in two steps, so that a scoring issues
 * the next tile's loads under the current tile's MMAs: _load issues every
 * global load of tile i into the registers of `l` (half a key's codes a
 * thread, the key's exponent word), _store turns them into E4M3 in the
 * tile and the key's scale at scs + 4·key. The registers are the
 * caller's, from indexer_key_tile_regs. */
typedef struct IdxTileLoad {
	Reg v[2][4]; /* 32 E2M1 codes in 16 bytes each */
	Reg sc;      /* the key's exponent word */
} IdxTileLoad;
void indexer_key_tile_regs(Emit *e, const IndexerCfg *c, IdxTileLoad *l, int keys, int threads);
void indexer_emit_key_tile_load(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                                const IdxTileLoad *l, Reg i, Reg id, int keys, int threads);
void indexer_emit_key_tile_store(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                                 const IdxTileLoad *l, Reg i, Reg id, Reg tile, Reg scs, int keys, int threads);

/* fp8 keys by cp.async (PTX ISA "cp.async"): a tile of IDX_TILE keys
 * copied by 128 threads (this one `id`) straight into the swizzled tile
 * and its scales, with nothing in registers, so a scoring can copy tiles
 * ahead into a ring of buffers while the current one's MMAs run. Warp w
 * copies key rows 16w .. 16w + 15, the rows of A its own part of a
 * wgmma reads (docs/indexer.md, "Tensor-core scoring"): lane l part l % 8
 * of rows 16w + l / 8 + 4q, and lanes 0-3 the 16-byte chunk of the
 * page's tail with the scales of keys 16w + 4l .. 16w + 4l + 3. Keys past
 * n are zero-filled (source size 0); a scale chunk whose first key is
 * visible is copied whole. A warp's rows lie in one page, whose number
 * comes from the block table one step ahead, so the copies do not wait
 * for a block-table load: _pages of tile i loads it into `pg`, and _copy
 * of tile i issues the copies from `pg` and commits them as one group.
 * The caller waits for the group (cp.async.wait_group) and fences it for
 * the async proxy before its MMAs read the tile. */
typedef struct IdxTileCopy {
	Reg pg;         /* b32: the page of this warp's rows in the tile _pages loaded (0 past n) */
	Reg w16, row0;  /* b32: the warp's first key row in a tile (16·warp), this lane's (w16 + lane / 8) */
	Reg dst0, dst1; /* b32: its even and odd chunks' offsets in a tile (their swizzles differ) */
	Reg off0, soff; /* b64: its first chunk's bytes in a page the tile starts; its scale chunk's */
} IdxTileCopy;
void indexer_tile_copy_init(Emit *e, const IndexerCfg *c, IdxTileCopy *k, Reg id);
void indexer_emit_tile_pages(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                             const IdxTileCopy *k, Reg i);
void indexer_emit_tile_copy(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                            const IdxTileCopy *k, Reg i, Reg id, Reg tile, Reg scs);

/* The query row's Q (heads x 128 E4M3) into the same K-major swizzled
 * layout at q0, `rows` rows (zeros past the heads) by `threads` threads
 * (this one `id`), 16 bytes a chunk. */
void indexer_emit_q_tile(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg q0, Reg id, int rows, int threads);
extern const char indexer_how_fma[];

/* A scoring's logit of the part's local key l (docs/indexer.md, "Fused
 * top-k"), under pred (NULL: always): kept for the chunk select's first
 * round while l < 2·win, as a key at slot l of the windows' space (its row
 * position follows from l, so it is not stored), its top byte counted in
 * window A's first histogram. Nothing for the logits alone (topk 0). */
void indexer_emit_keep(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg l, Reg logit, const Reg *pred);

/* logits[row, j] = -inf for n <= j < max_len: by the one CTA after the
 * fused top-k's join, or (every_part, the logits alone) by every part of
 * the row, each its own share. */
void indexer_emit_fill(Emit *e, const IndexerRegs *r, int every_part);

/* The fused top-k after the scoring (gen/indexer_topk.c): each part's
 * chunk select, the join, the -inf fill, the list (or the merge). */
void indexer_emit_topk(Emit *e, const IndexerCfg *c, const IndexerRegs *r);

/* Bytes of one page of ps keys: ps key rows, then ps scales. */
uint32_t indexer_page_bytes(const IndexerFormat *fmt, int ps);

#endif
