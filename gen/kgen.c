/* The library entry points (kgen.h): a family name and its arguments to a
 * PTX module or a human-readable plan. */
#include <stdlib.h>
#include <string.h>

#include "family.h"
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

int
kgen_plan_text(const char *family, int nargs, const char *const *args, char **text, KgErr *err)
{
	const Family *f;
	void *params;
	Buf out = {0};
	int rc;

	if (configure(family, nargs, args, &f, &params, err) < 0)
		return -1;
	rc = f->plan(params, &out, err);
	free(params);
	if (rc < 0) {
		buf_free(&out);
		return -1;
	}
	*text = out.p;
	return 0;
}
