/* Every emitted kernel (emitted/TARGET/NAME.ptx) on the emulator at small
 * shapes with tails, against a float64 reference, with no hazard. The three
 * small shapes run under the schedules KRT_EMU_SEED=1, 2 and 3; a fourth,
 * long shape (K, or the keys, span every pipeline stage twice and a tail:
 * each ring wraps twice) runs under the default schedule, in which async
 * work completes as late as the PTX memory model allows. One
 * runner per kernel family (gemm, fmha, decode, indexer); a family without one fails, so a
 * new family cannot slip past the emulator unnoticed.
 *
 *   test_emu_emitted SRC_ROOT [FILE.ptx ...]
 *
 * With files, runs only those. Exit 0 when all pass, 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu_test.h"

static const uint32_t gemm_shapes[][3] = {
	{1, 1, 8},
	{130, 70, 72},
	{200, 300, 136},
};

/* gemm_moe: M (all rows, or a slab's), N, K, E: a single row, odd sizes
 * with empty and one-row experts, more experts than a warp's 32 */
static const uint32_t moe_shapes[][4] = {
	{1, 136, 128, 2},
	{131, 200, 128, 5},
	{77, 128, 128, 40},
};

/* batch, then the query and key lengths of each sequence: a single token,
 * varlen with a sequence longer on the query side (causal rows that see no
 * key), and tails of the 128-row / KV tiles */
static const EtFmhaShape fmha_shapes[] = {
	{1, {1}, {1}},
	{2, {70, 130}, {100, 77}},
	{1, {200}, {300}},
};

/* decode: batch x s_q x split-KV parts (the checker draws the caches and indices; the first
 * row skips every key); s_q 1 to 4 (multi-token prediction) */
static const uint32_t decode_shapes[][3] = {
	{1, 1, 1},
	{1, 3, 1},
	{2, 1, 3},
};
/* the long decode shape: a row of top-k keys wraps the 2-stage ring */
static const uint32_t long_decode[3] = {1, 4, 1};

/* indexer: batch x s_q x max_len (0: 2·topk + 37 keys: sequence 0's rows
 * take the radix select, the others mostly see fewer keys than top-k) x
 * splits (CTAs per row, the last selecting) */
static const uint32_t indexer_shapes[][4] = {
	{1, 1, 0, 1},
	{3, 2, 77, 2},
	{2, 3, 0, 1},
};
/* the long indexer shape: more keys than the scoring keeps for the fused
 * top-k's first round (2·win: 8192 at top-k 2048, else 4096), so the
 * select takes a second round over a window (docs/indexer.md, "Fused
 * top-k") */
static const uint32_t long_indexer[4] = {1, 1, 8300, 1};

/* topk: rows x n (fewer logits than k; one chunk; a last chunk of fewer
 * than k logits, so a merge over padded candidates) */
static const uint32_t topk_shapes[][2] = {
	{3, 77},
	{2, 3001},
	{2, 2 * 16384 + 100},
};
/* the long topk shape: 18 chunks, whose candidates (18·k) take more than
 * one merge window of 8192 at every k: two rounds or more */
static const uint32_t long_topk[2] = {1, 17 * 16384 + 7};

/* Tile and stage counts from the kernel name (..._m128n96_s4_... for fmha,
 * ..._m128n112k64_s3_... for gemm). */
