/* Swizzle address functions and canonical tile layouts against
 * docs/hardware.md, "Swizzle modes" (swizzle), docs/hardware.md,
 * "Canonical layouts, LBO and SBO" (LBO/SBO) and docs/hardware.md, "Test vectors" TV6. */
#include <stdio.h>
#include <string.h>

#include "layout.h"

static int fails;

#define EQ(got, want, what) do { \
	unsigned long long g_ = (got), w_ = (want); \
	if (g_ != w_) { \
		printf("FAIL test_layout.c:%d: %s: expected 0x%llx, got 0x%llx\n", \
		       __LINE__, what, w_, g_); \
		fails++; \
	} \
} while (0)

static int
canon(int line, TileLayout *t, Major major, Swizzle swz, int bits, int mn, int k)
{
	KgErr err = {{0}};

	if (layout_canonical(t, major, swz, bits, mn, k, &err)) {
		printf("FAIL test_layout.c:%d: unexpected error: %s\n", line, err.msg);
		fails++;
		return -1;
	}
	return 0;
}

static void
test_names(void)
{
	static const struct {
		const char *s;
		Swizzle want;
	} ok[] = {
		{"none", SWZ_NONE}, {"32", SWZ_32B}, {"64", SWZ_64B}, {"128", SWZ_128B},
		{"32B", SWZ_32B}, {"64B", SWZ_64B}, {"128B", SWZ_128B},
	};
	static const char *const bad[] = {"", "16", "256", "128b", "swizzle128"};
	/* docs/hardware.md, "Swizzle modes" table: span (row width of an atom) and period. */
	static const int span[SWZ_COUNT] = {16, 32, 64, 128};
	static const int period[SWZ_COUNT] = {16, 256, 512, 1024};
	static const char *const name[SWZ_COUNT] = {"none", "32B", "64B", "128B"};
	Swizzle s;

	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		EQ(swizzle_parse(ok[i].s, &s) == 0 && s == ok[i].want, 1, ok[i].s);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		EQ(swizzle_parse(bad[i], &s), (unsigned long long)-1, bad[i]);
	for (int i = 0; i < SWZ_COUNT; i++) {
		EQ(swizzle_span((Swizzle)i), span[i], "swizzle_span");
		EQ(swizzle_period((Swizzle)i), period[i], "swizzle_period");
		EQ(strcmp(swizzle_name((Swizzle)i), name[i]), 0, name[i]);
	}
}

/* TV6 and one hand-checked address per mode on a non-zero period. */
static void
test_swizzle_vectors(void)
{
	static const struct {
		Swizzle s;
		uint32_t in, out;
	} v[] = {
		{SWZ_128B, 0x080, 0x090}, {SWZ_128B, 0x1E0, 0x1D0},
		{SWZ_128B, 0x3F0, 0x380}, {SWZ_128B, 0x410, 0x410},
		{SWZ_64B, 0x1F0, 0x1C0}, {SWZ_32B, 0x0F0, 0x0E0},
		/* 0x2A5 = 0b10_1010_0101: 128B: bits[9:7] = 5, bits[6:4] = 2,
		 * 2^5 = 7 -> 0x2F5. 64B: bits[8:7] = 1, bits[5:4] = 2 -> 3: 0x2B5.
		 * 32B: bit 7 = 1, bit 4 = 0 -> 0x2B5. */
		{SWZ_128B, 0x2A5, 0x2F5}, {SWZ_64B, 0x2A5, 0x2B5},
		{SWZ_32B, 0x2A5, 0x2B5}, {SWZ_NONE, 0x2A5, 0x2A5},
		/* Absolute addresses: bits above the period stay, 0x8490 -> 0x8480
		 * as 0x490 -> 0x480 (TV6 (9,8)). */
		{SWZ_128B, 0x8490, 0x8480},
	};

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		EQ(swizzle_addr(v[i].s, v[i].in), v[i].out, "swizzle_addr");
}

/* Within one period each mode permutes the 16-byte chunks: a bijection
 * that keeps the byte inside its chunk and is its own inverse. */
