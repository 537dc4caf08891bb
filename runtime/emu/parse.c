/* PTX text -> EmuProgram: the subset kgen emits (PTX ISA §4 "Syntax", §5
 * "State spaces, types and variables", §9 instruction format). A lexer
 * turns the text into tokens with line numbers; a small recursive-descent
 * parser reads module directives, the one .entry, its register and shared
 * declarations, labels and instructions. Every instruction is resolved
 * against the opcode table (optab.c) here, so an unknown opcode or modifier
 * is a load error naming the line, never a silent no-op at run time. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

typedef enum TokKind { TK_EOF, TK_WORD, TK_NUM, TK_PUNCT } TokKind;

typedef struct Tok {
	TokKind kind;
	int line;
	int len;
	const char *s; /* into the source */
} Tok;

/* A parameterized register declaration %r<86> or a single name. */
typedef struct RegDecl {
	char prefix[24];
	int count;   /* -1: a single register named prefix */
	int base;
	EmuType type;
} RegDecl;

typedef struct Fixup {
	int opnd;
	int line;
	char name[64];
} Fixup;

typedef struct Label {
	char name[64];
	int pc;
} Label;

struct EmuParse {
	const char *src;
	Tok *tok;
	int ntok, captok;
	int at;
	KrtErr *err;
	int failed;
	int line; /* of the instruction being decoded */
	EmuProgram *p;
	int capinsn, capops, capsym, capregs;
	RegDecl *decl;
	int ndecl, capdecl;
	Fixup *fix;
	int nfix, capfix;
	Label *lab;
	int nlab, caplab;
	int entries;
};

/* ---- errors --------------------------------------------------------------- */

static int
vfail(EmuParse *p, int line, const char *fmt, va_list ap)
{
	if (p->failed)
		return -1;
	p->failed = 1;
	char msg[1024];
	vsnprintf(msg, sizeof msg, fmt, ap);
	char text[256] = "";
	if (p->p && p->p->src)
		emu_line_text(p->p, line, text, sizeof text);
	krt_errf(p->err, KRT_ELOAD, "emu: PTX line %d: %s%s%s%s", line, msg, text[0] ? " (`" : "",
	         text, text[0] ? "`)" : "");
	return -1;
}

static int
fail(EmuParse *p, int line, const char *fmt, ...) KRT_PRINTF(3, 4);

static int
fail(EmuParse *p, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(p, line, fmt, ap);
	va_end(ap);
	return -1;
}

int
emu_parse_fail(EmuParse *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(p, p->line, fmt, ap);
	va_end(ap);
	return -1;
}

int
emu_opnd_kind(const EmuInsn *in, const EmuParse *p, int i)
{
	return i < in->nop ? p->p->ops[in->op + i].kind : OPK_NONE;
}

/* ---- growing arrays ----------------------------------------------------- */

