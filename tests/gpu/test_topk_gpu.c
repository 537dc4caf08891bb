/* The gpu suite for the standalone top-k: the configurations below,
 * generated in-process, and every emitted/sm_90a/topk*.ptx file, checked
 * on a GPU against the exact reference (tools/check_topk.c,
 * tests/ref/indexer_ref.c's set comparison) with a fresh seed: fewer
 * logits than k (padding), one chunk, a last chunk of fewer than k logits,
 * odd lengths, the 64 x 262144, and rows whose candidates take
 * several merge rounds; ties at the k-th value (most logits under the edge
 * fill) and, in even rows of the normal fill, the k-th value's top 24
 * bits shared by dozens.
 *
 *   test_topk_gpu SOURCE_ROOT
 *
 * Exit 0 all pass, 1 any failure, 77 no sm_90 GPU (meson: skipped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "suite.h"

enum { EXIT_SKIP = 77 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* rows x n */
static const GpuCase cases[] = {
	{{2, {3, 77}}, CHECK_FILL_NORMAL},
	{{2, {5, 16384}}, CHECK_FILL_EDGE},
	{{2, {4, 2 * 16384 + 100}}, CHECK_FILL_NORMAL},
	{{2, {7, 100003}}, CHECK_FILL_EDGE},
	{{2, {64, 262144}}, CHECK_FILL_NORMAL},
	{{2, {2, 600001}}, CHECK_FILL_NORMAL},
	{{2, {3, 1048573}}, CHECK_FILL_EDGE},
};

static const GpuSuite suite = {cases, COUNT(cases), 0};

/* k from 1 to 2048, odd ones included */
static const char *const configs[][4] = {
	{"--topk", "1"},
	{"--topk", "100"},
	{"--topk", "333"},
	{"--topk", "2047"},
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
		gpu_check_config(dev, &t, "topk", &suite, configs[i]);
	gpu_check_emitted(dev, &suite, root, "topk", &t);
	krt_device_close(dev);
	printf("test_topk_gpu: %d of %d passed over %d kernels (seed %llu)\n", t.run - t.failed, t.run, t.modules,
	       (unsigned long long)t.seed);
	if (t.run == 0)
		return EXIT_SKIP;
	return t.failed ? 1 : 0;
}
