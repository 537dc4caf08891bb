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

enum { DEC_FMT_FP8_V4 };

/* A cache format: the one place its byte layout is described (FlashMLA's
 * V4 "MODEL1" layout, docs/ABI.md "decode"). */
typedef struct DecodeFormat {
	const char *name;
	int d_qk, d_nope, d_rope;  /* elements */
	int row_bytes;             /* NoPE E4M3 + RoPE BF16 of one token */
	int group;                 /* NoPE values per UE8M0 scale */
	int scale_bytes;           /* per token, in the page's tail (groups + pad) */
	int page_align;            /* a page's bytes round up to a multiple of this */
} DecodeFormat;

extern const DecodeFormat decode_formats[];

typedef struct DecodeParams {
	int target;
	int format;
	int heads_q;
	int topk, page_size;
	int topk_extra, page_size_extra; /* topk_extra 0: no second source */
	int topk_length;                 /* per-row valid lengths of the index lists */
	int sink;
} DecodeParams;

typedef struct DecodeCfg {
	FmhaCfg f;                 /* the consumers' configuration */
	const DecodeFormat *fmt;
	int hq, hblocks;           /* query heads; 64-head blocks (grid x) */
	int nsrc;                  /* 1 or 2 sources */
	int topk[2], ps[2];        /* per source: index-list length, page size */
	uint32_t page_bytes[2];    /* per source: bytes from one page to the next */
	int has_len, sink;
	int r_list, r_count;       /* smem: the compacted key list and its length */
	int r_chunks;              /* smem: valid entries per 32-entry chunk of the index lists */
	int list_len;              /* entries: topk[0] + topk[1] */
	int q_pad_slices;          /* zero 64-column slices planned after Q (DecodeOps.configure) */
	int cons_tid0, cons_threads; /* the consumer threads that run the split-KV combine */
} DecodeCfg;

typedef struct DecodeOps {
	/* The producer warpgroup: Q, then every K=V tile of the key list. */
	int (*gather)(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);
	int producer_regs;
	const char *how;           /* `kgen plan`: where dequantization happens */
	/* Optional: the target's consumer tiles and roles, set over the
	 * sm_90a split-O defaults before the tiles are laid out. */
	int (*configure)(DecodeCfg *d, KgErr *err);
	/* Optional: `kgen plan` lines bounding the kernel at the target's rates. */
	void (*bound)(const DecodeCfg *d, Buf *out);
} DecodeOps;

extern const DecodeOps decode_sm90, decode_sm100;

/* The gathering producer warpgroup (gen/sm90/decode.c): Q, then every K=V
 * tile of the key list, as generic-proxy stores into fmha's K-major
 * 128-byte swizzled tiles, published by fence.proxy.async and the K=V full
 * barrier; target-neutral PTX, so any consumer whose MMA reads shared
 * memory through the async proxy can take it. r->tid: 0..127 within the
 * warpgroup. */
int decode_gather_warpgroup(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);

/* Bytes of one page of `ps` tokens: rows, then the scale tail, padded. */
uint32_t decode_page_bytes(const DecodeFormat *fmt, int ps);

#endif
