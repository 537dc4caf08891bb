/* The PTX text buffer of one kernel (emit.h): emitf, virtual registers and
 * their declarations, labels, provenance blocks, templates, exact float
 * literals. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "template.h"

/* Columns: placeholder class character, final class letters (after
 * "%<prefix>_"), PTX declaration type. */
static const struct {
	char tag;
	const char *letter;
	const char *type;
} regclass[RC_COUNT] = {
	[RC_PRED] = {'p', "p", ".pred"},
	[RC_B16] = {'h', "h", ".b16"},
	[RC_B32] = {'r', "r", ".b32"},
	[RC_B64] = {'d', "rd", ".b64"},
	[RC_F32] = {'f', "f", ".f32"},
};

/* While a kernel is built, registers are "%#<tag><id>" and labels "$#<id>"
 * (ids count per kernel); '#' is in no PTX identifier, so the final pass
 * (name_pass) finds exactly these and gives each its block-scoped name
 * (emit.h). */
#define PH_REG '%'
#define PH_LABEL '$'
#define PH_MARK '#'

/* One block name's naming scope (emit.h). */
typedef struct EmitScope {
	char name[64];
	char prefix[EMIT_PREFIX_MAX + 3]; /* room for a collision number */
} EmitScope;

/* Where each emit_block call put its marker in the body. */
typedef struct EmitMark {
	size_t at;
	int scope;
} EmitMark;

/* A label's stem, kept until the names are given; late: numbered after
 * its scope's other labels (label_new_late). */
typedef struct EmitLabel {
	char stem[40];
	int late;
} EmitLabel;

static const char entry_prefix[] = "k";

