/* The emulator against a real GPU: every emitted sm_90a kernel runs on the
 * CUDA device and on the emulator with the same inputs; both must pass the
 * float64 reference, and the outputs are compared element by element.
 * bf16 gemm must be bit-identical: the emulator models Hopper's 16-bit
 * wgmma accumulation exactly (wgmma.c emu_hopper_step, fitted to bf16 results)
 * and the epilogue is plain IEEE arithmetic. fp16 gemm and fmha only report
 * their agreement: the model was not fitted to fp16 inputs, and the
 * hardware's ex2.approx and rcp are not modelled to the bit.
 *
 *   test_emu_xcheck SRC_ROOT [FILE.ptx ...]
 *
 * Exit 0 all agree, 1 a disagreement, 77 no sm_90 GPU (meson: skipped). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"

enum { EXIT_SKIP = 77 };

static float
bf16f(uint16_t h)
{
	uint32_t b = (uint32_t)h << 16;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

/* Distance in units in the last place of the output type (bf16: 16-bit
 * patterns, f32: 32-bit), as ordered integers. */
static int64_t
ulps(const void *a, const void *b, size_t i, int f32)
{
	int64_t x, y;
	if (f32) {
		int32_t u, v;
		memcpy(&u, (const char *)a + 4 * i, 4);
		memcpy(&v, (const char *)b + 4 * i, 4);
		x = u < 0 ? (int64_t)INT32_MIN - u : u;
		y = v < 0 ? (int64_t)INT32_MIN - v : v;
	} else {
		int16_t u, v;
		memcpy(&u, (const char *)a + 2 * i, 2);
		memcpy(&v, (const char *)b + 2 * i, 2);
		x = u < 0 ? (int64_t)INT16_MIN - u : u;
		y = v < 0 ? (int64_t)INT16_MIN - v : v;
	}
	return x > y ? x - y : y - x;
}

typedef struct Cmp {
	size_t n, same;
	int64_t max_ulps;
	size_t where;
} Cmp;

static void
compare(const void *gpu, const void *emu, size_t n, int f32, Cmp *c)
{
	memset(c, 0, sizeof *c);
	c->n = n;
	for (size_t i = 0; i < n; i++) {
		int64_t u = ulps(gpu, emu, i, f32);
		if (u == 0)
			c->same++;
		if (u > c->max_ulps) {
			c->max_ulps = u;
			c->where = i;
		}
	}
}

