/* The emulator's wgmma arithmetic against recorded H200 results: the sm_90a
 * gemm with f32 output ran on an H200 on inputs spread over a wide exponent
 * range (bf16 with exponents -7..8 and random signs, where accumulation
 * order and truncation show in the last bits), and the FNV-1a 64 hash of
 * each C was recorded. The emulator must reproduce every bit (wgmma.c,
 * emu_hopper_step). Plain f32 summation in K order matches ~20% of them.
 *
 *   test_emu_hopper SRC_ROOT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"

static const char kernel[] = "emitted/sm_90a/gemm_bf16_f32_m128n128k64_s4_sw128_sm90a.ptx";

/* H200 (driver 13.0), 2026-11-21 */
static const struct {
	uint32_t M, N, K;
	uint64_t fnv;
} recorded[] = {
	{128, 128, 64, UINT64_C(0x26359b651a63fb4a)},
	{128, 128, 1024, UINT64_C(0xef746685b22dce86)},
};

static uint64_t state = 12345;

static uint64_t
splitmix(void)
{
	uint64_t z = (state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* bf16 in [2^-7, 2^9) with a random sign: the draw order of the recording */
static uint16_t
draw(void)
{
	uint64_t v = splitmix();
	uint64_t sign = splitmix();
	return (uint16_t)((0x3c00 + v % 0x800) ^ (sign & 0x8000));
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_emu_hopper SRC_ROOT\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", argv[1], kernel);
	size_t len;
	char *ptx = et_read(path, &len);
	KrtErr err;
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;
	if (!ptx || krt_device_open(&dev, "emu", 1, &err) || krt_module_load(dev, ptx, len, &mod, &err)) {
		printf("FAIL: %s\n", ptx ? err.msg : "no kernel");
		return 1;
	}
	free(ptx);
	int fails = 0;
	for (size_t t = 0; t < sizeof recorded / sizeof recorded[0]; t++) {
		uint32_t M = recorded[t].M, N = recorded[t].N, K = recorded[t].K;
		size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
		uint16_t *a = malloc(na * 2), *b = malloc(nb * 2);
		float *c = malloc(nc * 4);
		for (size_t i = 0; i < na; i++)
			a[i] = draw();
		for (size_t i = 0; i < nb; i++)
			b[i] = draw();
		KrtPtr pa = 0, pb = 0, pc = 0;
		KrtArg args[6];
		memset(args, 0, sizeof args);
		args[0].kind = KRT_ARG_TMAP;
		args[0].v.t = (KrtTensor){.ptr = 0, .rank = 2, .dims = {K, M}, .strides = {2, (uint64_t)K * 2}};
		args[1].kind = KRT_ARG_TMAP;
		args[1].v.t = (KrtTensor){.ptr = 0, .rank = 2, .dims = {K, N}, .strides = {2, (uint64_t)K * 2}};
		args[2].kind = KRT_ARG_PTR;
		args[3].kind = args[4].kind = args[5].kind = KRT_ARG_U32;
		args[3].v.u32 = M;
		args[4].v.u32 = N;
		args[5].v.u32 = K;
		int rc = !a || !b || !c || krt_alloc(dev, na * 2, &pa, &err) ||
		         krt_alloc(dev, nb * 2, &pb, &err) || krt_alloc(dev, nc * 4, &pc, &err) ||
		         krt_upload(dev, pa, a, na * 2, &err) || krt_upload(dev, pb, b, nb * 2, &err);
		args[0].v.t.ptr = pa;
		args[1].v.t.ptr = pb;
		args[2].v.p = pc;
		if (!rc)
			rc = krt_launch(mod, args, 6, NULL, &err) || krt_download(dev, c, pc, nc * 4, &err);
		uint64_t h = UINT64_C(1469598103934665603);
		const uint8_t *p = (const uint8_t *)c;
		for (size_t i = 0; !rc && i < nc * 4; i++) {
			h ^= p[i];
			h *= UINT64_C(1099511628211);
		}
		int ok = !rc && h == recorded[t].fnv;
		printf("%s %ux%ux%u: C hash 0x%016llx, H200 0x%016llx%s%s\n", ok ? "ok  " : "FAIL", M, N,
		       K, (unsigned long long)h, (unsigned long long)recorded[t].fnv, rc ? ": " : "",
		       rc ? err.msg : "");
		fails += !ok;
		krt_free(dev, pa, NULL);
		krt_free(dev, pb, NULL);
		krt_free(dev, pc, NULL);
		free(a);
		free(b);
		free(c);
	}
	krt_module_unload(mod);
	krt_device_close(dev);
	return fails ? 1 : 0;
}
