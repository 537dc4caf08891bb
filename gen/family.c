/* The family table and the ParamSpec-driven parts of the CLI (family.h):
 * finding a family, parsing `--name value` against its table, the canonical
 * `args` line and `kgen list`. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "family.h"
#include "layout.h"
#include "numarg.h"
#include "target.h"

extern const Family family_gemm, family_fmha, family_decode, family_decode_merge, family_indexer,
    family_topk;

const Family *const families[] = {&family_gemm, &family_fmha, &family_decode, &family_decode_merge,
                                  &family_indexer, &family_topk, NULL};

const Family *
family_find(const char *name)
{
	for (int i = 0; families[i]; i++)
		if (strcmp(families[i]->name, name) == 0)
			return families[i];
	return NULL;
}

static int *
field(void *params, const ParamSpec *s)
{
	return (int *)((char *)params + s->offset);
}

/* Is `v` one of the comma-separated words of `list`? */
static int
in_list(const char *list, const char *v)
{
	size_t n = strlen(v);

	for (const char *p = list; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);
		if (len == n && strncmp(p, v, n) == 0)
			return 1;
		p = c ? c + 1 : NULL;
	}
	return 0;
}

/* `v` is the table's default (user == 0) or typed by the user. */
static int
parse_value(const ParamSpec *s, int *out, const char *v, int user, KgErr *err)
{
	char name[48];
	long long x;

	snprintf(name, sizeof name, "--%s", s->name);
	if (s->allowed && s->kind != PK_SWIZZLE && s->kind != PK_FLOAT && s->kind != PK_INT &&
	    !in_list(s->allowed, v))
		return kg_fail(err, "--%s=%s: must be one of %s", s->name, v, s->allowed);
	switch (s->kind) {
	case PK_INT: {
		char dec[24];
		if (kg_parse_int(name, v, INT_MIN, INT_MAX, &x, err))
			return -1;
		snprintf(dec, sizeof dec, "%lld", x);
		if (s->allowed && !in_list(s->allowed, dec))
			return kg_fail(err, "--%s=%s: must be one of %s", s->name, v, s->allowed);
		if (!s->allowed && (x < s->lo || x > s->hi || (s->step && (x - s->lo) % s->step)))
			return kg_fail(err, "--%s=%s: must be in %d..%d in steps of %d", s->name, v,
			               s->lo, s->hi, s->step ? s->step : 1);
		*out = (int)x;
		return 0;
	}
	case PK_FLOAT: {
		/* lo is the "derived" default, reachable only by leaving the option
		 * out; a typed value must be a normal f32 above it (a denormal or
		 * tinier value would flush to 0 and silently mean "derived") */
		double d;
		int bad = kg_parse_real(name, v, s->lo, s->hi, &d, err) < 0;
		if (!user && bad)
			return -1;
		if (user && (bad || d <= s->lo || fabs(d) < FLT_MIN))
			return kg_fail(err, "--%s=%s: must be a finite number above %d (and at least "
			               "%.9g, the smallest normal f32), at most %d; leave it out for the "
			               "default", s->name, v, s->lo, (double)FLT_MIN, s->hi);
		*(float *)out = (float)d;
		return 0;
	}
	case PK_ENUM: {
		int i = 0;
		for (const char *p = s->allowed; p; p = strchr(p, ','), p = p ? p + 1 : NULL, i++)
			if (strncmp(p, v, strlen(v)) == 0 && (p[strlen(v)] == ',' || p[strlen(v)] == 0))
				return *out = i, 0;
		break;
	}
	case PK_TARGET:
		for (int i = 0; i < ntargets; i++)
			if (strcmp(targets[i].name, v) == 0)
				return *out = i, 0;
		break;
	case PK_DTYPE: {
		DType t;
		if (dtype_parse(v, &t) == 0)
			return *out = (int)t, 0;
		break;
	}
	case PK_SWIZZLE: {
		Swizzle w;
		if (swizzle_parse(v, &w) == 0 && (!s->allowed || in_list(s->allowed, v) ||
		                                  in_list(s->allowed, swizzle_name(w))))
			return *out = (int)w, 0;
		return kg_fail(err, "--%s=%s: must be one of %s", s->name, v, s->allowed);
	}
	}
	return kg_fail(err, "--%s=%s: must be one of %s", s->name, v, s->allowed);
}

