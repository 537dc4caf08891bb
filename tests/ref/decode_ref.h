/* Decode attention in float64 (docs/ABI.md "decode") and the reference
 * quantizer that writes each KV cache format from BF16 values, so tests
 * build real caches. The attention reads the cache through the same
 * dequantization the kernel must apply, so it measures the kernel's
 * arithmetic and not the format's rounding. */
#ifndef KGEN_REF_DECODE_REF_H
#define KGEN_REF_DECODE_REF_H

#include <stddef.h>
#include <stdint.h>

/* OCP E4M3 (bias 7, 3 mantissa bits, max 448, 0x7f/0xff NaN, no Inf).
 * Encoding rounds to nearest even and saturates at ±448 (the quantizer's
 * scales keep every value within it). */
uint8_t decode_f64_to_e4m3(double v);
double decode_e4m3_to_f64(uint8_t b);

/* A KV cache format (docs/ABI.md, "Cache formats"), resolved
 * for one head_dim_qk, written here apart from the generator's table
 * (gen/decode_format.c) so a slip in either shows as a mismatch. */
typedef struct DecodeRefFormat {
	const char *name;
	int d_qk, d_nope;          /* RoPE: the last 64 */
	int nope_fp8;              /* NoPE E4M3 (else BF16) */
	int scale;                 /* 0 none, 1 UE8M0 byte, 2 fp32 */
	int group;                 /* NoPE values per scale */
	size_t row_bytes;          /* one token's row, and the stride of rows in a page */
	size_t rope_at;            /* the RoPE BF16 values' offset in the row */
	long scale_at;             /* the scales' offset in the row; -1: the page's tail */
	size_t tail_bytes;         /* per token in the page's tail */
	size_t page_align;
} DecodeRefFormat;

/* Fills *f for a format name and head_dim_qk (0: the format's own);
 * -1 for an unknown name or a head_dim_qk the format does not store. */
int decode_ref_format(const char *name, int d_qk, DecodeRefFormat *f);
size_t decode_ref_page_bytes(const DecodeRefFormat *f, int ps);
/* Token idx (= page·ps + offset) of a cache of ps-token pages: its row and
 * its scales (NULL without scales). */
uint8_t *decode_ref_token(const DecodeRefFormat *f, uint8_t *cache, int ps, uint32_t idx);
uint8_t *decode_ref_token_scales(const DecodeRefFormat *f, uint8_t *cache, int ps, uint32_t idx);
/* Quantizes d_qk BF16 values (bit patterns) into a token's row and
 * scales: per scale group s = max(amax/448, 1e-4), rounded up to a power of
 * two for fp8-v4 and fp8-v32 (FlashMLA's quantizers) and to fp32 for
 * fp8-token; values / s to E4M3; RoPE (and bf16 rows) kept as BF16. */
void decode_ref_quantize(const DecodeRefFormat *f, const uint16_t *bf16, uint8_t *row, uint8_t *scales);
/* The d_qk values the kernel attends: E4M3 · scale, BF16 as is. */
void decode_ref_dequantize(const DecodeRefFormat *f, const uint8_t *row, const uint8_t *scales, double *out);

/* One attention row: query q (d values) against n keys k[i·d ..] (V = the
 * first dv values of each key), scores scaled by `scale`; with a sink,
 * exp(sink) joins the denominator. o gets dv values, *lse the natural-log
 * logsumexp (sink included). No keys: o = 0, lse = -inf (sink: lse = sink). */
void decode_ref_row(const double *q, const double *k, size_t n, int d, int dv, double scale,
                    int has_sink, double sink, double *o, double *lse);

#endif
