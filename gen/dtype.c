/* The element-type table (dtype.h): names, widths and parsing. */
#include <string.h>

#include "dtype.h"

/* Columns: CLI name, storage bits per element. */
static const struct {
	const char *name;
	int bits;
} dtypes[DT_COUNT] = {
	[DT_BF16] = {"bf16", 16},
	[DT_F16] = {"fp16", 16},
	[DT_F32] = {"f32", 32},
	[DT_TF32] = {"tf32", 32},
	[DT_E4M3] = {"e4m3", 8},
	[DT_E5M2] = {"e5m2", 8},
	[DT_E2M3] = {"e2m3", 6},
	[DT_E3M2] = {"e3m2", 6},
	[DT_E2M1] = {"e2m1", 4},
	[DT_UE8M0] = {"ue8m0", 8},
	[DT_UE4M3] = {"ue4m3", 8},
	[DT_S8] = {"s8", 8},
	[DT_U8] = {"u8", 8},
	[DT_S32] = {"s32", 32},
};

const char *
dtype_name(DType t)
{
	return (unsigned)t < DT_COUNT ? dtypes[t].name : "?";
}

int
dtype_bits(DType t)
{
	return (unsigned)t < DT_COUNT ? dtypes[t].bits : 0;
}

int
dtype_parse(const char *s, DType *out)
{
	for (int i = 0; i < DT_COUNT; i++)
		if (strcmp(s, dtypes[i].name) == 0) {
			*out = (DType)i;
			return 0;
		}
	/* accepted aliases */
	if (strcmp(s, "f16") == 0) {
		*out = DT_F16;
		return 0;
	}
	if (strcmp(s, "fp32") == 0) {
		*out = DT_F32;
		return 0;
	}
	return -1;
}