static void
test_swizzle_bijection(void)
{
	static const uint32_t bases[] = {0, 1024, 7 * 1024, 0x3FC00};
	static unsigned char seen[1024];

	for (int s = 0; s < SWZ_COUNT; s++) {
		uint32_t p = (uint32_t)swizzle_period((Swizzle)s);

		for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
			memset(seen, 0, sizeof seen);
			for (uint32_t o = 0; o < p; o++) {
				uint32_t a = bases[b] + o, x = swizzle_addr((Swizzle)s, a);

				if (x < bases[b] || x - bases[b] >= p || seen[x - bases[b]]
				    || (x & 15) != (a & 15)
				    || swizzle_addr((Swizzle)s, x) != a) {
					printf("FAIL test_layout.c:%d: %s: 0x%x -> 0x%x breaks "
					       "the bijection of period %u at base 0x%x\n",
					       __LINE__, swizzle_name((Swizzle)s), a, x, p,
					       bases[b]);
					fails++;
					break;
				}
				seen[x - bases[b]] = 1;
			}
		}
	}
}

/* LBO/SBO/bytes/slice per major x swizzle (docs/hardware.md,
 * "Canonical layouts, LBO and SBO" and "Test vectors"). */
static void
test_canonical(void)
{
	static const struct {
		Major major;
		Swizzle swz;
		int bits, mn, k;
		uint32_t lbo, sbo, bytes, slice;
		const char *what;
	} c[] = {
		/* K-major swizzled: LBO 16 (unused), SBO 8*span, slice mn*span. */
		{MAJOR_K, SWZ_128B, 16, 128, 64, 16, 1024, 16384, 16384, "K SW128 bf16 128x64"},
		{MAJOR_K, SWZ_64B, 16, 128, 32, 16, 512, 8192, 8192, "K SW64 bf16 128x32"},
		{MAJOR_K, SWZ_32B, 16, 128, 16, 16, 256, 4096, 4096, "K SW32 bf16 128x16"},
		{MAJOR_K, SWZ_128B, 16, 64, 128, 16, 1024, 16384, 8192, "K SW128 two slices"},
		{MAJOR_K, SWZ_128B, 8, 128, 128, 16, 1024, 16384, 16384, "K SW128 e4m3"},
		{MAJOR_K, SWZ_128B, 4, 128, 256, 16, 1024, 16384, 16384, "K SW128 packed fp4"},
		{MAJOR_K, SWZ_128B, 6, 128, 128, 16, 1024, 16384, 16384, "K SW128 fp6 in 8-bit"},
		{MAJOR_K, SWZ_64B, 32, 64, 16, 16, 512, 4096, 4096, "K SW64 tf32"},
		/* K-major none: SBO 128, LBO (mn/8)*128 (TV3 128x16: 2048). */
		{MAJOR_K, SWZ_NONE, 16, 128, 16, 2048, 128, 4096, 0, "K none bf16 128x16"},
		{MAJOR_K, SWZ_NONE, 16, 64, 32, 1024, 128, 4096, 0, "K none bf16 64x32"},
		{MAJOR_K, SWZ_NONE, 8, 8, 16, 128, 128, 128, 0, "K none one core matrix"},
		/* MN-major none: SBO 128 along MN, LBO mn bytes * 8 along K. */
		{MAJOR_MN, SWZ_NONE, 16, 64, 16, 1024, 128, 2048, 0, "MN none bf16 64x16"},
		{MAJOR_MN, SWZ_NONE, 8, 16, 8, 128, 128, 128, 0, "MN none e4m3 16x8"},
		/* MN-major swizzled: LBO 8*span along MN, SBO mn bytes * 8 along K
		 * (TV3 MN=128 K=64: 1024 / 2048). */
		{MAJOR_MN, SWZ_32B, 16, 64, 8, 256, 1024, 1024, 0, "MN SW32 bf16 64x8"},
		{MAJOR_MN, SWZ_64B, 16, 64, 16, 512, 1024, 2048, 0, "MN SW64 bf16 64x16"},
		{MAJOR_MN, SWZ_128B, 16, 128, 64, 1024, 2048, 16384, 0, "MN SW128 bf16 128x64"},
		{MAJOR_MN, SWZ_128B, 16, 64, 64, 1024, 1024, 8192, 0, "MN SW128 bf16 one atom wide"},
		{MAJOR_MN, SWZ_128B, 8, 256, 32, 1024, 2048, 8192, 0, "MN SW128 e4m3 256x32"},
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		TileLayout t;

		if (canon(__LINE__, &t, c[i].major, c[i].swz, c[i].bits, c[i].mn, c[i].k))
			continue;
		EQ(t.lbo, c[i].lbo, c[i].what);
		EQ(t.sbo, c[i].sbo, c[i].what);
		EQ(t.bytes, c[i].bytes, c[i].what);
		EQ(t.slice_bytes, c[i].slice, c[i].what);
		EQ(t.major == c[i].major && t.swz == c[i].swz && t.mn == c[i].mn
		   && t.k == c[i].k && t.elem_bits == c[i].bits, 1, c[i].what);
	}
}