static int
grow(void **v, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	int nc = *cap ? *cap * 2 : 64;
	while (nc < need)
		nc *= 2;
	void *nv = realloc(*v, (size_t)nc * elem);
	if (!nv)
		return -1;
	memset((char *)nv + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
	*v = nv;
	*cap = nc;
	return 0;
}

#define GROW(p, arr, n, cap) \
	(grow((void **)&(arr), &(cap), (n) + 1, sizeof *(arr)) ? fail(p, 0, "out of host memory") : 0)

/* ---- source lines --------------------------------------------------------- */

void
emu_line_text(const EmuProgram *p, int line, char *buf, size_t n)
{
	buf[0] = 0;
	if (!p || !p->src || line < 1 || line > p->nlines || n == 0)
		return;
	const char *s = p->src + p->line_start[line - 1];
	while (*s == ' ' || *s == '\t')
		s++;
	size_t k = 0;
	while (s[k] && s[k] != '\n' && k + 1 < n)
		k++;
	memcpy(buf, s, k);
	buf[k] = 0;
	/* a long vector operand: keep the message readable */
	if (k > 160 && n > 164)
		strcpy(buf + 157, "...");
}

/* ---- lexer ------------------------------------------------------------------ */

static int
word_char(int ch)
{
	return isalnum(ch) || ch == '_' || ch == '.' || ch == '$' || ch == '%';
}

static int
lex(EmuParse *p, const char *s, size_t len)
{
	int line = 1;
	size_t i = 0;
	while (i < len) {
		char ch = s[i];
		if (ch == '\n') {
			line++;
			i++;
			continue;
		}
		if (ch == ' ' || ch == '\t' || ch == '\r') {
			i++;
			continue;
		}
		if (ch == '/' && i + 1 < len && s[i + 1] == '/') {
			while (i < len && s[i] != '\n')
				i++;
			continue;
		}
		if (ch == '/' && i + 1 < len && s[i + 1] == '*') {
			i += 2;
			while (i + 1 < len && !(s[i] == '*' && s[i + 1] == '/')) {
				if (s[i] == '\n')
					line++;
				i++;
			}
			i += 2;
			continue;
		}
		if (GROW(p, p->tok, p->ntok, p->captok))
			return -1;
		Tok *t = &p->tok[p->ntok++];
		t->line = line;
		t->s = s + i;
		size_t j = i;
		if (isdigit((unsigned char)ch)) {
			/* 0x.., 0f.., 0d.., 123, 1.5e-3, 45U */
			j++;
			while (j < len && (isalnum((unsigned char)s[j]) || s[j] == '.' ||
			                   ((s[j] == '+' || s[j] == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E') &&
			                    !(s[i + 1] == 'x' || s[i + 1] == 'X'))))
				j++;
			t->kind = TK_NUM;
		} else if (word_char((unsigned char)ch)) {
			while (j < len) {
				if (word_char((unsigned char)s[j])) {
					j++;
				} else if (s[j] == ':' && j + 1 < len && s[j + 1] == ':') {
					j += 2; /* shared::cta, kind::f16, ... */
				} else {
					break;
				}
			}
			t->kind = TK_WORD;
		} else if (ch == '"') {
			j++;
			while (j < len && s[j] != '"' && s[j] != '\n')
				j++;
			if (j < len && s[j] == '"')
				j++;
			t->kind = TK_WORD; /* a string: only .pragma uses one */
		} else {
			j++;
			t->kind = TK_PUNCT;
		}
		t->len = (int)(j - i);
		i = j;
	}
	if (GROW(p, p->tok, p->ntok, p->captok))
		return -1;
	p->tok[p->ntok].kind = TK_EOF;
	p->tok[p->ntok].line = line;
	p->tok[p->ntok].s = s + len;
	p->tok[p->ntok].len = 0;
	return 0;
}

static Tok *
peek(EmuParse *p)
{
	return &p->tok[p->at];
}

static Tok *
next(EmuParse *p)
{
	Tok *t = &p->tok[p->at];
	if (t->kind != TK_EOF)
		p->at++;
	return t;
}

static int
is(const Tok *t, const char *s)
{
	return (int)strlen(s) == t->len && memcmp(t->s, s, (size_t)t->len) == 0;
}

static int
is_punct(const Tok *t, char ch)
{
	return t->kind == TK_PUNCT && t->s[0] == ch;
}

static void
tokstr(const Tok *t, char *buf, size_t n)
{
	size_t k = (size_t)t->len < n - 1 ? (size_t)t->len : n - 1;
	memcpy(buf, t->s, k);
	buf[k] = 0;
}

static int
expect(EmuParse *p, char ch)
{
	Tok *t = next(p);
	if (!is_punct(t, ch)) {
		char got[64];
		tokstr(t, got, sizeof got);
		return fail(p, t->line, "expected '%c', found '%s'", ch, t->kind == TK_EOF ? "end of file" : got);
	}
	return 0;
}

/* ---- numbers ---------------------------------------------------------------- */

/* PTX ISA §4.5 "Constants": hex 0x, octal 0.., binary 0b, decimal, an
 * optional U suffix; 0f/0F + 8 hex digits is an f32 bit pattern, 0d/0D +
 * 16 hex digits an f64 one; decimal floats are rare in kgen output. */
static int
parse_num(EmuParse *p, const Tok *t, int neg, EmuOperand *o)
{
	char buf[64];
	tokstr(t, buf, sizeof buf);
	size_t n = strlen(buf);
	o->kind = OPK_IMM;
	if (n > 2 && buf[0] == '0' && (buf[1] == 'f' || buf[1] == 'F' || buf[1] == 'd' || buf[1] == 'D')) {
		int dbl = buf[1] == 'd' || buf[1] == 'D';
		if (n != (size_t)(dbl ? 18 : 10))
			return fail(p, t->line, "float constant %s: needs %d hex digits", buf, dbl ? 16 : 8);
		char *end;
		errno = 0;
		unsigned long long v = strtoull(buf + 2, &end, 16);
		if (errno || *end)
			return fail(p, t->line, "bad float constant %s", buf);
		if (neg)
			v ^= dbl ? UINT64_C(1) << 63 : UINT64_C(1) << 31;
		o->imm = (int64_t)v;
		o->fimm = dbl ? 3 : 1;
		return 0;
	}
	if (strchr(buf, '.') || ((strchr(buf, 'e') || strchr(buf, 'E')) && !(buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X')))) {
		char *end;
		errno = 0;
		double d = strtod(buf, &end);
		if (errno || *end)
			return fail(p, t->line, "bad number %s", buf);
		o->imm = (int64_t)emu_f64_bits(neg ? -d : d);
		o->fimm = 2;
		return 0;
	}
	if (n && (buf[n - 1] == 'U' || buf[n - 1] == 'u'))
		buf[--n] = 0;
	int base = 10;
	const char *digits = buf;
	if (buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X'))
		base = 16, digits = buf + 2;
	else if (buf[0] == '0' && (buf[1] == 'b' || buf[1] == 'B'))
		base = 2, digits = buf + 2;
	else if (buf[0] == '0' && buf[1])
		base = 8, digits = buf + 1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(digits, &end, base);
	if (errno || *end || !*digits)
		return fail(p, t->line, "bad number %s", buf);
	o->imm = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

/* ---- names ------------------------------------------------------------------ */

static const struct {
	const char *name;
	EmuSpecial id;
} specials[] = {
	{"%tid.x", SP_TID_X}, {"%tid.y", SP_TID_Y}, {"%tid.z", SP_TID_Z},
	{"%ntid.x", SP_NTID_X}, {"%ntid.y", SP_NTID_Y}, {"%ntid.z", SP_NTID_Z},
	{"%ctaid.x", SP_CTAID_X}, {"%ctaid.y", SP_CTAID_Y}, {"%ctaid.z", SP_CTAID_Z},
	{"%nctaid.x", SP_NCTAID_X}, {"%nctaid.y", SP_NCTAID_Y}, {"%nctaid.z", SP_NCTAID_Z},
	{"%laneid", SP_LANEID}, {"%warpid", SP_WARPID}, {"%nwarpid", SP_NWARPID},
	{"%smid", SP_SMID}, {"%nsmid", SP_NSMID},
	{"%clock", SP_CLOCK}, {"%clock64", SP_CLOCK64}, {"%globaltimer", SP_GLOBALTIMER},
	{"%lanemask_eq", SP_LANEMASK_EQ}, {"%lanemask_lt", SP_LANEMASK_LT},
	{"%lanemask_le", SP_LANEMASK_LE}, {"%lanemask_gt", SP_LANEMASK_GT},
	{"%lanemask_ge", SP_LANEMASK_GE},
	{"%cluster_ctarank", SP_CLUSTER_CTARANK}, {"%cluster_nctarank", SP_CLUSTER_NCTARANK},
	{"%is_explicit_cluster", SP_IS_EXPLICIT_CLUSTER},
	{"%clusterid.x", SP_CLUSTERID_X}, {"%clusterid.y", SP_CLUSTERID_Y},
	{"%clusterid.z", SP_CLUSTERID_Z},
	{"%nclusterid.x", SP_NCLUSTERID_X}, {"%nclusterid.y", SP_NCLUSTERID_Y},
	{"%nclusterid.z", SP_NCLUSTERID_Z},
	{"%cluster_ctaid.x", SP_CLUSTER_CTAID_X}, {"%cluster_ctaid.y", SP_CLUSTER_CTAID_Y},
	{"%cluster_ctaid.z", SP_CLUSTER_CTAID_Z},
	{"%cluster_nctaid.x", SP_CLUSTER_NCTAID_X}, {"%cluster_nctaid.y", SP_CLUSTER_NCTAID_Y},
	{"%cluster_nctaid.z", SP_CLUSTER_NCTAID_Z},
	{"%dynamic_smem_size", SP_DYN_SMEM}, {"%total_smem_size", SP_TOTAL_SMEM},
};

static int
find_reg(EmuParse *p, const char *name)
{
	size_t n = strlen(name);
	size_t k = n;
	while (k > 0 && isdigit((unsigned char)name[k - 1]))
		k--;
	for (int i = 0; i < p->ndecl; i++) {
		RegDecl *d = &p->decl[i];
		if (d->count < 0) {
			if (strcmp(d->prefix, name) == 0)
				return d->base;
			continue;
		}
		if (k == n || k != strlen(d->prefix) || memcmp(d->prefix, name, k) != 0)
			continue;
		if (n - k > 1 && name[k] == '0')
			continue; /* %r01 is not %r1 */
		long idx = strtol(name + k, NULL, 10);
		if (idx < d->count)
			return d->base + (int)idx;
	}
	return -1;
}

static int
find_sym(const EmuProgram *prog, const char *name)
{
	for (int i = 0; i < prog->nsym; i++)
		if (strcmp(prog->sym[i].name, name) == 0)
			return i;
	return -1;
}

/* ---- declarations ------------------------------------------------------------- */

static int
add_regs(EmuParse *p, const char *prefix, int count, EmuType type, int line)
{
	EmuProgram *prog = p->p;
	if (strlen(prefix) >= sizeof p->decl[0].prefix)
		return fail(p, line, "register name %s is too long", prefix);
	if (find_reg(p, prefix) >= 0 && count < 0)
		return fail(p, line, "register %s declared twice", prefix);
	int n = count < 0 ? 1 : count;
	if (n > 1 << 16)
		return fail(p, line, "%s<%d>: too many registers", prefix, count);
	if (GROW(p, p->decl, p->ndecl, p->capdecl))
		return -1;
	RegDecl *d = &p->decl[p->ndecl++];
	snprintf(d->prefix, sizeof d->prefix, "%s", prefix);
	d->count = count;
	d->base = prog->nregs;
	d->type = type;
	if (grow((void **)&prog->reg, &p->capregs, prog->nregs + n, sizeof *prog->reg))
		return fail(p, line, "out of host memory");
	for (int i = 0; i < n; i++) {
		EmuReg *r = &prog->reg[prog->nregs + i];
		if (count < 0)
			snprintf(r->name, sizeof r->name, "%s", prefix);
		else
			snprintf(r->name, sizeof r->name, "%s%d", prefix, i);
		r->type = type;
	}
	prog->nregs += n;
	return 0;
}

/* .reg .b32 %r<86>;  .reg .pred %p, %q; */
static int
parse_reg_decl(EmuParse *p, int line)
{
	Tok *t = next(p);
	char tn[32];
	tokstr(t, tn, sizeof tn);
	if (t->kind != TK_WORD || tn[0] != '.')
		return fail(p, line, ".reg: expected a type, found '%s'", tn);
	if (strcmp(tn, ".v2") == 0 || strcmp(tn, ".v4") == 0)
		return fail(p, line, ".reg %s: vector registers are not supported by the emulator", tn);
	EmuType ty = emu_type_find(tn + 1);
	if (ty == T_NONE)
		return fail(p, line, ".reg: unknown type %s", tn);
	for (;;) {
		Tok *nt = next(p);
		char name[32];
		tokstr(nt, name, sizeof name);
		if (nt->kind != TK_WORD || name[0] != '%')
			return fail(p, line, ".reg: expected a %%name, found '%s'", name);
		int count = -1;
		if (is_punct(peek(p), '<')) {
			next(p);
			Tok *c = next(p);
			EmuOperand o = {0};
			if (c->kind != TK_NUM || parse_num(p, c, 0, &o) || o.fimm || o.imm < 0)
				return fail(p, line, ".reg %s<N>: N must be a count", name);
			count = (int)o.imm;
			if (expect(p, '>'))
				return -1;
		}
		if (add_regs(p, name, count, ty, line))
			return -1;
		Tok *sep = next(p);
		if (is_punct(sep, ';'))
			return 0;
		if (!is_punct(sep, ','))
			return fail(p, line, ".reg: expected ',' or ';'");
	}
}

/* The number after .align: a power of two. */
static int
parse_align(EmuParse *p, int line, uint32_t *align)
{
	Tok *a = next(p);
	EmuOperand o = {0};

	if (a->kind != TK_NUM || parse_num(p, a, 0, &o) || o.imm <= 0 || (o.imm & (o.imm - 1)))
		return fail(p, line, ".align needs a power of two");
	*align = (uint32_t)o.imm;
	return 0;
}

/* .extern .shared .align 1024 .b8 kg_smem[];   .shared .align 8 .b8 buf[256]; */
static int
parse_shared_decl(EmuParse *p, int line, int is_extern)
{
	EmuProgram *prog = p->p;
	uint32_t align = 1;
	EmuType ty = T_NONE;
	char name[64] = "";
	for (;;) {
		Tok *t = next(p);
		char w[64];
		tokstr(t, w, sizeof w);
		if (t->kind == TK_EOF)
			return fail(p, line, "unterminated .shared declaration");
		if (strcmp(w, ".align") == 0) {
			if (parse_align(p, line, &align))
				return -1;
			continue;
		}
		if (w[0] == '.') {
			ty = emu_type_find(w + 1);
			if (ty == T_NONE)
				return fail(p, line, ".shared: unknown type %s", w);
			continue;
		}
		snprintf(name, sizeof name, "%s", w);
		break;
	}
	if (ty == T_NONE)
		return fail(p, line, ".shared %s: no type", name);
	uint32_t elem = (uint32_t)emu_types[ty].bits / 8;
	uint32_t count = 1;
	int dynamic = 0;
	if (is_punct(peek(p), '[')) {
		next(p);
		if (is_punct(peek(p), ']')) {
			dynamic = 1;
		} else {
			Tok *n = next(p);
			EmuOperand o = {0};
			if (n->kind != TK_NUM || parse_num(p, n, 0, &o) || o.imm <= 0)
				return fail(p, line, ".shared %s[N]: N must be positive", name);
			count = (uint32_t)o.imm;
		}
		if (expect(p, ']'))
			return -1;
	}
	if (expect(p, ';'))
		return -1;
	if (dynamic && !is_extern)
		return fail(p, line, ".shared %s[]: only an .extern array may be unsized", name);
	if (is_extern && !dynamic)
		return fail(p, line, ".extern .shared %s: the emulator supports only the unsized dynamic array", name);
	if (dynamic && prog->dyn_sym >= 0)
		return fail(p, line, "a second dynamic shared array %s", name);
	if (find_sym(prog, name) >= 0)
		return fail(p, line, "symbol %s declared twice", name);
	if (GROW(p, prog->sym, prog->nsym, p->capsym))
		return -1;
	EmuSym *s = &prog->sym[prog->nsym];
	snprintf(s->name, sizeof s->name, "%s", name);
	s->space = SPACE_SHARED;
	s->align = align;
	s->type = ty;
	s->dynamic = dynamic;
	if (dynamic) {
		prog->dyn_sym = prog->nsym;
		prog->dyn_align = align;
	} else {
		/* static shared variables first, in declaration order; the window
		 * base is added at launch (exec.c) */
		uint32_t at = (prog->static_smem + align - 1) & ~(align - 1);
		s->addr = at;
		s->size = elem * count;
		prog->static_smem = at + s->size;
	}
	prog->nsym++;
	return 0;
}

/* .param .align 128 .b8 p_A[128]   .param .u64 p_C */
static int
parse_param(EmuParse *p, int line)
{
	EmuProgram *prog = p->p;
	uint32_t align = 0;
	EmuType ty = T_NONE;
	char name[64] = "";
	for (;;) {
		Tok *t = next(p);
		char w[64];
		tokstr(t, w, sizeof w);
		if (t->kind == TK_EOF)
			return fail(p, line, "unterminated .param");
		if (strcmp(w, ".param") == 0)
			continue;
		if (strcmp(w, ".align") == 0) {
			if (parse_align(p, line, &align))
				return -1;
			continue;
		}
		if (strcmp(w, ".ptr") == 0 || strncmp(w, ".global", 7) == 0 || strcmp(w, ".shared") == 0)
			continue; /* pointer attributes: no effect on the value */
		if (w[0] == '.') {
			ty = emu_type_find(w + 1);
			if (ty == T_NONE || ty == T_PRED)
				return fail(p, line, ".param: unknown type %s", w);
			continue;
		}
		snprintf(name, sizeof name, "%s", w);
		break;
	}
	if (ty == T_NONE)
		return fail(p, line, ".param %s: no type", name);
	uint32_t elem = (uint32_t)emu_types[ty].bits / 8, count = 1;
	if (is_punct(peek(p), '[')) {
		next(p);
		Tok *n = next(p);
		EmuOperand o = {0};
		if (n->kind != TK_NUM || parse_num(p, n, 0, &o) || o.imm <= 0)
			return fail(p, line, ".param %s[N]: N must be positive", name);
		count = (uint32_t)o.imm;
		if (expect(p, ']'))
			return -1;
	}
	if (!align)
		align = elem;
	if (prog->nparams >= KRT_MAX_PARAMS)
		return fail(p, line, "more than %d kernel params", KRT_MAX_PARAMS);
	if (find_sym(prog, name) >= 0)
		return fail(p, line, "symbol %s declared twice", name);
	if (GROW(p, prog->sym, prog->nsym, p->capsym))
		return -1;
	EmuSym *s = &prog->sym[prog->nsym];
	snprintf(s->name, sizeof s->name, "%s", name);
	s->space = SPACE_PARAM;
	s->align = align;
	s->type = ty;
	s->size = elem * count;
	s->addr = (prog->param_bytes + align - 1) & ~(align - 1);
	s->is_entry_param = 1;
	prog->param_bytes = s->addr + s->size;
	prog->param_sym[prog->nparams++] = prog->nsym;
	prog->nsym++;
	return 0;
}

/* ---- operands --------------------------------------------------------------- */

static int
new_opnd(EmuParse *p, int line)
{
	EmuProgram *prog = p->p;
	if (grow((void **)&prog->ops, &p->capops, prog->nops + 1, sizeof *prog->ops))
		return fail(p, line, "out of host memory");
	memset(&prog->ops[prog->nops], 0, sizeof prog->ops[0]);
	prog->ops[prog->nops].reg = -1;
	prog->ops[prog->nops].sym = -1;
	return prog->nops++;
}

/* A name in an operand: register, special register, symbol or label. Labels
 * may be forward references: unknown names become fixups resolved at the end
 * of the function. */
static int
name_opnd(EmuParse *p, const Tok *t, int idx)
{
	char name[64];
	tokstr(t, name, sizeof name);
	EmuOperand *o = &p->p->ops[idx];
	if (name[0] == '%') {
		int r = find_reg(p, name);
		if (r >= 0) {
			o->kind = OPK_REG;
			o->reg = r;
			return 0;
		}
		for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
			if (strcmp(specials[i].name, name) == 0) {
				o->kind = OPK_SPECIAL;
				o->reg = (int32_t)specials[i].id;
				return 0;
			}
		return fail(p, t->line, "unknown register %s (not declared with .reg, not a special register)", name);
	}
	if (strcmp(name, "_") == 0) {
		o->kind = OPK_SINK;
		return 0;
	}
	int s = find_sym(p->p, name);
	if (s >= 0) {
		o->kind = OPK_SYM;
		o->reg = s;
		return 0;
	}
	if (GROW(p, p->fix, p->nfix, p->capfix))
		return -1;
	Fixup *f = &p->fix[p->nfix++];
	f->opnd = idx;
	f->line = t->line;
	snprintf(f->name, sizeof f->name, "%s", name);
	o->kind = OPK_LABEL;
	return 0;
}

static int parse_operand(EmuParse *p, int idx);

/* {a, b, c}: the elements are appended contiguously after a placeholder
 * list, so the vector's sub range is exact. */
static int
parse_vector(EmuParse *p, int idx, int line)
{
	int elems[256];
	int n = 0;
	next(p); /* { */
	if (is_punct(peek(p), '}'))
		return fail(p, line, "empty vector operand");
	for (;;) {
		if (n == 256)
			return fail(p, line, "vector operand with more than 256 elements");
		int e = new_opnd(p, line);
		if (e < 0 || parse_operand(p, e))
			return -1;
		elems[n++] = e;
		Tok *sep = next(p);
		if (is_punct(sep, '}'))
			break;
		if (!is_punct(sep, ','))
			return fail(p, line, "expected ',' or '}' in a vector operand");
	}
	/* copy the (already parsed) elements into one contiguous run */
	int first = -1;
	for (int i = 0; i < n; i++) {
		int c = new_opnd(p, line);
		if (c < 0)
			return -1;
		if (i == 0)
			first = c;
		p->p->ops[c] = p->p->ops[elems[i]];
		/* a fixup pointing at the element must follow the copy */
		for (int f = 0; f < p->nfix; f++)
			if (p->fix[f].opnd == elems[i])
				p->fix[f].opnd = c;
	}
	EmuOperand *o = &p->p->ops[idx];
	o->kind = OPK_VEC;
	o->sub = first;
	o->nsub = (uint16_t)n;
	return 0;
}

/* [base], [base+imm], [base+-imm], [imm], [tmap, {c0, c1}] */
static int
parse_mem(EmuParse *p, int idx, int line)
{
	next(p); /* [ */
	EmuOperand *o = &p->p->ops[idx];
	o->kind = OPK_MEM;
	o->reg = -1;
	o->sym = -1;
	Tok *t = next(p);
	if (t->kind == TK_NUM) {
		EmuOperand n = {0};
		if (parse_num(p, t, 0, &n) || n.fimm)
			return fail(p, line, "bad address constant");
		p->p->ops[idx].imm = n.imm;
	} else if (t->kind == TK_WORD) {
		char name[64];
		tokstr(t, name, sizeof name);
		if (name[0] == '%') {
			int r = find_reg(p, name);
			if (r < 0)
				return fail(p, line, "unknown register %s in an address", name);
			p->p->ops[idx].reg = r;
		} else {
			int s = find_sym(p->p, name);
			if (s < 0)
				return fail(p, line, "unknown symbol %s in an address", name);
			p->p->ops[idx].sym = s;
		}
	} else {
		return fail(p, line, "bad address operand");
	}
	for (;;) {
		Tok *n = next(p);
		if (is_punct(n, ']'))
			return 0;
		if (is_punct(n, '+') || is_punct(n, '-')) {
			int neg = is_punct(n, '-');
			if (is_punct(peek(p), '-')) {
				next(p);
				neg = !neg;
			}
			Tok *v = next(p);
			EmuOperand c = {0};
			if (v->kind != TK_NUM || parse_num(p, v, neg, &c) || c.fimm)
				return fail(p, line, "address offset must be an integer");
			p->p->ops[idx].imm += c.imm;
			continue;
		}
		if (is_punct(n, ',')) {
			if (!is_punct(peek(p), '{'))
				return fail(p, line, "expected a coordinate vector after ',' in an address");
			int v = new_opnd(p, line);
			if (v < 0 || parse_vector(p, v, line))
				return -1;
			EmuOperand *vo = &p->p->ops[v];
			p->p->ops[idx].sub = vo->sub;
			p->p->ops[idx].nsub = vo->nsub;
			continue;
		}
		return fail(p, line, "unexpected token in an address");
	}
}

static int
parse_operand(EmuParse *p, int idx)
{
	Tok *t = peek(p);
	int line = t->line;
	if (is_punct(t, '{'))
		return parse_vector(p, idx, line);
	if (is_punct(t, '['))
		return parse_mem(p, idx, line);
	if (is_punct(t, '!')) {
		next(p);
		Tok *r = next(p);
		if (r->kind != TK_WORD || name_opnd(p, r, idx))
			return fail(p, line, "'!' must precede a predicate register");
		if (p->p->ops[idx].kind != OPK_REG)
			return fail(p, line, "'!' must precede a predicate register");
		p->p->ops[idx].neg = 1;
		return 0;
	}
	if (is_punct(t, '-') || is_punct(t, '+')) {
		next(p);
		Tok *n = next(p);
		if (n->kind != TK_NUM)
			return fail(p, line, "expected a number after '%c'", t->s[0]);
		return parse_num(p, n, t->s[0] == '-', &p->p->ops[idx]);
	}
	if (t->kind == TK_NUM) {
		next(p);
		return parse_num(p, t, 0, &p->p->ops[idx]);
	}
	if (t->kind != TK_WORD) {
		char got[32];
		tokstr(t, got, sizeof got);
		return fail(p, line, "unexpected '%s' in an operand", got);
	}
	next(p);
	if (name_opnd(p, t, idx))
		return -1;
	if (is_punct(peek(p), '|')) {
		/* p|q destination pair (setp, elect.sync) */
		next(p);
		int a = new_opnd(p, line), b = new_opnd(p, line);
		if (a < 0 || b < 0)
			return -1;
		p->p->ops[a] = p->p->ops[idx];
		Tok *q = next(p);
		if (q->kind != TK_WORD || name_opnd(p, q, b))
			return fail(p, line, "expected a register after '|'");
		EmuOperand *o = &p->p->ops[idx];
		memset(o, 0, sizeof *o);
		o->kind = OPK_PAIR;
		o->reg = -1;
		o->sym = -1;
		o->sub = a;
		o->nsub = 2;
	}
	return 0;
}

/* ---- instructions --------------------------------------------------------------- */

/* Float immediates take the instruction's type (PTX ISA §4.5.1: 0f is f32,
 * 0d f64; integers and decimal floats are converted to it). */
static int
fix_imm(EmuParse *p, EmuOperand *o, EmuType ty)
{
	if (o->kind != OPK_IMM)
		return 0;
	if (ty == T_F32) {
		if (o->fimm == 1)
			return 0;
		double d = o->fimm == 2 || o->fimm == 3 ? emu_f64((uint64_t)o->imm) : (double)o->imm;
		o->imm = (int64_t)emu_f32_bits((float)d);
		o->fimm = 1;
	} else if (ty == T_F64) {
		if (o->fimm == 3)
			return 0;
		double d = o->fimm == 1 ? (double)emu_f32((uint32_t)o->imm)
		         : o->fimm == 2 ? emu_f64((uint64_t)o->imm) : (double)o->imm;
		o->imm = (int64_t)emu_f64_bits(d);
		o->fimm = 3;
	} else if (o->fimm == 2 || o->fimm == 3) {
		return emu_parse_fail(p, "a floating-point constant where %s is expected",
		                      emu_types[ty].name);
	}
	return 0;
}

static int
parse_insn(EmuParse *p)
{
	EmuProgram *prog = p->p;
	Tok *t = peek(p);
	int line = t->line;
	int32_t guard = -1;
	int guard_neg = 0;
	if (is_punct(t, '@')) {
		next(p);
		if (is_punct(peek(p), '!')) {
			next(p);
			guard_neg = 1;
		}
		Tok *g = next(p);
		char gn[32];
		tokstr(g, gn, sizeof gn);
		guard = find_reg(p, gn);
		if (g->kind != TK_WORD || guard < 0)
			return fail(p, line, "guard %s is not a declared register", gn);
		if (prog->reg[guard].type != T_PRED)
			return fail(p, line, "guard %s is not a .pred register", gn);
	}
	Tok *opt = next(p);
	if (opt->kind != TK_WORD)
		return fail(p, line, "expected an instruction");
	char opname[256];
	tokstr(opt, opname, sizeof opname);
	if (grow((void **)&prog->insn, &p->capinsn, prog->ninsn + 1, sizeof *prog->insn))
		return fail(p, line, "out of host memory");
	EmuInsn *in = &prog->insn[prog->ninsn];
	memset(in, 0, sizeof *in);
	in->line = line;
	in->guard = guard;
	in->guard_neg = (uint8_t)guard_neg;
	in->single = -1;
	p->line = line;
	/* opcode: dotted components */
	char *comps[32];
	int ncomps = 0;
	for (char *s = opname; s && ncomps < 32;) {
		comps[ncomps++] = s;
		char *dot = strchr(s, '.');
		if (dot)
			*dot++ = 0;
		s = dot;
	}
	int used = 0;
	const EmuOpDef *def = emu_op_find(comps, ncomps, &used);
	if (!def) {
		char full[256];
		tokstr(opt, full, sizeof full);
		return fail(p, line, "instruction '%s' is not supported by the emulator", full);
	}
	in->def = def;
	for (int i = used; i < ncomps; i++) {
		int r = def->mod ? def->mod(in, comps[i], p) : 0;
		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		char why[160];
		r = emu_mod_generic(in, comps[i], def->cats, why, sizeof why);
		if (r < 0)
			return fail(p, line, "%s: %s", def->name, why);
		if (r == 0)
			return fail(p, line, "%s: unknown modifier .%s", def->name, comps[i]);
	}
	/* operands */
	in->op = prog->nops;
	int top[64];
	int ntop = 0;
	if (!is_punct(peek(p), ';')) {
		for (;;) {
			if (ntop == 64)
				return fail(p, line, "too many operands");
			int idx = new_opnd(p, line);
			if (idx < 0)
				return -1;
			top[ntop++] = idx;
			if (parse_operand(p, idx))
				return -1;
			Tok *sep = next(p);
			if (is_punct(sep, ';'))
				break;
			if (!is_punct(sep, ','))
				return fail(p, line, "expected ',' or ';' after an operand");
		}
	} else {
		next(p);
	}
	/* top-level operands must be contiguous: move them to the end */
	int first = prog->nops;
	for (int i = 0; i < ntop; i++) {
		int c = new_opnd(p, line);
		if (c < 0)
			return -1;
		prog->ops[c] = prog->ops[top[i]];
		for (int f = 0; f < p->nfix; f++)
			if (p->fix[f].opnd == top[i])
				p->fix[f].opnd = c;
	}
	in = &prog->insn[prog->ninsn]; /* stable: insn array did not move */
	in->op = first;
	in->nop = ntop;
	if (ntop < def->min_ops || ntop > def->max_ops) {
		if (def->min_ops == def->max_ops)
			return fail(p, line, "%s takes %d operands, found %d", def->name, def->min_ops, ntop);
		return fail(p, line, "%s takes %d to %d operands, found %d", def->name, def->min_ops,
		            def->max_ops, ntop);
	}
	if (def->flags & OPF_SINGLE)
		in->single = prog->nsingle++;
	if (strncmp(def->name, "wgmma.", 6) == 0)
		prog->has_wgmma = 1;
	prog->ninsn++;
	return 0;
}

/* After the function: labels, immediates and the op checks. */
static int
finish_function(EmuParse *p)
{
	EmuProgram *prog = p->p;
	for (int i = 0; i < p->nfix; i++) {
		Fixup *f = &p->fix[i];
		int pc = -1;
		for (int j = 0; j < p->nlab; j++)
			if (strcmp(p->lab[j].name, f->name) == 0)
				pc = p->lab[j].pc;
		if (pc < 0)
			return fail(p, f->line, "unknown name %s (not a label, parameter or shared variable)", f->name);
		prog->ops[f->opnd].imm = pc;
	}
	for (int i = 0; i < prog->ninsn; i++) {
		EmuInsn *in = &prog->insn[i];
		p->line = in->line;
		if (in->def->flags & OPF_FIMM) {
			/* which type the immediates take: cvt's source, else the first */
			EmuType ty = in->ntypes >= 2 && strcmp(in->def->name, "cvt") == 0 ? in->t[1] : in->t[0];
			if (ty == T_F32 || ty == T_F64 || in->ntypes)
				for (int k = 0; k < in->nop; k++)
					if (fix_imm(p, &prog->ops[in->op + k], ty))
						return -1;
		}
		for (int k = 0; k < in->nop; k++) {
			EmuOperand *o = &prog->ops[in->op + k];
			if (o->kind == OPK_LABEL && !(in->def->flags & OPF_BRANCH))
				return fail(p, in->line, "%s: label operand where a value is expected", in->def->name);
		}
		if (in->def->check && in->def->check(in, p))
			return -1;
	}
	return 0;
}

static int
parse_body(EmuParse *p)
{
	EmuProgram *prog = p->p;
	int depth = 0;
	if (expect(p, '{'))
		return -1;
	depth = 1;
	while (depth > 0) {
		Tok *t = peek(p);
		if (t->kind == TK_EOF)
			return fail(p, t->line, "end of file inside the kernel body");
		if (is_punct(t, '{')) {
			next(p);
			depth++;
			continue;
		}
		if (is_punct(t, '}')) {
			next(p);
			depth--;
			continue;
		}
		if (t->kind == TK_WORD && t->s[0] == '.') {
			char w[64];
			tokstr(t, w, sizeof w);
			next(p);
			if (strcmp(w, ".reg") == 0) {
				if (parse_reg_decl(p, t->line))
					return -1;
			} else if (strcmp(w, ".shared") == 0) {
				if (parse_shared_decl(p, t->line, 0))
					return -1;
			} else if (strcmp(w, ".pragma") == 0 || strcmp(w, ".loc") == 0) {
				while (peek(p)->kind != TK_EOF && !is_punct(peek(p), ';') &&
				       peek(p)->line == t->line)
					next(p);
				if (is_punct(peek(p), ';'))
					next(p);
			} else {
				return fail(p, t->line, "directive %s inside a kernel is not supported by the emulator", w);
			}
			continue;
		}
		if (t->kind == TK_WORD && is_punct(&p->tok[p->at + 1], ':')) {
			char name[64];
			tokstr(t, name, sizeof name);
			next(p);
			next(p);
			for (int j = 0; j < p->nlab; j++)
				if (strcmp(p->lab[j].name, name) == 0)
					return fail(p, t->line, "label %s defined twice", name);
			if (GROW(p, p->lab, p->nlab, p->caplab))
				return -1;
			snprintf(p->lab[p->nlab].name, sizeof p->lab[0].name, "%s", name);
			p->lab[p->nlab++].pc = prog->ninsn;
			continue;
		}
		if (parse_insn(p))
			return -1;
	}
	return 0;
}

static int
parse_entry(EmuParse *p, int line)
{
	EmuProgram *prog = p->p;
	if (p->entries++)
		return fail(p, line, "a second .entry: the emulator runs modules with one kernel");
	Tok *n = next(p);
	if (n->kind != TK_WORD)
		return fail(p, line, ".entry: expected a name");
	tokstr(n, prog->entry, sizeof prog->entry);
	if (is_punct(peek(p), '(')) {
		next(p);
		if (!is_punct(peek(p), ')')) {
			for (;;) {
				if (parse_param(p, peek(p)->line))
					return -1;
				Tok *sep = next(p);
				if (is_punct(sep, ')'))
					break;
				if (!is_punct(sep, ','))
					return fail(p, sep->line, "expected ',' or ')' in the parameter list");
			}
		} else {
			next(p);
		}
	}
	/* performance directives up to the body */
	while (!is_punct(peek(p), '{')) {
		Tok *d = next(p);
		char w[64];
		tokstr(d, w, sizeof w);
		if (d->kind == TK_EOF)
			return fail(p, line, ".entry %s has no body", prog->entry);
		if (strcmp(w, ".maxntid") == 0 || strcmp(w, ".reqntid") == 0) {
			int prod = 1;
			for (int i = 0; i < 3; i++) {
				Tok *v = next(p);
				EmuOperand o = {0};
				if (v->kind != TK_NUM || parse_num(p, v, 0, &o))
					return fail(p, d->line, "%s: expected numbers", w);
				prod *= (int)o.imm;
				if (!is_punct(peek(p), ','))
					break;
				next(p);
			}
			prog->maxntid = prod;
			continue;
		}
		if (strcmp(w, ".minnctapersm") == 0 || strcmp(w, ".maxnreg") == 0 ||
		    strcmp(w, ".maxnctapersm") == 0 || strcmp(w, ".maxclusterrank") == 0) {
			next(p);
			continue;
		}
		if (strcmp(w, ".explicitcluster") == 0)
			continue;
		if (strcmp(w, ".reqnctapercluster") == 0) {
			/* x{, y{, z}}: the cluster shape every launch must use */
			for (int i = 0; i < 3; i++)
				prog->reqncluster[i] = 1;
			for (int i = 0; i < 3 && peek(p)->kind == TK_NUM; i++) {
				EmuOperand o = {0};
				Tok *v = next(p);
				if (parse_num(p, v, 0, &o) || o.imm < 1 || o.imm > EMU_MAX_CLUSTER)
					return fail(p, d->line, "%s: expected cluster dimensions 1..%d", w,
					            EMU_MAX_CLUSTER);
				prog->reqncluster[i] = (uint32_t)o.imm;
				if (!is_punct(peek(p), ','))
					break;
				next(p);
			}
			continue;
		}
		if (strcmp(w, ".noreturn") == 0 || strcmp(w, ".pragma") == 0)
			continue;
		return fail(p, d->line, "unexpected '%s' before the body of .entry %s", w, prog->entry);
	}
	if (parse_body(p))
		return -1;
	return finish_function(p);
}

static int
parse_module(EmuParse *p)
{
	EmuProgram *prog = p->p;
	while (peek(p)->kind != TK_EOF) {
		Tok *t = next(p);
		char w[64];
		tokstr(t, w, sizeof w);
		if (strcmp(w, ".version") == 0) {
			Tok *v = next(p);
			char vs[16];
			tokstr(v, vs, sizeof vs);
			int maj = 0, min = 0;
			if (sscanf(vs, "%d.%d", &maj, &min) != 2)
				return fail(p, t->line, ".version %s: expected MAJOR.MINOR", vs);
			prog->ptx_version = maj * 10 + min;
		} else if (strcmp(w, ".target") == 0) {
			Tok *v = next(p);
			char ts[32];
			tokstr(v, ts, sizeof ts);
			int cc;
			char suf;
			if (krt_target_parse(ts, &cc, &suf))
				return fail(p, t->line, ".target %s: not a target name", ts);
			prog->target_cc = cc;
			while (is_punct(peek(p), ',')) {
				next(p);
				next(p);
			}
		} else if (strcmp(w, ".address_size") == 0) {
			Tok *v = next(p);
			if (!is(v, "64"))
				return fail(p, t->line, ".address_size must be 64");
		} else if (strcmp(w, ".extern") == 0) {
			Tok *s = next(p);
			if (!is(s, ".shared"))
				return fail(p, t->line, ".extern: only .extern .shared is supported by the emulator");
			if (parse_shared_decl(p, t->line, 1))
				return -1;
		} else if (strcmp(w, ".shared") == 0) {
			if (parse_shared_decl(p, t->line, 0))
				return -1;
		} else if (strcmp(w, ".visible") == 0 || strcmp(w, ".weak") == 0) {
			continue;
		} else if (strcmp(w, ".entry") == 0) {
			if (parse_entry(p, t->line))
				return -1;
		} else if (strcmp(w, ".func") == 0) {
			return fail(p, t->line, ".func: device functions are not supported by the emulator");
		} else if (strcmp(w, ".file") == 0 || strcmp(w, ".section") == 0) {
			while (peek(p)->kind != TK_EOF && peek(p)->line == t->line)
				next(p);
		} else {
			return fail(p, t->line, "module-level '%s' is not supported by the emulator", w);
		}
	}
	if (!p->entries)
		return fail(p, 1, "no .entry in the module");
	return 0;
}

int
emu_parse(const char *ptx, size_t len, EmuProgram **out, KrtErr *err)
{
	EmuParse p;
	memset(&p, 0, sizeof p);
	p.err = err;
	*out = NULL;
	EmuProgram *prog = calloc(1, sizeof *prog);
	if (!prog)
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory");
	p.p = prog;
	prog->dyn_sym = -1;
	prog->src = malloc(len + 1);
	if (!prog->src) {
		free(prog);
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory");
	}
	memcpy(prog->src, ptx, len);
	prog->src[len] = 0;
	int nl = 1;
	for (size_t i = 0; i < len; i++)
		nl += ptx[i] == '\n';
	prog->line_start = malloc((size_t)nl * sizeof *prog->line_start);
	if (!prog->line_start) {
		emu_program_free(prog);
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory");
	}
	prog->nlines = nl;
	prog->line_start[0] = 0;
	for (size_t i = 0, l = 1; i < len; i++)
		if (ptx[i] == '\n')
			prog->line_start[l++] = (int)(i + 1);
	int rc = lex(&p, prog->src, len);
	if (!rc)
		rc = parse_module(&p);
	free(p.tok);
	free(p.decl);
	free(p.fix);
	free(p.lab);
	if (rc || p.failed) {
		emu_program_free(prog);
		return err->code ? err->code : KRT_ELOAD;
	}
	*out = prog;
	return KRT_OK;
}

void
emu_program_free(EmuProgram *p)
{
	if (!p)
		return;
	free(p->insn);
	free(p->ops);
	free(p->sym);
	free(p->reg);
	free(p->src);
	free(p->line_start);
	free(p);
}
