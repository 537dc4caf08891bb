/* The checker behind kcheck, kbench and the gpu tests, in the manner of
 * dav1d's checkasm: run a loaded kernel on seeded random inputs, with guard
 * bands around and poison inside every output, and compare with the float64
 * reference in tests/ref by a relative error with a stated tolerance.
 *
 * One row of a family table per kernel family (check.c; each family's code
 * in check_FAMILY.c); the ABI header of the module says which family, which
 * element types and (fmha) which configuration, so callers only pick a
 * shape and a seed. A failure prints the seed, the family, the
 * kernel, its kgen arguments, the shape and the first mismatches, which is
 * all it takes to replay it. Nothing here exits. */
#ifndef KGEN_TOOLS_CHECK_H
#define KGEN_TOOLS_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "runtime/krt.h"

enum { CHECK_MAX_DIMS = 8 };

/* Exit status of kcheck and kbench (and kgen's 2 and 74): one meaning each.
 * 77 is what meson counts as skipped, so it means only that no device here
 * can run the kernel. */
enum {
	CHECK_EXIT_FAIL = 1,   /* a check failed, or the run failed on the device */
	CHECK_EXIT_INPUT = 2,  /* bad input: usage, a malformed header, a kernel that
	                        * asks for more than the device or emulator allows */
	CHECK_EXIT_IO = 74,    /* output lost: a write failed */
	CHECK_EXIT_NODEV = 77, /* no GPU and no emulator, or a target this device
	                        * cannot run */
};
/* The exit status for a libkrt error code from opening a device or loading
 * or launching a module. */
int check_exit_of(int krt_code);
/* "NVIDIA H100 80GB HBM3 (sm_90)", or on the emulator the target it runs
 * this kernel as: "CPU emulator (each kernel as its own target), running
 * sm_90a (H100-class)". */
void check_device_str(KrtDevice *dev, const KrtAbi *abi, char *buf, size_t n);

/* A problem size: d[i] is the family's i-th dimension (CheckFamily.dims;
 * gemm: M, N, K; fmha: batch, seqlen_q, seqlen_k, varlen). */
typedef struct CheckShape {
	int n;
	uint64_t d[CHECK_MAX_DIMS];
} CheckShape;

typedef enum CheckFill {
	CHECK_FILL_NORMAL, /* every input element from N(0,1) */
	CHECK_FILL_EDGE,   /* mixed magnitudes: scaled rows, zeros, powers of
	                    * two, subnormals, large values (see check.c) */
} CheckFill;

typedef struct CheckOpts {
	uint64_t seed;
	CheckFill fill;
	/* Reference work (multiply-adds) above which only a random subset of
	 * output rows is compared; 0 means CHECK_FULL_LIMIT. Poison and guard
	 * bands are always checked over the whole output. */
	uint64_t full_limit;
	int max_report;    /* mismatches listed on failure; 0 means 8 */
	FILE *log;         /* failure reports; NULL means stderr */
	const char *label; /* how to replay, printed on failure (may be NULL) */
} CheckOpts;

#define CHECK_FULL_LIMIT (UINT64_C(1) << 33)

typedef struct CheckResult {
	int pass;
	double max_err;     /* max over compared elements of |got - ref| /
	                     * max |ref| of its row (gemm: a row of C; fmha:
	                     * one head of one query row of O; check_gemm.c
	                     * and check_fmha.c say why) */
	double tol;         /* the tolerance it was held to */
	uint64_t total;     /* output elements */
	uint64_t checked;   /* of those, compared with the reference */
	uint64_t bad;       /* compared and over tolerance or not finite */
	uint64_t unwritten; /* still holding the poison after the launch */
	uint64_t guard_bad; /* guard-band bytes the kernel changed */
	int subset;         /* 1 if only some rows were compared */
	/* A second output held to its own norm (fmha's LSE: max |lse - ref|
	 * / max(1, |ref|)); lse_tol = 0 when the kernel has none. Its
	 * elements count in total, checked and bad too. */
	double lse_err;
	double lse_tol;
} CheckResult;

/* ---- families ----------------------------------------------------------- */

typedef struct CheckCase CheckCase;

