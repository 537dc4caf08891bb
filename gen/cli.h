/* Subcommands of kgen that are calculators rather than generators. Each takes
 * the arguments after its name, prints to `out`, and returns 0, or -1 with a
 * one-line message (parameter, value, rule) in err; main exits 2 on -1. */
#ifndef KGEN_CLI_H
#define KGEN_CLI_H

#include <stdio.h>
#include "err.h"

int cli_desc(int argc, char **argv, FILE *out, KgErr *err);
int cli_idesc(int argc, char **argv, FILE *out, KgErr *err);

#endif
