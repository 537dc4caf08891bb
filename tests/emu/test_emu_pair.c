/* The CTA pair's M = 128 tcgen05.mma (.cta_group::2, data path layout B;
 * docs/hardware.md, "Accumulator layout of the CTA pair") in a small
 * hand-written two-CTA kernel run on the emulator and compared with a
 * float64 model written here from that section: CTA h of the pair holds
 * rows 64h..64h+63 of the 128 x N D, row r and column c in lane r +
 * 64(c / (N/2)), column c % (N/2); its smem holds its 64 rows of A and B
 * rows hN/2..hN/2+N/2-1; A from TMEM (TS) holds a copy of the CTA's rows in
 * each lane half, the copy of lane half j feeding the columns of half j
 * (the test makes the two copies differ so that a model mixing them up
 * fails). kind::f16 with bf16 A/B and f32 D, SS and TS, with and without
 * accumulation, N 16..256; every TMEM cell outside D must keep its value.
 * Random inputs from a printed seed (PAIR_SEED=N repeats a run).
 *
 *   test_emu_pair               run on the emulator
 *   test_emu_pair --ptxas PTXAS assemble the kernels for sm_100a (77 if
 *                               PTXAS cannot run)
 *
 * Exit 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"

static int fails;
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

/* ---- the kernel ---------------------------------------------------------------------------- *
 * Both CTAs (128 threads each): copy their smem image IN[rank] (NSMEM
 * bytes at a 1024-aligned base) and TMEM columns [0, NCOLS) of all lanes
 * from TM[rank]; a cluster barrier publishes both; thread 0 of rank 0
 * issues the pair's MMA (D at TMEM + C0, A at TMEM + C1 for TS, ADESC and
 * BDESC offsets into the image) and commits it to the mbarrier of both
 * CTAs (mask 3); every thread waits on its own CTA's and writes its TMEM
 * back to OUT[rank]. */