int
family_parse(const Family *f, void *params, int nargs, const char *const *args, KgErr *err)
{
	memset(params, 0, f->size);
	for (int i = 0; i < f->nparams; i++)
		if (parse_value(&f->params[i], field(params, &f->params[i]), f->params[i].def, 0, err) < 0)
			return -1;
	for (int i = 0; i < nargs; i++) {
		const char *a = args[i], *eq, *v;
		size_t n;
		int j;

		if (strncmp(a, "--", 2) != 0)
			return kg_fail(err, "%s: expected a --parameter of family %s", a, f->name);
		a += 2;
		eq = strchr(a, '=');
		n = eq ? (size_t)(eq - a) : strlen(a);
		for (j = 0; j < f->nparams; j++)
			if (strlen(f->params[j].name) == n && strncmp(f->params[j].name, a, n) == 0)
				break;
		if (j == f->nparams)
			return kg_fail(err, "--%.*s: not a parameter of family %s (see `kgen list`)", (int)n,
			               a, f->name);
		if (eq)
			v = eq + 1;
		else if (i + 1 < nargs)
			v = args[++i];
		else
			return kg_fail(err, "--%s: missing value (allowed: %s)", f->params[j].name,
			               f->params[j].allowed ? f->params[j].allowed : "an integer");
		if (parse_value(&f->params[j], field(params, &f->params[j]), v, 1, err) < 0)
			return -1;
	}
	return 0;
}

void
family_list_word(const char *list, int v, char *out, size_t n)
{
	const char *p = list;

	for (int k = 0; k < v && p; k++)
		p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
	if (v < 0 || !p)
		snprintf(out, n, "?");
	else
		snprintf(out, n, "%.*s", (int)strcspn(p, ","), p);
}

/* The value of parameter s as the command line spells it. */
static void
value_text(const ParamSpec *s, const void *params, char *out, size_t n)
{
	int v = *field((void *)params, s);

	switch (s->kind) {
	case PK_INT:
		snprintf(out, n, "%d", v);
		break;
	case PK_TARGET:
		snprintf(out, n, "%s", targets[v].name);
		break;
	case PK_DTYPE:
		snprintf(out, n, "%s", dtype_name((DType)v));
		break;
	case PK_FLOAT:
		snprintf(out, n, "%.9g", (double)*(const float *)field((void *)params, s));
		break;
	case PK_ENUM:
		family_list_word(s->allowed, v, out, n);
		break;
	case PK_SWIZZLE:
		if (v == SWZ_NONE)
			snprintf(out, n, "none");
		else
			snprintf(out, n, "%d", swizzle_span((Swizzle)v));
		break;
	}
}

/* Whether the clause "NAME=A|B" (up to `end`) holds for these values. */
static int
clause_holds(const Family *f, const void *params, const char *c, const char *end)
{
	size_t n = strcspn(c, "=");
	char v[64];

	for (int i = 0; i < f->nparams; i++)
		if (strlen(f->params[i].name) == n && strncmp(f->params[i].name, c, n) == 0) {
			/* any of the values separated by '|' */
			value_text(&f->params[i], params, v, sizeof v);
			for (const char *a = c + n + 1; a < end; a++) {
				size_t l = strcspn(a, "|;");
				if (strlen(v) == l && strncmp(v, a, l) == 0)
					return 1;
				a += l;
			}
			return 0;
		}
	return 1;
}

/* Whether s means something for these values (ParamSpec.when): any of its
 * ';'-separated clauses holds. */
static int
meaningful(const Family *f, const void *params, const ParamSpec *s)
{
	if (!s->when)
		return 1;
	for (const char *c = s->when;;) {
		const char *end = c + strcspn(c, ";");
		if (clause_holds(f, params, c, end))
			return 1;
		if (!*end)
			return 0;
		c = end + 1;
	}
}

void
family_format_args(const Family *f, const void *params, Buf *out)
{
	const char *sep = "";
	char v[64];

	for (int i = 0; i < f->nparams; i++) {
		const ParamSpec *s = &f->params[i];

		if (!meaningful(f, params, s))
			continue;
		value_text(s, params, v, sizeof v);
		buf_printf(out, "%s--%s %s", sep, s->name, v);
		sep = " ";
	}
}

void
family_names(Buf *out)
{
	for (int i = 0; families[i]; i++)
		buf_printf(out, "%s%s", i ? ", " : "", families[i]->name);
}

void
family_list(Buf *out)
{
	for (int i = 0; families[i]; i++)
		family_help(families[i], out);
}

void
family_help(const Family *f, Buf *out)
{
	buf_printf(out, "%s — %s\n", f->name, f->help);
	for (int j = 0; j < f->nparams; j++) {
		const ParamSpec *s = &f->params[j];
		char allowed[96];
		if (s->allowed)
			snprintf(allowed, sizeof allowed, "%s", s->allowed);
		else if (s->kind == PK_FLOAT)
			snprintf(allowed, sizeof allowed, "%d..%d", s->lo, s->hi);
		else
			snprintf(allowed, sizeof allowed, "%d..%d step %d", s->lo, s->hi,
			         s->step ? s->step : 1);
		buf_printf(out, "  --%-11s %-24s default %-7s %s\n", s->name, allowed, s->def, s->help);
	}
}
