/* Decode attention family (docs/ABI.md "decode"): one query token per CTA
 * row block, its heads packed into the MMA's M, keys gathered from a paged
 * FP8 cache by index (DeepSeek-V4 sparse attention). The consumers are
 * fmha's sm_90a split-O warpgroups (S = Q·K^T, online softmax, O += P·V
 * over a K=V tile); decode supplies the configuration, the prologue (which
 * compacts the valid indices of both sources into one key list) and, per
 * target, the producer that gathers and dequantizes K=V tiles. */
#ifndef KGEN_DECODE_H
#define KGEN_DECODE_H

#include "fmha.h"

enum { DEC_FMT_BF16, DEC_FMT_FP8_TOKEN, DEC_FMT_FP8_V4, DEC_FMT_FP8_V32, DEC_FMT_COUNT };
enum { DEC_SCALE_NONE, DEC_SCALE_UE8M0, DEC_SCALE_F32 };

/* A cache format's rules: one row of decode_format_rows (gen/decode_format.c). */
typedef struct DecodeFormatRow {
	const char *name;
	int nope_fp8;              /* NoPE values E4M3 (else BF16) */
	int scale;                 /* DEC_SCALE_*: how a NoPE scale is stored */
	int group;                 /* NoPE values per scale; 0: one scale per token */
	int scales_inline;         /* scales follow the NoPE bytes in the row (else: the page's tail) */
	int tail_bytes;            /* per token in the page's tail (scales + pad) */
	int page_align;            /* a page's bytes round up to a multiple of this (0: none) */
	int dqk_512, dqk_576;      /* head_dim_qk the format stores */
} DecodeFormatRow;

extern const DecodeFormatRow decode_format_rows[DEC_FMT_COUNT];

/* A cache format resolved for one head_dim_qk: the byte layout of a token
 * and a page (docs/ABI.md, "Cache formats"), the one place every
 * target's producer reads it from. */
typedef struct DecodeFormat {
	const char *name;
	int d_qk, d_nope, d_rope;  /* elements */
	int nope_fp8, scale;       /* as the row */
	int nscales;               /* scales per token (0: none) */
	int group;                 /* NoPE values per scale (d_nope: one per token) */
	int row_bytes;             /* bytes from one token's row to the next within a page */
	int rope_at;               /* byte offset of the 64 BF16 RoPE values in the row */
	int scale_at;              /* byte offset of the scales in the row; -1: in the page's tail */
	int scale_entry;           /* bytes a producer loads for one token's scales (4, 8 or 16) */
	int scale_bytes;           /* per token in the page's tail (0: scales inline or none) */
	int page_align;            /* a page's bytes round up to a multiple of this */
} DecodeFormat;

/* Fills *fmt for format `format` (DEC_FMT_*) and head_dim_qk d_qk (0: the
 * format's own, 576 for fp8-v32, else 512); errors name the parameter. */
int decode_format_resolve(int format, int d_qk, DecodeFormat *fmt, KgErr *err);
/* Bytes of one page of `ps` tokens: rows, then the scale tail, padded. */
uint32_t decode_page_bytes(const DecodeFormat *fmt, int ps);
/* The byte offset, from its page, of token `off`'s scales. */
uint32_t decode_scale_offset(const DecodeFormat *fmt, int ps, int off);

/* How a source names its keys (docs/ABI.md "decode"): an index list per
 * query row, or a block table and per-sequence lengths (dense). */
enum { DEC_ADDR_SPARSE, DEC_ADDR_PAGED };

typedef struct DecodeParams {
	int target;
	int format;
	int head_dim_qk;
	int heads_q;
	int topk, page_size;
	int topk_extra, page_size_extra; /* topk_extra 0: no second source */
	int topk_length;                 /* per-row valid lengths of the index lists */
	int addressing, addressing_extra; /* DEC_ADDR_* of each source */
	int sink;
	int unnormalized;                /* O without 1/rowsum (f32) and M; no split-KV, no sink */
	int stage_rows;                  /* sm_90a: the staged gather where it fits (DecodeOps.stage_rows) */
} DecodeParams;

typedef struct DecodeCfg {
	FmhaCfg f;                 /* the consumers' configuration */
	DecodeFormat fmtv;          /* the cache format's layout */
	const DecodeFormat *fmt;   /* &fmtv */
	int hq, hblocks;           /* query heads; 64-head blocks (grid x) */
	int nsrc;                  /* 1 or 2 sources */
	int topk[2], ps[2];        /* per source: index-list length (0: paged), page size */
	int paged[2];              /* per source: block table + lengths instead of indices */
	int nsparse, sp[2];        /* the sparse sources, in order: they fill the key list */
	uint32_t page_bytes[2];    /* per source: bytes from one page to the next */
	int has_len, sink, unnorm;
	int r_list, r_count;       /* smem: the compacted key list and its length */
	int r_chunks;              /* smem: valid entries per 32-entry chunk of the index lists */
	int r_keys;                /* smem, with a paged source: a ring of 3 tiles' resolved keys (-1: none) */
	int raw_slots;             /* staged gather (DecodeOps.stage_rows): slots of the token-row ring (0: none) */
	int r_raw, b_raw;          /* smem: the ring's slots; mbarriers: "token rows full", one per slot */
	uint32_t raw_bytes;        /* bytes of one slot: 64 rows, then 64 16-byte scale pairs (tail scales), then 64 flags */
	uint32_t raw_scales_at, raw_flags_at; /* offsets in a slot */
	int list_len;              /* entries: topk[0] + topk[1] */
	int q_pad_slices;          /* zero 64-column slices planned after Q (DecodeOps.configure) */
	int cons_tid0, cons_threads; /* the consumer threads that run the split-KV combine */
} DecodeCfg;

