/* The one parser of numbers typed by people (numarg.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "numarg.h"

/* digits (decimal, or hex after 0x) to the end of the string; -1 on
 * anything else or on overflow */
static int
digits(const char *s, uint64_t *out)
{
	int base = 10;
	char *end;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (base == 16 ? !isxdigit((unsigned char)*s) : !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int
kg_parse_u64(const char *name, const char *v, uint64_t max, uint64_t *out, KgErr *err)
{
	uint64_t x;

	if (!v || digits(v, &x) || x > max)
		return kg_fail(err, "%s=%s: must be an integer in 0..%llu (decimal or 0x hex)", name,
		               v ? v : "", (unsigned long long)max);
	*out = x;
	return 0;
}

int
kg_parse_int(const char *name, const char *v, long long lo, long long hi, long long *out,
             KgErr *err)
{
	uint64_t x;
	int neg = v && v[0] == '-' && lo < 0;

	if (!v || digits(v + neg, &x) || x > (uint64_t)LLONG_MAX + neg)
		goto bad;
	long long s = neg ? (x == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)x)
	                  : (long long)x;
	if (s < lo || s > hi)
		goto bad;
	*out = s;
	return 0;
bad:
	return kg_fail(err, "%s=%s: must be an integer in %lld..%lld (decimal or 0x hex)", name,
	               v ? v : "", lo, hi);
}

int
kg_parse_real(const char *name, const char *v, double lo, double hi, double *out, KgErr *err)
{
	char *end;
	double d = 0;

	/* strtod also reads nan, inf and hex floats; a number here is what a
	 * person writes: digits, a point, an exponent */
	int ok = v && *v && !isspace((unsigned char)*v);
	for (const char *p = v; ok && *p; p++)
		ok = isdigit((unsigned char)*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '-' ||
		     *p == '+';
	if (ok) {
		errno = 0;
		d = strtod(v, &end);
		ok = !errno && end != v && !*end && isfinite(d) && d >= lo && d <= hi;
	}
	if (!ok)
		return kg_fail(err, "%s=%s: must be a finite number in %g..%g", name, v ? v : "", lo, hi);
	*out = d;
	return 0;
}
