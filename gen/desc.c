/* Shared-memory matrix descriptors (sm_90a and sm_100a) and tcgen05
 * instruction descriptors: encoders, decoders and field tables (desc.h).
 * Every descriptor bit the generator emits is built here. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "desc.h"

/* Descriptor byte fields hold (x mod smem_desc_window()) >> 4: 16-byte
 * units below 256 KiB (docs/hardware.md, "Shared-memory descriptor
 * (sm_100)", PTX §9.7.16.4.1). */

/* Layout field codes. Columns: tcgen05 3-bit code at bits 61-63
 * (docs/hardware.md, "Shared-memory descriptor (sm_100)"), wgmma 2-bit code at
 * bits 62-63 (docs/hardware.md, "Shared-memory descriptor (sm_90)"). The sm100
 * code is the sm90 code shifted left once inside a field that starts one bit
 * lower, so both put the same bits at 61-63. */
static const struct {
	int sm100, sm90;
} swz_code[SWZ_COUNT] = {
	[SWZ_NONE] = {0, 0},
	[SWZ_32B] = {6, 3},
	[SWZ_64B] = {4, 2},
	[SWZ_128B] = {2, 1},
};
#define SM100_BASE32B 1 /* 128B swizzle, 32-byte atomicity: tcgen05 only */

/* How a field's raw value reads in the calculator table. */
typedef enum FieldKind {
	FK_ADDR,      /* raw << 4 is a shared-memory address */
	FK_BYTES,     /* raw << 4 is a byte distance */
	FK_ZERO,      /* reserved or fixed 0 */
	FK_VERSION,   /* fixed 0b001 (tcgen05 bits 46-48) */
	FK_NUM,       /* plain number */
	FK_LBOMODE,
	FK_LAYOUT100,
	FK_SWZ90,
	FK_BOOL,
	FK_DTYPE,     /* idesc D type code */
	FK_ATYPE,
	FK_BTYPE,
	FK_MAJOR,
	FK_N,         /* raw << 3 */
	FK_M4,        /* raw << 4 */
	FK_M7,        /* raw << 7 */
	FK_SHIFT,
	FK_SCALE,
	FK_K96,
} FieldKind;

typedef struct FieldSpec {
	int lo, hi;
	const char *name;
	FieldKind kind;
} FieldSpec;

/* docs/hardware.md, "Shared-memory descriptor (sm_100)" (PTX §9.7.16.4.1 Table 40). */
static const FieldSpec sm100_fields[] = {
	{0, 13, "start", FK_ADDR},
	{14, 15, "reserved", FK_ZERO},
	{16, 29, "lbo", FK_BYTES},
	{30, 31, "reserved", FK_ZERO},
	{32, 45, "sbo", FK_BYTES},
	{46, 48, "version", FK_VERSION},
	{49, 51, "base-offset", FK_NUM},
	{52, 52, "lbo-mode", FK_LBOMODE},
	{53, 60, "fixed", FK_ZERO},
	{61, 63, "layout", FK_LAYOUT100},
};

/* docs/hardware.md, "Shared-memory descriptor (sm_90)" (PTX §9.7.15.5.1.2.2). */
static const FieldSpec sm90_fields[] = {
	{0, 13, "start", FK_ADDR},
	{14, 15, "reserved", FK_ZERO},
	{16, 29, "lbo", FK_BYTES},
	{30, 31, "reserved", FK_ZERO},
	{32, 45, "sbo", FK_BYTES},
	{46, 48, "unused", FK_ZERO},
	{49, 51, "base-offset", FK_NUM},
	{52, 61, "unused", FK_ZERO},
	{62, 63, "swizzle", FK_SWZ90},
};

/* Bits 61-63 of a tcgen05 descriptor; 3, 5 and 7 are undefined (docs/hardware.md,
 * "Shared-memory descriptor (sm_100)"). */
static const char *const layout100_name[8] = {
	"no swizzle", "128B swizzle, 32B atoms", "128B swizzle", NULL,
	"64B swizzle", NULL, "32B swizzle", NULL,
};
static const char *const swz90_name[4] = {
	"no swizzle", "128B swizzle", "64B swizzle", "32B swizzle",
};

static uint64_t
enc(uint32_t x)
{
	return (x & (smem_desc_window() - 1)) >> 4;
}

static uint64_t
field(uint64_t v, int lo, int hi)
{
	return (v >> lo) & ((2ull << (hi - lo)) - 1);
}

static int
check_arch(DescArch arch, KgErr *err)
{
	if (arch != DESC_SM90 && arch != DESC_SM100)
		return kg_fail(err, "target=%d: must be sm_90a or sm_100a", (int)arch);
	return 0;
}

static int
check_offset(const char *name, uint32_t x, KgErr *err)
{
	if (x % 16)
		return kg_fail(err, "%s=0x%x: must be 16-byte aligned (the descriptor "
		               "stores %s >> 4, docs/hardware.md, \"Shared-memory descriptor (sm_100)\")", name, x, name);
	if (x >= smem_desc_window())
		return kg_fail(err, "%s=0x%x: must be below 256 KiB (14-bit field of "
		               "%s >> 4, docs/hardware.md, \"Shared-memory descriptor (sm_100)\")", name, x, name);
	return 0;
}

