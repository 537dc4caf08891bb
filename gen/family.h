/* Kernel families and their parameters, as tables: the CLI parser, `kgen
 * list` and the ABI `args` line are all driven by a family's ParamSpec
 * rows, so a parameter is declared once. */
#ifndef KGEN_FAMILY_H
#define KGEN_FAMILY_H

#include <stddef.h>
#include "emit.h"
#include "err.h"
#include "plan.h"

typedef enum ParamKind {
	PK_INT,     /* int; `allowed` lists values, or lo..hi with step */
	PK_TARGET,  /* int index into targets[] */
	PK_DTYPE,   /* int DType; `allowed` lists names */
	PK_SWIZZLE, /* int Swizzle; `allowed` lists names */
	PK_FLOAT,   /* float field; lo..hi bound it (0 may mean "derived") */
	PK_ENUM,    /* int index into the `allowed` list */
} ParamKind;

/* Columns: CLI name (without --), kind, offset of the int field in the
 * family's parameter struct (a float for PK_FLOAT), allowed values (comma list, NULL = range),
 * range lo, hi and step for PK_INT without a list, default (as typed on the
 * command line), help, and `when`: "NAME=VALUE" if the parameter means
 * something only while parameter NAME has that value ("NAME=A|B": one of
 * those values; "X=1;Y=2": either clause; NULL: always); the
 * `args` line leaves it out otherwise, so it shows no value that does
 * nothing. */
typedef struct ParamSpec {
	const char *name;
	ParamKind kind;
	size_t offset;
	const char *allowed;
	int lo, hi, step;
	const char *def;
	const char *help;
	const char *when;
} ParamSpec;

typedef struct Family {
	const char *name;
	const char *help;
	const ParamSpec *params;
	int nparams;
	size_t size; /* of the parameter struct */
	/* Validates, plans and emits; `args` is the canonical argument line. */
	int (*generate)(const void *params, const char *args, Buf *ptx, KgErr *err);
	/* Validates and plans; writes the human-readable plan. */
	int (*plan)(const void *params, Buf *text, KgErr *err);
} Family;

extern const Family *const families[];

const Family *family_find(const char *name);
/* Defaults, then each `--name value` / `--name=value`; errors name the
 * parameter, the value and the allowed set. */
int family_parse(const Family *f, void *params, int nargs, const char *const *args, KgErr *err);
/* "--target sm_90a --tile-m 128 ..." for every parameter that means
 * something (see ParamSpec.when), in table order. */
void family_format_args(const Family *f, const void *params, Buf *out);
/* Word v (0-based) of a comma list such as a PK_ENUM's `allowed`, "?" if
 * there is none. */
void family_list_word(const char *list, int v, char *out, size_t n);
/* Every family's parameters (`kgen list`), or one family's (`kgen FAMILY
 * --help`): name, allowed values, default, help. */
void family_list(Buf *out);
void family_help(const Family *f, Buf *out);
/* "gemm, fmha": the family names, for messages. */
void family_names(Buf *out);

#endif
