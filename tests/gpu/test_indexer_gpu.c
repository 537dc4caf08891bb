/* The gpu suite for the indexer: the configurations below, generated
 * in-process, and every emitted/sm_90a/indexer*.ptx file, checked on a GPU
 * against the float64 reference (tools/check_indexer.c,
 * tests/ref/indexer_ref.c) with a fresh seed. The checker scatters every
 * sequence's pages, draws odd lengths (one sequence shorter than s_q, one
 * shorter than top-k), ties keys (most of them under the edge fill) and
 * compares the logits per key and the index lists as sets.
 *
 *   test_indexer_gpu SOURCE_ROOT
 *
 * Exit 0 all pass, 1 any failure, 77 no sm_90 GPU (meson: skipped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "suite.h"

enum { EXIT_SKIP = 77 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* batch x s_q x max_len x full x splits (tools/check_indexer.c; max_len 0:
 * 2·topk + 37; splits > 1: several CTAs per row, each selecting its
 * part's top-k, the last merging them): next_n (s_q) 1 to 4, odd lengths,
 * splits 1, 2, 4, 5, 8 and 24 (a merge of several rounds from top-k 171
 * up; docs/indexer.md, "Fused top-k"); parts longer than the scoring
 * keeps for the select's first round (2·win keys; then more rounds) at
 * 20001, 5001 and 9001 keys (two parts of 4501 below top-k 2048) */
static const GpuCase cases[] = {
	{{3, {1, 1, 0}}, CHECK_FILL_NORMAL},
	{{3, {3, 2, 0}}, CHECK_FILL_EDGE},
	{{3, {5, 4, 777}}, CHECK_FILL_NORMAL},
	{{3, {33, 1, 5001}}, CHECK_FILL_NORMAL},
	{{3, {7, 3, 4099}}, CHECK_FILL_EDGE},
	{{3, {4, 2, 20001}}, CHECK_FILL_NORMAL},
	{{5, {6, 2, 3001, 0, 5}}, CHECK_FILL_EDGE},
	{{5, {16, 1, 16384, 1, 8}}, CHECK_FILL_NORMAL},
	{{5, {4, 2, 9001, 0, 2}}, CHECK_FILL_EDGE},
	{{5, {8, 1, 12345, 1, 4}}, CHECK_FILL_NORMAL},
	{{5, {3, 1, 20001, 1, 24}}, CHECK_FILL_EDGE},
};

static const GpuSuite suite = {cases, COUNT(cases), 0};

/* Heads 1..128, top-k 1 .. 2048 and 0 (the logits alone), every page size
 * (32 and 128 with every format and both scorings), every format, both
 * scorings. */
static const char *const configs[][10] = {
	{"--heads", "64", "--topk", "2048", "--page-size", "128"},
	{"--heads", "8", "--topk", "100", "--page-size", "16"},
	{"--heads", "1", "--topk", "1", "--page-size", "32"},
	{"--heads", "128", "--topk", "333", "--page-size", "64"},
	{"--format", "fp4", "--heads", "64", "--topk", "512", "--page-size", "32"},
	{"--format", "fp4", "--heads", "9", "--topk", "1024", "--page-size", "128"},
	{"--format", "nvfp4", "--heads", "64", "--topk", "512", "--page-size", "64"},
	{"--format", "nvfp4", "--heads", "17", "--topk", "2048", "--page-size", "32"},
	{"--score", "wgmma", "--heads", "64", "--topk", "512", "--page-size", "16"},
	{"--score", "wgmma", "--heads", "37", "--topk", "2048", "--page-size", "128"},
	{"--score", "wgmma", "--heads", "64", "--topk", "1024", "--page-size", "32"},
	{"--score", "wgmma", "--heads", "19", "--topk", "0", "--page-size", "128"},
	{"--heads", "33", "--topk", "0", "--page-size", "16"},
};

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
	for (size_t i = 0; i < COUNT(configs) && !t.dead; i++)
		gpu_check_config(dev, &t, "indexer", &suite, configs[i]);
	gpu_check_emitted(dev, &suite, root, "indexer", &t);
	krt_device_close(dev);
	printf("test_indexer_gpu: %d of %d passed over %d kernels (seed %llu)\n", t.run - t.failed, t.run,
	       t.modules, (unsigned long long)t.seed);
	if (t.run == 0)
		return EXIT_SKIP;
	return t.failed ? 1 : 0;
}
