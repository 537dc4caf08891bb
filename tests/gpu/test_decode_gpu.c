/* The gpu suite for decode: the configurations below, generated
 * in-process, and every emitted/sm_90a/decode*.ptx file (decode_merge
 * among them, on its own shapes), checked on a GPU
 * against the float64 reference (tools/check_decode.c, tests/ref/decode_ref.c)
 * with a fresh seed. The checker builds real caches of each format and index lists
 * with -1, out-of-range and duplicate entries, pages in random order,
 * lengths below top-k and a first row that skips everything; paged
 * sources get block tables in random page order.
 *
 *   test_decode_gpu SOURCE_ROOT [generated|emitted]
 *
 * generated: only the configurations below; emitted: only emitted/ (meson
 * runs the halves as two tests, side by side: the float64 references take
 * most of the time, on the host's cores). Both without the argument.
 *
 * Exit 0 all pass, 1 any failure, 77 no sm_90 GPU (meson: skipped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "suite.h"

enum { EXIT_SKIP = 77 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* batch x s_q x pages x pages_extra x full x splits (tools/check_decode.c) */
static const GpuCase cases[] = {
	{{5, {1, 1, 0, 0}}, CHECK_FILL_NORMAL},
	{{5, {3, 2, 0, 0}}, CHECK_FILL_NORMAL},
	{{5, {2, 1, 3, 2}}, CHECK_FILL_NORMAL},
	{{5, {7, 2, 0, 0}}, CHECK_FILL_NORMAL},
	{{5, {33, 1, 0, 0}}, CHECK_FILL_NORMAL},
	{{5, {16, 2, 0, 0, 1}}, CHECK_FILL_NORMAL},
	/* split-KV: the parts combine slices of the heads */
	{{6, {3, 2, 0, 0, 0, 2}}, CHECK_FILL_NORMAL},
	{{6, {1, 1, 0, 0, 1, 7}}, CHECK_FILL_NORMAL},
	{{6, {4, 1, 0, 0, 0, 16}}, CHECK_FILL_NORMAL},
	/* s_q 3 and 4 (multi-token prediction), with and without split-KV */
	{{5, {3, 3, 0, 0}}, CHECK_FILL_NORMAL},
	{{5, {2, 4, 0, 0}}, CHECK_FILL_NORMAL},
	{{6, {2, 4, 0, 0, 0, 3}}, CHECK_FILL_NORMAL},
};

static const GpuSuite suite = {cases, COUNT(cases), 0};

/* decode_merge: batch x s_q x parts (tools/check_decode_merge.c) */
static const GpuCase merge_cases[] = {
	{{3, {1, 1, 1}}, CHECK_FILL_NORMAL},
	{{3, {7, 2, 2}}, CHECK_FILL_NORMAL},
	{{3, {33, 1, 5}}, CHECK_FILL_NORMAL},
	{{3, {2, 3, 70}}, CHECK_FILL_NORMAL},
};

static const GpuSuite merge_suite = {merge_cases, COUNT(merge_cases), 0};

/* Page sizes 1, 2, 61, 64, 256; heads 8..128 (a partial head block);
 * with and without sink, lengths, an extra source; every cache format
 * at both head_dim_qk it stores (docs/ABI.md, "Cache formats"). */