static const char head[] =
	"//@kgen-abi 1\n"
	"//@kernel pair_%s\n"
	"//@family test\n"
	"//@target sm_100a\n"
	"//@ptx 8.8\n"
	"//@args test %s\n"
	"//@threads 128\n"
	"//@cluster 2 1 1\n"
	"//@smem 9280\n"
	"//@grid 2 1 1\n"
	"//@param ptr IN dtype=u8 tensor=IN[2,NSMEM]\n"
	"//@param ptr TM dtype=s32 tensor=TM[2,128,NCOLS]\n"
	"//@param ptr OUT dtype=s32 tensor=OUT[2,128,NCOLS]\n"
	"//@param u32 NSMEM\n"
	"//@param u32 NCOLS\n"
	"//@param u64 ADESC\n"
	"//@param u64 BDESC\n"
	"//@param u32 IDESC\n"
	"//@param u32 C0\n"
	"//@param u32 C1\n"
	"//@param u32 EN\n"
	"//@end\n"
	"// test_emu_pair kernel (see tests/emu/test_emu_pair.c)\n"
	"\n"
	".version 8.8\n"
	".target sm_100a\n"
	".address_size 64\n"
	"\n"
	".extern .shared .align 1024 .b8 smem[];\n"
	"\n"
	".visible .entry pair_%s(\n"
	"\t.param .u64 p_in,\n"
	"\t.param .u64 p_tm,\n"
	"\t.param .u64 p_out,\n"
	"\t.param .u32 p_nsmem,\n"
	"\t.param .u32 p_ncols,\n"
	"\t.param .u64 p_adesc,\n"
	"\t.param .u64 p_bdesc,\n"
	"\t.param .u32 p_idesc,\n"
	"\t.param .u32 p_c0,\n"
	"\t.param .u32 p_c1,\n"
	"\t.param .u32 p_en\n"
	")\n"
	".maxntid 128, 1, 1\n"
	".reqnctapercluster 2, 1, 1\n"
	"{\n"
	"\t.reg .pred %%p<8>;\n"
	"\t.reg .b16 %%h<2>;\n"
	"\t.reg .b32 %%r<40>;\n"
	"\t.reg .b64 %%rd<20>;\n"
	"\n"
	"\tmov.u32 %%r1, %%tid.x;\n"
	"\tshr.u32 %%r2, %%r1, 5;\n"
	"\tmov.u32 %%r3, %%cluster_ctarank;\n"
	"\tmov.u32 %%r4, smem;\n"
	"\tadd.u32 %%r4, %%r4, 1023;\n"
	"\tand.b32 %%r4, %%r4, -1024;\n"
	"\tadd.u32 %%r5, %%r4, 8192; // mbarrier\n"
	"\tadd.u32 %%r6, %%r4, 8200; // TMEM address slot\n"
	"\tld.param.u64 %%rd1, [p_in];\n"
	"\tcvta.to.global.u64 %%rd1, %%rd1;\n"
	"\tld.param.u64 %%rd2, [p_tm];\n"
	"\tcvta.to.global.u64 %%rd2, %%rd2;\n"
	"\tld.param.u64 %%rd3, [p_out];\n"
	"\tcvta.to.global.u64 %%rd3, %%rd3;\n"
	"\tld.param.u32 %%r7, [p_nsmem];\n"
	"\tld.param.u32 %%r8, [p_ncols];\n"
	"\tmul.wide.u32 %%rd4, %%r3, %%r7;\n"
	"\tadd.u64 %%rd1, %%rd1, %%rd4; // IN[rank]\n"
	"\tmul.lo.u32 %%r9, %%r3, %%r8;\n"
	"\tmul.wide.u32 %%rd4, %%r9, 512;\n"
	"\tadd.u64 %%rd2, %%rd2, %%rd4; // TM[rank]\n"
	"\tadd.u64 %%rd3, %%rd3, %%rd4; // OUT[rank]\n"
	"\tsetp.ne.u32 %%p1, %%r1, 0;\n"
	"\t@%%p1 bra $L_init_done;\n"
	"\tmbarrier.init.shared::cta.b64 [%%r5], 1;\n"
	"\tfence.mbarrier_init.release.cluster;\n"
	"$L_init_done:\n"
	"\tsetp.ne.u32 %%p2, %%r2, 0;\n"
	"\t@%%p2 bra $L_alloc_done;\n"
	"\ttcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%%r6], 512;\n"
	"\ttcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;\n"
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
	"\tbarrier.cluster.arrive.release.aligned;\n"
	"\tbarrier.cluster.wait.acquire.aligned;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\tor.b32 %%r12, %%r1, %%r3;\n"
	"\tsetp.ne.u32 %%p4, %%r12, 0;\n"
	"\t@%%p4 bra $L_wait;\n"
	"\tshr.u32 %%r12, %%r4, 4;\n"
	"\tcvt.u64.u32 %%rd11, %%r12;\n"
	"\tld.param.u64 %%rd12, [p_adesc];\n"
	"\tadd.s64 %%rd12, %%rd12, %%rd11;\n"
	"\tld.param.u64 %%rd13, [p_bdesc];\n"
	"\tadd.s64 %%rd13, %%rd13, %%rd11;\n"
	"\tld.param.u32 %%r20, [p_c0];\n"
	"\tadd.u32 %%r20, %%r20, %%r15;\n"
	"\tld.param.u32 %%r21, [p_c1];\n"
	"\tadd.u32 %%r21, %%r21, %%r15;\n"
	"\tld.param.u32 %%r24, [p_idesc];\n"
	"\tld.param.u32 %%r25, [p_en];\n"
	"\tsetp.ne.u32 %%p5, %%r25, 0;\n"
	"%s"
	"\tmov.b16 %%h1, 3;\n"
	"\ttcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%%r5], %%h1;\n"
	"$L_wait:\n"
	"\tmbarrier.try_wait.parity.shared::cta.b64 %%p6, [%%r5], 0;\n"
	"\t@!%%p6 bra $L_wait;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\tmov.u32 %%r19, 0;\n"
	"$L_out:\n"
	"\tsetp.ge.u32 %%p3, %%r19, %%r8;\n"
	"\t@%%p3 bra $L_out_done;\n"
	"\tadd.u32 %%r11, %%r17, %%r19;\n"
	"\ttcgen05.ld.sync.aligned.32x32b.x1.b32 {%%r10}, [%%r11];\n"
	"\ttcgen05.wait::ld.sync.aligned;\n"
	"\tmul.wide.u32 %%rd9, %%r19, 4;\n"
	"\tadd.u64 %%rd10, %%rd8, %%rd9;\n"
	"\tst.global.u32 [%%rd10], %%r10;\n"
	"\tadd.u32 %%r19, %%r19, 1;\n"
	"\tbra $L_out;\n"
	"$L_out_done:\n"
	"\ttcgen05.fence::before_thread_sync;\n"
	"\tbarrier.cluster.arrive.release.aligned;\n"
	"\tbarrier.cluster.wait.acquire.aligned;\n"
	"\ttcgen05.fence::after_thread_sync;\n"
	"\t@%%p2 bra $L_exit;\n"
	"\ttcgen05.dealloc.cta_group::2.sync.aligned.b32 %%r15, 512;\n"
	"$L_exit:\n"
	"\tret;\n"
	"}\n";

