/* Unit tests of the emulator's building blocks against the test vectors of
 * docs/hardware.md, "Test vectors" (descriptors, swizzle, element addresses, number
 * formats, docs/hardware.md, "Number formats" for fp4/fp6 and the block-scale formats)
 * and of the parser's error reporting, tcgen05 modifier rules included. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/emu/emu.h"
#include "runtime/emu/ops.h"

static int fails;

#define CHECK(cond, ...)                                                  \
	do {                                                                  \
		if (!(cond)) {                                                    \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                    \
			printf(__VA_ARGS__);                                          \
			printf("\n");                                                 \
			fails++;                                                      \
		}                                                                 \
	} while (0)

static void
desc(uint64_t v, int arch, uint32_t start, uint32_t lbo, uint32_t sbo, int sw)
{
	EmuSmemDesc d;
	char why[256] = "";
	int rc = emu_desc_decode(v, arch, &d, why, sizeof why);
	CHECK(rc == 0, "descriptor 0x%016llx rejected: %s", (unsigned long long)v, why);
	CHECK(d.start == start && d.lbo == lbo && d.sbo == sbo && d.swizzle == sw,
	      "descriptor 0x%016llx: start 0x%x lbo %u sbo %u swizzle %d, want 0x%x %u %u %d",
	      (unsigned long long)v, d.start, d.lbo, d.sbo, d.swizzle, start, lbo, sbo, sw);
}

static void
test_descriptors(void)
{
	/* TV1, TV3 (sm_100), TV2 (sm_90) */
	desc(UINT64_C(0x4000404000010040), ARCH_SM100, 0x400, 16, 1024, 128);
	desc(UINT64_C(0x8000402000010040), ARCH_SM100, 0x400, 16, 512, 64);
	desc(UINT64_C(0xC000401000010040), ARCH_SM100, 0x400, 16, 256, 32);
	desc(UINT64_C(0x0000400800800040), ARCH_SM100, 0x400, 2048, 128, 0);
	desc(UINT64_C(0x4000408000400200), ARCH_SM100, 0x2000, 1024, 2048, 128);
	desc(UINT64_C(0x4000004000010040), ARCH_SM90, 0x400, 16, 1024, 128);
	/* pitfall 1: a Hopper descriptor on sm_100 is rejected */
	EmuSmemDesc d;
	char why[256];
	CHECK(emu_desc_decode(UINT64_C(0x4000004000010040), ARCH_SM100, &d, why, sizeof why) != 0,
	      "sm_90 descriptor accepted as tcgen05");
	CHECK(strstr(why, "46-48") != NULL, "reason does not name bits 46-48: %s", why);
}

static void
test_swizzle(void)
{
	/* TV6, absolute addresses from a 1024-aligned base of 0 */
	static const struct {
		int sw;
		uint32_t in, out;
	} v[] = {
		{128, 0x080, 0x090}, {128, 0x1e0, 0x1d0}, {128, 0x3f0, 0x380}, {128, 0x410, 0x410},
		{64, 0x1f0, 0x1c0}, {32, 0x0f0, 0x0e0},
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		CHECK(emu_swizzle(v[i].in, v[i].sw) == v[i].out, "swizzle%d(0x%x) = 0x%x, want 0x%x",
		      v[i].sw, v[i].in, emu_swizzle(v[i].in, v[i].sw), v[i].out);
	/* TV6 elements: bf16 K-major SW128 (row, k) -> byte */
	EmuSmemDesc d = {.start = 0, .lbo = 16, .sbo = 1024, .swizzle = 128};
	static const uint32_t e[][3] = {{0, 0, 0x000}, {1, 0, 0x090}, {1, 8, 0x080},
	                               {7, 63, 0x38e}, {8, 0, 0x400}, {9, 8, 0x480}};
	for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
		uint32_t a = emu_desc_addr(&d, 1, 2, e[i][0], e[i][1]);
		CHECK(a == e[i][2], "K-major SW128 (%u,%u) -> 0x%x, want 0x%x", e[i][0], e[i][1], a,
		      e[i][2]);
	}
	/* no swizzle, K-major, core matrices 8 rows x 16 B: TV3's 128x16 tile
	 * (LBO 2048 between the two K halves, SBO 128 between row groups) */
	EmuSmemDesc n = {.start = 0, .lbo = 2048, .sbo = 128, .swizzle = 0};
	CHECK(emu_desc_addr(&n, 1, 2, 0, 0) == 0, "none (0,0)");
	CHECK(emu_desc_addr(&n, 1, 2, 1, 0) == 16, "none (1,0)");
	CHECK(emu_desc_addr(&n, 1, 2, 8, 0) == 128, "none (8,0)");
	CHECK(emu_desc_addr(&n, 1, 2, 0, 8) == 2048, "none (0,8)");
	CHECK(emu_desc_addr(&n, 1, 2, 9, 9) == 2048 + 128 + 16 + 2, "none (9,9)");
	/* MN-major SW128 bf16, LBO 1024 (next 64 MN), SBO 2048 (next 8 K rows) */
	EmuSmemDesc m = {.start = 0, .lbo = 1024, .sbo = 2048, .swizzle = 128};
	CHECK(emu_desc_addr(&m, 0, 2, 1, 0) == 2, "MN (1,0)");
	CHECK(emu_desc_addr(&m, 0, 2, 0, 1) == (128u ^ 16u), "MN (0,1) = 0x%x",
	      emu_desc_addr(&m, 0, 2, 0, 1));
	CHECK(emu_desc_addr(&m, 0, 2, 64, 0) == 1024, "MN (64,0)");
	CHECK(emu_desc_addr(&m, 0, 2, 0, 8) == 2048, "MN (0,8)");
}