/* TV6: BF16 K-major SW128 element (row, k) -> byte after the swizzle. */
static void
test_tv6_elements(void)
{
	static const struct {
		int row, k;
		uint32_t byte;
	} e[] = {
		{0, 0, 0x000}, {1, 0, 0x090}, {1, 8, 0x080}, {7, 63, 0x38E},
		{8, 0, 0x400}, {9, 8, 0x480},
	};
	TileLayout t;

	if (canon(__LINE__, &t, MAJOR_K, SWZ_128B, 16, 128, 64))
		return;
	for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
		EQ(swizzle_addr(SWZ_128B, layout_offset(&t, e[i].row, e[i].k)),
		   e[i].byte, "TV6 element -> byte");
	/* Same tile at an aligned base: the pattern moves with it (docs/hardware.md,
	 * "Base offset and alignment"). */
	for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
		EQ(swizzle_addr(SWZ_128B, 0x6000 + layout_offset(&t, e[i].row, e[i].k)),
		   0x6000 + e[i].byte, "TV6 element -> byte at 0x6000");
	EQ(layout_offset(&t, 128, 0), UINT32_MAX, "row past the tile");
	EQ(layout_offset(&t, 0, 64), UINT32_MAX, "col past the tile");
	EQ(layout_offset(&t, -1, 0), UINT32_MAX, "negative row");
}

/* layout_offset against the descriptor's reading of the canonical layout
 * (docs/hardware.md, "Canonical layouts, LBO and SBO"): the MMA finds K-major element (r, k) at
 * (r/8)*SBO + (r%8)*span + K part, where the K part is (kb/16)*LBO + kb%16
 * without swizzle and kb within the span (one slice) with it; MN-major
 * element (r, k) at (mb/span)*D_mn + (k/8)*D_k + (k%8)*span + mb%span with
 * D_mn = SBO, D_k = LBO for none and D_mn = LBO, D_k = SBO swizzled. The
 * whole tile must also be a bijection onto [0, bytes). */
static void
test_offsets_match_descriptor(void)
{
	static const struct {
		Major major;
		Swizzle swz;
		int bits, mn, k;
	} c[] = {
		{MAJOR_K, SWZ_NONE, 16, 64, 32}, {MAJOR_K, SWZ_32B, 16, 32, 16},
		{MAJOR_K, SWZ_64B, 8, 64, 64}, {MAJOR_K, SWZ_128B, 16, 128, 64},
		{MAJOR_K, SWZ_128B, 16, 64, 128}, {MAJOR_K, SWZ_NONE, 32, 16, 12},
		{MAJOR_MN, SWZ_NONE, 16, 64, 16}, {MAJOR_MN, SWZ_32B, 16, 64, 8},
		{MAJOR_MN, SWZ_64B, 8, 128, 16}, {MAJOR_MN, SWZ_128B, 16, 128, 64},
	};
	static unsigned char used[32768];

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int eb = c[i].bits / 8, bad = 0;
		uint32_t span = (uint32_t)swizzle_span(c[i].swz);
		TileLayout t;

		if (canon(__LINE__, &t, c[i].major, c[i].swz, c[i].bits, c[i].mn, c[i].k))
			continue;
		memset(used, 0, sizeof used);
		for (int r = 0; r < t.mn && !bad; r++)
			for (int k = 0; k < t.k && !bad; k++) {
				uint32_t got = layout_offset(&t, r, k), want;

				if (t.major == MAJOR_K) {
					uint32_t kb = (uint32_t)(k * eb);

					want = (uint32_t)r / 8 * t.sbo + (uint32_t)r % 8 * span;
					if (t.swz == SWZ_NONE)
						want += kb / 16 * t.lbo + kb % 16;
					else
						want += kb / span * t.slice_bytes + kb % span;
				} else {
					uint32_t mb = (uint32_t)(r * eb);
					uint32_t dmn = t.swz == SWZ_NONE ? t.sbo : t.lbo;
					uint32_t dk = t.swz == SWZ_NONE ? t.lbo : t.sbo;

					want = mb / span * dmn + (uint32_t)k / 8 * dk
					       + (uint32_t)k % 8 * span + mb % span;
				}
				if (got != want || got + (uint32_t)eb > t.bytes
				    || got + (uint32_t)eb > sizeof used) {
					printf("FAIL test_layout.c:%d: %s %s element (%d, %d): "
					       "expected 0x%x, got 0x%x\n", __LINE__,
					       t.major == MAJOR_K ? "K" : "MN",
					       swizzle_name(t.swz), r, k, want, got);
					fails++;
					bad = 1;
					break;
				}
				for (int b = 0; b < eb; b++) {
					if (used[got + (uint32_t)b]++) {
						printf("FAIL test_layout.c:%d: byte 0x%x used twice\n",
						       __LINE__, got + (uint32_t)b);
						fails++;
						bad = 1;
					}
				}
			}
	}
}