static int
buf_reserve(Buf *b, size_t extra)
{
	size_t cap;
	char *p;

	if (b->len + extra + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + extra + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int
buf_vprintf(Buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return -1;
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

void
buf_printf(Buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void
buf_free(Buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/* reg_vec strings are kept on a singly linked list freed with the Emit. */
typedef struct Scratch {
	struct Scratch *next;
	char s[];
} Scratch;

void
emit_init(Emit *e)
{
	memset(e, 0, sizeof *e);
}

void
emit_free(Emit *e)
{
	Scratch *s = e->scratch, *n;

	for (; s; s = n) {
		n = s->next;
		free(s);
	}
	buf_free(&e->body);
	free(e->scopes);
	free(e->marks);
	free(e->labels);
	memset(e, 0, sizeof *e);
}

void
emitf(Emit *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (buf_vprintf(&e->body, fmt, ap) < 0)
		e->oom = 1;
	va_end(ap);
}

/* Grows *p (n used of *cap elements of `size`) for one more; -1 sets oom. */
static int
grow(Emit *e, void **p, int n, int *cap, size_t size)
{
	void *q;
	int c;

	if (n < *cap)
		return 0;
	c = *cap ? 2 * *cap : 16;
	q = realloc(*p, (size_t)c * size);
	if (!q) {
		e->oom = 1;
		return -1;
	}
	*p = q;
	*cap = c;
	return 0;
}

Reg
reg_new(Emit *e, RegClass c)
{
	Reg r;

	snprintf(r.s, sizeof r.s, "%c%c%c%d", PH_REG, PH_MARK, regclass[c].tag, e->nreg[c]++);
	return r;
}

void
reg_array(Emit *e, RegClass c, Reg *out, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = reg_new(e, c);
}

const char *
reg_vec(Emit *e, const Reg *regs, int n)
{
	size_t size = 3;
	Scratch *s;
	char *p;

	for (int i = 0; i < n; i++)
		size += strlen(regs[i].s) + 2;
	s = malloc(sizeof *s + size);
	if (!s) {
		e->oom = 1;
		return "{}";
	}
	s->next = e->scratch;
	e->scratch = s;
	p = s->s;
	*p++ = '{';
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? ", " : "", regs[i].s);
	*p++ = '}';
	*p = 0;
	return s->s;
}

static int
is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
is_digit(int c)
{
	return c >= '0' && c <= '9';
}

/* An explicit prefix: its letters and digits from the first letter on,
 * EMIT_PREFIX_MAX at most. */
static void
prefix_clean(char out[EMIT_PREFIX_MAX + 1], const char *src)
{
	size_t k = 0;

	while (*src && !is_alpha(*src))
		src++;
	for (; *src && k < EMIT_PREFIX_MAX; src++)
		if (is_alpha(*src) || is_digit(*src))
			out[k++] = *src;
	out[k] = 0;
}

/* 1 when an open block's name is the n characters of `word`, a '.' and more. */
static int
is_scope_word(const Emit *e, const char *word, size_t n)
{
	const EmitScope *s = e->scopes;

	for (int i = 0; i < e->nscopes; i++)
		if (strncmp(s[i].name, word, n) == 0 && s[i].name[n] == '.')
			return 1;
	return 0;
}

/* The derived prefix of a new block `name` (emit.h): one word gives its
 * first EMIT_PREFIX_MAX characters, several words their initials. */
static void
prefix_derive(const Emit *e, const char *name, char out[EMIT_PREFIX_MAX + 1])
{
	const char *last = strrchr(name, '.'), *us;
	size_t k = 0;

	last = last ? last + 1 : name;
	us = strchr(last, '_');
	if (last != name && us && us[1] && is_scope_word(e, last, (size_t)(us - last)))
		last = us + 1;
	if (!strchr(last, '_')) {
		prefix_clean(out, last);
		return;
	}
	for (const char *w = last; *w && k < EMIT_PREFIX_MAX; w++)
		if (is_alpha(*w) && (w == last || w[-1] == '_'))
			out[k++] = *w;
	out[k] = 0;
}

static int
prefix_taken(const Emit *e, const char *prefix)
{
	const EmitScope *s = e->scopes;

	for (int i = 0; i < e->nscopes; i++)
		if (strcmp(s[i].prefix, prefix) == 0)
			return 1;
	return 0;
}

/* Index of the scope of block `name` (new: with `given` or a derived prefix);
 * -1 when out of memory. Scope 0 is "k", text before the first block. */
static int
scope_get(Emit *e, const char *name, const char *given)
{
	EmitScope *s;
	char base[EMIT_PREFIX_MAX + 1];
	int i;

	if (e->nscopes == 0 && name[0]) {
		if (scope_get(e, "", NULL) < 0)
			return -1;
	}
	s = e->scopes;
	for (i = 0; i < e->nscopes; i++)
		if (strcmp(s[i].name, name) == 0)
			return i;
	if (grow(e, &e->scopes, e->nscopes, &e->capscopes, sizeof *s) < 0)
		return -1;
	s = e->scopes;
	if (!name[0])
		snprintf(base, sizeof base, "%s", entry_prefix);
	else if (given)
		prefix_clean(base, given);
	else
		prefix_derive(e, name, base);
	if (!base[0])
		snprintf(base, sizeof base, "b");
	memset(&s[i], 0, sizeof s[i]);
	snprintf(s[i].name, sizeof s[i].name, "%s", name);
	snprintf(s[i].prefix, sizeof s[i].prefix, "%s", base);
	for (unsigned n = 2; prefix_taken(e, s[i].prefix) && n < 100; n++)
		snprintf(s[i].prefix, sizeof s[i].prefix, "%s%u", base, n);
	e->nscopes++;
	return i;
}

static void
block_open(Emit *e, const char *name, const char *given)
{
	int i;

	emitf(e, "\t// @block %s\n", name);
	i = scope_get(e, name[0] ? name : "?", given);
	if (i < 0 || grow(e, &e->marks, e->nmarks, &e->capmarks, sizeof(EmitMark)) < 0)
		return;
	((EmitMark *)e->marks)[e->nmarks++] = (EmitMark){e->body.len, i};
}

void
emit_block(Emit *e, const char *name)
{
	block_open(e, name, NULL);
}

void
emit_block_as(Emit *e, const char *name, const char *prefix)
{
	block_open(e, name, prefix);
}

void
label_new(Emit *e, char *out, size_t size, const char *stem)
{
	if (grow(e, &e->labels, e->nlabel, &e->caplabels, sizeof(EmitLabel)) < 0) {
		snprintf(out, size, "$L_oom"); /* the sticky oom fails the kernel */
		return;
	}
	snprintf(((EmitLabel *)e->labels)[e->nlabel].stem, sizeof ((EmitLabel *)0)->stem, "%s", stem);
	((EmitLabel *)e->labels)[e->nlabel].late = 0;
	if (snprintf(out, size, "%c%c%d", PH_LABEL, PH_MARK, e->nlabel++) >= (int)size)
		e->oom = 1;
}

void
label_new_late(Emit *e, char *out, size_t size, const char *stem)
{
	int id = e->nlabel;

	label_new(e, out, size, stem);
	if (e->nlabel > id)
		((EmitLabel *)e->labels)[id].late = 1;
}

void
emit_label(Emit *e, const char *label)
{
	emitf(e, "%s:\n", label);
}

void
emit_need_ptx(Emit *e, int version)
{
	if (version > e->ptx_version)
		e->ptx_version = version;
}

void
fimm(char out[12], float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof u);
	snprintf(out, 12, "0f%08X", u);
}

static const char *
template_text(const char *name)
{
	for (const Template *t = kg_templates; t->name; t++)
		if (strcmp(t->name, name) == 0)
			return t->text;
	return NULL;
}

int
emit_template(Emit *e, KgErr *err, const char *name, ...)
{
	const char *text = template_text(name), *p, *keys[16], *vals[16];
	int nkv = 0;
	va_list ap;

	if (!text)
		return kg_fail(err, "internal: no template named %s", name);
	va_start(ap, name);
	for (;;) {
		const char *k = va_arg(ap, const char *);
		if (!k)
			break;
		if (nkv == 16) {
			va_end(ap);
			return kg_fail(err, "internal: template %s: too many bindings", name);
		}
		keys[nkv] = k;
		vals[nkv++] = va_arg(ap, const char *);
	}
	va_end(ap);

	/* Template files start with "//" comment lines describing them; those
	 * are documentation for the reader of templates/, not output. */
	while (p = text, strncmp(p, "//", 2) == 0) {
		const char *nl = strchr(p, '\n');
		if (!nl)
			break;
		text = nl + 1;
	}
	for (p = text; *p;) {
		const char *q = strstr(p, "${");
		const char *end;
		int i;

		if (!q) {
			emitf(e, "%s", p);
			break;
		}
		emitf(e, "%.*s", (int)(q - p), p);
		end = strchr(q, '}');
		if (!end)
			return kg_fail(err, "internal: template %s: unterminated ${", name);
		for (i = 0; i < nkv; i++)
			if (strlen(keys[i]) == (size_t)(end - q - 2) &&
			    strncmp(keys[i], q + 2, (size_t)(end - q - 2)) == 0)
				break;
		if (i == nkv)
			return kg_fail(err, "internal: template %s: ${%.*s} is not bound", name,
			               (int)(end - q - 2), q + 2);
		emitf(e, "%s", vals[i]);
		p = end + 1;
	}
	return e->oom ? kg_fail(err, "out of memory") : 0;
}

/* The names given by one pass over the body: for each placeholder id its
 * scope and number there (-1: not seen), and the count per scope and class. */
typedef struct Names {
	int *scope[RC_COUNT + 1], *num[RC_COUNT + 1]; /* [RC_COUNT]: labels */
	int *count;                                  /* [scope * (RC_COUNT + 1) + class] */
	int nscopes;
} Names;

static void
names_free(Names *n)
{
	for (int c = 0; c <= RC_COUNT; c++) {
		free(n->scope[c]);
		free(n->num[c]);
	}
	free(n->count);
}

/* The placeholder at p, if any: its class (RC_COUNT for a label), id and
 * length. */
static int
placeholder(const char *p, const char *end, int *cls, int *id, const Emit *e)
{
	const char *q = p + 2;
	long v = 0;

	if (end - p < 3 || p[1] != PH_MARK || (p[0] != PH_REG && p[0] != PH_LABEL))
		return 0;
	if (p[0] == PH_REG) {
		for (*cls = 0; *cls < RC_COUNT && regclass[*cls].tag != *q; (*cls)++)
			;
		if (*cls == RC_COUNT)
			return 0;
		q++;
	} else {
		*cls = RC_COUNT;
	}
	if (q == end || !is_digit(*q))
		return 0;
	for (; q < end && is_digit(*q) && v < 1 << 24; q++)
		v = v * 10 + (*q - '0');
	if (v >= (*cls == RC_COUNT ? e->nlabel : e->nreg[*cls]))
		return 0;
	*id = (int)v;
	return (int)(q - p);
}

/* Names every placeholder by the block it first appears in, numbered in
 * allocation order there (emit.h). */
static int
name_pass(const Emit *e, Names *n)
{
	const EmitMark *m = e->marks;
	const char *b = e->body.p ? e->body.p : "", *end = b + e->body.len;
	int scope = 0, next = 0, ns = e->nscopes ? e->nscopes : 1;

	memset(n, 0, sizeof *n);
	n->nscopes = ns;
	n->count = calloc((size_t)ns * (RC_COUNT + 1), sizeof *n->count);
	if (!n->count)
		return -1;
	for (int c = 0; c <= RC_COUNT; c++) {
		int k = c == RC_COUNT ? e->nlabel : e->nreg[c];
		n->scope[c] = malloc(((size_t)k + 1) * sizeof(int));
		n->num[c] = malloc(((size_t)k + 1) * sizeof(int));
		if (!n->scope[c] || !n->num[c])
			return -1;
		for (int i = 0; i < k; i++)
			n->scope[c][i] = -1;
	}
	for (const char *p = b; p < end; p++) {
		int cls, id, len;

		while (next < e->nmarks && (size_t)(p - b) >= m[next].at)
			scope = m[next++].scope;
		if (*p != PH_REG && *p != PH_LABEL)
			continue;
		len = placeholder(p, end, &cls, &id, e);
		if (!len)
			continue;
		if (n->scope[cls][id] < 0)
			n->scope[cls][id] = scope;
		p += len - 1;
	}
	/* numbered in allocation order: one made later in the generator (a
	 * new one, typically) renames none of its block's older ones; late
	 * labels after all the others of their scope */
	for (int c = 0; c <= RC_COUNT; c++)
		for (int late = 0; late < (c == RC_COUNT ? 2 : 1); late++)
			for (int i = 0, k = c == RC_COUNT ? e->nlabel : e->nreg[c]; i < k; i++)
				if (n->scope[c][i] >= 0 && (c != RC_COUNT || ((const EmitLabel *)e->labels)[i].late == late))
					n->num[c][i] = n->count[n->scope[c][i] * (RC_COUNT + 1) + c]++;
	return 0;
}

static const char *
scope_prefix(const Emit *e, int i)
{
	return e->nscopes ? ((const EmitScope *)e->scopes)[i].prefix : entry_prefix;
}

void
emit_reg_decls(const Emit *e, Buf *out)
{
	Names n;

	if (name_pass(e, &n) == 0)
		for (int i = 0; i < n.nscopes; i++)
			for (int c = 0; c < RC_COUNT; c++) {
				int k = n.count[i * (RC_COUNT + 1) + c];
				if (k)
					buf_printf(out, "\t.reg %s %%%s_%s<%d>;\n", regclass[c].type,
					           scope_prefix(e, i), regclass[c].letter, k);
			}
	names_free(&n);
}

void
emit_body_text(const Emit *e, Buf *out)
{
	const char *b = e->body.p ? e->body.p : "", *end = b + e->body.len, *run = b;
	Names n;

	if (name_pass(e, &n) < 0) {
		names_free(&n);
		buf_printf(out, "%s", b);
		return;
	}
	for (const char *p = b; p < end; p++) {
		int cls, id, len, s, k;

		if ((*p != PH_REG && *p != PH_LABEL) || !(len = placeholder(p, end, &cls, &id, e)))
			continue;
		buf_printf(out, "%.*s", (int)(p - run), run);
		s = n.scope[cls][id];
		k = n.num[cls][id];
		if (cls == RC_COUNT)
			buf_printf(out, "$L_%s_%s_%d", scope_prefix(e, s),
			           ((const EmitLabel *)e->labels)[id].stem, k + 1);
		else
			buf_printf(out, "%%%s_%s%d", scope_prefix(e, s), regclass[cls].letter, k);
		p += len - 1;
		run = p + 1;
	}
	buf_printf(out, "%s", run);
	names_free(&n);
}

int
log2_ceil(int v)
{
	int n = 0;

	while ((1 << n) < v)
		n++;
	return n;
}

int
pow2_ceil(int v)
{
	return 1 << log2_ceil(v);
}