static void
test_numbers(void)
{
	CHECK(emu_f32_to_bf16(1.0f, RND_RN) == 0x3f80, "bf16(1)");
	CHECK(emu_f32_to_bf16(emu_f32(0x3f808000u), RND_RN) == 0x3f80, "bf16 tie to even (down)");
	CHECK(emu_f32_to_bf16(emu_f32(0x3f818000u), RND_RN) == 0x3f82, "bf16 tie to even (up)");
	CHECK(emu_f32_to_bf16(NAN, RND_RN) == 0x7fff, "bf16 NaN");
	CHECK(emu_f32_to_f16(65504.0f, RND_RN, 0) == 0x7bff, "f16 max");
	CHECK(emu_f32_to_f16(65520.0f, RND_RN, 0) == 0x7c00, "f16 overflow to inf");
	CHECK(emu_f32_to_f16(65520.0f, RND_RN, 2) == 0x7bff, "f16 satfinite");
	CHECK(emu_f32_to_f16(emu_f32(0x33000001u), RND_RN, 0) == 0x0001, "f16 smallest subnormal");
	CHECK(emu_f16_to_f32(0x0001) == ldexpf(1.0f, -24), "f16 subnormal decode");
	CHECK(emu_e4m3_to_f32(0x7e) == 448.0f, "e4m3 max");
	CHECK(isnan(emu_e4m3_to_f32(0x7f)), "e4m3 NaN");
	CHECK(emu_e4m3_to_f32(0x01) == ldexpf(1.0f, -9), "e4m3 smallest subnormal");
	CHECK(emu_f32_to_e4m3(1000.0f, 1) == 0x7e, "e4m3 satfinite");
	CHECK(emu_e5m2_to_f32(0x7b) == 57344.0f, "e5m2 max");
	CHECK(emu_f32_to_e5m2(1.5f, 0) == 0x3e, "e5m2(1.5)");
	/* docs/hardware.md, "Number formats": E2M1 codes 0-7, 8-15 the negatives */
	static const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
	for (int i = 0; i < 16; i++)
		CHECK(emu_e2m1_to_f32((uint8_t)i) == (i & 8 ? -e2m1[i & 7] : e2m1[i & 7]),
		      "e2m1 0x%x = %g", i, emu_e2m1_to_f32((uint8_t)i));
	/* PTX ISA §5.2.3: E2M3 bias 1, E3M2 bias 3, sign in bit 5, no inf/NaN */
	CHECK(emu_e2m3_to_f32(0x1f) == 7.5f && emu_e2m3_to_f32(0x01) == 0.125f &&
	      emu_e2m3_to_f32(0x3f) == -7.5f && emu_e2m3_to_f32(0x08) == 1.0f, "e2m3");
	CHECK(emu_e3m2_to_f32(0x1f) == 28.0f && emu_e3m2_to_f32(0x01) == 0.0625f &&
	      emu_e3m2_to_f32(0x2c) == -1.0f, "e3m2");
	/* docs/hardware.md, "Number formats" */
	CHECK(emu_ue8m0_to_f32(0x7f) == 1.0f && emu_ue8m0_to_f32(0xfe) == ldexpf(1.0f, 127) &&
	      emu_ue8m0_to_f32(0x00) == ldexpf(1.0f, -127) && isnan(emu_ue8m0_to_f32(0xff)), "ue8m0");
	CHECK(emu_ue4m3_to_f32(0x7e) == 448.0f && emu_ue4m3_to_f32(0xb8) == 1.0f &&
	      isnan(emu_ue4m3_to_f32(0x7f)) && emu_ue4m3_to_f32(0x01) == ldexpf(1.0f, -9), "ue4m3");
}

