/* The generator library's entry point, shared by the kgen CLI, the tests and
 * the tools: family + `--name value` arguments in, one PTX text out. */
#ifndef KGEN_KGEN_H
#define KGEN_KGEN_H

#include <stddef.h>
#include "err.h"

/* Generates the PTX of `family` ("gemm", ...) with CLI-style arguments
 * (e.g. {"--target","sm_90a","--tile-n","128"}); parameters not given take
 * their defaults. On success *ptx is a malloc'd NUL-terminated string. */
int kgen_generate(const char *family, int nargs, const char *const *args,
                  char **ptx, size_t *len, KgErr *err);

/* Writes the human-readable plan (budgets, barrier counts, layout) of the
 * same configuration to a malloc'd string. */
int kgen_plan_text(const char *family, int nargs, const char *const *args,
                   char **text, KgErr *err);

#endif