/* Packed 4-bit: two elements per byte, K-major only. */
static void
test_subbyte(void)
{
	TileLayout t;

	if (canon(__LINE__, &t, MAJOR_K, SWZ_128B, 4, 128, 256))
		return;
	EQ(layout_offset(&t, 0, 1), 0, "fp4 element 1 shares byte 0");
	EQ(layout_offset(&t, 0, 2), 1, "fp4 element 2 in byte 1");
	EQ(layout_offset(&t, 1, 255), 128 + 127, "fp4 end of row 1");
	/* fp6 in its 8-bit container: element k at byte k. */
	if (canon(__LINE__, &t, MAJOR_K, SWZ_128B, 6, 128, 128))
		return;
	EQ(layout_offset(&t, 2, 5), 2 * 128 + 5, "fp6 container byte");
}

static void
reject(int line, Major major, Swizzle swz, int bits, int mn, int k,
       const char *want)
{
	KgErr err = {{0}};
	TileLayout t;
	int rc = layout_canonical(&t, major, swz, bits, mn, k, &err);

	if (rc != -1 || !strstr(err.msg, want)) {
		printf("FAIL test_layout.c:%d: expected -1 with \"%s\", got %d \"%s\"\n",
		       line, want, rc, err.msg);
		fails++;
	}
}

static void
test_reject(void)
{
	reject(__LINE__, MAJOR_K, SWZ_128B, 16, 100, 64,
	       "rows=100: must be a multiple of 8");
	reject(__LINE__, MAJOR_K, SWZ_64B, 16, 64, 16, "cols=16");
	reject(__LINE__, MAJOR_K, SWZ_32B, 4, 64, 32, "cols=32");
	reject(__LINE__, MAJOR_K, SWZ_NONE, 8, 64, 8, "cols=8");
	reject(__LINE__, MAJOR_MN, SWZ_64B, 16, 16, 16, "rows=16");
	reject(__LINE__, MAJOR_MN, SWZ_NONE, 8, 8, 16, "rows=8");
	reject(__LINE__, MAJOR_MN, SWZ_NONE, 16, 64, 4, "cols=4");
	reject(__LINE__, MAJOR_MN, SWZ_128B, 6, 128, 64, "major=MN");
	reject(__LINE__, MAJOR_MN, SWZ_128B, 32, 32, 64, "major=MN");
	reject(__LINE__, MAJOR_K, SWZ_128B, 12, 128, 64, "elem-bits=12");
	reject(__LINE__, MAJOR_K, SWZ_128B, 16, -8, 64, "rows=-8");
	reject(__LINE__, MAJOR_K, SWZ_128B, 16, 8, 0, "cols=0");
	reject(__LINE__, MAJOR_K, SWZ_128B, 16, 1 << 30, 1 << 30, "rows=1073741824");
	reject(__LINE__, MAJOR_K, SWZ_128B, 32, 0x7FFFFFFF, 0x7FFFFFFF,
	       "rows=2147483647");
	reject(__LINE__, MAJOR_K, (Swizzle)9, 16, 128, 64, "swizzle=9");
	reject(__LINE__, (Major)2, SWZ_128B, 16, 128, 64, "major=2");
}