typedef struct CheckFamily {
	const char *name;       /* as the ABI `family` line spells it */
	const char *kgen;       /* the kgen family that emits it, NULL: the same
	                         * name (gemm_moe: gemm --moe ...) */
	const char *dims;       /* dimension names, comma-separated: "M,N,K";
	                         * kcheck takes each as an option (--m; an
	                         * underscore is spelled '-': --seqlen-q) */
	int ndims;
	int nrequired;          /* the first nrequired dimensions must be
	                         * given, the others default to 0 (0: all) */
	const CheckShape *shapes; /* kcheck's default list: small and odd */
	int nshapes;
	CheckShape bench;       /* kbench's default shape */
	/* Reads the kernel's configuration from its ABI, draws the inputs,
	 * uploads them and allocates the outputs with guard bands
	 * (check_internal.h's check_add_input/check_add_output); the
	 * arguments are then bound from the ABI by name. */
	int (*prepare)(CheckCase *c, KrtErr *err);
	/* Compares the downloaded outputs with the reference and fills
	 * max_err, tol, checked, bad, subset (and lse_*); appends the first
	 * mismatches to the case's report. */
	int (*compare)(CheckCase *c, CheckResult *res, KrtErr *err);
	/* Floating-point operations of the case, for TFLOP/s (by the
	 * family's convention, stated where it is defined). */
	double (*flops)(const CheckCase *c);
	/* The arguments of `tools/peers.py` for this case, after the iteration
	 * counts are known: "gemm M N K bf16 ITERS WARMUP f32". -1: no peer
	 * takes this case. */
	int (*peer_args)(const CheckCase *c, int iters, int warmup, char *buf, size_t n);
	/* Optional: the bytes the case must move at least, for GB/s (decode:
	 * Q + unique gathered tokens x bytes per token + O, FlashMLA's count);
	 * NULL: kbench prints no rate. */
	double (*bytes)(const CheckCase *c);
	/* Optional: lines for a failure report that the ABI and the shape do
	 * not already say (fmha: the configuration read from the ABI args and
	 * the drawn sequence lengths). */
	void (*describe)(const CheckCase *c, FILE *f);
	/* Optional: fits one of the default shapes to the kernel (gemm
	 * block-scaled: K up to whole scale blocks); shapes given on the
	 * command line are taken as they are. */
	void (*fit_default)(const KrtAbi *abi, CheckShape *s);
} CheckFamily;

const CheckFamily *check_family(const char *name); /* NULL if unknown */
const CheckFamily *check_family_at(int i);         /* NULL past the end */
/* Index of dimension `name` (any case: "m" or "M"; '-' for '_':
 * "seqlen-q") in fam->dims, or -1. */
int check_family_dim(const CheckFamily *fam, const char *name);
/* " --m --n --k" for dims "M,N,K", with a newline: for usage messages;
 * optional dimensions in brackets. */
void check_family_print_dims(FILE *f, const CheckFamily *fam);
/* Pads a shape of nrequired..ndims dimensions with zeros to ndims; -1 if
 * it has too few or too many. */
int check_shape_fit(const CheckFamily *fam, CheckShape *s);

/* ---- one case: a module, a shape, a seed -------------------------------- */

/* Prepares a case of the module's family: inputs drawn and uploaded, outputs
 * allocated with guard bands, arguments bound in ABI order. */
int check_case_new(CheckCase **out, KrtDevice *dev, KrtModule *mod, const CheckShape *shape,
                   uint64_t seed, CheckFill fill, KrtErr *err);
void check_case_free(CheckCase *c);
const KrtArg *check_case_args(const CheckCase *c, int *nargs);
const CheckFamily *check_case_family(const CheckCase *c);
double check_case_flops(const CheckCase *c);
double check_case_traffic(const CheckCase *c); /* the family's bytes(), or 0 */
uint64_t check_case_bytes(const CheckCase *c); /* device bytes it uses */
/* Fills every output with the poison (all bytes 0xff: a NaN in bf16, fp16
 * and f32) and its guard bands with 0x99. */
int check_case_poison(CheckCase *c, KrtErr *err);
/* Downloads the outputs and checks them: guard bands, poison, values. A
 * failure is printed to opts->log. Returns 0 when the check ran (res->pass
 * says how it went) or a KRT_E* code when it could not. */
int check_case_verify(CheckCase *c, const CheckOpts *opts, CheckResult *res, KrtErr *err);

/* All of the above for one shape: prepare, poison, launch, sync, verify.
 * A launch or sync error is printed with the replay details too and its
 * KRT_E* code returned (KRT_ECUDA: the context is likely unusable). */
int check_run(KrtDevice *dev, KrtModule *mod, const CheckShape *shape, const CheckOpts *opts,
              CheckResult *res, KrtErr *err);

/* ---- helpers for the tools ---------------------------------------------- */

/* "127x129x72" */
void check_shape_str(const CheckShape *s, char *buf, size_t n);
int check_shape_parse(const char *str, CheckShape *out); /* 0, or -1 */
const char *check_fill_name(CheckFill f);
int check_fill_parse(const char *str, CheckFill *out);
/* The seed of one case of a run with base seed `base`: it depends on the
 * shape and the fill only, so `kcheck --seed BASE --shape ... --fill ...`
 * replays one case of any longer run (kcheck's or the gpu tests'). */
uint64_t check_case_seed(uint64_t base, const CheckShape *s, CheckFill fill);
/* A fresh seed from the clock and the process id, for runs without --seed. */
uint64_t check_seed_from_time(void);
/* The base seed of a GPU suite run: KGEN_TEST_SEED when set, else from the
 * clock. */
uint64_t check_seed_from_env(void);
/* Opens the CUDA device for the sm_90a GPU suites and prints its line with
 * the seed: 0 with *dev open; 77 (meson: skipped) without a GPU or on a GPU
 * that is not sm_90, saying why; 1 when a GPU is present but will not open. */
int check_open_sm90(KrtDevice **dev, uint64_t seed);
/* Reads a whole file into a malloc'd NUL-terminated buffer. */
int check_read_file(const char *path, char **text, size_t *len, KrtErr *err);

#endif
