/* libkrt without a GPU: the ABI header parser (docs/ABI.md), its //@shape
 * fields and the shape checks against them, grid expressions, target /
 * PTX-version checks, and the PTX-line -> `// @block` lookup used to
 * explain JIT errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "internal.h"
#include "krt.h"

#include "expect.h"

static const char header[] =
	"//@kgen-abi 1\n"
	"//@kernel gemm_bf16_bf16_m128n256k64_s4_sw128_sm90a\n"
	"//@family gemm\n"
	"//@target sm_90a\n"
	"//@ptx 8.0\n"
	"//@args --target sm_90a --tile-m 128 --tile-n 256 --tile-k 64 --stages 4 --swizzle 128 "
	"--dtype bf16 --out-dtype bf16\n"
	"//@threads 384\n"
	"//@cluster 1 1 1\n"
	"//@smem 197632\n"
	"//@grid cdiv(M,128)*cdiv(N,256) 1 1\n"
	"//@param tmap A dtype=bf16 rank=2 box=64,128 swizzle=128 tensor=A[M,K]\n"
	"//@param tmap B dtype=bf16 rank=2 box=64,256 swizzle=128 tensor=B[N,K]\n"
	"//@param ptr C dtype=bf16 tensor=C[M,N]\n"
	"//@param u32 M\n"
	"//@param u32 N\n"
	"//@param u32 K\n"
	"//@end\n";

/* Body lines start at line 18. */
static const char body[] =
	".version 8.0\n"                                              /* 18 */
	".target sm_90a\n"                                            /* 19 */
	".address_size 64\n"                                          /* 20 */
	"\n"                                                          /* 21 */
	"// @block gemm.entry\n"                                      /* 22 */
	".visible .entry gemm_bf16_bf16_m128n256k64_s4_sw128_sm90a(\n" /* 23 */
	"\t.param .align 128 .b8 A[128]\n"                             /* 24 */
	")\n"                                                         /* 25 */
	"{\n"                                                         /* 26 */
	"\t// @block sm90.wgmma_issue\n"                               /* 27 */
	"\twgmma.fence.sync.aligned;\n"                                /* 28 */
	"\tadd.s32 %r1, %r5, 1;\n"                                     /* 29 */
	"\t// @block sm90.epilogue\n"                                  /* 30 */
	"\tret;\n"                                                     /* 31 */
	"}\n";                                                        /* 32 */

static char *
valid_ptx(void)
{
	static char buf[8192];
	snprintf(buf, sizeof buf, "%s%s", header, body);
	return buf;
}

static void
test_valid(void)
{
	KrtAbi a;
	KrtErr e;
	const char *ptx = valid_ptx();
	EXPECT(krt_abi_parse(ptx, strlen(ptx), &a, &e) == KRT_OK);
	EXPECT(e.code == KRT_OK);
	EXPECT(strcmp(a.kernel, "gemm_bf16_bf16_m128n256k64_s4_sw128_sm90a") == 0);
	EXPECT(strcmp(a.family, "gemm") == 0);
	EXPECT(strcmp(a.target, "sm_90a") == 0);
	EXPECT(a.target_cc == 90);
	EXPECT(a.ptx_major == 8 && a.ptx_minor == 0);
	EXPECT(strcmp(a.args, "--target sm_90a --tile-m 128 --tile-n 256 --tile-k 64 --stages 4 "
	                      "--swizzle 128 --dtype bf16 --out-dtype bf16") == 0);
	EXPECT(a.threads == 384);
	EXPECT(a.cluster[0] == 1 && a.cluster[1] == 1 && a.cluster[2] == 1);
	EXPECT(a.smem == 197632);
	EXPECT(strcmp(a.grid[0], "cdiv(M,128)*cdiv(N,256)") == 0);
	EXPECT(strcmp(a.grid[1], "1") == 0 && strcmp(a.grid[2], "1") == 0);
	EXPECT(a.nparams == 6);

	const KrtAbiParam *p = &a.params[0];
	EXPECT(p->kind == KRT_ARG_TMAP && strcmp(p->name, "A") == 0);
	EXPECT(strcmp(p->dtype, "bf16") == 0 && p->elem_bytes == 2 && p->rank == 2);
	EXPECT(p->box[0] == 64 && p->box[1] == 128 && p->swizzle == 128);
	EXPECT(strcmp(p->tensor, "A[M,K]") == 0);
	p = &a.params[1];
	EXPECT(p->kind == KRT_ARG_TMAP && strcmp(p->name, "B") == 0);
	EXPECT(p->box[0] == 64 && p->box[1] == 256 && strcmp(p->tensor, "B[N,K]") == 0);
	p = &a.params[2];
	EXPECT(p->kind == KRT_ARG_PTR && strcmp(p->name, "C") == 0);
	EXPECT(strcmp(p->dtype, "bf16") == 0 && p->elem_bytes == 2);
	EXPECT(strcmp(p->tensor, "C[M,N]") == 0);
	for (int i = 3; i < 6; i++) {
		EXPECT(a.params[i].kind == KRT_ARG_U32);
		EXPECT(strcmp(a.params[i].name, (const char *[]){"M", "N", "K"}[i - 3]) == 0);
	}

	EXPECT(krt_abi_find(&a, "B") == &a.params[1]);
	EXPECT(krt_abi_find(&a, "K") == &a.params[5]);
	EXPECT(krt_abi_find(&a, "Z") == NULL);
	EXPECT(krt_abi_find(NULL, "A") == NULL);

	/* The body agrees with the header. */
	EXPECT(krt_ptx_check_body(&a, ptx, strlen(ptx), &e) == KRT_OK);

	/* Also: a NULL err is allowed, and the header alone parses. */
	EXPECT(krt_abi_parse(header, strlen(header), &a, NULL) == KRT_OK);
}

