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

/* The final text of e: declarations, a blank line, the body. */
static char *
text_of(Emit *e)
{
	Buf o = {0};

	emit_reg_decls(e, &o);
	buf_printf(&o, "\n");
	emit_body_text(e, &o);
	return o.p;
}

static void
test_regs_and_labels(void)
{
	Emit e;
	Reg a, b, f[3];
	char l1[32], l2[32], *t;

	emit_init(&e);
	a = reg_new(&e, RC_B32);
	b = reg_new(&e, RC_B32);
	reg_array(&e, RC_F32, f, 3);
	CHECK(strcmp(a.s, b.s) != 0 && strcmp(f[0].s, f[2].s) != 0, "distinct: %s %s", a.s, b.s);
	CHECK(a.s[0] == '%' && a.s[1] == '#', "a placeholder until written out: %s", a.s);
	label_new(&e, l1, sizeof l1, "loop");
	label_new(&e, l2, sizeof l2, "loop");
	CHECK(strcmp(l1, l2) != 0, "labels must be unique: %s %s", l1, l2);
	emitf(&e, "\tmov.u32 %s, 1;\n", a.s); /* before any block: prefix k */
	emit_block(&e, "fam.prologue");
	emitf(&e, "%s:\n\tadd.u32 %s, %s, %s;\n", l2, b.s, a.s, a.s);
	emitf(&e, "\tmov.b32 %s, 0;\n\tbra %s;\n", reg_vec(&e, f, 3), l1);
	emit_block(&e, "sm9.fam_tile_first");
	emitf(&e, "%s:\n", l1);
	t = text_of(&e);
	/* first appearance decides the block: a is used first before any
	 * block, b and f in the prologue, both labels there too; allocation
	 * order the number (l1 before l2) */
	CHECK(strstr(t, "\tmov.u32 %k_r0, 1;\n") != NULL, "pre-block prefix k: %s", t);
	CHECK(strstr(t, "$L_prol_loop_2:\n\tadd.u32 %prol_r0, %k_r0, %k_r0;\n") != NULL,
	      "one word: its first 4 letters; numbered in allocation order from 1: %s", t);
	CHECK(strstr(t, "mov.b32 {%prol_f0, %prol_f1, %prol_f2}, 0;\n\tbra $L_prol_loop_1;") != NULL,
	      "reg_vec; registers count from 0: %s", t);
	CHECK(strstr(t, "// @block sm9.fam_tile_first\n$L_prol_loop_1:\n") != NULL,
	      "a label keeps the name of its first appearance: %s", t);
	CHECK(strstr(t, "\t.reg .b32 %k_r<1>;\n\t.reg .b32 %prol_r<1>;\n\t.reg .f32 %prol_f<3>;\n") == t,
	      "one declaration per (prefix, class), in block order: %s", t);
	CHECK(strstr(t, ".pred") == NULL && strchr(t, '#') == NULL, "no unused class, no placeholder: %s", t);
	free(t);
	emit_need_ptx(&e, 86);
	emit_need_ptx(&e, 80);
	CHECK(e.ptx_version == 86, "ptx version keeps the maximum: %d", e.ptx_version);
	emit_free(&e);
}

/* Prefixes: the family word of the last component dropped once it has
 * been seen as a first component, initials of several words, first 4
 * letters of one, collisions numbered, explicit ones cleaned and cut. */
static void
test_prefixes(void)
{
	static const struct {
		const char *block, *as, *want;
	} v[] = {
		{"fam.prologue", NULL, "prol"},
		{"sm9.fam_tile_first", NULL, "tf"},
		{"sm9.fam_softmax", NULL, "soft"},
		{"sm9.fam_tile_fast", NULL, "tf2"},
		{"sm9.other_x", NULL, "ox"},    /* "other" is no block's first component */
		{"fam.tile_counts", NULL, "tc"},
		{"sm9.fam_a_b_c_d_e", NULL, "abcd"},
		{"qk", "1q-k_scores", "qksc"},    /* explicit: from the first letter, [A-Za-z0-9] */
		{"sm9.fam_softmax", "zz", "soft"}, /* the first call fixed the prefix */
	};
	Emit e;
	char want[32], *t;

	emit_init(&e);
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		Reg r = reg_new(&e, RC_PRED);
		if (v[i].as)
			emit_block_as(&e, v[i].block, v[i].as);
		else
			emit_block(&e, v[i].block);
		emitf(&e, "\t@%s bra X;\n", r.s);
	}
	t = text_of(&e);
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		snprintf(want, sizeof want, "%s\n\t@%%%s_p%d bra", v[i].block, v[i].want,
		         strcmp(v[i].block, "sm9.fam_softmax") == 0 && v[i].as ? 1 : 0);
		CHECK(strstr(t, want) != NULL, "block %s: want prefix %s in\n%s", v[i].block, v[i].want, t);
	}
	CHECK(strstr(t, ".reg .pred %soft_p<2>;") != NULL, "a re-entered block keeps counting: %s", t);
	free(t);
	emit_free(&e);
}

/* Builds blocks A, B, A again, C; `extra` 1 adds one register and one label
 * in the first A, 2 one register at the top of B, made after B's others.
 * Returns the final text. */
