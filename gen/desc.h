/* The one place where descriptor bits are built:
 *  - shared-memory matrix descriptors for wgmma (sm_90a) and tcgen05
 *    (sm_100a) (docs/hardware.md, "Shared-memory descriptor (sm_90)" and
 *    "Shared-memory descriptor (sm_100)");
 *  - tcgen05 instruction descriptors with every field range-checked against
 *    the shape and transpose rules (docs/hardware.md, "Instruction
 *    descriptor", "Block-scaled instruction descriptor", "MMA shapes" and
 *    "Operand major-ness").
 * Each encoder fails with a message naming the field, the value and the rule. */
#ifndef KGEN_DESC_H
#define KGEN_DESC_H

#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "err.h"
#include "layout.h"

typedef enum DescArch {
	DESC_SM90,  /* wgmma: 2-bit swizzle at 62-63, no version bits */
	DESC_SM100, /* tcgen05: version 0b001 at 46-48, 3-bit layout at 61-63 */
} DescArch;

typedef struct SmemDesc {
	uint32_t addr;        /* shared-window byte address, 16-byte aligned, < 256 KiB */
	uint32_t lbo, sbo;    /* bytes, 16-byte aligned (LBO may be 16 = "field 1" when unused) */
	int base_offset;      /* 0..7 */
	int lbo_mode;         /* sm100 only: 0 relative, 1 absolute (sm_103a only: rejected) */
	Swizzle swz;
	int base32b;          /* sm100 only: layout 128B_BASE32B (code 1); needs swz == SWZ_128B */
} SmemDesc;

/* The start-address field holds address bits 4-17. In a cluster a CTA's
 * shared addresses also carry its %cluster_ctarank in bits 24-27, which a
 * kernel adding the whole address into the field would spill into the
 * leading-byte-offset field: clustered kernels keep only these bits first
 * (docs/hardware.md, "Shared addresses in a cluster"). */
#define DESC_ADDR_MASK UINT32_C(0x3FFFF)

int desc_encode(uint64_t *out, DescArch arch, const SmemDesc *d, KgErr *err);
/* Inverse, for the calculator's field table and for tests. */
int desc_decode(SmemDesc *out, DescArch arch, uint64_t v, KgErr *err);
/* Descriptor for a canonical tile (layout.h) at addr. */
/* The descriptor of a K-major swizzled tile read as an MN-major operand,
 * as P·V reads V: the tile's rows (keys) become K and its columns (head
 * dim) N; its 8-row groups are the 8-K-row groups (SBO = the tile's SBO)
 * and its span-wide column slices the MN atoms (LBO = the slice distance)
 * (docs/hardware.md, "Canonical layouts, LBO and SBO" and "TMA swizzle"). */
int desc_for_tile_mn(uint64_t *out, DescArch arch, const TileLayout *t, uint32_t addr, KgErr *err);
int desc_for_tile(uint64_t *out, DescArch arch, const TileLayout *t, uint32_t addr, KgErr *err);

typedef enum IdescKind {
	IK_F16,
	IK_TF32,
	IK_F8F6F4,
	IK_I8,
	IK_MXF8F6F4,
	IK_MXF4,
	IK_MXF4NVF4,
	IK_COUNT
} IdescKind;

const char *idesc_kind_name(IdescKind k); /* "f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4", "mxf4nvf4" */
int idesc_kind_parse(const char *s, IdescKind *out);

typedef struct Idesc {
	IdescKind kind;
	DType a, b;        /* operand types */
	DType d;           /* accumulator: DT_F32, DT_F16 or DT_S32 (ignored for block-scaled) */
	DType scale;       /* block-scaled only: DT_UE8M0 or DT_UE4M3 */
	int m, n;
	int cta_group;     /* 1 or 2 (selects the legal M/N set, docs/hardware.md, "MMA shapes") */
	int a_major_mn, b_major_mn; /* transpose bits 15/16 */
	int neg_a, neg_b;
	int sparse, sparse_sel, saturate;
	int max_shift;     /* .ws B reuse, 0..3 */
	int sfa_id, sfb_id;/* block-scaled only */
	int k96;           /* mxf4/mxf4nvf4 only */
} Idesc;

int idesc_encode(uint32_t *out, const Idesc *d, KgErr *err);

/* One row per field of an encoded value, for `kgen desc/idesc` tables:
 * bits "hi-lo", field name, raw field value and a decoded meaning. */
typedef struct DescField {
	int lo, hi;
	const char *name;
	uint64_t raw;
	char meaning[64];
} DescField;

int desc_fields(DescField *out, int max, DescArch arch, uint64_t v);
int idesc_fields(DescField *out, int max, IdescKind kind, uint32_t v);

/* One-line decodings for comments beside emitted constants, e.g.
 * "sw128 lbo=16 sbo=1024" (fields at their defaults are left out: start 0,
 * base offset 0, relative LBO) and "kind::f16 a=bf16 b=bf16 d=f32 M=128
 * N=128 b=MN-major" (flags only when set). A value the decoder refuses
 * reads "INVALID: <reason>". Return the length written (snprintf). */
int desc_text(char *out, size_t n, DescArch arch, uint64_t v);
int idesc_text(char *out, size_t n, IdescKind kind, uint32_t v);

#endif
