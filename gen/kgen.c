/* The library entry points (kgen.h): a family name and its arguments to a
 * PTX module or a human-readable plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "fmha.h"
#include "gemm.h"
#include "numarg.h"
#include "kgen.h"

static int
configure(const char *family, int nargs, const char *const *args, const Family **f,
          void **params, KgErr *err)
{
	*f = family_find(family);
	if (!*f) {
		Buf names = {0};
		family_names(&names);
		kg_fail(err, "family=%s: unknown (families: %s)", family, names.p ? names.p : "");
		buf_free(&names);
		return -1;
	}
	*params = calloc(1, (*f)->size);
	if (!*params)
		return kg_fail(err, "out of memory");
	if (family_parse(*f, *params, nargs, args, err) < 0) {
		free(*params);
		return -1;
	}
	return 0;
}

int
kgen_generate(const char *family, int nargs, const char *const *args, char **ptx, size_t *len,
              KgErr *err)
{
	const Family *f;
	void *params;
	Buf canon = {0}, out = {0};
	int rc;

	if (configure(family, nargs, args, &f, &params, err) < 0)
		return -1;
	family_format_args(f, params, &canon);
	rc = f->generate(params, canon.p ? canon.p : "", &out, err);
	free(params);
	buf_free(&canon);
	if (rc < 0) {
		buf_free(&out);
		return -1;
	}
	*ptx = out.p;
	if (len)
		*len = out.len;
	return 0;
}

/* `kgen plan`'s problem shape per family, "name=default,...", and the
 * launch-time estimate at it (gen/estimate.h), appended to the plan. */
static const struct {
	const char *family, *shape;
	int (*predict)(const void *params, const uint64_t *shape, Buf *text, KgErr *err);
} predictors[] = {
	{"fmha", "batch=4,seqlen-q=8192,seqlen-k=8192", fmha_predict},
	{"gemm", "m=8192,n=8192,k=8192", gemm_predict},
};

static int
predictor(const char *family)
{
	for (int i = 0; i < (int)(sizeof predictors / sizeof predictors[0]); i++)
		if (!strcmp(predictors[i].family, family))
			return i;
	return -1;
}

/* Takes the shape options ("--batch 4", "--m=1000") out of args into
 * shape[], defaults first; the rest go to rest[]. */
static int
split_shape(const char *spec, int nargs, const char *const *args, uint64_t *shape,
            const char **rest, int *nrest, KgErr *err)
{
	char names[8][24];
	int n = 0;

	for (const char *s = spec; s && *s && n < 8; n++) {
		const char *eq = strchr(s, '='), *end = strchr(s, ',');
		if (!eq)
			break;
		snprintf(names[n], sizeof names[n], "%.*s", (int)(eq - s), s);
		shape[n] = strtoull(eq + 1, NULL, 10);
		s = end ? end + 1 : eq + strlen(eq);
	}
	*nrest = 0;
	for (int i = 0; i < nargs; i++) {
		const char *a = args[i], *v = NULL;
		int hit = -1;
		for (int j = 0; j < n && a[0] == '-' && a[1] == '-'; j++) {
			size_t len = strlen(names[j]);
			if (!strncmp(a + 2, names[j], len) && (a[2 + len] == 0 || a[2 + len] == '='))
				hit = j;
		}
		if (hit < 0) {
			rest[(*nrest)++] = a;
			continue;
		}
		v = strchr(a, '=') ? strchr(a, '=') + 1 : i + 1 < nargs ? args[++i] : NULL;
		if (!v)
			return kg_fail(err, "%s: missing value (a problem size for the estimate)", a);
		char opt[32];
		snprintf(opt, sizeof opt, "--%s", names[hit]);
		if (kg_parse_u64(opt, v, UINT32_MAX, &shape[hit], err) < 0)
			return -1;
		if (shape[hit] == 0)
			return kg_fail(err, "--%s=0: the estimate's problem sizes are at least 1", names[hit]);
	}
	return 0;
}

int
kgen_plan_text(const char *family, int nargs, const char *const *args, char **text, KgErr *err)
{
	const Family *f;
	void *params;
	Buf out = {0};
	uint64_t shape[8] = {0};
	const char **rest = malloc(sizeof *rest * (size_t)(nargs + 1));
	int rc, nrest = 0, pr = predictor(family);

	if (!rest)
		return kg_fail(err, "out of memory");
	if (pr >= 0 && split_shape(predictors[pr].shape, nargs, args, shape, rest, &nrest, err) < 0) {
		free(rest);
		return -1;
	}
	rc = configure(family, pr >= 0 ? nrest : nargs, pr >= 0 ? rest : args, &f, &params, err);
	free(rest);
	if (rc < 0)
		return -1;
	rc = f->plan(params, &out, err);
	if (rc == 0 && pr >= 0)
		rc = predictors[pr].predict(params, shape, &out, err);
	free(params);
	if (rc < 0) {
		buf_free(&out);
		return -1;
	}
	*text = out.p;
	return 0;
}
