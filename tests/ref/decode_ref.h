/* Decode attention in float64 (docs/ABI.md "decode") and the reference
 * quantizer that writes the fp8-v4 KV cache from BF16 values, so tests
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

/* fp8-v4 (DeepSeek-V4, FlashMLA's MODEL1): a page of ps tokens is ps rows
 * of 576 bytes (448 E4M3 NoPE values, then 64 BF16 RoPE values), then ps
 * scale entries of 8 bytes (7 UE8M0 exponents, one per 64 NoPE values, and
 * a zero pad byte); the page's size rounds up to a multiple of 576. */
enum {
	DECODE_V4_D = 512,
	DECODE_V4_NOPE = 448,
	DECODE_V4_ROPE = 64,
	DECODE_V4_ROW = 576,
	DECODE_V4_SCALES = 8,
	DECODE_V4_GROUP = 64,
};
size_t decode_v4_page_bytes(int ps);
/* Token idx (= page·ps + offset) of a cache of ps-token pages: its row and
 * its scale entry. */
uint8_t *decode_v4_row(uint8_t *cache, int ps, uint32_t idx);
uint8_t *decode_v4_scales(uint8_t *cache, int ps, uint32_t idx);
/* Quantizes 512 BF16 values (bit patterns): per 64 NoPE values the scale
 * 2^ceil(log2(max(amax/448, 1e-4))) as UE8M0, values / scale to E4M3; the
 * RoPE values kept as BF16. */
void decode_v4_quantize(const uint16_t *bf16, uint8_t *row, uint8_t *scales);
/* The 512 values the kernel attends: E4M3 · 2^(e-127), RoPE as is. */
void decode_v4_dequantize(const uint8_t *row, const uint8_t *scales, double *out);

/* One attention row: query q (d values) against n keys k[i·d ..] (V = the
 * first dv values of each key), scores scaled by `scale`; with a sink,
 * exp(sink) joins the denominator. o gets dv values, *lse the natural-log
 * logsumexp (sink included). No keys: o = 0, lse = -inf (sink: lse = sink). */
void decode_ref_row(const double *q, const double *k, size_t n, int d, int dv, double scale,
                    int has_sink, double sink, double *o, double *lse);

#endif
