/* The indexer beyond the emitted configurations (emitted/ holds page 64
 * only): generated in process at page sizes 32 and 128 (and 16), every
 * key format and every scoring of both targets, and run on the emulator against the
 * float64 reference (tools/check_indexer.c: scattered pages in random
 * order, odd lengths, one sequence shorter than s_q and one shorter than
 * top-k, the edge fill's ties) at next_n (s_q) 1, 2, 3 and 4, with one CTA
 * per query row and with several, parts longer than the top-k's window
 * and merges of several rounds. Exit 0 when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"
#include "gen/kgen.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const configs[][12] = {
	{"--heads", "8", "--topk", "100", "--page-size", "32"},
	{"--target", "sm_100a", "--score", "tcgen05", "--heads", "64", "--topk", "100", "--page-size", "128"},
	{"--target", "sm_100a", "--score", "tcgen05", "--heads", "21", "--topk", "300", "--page-size", "32"},
	{"--target", "sm_100a", "--format", "nvfp4", "--heads", "6", "--topk", "100", "--page-size", "128"},
	/* FP4 keys on the block-scaled tcgen05 kind: a partial head block, page 32 */
	{"--target", "sm_100a", "--score", "tcgen05", "--format", "fp4", "--heads", "37", "--topk", "200", "--page-size", "32"},
	{"--format", "fp4", "--heads", "5", "--topk", "77", "--page-size", "128"},
	{"--format", "nvfp4", "--heads", "8", "--topk", "100", "--page-size", "32"},
	{"--format", "nvfp4", "--heads", "3", "--topk", "64", "--page-size", "128"},
	{"--score", "wgmma", "--heads", "64", "--topk", "100", "--page-size", "128"},
	{"--score", "wgmma", "--heads", "13", "--topk", "33", "--page-size", "32"},
	{"--format", "fp4", "--heads", "4", "--topk", "50", "--page-size", "16"},
	/* FP4 keys turned into E4M3 for the FP8 wgmma: all 64 heads, and a
	 * partial head block at page 32 */
	{"--score", "wgmma", "--format", "fp4", "--heads", "64", "--topk", "100", "--page-size", "128"},
	{"--score", "wgmma", "--format", "fp4", "--heads", "19", "--topk", "40", "--page-size", "32"},
	/* the logits alone (--topk 0): each scoring, split rows filling their own -inf */
	{"--heads", "8", "--topk", "0", "--page-size", "16"},
	{"--target", "sm_100a", "--score", "tcgen05", "--heads", "21", "--topk", "0", "--page-size", "32"},
	{"--score", "wgmma", "--format", "fp4", "--heads", "13", "--topk", "0", "--page-size", "128"},
};

/* batch, s_q (next_n), max_len (0: 2·topk + 37), CTAs per query row;
 * the last three: a part longer than the scoring keeps for the fused
 * top-k's first round (4096 keys here: then rounds over the windows,
 * docs/indexer.md, "Fused top-k") alone and split in two, and 70 parts,
 * most of them empty (padded candidates), whose candidates take two
 * merge rounds at top-k 64 and up */
static const uint32_t shapes[][4] = {
	{3, 1, 0, 1},
	{2, 2, 301, 2},
	{4, 3, 0, 1},
	{3, 4, 333, 3},
	{1, 2, 5003, 1},
	{2, 1, 8501, 2},
	{2, 1, 1200, 70},
};

static int
run_config(const char *const *cfg)
{
	const char *args[16] = {"--target", "sm_90a"};
	const char *target = "sm_90a";
	char what[256] = "";
	int n = 2, fails = 0;
	char *ptx = NULL;
	size_t len = 0;
	KgErr kerr = {{0}};
	KrtErr err;
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;

	memset(&err, 0, sizeof err);
	for (int i = 0; i < 12 && cfg[i]; i++) {
		if (i > 0 && strcmp(cfg[i - 1], "--target") == 0)
			target = cfg[i];
		args[n++] = cfg[i];
		snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", i ? " " : "", cfg[i]);
	}
	if (kgen_generate("indexer", n, args, &ptx, &len, &kerr)) {
		printf("FAIL %s: kgen refuses: %s\n", what, kerr.msg);
		return 1;
	}
	if (et_open_for(target, &dev, &err) || krt_module_load(dev, ptx, len, &mod, &err)) {
		printf("FAIL %s: %s\n", what, err.msg);
		free(ptx);
		krt_device_close(dev);
		return 1;
	}
	free(ptx);
	for (size_t i = 0; i < COUNT(shapes); i++) {
		EtFmha f = {.keep = 0};
		const uint32_t *d = shapes[i];
		int rc = et_indexer(dev, mod, d[0], d[1], d[2], d[3], 6000 + i, 1, &f);
		if (rc < 0) {
			printf("FAIL %s, batch %u s_q %u max_len %u splits %u: %s\n", what, d[0], d[1], d[2], d[3], f.err.msg);
			fails++;
		} else if (rc > 0) {
			printf("FAIL %s, batch %u s_q %u max_len %u splits %u: %llu elements over tolerance %.0e, max rel err %.3g; first: %s\n",
			       what, d[0], d[1], d[2], d[3], (unsigned long long)f.bad, f.tol, f.max_err, f.first_bad);
			fails++;
		} else {
			printf("ok   %s, batch %u s_q %u max_len %u splits %u: max rel err %.3g (tol %.0e)\n", what, d[0], d[1],
			       d[2], d[3], f.max_err, f.tol);
		}
	}
	krt_module_unload(mod);
	krt_device_close(dev);
	return fails;
}

int
main(void)
{
	int fails = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < COUNT(configs); i++)
		fails += run_config(configs[i]) != 0;
	printf("test_emu_indexer: %d of %zu configurations failed\n", fails, COUNT(configs));
	return fails ? 1 : 0;
}
