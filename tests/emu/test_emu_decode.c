/* Decode on both targets beyond the emitted configurations: generated in
 * process at the shapes emitted/ does not hold (one head, partial head
 * blocks, page sizes 1, 2 and 61, top-k not a multiple of the 64-key
 * tile, an extra source, sink, topk_length, unnormalized output) and run on the emulator
 * against the float64 reference (tools/check_decode.c: -1, out-of-range
 * and duplicate indices, pages in random order, a first row that skips
 * every key), with and without split-KV. Exit 0 when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"
#include "gen/kgen.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const configs[][16] = {
	{"--heads-q", "1", "--topk", "77", "--page-size", "61"},
	{"--heads-q", "16", "--topk", "100", "--page-size", "1", "--sink", "1", "--topk-length", "1"},
	{"--heads-q", "100", "--topk", "65", "--page-size", "2", "--topk-extra", "33", "--page-size-extra", "3",
	 "--sink", "1"},
	/* unnormalized O (f32) and M, checked as O·e^(M - LSE); split-KV does not apply */
	{"--heads-q", "64", "--topk", "130", "--page-size", "61", "--topk-extra", "64", "--page-size-extra", "256",
	 "--unnormalized", "1", "--topk-length", "1"},
	{"--format", "bf16", "--addressing", "paged", "--heads-q", "100", "--page-size", "2", "--unnormalized", "1"},
};

/* batch, s_q, split-KV parts: s_q 1, 2 and 4 (multi-token prediction) */
static const uint32_t shapes[][3] = {
	{3, 2, 1},
	{2, 1, 3},
	{1, 4, 2},
};

static int
run_config(const char *target, const char *const *cfg)
{
	const char *args[20] = {"--target", target};
	char what[256];
	int n = 2, fails = 0;
	char *ptx = NULL;
	size_t len = 0;
	KgErr kerr = {{0}};
	KrtErr err;
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;

	memset(&err, 0, sizeof err);
	snprintf(what, sizeof what, "%s", target);
	for (int i = 0; i < 16 && cfg[i]; i++) {
		args[n++] = cfg[i];
		snprintf(what + strlen(what), sizeof what - strlen(what), " %s", cfg[i]);
	}
	if (kgen_generate("decode", n, args, &ptx, &len, &kerr)) {
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
		int rc = et_decode(dev, mod, shapes[i][0], shapes[i][1], shapes[i][2], 4000 + i, &f);
		if (rc < 0) {
			printf("FAIL %s, batch %u s_q %u splits %u: %s\n", what, shapes[i][0], shapes[i][1], shapes[i][2],
			       f.err.msg);
			fails++;
		} else if (rc > 0) {
			printf("FAIL %s, batch %u s_q %u splits %u: %llu elements over tolerance %.0e, max rel err %.3g; first: %s\n",
			       what, shapes[i][0], shapes[i][1], shapes[i][2], (unsigned long long)f.bad, f.tol, f.max_err,
			       f.first_bad);
			fails++;
		} else {
			printf("ok   %s, batch %u s_q %u splits %u: max rel err %.3g (tol %.0e), LSE err %.3g\n", what,
			       shapes[i][0], shapes[i][1], shapes[i][2], f.max_err, f.tol, f.lse_err);
		}
	}
	krt_module_unload(mod);
	krt_device_close(dev);
	return fails;
}

/* The split-KV combine's waiting path (docs/ABI.md "decode"; sm_90a, the
 * target that takes it, gen/decode.h combine_wait): the emulator runs CTAs
 * one after another unless they are co-resident, so a part never finds the
 * others started and waiting. Here KRT_EMU_CORESIDENT runs each group of
 * `splits` CTAs along x (every part of a query row) interleaved, each
 * still a cluster of one to the kernel: each claims a slice, waits for the
 * others' counts and combines it, and the race checks see the parts'
 * O_partial stores beside the other parts' reads, ordered only by the
 * counter's release and acquire. (A cluster would also interleave them,
 * but in a cluster every CTA's shared addresses carry its rank, which
 * this kernel, launched without clusters, need not drop from its
 * descriptors: docs/hardware.md, "Shared addresses in a cluster".) */
static int
run_coresident(const char *target, const char *const *cfg, uint32_t splits)
{
	const char *args[20] = {"--target", target};
	char what[256] = "", group[16];
	int n = 2, fails = 0;
	char *ptx = NULL;
	size_t len = 0;
	KgErr kerr = {{0}};
	KrtErr err;
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;
	EtFmha f = {.keep = 0};

	memset(&err, 0, sizeof err);
	for (int i = 0; i < 16 && cfg[i]; i++) {
		args[n++] = cfg[i];
		snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", i ? " " : "", cfg[i]);
	}
	if (kgen_generate("decode", n, args, &ptx, &len, &kerr)) {
		printf("FAIL %s %s: kgen refuses: %s\n", target, what, kerr.msg);
		return 1;
	}
	if (et_open_for(target, &dev, &err) || krt_module_load(dev, ptx, len, &mod, &err)) {
		printf("FAIL %s %s: %s\n", target, what, err.msg);
		free(ptx);
		krt_device_close(dev);
		return 1;
	}
	free(ptx);
	snprintf(group, sizeof group, "%u", splits);
	setenv("KRT_EMU_CORESIDENT", group, 1);
	int rc = et_decode(dev, mod, 2, 1, splits, 4100 + splits, &f);
	unsetenv("KRT_EMU_CORESIDENT");
	if (rc < 0)
		printf("FAIL %s %s, batch 2 splits %u co-resident: %s\n", target, what, splits, f.err.msg);
	else if (rc > 0)
		printf("FAIL %s %s, batch 2 splits %u co-resident: %llu elements over tolerance %.0e, max rel err %.3g; first: %s\n",
		       target, what, splits, (unsigned long long)f.bad, f.tol, f.max_err, f.first_bad);
	else
		printf("ok   %s %s, batch 2 splits %u co-resident: max rel err %.3g (tol %.0e), LSE err %.3g\n", target,
		       what, splits, f.max_err, f.tol, f.lse_err);
	fails += rc != 0;
	krt_module_unload(mod);
	krt_device_close(dev);
	return fails;
}

int
main(void)
{
	int fails = 0;
	static const char *const waits[16] = {"--heads-q", "16", "--topk", "100", "--page-size", "1", "--sink", "1"};

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < COUNT(configs); i++) {
		fails += run_config("sm_100a", configs[i]) != 0;
		fails += run_config("sm_90a", configs[i]) != 0;
	}
	fails += run_coresident("sm_90a", waits, 3) != 0;
	printf("test_emu_decode: %d of %zu configurations failed\n", fails, 2 * COUNT(configs) + 1);
	return fails ? 1 : 0;
}
