/* libkrt's error record (internal.h): filling, extending and clearing a
 * KrtErr, the source site a message names, and a bounded append for
 * messages built in pieces. Every file of libkrt reports
 * through these; nothing here calls another file. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "krt.h"

/* ---- errors ---------------------------------------------------------------- */

int
krt_errf(KrtErr *err, int code, const char *fmt, ...)
{
	if (!err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	err->code = code;
	return code;
}

int
krt_err_append(KrtErr *err, const char *fmt, ...)
{
	if (!err)
		return KRT_OK;
	size_t at = strlen(err->msg);
	if (at + 1 < sizeof err->msg) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg + at, sizeof err->msg - at, fmt, ap);
		va_end(ap);
	}
	return err->code;
}

int
krt_err_prefix(KrtErr *err, const char *fmt, ...)
{
	if (!err)
		return KRT_OK;
	char old[sizeof err->msg];
	memcpy(old, err->msg, sizeof old);
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	if (w >= 0 && (size_t)w < sizeof err->msg)
		snprintf(err->msg + w, sizeof err->msg - (size_t)w, "%s", old);
	return err->code;
}

void
krt_err_clear(KrtErr *err)
{
	if (err) {
		err->code = KRT_OK;
		err->msg[0] = 0;
	}
}

const char *
krt_site(const char *file)
{
	const char *r = NULL;
	for (const char *s = file; (s = strstr(s, "runtime/")) != NULL; s++)
		r = s;
	if (r)
		return r;
	const char *slash = strrchr(file, '/');
	return slash ? slash + 1 : file;
}

void
krt_appendf(char *out, size_t n, size_t *at, const char *fmt, ...)
{
	if (*at >= n)
		return;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(out + *at, n - *at, fmt, ap);
	va_end(ap);
	if (w > 0)
		*at = *at + (size_t)w < n ? *at + (size_t)w : n - 1;
}