static int
check_smem(DescArch arch, const SmemDesc *d, KgErr *err)
{
	if (check_offset("addr", d->addr, err) || check_offset("lbo", d->lbo, err)
	    || check_offset("sbo", d->sbo, err))
		return -1;
	if ((unsigned)d->swz >= SWZ_COUNT)
		return kg_fail(err, "swizzle=%d: not a swizzle mode "
		               "(none, 32B, 64B, 128B)", (int)d->swz);
	if (d->base_offset < 0 || d->base_offset > 7)
		return kg_fail(err, "base-offset=%d: must be 0..7 (3-bit field, "
		               "docs/hardware.md, \"Base offset and alignment\")", d->base_offset);
	/* "valid for all swizzle modes except none" (PTX §9.7.15.5.1.2.2):
	 * with no pattern there is nothing to offset, so a value is a bug. */
	if (d->base_offset && d->swz == SWZ_NONE)
		return kg_fail(err, "base-offset=%d: needs a swizzle pattern to "
		               "offset; swizzle=none (docs/hardware.md, \"Base offset and alignment\")",
		               d->base_offset);
	if (d->lbo_mode && arch == DESC_SM90)
		return kg_fail(err, "lbo-mode=%d: sm_90a descriptors have no LBO "
		               "mode bit (docs/hardware.md, \"Shared-memory descriptor (sm_90)\")", d->lbo_mode);
	if (d->lbo_mode == 1)
		return kg_fail(err, "lbo-mode=1: absolute LBO is sm_103a only "
		               "(docs/hardware.md, \"Shared-memory descriptor (sm_100)\", PTX §9.7.16.4.1.1)");
	if (d->lbo_mode)
		return kg_fail(err, "lbo-mode=%d: must be 0 (relative LBO)", d->lbo_mode);
	if (d->base32b && arch == DESC_SM90)
		return kg_fail(err, "base32b=%d: 128B_BASE32B is a tcgen05 layout; "
		               "sm_90a has none (docs/hardware.md, \"Shared-memory descriptor (sm_90)\")", d->base32b);
	if (d->base32b && d->base32b != 1)
		return kg_fail(err, "base32b=%d: must be 0 or 1", d->base32b);
	if (d->base32b && d->swz != SWZ_128B)
		return kg_fail(err, "base32b=1: is a 128B swizzle variant; "
		               "swizzle=%s (docs/hardware.md, \"Shared-memory descriptor (sm_100)\")", swizzle_name(d->swz));
	return 0;
}

int
desc_encode(uint64_t *out, DescArch arch, const SmemDesc *d, KgErr *err)
{
	uint64_t v;

	if (check_arch(arch, err) || check_smem(arch, d, err))
		return -1;
	v = enc(d->addr) | enc(d->lbo) << 16 | enc(d->sbo) << 32
	    | (uint64_t)d->base_offset << 49;
	if (arch == DESC_SM100)
		v |= 1ull << 46 | (uint64_t)d->lbo_mode << 52
		     | (uint64_t)(d->base32b ? SM100_BASE32B : swz_code[d->swz].sm100) << 61;
	else
		v |= (uint64_t)swz_code[d->swz].sm90 << 62;
	*out = v;
	return 0;
}

static const FieldSpec *
desc_spec(DescArch arch, int *n)
{
	if (arch == DESC_SM100) {
		*n = (int)(sizeof sm100_fields / sizeof sm100_fields[0]);
		return sm100_fields;
	}
	*n = (int)(sizeof sm90_fields / sizeof sm90_fields[0]);
	return sm90_fields;
}

/* Rejects only what the hardware leaves undefined (reserved bits, the
 * version constant, layout codes 3/5/7). A set lbo-mode (legal on sm_103a)
 * or a base offset beside swizzle none decodes as is, so the calculator can
 * show it; desc_encode refuses to produce either. */
int
desc_decode(SmemDesc *out, DescArch arch, uint64_t v, KgErr *err)
{
	const FieldSpec *f;
	SmemDesc d = {0};
	int n, code;

	if (check_arch(arch, err))
		return -1;
	f = desc_spec(arch, &n);
	for (int i = 0; i < n; i++) {
		uint64_t raw = field(v, f[i].lo, f[i].hi);

		if (f[i].kind == FK_ZERO && raw)
			return kg_fail(err, "bits %d-%d (%s)=0x%llx: must be 0 "
			               "%s", f[i].lo, f[i].hi, f[i].name,
			               (unsigned long long)raw, arch == DESC_SM100
			               ? "(docs/hardware.md, \"Shared-memory descriptor (sm_100)\")"
			               : "(docs/hardware.md, \"Shared-memory descriptor (sm_90)\")");
		if (f[i].kind == FK_VERSION && raw != 1)
			return kg_fail(err, "bits 46-48 (version)=%llu: must be 0b001 "
			               "on sm_100a (docs/hardware.md, \"Shared-memory descriptor (sm_100)\")",
			               (unsigned long long)raw);
	}
	d.addr = (uint32_t)field(v, 0, 13) << 4;
	d.lbo = (uint32_t)field(v, 16, 29) << 4;
	d.sbo = (uint32_t)field(v, 32, 45) << 4;
	d.base_offset = (int)field(v, 49, 51);
	if (arch == DESC_SM90) {
		code = (int)field(v, 62, 63);
		for (int s = 0; s < SWZ_COUNT; s++)
			if (swz_code[s].sm90 == code)
				d.swz = (Swizzle)s;
		*out = d;
		return 0;
	}
	d.lbo_mode = (int)field(v, 52, 52);
	code = (int)field(v, 61, 63);
	if (code == SM100_BASE32B) {
		d.swz = SWZ_128B;
		d.base32b = 1;
		*out = d;
		return 0;
	}
	for (int s = 0; s < SWZ_COUNT; s++)
		if (swz_code[s].sm100 == code) {
			d.swz = (Swizzle)s;
			*out = d;
			return 0;
		}
	return kg_fail(err, "bits 61-63 (layout)=%d: undefined layout code "
	               "(0, 1, 2, 4, 6 are defined, docs/hardware.md, \"Shared-memory descriptor (sm_100)\")", code);
}

