/* The gpu suite for gemm: every configuration below, generated in-process,
 * and every emitted/sm_90a/gemm* file, checked on a GPU against the float64
 * reference at shapes that are not tile multiples, small to medium (the
 * block-scaled e4m3 kernels at K a multiple of their 128 scale block, their MoE
 * layouts with E experts), with a
 * fresh seed each run (printed; KGEN_TEST_SEED fixes it). Also: an sm_100a
 * module must be refused on an sm_90 device with KRT_EMISMATCH, and the
 * message must name both targets.
 *
 *   test_gemm_gpu SOURCE_ROOT
 *
 * Exit status: 0 all passed, 1 a failure, 77 no GPU (meson: skipped). */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "suite.h"

enum { MAX_CFG_ARGS = 40 };

/* kgen arguments of each configuration, NULL-terminated: the default one,
 * then one change at a time, so a failure points at what changed. */
static const char *const configs[][MAX_CFG_ARGS] = {
#define BASE_ARGS "--target", "sm_90a", "--tile-m", "128", "--tile-n", "256", "--tile-k", "64", \
	"--stages", "4", "--swizzle", "128", "--dtype", "bf16", "--out-dtype", "bf16"
	{BASE_ARGS, NULL},
	{BASE_ARGS, "--tile-n", "128", NULL},
	{BASE_ARGS, "--out-dtype", "f32", NULL},
	{BASE_ARGS, "--dtype", "fp16", NULL},
	{BASE_ARGS, "--swizzle", "64", "--tile-k", "64", NULL},
	{BASE_ARGS, "--swizzle", "32", NULL},
	{BASE_ARGS, "--swizzle", "none", NULL},
	{BASE_ARGS, "--tile-m", "64", NULL},
#undef BASE_ARGS
};

/* Block-scaled e4m3 (docs/ABI.md, "gemm"), the same way. */
static const char *const bs_configs[][MAX_CFG_ARGS] = {
#define BS_ARGS "--target", "sm_90a", "--tile-m", "128", "--tile-n", "128", "--tile-k", "128", \
	"--stages", "6", "--swizzle", "128", "--dtype", "e4m3", "--scale", "block128", "--out-dtype", "bf16"
	{BS_ARGS, NULL},
	{BS_ARGS, "--out-dtype", "f32", NULL},
	{BS_ARGS, "--tile-m", "64", "--tile-n", "64", "--stages", "4", NULL},
	{BS_ARGS, "--scale-b", "ue8m0", NULL},
#undef BS_ARGS
};

/* MoE layouts (docs/ABI.md, "MoE layouts") on the block-scaled kernel. */
static const char *const moe_configs[][MAX_CFG_ARGS] = {
#define MOE_ARGS "--target", "sm_90a", "--tile-m", "128", "--tile-n", "128", "--tile-k", "128", \
	"--stages", "6", "--swizzle", "128", "--dtype", "e4m3", "--scale", "block128", "--out-dtype", "bf16"
	{MOE_ARGS, "--moe", "contiguous", NULL},
	{MOE_ARGS, "--moe", "masked", NULL},
	{MOE_ARGS, "--moe", "masked", "--tile-m", "64", "--stages", "8", "--scale-b", "ue8m0", NULL},
	{MOE_ARGS, "--moe", "contiguous", "--scale-b", "ue8m0", "--out-dtype", "f32", NULL},
	/* the gate+up GEMM (docs/ABI.md, "SwiGLU epilogue"): N fitted to whole halves */
	{MOE_ARGS, "--moe", "masked", "--epilogue", "swiglu", NULL},
	{MOE_ARGS, "--moe", "contiguous", "--tile-m", "64", "--tile-n", "64", "--scale-b", "ue8m0", "--epilogue",
	 "swiglu", NULL},
	/* the FP8 output for the down GEMM: fp32 scales per 1x128 of C */
	{MOE_ARGS, "--moe", "masked", "--tile-m", "64", "--tile-n", "256", "--stages", "4", "--epilogue", "swiglu",
	 "--out-dtype", "e4m3", NULL},
	{MOE_ARGS, "--moe", "contiguous", "--tile-m", "64", "--tile-n", "256", "--stages", "4", "--scale-b", "ue8m0",
	 "--epilogue", "swiglu", "--out-dtype", "e4m3", NULL},
	/* W4A8 experts (docs/ABI.md, "W4A8 weights"): FP4 weights as E4M3 wgmma A fragments */
	{MOE_ARGS, "--moe", "masked", "--scale", "w4a8", "--tile-m", "8", "--stages", "8", NULL},
	{MOE_ARGS, "--moe", "masked", "--scale", "w4a8", "--tile-m", "16", "--tile-n", "64", "--out-dtype", "f32",
	 NULL},
	{MOE_ARGS, "--moe", "contiguous", "--scale", "w4a8", "--tile-m", "16", NULL},
#undef MOE_ARGS
};

