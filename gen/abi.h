/* Writes the kernel ABI header (docs/ABI.md) and wraps an emitted body into
 * a complete PTX module: header, .version/.target, the .entry with its
 * parameters, launch bounds, register declarations, body. */
#ifndef KGEN_ABI_H
#define KGEN_ABI_H

#include <stdint.h>
#include "dtype.h"
#include "emit.h"
#include "layout.h"
#include "target.h"

typedef enum AbiKind { ABI_TMAP, ABI_PTR, ABI_U32, ABI_S32, ABI_U64, ABI_F32 } AbiKind;

typedef struct AbiParam {
	AbiKind kind;
	char name[32];
	DType dtype;    /* tmap, ptr */
	int rank;       /* tmap */
	int box[5];     /* tmap, innermost first */
	Swizzle swz;    /* tmap */
	char tensor[64];
	int align;      /* ptr: the address must be a multiple of this (0: no rule beyond the dtype's) */
	const char *tmap_dtype; /* tmap: a TMA-only spelling instead of dtype's (e2m1p: packed FP4
	                         * expanded to a byte per value, runtime/abi.c), or NULL */
} AbiParam;

typedef struct KernelAbi {
	char kernel[128];
	const char *family;
	const char *kgen_family; /* the kgen family that emits it, NULL: family (gemm_moe: gemm) */
	const Target *target;
	char args[1024];
	char shape[256];  /* "Hq=16 Hkv=2 D=128 ...": see abi_shape */
	int threads;
	int min_ctas;     /* .minnctapersm; 0 = none */
	int cluster[3];
	uint32_t smem;
	char grid[3][128];
	AbiParam params[24];
	int nparams;
} KernelAbi;

/* The next parameter (kg_bug beyond the capacity of params[]). */
AbiParam *abi_add(KernelAbi *k, AbiKind kind, const char *name);
/* The next parameter, a device pointer to a tensor of dtype, its
 * //@param shape text printf's format and arguments (kg_bug if it does
 * not fit). */
AbiParam *abi_ptr(KernelAbi *k, const char *name, DType dtype, const char *tensor, ...)
	__attribute__((format(printf, 4, 5)));
/* Appends NAME=VALUE to the //@shape line: a shape parameter of the family
 * that the caller's tensors and scalars must agree with (docs/ABI.md,
 * "Shape fields"); kg_bug if the line overflows. */
void abi_shape(KernelAbi *k, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "p_NAME": the .param symbol of a parameter inside the entry. */
void abi_param_sym(char *out, size_t size, const char *name);
/* Assembles the module text from the ABI and the finished body. */
void abi_module(const KernelAbi *k, const Emit *e, Buf *out);

#endif