/* TMEM addresses (docs/hardware.md, "Test vectors" TV7): lane 32 column
 * 64 -> 0x00200040; warp 3 of a warpgroup reading column 128 of a
 * base-0 allocation -> (3 << 21) + 128 = 0x00600080; quarter 2 starts at
 * lane 64. The descriptor window: 2^18 bytes. */
static void
test_tmem_and_window(void)
{
	EQ(tmem_addr(32, 64), 0x00200040u, "tmem_addr(32, 64)");
	EQ(tmem_addr(127, 511), 0x007F01FFu, "tmem_addr(127, 511)");
	EQ(tmem_quarter_lanes(), 32, "quarter lanes");
	EQ(tmem_quarter_lane_shift(), 5, "quarter lane shift");
	EQ(tmem_quarter_addr_shift(), 21, "quarter address shift");
	EQ((3u << tmem_quarter_addr_shift()) + 128u, 0x00600080u, "warp 3, column 128");
	EQ(tmem_addr(2u << tmem_quarter_lane_shift(), 0), tmem_addr(64, 0), "quarter 2");
	EQ(smem_desc_window(), 262144u, "descriptor window");
}

/* The CTA pair's M = 128 accumulator (docs/hardware.md, "Accumulator
 * layout of the CTA pair", "Test vectors" TV8): n = 256: row 0 column 0
 * -> lane 0 column 0; row 5 column 127 -> lane 5 column 127; row 5 column
 * 128 -> lane 69 column 0; row 63 column 255 -> lane 127 column 127;
 * n = 64: row 10 column 40 -> lane 74 column 8; 256 columns take 128 TMEM
 * columns. A from TMEM: row 3 element 17 -> column 8 of lanes 3 and 67. Every
 * (row, column) of a 64 x 256 D has its own cell. */
static void
test_pair128(void)
{
	static unsigned char seen[128][128];
	int lane, col, dup = 0;

	tmem_pair128_d(0, 0, 256, &lane, &col);
	EQ(lane * 1000 + col, 0, "pair128 (0,0)");
	tmem_pair128_d(5, 127, 256, &lane, &col);
	EQ(lane * 1000 + col, 5127, "pair128 (5,127)");
	tmem_pair128_d(5, 128, 256, &lane, &col);
	EQ(lane * 1000 + col, 69000, "pair128 (5,128)");
	tmem_pair128_d(63, 255, 256, &lane, &col);
	EQ(lane * 1000 + col, 127127, "pair128 (63,255)");
	tmem_pair128_d(10, 40, 64, &lane, &col);
	EQ(lane * 1000 + col, 74008, "pair128 n=64 (10,40)");
	EQ(tmem_pair128_d_cols(256), 128, "pair128 columns of n=256");
	tmem_pair128_a16(3, 17, 0, &lane, &col);
	EQ(lane * 1000 + col, 3008, "pair128 A row 3 k 17");
	tmem_pair128_a16(3, 17, 1, &lane, &col);
	EQ(lane * 1000 + col, 67008, "pair128 A row 3 k 17, copy 1");
	for (int r = 0; r < PAIR128_ROWS; r++)
		for (int c = 0; c < 256; c++) {
			tmem_pair128_d(r, c, 256, &lane, &col);
			if (lane < 0 || lane > 127 || col < 0 || col > 127 || seen[lane][col]++)
				dup++;
		}
	EQ(dup, 0, "pair128 cells outside 128 x 128 or held twice");
}

/* The wgmma accumulator fragment (docs/hardware.md, "Test vectors" TV7 and
 * "wgmma accumulator fragment"): (t, i) -> (row, col) for t=0 i=2 (8,0),
 * t=0 i=4 (0,8), t=37 i=5 (17,11), t=127 i=63 (63,127); every (row, col)
 * of a 64x16 tile is held exactly once by the 128 threads' 8 registers. */
