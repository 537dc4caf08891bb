/* Element types known to the generator. The table in dtype.c is the one
 * place that names their width and spelling; instruction-specific codes
 * (idesc fields, TMA enums) live with the encoder that needs them. */
#ifndef KGEN_DTYPE_H
#define KGEN_DTYPE_H

#include <stdint.h>

typedef enum DType {
	DT_BF16,
	DT_F16,
	DT_F32,
	DT_TF32,
	DT_E4M3,
	DT_E5M2,
	DT_E2M3,
	DT_E3M2,
	DT_E2M1,
	DT_UE8M0,
	DT_UE4M3,
	DT_S8,
	DT_U8,
	DT_S32,
	DT_COUNT
} DType;

const char *dtype_name(DType t);      /* "bf16", "e4m3", ... (the CLI spelling) */
int dtype_bits(DType t);              /* storage bits of one element: 16, 8, 4 ... */
int dtype_parse(const char *s, DType *out); /* 0 on success, -1 if unknown */
/* The exact value of one code of a small float or scale format (e2m1, e2m3,
 * e3m2, e4m3, e5m2, ue8m0, ue4m3; docs/hardware.md, "Number formats"): NaN
 * and Inf where the format has them. 0, or -1 if t is not such a format or
 * code has more bits than t stores. */
int dtype_decode(DType t, uint32_t code, double *out);

#endif
