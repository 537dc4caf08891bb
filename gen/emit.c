/* The PTX text buffer of one kernel (emit.h): emitf, virtual registers and
 * their declarations, labels, provenance blocks, templates, exact float
 * literals. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "template.h"

/* Columns: register name prefix, PTX declaration type. */
static const struct {
	const char *prefix;
	const char *type;
} regclass[RC_COUNT] = {
	[RC_PRED] = {"%p", ".pred"},
	[RC_B16] = {"%h", ".b16"},
	[RC_B32] = {"%r", ".b32"},
	[RC_B64] = {"%rd", ".b64"},
	[RC_F32] = {"%f", ".f32"},
};

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

Reg
reg_new(Emit *e, RegClass c)
{
	Reg r;

	/* PTX %r<N> declares %r0..%rN-1; numbering from 1 like nvcc keeps the
	 * names readable and the declared count = highest + 1. */
	snprintf(r.s, sizeof r.s, "%s%d", regclass[c].prefix, ++e->nreg[c]);
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

void
emit_block(Emit *e, const char *name)
{
	emitf(e, "\t// @block %s\n", name);
}

void
label_new(Emit *e, char *out, size_t size, const char *stem)
{
	snprintf(out, size, "$L_%s_%d", stem, ++e->nlabel);
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

void
emit_reg_decls(const Emit *e, Buf *out)
{
	for (int c = 0; c < RC_COUNT; c++)
		if (e->nreg[c])
			buf_printf(out, "\t.reg %s %s<%d>;\n", regclass[c].type, regclass[c].prefix,
			           e->nreg[c] + 1);
}
