/* Errors for people: one line naming the parameter, the value and the rule.
 * The generator library never exits; every fallible function returns 0 on
 * success or -1 after filling a KgErr. */
#ifndef KGEN_ERR_H
#define KGEN_ERR_H

typedef struct KgErr {
	char msg[512];
} KgErr;

/* Formats msg into err (if non-NULL) and returns -1, so callers can write
 * `return kg_fail(err, "tile-m=%d: must be 64 or 128", m);`. */
int kg_fail(KgErr *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
