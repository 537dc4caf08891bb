/* plan: TMEM column rounding, budget checks, the gemm plan's rejections
 * with the rule in the message, and the internal-error stop for a plan that
 * runs out of entries. Expected numbers derived by hand in the comments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gen/err.h"

#include "gen/kgen.h"
#include "gen/plan.h"
#include "gen/target.h"

static int fails;

#define CHECK(cond, ...)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fails++;                                                         \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                      \
			printf(__VA_ARGS__);                                             \
			printf("\n");                                                    \
		}                                                                        \
	} while (0)

static void
test_tmem_columns(void)
{
	/* power of two, at least 32, at most 512 (tcgen05.alloc) */
	static const int in[] = {1, 32, 33, 64, 96, 112, 129, 256, 257, 512, 513};
	static const int want[] = {32, 32, 64, 64, 128, 128, 256, 256, 512, 512, -1};
	for (int i = 0; i < 11; i++)
		CHECK(plan_tmem_columns(in[i]) == want[i], "plan_tmem_columns(%d) = %d, want %d", in[i],
		      plan_tmem_columns(in[i]), want[i]);
}

static void
test_budgets(void)
{
	const Target *h = target_find("sm_90a"), *b = target_find("sm_100a");
	Plan p;
	KgErr err;

	/* smem: two 1024-aligned regions then barriers; 100000 + 100000 bytes
	 * of tiles -> offset of the second = 100352 (next multiple of 1024),
	 * end 200352, 2 barriers 16 bytes -> 200368, + 1024 slack = 201392. */
	plan_init(&p, h);
	p.threads = 128;
	plan_smem(&p, "a", 100000, 1024, 1);
	plan_smem(&p, "b", 100000, 1024, 1);
	plan_barrier(&p, "x", 2, 1, 0, "t");
	CHECK(plan_check(&p, &err) == 0, "%s", err.msg);
	CHECK(p.smem[1].offset == 100352, "offset %u", p.smem[1].offset);
	CHECK(p.bars[0].offset == 200352, "barrier offset %u", p.bars[0].offset);
	CHECK(p.smem_request == 201392, "request %u", p.smem_request);

	plan_init(&p, h);
	p.threads = 128;
	plan_smem(&p, "a", 240000, 16, 1);
	CHECK(plan_check(&p, &err) < 0 && strstr(err.msg, "shared memory") && strstr(err.msg, "sm_90a"),
	      "smem over the limit: %s", err.msg);

	plan_init(&p, b);
	p.threads = 128;
	plan_tmem(&p, "S", 0, 128, 128);
	plan_tmem(&p, "O", 64, 128, 128);
	CHECK(plan_check(&p, &err) < 0 && strstr(err.msg, "overlaps"), "TMEM overlap: %s", err.msg);

	plan_init(&p, b);
	p.threads = 128;
	plan_tmem(&p, "S", 0, 128, 128);
	plan_tmem(&p, "O", 128, 512, 128);
	CHECK(plan_check(&p, &err) < 0 && strstr(err.msg, "640 TMEM columns"), "TMEM over 512: %s",
	      err.msg);

	plan_init(&p, b);
	p.threads = 128;
	plan_tmem(&p, "S", 0, 128, 128);
	plan_tmem(&p, "O", 128, 64, 128);
	CHECK(plan_check(&p, &err) == 0 && p.tmem_alloc == 256, "192 columns -> 256: %d %s",
	      p.tmem_alloc, err.msg);

	plan_init(&p, h);
	p.threads = 128;
	plan_tmem(&p, "S", 0, 128, 128);
	CHECK(plan_check(&p, &err) < 0 && strstr(err.msg, "has none"), "TMEM on sm_90a: %s", err.msg);

	/* an alias may overlap its parent only, and only inside it */
	plan_init(&p, b);
	p.threads = 128;
	{
		int s0 = plan_tmem(&p, "S0", 0, 128, 128);
		plan_tmem_alias(&p, "P0", s0, 0, 64, "P over S");
		plan_tmem(&p, "O", 128, 128, 128);
		CHECK(plan_check(&p, &err) == 0 && p.tmem_alloc == 256, "P inside S: %d %s", p.tmem_alloc,
		      err.msg);
		plan_tmem_alias(&p, "X", s0, 96, 64, "leaves S");
		CHECK(plan_check(&p, &err) < 0 && strstr(err.msg, "leaves its columns"), "alias outside: %s",
		      err.msg);
	}
	plan_init(&p, b);
	p.threads = 128;
	{
		int s0 = plan_tmem(&p, "S0", 0, 128, 128);
		plan_tmem(&p, "O", 128, 128, 128);
		plan_tmem_alias(&p, "P0", s0, 0, 64, "P over S");
		plan_tmem_alias(&p, "Q0", s0, 32, 64, "overlaps P");
		CHECK(plan_check(&p, &err) < 0 && strstr(err.msg, "overlaps"), "two aliases overlapping: %s",
		      err.msg);
	}

	/* 384 threads: entry cap 65536/384 = 170 -> 168; pool 168*384 = 64512;
	 * producer warpgroup at 40 keeps 5120, 59392 / 256 = 232. */
	plan_init(&p, h);
	p.threads = 384;
	CHECK(plan_regs_split(&p, 256, 128, 40) == 232, "split %d", plan_regs_split(&p, 256, 128, 40));
	/* 512 threads: cap 128, pool 65536; (65536 - 5120) / 384 = 157 -> 152 */
	p.threads = 512;
	CHECK(plan_regs_split(&p, 384, 128, 40) == 152, "split %d", plan_regs_split(&p, 384, 128, 40));
}