int
desc_for_tile(uint64_t *out, DescArch arch, const TileLayout *t, uint32_t addr,
              KgErr *err)
{
	SmemDesc d = {0};
	uint32_t period;

	if ((unsigned)t->swz >= SWZ_COUNT)
		return kg_fail(err, "swizzle=%d: not a swizzle mode", (int)t->swz);
	/* A tile is a whole number of pattern periods from its first byte, so
	 * base_offset 0 needs the tile on a period boundary (docs/hardware.md,
	 * "Base offset and alignment"); to start inside a tile (K steps,
	 * docs/hardware.md, "Advancing along K") use desc_encode. */
	period = (uint32_t)swizzle_period(t->swz);
	if (addr % period)
		return kg_fail(err, "addr=0x%x: a %s-swizzled tile must start on a "
		               "%u-byte boundary (docs/hardware.md, \"Base offset and alignment\")", addr,
		               swizzle_name(t->swz), period);
	if ((uint64_t)addr + t->bytes > smem_desc_window())
		return kg_fail(err, "addr=0x%x: the %u-byte tile ends past 256 KiB "
		               "(docs/hardware.md, \"Shared-memory descriptor (sm_100)\")", addr, t->bytes);
	d.addr = addr;
	d.lbo = t->lbo;
	d.sbo = t->sbo;
	d.swz = t->swz;
	return desc_encode(out, arch, &d, err);
}

int
desc_for_tile_mn(uint64_t *out, DescArch arch, const TileLayout *t, uint32_t addr, KgErr *err)
{
	TileLayout v = *t;

	if (t->major != MAJOR_K || t->swz == SWZ_NONE)
		return kg_fail(err, "swizzle=%s: only a K-major swizzled tile is read MN-major "
		               "through its slices (docs/hardware.md, \"TMA swizzle\")",
		               swizzle_name(t->swz));
	v.lbo = t->slice_bytes;
	v.sbo = t->sbo;
	return desc_for_tile(out, arch, &v, addr, err);
}

/* ---- instruction descriptor (docs/hardware.md, "Instruction descriptor") ---- */

typedef struct Code {
	DType t;
	int code;
} Code;

#define CODE_END {DT_COUNT, -1}

/* Field codes of PTX Tables 42-44 (docs/hardware.md, "Instruction descriptor" and
 * "Block-scaled instruction descriptor"). */
static const Code f16_ab[] = {{DT_F16, 0}, {DT_BF16, 1}, CODE_END};
static const Code tf32_ab[] = {{DT_TF32, 2}, CODE_END};
static const Code f8_ab[] = {{DT_E4M3, 0}, {DT_E5M2, 1}, {DT_E2M3, 3},
                             {DT_E3M2, 4}, {DT_E2M1, 5}, CODE_END};
static const Code i8_ab[] = {{DT_U8, 0}, {DT_S8, 1}, CODE_END};
static const Code f4_ab[] = {{DT_E2M1, 1}, CODE_END};
static const Code d_f16_f32[] = {{DT_F16, 0}, {DT_F32, 1}, CODE_END};
static const Code d_f32[] = {{DT_F32, 1}, CODE_END};
static const Code d_s32[] = {{DT_S32, 2}, CODE_END};
static const Code sc_ue8m0[] = {{DT_UE8M0, 1}, CODE_END};
static const Code sc_both[] = {{DT_UE8M0, 1}, {DT_UE4M3, 0}, CODE_END};

/* Shape classes of docs/hardware.md, "MMA shapes" (= PTX §9.7.16.2.1 Table 39). */
enum { SH_FLOAT, SH_I8, SH_BLOCK, SH_WS, SH_COUNT };

/* Legal M as a bit set: bit i = M of 32 << i. */
#define M32 1
#define M64 2
#define M128 4
#define M256 8

/* One row per shape class and cta_group (column 0 = cta_group::1).
 *  m, m_sp       legal M dense / sparse (block-scaled cta_group::2 sparse
 *                is M = 256 only)
 *  nlo,nhi,step  N in nlo..nhi in steps of step ...
 *  fine          ... or N in 8..fine step 8 (i8 cta_group::1: 8, 16, 24, 32)
 *  pow2          N must also be a power of two (.ws: 64, 128, 256)
 *  nhi_sp        upper bound of N when sparse (.ws sparse: 64, 128)
 * m == 0 marks a combination PTX calls invalid (.ws with cta_group::2).
 * Table 39 read literally: cta_group::1 takes every N step 8 for M 64 and
 * 128 alike. .ws is selected by a non-zero max-shift, the field that only
 * .ws reads. */
static const struct ShapeRule {
	int m, m_sp;
	int nlo, nhi, step;
	int fine;
	int pow2;
	int nhi_sp;
} shapes[SH_COUNT][2] = {
	[SH_FLOAT] = {
		{M64 | M128, M64 | M128, 8, 256, 8, 0, 0, 256},
		{M128 | M256, M128 | M256, 16, 256, 16, 0, 0, 256},
	},
	[SH_I8] = {
		{M64 | M128, M64 | M128, 32, 256, 16, 32, 0, 256},
		{M128 | M256, M128 | M256, 32, 256, 32, 0, 0, 256},
	},
	[SH_BLOCK] = {
		{M128, M128, 8, 256, 8, 0, 0, 256},
		{M128 | M256, M256, 16, 256, 16, 0, 0, 256},
	},
	[SH_WS] = {
		{M32 | M64 | M128, M32 | M64 | M128, 64, 256, 64, 0, 1, 128},
		{0, 0, 0, 0, 0, 0, 0, 0},
	},
};

