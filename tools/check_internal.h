/* What the family files of the checker (check_gemm.c, check_fmha.c) share
 * with check.c: the case, its buffers and named values, and the helpers a
 * family's prepare and compare use. Not for the tools: they use check.h. */
#ifndef KGEN_TOOLS_CHECK_INTERNAL_H
#define KGEN_TOOLS_CHECK_INTERNAL_H

#include <stdarg.h>

#include "num.h"
#include "tools/check.h"

enum {
	CHECK_MAX_BUFS = 16, /* decode: Q, O, LSE, sink, two caches with indices and lengths, split-KV scratch */
	CHECK_MAX_VARS = 16,
	CHECK_GUARD_BYTE = 0x99,  /* around outputs, as dav1d's checkasm does */
	CHECK_POISON_BYTE = 0xff, /* inside outputs: 0xffff / 0xffffffff are
	                           * NaNs that no tensor core or cvt produces
	                           * (they give the canonical 0x7fff... forms) */
	CHECK_MAX_REPORT = 8,
};

typedef struct CheckBuf {
	char name[32];   /* the ABI parameter it is bound to */
	char dtype[16];  /* its ABI element type name: "bf16", "s32" */
	int is_num;      /* type is valid (bf16, fp16, f32); else raw (s32) */
	NumType type;
	int esize;       /* bytes per element */
	uint64_t count;  /* elements */
	size_t bytes;
	size_t guard;    /* bytes of guard band before and after (outputs) */
	KrtPtr base;     /* the allocation */
	KrtPtr ptr;      /* base + guard: what the kernel gets */
	void *host;      /* inputs: what was uploaded; outputs: the download,
	                  * guard bands included */
	int output;
	uint8_t poison;  /* outputs: the byte they are filled with before a launch */
	/* found by the generic output checks */
	uint64_t unwritten;
	uint64_t first_unwritten;
	uint64_t guard_bad;
	long long first_guard_bad; /* byte offset from ptr; negative = before */
} CheckBuf;

/* A named value that the ABI's tensor descriptions and scalar parameters
 * may use besides the shape's dimensions (fmha: total_q, Hq, D, ...). */
typedef struct CheckVar {
	char name[24];
	uint64_t value;
	int is_f32;      /* an f32 scalar (check_set_f32): value unused */
	float f32;
} CheckVar;

struct CheckCase {
	KrtDevice *dev;
	KrtModule *mod;
	const KrtAbi *abi;
	const CheckFamily *fam;
	CheckShape shape;
	uint64_t seed;
	CheckFill fill;
	NumRng rng;
	CheckBuf bufs[CHECK_MAX_BUFS];
	int nbufs;
	CheckVar vars[CHECK_MAX_VARS];
	int nvars;
	void *priv;            /* the family's own state, one malloc'd block
	                        * (freed with the case) */
	KrtArg args[KRT_MAX_PARAMS];
	int nargs;
	const CheckOpts *opts; /* during verify */
	char report[4096];     /* mismatch lines from the family's compare */
	size_t report_len;
};

int check_fail(KrtErr *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "--name V" of the kernel's //@args line as a number; -1 when absent. */
long check_arg_int(const CheckCase *c, const char *name);
/* "--name WORD" of the //@args line into w (n bytes; "" when absent). */
void check_arg_word(const CheckCase *c, const char *name, char *w, size_t n);
/* Appends a line to the case's failure report (dropped when full). */
void check_report(CheckCase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The attention outputs' errors: an element of O against its row's
 * largest reference magnitude rowmax (a row of zeros must be exactly 0),
 * and an LSE as |got - want| / max(1, |want|) (an infinite one exactly);
 * a value that is not finite is an infinite error. */
double check_row_err(double got, double want, double rowmax);
double check_lse_err(double got, double want);
/* Counts one compared value of error e: res->checked, the largest error
 * in *max (NaN as infinity); 1 where it fails tol. */
int check_count(CheckResult *res, double e, double tol, double *max);
CheckBuf *check_find_buf(CheckCase *c, const char *name);
const CheckBuf *check_find_buf_const(const CheckCase *c, const char *name);
/* The split kernels' completion counters (input "counters", s32) are all
 * back at 0 after the launch (docs/ABI.md "decode", "indexer", "topk");
 * each one counts as checked, each nonzero one as bad (reported). */
int check_counters_zero(CheckCase *c, CheckResult *res, KrtErr *err);
/* A named value for the binding (see CheckVar); a later one of the same
 * name replaces it. */
int check_set_var(CheckCase *c, const char *name, uint64_t value, KrtErr *err);
/* An f32 scalar parameter's value (fmha: softmax_scale). */
int check_set_f32(CheckCase *c, const char *name, float value, KrtErr *err);

/* An input of element type t, uploaded; takes ownership of host (freed
 * with the case, also on failure). */
int check_add_input(CheckCase *c, const char *name, NumType t, uint64_t count, void *host,
                    KrtErr *err);
/* An input of a type that NumType does not have (cu_seqlens: "s32", 4 bytes). */
int check_add_raw_input(CheckCase *c, const char *name, const char *dtype, int esize,
                        uint64_t count, void *host, KrtErr *err);
/* An output with `guard` bytes of guard band on each side, rounded up to
 * 4 KiB so that the output keeps the allocation's alignment. */
int check_add_output(CheckCase *c, const char *name, NumType t, uint64_t count, size_t guard,
                     KrtErr *err);

/* An output of a type NumType does not have (indices: "s32"), filled with
 * `poison` bytes before a launch; an element whose bytes all still hold it
 * counts as never written, so pick a byte whose pattern the kernel never
 * writes (0xff would be -1 in s32). */
int check_add_raw_output(CheckCase *c, const char *name, const char *dtype, int esize, uint64_t count,
                         size_t guard, uint8_t poison, KrtErr *err);

/* Input draws (check.c says more). N(0,1) is the main test; the edge
 * pattern gives each row its own power-of-two scale 2^-emax .. 2^emax and
 * mixes in zeros, powers of two, subnormals and spikes of spike..2*spike
 * times the row's scale. */
typedef struct CheckEdge {
	int emax;
	double spike;
} CheckEdge;

/* The gemm ranges: nothing overflows fp32 accumulation or the output. */
CheckEdge check_edge_range(NumType in, NumType out);
void check_draw_matrix(NumRng *r, CheckFill fill, NumType t, CheckEdge e, uint64_t rows,
                       uint64_t cols, void *host);

#endif
