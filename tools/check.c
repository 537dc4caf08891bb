/* The checker (see check.h): seeded inputs, guarded and poisoned outputs,
 * arguments bound by name from the ABI header, a float64 reference, and a
 * report that is enough to replay a failure.
 *
 * The parts, in order: small helpers; the case (buffers with guard bands,
 * named values, binding of ABI parameters); the generic output checks
 * (guards, poison); the input draws the families share; the family table;
 * check_run; tool helpers.
 *
 * Adding a family: write check_FAMILY.c with its prepare, compare, flops
 * and peer_args (check_gemm.c, check_fmha.c) and add it to `families`. The
 * binding needs nothing new as long as its ABI names tensors by parameter
 * name and their dimensions by shape dimensions or by values the family's
 * prepare sets (check_set_var: `tmap Q ... tensor=Q[total_q,Hq,D]`). */
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

#include "num.h"
#include "gen/numarg.h"
#include "tools/check_internal.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- helpers ------------------------------------------------------------ */

int
check_fail(KrtErr *err, int code, const char *fmt, ...)
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

void
check_report(CheckCase *c, const char *fmt, ...)
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

double
check_row_err(double got, double want, double rowmax)
{
	if (rowmax == 0)
		return got == 0 ? 0 : INFINITY;
	return isfinite(got) ? fabs(got - want) / rowmax : INFINITY;
}

double
check_lse_err(double got, double want)
{
	if (isinf(want))
		return got == want ? 0.0 : INFINITY;
	return isfinite(got) ? fabs(got - want) / fmax(1.0, fabs(want)) : INFINITY;
}

int
check_count(CheckResult *res, double e, double tol, double *max)
{
	res->checked++;
	if (e > *max || isnan(e))
		*max = isnan(e) ? INFINITY : e;
	return !(e <= tol);
}

static int
buf_index(const CheckCase *c, const char *name)
{
	for (int i = 0; i < c->nbufs; i++)
		if (strcmp(c->bufs[i].name, name) == 0)
			return i;
	return -1;
}

CheckBuf *
check_find_buf(CheckCase *c, const char *name)
{
	int i = buf_index(c, name);
	return i < 0 ? NULL : &c->bufs[i];
}

const CheckBuf *
check_find_buf_const(const CheckCase *c, const char *name)
{
	int i = buf_index(c, name);
	return i < 0 ? NULL : &c->bufs[i];
}

int
check_counters_zero(CheckCase *c, CheckResult *res, KrtErr *err)
{
	const CheckBuf *cb = check_find_buf_const(c, "counters");
	uint64_t max_report = (uint64_t)(c->opts->max_report ? c->opts->max_report : CHECK_MAX_REPORT);
	int32_t *v;
	int rc;

	if (!cb)
		return check_fail(err, KRT_EABI, "%s: no counters buffer", c->abi->kernel);
	if (!(v = malloc(cb->bytes + 1)))
		return check_fail(err, KRT_ENOMEM, "%s: no host memory for the counters", c->abi->kernel);
	rc = krt_download(c->dev, v, cb->ptr, cb->bytes, err);
	for (uint64_t i = 0; !rc && i < cb->count; i++) {
		res->total++;
		res->checked++;
		if (v[i] != 0 && res->bad++ < max_report)
			check_report(c, "  counters[%llu] = %d after the launch: must be back at 0\n", (unsigned long long)i,
			             v[i]);
	}
	free(v);
	return rc;
}

int
check_set_var(CheckCase *c, const char *name, uint64_t value, KrtErr *err)
{
	int i;

	for (i = 0; i < c->nvars; i++)
		if (strcmp(c->vars[i].name, name) == 0)
			break;
	if (i == CHECK_MAX_VARS || strlen(name) >= sizeof c->vars[0].name)
		return check_fail(err, KRT_EINVAL, "check: no room for value %s", name);
	snprintf(c->vars[i].name, sizeof c->vars[i].name, "%s", name);
	c->vars[i].value = value;
	c->vars[i].is_f32 = 0;
	c->nvars += i == c->nvars;
	return 0;
}

int
check_set_f32(CheckCase *c, const char *name, float value, KrtErr *err)
{
	int rc = check_set_var(c, name, 0, err);

	for (int i = 0; !rc && i < c->nvars; i++)
		if (strcmp(c->vars[i].name, name) == 0) {
			c->vars[i].is_f32 = 1;
			c->vars[i].f32 = value;
		}
	return rc;
}