typedef struct Kernel {
	const char *name;
	const char *mma;
	int ts;
} Kernel;

static const Kernel kernels[] = {
	{"m128_ss", "\ttcgen05.mma.cta_group::2.kind::f16 [%r20], %rd12, %rd13, %r24, %p5;\n", 0},
	{"m128_ts", "\ttcgen05.mma.cta_group::2.kind::f16 [%r20], [%r21], %rd13, %r24, %p5;\n", 1},
};
enum { NKERNELS = sizeof kernels / sizeof kernels[0] };

static char *
kernel_text(const Kernel *k)
{
	size_t n = 16384;
	char *buf = malloc(n);
	if (!buf || snprintf(buf, n, head, k->name, k->name, k->name, k->mma) >= (int)n)
		abort();
	return buf;
}

/* ---- operands ------------------------------------------------------------------------------ */

enum {
	K = 16,            /* one kind::f16 MMA */
	NSMEM = 8192,      /* per CTA: A at 0 (64 rows), B at 2048 (up to 128 rows) */
	IMG_A = 0, IMG_B = 2048,
	NCOLS = 256,       /* TMEM columns read and written: D at COL_D, A (TS) at COL_A */
	COL_D = 8, COL_A = 160,
};

/* K-major without swizzle: 8-row core matrices of 16-byte rows, the K
 * halves LBO = 128 bytes apart, 8-row groups SBO = 256 apart (docs/hardware.md,
 * "Canonical layouts, LBO and SBO") */
static uint32_t
img_addr(uint32_t start, uint32_t mn, uint32_t k)
{
	uint32_t b = 2 * k;
	return start + (mn % 8) * 16 + (mn / 8) * 256 + (b / 16) * 128 + b % 16;
}

static uint64_t
img_desc(uint32_t start)
{
	return (uint64_t)(start >> 4) | (uint64_t)(128 >> 4) << 16 | (uint64_t)(256 >> 4) << 32 |
	       UINT64_C(1) << 46;
}

/* a random bf16 in (-2, 2) and its value */
static uint16_t
bf16_random(double *v)
{
	float f = (float)((double)(int32_t)rnd32() / 1073741824.0);
	uint32_t b;
	memcpy(&b, &f, 4);
	b &= 0xffff0000u;
	memcpy(&f, &b, 4);
	*v = f;
	return (uint16_t)(b >> 16);
}

typedef struct Run {
	uint32_t N;
	int ts, enable;
	/* A[h][j][r][k]: CTA h's row r as lane half j holds it (SS: j = 0 only) */
	double a[2][2][64][K], b[256][K];
	uint8_t img[2][NSMEM];
	uint32_t tm[2][128 * NCOLS], out[2][128 * NCOLS];
} Run;

