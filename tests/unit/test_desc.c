/* Descriptor encoders against docs/hardware.md, "Test vectors" (TV1-TV6) and vectors
 * derived here by hand from the field tables of docs/hardware.md,
 * "Shared-memory descriptor (sm_100)", docs/hardware.md,
 * "Shared-memory descriptor (sm_90)", docs/hardware.md, "Instruction descriptor",
 * docs/hardware.md, "Block-scaled instruction descriptor", plus every rejection path
 * and a randomized encode/decode round trip. */
#include <stdio.h>
#include <string.h>

#include "desc.h"
#include "layout.h"

static int fails;

static void
fail_u64(int line, const char *what, uint64_t want, uint64_t got)
{
	printf("FAIL test_desc.c:%d: %s: expected 0x%016llx, got 0x%016llx\n",
	       line, what, (unsigned long long)want, (unsigned long long)got);
	fails++;
}

#define EQ(got, want, what) do { \
	uint64_t g_ = (got), w_ = (want); \
	if (g_ != w_) \
		fail_u64(__LINE__, what, w_, g_); \
} while (0)

/* Descriptor of a canonical tile, through layout_canonical + desc_for_tile. */
static uint64_t
tile(int line, DescArch arch, Major major, Swizzle swz, int bits, int mn, int k,
     uint32_t addr)
{
	TileLayout t;
	KgErr err = {{0}};
	uint64_t v = 0;

	if (layout_canonical(&t, major, swz, bits, mn, k, &err)
	    || desc_for_tile(&v, arch, &t, addr, &err)) {
		printf("FAIL test_desc.c:%d: unexpected error: %s\n", line, err.msg);
		fails++;
	}
	return v;
}

static uint64_t
raw(int line, DescArch arch, SmemDesc d)
{
	KgErr err = {{0}};
	uint64_t v = 0;

	if (desc_encode(&v, arch, &d, &err)) {
		printf("FAIL test_desc.c:%d: unexpected error: %s\n", line, err.msg);
		fails++;
	}
	return v;
}

/* cta_group 0 in a literal means 1, so vectors list only what they change. */
static uint64_t
idesc(int line, Idesc d)
{
	KgErr err = {{0}};
	uint32_t v = 0;

	if (!d.cta_group)
		d.cta_group = 1;
	if (idesc_encode(&v, &d, &err)) {
		printf("FAIL test_desc.c:%d: unexpected error: %s\n", line, err.msg);
		fails++;
	}
	return v;
}

static void
expect_msg(int line, int rc, const KgErr *err, const char *want)
{
	if (rc != -1) {
		printf("FAIL test_desc.c:%d: expected -1 with \"%s\", got %d\n", line,
		       want, rc);
		fails++;
	} else if (!strstr(err->msg, want)) {
		printf("FAIL test_desc.c:%d: expected a message containing \"%s\", "
		       "got \"%s\"\n", line, want, err->msg);
		fails++;
	}
}

static void
reject_desc(int line, DescArch arch, SmemDesc d, const char *want)
{
	KgErr err = {{0}};
	uint64_t v;

	expect_msg(line, desc_encode(&v, arch, &d, &err), &err, want);
}

static void
reject_idesc(int line, Idesc d, const char *want)
{
	KgErr err = {{0}};
	uint32_t v;

	if (!d.cta_group)
		d.cta_group = 1;
	expect_msg(line, idesc_encode(&v, &d, &err), &err, want);
}

static void
reject_decode(int line, DescArch arch, uint64_t v, const char *want)
{
	KgErr err = {{0}};
	SmemDesc d;

	expect_msg(line, desc_decode(&d, arch, v, &err), &err, want);
}

static void
reject_layout(int line, Major major, Swizzle swz, int bits, int mn, int k,
              const char *want)
{
	KgErr err = {{0}};
	TileLayout t;

	expect_msg(line, layout_canonical(&t, major, swz, bits, mn, k, &err), &err,
	           want);
}

#define L __LINE__
#define S100 DESC_SM100
#define S90 DESC_SM90

/* docs/hardware.md, "Test vectors" TV1-TV3 and the CUTLASS column of docs/hardware.md,
 * "Canonical layouts, LBO and SBO". */
static void
test_tv_desc(void)
{
	/* TV1 */
	EQ(tile(L, S100, MAJOR_K, SWZ_128B, 16, 128, 64, 0x400),
	   0x4000404000010040, "TV1 bf16 K SW128 128x64 @0x400");
	EQ(raw(L, S100, (SmemDesc){.addr = 0x400, .lbo = 0, .sbo = 1024,
	                           .swz = SWZ_128B}),
	   0x4000404000000040, "TV1 DeepGEMM LBO 0");
	EQ(raw(L, S100, (SmemDesc){.addr = 0x420, .lbo = 16, .sbo = 1024,
	                           .swz = SWZ_128B}),
	   0x4000404000010042, "TV1 k=1 (+32 B)");
	EQ(raw(L, S100, (SmemDesc){.addr = 0x440, .lbo = 16, .sbo = 1024,
	                           .swz = SWZ_128B}),
	   0x4000404000010044, "TV1 k=2 (+64 B)");
	EQ(raw(L, S100, (SmemDesc){.addr = 0x460, .lbo = 16, .sbo = 1024,
	                           .swz = SWZ_128B}),
	   0x4000404000010046, "TV1 k=3 (+96 B)");
	/* TV2 */
	EQ(tile(L, S90, MAJOR_K, SWZ_128B, 16, 128, 64, 0x400),
	   0x4000004000010040, "TV2 wgmma bf16 K SW128 128x64 @0x400");
	/* TV3 */
	EQ(tile(L, S100, MAJOR_K, SWZ_64B, 16, 128, 32, 0x400),
	   0x8000402000010040, "TV3 K SW64 128x32");
	EQ(tile(L, S100, MAJOR_K, SWZ_32B, 16, 128, 16, 0x400),
	   0xC000401000010040, "TV3 K SW32 128x16");
	EQ(tile(L, S100, MAJOR_K, SWZ_NONE, 16, 128, 16, 0x400),
	   0x0000400800800040, "TV3 K none 128x16 (LBO 2048, SBO 128)");
	EQ(tile(L, S100, MAJOR_MN, SWZ_128B, 16, 128, 64, 0x2000),
	   0x4000408000400200, "TV3 MN SW128 MN=128 K=64 @0x2000");
	EQ(raw(L, S100, (SmemDesc){.addr = 0x8000, .lbo = 0, .sbo = 128,
	                           .swz = SWZ_NONE}),
	   0x0000400800000800, "TV3 scale-factor copy descriptor @0x8000");
	/* docs/hardware.md, "Canonical layouts, LBO and SBO" table, start address 0 */
	EQ(tile(L, S100, MAJOR_K, SWZ_128B, 16, 128, 64, 0), 0x4000404000010000,
	   "canonical bf16 K SW128");
	EQ(tile(L, S100, MAJOR_K, SWZ_64B, 16, 128, 32, 0), 0x8000402000010000,
	   "canonical bf16 K SW64");
	EQ(tile(L, S100, MAJOR_K, SWZ_32B, 16, 128, 16, 0), 0xC000401000010000,
	   "canonical bf16 K SW32");
	EQ(tile(L, S100, MAJOR_K, SWZ_NONE, 16, 128, 16, 0), 0x0000400800800000,
	   "canonical bf16 K none");
	EQ(tile(L, S100, MAJOR_MN, SWZ_128B, 16, 128, 64, 0), 0x4000408000400000,
	   "canonical bf16 MN SW128");
	EQ(tile(L, S100, MAJOR_K, SWZ_128B, 8, 128, 128, 0), 0x4000404000010000,
	   "canonical e4m3 K SW128 128x128");
	EQ(tile(L, S100, MAJOR_K, SWZ_128B, 4, 128, 256, 0), 0x4000404000010000,
	   "canonical packed e2m1 K SW128 128x256");
	EQ(tile(L, S90, MAJOR_K, SWZ_128B, 16, 128, 64, 0), 0x4000004000010000,
	   "sm_90 K SW128");
}