static void
parse_fails(const char *ptx, int line, const char *what)
{
	EmuProgram *p = NULL;
	KrtErr err;
	krt_err_clear(&err);
	int rc = emu_parse(ptx, strlen(ptx), &p, &err);
	char want[32];
	snprintf(want, sizeof want, "PTX line %d", line);
	CHECK(rc != 0 && strstr(err.msg, want) && strstr(err.msg, what),
	      "expected a load error at line %d mentioning '%s', got rc %d: %s", line, what, rc, err.msg);
	emu_program_free(p);
}

static void
test_parser(void)
{
	const char *ok = ".version 8.6\n.target sm_100a\n.address_size 64\n"
	                 ".visible .entry k(.param .u32 p_n)\n{\n"
	                 "\t.reg .b32 %r<4>;\n\t.reg .pred %p<2>;\n"
	                 "\tld.param.u32 %r1, [p_n];\n"
	                 "\tsetp.lt.and.u32 %p1, %r1, 0x10, !%p0;\n"
	                 "\t@!%p1 bra $L_x;\n"
	                 "\tmov.f32 %r2, 0f3F800000;\n"
	                 "$L_x:\n\tret;\n}\n";
	EmuProgram *p = NULL;
	KrtErr err;
	krt_err_clear(&err);
	int rc = emu_parse(ok, strlen(ok), &p, &err);
	CHECK(rc == 0, "parse: %s", err.msg);
	if (p) {
		CHECK(p->ninsn == 5, "5 instructions, got %d", p->ninsn);
		CHECK(p->insn[2].guard >= 0 && p->insn[2].guard_neg, "@!%%p1 guard");
		CHECK(p->ops[p->insn[2].op].imm == 4, "bra target pc 4, got %lld",
		      (long long)p->ops[p->insn[2].op].imm);
		CHECK(p->ops[p->insn[3].op + 1].imm == 0x3f800000, "hex float immediate");
		CHECK(p->nparams == 1 && p->param_bytes == 4, "one u32 param");
		emu_program_free(p);
	}
	parse_fails(".version 8.6\n.target sm_100a\n.address_size 64\n.visible .entry k()\n{\n"
	            "\tret;\n\tfrobnicate.b32;\n}\n", 7, "not supported");
	parse_fails(".version 8.6\n.target sm_100a\n.address_size 64\n.visible .entry k()\n{\n"
	            "\t.reg .b32 %r<2>;\n\tadd.u32.wat %r1, %r1, 1;\n}\n", 7, "unknown modifier");
	parse_fails(".version 8.6\n.target sm_100a\n.address_size 64\n.visible .entry k()\n{\n"
	            "\t.reg .b32 %r<2>;\n\tadd.u32 %r1, %r7, 1;\n}\n", 7, "%r7");
	parse_fails(".version 8.6\n.target sm_100a\n.address_size 64\n.visible .entry k()\n{\n"
	            "\tbra $nowhere;\n}\n", 6, "$nowhere");
}

