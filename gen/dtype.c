/* The element-type table (dtype.h): names, widths, parsing and the decoding
 * of the small float and scale formats. */
#include <math.h>
#include <string.h>

#include "dtype.h"

/* How the top codes of a small float format are spent (docs/hardware.md,
 * "Number formats"). */
typedef enum Special {
	SP_NONE,    /* every code is finite (e2m1, e2m3, e3m2) */
	SP_IEEE,    /* exponent all ones: Inf (mantissa 0) or NaN (e5m2) */
	SP_ALLONES, /* only exponent and mantissa all ones is NaN (e4m3, ue4m3, ue8m0) */
} Special;

/* Columns: CLI name, storage bits per element; for the small float and
 * scale formats: sign bits, exponent bits, mantissa bits, exponent bias,
 * whether exponent 0 is subnormal (ue8m0 has no mantissa: 0 is 2^-127, not
 * a zero), and the special codes. */
static const struct {
	const char *name;
	int bits;
	int sbits, ebits, mbits, bias, subnormal;
	Special sp;
} dtypes[DT_COUNT] = {
	[DT_BF16] = {"bf16", 16},
	[DT_F16] = {"fp16", 16},
	[DT_F32] = {"f32", 32},
	[DT_TF32] = {"tf32", 32},
	[DT_E4M3] = {"e4m3", 8, 1, 4, 3, 7, 1, SP_ALLONES},
	[DT_E5M2] = {"e5m2", 8, 1, 5, 2, 15, 1, SP_IEEE},
	[DT_E2M3] = {"e2m3", 6, 1, 2, 3, 1, 1, SP_NONE},
	[DT_E3M2] = {"e3m2", 6, 1, 3, 2, 3, 1, SP_NONE},
	[DT_E2M1] = {"e2m1", 4, 1, 2, 1, 1, 1, SP_NONE},
	[DT_UE8M0] = {"ue8m0", 8, 0, 8, 0, 127, 0, SP_ALLONES},
	[DT_UE4M3] = {"ue4m3", 8, 0, 4, 3, 7, 1, SP_ALLONES},
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

int
dtype_decode(DType t, uint32_t code, double *out)
{
	if ((unsigned)t >= DT_COUNT || dtypes[t].ebits == 0)
		return -1;
	int sb = dtypes[t].sbits, eb = dtypes[t].ebits, mb = dtypes[t].mbits;
	if (code >> (sb + eb + mb))
		return -1;
	uint32_t m = code & ((1u << mb) - 1), e = code >> mb & ((1u << eb) - 1);
	double sign = sb && code >> (eb + mb) ? -1.0 : 1.0;
	uint32_t emax = (1u << eb) - 1, mmax = (1u << mb) - 1;

	if ((dtypes[t].sp == SP_IEEE && e == emax) ||
	    (dtypes[t].sp == SP_ALLONES && e == emax && m == mmax)) {
		*out = dtypes[t].sp == SP_IEEE && m == 0 ? sign * INFINITY : NAN;
		return 0;
	}
	if (e == 0 && dtypes[t].subnormal)
		/* no implicit 1, the exponent of the smallest normal */
		*out = sign * ldexp((double)m, 1 - dtypes[t].bias - mb);
	else
		*out = sign * ldexp((double)((1u << mb) | m), (int)e - dtypes[t].bias - mb);
	return 0;
}
