/* Errors for people: one line naming the parameter, the value and the rule.
 * The generator library never exits on bad input; every fallible function
 * returns 0 on success or -1 after filling a KgErr. The one exception is
 * kg_bug: a state the planner must never reach is a bug in kgen, not in
 * the input, and stops the process rather than being stored as data. */
#ifndef KGEN_ERR_H
#define KGEN_ERR_H

typedef struct KgErr {
	char msg[512];
} KgErr;

/* Formats msg into err (if non-NULL) and returns -1, so callers can write
 * `return kg_fail(err, "tile-m=%d: must be 64 or 128", m);`. */
int kg_fail(KgErr *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Exit status of an internal error (EX_SOFTWARE of sysexits.h). */
enum { KG_EXIT_BUG = 70 };

/* Prints "kgen: internal error at FILE:LINE: message" to stderr and exits
 * with KG_EXIT_BUG. */
#define kg_bug(...) kg_bug_at(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void kg_bug_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
