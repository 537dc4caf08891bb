/* libkrt internals shared by its files and by the unit tests: errors, the
 * dtype and target vocabulary of the ABI header, PTX text helpers, grid
 * expressions, launch-argument and tensor-map validation. Everything here is
 * pure (no driver calls), so tests/unit exercises it on machines without a
 * GPU. No cuda.h here: enum values travel as ints. */
#ifndef KRT_INTERNAL_H
#define KRT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "krt.h"

#if defined(__GNUC__)
#define KRT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define KRT_PRINTF(f, a)
#endif

/* ---- errors (err.c) ----------------------------------------------------- */

/* Sets err->code and err->msg; returns code. */
int krt_errf(KrtErr *err, int code, const char *fmt, ...) KRT_PRINTF(3, 4);
/* Appends to err->msg (truncating at its size); returns err->code. */
int krt_err_append(KrtErr *err, const char *fmt, ...) KRT_PRINTF(2, 3);
/* Puts text in front of err->msg; returns err->code. */
int krt_err_prefix(KrtErr *err, const char *fmt, ...) KRT_PRINTF(2, 3);
void krt_err_clear(KrtErr *err);
/* Appends to out[0..n) at *at, truncating at n and advancing *at at most
 * to n - 1, for messages built in pieces. */
void krt_appendf(char *out, size_t n, size_t *at, const char *fmt, ...) KRT_PRINTF(4, 5);
/* "runtime/cuda.c" out of a build-relative __FILE__ such as "../runtime/cuda.c". */
const char *krt_site(const char *file);

/* ---- element types (abi.c) ---------------------------------------------- */

typedef struct KrtDtype {
	const char *name;  /* the ABI spelling */
	int bytes;         /* bytes per element as the runtime counts them */
	int tmap_type;     /* CUtensorMapDataType, -1 if TMA cannot move it */
} KrtDtype;

const KrtDtype *krt_dtype_find(const char *name); /* NULL if unknown */

/* ---- targets and PTX ISA versions (abi.c) ------------------------------- */

/* "sm_90a" -> cc 90, suffix 'a'; "sm_100f" -> 100, 'f'; "sm_90" -> 90, 0.
 * Returns 0, or -1 if s is not a target name. */
int krt_target_parse(const char *s, int *cc, char *suffix);
/* KRT_OK if PTX for abi->target may run on a device of compute capability
 * dev_cc; else KRT_EMISMATCH with a message naming kernel, target, device. */
int krt_target_check(const KrtAbi *abi, int dev_cc, const char *dev_name, KrtErr *err);
/* Highest PTX ISA (major*10+minor) the JIT of a driver reporting
 * cuDriverGetVersion() == drv accepts; 0 if older than any known driver. */
int krt_driver_ptx_isa(int drv);
/* KRT_OK if abi->ptx_major.minor <= isa (the JIT's highest ISA, as
 * krt_driver_ptx_isa gives it); else KRT_EMISMATCH naming both versions.
 * drv (cuDriverGetVersion, 0 if none) only feeds the message. */
int krt_ptx_version_check(const KrtAbi *abi, int isa, int drv, KrtErr *err);

/* ---- PTX text (abi.c) ---------------------------------------------------- */

/* Finds the `// @block NAME` comment at or before PTX line `line` (1-based,
 * the numbering the JIT log uses). Copies the block name into block and the
 * text of that line into text (either may be NULL). Returns 1 if a block was
 * found, 0 if the line exists but no block precedes it, -1 if the PTX has no
 * such line. */
int krt_ptx_block_at(const char *ptx, size_t len, int line, char *block, size_t block_n,
                     char *text, size_t text_n);
/* For each distinct "line N" in a JIT log, writes "PTX line N is in block B:
 * <text>" lines into out (NUL-terminated). Returns how many lines it wrote. */
int krt_jit_log_explain(const char *ptx, size_t len, const char *log, char *out, size_t n);
/* The body agrees with the header: `.version`, `.target` and `.entry
 * KERNEL` are there as the header says. KRT_EABI otherwise. */
int krt_ptx_check_body(const KrtAbi *abi, const char *ptx, size_t len, KrtErr *err);

/* ---- grid expressions (expr.c) ------------------------------------------ */

/* Evaluates one grid expression (docs/ABI.md grammar) over the scalar args
 * of a launch. args == NULL checks syntax and names only (names count as 1).
 * KRT_EINVAL with a message naming the expression on any error. */
int krt_expr_eval(const char *expr, const KrtAbi *abi, const KrtArg *args, uint64_t *out,
                  KrtErr *err);
/* All three grid dimensions, checked against the launch limits (x <= 2^31-1,
 * y, z <= 65535, none 0). */
int krt_grid_eval(const KrtAbi *abi, const KrtArg *args, uint32_t grid[3], KrtErr *err);

/* ---- tensor maps (tmap.c) ------------------------------------------------ */

/* Every argument of one cuTensorMapEncodeTiled call. Enum fields hold the
 * cuda.h values (CUtensorMapDataType, CUtensorMapSwizzle, ...). */
typedef struct KrtTmapArgs {
	int index;            /* ABI param index */
	char param[32];       /* ABI param name */
	char tensor[64];      /* ABI tensor description */
	char dtype[16];
	int elem_bytes;
	int data_type;
	uint32_t rank;
	uint64_t address;
	uint64_t dims[KRT_MAX_RANK];
	uint64_t strides[KRT_MAX_RANK - 1]; /* bytes, dims 1..rank-1 */
	uint32_t box[KRT_MAX_RANK];
	uint32_t estrides[KRT_MAX_RANK];
	int interleave;
	int swizzle;          /* CUtensorMapSwizzle */
	int swizzle_bytes;    /* 0, 32, 64, 128 */
	int l2_promotion;
	int oob_fill;
} KrtTmapArgs;

/* Builds the encode arguments from ABI param `index` and the caller's tensor
 * and checks every cuTensorMapEncodeTiled rule (docs/hardware.md, "Tensor map encoding"). On a
 * violation: KRT_EINVAL naming the param and the rule, with all arguments. */
int krt_tmap_prepare(const KrtAbi *abi, int index, const KrtTensor *t, KrtTmapArgs *out,
                     KrtErr *err);
/* "dtype=bf16 (BFLOAT16) rank=2 address=0x... dims={..} ..." into buf. */
void krt_tmap_describe(const KrtTmapArgs *a, char *buf, size_t n);

/* ---- launch arguments (argkind.c, krt.c) -------------------------------- */

const char *krt_arg_kind_name(KrtArgKind k); /* "tmap", "u32", ... or "?" (argkind.c) */
/* The caller's tensor dimensions and scalars against the //@shape fields
 * (shape.c); KRT_EINVAL naming the argument, its value and the field. */
int krt_shape_check(const KrtAbi *abi, const KrtArg *args, int nargs, KrtErr *err);
/* nargs and each kind against the ABI, then the shapes (krt_shape_check);
 * tensor maps through krt_tmap_prepare into tm[i] (tm may be NULL to
 * validate only). */
int krt_args_check(const KrtAbi *abi, const KrtArg *args, int nargs, KrtTmapArgs *tm,
                   KrtErr *err);

#endif