static void
fill(Run *r)
{
	for (int h = 0; h < 2; h++) {
		for (uint32_t i = 0; i < NSMEM; i++)
			r->img[h][i] = (uint8_t)rnd32();
		for (uint32_t i = 0; i < 128 * NCOLS; i++)
			r->tm[h][i] = rnd32();
		for (uint32_t j = 0; j < (r->ts ? 2u : 1u); j++)
			for (uint32_t m = 0; m < 64; m++)
				for (uint32_t k = 0; k < K; k += 2) {
					uint16_t lo = bf16_random(&r->a[h][j][m][k]);
					uint16_t hi = bf16_random(&r->a[h][j][m][k + 1]);
					if (r->ts) /* element k in the low half of column k/2 */
						r->tm[h][(m + 64 * j) * NCOLS + COL_A + k / 2] = lo | (uint32_t)hi << 16;
					else {
						memcpy(&r->img[h][img_addr(IMG_A, m, k)], &lo, 2);
						memcpy(&r->img[h][img_addr(IMG_A, m, k + 1)], &hi, 2);
					}
				}
		if (!r->ts)
			memcpy(r->a[h][1], r->a[h][0], sizeof r->a[h][0]);
	}
	/* B row n: CTA n / (N/2), its row n % (N/2) */
	for (uint32_t n = 0; n < r->N; n++)
		for (uint32_t k = 0; k < K; k++) {
			uint16_t v = bf16_random(&r->b[n][k]);
			memcpy(&r->img[n / (r->N / 2)][img_addr(IMG_B, n % (r->N / 2), k)], &v, 2);
		}
	/* D to accumulate into: small f32 values */
	for (int h = 0; h < 2; h++)
		for (uint32_t i = 0; i < 128 * NCOLS; i++)
			if (i % NCOLS >= COL_D && i % NCOLS < COL_D + r->N / 2) {
				float f = (float)((double)(int32_t)rnd32() / 2147483648.0);
				memcpy(&r->tm[h][i], &f, 4);
			}
}

/* CTA h's D row r, column c against float64: lane r + 64(c/(N/2)), column
 * COL_D + c % (N/2); every other cell unchanged */
static int
check(const char *name, Run *r, double *worst)
{
	int bad = 0;
	uint32_t half = r->N / 2;
	static uint32_t want[128 * NCOLS];
	for (int h = 0; h < 2; h++) {
		memcpy(want, r->tm[h], sizeof want);
		for (uint32_t m = 0; m < 64; m++)
			for (uint32_t c = 0; c < r->N; c++) {
				uint32_t j = c / half, lane = m + 64 * j, i = lane * NCOLS + COL_D + c % half;
				float d0, got;
				memcpy(&d0, &r->tm[h][i], 4);
				memcpy(&got, &r->out[h][i], 4);
				double sum = r->enable ? d0 : 0, mag = fabs(sum);
				for (uint32_t k = 0; k < K; k++) {
					double p = r->a[h][j][m][k] * r->b[c][k];
					sum += p;
					mag += fabs(p);
				}
				double e = fabs(got - sum) / (mag + 1e-30);
				if (!(e <= 1e-5) && bad++ < 4)
					printf("FAIL %s: CTA %d D[%u][%u] (lane %u) = %.9g, want %.9g\n", name, h,
					       64 * h + m, c, lane, got, sum);
				*worst = e > *worst || e != e ? e : *worst;
				want[i] = r->out[h][i];
			}
		for (uint32_t i = 0; i < 128 * NCOLS; i++)
			if (r->out[h][i] != want[i] && bad++ < 8)
				printf("FAIL %s: CTA %d TMEM lane %u column %u = 0x%08x, want 0x%08x\n", name,
				       h, i / NCOLS, i % NCOLS, r->out[h][i], want[i]);
	}
	return bad;
}

/* ---- running -------------------------------------------------------------------------------- */

static KrtDevice *dev;

