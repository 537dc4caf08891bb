/* The caller's shapes against the kernel's //@shape fields (docs/ABI.md,
 * "Shape fields"): a tensor dimension that must equal a field, or a scalar
 * that must be a multiple of one. A kernel without //@shape, or without the
 * param a rule names, is not checked by that rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "krt.h"

/* Columns: shape field, tmap param, dimension (innermost 0), what it is. */
static const struct {
	const char *field, *param;
	int dim;
	const char *what;
} dim_rules[] = {
	{"D", "Q", 0, "head dim of Q[total_q,Hq,D]"},
	{"Hq", "Q", 1, "heads of Q[total_q,Hq,D]"},
	{"D", "K", 0, "head dim of K[total_k,Hkv,D]"},
	{"Hkv", "K", 1, "heads of K[total_k,Hkv,D]"},
	{"Dv", "V", 0, "head dim of V[total_k,Hkv,Dv]"},
	{"Hkv", "V", 1, "heads of V[total_k,Hkv,Dv]"},
};

/* Columns: shape field, u32 param that must be a multiple of it, why. */
static const struct {
	const char *field, *param, *why;
} multiple_rules[] = {
	{"kmult", "K", "rows of A and B are K elements and their byte stride a multiple of 16"},
	{"kblock", "K", "A and B carry their scales per kblock elements of K (SA, SB; docs/ABI.md, "
	 "\"gemm\")"},
	{"nmult", "N", "B's N rows are the gate and up halves of a SwiGLU gemm, each whole 128-row scale "
	 "blocks (docs/ABI.md, \"SwiGLU epilogue\")"},
};

/* Columns: shape field and value, tmap param, dimension, u32 param and
 * divisor it must equal, why: a packed operand's rows against K. */
static const struct {
	const char *field, *value, *param;
	int dim;
	const char *scalar;
	int div;
	const char *why;
} packed_rules[] = {
	{"weights", "e2m1", "B", 0, "K", 2, "B's rows are K E2M1 codes, two per byte (docs/ABI.md, "
	 "\"W4A8 weights\")"},
};

/* The index of param `name` of the given kind, -1 if the kernel has none. */
static int
param_index(const KrtAbi *abi, const char *name, KrtArgKind kind)
{
	for (int i = 0; i < abi->nparams; i++)
		if (abi->params[i].kind == kind && strcmp(abi->params[i].name, name) == 0)
			return i;
	return -1;
}

/* A field's value as a positive integer; 0 if it is not one. */
static uint64_t
field_number(const char *v)
{
	char *end;
	unsigned long long n = strtoull(v, &end, 10);
	return *v >= '0' && *v <= '9' && !*end ? (uint64_t)n : 0;
}

int
krt_shape_check(const KrtAbi *abi, const KrtArg *args, int nargs, KrtErr *err)
{
	for (size_t r = 0; r < sizeof dim_rules / sizeof dim_rules[0]; r++) {
		const char *v = krt_abi_shape(abi, dim_rules[r].field);
		int i = param_index(abi, dim_rules[r].param, KRT_ARG_TMAP);
		if (!v || i < 0 || i >= nargs || args[i].kind != KRT_ARG_TMAP)
			continue;
		const KrtTensor *t = &args[i].v.t;
		int d = dim_rules[r].dim;
		uint64_t want = field_number(v);
		if (d >= t->rank || t->dims[d] != want)
			return krt_errf(err, KRT_EINVAL,
			                "kernel %s: arg %d (%s): dims[%d]=%llu (%s): must equal %s=%s "
			                "of the kernel's //@shape",
			                abi->kernel, i, dim_rules[r].param, d,
			                d < t->rank ? (unsigned long long)t->dims[d] : 0ull,
			                dim_rules[r].what, dim_rules[r].field, v);
	}
	for (size_t r = 0; r < sizeof multiple_rules / sizeof multiple_rules[0]; r++) {
		const char *v = krt_abi_shape(abi, multiple_rules[r].field);
		int i = param_index(abi, multiple_rules[r].param, KRT_ARG_U32);
		if (!v || i < 0 || i >= nargs || args[i].kind != KRT_ARG_U32)
			continue;
		uint64_t m = field_number(v);
		if (m == 0)
			return krt_errf(err, KRT_EABI, "kernel %s: //@shape %s=%s: expected a positive integer",
			                abi->kernel, multiple_rules[r].field, v);
		if (args[i].v.u32 % m)
			return krt_errf(err, KRT_EINVAL,
			                "kernel %s: arg %d (%s)=%u: must be a multiple of %s (//@shape %s=%s: "
			                "%s)",
			                abi->kernel, i, multiple_rules[r].param, args[i].v.u32, v,
			                multiple_rules[r].field, v, multiple_rules[r].why);
	}
	for (size_t r = 0; r < sizeof packed_rules / sizeof packed_rules[0]; r++) {
		const char *v = krt_abi_shape(abi, packed_rules[r].field);
		int i = param_index(abi, packed_rules[r].param, KRT_ARG_TMAP);
		int j = param_index(abi, packed_rules[r].scalar, KRT_ARG_U32);
		if (!v || strcmp(v, packed_rules[r].value) || i < 0 || j < 0 || i >= nargs || j >= nargs ||
		    args[i].kind != KRT_ARG_TMAP || args[j].kind != KRT_ARG_U32)
			continue;
		const KrtTensor *t = &args[i].v.t;
		int d = packed_rules[r].dim;
		uint64_t want = args[j].v.u32 / (uint64_t)packed_rules[r].div;
		if (d >= t->rank || t->dims[d] != want || args[j].v.u32 % packed_rules[r].div)
			return krt_errf(err, KRT_EINVAL,
			                "kernel %s: arg %d (%s): dims[%d]=%llu: must be %s/%d = %llu (//@shape "
			                "%s=%s: %s)", abi->kernel, i, packed_rules[r].param, d,
			                d < t->rank ? (unsigned long long)t->dims[d] : 0ull, packed_rules[r].scalar,
			                packed_rules[r].div, (unsigned long long)want, packed_rules[r].field, v,
			                packed_rules[r].why);
	}
	return KRT_OK;
}
