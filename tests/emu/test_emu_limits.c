/* The emulator's stated limits (runtime/emu/README.md, "Limits"): a launch
 * of too many threads is refused before anything is allocated (2^31 - 1
 * blocks must be refused at once, not run for hours), the launch-wide
 * instruction budget stops a launch that exceeds it, an allocation past the
 * memory limit is refused, and the variables read numbers the way every CLI
 * does (0200 is decimal 200). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/krt.h"

static int fails;

#define CHECK(cond, ...)                                                                     \
	do {                                                                                     \
		if (!(cond)) {                                                                       \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                     \
			printf(__VA_ARGS__);                                                             \
			printf("\n");                                                                    \
			fails++;                                                                         \
		}                                                                                    \
	} while (0)

/* 32 threads per block, G blocks, each thread one instruction */
static const char ptx[] =
	"//@kgen-abi 1\n"
	"//@kernel trivial\n"
	"//@family test\n"
	"//@target sm_90a\n"
	"//@ptx 8.0\n"
	"//@args test\n"
	"//@threads 32\n"
	"//@cluster 1 1 1\n"
	"//@smem 0\n"
	"//@grid G 1 1\n"
	"//@param u32 G\n"
	"//@end\n"
	".version 8.0\n"
	".target sm_90a\n"
	".address_size 64\n"
	"\n"
	".visible .entry trivial(\n"
	"\t.param .u32 p_g\n"
	")\n"
	".maxntid 32, 1, 1\n"
	"{\n"
	"\tret;\n"
	"}\n";

static int
launch(KrtModule *m, uint32_t g, KrtErr *err)
{
	KrtArg a = {.kind = KRT_ARG_U32, .v.u32 = g};
	return krt_launch(m, &a, 1, NULL, err);
}

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int
main(void)
{
	KrtErr err = {0};
	KrtDevice *dev = NULL;
	KrtModule *m = NULL;

	unsetenv("KRT_EMU_MAX_THREADS");
	unsetenv("KRT_EMU_MAX_LAUNCH_STEPS");
	unsetenv("KRT_EMU_MAX_MEM");
	if (krt_device_open(&dev, "emu", 0, &err) || krt_module_load(dev, ptx, sizeof ptx - 1, &m, &err)) {
		printf("FAIL: emulator or module: %s\n", err.msg);
		return 1;
	}

	CHECK(launch(m, 4, &err) == 0, "4 blocks: %s", err.msg);

	/* 2^31 - 1 blocks of 32 threads: refused at once, naming the limit */
	double t0 = now();
	int rc = launch(m, 0x7fffffff, &err);
	CHECK(rc == KRT_ERESOURCE, "2^31-1 blocks: code %d, want KRT_ERESOURCE: %s", rc, err.msg);
	CHECK(strstr(err.msg, "KRT_EMU_MAX_THREADS") && strstr(err.msg, "68719476704 threads"),
	      "message: %s", err.msg);
	CHECK(now() - t0 < 1.0, "refusal took %.2f s", now() - t0);

	/* the variable is read like every typed number: 0200 is 200 */
	setenv("KRT_EMU_MAX_THREADS", "0200", 1);
	CHECK(launch(m, 6, &err) == 0, "192 threads under 0200: %s", err.msg);
	CHECK(launch(m, 7, &err) == KRT_ERESOURCE, "224 threads over 0200: %s", err.msg);
	setenv("KRT_EMU_MAX_THREADS", "12junk", 1);
	rc = launch(m, 1, &err);
	CHECK(rc == KRT_EINVAL && strstr(err.msg, "KRT_EMU_MAX_THREADS=12junk"), "junk: %d %s", rc,
	      err.msg);
	unsetenv("KRT_EMU_MAX_THREADS");

	/* launch-wide instruction budget: 8 blocks x 32 threads x 1 = 256 */
	setenv("KRT_EMU_MAX_LAUNCH_STEPS", "256", 1);
	CHECK(launch(m, 8, &err) == 0, "256 steps within 256: %s", err.msg);
	rc = launch(m, 9, &err);
	CHECK(rc != 0 && strstr(err.msg, "KRT_EMU_MAX_LAUNCH_STEPS"), "288 steps over 256: %d %s", rc,
	      err.msg);
	unsetenv("KRT_EMU_MAX_LAUNCH_STEPS");

	/* memory: refused before it is allocated, earlier allocations counted */
	KrtPtr p, q;
	setenv("KRT_EMU_MAX_MEM", "0x1000", 1);
	CHECK(krt_alloc(dev, 4096, &p, &err) == 0, "4096 bytes within 0x1000: %s", err.msg);
	rc = krt_alloc(dev, 16, &q, &err);
	CHECK(rc == KRT_ERESOURCE && strstr(err.msg, "KRT_EMU_MAX_MEM") &&
	      strstr(err.msg, "4096 already"), "16 more bytes: %d %s", rc, err.msg);
	krt_free(dev, p, &err);
	CHECK(krt_alloc(dev, 16, &q, &err) == 0, "16 bytes after the free: %s", err.msg);
	krt_free(dev, q, &err);
	rc = krt_alloc(dev, (size_t)1 << 40, &q, &err);
	CHECK(rc == KRT_ERESOURCE, "1 TiB: %d %s", rc, err.msg);
	unsetenv("KRT_EMU_MAX_MEM");

	krt_module_unload(m);
	krt_device_close(dev);
	printf("%d failures\n", fails);
	return fails ? 1 : 0;
}