static int
run(const Kernel *k, Run *r, KrtErr *err)
{
	KrtPtr in = 0, tm = 0, out = 0;
	KrtModule *mod = NULL;
	size_t tbytes = sizeof r->tm;
	char *text = kernel_text(k);
	/* bf16 A and B, f32 D, M = 128 >> 4, N >> 3 (docs/hardware.md,
	 * "Instruction descriptor") */
	uint32_t idesc = 1u << 4 | 1u << 7 | 1u << 10 | (r->N >> 3) << 17 | (128u >> 4) << 24;
	KrtArg a[11];
	memset(a, 0, sizeof a);
	int rc = krt_alloc(dev, sizeof r->img, &in, err) || krt_alloc(dev, tbytes, &tm, err) ||
	         krt_alloc(dev, tbytes, &out, err) || krt_upload(dev, in, r->img, sizeof r->img, err) ||
	         krt_upload(dev, tm, r->tm, tbytes, err) || krt_memset8(dev, out, 0, tbytes, err);
	a[0].kind = a[1].kind = a[2].kind = KRT_ARG_PTR;
	a[0].v.p = in;
	a[1].v.p = tm;
	a[2].v.p = out;
	a[3].kind = a[4].kind = a[7].kind = a[8].kind = a[9].kind = a[10].kind = KRT_ARG_U32;
	a[5].kind = a[6].kind = KRT_ARG_U64;
	a[3].v.u32 = NSMEM;
	a[4].v.u32 = NCOLS;
	a[5].v.u64 = img_desc(IMG_A);
	a[6].v.u64 = img_desc(IMG_B);
	a[7].v.u32 = idesc;
	a[8].v.u32 = COL_D;
	a[9].v.u32 = COL_A;
	a[10].v.u32 = (uint32_t)r->enable;
	if (!rc)
		rc = krt_module_load(dev, text, strlen(text), &mod, err) ||
		     krt_launch(mod, a, 11, NULL, err) || krt_download(dev, r->out, out, tbytes, err);
	free(text);
	if (mod)
		krt_module_unload(mod);
	krt_free(dev, in, NULL);
	krt_free(dev, tm, NULL);
	krt_free(dev, out, NULL);
	return rc ? -1 : 0;
}

static void
test_case(const Kernel *k, uint32_t N, int enable)
{
	Run *r = calloc(1, sizeof *r);
	KrtErr err;
	double worst = 0;
	if (!r)
		abort();
	memset(&err, 0, sizeof err);
	r->N = N;
	r->ts = k->ts;
	r->enable = enable;
	fill(r);
	int bad = run(k, r, &err);
	if (bad)
		printf("FAIL pair_%s: %s\n", k->name, err.msg);
	else
		bad = check(k->name, r, &worst);
	fails += bad != 0;
	printf("%s pair_%s N %u enable %d: max rel err %.2g\n", bad ? "FAIL" : "ok  ", k->name, N,
	       enable, worst);
	free(r);
}

static int
assemble(const char *ptxas)
{
	char dir[] = "/tmp/test_emu_pair_XXXXXX", cmd[8400], path[4200];
	int bad = 0;
	snprintf(cmd, sizeof cmd, "'%s' --version > /dev/null 2>&1", ptxas);
	if (system(cmd) != 0) {
		printf("ptxas %s cannot run: skipped\n", ptxas);
		return 77;
	}
	if (!mkdtemp(dir))
		return 1;
	for (int i = 0; i < NKERNELS; i++) {
		char *text = kernel_text(&kernels[i]);
		snprintf(path, sizeof path, "%s/pair_%s.ptx", dir, kernels[i].name);
		FILE *f = fopen(path, "w");
		int ok = f && fputs(text, f) >= 0;
		if (f)
			fclose(f);
		free(text);
		snprintf(cmd, sizeof cmd, "'%s' -arch=sm_100a '%s' -o /dev/null", ptxas, path);
		int rc = !ok || system(cmd) != 0;
		printf("%s ptxas pair_%s.ptx\n", rc ? "FAIL" : "ok  ", kernels[i].name);
		bad += rc;
	}
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		bad++;
	return bad ? 1 : 0;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "--ptxas") == 0)
		return assemble(argv[2]);
	const char *s = getenv("PAIR_SEED");
	seed_state = s ? strtoull(s, NULL, 0) : UINT64_C(0x9a12);
	printf("seed 0x%llx (PAIR_SEED=N repeats a run)\n", (unsigned long long)seed_state);
	KrtErr err;
	if (krt_device_open(&dev, "emu", 0, &err)) {
		printf("FAIL: %s\n", err.msg);
		return 1;
	}
	static const uint32_t ns[] = {16, 64, 144, 256};
	for (int i = 0; i < NKERNELS; i++)
		for (int j = 0; j < 4; j++)
			test_case(&kernels[i], ns[j], j % 2);
	krt_device_close(dev);
	printf("%d failures\n", fails);
	return fails ? 1 : 0;
}
