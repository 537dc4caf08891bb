/* Element types known to the generator. The table in dtype.c is the one
 * place that names their width and spelling; instruction-specific codes
 * (idesc fields, TMA enums) live with the encoder that needs them. */
#ifndef KGEN_DTYPE_H
#define KGEN_DTYPE_H

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

#endif
