/* The decode family's cache formats (gen/decode_format.c) against byte
 * layouts derived by hand (docs/ABI.md, "Cache formats"): row bytes, the
 * RoPE and scale offsets, the scale entry a producer loads, page bytes and
 * a token's scale offset in its page; and the errors for a head_dim_qk a
 * format does not store. */
#include "gen/decode.h"

#include "expect.h"

static void
test_layouts(void)
{
	/* fp8-v4: 448 E4M3 + 128 RoPE bytes = 576; page 64: 64·584 = 37376
	 * rounds up to 65·576 = 37440; token 5's scales after the 64 rows at
	 * 64·576 + 5·8 = 36904. fp8-v32: 512 + 16 + 128 = 656. fp8-token: 448
	 * + 16 (4 scale + 12 pad) + 128 = 592 (512: 656). bf16: 2·D. */
	static const struct {
		int format, d_qk;
		int d_nope, row, rope_at, scale_at, entry, tail, nscales, group;
		uint32_t page64, page1, scale5;
	} want[] = {
		{DEC_FMT_FP8_V4, 0, 448, 576, 448, -1, 8, 8, 7, 64, 37440, 1152, 36904},
		{DEC_FMT_FP8_V32, 0, 512, 656, 528, 512, 16, 0, 4, 128, 41984, 656, 5 * 656 + 512},
		{DEC_FMT_FP8_TOKEN, 512, 448, 592, 464, 448, 4, 0, 1, 448, 37888, 592, 5 * 592 + 448},
		{DEC_FMT_FP8_TOKEN, 576, 512, 656, 528, 512, 4, 0, 1, 512, 41984, 656, 5 * 656 + 512},
		{DEC_FMT_BF16, 512, 448, 1024, 896, -1, 0, 0, 0, 0, 65536, 1024, 0},
		{DEC_FMT_BF16, 576, 512, 1152, 1024, -1, 0, 0, 0, 0, 73728, 1152, 0},
	};
	KgErr err = {{0}};

	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		DecodeFormat f;
		EXPECT(decode_format_resolve(want[i].format, want[i].d_qk, &f, &err) == 0);
		EXPECT(f.d_nope == want[i].d_nope && f.d_rope == 64 && f.d_qk == f.d_nope + 64);
		EXPECT(f.row_bytes == want[i].row && f.rope_at == want[i].rope_at && f.scale_at == want[i].scale_at);
		EXPECT(f.scale_entry == want[i].entry && f.scale_bytes == want[i].tail);
		EXPECT(f.nscales == want[i].nscales && f.group == want[i].group);
		EXPECT(decode_page_bytes(&f, 64) == want[i].page64 && decode_page_bytes(&f, 1) == want[i].page1);
		if (f.nscales)
			EXPECT(decode_scale_offset(&f, 64, 5) == want[i].scale5);
		/* every row and page keeps 16-byte loads aligned */
		EXPECT(f.row_bytes % 16 == 0 && f.rope_at % 16 == 0 && decode_page_bytes(&f, 61) % 16 == 0);
	}
}

static void
test_errors(void)
{
	KgErr err = {{0}};
	DecodeFormat f;

	EXPECT(decode_format_resolve(DEC_FMT_FP8_V4, 576, &f, &err) < 0);
	EXPECT_MSG(err.msg, "--head-dim-qk=576", "fp8-v4", "512");
	EXPECT(decode_format_resolve(DEC_FMT_FP8_V32, 512, &f, &err) < 0);
	EXPECT_MSG(err.msg, "--head-dim-qk=512", "fp8-v32", "576");
	EXPECT(decode_format_resolve(DEC_FMT_BF16, 640, &f, &err) < 0);
	EXPECT_MSG(err.msg, "--head-dim-qk=640", "bf16", "512 or 576");
	EXPECT(decode_format_resolve(DEC_FMT_FP8_V32, 0, &f, &err) == 0 && f.d_qk == 576);
	EXPECT(decode_format_resolve(DEC_FMT_FP8_TOKEN, 0, &f, &err) == 0 && f.d_qk == 512);
}

int
main(void)
{
	test_layouts();
	test_errors();
	if (failures) {
		fprintf(stderr, "test_decode: %d failure%s\n", failures, failures == 1 ? "" : "s");
		return 1;
	}
	printf("decode: all passed\n");
	return 0;
}
