/* The gpu suite for fmha: every configuration below, generated in-process,
 * and every emitted/sm_90a/fmha*.ptx file, checked on a GPU against the
 * float64 reference (tools/check_fmha.c, tests/ref/fmha_ref.c) with a fresh
 * seed each run (printed; KGEN_TEST_SEED fixes it).
 *
 * Configurations: head dims 64, 128, 256, 512 x mask none, causal, window x
 * (heads_q, heads_kv) (4,4) MHA, (8,2) GQA, (8,1) MQA x kv-shared off, on;
 * GQA and MQA also with query heads packed into the Q tile (GQA 2 heads
 * per Q tile, so two or three Q tiles per CTA take head blocks; MQA 8, one
 * Q tile of 8 query rows x 8 heads); LSE always on, so every case checks
 * it too. A configuration kgen refuses
 * (hd 512 where the generator stops at 256, or any until the fmha family
 * exists) is printed with kgen's message and skipped, not failed.
 *
 * Shapes (batch x seqlen_q x seqlen_k x varlen, check_fmha.c): decode with
 * seqlen_q 1..7 over 1..300 keys, lengths that are not tile multiples with
 * sq < sk and sq > sk (causal rows with no visible key), varlen with random
 * lengths and with empty sequences, one larger square shape.
 *
 *   test_fmha_gpu SOURCE_ROOT
 *
 * Exit status: 0 all passed, 1 a failure, 77 no GPU, not an sm_90 GPU, or
 * nothing to run (kgen refused every configuration and emitted/ has no
 * fmha file) (meson: skipped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "suite.h"

enum { EXIT_SKIP = 77, MAX_CFG_ARGS = 24 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The configuration axes; every combination runs. */
static const char *const head_dims[] = {"64", "128", "256", "512"};
static const char *const masks[] = {"none", "causal", "window"}; /* window: kgen's default extents, 128 left, 0 right */
/* Columns: heads-q, heads-kv, the --pack-heads of the packed variant (NULL: none). */
static const char *const heads[][3] = {{"4", "4", NULL}, {"8", "2", "2"}, {"8", "1", "8"}};
static const char *const kv_shared[] = {"0", "1"};

static const GpuCase cases[] = {
	/* decode: seqlen_q 1..7 */
	{{4, {3, 1, 1, 0}}, CHECK_FILL_NORMAL},
	{{4, {2, 2, 37, 0}}, CHECK_FILL_NORMAL},
	{{4, {4, 3, 128, 0}}, CHECK_FILL_NORMAL},
	{{4, {1, 4, 255, 0}}, CHECK_FILL_NORMAL},
	{{4, {3, 5, 300, 0}}, CHECK_FILL_EDGE},
	{{4, {2, 6, 64, 0}}, CHECK_FILL_NORMAL},
	{{4, {5, 7, 129, 0}}, CHECK_FILL_NORMAL},
	{{4, {6, 7, 300, 1}}, CHECK_FILL_NORMAL},
	/* tails: sq < sk, sq > sk */
	{{4, {1, 77, 300, 0}}, CHECK_FILL_NORMAL},
	{{4, {2, 129, 255, 0}}, CHECK_FILL_NORMAL},
	{{4, {2, 129, 255, 0}}, CHECK_FILL_EDGE},
	{{4, {2, 300, 77, 0}}, CHECK_FILL_NORMAL},
	/* varlen: random lengths; with empty sequences */
	{{4, {5, 200, 300, 1}}, CHECK_FILL_NORMAL},
	{{4, {6, 129, 257, 2}}, CHECK_FILL_NORMAL},
	{{4, {6, 129, 257, 2}}, CHECK_FILL_EDGE},
	/* larger, square: several KV tiles and query tiles per sequence */
	{{4, {2, 1000, 1000, 0}}, CHECK_FILL_NORMAL},
};

/* a row subset past 2^31 multiply-adds keeps hd 512 fast */
static const GpuSuite suite = {cases, COUNT(cases), UINT64_C(1) << 31};

/* One configuration, unpacked or with heads[h][2] heads packed per Q tile. */
static void
check_config(KrtDevice *dev, GpuTally *t, size_t d, size_t m, size_t h, size_t s, int packed)
{
	const char *args[MAX_CFG_ARGS] = {
		"--target", "sm_90a", "--head-dim", head_dims[d], "--heads-q", heads[h][0],
		"--heads-kv", heads[h][1], "--mask", masks[m], "--kv-shared", kv_shared[s],
		"--lse", "1", "--pack-heads", packed ? heads[h][2] : "1",
	};
	int n = 16;
	char replay[1024] = "--gen fmha", what[96];
	char *ptx = NULL;
	size_t len = 0;
	KgErr kerr = {{0}};
	int rc = kgen_generate("fmha", n, args, &ptx, &len, &kerr);

	for (int i = 0; i < n; i++)
		snprintf(replay + strlen(replay), sizeof replay - strlen(replay), " %s", args[i]);
	snprintf(what, sizeof what, "hd %s %s %s/%s kv-shared %s pack %s", head_dims[d], masks[m],
	         heads[h][0], heads[h][1], kv_shared[s], args[15]);
	if (rc) {
		printf("skip  %s: kgen refuses: %s\n", what, kerr.msg);
		t->refused++;
		return;
	}
	gpu_check_module(dev, &suite, ptx, len, what, replay, t);
	free(ptx);
}

static void
check_configs(KrtDevice *dev, GpuTally *t)
{
	for (size_t d = 0; d < COUNT(head_dims); d++)
		for (size_t m = 0; m < COUNT(masks); m++)
			for (size_t h = 0; h < COUNT(heads); h++)
				for (size_t s = 0; s < COUNT(kv_shared) && !t->dead; s++) {
					check_config(dev, t, d, m, h, s, 0);
					if (heads[h][2] && !t->dead)
						check_config(dev, t, d, m, h, s, 1);
				}
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
	check_configs(dev, &t);
	gpu_check_emitted(dev, &suite, root, "fmha", &t);
	krt_device_close(dev);
	printf("test_fmha_gpu: %d of %d passed over %d kernels; %d configurations refused by kgen "
	       "(seed %llu)\n", t.run - t.failed, t.run, t.modules, t.refused,
	       (unsigned long long)t.seed);
	if (t.run == 0) {
		printf("skipped: nothing ran (kgen generated no fmha kernel and emitted/sm_90a has "
		       "none)\n");
		return EXIT_SKIP;
	}
	return t.failed ? 1 : 0;
}