static void
test_wgmma_fragment(void)
{
	static const int v[][4] = {{0, 2, 8, 0}, {0, 4, 0, 8}, {37, 5, 17, 11}, {127, 63, 63, 127},
	                           {0, 0, 0, 0}, {0, 1, 0, 1}, {5, 3, 9, 3}};
	int seen[64][16] = {{0}};

	for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
		int dr, dc;
		wgmma_acc_reg(v[k][1], &dr, &dc);
		EQ(wgmma_acc_row(v[k][0]) + dr, v[k][2], "fragment row");
		EQ(wgmma_acc_col(v[k][0]) + dc, v[k][3], "fragment column");
	}
	for (int t = 0; t < 128; t++)
		for (int i = 0; i < 8; i++) {
			int dr, dc, r, c;
			wgmma_acc_reg(i, &dr, &dc);
			r = wgmma_acc_row(t) + dr;
			c = wgmma_acc_col(t) + dc;
			if (r >= 0 && r < 64 && c >= 0 && c < 16)
				seen[r][c]++;
		}
	for (int r = 0; r < 64; r++)
		for (int c = 0; c < 16; c++)
			EQ(seen[r][c], 1, "64x16 covered once");
}

/* The 8-bit A fragment (docs/hardware.md, "wgmma A fragment"): (t, i, b)
 * -> (row, k) for t=0 i=3 b=3 (8,19), t=37 i=2 b=1 (17,21), t=127 i=1 b=0
 * (63,12); every (row, k) of the 64x32 A tile is held exactly once. */
static void
test_wgmma_afrag8(void)
{
	static const int v[][5] = {{0, 3, 3, 8, 19}, {37, 2, 1, 17, 21}, {127, 1, 0, 63, 12}, {0, 0, 0, 0, 0}};
	int seen[64][32] = {{0}};

	for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
		int r, c;
		wgmma_afrag8(v[k][0], v[k][1], v[k][2], &r, &c);
		EQ(r, v[k][3], "8-bit A fragment row");
		EQ(c, v[k][4], "8-bit A fragment k");
	}
	for (int t = 0; t < 128; t++)
		for (int i = 0; i < 4; i++)
			for (int b = 0; b < 4; b++) {
				int r, c;
				wgmma_afrag8(t, i, b, &r, &c);
				if (r >= 0 && r < 64 && c >= 0 && c < 32)
					seen[r][c]++;
			}
	for (int r = 0; r < 64; r++)
		for (int c = 0; c < 32; c++)
			EQ(seen[r][c], 1, "64x32 covered once");
}

/* sm_100a decode keeps a 64-row K-major 128B-swizzled Q tile and reads it
 * with an M=128 MMA (gen/sm100/decode.c): the descriptor's row groups 8..15
 * lie 8 SBO on, which is rows 0..63 of the next 64-column slice. By hand:
 * 64 rows of 128 bytes make an 8192-byte slice and SBO is 1024 bytes (8
 * rows), so row 64 + r, column c of slice s is row r of slice s + 1. */
static void
test_m128_over_64_rows(void)
{
	TileLayout t;

	if (canon(__LINE__, &t, MAJOR_K, SWZ_128B, 16, 64, 512))
		return;
	EQ(t.slice_bytes, 8192, "64-row slice");
	EQ(t.sbo, 1024, "SBO: 8 rows of 128 bytes");
	EQ(8 * t.sbo, t.slice_bytes, "row group 8 is the next slice");
	for (int s = 0; s + 1 < 8; s++)
		for (int r = 0; r < 64; r += 9)
			for (int c = 0; c < 64; c += 13)
				EQ(layout_offset(&t, r, 64 * s + c) + 8 * t.sbo, layout_offset(&t, r, 64 * (s + 1) + c),
				   "row 64+r of slice s = row r of slice s+1");
}

/* Scale-factor image and TMEM places (layout.h): hand-derived bytes, and
 * every (row, block) through the .32x128b.warpx4 copy (image byte o goes to
 * lane o / 16, column (o % 16) / 4, byte o % 4, docs/hardware.md, "tcgen05.cp")
 * lands where the MMA reads it ("Block-scaled tcgen05.mma"). */
