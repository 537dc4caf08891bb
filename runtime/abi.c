/* The kernel ABI header (docs/ABI.md): its vocabulary (element types,
 * targets, which driver JIT takes which PTX ISA), the strict parser, and the
 * PTX text helpers that tie a JIT error back to the generator block. Pure
 * text processing: no driver calls. cuda.h is included for the
 * CUtensorMapDataType values of the dtype table only. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "internal.h"
#include "krt.h"

/* ---- element types ------------------------------------------------------ */

/* Columns: ABI name (gen/dtype.c spelling), bytes per element, the
 * CUtensorMapDataType TMA moves it as. FP8/FP6/integer-8 and scale types go
 * as UINT8, as CUTLASS does (docs/hardware.md, "Tensor map encoding", copy_sm90_desc.hpp
 * to_CUtensorMapDataType); TMA copies bits, the MMA interprets them.
 * e2m1 (FP4) is packed two per byte: the runtime counts it as 1 byte per
 * packed pair, so tensor dims and strides for e2m1 are given in bytes
 * (pairs) and TMA moves it as UINT8, the same bytes 16U4_ALIGN8B would move.
 * e2m3/e3m2 (FP6) are stored one per byte (unpacked).
 * e2m1p is FP4 for kind::mxf8f6f4 (docs/hardware.md, "Tensor map encoding"):
 * packed two per byte in global memory, each 16 values landing in 16 bytes
 * of shared memory (8 of codes, 8 of gap) by 16U4_ALIGN16B; its dims count
 * values, it takes one byte per value in shared memory (the count here) and
 * half a byte in global memory (row strides are K/2 bytes). */
static const KrtDtype dtypes[] = {
	{"bf16", 2, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16},
	{"fp16", 2, CU_TENSOR_MAP_DATA_TYPE_FLOAT16},
	{"f32", 4, CU_TENSOR_MAP_DATA_TYPE_FLOAT32},
	{"tf32", 4, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32},
	{"e4m3", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"e5m2", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"e2m3", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"e3m2", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"e2m1", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"e2m1p", 1, CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B},
	{"ue8m0", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"ue4m3", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"s8", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"u8", 1, CU_TENSOR_MAP_DATA_TYPE_UINT8},
	{"s32", 4, CU_TENSOR_MAP_DATA_TYPE_INT32},
};

enum { NDTYPES = sizeof dtypes / sizeof dtypes[0] };

const KrtDtype *
krt_dtype_find(const char *name)
{
	for (int i = 0; i < NDTYPES; i++)
		if (strcmp(dtypes[i].name, name) == 0)
			return &dtypes[i];
	return NULL;
}

/* ---- targets and PTX ISA versions ---------------------------------------- */

int
krt_target_parse(const char *s, int *cc, char *suffix)
{
	if (strncmp(s, "sm_", 3) != 0 || !isdigit((unsigned char)s[3]))
		return -1;
	int v = 0;
	const char *p = s + 3;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (*p - '0');
		if (v > 999)
			return -1;
	}
	char suf = 0;
	if (*p == 'a' || *p == 'f')
		suf = *p++;
	if (*p || v < 10)
		return -1;
	*cc = v;
	*suffix = suf;
	return 0;
}

int
krt_target_check(const KrtAbi *abi, int dev_cc, const char *dev_name, KrtErr *err)
{
	int cc;
	char suf;
	if (krt_target_parse(abi->target, &cc, &suf) != 0)
		return krt_errf(err, KRT_EABI, "kernel %s: target '%s' is not a target name",
		                abi->kernel, abi->target);
	/* `a` targets run on that exact CC only, `f` targets on the same family
	 * at or above it, plain targets on it and later (docs/hardware.md,
	 * "Targets and PTX versions"; PTX ISA "Target Directives"). */
	int ok;
	char rule[160];
	if (suf == 'a') {
		ok = dev_cc == cc;
		snprintf(rule, sizeof rule,
		         "arch-specific 'a' targets run only on compute capability %d.%d exactly",
		         cc / 10, cc % 10);
	} else if (suf == 'f') {
		ok = dev_cc / 10 == cc / 10 && dev_cc >= cc;
		snprintf(rule, sizeof rule,
		         "family 'f' targets run only on compute capability %d.%d..%d.9", cc / 10,
		         cc % 10, cc / 10);
	} else {
		ok = dev_cc >= cc;
		snprintf(rule, sizeof rule, "it needs compute capability %d.%d or later", cc / 10,
		         cc % 10);
	}
	if (ok)
		return KRT_OK;
	return krt_errf(err, KRT_EMISMATCH,
	                "kernel %s: PTX target %s cannot run on an sm_%d device (%s): %s",
	                abi->kernel, abi->target, dev_cc, dev_name ? dev_name : "?", rule);
}