/* Shapes and fills: none a multiple of a tile in M or N, K a multiple of 8
 * only; the edge pattern on two of them. */
static const GpuCase cases[] = {
	{{3, {1, 1, 8}}, CHECK_FILL_NORMAL},
	{{3, {7, 13, 24}}, CHECK_FILL_NORMAL},
	{{3, {129, 257, 136}}, CHECK_FILL_NORMAL},
	{{3, {129, 257, 136}}, CHECK_FILL_EDGE},
	{{3, {300, 500, 1000}}, CHECK_FILL_NORMAL},
	{{3, {300, 500, 1000}}, CHECK_FILL_EDGE},
	{{3, {1000, 1000, 1000}}, CHECK_FILL_NORMAL},
	{{3, {2048, 2048, 512}}, CHECK_FILL_NORMAL},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const GpuSuite suite = {cases, COUNT(cases), 0};

/* Block-scaled: K a multiple of 128, from the smallest (one scale block) up;
 * odd M and N. */
static const GpuCase bs_cases[] = {
	{{3, {1, 1, 128}}, CHECK_FILL_NORMAL},
	{{3, {7, 13, 128}}, CHECK_FILL_NORMAL},
	{{3, {129, 257, 128}}, CHECK_FILL_EDGE},
	{{3, {300, 500, 1024}}, CHECK_FILL_NORMAL},
	{{3, {300, 500, 1024}}, CHECK_FILL_EDGE},
	{{3, {1000, 1000, 1152}}, CHECK_FILL_NORMAL},
	{{3, {2048, 2048, 2048}}, CHECK_FILL_NORMAL},
};

static const GpuSuite bs_suite = {bs_cases, COUNT(bs_cases), 0};

/* MoE: M (contiguous: all rows; masked: a slab's) x N x K x E. The checker
 * (tools/check_moe.c) gives an expert 0 rows and one 1 row; odd M and N,
 * K at one scale block, more experts than a warp's 32, decode-sized slabs
 * against DeepSeek-V4's N and K, and a prefill-sized one. */
static const GpuCase moe_cases[] = {
	{{4, {1, 136, 128, 2}}, CHECK_FILL_NORMAL},
	{{4, {131, 200, 128, 5}}, CHECK_FILL_EDGE},
	{{4, {300, 500, 1024, 7}}, CHECK_FILL_NORMAL},
	{{4, {77, 128, 256, 40}}, CHECK_FILL_EDGE},
	{{4, {8, 4096, 7168, 64}}, CHECK_FILL_NORMAL},
	{{4, {2048, 7168, 2048, 8}}, CHECK_FILL_NORMAL},
};

static const GpuSuite moe_suite = {moe_cases, COUNT(moe_cases), 0};

/* Later kgen arguments override earlier ones of the same name, so the
 * configurations above can say only what they change. */
static int
dedup_args(const char *const *in, const char **out)
{
	int n = 0;

	for (int i = 0; in[i] && in[i + 1]; i += 2) {
		int j;
		for (j = 0; j < n; j += 2)
			if (!strcmp(out[j], in[i]))
				break;
		out[j] = in[i];
		out[j + 1] = in[i + 1];
		if (j == n)
			n += 2;
	}
	return n;
}


static void
check_configs(KrtDevice *dev, const GpuSuite *st, const char *const (*cfgs)[MAX_CFG_ARGS],
              size_t ncfgs, const char *tag, GpuTally *t)
{
	for (size_t c = 0; c < ncfgs; c++) {
		const char *args[MAX_CFG_ARGS];
		char what[64], replay[1024] = "--gen gemm";
		char *ptx = NULL;
		size_t len = 0;
		KgErr kerr = {{0}};
		int n = dedup_args(cfgs[c], args);

		/* a MoE kernel replays through its own checker (kcheck --gen gemm_moe) */
		for (int i = 0; i < n; i += 2)
			if (!strcmp(args[i], "--moe") && strcmp(args[i + 1], "none"))
				snprintf(replay, sizeof replay, "--gen gemm_moe");
		for (int i = 0; i < n; i++)
			snprintf(replay + strlen(replay), sizeof replay - strlen(replay), " %s", args[i]);
		snprintf(what, sizeof what, "%sconfig %zu", tag, c);
		if (kgen_generate("gemm", n, args, &ptx, &len, &kerr)) {
			printf("FAIL  %s (%s): kgen: %s\n", what, replay, kerr.msg);
			t->run++;
			t->failed++;
			continue;
		}
		gpu_check_module(dev, st, ptx, len, what, replay, t);
		free(ptx);
	}
}


/* Some sm_100a gemm: generated, else the first emitted one. */
static int
sm100_module(const char *root, char **ptx, size_t *len)
{
	static const char *const args[] = {"--target", "sm_100a"};
	char pattern[4096];
	KgErr kerr = {{0}};
	KrtErr err = {0};
	glob_t g;
	int rc = -1;

	if (kgen_generate("gemm", 2, args, ptx, len, &kerr) == 0)
		return 0;
	printf("note: kgen gemm --target sm_100a: %s; trying emitted/\n", kerr.msg);
	snprintf(pattern, sizeof pattern, "%s/emitted/sm_100a/gemm*.ptx", root);
	if (glob(pattern, 0, NULL, &g) == 0) {
		rc = check_read_file(g.gl_pathv[0], ptx, len, &err) ? -1 : 0;
		globfree(&g);
	}
	return rc;
}

static void
check_refusal(KrtDevice *dev, const char *root, GpuTally *t)
{
	char *ptx = NULL;
	size_t len = 0;
	KrtModule *mod = NULL;
	KrtErr err = {0};

	t->run++;
	if (sm100_module(root, &ptx, &len)) {
		printf("FAIL  sm_100a refusal: no sm_100a gemm to try (kgen failed, emitted/ has none)\n");
		t->failed++;
		return;
	}
	int rc = krt_module_load(dev, ptx, len, &mod, &err);
	free(ptx);
	if (rc == KRT_EMISMATCH && strstr(err.msg, "sm_100") && strstr(err.msg, "sm_90")) {
		printf("PASS  sm_100a refused: %s\n", err.msg);
		return;
	}
	t->failed++;
	if (rc == 0) {
		printf("FAIL  sm_100a module loaded on an sm_%d device\n", krt_device_cc(dev));
		krt_module_unload(mod);
	} else
		printf("FAIL  sm_100a refusal: code %d (want KRT_EMISMATCH = %d) or a message without "
		       "both targets: %s\n", rc, KRT_EMISMATCH, err.msg);
}

int
main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : ".";
	KrtDevice *dev = NULL;
	GpuTally t = {.seed = check_seed_from_env()};
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((rc = check_open_sm90(&dev, t.seed)) != 0)
		return rc;
	check_configs(dev, &suite, configs, COUNT(configs), "", &t);
	check_configs(dev, &bs_suite, bs_configs, COUNT(bs_configs), "block-scaled ", &t);
	check_configs(dev, &moe_suite, moe_configs, COUNT(moe_configs), "moe ", &t);
	/* by input type: the block-scaled kernels need whole scale blocks of K */
	gpu_check_emitted(dev, &suite, root, "gemm_bf16", &t);
	gpu_check_emitted(dev, &suite, root, "gemm_fp16", &t);
	gpu_check_emitted(dev, &bs_suite, root, "gemm_e4m3", &t); /* MoE ones: E = 6 (check_moe.c) */
	check_refusal(dev, root, &t);
	krt_device_close(dev);
	printf("test_gemm_gpu: %d of %d passed (seed %llu)\n", t.run - t.failed, t.run,
	       (unsigned long long)t.seed);
	return t.failed ? 1 : 0;
}
