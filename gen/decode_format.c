/* The decode family's KV cache formats (gen/decode.h): the rows of rules
 * and the byte layout they resolve to for one head_dim_qk, shared by every
 * target's producer (docs/ABI.md, "Cache formats"). */
#include "decode.h"

/* Columns: name, NoPE E4M3, scale kind, NoPE values per scale (0: one per
 * token), scales inline, tail bytes per token, page alignment, head_dim_qk
 * 512 and 576 stored.
 * - bf16: the row is the d_qk BF16 values.
 * - fp8-token: NoPE E4M3, one fp32 inverse scale (dequantized = E4M3 x
 *   scale) padded to 16 bytes, then the RoPE BF16 values.
 * - fp8-v4 (DeepSeek-V4, FlashMLA's MODEL1): 448 E4M3 + 64 BF16 RoPE per
 *   row; after a page's rows, 8 bytes per token: 7 UE8M0 exponents, one per
 *   64 NoPE values, and a pad byte; a page rounds up to a multiple of 576.
 * - fp8-v32 (DeepSeek-V3.2, FlashMLA's V32 FP8 sparse): 512 E4M3, 4 fp32
 *   scales (one per 128 NoPE values), 64 BF16 RoPE: 656 bytes. */
const DecodeFormatRow decode_format_rows[DEC_FMT_COUNT] = {
	[DEC_FMT_BF16] = {"bf16", 0, DEC_SCALE_NONE, 0, 0, 0, 0, 1, 1},
	[DEC_FMT_FP8_TOKEN] = {"fp8-token", 1, DEC_SCALE_F32, 0, 1, 0, 0, 1, 1},
	[DEC_FMT_FP8_V4] = {"fp8-v4", 1, DEC_SCALE_UE8M0, 64, 0, 8, 576, 1, 0},
	[DEC_FMT_FP8_V32] = {"fp8-v32", 1, DEC_SCALE_F32, 128, 1, 0, 0, 0, 1},
};

enum { ROPE = 64, ALIGN = 16 };

static int
round_up(int x, int a)
{
	return (x + a - 1) / a * a;
}

int
decode_format_resolve(int format, int d_qk, DecodeFormat *fmt, KgErr *err)
{
	const DecodeFormatRow *row;
	int nope_bytes, inline_bytes = 0, elem;

	if (format < 0 || format >= DEC_FMT_COUNT)
		return kg_fail(err, "--format=%d: not a cache format", format);
	row = &decode_format_rows[format];
	if (!d_qk)
		d_qk = row->dqk_512 ? 512 : 576;
	if ((d_qk == 512 && !row->dqk_512) || (d_qk == 576 && !row->dqk_576) || (d_qk != 512 && d_qk != 576))
		return kg_fail(err, "--head-dim-qk=%d with --format=%s: the format stores head_dim_qk %s", d_qk,
		               row->name, row->dqk_512 && row->dqk_576 ? "512 or 576" : row->dqk_512 ? "512" : "576");
	fmt->name = row->name;
	fmt->d_qk = d_qk;
	fmt->d_rope = ROPE;
	fmt->d_nope = d_qk - ROPE;
	fmt->nope_fp8 = row->nope_fp8;
	fmt->scale = row->scale;
	fmt->group = row->scale == DEC_SCALE_NONE ? 0 : row->group ? row->group : fmt->d_nope;
	fmt->nscales = fmt->group ? fmt->d_nope / fmt->group : 0;
	elem = row->scale == DEC_SCALE_UE8M0 ? 1 : 4;
	nope_bytes = fmt->d_nope * (row->nope_fp8 ? 1 : 2);
	fmt->scale_at = -1;
	fmt->scale_bytes = 0;
	fmt->scale_entry = 0;
	if (fmt->nscales && row->scales_inline) {
		/* padded so the RoPE values and the next row stay 16-byte aligned */
		inline_bytes = round_up(fmt->nscales * elem, ALIGN);
		fmt->scale_at = nope_bytes;
		fmt->scale_entry = fmt->nscales * elem;
	} else if (fmt->nscales) {
		fmt->scale_bytes = row->tail_bytes;
		fmt->scale_entry = row->tail_bytes;
	}
	fmt->rope_at = nope_bytes + inline_bytes;
	fmt->row_bytes = fmt->rope_at + 2 * ROPE;
	fmt->page_align = row->page_align ? row->page_align : ALIGN;
	return 0;
}

uint32_t
decode_page_bytes(const DecodeFormat *fmt, int ps)
{
	uint32_t b = (uint32_t)ps * (uint32_t)(fmt->row_bytes + fmt->scale_bytes);

	return (b + (uint32_t)fmt->page_align - 1) / (uint32_t)fmt->page_align * (uint32_t)fmt->page_align;
}

uint32_t
decode_scale_offset(const DecodeFormat *fmt, int ps, int off)
{
	if (fmt->scale_at >= 0)
		return (uint32_t)off * (uint32_t)fmt->row_bytes + (uint32_t)fmt->scale_at;
	return (uint32_t)ps * (uint32_t)fmt->row_bytes + (uint32_t)off * (uint32_t)fmt->scale_bytes;
}
