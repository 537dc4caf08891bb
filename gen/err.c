#include <stdarg.h>
#include <stdio.h>

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
