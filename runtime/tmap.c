/* Tensor-map arguments: from an ABI `tmap` param (dtype, rank, box,
 * swizzle) and the caller's KrtTensor (address, dims, byte strides) to the
 * twelve arguments of cuTensorMapEncodeTiled, with every rule of
 * docs/hardware.md, "Tensor map encoding" checked here first, so a bad tensor is reported with
 * the rule and all arguments instead of a bare CUDA_ERROR_INVALID_VALUE.
 * Pure: the driver call itself is in cuda.c. cuda.h for the enums only. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

#include "internal.h"
#include "krt.h"

/* Swizzle bytes of the ABI -> CUtensorMapSwizzle. The span is the largest
 * boxDim[0]*elemsize each mode allows (docs/hardware.md, "Tensor map encoding"). */
static const struct {
	int bytes;
	CUtensorMapSwizzle mode;
	const char *name;
} swizzles[] = {
	{0, CU_TENSOR_MAP_SWIZZLE_NONE, "NONE"},
	{32, CU_TENSOR_MAP_SWIZZLE_32B, "32B"},
	{64, CU_TENSOR_MAP_SWIZZLE_64B, "64B"},
	{128, CU_TENSOR_MAP_SWIZZLE_128B, "128B"},
};

/* CUtensorMapDataType names, indexed by value (cuda.h enum order). */
static const char *const data_type_names[] = {
	"UINT8",    "UINT16",   "UINT32",      "INT32",    "UINT64",       "INT64",
	"FLOAT16",  "FLOAT32",  "FLOAT64",     "BFLOAT16", "FLOAT32_FTZ",  "TFLOAT32",
	"TFLOAT32_FTZ", "16U4_ALIGN8B", "16U4_ALIGN16B", "16U6_ALIGN16B",
};

static const char *const l2_names[] = {"NONE", "L2_64B", "L2_128B", "L2_256B"};

_Static_assert(CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B == 15, "data_type_names follows cuda.h");
_Static_assert(CU_TENSOR_MAP_L2_PROMOTION_L2_256B == 3, "l2_names follows cuda.h");

static const char *
name_of(const char *const *names, size_t n, int v)
{
	return v >= 0 && (size_t)v < n ? names[v] : "?";
}

static void
list_u64(char *buf, size_t n, size_t *at, const uint64_t *v, int count)
{
	for (int i = 0; i < count && *at < n; i++) {
		int w = snprintf(buf + *at, n - *at, "%s%" PRIu64, i ? "," : "", v[i]);
		if (w < 0)
			return;
		*at += (size_t)w;
	}
}

static void
list_u32(char *buf, size_t n, size_t *at, const uint32_t *v, int count)
{
	for (int i = 0; i < count && *at < n; i++) {
		int w = snprintf(buf + *at, n - *at, "%s%" PRIu32, i ? "," : "", v[i]);
		if (w < 0)
			return;
		*at += (size_t)w;
	}
}

void
krt_tmap_describe(const KrtTmapArgs *a, char *buf, size_t n)
{
	size_t at = 0;
	/* Print what would be passed even when rank is out of range. */
	int r = a->rank > KRT_MAX_RANK ? KRT_MAX_RANK : (int)a->rank;
	const char *sw = "?";
	for (size_t i = 0; i < sizeof swizzles / sizeof swizzles[0]; i++)
		if ((int)swizzles[i].mode == a->swizzle)
			sw = swizzles[i].name;
	buf[0] = 0;
	krt_appendf(buf, n, &at, "dtype=%s (CU_TENSOR_MAP_DATA_TYPE_%s, %d bytes) rank=%" PRIu32
	                 " address=0x%" PRIx64 " dims={",
	    a->dtype, name_of(data_type_names, 16, a->data_type), a->elem_bytes, a->rank,
	    a->address);
	list_u64(buf, n, &at, a->dims, r);
	krt_appendf(buf, n, &at, "} globalStrides={");
	list_u64(buf, n, &at, a->strides, r > 0 ? r - 1 : 0);
	krt_appendf(buf, n, &at, "} box={");
	list_u32(buf, n, &at, a->box, r);
	krt_appendf(buf, n, &at, "} elementStrides={");
	list_u32(buf, n, &at, a->estrides, r);
	krt_appendf(buf, n, &at, "} interleave=NONE swizzle=%s l2Promotion=%s oobFill=NONE", sw,
	    name_of(l2_names, 4, a->l2_promotion));
	if (at >= n && n > 4)
		strcpy(buf + n - 4, "...");
}