/* Driver (cuDriverGetVersion: 1000*major + 10*minor) -> the highest PTX ISA
 * its JIT accepts, from the PTX ISA release notes. CUDA 12.6 stayed at 8.5;
 * there was no 12.7. A driver newer than the last row gets the last row:
 * PTX we emit is never newer than what the toolkit we know of produces. */
static const struct {
	int driver;
	int isa;
} driver_isa[] = {
	{11000, 70}, {11010, 71}, {11020, 72}, {11030, 73}, {11040, 74}, {11050, 75},
	{11060, 76}, {11070, 77}, {11080, 78}, {12000, 80}, {12010, 81}, {12020, 82},
	{12030, 83}, {12040, 84}, {12050, 85}, {12060, 85}, {12080, 87}, {12090, 88},
	{13000, 90}, {13010, 91}, {13020, 92},
};

int
krt_driver_ptx_isa(int drv)
{
	int isa = 0;
	for (size_t i = 0; i < sizeof driver_isa / sizeof driver_isa[0]; i++)
		if (driver_isa[i].driver <= drv)
			isa = driver_isa[i].isa;
	return isa;
}

int
krt_ptx_version_check(const KrtAbi *abi, int isa, int drv, KrtErr *err)
{
	int want = abi->ptx_major * 10 + abi->ptx_minor;
	if (want <= isa)
		return KRT_OK;
	char drvs[96] = "this device's JIT";
	if (drv > 0)
		snprintf(drvs, sizeof drvs, "the driver (CUDA %d.%d, cuDriverGetVersion %d)",
		         drv / 1000, drv % 1000 / 10, drv);
	return krt_errf(err, KRT_EMISMATCH,
	                "kernel %s: PTX ISA %d.%d (.version of the file) is newer than %s "
	                "accepts: its JIT takes PTX ISA up to %d.%d; update the driver or emit "
	                "an older .version",
	                abi->kernel, abi->ptx_major, abi->ptx_minor, drvs, isa / 10, isa % 10);
}

/* ---- the header parser ---------------------------------------------------- */

enum { LINE_MAX_ = 2048, MAX_FIELDS = 16 };

typedef struct Parser {
	const char *cur, *end; /* the rest of the PTX */
	int lineno;            /* of `line` */
	char line[LINE_MAX_];  /* split in place while parsing */
	char raw[LINE_MAX_];   /* as read, for messages */
	KrtErr *err;
} Parser;

static int
bad(Parser *p, const char *fmt, ...) KRT_PRINTF(2, 3);

