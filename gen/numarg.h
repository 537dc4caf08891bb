/* Numbers typed by people (CLI options of kgen, kcheck and kbench, the
 * calculators' fields), parsed one way everywhere: decimal, or hex with 0x;
 * a leading 0 is decimal (0200 is 200, never octal); no trailing text; a
 * value that overflows or leaves the range is refused. Errors name the
 * parameter, the value and the rule. */
#ifndef KGEN_NUMARG_H
#define KGEN_NUMARG_H

#include <stdint.h>
#include "err.h"

/* An unsigned integer in 0..max (no sign). */
int kg_parse_u64(const char *name, const char *v, uint64_t max, uint64_t *out, KgErr *err);
/* An integer in lo..hi (a leading '-' allowed when lo < 0). */
int kg_parse_int(const char *name, const char *v, long long lo, long long hi, long long *out,
                 KgErr *err);
/* A finite decimal number in lo..hi (nan and inf refused). */
int kg_parse_real(const char *name, const char *v, double lo, double hi, double *out, KgErr *err);

#endif