/* One tcgen05 instruction in a kernel with %r, %rd, %p registers. */
static void
tc_parse(const char *insn, const char *what)
{
	char ptx[1024];
	snprintf(ptx, sizeof ptx, ".version 8.8\n.target sm_100a\n.address_size 64\n"
	         ".visible .entry k()\n{\n\t.reg .b32 %%r<8>;\n\t.reg .b64 %%rd<4>;\n"
	         "\t.reg .pred %%p<2>;\n\t%s\n\tret;\n}\n", insn);
	if (what) {
		parse_fails(ptx, 9, what);
		return;
	}
	EmuProgram *p = NULL;
	KrtErr err;
	krt_err_clear(&err);
	CHECK(emu_parse(ptx, strlen(ptx), &p, &err) == 0, "%s: %s", insn, err.msg);
	emu_program_free(p);
}

/* The tcgen05 modifier rules (PTX ISA §9.7.16.9.2, §9.7.16.9.3, §9.7.16.10.7.1;
 * what ptxas 13.0 refuses) */
static void
test_tc_modifiers(void)
{
	static const struct {
		const char *insn, *what; /* what: NULL if it must parse */
	} v[] = {
		{"tcgen05.ld.sync.aligned.16x256b.x1.pack::16b.b32 {%r1, %r2, %r3, %r4}, [%r0];", NULL},
		{"tcgen05.st.sync.aligned.32x32b.x2.unpack::16b.b32 [%r0], {%r1, %r2};", NULL},
		{"tcgen05.st.sync.aligned.32x32b.x2.pack::16b.b32 [%r0], {%r1, %r2};", "unknown modifier"},
		{"tcgen05.cp.cta_group::1.64x128b.warpx2::01_23.b8x16.b6x16_p32 [%r0], %rd1;", NULL},
		{"tcgen05.cp.cta_group::1.4x256b [%r0], %rd1;", NULL},
		{"tcgen05.cp.cta_group::1.64x128b [%r0], %rd1;", "needs .warpx2"},
		{"tcgen05.cp.cta_group::1.128x256b.warpx4 [%r0], %rd1;", "cannot take .warpx4"},
		{"tcgen05.cp.cta_group::1.128x128b.b8x16 [%r0], %rd1;", "come together"},
		{"tcgen05.cp.cta_group::2.128x128b [%r0], %rd1;", "CTA pair"},
		{"tcgen05.shift.cta_group::1.down [%r0];", NULL},
		{"tcgen05.shift.down.cta_group::1 [%r0];", NULL},
		{"tcgen05.shift.cta_group::1 [%r0];", "needs .down"},
		{"tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%r0], %rd1, %rd2, %r1, [%r2], "
		 "[%r3], %p1;", NULL},
		{"tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r0], [%r4], %rd2, %r1, "
		 "[%r2], [%r3], %p1;", NULL},
		{"tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale [%r0], %rd1, %rd2, %r1, [%r2], "
		 "[%r3], %p1;", "needs .scale_vec"},
		{"tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::2X [%r0], %rd1, %rd2, "
		 "%r1, [%r2], [%r3], %p1;", "cannot take 2X"},
		{"tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block16 [%r0], %rd1, %rd2, %r1, [%r2], "
		 "[%r3], %p1;", "cannot take 4X"},
		{"tcgen05.mma.cta_group::1.kind::mxf4 [%r0], %rd1, %rd2, %r1, [%r2], [%r3], %p1;",
		 "needs .block_scale"},
		{"tcgen05.mma.cta_group::1.kind::f8f6f4.block_scale [%r0], %rd1, %rd2, %r1, [%r2], "
		 "[%r3], %p1;", "cannot take .block_scale"},
		{"tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale [%r0], %rd1, %rd2, %r1, %p1;",
		 "[scale-A-tmem]"},
		{"tcgen05.mma.cta_group::1.kind::f16.ws [%r0], %rd1, %rd2, %r1, %p1;",
		 "not supported by the emulator yet"},
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		tc_parse(v[i].insn, v[i].what);
}

/* Cluster and CTA-pair instructions (docs/cta-pair.md): the forms kgen's
 * pair GEMM emits parse; the ones the emulator does not model are load
 * errors naming the reason. */
static void
test_cluster_parse(void)
{
	static const struct {
		const char *insn, *what;
	} v[] = {
		{"mapa.shared::cluster.u32 %r1, %r0, 1;", NULL},
		{"mapa.u64 %rd1, %rd2, 1;", "mapa.shared::cluster only"},
		{"st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%r1], {%r2, %r3, %r4, %r5}, [%r6];",
		 NULL},
		{"st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.u32 [%r1], {%r2, %r3, %r4, %r5}, [%r6];",
		 NULL},
		{"st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r1], %r2, [%r6];", "16-byte form"},
		{"st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b64 [%r1], {%rd2, %rd3}, [%r6];",
		 "16-byte form"},
		{"st.async.shared::cluster.v4.b32 [%r1], {%r2, %r3, %r4, %r5}, [%r6];",
		 "mbarrier::complete_tx::bytes"},
		{"barrier.cluster.arrive.release.aligned;", NULL},
		{"barrier.cluster.arrive.relaxed.aligned;", NULL},
		{"barrier.cluster.wait.acquire.aligned;", NULL},
		{"mbarrier.arrive.expect_tx.release.cluster.shared::cluster.b64 _, [%r1], 64;", NULL},
		{"tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r1], 64;", NULL},
		{"tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;", NULL},
		{"tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r1, 64;", NULL},
		{"tcgen05.mma.cta_group::2.kind::f16 [%r0], %rd1, %rd2, %r1, %p1;", NULL},
		{"tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale [%r0], %rd1, %rd2, %r1, [%r2], "
		 "[%r3], %p1;", "not supported by the emulator yet"},
		{"tcgen05.shift.cta_group::2.down [%r0];", "CTA pair"},
		{"cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
		 ".cta_group::2 [%r1], [%rd1, {%r2, %r3}], [%r4];", NULL},
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		tc_parse(v[i].insn, v[i].what);
}

/* Hopper's wgmma datapath (docs/hardware.md, "wgmma accumulation"), one K
 * step at the FP8 width (13 fraction bits below the largest term, k32) and
 * the 16-bit one (25), on sums whose truncation is worked out by hand. */
static int
exp_of(float x)
{
	int e;
	frexpf(x, &e);
	return x == 0.0f ? 0 : e - 1;
}

static void
hopper_case(const char *what, float d, float a0, float b0, float ak, float bk, int bits, double want)
{
	float a[32], b[32];
	int ea[32], eb[32];
	for (int k = 0; k < 32; k++) {
		a[k] = k ? ak : a0;
		b[k] = k ? bk : b0;
		ea[k] = exp_of(a[k]);
		eb[k] = exp_of(b[k]);
	}
	float got = emu_hopper_step(d, a, ea, b, eb, 32, bits);
	if ((double)got != want) {
		printf("FAIL hopper step %s (%d bits): got %.9g, want %.9g\n", what, bits, got, want);
		fails++;
	}
}

static void
test_hopper_step(void)
{
	/* 1·1 and 31 products 1.5·2^-13 (E4M3 1.5·2^-6 times 2^-7): E = 0, a unit
	 * of 2^-13 keeps one unit of each small product, 2^-25 all of it */
	hopper_case("small products", 0.0f, 1.0f, 1.0f, 0x1.8p-6f, 0x1p-7f, 13, 1.0 + 31 * 0x1p-13);
	hopper_case("small products", 0.0f, 1.0f, 1.0f, 0x1.8p-6f, 0x1p-7f, 25, 1.0 + 31 * 0x1.8p-13);
	/* truncation is toward zero: negative products lose their half unit upward */
	hopper_case("negative products", 0.0f, 1.0f, 1.0f, -0x1.8p-6f, 0x1p-7f, 13, 1.0 - 31 * 0x1p-13);
	/* the accumulator 2^10 sets E = 10: products 1.25·2^-3 keep 2^-3 each */
	hopper_case("large accumulator", 1024.0f, 1.25f, 0x1p-3f, 1.25f, 0x1p-3f, 13, 1024.0 + 32 * 0x1p-3);
	hopper_case("large accumulator", 1024.0f, 1.25f, 0x1p-3f, 1.25f, 0x1p-3f, 25, 1024.0 + 32 * 0x1.4p-3);
}

int
main(void)
{
	test_descriptors();
	test_swizzle();
	test_numbers();
	test_parser();
	test_tc_modifiers();
	test_cluster_parse();
	test_hopper_step();
	printf("%d failures\n", fails);
	return fails ? 1 : 0;
}
