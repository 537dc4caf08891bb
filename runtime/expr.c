/* Grid expressions of the ABI header (docs/ABI.md):
 *   expr := term ('*' term)*
 *   term := INTEGER | NAME | cdiv(expr,expr)
 * NAME is an integer scalar param (u32, s32, u64); cdiv(a,b) = (a+b-1)/b.
 * Evaluated in 64 bits with overflow checks; the launch limits are checked
 * by krt_grid_eval. */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "krt.h"

typedef struct Ev {
	const char *expr;
	const char *p;
	const KrtAbi *abi;
	const KrtArg *args; /* NULL: check only, names are 1 */
	KrtErr *err;
	int failed;
} Ev;

static uint64_t ev_expr(Ev *e);

static void
fail(Ev *e, const char *fmt, ...) KRT_PRINTF(2, 3);

static void
fail(Ev *e, const char *fmt, ...)
{
	if (e->failed)
		return;
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	krt_errf(e->err, KRT_EINVAL, "grid expression '%s': %s", e->expr, what);
	e->failed = 1;
}

static int
column(const Ev *e)
{
	return (int)(e->p - e->expr) + 1;
}

/* The integer scalar params, for "unknown name" messages. */
static void
int_params(const KrtAbi *abi, char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = 0;
	for (int i = 0; i < abi->nparams; i++) {
		KrtArgKind k = abi->params[i].kind;
		if (k != KRT_ARG_U32 && k != KRT_ARG_S32 && k != KRT_ARG_U64)
			continue;
		int w = snprintf(buf + at, n - at, "%s%s", at ? ", " : "", abi->params[i].name);
		if (w < 0 || (size_t)w >= n - at)
			break;
		at += (size_t)w;
	}
	if (!at)
		snprintf(buf, n, "none");
}

static uint64_t
lookup(Ev *e, const char *name, size_t n)
{
	const KrtAbi *abi = e->abi;
	for (int i = 0; i < abi->nparams; i++) {
		const KrtAbiParam *q = &abi->params[i];
		if (strlen(q->name) != n || memcmp(q->name, name, n) != 0)
			continue;
		if (q->kind != KRT_ARG_U32 && q->kind != KRT_ARG_S32 && q->kind != KRT_ARG_U64) {
			fail(e, "'%s' is a %s param; grid expressions use u32, s32 or u64 params",
			     q->name, krt_arg_kind_name(q->kind));
			return 0;
		}
		if (!e->args)
			return 1;
		const KrtArg *a = &e->args[i];
		if (a->kind != q->kind) {
			fail(e, "arg %d (%s) is %s, the ABI says %s", i, q->name,
			     krt_arg_kind_name(a->kind), krt_arg_kind_name(q->kind));
			return 0;
		}
		switch (q->kind) {
		case KRT_ARG_U32:
			return a->v.u32;
		case KRT_ARG_U64:
			return a->v.u64;
		default:
			if (a->v.s32 < 0) {
				fail(e, "s32 param %s = %d is negative", q->name, (int)a->v.s32);
				return 0;
			}
			return (uint64_t)a->v.s32;
		}
	}
	char known[256];
	int_params(abi, known, sizeof known);
	fail(e, "unknown name '%.*s' at column %d (integer params: %s)", (int)n, name,
	     column(e) - (int)n, known);
	return 0;
}

static uint64_t
mul(Ev *e, uint64_t a, uint64_t b)
{
	if (a && b > UINT64_MAX / a) {
		fail(e, "overflow: %" PRIu64 " * %" PRIu64 " does not fit in 64 bits", a, b);
		return 0;
	}
	return a * b;
}

static uint64_t
ev_cdiv(Ev *e)
{
	const char *start = e->p - 4;
	e->p++; /* '(' */
	uint64_t a = ev_expr(e);
	if (e->failed)
		return 0;
	if (*e->p != ',') {
		fail(e, "expected ',' in cdiv(a,b) at column %d", column(e));
		return 0;
	}
	e->p++;
	uint64_t b = ev_expr(e);
	if (e->failed)
		return 0;
	if (*e->p != ')') {
		fail(e, "expected ')' closing cdiv( at column %d", column(e));
		return 0;
	}
	e->p++;
	if (b == 0) {
		fail(e, "division by zero in %.*s (its divisor is 0)", (int)(e->p - start), start);
		return 0;
	}
	if (a > UINT64_MAX - (b - 1)) {
		fail(e, "overflow in %.*s", (int)(e->p - start), start);
		return 0;
	}
	return (a + b - 1) / b;
}

