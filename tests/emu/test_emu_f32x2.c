/* The packed f32 pair type .f32x2 (sm_100: add, sub, mul, fma on .b64
 * registers holding two f32, the low half first), which the sm_100a
 * softmax uses for its scale fma and sum add: a hand-written kernel run on
 * the emulator, every result compared bit for bit with the same f32
 * operation in C on each half (round to nearest; .ftz flushes subnormal
 * inputs and results to a signed zero). The emulator must refuse .f32x2
 * where PTX has none (max). Random inputs from a printed seed
 * (F32X2_SEED=N repeats a run).
 *
 *   test_emu_f32x2               run on the emulator
 *   test_emu_f32x2 --ptxas PTXAS assemble the kernel for sm_100a (77 if
 *                                PTXAS cannot run)
 *
 * Exit 0 when every check passes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"

static int fails;
static uint64_t seed_state;

static uint64_t
rnd(void)
{
	/* splitmix64 */
	uint64_t z = (seed_state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Thread t reads a, b, c (two f32 each) at IN[6t..6t+5] and writes the
 * results of the OPS operations, two f32 each, at OUT[2·OPS·t..]. */
enum { THREADS = 128, OPS = 5 };

static const char kernel[] =
	"//@kgen-abi 1\n"
	"//@kernel f32x2\n"
	"//@family test\n"
	"//@target sm_100a\n"
	"//@ptx 8.8\n"
	"//@args test f32x2\n"
	"//@threads 128\n"
	"//@cluster 1 1 1\n"
	"//@smem 0\n"
	"//@grid 1 1 1\n"
	"//@param ptr IN dtype=f32 tensor=IN[768]\n"
	"//@param ptr OUT dtype=f32 tensor=OUT[1280]\n"
	"//@end\n"
	"// test_emu_f32x2 kernel (see tests/emu/test_emu_f32x2.c)\n"
	"\n"
	".version 8.8\n"
	".target sm_100a\n"
	".address_size 64\n"
	"\n"
	".visible .entry f32x2(\n"
	"\t.param .u64 p_in,\n"
	"\t.param .u64 p_out\n"
	")\n"
	".maxntid 128, 1, 1\n"
	"{\n"
	"\t.reg .b32 %r<4>;\n"
	"\t.reg .f32 %f<8>;\n"
	"\t.reg .b64 %rd<16>;\n"
	"\n"
	"\tmov.u32 %r1, %tid.x;\n"
	"\tld.param.u64 %rd1, [p_in];\n"
	"\tcvta.to.global.u64 %rd1, %rd1;\n"
	"\tld.param.u64 %rd2, [p_out];\n"
	"\tcvta.to.global.u64 %rd2, %rd2;\n"
	"\tmul.wide.u32 %rd3, %r1, 24;\n"
	"\tadd.u64 %rd1, %rd1, %rd3;\n"
	"\tmul.wide.u32 %rd3, %r1, 40;\n"
	"\tadd.u64 %rd2, %rd2, %rd3;\n"
	"\tld.global.v2.f32 {%f1, %f2}, [%rd1];\n"
	"\tmov.b64 %rd4, {%f1, %f2};\n"
	"\tld.global.b64 %rd5, [%rd1+8];\n"
	"\tld.global.b64 %rd6, [%rd1+16];\n"
	"\tfma.rn.f32x2 %rd7, %rd4, %rd5, %rd6;\n"
	"\tadd.rn.f32x2 %rd8, %rd4, %rd5;\n"
	"\tsub.rn.f32x2 %rd9, %rd4, %rd6;\n"
	"\tmul.rn.f32x2 %rd10, %rd5, %rd6;\n"
	"\tadd.rn.ftz.f32x2 %rd11, %rd4, %rd6;\n"
	"\tst.global.b64 [%rd2], %rd7;\n"
	"\tst.global.b64 [%rd2+8], %rd8;\n"
	"\tst.global.b64 [%rd2+16], %rd9;\n"
	"\tmov.b64 {%f3, %f4}, %rd10;\n"
	"\tst.global.v2.f32 [%rd2+24], {%f3, %f4};\n"
	"\tst.global.b64 [%rd2+32], %rd11;\n"
	"\tret;\n"
	"}\n";

static float
f32(uint32_t b)
{
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static uint32_t
bits(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

static float
ftz(float x)
{
	return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

/* a random f32: mostly normal of moderate size, some subnormal (for .ftz) */
static uint32_t
operand(void)
{
	uint64_t r = rnd();
	uint32_t sign = (uint32_t)(r >> 63) << 31, man = (uint32_t)r & 0x7fffff;
	uint32_t ex = r >> 40 & 7 ? 100 + (uint32_t)(r >> 32 & 0x3f) : 0;
	return sign | ex << 23 | man;
}

static float
expect(int op, float a, float b, float c)
{
	switch (op) {
	case 0: return fmaf(a, b, c);
	case 1: return a + b;
	case 2: return a - c;
	case 3: return b * c;
	default: return ftz(ftz(a) + ftz(c));
	}
}

static int
run(KrtDevice *dev, const float *in, float *out, KrtErr *err)
{
	KrtPtr pin = 0, pout = 0;
	KrtModule *mod = NULL;
	KrtArg a[2];
	memset(a, 0, sizeof a);
	int rc = krt_alloc(dev, 6 * THREADS * 4, &pin, err) || krt_alloc(dev, 2 * OPS * THREADS * 4, &pout, err) ||
	         krt_upload(dev, pin, in, 6 * THREADS * 4, err) ||
	         krt_memset8(dev, pout, 0xff, 2 * OPS * THREADS * 4, err);
	a[0].kind = a[1].kind = KRT_ARG_PTR;
	a[0].v.p = pin;
	a[1].v.p = pout;
	if (!rc)
		rc = krt_module_load(dev, kernel, strlen(kernel), &mod, err) || krt_launch(mod, a, 2, NULL, err) ||
		     krt_download(dev, out, pout, 2 * OPS * THREADS * 4, err);
	if (mod)
		krt_module_unload(mod);
	krt_free(dev, pin, NULL);
	krt_free(dev, pout, NULL);
	return rc ? -1 : 0;
}

static void
test_values(KrtDevice *dev)
{
	static float in[6 * THREADS], out[2 * OPS * THREADS];
	static const char *const names[OPS] = {"fma.rn", "add.rn", "sub.rn", "mul.rn", "add.rn.ftz"};
	KrtErr err;
	int bad = 0;
	memset(&err, 0, sizeof err);
	for (int i = 0; i < 6 * THREADS; i++)
		in[i] = f32(operand());
	if (run(dev, in, out, &err)) {
		printf("FAIL f32x2: %s\n", err.msg);
		fails++;
		return;
	}
	for (int t = 0; t < THREADS; t++)
		for (int op = 0; op < OPS; op++)
			for (int h = 0; h < 2; h++) {
				const float *x = &in[6 * t];
				float want = expect(op, x[h], x[2 + h], x[4 + h]), got = out[2 * OPS * t + 2 * op + h];
				if (bits(want) != bits(got) && !(isnan(want) && isnan(got)) && bad++ < 6)
					printf("FAIL %s.f32x2 thread %d half %d: 0x%08x, want 0x%08x\n", names[op], t, h,
					       bits(got), bits(want));
			}
	fails += bad != 0;
	printf("%s f32x2 add/sub/mul/fma (.rn, .ftz) of %d pairs, bit for bit\n", bad ? "FAIL" : "ok  ", THREADS);
}

/* max has no .f32x2 form: the emulator refuses the kernel */
static void
test_refused(KrtDevice *dev)
{
	char *text = malloc(sizeof kernel + 16), *at;
	KrtModule *mod = NULL;
	KrtErr err;
	if (!text)
		abort();
	memcpy(text, kernel, sizeof kernel);
	at = strstr(text, "add.rn.f32x2");
	memcpy(at, "max.xx", 6);
	memmove(at + 3, at + 6, strlen(at + 6) + 1);
	memset(&err, 0, sizeof err);
	int rc = krt_module_load(dev, text, strlen(text), &mod, &err);
	if (mod)
		krt_module_unload(mod);
	int ok = rc && strstr(err.msg, "max.f32x2 does not exist");
	fails += !ok;
	printf("%s max.f32x2 refused%s%s\n", ok ? "ok  " : "FAIL", ok ? "" : ": ", ok ? "" : err.msg);
	free(text);
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "--ptxas") == 0) {
		char path[] = "/tmp/test_emu_f32x2_XXXXXX", cmd[4200];
		snprintf(cmd, sizeof cmd, "'%s' --version > /dev/null 2>&1", argv[2]);
		if (system(cmd) != 0) {
			printf("ptxas %s cannot run: skipped\n", argv[2]);
			return 77;
		}
		int fd = mkstemp(path);
		FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
		int ok = f && fputs(kernel, f) >= 0;
		if (f)
			fclose(f);
		snprintf(cmd, sizeof cmd, "'%s' -arch=sm_100a '%s' -o /dev/null", argv[2], path);
		int rc = !ok || system(cmd) != 0;
		remove(path);
		printf("%s ptxas f32x2\n", rc ? "FAIL" : "ok  ");
		return rc;
	}
	const char *s = getenv("F32X2_SEED");
	seed_state = s ? strtoull(s, NULL, 0) : UINT64_C(0xf32);
	printf("seed 0x%llx (F32X2_SEED=N repeats a run)\n", (unsigned long long)seed_state);
	KrtDevice *dev;
	KrtErr err;
	if (krt_device_open(&dev, "emu", 0, &err)) {
		printf("FAIL: %s\n", err.msg);
		return 1;
	}
	test_values(dev);
	test_refused(dev);
	krt_device_close(dev);
	printf("%d failures\n", fails);
	return fails ? 1 : 0;
}