/* docs/hardware.md, "Instruction descriptor" (PTX Table 42). */
static const FieldSpec idesc_dense_fields[] = {
	{0, 1, "sparse-sel", FK_NUM},
	{2, 2, "sparse", FK_BOOL},
	{3, 3, "saturate", FK_BOOL},
	{4, 5, "d", FK_DTYPE},
	{6, 6, "reserved", FK_ZERO},
	{7, 9, "a", FK_ATYPE},
	{10, 12, "b", FK_BTYPE},
	{13, 13, "neg-a", FK_BOOL},
	{14, 14, "neg-b", FK_BOOL},
	{15, 15, "a-major", FK_MAJOR},
	{16, 16, "b-major", FK_MAJOR},
	{17, 22, "n", FK_N},
	{23, 23, "reserved", FK_ZERO},
	{24, 28, "m", FK_M4},
	{29, 29, "reserved", FK_ZERO},
	{30, 31, "max-shift", FK_SHIFT},
};

/* docs/hardware.md, "Block-scaled instruction descriptor" (PTX Table 43). */
static const FieldSpec idesc_mxf8_fields[] = {
	{0, 1, "reserved", FK_ZERO},
	{2, 2, "sparse", FK_BOOL},
	{3, 3, "reserved", FK_ZERO},
	{4, 5, "sfb-id", FK_NUM},
	{6, 6, "reserved", FK_ZERO},
	{7, 9, "a", FK_ATYPE},
	{10, 12, "b", FK_BTYPE},
	{13, 13, "neg-a", FK_BOOL},
	{14, 14, "neg-b", FK_BOOL},
	{15, 15, "a-major", FK_MAJOR},
	{16, 16, "b-major", FK_MAJOR},
	{17, 22, "n", FK_N},
	{23, 23, "scale", FK_SCALE},
	{24, 26, "reserved", FK_ZERO},
	{27, 28, "m", FK_M7},
	{29, 30, "sfa-id", FK_NUM},
	{31, 31, "reserved", FK_ZERO},
};

/* docs/hardware.md, "Block-scaled instruction descriptor" (PTX Table 44): B type is 2
 * bits, bit 31 is K. */
static const FieldSpec idesc_mxf4_fields[] = {
	{0, 1, "reserved", FK_ZERO},
	{2, 2, "sparse", FK_BOOL},
	{3, 3, "reserved", FK_ZERO},
	{4, 5, "sfb-id", FK_NUM},
	{6, 6, "reserved", FK_ZERO},
	{7, 9, "a", FK_ATYPE},
	{10, 11, "b", FK_BTYPE},
	{12, 12, "reserved", FK_ZERO},
	{13, 13, "neg-a", FK_BOOL},
	{14, 14, "neg-b", FK_BOOL},
	{15, 15, "a-major", FK_MAJOR},
	{16, 16, "b-major", FK_MAJOR},
	{17, 22, "n", FK_N},
	{23, 23, "scale", FK_SCALE},
	{24, 26, "reserved", FK_ZERO},
	{27, 28, "m", FK_M7},
	{29, 30, "sfa-id", FK_NUM},
	{31, 31, "k96", FK_K96},
};

/* One row per kind. Columns:
 *  ab, d, scale  legal operand / accumulator / scale-factor types with
 *                their codes; d == NULL: block-scaled, always f32 (docs/hardware.md,
 * "Block-scaled instruction descriptor")
 *  shape         row of shapes[]
 *  transpose     bits 15/16 may be set (docs/hardware.md, "Operand major-ness", PTX Table 49)
 *  negate        bits 13/14 may be set (PTX Table 49: not i8)
 *  sf_step       SF ids are 0..3 in this step: 1X data 1, 2X/4X data 2
 * (docs/hardware.md, "Block-scaled instruction descriptor")
 *  same_ab       A and B must be one type (f16/bf16 and tf32 pairs; e2m1 x e2m1)
 *  has_k96       bit 31 is the K = 96 switch (PTX Table 44)
 *  fields        the kind's bit layout, for idesc_fields */
static const struct {
	const char *name;
	const Code *ab, *d, *scale;
	int shape;
	int transpose, negate;
	int sf_step;
	int same_ab;
	int has_k96;
	const FieldSpec *fields;
	int nfields;
} kinds[IK_COUNT] = {
#define F(a) a, (int)(sizeof a / sizeof a[0])
	[IK_F16] = {"f16", f16_ab, d_f16_f32, NULL, SH_FLOAT, 1, 1, 0, 1, 0,
	            F(idesc_dense_fields)},
	[IK_TF32] = {"tf32", tf32_ab, d_f32, NULL, SH_FLOAT, 1, 1, 0, 1, 0,
	             F(idesc_dense_fields)},
	[IK_F8F6F4] = {"f8f6f4", f8_ab, d_f16_f32, NULL, SH_FLOAT, 1, 1, 0, 0, 0,
	               F(idesc_dense_fields)},
	[IK_I8] = {"i8", i8_ab, d_s32, NULL, SH_I8, 1, 0, 0, 0, 0,
	           F(idesc_dense_fields)},
	[IK_MXF8F6F4] = {"mxf8f6f4", f8_ab, NULL, sc_ue8m0, SH_BLOCK, 1, 1, 1, 0, 0,
	                 F(idesc_mxf8_fields)},
	[IK_MXF4] = {"mxf4", f4_ab, NULL, sc_ue8m0, SH_BLOCK, 0, 1, 2, 1, 1,
	             F(idesc_mxf4_fields)},
	[IK_MXF4NVF4] = {"mxf4nvf4", f4_ab, NULL, sc_both, SH_BLOCK, 0, 1, 2, 1, 1,
	                 F(idesc_mxf4_fields)},
#undef F
};