static void
test_other_targets(void)
{
	static const char h100[] = "//@kgen-abi 1\n"
	                           "//@kernel k\n"
	                           "//@family fmha\n"
	                           "//@target sm_100a\n"
	                           "//@ptx 8.6\n"
	                           "//@args --target sm_100a\n"
	                           "//@threads 128\n"
	                           "//@cluster 2 1 1\n"
	                           "//@smem 0\n"
	                           "//@grid 2*S 1 H\n"
	                           "//@param tmap Q dtype=e4m3 rank=3 box=128,64,1 swizzle=none "
	                           "tensor=Q[H,S,D]\n"
	                           "//@param ptr O dtype=f32 tensor=O\n"
	                           "//@param s32 S\n"
	                           "//@param u64 H\n"
	                           "//@param f32 scale\n"
	                           "//@end\n";
	KrtAbi a;
	KrtErr e;
	EXPECT(krt_abi_parse(h100, sizeof h100 - 1, &a, &e) == KRT_OK);
	EXPECT(a.target_cc == 100 && a.ptx_major == 8 && a.ptx_minor == 6);
	EXPECT(a.cluster[0] == 2 && a.smem == 0);
	EXPECT(a.params[0].elem_bytes == 1 && a.params[0].rank == 3 && a.params[0].swizzle == 0);
	EXPECT(a.params[0].box[2] == 1);
	EXPECT(a.params[1].elem_bytes == 4);
	EXPECT(a.params[2].kind == KRT_ARG_S32 && a.params[3].kind == KRT_ARG_U64);
	EXPECT(a.params[4].kind == KRT_ARG_F32);
}

/* The valid header with line `line` (1-based) replaced by `with` (NULL:
 * deleted). */
static const char *
mutate(int line, const char *with)
{
	static char out[8192];
	size_t at = 0;
	const char *s = header;
	for (int n = 1; *s; n++) {
		const char *eol = strchr(s, '\n');
		size_t len = (size_t)(eol - s) + 1;
		if (n != line) {
			memcpy(out + at, s, len);
			at += len;
		} else if (with) {
			at += (size_t)sprintf(out + at, "%s\n", with);
		}
		s += len;
	}
	out[at] = 0;
	return out;
}