/* The split-KV completion word counters[b, y, hb] (docs/ABI.md "decode"):
 * three counts of the row's N = splits·ohalves parts, DEC_CNT_BITS each:
 * parts started (from bit 0), parts done (DEC_CNT_DONE_AT) and slices
 * claimed (DEC_CNT_CLAIM_AT), so N stays below 2^10: splits at most
 * DEC_MAX_SPLITS (ohalves 2 on sm_100a). */
enum {
	DEC_CNT_BITS = 10,
	DEC_CNT_MASK = (1 << DEC_CNT_BITS) - 1,
	DEC_CNT_START = 1,
	DEC_CNT_DONE_AT = DEC_CNT_BITS,
	DEC_CNT_DONE = 1 << DEC_CNT_DONE_AT,
	DEC_CNT_CLAIM_AT = 2 * DEC_CNT_BITS,
	DEC_CNT_CLAIM = 1 << DEC_CNT_CLAIM_AT,
	DEC_MAX_SPLITS = 256,
};

typedef struct DecodeOps {
	/* The producer warpgroup: Q (unless load_q), then every K=V tile of
	 * the key list. */
	int (*gather)(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);
	int producer_regs;
	const char *how;           /* `kgen plan`: where dequantization happens */
	/* Optional: the target's consumer tiles and roles, set over the
	 * sm_90a split-O defaults before the tiles are laid out. */
	int (*configure)(DecodeCfg *d, KgErr *err);
	/* Optional: `kgen plan` lines bounding the kernel at the target's rates. */
	void (*bound)(const DecodeCfg *d, Buf *out);
	/* Optional: the producer's registers for a cache format (NULL: producer_regs) */
	int (*regs_for)(const DecodeFormat *fmt);
	/* Split-KV parts claim head slices and wait for the count (decode.c
	 * decode_finish); 0: the last part combines every slice. Only where the
	 * waiting path has run interleaved on the emulator (tests/emu
	 * test_emu_decode.c, a row's parts co-resident: KRT_EMU_CORESIDENT). */
	int combine_wait;
	/* The gather prefetches token rows into L2 decode_prefetch_tiles ahead
	 * (gen/sm90/decode.c); 0: it does not (its registers are not there). */
	int l2_prefetch;
	/* The gather stages each tile's raw token rows in a ring of shared
	 * memory with cp.async.bulk copies DEC_RAW_SLOTS tiles ahead and
	 * dequantizes from there (gen/sm90/decode.c, docs/ABI.md "decode"),
	 * wherever one bf16 K=V stage and the ring fit; 0: it loads the rows
	 * into registers. */
	int stage_rows;
	/* Optional: the consumers complete Q at their start (FmhaCfg.load_q);
	 * NULL: the gather loads it, before its first tile. */
	int (*load_q)(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg q0, KgErr *err);
	/* Optional: copies Q into its tile in the prologue, before the key list
	 * is compacted (load_q then waits for the copies); NULL: Q's rows are
	 * prefetched into L2 there instead. */
	void (*issue_q)(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg q0);
} DecodeOps;

extern const DecodeOps decode_sm90, decode_sm100;

/* The gathering producer warpgroup (gen/sm90/decode.c): Q (unless
 * FmhaCfg.load_q: the consumers complete it), then every K=V
 * tile of the key list, as generic-proxy stores into fmha's K-major
 * 128-byte swizzled tiles, published by fence.proxy.async and the K=V full
 * barrier; target-neutral PTX, so any consumer whose MMA reads shared
 * memory through the async proxy can take it. r->tid: 0..127 within the
 * warpgroup. */
int decode_gather_warpgroup(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);
/* Tiles ahead of its loads the gather prefetches the token rows into L2. */
int decode_prefetch_tiles(const DecodeCfg *d);
/* Staged gather: tiles the copies into the ring run ahead of the tile
 * being dequantized (the ring's slots). */
enum { DEC_RAW_SLOTS = 2 };

/* Emits, for every thread, the keys paged source s gives query rows of
 * sequence r->b: min(seqlens[b], max_pages·page_size), at least 0. */
Reg decode_emit_paged_len(Emit *e, const DecodeCfg *d, const FmhaRegs *r, int s);
/* With a paged source, emits the resolution of 64-key tile j into the
 * 64 words at shared address dst, by threads tid < 64 of the caller's
 * (key j·64 + tid each): the token, bit 31 set for source 1, or -1 for no
 * key (past r->sk, or a block-table entry outside the cache). n0: from
 * decode_emit_main_count. The caller orders the stores before the reads
 * (a barrier) and the previous reads of dst before the stores. */
void decode_emit_tile_keys(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg n0, Reg j, Reg tid, Reg dst);
/* Emits the count of source 0's keys (the first keys of the list each
 * row attends): its compacted entries, or its paged length. */
Reg decode_emit_main_count(Emit *e, const DecodeCfg *d, const FmhaRegs *r);

#endif
