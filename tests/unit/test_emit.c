/* emit: deterministic text, typed register pools, exact hex floats, stable
 * labels, template expansion, and whole-kernel determinism. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/emit.h"
#include "gen/kgen.h"

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
test_fimm(void)
{
	/* IEEE-754 single bit patterns, by hand: 1.0 = 0x3F800000,
	 * -2.5 = sign | (128 << 23) | 0x200000 = 0xC0200000,
	 * log2(e) rounded to float = 0x3FB8AA3B, smallest subnormal = 1. */
	static const struct {
		float f;
		const char *want;
	} v[] = {
		{1.0f, "0f3F800000"},
		{-2.5f, "0fC0200000"},
		{1.44269504088896341f, "0f3FB8AA3B"},
		{1.40129846e-45f, "0f00000001"},
		{0.0f, "0f00000000"},
		{-0.0f, "0f80000000"},
	};
	char buf[12];

	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		fimm(buf, v[i].f);
		CHECK(strcmp(buf, v[i].want) == 0, "fimm(%g) = %s, want %s", (double)v[i].f, buf, v[i].want);
	}
}

static void
test_regs_and_labels(void)
{
	Emit e;
	Buf decl = {0};
	Reg a, b, f[3];
	char l1[32], l2[32];

	emit_init(&e);
	a = reg_new(&e, RC_B32);
	b = reg_new(&e, RC_B32);
	reg_array(&e, RC_F32, f, 3);
	CHECK(!strcmp(a.s, "%r1") && !strcmp(b.s, "%r2"), "b32 names %s %s", a.s, b.s);
	CHECK(!strcmp(f[2].s, "%f3"), "f32 name %s", f[2].s);
	CHECK(!strcmp(reg_vec(&e, f, 3), "{%f1, %f2, %f3}"), "reg_vec");
	label_new(&e, l1, sizeof l1, "loop");
	label_new(&e, l2, sizeof l2, "loop");
	CHECK(strcmp(l1, l2) != 0, "labels must be unique: %s %s", l1, l2);
	CHECK(!strcmp(l1, "$L_loop_1"), "label %s", l1);
	emit_reg_decls(&e, &decl);
	CHECK(strstr(decl.p, ".reg .b32 %r<3>;") != NULL, "decls: %s", decl.p);
	CHECK(strstr(decl.p, ".reg .f32 %f<4>;") != NULL, "decls: %s", decl.p);
	CHECK(strstr(decl.p, ".pred") == NULL, "no unused class declared: %s", decl.p);
	emit_need_ptx(&e, 86);
	emit_need_ptx(&e, 80);
	CHECK(e.ptx_version == 86, "ptx version keeps the maximum: %d", e.ptx_version);
	buf_free(&decl);
	emit_free(&e);
}

static void
test_templates(void)
{
	Emit e;
	KgErr err = {{0}};

	emit_init(&e);
	CHECK(emit_template(&e, &err, "mbarrier_wait", "label", "$L_w_1", "pred", "%p1", "bar",
	                    "%r5", "parity", "0", (char *)NULL) == 0,
	      "mbarrier_wait: %s", err.msg);
	CHECK(strstr(e.body.p, "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r5], 0;") != NULL,
	      "expanded: %s", e.body.p);
	CHECK(strstr(e.body.p, "@!%p1 bra $L_w_1;") != NULL, "loop back: %s", e.body.p);
	CHECK(strstr(e.body.p, "//") == NULL, "template comments are not emitted");
	CHECK(emit_template(&e, &err, "mbarrier_wait", "label", "x", (char *)NULL) < 0 &&
	          strstr(err.msg, "not bound"),
	      "unbound placeholder must fail: %s", err.msg);
	CHECK(emit_template(&e, &err, "no_such_template", (char *)NULL) < 0, "unknown template");
	emit_free(&e);
}

static void
test_determinism(void)
{
	static const char *const args[][8] = {
		{"--target", "sm_90a"},
		{"--target", "sm_100a", "--tile-n", "128", "--out-dtype", "f32"},
	};
	for (int i = 0; i < 2; i++) {
		char *a, *b;
		size_t la, lb;
		KgErr err;
		int n = i ? 6 : 2;
		CHECK(kgen_generate("gemm", n, args[i], &a, &la, &err) == 0, "%s", err.msg);
		CHECK(kgen_generate("gemm", n, args[i], &b, &lb, &err) == 0, "%s", err.msg);
		CHECK(la == lb && !memcmp(a, b, la), "same parameters must give the same bytes");
		CHECK(strstr(a, "// @block") != NULL, "provenance comments present");
		CHECK(strstr(a, "//@kgen-abi 1\n") == a, "ABI header first");
		free(a);
		free(b);
	}
}

int
main(void)
{
	test_fimm();
	test_regs_and_labels();
	test_templates();
	test_determinism();
	if (fails)
		printf("%d failure(s)\n", fails);
	else
		printf("emit: all passed\n");
	return fails != 0;
}
