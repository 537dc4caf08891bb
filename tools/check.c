/* The checker (see check.h): seeded inputs, guarded and poisoned outputs,
 * arguments bound by name from the ABI header, a float64 reference, and a
 * report that is enough to replay a failure.
 *
 * The parts, in order: small helpers; the case (buffers with guard bands,
 * binding of ABI parameters); the generic output checks (guards, poison);
 * the gemm family; the family table; check_run; tool helpers.
 *
 * Adding a family (fmha): write its prepare/compare/flops/peer_args next to
 * the gemm ones and add a row to `families`. The binding needs nothing new
 * as long as its ABI names tensors by parameter name and their dimensions
 * by scalar or shape names (`tmap Q ... tensor=Q[B,S,H,D]`). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "gemm_ref.h"
#include "num.h"
#include "tools/check.h"

enum {
	CHECK_MAX_BUFS = 8,
	GUARD_BYTE = 0x99,  /* around outputs, as dav1d's checkasm does */
	POISON_BYTE = 0xff, /* inside outputs: 0xffff / 0xffffffff are NaNs
	                     * that no tensor core or cvt produces (they
	                     * give the canonical 0x7fff... forms) */
	MAX_REPORT = 8,
};

/* ---- helpers ------------------------------------------------------------ */

static int
fail(KrtErr *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
fail(KrtErr *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
	}
	return code;
}

static uint64_t
round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* ---- the case ----------------------------------------------------------- */

typedef struct CheckBuf {
	char name[32];   /* the ABI parameter it is bound to */
	NumType type;
	uint64_t count;  /* elements */
	size_t bytes;
	size_t guard;    /* bytes of guard band before and after (outputs) */
	KrtPtr base;     /* the allocation */
	KrtPtr ptr;      /* base + guard: what the kernel gets */
	void *host;      /* inputs: what was uploaded; outputs: the download,
	                  * guard bands included */
	int output;
	/* found by the generic output checks */
	uint64_t unwritten;
	uint64_t first_unwritten;
	uint64_t guard_bad;
	long long first_guard_bad; /* byte offset from ptr; negative = before */
} CheckBuf;

struct CheckCase {
	KrtDevice *dev;
	KrtModule *mod;
	const KrtAbi *abi;
	const CheckFamily *fam;
	CheckShape shape;
	uint64_t seed;
	CheckFill fill;
	NumRng rng;
	CheckBuf bufs[CHECK_MAX_BUFS];
	int nbufs;
	KrtArg args[KRT_MAX_PARAMS];
	int nargs;
	const CheckOpts *opts; /* during verify */
	char report[4096];     /* mismatch lines from the family's compare */
	size_t report_len;
};