const char *
idesc_kind_name(IdescKind k)
{
	return (unsigned)k < IK_COUNT ? kinds[k].name : "?";
}

int
idesc_kind_parse(const char *s, IdescKind *out)
{
	if (strncmp(s, "kind::", 6) == 0)
		s += 6;
	for (int i = 0; i < IK_COUNT; i++)
		if (strcmp(s, kinds[i].name) == 0) {
			*out = (IdescKind)i;
			return 0;
		}
	return -1;
}

static int
code_of(const Code *c, DType t)
{
	for (; c->t != DT_COUNT; c++)
		if (c->t == t)
			return c->code;
	return -1;
}

static const char *
name_of(const Code *c, int code)
{
	for (; c && c->t != DT_COUNT; c++)
		if (c->code == code)
			return dtype_name(c->t);
	return NULL;
}

static const char *
list_types(char *buf, size_t n, const Code *c)
{
	size_t len = 0;

	buf[0] = 0;
	for (; c->t != DT_COUNT && len < n; c++)
		len += (size_t)snprintf(buf + len, n - len, "%s%s",
		                        len ? ", " : "", dtype_name(c->t));
	return buf;
}

static const char *
list_m(char *buf, size_t n, int mask)
{
	size_t len = 0;

	buf[0] = 0;
	for (int i = 0; i < 4 && len < n; i++)
		if (mask & 1 << i)
			len += (size_t)snprintf(buf + len, n - len, "%s%d",
			                        len ? ", " : "", 32 << i);
	return buf;
}

static const char *
list_n(char *buf, size_t n, const struct ShapeRule *r, int sparse)
{
	int hi = sparse ? r->nhi_sp : r->nhi;
	size_t len = 0;

	if (r->pow2) {
		buf[0] = 0;
		for (int v = r->nlo; v <= hi && len < n; v *= 2)
			len += (size_t)snprintf(buf + len, n - len, "%s%d",
			                        len ? ", " : "{", v);
		if (len < n)
			snprintf(buf + len, n - len, "}");
	} else if (r->fine) {
		snprintf(buf, n, "8..%d step 8 or %d..%d step %d", r->fine, r->nlo,
		         hi, r->step);
	} else {
		snprintf(buf, n, "%d..%d step %d", r->nlo, hi, r->step);
	}
	return buf;
}

static int
n_legal(const struct ShapeRule *r, int n, int sparse)
{
	int hi = sparse ? r->nhi_sp : r->nhi;

	if (r->fine && n >= 8 && n <= r->fine && n % 8 == 0)
		return 1;
	if (n < r->nlo || n > hi || (n - r->nlo) % r->step)
		return 0;
	return !r->pow2 || (n & (n - 1)) == 0;
}

static int
m_legal(int mask, int m)
{
	for (int i = 0; i < 4; i++)
		if (mask & 1 << i && m == 32 << i)
			return 1;
	return 0;
}

/* 0/1 switches and small ranged fields, by CLI name. */
static const struct {
	const char *name;
	size_t off;
	int max;
} ranged[] = {
	{"a-major", offsetof(Idesc, a_major_mn), 1},
	{"b-major", offsetof(Idesc, b_major_mn), 1},
	{"neg-a", offsetof(Idesc, neg_a), 1},
	{"neg-b", offsetof(Idesc, neg_b), 1},
	{"sparse", offsetof(Idesc, sparse), 1},
	{"sparse-sel", offsetof(Idesc, sparse_sel), 3},
	{"saturate", offsetof(Idesc, saturate), 1},
	{"max-shift", offsetof(Idesc, max_shift), 3},
	{"sfa-id", offsetof(Idesc, sfa_id), 3},
	{"sfb-id", offsetof(Idesc, sfb_id), 3},
	{"k96", offsetof(Idesc, k96), 1},
};

static int
check_ranges(const Idesc *d, KgErr *err)
{
	for (size_t i = 0; i < sizeof ranged / sizeof ranged[0]; i++) {
		int v;

		memcpy(&v, (const char *)d + ranged[i].off, sizeof v);
		if (v < 0 || v > ranged[i].max)
			return kg_fail(err, "%s=%d: must be 0..%d", ranged[i].name, v,
			               ranged[i].max);
	}
	return 0;
}

static int
check_types(const Idesc *d, int *ac, int *bc, int *dc, int *sc, KgErr *err)
{
	const char *kn = kinds[d->kind].name;
	char list[96];

	*ac = code_of(kinds[d->kind].ab, d->a);
	*bc = code_of(kinds[d->kind].ab, d->b);
	if (*ac < 0)
		return kg_fail(err, "a=%s: kind::%s takes A of %s (docs/hardware.md, \"Instruction descriptor\" "
		               "and \"Block-scaled instruction descriptor\")", dtype_name(d->a), kn,
		               list_types(list, sizeof list, kinds[d->kind].ab));
	if (*bc < 0)
		return kg_fail(err, "b=%s: kind::%s takes B of %s (docs/hardware.md, \"Instruction descriptor\" "
		               "and \"Block-scaled instruction descriptor\")", dtype_name(d->b), kn,
		               list_types(list, sizeof list, kinds[d->kind].ab));
	if (kinds[d->kind].same_ab && d->a != d->b)
		return kg_fail(err, "b=%s: kind::%s needs B of the same type as A (a=%s)",
		               dtype_name(d->b), kn, dtype_name(d->a));
	*dc = *sc = 0;
	if (kinds[d->kind].d) {
		*dc = code_of(kinds[d->kind].d, d->d);
		if (*dc < 0)
			return kg_fail(err, "d=%s: kind::%s accumulates in %s "
			               "(docs/hardware.md, \"Instruction descriptor\")", dtype_name(d->d), kn,
			               list_types(list, sizeof list, kinds[d->kind].d));
		/* Table 39 pairs D f16 with f16 operands only. */
		if (d->kind == IK_F16 && d->d == DT_F16 && d->a == DT_BF16)
			return kg_fail(err, "d=%s: kind::f16 with bf16 operands accumulates "
			               "in f32 only (PTX Table 39)", dtype_name(d->d));
	}
	if (kinds[d->kind].scale) {
		*sc = code_of(kinds[d->kind].scale, d->scale);
		if (*sc < 0)
			return kg_fail(err, "scale=%s: kind::%s takes scale factors of %s "
			               "(docs/hardware.md, \"Block-scaled instruction descriptor\")", dtype_name(d->scale), kn,
			               list_types(list, sizeof list, kinds[d->kind].scale));
	}
	return 0;
}