static int
name_tiles(const char *kernel, int gemm, unsigned *n, unsigned *k, unsigned *s)
{
	const char *m = strstr(kernel, "_m");
	unsigned mm;
	*k = 0;
	for (; m; m = strstr(m + 1, "_m")) {
		if (gemm && sscanf(m, "_m%un%uk%u_s%u", &mm, n, k, s) == 4)
			return 0;
		if (!gemm && sscanf(m, "_m%un%u_s%u", &mm, n, s) == 3)
			return 0;
	}
	return -1;
}

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int
run_file(const char *path)
{
	size_t len;
	char *ptx = et_read(path, &len);
	if (!ptx)
		return 1;
	KrtErr err;
	KrtAbi abi;
	if (krt_abi_parse(ptx, len, &abi, &err)) {
		printf("FAIL %s: %s\n", path, err.msg);
		free(ptx);
		return 1;
	}
	int moe = strcmp(abi.family, "gemm_moe") == 0;
	int gemm = strcmp(abi.family, "gemm") == 0 || moe, fmha = strcmp(abi.family, "fmha") == 0;
	int decode = strcmp(abi.family, "decode") == 0 || strcmp(abi.family, "decode_merge") == 0;
	int indexer = strcmp(abi.family, "indexer") == 0, topk = strcmp(abi.family, "topk") == 0;
	if (!gemm && !fmha && !decode && !indexer && !topk) {
		printf("FAIL %s: family %s has no runner in test_emu_emitted.c\n", path, abi.family);
		free(ptx);
		return 1;
	}
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;
	int fails = 0;
	if (et_open_for(abi.target, &dev, &err) || krt_module_load(dev, ptx, len, &mod, &err)) {
		printf("FAIL %s: %s\n", path, err.msg);
		free(ptx);
		krt_device_close(dev);
		return 1;
	}
	free(ptx);
	size_t nshapes = moe      ? sizeof moe_shapes / sizeof moe_shapes[0]
	                 : gemm   ? sizeof gemm_shapes / sizeof gemm_shapes[0]
	                 : decode ? sizeof decode_shapes / sizeof decode_shapes[0]
	                 : indexer ? sizeof indexer_shapes / sizeof indexer_shapes[0]
	                 : topk ? sizeof topk_shapes / sizeof topk_shapes[0]
	                          : sizeof fmha_shapes / sizeof fmha_shapes[0];
	unsigned tn = 0, tk = 0, ts = 0;
	if (!decode && !indexer && !topk && name_tiles(abi.kernel, gemm, &tn, &tk, &ts)) {
		printf("FAIL %s: no _mMnN[kK]_sS tile and stage counts in the kernel name\n", abi.kernel);
		krt_module_unload(mod);
		krt_device_close(dev);
		return 1;
	}
	uint32_t long_gemm[3] = {70, 40, 2 * ts * tk + 8};
	EtFmhaShape long_fmha = {1, {64}, {2 * ts * tn + 17}};
	for (size_t i = 0; i <= nshapes; i++) {
		char shape[64];
		char seed[8];
		snprintf(seed, sizeof seed, "%zu", i < nshapes ? i + 1 : 0);
		setenv("KRT_EMU_SEED", seed, 1);
		double t0 = now();
		int rc;
		double maxerr, tol;
		uint64_t bad;
		const char *first, *msg;
		EtGemm g = {.keep = 0};
		EtFmha f = {.keep = 0};
		if (moe) {
			/* the long shape: K wraps the ring twice, in whole scale blocks */
			uint32_t lm[4] = {70, 40, 2 * ts * tk + tk, 3};
			const uint32_t *d = i < nshapes ? moe_shapes[i] : lm;
			/* SwiGLU: N of gate and up halves of whole 128-row blocks */
			uint32_t n = krt_abi_shape(&abi, "nmult") ? (d[1] + 255) / 256 * 256 : d[1];
			uint32_t k = et_gemm_k(&abi, d[2]); /* FP4: whole 256-value stages */
			snprintf(shape, sizeof shape, "%ux%ux%u E=%u", d[0], n, k, d[3]);
			rc = et_gemm_moe(dev, mod, d[0], n, k, d[3], 5000 + i, &f);
			maxerr = f.max_err, tol = f.tol, bad = f.bad, first = f.first_bad, msg = f.err.msg;
		} else if (gemm) {
			const uint32_t *d = i < nshapes ? gemm_shapes[i] : long_gemm;
			uint32_t k = et_gemm_k(&abi, d[2]); /* block-scaled: whole scale blocks */
			snprintf(shape, sizeof shape, "%ux%ux%u", d[0], d[1], k);
			rc = et_gemm(dev, mod, d[0], d[1], k, 1000 + i, &g);
			maxerr = g.max_err, tol = g.tol, bad = g.bad, first = g.first_bad, msg = g.err.msg;
		} else if (indexer) {
			const uint32_t *d = i < nshapes ? indexer_shapes[i] : long_indexer;
			snprintf(shape, sizeof shape, "batch %u s_q %u max_len %u splits %u", d[0], d[1], d[2], d[3]);
			rc = et_indexer(dev, mod, d[0], d[1], d[2], d[3], 4000 + i, 1, &f);
			maxerr = f.max_err, tol = f.tol, bad = f.bad, first = f.first_bad, msg = f.err.msg;
		} else if (topk) {
			const uint32_t *d = i < nshapes ? topk_shapes[i] : long_topk;
			snprintf(shape, sizeof shape, "rows %u n %u", d[0], d[1]);
			rc = et_topk(dev, mod, d[0], d[1], 5000 + i, 1, &f);
			maxerr = f.max_err, tol = f.tol, bad = f.bad, first = f.first_bad, msg = f.err.msg;
		} else if (decode) {
			const uint32_t *d = i < nshapes ? decode_shapes[i] : long_decode;
			snprintf(shape, sizeof shape, "batch %u s_q %u splits %u", d[0], d[1], d[2]);
			rc = et_decode(dev, mod, d[0], d[1], d[2], 3000 + i, &f);
			maxerr = f.max_err, tol = f.tol, bad = f.bad, first = f.first_bad, msg = f.err.msg;
		} else {
			const EtFmhaShape *f0 = i < nshapes ? &fmha_shapes[i] : &long_fmha;
			size_t at = (size_t)snprintf(shape, sizeof shape, "batch %u:", f0->batch);
			for (uint32_t b = 0; b < f0->batch && at < sizeof shape; b++)
				at += (size_t)snprintf(shape + at, sizeof shape - at, " %ux%u", f0->sq[b], f0->sk[b]);
			rc = et_fmha(dev, mod, f0, 2000 + i, &f);
			maxerr = f.max_err, tol = f.tol, bad = f.bad, first = f.first_bad, msg = f.err.msg;
		}
		double dt = now() - t0;
		if (rc < 0) {
			printf("FAIL %s %s, seed %s: %s\n", abi.kernel, shape, seed, msg);
			fails++;
		} else if (rc > 0) {
			printf("FAIL %s %s, seed %s: %llu elements over tolerance %.0e, max rel err %.3g; "
			       "first: %s\n", abi.kernel, shape, seed, (unsigned long long)bad, tol, maxerr, first);
			fails++;
		} else {
			printf("ok   %s %s, seed %s: max rel err %.3g (tol %.0e)%s %.2fs\n", abi.kernel,
			       shape, seed, maxerr, tol, (fmha || decode) && f.lse_err > 0 ? ", LSE ok" : "", dt);
		}
		fflush(stdout);
	}
	krt_module_unload(mod);
	krt_device_close(dev);
	return fails;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_emu_emitted SRC_ROOT [FILE.ptx ...]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fails = 0, files = 0;
	if (argc > 2) {
		for (int i = 2; i < argc; i++, files++)
			fails += run_file(argv[i]) != 0;
	} else {
		char pat[4096];
		snprintf(pat, sizeof pat, "%s/emitted/*/*.ptx", argv[1]);
		char **paths;
		int n = et_glob(pat, &paths);
		if (n <= 0) {
			fprintf(stderr, "no PTX files match %s\n", pat);
			return 1;
		}
		for (int i = 0; i < n; i++, files++)
			fails += run_file(paths[i]) != 0;
		et_free_list(paths, n);
	}
	printf("%d of %d kernels failed\n", fails, files);
	return fails ? 1 : 0;
}