/* The f32 value set for name, or NULL. */
static const CheckVar *
f32_var(const CheckCase *c, const char *name)
{
	for (int i = 0; i < c->nvars; i++)
		if (c->vars[i].is_f32 && strcmp(c->vars[i].name, name) == 0)
			return &c->vars[i];
	return NULL;
}

static CheckBuf *
new_buf(CheckCase *c, const char *name, const char *dtype, int esize, uint64_t count,
        KrtErr *err)
{
	if (c->nbufs == CHECK_MAX_BUFS) {
		check_fail(err, KRT_EINVAL, "check: more than %d buffers", CHECK_MAX_BUFS);
		return NULL;
	}
	CheckBuf *b = &c->bufs[c->nbufs++];
	memset(b, 0, sizeof *b);
	snprintf(b->name, sizeof b->name, "%s", name);
	snprintf(b->dtype, sizeof b->dtype, "%s", dtype);
	b->esize = esize;
	b->poison = CHECK_POISON_BYTE;
	b->count = count;
	b->bytes = (size_t)count * (size_t)esize;
	return b;
}

static int
upload_input(CheckCase *c, CheckBuf *b, void *host, KrtErr *err)
{
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

int
check_add_input(CheckCase *c, const char *name, NumType type, uint64_t count, void *host,
                KrtErr *err)
{
	CheckBuf *b = new_buf(c, name, num_type_name(type), num_type_size(type), count, err);

	if (b) {
		b->is_num = 1;
		b->type = type;
	}
	return upload_input(c, b, host, err);
}

int
check_add_raw_input(CheckCase *c, const char *name, const char *dtype, int esize,
                    uint64_t count, void *host, KrtErr *err)
{
	return upload_input(c, new_buf(c, name, dtype, esize, count, err), host, err);
}

static int
alloc_output(CheckCase *c, CheckBuf *b, size_t guard, KrtErr *err)
{
	b->output = 1;
	b->guard = (size_t)round_up(guard, 4096);
	int rc = krt_alloc(c->dev, b->bytes + 2 * b->guard, &b->base, err);
	if (rc)
		return rc;
	b->ptr = b->base + b->guard;
	return 0;
}

int
check_add_output(CheckCase *c, const char *name, NumType type, uint64_t count, size_t guard,
                 KrtErr *err)
{
	CheckBuf *b = new_buf(c, name, num_type_name(type), num_type_size(type), count, err);
	if (!b)
		return KRT_EINVAL;
	b->is_num = 1;
	b->type = type;
	return alloc_output(c, b, guard, err);
}

int
check_add_raw_output(CheckCase *c, const char *name, const char *dtype, int esize, uint64_t count,
                     size_t guard, uint8_t poison, KrtErr *err)
{
	CheckBuf *b = new_buf(c, name, dtype, esize, count, err);
	if (!b)
		return KRT_EINVAL;
	b->poison = poison;
	return alloc_output(c, b, guard, err);
}

/* The value called `name` (not NUL-terminated: len bytes): one the family
 * set (check_set_var), else a dimension of the shape. */
static int
dim_value(const CheckCase *c, const char *name, size_t len, uint64_t *out)
{
	const char *d = c->fam->dims;

	for (int i = 0; i < c->nvars; i++)
		if (strlen(c->vars[i].name) == len && strncmp(c->vars[i].name, name, len) == 0) {
			*out = c->vars[i].value;
			return 0;
		}
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
	CheckBuf *b = check_find_buf(c, p->name);
	const char *s = strchr(p->tensor, '[');
	uint64_t outer_first[KRT_MAX_RANK];
	int rank = 0;

	if (!b)
		return check_fail(err, KRT_EABI, "%s: tmap %s names no buffer of family %s",
		                  c->abi->kernel, p->name, c->fam->name);
	if (!s)
		return check_fail(err, KRT_EABI, "%s: tmap %s: tensor=%s has no [dims]", c->abi->kernel,
		                  p->name, p->tensor);
	for (s++; *s && *s != ']'; rank++) {
		size_t n = strcspn(s, ",]");
		if (rank == KRT_MAX_RANK || dim_value(c, s, n, &outer_first[rank]))
			return check_fail(err, KRT_EABI, "%s: tmap %s: tensor=%s: dimension '%.*s' is not "
			                  "one of %s or the family's named values (or too many)",
			                  c->abi->kernel, p->name, p->tensor, (int)n, s, c->fam->dims);
		s += n + (s[n] == ',');
	}
	if (rank != p->rank)
		return check_fail(err, KRT_EABI, "%s: tmap %s: rank=%d but tensor=%s has %d dims",
		                  c->abi->kernel, p->name, p->rank, p->tensor, rank);
	uint64_t elems = 1;
	/* e2m1p: dims count values, the buffer packs two per byte (runtime/abi.c) */
	int half = strcmp(p->dtype, "e2m1p") == 0;
	t->ptr = b->ptr;
	t->rank = rank;
	for (int i = 0; i < rank; i++) {
		t->dims[i] = outer_first[rank - 1 - i];
		t->strides[i] = i ? t->strides[i - 1] * t->dims[i - 1] >> (half && i == 1) : (uint64_t)b->esize;
		elems *= t->dims[i];
	}
	elems >>= half;
	if (elems != b->count)
		return check_fail(err, KRT_EABI, "%s: tmap %s: tensor=%s holds %llu elements, the buffer "
		                  "%llu", c->abi->kernel, p->name, p->tensor, (unsigned long long)elems,
		                  (unsigned long long)b->count);
	return 0;
}

static int
bind_scalar(CheckCase *c, const KrtAbiParam *p, KrtArg *a, KrtErr *err)
{
	uint64_t v;

	if (p->kind == KRT_ARG_F32) {
		const CheckVar *fv = f32_var(c, p->name);
		if (!fv)
			return check_fail(err, KRT_EABI, "%s: f32 %s: family %s has no value for it",
			                  c->abi->kernel, p->name, c->fam->name);
		a->v.f32 = fv->f32;
		return 0;
	}
	if (dim_value(c, p->name, strlen(p->name), &v))
		return check_fail(err, KRT_EABI, "%s: scalar %s: family %s has no value for it (dims %s)",
		                  c->abi->kernel, p->name, c->fam->name, c->fam->dims);
	if (p->kind == KRT_ARG_U32 && v > UINT32_MAX)
		return check_fail(err, KRT_EINVAL, "%s=%llu: must fit in u32", p->name,
		                  (unsigned long long)v);
	if (p->kind == KRT_ARG_S32 && v > INT32_MAX)
		return check_fail(err, KRT_EINVAL, "%s=%llu: must fit in s32", p->name,
		                  (unsigned long long)v);
	if (p->kind == KRT_ARG_U32)
		a->v.u32 = (uint32_t)v;
	else if (p->kind == KRT_ARG_S32)
		a->v.s32 = (int32_t)v;
	else if (p->kind == KRT_ARG_U64)
		a->v.u64 = v;
	else
		return check_fail(err, KRT_EABI, "%s: f32 %s: family %s has no value for it",
		                  c->abi->kernel, p->name, c->fam->name);
	return 0;
}

/* Does the buffer hold what the ABI says the parameter points at? Names
 * are compared through num_type_parse where it knows them, so that an
 * alias ("f16") matches too. */
static int
same_dtype(const CheckBuf *b, const char *dtype)
{
	NumType t;

	if (b->is_num)
		return num_type_parse(dtype, &t) == 0 && t == b->type;
	return strcmp(b->dtype, dtype) == 0;
}

/* One KrtArg per ABI parameter, in ABI order, found by name: tensors and
 * pointers from the case's buffers, scalars from the family's values and
 * the shape. */
static int
bind(CheckCase *c, KrtErr *err)
{
	const KrtAbi *abi = c->abi;

	for (int i = 0; i < abi->nparams; i++) {
		const KrtAbiParam *p = &abi->params[i];
		KrtArg *a = &c->args[i];
		CheckBuf *b = check_find_buf(c, p->name);
		int rc;

		a->kind = p->kind;
		if ((p->kind == KRT_ARG_TMAP || p->kind == KRT_ARG_PTR) &&
		    (!b || !same_dtype(b, p->dtype)))
			return check_fail(err, KRT_EABI, "%s: %s dtype=%s: the %s checker has %s %s",
			                  abi->kernel, p->name, p->dtype, c->fam->name,
			                  b ? b->dtype : "no buffer", b ? "there" : "of that name");
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
		return check_fail(err, KRT_EINVAL, "%s: family '%s' has no checker (check.c knows:%s)",
		                  abi->kernel, abi->family, known);
	}
	CheckShape fit = *shape;
	if (check_shape_fit(fam, &fit))
		return check_fail(err, KRT_EINVAL, "family %s: a shape has %d dimensions (%s; the "
		                  "first %d required), not %d", fam->name, fam->ndims, fam->dims,
		                  fam->nrequired ? fam->nrequired : fam->ndims, shape->n);
	CheckCase *c = calloc(1, sizeof *c);
	if (!c)
		return check_fail(err, KRT_ENOMEM, "check: out of memory");
	c->dev = dev;
	c->mod = mod;
	c->abi = abi;
	c->fam = fam;
	c->shape = fit;
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
	free(c->priv);
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
check_case_traffic(const CheckCase *c)
{
	return c->fam->bytes ? c->fam->bytes(c) : 0;
}

double
check_case_flops(const CheckCase *c)
{
	return c->fam->flops(c);
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
		rc = krt_memset8(c->dev, b->base, CHECK_GUARD_BYTE, b->guard, err);
		if (!rc)
			rc = krt_memset8(c->dev, b->ptr, b->poison, b->bytes, err);
		if (!rc)
			rc = krt_memset8(c->dev, b->ptr + b->bytes, CHECK_GUARD_BYTE, b->guard, err);
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
		if (h[j] != CHECK_GUARD_BYTE) {
			if (!b->guard_bad++)
				b->first_guard_bad = -(long long)(i + 1);
		}
	}
	for (size_t i = 0; i < b->guard; i++)
		if (after[i] != CHECK_GUARD_BYTE && !b->guard_bad++)
			b->first_guard_bad = (long long)i;
}

static void
scan_poison(CheckBuf *b)
{
	const uint8_t *data = (const uint8_t *)b->host + b->guard;

	for (uint64_t i = 0; i < b->count; i++) {
		int fill = 1;
		if (b->is_num)
			fill = num_is_fill(b->type, data, i, b->poison);
		else
			for (int k = 0; k < b->esize && fill; k++)
				fill = data[i * (uint64_t)b->esize + (uint64_t)k] == b->poison;
		if (fill && !b->unwritten++)
			b->first_unwritten = i;
	}
}

static int
download_output(CheckCase *c, CheckBuf *b, KrtErr *err)
{
	size_t total = b->bytes + 2 * b->guard;

	if (!b->host && !(b->host = malloc(total ? total : 1)))
		return check_fail(err, KRT_ENOMEM, "check: no host memory for %zu bytes of %s", total,
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
		if (p->kind == KRT_ARG_TMAP) {
			char box[64] = "";
			for (int j = 0, at = 0; j < p->rank && j < KRT_MAX_RANK; j++)
				at += snprintf(box + at, sizeof box - (size_t)at, "%s%u", j ? "," : "",
				               p->box[j]);
			fprintf(f, "  param tmap %s dtype=%s box=%s swizzle=%d %s", p->name, p->dtype, box,
			        p->swizzle, p->tensor);
			if (i < c->nargs) {
				const KrtTensor *t = &a->v.t;
				fprintf(f, "  dims {");
				for (int j = 0; j < t->rank; j++)
					fprintf(f, "%s%llu", j ? "," : "", (unsigned long long)t->dims[j]);
				fprintf(f, "} strides {");
				for (int j = 0; j < t->rank; j++)
					fprintf(f, "%s%llu", j ? "," : "", (unsigned long long)t->strides[j]);
				fprintf(f, "}");
			}
			fputc('\n', f);
		} else if (p->kind == KRT_ARG_PTR)
			fprintf(f, "  param ptr %s dtype=%s %s\n", p->name, p->dtype, p->tensor);
		else if (p->kind == KRT_ARG_U32 && i < c->nargs)
			fprintf(f, "  param u32 %s = %u\n", p->name, a->v.u32);
		else
			fprintf(f, "  param %s\n", p->name);
	}
	if (c->fam->describe)
		c->fam->describe(c, f);
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
	if (r->lse_tol > 0)
		fprintf(f, "  LSE: max err %.3e (|got - want| / max(1, |want|)), tol %.1e\n",
		        r->lse_err, r->lse_tol);
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

/* ---- input draws ---------------------------------------------------------- */

/* Input draws. N(0,1) is the main test. The edge pattern puts each row (of
 * A and of B for gemm) at its own power-of-two scale and mixes in zeros, exact powers
 * of two, the input type's smallest subnormals and values 16x the row's
 * scale, so exponent handling, subnormal inputs and cancellation-free large
 * sums all run. Scales stay where nothing can overflow fp32 accumulation or
 * the output type (CheckEdge). Subnormals are sprinkled, never a whole row,
 * so a tensor core that flushes them changes results only far below the
 * tolerance. */
/* bf16 rows up to 2^20 with 16x spikes: products 2^50, sums 2^50·K, far
 * from fp32's 2^128. fp16 inputs stay under 65504 with rows up to 2^6; an
 * fp16 output holds sums of K N(0,1) products only at scale 1. */
CheckEdge
check_edge_range(NumType in, NumType out)
{
	if (out == NUM_FP16)
		return (CheckEdge){0, 4.0};
	return in == NUM_BF16 ? (CheckEdge){20, 16.0} : (CheckEdge){6, 16.0};
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

void
check_draw_matrix(NumRng *r, CheckFill fill, NumType t, CheckEdge e, uint64_t rows,
                  uint64_t cols, void *host)
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

/* ---- the family table --------------------------------------------------- */

/* One row per kernel family, each defined in its own file: the ABI family
 * name; its shape dimensions in order (kcheck options and scalar parameter
 * names); kcheck's default shapes; kbench's default shape; then the
 * family's functions: prepare (inputs, outputs), compare (against the
 * reference), flops (for TFLOP/s), peer_args (the command line of
 * tools/peers.py), describe (failure details). */
long
check_arg_int(const CheckCase *c, const char *name)
{
	char key[48];
	const char *a = c->abi->args, *p;

	snprintf(key, sizeof key, "--%s ", name);
	for (p = strstr(a, key); p; p = strstr(p + 1, key))
		if (p == a || p[-1] == ' ')
			return strtol(p + strlen(key), NULL, 10);
	return -1;
}

void
check_arg_word(const CheckCase *c, const char *name, char *w, size_t n)
{
	char key[48], fmtw[16];
	const char *a = c->abi->args, *p;

	w[0] = 0;
	snprintf(key, sizeof key, "--%s ", name);
	snprintf(fmtw, sizeof fmtw, "%%%zus", n - 1);
	for (p = strstr(a, key); p; p = strstr(p + 1, key))
		if (p == a || p[-1] == ' ') {
			sscanf(p + strlen(key), fmtw, w);
			return;
		}
}

extern const CheckFamily check_family_gemm; /* check_gemm.c */
extern const CheckFamily check_family_gemm_moe; /* check_moe.c */
extern const CheckFamily check_family_fmha; /* check_fmha.c */
extern const CheckFamily check_family_decode; /* check_decode.c */
extern const CheckFamily check_family_decode_merge; /* check_decode_merge.c */
extern const CheckFamily check_family_indexer; /* check_indexer.c */
extern const CheckFamily check_family_topk;    /* check_topk.c */

static const CheckFamily *const families[] = {
	&check_family_gemm,
	&check_family_gemm_moe,
	&check_family_fmha,
	&check_family_decode,
	&check_family_decode_merge,
	&check_family_indexer,
	&check_family_topk,
};

const CheckFamily *
check_family(const char *name)
{
	for (int i = 0; i < COUNT(families); i++)
		if (strcmp(families[i]->name, name) == 0)
			return families[i];
	return NULL;
}

const CheckFamily *
check_family_at(int i)
{
	return i >= 0 && i < COUNT(families) ? families[i] : NULL;
}

/* Dimension names compare without case, and '-' (as options spell them)
 * equals '_' (as the ABI does). */
static int
same_dim_name(const char *a, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int x = tolower((unsigned char)a[i]), y = tolower((unsigned char)b[i]);
		if (x == '-')
			x = '_';
		if (y == '-')
			y = '_';
		if (x != y)
			return 0;
	}
	return 1;
}

int
check_family_dim(const CheckFamily *fam, const char *name)
{
	const char *d = fam->dims;

	for (int i = 0; i < fam->ndims; i++) {
		size_t n = strcspn(d, ",");
		if (strlen(name) == n && same_dim_name(d, name, n))
			return i;
		d += n + (d[n] == ',');
	}
	return -1;
}

void
check_family_print_dims(FILE *f, const CheckFamily *fam)
{
	int req = fam->nrequired ? fam->nrequired : fam->ndims;
	const char *d = fam->dims;

	for (int i = 0; i < fam->ndims; i++) {
		size_t n = strcspn(d, ",");
		fputs(i >= req ? " [--" : " --", f);
		for (size_t j = 0; j < n; j++)
			fputc(d[j] == '_' ? '-' : tolower((unsigned char)d[j]), f);
		if (i >= req)
			fputc(']', f);
		d += n + (d[n] == ',');
	}
	fputc('\n', f);
}

int
check_shape_fit(const CheckFamily *fam, CheckShape *s)
{
	int req = fam->nrequired ? fam->nrequired : fam->ndims;

	if (s->n < req || s->n > fam->ndims)
		return -1;
	for (int i = s->n; i < fam->ndims; i++)
		s->d[i] = 0;
	s->n = fam->ndims;
	return 0;
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

void
check_device_str(KrtDevice *dev, const KrtAbi *abi, char *buf, size_t n)
{
	if (strcmp(krt_device_kind(dev), "emu") == 0 && abi)
		snprintf(buf, n, "%s, running %s (%s-class)", krt_device_name(dev), abi->target,
		         abi->target_cc >= 100 ? "B200" : "H100");
	else
		snprintf(buf, n, "%s (sm_%d)", krt_device_name(dev), krt_device_cc(dev));
}

int
check_exit_of(int code)
{
	switch (code) {
	case KRT_OK: return 0;
	case KRT_ENODEV:
	case KRT_EMISMATCH: return CHECK_EXIT_NODEV;
	case KRT_EINVAL:
	case KRT_EABI:
	case KRT_ERESOURCE: return CHECK_EXIT_INPUT;
	default: return CHECK_EXIT_FAIL;
	}
}

uint64_t
check_seed_from_env(void)
{
	const char *env = getenv("KGEN_TEST_SEED");
	uint64_t seed;
	KgErr err = {{0}};

	if (!env || !*env)
		return check_seed_from_time();
	if (kg_parse_u64("KGEN_TEST_SEED", env, UINT64_MAX, &seed, &err) == 0)
		return seed;
	fprintf(stderr, "%s; using a seed from the clock\n", err.msg);
	return check_seed_from_time();
}

int
check_open_sm90(KrtDevice **dev, uint64_t seed)
{
	KrtErr err = {0};

	*dev = NULL;
	if (!krt_gpu_present()) {
		printf("skipped: no GPU\n");
		return 77;
	}
	if (krt_device_open(dev, "cuda", 0, &err)) {
		printf("FAIL  a GPU is present but cannot be opened: %s\n", err.msg);
		return 1;
	}
	printf("device: %s (sm_%d), seed %llu (KGEN_TEST_SEED=%llu replays this run)\n",
	       krt_device_name(*dev), krt_device_cc(*dev), (unsigned long long)seed,
	       (unsigned long long)seed);
	if (krt_device_cc(*dev) != 90) {
		printf("skipped: these are sm_90a kernels and the GPU is sm_%d\n", krt_device_cc(*dev));
		krt_device_close(*dev);
		*dev = NULL;
		return 77;
	}
	return 0;
}

int
check_read_file(const char *path, char **text, size_t *len, KrtErr *err)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	*text = NULL;
	if (!f)
		return check_fail(err, KRT_EINVAL, "%s: %s", path, strerror(errno));
	for (;;) {
		if (cap - n < 65536) {
			char *nb = realloc(buf, cap = cap ? 2 * cap : 1 << 20);
			if (!nb) {
				free(buf);
				fclose(f);
				return check_fail(err, KRT_ENOMEM, "%s: out of memory", path);
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
		return check_fail(err, KRT_EINVAL, "%s: read error", path);
	}
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}