static void
test_scale_factors(void)
{
	int lane, col, byte;
	int seen[SF_IMAGE_BYTES] = {0};

	EQ(layout_sf_offset(0, 0), 0, "sf row 0 block 0");
	EQ(layout_sf_offset(1, 0), 16, "sf row 1: next image row");
	EQ(layout_sf_offset(32, 0), 4, "sf row 32: next column of image row 0");
	EQ(layout_sf_offset(33, 2), 22, "sf row 33 block 2: 16 + 4 + 2");
	EQ(layout_sf_offset(127, 3), 511, "sf row 127 block 3: 16*31 + 4*3 + 3");
	layout_sf_tmem(70, 1, &lane, &col, &byte);
	EQ(lane, 6, "sf row 70 lane");
	EQ(col, 2, "sf row 70 column");
	EQ(byte, 1, "sf block 1 byte");
	for (int m = 0; m < SF_ROWS; m++)
		for (int b = 0; b < SF_BLOCKS; b++) {
			uint32_t o = layout_sf_offset(m, b);
			layout_sf_tmem(m, b, &lane, &col, &byte);
			EQ(o / 16, (unsigned)lane, "sf copy lane");
			EQ(o % 16 / 4, (unsigned)col, "sf copy column");
			EQ(o % 4, (unsigned)byte, "sf copy byte");
			if (o < SF_IMAGE_BYTES)
				seen[o]++;
		}
	for (int o = 0; o < SF_IMAGE_BYTES; o++)
		EQ(seen[o], 1, "sf image byte used exactly once");
	EQ(SF_IMAGE_BYTES / 16 * SF_COLS, SF_ROWS, "sf: 32 lanes x 4 columns hold 128 rows");
}

/* Which image and scale-factor id each MMA of a stage reads (layout.h,
 * layout_sf_pick), derived by hand from PTX ISA §9.7.16.10.7 (docs/hardware.md,
 * "Scale-factor images"): K per MMA 32 (mxf8f6f4) or 64 (mxf4nvf4), a byte
 * per factor, 1X/2X/4X factors per MMA starting at the id's byte. */
static void
test_sf_pick(void)
{
	SfPick s;

	/* MXFP8: tile-k 128, 32-wide vectors: one image, MMA k reads byte k (1X) */
	for (int k = 0; k < 4; k++) {
		EQ(layout_sf_pick(&s, 128, 32, 32, k), 0, "mxfp8 pick");
		EQ(s.images, 1, "mxfp8: one image per stage");
		EQ(s.per_mma, 1, "mxfp8: 1X");
		EQ(s.image, 0, "mxfp8 image");
		EQ(s.id, k, "mxfp8: id = K block");
	}
	/* NVFP4: tile-k 256 (128 bytes), 16-wide vectors: 16 factors per row per
	 * stage = 4 images; each K=64 MMA reads a whole word (4X, id 0) of image k */
	for (int k = 0; k < 4; k++) {
		EQ(layout_sf_pick(&s, 256, 64, 16, k), 0, "nvfp4 pick");
		EQ(s.images, 4, "nvfp4: four images per stage");
		EQ(s.per_mma, 4, "nvfp4: 4X");
		EQ(s.image, k, "nvfp4: image = MMA");
		EQ(s.id, 0, "nvfp4: id 0");
	}
	/* MXFP4: tile-k 256, 32-wide vectors: 8 factors = 2 images; MMA k reads
	 * the half-word at byte 2(k%2) of image k/2 (2X) */
	int img[4] = {0, 0, 1, 1}, id[4] = {0, 2, 0, 2};
	for (int k = 0; k < 4; k++) {
		EQ(layout_sf_pick(&s, 256, 64, 32, k), 0, "mxfp4 pick");
		EQ(s.images, 2, "mxfp4: two images per stage");
		EQ(s.per_mma, 2, "mxfp4: 2X");
		EQ(s.image, img[k], "mxfp4 image");
		EQ(s.id, id[k], "mxfp4 id");
	}
	/* refusals: 8X, a stage of part of an image, an MMA past the stage */
	EQ(layout_sf_pick(&s, 256, 64, 8, 0), -1, "8X is no scale_vec");
	EQ(layout_sf_pick(&s, 96, 32, 32, 0), -1, "tile-k not whole images");
	EQ(layout_sf_pick(&s, 128, 32, 32, 4), -1, "MMA 4 is past a 128 stage");
	EQ(layout_sf_pick(&s, 256, 64, 0, 0), -1, "vec 0");
}

int
main(void)
{
	test_m128_over_64_rows();
	test_tmem_and_window();
	test_pair128();
	test_wgmma_fragment();
	test_wgmma_afrag8();
	test_scale_factors();
	test_sf_pick();
	test_names();
	test_swizzle_vectors();
	test_swizzle_bijection();
	test_canonical();
	test_tv6_elements();
	test_offsets_match_descriptor();
	test_subbyte();
	test_reject();
	if (fails) {
		printf("test_layout: %d failure(s)\n", fails);
		return 1;
	}
	printf("test_layout: ok\n");
	return 0;
}