/* Fields that exist only in one of the two descriptor formats. */
static int
check_format_fields(const Idesc *d, KgErr *err)
{
	const char *kn = kinds[d->kind].name;

	if (kinds[d->kind].scale) {
		if (d->sparse_sel)
			return kg_fail(err, "sparse-sel=%d: kind::%s has no sparsity "
			               "selector (bits 0-1 reserved, docs/hardware.md, \"Block-scaled instruction descriptor\")",
			               d->sparse_sel, kn);
		if (d->saturate)
			return kg_fail(err, "saturate=%d: only kind::i8 saturates",
			               d->saturate);
		if (d->max_shift)
			return kg_fail(err, "max-shift=%d: block-scaled kinds have no .ws "
			               "variant (PTX Table 39)", d->max_shift);
		if (d->sfa_id % kinds[d->kind].sf_step)
			return kg_fail(err, "sfa-id=%d: kind::%s takes 0 or 2 "
			               "(docs/hardware.md, \"Block-scaled instruction descriptor\")", d->sfa_id, kn);
		if (d->sfb_id % kinds[d->kind].sf_step)
			return kg_fail(err, "sfb-id=%d: kind::%s takes 0 or 2 "
			               "(docs/hardware.md, \"Block-scaled instruction descriptor\")", d->sfb_id, kn);
		if (d->k96 && !kinds[d->kind].has_k96)
			return kg_fail(err, "k96=%d: only kind::mxf4 and kind::mxf4nvf4 "
			               "have a K = 96 form (docs/hardware.md, \"Block-scaled instruction descriptor\")", d->k96);
		return 0;
	}
	if (d->sfa_id)
		return kg_fail(err, "sfa-id=%d: only block-scaled kinds have "
		               "scale-factor ids", d->sfa_id);
	if (d->sfb_id)
		return kg_fail(err, "sfb-id=%d: only block-scaled kinds have "
		               "scale-factor ids", d->sfb_id);
	if (d->k96)
		return kg_fail(err, "k96=%d: only kind::mxf4 and kind::mxf4nvf4 have a "
		               "K = 96 form (docs/hardware.md, \"Block-scaled instruction descriptor\")", d->k96);
	if (d->saturate && d->kind != IK_I8)
		return kg_fail(err, "saturate=%d: only kind::i8 saturates "
		               "(docs/hardware.md, \"Instruction descriptor\")", d->saturate);
	if (d->sparse_sel && !d->sparse)
		return kg_fail(err, "sparse-sel=%d: selects metadata of a sparse MMA; "
		               "sparse=0", d->sparse_sel);
	return 0;
}

static int
check_shape(const Idesc *d, KgErr *err)
{
	const char *kn = kinds[d->kind].name;
	const char *sp = d->sparse ? " sparse" : "";
	const struct ShapeRule *r;
	char list[64];
	int cls;

	if (d->cta_group != 1 && d->cta_group != 2)
		return kg_fail(err, "cta-group=%d: must be 1 or 2", d->cta_group);
	cls = d->max_shift ? SH_WS : kinds[d->kind].shape;
	r = &shapes[cls][d->cta_group - 1];
	if (!r->m)
		return kg_fail(err, "cta-group=%d: max-shift=%d selects .ws, which is "
		               "cta_group::1 only (PTX Table 39)", d->cta_group,
		               d->max_shift);
	if (!m_legal(d->sparse ? r->m_sp : r->m, d->m))
		return kg_fail(err, "m=%d: kind::%s%s%s with cta_group::%d needs M in "
		               "{%s} (docs/hardware.md, \"MMA shapes\")", d->m, kn,
		               cls == SH_WS ? ".ws" : "", sp, d->cta_group,
		               list_m(list, sizeof list, d->sparse ? r->m_sp : r->m));
	if (!n_legal(r, d->n, d->sparse))
		return kg_fail(err, "n=%d: kind::%s%s%s with cta_group::%d needs N in "
		               "%s (docs/hardware.md, \"MMA shapes\")", d->n, kn,
		               cls == SH_WS ? ".ws" : "", sp, d->cta_group,
		               list_n(list, sizeof list, r, d->sparse));
	/* M = 128 on one CTA takes N in steps of 16 (PTX ISA §9.7.16.10.1,
	 * valid shapes; runtime/emu/tc_idesc.c holds the same rule) */
	if (cls == SH_FLOAT && d->cta_group == 1 && d->m == 128 && d->n % 16)
		return kg_fail(err, "n=%d: kind::%s with cta_group::1 and M=128 needs N in "
		               "16..256 step 16 (docs/emu-idesc.md)", d->n, kn);
	/* PTX Table 50: 8-bit transposed B narrows N. */
	if (d->b_major_mn && dtype_bits(d->b) == 8
	    && d->n % (16 * d->cta_group))
		return kg_fail(err, "n=%d: 8-bit MN-major B with cta_group::%d needs "
		               "N in %d..256 step %d (PTX Table 50)", d->n, d->cta_group,
		               16 * d->cta_group, 16 * d->cta_group);
	if (d->k96 && (d->cta_group != 2 || d->m != 256 || d->sparse))
		return kg_fail(err, "k96=1: K = 96 exists for dense cta_group::2 M=256 "
		               "only (PTX Table 39; sm_103a)");
	return 0;
}

