/* The generator's two error paths: kg_fail fills a KgErr for bad input,
 * kg_bug stops on a state the planner must never reach. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "err.h"

int
kg_fail(KgErr *err, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

void
kg_bug_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "kgen: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(KG_EXIT_BUG);
}