static const char *const configs[][20] = {
	{"--heads-q", "64", "--topk", "64", "--page-size", "64"},
	{"--heads-q", "8", "--topk", "100", "--page-size", "1", "--sink", "1"},
	{"--heads-q", "16", "--topk", "96", "--page-size", "2", "--topk-length", "1"},
	{"--heads-q", "128", "--topk", "200", "--page-size", "61", "--topk-extra", "64", "--page-size-extra", "256", "--sink", "1"},
	{"--heads-q", "100", "--topk", "512", "--page-size", "256", "--topk-extra", "128", "--page-size-extra", "2", "--topk-length", "1"},
	{"--heads-q", "32", "--topk", "2048", "--page-size", "64", "--topk-extra", "128", "--page-size-extra", "256", "--sink", "1", "--topk-length", "1"},
	{"--format", "fp8-v32", "--heads-q", "128", "--topk", "2048", "--page-size", "64", "--sink", "1"},
	{"--format", "fp8-v32", "--heads-q", "16", "--topk", "100", "--page-size", "1", "--topk-extra", "64", "--page-size-extra", "61", "--topk-length", "1"},
	{"--format", "fp8-token", "--heads-q", "64", "--topk", "512", "--page-size", "2", "--sink", "1"},
	{"--format", "fp8-token", "--head-dim-qk", "576", "--heads-q", "100", "--topk", "200", "--page-size", "61", "--topk-extra", "128", "--page-size-extra", "256"},
	{"--format", "bf16", "--heads-q", "8", "--topk", "64", "--page-size", "256", "--topk-length", "1"},
	{"--format", "bf16", "--head-dim-qk", "576", "--heads-q", "128", "--topk", "512", "--page-size", "64", "--topk-extra", "128", "--page-size-extra", "2", "--sink", "1"},
	/* paged sources: block tables in random page order, lengths past the
	 * table (clamped), out-of-range entries (zero keys) */
	{"--format", "fp8-token", "--addressing", "paged", "--heads-q", "64", "--page-size", "1"},
	{"--addressing-extra", "paged", "--heads-q", "128", "--topk", "512", "--page-size", "64", "--page-size-extra", "256", "--sink", "1", "--topk-length", "1"},
	{"--format", "bf16", "--head-dim-qk", "576", "--addressing", "paged", "--heads-q", "16", "--page-size", "61", "--topk-extra", "64", "--page-size-extra", "2"},
	{"--format", "fp8-v32", "--addressing", "paged", "--addressing-extra", "paged", "--heads-q", "128", "--page-size", "256", "--page-size-extra", "64", "--sink", "1"},
	/* unnormalized O (f32) and M: checked as O·e^(M - LSE) */
	{"--heads-q", "64", "--topk", "512", "--page-size", "64", "--unnormalized", "1", "--topk-length", "1"},
	{"--format", "bf16", "--addressing", "paged", "--heads-q", "100", "--page-size", "2", "--unnormalized", "1"},
};

/* decode_merge configurations: heads 1..128, with and without sink */
static const char *const merge_configs[][8] = {
	{"--heads-q", "64", "--sink", "1"},
	{"--heads-q", "100"},
	{"--heads-q", "1", "--sink", "1"},
	{"--heads-q", "128"},
};

int
main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : ".";
	const char *part = argc > 2 ? argv[2] : "all";
	int gen = strcmp(part, "emitted") != 0, emitted = strcmp(part, "generated") != 0;
	KrtDevice *dev = NULL;
	GpuTally t = {.seed = check_seed_from_env()};
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (gen == emitted && strcmp(part, "all")) {
		fprintf(stderr, "test_decode_gpu: part '%s': generated, emitted or none (both)\n", part);
		return 2;
	}
	if ((rc = check_open_sm90(&dev, t.seed)) != 0)
		return rc;
	for (size_t i = 0; gen && i < COUNT(configs) && !t.dead; i++)
		gpu_check_config(dev, &t, "decode", &suite, configs[i]);
	for (size_t i = 0; gen && i < COUNT(merge_configs) && !t.dead; i++)
		gpu_check_config(dev, &t, "decode_merge", &merge_suite, merge_configs[i]);
	/* the attention kernels by format prefix; the merges on their own shapes */
	if (emitted) {
		gpu_check_emitted(dev, &suite, root, "decode_bf16", &t);
		gpu_check_emitted(dev, &suite, root, "decode_fp8", &t);
		gpu_check_emitted(dev, &merge_suite, root, "decode_merge", &t);
	}
	krt_device_close(dev);
	printf("test_decode_gpu: %d of %d passed over %d kernels (seed %llu)\n", t.run - t.failed, t.run,
	       t.modules, (unsigned long long)t.seed);
	if (t.run == 0)
		return EXIT_SKIP;
	return t.failed ? 1 : 0;
}