/* docs/hardware.md, "Operand major-ness" (PTX Tables 49, 52). tf32 transposes only
 * through 128B_BASE32B and every other kind never through it; that pairs idesc with the smem
 * descriptor, so it is the caller's check. */
static int
check_major_negate(const Idesc *d, KgErr *err)
{
	const char *kn = kinds[d->kind].name;

	if (!kinds[d->kind].transpose && d->a_major_mn)
		return kg_fail(err, "a-major=MN: kind::%s reads K-major operands only "
		               "(docs/hardware.md, \"Operand major-ness\")", kn);
	if (!kinds[d->kind].transpose && d->b_major_mn)
		return kg_fail(err, "b-major=MN: kind::%s reads K-major operands only "
		               "(docs/hardware.md, \"Operand major-ness\")", kn);
	if (d->a_major_mn && dtype_bits(d->a) < 8)
		return kg_fail(err, "a-major=MN: %d-bit A (%s) must be K-major "
		               "(docs/hardware.md, \"Operand major-ness\")", dtype_bits(d->a),
		               dtype_name(d->a));
	if (d->b_major_mn && dtype_bits(d->b) < 8)
		return kg_fail(err, "b-major=MN: %d-bit B (%s) must be K-major "
		               "(docs/hardware.md, \"Operand major-ness\")", dtype_bits(d->b),
		               dtype_name(d->b));
	if (!kinds[d->kind].negate && d->neg_a)
		return kg_fail(err, "neg-a=1: kind::%s cannot negate (PTX Table 49)", kn);
	if (!kinds[d->kind].negate && d->neg_b)
		return kg_fail(err, "neg-b=1: kind::%s cannot negate (PTX Table 49)", kn);
	return 0;
}

int
idesc_encode(uint32_t *out, const Idesc *d, KgErr *err)
{
	int ac = 0, bc = 0, dc = 0, sc = 0;
	uint32_t v;

	if ((unsigned)d->kind >= IK_COUNT)
		return kg_fail(err, "kind=%d: not a tcgen05 MMA kind", (int)d->kind);
	if (check_ranges(d, err) || check_types(d, &ac, &bc, &dc, &sc, err)
	    || check_format_fields(d, err) || check_shape(d, err)
	    || check_major_negate(d, err))
		return -1;
	v = (uint32_t)d->sparse << 2 | (uint32_t)ac << 7 | (uint32_t)bc << 10
	    | (uint32_t)d->neg_a << 13 | (uint32_t)d->neg_b << 14
	    | (uint32_t)d->a_major_mn << 15 | (uint32_t)d->b_major_mn << 16
	    | (uint32_t)(d->n >> 3) << 17;
	if (kinds[d->kind].scale)  /* docs/hardware.md, "Block-scaled instruction descriptor" */
		v |= (uint32_t)d->sfb_id << 4 | (uint32_t)sc << 23
		     | (uint32_t)(d->m >> 7) << 27 | (uint32_t)d->sfa_id << 29
		     | (uint32_t)d->k96 << 31;
	else                       /* docs/hardware.md, "Instruction descriptor" */
		v |= (uint32_t)d->sparse_sel | (uint32_t)d->saturate << 3
		     | (uint32_t)dc << 4 | (uint32_t)(d->m >> 4) << 24
		     | (uint32_t)d->max_shift << 30;
	*out = v;
	return 0;
}

static void
type_meaning(char *buf, size_t n, const Code *c, uint64_t raw)
{
	const char *s = name_of(c, (int)raw);

	if (s)
		snprintf(buf, n, "%s", s);
	else
		snprintf(buf, n, "INVALID: no type has code %llu", (unsigned long long)raw);
}

static void
meaning(char *buf, size_t n, FieldKind k, IdescKind ik, uint64_t raw)
{
	static const char *const shift[4] = {"no shift", "max shift 8",
	                                     "max shift 16", "max shift 32"};
	const char *s;

	buf[0] = 0;
	switch (k) {
	case FK_ADDR:
		snprintf(buf, n, "addr 0x%llx", (unsigned long long)(raw << 4));
		break;
	case FK_BYTES:
		snprintf(buf, n, "%llu B", (unsigned long long)(raw << 4));
		break;
	case FK_ZERO:
		if (raw)
			snprintf(buf, n, "INVALID: must be 0");
		break;
	case FK_VERSION:
		snprintf(buf, n, raw == 1 ? "0b001 (tcgen05)" : "INVALID: must be 0b001");
		break;
	case FK_NUM:
		snprintf(buf, n, "%llu", (unsigned long long)raw);
		break;
	case FK_LBOMODE:
		snprintf(buf, n, raw ? "absolute (sm_103a only)" : "relative");
		break;
	case FK_LAYOUT100:
		s = layout100_name[raw & 7];
		snprintf(buf, n, "%s", s ? s : "INVALID layout code");
		break;
	case FK_SWZ90:
		snprintf(buf, n, "%s", swz90_name[raw & 3]);
		break;
	case FK_BOOL:
		snprintf(buf, n, raw ? "yes" : "no");
		break;
	case FK_DTYPE:
		type_meaning(buf, n, kinds[ik].d, raw);
		break;
	case FK_ATYPE:
	case FK_BTYPE:
		type_meaning(buf, n, kinds[ik].ab, raw);
		break;
	case FK_MAJOR:
		snprintf(buf, n, raw ? "MN-major (transposed)" : "K-major");
		break;
	case FK_N:
		snprintf(buf, n, "N=%llu", (unsigned long long)(raw << 3));
		break;
	case FK_M4:
		snprintf(buf, n, "M=%llu", (unsigned long long)(raw << 4));
		break;
	case FK_M7:
		snprintf(buf, n, "M=%llu", (unsigned long long)(raw << 7));
		break;
	case FK_SHIFT:
		snprintf(buf, n, "%s", shift[raw & 3]);
		break;
	case FK_SCALE:
		type_meaning(buf, n, kinds[ik].scale, raw);
		break;
	case FK_K96:
		snprintf(buf, n, raw ? "dense K=96 (sm_103a)" : "dense K=64 / sparse K=128");
		break;
	}
}