static int
bad(Parser *p, const char *fmt, ...)
{
	char what[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return krt_errf(p->err, KRT_EABI, "kgen ABI header, line %d: %s\n  line %d: %.200s",
	                p->lineno, what, p->lineno, p->raw);
}

/* Reads the next line into p->line. 1: a line, 0: end of input, -1: an
 * error (in p->err). */
static int
next_line(Parser *p)
{
	if (p->cur >= p->end)
		return 0;
	const char *eol = memchr(p->cur, '\n', (size_t)(p->end - p->cur));
	if (!eol)
		eol = p->end;
	size_t n = (size_t)(eol - p->cur);
	p->lineno++;
	size_t keep = n < LINE_MAX_ - 1 ? n : LINE_MAX_ - 1;
	memcpy(p->line, p->cur, keep);
	p->line[keep] = 0;
	memcpy(p->raw, p->line, keep + 1);
	p->cur = eol + 1;
	if (n >= LINE_MAX_ - 1) {
		bad(p, "line longer than %d bytes", LINE_MAX_ - 2);
		return -1;
	}
	if (strlen(p->line) != n) {
		bad(p, "NUL byte inside the header");
		return -1;
	}
	return 1;
}

static int
parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	if (!isdigit((unsigned char)s[0]) || (s[0] == '0' && s[1]))
		return -1;
	uint64_t v = 0;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (d > max || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/* PTX identifiers: [A-Za-z_$][A-Za-z0-9_$]* (PTX ISA "Identifiers"). */
static int
is_ptx_ident(const char *s)
{
	if (!(isalpha((unsigned char)*s) || *s == '_' || *s == '$'))
		return 0;
	for (s++; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '$'))
			return 0;
	return 1;
}

/* Param names appear in grid expressions: [A-Za-z_][A-Za-z0-9_]*. */
static int
is_name(const char *s)
{
	if (!(isalpha((unsigned char)*s) || *s == '_'))
		return 0;
	for (s++; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return 0;
	return 1;
}

/* Splits v at single spaces (in place). Returns the count or -1 if more than
 * max. */
static int
split(char *v, char **f, int max)
{
	int n = 0;
	for (char *s = v;;) {
		if (n == max)
			return -1;
		f[n++] = s;
		char *sp = strchr(s, ' ');
		if (!sp)
			return n;
		*sp = 0;
		s = sp + 1;
	}
}

static int
copy_field(Parser *p, char *dst, size_t cap, const char *v, const char *what)
{
	size_t n = strlen(v);
	if (n == 0 || n >= cap)
		return bad(p, "%s '%s' must be 1..%zu characters", what, v, cap - 1);
	memcpy(dst, v, n + 1);
	return 0;
}

static int
h_version(Parser *p, char *v, KrtAbi *a)
{
	(void)a;
	if (strcmp(v, "1") != 0)
		return bad(p, "ABI header version '%s' is not supported: this libkrt reads version 1",
		           v);
	return 0;
}

static int
h_kernel(Parser *p, char *v, KrtAbi *a)
{
	if (!is_ptx_ident(v))
		return bad(p, "kernel name '%s' is not a PTX identifier", v);
	return copy_field(p, a->kernel, sizeof a->kernel, v, "kernel name");
}

static int
h_family(Parser *p, char *v, KrtAbi *a)
{
	if (!is_name(v))
		return bad(p, "family '%s' is not a name ([A-Za-z_][A-Za-z0-9_]*)", v);
	return copy_field(p, a->family, sizeof a->family, v, "family");
}

static int
h_target(Parser *p, char *v, KrtAbi *a)
{
	char suf;
	if (krt_target_parse(v, &a->target_cc, &suf) != 0)
		return bad(p, "expected a target such as sm_90a or sm_100a, got '%s'", v);
	return copy_field(p, a->target, sizeof a->target, v, "target");
}

static int
h_ptx(Parser *p, char *v, KrtAbi *a)
{
	char *dot = strchr(v, '.');
	uint64_t ma, mi;
	if (!dot)
		return bad(p, "expected the PTX ISA version as MAJOR.MINOR (e.g. 8.0), got '%s'", v);
	*dot = 0;
	int okv = parse_uint(v, 99, &ma) == 0 && parse_uint(dot + 1, 9, &mi) == 0 && ma >= 1;
	*dot = '.';
	if (!okv)
		return bad(p, "expected the PTX ISA version as MAJOR.MINOR (e.g. 8.0), got '%s'", v);
	a->ptx_major = (int)ma;
	a->ptx_minor = (int)mi;
	return 0;
}

static int
h_args(Parser *p, char *v, KrtAbi *a)
{
	return copy_field(p, a->args, sizeof a->args, v, "args");
}

/* "NAME=VALUE NAME=VALUE ...": names of letters, digits, '-' and '_',
 * values without spaces, each name once. */
static int
h_shape(Parser *p, char *v, KrtAbi *a)
{
	char *save = NULL;
	for (char *f = strtok_r(v, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(f, '=');
		if (!eq || eq == f || !eq[1])
			return bad(p, "shape field '%s': expected NAME=VALUE", f);
		*eq = 0;
		if (strspn(f, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
		    strlen(f))
			return bad(p, "shape field name '%s': expected letters, digits, '-' or '_'", f);
		if (krt_abi_shape(a, f))
			return bad(p, "shape field '%s' given twice", f);
		if (a->nshape == KRT_MAX_SHAPE)
			return bad(p, "more than %d shape fields", KRT_MAX_SHAPE);
		KrtShapeField *s = &a->shape[a->nshape];
		if (copy_field(p, s->name, sizeof s->name, f, "shape field name") ||
		    copy_field(p, s->value, sizeof s->value, eq + 1, "shape field value"))
			return p->err->code;
		a->nshape++;
	}
	return 0;
}

static int
h_threads(Parser *p, char *v, KrtAbi *a)
{
	uint64_t t;
	/* 1024 threads per block is the CUDA limit for every CC we target. */
	if (parse_uint(v, 1024, &t) != 0 || t == 0)
		return bad(p, "expected threads per block 1..1024, got '%s'", v);
	a->threads = (int)t;
	return 0;
}

static int
h_cluster(Parser *p, char *v, KrtAbi *a)
{
	char *f[MAX_FIELDS];
	if (split(v, f, MAX_FIELDS) != 3)
		return bad(p, "expected three cluster dimensions 'X Y Z'");
	for (int i = 0; i < 3; i++) {
		uint64_t c;
		if (parse_uint(f[i], 1024, &c) != 0 || c == 0)
			return bad(p, "cluster dimension %c: expected 1..1024, got '%s'", "xyz"[i],
			           f[i]);
		a->cluster[i] = (int)c;
	}
	return 0;
}

static int
h_smem(Parser *p, char *v, KrtAbi *a)
{
	uint64_t s;
	if (parse_uint(v, UINT32_MAX, &s) != 0)
		return bad(p, "expected dynamic shared memory bytes (0..4294967295), got '%s'", v);
	a->smem = (uint32_t)s;
	return 0;
}

static int
h_grid(Parser *p, char *v, KrtAbi *a)
{
	char *f[MAX_FIELDS];
	if (split(v, f, MAX_FIELDS) != 3)
		return bad(p, "expected three grid expressions 'X Y Z' (no spaces inside one)");
	for (int i = 0; i < 3; i++)
		if (copy_field(p, a->grid[i], sizeof a->grid[i], f[i], "grid expression"))
			return p->err->code;
	return 0; /* names are checked once the params are known */
}

/* The fixed keys, in their order; an optional one may be left out. */
static const struct {
	const char *key;
	const char *form; /* what its value looks like, for messages */
	int (*parse)(Parser *p, char *v, KrtAbi *a);
	int optional;
} header_keys[] = {
	{"kgen-abi", "1", h_version, 0},
	{"kernel", "NAME", h_kernel, 0},
	{"family", "NAME", h_family, 0},
	{"target", "sm_90a|sm_100a", h_target, 0},
	{"ptx", "MAJOR.MINOR", h_ptx, 0},
	{"args", "KGEN-ARGUMENTS", h_args, 0},
	{"shape", "NAME=VALUE ...", h_shape, 1},
	{"threads", "N", h_threads, 0},
	{"cluster", "X Y Z", h_cluster, 0},
	{"smem", "BYTES", h_smem, 0},
	{"grid", "EXPR-X EXPR-Y EXPR-Z", h_grid, 0},
};

enum { NKEYS = sizeof header_keys / sizeof header_keys[0] };

/* ---- params --------------------------------------------------------------- */

static int
f_dtype(Parser *p, const char *v, KrtAbiParam *q)
{
	const KrtDtype *d = krt_dtype_find(v);
	if (!d) {
		char known[256] = "";
		for (int i = 0; i < NDTYPES; i++) {
			strcat(known, " ");
			strcat(known, dtypes[i].name);
		}
		return bad(p, "param %s: unknown dtype '%s' (known:%s)", q->name, v, known);
	}
	strcpy(q->dtype, d->name);
	q->elem_bytes = d->bytes;
	return 0;
}

static int
f_rank(Parser *p, const char *v, KrtAbiParam *q)
{
	uint64_t r;
	/* cuTensorMapEncodeTiled takes rank 1..5 (docs/hardware.md, "Tensor map encoding"). */
	if (parse_uint(v, KRT_MAX_RANK, &r) != 0 || r == 0)
		return bad(p, "param %s: rank must be 1..%d, got '%s'", q->name, KRT_MAX_RANK, v);
	q->rank = (int)r;
	return 0;
}

static int
f_box(Parser *p, const char *v, KrtAbiParam *q)
{
	char buf[128];
	if (strlen(v) >= sizeof buf)
		return bad(p, "param %s: box '%s' too long", q->name, v);
	strcpy(buf, v);
	int n = 0;
	for (char *s = buf;;) {
		char *c = strchr(s, ',');
		if (c)
			*c = 0;
		uint64_t b;
		/* boxDim[i] in 1..256 (docs/hardware.md, "Tensor map encoding"). */
		if (n == KRT_MAX_RANK || parse_uint(s, 256, &b) != 0 || b == 0)
			return bad(p,
			           "param %s: box must be %d comma-separated sizes 1..256 "
			           "(innermost first), got '%s'",
			           q->name, q->rank, v);
		q->box[n++] = (uint32_t)b;
		if (!c)
			break;
		s = c + 1;
	}
	if (n != q->rank)
		return bad(p, "param %s: box has %d size%s but rank=%d", q->name, n, n == 1 ? "" : "s",
		           q->rank);
	return 0;
}

static int
f_swizzle(Parser *p, const char *v, KrtAbiParam *q)
{
	static const struct {
		const char *name;
		int bytes;
	} sw[] = {{"none", 0}, {"32", 32}, {"64", 64}, {"128", 128}};
	for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++)
		if (strcmp(v, sw[i].name) == 0) {
			q->swizzle = sw[i].bytes;
			return 0;
		}
	return bad(p, "param %s: swizzle must be none, 32, 64 or 128, got '%s'", q->name, v);
}

static int
f_tensor(Parser *p, const char *v, KrtAbiParam *q)
{
	return copy_field(p, q->tensor, sizeof q->tensor, v, "tensor description");
}

static const struct {
	const char *key;
	const char *form;
	int (*parse)(Parser *p, const char *v, KrtAbiParam *q);
} param_fields[] = {
	{"dtype", "dtype=T", f_dtype},
	{"rank", "rank=R", f_rank},
	{"box", "box=b0,b1,..", f_box},
	{"swizzle", "swizzle=none|32|64|128", f_swizzle},
	{"tensor", "tensor=DESC", f_tensor},
};

enum { F_DTYPE = 1, F_RANK = 2, F_BOX = 4, F_SWIZZLE = 8, F_TENSOR = 16 };

/* Param kinds: the ABI spelling and the fields that follow the name, in
 * order (docs/ABI.md). */
static const struct {
	const char *name;
	KrtArgKind kind;
	unsigned fields;
} param_kinds[] = {
	{"tmap", KRT_ARG_TMAP, F_DTYPE | F_RANK | F_BOX | F_SWIZZLE | F_TENSOR},
	{"ptr", KRT_ARG_PTR, F_DTYPE | F_TENSOR},
	{"u32", KRT_ARG_U32, 0},
	{"s32", KRT_ARG_S32, 0},
	{"u64", KRT_ARG_U64, 0},
	{"f32", KRT_ARG_F32, 0},
};

static int
parse_param(Parser *p, char *v, KrtAbi *a)
{
	char *f[MAX_FIELDS];
	int n = split(v, f, MAX_FIELDS);
	if (n < 2)
		return bad(p, "expected '//@param KIND NAME [FIELDS]'");
	if (a->nparams == KRT_MAX_PARAMS)
		return bad(p, "more than %d params", KRT_MAX_PARAMS);
	KrtAbiParam *q = &a->params[a->nparams];
	memset(q, 0, sizeof *q);
	size_t k = 0, nk = sizeof param_kinds / sizeof param_kinds[0];
	while (k < nk && strcmp(param_kinds[k].name, f[0]) != 0)
		k++;
	if (k == nk)
		return bad(p, "unknown param kind '%s' (expected tmap, ptr, u32, s32, u64 or f32)",
		           f[0]);
	q->kind = param_kinds[k].kind;
	if (!is_name(f[1]) || strlen(f[1]) >= sizeof q->name)
		return bad(p, "param name '%s' must match [A-Za-z_][A-Za-z0-9_]* and be under %zu "
		              "characters",
		           f[1], sizeof q->name);
	if (strcmp(f[1], "cdiv") == 0)
		return bad(p, "param name 'cdiv' is reserved for grid expressions");
	if (krt_abi_find(a, f[1]))
		return bad(p, "param name '%s' is used twice", f[1]);
	strcpy(q->name, f[1]);
	int i = 2;
	for (size_t j = 0; j < sizeof param_fields / sizeof param_fields[0]; j++) {
		if (!(param_kinds[k].fields & (1u << j)))
			continue;
		size_t kl = strlen(param_fields[j].key);
		if (i >= n || strncmp(f[i], param_fields[j].key, kl) != 0 || f[i][kl] != '=')
			return bad(p, "%s param %s: expected '%s' %s, got '%s'", f[0], q->name,
			           param_fields[j].form, i == 2 ? "after the name" : "next",
			           i < n ? f[i] : "end of line");
		if (param_fields[j].parse(p, f[i] + kl + 1, q))
			return p->err->code;
		i++;
	}
	/* ptr: an optional align=N after the tensor, a power of two 1..256
	 * (docs/ABI.md: the kernel moves the tensor in N-byte vectors) */
	if (q->kind == KRT_ARG_PTR && i < n && strncmp(f[i], "align=", 6) == 0) {
		uint64_t al;
		if (parse_uint(f[i] + 6, 256, &al) != 0 || al == 0 || (al & (al - 1)))
			return bad(p, "ptr param %s: align must be a power of two 1..256, got '%s'", q->name, f[i] + 6);
		q->align = (int)al;
		i++;
	}
	if (i < n)
		return bad(p, "%s param %s: unexpected '%s' after its fields", f[0], q->name, f[i]);
	a->nparams++;
	return 0;
}

/* Splits p->line into its key and value (NULL if none) after checking the
 * line's shape. 0: done, 1: not a //@ line, -1: error (in p->err). */
static int
split_line(Parser *p, char **key, char **val)
{
	char *s = p->line;
	if (strncmp(s, "//@", 3) != 0)
		return 1;
	const char *why = NULL;
	size_t n = strlen(s);
	if (strchr(s, '\t') || strchr(s, '\r'))
		why = "tab or carriage return in the header; fields are separated by single "
		      "spaces and lines end with \\n";
	else if (strstr(s, "  "))
		why = "two spaces in a row; fields are separated by single spaces";
	else if (n > 3 && s[n - 1] == ' ')
		why = "trailing space; fields are separated by single spaces";
	if (why) {
		bad(p, "%s", why);
		return -1;
	}
	*key = s + 3;
	char *sp = strchr(s + 3, ' ');
	*val = NULL;
	if (sp) {
		*sp = 0;
		*val = sp + 1;
	}
	return 0;
}

/* r from next_line: 0 (end of input) is an error here, `want` says what
 * was expected ("'//@ptx MAJOR.MINOR'"). */
static int
expect_key(Parser *p, int r, const char *want)
{
	if (r == 0)
		return krt_errf(p->err, KRT_EABI,
		                "kgen ABI header, line %d: end of the PTX where %s was expected (the "
		                "header ends with //@end)",
		                p->lineno + 1, want);
	return r < 0 ? p->err->code : 0;
}

static int
key_mismatch(Parser *p, int is_header_line, const char *key, const char *want)
{
	if (!is_header_line)
		return bad(p, "expected %s%s; the kgen ABI header is a block of //@ lines ending "
		              "with //@end at the top of the PTX",
		           want, p->lineno == 1 ? " (the first line of a kgen PTX file)" : "");
	int known = strcmp(key, "param") == 0 || strcmp(key, "end") == 0;
	for (int i = 0; i < NKEYS; i++)
		known |= strcmp(key, header_keys[i].key) == 0;
	char order[256] = "";
	for (int i = 0; i < NKEYS; i++) {
		strcat(order, header_keys[i].key);
		strcat(order, ", ");
	}
	return bad(p, "expected %s, got %s key '%s' (keys come in the order %sparam..., end)", want,
	           known ? "the out-of-order" : "an unknown", key, order);
}

int
krt_abi_parse(const char *ptx, size_t len, KrtAbi *out, KrtErr *err)
{
	KrtErr scratch;
	if (!err)
		err = &scratch;
	krt_err_clear(err);
	if (!out)
		return krt_errf(err, KRT_EINVAL, "krt_abi_parse: out is NULL");
	memset(out, 0, sizeof *out);
	if (!ptx)
		return krt_errf(err, KRT_EINVAL, "krt_abi_parse: ptx is NULL");
	Parser p = {.cur = ptx, .end = ptx + len, .lineno = 0, .err = err};
	int grid_line = 0;
	for (int k = 0; k < NKEYS; k++) {
		char *key = NULL, *val = NULL, want[64];
		snprintf(want, sizeof want, "'//@%s %s'", header_keys[k].key, header_keys[k].form);
		const char *at = p.cur;
		int lineno = p.lineno;
		int r = next_line(&p);
		if (expect_key(&p, r, want))
			return err->code;
		r = split_line(&p, &key, &val);
		if (r < 0)
			return err->code;
		if (header_keys[k].optional && (r == 1 || strcmp(key, header_keys[k].key) != 0)) {
			p.cur = at; /* read that line again as the next key */
			p.lineno = lineno;
			continue;
		}
		if (r == 1 || strcmp(key, header_keys[k].key) != 0)
			return key_mismatch(&p, r == 0, key, want);
		if (!val)
			return bad(&p, "'//@%s' needs a value: '//@%s %s'", key, key,
			           header_keys[k].form);
		if (header_keys[k].parse(&p, val, out))
			return err->code;
		if (strcmp(key, "grid") == 0)
			grid_line = p.lineno;
	}
	for (;;) {
		char *key = NULL, *val = NULL;
		static const char want[] = "'//@end' or another '//@param KIND NAME ...'";
		int r = next_line(&p);
		if (expect_key(&p, r, want) != 0)
			return err->code;
		r = split_line(&p, &key, &val);
		if (r < 0)
			return err->code;
		if (r == 0 && strcmp(key, "end") == 0) {
			if (val)
				return bad(&p, "'//@end' takes no value");
			break;
		}
		if (r == 1 || strcmp(key, "param") != 0)
			return key_mismatch(&p, r == 0, key, want);
		if (!val)
			return bad(&p, "'//@param' needs 'KIND NAME [FIELDS]'");
		if (parse_param(&p, val, out))
			return err->code;
	}
	/* The grid may name only params, which come after it. */
	for (int i = 0; i < 3; i++) {
		uint64_t v;
		KrtErr e;
		if (krt_expr_eval(out->grid[i], out, NULL, &v, &e) != KRT_OK)
			return krt_errf(err, KRT_EABI, "kgen ABI header, line %d: grid %c: %s",
			                grid_line, "xyz"[i], e.msg);
	}
	return KRT_OK;
}

const char *
krt_abi_shape(const KrtAbi *abi, const char *name)
{
	if (!abi || !name)
		return NULL;
	for (int i = 0; i < abi->nshape; i++)
		if (strcmp(abi->shape[i].name, name) == 0)
			return abi->shape[i].value;
	return NULL;
}

const KrtAbiParam *
krt_abi_find(const KrtAbi *abi, const char *name)
{
	if (!abi || !name)
		return NULL;
	for (int i = 0; i < abi->nparams; i++)
		if (strcmp(abi->params[i].name, name) == 0)
			return &abi->params[i];
	return NULL;
}

/* ---- PTX text --------------------------------------------------------------- */

static const char *
find_in(const char *s, const char *e, const char *needle)
{
	size_t n = strlen(needle);
	for (; s + n <= e; s++)
		if (memcmp(s, needle, n) == 0)
			return s;
	return NULL;
}

static void
copy_span(char *dst, size_t cap, const char *s, const char *e)
{
	if (!dst || cap == 0)
		return;
	size_t n = (size_t)(e - s);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = 0;
}

int
krt_ptx_block_at(const char *ptx, size_t len, int line, char *block, size_t block_n,
                 char *text, size_t text_n)
{
	static const char mark[] = "// @block ";
	if (block && block_n)
		block[0] = 0;
	if (text && text_n)
		text[0] = 0;
	if (!ptx || line < 1)
		return -1;
	const char *s = ptx, *end = ptx + len;
	int found = 0;
	for (int n = 1; s < end; n++) {
		const char *eol = memchr(s, '\n', (size_t)(end - s));
		if (!eol)
			eol = end;
		const char *m = find_in(s, eol, mark);
		if (m) {
			const char *b = m + sizeof mark - 1, *be = b;
			while (be < eol && !isspace((unsigned char)*be))
				be++;
			if (be > b) {
				copy_span(block, block_n, b, be);
				found = 1;
			}
		}
		if (n == line) {
			const char *te = eol;
			if (te > s && te[-1] == '\r')
				te--;
			copy_span(text, text_n, s, te);
			return found;
		}
		s = eol + 1;
	}
	return -1;
}

int
krt_jit_log_explain(const char *ptx, size_t len, const char *log, char *out, size_t n)
{
	enum { MAX_LINES = 8 };
	int seen[MAX_LINES], nseen = 0;
	size_t at = 0;
	if (n)
		out[0] = 0;
	if (!log || !n)
		return 0;
	/* ptxas writes "ptxas application ptx input, line 7; error : ..."
	 * (docs/hardware.md, "Driver JIT logs"): PTX line numbers of the whole file. */
	for (const char *s = log; (s = strstr(s, "line ")) != NULL; s += 5) {
		if (s > log && (isalnum((unsigned char)s[-1]) || s[-1] == '_'))
			continue;
		const char *d = s + 5;
		if (!isdigit((unsigned char)*d))
			continue;
		long ln = strtol(d, NULL, 10);
		if (ln < 1 || ln > 100000000)
			continue;
		int dup = 0;
		for (int i = 0; i < nseen; i++)
			dup |= seen[i] == (int)ln;
		if (dup)
			continue;
		if (nseen == MAX_LINES)
			break;
		seen[nseen++] = (int)ln;
		char block[128], text[256];
		int r = krt_ptx_block_at(ptx, len, (int)ln, block, sizeof block, text, sizeof text);
		const char *t = text;
		while (*t == ' ' || *t == '\t')
			t++;
		if (r == 1)
			krt_appendf(out, n, &at, "  PTX line %ld is in block %s: %s\n", ln, block, t);
		else if (r == 0)
			krt_appendf(out, n, &at, "  PTX line %ld (before any // @block): %s\n", ln, t);
		else
			krt_appendf(out, n, &at, "  PTX line %ld: past the end of the PTX\n", ln);
	}
	return nseen;
}

/* The first word after `directive` on a line of code (comments skipped),
 * or -1 if there is none. */
static int
find_directive(const char *ptx, size_t len, const char *directive, char *word, size_t n)
{
	size_t dl = strlen(directive);
	const char *s = ptx, *end = ptx + len;
	for (int line = 1; s < end; line++) {
		const char *eol = memchr(s, '\n', (size_t)(end - s));
		if (!eol)
			eol = end;
		const char *t = s;
		while (t < eol && isspace((unsigned char)*t))
			t++;
		if ((size_t)(eol - t) > dl && memcmp(t, directive, dl) == 0 &&
		    isspace((unsigned char)t[dl])) {
			t += dl;
			while (t < eol && isspace((unsigned char)*t))
				t++;
			const char *we = t;
			while (we < eol && !isspace((unsigned char)*we) && *we != ',')
				we++;
			copy_span(word, n, t, we);
			return line;
		}
		s = eol + 1;
	}
	return -1;
}

/* Whether `.entry NAME` appears, NAME followed by '(' or a space. */
static int
has_entry(const char *ptx, size_t len, const char *kernel)
{
	const char *s = ptx, *end = ptx + len;
	size_t kl = strlen(kernel);
	while ((s = find_in(s, end, ".entry")) != NULL) {
		const char *t = s + 6;
		s = t;
		if (t >= end || !isspace((unsigned char)*t))
			continue;
		while (t < end && isspace((unsigned char)*t))
			t++;
		if ((size_t)(end - t) > kl && memcmp(t, kernel, kl) == 0 &&
		    (t[kl] == '(' || isspace((unsigned char)t[kl])))
			return 1;
	}
	return 0;
}

int
krt_ptx_check_body(const KrtAbi *abi, const char *ptx, size_t len, KrtErr *err)
{
	char word[64], want[16];
	int line = find_directive(ptx, len, ".version", word, sizeof word);
	snprintf(want, sizeof want, "%d.%d", abi->ptx_major, abi->ptx_minor);
	if (line < 0)
		return krt_errf(err, KRT_EABI, "kernel %s: the PTX has no .version directive",
		                abi->kernel);
	if (strcmp(word, want) != 0)
		return krt_errf(err, KRT_EABI,
		                "kernel %s: the header says //@ptx %s but PTX line %d says "
		                ".version %s",
		                abi->kernel, want, line, word);
	line = find_directive(ptx, len, ".target", word, sizeof word);
	if (line < 0)
		return krt_errf(err, KRT_EABI, "kernel %s: the PTX has no .target directive",
		                abi->kernel);
	if (strcmp(word, abi->target) != 0)
		return krt_errf(err, KRT_EABI,
		                "kernel %s: the header says //@target %s but PTX line %d says "
		                ".target %s",
		                abi->kernel, abi->target, line, word);
	if (!has_entry(ptx, len, abi->kernel))
		return krt_errf(err, KRT_EABI,
		                "kernel %s: the header names it but the PTX has no '.entry %s'",
		                abi->kernel, abi->kernel);
	return KRT_OK;
}