/* Hand-derived smem descriptors. desc100 = enc(addr) | enc(LBO)<<16 |
 * enc(SBO)<<32 | 1<<46 | base<<49 | layout<<61 with layout none 0, 32B 6,
 * 64B 4, 128B 2, 128B_BASE32B 1 (docs/hardware.md,
 * "Shared-memory descriptor (sm_100)"); desc90 has no bit 46 and the 2-bit swizzle none
 * 0, 128B 1, 64B 2, 32B 3 at bit 62 (docs/hardware.md,
 * "Shared-memory descriptor (sm_90)"). LBO/SBO of the tiles come from docs/hardware.md,
 * "Canonical layouts, LBO and SBO" as layout.h packs them. */
static void
test_hand_desc(void)
{
	/* sm100 K SW128 bf16 64x64 @0x1000: rows 128 B = span, SBO 8*128 = 1024
	 * (0x40<<32), LBO 16 (1<<16), start 0x100, 2<<61. */
	EQ(tile(L, S100, MAJOR_K, SWZ_128B, 16, 64, 64, 0x1000), 0x4000404000010100,
	   "sm100 K SW128 bf16 64x64 @0x1000");
	/* sm100 K SW64 e4m3 64x64 @0x200: rows 64 B, SBO 512 (0x20<<32), start
	 * 0x20, 4<<61 = 0x8000000000000000. */
	EQ(tile(L, S100, MAJOR_K, SWZ_64B, 8, 64, 64, 0x200), 0x8000402000010020,
	   "sm100 K SW64 e4m3 64x64 @0x200");
	/* sm100 K SW32 bf16 256x16 @0x300: rows 32 B, SBO 256 (0x10<<32), start
	 * 0x30, 6<<61 = 0xC000000000000000. */
	EQ(tile(L, S100, MAJOR_K, SWZ_32B, 16, 256, 16, 0x300), 0xC000401000010030,
	   "sm100 K SW32 bf16 256x16 @0x300");
	/* sm100 K none bf16 64x32 @0x80: K = 64 B = 4 core-matrix columns of
	 * 8 row groups; SBO 128 (8<<32), LBO (64/8)*128 = 1024 (0x40<<16),
	 * start 8. */
	EQ(tile(L, S100, MAJOR_K, SWZ_NONE, 16, 64, 32, 0x80), 0x0000400800400008,
	   "sm100 K none bf16 64x32 @0x80");
	/* sm100 MN none bf16 MN=64 K=16 @0x400: 128 B along MN = 8 core
	 * matrices; none: SBO = MN step 128 (8<<32), LBO = K step = 128 B * 8
	 * rows = 1024 (0x40<<16). */
	EQ(tile(L, S100, MAJOR_MN, SWZ_NONE, 16, 64, 16, 0x400), 0x0000400800400040,
	   "sm100 MN none bf16 64x16 @0x400");
	/* sm100 MN SW32 bf16 MN=64 K=8 @0x800: atoms 32 B x 8 = 256 B, 4 along
	 * MN; swizzled: LBO = MN step 256 (0x10<<16), SBO = K step 128*8 = 1024
	 * (0x40<<32), start 0x80, 6<<61. */
	EQ(tile(L, S100, MAJOR_MN, SWZ_32B, 16, 64, 8, 0x800), 0xC000404000100080,
	   "sm100 MN SW32 bf16 64x8 @0x800");
	/* sm100 MN SW64 bf16 MN=64 K=16 @0x1000: LBO 512 (0x20<<16), SBO 1024,
	 * start 0x100, 4<<61. */
	EQ(tile(L, S100, MAJOR_MN, SWZ_64B, 16, 64, 16, 0x1000), 0x8000404000200100,
	   "sm100 MN SW64 bf16 64x16 @0x1000");
	/* sm100 MN SW128 e4m3 MN=256 K=32 @0x4000: 256 B along MN = 2 atoms;
	 * LBO 1024 (0x40<<16), SBO 256*8 = 2048 (0x80<<32), start 0x400. */
	EQ(tile(L, S100, MAJOR_MN, SWZ_128B, 8, 256, 32, 0x4000), 0x4000408000400400,
	   "sm100 MN SW128 e4m3 256x32 @0x4000");
	/* sm90 versions: drop bit 46, swizzle code at 62 (128B 1<<62 =
	 * 0x4..., 64B 2<<62 = 0x8..., 32B 3<<62 = 0xC...). */
	EQ(tile(L, S90, MAJOR_K, SWZ_128B, 16, 64, 64, 0x1000), 0x4000004000010100,
	   "sm90 K SW128 bf16 64x64 @0x1000");
	EQ(tile(L, S90, MAJOR_K, SWZ_64B, 16, 128, 32, 0x400), 0x8000002000010040,
	   "sm90 K SW64 bf16 128x32 (SBO 512)");
	EQ(tile(L, S90, MAJOR_K, SWZ_32B, 16, 128, 16, 0x400), 0xC000001000010040,
	   "sm90 K SW32 bf16 128x16 (SBO 256)");
	EQ(tile(L, S90, MAJOR_K, SWZ_NONE, 16, 128, 16, 0x400), 0x0000000800800040,
	   "sm90 K none bf16 128x16 (LBO 2048, SBO 128)");
	EQ(tile(L, S90, MAJOR_MN, SWZ_NONE, 16, 64, 16, 0x400), 0x0000000800400040,
	   "sm90 MN none bf16 64x16 (LBO 1024, SBO 128)");
	EQ(tile(L, S90, MAJOR_MN, SWZ_32B, 16, 64, 8, 0x800), 0xC000004000100080,
	   "sm90 MN SW32 bf16 64x8 (LBO 256, SBO 1024)");
	EQ(tile(L, S90, MAJOR_MN, SWZ_64B, 16, 64, 16, 0x1000), 0x8000004000200100,
	   "sm90 MN SW64 bf16 64x16 (LBO 512, SBO 1024)");
	EQ(tile(L, S90, MAJOR_MN, SWZ_128B, 16, 128, 64, 0x2000), 0x4000008000400200,
	   "sm90 MN SW128 bf16 128x64 (LBO 1024, SBO 2048)");
	/* sm100 base offset 3 on TV1: 3<<49 = 0x0006000000000000. */
	EQ(raw(L, S100, (SmemDesc){.addr = 0x400, .lbo = 16, .sbo = 1024,
	                           .base_offset = 3, .swz = SWZ_128B}),
	   0x4006404000010040, "sm100 base-offset 3");
	/* sm90 SW64 @0x600 base offset 5: start 0x60, LBO 1<<16, SBO 0x20<<32,
	 * 5<<49 = 0x000A000000000000, 2<<62. */
	EQ(raw(L, S90, (SmemDesc){.addr = 0x600, .lbo = 16, .sbo = 512,
	                          .base_offset = 5, .swz = SWZ_64B}),
	   0x800A002000010060, "sm90 base-offset 5");
	/* sm100 128B_BASE32B @0: layout 1<<61 = 0x2000000000000000, LBO 1024
	 * (0x40<<16), SBO 2048 (0x80<<32), bit 46. */
	EQ(raw(L, S100, (SmemDesc){.addr = 0, .lbo = 1024, .sbo = 2048,
	                           .swz = SWZ_128B, .base32b = 1}),
	   0x2000408000400000, "sm100 128B_BASE32B");
	/* Largest fields: 0x3FFF0 >> 4 = 0x3FFF in each 14-bit field, bit 46. */
	EQ(raw(L, S100, (SmemDesc){.addr = 0x3FFF0, .lbo = 0x3FFF0, .sbo = 0x3FFF0,
	                           .swz = SWZ_NONE}),
	   0x00007FFF3FFF3FFF, "sm100 all offsets at 256 KiB - 16");
	/* sm100 = sm90 | 1<<46 for every non-BASE32B mode (docs/hardware.md,
	 * "Shared-memory descriptor (sm_90)"). */
	for (int s = 0; s < SWZ_COUNT; s++) {
		SmemDesc d = {.addr = 0x1230, .lbo = 0x450, .sbo = 0x780,
		              .swz = (Swizzle)s};
		EQ(raw(L, S100, d), raw(L, S90, d) | 1ull << 46, "sm100 == sm90 | bit 46");
	}
	/* Second K slice of a K = 128 bf16 SW128 tile (two 128-byte slices):
	 * slice_bytes = 64 rows * 128 B = 8192, so its descriptor starts
	 * 0x2000 further: start 0x200. */
	{
		TileLayout t;
		KgErr err = {{0}};

		if (layout_canonical(&t, MAJOR_K, SWZ_128B, 16, 64, 128, &err)) {
			printf("FAIL test_desc.c:%d: %s\n", L, err.msg);
			fails++;
		}
		EQ(t.slice_bytes, 8192, "slice bytes of 64x128 bf16 SW128");
		EQ(raw(L, S100, (SmemDesc){.addr = t.slice_bytes, .lbo = t.lbo,
		                           .sbo = t.sbo, .swz = t.swz}),
		   0x4000404000010200, "second K slice descriptor");
	}
}