static void
expect_reject(int n, const char *const *args, const char *needle)
{
	char *text = NULL;
	KgErr err = {{0}};

	CHECK(kgen_plan_text("gemm", n, args, &text, &err) < 0 && strstr(err.msg, needle),
	      "expected rejection containing \"%s\", got \"%s\"", needle, text ? "(accepted)" : err.msg);
	free(text);
}

static void
test_gemm_rejections(void)
{
	/* 4 stages x (128+256) rows x 128 K x 2 bytes = 393216 > 232448 */
	const char *smem[] = {"--tile-k", "128", "--stages", "4"};
	/* 4 consumer warpgroups need 256/2 + 48 = 176 registers; 640 threads
	 * enter with 65536/640 = 102 -> 96, pool 61440, (61440-5120)/512 = 110
	 * -> 104 after the producer's setmaxnreg 40. */
	const char *regs[] = {"--tile-m", "256", "--stages", "2"};
	const char *m100[] = {"--target", "sm_100a", "--tile-m", "64"};
	const char *swz[] = {"--tile-k", "16", "--swizzle", "128"};
	const char *n[] = {"--tile-n", "100"};
	const char *bad[] = {"--tile-m", "96"};
	const char *unk[] = {"--tile-q", "1"};
	const char *dt[] = {"--dtype", "e5m2"};
	const char *fp4[] = {"--dtype", "e2m1"};

	expect_reject(4, smem, "shared memory");
	expect_reject(4, regs, "consumer role needs about 176 registers/thread, the register file allows 104");
	expect_reject(4, m100, "--tile-m=64");
	expect_reject(4, swz, "swizzle span");
	expect_reject(2, n, "--tile-n=100: must be in 16..256 in steps of 16");
	expect_reject(2, bad, "--tile-m=96: must be one of 8,16,64,128,192,256");
	expect_reject(2, unk, "--tile-q: not a parameter");
	expect_reject(2, dt, "--dtype=e5m2: must be one of bf16,fp16,e4m3,e2m1");
	expect_reject(2, fp4, "--dtype=e2m1: FP4 inputs carry block scales; add --scale nv16");
}

static void
test_gemm_plan_numbers(void)
{
	/* default sm_90a gemm: A 128x64 bf16 = 16384 B, B 256x64 = 32768 B per
	 * stage; 4 stages = 196608 B; 8 barriers = 64 B -> 196672 + 1024 slack. */
	const char *a[] = {"--target", "sm_90a"};
	const char *b[] = {"--target", "sm_100a", "--tile-n", "112"};
	char *text;
	KgErr err;

	CHECK(kgen_plan_text("gemm", 2, a, &text, &err) == 0, "%s", err.msg);
	CHECK(strstr(text, "196672 bytes used, 197696 requested"), "%s", text);
	CHECK(strstr(text, "tx 49152 bytes"), "full barrier tx = stage bytes: %s", text);
	CHECK(strstr(text, "arrivals 8"), "empty barrier: 8 consumer warps: %s", text);
	free(text);
	/* tile-n 112 -> 112 accumulator columns -> 128 allocated */
	CHECK(kgen_plan_text("gemm", 4, b, &text, &err) == 0, "%s", err.msg);
	CHECK(strstr(text, "128 columns allocated"), "%s", text);
	CHECK(strstr(text, "accumulator    columns   0-111"), "%s", text);
	free(text);
}

/* Runs fn in a child with stderr captured: its exit status and message. */
static int
in_child(void (*fn)(void), char *msg, size_t n)
{
	int fd[2], status = -1;
	pid_t pid;
	ssize_t got, at = 0;

	msg[0] = 0;
	if (pipe(fd) != 0)
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], 2);
		fn();
		_exit(0);
	}
	close(fd[1]);
	while (pid > 0 && (size_t)at + 1 < n && (got = read(fd[0], msg + at, n - 1 - (size_t)at)) > 0)
		at += got;
	msg[at] = 0;
	close(fd[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void
overflow_roles(void)
{
	Plan p;

	plan_init(&p, target_find("sm_90a"));
	for (int i = 0; i <= PLAN_MAX_ROLES; i++)
		plan_role(&p, "r", 0, 1, 32, "x");
}

static void
alias_nothing(void)
{
	Plan p;

	plan_init(&p, target_find("sm_100a"));
	plan_tmem_alias(&p, "P", 3, 0, 32, "x");
}

static void
overflow_barriers(void)
{
	Plan p;

	plan_init(&p, target_find("sm_90a"));
	for (int i = 0; i <= PLAN_MAX_BARS; i++)
		plan_barrier(&p, "b", 1, 1, 0, "x");
}

/* A state the planner must never reach stops with exit status 70 and a
 * message naming the file and line, never an index of -1. */
static void
test_bug_stops(void)
{
	char msg[512];
	int st;

	st = in_child(overflow_roles, msg, sizeof msg);
	CHECK(st == KG_EXIT_BUG && st == 70, "roles: status %d", st);
	CHECK(strstr(msg, "kgen: internal error at ") && strstr(msg, "plan.c:") &&
	      strstr(msg, "more than 8 warp roles (r)"), "roles: %s", msg);
	st = in_child(alias_nothing, msg, sizeof msg);
	CHECK(st == 70, "alias: status %d", st);
	CHECK(strstr(msg, "TMEM alias P of region 3, which does not exist"), "alias: %s", msg);
	st = in_child(overflow_barriers, msg, sizeof msg);
	CHECK(st == 70, "barriers: status %d", st);
	CHECK(strstr(msg, "mbarriers (b)"), "barriers: %s", msg);
}

int
main(void)
{
	test_bug_stops();
	test_tmem_columns();
	test_budgets();
	test_gemm_rejections();
	test_gemm_plan_numbers();
	if (fails)
		printf("%d failure(s)\n", fails);
	else
		printf("plan: all passed\n");
	return fails != 0;
}