static void
test_malformed(void)
{
	static const struct {
		int line;           /* replaced */
		const char *with;   /* NULL: deleted */
		const char *where;  /* expected "line N" */
		const char *what;   /* expected in the message */
	} cases[] = {
		{1, "//@kgen-abi 2", "line 1:", "version '2' is not supported"},
		{1, ".version 8.0", "line 1:", "'//@kgen-abi 1'"},
		{3, NULL, "line 3:", "expected '//@family NAME', got the out-of-order key 'target'"},
		{4, "//@target sm90a", "line 4:", "expected a target such as sm_90a"},
		{4, "//@target sm_90x", "line 4:", "expected a target such as sm_90a"},
		{5, "//@ptx 8", "line 5:", "MAJOR.MINOR"},
		{5, "//@ptx 8.10", "line 5:", "MAJOR.MINOR"},
		{6, "//@flags 1", "line 6:", "unknown key 'flags'"},
		{6, "//@args", "line 6:", "'//@args' needs a value"},
		{7, "//@threads 0", "line 7:", "threads per block 1..1024"},
		{7, "//@threads 2048", "line 7:", "threads per block 1..1024"},
		{7, "//@threads  384", "line 7:", "single spaces"},
		{7, "//@threads 384 ", "line 7:", "trailing space"},
		{7, "//@threads\t384", "line 7:", "tab"},
		{8, "//@cluster 1 1", "line 8:", "three cluster dimensions"},
		{8, "//@cluster 1 0 1", "line 8:", "cluster dimension y"},
		{9, "//@smem -5", "line 9:", "shared memory bytes"},
		{9, "//@smem 4294967296", "line 9:", "shared memory bytes"},
		{9, "//@smem 0197632", "line 9:", "shared memory bytes"},
		{10, "//@grid cdiv(M,128)*cdiv(Q,256) 1 1", "line 10:", "unknown name 'Q'"},
		{10, "//@grid cdiv(M,128 1 1", "line 10:", "expected ')'"},
		{10, "//@grid M*N 1", "line 10:", "three grid expressions"},
		{10, "//@grid M* 1 1", "line 10:", "got the end"},
		{11, "//@param tmap A dtype=bf17 rank=2 box=64,128 swizzle=128 tensor=A[M,K]",
		 "line 11:", "unknown dtype 'bf17'"},
		{11, "//@param tmap A dtype=bf16 rank=2 box=64 swizzle=128 tensor=A[M,K]", "line 11:",
		 "box has 1 size but rank=2"},
		{11, "//@param tmap A dtype=bf16 rank=2 box=64,512 swizzle=128 tensor=A[M,K]",
		 "line 11:", "sizes 1..256"},
		{11, "//@param tmap A dtype=bf16 rank=6 box=64,128 swizzle=128 tensor=A[M,K]",
		 "line 11:", "rank must be 1..5"},
		{11, "//@param tmap A dtype=bf16 rank=2 box=64,128 swizzle=16 tensor=A[M,K]",
		 "line 11:", "swizzle must be none, 32, 64 or 128"},
		{11, "//@param tmap A dtype=bf16 rank=2 box=64,128 swizzle=128", "line 11:",
		 "expected 'tensor=DESC' next, got 'end of line'"},
		{11, "//@param tmap A rank=2 dtype=bf16 box=64,128 swizzle=128 tensor=A[M,K]",
		 "line 11:", "expected 'dtype=T' after the name, got 'rank=2'"},
		{12, "//@param tmap A dtype=bf16 rank=2 box=64,256 swizzle=128 tensor=B[N,K]",
		 "line 12:", "'A' is used twice"},
		{13, "//@param f64 C", "line 13:", "unknown param kind 'f64'"},
		{13, "//@param ptr 3C dtype=bf16 tensor=C[M,N]", "line 13:", "param name '3C'"},
		{14, "//@param u32 M extra=1", "line 14:", "unexpected 'extra=1'"},
		{13, "//@param ptr C dtype=bf16 tensor=C[M,N] align=24", "line 13:",
		 "ptr param C: align must be a power of two 1..256, got '24'"},
		{13, "//@param ptr C dtype=bf16 tensor=C[M,N] align=512", "line 13:",
		 "align must be a power of two 1..256, got '512'"},
		{13, "//@param ptr C dtype=bf16 tensor=C[M,N] align=16 x=1", "line 13:", "unexpected 'x=1'"},
		{14, "//@param u32 M align=4", "line 14:", "unexpected 'align=4'"},
		{17, "//@param u32 L", "line 18:", "end of the PTX where '//@end"},
		{17, "//@end now", "line 17:", "'//@end' takes no value"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *ptx = mutate(cases[i].line, cases[i].with);
		KrtAbi a;
		KrtErr e;
		int rc = krt_abi_parse(ptx, strlen(ptx), &a, &e);
		if (rc != KRT_EABI || e.code != KRT_EABI || !strstr(e.msg, cases[i].where) ||
		    !strstr(e.msg, cases[i].what)) {
			fprintf(stderr, "%s:%d: FAIL: malformed case %zu (%s): rc %d\n  msg: %s\n",
			        __FILE__, __LINE__, i, cases[i].with ? cases[i].with : "(deleted)", rc,
			        e.msg);
			failures++;
		}
	}

	/* A ptr's optional align=N: parsed, and 0 where absent. */
	{
		const char *ptx = mutate(13, "//@param ptr C dtype=bf16 tensor=C[M,N] align=16");
		KrtAbi a16;
		KrtErr e16;
		EXPECT(krt_abi_parse(ptx, strlen(ptx), &a16, &e16) == KRT_OK);
		EXPECT(a16.params[2].kind == KRT_ARG_PTR && a16.params[2].align == 16);
		ptx = mutate(13, "//@param ptr C dtype=bf16 tensor=C[M,N]");
		EXPECT(krt_abi_parse(ptx, strlen(ptx), &a16, &e16) == KRT_OK && a16.params[2].align == 0);
	}

	/* The header must end with //@end before the body. */
	char buf[8192];
	snprintf(buf, sizeof buf, "%.*s%s", (int)(strlen(header) - 7), header, body);
	KrtAbi a;
	KrtErr e;
	EXPECT(krt_abi_parse(buf, strlen(buf), &a, &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "line 17:", "expected '//@end'", ".version 8.0");

	/* Empty input and a PTX without a header. */
	EXPECT(krt_abi_parse("", 0, &a, &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "line 1:", "end of the PTX", "//@kgen-abi");
	EXPECT(krt_abi_parse(body, strlen(body), &a, &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "line 1:", "//@kgen-abi 1");

	/* A grid that names a non-integer param. */
	snprintf(buf, sizeof buf, "%s", mutate(10, "//@grid K 1 1"));
	memcpy(strstr(buf, "//@param u32 K"), "//@param f32 K", 14);
	EXPECT(krt_abi_parse(buf, strlen(buf), &a, &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "line 10:", "'K' is a f32 param");
}

static void
test_body_check(void)
{
	KrtAbi a;
	KrtErr e;
	const char *ptx = valid_ptx();
	EXPECT(krt_abi_parse(ptx, strlen(ptx), &a, &e) == KRT_OK);
	char buf[8192];

	snprintf(buf, sizeof buf, "%s%s", header, body);
	memcpy(strstr(buf, ".version 8.0"), ".version 8.6", 12);
	EXPECT(krt_ptx_check_body(&a, buf, strlen(buf), &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "//@ptx 8.0", "PTX line 18 says .version 8.6");

	snprintf(buf, sizeof buf, "%s%s", header, body);
	memcpy(strstr(buf, ".target sm_90a"), ".target sm_90 ", 14);
	EXPECT(krt_ptx_check_body(&a, buf, strlen(buf), &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "//@target sm_90a", ".target sm_90");

	snprintf(buf, sizeof buf, "%s%s", header, body);
	memcpy(strstr(buf, "gemm_bf16_bf16_m128n256k64_s4_sw128_sm90a("), "x", 1);
	EXPECT(krt_ptx_check_body(&a, buf, strlen(buf), &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "no '.entry gemm_bf16_bf16_m128n256k64_s4_sw128_sm90a'");

	EXPECT(krt_ptx_check_body(&a, header, strlen(header), &e) == KRT_EABI);
	EXPECT_MSG(e.msg, "no .version");
}

/* ---- grid expressions ------------------------------------------------------ */

static KrtAbi grid_abi;

static void
set_args(KrtArg *args, uint32_t m, uint32_t n, uint32_t k)
{
	memset(args, 0, 6 * sizeof *args);
	args[0].kind = args[1].kind = KRT_ARG_TMAP;
	args[2].kind = KRT_ARG_PTR;
	args[3].kind = args[4].kind = args[5].kind = KRT_ARG_U32;
	args[3].v.u32 = m;
	args[4].v.u32 = n;
	args[5].v.u32 = k;
}

static uint64_t
eval_ok(const char *expr, const KrtArg *args)
{
	uint64_t v = 0;
	KrtErr e;
	int rc = krt_expr_eval(expr, &grid_abi, args, &v, &e);
	if (rc != KRT_OK) {
		fprintf(stderr, "  '%s' failed: %s\n", expr, e.msg);
		failures++;
	}
	return v;
}

static void
test_expr(void)
{
	KrtErr e;
	EXPECT(krt_abi_parse(header, strlen(header), &grid_abi, &e) == KRT_OK);
	KrtArg args[6];
	set_args(args, 1000, 1000, 64);
	EXPECT(eval_ok("cdiv(M,128)*cdiv(N,256)", args) == 8 * 4);
	EXPECT(eval_ok("7", args) == 7);
	EXPECT(eval_ok("0", args) == 0);
	EXPECT(eval_ok("M*N*K", args) == 64000000);
	EXPECT(eval_ok("cdiv(cdiv(M,2),3)", args) == 167);
	EXPECT(eval_ok("cdiv(M*2,K)", args) == 32);
	EXPECT(eval_ok("cdiv(1024,K)*2", args) == 32);
	EXPECT(eval_ok("cdiv(0,K)", args) == 0);
	EXPECT(eval_ok("cdiv(M,1)", args) == 1000);
	/* sums of products ('*' binds tighter), also inside cdiv */
	EXPECT(eval_ok("cdiv(M,128)*cdiv(N,256)+K*cdiv(N,256)", args) == 8 * 4 + 64 * 4);
	EXPECT(eval_ok("1+2*3", args) == 7);
	EXPECT(eval_ok("cdiv(M+K,8)", args) == 133);
	/* Names only, no args: every name counts as 1. */
	EXPECT(eval_ok("cdiv(M,128)*N", NULL) == 1);

	static const struct {
		const char *expr;
		const char *what;
	} bad[] = {
		{"cdiv(M,128)*Q", "unknown name 'Q' at column 13 (integer params: M, N, K)"},
		{"cdivx(M,1)", "unknown name 'cdivx'"},
		{"A", "'A' is a tmap param"},
		{"cdiv", "expected '(' after cdiv"},
		{"cdiv(M)", "expected ',' in cdiv"},
		{"cdiv(M,128", "expected ')'"},
		{"M**N", "expected a number, a name or cdiv( at column 3, got '*'"},
		{"M*", "got the end"},
		{"", "got the end"},
		{"M N", "unexpected ' ' at column 2"},
		{"(M)", "got '('"},
		{"M+", "got the end"},
		{"+M", "got '+'"},
		{"M++N", "at column 3, got '+'"},
		{"18446744073709551615+1", "overflow: 18446744073709551615 + 1"},
		{"012", "leading zero"},
		{"99999999999999999999", "does not fit in 64 bits"},
		{"cdiv(M,0)", "division by zero in cdiv(M,0)"},
		{"cdiv(M,K*0)", "division by zero in cdiv(M,K*0)"},
		{"4294967296*4294967296", "overflow: 4294967296 * 4294967296"},
		{"cdiv(18446744073709551615,2)", "overflow in cdiv("},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint64_t v = 123;
		int rc = krt_expr_eval(bad[i].expr, &grid_abi, args, &v, &e);
		char want[160];
		snprintf(want, sizeof want, "grid expression '%s'", bad[i].expr);
		if (rc != KRT_EINVAL || !strstr(e.msg, bad[i].what) || !strstr(e.msg, want) || v) {
			fprintf(stderr, "%s:%d: FAIL: expr '%s': rc %d v %llu\n  msg: %s\n", __FILE__,
			        __LINE__, bad[i].expr, rc, (unsigned long long)v, e.msg);
			failures++;
		}
	}

	/* Division by zero through a runtime value. */
	set_args(args, 1000, 1000, 0);
	uint64_t v;
	EXPECT(krt_expr_eval("cdiv(M,K)", &grid_abi, args, &v, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "division by zero in cdiv(M,K)");

	/* An arg of the wrong kind. */
	set_args(args, 1, 1, 1);
	args[3].kind = KRT_ARG_U64;
	EXPECT(krt_expr_eval("M", &grid_abi, args, &v, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 3 (M) is u64, the ABI says u32");
}

static void
test_grid(void)
{
	KrtErr e;
	KrtAbi a = grid_abi;
	KrtArg args[6];
	uint32_t g[3];

	set_args(args, 4096, 4096, 4096);
	EXPECT(krt_grid_eval(&a, args, g, &e) == KRT_OK);
	EXPECT(g[0] == 32 * 16 && g[1] == 1 && g[2] == 1);

	/* Overflow past 2^31-1 for x. */
	snprintf(a.grid[0], sizeof a.grid[0], "M*N");
	set_args(args, 65536, 32768, 1);
	EXPECT(krt_grid_eval(&a, args, g, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "grid x = M*N = 2147483648", "overflow past the limit 2147483647",
	           "M=65536", "N=32768");
	set_args(args, 65535, 32768, 1);
	EXPECT(krt_grid_eval(&a, args, g, &e) == KRT_OK);
	EXPECT(g[0] == 65535u * 32768u);

	/* 65535 for y and z. */
	a = grid_abi;
	snprintf(a.grid[1], sizeof a.grid[1], "M");
	snprintf(a.grid[2], sizeof a.grid[2], "K");
	set_args(args, 65535, 1, 65535);
	EXPECT(krt_grid_eval(&a, args, g, &e) == KRT_OK && g[1] == 65535 && g[2] == 65535);
	set_args(args, 65536, 1, 1);
	EXPECT(krt_grid_eval(&a, args, g, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "grid y = M = 65536", "limit 65535");
	set_args(args, 1, 1, 70000);
	EXPECT(krt_grid_eval(&a, args, g, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "grid z = K = 70000", "limit 65535");

	/* An empty grid is refused. */
	set_args(args, 0, 1, 1);
	EXPECT(krt_grid_eval(&grid_abi, args, g, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "grid x = cdiv(M,128)*cdiv(N,256) is 0", "M=0");

	/* Expression errors carry the kernel, the dimension and the values. */
	a = grid_abi;
	snprintf(a.grid[0], sizeof a.grid[0], "cdiv(M,K)");
	set_args(args, 5, 5, 0);
	EXPECT(krt_grid_eval(&a, args, g, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "gemm_bf16_bf16_m128n256k64_s4_sw128_sm90a", "grid x", "K=0",
	           "division by zero");
}

/* ---- targets and versions ------------------------------------------------- */

static void
test_versions(void)
{
	static const struct {
		int drv, isa;
	} t[] = {
		{12000, 80}, {12010, 81}, {12020, 82}, {12030, 83}, {12040, 84}, {12050, 85},
		{12060, 85}, {12080, 87}, {12090, 88}, {13000, 90}, {13010, 91}, {13020, 92},
		{12070, 85}, {13030, 92}, {14000, 92}, {11080, 78}, {10020, 0},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (krt_driver_ptx_isa(t[i].drv) != t[i].isa) {
			fprintf(stderr, "%s:%d: FAIL: driver %d -> ISA %d, want %d\n", __FILE__, __LINE__,
			        t[i].drv, krt_driver_ptx_isa(t[i].drv), t[i].isa);
			failures++;
		}

	KrtAbi a;
	KrtErr e;
	EXPECT(krt_abi_parse(header, strlen(header), &a, &e) == KRT_OK);
	EXPECT(krt_ptx_version_check(&a, 80, 12000, &e) == KRT_OK);
	a.ptx_major = 9;
	a.ptx_minor = 1;
	EXPECT(krt_ptx_version_check(&a, krt_driver_ptx_isa(13000), 13000, &e) == KRT_EMISMATCH);
	EXPECT_MSG(e.msg, "PTX ISA 9.1", "CUDA 13.0", "up to 9.0", a.kernel);
	EXPECT(krt_ptx_version_check(&a, 91, 13010, &e) == KRT_OK);

	a.ptx_major = 8;
	a.ptx_minor = 0;
	EXPECT(krt_target_check(&a, 90, "NVIDIA H100 80GB HBM3", &e) == KRT_OK);
	EXPECT(krt_target_check(&a, 100, "NVIDIA B200", &e) == KRT_EMISMATCH);
	EXPECT_MSG(e.msg, "PTX target sm_90a cannot run on an sm_100 device (NVIDIA B200)",
	           "compute capability 9.0 exactly");
	snprintf(a.target, sizeof a.target, "sm_100a");
	EXPECT(krt_target_check(&a, 90, "NVIDIA H100 80GB HBM3", &e) == KRT_EMISMATCH);
	EXPECT_MSG(e.msg,
	           "kernel gemm_bf16_bf16_m128n256k64_s4_sw128_sm90a: PTX target sm_100a cannot "
	           "run on an sm_90 device (NVIDIA H100 80GB HBM3)");
	EXPECT(krt_target_check(&a, 103, "B300", &e) == KRT_EMISMATCH);
	snprintf(a.target, sizeof a.target, "sm_100f");
	EXPECT(krt_target_check(&a, 103, "B300", &e) == KRT_OK);
	EXPECT(krt_target_check(&a, 110, "next", &e) == KRT_EMISMATCH);
	snprintf(a.target, sizeof a.target, "sm_90");
	EXPECT(krt_target_check(&a, 100, "B200", &e) == KRT_OK);
	EXPECT(krt_target_check(&a, 80, "A100", &e) == KRT_EMISMATCH);

	int cc;
	char suf;
	EXPECT(krt_target_parse("sm_100a", &cc, &suf) == 0 && cc == 100 && suf == 'a');
	EXPECT(krt_target_parse("sm_90", &cc, &suf) == 0 && cc == 90 && suf == 0);
	EXPECT(krt_target_parse("sm_90b", &cc, &suf) == -1);
	EXPECT(krt_target_parse("compute_90a", &cc, &suf) == -1);
	EXPECT(krt_target_parse("sm_", &cc, &suf) == -1);
}

/* ---- PTX line -> // @block --------------------------------------------------- */

static void
test_blocks(void)
{
	const char *ptx = valid_ptx();
	size_t len = strlen(ptx);
	char block[64], text[128];

	EXPECT(krt_ptx_block_at(ptx, len, 1, block, sizeof block, text, sizeof text) == 0);
	EXPECT(strcmp(text, "//@kgen-abi 1") == 0 && block[0] == 0);
	EXPECT(krt_ptx_block_at(ptx, len, 21, block, sizeof block, text, sizeof text) == 0);
	EXPECT(text[0] == 0);
	EXPECT(krt_ptx_block_at(ptx, len, 22, block, sizeof block, text, sizeof text) == 1);
	EXPECT(strcmp(block, "gemm.entry") == 0);
	EXPECT(krt_ptx_block_at(ptx, len, 24, block, sizeof block, text, sizeof text) == 1);
	EXPECT(strcmp(block, "gemm.entry") == 0 && strcmp(text, "\t.param .align 128 .b8 A[128]") == 0);
	EXPECT(krt_ptx_block_at(ptx, len, 29, block, sizeof block, text, sizeof text) == 1);
	EXPECT(strcmp(block, "sm90.wgmma_issue") == 0);
	EXPECT(strcmp(text, "\tadd.s32 %r1, %r5, 1;") == 0);
	EXPECT(krt_ptx_block_at(ptx, len, 31, block, sizeof block, NULL, 0) == 1);
	EXPECT(strcmp(block, "sm90.epilogue") == 0);
	EXPECT(krt_ptx_block_at(ptx, len, 32, NULL, 0, text, sizeof text) == 1);
	EXPECT(strcmp(text, "}") == 0);
	EXPECT(krt_ptx_block_at(ptx, len, 33, block, sizeof block, text, sizeof text) == -1);
	EXPECT(krt_ptx_block_at(ptx, len, 0, block, sizeof block, text, sizeof text) == -1);
	/* A short output buffer truncates. */
	EXPECT(krt_ptx_block_at(ptx, len, 29, block, 5, text, 4) == 1);
	EXPECT(strcmp(block, "sm90") == 0 && strcmp(text, "\tad") == 0);

	/* A JIT log, as the driver writes it (docs/hardware.md, "Driver JIT logs"). */
	const char *log = "ptxas application ptx input, line 29; error   : Unknown symbol '%r5'\n"
	                  "ptxas application ptx input, line 29; error   : again\n"
	                  "ptxas application ptx input, line 20; warning : something\n"
	                  "ptxas application ptx input, line 99; error   : past the end\n"
	                  "ptxas fatal   : Ptx assembly aborted due to errors\n";
	char out[2048];
	EXPECT(krt_jit_log_explain(ptx, len, log, out, sizeof out) == 3);
	EXPECT_MSG(out, "PTX line 29 is in block sm90.wgmma_issue: add.s32 %r1, %r5, 1;",
	           "PTX line 20 (before any // @block): .address_size 64",
	           "PTX line 99: past the end of the PTX");
	EXPECT(krt_jit_log_explain(ptx, len, "ptxas fatal : no lines", out, sizeof out) == 0);
	EXPECT(out[0] == 0);
	EXPECT(krt_jit_log_explain(ptx, len, "pipeline 12 baseline 3", out, sizeof out) == 0);
}

/* The fmha header of test_shape: Q and K as kgen writes them. */
static const char fmha_header[] =
	"//@kgen-abi 1\n"
	"//@kernel k\n"
	"//@family fmha\n"
	"//@target sm_90a\n"
	"//@ptx 8.0\n"
	"//@args --heads-q 16 --heads-kv 2\n"
	"//@shape Hq=16 Hkv=2 D=128 Dv=64 mask=causal lse=0 pack=1 kv-shared=0\n"
	"//@threads 384\n"
	"//@cluster 1 1 1\n"
	"//@smem 0\n"
	"//@grid 1 1 1\n"
	"//@param tmap Q dtype=bf16 rank=3 box=64,1,64 swizzle=128 tensor=Q[total_q,Hq,D]\n"
	"//@param tmap K dtype=bf16 rank=3 box=64,1,64 swizzle=128 tensor=K[total_k,Hkv,D]\n"
	"//@param tmap V dtype=bf16 rank=3 box=64,1,64 swizzle=128 tensor=V[total_k,Hkv,Dv]\n"
	"//@param u32 batch\n"
	"//@end\n";

static void
tensor3(KrtArg *a, uint64_t d0, uint64_t d1, uint64_t d2)
{
	memset(a, 0, sizeof *a);
	a->kind = KRT_ARG_TMAP;
	a->v.t.rank = 3;
	a->v.t.dims[0] = d0;
	a->v.t.dims[1] = d1;
	a->v.t.dims[2] = d2;
}

/* //@shape: parsed as NAME=VALUE fields, optional, malformed lines refused
 * with the line; the caller's dims and scalars checked against it with a
 * message naming the argument, its value and the field. */
static void
test_shape(void)
{
	KrtAbi a;
	KrtErr e;
	KrtArg args[4];

	EXPECT(krt_abi_parse(fmha_header, sizeof fmha_header - 1, &a, &e) == KRT_OK);
	EXPECT(a.nshape == 8 && a.threads == 384);
	EXPECT(krt_abi_shape(&a, "Hq") && strcmp(krt_abi_shape(&a, "Hq"), "16") == 0);
	EXPECT(krt_abi_shape(&a, "kv-shared") && strcmp(krt_abi_shape(&a, "kv-shared"), "0") == 0);
	EXPECT(krt_abi_shape(&a, "window") == NULL);
	EXPECT(krt_abi_parse(header, sizeof header - 1, &a, &e) == KRT_OK && a.nshape == 0);

	/* Q [total_q=300, Hq=16, D=128], K and V [total_k=500, Hkv=2, D / Dv] */
	EXPECT(krt_abi_parse(fmha_header, sizeof fmha_header - 1, &a, &e) == KRT_OK);
	tensor3(&args[0], 128, 16, 300);
	tensor3(&args[1], 128, 2, 500);
	tensor3(&args[2], 64, 2, 500);
	memset(&args[3], 0, sizeof args[3]);
	args[3].kind = KRT_ARG_U32;
	args[3].v.u32 = 7; /* no multiple rule applies to fmha */
	EXPECT(krt_shape_check(&a, args, 4, &e) == KRT_OK);
	args[0].v.t.dims[1] = 8;
	EXPECT(krt_shape_check(&a, args, 4, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "kernel k: arg 0 (Q): dims[1]=8 (heads of Q[total_q,Hq,D]): must equal "
	                  "Hq=16 of the kernel's //@shape");
	args[0].v.t.dims[1] = 16;
	args[1].v.t.dims[0] = 64;
	EXPECT(krt_shape_check(&a, args, 4, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 1 (K): dims[0]=64 (head dim of K[total_k,Hkv,D]): must equal D=128");
	args[1].v.t.dims[0] = 128;
	args[2].v.t.dims[1] = 1;
	EXPECT(krt_shape_check(&a, args, 4, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 2 (V): dims[1]=1", "must equal Hkv=2");
	args[2].v.t.dims[1] = 2;
	args[2].v.t.rank = 1;
	EXPECT(krt_shape_check(&a, args, 4, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 2 (V): dims[1]=0", "must equal Hkv=2");

	/* gemm: K a multiple of kmult */
	{
		char h[sizeof header + 32];
		const char *args_end = strstr(header, "//@threads");
		snprintf(h, sizeof h, "%.*s//@shape kmult=8\n%s", (int)(args_end - header), header,
		         args_end);
		KrtArg g[6];
		EXPECT(krt_abi_parse(h, strlen(h), &a, &e) == KRT_OK);
		memset(g, 0, sizeof g);
		for (int i = 3; i < 6; i++)
			g[i].kind = KRT_ARG_U32;
		g[3].v.u32 = 1000;
		g[4].v.u32 = 1000;
		g[5].v.u32 = 1000;
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_OK);
		g[5].v.u32 = 1001;
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_EINVAL);
		EXPECT_MSG(e.msg, "arg 5 (K)=1001: must be a multiple of 8 (//@shape kmult=8");
	}
	/* block-scaled gemm: K a multiple of the scale block too */
	{
		char h[sizeof header + 48];
		const char *args_end = strstr(header, "//@threads");
		snprintf(h, sizeof h, "%.*s//@shape kmult=16 kblock=128\n%s", (int)(args_end - header),
		         header, args_end);
		KrtArg g[6];
		EXPECT(krt_abi_parse(h, strlen(h), &a, &e) == KRT_OK);
		memset(g, 0, sizeof g);
		for (int i = 3; i < 6; i++)
			g[i].kind = KRT_ARG_U32;
		g[3].v.u32 = g[4].v.u32 = 1000;
		g[5].v.u32 = 256;
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_OK);
		g[5].v.u32 = 1008;
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_EINVAL);
		EXPECT_MSG(e.msg, "arg 5 (K)=1008: must be a multiple of 128 (//@shape kblock=128",
		           "scales per kblock elements of K");
	}
	/* SwiGLU gemm: N of whole gate and up halves */
	{
		char h[sizeof header + 64];
		const char *args_end = strstr(header, "//@threads");
		snprintf(h, sizeof h, "%.*s//@shape kmult=16 kblock=128 nmult=256\n%s", (int)(args_end - header),
		         header, args_end);
		KrtArg g[6];
		EXPECT(krt_abi_parse(h, strlen(h), &a, &e) == KRT_OK);
		memset(g, 0, sizeof g);
		for (int i = 3; i < 6; i++)
			g[i].kind = KRT_ARG_U32;
		g[3].v.u32 = 1000;
		g[4].v.u32 = 6144;
		g[5].v.u32 = 7168;
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_OK);
		g[4].v.u32 = 6016;
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_EINVAL);
		EXPECT_MSG(e.msg, "arg 4 (N)=6016: must be a multiple of 256 (//@shape nmult=256", "gate and up halves");
	}

	/* W4A8: B's tensor rows are K/2 bytes of E2M1 codes */
	{
		char h[sizeof header + 64];
		const char *args_end = strstr(header, "//@threads");
		snprintf(h, sizeof h, "%.*s//@shape kmult=16 kblock=128 weights=e2m1\n%s", (int)(args_end - header),
		         header, args_end);
		KrtArg g[6];
		EXPECT(krt_abi_parse(h, strlen(h), &a, &e) == KRT_OK);
		memset(g, 0, sizeof g);
		g[0].kind = g[1].kind = KRT_ARG_TMAP;
		g[0].v.t.rank = g[1].v.t.rank = 2;
		g[0].v.t.dims[0] = 7168;
		g[1].v.t.dims[0] = 3584;
		for (int i = 3; i < 6; i++)
			g[i].kind = KRT_ARG_U32;
		g[3].v.u32 = 8;
		g[4].v.u32 = 4096;
		g[5].v.u32 = 7168;
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_OK);
		g[1].v.t.dims[0] = 7168; /* B given as one byte per weight */
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_EINVAL);
		EXPECT_MSG(e.msg, "arg 1 (B): dims[0]=7168: must be K/2 = 3584 (//@shape weights=e2m1",
		           "two per byte");
		g[1].v.t.dims[0] = 3584;
		g[0].v.t.dims[0] = 1; /* a plain gemm header has no such rule for A */
		EXPECT(krt_shape_check(&a, g, 6, &e) == KRT_OK);
	}

	/* malformed lines name the field and the rule */
	static const struct {
		const char *line, *want;
	} bad[] = {
		{"//@shape kmult", "shape field 'kmult': expected NAME=VALUE"},
		{"//@shape =8", "shape field '=8': expected NAME=VALUE"},
		{"//@shape k=", "shape field 'k=': expected NAME=VALUE"},
		{"//@shape a=1 a=2", "shape field 'a' given twice"},
		{"//@shape k!=1", "shape field name 'k!'"},
		{"//@shape", "'//@shape' needs a value"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char h[sizeof header + 64];
		const char *args_end = strstr(header, "//@threads");
		snprintf(h, sizeof h, "%.*s%s\n%s", (int)(args_end - header), header, bad[i].line,
		         args_end);
		EXPECT(krt_abi_parse(h, strlen(h), &a, &e) == KRT_EABI);
		EXPECT_MSG(e.msg, "line 7:", bad[i].want);
	}
}

/* kgen writes //@shape from the configured kernel and leaves the window
 * out of //@args and //@shape unless the mask is a window. */
static void
test_shape_generated(void)
{
	static const char *const win[] = {"--heads-q", "16", "--heads-kv", "2", "--mask", "window",
	                                  "--window-left", "64", "--window-right", "8"};
	static const char *const none[] = {"--heads-q", "8", "--heads-kv", "8", "--mask", "none",
	                                   "--window-left", "64", "--head-dim-v", "64"};
	static const char *const gemm[] = {"--dtype", "bf16"};
	char *ptx = NULL;
	size_t len = 0;
	KgErr ke;
	KrtAbi a;
	KrtErr e;

	EXPECT(kgen_generate("fmha", 10, win, &ptx, &len, &ke) == 0);
	EXPECT(ptx && krt_abi_parse(ptx, len, &a, &e) == KRT_OK);
	EXPECT(strstr(a.args, "--window-left 64 --window-right 8") != NULL);
	EXPECT(krt_abi_shape(&a, "window") && strcmp(krt_abi_shape(&a, "window"), "64,8") == 0);
	EXPECT(krt_abi_shape(&a, "Hkv") && strcmp(krt_abi_shape(&a, "Hkv"), "2") == 0);
	EXPECT(krt_abi_shape(&a, "mask") && strcmp(krt_abi_shape(&a, "mask"), "window") == 0);
	free(ptx);
	ptx = NULL;
	EXPECT(kgen_generate("fmha", 10, none, &ptx, &len, &ke) == 0);
	EXPECT(ptx && krt_abi_parse(ptx, len, &a, &e) == KRT_OK);
	EXPECT(strstr(a.args, "window") == NULL);
	EXPECT(krt_abi_shape(&a, "window") == NULL);
	EXPECT(krt_abi_shape(&a, "D") && strcmp(krt_abi_shape(&a, "D"), "128") == 0);
	EXPECT(krt_abi_shape(&a, "Dv") && strcmp(krt_abi_shape(&a, "Dv"), "64") == 0);
	EXPECT(krt_abi_shape(&a, "mask") && strcmp(krt_abi_shape(&a, "mask"), "none") == 0);
	free(ptx);
	ptx = NULL;
	EXPECT(kgen_generate("gemm", 2, gemm, &ptx, &len, &ke) == 0);
	EXPECT(ptx && krt_abi_parse(ptx, len, &a, &e) == KRT_OK);
	EXPECT(a.nshape == 1 && krt_abi_shape(&a, "kmult") &&
	       strcmp(krt_abi_shape(&a, "kmult"), "8") == 0);
	free(ptx);
}

int
main(void)
{
	test_valid();
	test_other_targets();
	test_malformed();
	test_body_check();
	test_expr();
	test_grid();
	test_versions();
	test_blocks();
	test_shape();
	test_shape_generated();
	if (failures) {
		fprintf(stderr, "test_abi: %d failure%s\n", failures, failures == 1 ? "" : "s");
		return 1;
	}
	printf("test_abi: ok\n");
	return 0;
}