/* TV6 also lives here so every docs/hardware.md, "Test vectors" vector is in one file. */
static void
test_tv6(void)
{
	static const struct {
		Swizzle s;
		uint32_t in, out;
	} v[] = {
		{SWZ_128B, 0x080, 0x090}, {SWZ_128B, 0x1E0, 0x1D0},
		{SWZ_128B, 0x3F0, 0x380}, {SWZ_128B, 0x410, 0x410},
		{SWZ_64B, 0x1F0, 0x1C0}, {SWZ_32B, 0x0F0, 0x0E0},
	};
	static const struct {
		int row, k;
		uint32_t byte;
	} e[] = {
		{0, 0, 0x000}, {1, 0, 0x090}, {1, 8, 0x080}, {7, 63, 0x38E},
		{8, 0, 0x400}, {9, 8, 0x480},
	};
	TileLayout t;
	KgErr err = {{0}};

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		EQ(swizzle_addr(v[i].s, v[i].in), v[i].out, "TV6 swizzle_addr");
	if (layout_canonical(&t, MAJOR_K, SWZ_128B, 16, 128, 64, &err)) {
		printf("FAIL test_desc.c:%d: %s\n", L, err.msg);
		fails++;
		return;
	}
	for (size_t i = 0; i < sizeof e / sizeof e[0]; i++)
		EQ(swizzle_addr(SWZ_128B, layout_offset(&t, e[i].row, e[i].k)),
		   e[i].byte, "TV6 bf16 K SW128 element -> byte");
}

/* docs/hardware.md, "Test vectors" TV4, TV5. */
static void
test_tv_idesc(void)
{
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 128, .n = 128}),
	   0x08200490, "TV4 bf16 x bf16 -> f32 M128 N128");
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 64, .n = 256}),
	   0x04400490, "TV4 M64 N256");
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 256, .n = 256, .cta_group = 2}),
	   0x10400490, "TV4 M256 N256 cta_group::2");
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_F16, .b = DT_F16, .d = DT_F32,
	                    .m = 128, .n = 256, .b_major_mn = 1}),
	   0x08410010, "TV4 fp16 A K-major, B N-major, M128 N256");
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 128, .n = 64, .a_major_mn = 1, .b_major_mn = 1}),
	   0x08118490, "TV4 bf16 both MN-major M128 N64");
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_F16, .b = DT_F16, .d = DT_F16,
	                    .m = 128, .n = 128}),
	   0x08200000, "TV4 fp16 -> f16 M128 N128");

	EQ(idesc(L, (Idesc){.kind = IK_F8F6F4, .a = DT_E4M3, .b = DT_E4M3,
	                    .d = DT_F32, .m = 128, .n = 128}),
	   0x08200010, "TV5 f8f6f4 e4m3 x e4m3 -> f32");
	EQ(idesc(L, (Idesc){.kind = IK_F8F6F4, .a = DT_E4M3, .b = DT_E2M1,
	                    .d = DT_F32, .m = 128, .n = 128}),
	   0x08201410, "TV5 f8f6f4 e4m3 x e2m1");
	EQ(idesc(L, (Idesc){.kind = IK_MXF8F6F4, .a = DT_E4M3, .b = DT_E4M3,
	                    .scale = DT_UE8M0, .m = 128, .n = 128}),
	   0x08A00000, "TV5 mxf8f6f4 e4m3 ue8m0 SF ids 0");
	EQ(idesc(L, (Idesc){.kind = IK_MXF8F6F4, .a = DT_E4M3, .b = DT_E4M3,
	                    .scale = DT_UE8M0, .m = 128, .n = 128, .sfa_id = 1,
	                    .sfb_id = 2}),
	   0x28A00020, "TV5 mxf8f6f4 SFA id 1, SFB id 2");
	EQ(idesc(L, (Idesc){.kind = IK_MXF8F6F4, .a = DT_E4M3, .b = DT_E2M1,
	                    .scale = DT_UE8M0, .m = 128, .n = 256}),
	   0x08C01400, "TV5 DSV4 e4m3 x e2m1 M128 N256");
	EQ(idesc(L, (Idesc){.kind = IK_MXF8F6F4, .a = DT_E4M3, .b = DT_E2M1,
	                    .scale = DT_UE8M0, .m = 256, .n = 256, .cta_group = 2}),
	   0x10C01400, "TV5 DSV4 M256 N256 2-CTA");
	EQ(idesc(L, (Idesc){.kind = IK_MXF4NVF4, .a = DT_E2M1, .b = DT_E2M1,
	                    .scale = DT_UE4M3, .m = 128, .n = 128}),
	   0x08200480, "TV5 NVFP4 mxf4nvf4 ue4m3 M128 N128");
	EQ(idesc(L, (Idesc){.kind = IK_MXF4, .a = DT_E2M1, .b = DT_E2M1,
	                    .scale = DT_UE8M0, .m = 128, .n = 256}),
	   0x08C00480, "TV5 MXFP4 mxf4 ue8m0 M128 N256");
	EQ(idesc(L, (Idesc){.kind = IK_MXF4NVF4, .a = DT_E2M1, .b = DT_E2M1,
	                    .scale = DT_UE4M3, .m = 256, .n = 256, .cta_group = 2}),
	   0x10400480, "TV5 mxf4nvf4 ue4m3 M256 N256");
}