static void
report(CheckCase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
report(CheckCase *c, const char *fmt, ...)
{
	va_list ap;
	size_t room = sizeof c->report - c->report_len;

	if (room <= 1)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(c->report + c->report_len, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		c->report_len += (size_t)n < room ? (size_t)n : room - 1;
}

static int
buf_index(const CheckCase *c, const char *name)
{
	for (int i = 0; i < c->nbufs; i++)
		if (strcmp(c->bufs[i].name, name) == 0)
			return i;
	return -1;
}

static CheckBuf *
find_buf(CheckCase *c, const char *name)
{
	int i = buf_index(c, name);
	return i < 0 ? NULL : &c->bufs[i];
}

static CheckBuf *
new_buf(CheckCase *c, const char *name, NumType type, uint64_t count, KrtErr *err)
{
	if (c->nbufs == CHECK_MAX_BUFS) {
		fail(err, KRT_EINVAL, "check: more than %d buffers", CHECK_MAX_BUFS);
		return NULL;
	}
	CheckBuf *b = &c->bufs[c->nbufs++];
	memset(b, 0, sizeof *b);
	snprintf(b->name, sizeof b->name, "%s", name);
	b->type = type;
	b->count = count;
	b->bytes = (size_t)count * (size_t)num_type_size(type);
	return b;
}

/* Takes ownership of host (freed with the case, also on failure). */
static int
add_input(CheckCase *c, const char *name, NumType type, uint64_t count, void *host,
          KrtErr *err)
{
	CheckBuf *b = new_buf(c, name, type, count, err);
	if (!b) {
		free(host);
		return KRT_EINVAL;
	}
	b->host = host;
	int rc = krt_alloc(c->dev, b->bytes, &b->base, err);
	if (rc)
		return rc;
	b->ptr = b->base;
	return krt_upload(c->dev, b->ptr, host, b->bytes, err);
}

/* guard: bytes of guard band on each side; rounded up to 4 KiB so that the
 * output keeps the allocation's alignment. */
static int
add_output(CheckCase *c, const char *name, NumType type, uint64_t count, size_t guard,
           KrtErr *err)
{
	CheckBuf *b = new_buf(c, name, type, count, err);
	if (!b)
		return KRT_EINVAL;
	b->output = 1;
	b->guard = (size_t)round_up(guard, 4096);
	int rc = krt_alloc(c->dev, b->bytes + 2 * b->guard, &b->base, err);
	if (rc)
		return rc;
	b->ptr = b->base + b->guard;
	return 0;
}

/* The dimension of the shape called `name` (a family dimension). */
static int
dim_value(const CheckCase *c, const char *name, size_t len, uint64_t *out)
{
	const char *d = c->fam->dims;

	for (int i = 0; i < c->fam->ndims; i++) {
		size_t n = strcspn(d, ",");
		if (n == len && strncmp(d, name, len) == 0) {
			*out = c->shape.d[i];
			return 0;
		}
		d += n + (d[n] == ',');
	}
	return -1;
}

/* A tensor map over a row-major buffer: the ABI's tensor description
 * "A[M,K]" names the dimensions outermost first; TMA wants them innermost
 * first, with byte strides. */
static int
bind_tmap(CheckCase *c, const KrtAbiParam *p, KrtTensor *t, KrtErr *err)
{
	CheckBuf *b = find_buf(c, p->name);
	const char *s = strchr(p->tensor, '[');
	uint64_t outer_first[KRT_MAX_RANK];
	int rank = 0;

	if (!b)
		return fail(err, KRT_EABI, "%s: tmap %s names no buffer of family %s",
		            c->abi->kernel, p->name, c->fam->name);
	if (!s)
		return fail(err, KRT_EABI, "%s: tmap %s: tensor=%s has no [dims]", c->abi->kernel,
		            p->name, p->tensor);
	for (s++; *s && *s != ']'; rank++) {
		size_t n = strcspn(s, ",]");
		if (rank == KRT_MAX_RANK || dim_value(c, s, n, &outer_first[rank]))
			return fail(err, KRT_EABI, "%s: tmap %s: tensor=%s: dimension '%.*s' is not "
			            "one of %s (or too many)", c->abi->kernel, p->name, p->tensor,
			            (int)n, s, c->fam->dims);
		s += n + (s[n] == ',');
	}
	if (rank != p->rank)
		return fail(err, KRT_EABI, "%s: tmap %s: rank=%d but tensor=%s has %d dims",
		            c->abi->kernel, p->name, p->rank, p->tensor, rank);
	uint64_t elems = 1;
	t->ptr = b->ptr;
	t->rank = rank;
	for (int i = 0; i < rank; i++) {
		t->dims[i] = outer_first[rank - 1 - i];
		t->strides[i] = i ? t->strides[i - 1] * t->dims[i - 1] : (uint64_t)num_type_size(b->type);
		elems *= t->dims[i];
	}
	if (elems != b->count)
		return fail(err, KRT_EABI, "%s: tmap %s: tensor=%s holds %llu elements, the buffer "
		            "%llu", c->abi->kernel, p->name, p->tensor, (unsigned long long)elems,
		            (unsigned long long)b->count);
	return 0;
}

static int
bind_scalar(CheckCase *c, const KrtAbiParam *p, KrtArg *a, KrtErr *err)
{
	uint64_t v;

	if (dim_value(c, p->name, strlen(p->name), &v))
		return fail(err, KRT_EABI, "%s: scalar %s: family %s has no value for it (dims %s)",
		            c->abi->kernel, p->name, c->fam->name, c->fam->dims);
	if (p->kind == KRT_ARG_U32 && v > UINT32_MAX)
		return fail(err, KRT_EINVAL, "%s=%llu: must fit in u32", p->name,
		            (unsigned long long)v);
	if (p->kind == KRT_ARG_S32 && v > INT32_MAX)
		return fail(err, KRT_EINVAL, "%s=%llu: must fit in s32", p->name,
		            (unsigned long long)v);
	if (p->kind == KRT_ARG_U32)
		a->v.u32 = (uint32_t)v;
	else if (p->kind == KRT_ARG_S32)
		a->v.s32 = (int32_t)v;
	else if (p->kind == KRT_ARG_U64)
		a->v.u64 = v;
	else
		return fail(err, KRT_EABI, "%s: f32 %s: family %s has no value for it",
		            c->abi->kernel, p->name, c->fam->name);
	return 0;
}

/* One KrtArg per ABI parameter, in ABI order, found by name: tensors and
 * pointers from the case's buffers, scalars from the shape. */
static int
bind(CheckCase *c, KrtErr *err)
{
	const KrtAbi *abi = c->abi;

	for (int i = 0; i < abi->nparams; i++) {
		const KrtAbiParam *p = &abi->params[i];
		KrtArg *a = &c->args[i];
		CheckBuf *b = find_buf(c, p->name);
		NumType t;
		int rc;

		a->kind = p->kind;
		if ((p->kind == KRT_ARG_TMAP || p->kind == KRT_ARG_PTR) &&
		    (!b || num_type_parse(p->dtype, &t) || t != b->type))
			return fail(err, KRT_EABI, "%s: %s dtype=%s: the %s checker has %s %s",
			            abi->kernel, p->name, p->dtype, c->fam->name,
			            b ? num_type_name(b->type) : "no buffer", b ? "there" : "of that name");
		if (p->kind == KRT_ARG_TMAP)
			rc = bind_tmap(c, p, &a->v.t, err);
		else if (p->kind == KRT_ARG_PTR) {
			a->v.p = b->ptr;
			rc = 0;
		} else
			rc = bind_scalar(c, p, a, err);
		if (rc)
			return rc;
	}
	c->nargs = abi->nparams;
	return 0;
}

int
check_case_new(CheckCase **out, KrtDevice *dev, KrtModule *mod, const CheckShape *shape,
               uint64_t seed, CheckFill fill, KrtErr *err)
{
	const KrtAbi *abi = krt_module_abi(mod);
	const CheckFamily *fam = check_family(abi->family);

	*out = NULL;
	if (!fam) {
		char known[256] = "";
		for (int i = 0; check_family_at(i); i++)
			snprintf(known + strlen(known), sizeof known - strlen(known), " %s",
			         check_family_at(i)->name);
		return fail(err, KRT_EINVAL, "%s: family '%s' has no checker (check.c knows:%s)",
		            abi->kernel, abi->family, known);
	}
	if (shape->n != fam->ndims)
		return fail(err, KRT_EINVAL, "family %s: a shape has %d dimensions (%s), not %d",
		            fam->name, fam->ndims, fam->dims, shape->n);
	CheckCase *c = calloc(1, sizeof *c);
	if (!c)
		return fail(err, KRT_ENOMEM, "check: out of memory");
	c->dev = dev;
	c->mod = mod;
	c->abi = abi;
	c->fam = fam;
	c->shape = *shape;
	c->seed = seed;
	c->fill = fill;
	num_rng_seed(&c->rng, seed);
	int rc = fam->prepare(c, err);
	if (!rc)
		rc = bind(c, err);
	if (rc) {
		check_case_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void
check_case_free(CheckCase *c)
{
	KrtErr e;

	if (!c)
		return;
	for (int i = 0; i < c->nbufs; i++) {
		if (c->bufs[i].base)
			krt_free(c->dev, c->bufs[i].base, &e);
		free(c->bufs[i].host);
	}
	free(c);
}

const KrtArg *
check_case_args(const CheckCase *c, int *nargs)
{
	*nargs = c->nargs;
	return c->args;
}

const CheckFamily *
check_case_family(const CheckCase *c)
{
	return c->fam;
}

double
check_case_flops(const CheckCase *c)
{
	return c->fam->flops(&c->shape);
}

uint64_t
check_case_bytes(const CheckCase *c)
{
	uint64_t n = 0;
	for (int i = 0; i < c->nbufs; i++)
		n += c->bufs[i].bytes;
	return n;
}

int
check_case_poison(CheckCase *c, KrtErr *err)
{
	for (int i = 0; i < c->nbufs; i++) {
		CheckBuf *b = &c->bufs[i];
		int rc = 0;
		if (!b->output)
			continue;
		rc = krt_memset8(c->dev, b->base, GUARD_BYTE, b->guard, err);
		if (!rc)
			rc = krt_memset8(c->dev, b->ptr, POISON_BYTE, b->bytes, err);
		if (!rc)
			rc = krt_memset8(c->dev, b->ptr + b->bytes, GUARD_BYTE, b->guard, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- generic output checks ---------------------------------------------- */

/* Element idx of buffer b as coordinates of its tensor description, e.g.
 * "[126,0]" for C[M,N]; the plain index if the ABI does not say. */
static void
coords(const CheckCase *c, const CheckBuf *b, uint64_t idx, char *buf, size_t n)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, b->name);
	const char *s = p ? strchr(p->tensor, '[') : NULL;
	uint64_t dims[KRT_MAX_RANK], rem = idx;
	int rank = 0;

	for (s = s ? s + 1 : NULL; s && *s && *s != ']' && rank < KRT_MAX_RANK; rank++) {
		size_t len = strcspn(s, ",]");
		if (dim_value(c, s, len, &dims[rank])) {
			rank = 0;
			break;
		}
		s += len + (s[len] == ',');
	}
	if (rank == 0) {
		snprintf(buf, n, "[%llu]", (unsigned long long)idx);
		return;
	}
	uint64_t at[KRT_MAX_RANK];
	for (int i = rank - 1; i >= 0; i--) {
		at[i] = rem % dims[i];
		rem /= dims[i];
	}
	size_t used = 0;
	for (int i = 0; i < rank && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s%llu", i ? "," : "[",
		                         (unsigned long long)at[i]);
	if (used < n)
		snprintf(buf + used, n - used, "]");
}

static void
scan_guards(CheckBuf *b)
{
	const uint8_t *h = b->host;
	const uint8_t *after = h + b->guard + b->bytes;

	for (size_t i = 0; i < b->guard; i++) {
		/* report the byte nearest the buffer first: that is where a
		 * one-off indexing error lands */
		size_t j = b->guard - 1 - i;
		if (h[j] != GUARD_BYTE) {
			if (!b->guard_bad++)
				b->first_guard_bad = -(long long)(i + 1);
		}
	}
	for (size_t i = 0; i < b->guard; i++)
		if (after[i] != GUARD_BYTE && !b->guard_bad++)
			b->first_guard_bad = (long long)i;
}

static void
scan_poison(CheckBuf *b)
{
	const uint8_t *data = (const uint8_t *)b->host + b->guard;

	for (uint64_t i = 0; i < b->count; i++)
		if (num_is_fill(b->type, data, i, POISON_BYTE) && !b->unwritten++)
			b->first_unwritten = i;
}

static int
download_output(CheckCase *c, CheckBuf *b, KrtErr *err)
{
	size_t total = b->bytes + 2 * b->guard;

	if (!b->host && !(b->host = malloc(total ? total : 1)))
		return fail(err, KRT_ENOMEM, "check: no host memory for %zu bytes of %s", total,
		            b->name);
	int rc = krt_download(c->dev, b->host, b->base, total, err);
	if (rc)
		return rc;
	b->unwritten = b->guard_bad = 0;
	scan_guards(b);
	scan_poison(b);
	return 0;
}

static void
print_header(const CheckCase *c, FILE *f, const char *what)
{
	const KrtAbi *abi = c->abi;
	char shape[128] = "";
	const char *d = c->fam->dims;
	size_t used = 0;

	for (int i = 0; i < c->fam->ndims && used < sizeof shape; i++) {
		size_t n = strcspn(d, ",");
		used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%.*s=%llu",
		                         i ? " " : "", (int)n, d, (unsigned long long)c->shape.d[i]);
		d += n + (d[n] == ',');
	}
	fprintf(f, "%s %s  kernel %s  shape %s  fill %s  seed %llu\n", what, c->fam->name,
	        abi->kernel, shape, check_fill_name(c->fill), (unsigned long long)c->seed);
	fprintf(f, "  kgen args: %s\n", abi->args);
	fprintf(f, "  abi: target %s, ptx %d.%d, threads %d, cluster %dx%dx%d, smem %u, grid %s %s %s\n",
	        abi->target, abi->ptx_major, abi->ptx_minor, abi->threads, abi->cluster[0],
	        abi->cluster[1], abi->cluster[2], abi->smem, abi->grid[0], abi->grid[1],
	        abi->grid[2]);
	for (int i = 0; i < abi->nparams; i++) {
		const KrtAbiParam *p = &abi->params[i];
		const KrtArg *a = &c->args[i];
		if (p->kind == KRT_ARG_TMAP)
			fprintf(f, "  param tmap %s dtype=%s box=%u,%u swizzle=%d %s\n", p->name,
			        p->dtype, p->box[0], p->rank > 1 ? p->box[1] : 1, p->swizzle,
			        p->tensor);
		else if (p->kind == KRT_ARG_PTR)
			fprintf(f, "  param ptr %s dtype=%s %s\n", p->name, p->dtype, p->tensor);
		else if (p->kind == KRT_ARG_U32 && i < c->nargs)
			fprintf(f, "  param u32 %s = %u\n", p->name, a->v.u32);
		else
			fprintf(f, "  param %s\n", p->name);
	}
}

static void
print_failure(const CheckCase *c, const CheckOpts *o, const CheckResult *r)
{
	FILE *f = o->log ? o->log : stderr;
	char at[96];

	print_header(c, f, "FAIL");
	for (int i = 0; i < c->nbufs; i++) {
		const CheckBuf *b = &c->bufs[i];
		if (!b->output)
			continue;
		if (b->unwritten) {
			coords(c, b, b->first_unwritten, at, sizeof at);
			fprintf(f, "  %s: %llu of %llu elements never written (poison left), first %s\n",
			        b->name, (unsigned long long)b->unwritten,
			        (unsigned long long)b->count, at);
		}
		if (b->guard_bad)
			fprintf(f, "  %s: %llu guard-band bytes changed (out-of-bounds writes), nearest "
			        "at byte %lld %s the buffer\n", b->name,
			        (unsigned long long)b->guard_bad,
			        b->first_guard_bad < 0 ? -b->first_guard_bad : b->first_guard_bad,
			        b->first_guard_bad < 0 ? "before" : "after");
	}
	fprintf(f, "  values: %llu of %llu compared elements bad%s; max rel err %.3e, tol %.1e\n",
	        (unsigned long long)r->bad, (unsigned long long)r->checked,
	        r->subset ? " (row subset)" : "", r->max_err, r->tol);
	fputs(c->report, f);
	if (o->label)
		fprintf(f, "  replay: %s\n", o->label);
}

int
check_case_verify(CheckCase *c, const CheckOpts *opts, CheckResult *res, KrtErr *err)
{
	memset(res, 0, sizeof *res);
	c->opts = opts;
	c->report_len = 0;
	c->report[0] = 0;
	for (int i = 0; i < c->nbufs; i++) {
		CheckBuf *b = &c->bufs[i];
		if (!b->output)
			continue;
		int rc = download_output(c, b, err);
		if (rc)
			return rc;
		res->total += b->count;
		res->unwritten += b->unwritten;
		res->guard_bad += b->guard_bad;
	}
	int rc = c->fam->compare(c, res, err);
	if (rc)
		return rc;
	res->pass = res->bad == 0 && res->unwritten == 0 && res->guard_bad == 0 &&
	            res->checked > 0;
	if (!res->pass)
		print_failure(c, opts, res);
	return 0;
}

/* ---- gemm --------------------------------------------------------------- */

/* Input draws. N(0,1) is the main test. The edge pattern puts each row of A
 * and of B at its own power-of-two scale and mixes in zeros, exact powers
 * of two, the input type's smallest subnormals and values 16x the row's
 * scale, so exponent handling, subnormal inputs and cancellation-free large
 * sums all run. Scales stay where nothing can overflow fp32 accumulation or
 * the output type (EdgeRange). Subnormals are sprinkled, never a whole row,
 * so a tensor core that flushes them changes results only far below the
 * tolerance. */
typedef struct EdgeRange {
	int emax;     /* row scales 2^-emax .. 2^emax */
	double spike; /* large values: spike..2*spike times the row's scale */
} EdgeRange;

/* bf16 rows up to 2^20 with 16x spikes: products 2^50, sums 2^50·K, far
 * from fp32's 2^128. fp16 inputs stay under 65504 with rows up to 2^6; an
 * fp16 output holds sums of K N(0,1) products only at scale 1. */
static EdgeRange
edge_range(NumType in, NumType out)
{
	if (out == NUM_FP16)
		return (EdgeRange){0, 4.0};
	return in == NUM_BF16 ? (EdgeRange){20, 16.0} : (EdgeRange){6, 16.0};
}

static double
edge_value(NumRng *r, NumType t, double scale, double spike)
{
	double u = num_rng_uniform(r);
	double sign = (num_rng_u64(r) & 1) ? -1.0 : 1.0;
	double tiny = t == NUM_BF16 ? 0x1p-133 : 0x1p-24; /* smallest subnormal */

	if (u < 0.70)
		return num_rng_normal(r) * scale;
	if (u < 0.78)
		return sign * 0.0;
	if (u < 0.86)
		return sign * scale * ldexp(1.0, (int)num_rng_below(r, 7) - 3);
	if (u < 0.93)
		return sign * tiny * (double)(1 + num_rng_below(r, 4));
	return sign * scale * spike * (1.0 + num_rng_uniform(r));
}

static void
draw_matrix(NumRng *r, CheckFill fill, NumType t, EdgeRange e, uint64_t rows, uint64_t cols,
            void *host)
{
	for (uint64_t i = 0; i < rows; i++) {
		double scale = ldexp(1.0, (int)num_rng_below(r, 2 * (uint64_t)e.emax + 1) - e.emax);
		for (uint64_t k = 0; k < cols; k++) {
			double v = fill == CHECK_FILL_EDGE ? edge_value(r, t, scale, e.spike)
			                                   : num_rng_normal(r);
			num_store(t, host, i * cols + k, v);
		}
	}
}

static int
gemm_dtype(const CheckCase *c, const char *name, KrtArgKind kind, NumType *out, KrtErr *err)
{
	const KrtAbiParam *p = krt_abi_find(c->abi, name);

	if (!p || p->kind != kind)
		return fail(err, KRT_EABI, "%s: family gemm needs a %s parameter named %s",
		            c->abi->kernel, kind == KRT_ARG_TMAP ? "tmap" : "ptr", name);
	if (num_type_parse(p->dtype, out))
		return fail(err, KRT_EABI, "%s: %s dtype=%s: the gemm checker knows bf16, fp16, f32",
		            c->abi->kernel, name, p->dtype);
	return 0;
}

static int
gemm_types(const CheckCase *c, NumType *in, NumType *out, KrtErr *err)
{
	NumType b;
	int rc = gemm_dtype(c, "A", KRT_ARG_TMAP, in, err);

	if (!rc)
		rc = gemm_dtype(c, "B", KRT_ARG_TMAP, &b, err);
	if (!rc)
		rc = gemm_dtype(c, "C", KRT_ARG_PTR, out, err);
	if (rc)
		return rc;
	if (*in == NUM_F32 || b != *in)
		return fail(err, KRT_EABI, "%s: A is %s and B %s: gemm inputs are both bf16 or both "
		            "fp16", c->abi->kernel, num_type_name(*in), num_type_name(b));
	return 0;
}

static int
gemm_prepare(CheckCase *c, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	NumType in, out;
	int rc = gemm_types(c, &in, &out, err);

	if (rc)
		return rc;
	if (!M || !N || !K || M > UINT32_MAX || N > UINT32_MAX || K > UINT32_MAX)
		return fail(err, KRT_EINVAL, "gemm %llux%llux%llu: M, N, K must be in 1..2^32-1",
		            (unsigned long long)M, (unsigned long long)N, (unsigned long long)K);
	if (K % 8)
		return fail(err, KRT_EINVAL, "gemm K=%llu: must be a multiple of 8 (TMA row "
		            "strides are multiples of 16 bytes)", (unsigned long long)K);
	size_t es = (size_t)num_type_size(in);
	void *a = malloc(M * K * es), *b = malloc(N * K * es);
	if (!a || !b) {
		free(a);
		free(b);
		return fail(err, KRT_ENOMEM, "gemm: no host memory for the inputs");
	}
	draw_matrix(&c->rng, c->fill, in, edge_range(in, out), M, K, a);
	draw_matrix(&c->rng, c->fill, in, edge_range(in, out), N, K, b);
	rc = add_input(c, "A", in, M * K, a, err);
	if (!rc)
		rc = add_input(c, "B", in, N * K, b, err);
	else
		free(b);
	/* A kernel that stores a whole tile without bounds checks writes up to
	 * tile_m - 1 rows past the end; tiles are at most 256 rows. */
	if (!rc)
		rc = add_output(c, "C", out, M * N, 256 * N * (size_t)num_type_size(out) + 65536, err);
	return rc;
}

/* Tolerances by output type.
 *
 * The error is normwise per row: err(m,n) = |c(m,n) - ref(m,n)| / max_n' |ref(m,n')|,
 * and the reported error is its maximum over the compared elements. Per
 * element relative error would be ill-posed where ref(m,n) is near 0 (a
 * dot product of random vectors often is); the row's largest magnitude is
 * the scale that fp32 accumulation errors are proportional to, and per row
 * (rather than whole matrix) keeps the edge pattern's differently scaled
 * rows each to their own scale.
 *
 * Why these numbers. The inputs are exact in double, and each product of
 * two bf16 (8-bit) or fp16 (11-bit significand) values is exact in fp32
 * too, so the kernel's only errors are the fp32 accumulation and the final
 * rounding to the output type. For N(0,1) inputs, |ref| ~ sqrt(K) with the
 * row maximum ~3.5 sqrt(K), and summation rounding grows like a random walk:
 * about 2^-24 · K / sqrt(2) absolute, i.e. ~ 2^-24 · sqrt(K) / 5 relative
 * to the row maximum, 1e-6 at K = 8192 (tensor cores add in blocks of 16 or
 * more, so less). An f32 output therefore sits near 1e-6, and 1e-3 leaves
 * three orders of margin for any accumulation order (split-K, different
 * block sums) while losing one K-tile of 64 terms (~sqrt(64) = 8 against
 * 3.5 sqrt(K)) shows as >= 2.5e-2 up to K = 8192. A bf16 output adds a
 * rounding of up to 2^-8 ≈ 3.9e-3 relative to |c| <= the row maximum (8
 * significand bits), so its floor is ~4e-3 and 1e-2 is the tightest round
 * number with margin; an fp16 output (2^-11 ≈ 4.9e-4) gets 5e-3. Any NaN
 * or Inf fails. */
static const double gemm_tol[NUM_NTYPES] = {
	[NUM_BF16] = 1e-2,
	[NUM_FP16] = 5e-3,
	[NUM_F32] = 1e-3,
};

/* Rows compared: all of them while the reference costs at most
 * opts->full_limit multiply-adds; past that, the first, last and middle
 * rows (the edge tiles) plus random ones, about 2^31 multiply-adds'
 * worth and at least 16. */
static uint32_t *
gemm_rows(CheckCase *c, uint64_t M, uint64_t N, uint64_t K, uint32_t *nrows)
{
	uint64_t limit = c->opts->full_limit ? c->opts->full_limit : CHECK_FULL_LIMIT;
	double work = (double)M * (double)N * (double)K; /* can pass 2^64 */
	uint64_t want = M;

	if (work > (double)limit) {
		double rows = 0x1p31 / ((double)N * (double)K);
		want = rows < 16 ? 16 : rows > (double)M ? M : (uint64_t)rows;
		want = want > M ? M : want;
	}
	uint32_t *rows = malloc(sizeof *rows * want);
	if (!rows)
		return NULL;
	if (want == M) {
		for (uint64_t i = 0; i < M; i++)
			rows[i] = (uint32_t)i;
		*nrows = (uint32_t)M;
		return rows;
	}
	NumRng r;
	num_rng_seed(&r, num_mix(c->seed, 0x726f7773u, M, N)); /* "rows" */
	uint64_t n = 0;
	rows[n++] = 0;
	rows[n++] = (uint32_t)(M - 1);
	rows[n++] = (uint32_t)(M / 2);
	while (n < want) /* duplicates are harmless: want << M here */
		rows[n++] = (uint32_t)num_rng_below(&r, M);
	*nrows = (uint32_t)n;
	return rows;
}

static void
gemm_compare_row(CheckCase *c, const CheckBuf *cb, uint32_t m, uint64_t N, const double *ref,
                 CheckResult *res)
{
	const void *out = (const char *)cb->host + cb->guard;
	int max_report = c->opts->max_report ? c->opts->max_report : MAX_REPORT;
	double rowmax = 0.0;

	for (uint64_t n = 0; n < N; n++)
		rowmax = fmax(rowmax, fabs(ref[n]));
	double denom = rowmax > 0.0 ? rowmax : DBL_MIN;
	for (uint64_t n = 0; n < N; n++) {
		uint64_t idx = (uint64_t)m * N + n;
		if (num_is_fill(cb->type, out, idx, POISON_BYTE))
			continue; /* counted as unwritten */
		double got = num_load(cb->type, out, idx);
		double e = isfinite(got) ? fabs(got - ref[n]) / denom : INFINITY;
		res->checked++;
		if (e > res->max_err || isnan(e))
			res->max_err = isnan(e) ? INFINITY : e;
		if (!(e <= res->tol) && res->bad++ < (uint64_t)max_report) {
			if (res->bad == 1)
				report(c, "  %8s %8s %16s %16s %10s\n", "row", "col", "got", "want",
				       "rel err");
			report(c, "  %8u %8llu %16.8g %16.8g %10.3e\n", m, (unsigned long long)n,
			       got, ref[n], e);
		}
	}
}

static int
gemm_compare(CheckCase *c, CheckResult *res, KrtErr *err)
{
	uint64_t M = c->shape.d[0], N = c->shape.d[1], K = c->shape.d[2];
	const CheckBuf *a = find_buf(c, "A"), *b = find_buf(c, "B");
	CheckBuf *cb = find_buf(c, "C");
	uint32_t nrows = 0;
	enum { BLOCK = 64 };

	res->tol = gemm_tol[cb->type];
	uint32_t *rows = gemm_rows(c, M, N, K, &nrows);
	double *ref = malloc(sizeof *ref * N * BLOCK);
	if (!rows || !ref) {
		free(rows);
		free(ref);
		return fail(err, KRT_ENOMEM, "gemm: no host memory for the reference");
	}
	res->subset = nrows < M;
	for (uint32_t i = 0; i < nrows; i += BLOCK) {
		uint32_t nb = nrows - i < BLOCK ? nrows - i : BLOCK;
		gemm_ref_rows(a->type, a->host, b->host, (uint32_t)N, (uint32_t)K, rows + i, nb, ref);
		for (uint32_t j = 0; j < nb; j++)
			gemm_compare_row(c, cb, rows[i + j], N, ref + (size_t)j * N, res);
	}
	free(rows);
	free(ref);
	return 0;
}

static double
gemm_flops(const CheckShape *s)
{
	return 2.0 * (double)s->d[0] * (double)s->d[1] * (double)s->d[2];
}

static int
gemm_peer_args(const CheckCase *c, int iters, int warmup, char *buf, size_t n)
{
	const CheckBuf *a = &c->bufs[buf_index(c, "A")];
	const CheckBuf *out = &c->bufs[buf_index(c, "C")];
	int len = snprintf(buf, n, "gemm %llu %llu %llu %s %d %d %s",
	                   (unsigned long long)c->shape.d[0], (unsigned long long)c->shape.d[1],
	                   (unsigned long long)c->shape.d[2], num_type_name(a->type), iters,
	                   warmup, num_type_name(out->type));
	return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* Sizes that are not multiples of any tile, from one element up. */
static const CheckShape gemm_shapes[] = {
	{3, {1, 1, 8}},
	{3, {7, 13, 24}},
	{3, {127, 129, 72}},
	{3, {257, 383, 520}},
	{3, {300, 256, 1024}},
	{3, {512, 512, 512}},
	{3, {1000, 1000, 1000}},
};

/* ---- the family table --------------------------------------------------- */

/* One row per kernel family. Columns: the ABI family name; its shape
 * dimensions in order (kcheck options and scalar parameter names); kcheck's
 * default shapes; kbench's default shape; then the family's functions:
 * prepare (inputs, outputs), compare (against the reference), flops (for
 * TFLOP/s), peer_args (the command line of tools/peers.py). */
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
static const CheckFamily families[] = {
	{"gemm", "M,N,K", 3, gemm_shapes, COUNT(gemm_shapes), {3, {8192, 8192, 8192}},
	 gemm_prepare, gemm_compare, gemm_flops, gemm_peer_args},
};

const CheckFamily *
check_family(const char *name)
{
	for (int i = 0; i < COUNT(families); i++)
		if (strcmp(families[i].name, name) == 0)
			return &families[i];
	return NULL;
}

const CheckFamily *
check_family_at(int i)
{
	return i >= 0 && i < COUNT(families) ? &families[i] : NULL;
}

int
check_family_dim(const CheckFamily *fam, const char *name)
{
	const char *d = fam->dims;

	for (int i = 0; i < fam->ndims; i++) {
		size_t n = strcspn(d, ",");
		if (strlen(name) == n && strncasecmp(d, name, n) == 0)
			return i;
		d += n + (d[n] == ',');
	}
	return -1;
}

void
check_family_print_dims(FILE *f, const CheckFamily *fam)
{
	fputs(" --", f);
	for (const char *d = fam->dims; *d; d++)
		if (*d == ',')
			fputs(" --", f);
		else
			fputc(tolower((unsigned char)*d), f);
	fputc('\n', f);
}

/* ---- one whole check ---------------------------------------------------- */

int
check_run(KrtDevice *dev, KrtModule *mod, const CheckShape *shape, const CheckOpts *opts,
          CheckResult *res, KrtErr *err)
{
	CheckCase *c;
	int rc = check_case_new(&c, dev, mod, shape, opts->seed, opts->fill, err);

	memset(res, 0, sizeof *res);
	if (rc)
		return rc;
	rc = check_case_poison(c, err);
	if (!rc)
		rc = krt_launch(mod, c->args, c->nargs, NULL, err);
	if (!rc)
		rc = krt_sync(dev, err);
	if (rc) {
		/* A launch that fails is a failed check: give the replay. */
		FILE *f = opts->log ? opts->log : stderr;
		print_header(c, f, "FAIL");
		fprintf(f, "  launch failed: %s\n", err->msg);
		if (opts->label)
			fprintf(f, "  replay: %s\n", opts->label);
	} else
		rc = check_case_verify(c, opts, res, err);
	check_case_free(c);
	return rc;
}

/* ---- tool helpers ------------------------------------------------------- */

void
check_shape_str(const CheckShape *s, char *buf, size_t n)
{
	size_t used = 0;

	if (n)
		buf[0] = 0;
	for (int i = 0; i < s->n && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, "%s%llu", i ? "x" : "",
		                         (unsigned long long)s->d[i]);
}

int
check_shape_parse(const char *str, CheckShape *out)
{
	const char *s = str;

	out->n = 0;
	while (*s) {
		char *end;
		if (out->n == CHECK_MAX_DIMS || *s < '0' || *s > '9')
			return -1;
		errno = 0;
		unsigned long long v = strtoull(s, &end, 10);
		if (errno || end == s)
			return -1;
		out->d[out->n++] = v;
		s = end;
		if (*s == 'x' && s[1])
			s++;
		else if (*s)
			return -1;
	}
	return out->n ? 0 : -1;
}

static const char *const fill_names[] = {
	[CHECK_FILL_NORMAL] = "normal",
	[CHECK_FILL_EDGE] = "edge",
};

const char *
check_fill_name(CheckFill f)
{
	return (unsigned)f < COUNT(fill_names) ? fill_names[f] : "?";
}

int
check_fill_parse(const char *str, CheckFill *out)
{
	for (int i = 0; i < COUNT(fill_names); i++)
		if (strcmp(str, fill_names[i]) == 0) {
			*out = (CheckFill)i;
			return 0;
		}
	return -1;
}

uint64_t
check_case_seed(uint64_t base, const CheckShape *s, CheckFill fill)
{
	uint64_t h = num_mix(base, (uint64_t)fill, (uint64_t)s->n, 0);
	for (int i = 0; i < s->n; i++)
		h = num_mix(h, s->d[i], (uint64_t)i, 1);
	return h;
}

uint64_t
check_seed_from_time(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	/* Kept under 2^53 and printed in decimal, so it survives any shell,
	 * spreadsheet or JSON tool it is copied through. */
	return num_mix((uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec, (uint64_t)getpid(), 0) >> 11;
}

int
check_read_file(const char *path, char **text, size_t *len, KrtErr *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	*text = NULL;
	if (!f)
		return fail(err, KRT_EINVAL, "%s: %s", path, strerror(errno));
	for (;;) {
		if (cap - n < 65536) {
			char *nb = realloc(buf, cap = cap ? 2 * cap : 1 << 20);
			if (!nb) {
				free(buf);
				fclose(f);
				return fail(err, KRT_ENOMEM, "%s: out of memory", path);
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return fail(err, KRT_EINVAL, "%s: read error", path);
	}
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}