static int
reject(const KrtTmapArgs *a, KrtErr *err, const char *fmt, ...) KRT_PRINTF(3, 4);

static int
reject(const KrtTmapArgs *a, KrtErr *err, const char *fmt, ...)
{
	char why[512], args[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	krt_tmap_describe(a, args, sizeof args);
	return krt_errf(err, KRT_EINVAL,
	                "tensor map arg %d (%s, tensor %s): %s\n"
	                "  cuTensorMapEncodeTiled arguments: %s",
	                a->index, a->param, a->tensor, why, args);
}

/* Fills `a` with everything the ABI and the tensor say, valid or not, so a
 * rejection can print it all. */
static void
fill(const KrtAbiParam *p, int index, const KrtTensor *t, const KrtDtype *d, KrtTmapArgs *a)
{
	memset(a, 0, sizeof *a);
	a->index = index;
	snprintf(a->param, sizeof a->param, "%s", p->name);
	snprintf(a->tensor, sizeof a->tensor, "%s", p->tensor);
	snprintf(a->dtype, sizeof a->dtype, "%s", p->dtype);
	a->elem_bytes = d ? d->bytes : 0;
	a->data_type = d ? d->tmap_type : -1;
	a->rank = (uint32_t)(t->rank < 0 ? 0 : t->rank);
	a->address = t->ptr;
	int r = t->rank < 0 ? 0 : t->rank > KRT_MAX_RANK ? KRT_MAX_RANK : t->rank;
	for (int i = 0; i < r; i++) {
		a->dims[i] = t->dims[i];
		if (i > 0)
			a->strides[i - 1] = t->strides[i];
	}
	for (int i = 0; i < KRT_MAX_RANK; i++) {
		a->box[i] = i < p->rank ? p->box[i] : 0;
		a->estrides[i] = 1; /* dense boxes; elementStrides[0] is ignored anyway */
	}
	a->interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
	a->swizzle = -1;
	a->swizzle_bytes = p->swizzle;
	for (size_t i = 0; i < sizeof swizzles / sizeof swizzles[0]; i++)
		if (swizzles[i].bytes == p->swizzle)
			a->swizzle = swizzles[i].mode;
	/* 256B L2 promotion, as CUTLASS and DeepGEMM use for GEMM operands. */
	a->l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
	a->oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE; /* zeros out of bounds */
}

int
krt_tmap_prepare(const KrtAbi *abi, int index, const KrtTensor *t, KrtTmapArgs *a,
                 KrtErr *err)
{
	if (!abi || index < 0 || index >= abi->nparams || abi->params[index].kind != KRT_ARG_TMAP)
		return krt_errf(err, KRT_EINVAL, "tensor map arg %d: the ABI has no tmap param there",
		                index);
	const KrtAbiParam *p = &abi->params[index];
	if (!t)
		return krt_errf(err, KRT_EINVAL, "tensor map arg %d (%s): no tensor given", index,
		                p->name);
	const KrtDtype *d = krt_dtype_find(p->dtype);
	fill(p, index, t, d, a);
	if (!d || d->tmap_type < 0)
		return reject(a, err, "dtype %s cannot be moved by TMA", p->dtype);
	if (a->swizzle < 0)
		return reject(a, err, "swizzle %d is not none, 32, 64 or 128", p->swizzle);
	/* Every rule below is from cuTensorMapEncodeTiled's documentation, as
	 * listed in docs/hardware.md, "Tensor map encoding". */
	if (t->rank < 1 || t->rank > KRT_MAX_RANK)
		return reject(a, err, "rank %d: cuTensorMapEncodeTiled takes rank 1..%d", t->rank,
		              KRT_MAX_RANK);
	if (t->rank != p->rank)
		return reject(a, err, "rank %d given, the ABI declares rank=%d", t->rank, p->rank);
	if (t->ptr == 0)
		return reject(a, err, "address is NULL");
	if (t->ptr % 16)
		return reject(a, err, "address 0x%" PRIx64 " is not 16-byte aligned (globalAddress)",
		              t->ptr);
	for (int i = 0; i < t->rank; i++) {
		if (t->dims[i] == 0)
			return reject(a, err, "dims[%d] = 0: every dimension must be nonzero", i);
		if (t->dims[i] > (UINT64_C(1) << 32))
			return reject(a, err, "dims[%d] = %" PRIu64 " exceeds 2^32 (globalDim)", i,
			              t->dims[i]);
	}
	/* TMA reads rows of contiguous elements: strides[0] is the element size
	 * (0 accepted as "contiguous"). */
	if (t->strides[0] != 0 && t->strides[0] != (uint64_t)d->bytes)
		return reject(a, err,
		              "strides[0] = %" PRIu64 ": the innermost dimension must be contiguous "
		              "(stride = element size %d bytes, or 0)",
		              t->strides[0], d->bytes);
	for (int i = 1; i < t->rank; i++) {
		if (t->strides[i] % 16)
			return reject(a, err,
			              "strides[%d] = %" PRIu64 " bytes is not a multiple of 16 "
			              "(globalStrides)",
			              i, t->strides[i]);
		if (t->strides[i] >= (UINT64_C(1) << 40))
			return reject(a, err, "strides[%d] = %" PRIu64 " bytes is not below 2^40 "
			                      "(globalStrides)",
			              i, t->strides[i]);
	}
	for (int i = 0; i < p->rank; i++)
		if (p->box[i] < 1 || p->box[i] > 256)
			return reject(a, err, "box[%d] = %" PRIu32 " is not in 1..256 (boxDim)", i,
			              p->box[i]);
	uint32_t inner = p->box[0] * (uint32_t)d->bytes;
	if (inner % 16)
		return reject(a, err,
		              "box[0]*elemsize = %" PRIu32 "*%d = %" PRIu32 " bytes is not a multiple "
		              "of 16 (boxDim[0] with INTERLEAVE_NONE)",
		              p->box[0], d->bytes, inner);
	if (p->swizzle && inner > (uint32_t)p->swizzle)
		return reject(a, err,
		              "box[0]*elemsize = %" PRIu32 " bytes exceeds the %d-byte swizzle span "
		              "(the inner box must fit one swizzle row)",
		              inner, p->swizzle);
	/* packed FP4 expanded to 16 bytes per 16 values (docs/hardware.md,
	 * "Tensor map encoding") */
	if (d->tmap_type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B) {
		if (t->ptr % 32)
			return reject(a, err, "address 0x%" PRIx64 " is not 32-byte aligned (globalAddress of "
			              "16U4_ALIGN16B)", t->ptr);
		if (t->dims[0] % 128)
			return reject(a, err, "dims[0] = %" PRIu64 " values is not a multiple of 128 "
			              "(globalDim[0] of 16U4_ALIGN16B)", t->dims[0]);
		for (int i = 1; i < t->rank; i++)
			if (t->strides[i] % 32)
				return reject(a, err, "strides[%d] = %" PRIu64 " bytes is not a multiple of 32 "
				              "(globalStrides of 16U4_ALIGN16B)", i, t->strides[i]);
		/* 128 bytes in shared memory: swizzles 32 and 64 fail the span rule above */
		if (p->box[0] != 128)
			return reject(a, err, "box[0] = %" PRIu32 " values: 16U4_ALIGN16B takes boxDim[0] = 128",
			              p->box[0]);
	}
	/* Not required: box <= dims. TMA zero-fills out-of-bounds elements, so a
	 * tile may overhang the tensor (docs/hardware.md, "TMA copies"). */
	return KRT_OK;
}