/* Hand-derived instruction descriptors. docs/hardware.md, "Instruction
 * descriptor": idesc = sel | sparse<<2 | sat<<3 | d<<4 | a<<7 | b<<10 |
 * negA<<13 | negB<<14 | tA<<15 | tB<<16 | (N>>3)<<17 | (M>>4)<<24 | shift<<30.
 * docs/hardware.md, "Block-scaled instruction descriptor": sparse<<2 | sfb<<4 |
 * a<<7 | b<<10 | negA<<13 | negB<<14 | tA<<15 | tB<<16 | (N>>3)<<17 | ue8m0<<23
 * | (M>>7)<<27 | sfa<<29 | k96<<31. */
static void
test_hand_idesc(void)
{
	/* fp16 -> f32, M64 N8: d 1<<4 = 0x10, N 1<<17 = 0x20000, M 4<<24. */
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_F16, .b = DT_F16, .d = DT_F32,
	                    .m = 64, .n = 8}),
	   0x04020010, "f16 M64 N8 (smallest)");
	/* bf16 M128 N256 cta_group::2: 0x490, N 32<<17 = 0x400000, M 8<<24. */
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 128, .n = 256, .cta_group = 2}),
	   0x08400490, "f16 M128 N256 cta_group::2");
	/* The CTA pair's M = 128 (Layout B is the instruction's
	 * .cta_group::2; the idesc's M field reads 128 >> 4 as for one CTA):
	 * S of pair64, bf16 M128 N64: 0x490, N 8<<17 = 0x100000, M 8<<24 =
	 * 0x08100490; its P·V, N256 with B MN-major (bit 16): 0x08410490. */
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 128, .n = 64, .cta_group = 2}),
	   0x08100490, "f16 M128 N64 cta_group::2 (pair64 S)");
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 128, .n = 256, .cta_group = 2, .b_major_mn = 1}),
	   0x08410490, "f16 M128 N256 cta_group::2 B MN-major (pair64 P·V)");
	/* fp16 -> f16, A MN-major, neg B, M64 N64: d 0, negB 0x4000, tA 0x8000,
	 * N 8<<17 = 0x100000, M 0x04000000. */
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_F16, .b = DT_F16, .d = DT_F16,
	                    .m = 64, .n = 64, .a_major_mn = 1, .neg_b = 1}),
	   0x0410C000, "f16 accumulate, A MN-major, neg B");
	/* tf32 M128 N64: d 0x10, a 2<<7 = 0x100, b 2<<10 = 0x800, N 0x100000. */
	EQ(idesc(L, (Idesc){.kind = IK_TF32, .a = DT_TF32, .b = DT_TF32, .d = DT_F32,
	                    .m = 128, .n = 64}),
	   0x08100910, "tf32 M128 N64");
	/* f8f6f4 e5m2 x e4m3 -> f16 M64 N128: a 1<<7 = 0x80, N 16<<17. */
	EQ(idesc(L, (Idesc){.kind = IK_F8F6F4, .a = DT_E5M2, .b = DT_E4M3,
	                    .d = DT_F16, .m = 64, .n = 128}),
	   0x04200080, "f8f6f4 e5m2 x e4m3 -> f16");
	/* f8f6f4 e2m3 x e3m2 -> f32 M128 N32: a 3<<7 = 0x180, b 4<<10 = 0x1000,
	 * N 4<<17 = 0x80000. */
	EQ(idesc(L, (Idesc){.kind = IK_F8F6F4, .a = DT_E2M3, .b = DT_E3M2,
	                    .d = DT_F32, .m = 128, .n = 32}),
	   0x08081190, "f8f6f4 e2m3 x e3m2");
	/* i8 s8 x u8 saturating M128 N48: sat 0x8, d 2<<4 = 0x20, a 1<<7 = 0x80,
	 * N 6<<17 = 0xC0000 (48 is legal: step 16 above 32). */
	EQ(idesc(L, (Idesc){.kind = IK_I8, .a = DT_S8, .b = DT_U8, .d = DT_S32,
	                    .m = 128, .n = 48, .saturate = 1}),
	   0x080C00A8, "i8 s8 x u8 saturate N48");
	/* i8 u8 x u8 M256 N64 cta_group::2: d 0x20, N 8<<17, M 16<<24. */
	EQ(idesc(L, (Idesc){.kind = IK_I8, .a = DT_U8, .b = DT_U8, .d = DT_S32,
	                    .m = 256, .n = 64, .cta_group = 2}),
	   0x10100020, "i8 M256 N64 cta_group::2");
	/* TV4 made sparse with selector 2: + 2 + 1<<2. */
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 128, .n = 128, .sparse = 1, .sparse_sel = 2}),
	   0x08200496, "f16 sparse selector 2");
	/* .ws bf16 M32 N64 max shift 16: M 2<<24 = 0x02000000, N 0x100000,
	 * shift 2<<30 = 0x80000000. */
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 32, .n = 64, .max_shift = 2}),
	   0x82100490, "f16 .ws M32 N64 max-shift 2");
	/* f16 M256 N16 cta_group::2 (smallest 2-CTA N): N 2<<17 = 0x40000. */
	EQ(idesc(L, (Idesc){.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	                    .m = 256, .n = 16, .cta_group = 2}),
	   0x10040490, "f16 M256 N16 cta_group::2");
	/* f8f6f4 e4m3 with N-major B, N16 (8-bit transposed B: step 16):
	 * d 0x10, tB 1<<16, N 2<<17 = 0x40000. */
	EQ(idesc(L, (Idesc){.kind = IK_F8F6F4, .a = DT_E4M3, .b = DT_E4M3,
	                    .d = DT_F32, .m = 128, .n = 16, .b_major_mn = 1}),
	   0x08050010, "f8f6f4 8-bit transposed B N16");
	/* mxf8f6f4 e5m2 x e2m3, M256 N128 2-CTA, SFA 3, SFB 1: sfb 1<<4 = 0x10,
	 * a 0x80, b 3<<10 = 0xC00, N 0x200000, ue8m0 0x800000, M 2<<27 =
	 * 0x10000000, sfa 3<<29 = 0x60000000. */
	EQ(idesc(L, (Idesc){.kind = IK_MXF8F6F4, .a = DT_E5M2, .b = DT_E2M3,
	                    .scale = DT_UE8M0, .m = 256, .n = 128, .cta_group = 2,
	                    .sfa_id = 3, .sfb_id = 1}),
	   0x70A00C90, "mxf8f6f4 SFA 3 SFB 1 M256");
	/* mxf4 M128 N64 SF ids 2/2: sfb 0x20, a 0x80, b 0x400, N 0x100000,
	 * ue8m0 0x800000, M 1<<27, sfa 2<<29 = 0x40000000. */
	EQ(idesc(L, (Idesc){.kind = IK_MXF4, .a = DT_E2M1, .b = DT_E2M1,
	                    .scale = DT_UE8M0, .m = 128, .n = 64, .sfa_id = 2,
	                    .sfb_id = 2}),
	   0x489004A0, "mxf4 SF ids 2");
	/* mxf4nvf4 ue4m3 K96 M256 N256 2-CTA: a 0x80, b 0x400, N 0x400000,
	 * scale 0, M 2<<27 = 0x10000000, k96 1<<31. */
	EQ(idesc(L, (Idesc){.kind = IK_MXF4NVF4, .a = DT_E2M1, .b = DT_E2M1,
	                    .scale = DT_UE4M3, .m = 256, .n = 256, .cta_group = 2,
	                    .k96 = 1}),
	   0x90400480, "mxf4nvf4 k96");
	/* mxf4nvf4 ue8m0 neg A M128 N8: negA 0x2000, N 1<<17, ue8m0 0x800000. */
	EQ(idesc(L, (Idesc){.kind = IK_MXF4NVF4, .a = DT_E2M1, .b = DT_E2M1,
	                    .scale = DT_UE8M0, .m = 128, .n = 8, .neg_a = 1}),
	   0x08822480, "mxf4nvf4 ue8m0 neg A N8");
	/* mxf8f6f4 sparse e4m3 M256 N256 2-CTA: sparse 1<<2, N 0x400000,
	 * ue8m0 0x800000, M 0x10000000. */
	EQ(idesc(L, (Idesc){.kind = IK_MXF8F6F4, .a = DT_E4M3, .b = DT_E4M3,
	                    .scale = DT_UE8M0, .m = 256, .n = 256, .cta_group = 2,
	                    .sparse = 1}),
	   0x10C00004, "mxf8f6f4 sparse M256");
}