/* Fills one row per field; -1 if `max` rows do not hold them all. */
static int
fill(DescField *out, int max, const FieldSpec *f, int n, IdescKind ik,
     uint64_t v)
{
	if (n > max)
		return -1;
	for (int i = 0; i < n; i++) {
		out[i].lo = f[i].lo;
		out[i].hi = f[i].hi;
		out[i].name = f[i].name;
		out[i].raw = field(v, f[i].lo, f[i].hi);
		meaning(out[i].meaning, sizeof out[i].meaning, f[i].kind, ik,
		        out[i].raw);
	}
	return n;
}

int
desc_fields(DescField *out, int max, DescArch arch, uint64_t v)
{
	const FieldSpec *f;
	int n;

	if (arch != DESC_SM90 && arch != DESC_SM100)
		return -1;
	f = desc_spec(arch, &n);
	return fill(out, max, f, n, IK_F16, v);
}

int
idesc_fields(DescField *out, int max, IdescKind kind, uint32_t v)
{
	if ((unsigned)kind >= IK_COUNT)
		return -1;
	return fill(out, max, kinds[kind].fields, kinds[kind].nfields, kind, v);
}

int
desc_text(char *out, size_t n, DescArch arch, uint64_t v)
{
	static const char *const swz[SWZ_COUNT] = {
		[SWZ_NONE] = "swnone", [SWZ_32B] = "sw32", [SWZ_64B] = "sw64", [SWZ_128B] = "sw128",
	};
	SmemDesc d;
	KgErr err;
	int k;

	if (desc_decode(&d, arch, v, &err) < 0)
		return snprintf(out, n, "INVALID: %s", err.msg);
	k = snprintf(out, n, "%s%s lbo=%u sbo=%u", swz[d.swz], d.base32b ? " base32b" : "", d.lbo,
	             d.sbo);
	if (d.addr && k >= 0 && (size_t)k < n)
		k += snprintf(out + k, n - (size_t)k, " start=0x%x", d.addr);
	if (d.base_offset && k >= 0 && (size_t)k < n)
		k += snprintf(out + k, n - (size_t)k, " base-offset=%d", d.base_offset);
	if (d.lbo_mode && k >= 0 && (size_t)k < n)
		k += snprintf(out + k, n - (size_t)k, " lbo-absolute");
	return k;
}

int
idesc_text(char *out, size_t n, IdescKind kind, uint32_t v)
{
	/* Types and shape first, in this order, then every set flag. */
	static const FieldKind lead[] = {FK_ATYPE, FK_BTYPE, FK_DTYPE, FK_SCALE, FK_M4, FK_M7, FK_N};
	char m[64];
	size_t k = 0;

	if ((unsigned)kind >= IK_COUNT)
		return snprintf(out, n, "INVALID: kind %d", (int)kind);
#define PUT(...)                                                                 \
	do {                                                                     \
		int w_ = snprintf(out + k, n > k ? n - k : 0, __VA_ARGS__);      \
		k += w_ > 0 ? (size_t)w_ : 0;                                    \
		if (k >= n)                                                      \
			k = n ? n - 1 : 0;                                       \
	} while (0)
	out[0] = 0;
	PUT("kind::%s", kinds[kind].name);
	for (size_t l = 0; l < sizeof lead / sizeof lead[0]; l++)
		for (int i = 0; i < kinds[kind].nfields; i++) {
			const FieldSpec *f = &kinds[kind].fields[i];
			if (f->kind != lead[l])
				continue;
			meaning(m, sizeof m, f->kind, kind, field(v, f->lo, f->hi));
			if (f->kind == FK_M4 || f->kind == FK_M7 || f->kind == FK_N)
				PUT(" %s", m);
			else
				PUT(" %s=%s", f->name, m);
		}
	for (int i = 0; i < kinds[kind].nfields; i++) {
		const FieldSpec *f = &kinds[kind].fields[i];
		uint64_t raw = field(v, f->lo, f->hi);

		if (!raw)
			continue;
		switch (f->kind) {
		case FK_MAJOR:
			PUT(" %c=MN-major", f->name[0]);
			break;
		case FK_BOOL:
			PUT(" %s", f->name);
			break;
		case FK_NUM:
		case FK_SHIFT:
		case FK_K96:
		case FK_ZERO:
			meaning(m, sizeof m, f->kind, kind, raw);
			PUT(" %s=%s", f->name, m);
			break;
		default:
			break;
		}
	}
#undef PUT
	return (int)k;
}
