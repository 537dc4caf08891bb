/* The tcgen05 forms the emitted kernels do not use yet, each in a small
 * hand-written kernel run on the emulator and compared with a model written
 * here from the PTX ISA text and docs/hardware.md (independent of
 * runtime/emu): tcgen05.ld .pack::16b / tcgen05.st .unpack::16b for every
 * shape, tcgen05.cp for every shape, multicast and decompression,
 * tcgen05.shift, kind::f8f6f4 with fp6/fp4 inputs and the block-scaled kinds
 * (SS and TS, scale factors stored with tcgen05.st or copied with
 * tcgen05.cp). Random inputs from a printed seed (TC_SEED=N repeats a run).
 *
 *   test_emu_tc                 run everything on the emulator
 *   test_emu_tc --dump DIR      write every kernel to DIR/tc_NAME.ptx
 *   test_emu_tc --ptxas PTXAS   assemble every kernel for sm_100a (exit 77
 *                               if PTXAS cannot run)
 *
 * Exit 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"

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

/* ---- random numbers --------------------------------------------------------------------- */

static uint64_t seed_state;

static uint64_t
rnd(void)
{
	/* splitmix64 */
	uint64_t z = (seed_state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint32_t
rnd32(void)
{
	return (uint32_t)(rnd() >> 32);
}

static uint32_t
rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

/* ---- kernels -------------------------------------------------------------------------------
 *
 * OP kernels: 128 threads load the smem image IN (up to 32 KiB at a
 * 1024-aligned base) and TMEM columns [0, NCOLS) of all 128 lanes from TM
 * (tcgen05.st), thread 0 runs the single-thread tcgen05 ops of the body and
 * a commit, everyone waits for it and writes the TMEM columns back to OUT.
 * Descriptor params carry offsets into the image (the kernel adds the
 * base), TMEM operands are offsets C0..C3 from the allocation:
 *   %r20..%r23 = TMEM base + C0..C3, %rd12..%rd15 = ADESC, BDESC, SFADESC,
 *   SFBDESC, %r24 = IDESC, %p4 = EN != 0.
 * LDST kernels: each warp loads its lane quarter from IN, runs one
 * tcgen05.ld .pack::16b at quarter + C0 (registers to ROUT), then one
 * tcgen05.st .unpack::16b of registers from RIN to the same address, and
 * writes its quarter back to OUT; the steps are ordered by wait::ld/st,
 * fence::before_thread_sync, bar.sync, fence::after_thread_sync. */

static const char op_head[] =
	"//@kgen-abi 1\n"
	"//@kernel tc_%s\n"
	"//@family test\n"
	"//@target sm_100a\n"
	"//@ptx 8.8\n"
	"//@args test %s\n"
	"//@threads 128\n"
	"//@cluster 1 1 1\n"
	"//@smem 33856\n"
	"//@grid 1 1 1\n"
	"//@param ptr IN dtype=u8 tensor=IN[NSMEM]\n"
	"//@param ptr TM dtype=s32 tensor=TM[128,NCOLS]\n"
	"//@param ptr OUT dtype=s32 tensor=OUT[128,NCOLS]\n"
	"//@param u32 NSMEM\n"
	"//@param u32 NCOLS\n"
	"//@param u64 ADESC\n"
	"//@param u64 BDESC\n"
	"//@param u64 SFADESC\n"
	"//@param u64 SFBDESC\n"
	"//@param u32 IDESC\n"
	"//@param u32 C0\n"
	"//@param u32 C1\n"
	"//@param u32 C2\n"
	"//@param u32 C3\n"
	"//@param u32 EN\n"
	"//@end\n"
	"// test_emu_tc OP kernel (see tests/emu/test_emu_tc.c)\n"
	"\n"
	".version 8.8\n"
	".target sm_100a\n"
	".address_size 64\n"
	"\n"
	".extern .shared .align 1024 .b8 smem[];\n"
	"\n"
	".visible .entry tc_%s(\n"
	"\t.param .u64 p_in,\n"
	"\t.param .u64 p_tm,\n"
	"\t.param .u64 p_out,\n"
	"\t.param .u32 p_nsmem,\n"
	"\t.param .u32 p_ncols,\n"
	"\t.param .u64 p_adesc,\n"
	"\t.param .u64 p_bdesc,\n"
	"\t.param .u64 p_sfadesc,\n"
	"\t.param .u64 p_sfbdesc,\n"
	"\t.param .u32 p_idesc,\n"
	"\t.param .u32 p_c0,\n"
	"\t.param .u32 p_c1,\n"
	"\t.param .u32 p_c2,\n"
	"\t.param .u32 p_c3,\n"
	"\t.param .u32 p_en\n"
	")\n"
	".maxntid 128, 1, 1\n"
	"{\n"
	"\t.reg .pred %%p<8>;\n"
	"\t.reg .b32 %%r<40>;\n"
	"\t.reg .b64 %%rd<20>;\n"
	"\n"
	"\tmov.u32 %%r1, %%tid.x;\n"
	"\tshr.u32 %%r2, %%r1, 5;\n"
	"\tmov.u32 %%r4, smem;\n"
	"\tadd.u32 %%r4, %%r4, 1023;\n"
	"\tand.b32 %%r4, %%r4, -1024;\n"
	"\tadd.u32 %%r5, %%r4, 32768; // mbarrier\n"
	"\tadd.u32 %%r6, %%r4, 32776; // TMEM address slot\n"
	"\tld.param.u64 %%rd1, [p_in];\n"
	"\tcvta.to.global.u64 %%rd1, %%rd1;\n"
	"\tld.param.u64 %%rd2, [p_tm];\n"
	"\tcvta.to.global.u64 %%rd2, %%rd2;\n"
	"\tld.param.u64 %%rd3, [p_out];\n"
	"\tcvta.to.global.u64 %%rd3, %%rd3;\n"
	"\tld.param.u32 %%r7, [p_nsmem];\n"
	"\tld.param.u32 %%r8, [p_ncols];\n"
	"\tsetp.ne.u32 %%p1, %%r1, 0;\n"
	"\t@%%p1 bra $L_init_done;\n"
	"\tmbarrier.init.shared::cta.b64 [%%r5], 1;\n"
	"\tfence.mbarrier_init.release.cluster;\n"
	"$L_init_done:\n"
	"\tsetp.ne.u32 %%p2, %%r2, 0;\n"
	"\t@%%p2 bra $L_alloc_done;\n"
	"\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%%r6], 512;\n"
	"\ttcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n"
	"$L_alloc_done:\n"
	"\tshl.b32 %%r9, %%r1, 4;\n"
	"$L_copy:\n"
	"\tsetp.ge.u32 %%p3, %%r9, %%r7;\n"
	"\t@%%p3 bra $L_copy_done;\n"
	"\tcvt.u64.u32 %%rd4, %%r9;\n"
	"\tadd.u64 %%rd5, %%rd1, %%rd4;\n"
	"\tld.global.v4.u32 {%%r10, %%r11, %%r12, %%r13}, [%%rd5];\n"
	"\tadd.u32 %%r14, %%r4, %%r9;\n"
	"\tst.shared.v4.u32 [%%r14], {%%r10, %%r11, %%r12, %%r13};\n"
	"\tadd.u32 %%r9, %%r9, 2048;\n"
	"\tbra $L_copy;\n"
	"$L_copy_done:\n"
	"\tfence.proxy.async.shared::cta;\n"
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbar.sync 0, 128;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\tld.shared.u32 %%r15, [%%r6];\n"
	"\tshl.b32 %%r17, %%r2, 21;\n"
	"\tadd.u32 %%r17, %%r17, %%r15; // this warp's lane quarter, column 0\n"
	"\tmul.lo.u32 %%r18, %%r1, %%r8;\n"
	"\tmul.wide.u32 %%rd6, %%r18, 4;\n"
	"\tadd.u64 %%rd7, %%rd2, %%rd6; // TM row tid\n"
	"\tadd.u64 %%rd8, %%rd3, %%rd6; // OUT row tid\n"
	"\tmov.u32 %%r19, 0;\n"
	"$L_tm:\n"
	"\tsetp.ge.u32 %%p3, %%r19, %%r8;\n"
	"\t@%%p3 bra $L_tm_done;\n"
	"\tmul.wide.u32 %%rd9, %%r19, 4;\n"
	"\tadd.u64 %%rd10, %%rd7, %%rd9;\n"
	"\tld.global.u32 %%r10, [%%rd10];\n"
	"\tadd.u32 %%r11, %%r17, %%r19;\n"
	"\ttcgen05.st.sync.aligned.32x32b.x1.b32 [%%r11], {%%r10};\n"
	"\tadd.u32 %%r19, %%r19, 1;\n"
	"\tbra $L_tm;\n"
	"$L_tm_done:\n"
	"\ttcgen05.wait::st.sync.aligned;\n"
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbar.sync 0, 128;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\t@%%p1 bra $L_wait;\n"
	"\tshr.u32 %%r12, %%r4, 4;\n"
	"\tcvt.u64.u32 %%rd11, %%r12;\n"
	"\tld.param.u64 %%rd12, [p_adesc];\n"
	"\tadd.s64 %%rd12, %%rd12, %%rd11;\n"
	"\tld.param.u64 %%rd13, [p_bdesc];\n"
	"\tadd.s64 %%rd13, %%rd13, %%rd11;\n"
	"\tld.param.u64 %%rd14, [p_sfadesc];\n"
	"\tadd.s64 %%rd14, %%rd14, %%rd11;\n"
	"\tld.param.u64 %%rd15, [p_sfbdesc];\n"
	"\tadd.s64 %%rd15, %%rd15, %%rd11;\n"
	"\tld.param.u32 %%r20, [p_c0];\n"
	"\tadd.u32 %%r20, %%r20, %%r15;\n"
	"\tld.param.u32 %%r21, [p_c1];\n"
	"\tadd.u32 %%r21, %%r21, %%r15;\n"
	"\tld.param.u32 %%r22, [p_c2];\n"
	"\tadd.u32 %%r22, %%r22, %%r15;\n"
	"\tld.param.u32 %%r23, [p_c3];\n"
	"\tadd.u32 %%r23, %%r23, %%r15;\n"
	"\tld.param.u32 %%r24, [p_idesc];\n"
	"\tld.param.u32 %%r25, [p_en];\n"
	"\tsetp.ne.u32 %%p4, %%r25, 0;\n";

static const char op_tail[] =
	"\ttcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r5];\n"
	"$L_wait:\n"
	"\tmbarrier.try_wait.parity.shared::cta.b64 %p5, [%r5], 0;\n"
	"\t@!%p5 bra $L_wait;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\tmov.u32 %r19, 0;\n"
	"$L_out:\n"
	"\tsetp.ge.u32 %p3, %r19, %r8;\n"
	"\t@%p3 bra $L_out_done;\n"
	"\tadd.u32 %r11, %r17, %r19;\n"
	"\ttcgen05.ld.sync.aligned.32x32b.x1.b32 {%r10}, [%r11];\n"
	"\ttcgen05.wait::ld.sync.aligned;\n"
	"\tmul.wide.u32 %rd9, %r19, 4;\n"
	"\tadd.u64 %rd10, %rd8, %rd9;\n"
	"\tst.global.u32 [%rd10], %r10;\n"
	"\tadd.u32 %r19, %r19, 1;\n"
	"\tbra $L_out;\n"
	"$L_out_done:\n"
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbar.sync 0, 128;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\t@%p2 bra $L_exit;\n"
	"\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %r15, 512;\n"
	"$L_exit:\n"
	"\tret;\n"
	"}\n";

static const char ldst_head[] =
	"//@kgen-abi 1\n"
	"//@kernel tc_%s\n"
	"//@family test\n"
	"//@target sm_100a\n"
	"//@ptx 8.8\n"
	"//@args test %s\n"
	"//@threads 128\n"
	"//@cluster 1 1 1\n"
	"//@smem 64\n"
	"//@grid 1 1 1\n"
	"//@param ptr IN dtype=s32 tensor=IN[128,NCOLS]\n"
	"//@param ptr RIN dtype=s32 tensor=RIN[128,%d]\n"
	"//@param ptr OUT dtype=s32 tensor=OUT[128,NCOLS]\n"
	"//@param ptr ROUT dtype=s32 tensor=ROUT[128,%d]\n"
	"//@param u32 NCOLS\n"
	"//@param u32 C0\n"
	"//@end\n"
	"// test_emu_tc LDST kernel (see tests/emu/test_emu_tc.c)\n"
	"\n"
	".version 8.8\n"
	".target sm_100a\n"
	".address_size 64\n"
	"\n"
	".extern .shared .align 16 .b8 smem[];\n"
	"\n"
	".visible .entry tc_%s(\n"
	"\t.param .u64 p_in,\n"
	"\t.param .u64 p_rin,\n"
	"\t.param .u64 p_out,\n"
	"\t.param .u64 p_rout,\n"
	"\t.param .u32 p_ncols,\n"
	"\t.param .u32 p_c0\n"
	")\n"
	".maxntid 128, 1, 1\n"
	"{\n"
	"\t.reg .pred %%p<8>;\n"
	"\t.reg .b32 %%r<40>;\n"
	"\t.reg .b32 %%v<16>;\n"
	"\t.reg .b64 %%rd<20>;\n"
	"\n"
	"\tmov.u32 %%r1, %%tid.x;\n"
	"\tshr.u32 %%r2, %%r1, 5;\n"
	"\tmov.u32 %%r6, smem;\n"
	"\tld.param.u64 %%rd2, [p_in];\n"
	"\tcvta.to.global.u64 %%rd2, %%rd2;\n"
	"\tld.param.u64 %%rd3, [p_out];\n"
	"\tcvta.to.global.u64 %%rd3, %%rd3;\n"
	"\tld.param.u64 %%rd4, [p_rin];\n"
	"\tcvta.to.global.u64 %%rd4, %%rd4;\n"
	"\tld.param.u64 %%rd5, [p_rout];\n"
	"\tcvta.to.global.u64 %%rd5, %%rd5;\n"
	"\tld.param.u32 %%r8, [p_ncols];\n"
	"\tsetp.ne.u32 %%p2, %%r2, 0;\n"
	"\t@%%p2 bra $L_alloc_done;\n"
	"\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%%r6], 64;\n"
	"\ttcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n"
	"$L_alloc_done:\n"
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbar.sync 0, 128;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\tld.shared.u32 %%r15, [%%r6];\n"
	"\tshl.b32 %%r17, %%r2, 21;\n"
	"\tadd.u32 %%r17, %%r17, %%r15;\n"
	"\tmul.lo.u32 %%r18, %%r1, %%r8;\n"
	"\tmul.wide.u32 %%rd6, %%r18, 4;\n"
	"\tadd.u64 %%rd7, %%rd2, %%rd6;\n"
	"\tadd.u64 %%rd8, %%rd3, %%rd6;\n"
	"\tmov.u32 %%r19, 0;\n"
	"$L_tm:\n"
	"\tsetp.ge.u32 %%p3, %%r19, %%r8;\n"
	"\t@%%p3 bra $L_tm_done;\n"
	"\tmul.wide.u32 %%rd9, %%r19, 4;\n"
	"\tadd.u64 %%rd10, %%rd7, %%rd9;\n"
	"\tld.global.u32 %%r10, [%%rd10];\n"
	"\tadd.u32 %%r11, %%r17, %%r19;\n"
	"\ttcgen05.st.sync.aligned.32x32b.x1.b32 [%%r11], {%%r10};\n"
	"\tadd.u32 %%r19, %%r19, 1;\n"
	"\tbra $L_tm;\n"
	"$L_tm_done:\n"
	"\ttcgen05.wait::st.sync.aligned;\n"
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbar.sync 0, 128;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\tld.param.u32 %%r20, [p_c0];\n"
	"\tadd.u32 %%r20, %%r20, %%r17;\n"
	"\tmul.lo.u32 %%r21, %%r1, %d;\n"
	"\tmul.wide.u32 %%rd11, %%r21, 4;\n"
	"\tadd.u64 %%rd12, %%rd4, %%rd11; // RIN row tid\n"
	"\tadd.u64 %%rd13, %%rd5, %%rd11; // ROUT row tid\n";

static const char ldst_tail[] =
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbar.sync 0, 128;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\tmov.u32 %r19, 0;\n"
	"$L_out:\n"
	"\tsetp.ge.u32 %p3, %r19, %r8;\n"
	"\t@%p3 bra $L_out_done;\n"
	"\tadd.u32 %r11, %r17, %r19;\n"
	"\ttcgen05.ld.sync.aligned.32x32b.x1.b32 {%r10}, [%r11];\n"
	"\ttcgen05.wait::ld.sync.aligned;\n"
	"\tmul.wide.u32 %rd9, %r19, 4;\n"
	"\tadd.u64 %rd10, %rd8, %rd9;\n"
	"\tst.global.u32 [%rd10], %r10;\n"
	"\tadd.u32 %r19, %r19, 1;\n"
	"\tbra $L_out;\n"
	"$L_out_done:\n"
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbar.sync 0, 128;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\t@%p2 bra $L_exit;\n"
	"\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %r15, 64;\n"
	"$L_exit:\n"
	"\tret;\n"
	"}\n";

/* ld/st shapes (docs/hardware.md, "tcgen05.ld and tcgen05.st") */
enum { S32x32b, S16x64b, S16x128b, S16x256b, S16x32bx2 };
static const struct {
	const char *name;
	int regs;   /* per repetition */
	int lanes;
} shapes[] = {
	{"32x32b", 1, 32}, {"16x64b", 1, 16}, {"16x128b", 2, 16}, {"16x256b", 4, 16},
	{"16x32bx2", 1, 16},
};

typedef struct Kernel {
	const char *name;
	const char *body;   /* OP kernels */
	int shape, num;     /* LDST kernels (body NULL) */
	int split;          /* 16x32bx2 immediate */
} Kernel;

/* The MMA lines: %r20 D, %r21 A (TS), %r22 / %r23 scale factors. */
#define MMA_SS(kind) "\ttcgen05.mma.cta_group::1." kind " [%r20], %rd12, %rd13, %r24"
#define MMA_TS(kind) "\ttcgen05.mma.cta_group::1." kind " [%r20], [%r21], %rd13, %r24"
#define DENSE ", %p4;\n"
#define SCALED ", [%r22], [%r23], %p4;\n"
/* scale factors by tcgen05.cp .32x128b.warpx4: A from SFADESC (4 columns),
 * B from SFBDESC (4 columns per 128 columns of B, two copies) */
#define CP_SF "\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%r22], %rd14;\n"                \
              "\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%r23], %rd15;\n"                \
              "\tadd.s64 %rd16, %rd15, 32;\n"                                             \
              "\tadd.u32 %r26, %r23, 4;\n"                                                \
              "\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%r26], %rd16;\n"

static const Kernel kernels[] = {
	{"ldst_32x32b_x4", NULL, S32x32b, 4, 0},
	{"ldst_16x64b_x4", NULL, S16x64b, 4, 0},
	{"ldst_16x128b_x2", NULL, S16x128b, 2, 0},
	{"ldst_16x256b_x1", NULL, S16x256b, 1, 0},
	{"ldst_16x256b_x2", NULL, S16x256b, 2, 0},
	{"ldst_16x32bx2_x4", NULL, S16x32bx2, 4, 12},
	{"cp_128x256b", "\ttcgen05.cp.cta_group::1.128x256b [%r20], %rd12;\n", 0, 0, 0},
	{"cp_4x256b", "\ttcgen05.cp.cta_group::1.4x256b [%r20], %rd12;\n", 0, 0, 0},
	{"cp_128x128b", "\ttcgen05.cp.cta_group::1.128x128b [%r20], %rd12;\n", 0, 0, 0},
	{"cp_64x128b_02_13", "\ttcgen05.cp.cta_group::1.64x128b.warpx2::02_13 [%r20], %rd12;\n", 0, 0, 0},
	{"cp_64x128b_01_23", "\ttcgen05.cp.cta_group::1.64x128b.warpx2::01_23 [%r20], %rd12;\n", 0, 0, 0},
	{"cp_32x128b_x4", "\ttcgen05.cp.cta_group::1.32x128b.warpx4 [%r20], %rd12;\n", 0, 0, 0},
	{"cp_128x128b_b6", "\ttcgen05.cp.cta_group::1.128x128b.b8x16.b6x16_p32 [%r20], %rd12;\n", 0, 0, 0},
	{"cp_128x256b_b4", "\ttcgen05.cp.cta_group::1.128x256b.b8x16.b4x16_p64 [%r20], %rd12;\n", 0, 0, 0},
	{"cp_32x128b_x4_b4", "\ttcgen05.cp.cta_group::1.32x128b.warpx4.b8x16.b4x16_p64 [%r20], %rd12;\n", 0, 0, 0},
	{"cp_64x128b_01_23_b6", "\ttcgen05.cp.cta_group::1.64x128b.warpx2::01_23.b8x16.b6x16_p32 [%r20], %rd12;\n", 0, 0, 0},
	{"shift", "\ttcgen05.shift.cta_group::1.down [%r20];\n", 0, 0, 0},
	{"f8f6f4_ss", MMA_SS("kind::f8f6f4") DENSE, 0, 0, 0},
	{"f8f6f4_ts", MMA_TS("kind::f8f6f4") DENSE, 0, 0, 0},
	{"mxf8f6f4_ss", MMA_SS("kind::mxf8f6f4.block_scale") SCALED, 0, 0, 0},
	{"mxf8f6f4_ss_1x", MMA_SS("kind::mxf8f6f4.block_scale.scale_vec::1X") SCALED, 0, 0, 0},
	{"mxf8f6f4_ts_b32", MMA_TS("kind::mxf8f6f4.block_scale.block32") SCALED, 0, 0, 0},
	{"mxf8f6f4_ss_cp", CP_SF MMA_SS("kind::mxf8f6f4.block_scale.block32") SCALED, 0, 0, 0},
	{"mxf4_ss", MMA_SS("kind::mxf4.block_scale") SCALED, 0, 0, 0},
	{"mxf4_ts_2x", MMA_TS("kind::mxf4.block_scale.scale_vec::2X") SCALED, 0, 0, 0},
	{"mxf4nvf4_ss_b32", MMA_SS("kind::mxf4nvf4.block_scale.block32") SCALED, 0, 0, 0},
	{"mxf4nvf4_ss_2x", MMA_SS("kind::mxf4nvf4.block_scale.scale_vec::2X") SCALED, 0, 0, 0},
	{"mxf4nvf4_ss_4x", MMA_SS("kind::mxf4nvf4.block_scale.scale_vec::4X") SCALED, 0, 0, 0},
	{"mxf4nvf4_ss_b16", MMA_SS("kind::mxf4nvf4.block_scale.block16") SCALED, 0, 0, 0},
	{"mxf4nvf4_ts_b16", MMA_TS("kind::mxf4nvf4.block_scale.block16") SCALED, 0, 0, 0},
	{"mxf4nvf4_ss_b16_cp", CP_SF MMA_SS("kind::mxf4nvf4.block_scale.block16") SCALED, 0, 0, 0},
};
enum { NKERNELS = sizeof kernels / sizeof kernels[0] };

static const Kernel *
kernel(const char *name)
{
	for (int i = 0; i < NKERNELS; i++)
		if (strcmp(kernels[i].name, name) == 0)
			return &kernels[i];
	fprintf(stderr, "no kernel %s\n", name);
	abort();
}

static int
ldst_regs(const Kernel *k)
{
	return shapes[k->shape].regs * k->num;
}

static void
reg_list(char *buf, size_t n, int nregs)
{
	size_t at = 0;
	at += (size_t)snprintf(buf + at, n - at, "{");
	for (int i = 0; i < nregs; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%%v%d", i ? ", " : "", i);
	snprintf(buf + at, n - at, "}");
}

static void
ldst_body(const Kernel *k, char *buf, size_t n)
{
	int nregs = ldst_regs(k);
	char regs[256], split[16] = "";
	reg_list(regs, sizeof regs, nregs);
	if (k->shape == S16x32bx2)
		snprintf(split, sizeof split, ", %d", k->split);
	size_t at = 0;
	at += (size_t)snprintf(buf + at, n - at, "\ttcgen05.ld.sync.aligned.%s.x%d.pack::16b.b32 %s, "
	                       "[%%r20]%s;\n\ttcgen05.wait::ld.sync.aligned;\n",
	                       shapes[k->shape].name, k->num, regs, split);
	for (int i = 0; i < nregs; i++)
		at += (size_t)snprintf(buf + at, n - at, "\tst.global.u32 [%%rd13+%d], %%v%d;\n", 4 * i, i);
	at += (size_t)snprintf(buf + at, n - at, "\ttcgen05.fence::before_thread_sync;\n"
	                       "\tbar.sync 0, 128;\n\ttcgen05.fence::after_thread_sync;\n");
	for (int i = 0; i < nregs; i++)
		at += (size_t)snprintf(buf + at, n - at, "\tld.global.u32 %%v%d, [%%rd12+%d];\n", i, 4 * i);
	snprintf(buf + at, n - at, "\ttcgen05.st.sync.aligned.%s.x%d.unpack::16b.b32 [%%r20]%s, %s;\n"
	         "\ttcgen05.wait::st.sync.aligned;\n", shapes[k->shape].name, k->num, split, regs);
}

/* The PTX text of a kernel (malloc'ed). */
static char *
kernel_text(const Kernel *k)
{
	size_t n = 65536;
	char *buf = malloc(n);
	if (!buf)
		abort();
	int at;
	if (k->body) {
		at = snprintf(buf, n, op_head, k->name, k->name, k->name);
		at += snprintf(buf + at, n - (size_t)at, "%s%s", k->body, op_tail);
	} else {
		int nregs = ldst_regs(k);
		char body[16384];
		ldst_body(k, body, sizeof body);
		at = snprintf(buf, n, ldst_head, k->name, k->name, nregs, nregs, k->name, nregs);
		at += snprintf(buf + at, n - (size_t)at, "%s%s", body, ldst_tail);
	}
	if (at >= (int)n)
		abort();
	return buf;
}

/* ---- running -------------------------------------------------------------------------------- */

static KrtDevice *dev;

typedef struct Buf {
	KrtPtr p;
	size_t bytes;
} Buf;

static int
upload(Buf *b, const void *host, size_t bytes, KrtErr *err)
{
	b->bytes = bytes ? bytes : 16;
	if (krt_alloc(dev, b->bytes, &b->p, err) || krt_memset8(dev, b->p, 0, b->bytes, err))
		return -1;
	return host ? krt_upload(dev, b->p, host, bytes, err) : 0;
}

/* Loads kernel `name`, launches it with args (pointer args from bufs),
 * downloads buffer `out` into host. Returns 0, or -1 with the error. */
static int
launch(const char *name, KrtArg *args, int nargs, KrtErr *err)
{
	char *text = kernel_text(kernel(name));
	KrtModule *mod = NULL;
	int rc = krt_module_load(dev, text, strlen(text), &mod, err);
	free(text);
	if (!rc)
		rc = krt_launch(mod, args, nargs, NULL, err);
	if (mod)
		krt_module_unload(mod);
	return rc ? -1 : 0;
}

typedef struct OpRun {
	const uint8_t *img;
	uint32_t nimg;          /* bytes, multiple of 16 */
	const uint32_t *tm;     /* [128][ncols] */
	uint32_t ncols;
	uint64_t desc[4];       /* ADESC, BDESC, SFADESC, SFBDESC (image offsets) */
	uint32_t idesc, c[4], en;
	uint32_t *out;          /* [128][ncols] */
} OpRun;

static int
run_op(const char *name, OpRun *r)
{
	KrtErr err;
	memset(&err, 0, sizeof err);
	Buf in = {0}, tm = {0}, out = {0};
	size_t tbytes = (size_t)128 * r->ncols * 4;
	int rc = upload(&in, r->img, r->nimg, &err) || upload(&tm, r->tm, tbytes, &err) ||
	         upload(&out, NULL, tbytes, &err);
	KrtArg a[15];
	memset(a, 0, sizeof a);
	a[0].kind = a[1].kind = a[2].kind = KRT_ARG_PTR;
	a[0].v.p = in.p;
	a[1].v.p = tm.p;
	a[2].v.p = out.p;
	a[3].kind = a[4].kind = KRT_ARG_U32;
	a[3].v.u32 = r->nimg;
	a[4].v.u32 = r->ncols;
	for (int i = 0; i < 4; i++) {
		a[5 + i].kind = KRT_ARG_U64;
		a[5 + i].v.u64 = r->desc[i];
	}
	for (int i = 9; i < 15; i++)
		a[i].kind = KRT_ARG_U32;
	a[9].v.u32 = r->idesc;
	for (int i = 0; i < 4; i++)
		a[10 + i].v.u32 = r->c[i];
	a[14].v.u32 = r->en;
	if (!rc)
		rc = launch(name, a, 15, &err);
	if (!rc)
		rc = krt_download(dev, r->out, out.p, tbytes, &err) ? -1 : 0;
	if (rc)
		printf("FAIL %s: %s\n", name, err.msg);
	krt_free(dev, in.p, NULL);
	krt_free(dev, tm.p, NULL);
	krt_free(dev, out.p, NULL);
	return rc;
}

/* ---- reference: number formats (PTX ISA §5.2.3, docs/hardware.md, "Number formats")
 * ----------------------------- */

/* f8f6f4 element formats: idesc code, width, exponent/mantissa bits, bias */
typedef struct Fmt {
	const char *name;
	int code, bits, e, m, bias;
} Fmt;

static const Fmt fmts[] = {
	{"E4M3", 0, 8, 4, 3, 7}, {"E5M2", 1, 8, 5, 2, 15}, {"E2M3", 3, 6, 2, 3, 1},
	{"E3M2", 4, 6, 3, 2, 3}, {"E2M1", 5, 4, 2, 1, 1},
};
enum { F_E4M3, F_E5M2, F_E2M3, F_E3M2, F_E2M1, NFMTS };

static double
fp_value(uint32_t code, int e, int m, int bias)
{
	uint32_t sign = code >> (e + m) & 1, ex = code >> m & ((1u << e) - 1);
	double man = (double)(code & ((1u << m) - 1)) / (double)(1u << m);
	double v = ex ? ldexp(1.0 + man, (int)ex - bias) : ldexp(man, 1 - bias);
	return sign ? -v : v;
}

static double
fmt_value(const Fmt *f, uint32_t code)
{
	return fp_value(code, f->e, f->m, f->bias);
}

/* a random code that is a finite number (E4M3 0x7f/0xff are NaN, E5M2 has
 * infinities and NaNs at exponent 31) */
static uint32_t
fmt_random(const Fmt *f)
{
	for (;;) {
		uint32_t c = rnd32() & ((1u << f->bits) - 1);
		if (f->code == 0 && (c & 0x7f) == 0x7f)
			continue;
		if (f->code == 1 && (c >> 2 & 0x1f) == 0x1f)
			continue;
		return c;
	}
}

/* 8-bit TMEM container of an fp6/fp4 code: 6-bit codes in bits 5-0, E2M1
 * in bits 5-2 (the E2M3 code of the same value) */
static uint8_t
container(const Fmt *f, uint32_t code)
{
	return (uint8_t)(f->bits == 4 ? code << 2 : code);
}

static double
ue8m0(uint32_t x)
{
	return ldexp(1.0, (int)x - 127);
}

static double
ue4m3(uint32_t x)
{
	return fp_value(x & 0x7f, 4, 3, 7);
}

static float
f32_of(uint32_t b)
{
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static uint32_t
bits_of(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

/* ---- reference: smem canonical K-major layouts (docs/hardware.md, "Swizzle modes" and
 * "Canonical layouts, LBO and SBO") ------------------ */

typedef struct Lay {
	uint32_t start, lbo, sbo;
	int sw;                    /* swizzle width: 0 (none), 32, 64, 128 bytes */
} Lay;

/* byte b of row mn */
static uint32_t
lay_addr(const Lay *l, uint32_t mn, uint32_t b)
{
	uint32_t a = l->sw ? l->start + (mn % 8) * (uint32_t)l->sw + (mn / 8) * l->sbo + b
	                   : l->start + (mn % 8) * 16 + (mn / 8) * l->sbo + (b / 16) * l->lbo + b % 16;
	uint32_t mask = l->sw == 128 ? 7 : l->sw == 64 ? 3 : l->sw == 32 ? 1 : 0;
	return a ^ ((a >> 7 & mask) << 4);
}

static uint64_t
lay_desc(const Lay *l)
{
	uint64_t code = l->sw == 128 ? 2 : l->sw == 64 ? 4 : l->sw == 32 ? 6 : 0;
	return (uint64_t)(l->start >> 4) | (uint64_t)(l->lbo >> 4) << 16 |
	       (uint64_t)(l->sbo >> 4) << 32 | UINT64_C(1) << 46 | code << 61;
}

/* ---- tcgen05.ld .pack::16b / tcgen05.st .unpack::16b -------------------------------------------- */

/* (lane, logical 32-bit column) of register v of thread t for .x1 repeated
 * (docs/hardware.md, "tcgen05.ld and tcgen05.st" table) */
static void
frag(int shape, int split, int t, int v, uint32_t *lane, uint32_t *col)
{
	switch (shape) {
	case S32x32b:
		*lane = (uint32_t)t;
		*col = (uint32_t)v;
		return;
	case S16x64b:
		*lane = (uint32_t)(t / 4 + 8 * (t % 2));
		*col = (uint32_t)((t / 2) % 2 + 2 * v);
		return;
	case S16x128b:
		*lane = (uint32_t)(t / 4 + 8 * (v % 2));
		*col = (uint32_t)(t % 4 + 4 * (v / 2));
		return;
	case S16x256b:
		*lane = (uint32_t)(t / 4 + 8 * ((v % 4) / 2));
		*col = (uint32_t)(2 * (t % 4) + v % 2 + 8 * (v / 4));
		return;
	default:
		*lane = (uint32_t)(t % 16);
		*col = (uint32_t)(t / 16 * split) + (uint32_t)v;
		return;
	}
}

/* Packed: register v holds the low halves of TMEM columns 2c and 2c+1 of
 * its logical column c (PTX ISA §9.7.16.8.2); 16x32bx2's split is in TMEM
 * columns: the half's columns start at split. */
static uint32_t
packed_col(int shape, int split, int t, uint32_t col)
{
	if (shape != S16x32bx2)
		return 2 * col;
	uint32_t h = (uint32_t)(t / 16) * (uint32_t)split;
	return h + 2 * (col - h);
}

static void
test_ldst(const char *name, uint32_t loff, uint32_t col0)
{
	const Kernel *k = kernel(name);
	int nregs = ldst_regs(k);
	const uint32_t ncols = 64;
	uint32_t *tm = malloc(128 * ncols * 4), *rin = malloc(128 * (size_t)nregs * 4);
	uint32_t *out = calloc(128 * ncols, 4), *rout = calloc(128 * (size_t)nregs, 4);
	uint32_t *want = malloc(128 * ncols * 4);
	for (uint32_t i = 0; i < 128 * ncols; i++)
		tm[i] = want[i] = rnd32();
	for (int i = 0; i < 128 * nregs; i++)
		rin[i] = rnd32();
	KrtErr err;
	memset(&err, 0, sizeof err);
	Buf bi = {0}, br = {0}, bo = {0}, bro = {0};
	int rc = upload(&bi, tm, 128 * ncols * 4, &err) ||
	         upload(&br, rin, 128 * (size_t)nregs * 4, &err) ||
	         upload(&bo, NULL, 128 * ncols * 4, &err) ||
	         upload(&bro, NULL, 128 * (size_t)nregs * 4, &err);
	KrtArg a[6];
	memset(a, 0, sizeof a);
	KrtPtr ptrs[4] = {bi.p, br.p, bo.p, bro.p};
	for (int i = 0; i < 4; i++) {
		a[i].kind = KRT_ARG_PTR;
		a[i].v.p = ptrs[i];
	}
	a[4].kind = a[5].kind = KRT_ARG_U32;
	a[4].v.u32 = ncols;
	a[5].v.u32 = loff << 16 | col0;
	rc = rc || launch(name, a, 6, &err) || krt_download(dev, out, bo.p, 128 * ncols * 4, &err) ||
	     krt_download(dev, rout, bro.p, 128 * (size_t)nregs * 4, &err);
	if (rc) {
		printf("FAIL %s: %s\n", name, err.msg);
		fails++;
	}
	int bad = 0;
	for (int tid = 0; !rc && tid < 128; tid++)
		for (int v = 0; v < nregs; v++) {
			uint32_t l, c;
			frag(k->shape, k->split, tid % 32, v, &l, &c);
			l += 32 * (uint32_t)(tid / 32) + loff;
			c = col0 + packed_col(k->shape, k->split, tid % 32, c);
			uint32_t exp = (tm[l * ncols + c] & 0xffff) | tm[l * ncols + c + 1] << 16;
			if (rout[tid * nregs + v] != exp && bad++ < 4)
				printf("FAIL %s ld.pack: thread %d register %d = 0x%08x, want 0x%08x (lane %u "
				       "columns %u, %u)\n", name, tid, v, rout[tid * nregs + v], exp, l, c, c + 1);
			uint32_t in = rin[tid * nregs + v];
			want[l * ncols + c] = in & 0xffff;
			want[l * ncols + c + 1] = in >> 16;
		}
	for (uint32_t i = 0; !rc && i < 128 * ncols; i++)
		if (out[i] != want[i] && bad++ < 8)
			printf("FAIL %s st.unpack: TMEM lane %u column %u = 0x%08x, want 0x%08x\n", name,
			       i / ncols, i % ncols, out[i], want[i]);
	fails += bad != 0;
	printf("%s %s (lane offset %u, column %u)\n", rc || bad ? "FAIL" : "ok  ", name, loff, col0);
	krt_free(dev, bi.p, NULL);
	krt_free(dev, br.p, NULL);
	krt_free(dev, bo.p, NULL);
	krt_free(dev, bro.p, NULL);
	free(tm);
	free(rin);
	free(out);
	free(rout);
	free(want);
}

static void
test_pack(void)
{
	test_ldst("ldst_32x32b_x4", 0, 3);
	test_ldst("ldst_16x64b_x4", 0, 1);
	test_ldst("ldst_16x64b_x4", 16, 0);
	test_ldst("ldst_16x128b_x2", 16, 5);
	test_ldst("ldst_16x256b_x1", 0, 2);
	test_ldst("ldst_16x256b_x2", 16, 8);
	test_ldst("ldst_16x32bx2_x4", 0, 4);
	test_ldst("ldst_16x32bx2_x4", 16, 0);
}

/* ---- tcgen05.cp ---------------------------------------------------------------------------------- */

typedef struct CpCase {
	const char *kernel;
	uint32_t rows, bytes;  /* logical rows, bytes per row */
	int mc;                /* 0 none, 1 warpx2::02_13, 2 warpx2::01_23, 3 warpx4 */
	int src;               /* 0 plain, 6 / 4: .b6x16_p32 / .b4x16_p64 */
} CpCase;

/* lanes of logical row r, replica i (PTX ISA §9.7.16.9.2 multicast: warp
 * pairs 0/2 + 1/3 or 0/1 + 2/3 each receive half of the rows, warpx4
 * every warp all 32) */
static uint32_t
cp_ref_lane(const CpCase *k, uint32_t r, uint32_t i)
{
	switch (k->mc) {
	case 1: return r + 64 * i;
	case 2: return (r / 32) * 64 + r % 32 + 32 * i;
	case 3: return r + 32 * i;
	default: return k->rows == 4 ? 32 * r : r;
	}
}

/* 16 source bytes -> 16 TMEM bytes */
static void
cp_ref_chunk(int src, const uint8_t *s, uint8_t *d)
{
	for (int j = 0; j < 16; j++) {
		if (src == 0) {
			d[j] = s[j];
		} else if (src == 4) {
			uint32_t code = (uint32_t)(j % 2 ? s[j / 2] >> 4 : s[j / 2] & 0xf);
			d[j] = container(&fmts[F_E2M1], code);
		} else {
			uint32_t code = 0;
			for (int b = 0; b < 6; b++) {
				int bit = 6 * j + b;
				code |= (uint32_t)(s[bit / 8] >> (bit % 8) & 1) << b;
			}
			d[j] = (uint8_t)code;
		}
	}
}

static void
test_cp_case(const CpCase *k, const Lay *lay, uint32_t lane0, uint32_t col0)
{
	const uint32_t ncols = 24;
	uint32_t nimg = 16384;
	uint8_t *img = malloc(nimg);
	uint32_t *tm = malloc(128 * ncols * 4), *out = calloc(128 * ncols, 4);
	uint32_t *want = malloc(128 * ncols * 4);
	for (uint32_t i = 0; i < nimg; i++)
		img[i] = (uint8_t)rnd32();
	for (uint32_t i = 0; i < 128 * ncols; i++)
		tm[i] = want[i] = rnd32();
	for (uint32_t r = 0; r < k->rows; r++) {
		uint8_t row[32];
		for (uint32_t b = 0; b < k->bytes; b += 16)
			cp_ref_chunk(k->src, img + lay_addr(lay, r, b), row + b);
		for (uint32_t i = 0; i < (k->mc == 3 ? 4u : k->mc ? 2u : 1u); i++) {
			uint32_t l = lane0 + cp_ref_lane(k, r, i);
			for (uint32_t w = 0; w < k->bytes / 4; w++)
				want[l * ncols + col0 + w] = (uint32_t)row[4 * w] | (uint32_t)row[4 * w + 1] << 8 |
				                             (uint32_t)row[4 * w + 2] << 16 |
				                             (uint32_t)row[4 * w + 3] << 24;
		}
	}
	OpRun r = {img, nimg, tm, ncols, {lay_desc(lay), 0, 0, 0}, 0, {lane0 << 16 | col0, 0, 0, 0},
	           0, out};
	int bad = run_op(k->kernel, &r) != 0;
	for (uint32_t i = 0; !bad && i < 128 * ncols; i++)
		if (out[i] != want[i] && bad++ < 6)
			printf("FAIL %s: TMEM lane %u column %u = 0x%08x, want 0x%08x\n", k->kernel,
			       i / ncols, i % ncols, out[i], want[i]);
	fails += bad != 0;
	printf("%s %s (swizzle %d, lane %u, column %u)\n", bad ? "FAIL" : "ok  ", k->kernel, lay->sw,
	       lane0, col0);
	free(img);
	free(tm);
	free(out);
	free(want);
}

static void
test_cp(void)
{
	static const CpCase cases[] = {
		{"cp_128x256b", 128, 32, 0, 0},      {"cp_4x256b", 4, 32, 0, 0},
		{"cp_128x128b", 128, 16, 0, 0},      {"cp_64x128b_02_13", 64, 16, 1, 0},
		{"cp_64x128b_01_23", 64, 16, 2, 0},  {"cp_32x128b_x4", 32, 16, 3, 0},
		{"cp_128x128b_b6", 128, 16, 0, 6},   {"cp_128x256b_b4", 128, 32, 0, 4},
		{"cp_32x128b_x4_b4", 32, 16, 3, 4},  {"cp_64x128b_01_23_b6", 64, 16, 2, 6},
	};
	/* no swizzle: 8-row core matrices 256 B apart, the second 16 bytes of a
	 * row 128 B after the first; 32B swizzle: rows of 32 B */
	const Lay none = {0x400, 128, 256, 0}, sw32 = {0x800, 16, 256, 32};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		test_cp_case(&cases[i], &none, 0, 4);
		test_cp_case(&cases[i], &sw32, 0, 12);
	}
	test_cp_case(&cases[1], &none, 7, 0); /* .4x256b at lane 7: lanes 7, 39, 71, 103 */
}

/* ---- tcgen05.shift ----------------------------------------------------------------------------- */

static void
test_shift(uint32_t lane0, uint32_t col0)
{
	const uint32_t ncols = 20;
	uint32_t *tm = malloc(128 * ncols * 4), *out = calloc(128 * ncols, 4);
	uint32_t *want = malloc(128 * ncols * 4);
	uint8_t img[16] = {0};
	for (uint32_t i = 0; i < 128 * ncols; i++)
		tm[i] = want[i] = rnd32();
	/* rows of 32 bytes move down one lane inside the 32-lane block; the
	 * first lane keeps its row (PTX ISA §9.7.16.9.3) */
	for (uint32_t l = lane0 + 1; l < lane0 + 32; l++)
		for (uint32_t c = col0; c < col0 + 8; c++)
			want[l * ncols + c] = tm[(l - 1) * ncols + c];
	OpRun r = {img, 16, tm, ncols, {0}, 0, {lane0 << 16 | col0, 0, 0, 0}, 0, out};
	int bad = run_op("shift", &r) != 0;
	for (uint32_t i = 0; !bad && i < 128 * ncols; i++)
		if (out[i] != want[i] && bad++ < 6)
			printf("FAIL shift: TMEM lane %u column %u = 0x%08x, want 0x%08x\n", i / ncols,
			       i % ncols, out[i], want[i]);
	fails += bad != 0;
	printf("%s shift (lane %u, column %u)\n", bad ? "FAIL" : "ok  ", lane0, col0);
	free(tm);
	free(out);
	free(want);
}

/* ---- MMA ------------------------------------------------------------------------------------- */

enum { K_F8F6F4, K_MXF8F6F4, K_MXF4, K_MXF4NVF4 };

typedef struct MmaCase {
	const char *kernel;
	int kind;
	int ts;       /* A in TMEM */
	int vec;      /* scale factors per row and MMA (0: dense) */
	int cp;       /* scale factors by tcgen05.cp */
} MmaCase;

typedef struct MmaCfg {
	int afmt, bfmt;      /* index into fmts (E2M1 for the mxf4 kinds) */
	uint32_t N;
	int enable, nega, negb;
	int sfa, sfb;        /* scale-factor IDs */
	int ue8m0;
	int f16d;            /* kind::f8f6f4: F16 D */
} MmaCfg;

/* TMEM columns of the MMA runs */
enum { COL_D = 0, COL_A = 256, COL_SFA = 264, COL_SFB = 268, MMA_COLS = 276 };
/* image offsets */
enum { IMG_A = 0, IMG_B = 4096, IMG_SFA = 12288, IMG_SFB = 12800, IMG_BYTES = 13824 };

/* Writes the 32 bytes of row mn of an f8f6f4-family operand (K = 32 codes):
 * 8-bit codes one per byte; 6/4-bit codes 16 per 16-byte chunk, packed from
 * the lowest bit, then random padding (PTX ISA §9.7.16.10.4.4) */
static void
put_row_f8f6f4(uint8_t *img, const Lay *l, uint32_t mn, const Fmt *f, const uint32_t *codes)
{
	for (uint32_t ch = 0; ch < 2; ch++) {
		uint8_t b[16];
		for (int i = 0; i < 16; i++)
			b[i] = (uint8_t)rnd32();
		if (f->bits == 8) {
			for (int j = 0; j < 16; j++)
				b[j] = (uint8_t)codes[16 * ch + (uint32_t)j];
		} else {
			int used = 16 * f->bits / 8;
			memset(b, 0, (size_t)used);
			for (int j = 0; j < 16; j++)
				for (int k = 0; k < f->bits; k++) {
					int bit = j * f->bits + k;
					b[bit / 8] |= (uint8_t)((codes[16 * ch + (uint32_t)j] >> k & 1) << (bit % 8));
				}
		}
		for (int i = 0; i < 16; i++)
			img[lay_addr(l, mn, 16 * ch + (uint32_t)i)] = b[i];
	}
}

/* row mn of a packed E2M1 operand (K = 64): two codes per byte, the lower k
 * in the low nibble (PTX ISA §9.7.16.10.4.6) */
static void
put_row_fp4(uint8_t *img, const Lay *l, uint32_t mn, const uint32_t *codes)
{
	for (uint32_t b = 0; b < 32; b++)
		img[lay_addr(l, mn, b)] = (uint8_t)(codes[2 * b] | codes[2 * b + 1] << 4);
}

/* TS A row m in TMEM lane m, columns COL_A..: 8-bit containers (f8f6f4
 * family) or two E2M1 per byte (mxf4 kinds) */
static void
put_a_tmem(uint32_t *tm, uint32_t ncols, int mxf4, const Fmt *f, uint32_t m, const uint32_t *codes,
           uint32_t K)
{
	uint32_t *row = &tm[m * ncols + COL_A];
	memset(row, 0, 8 * 4);
	for (uint32_t k = 0; k < K; k++) {
		if (mxf4)
			row[k / 8] |= codes[k] << (4 * (k % 8));
		else
			row[k / 4] |= (uint32_t)container(f, codes[k]) << (8 * (k % 4));
	}
}

typedef struct SfSet {
	uint32_t code[256][4];  /* [row or column][block] */
	double val[256][4];
} SfSet;

static uint32_t
sf_random(int ue8m0)
{
	/* UE8M0 2^-8 .. 2^8; UE4M3 any finite non-NaN code, bit 7 random (ignored) */
	if (ue8m0)
		return 119 + rnd_below(17);
	uint32_t c;
	do
		c = rnd32() & 0x7f;
	while (c == 0x7f || c == 0);
	return c | (rnd32() & 0x80);
}

/* The SF word of index i in quarter q: bytes id + j hold blocks j, the other
 * bytes garbage (docs/hardware.md, "Block-scaled tcgen05.mma"); replicated in all 4
 * lane quarters. */
static void
put_sf_tmem(uint32_t *tm, uint32_t ncols, uint32_t col, const SfSet *s, uint32_t n, int vec, int id)
{
	for (uint32_t i = 0; i < 128 * ((n + 127) / 128) && i < 256; i++) {
		uint32_t w = rnd32();
		for (int j = 0; j < vec; j++) {
			int b = id + j;
			w = (w & ~(0xffu << (8 * b))) | s->code[i][j] << (8 * b);
		}
		for (uint32_t q = 0; q < 4; q++)
			tm[(32 * q + i % 32) * ncols + col + i / 32] = w;
	}
}

/* the same words as the smem image of a .32x128b.warpx4 copy: row r, word
 * c = the SF word of index 32c + r (DeepGEMM's transposed SF tile) */
static void
put_sf_smem(uint8_t *img, uint32_t off, const uint32_t *tm, uint32_t ncols, uint32_t col,
            uint32_t ncopies)
{
	for (uint32_t h = 0; h < ncopies; h++)
		for (uint32_t r = 0; r < 32; r++)
			for (uint32_t c = 0; c < 4; c++)
				memcpy(img + off + 512 * h + 16 * r + 4 * c, &tm[r * ncols + col + 4 * h + c], 4);
}

static uint32_t
mma_idesc(const MmaCase *k, const MmaCfg *g)
{
	int mx4 = k->kind == K_MXF4 || k->kind == K_MXF4NVF4;
	uint32_t a = mx4 ? 1 : (uint32_t)fmts[g->afmt].code, b = mx4 ? 1 : (uint32_t)fmts[g->bfmt].code;
	uint32_t v = a << 7 | b << 10 | (uint32_t)g->nega << 13 | (uint32_t)g->negb << 14 |
	             (g->N >> 3) << 17;
	if (k->kind == K_F8F6F4)
		return v | (g->f16d ? 0u : 1u) << 4 | (128u >> 4) << 24;
	return v | (uint32_t)g->sfb << 4 | (uint32_t)g->ue8m0 << 23 | (128u >> 7) << 27 |
	       (uint32_t)g->sfa << 29;
}

static double
f16_round(double x)
{
	/* nearest-even to 11 significant bits, f16 normal range only */
	int e;
	frexp(x, &e);
	double q = ldexp(1.0, e - 11);
	return nearbyint(x / q) * q;
}

static double
f16_value(uint32_t h)
{
	return fp_value(h & 0xffff, 5, 10, 15);
}

typedef struct MmaData {
	uint32_t M, N, K;
	const Fmt *fa, *fb;
	uint32_t ac[128][64], bc[256][64];   /* element codes */
	SfSet sfa, sfb;
	uint8_t img[IMG_BYTES];
	uint32_t tm[128 * MMA_COLS];         /* TMEM before the run */
	uint32_t want[128 * MMA_COLS];       /* TMEM after it, but D */
	uint32_t out[128 * MMA_COLS];
} MmaData;

static int
is_mx4(const MmaCase *k)
{
	return k->kind == K_MXF4 || k->kind == K_MXF4NVF4;
}

/* A: no swizzle, LBO 128, SBO 256; B: 32B swizzle (rows of 32 B), SBO 256 */
static const Lay lay_a = {IMG_A, 128, 256, 0}, lay_b = {IMG_B, 16, 256, 32};
/* scale factors for .32x128b copies: rows of 16 B, 8-row groups 128 B apart */
static const Lay lay_sfa = {IMG_SFA, 16, 128, 0}, lay_sfb = {IMG_SFB, 16, 128, 0};

static void
mma_operands(const MmaCase *k, const MmaCfg *g, MmaData *d)
{
	int mx4 = is_mx4(k);
	for (uint32_t m = 0; m < d->M; m++) {
		for (uint32_t kk = 0; kk < d->K; kk++)
			d->ac[m][kk] = fmt_random(d->fa);
		if (k->ts)
			put_a_tmem(d->tm, MMA_COLS, mx4, d->fa, m, d->ac[m], d->K);
		else if (mx4)
			put_row_fp4(d->img, &lay_a, m, d->ac[m]);
		else
			put_row_f8f6f4(d->img, &lay_a, m, d->fa, d->ac[m]);
	}
	for (uint32_t n = 0; n < d->N; n++) {
		for (uint32_t kk = 0; kk < d->K; kk++)
			d->bc[n][kk] = fmt_random(d->fb);
		if (mx4)
			put_row_fp4(d->img, &lay_b, n, d->bc[n]);
		else
			put_row_f8f6f4(d->img, &lay_b, n, d->fb, d->bc[n]);
	}
	/* D: random f32 / f16 values to accumulate into, or garbage to ignore */
	for (uint32_t m = 0; g->enable && m < d->M; m++)
		for (uint32_t n = 0; n < d->N; n++)
			d->tm[m * MMA_COLS + COL_D + n] =
				g->f16d ? (rnd32() & 0xffff0000u) | (rnd32() & 0x3fff)
				        : bits_of((float)((double)(int32_t)rnd32() / 2147483648.0));
}

static void
mma_scales(const MmaCase *k, const MmaCfg *g, MmaData *d)
{
	for (uint32_t i = 0; i < 256; i++)
		for (int j = 0; j < 4; j++) {
			d->sfa.code[i][j] = sf_random(g->ue8m0);
			d->sfb.code[i][j] = sf_random(g->ue8m0);
			d->sfa.val[i][j] = g->ue8m0 ? ue8m0(d->sfa.code[i][j]) : ue4m3(d->sfa.code[i][j]);
			d->sfb.val[i][j] = g->ue8m0 ? ue8m0(d->sfb.code[i][j]) : ue4m3(d->sfb.code[i][j]);
		}
	if (!k->vec)
		return;
	put_sf_tmem(d->tm, MMA_COLS, COL_SFA, &d->sfa, d->M, k->vec, g->sfa);
	put_sf_tmem(d->tm, MMA_COLS, COL_SFB, &d->sfb, 256, k->vec, g->sfb);
	if (!k->cp)
		return;
	/* the copies must bring these words: TMEM starts with other garbage */
	put_sf_smem(d->img, IMG_SFA, d->tm, MMA_COLS, COL_SFA, 1);
	put_sf_smem(d->img, IMG_SFB, d->tm, MMA_COLS, COL_SFB, 2);
	memcpy(d->want, d->tm, sizeof d->want);
	for (uint32_t l = 0; l < 128; l++)
		for (uint32_t c = COL_SFA; c < COL_SFB + 8; c++)
			d->tm[l * MMA_COLS + c] = rnd32();
}

/* D[m][n] from the inputs in float64; *mag: sum of |terms| (the error
 * scale of an f32 accumulation in any order) */
static double
mma_ref(const MmaCase *k, const MmaCfg *g, const MmaData *d, uint32_t m, uint32_t n, double *mag)
{
	uint32_t dw = d->tm[m * MMA_COLS + COL_D + n];
	double d0 = !g->enable ? 0 : g->f16d ? f16_value(dw) : f32_of(dw);
	double sa = g->nega ? -1 : 1, sb = g->negb ? -1 : 1, sum = d0;
	uint32_t blk = k->vec ? d->K / (uint32_t)k->vec : d->K;
	*mag = fabs(d0);
	for (uint32_t kk = 0; kk < d->K; kk++) {
		double p = sa * fmt_value(d->fa, d->ac[m][kk]) * sb * fmt_value(d->fb, d->bc[n][kk]);
		if (k->vec)
			p *= d->sfa.val[m][kk / blk] * d->sfb.val[n][kk / blk];
		sum += p;
		*mag += fabs(p);
	}
	return g->f16d ? f16_round(sum) : sum;
}

/* D against the reference, everything else against `want` */
static int
mma_check(const MmaCase *k, const MmaCfg *g, MmaData *d, double *worst)
{
	int bad = 0;
	for (uint32_t m = 0; m < d->M; m++)
		for (uint32_t n = 0; n < d->N; n++) {
			double mag, ref = mma_ref(k, g, d, m, n, &mag);
			uint32_t o = d->out[m * MMA_COLS + COL_D + n];
			double got = g->f16d ? f16_value(o) : f32_of(o);
			double e = fabs(got - ref) / (mag + 1e-30);
			if (!(e <= (g->f16d ? 2e-3 : 1e-5)) && bad++ < 4)
				printf("FAIL %s: D[%u][%u] = %.9g, want %.9g (relative error %.3g)\n", k->kernel,
				       m, n, got, ref, e);
			*worst = e > *worst || e != e ? e : *worst;
			d->want[m * MMA_COLS + COL_D + n] = o;
		}
	for (uint32_t i = 0; i < 128 * MMA_COLS; i++)
		if (d->out[i] != d->want[i] && bad++ < 8)
			printf("FAIL %s: TMEM lane %u column %u = 0x%08x, want 0x%08x\n", k->kernel,
			       i / MMA_COLS, i % MMA_COLS, d->out[i], d->want[i]);
	return bad;
}

static void
test_mma(const MmaCase *k, const MmaCfg *g)
{
	MmaData *d = calloc(1, sizeof *d);
	if (!d)
		abort();
	d->M = 128;
	d->N = g->N;
	d->K = is_mx4(k) ? 64 : 32;
	d->fa = &fmts[is_mx4(k) ? F_E2M1 : g->afmt];
	d->fb = &fmts[is_mx4(k) ? F_E2M1 : g->bfmt];
	for (uint32_t i = 0; i < IMG_BYTES; i++)
		d->img[i] = (uint8_t)rnd32();
	for (uint32_t i = 0; i < 128 * MMA_COLS; i++)
		d->tm[i] = rnd32();
	mma_operands(k, g, d);
	mma_scales(k, g, d);
	if (!k->cp)
		memcpy(d->want, d->tm, sizeof d->want);
	OpRun r = {d->img, IMG_BYTES, d->tm, MMA_COLS,
	           {lay_desc(&lay_a), lay_desc(&lay_b), lay_desc(&lay_sfa), lay_desc(&lay_sfb)},
	           mma_idesc(k, g), {COL_D, COL_A, COL_SFA, COL_SFB}, (uint32_t)g->enable, d->out};
	double worst = 0;
	int bad = run_op(k->kernel, &r) ? 1 : mma_check(k, g, d, &worst);
	fails += bad != 0;
	char sf[64] = "";
	if (k->vec)
		snprintf(sf, sizeof sf, " %s SF ids A %d B %d", g->ue8m0 ? "UE8M0" : "UE4M3", g->sfa,
		         g->sfb);
	printf("%s %s A %s B %s N %u enable %d neg %d/%d%s%s: max rel err %.2g\n",
	       bad ? "FAIL" : "ok  ", k->kernel, d->fa->name, d->fb->name, d->N, g->enable, g->nega,
	       g->negb, sf, g->f16d ? " F16 D" : "", worst);
	free(d);
}

static int
pick_id(int vec)
{
	return vec == 1 ? (int)rnd_below(4) : vec == 2 ? 2 * (int)rnd_below(2) : 0;
}

static void
mma_runs(const MmaCase *k, int nruns)
{
	/* dense M = 128 takes N in steps of 16, block-scaled ones steps of 8
	 * (runtime/emu/tc_idesc.c) */
	static const uint32_t ns_dense[] = {16, 64, 144, 256}, ns_scaled[] = {8, 64, 136, 256};
	const uint32_t *ns = k->kind == K_F8F6F4 ? ns_dense : ns_scaled;
	for (int i = 0; i < nruns; i++) {
		MmaCfg g;
		memset(&g, 0, sizeof g);
		g.afmt = (int)rnd_below(NFMTS);
		g.bfmt = (int)rnd_below(NFMTS);
		if (i == 0 && k->kind != K_MXF4 && k->kind != K_MXF4NVF4) {
			g.afmt = F_E2M1; /* every sub-byte format at least once */
			g.bfmt = k->ts ? F_E3M2 : F_E2M3;
		}
		g.N = ns[(i + (int)rnd_below(4)) % 4];
		g.enable = i % 2;
		g.nega = (int)rnd_below(2);
		g.negb = (int)rnd_below(2);
		g.sfa = pick_id(k->vec);
		g.sfb = pick_id(k->vec);
		g.ue8m0 = !(k->kind == K_MXF4NVF4 && k->vec == 4 && i % 2 == 0);
		g.f16d = k->kind == K_F8F6F4 && i == 2;
		if (g.f16d) { /* fp6/fp4 only: 8-bit products overflow F16 */
			g.afmt = F_E2M3 + (int)rnd_below(3);
			g.bfmt = F_E2M3 + (int)rnd_below(3);
		}
		test_mma(k, &g);
	}
}

static void
test_mmas(void)
{
	static const MmaCase cases[] = {
		{"f8f6f4_ss", K_F8F6F4, 0, 0, 0},
		{"f8f6f4_ts", K_F8F6F4, 1, 0, 0},
		{"mxf8f6f4_ss", K_MXF8F6F4, 0, 1, 0},
		{"mxf8f6f4_ss_1x", K_MXF8F6F4, 0, 1, 0},
		{"mxf8f6f4_ts_b32", K_MXF8F6F4, 1, 1, 0},
		{"mxf8f6f4_ss_cp", K_MXF8F6F4, 0, 1, 1},
		{"mxf4_ss", K_MXF4, 0, 2, 0},
		{"mxf4_ts_2x", K_MXF4, 1, 2, 0},
		{"mxf4nvf4_ss_b32", K_MXF4NVF4, 0, 2, 0},
		{"mxf4nvf4_ss_2x", K_MXF4NVF4, 0, 2, 0},
		{"mxf4nvf4_ss_4x", K_MXF4NVF4, 0, 4, 0},
		{"mxf4nvf4_ss_b16", K_MXF4NVF4, 0, 4, 0},
		{"mxf4nvf4_ts_b16", K_MXF4NVF4, 1, 4, 0},
		{"mxf4nvf4_ss_b16_cp", K_MXF4NVF4, 0, 4, 1},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		mma_runs(&cases[i], 3);
}

/* ---- modes ------------------------------------------------------------------------------------ */

static int
dump(const char *dir, const char *ptxas)
{
	int bad = 0;
	for (int i = 0; i < NKERNELS; i++) {
		char path[4096], cmd[8192];
		snprintf(path, sizeof path, "%s/tc_%s.ptx", dir, kernels[i].name);
		FILE *f = fopen(path, "w");
		char *text = kernel_text(&kernels[i]);
		if (!f || fputs(text, f) < 0) {
			fprintf(stderr, "cannot write %s\n", path);
			free(text);
			return 1;
		}
		fclose(f);
		free(text);
		if (!ptxas)
			continue;
		snprintf(cmd, sizeof cmd, "'%s' -arch=sm_100a '%s' -o /dev/null", ptxas, path);
		int rc = system(cmd);
		printf("%s ptxas tc_%s.ptx\n", rc ? "FAIL" : "ok  ", kernels[i].name);
		bad += rc != 0;
	}
	return bad ? 1 : 0;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "--dump") == 0)
		return dump(argv[2], NULL);
	if (argc == 3 && strcmp(argv[1], "--ptxas") == 0) {
		char dir[] = "/tmp/test_emu_tc_XXXXXX", cmd[4200];
		snprintf(cmd, sizeof cmd, "'%s' --version > /dev/null 2>&1", argv[2]);
		if (system(cmd) != 0) {
			printf("ptxas %s cannot run: skipped\n", argv[2]);
			return 77;
		}
		if (!mkdtemp(dir))
			return 1;
		int rc = dump(dir, argv[2]);
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			rc = 1;
		return rc;
	}
	const char *s = getenv("TC_SEED");
	uint64_t seed = s ? strtoull(s, NULL, 0) : UINT64_C(0x7c05);
	seed_state = seed;
	printf("seed 0x%llx (TC_SEED=N repeats a run)\n", (unsigned long long)seed);
	KrtErr err;
	if (krt_device_open(&dev, "emu", 0, &err)) {
		printf("FAIL: %s\n", err.msg);
		return 1;
	}
	test_pack();
	test_cp();
	test_shift(32, 4);
	test_shift(96, 0);
	test_mmas();
	krt_device_close(dev);
	printf("%d failures\n", fails);
	return fails ? 1 : 0;
}