/* Legal (M, N) pairs per kind and cta_group, counted over M 16..512 step 16
 * and N 1..512, against docs/hardware.md, "MMA shapes": f16 1-CTA 2 M x 32 N, 2-CTA 2 x
 * 16; i8 1-CTA 2 x 18 (8, 16, 24, 32..256 step 16), 2-CTA 2 x 8 (32..256 step 32);
 * mxf8f6f4 1-CTA 1 x 32, 2-CTA 2 x 16. */
static void
test_shape_counts(void)
{
	static const struct {
		IdescKind k;
		DType a, d;
		int cta, want;
	} c[] = {
		/* cta_group::1: M=64 N 8..256 step 8 (32), M=128 step 16 (16) */
		{IK_F16, DT_BF16, DT_F32, 1, 48}, {IK_F16, DT_BF16, DT_F32, 2, 32},
		{IK_TF32, DT_TF32, DT_F32, 1, 48}, {IK_F8F6F4, DT_E4M3, DT_F32, 2, 32},
		{IK_I8, DT_S8, DT_S32, 1, 36}, {IK_I8, DT_S8, DT_S32, 2, 16},
		{IK_MXF8F6F4, DT_E4M3, DT_F32, 1, 32},
		{IK_MXF8F6F4, DT_E4M3, DT_F32, 2, 32},
		{IK_MXF4, DT_E2M1, DT_F32, 1, 32},
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		int n_ok = 0;

		for (int m = 16; m <= 512; m += 16)
			for (int n = 1; n <= 512; n++) {
				Idesc d = {.kind = c[i].k, .a = c[i].a, .b = c[i].a,
				           .d = c[i].d, .scale = DT_UE8M0, .m = m, .n = n,
				           .cta_group = c[i].cta};
				uint32_t v;

				n_ok += idesc_encode(&v, &d, NULL) == 0;
			}
		if (n_ok != c[i].want) {
			printf("FAIL test_desc.c:%d: kind::%s cta_group::%d: expected %d "
			       "legal (M, N), got %d\n", L, idesc_kind_name(c[i].k),
			       c[i].cta, c[i].want, n_ok);
			fails++;
		}
	}
}

static void
test_reject_desc(void)
{
	SmemDesc ok = {.addr = 0x400, .lbo = 16, .sbo = 1024, .swz = SWZ_128B};
	SmemDesc d;

	d = ok, d.addr = 0x408;
	reject_desc(L, S100, d, "addr=0x408");
	d = ok, d.addr = 0x40000;
	reject_desc(L, S100, d, "addr=0x40000");
	d = ok, d.lbo = 24;
	reject_desc(L, S90, d, "lbo=0x18");
	d = ok, d.lbo = 0x40000;
	reject_desc(L, S100, d, "lbo=0x40000");
	d = ok, d.sbo = 1025;
	reject_desc(L, S100, d, "sbo=0x401");
	d = ok, d.sbo = 0x80000;
	reject_desc(L, S90, d, "sbo=0x80000");
	d = ok, d.swz = SWZ_COUNT;
	reject_desc(L, S100, d, "swizzle=4");
	d = ok, d.base_offset = 8;
	reject_desc(L, S100, d, "base-offset=8");
	d = ok, d.base_offset = -1;
	reject_desc(L, S90, d, "base-offset=-1");
	d = ok, d.base_offset = 1, d.swz = SWZ_NONE;
	reject_desc(L, S100, d, "base-offset=1");
	d = ok, d.lbo_mode = 1;
	reject_desc(L, S100, d, "lbo-mode=1: absolute LBO is sm_103a only");
	d = ok, d.lbo_mode = 1;
	reject_desc(L, S90, d, "lbo-mode=1");
	d = ok, d.lbo_mode = 2;
	reject_desc(L, S100, d, "lbo-mode=2");
	d = ok, d.base32b = 1;
	reject_desc(L, S90, d, "base32b=1");
	d = ok, d.base32b = 1, d.swz = SWZ_64B;
	reject_desc(L, S100, d, "base32b=1");
	d = ok, d.base32b = 2;
	reject_desc(L, S100, d, "base32b=2");
	reject_desc(L, (DescArch)7, ok, "target=7");

	/* desc_for_tile: tile base off its 1024-B period; tile past 256 KiB. */
	{
		TileLayout t;
		KgErr err = {{0}};
		uint64_t v;

		layout_canonical(&t, MAJOR_K, SWZ_128B, 16, 128, 64, &err);
		expect_msg(L, desc_for_tile(&v, S100, &t, 0x420, &err), &err,
		           "addr=0x420");
		expect_msg(L, desc_for_tile(&v, S100, &t, 0x3E000, &err), &err,
		           "addr=0x3e000");
	}

	/* desc_decode: reserved bits, the version constant, layout codes. */
	reject_decode(L, S100, 0x4000404000010040 | 1ull << 14, "reserved");
	reject_decode(L, S100, 0x4000404000010040 | 1ull << 31, "reserved");
	reject_decode(L, S100, 0x4000404000010040 | 1ull << 55, "fixed");
	reject_decode(L, S100, 0x4000004000010040, "version");
	reject_decode(L, S100, 0x6000404000010040, "layout");  /* code 3 */
	reject_decode(L, S100, 0xA000404000010040, "layout");  /* code 5 */
	reject_decode(L, S90, 0x4000404000010040, "unused");   /* bit 46 */
	reject_decode(L, S90, 0x2000004000010040, "unused");   /* bit 61 */
	reject_decode(L, (DescArch)9, 0, "target=9");
}

static void
test_reject_layout(void)
{
	reject_layout(L, MAJOR_K, SWZ_128B, 16, 100, 64, "rows=100");
	reject_layout(L, MAJOR_K, SWZ_128B, 16, 128, 48, "cols=48");
	reject_layout(L, MAJOR_K, SWZ_NONE, 16, 128, 4, "cols=4");
	reject_layout(L, MAJOR_K, SWZ_128B, 5, 128, 64, "elem-bits=5");
	reject_layout(L, MAJOR_K, SWZ_128B, 16, 0, 64, "rows=0");
	reject_layout(L, MAJOR_K, SWZ_128B, 16, 128, -64, "cols=-64");
	reject_layout(L, MAJOR_K, SWZ_128B, 16, 4096, 64, "rows=4096");
	reject_layout(L, MAJOR_MN, SWZ_128B, 4, 256, 64, "major=MN");
	reject_layout(L, MAJOR_MN, SWZ_128B, 32, 32, 64, "major=MN");
	reject_layout(L, MAJOR_MN, SWZ_128B, 16, 128, 12, "cols=12");
	reject_layout(L, MAJOR_MN, SWZ_128B, 16, 32, 64, "rows=32");
	reject_layout(L, MAJOR_K, SWZ_COUNT, 16, 128, 64, "swizzle=4");
	reject_layout(L, (Major)5, SWZ_128B, 16, 128, 64, "major=5");
}