static char *
three_blocks(int extra)
{
	Emit e;
	Reg acc[4], t;
	char l[32], *s;

	emit_init(&e);
	reg_array(&e, RC_F32, acc, 4); /* allocated early, first used in B */
	emit_block(&e, "fam.alpha");
	t = reg_new(&e, RC_B32);
	emitf(&e, "\tmov.u32 %s, 0;\n", t.s);
	if (extra == 1) {
		Reg x = reg_new(&e, RC_B32);
		label_new(&e, l, sizeof l, "extra");
		emitf(&e, "%s:\n\tadd.u32 %s, %s, 1;\n", l, x.s, t.s);
	}
	label_new(&e, l, sizeof l, "wait");
	emitf(&e, "%s:\n\tmov.u32 %s, %s;\n", l, reg_new(&e, RC_B32).s, t.s);
	emit_block(&e, "fam.beta");
	if (extra == 2) /* made after acc, used before it */
		emitf(&e, "\tmov.f32 %s, 0f3F800000;\n", reg_new(&e, RC_F32).s);
	for (int i = 0; i < 4; i++)
		emitf(&e, "\tmov.f32 %s, 0f00000000;\n", acc[i].s);
	label_new(&e, l, sizeof l, "wait");
	emitf(&e, "%s:\n\tmov.u32 %s, %s;\n", l, reg_new(&e, RC_B32).s, t.s);
	emit_block(&e, "fam.alpha");
	emitf(&e, "\tmov.u32 %s, 2;\n", reg_new(&e, RC_B32).s);
	emit_block(&e, "fam.gamma");
	emitf(&e, "\tadd.f32 %s, %s, %s;\n", acc[0].s, acc[1].s, reg_new(&e, RC_F32).s);
	s = text_of(&e);
	emit_free(&e);
	return s;
}

/* The lines of `text` from "// @block NAME" (each copy) to the next block,
 * joined; the declaration lines of `prefix` first. */
static void
block_lines(const char *text, const char *name, const char *prefix, char *out, size_t n)
{
	char mark[64], decl[32];
	const char *p = text;
	size_t k = 0;

	out[0] = 0;
	snprintf(decl, sizeof decl, " %%%s_", prefix);
	for (const char *q = text; *q && q < strstr(text, "\n\n"); q = strchr(q, '\n') + 1) {
		const char *nl = strchr(q, '\n'), *hit = strstr(q, decl);
		if (hit && hit < nl)
			k += (size_t)snprintf(out + k, n - k, "%.*s", (int)(nl - q + 1), q);
	}
	snprintf(mark, sizeof mark, "// @block %s\n", name);
	while ((p = strstr(p, mark)) != NULL) {
		const char *end = strstr(p + 1, "// @block ");
		size_t len = end ? (size_t)(end - p) : strlen(p);
		k += (size_t)snprintf(out + k, n - k, "%.*s", (int)len, p);
		p += len;
	}
}

/* Diff locality: one more register and label in block alpha changes no
 * line of beta or gamma, nor their declarations. */
static void
test_locality(void)
{
	char *a = three_blocks(0), *b = three_blocks(1);
	char x[4096], y[4096];
	static const char *const other[][2] = {{"fam.beta", "beta"}, {"fam.gamma", "gamm"}};

	for (int i = 0; i < 2; i++) {
		block_lines(a, other[i][0], other[i][1], x, sizeof x);
		block_lines(b, other[i][0], other[i][1], y, sizeof y);
		CHECK(x[0] && strcmp(x, y) == 0, "block %s changed:\n%s\nvs\n%s", other[i][0], x, y);
	}
	block_lines(a, "fam.alpha", "alph", x, sizeof x);
	block_lines(b, "fam.alpha", "alph", y, sizeof y);
	CHECK(strcmp(x, y) != 0, "block alpha must change");
	CHECK(strstr(a, ".reg .b32 %alph_r<3>;") && strstr(b, ".reg .b32 %alph_r<4>;"),
	      "alpha's own declaration line counts it: %s\n%s", a, b);
	CHECK(strstr(b, "mov.u32 %alph_r3, 2;"), "alpha's second copy continues the numbering: %s", b);
	CHECK(strstr(a, ".reg .f32 %beta_f<4>;") && strstr(a, ".reg .f32 %gamm_f<1>;"),
	      "registers are named where first used, not where allocated: %s", a);
	free(b);
	/* a register made after the block's others (the usual new one) renames
	 * none of them, wherever it is used first */
	b = three_blocks(2);
	{
		const char *at = strstr(b, "// @block fam.beta\n\tmov.f32 %beta_f4, 0f3F800000;\n");
		const char *orig = strstr(a, "// @block fam.beta\n");
		CHECK(at && orig && strcmp(strchr(strchr(at, '\n') + 1, '\n') + 1, strchr(orig, '\n') + 1) == 0,
		      "a register made after its block's others renames none of them:\n%s", b);
	}
	free(a);
	free(b);
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
		CHECK(!strstr(a, "%#") && !strstr(a, "$#"), "every placeholder named");
		free(a);
		free(b);
	}
}

int
main(void)
{
	test_fimm();
	test_regs_and_labels();
	test_prefixes();
	test_locality();
	test_templates();
	test_determinism();
	if (fails)
		printf("%d failure(s)\n", fails);
	else
		printf("emit: all passed\n");
	return fails != 0;
}