static uint64_t
ev_term(Ev *e)
{
	const char *s = e->p;
	if (isdigit((unsigned char)*s)) {
		uint64_t v = 0;
		if (*s == '0' && isdigit((unsigned char)s[1])) {
			fail(e, "number with a leading zero at column %d", column(e));
			return 0;
		}
		for (; isdigit((unsigned char)*e->p); e->p++) {
			unsigned d = (unsigned)(*e->p - '0');
			if (v > (UINT64_MAX - d) / 10) {
				fail(e, "number at column %d does not fit in 64 bits", (int)(s - e->expr) + 1);
				return 0;
			}
			v = v * 10 + d;
		}
		return v;
	}
	if (isalpha((unsigned char)*s) || *s == '_') {
		while (isalnum((unsigned char)*e->p) || *e->p == '_')
			e->p++;
		size_t n = (size_t)(e->p - s);
		if (n == 4 && memcmp(s, "cdiv", 4) == 0) {
			if (*e->p != '(') {
				fail(e, "expected '(' after cdiv at column %d", column(e));
				return 0;
			}
			return ev_cdiv(e);
		}
		return lookup(e, s, n);
	}
	if (*s)
		fail(e, "expected a number, a name or cdiv( at column %d, got '%c'", column(e), *s);
	else
		fail(e, "expected a number, a name or cdiv( at column %d, got the end", column(e));
	return 0;
}

static uint64_t
ev_prod(Ev *e)
{
	uint64_t v = ev_term(e);
	while (!e->failed && *e->p == '*') {
		e->p++;
		uint64_t t = ev_term(e);
		if (!e->failed)
			v = mul(e, v, t);
	}
	return v;
}

static uint64_t
ev_expr(Ev *e)
{
	uint64_t v = ev_prod(e);
	while (!e->failed && *e->p == '+') {
		e->p++;
		uint64_t t = ev_prod(e);
		if (e->failed)
			return 0;
		if (v > UINT64_MAX - t) {
			fail(e, "overflow: %" PRIu64 " + %" PRIu64 " does not fit in 64 bits", v, t);
			return 0;
		}
		v += t;
	}
	return v;
}

int
krt_expr_eval(const char *expr, const KrtAbi *abi, const KrtArg *args, uint64_t *out,
              KrtErr *err)
{
	Ev e = {.expr = expr, .p = expr, .abi = abi, .args = args, .err = err};
	*out = 0;
	uint64_t v = ev_expr(&e);
	if (!e.failed && *e.p)
		fail(&e, "unexpected '%c' at column %d", *e.p, column(&e));
	if (e.failed)
		return KRT_EINVAL;
	*out = v;
	return KRT_OK;
}

/* "M=4096 N=4096 K=64", the integer scalars a grid is computed from. */
static void
scalar_values(const KrtAbi *abi, const KrtArg *args, char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = 0;
	for (int i = 0; i < abi->nparams && at < n; i++) {
		const KrtArg *a = &args[i];
		int w = 0;
		if (abi->params[i].kind != a->kind)
			continue;
		if (a->kind == KRT_ARG_U32)
			w = snprintf(buf + at, n - at, " %s=%" PRIu32, abi->params[i].name, a->v.u32);
		else if (a->kind == KRT_ARG_S32)
			w = snprintf(buf + at, n - at, " %s=%" PRId32, abi->params[i].name, a->v.s32);
		else if (a->kind == KRT_ARG_U64)
			w = snprintf(buf + at, n - at, " %s=%" PRIu64, abi->params[i].name, a->v.u64);
		if (w < 0 || (size_t)w >= n - at)
			break;
		at += (size_t)w;
	}
}

int
krt_grid_eval(const KrtAbi *abi, const KrtArg *args, uint32_t grid[3], KrtErr *err)
{
	/* gridDim limits for every CC >= 3.0 (CUDA C Programming Guide,
	 * "Compute Capabilities", technical specifications table). */
	static const uint64_t limit[3] = {2147483647u, 65535, 65535};
	for (int i = 0; i < 3; i++) {
		uint64_t v;
		char vals[512];
		if (krt_expr_eval(abi->grid[i], abi, args, &v, err) != KRT_OK) {
			scalar_values(abi, args, vals, sizeof vals);
			return krt_err_prefix(err, "kernel %s, grid %c (with%s): ", abi->kernel,
			                      "xyz"[i], vals);
		}
		if (v == 0 || v > limit[i]) {
			scalar_values(abi, args, vals, sizeof vals);
			if (v == 0)
				return krt_errf(err, KRT_EINVAL,
				                "kernel %s: grid %c = %s is 0 with%s; a launch needs at "
				                "least one block",
				                abi->kernel, "xyz"[i], abi->grid[i], vals);
			return krt_errf(err, KRT_EINVAL,
			                "kernel %s: grid %c = %s = %" PRIu64
			                " with%s: overflow past the limit %" PRIu64 " (gridDim.%c)",
			                abi->kernel, "xyz"[i], abi->grid[i], v, vals, limit[i],
			                "xyz"[i]);
		}
		grid[i] = (uint32_t)v;
	}
	return KRT_OK;
}