static void
test_reject_idesc(void)
{
	Idesc f16 = {.kind = IK_F16, .a = DT_BF16, .b = DT_BF16, .d = DT_F32,
	             .m = 128, .n = 128};
	Idesc mx = {.kind = IK_MXF8F6F4, .a = DT_E4M3, .b = DT_E4M3,
	            .scale = DT_UE8M0, .m = 128, .n = 128};
	Idesc f4 = {.kind = IK_MXF4, .a = DT_E2M1, .b = DT_E2M1, .scale = DT_UE8M0,
	            .m = 128, .n = 128};
	Idesc i8 = {.kind = IK_I8, .a = DT_S8, .b = DT_S8, .d = DT_S32, .m = 128,
	            .n = 128};
	Idesc d;

	d = f16, d.kind = IK_COUNT;
	reject_idesc(L, d, "kind=7");
	d = f16, d.a = DT_E4M3;
	reject_idesc(L, d, "a=e4m3");
	d = i8, d.b = DT_BF16;
	reject_idesc(L, d, "b=bf16");
	d = f16, d.b = DT_F16;
	reject_idesc(L, d, "b=fp16");
	d = f16, d.d = DT_S32;
	reject_idesc(L, d, "d=s32");
	d = f16, d.d = DT_F16;
	reject_idesc(L, d, "d=fp16");
	d = f16, d.kind = IK_TF32, d.a = d.b = DT_TF32, d.d = DT_F16;
	reject_idesc(L, d, "d=fp16");
	d = i8, d.d = DT_F32;
	reject_idesc(L, d, "d=f32");
	d = f4, d.scale = DT_UE4M3;
	reject_idesc(L, d, "scale=ue4m3");
	d = mx, d.scale = DT_E4M3;
	reject_idesc(L, d, "scale=e4m3");
	d = f4, d.a = DT_E4M3;
	reject_idesc(L, d, "a=e4m3");
	d = f16, d.m = 96;
	reject_idesc(L, d, "m=96");
	d = f16, d.m = 256;
	reject_idesc(L, d, "m=256");
	d = f16, d.m = 64, d.cta_group = 2;
	reject_idesc(L, d, "m=64");
	d = mx, d.m = 64;
	reject_idesc(L, d, "m=64");
	d = mx, d.cta_group = 2, d.sparse = 1;
	reject_idesc(L, d, "m=128");
	d = f16, d.n = 12;
	reject_idesc(L, d, "n=12");
	d = f16, d.n = 264;
	reject_idesc(L, d, "n=264");
	d = f16, d.n = 8, d.cta_group = 2;
	reject_idesc(L, d, "n=8");
	d = i8, d.n = 40;
	reject_idesc(L, d, "n=40");
	d = i8, d.n = 48, d.cta_group = 2;
	reject_idesc(L, d, "n=48");
	d = f16, d.cta_group = 3;
	reject_idesc(L, d, "cta-group=3");
	d = f16, d.max_shift = 1, d.cta_group = 2;
	reject_idesc(L, d, "cta-group=2");
	d = f16, d.max_shift = 1, d.n = 192;
	reject_idesc(L, d, "n=192");
	d = f16, d.max_shift = 1, d.n = 256, d.sparse = 1;
	reject_idesc(L, d, "n=256");
	d = f16, d.max_shift = 1, d.m = 256;
	reject_idesc(L, d, "m=256");
	d = mx, d.b_major_mn = 1, d.n = 24;
	reject_idesc(L, d, "n=24");
	d = i8, d.b_major_mn = 1, d.n = 24;     /* legal N for i8, not transposed */
	reject_idesc(L, d, "n=24");
	d = mx, d.kind = IK_F8F6F4, d.d = DT_F32, d.b_major_mn = 1, d.n = 48,
	d.m = 256, d.cta_group = 2;            /* 2-CTA step 16, transposed 32 */
	reject_idesc(L, d, "n=48");
	d = f4, d.a_major_mn = 1;
	reject_idesc(L, d, "a-major=MN");
	d = f4, d.kind = IK_MXF4NVF4, d.b_major_mn = 1;
	reject_idesc(L, d, "b-major=MN");
	d = mx, d.a = DT_E2M1, d.a_major_mn = 1;
	reject_idesc(L, d, "a-major=MN");
	d = f16, d.kind = IK_F8F6F4, d.a = DT_E4M3, d.b = DT_E3M2, d.b_major_mn = 1;
	reject_idesc(L, d, "b-major=MN");
	d = i8, d.neg_a = 1;
	reject_idesc(L, d, "neg-a=1");
	d = i8, d.neg_b = 1;
	reject_idesc(L, d, "neg-b=1");
	d = f16, d.neg_a = 2;
	reject_idesc(L, d, "neg-a=2");
	d = f16, d.a_major_mn = -1;
	reject_idesc(L, d, "a-major=-1");
	d = f16, d.sparse = 2;
	reject_idesc(L, d, "sparse=2");
	d = f16, d.saturate = 1;
	reject_idesc(L, d, "saturate=1");
	d = mx, d.saturate = 1;
	reject_idesc(L, d, "saturate=1");
	d = f16, d.sparse_sel = 1;
	reject_idesc(L, d, "sparse-sel=1");
	d = f16, d.sparse = 1, d.sparse_sel = 4;
	reject_idesc(L, d, "sparse-sel=4");
	d = mx, d.sparse = 1, d.sparse_sel = 1, d.m = 256, d.cta_group = 2;
	reject_idesc(L, d, "sparse-sel=1");
	d = f16, d.max_shift = 4;
	reject_idesc(L, d, "max-shift=4");
	d = mx, d.max_shift = 1;
	reject_idesc(L, d, "max-shift=1");
	d = f16, d.sfa_id = 1;
	reject_idesc(L, d, "sfa-id=1");
	d = f16, d.sfb_id = 2;
	reject_idesc(L, d, "sfb-id=2");
	d = mx, d.sfa_id = 4;
	reject_idesc(L, d, "sfa-id=4");
	d = f4, d.sfa_id = 1;
	reject_idesc(L, d, "sfa-id=1");
	d = f4, d.kind = IK_MXF4NVF4, d.sfb_id = 3;
	reject_idesc(L, d, "sfb-id=3");
	d = f16, d.k96 = 1;
	reject_idesc(L, d, "k96=1");
	d = mx, d.k96 = 1;
	reject_idesc(L, d, "k96=1");
	d = f4, d.k96 = 1;
	reject_idesc(L, d, "k96=1");
	d = f4, d.k96 = 1, d.m = 256, d.cta_group = 2, d.sparse = 1;
	reject_idesc(L, d, "k96=1");
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The field table must cover each bit exactly once and its raw values must
 * rebuild the word. */
static void
check_fields(int line, const DescField *f, int n, int bits, uint64_t v)
{
	uint64_t rebuilt = 0;
	int next = 0;

	for (int i = 0; i < n; i++) {
		if (f[i].lo != next || f[i].hi < f[i].lo) {
			printf("FAIL test_desc.c:%d: field %s covers %d-%d, expected to "
			       "start at %d\n", line, f[i].name, f[i].lo, f[i].hi, next);
			fails++;
			return;
		}
		rebuilt |= f[i].raw << f[i].lo;
		next = f[i].hi + 1;
	}
	if (next != bits) {
		printf("FAIL test_desc.c:%d: fields end at bit %d, expected %d\n", line,
		       next - 1, bits - 1);
		fails++;
	}
	EQ(rebuilt, v, "fields rebuild the value");
}

static void
test_round_trip(void)
{
	uint64_t seed = 0x9E3779B97F4A7C15ull;

	for (int i = 0; i < 100000; i++) {
		DescArch arch = xorshift(&seed) & 1 ? S100 : S90;
		SmemDesc d = {0}, back = {0};
		DescField f[16];
		KgErr err = {{0}};
		uint64_t v = 0;

		d.addr = (uint32_t)(xorshift(&seed) & 0x3FFF) << 4;
		d.lbo = (uint32_t)(xorshift(&seed) & 0x3FFF) << 4;
		d.sbo = (uint32_t)(xorshift(&seed) & 0x3FFF) << 4;
		d.swz = (Swizzle)(xorshift(&seed) % SWZ_COUNT);
		if (d.swz != SWZ_NONE)
			d.base_offset = (int)(xorshift(&seed) & 7);
		if (arch == S100 && d.swz == SWZ_128B)
			d.base32b = (int)(xorshift(&seed) & 1);
		if (desc_encode(&v, arch, &d, &err) || desc_decode(&back, arch, v, &err)) {
			printf("FAIL test_desc.c:%d: round trip %d: %s\n", L, i, err.msg);
			fails++;
			return;
		}
		if (memcmp(&d, &back, sizeof d)) {
			printf("FAIL test_desc.c:%d: round trip %d: addr 0x%x lbo 0x%x "
			       "sbo 0x%x base %d swz %d b32 %d came back as addr 0x%x lbo "
			       "0x%x sbo 0x%x base %d swz %d b32 %d\n", L, i, d.addr, d.lbo,
			       d.sbo, d.base_offset, d.swz, d.base32b, back.addr, back.lbo,
			       back.sbo, back.base_offset, back.swz, back.base32b);
			fails++;
			return;
		}
		check_fields(L, f, desc_fields(f, 16, arch, v), 64, v);
	}
}

/* Every legal idesc decodes through idesc_fields back to its fields.
 * Operand types are drawn from each kind's own list so most draws pass. */
static void
test_idesc_fields(void)
{
	static const DType ab[IK_COUNT][5] = {
		[IK_F16] = {DT_F16, DT_BF16, DT_F16, DT_BF16, DT_F16},
		[IK_TF32] = {DT_TF32, DT_TF32, DT_TF32, DT_TF32, DT_TF32},
		[IK_F8F6F4] = {DT_E4M3, DT_E5M2, DT_E2M3, DT_E3M2, DT_E2M1},
		[IK_I8] = {DT_S8, DT_U8, DT_S8, DT_U8, DT_S8},
		[IK_MXF8F6F4] = {DT_E4M3, DT_E5M2, DT_E2M3, DT_E3M2, DT_E2M1},
		[IK_MXF4] = {DT_E2M1, DT_E2M1, DT_E2M1, DT_E2M1, DT_E2M1},
		[IK_MXF4NVF4] = {DT_E2M1, DT_E2M1, DT_E2M1, DT_E2M1, DT_E2M1},
	};
	static const DType acc[IK_COUNT][2] = {
		[IK_F16] = {DT_F32, DT_F16}, [IK_TF32] = {DT_F32, DT_F32},
		[IK_F8F6F4] = {DT_F32, DT_F16}, [IK_I8] = {DT_S32, DT_S32},
		[IK_MXF8F6F4] = {DT_F32, DT_F32}, [IK_MXF4] = {DT_F32, DT_F32},
		[IK_MXF4NVF4] = {DT_F32, DT_F32},
	};
	static const int ms[] = {32, 64, 128, 256};
	uint64_t seed = 12345;
	int tried = 0;

	for (int i = 0; i < 200000 && tried < 20000; i++) {
		Idesc d = {0};
		DescField f[32];
		uint32_t v;
		int n;

		d.kind = (IdescKind)(xorshift(&seed) % IK_COUNT);
		d.a = ab[d.kind][xorshift(&seed) % 5];
		d.b = ab[d.kind][xorshift(&seed) % 5];
		d.d = acc[d.kind][xorshift(&seed) % 2];
		d.scale = xorshift(&seed) & 1 ? DT_UE8M0 : DT_UE4M3;
		d.m = ms[xorshift(&seed) % 4];
		d.n = (int)(xorshift(&seed) % 32 + 1) * 8;
		d.cta_group = (int)(xorshift(&seed) % 2) + 1;
		d.a_major_mn = (int)(xorshift(&seed) % 4 == 0);
		d.b_major_mn = (int)(xorshift(&seed) % 4 == 0);
		d.neg_a = (int)(xorshift(&seed) & 1);
		d.sparse = (int)(xorshift(&seed) % 4 == 0);
		d.sfa_id = (int)(xorshift(&seed) % 4);
		d.sfb_id = (int)(xorshift(&seed) % 4);
		if (!d.sparse && d.kind != IK_I8)
			d.neg_b = (int)(xorshift(&seed) & 1);
		if (d.kind < IK_MXF8F6F4)  /* not block-scaled: no SF ids */
			d.sfa_id = d.sfb_id = 0;
		if (idesc_encode(&v, &d, NULL))
			continue;
		tried++;
		n = idesc_fields(f, 32, d.kind, v);
		check_fields(L, f, n, 32, v);
		for (int j = 0; j < n; j++) {
			if (strcmp(f[j].name, "n") == 0)
				EQ(f[j].raw << 3, (uint64_t)d.n, "idesc_fields n");
			if (strcmp(f[j].name, "m") == 0)
				EQ(f[j].raw << (f[j].lo == 24 ? 4 : 7), (uint64_t)d.m,
				   "idesc_fields m");
			if (strcmp(f[j].name, "sfa-id") == 0)
				EQ(f[j].raw, (uint64_t)d.sfa_id, "idesc_fields sfa-id");
			if (strcmp(f[j].name, "a") == 0
			    && strcmp(f[j].meaning, dtype_name(d.a))) {
				printf("FAIL test_desc.c:%d: A field reads \"%s\", expected "
				       "\"%s\"\n", L, f[j].meaning, dtype_name(d.a));
				fails++;
			}
		}
	}
	if (tried < 5000) {
		printf("FAIL test_desc.c:%d: only %d random idescs were legal\n", L,
		       tried);
		fails++;
	}
}

static void
test_names(void)
{
	for (int k = 0; k < IK_COUNT; k++) {
		IdescKind back;

		if (idesc_kind_parse(idesc_kind_name((IdescKind)k), &back) || back != (IdescKind)k) {
			printf("FAIL test_desc.c:%d: kind %d does not parse back\n", L, k);
			fails++;
		}
	}
	{
		IdescKind k;

		EQ(idesc_kind_parse("kind::mxf4nvf4", &k) == 0 && k == IK_MXF4NVF4, 1,
		   "kind:: prefix accepted");
		EQ(idesc_kind_parse("f8", &k), (uint64_t)-1, "unknown kind rejected");
	}
}

/* A K-major SW128 bf16 tile of 64 rows (keys) x 128 columns (head dim)
 * read MN-major, as P·V reads V: LBO = its 64-column slice, 64 rows x 128 B
 * = 8192 B (field 0x200), SBO = 8 rows x 128 B = 1024 (field 0x40):
 * sm100 0x200<<16 | 0x40<<32 | 1<<46 | 2<<61 = 0x4000404002000000, sm90
 * without bit 46 and 1<<62 = 0x4000004002000000. */
static void
test_tile_mn(void)
{
	TileLayout t;
	KgErr err = {{0}};
	uint64_t d = 0;

	if (layout_canonical(&t, MAJOR_K, SWZ_128B, 16, 64, 128, &err)) {
		printf("FAIL test_desc.c:%d: %s\n", __LINE__, err.msg);
		fails++;
		return;
	}
	EQ(desc_for_tile_mn(&d, DESC_SM100, &t, 0, &err), 0, "mn view sm100");
	EQ(d, 0x4000404002000000ull, "mn view sm100");
	EQ(desc_for_tile_mn(&d, DESC_SM90, &t, 0, &err), 0, "mn view sm90");
	EQ(d, 0x4000004002000000ull, "mn view sm90");
	EQ(desc_for_tile_mn(&d, DESC_SM100, &t, 0x2400, &err), 0, "mn view at 0x2400");
	EQ(d, 0x4000404002000240ull, "mn view at 0x2400");
	EQ(desc_for_tile_mn(&d, DESC_SM100, &t, 0x2480, &err), (uint64_t)-1, "unaligned");
	t.swz = SWZ_NONE;
	EQ(desc_for_tile_mn(&d, DESC_SM100, &t, 0, &err), (uint64_t)-1, "no swizzle");
}

/* desc_text / idesc_text on values built bit by bit (PTX ISA §9.7.15.5.1.2.2
 * wgmma descriptor, §9.7.16.4.1 tcgen05 descriptor, the instruction
 * descriptor table of kind::f16; gen/desc.c field tables): fields in 16-byte units, the
 * swizzle code, the type codes bf16 = 1 and f32 = 1, N >> 3, M >> 4. */
static void
text_is(int line, const char *got, const char *want)
{
	if (strcmp(got, want) != 0) {
		printf("FAIL test_desc.c:%d: text \"%s\", want \"%s\"\n", line, got, want);
		fails++;
	}
}

static void
test_text(void)
{
	char t[160];
	/* lbo 16 -> 1 at bit 16, sbo 1024 -> 64 at bit 32 */
	uint64_t lbo_sbo = (1ull << 16) | (64ull << 32);
	uint32_t id = (1u << 4) | (1u << 7) | (1u << 10) | ((128u >> 3) << 17) | ((128u >> 4) << 24);
	Idesc d = {0};
	uint32_t enc = 0;
	KgErr err = {{0}};

	desc_text(t, sizeof t, DESC_SM90, (1ull << 62) | lbo_sbo); /* sm90 128B = code 1 at 62 */
	text_is(__LINE__, t, "sw128 lbo=16 sbo=1024");
	desc_text(t, sizeof t, DESC_SM90, (3ull << 62) | lbo_sbo | (0x400 >> 4) | (2ull << 49));
	text_is(__LINE__, t, "sw32 lbo=16 sbo=1024 start=0x400 base-offset=2");
	/* sm100: version 0b001 at 46, 128B = code 2 at 61, 128B_BASE32B = 1 */
	desc_text(t, sizeof t, DESC_SM100, (1ull << 46) | (2ull << 61) | lbo_sbo);
	text_is(__LINE__, t, "sw128 lbo=16 sbo=1024");
	desc_text(t, sizeof t, DESC_SM100, (1ull << 46) | (1ull << 61) | lbo_sbo);
	text_is(__LINE__, t, "sw128 base32b lbo=16 sbo=1024");
	desc_text(t, sizeof t, DESC_SM100, (1ull << 46) | lbo_sbo); /* layout 0: no swizzle */
	text_is(__LINE__, t, "swnone lbo=16 sbo=1024");
	desc_text(t, sizeof t, DESC_SM100, (2ull << 61) | lbo_sbo);
	if (strncmp(t, "INVALID: bits 46-48 (version)=0", 31) != 0) {
		printf("FAIL test_desc.c:%d: missing version must read INVALID: %s\n", __LINE__, t);
		fails++;
	}

	idesc_text(t, sizeof t, IK_F16, id);
	text_is(__LINE__, t, "kind::f16 a=bf16 b=bf16 d=f32 M=128 N=128");
	idesc_text(t, sizeof t, IK_F16, id | (1u << 16) | (1u << 13));
	text_is(__LINE__, t, "kind::f16 a=bf16 b=bf16 d=f32 M=128 N=128 neg-a b=MN-major");
	/* the encoder and the text agree on what the generator asks for */
	d.kind = IK_F16;
	d.a = d.b = DT_BF16;
	d.d = DT_F32;
	d.m = 128;
	d.n = 64;
	d.cta_group = 1;
	d.b_major_mn = 1;
	if (idesc_encode(&enc, &d, &err) < 0) {
		printf("FAIL test_desc.c:%d: %s\n", __LINE__, err.msg);
		fails++;
	}
	idesc_text(t, sizeof t, IK_F16, enc);
	text_is(__LINE__, t, "kind::f16 a=bf16 b=bf16 d=f32 M=128 N=64 b=MN-major");
	idesc_text(t, 12, IK_F16, id);
	text_is(__LINE__, t, "kind::f16 a");
}

/* In a cluster a shared address carries the CTA rank in bits 24-27
 * (docs/hardware.md, "Shared addresses in a cluster"). Worked by hand for
 * rank 1's V tile at offset 0x22400 with LBO 8192 (field 0x200 at bit 16):
 * adding (0x1022400 >> 4) = 0x102240 to the low word sets field bit 4 too,
 * LBO 0x210 << 4 = 8448; masked to DESC_ADDR_MASK first, 0x2240 and 8192. */
static void
test_cluster_addr(void)
{
	SmemDesc d = {.addr = 0x22400, .lbo = 8192, .sbo = 1024, .swz = SWZ_128B}, got;
	KgErr err = {{0}};
	uint64_t v = raw(__LINE__, DESC_SM90, d), lo_hi = v & ~UINT64_C(0x3fff);
	uint32_t rank1 = UINT32_C(0x1000000) | d.addr;

	if (desc_decode(&got, DESC_SM90, lo_hi + ((rank1 & DESC_ADDR_MASK) >> 4), &err) || got.addr != 0x22400 ||
	    got.lbo != 8192) {
		printf("FAIL test_desc.c:%d: masked rank-1 address: addr 0x%x lbo %u, want 0x22400 8192 (%s)\n",
		       __LINE__, got.addr, got.lbo, err.msg);
		fails++;
	}
	if (desc_decode(&got, DESC_SM90, lo_hi + (rank1 >> 4), &err) || got.lbo != 8448) {
		printf("FAIL test_desc.c:%d: unmasked rank-1 address: lbo %u, want 8448\n", __LINE__, got.lbo);
		fails++;
	}
	/* the mask keeps exactly the field's bits 4-17 */
	d.addr = DESC_ADDR_MASK & ~UINT32_C(15);
	EQ(raw(__LINE__, DESC_SM90, d) & 0x3fff, 0x3fff, "start field of the highest masked address");
	d.addr = DESC_ADDR_MASK + 1;
	reject_desc(__LINE__, DESC_SM90, d, "256 KiB");
}

int
main(void)
{
	test_tv_desc();
	test_hand_desc();
	test_tv6();
	test_tv_idesc();
	test_hand_idesc();
	test_shape_counts();
	test_reject_desc();
	test_reject_layout();
	test_reject_idesc();
	test_round_trip();
	test_idesc_fields();
	test_names();
	test_tile_mn();
	test_text();
	test_cluster_addr();
	if (fails) {
		printf("test_desc: %d failure(s)\n", fails);
		return 1;
	}
	printf("test_desc: ok\n");
	return 0;
}