static int
run_file(const char *path, KrtDevice *gpu, KrtDevice *emu)
{
	size_t len;
	char *ptx = et_read(path, &len);
	KrtErr err;
	KrtAbi abi;
	if (!ptx || krt_abi_parse(ptx, len, &abi, &err)) {
		printf("FAIL %s: unreadable\n", path);
		free(ptx);
		return 1;
	}
	KrtModule *mg = NULL, *me = NULL;
	if (krt_module_load(gpu, ptx, len, &mg, &err) || krt_module_load(emu, ptx, len, &me, &err)) {
		printf("FAIL %s: %s\n", abi.kernel, err.msg);
		krt_module_unload(mg);
		free(ptx);
		return 1;
	}
	free(ptx);
	int fails = 0;
	if (strcmp(abi.family, "gemm_moe") == 0) {
		/* MoE (tools/check_moe.c): both pass the float64 reference at the
		 * same seed; the checker keeps no output to compare bit by bit */
		EtFmha g = {.keep = 0}, e = {.keep = 0};
		int rg = et_gemm_moe(gpu, mg, 131, 512, 256, 5, 77, &g);
		int re = et_gemm_moe(emu, me, 131, 512, 256, 5, 77, &e);
		printf("%s %s 131x512x256 E=5: gpu %s (max rel err %.3g), emu %s (max rel err %.3g)\n",
		       rg || re ? "FAIL" : "ok  ", abi.kernel, rg ? "fails" : "passes", g.max_err, re ? "fails" : "passes",
		       e.max_err);
		if (rg < 0 || re < 0)
			printf("  %s\n", rg < 0 ? g.err.msg : e.err.msg);
		krt_module_unload(mg);
		krt_module_unload(me);
		return rg || re;
	}
	for (int s = 0; s < 3; s++) {
		void *og = NULL, *oe = NULL;
		size_t bytes = 0, obytes = 0;
		int rg, re, f32;
		char shape[64];
		if (strcmp(abi.family, "gemm") == 0) {
			static const uint32_t sh[3][3] = {{1, 1, 8}, {130, 70, 72}, {300, 500, 1000}};
			EtGemm g = {.keep = 1}, e = {.keep = 1};
			uint32_t k = et_gemm_k(&abi, sh[s][2]);
			rg = et_gemm(gpu, mg, sh[s][0], sh[s][1], k, 77 + s, &g);
			re = et_gemm(emu, me, sh[s][0], sh[s][1], k, 77 + s, &e);
			og = g.out, oe = e.out, bytes = obytes = g.out_bytes;
			f32 = krt_abi_find(&abi, "C") && strcmp(krt_abi_find(&abi, "C")->dtype, "f32") == 0;
			snprintf(shape, sizeof shape, "%ux%ux%u", sh[s][0], sh[s][1], k);
			if (rg < 0 || re < 0)
				printf("FAIL %s %s: %s\n", abi.kernel, shape, rg < 0 ? g.err.msg : e.err.msg);
		} else {
			static const EtFmhaShape sh[3] = {{1, {1}, {1}}, {2, {70, 130}, {100, 77}},
			                                  {1, {200}, {300}}};
			EtFmha g = {.keep = 1}, e = {.keep = 1};
			rg = et_fmha(gpu, mg, &sh[s], 88 + (uint64_t)s, &g);
			re = et_fmha(emu, me, &sh[s], 88 + (uint64_t)s, &e);
			og = g.out, oe = e.out, bytes = g.out_bytes, obytes = g.o_bytes;
			f32 = 0;
			snprintf(shape, sizeof shape, "shape %d", s);
			if (rg < 0 || re < 0)
				printf("FAIL %s %s: %s\n", abi.kernel, shape, rg < 0 ? g.err.msg : e.err.msg);
		}
		if (rg < 0 || re < 0 || !og || !oe) {
			fails++;
			free(og);
			free(oe);
			continue;
		}
		Cmp c, cl = {0, 0, 0, 0};
		compare(og, oe, obytes / (f32 ? 4 : 2), f32, &c);
		if (bytes > obytes)
			compare((char *)og + obytes, (char *)oe + obytes, (bytes - obytes) / 4, 1, &cl);
		const KrtAbiParam *pa = krt_abi_find(&abi, "A");
		int exact = strcmp(abi.family, "gemm") == 0 && pa && strcmp(pa->dtype, "bf16") == 0;
		int ok = !rg && !re && (!exact || c.same == c.n);
		printf("%s %s %s: gpu %s, emu %s; %zu of %zu outputs bit-identical, max %lld ulp%s",
		       ok ? "ok  " : "FAIL", abi.kernel, shape, rg ? "wrong" : "right",
		       re ? "wrong" : "right", c.same, c.n, (long long)c.max_ulps, f32 ? " (f32)" : " (bf16)");
		if (c.max_ulps && !f32)
			printf(" (at %zu: gpu %g emu %g)", c.where, bf16f(((uint16_t *)og)[c.where]),
			       bf16f(((uint16_t *)oe)[c.where]));
		if (cl.n)
			printf("; LSE %zu of %zu identical, max %lld ulp", cl.same, cl.n,
			       (long long)cl.max_ulps);
		printf("\n");
		fails += !ok;
		free(og);
		free(oe);
	}
	krt_module_unload(mg);
	krt_module_unload(me);
	return fails;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_emu_xcheck SRC_ROOT [FILE.ptx ...]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	KrtErr err;
	KrtDevice *gpu = NULL, *emu = NULL;
	if (!krt_gpu_present() || krt_device_open(&gpu, "cuda", 0, &err)) {
		printf("no GPU: skipped\n");
		return EXIT_SKIP;
	}
	if (krt_device_cc(gpu) != 90) {
		printf("GPU %s is sm_%d, not sm_90: skipped\n", krt_device_name(gpu), krt_device_cc(gpu));
		krt_device_close(gpu);
		return EXIT_SKIP;
	}
	if (krt_device_open(&emu, "emu", 1, &err)) {
		printf("FAIL: %s\n", err.msg);
		return 1;
	}
	printf("GPU: %s\n", krt_device_name(gpu));
	int fails = 0, n;
	char **paths;
	if (argc > 2) {
		paths = argv + 2;
		n = argc - 2;
	} else {
		char pat[4096];
		snprintf(pat, sizeof pat, "%s/emitted/sm_90a/*.ptx", argv[1]);
		n = et_glob(pat, &paths);
	}
	for (int i = 0; i < n; i++)
		fails += run_file(paths[i], gpu, emu);
	if (argc == 2)
		et_free_list(paths, n);
	krt_device_close(emu);
	krt_device_close(gpu);
	printf("%d disagreements\n", fails);
	return fails ? 1 : 0;
}
