/* tcgen05.mma (PTX ISA §9.7.16.10; docs/hardware.md, "Instruction descriptor",
 * "tcgen05.mma", "Block-scaled tcgen05.mma" and "Accumulator layout in TMEM",
 * docs/hardware.md, "A operand in TMEM"): the dense kinds f16, tf32, f8f6f4 and i8 and
 * the block-scaled kinds mxf8f6f4, mxf4 and mxf4nvf4, A from shared memory (SS) or TMEM
 * (TS). The issue checks operands, descriptors and ordering; D is computed when the op
 * completes, from the smem and TMEM contents at that point.
 *
 * Element storage of the f8f6f4 family:
 *  - smem, kind::f8f6f4 / kind::mxf8f6f4: 8-bit types one per byte; 6- and
 *    4-bit types as 16 contiguous codes (12 or 8 bytes, lowest element in the
 *    lowest bits) followed by padding to 16 bytes (PTX ISA §9.7.16.10.4.4,
 *    the TMA .b6x16_p32 / .b4x16_p64 images of §5.5.1.1.1), so every 16-byte
 *    chunk holds 16 elements as for 8-bit types;
 *  - smem, kind::mxf4 / kind::mxf4nvf4: two E2M1 per byte, lower element in
 *    the low nibble, no padding (§9.7.16.10.4.6, docs/hardware.md, "Number formats");
 *  - TMEM A (TS), kind::f8f6f4 / mxf8f6f4: one 8-bit container per element,
 *    four per 32-bit cell (§9.7.16.10.4.3): see container_code();
 *  - TMEM A (TS), kind::mxf4 / mxf4nvf4: two E2M1 per byte (§9.7.16.10.4.5).
 *
 * Accumulation: every product of elements and scale factors is exact (at
 * most 4 significant bits each, 16 for a scaled product), is rounded once to
 * f32 (exact unless it leaves the f32 range) and added to the f32
 * accumulator in K order starting from D: the order the dense kinds use (no
 * sm_100 result was available to fit, see README). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"
#include "tc.h"

/* ---- kinds and element formats ------------------------------------------------------------- */

typedef struct KindInfo {
	const char *name;
	uint32_t K;     /* dense K of one MMA (docs/hardware.md, "MMA shapes") */
	int ebits;      /* bits per element in smem rows: K * ebits = 256 for every kind */
	int scaled;     /* block-scaled: idesc Tables 43/44 */
	int family;     /* f8f6f4 element formats (idesc codes 0, 1, 3, 4, 5) */
} KindInfo;

static const KindInfo kinds[] = {
	[KIND_F16] = {"kind::f16", 16, 16, 0, 0},
	[KIND_TF32] = {"kind::tf32", 8, 32, 0, 0},
	[KIND_F8F6F4] = {"kind::f8f6f4", 32, 8, 0, 1},
	[KIND_I8] = {"kind::i8", 32, 8, 0, 0},
	[KIND_MXF8F6F4] = {"kind::mxf8f6f4", 32, 8, 1, 1},
	[KIND_MXF4] = {"kind::mxf4", 64, 4, 1, 0},
	[KIND_MXF4NVF4] = {"kind::mxf4nvf4", 64, 4, 1, 0},
};

/* f8f6f4 element codes of the idesc (Tables 42, 43) */
enum { EF_E4M3 = 0, EF_E5M2 = 1, EF_E2M3 = 3, EF_E3M2 = 4, EF_E2M1 = 5 };

typedef struct ElemFmt {
	const char *name;
	int bits;                  /* 0: not a valid code */
	float (*dec)(uint8_t code);
} ElemFmt;

static const ElemFmt f8f6f4_fmts[8] = {
	[EF_E4M3] = {"E4M3", 8, emu_e4m3_to_f32}, [EF_E5M2] = {"E5M2", 8, emu_e5m2_to_f32},
	[EF_E2M3] = {"E2M3", 6, emu_e2m3_to_f32}, [EF_E3M2] = {"E3M2", 6, emu_e3m2_to_f32},
	[EF_E2M1] = {"E2M1", 4, emu_e2m1_to_f32},
};

/* fp6/fp4 codes in 8-bit TMEM containers (PTX ISA §9.7.16.10.4.3 Figures
 * 199-201; the same containers tcgen05.cp's .b8x16 decompression writes,
 * §9.7.16.9.1): 6-bit codes in bits 5-0 with the two MSBs zero (as §5.2.3
 * states for e2m3x2/e3m2x2 registers); E2M1 in bits 5-2, where it reads as
 * the E2M3 code of the same value (two zero mantissa LSBs, same bias). The
 * figures are not available as text: the E2M1 position is inferred. */
uint8_t
emu_tc_container(int bits, uint8_t code)
{
	return bits == 4 ? (uint8_t)((code & 0xf) << 2) : bits == 6 ? code & 0x3f : code;
}

static uint8_t
container_code(int fmt, uint8_t byte)
{
	switch (f8f6f4_fmts[fmt].bits) {
	case 6: return byte & 0x3f;
	case 4: return (uint8_t)(byte >> 2 & 0xf);
	default: return byte;
	}
}

/* ---- instruction descriptor ----------------------------------------------------------------- */

typedef struct Idesc {
	int dfmt, afmt, bfmt, nega, negb, ta, tb, sat;
	int sfa, sfb, ue8m0;      /* block-scaled */
	uint32_t M, N, K;
} Idesc;

static int
idesc_fail(char *why, size_t n, const char *fmt, ...) KRT_PRINTF(3, 4);

static int
idesc_fail(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

static int
n_check(const Idesc *d, char *why, size_t n)
{
	if (d->N < 8 || d->N > 256)
		return idesc_fail(why, n, "N = %u (bits 17-22 = %u): must be 8..256", d->N, d->N >> 3);
	return 0;
}

/* fp6/fp4 operands are K-major only (PTX ISA §9.7.16.10.3 Table 52,
 * docs/hardware.md, "Operand major-ness") */
static int
f8f6f4_check(const Idesc *d, const char *kind, char *why, size_t n)
{
	const ElemFmt *a = &f8f6f4_fmts[d->afmt], *b = &f8f6f4_fmts[d->bfmt];
	if (!a->bits || !b->bits)
		return idesc_fail(why, n, "%s A/B type (bits 7-9 = %d, 10-12 = %d) must be E4M3 (0), "
		                  "E5M2 (1), E2M3 (3), E3M2 (4) or E2M1 (5)", kind, d->afmt, d->bfmt);
	if ((d->ta && a->bits < 8) || (d->tb && b->bits < 8))
		return idesc_fail(why, n, "%s: transposed (MN-major) %s operand of type %s: 6- and 4-bit "
		                  "operands must be K-major (docs/hardware.md, \"Operand major-ness\")", kind,
		                  d->ta && a->bits < 8 ? "A" : "B", d->ta && a->bits < 8 ? a->name : b->name);
	return 0;
}

/* Table 42: kind::f16, tf32, f8f6f4, i8 */
static int
idesc_dense(uint32_t v, int kind, Idesc *d, char *why, size_t n)
{
	d->sat = (int)(v >> 3 & 1);
	d->dfmt = (int)(v >> 4 & 3);
	d->afmt = (int)(v >> 7 & 7);
	d->bfmt = (int)(v >> 10 & 7);
	d->nega = (int)(v >> 13 & 1);
	d->negb = (int)(v >> 14 & 1);
	d->ta = (int)(v >> 15 & 1);
	d->tb = (int)(v >> 16 & 1);
	d->N = (v >> 17 & 0x3f) << 3;
	d->M = (v >> 24 & 0x1f) << 4;
	d->K = kinds[kind].K;
	if (v & 7)
		return idesc_fail(why, n, "sparsity bits 0-2 are set (0x%x): sparse MMAs are not "
		                  "supported", v & 7);
	if (v & (1u << 6 | 1u << 23 | 1u << 29))
		return idesc_fail(why, n, "reserved bits 6/23/29 are set");
	if (v >> 30)
		return idesc_fail(why, n, "bits 30-31 (B reuse shift) are only valid for .ws");
	if (d->M != 64 && d->M != 128 && d->M != 256)
		return idesc_fail(why, n, "M = %u (bits 24-28 = %u): M is 64, 128 or (cta_group::2) 256",
		                  d->M, d->M >> 4);
	if (n_check(d, why, n))
		return -1;
	switch (kind) {
	case KIND_F16:
		if (d->afmt > 1 || d->bfmt > 1 || d->dfmt > 1)
			return idesc_fail(why, n, "kind::f16 takes A/B F16 (0) or BF16 (1) and D F16 (0) or "
			                  "F32 (1); got A %d, B %d, D %d", d->afmt, d->bfmt, d->dfmt);
		return 0;
	case KIND_TF32:
		if (d->afmt != 2 || d->bfmt != 2 || d->dfmt != 1)
			return idesc_fail(why, n, "kind::tf32 takes A/B TF32 (2) and D F32 (1)");
		return 0;
	case KIND_F8F6F4:
		if (d->dfmt > 1)
			return idesc_fail(why, n, "kind::f8f6f4 takes D F16 (0) or F32 (1); got D %d (bits "
			                  "4-5)", d->dfmt);
		return f8f6f4_check(d, "kind::f8f6f4", why, n);
	default:
		if (d->afmt > 1 || d->bfmt > 1 || d->dfmt != 2)
			return idesc_fail(why, n, "kind::i8 takes U8 (0) / S8 (1) inputs and D S32 (2)");
		return 0;
	}
}

/* Which scale-factor IDs a scale vector size allows (PTX ISA §9.7.16.10.7.2,
 * §9.7.16.10.7.3): 1X a byte of the TMEM word, 2X a half-word, 4X the word. */
static const struct {
	unsigned ids;      /* bit i: ID i allowed */
	const char *text;
} sf_ids[5] = {
	[1] = {0xf, "0..3 (the byte of the TMEM word)"},
	[2] = {0x5, "0 or 2 (the half-word of the TMEM word)"},
	[4] = {0x1, "0 (the whole TMEM word)"},
};

static int
sf_id_check(const char *which, const char *bits, int id, int vec, char *why, size_t n)
{
	if (sf_ids[vec].ids >> id & 1)
		return 0;
	return idesc_fail(why, n, "%s scale-factor ID (bits %s) = %d, but .scale_vec::%dX takes %s "
	                  "(PTX ISA §9.7.16.10.7.2-3)", which, bits, id, vec, sf_ids[vec].text);
}

/* Tables 43 (mxf8f6f4) and 44 (mxf4, mxf4nvf4) */
static int
idesc_scaled(uint32_t v, int kind, int vec, Idesc *d, char *why, size_t n)
{
	int mxf4 = kind != KIND_MXF8F6F4;
	d->dfmt = 1;
	d->sfb = (int)(v >> 4 & 3);
	d->afmt = (int)(v >> 7 & 7);
	d->bfmt = (int)(v >> 10 & (mxf4 ? 3 : 7));
	d->nega = (int)(v >> 13 & 1);
	d->negb = (int)(v >> 14 & 1);
	d->ta = (int)(v >> 15 & 1);
	d->tb = (int)(v >> 16 & 1);
	d->N = (v >> 17 & 0x3f) << 3;
	d->ue8m0 = (int)(v >> 23 & 1);
	d->M = (v >> 27 & 3) << 7; /* 128 or (cta_group::2) 256: tc_idesc.c */
	d->sfa = (int)(v >> 29 & 3);
	d->K = kinds[kind].K;
	uint32_t reserved = 3u | 1u << 3 | 1u << 6 | 7u << 24 | (mxf4 ? 1u << 12 : 1u << 31);
	if (v & 4)
		return idesc_fail(why, n, "bit 2 (sparsity) is set: sparse MMAs are not supported");
	if (v & reserved)
		return idesc_fail(why, n, "reserved bits are set (0x%08x; Table %d)", v & reserved,
		                  mxf4 ? 44 : 43);
	if (mxf4 && v >> 31)
		return idesc_fail(why, n, "bit 31 (K = 96) is set: K = 96 is a cta_group::2, M = 256 "
		                  "shape (docs/hardware.md, \"MMA shapes\")");
	if (n_check(d, why, n) || sf_id_check("A", "29-30", d->sfa, vec, why, n) ||
	    sf_id_check("B", "4-5", d->sfb, vec, why, n))
		return -1;
	if (!d->ue8m0 && (kind != KIND_MXF4NVF4 || vec != 4))
		return idesc_fail(why, n, "scale type (bit 23) = UE4M3 (0): only kind::mxf4nvf4 with "
		                  ".scale_vec::4X / .block16 takes UE4M3 scales; use UE8M0 (1) "
		                  "(PTX ISA §9.7.16.10.7.1 Table 55)");
	if (!mxf4)
		return f8f6f4_check(d, "kind::mxf8f6f4", why, n);
	if (d->afmt != 1 || d->bfmt != 1)
		return idesc_fail(why, n, "%s A/B type (bits 7-9 = %d, 10-11 = %d) must be E2M1 (1)",
		                  kinds[kind].name, d->afmt, d->bfmt);
	if (d->ta || d->tb)
		return idesc_fail(why, n, "%s operands cannot be transposed (bits 15/16 must be 0, "
		                  "docs/hardware.md, \"Operand major-ness\")", kinds[kind].name);
	return 0;
}

/* ---- load-time checks ------------------------------------------------------------------------ */

/* .blockN resolves by kind (PTX ISA §9.7.16.10.7.1): block32 is 1X for
 * mxf8f6f4 and 2X for mxf4/mxf4nvf4, block16 is 4X; without a qualifier
 * mxf8f6f4 is 1X and mxf4 2X, mxf4nvf4 must name one (ptxas agrees). */
static int
scale_vec_resolve(EmuInsn *in, EmuParse *p)
{
	int kind = (int)in->aux[0];
	uint32_t blk = in->aux[3], vec = in->aux[1];
	uint32_t from_blk = blk == 32 ? (kind == KIND_MXF8F6F4 ? 1 : 2) : blk == 16 ? 4 : 0;
	if (vec && from_blk && vec != from_blk)
		return emu_parse_fail(p, "tcgen05.mma: .block%u and .scale_vec::%uX disagree", blk, vec);
	if (!vec)
		vec = from_blk ? from_blk : kind == KIND_MXF8F6F4 ? 1 : kind == KIND_MXF4 ? 2 : 0;
	if (!vec)
		return emu_parse_fail(p, "tcgen05.mma.kind::mxf4nvf4 needs .scale_vec::2X/4X or "
		                      ".block32/.block16");
	unsigned ok = kind == KIND_MXF8F6F4 ? 1u << 1 : kind == KIND_MXF4 ? 1u << 2 : 1u << 2 | 1u << 4;
	if (!(ok >> vec & 1))
		return emu_parse_fail(p, "tcgen05.mma.%s cannot take %uX scale vectors (%s): mxf8f6f4 "
		                      "takes 1X/block32, mxf4 2X/block32, mxf4nvf4 2X/block32 or "
		                      "4X/block16 (Table 55)", kinds[kind].name, vec,
		                      blk ? (blk == 16 ? ".block16" : ".block32") : ".scale_vec");
	in->aux[1] = vec;
	return 0;
}

int
emu_chk_tc_mma(EmuInsn *in, EmuParse *p)
{
	int kind = (int)in->aux[0];
	if (!kind)
		return emu_parse_fail(p, "tcgen05.mma needs a .kind");
	if (!in->aux[TC_GROUP])
		return emu_parse_fail(p, "tcgen05.mma needs .cta_group::1 or .cta_group::2");
	if (in->aux[TC_GROUP] == 2 && kinds[kind].scaled)
		return emu_parse_fail(p, "block-scaled tcgen05.mma.cta_group::2 is not supported by the "
		                      "emulator yet");
	if (!kinds[kind].scaled) {
		if (in->aux[2] || in->aux[1] || in->aux[3])
			return emu_parse_fail(p, "tcgen05.mma.%s cannot take .block_scale / .scale_vec / "
			                      ".blockN: only the mx kinds are block-scaled",
			                      kinds[kind].name);
		return 0;
	}
	if (!in->aux[2])
		return emu_parse_fail(p, "tcgen05.mma.%s needs .block_scale", kinds[kind].name);
	if (scale_vec_resolve(in, p))
		return -1;
	if (in->nop != 7 || emu_opnd_kind(in, p, 4) != OPK_MEM || emu_opnd_kind(in, p, 5) != OPK_MEM)
		return emu_parse_fail(p, "block-scaled tcgen05.mma takes [d-tmem], a-desc or [a-tmem], "
		                      "b-desc, idesc, [scale-A-tmem], [scale-B-tmem], enable-input-d "
		                      "(docs/hardware.md, \"Block-scaled tcgen05.mma\")");
	return 0;
}

/* ---- issue ------------------------------------------------------------------------------------ */

typedef struct MmaOp {
	Idesc id;
	int kind;
	int vec;             /* scale factors per row and MMA, 0 unscaled */
	uint32_t dt, at;     /* TMEM addresses (at: TS form) */
	uint32_t sfa, sfb;   /* scale-factor TMEM addresses */
	int ts;
	uint64_t adesc, bdesc;
	int enable;
	int scale_shift;     /* scale-input-d, -1 none */
	uint32_t mask[4];    /* disable-output-lane */
	uint32_t *chunks;
	int nchunks;
	int pair;            /* cta_group::2: rank of the pair's first CTA + 1, 0 for ::1 */
	uint32_t *pchunks;   /* cta_group::2: the smem chunks it reads in the second CTA */
	int npchunks;
} MmaOp;

/* TMEM lane of row r of D (docs/hardware.md, "Accumulator layout in TMEM"): M=128 lane r; M=64
 * layout F: lane 32(r/16) + r%16 + the address's lane offset (0 or 16). */
static uint32_t
d_lane(uint32_t M, uint32_t lane0, uint32_t r)
{
	return M == 128 ? r : 32 * (r / 16) + r % 16 + lane0;
}

static int
tmem_operand(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, uint32_t *out)
{
	uint64_t v;
	if (emu_addr(c, t, in, emu_opnd(c, in, i), &v))
		return EMU_STOP;
	*out = (uint32_t)v;
	return 0;
}

/* disable-output-lane {m0..m3}, enable-input-d {, scale-input-d} */
static int
dense_tail(EmuCta *c, EmuThread *t, const EmuInsn *in, MmaOp *op)
{
	uint64_t v;
	int i = 4;
	if (i < in->nop && emu_opnd(c, in, i)->kind == OPK_VEC) {
		const EmuOperand *m = emu_opnd(c, in, i);
		if (m->nsub != 4)
			return emu_fault(c, t, in, "disable-output-lane takes 4 registers for cta_group::1");
		for (int k = 0; k < 4; k++) {
			if (emu_get(c, t, in, emu_sub(c, m, k), &v))
				return EMU_STOP;
			op->mask[k] = (uint32_t)v;
		}
		i++;
	}
	if (i >= in->nop)
		return emu_fault(c, t, in, "tcgen05.mma: missing enable-input-d");
	if (emu_geti(c, t, in, i++, &v))
		return EMU_STOP;
	op->enable = (int)(v & 1);
	if (i < in->nop) {
		if (emu_geti(c, t, in, i++, &v))
			return EMU_STOP;
		if (op->kind != KIND_F16 && op->kind != KIND_TF32)
			return emu_fault(c, t, in, "scale-input-d is only valid for kind::f16 and kind::tf32");
		if (v > 15)
			return emu_fault(c, t, in, "scale-input-d %" PRIu64 " is not in 0..15", v);
		op->scale_shift = (int)v;
	}
	if (i != in->nop)
		return emu_fault(c, t, in, "tcgen05.mma: unexpected operands");
	return 0;
}

/* [scale-A-tmem], [scale-B-tmem], enable-input-d (docs/hardware.md, "Block-scaled tcgen05.mma") */
static int
scaled_tail(EmuCta *c, EmuThread *t, const EmuInsn *in, MmaOp *op)
{
	uint64_t v;
	if (tmem_operand(c, t, in, 4, &op->sfa) || tmem_operand(c, t, in, 5, &op->sfb) ||
	    emu_geti(c, t, in, 6, &v))
		return EMU_STOP;
	op->enable = (int)(v & 1);
	return 0;
}

static int
mma_operands(EmuCta *c, EmuThread *t, const EmuInsn *in, MmaOp *op, uint32_t *idesc)
{
	uint64_t v;
	op->kind = (int)in->aux[0];
	op->vec = kinds[op->kind].scaled ? (int)in->aux[1] : 0;
	op->scale_shift = -1;
	if (tmem_operand(c, t, in, 0, &op->dt))
		return EMU_STOP;
	const EmuOperand *o = emu_opnd(c, in, 1);
	op->ts = o->kind == OPK_MEM;
	if (op->ts ? tmem_operand(c, t, in, 1, &op->at) : emu_get(c, t, in, o, &op->adesc))
		return EMU_STOP;
	if (emu_geti(c, t, in, 2, &op->bdesc) || emu_geti(c, t, in, 3, &v))
		return EMU_STOP;
	*idesc = (uint32_t)v;
	return op->vec ? scaled_tail(c, t, in, op) : dense_tail(c, t, in, op);
}

static int
idesc_decode(uint32_t v, int kind, int vec, int ts, int group, Idesc *d, char *why, size_t n)
{
	int rc = vec ? idesc_scaled(v, kind, vec, d, why, n) : idesc_dense(v, kind, d, why, n);
	if (rc)
		return rc;
	EmuIdescFields f = {d->afmt, d->bfmt, d->dfmt, d->nega, d->negb, d->ta, d->M, d->N, group};
	return emu_tc_idesc_rules(kind, ts, &f, why, n);
}

int
emu_tc_idesc_check(uint32_t v, int kind, int vec, int ts, int group, char *why, size_t n)
{
	Idesc d;
	memset(&d, 0, sizeof d);
	return idesc_decode(v, kind, vec, ts, group, &d, why, n);
}

static int
mma_idesc(EmuCta *c, EmuThread *t, const EmuInsn *in, MmaOp *op, uint32_t v)
{
	char why[320];
	int g = (int)in->aux[TC_GROUP];
	int rc = idesc_decode(v, op->kind, op->vec, op->ts, g, &op->id, why, sizeof why);
	if (rc)
		return emu_hazard(c, t, in, "descriptor", "%s instruction descriptor 0x%08x: %s "
		                  "(docs/hardware.md, \"Instruction descriptor\".%d; the idesc is its own 32-bit operand, pitfall 4)",
		                  kinds[op->kind].name, v, why, op->vec ? 2 : 1);
	/* the pair's M = 256 is data path layout A, its dense M = 128 layout B
	 * (PTX ISA §9.7.16.10.5; sparse MMAs are refused above) */
	(void)g;
	return 0;
}

static int
mma_descs(EmuCta *c, EmuThread *t, const EmuInsn *in, const MmaOp *op, EmuSmemDesc *da,
          EmuSmemDesc *db)
{
	char why[256];
	if (!op->ts && emu_desc_decode(op->adesc, ARCH_SM100, da, why, sizeof why))
		return emu_hazard(c, t, in, "descriptor", "A smem descriptor 0x%016" PRIx64 ": %s",
		                  op->adesc, why);
	if (emu_desc_decode(op->bdesc, ARCH_SM100, db, why, sizeof why))
		return emu_hazard(c, t, in, "descriptor", "B smem descriptor 0x%016" PRIx64 ": %s",
		                  op->bdesc, why);
	for (int k = 0; k < 2; k++) {
		const EmuSmemDesc *d = k ? db : da;
		if ((k || !op->ts) && emu_desc_aligned(d))
			return emu_hazard(c, t, in, "swizzle-align",
			                  "%s descriptor start 0x%x is not on its %dB swizzle pattern (period "
			                  "%d bytes) and base_offset is 0 (docs/hardware.md, \"Base offset and alignment\")",
			                  k ? "B" : "A", d->start, d->swizzle, d->swizzle * 8);
	}
	const Idesc *id = &op->id;
	if (kinds[op->kind].ebits == 8 && (id->ta || id->tb) && id->N % 16)
		return emu_hazard(c, t, in, "descriptor", "8-bit MN-major B needs N %% 16 == 0");
	return 0;
}

/* TMEM columns of A in the TS form: K elements of ebits packed along
 * columns (docs/hardware.md, "A operand in TMEM"): 8 for every kind */
static uint32_t
a_cols(const MmaOp *op)
{
	return op->id.K * (uint32_t)kinds[op->kind].ebits / 32;
}

static uint32_t
sf_cols(uint32_t rows)
{
	return (rows + 31) / 32;
}

/* Scale factors (docs/hardware.md, "Block-scaled tcgen05.mma"): the factor of row (A) or column (B)
 * i sits in lane i % 32 of every 32-lane quarter, column i / 32 of the
 * region the address names (lane 0). */
static int
sf_place(EmuCta *c, EmuThread *t, const EmuInsn *in, const char *which, uint32_t taddr,
         uint32_t rows)
{
	if (taddr >> 16)
		return emu_hazard(c, t, in, "tmem-alloc", "scale-%s TMEM address 0x%08x: scale factors "
		                  "start at lane 0 and are replicated in all four lane quarters "
		                  "(PTX ISA §9.7.16.10.7)", which, taddr);
	return emu_tmem_check(c, t, in, 0, 128, taddr & 0xffff, sf_cols(rows));
}

static int
mma_placement(EmuCta *c, EmuThread *t, const EmuInsn *in, const MmaOp *op)
{
	const Idesc *id = &op->id;
	uint32_t dlane = op->dt >> 16, dcol = op->dt & 0xffff;
	if ((id->M == 128 && dlane != 0) || (id->M == 64 && dlane != 0 && dlane != 16))
		return emu_hazard(c, t, in, "tmem-alloc",
		                  "D TMEM address 0x%08x: an M=%u accumulator starts at lane %s",
		                  op->dt, id->M, id->M == 128 ? "0" : "0 or 16");
	if (emu_tmem_check(c, t, in, 0, 128, dcol, id->N))
		return EMU_STOP;
	if (op->ts) {
		if (id->ta)
			return emu_hazard(c, t, in, "descriptor", "A in TMEM cannot be transposed (docs/hardware.md, \"A operand in TMEM\")");
		if ((op->at >> 16) != dlane)
			return emu_hazard(c, t, in, "tmem-alloc", "A TMEM address 0x%08x starts at lane %u "
			                  "but D at lane %u: row r of A lives in the lane of row r of D "
			                  "(docs/hardware.md, \"A operand in TMEM\")", op->at, op->at >> 16, dlane);
		if (emu_tmem_check(c, t, in, 0, 128, op->at & 0xffff, a_cols(op)))
			return EMU_STOP;
	}
	if (op->vec && (sf_place(c, t, in, "A", op->sfa, id->M) || sf_place(c, t, in, "B", op->sfb, id->N)))
		return EMU_STOP;
	return 0;
}

/* smem operands: ordered after their writers through a fenced sync, in
 * flight until the op completes */
static int
mma_smem(EmuCta *c, EmuThread *t, const EmuInsn *in, MmaOp *op, const EmuSmemDesc *da,
         const EmuSmemDesc *db, int slot, EmuClock j)
{
	const Idesc *id = &op->id;
	int eb = kinds[op->kind].ebits >= 8 ? kinds[op->kind].ebits / 8 : 1;
	uint32_t nk = id->K * (uint32_t)kinds[op->kind].ebits / 8 / (uint32_t)eb;
	uint32_t bad = 0;
	int cap = 0;
	c->stamp++;
	if ((!op->ts && emu_desc_chunks(c, da, !id->ta, eb, 0, id->M, nk, &op->chunks, &op->nchunks,
	                                &cap, &bad)) ||
	    emu_desc_chunks(c, db, !id->tb, eb, 0, id->N, nk, &op->chunks, &op->nchunks, &cap, &bad))
		return emu_fault(c, t, in, "tcgen05.mma operand element at smem 0x%x is outside the CTA's "
		                 "shared memory (descriptor start/LBO/SBO wrong?)", bad);
	return emu_tc_smem_issue(c, t, in, op->chunks, op->nchunks, TAGK_TC, slot, j,
	                         "tcgen05.mma reads");
}

/* D cells that an earlier MMA of this pipe read as its A operand (TS):
 * only MMAs on the same accumulator and shape are pipelined (PTX ISA
 * §9.7.16.6.2), so the earlier one must have completed and the issuer
 * observed it (commit, mbarrier wait, fence::after_thread_sync) */
static int
mma_overwrites_a(EmuCta *c, EmuThread *t, const EmuInsn *in, const MmaOp *op, int slot)
{
	uint32_t dcol = op->dt & 0xffff;
	for (uint32_t q = 0; q < 4; q++)
		for (uint32_t k = dcol; k < dcol + op->id.N; k++) {
			const EmuTag *tag = &c->trtag[q * EMU_TMEM_COLS + k];
			if (tag->kind != TAGK_TC || tag->slot != slot || emu_vc_covers(c, t->vc_tc, -1, tag))
				continue;
			return emu_hazard(c, t, in, "async-in-flight",
			                  "tcgen05.mma writes TMEM lane %u column %u, which the tcgen05.mma at "
			                  "PTX line %d reads as its A operand: MMAs with different "
			                  "accumulators are not pipelined (PTX ISA §9.7.16.6.2), so that MMA "
			                  "must complete (commit, wait, fence::after_thread_sync) first",
			                  q * 32, k, tag->line);
		}
	return 0;
}

/* TMEM: D must not be read/written by an unordered tcgen05.ld/st, A and the
 * scale factors must be written before; earlier ops of this pipe are
 * pipelined (docs/hardware.md, "tcgen05 ordering", PTX ISA §9.7.16.6.2: mma->mma,
 * cp->mma, shift->mma), except an MMA over the A operand of an earlier one */
static int
mma_tmem_order(EmuCta *c, EmuThread *t, const EmuInsn *in, const MmaOp *op, int slot)
{
	uint32_t dcol = op->dt & 0xffff;
	uint32_t acc = emu_tc_acc_key(dcol, op->id.N, op->id.M);
	if (emu_tc_pipe_check(c, t, in, 0xf, dcol, op->id.N, slot, TAGK_TC, acc,
	                      "tcgen05.mma accumulates into") ||
	    (op->ts && emu_tc_pipe_check(c, t, in, 0xf, op->at & 0xffff, a_cols(op), slot, TAGK_TC, 0,
	                                 "tcgen05.mma reads A from")))
		return EMU_STOP;
	if (mma_overwrites_a(c, t, in, op, slot) ||
	    emu_tc_cells_check(c, t, in, 0xf, dcol, op->id.N, slot, 1, "tcgen05.mma writes") ||
	    (op->ts && emu_tc_cells_check(c, t, in, 0xf, op->at & 0xffff, a_cols(op), slot, 0,
	                                  "tcgen05.mma reads A from")))
		return EMU_STOP;
	if (op->vec &&
	    (emu_tc_cells_check(c, t, in, 0xf, op->sfa & 0xffff, sf_cols(op->id.M), slot, 0,
	                        "tcgen05.mma reads scale factors A from") ||
	     emu_tc_cells_check(c, t, in, 0xf, op->sfb & 0xffff, sf_cols(op->id.N), slot, 0,
	                        "tcgen05.mma reads scale factors B from")))
		return EMU_STOP;
	return 0;
}

static void
mma_tmem_tag(EmuCta *c, const EmuInsn *in, int tid, const MmaOp *op, int slot, EmuClock j)
{
	emu_tc_cells_tag(c, in, tid, 0xf, op->dt & 0xffff, op->id.N, TAGK_TC, slot, j, 1);
	uint32_t acc = emu_tc_acc_key(op->dt & 0xffff, op->id.N, op->id.M);
	for (uint32_t q = 0; q < 4; q++)
		for (uint32_t k = op->dt & 0xffff; k < (op->dt & 0xffff) + op->id.N; k++)
			c->tacc[q * EMU_TMEM_COLS + k] = acc;
	if (op->ts)
		emu_tc_cells_tag(c, in, tid, 0xf, op->at & 0xffff, a_cols(op), TAGK_TC, slot, j, 0);
	if (op->vec) {
		emu_tc_cells_tag(c, in, tid, 0xf, op->sfa & 0xffff, sf_cols(op->id.M), TAGK_TC, slot, j, 0);
		emu_tc_cells_tag(c, in, tid, 0xf, op->sfb & 0xffff, sf_cols(op->id.N), TAGK_TC, slot, j, 0);
	}
}

/* The A collector of a pipe (PTX ISA, tcgen05.mma .collector_usage): ::fill
 * keeps this MMA's A for later ones, ::use and ::lastuse take A from it (so
 * their A operand must be the one filled, and the buffer must still hold
 * it), ::lastuse and ::discard (the default) leave it empty. */
static int
mma_collector(EmuCta *c, EmuThread *t, const EmuInsn *in, const MmaOp *op, int a)
{
	EmuCollector *k = &c->coll[a];
	uint32_t use = in->aux[TC_COLL];
	uint64_t av = op->ts ? op->at : op->adesc;
	if (use == TC_COLL_USE || use == TC_COLL_LASTUSE) {
		if (!k->line)
			return emu_hazard(c, t, in, "collector",
			                  "tcgen05.mma .collector::a::%s, but the A collector holds nothing: "
			                  "no earlier MMA of this thread filled it (::fill), or a ::lastuse / "
			                  "::discard / unqualified MMA emptied it", use == TC_COLL_USE ? "use"
			                  : "lastuse");
		if (k->ts != op->ts || k->a != av) {
			char text[200];
			emu_line_text(c->prog, k->line, text, sizeof text);
			return emu_hazard(c, t, in, "collector",
			                  "tcgen05.mma .collector::a::%s names A %s 0x%llx, but the collector "
			                  "holds the A of the MMA at PTX line %d `%s` (%s 0x%llx): the MMA "
			                  "would use that A, not this one",
			                  use == TC_COLL_USE ? "use" : "lastuse",
			                  op->ts ? "at TMEM" : "descriptor", (unsigned long long)av, k->line,
			                  text, k->ts ? "TMEM" : "descriptor", (unsigned long long)k->a);
		}
	}
	if (use == TC_COLL_FILL || use == TC_COLL_USE) {
		k->ts = op->ts;
		k->a = av;
		k->line = in->line;
	} else {
		k->line = 0;
	}
	return 0;
}

/* cta_group::2 (PTX ISA §9.7.16.10.5, docs/cta-pair.md): CTA h of the pair
 * holds B rows (N) h*N/2..h*N/2+N/2-1 at the B descriptor and its M/2 rows
 * of A at the A descriptor. M = 256 (data path layout A): rows 128h..128h+127
 * of D in lanes 0-127 of its own TMEM at the D address. M = 128 (layout B,
 * docs/hardware.md, "Accumulator layout of the CTA pair"): rows 64h..64h+63,
 * columns 0..N/2-1 in lanes 0-63 and N/2..N-1 in lanes 64-127 of N/2 TMEM
 * columns; A from TMEM duplicated in both lane halves, each half feeding
 * its own columns. The same checks as one CTA's MMA run on each CTA's
 * memory, over the cells each CTA's share occupies. */
static int
mma_pair(EmuCta *c, EmuThread *t, const EmuInsn *in, MmaOp *op, const EmuSmemDesc *da,
         const EmuSmemDesc *db)
{
	int lb = op->id.M == 128;
	if ((op->ts && !lb) || op->mask[0] || op->mask[1] || op->mask[2] || op->mask[3])
		return emu_fault(c, t, in, "tcgen05.mma.cta_group::2 with M = 256 and A in TMEM, or "
		                 "with a disable-output-lane mask, is not supported by the emulator yet");
	int p0 = c->rank & ~1;
	if (p0 + 1 >= emu_cluster_n(c))
		return emu_hazard(c, t, in, "cta-group", "tcgen05.mma.cta_group::2 in CTA rank %d of a "
		                  "cluster of %d: the pair's peer CTA does not exist", c->rank, emu_cluster_n(c));
	EmuCta *pc[2] = {c->cl->cta[p0], c->cl->cta[p0 + 1]};
	for (int h = 0; h < 2; h++) {
		if (pc[h]->finished)
			return emu_hazard(c, t, in, "cluster", "tcgen05.mma.cta_group::2 uses CTA rank %d, "
			                  "which has exited", pc[h]->rank);
		if (pc[h]->cta_group != 2)
			return emu_hazard(c, t, in, "cta-group",
			                  "tcgen05.mma.cta_group::2 writes the TMEM of CTA rank %d, which %s: "
			                  "both CTAs of the pair allocate with tcgen05.alloc.cta_group::2 "
			                  "(docs/cta-pair.md, \"The tcgen05 CTA pair\")", pc[h]->rank,
			                  pc[h]->cta_group ? "used .cta_group::1"
			                                   : "has no tcgen05.alloc.cta_group::2");
	}
	MmaOp half = *op;
	half.id.M = 128;
	half.id.N = lb ? op->id.N / 2 : op->id.N;
	for (int h = 0; h < 2; h++)
		if (!pc[h]->tmem)
			return emu_fault(c, t, in, "tcgen05 on a device without tensor memory");
		else if (mma_placement(pc[h], t, in, &half))
			return EMU_STOP;
	int a = emu_tc_agent(c, t, in);
	if (a < 0)
		return EMU_STOP;
	int slot = emu_tc_agent_slot(c, a);
	EmuClock j = (EmuClock)(c->agent_commits[a] + 1);
	if (mma_collector(c, t, in, op, a))
		return EMU_STOP;
	MmaOp sm[2];
	for (int h = 0; h < 2; h++) {
		sm[h] = half;
		sm[h].id.M = op->id.M / 2;
		sm[h].id.N = op->id.N / 2;
		sm[h].chunks = NULL;
		sm[h].nchunks = 0;
	}
	MmaOp *d = NULL;
	int bad = 0;
	for (int h = 0; h < 2 && !bad; h++)
		bad = mma_smem(pc[h], t, in, &sm[h], da, db, slot, j) ||
		      mma_tmem_order(pc[h], t, in, &half, slot);
	if (bad || !(d = malloc(sizeof *d))) {
		free(sm[0].chunks);
		free(sm[1].chunks);
		return c->failed || pc[0]->failed || pc[1]->failed
		               ? EMU_STOP : emu_fault(c, t, in, "out of host memory");
	}
	for (int h = 0; h < 2; h++)
		mma_tmem_tag(pc[h], in, t->tid, &half, slot, j);
	*d = *op;
	d->pair = p0 + 1;
	d->chunks = sm[0].chunks;
	d->nchunks = sm[0].nchunks;
	d->pchunks = sm[1].chunks;
	d->npchunks = sm[1].nchunks;
	return emu_tc_push(c, t, in, AS_TC_MMA, a, d);
}

int
emu_op_tc_mma(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (emu_tc_group_check(c, t, in))
		return EMU_STOP;
	if (!c->tmem)
		return emu_fault(c, t, in, "tcgen05 on a device without tensor memory");
	MmaOp op;
	memset(&op, 0, sizeof op);
	uint32_t idesc;
	EmuSmemDesc da, db;
	if (mma_operands(c, t, in, &op, &idesc) || mma_idesc(c, t, in, &op, idesc) ||
	    mma_descs(c, t, in, &op, &da, &db))
		return EMU_STOP;
	if (in->aux[TC_GROUP] == 2)
		return mma_pair(c, t, in, &op, &da, &db);
	if (mma_placement(c, t, in, &op))
		return EMU_STOP;
	int a = emu_tc_agent(c, t, in);
	if (a < 0)
		return EMU_STOP;
	int slot = emu_tc_agent_slot(c, a);
	EmuClock j = (EmuClock)(c->agent_commits[a] + 1);
	if (mma_collector(c, t, in, &op, a))
		return EMU_STOP;
	MmaOp *d = NULL;
	if (mma_smem(c, t, in, &op, &da, &db, slot, j) || mma_tmem_order(c, t, in, &op, slot) ||
	    !(d = malloc(sizeof *d))) {
		free(op.chunks);
		return c->failed ? EMU_STOP : emu_fault(c, t, in, "out of host memory");
	}
	mma_tmem_tag(c, in, t->tid, &op, slot, j);
	*d = op;
	return emu_tc_push(c, t, in, AS_TC_MMA, a, d);
}

/* ---- operand values at completion -------------------------------------------------------------- */

/* Element k of row mn of an smem operand stored as 16 codes + padding per
 * 16-byte chunk (6- and 4-bit f8f6f4 types, K-major) */
static uint8_t
padded_code(const EmuCta *c, const EmuSmemDesc *d, int bits, uint32_t mn, uint32_t k)
{
	uint32_t chunk = emu_desc_addr(d, 1, 1, mn, k & ~15u);
	uint32_t bit = (k & 15u) * (uint32_t)bits;
	const uint8_t *p = c->smem + chunk + bit / 8; /* p[1] is inside the chunk: bit <= 90 */
	uint32_t w = p[0] | (uint32_t)p[1] << 8;
	return (uint8_t)(w >> (bit % 8) & ((1u << bits) - 1));
}

/* out[mn][k] of an f8f6f4-family smem operand */
static void
gather_f8f6f4(const EmuCta *c, const EmuSmemDesc *d, int kmajor, int fmt, uint32_t rows,
              uint32_t K, float *out)
{
	const ElemFmt *f = &f8f6f4_fmts[fmt];
	if (f->bits == 8) {
		emu_desc_gather(c, d, kmajor, fmt == EF_E4M3 ? T_E4M3 : T_E5M2, 1, 0, rows, K, 1.0f, out);
		return;
	}
	for (uint32_t mn = 0; mn < rows; mn++)
		for (uint32_t k = 0; k < K; k++)
			out[mn * K + k] = f->dec(padded_code(c, d, f->bits, mn, k));
}

/* out[mn][k] of a packed E2M1 smem operand (kind::mxf4, mxf4nvf4) */
static void
gather_fp4(const EmuCta *c, const EmuSmemDesc *d, uint32_t rows, uint32_t K, float *out)
{
	for (uint32_t mn = 0; mn < rows; mn++)
		for (uint32_t k = 0; k < K; k += 2) {
			uint8_t b = c->smem[emu_desc_addr(d, 1, 1, mn, k / 2)];
			out[mn * K + k] = emu_e2m1_to_f32(b & 0xf);
			out[mn * K + k + 1] = emu_e2m1_to_f32(b >> 4);
		}
}

static EmuType
dense_type(int kind, int fmt)
{
	switch (kind) {
	case KIND_F16: return fmt ? T_BF16 : T_F16;
	case KIND_TF32: return T_TF32;
	default: return fmt ? T_S8 : T_U8;
	}
}

static void
gather_smem(const EmuCta *c, const MmaOp *op, uint64_t desc, int kmajor, int fmt, uint32_t rows,
            float *out)
{
	EmuSmemDesc d;
	char why[8];
	emu_desc_decode(desc, ARCH_SM100, &d, why, sizeof why);
	uint32_t K = op->id.K;
	if (kinds[op->kind].family)
		gather_f8f6f4(c, &d, kmajor, fmt, rows, K, out);
	else if (kinds[op->kind].ebits == 4)
		gather_fp4(c, &d, rows, K, out);
	else
		emu_desc_gather(c, &d, kmajor, dense_type(op->kind, fmt), kinds[op->kind].ebits / 8, 0,
		                rows, K, 1.0f, out);
}

/* Element k of TMEM A row r (docs/hardware.md, "A operand in TMEM"): elements packed
 * along the columns from the A address, ebits each (containers of 8 bits for fp6/fp4) */
static float
a_tmem(const EmuCta *c, const MmaOp *op, uint32_t lane, uint32_t k)
{
	int ebits = kinds[op->kind].ebits;
	uint32_t per = 32u / (uint32_t)ebits;
	uint32_t cell = c->tmem[lane * EMU_TMEM_COLS + (op->at & 0xffff) + k / per];
	uint32_t v = cell >> (ebits * (int)(k % per));
	v &= ebits == 32 ? 0xffffffffu : (1u << ebits) - 1;
	if (ebits == 4)
		return emu_e2m1_to_f32((uint8_t)v);
	if (kinds[op->kind].family)
		return f8f6f4_fmts[op->id.afmt].dec(container_code(op->id.afmt, (uint8_t)v));
	EmuType at = dense_type(op->kind, op->id.afmt);
	return at == T_U8 ? (float)(uint8_t)v : at == T_S8 ? (float)(int8_t)v : emu_to_f32(v, at);
}

static void
gather_a(const EmuCta *c, const MmaOp *op, float *A)
{
	const Idesc *id = &op->id;
	if (!op->ts) {
		gather_smem(c, op, op->adesc, !id->ta, id->afmt, id->M, A);
		return;
	}
	for (uint32_t r = 0; r < id->M; r++)
		for (uint32_t k = 0; k < id->K; k++)
			A[r * id->K + k] = a_tmem(c, op, d_lane(id->M, op->dt >> 16, r), k);
}

/* Scale factor j of row/column i as lane quarter q holds it: byte SF_ID + j
 * of the word (1X: the byte SF_ID, 2X: the half-word at SF_ID, 4X: the
 * word; PTX ISA §9.7.16.10.7.2-3, docs/hardware.md, "Block-scaled tcgen05.mma") */
static float
sf_at(const EmuCta *c, uint32_t taddr, int id, int ue8m0, uint32_t q, uint32_t i, int j)
{
	uint32_t w = c->tmem[(32 * q + i % 32) * EMU_TMEM_COLS + (taddr & 0xffff) + i / 32];
	uint8_t b = (uint8_t)(w >> (8 * (id + j)));
	return ue8m0 ? emu_ue8m0_to_f32(b) : emu_ue4m3_to_f32(b);
}

/* ---- completion ---------------------------------------------------------------------------------- */

static void
dense_row(const MmaOp *op, uint32_t *row, const float *ar, const float *B)
{
	const Idesc *id = &op->id;
	uint32_t N = id->N, K = id->K;
	float sa = id->nega ? -1.0f : 1.0f, sb = id->negb ? -1.0f : 1.0f;
	for (uint32_t n = 0; n < N; n++) {
		const float *br = &B[n * K];
		if (op->kind == KIND_I8) {
			int64_t acc = op->enable ? (int64_t)(int32_t)row[n] : 0;
			for (uint32_t k = 0; k < K; k++)
				acc += (int64_t)ar[k] * (int64_t)br[k];
			if (id->sat)
				acc = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : acc;
			row[n] = (uint32_t)(int32_t)acc;
			continue;
		}
		float d = 0.0f;
		if (op->enable) {
			d = id->dfmt == 1 ? emu_f32(row[n]) : emu_f16_to_f32((uint16_t)row[n]);
			if (op->scale_shift > 0)
				d = ldexpf(d, -op->scale_shift);
		}
		for (uint32_t k = 0; k < K; k++)
			d += (sa * ar[k]) * (sb * br[k]);
		row[n] = id->dfmt == 1 ? emu_f32_bits(d) : emu_f32_to_f16(d, RND_RN, 0);
	}
}

/* D[r][n] (+)= sum_k A[r][k] SFA[r][k/blk] B[n][k] SFB[n][k/blk] (PTX ISA
 * §9.7.16.10.7), f32 D; the scale factors as the lane quarter of row r
 * holds them */
static void
scaled_row(const EmuCta *c, const MmaOp *op, uint32_t r, uint32_t q, uint32_t *row,
           const float *ar, const float *B)
{
	const Idesc *id = &op->id;
	uint32_t N = id->N, K = id->K, blk = K / (uint32_t)op->vec;
	double sa = id->nega ? -1.0 : 1.0, sb = id->negb ? -1.0 : 1.0;
	double fa[4];
	for (int j = 0; j < op->vec; j++)
		fa[j] = sa * sf_at(c, op->sfa, id->sfa, id->ue8m0, q, r, j);
	for (uint32_t n = 0; n < N; n++) {
		const float *br = &B[n * K];
		double fb[4];
		for (int j = 0; j < op->vec; j++)
			fb[j] = sb * sf_at(c, op->sfb, id->sfb, id->ue8m0, q, n, j);
		float d = op->enable ? emu_f32(row[n]) : 0.0f;
		for (uint32_t k = 0; k < K; k++)
			d += (float)(((double)ar[k] * fa[k / blk]) * ((double)br[k] * fb[k / blk]));
		row[n] = emu_f32_bits(d);
	}
}

/* The pair's MMA (mma_pair): B from both CTAs, each CTA's rows of D from
 * its own A. M = 256: row r of CTA h in lane r. M = 128 (layout B): row r
 * of CTA h, column half j (N/2 columns each) in lane r + 64j, from the A
 * copy of that lane half when A is in TMEM. */
static int
pair_complete(EmuCta *c, EmuAsync *q)
{
	MmaOp *op = q->data;
	EmuCta *pc[2] = {c->cl->cta[op->pair - 1], c->cl->cta[op->pair]};
	MmaOp half = *op;
	int lb = op->id.M == 128;
	uint32_t N = op->id.N, K = op->id.K, dcol = op->dt & 0xffff, rows = op->id.M / 2;
	half.id.M = 128;
	half.id.N = lb ? N / 2 : N;
	float *A = malloc(sizeof(float) * 128 * K), *B = malloc(sizeof(float) * N * K);
	if (!A || !B) {
		free(A);
		free(B);
		return emu_fault(c, &c->t[q->tid], q->in, "out of host memory");
	}
	for (int h = 0; h < 2; h++)
		gather_smem(pc[h], op, op->bdesc, !op->id.tb, op->id.bfmt, N / 2, &B[h * (N / 2) * K]);
	for (int h = 0; h < 2; h++) {
		/* A[j*rows + r]: row r as lane half j holds it (one copy in smem) */
		if (op->ts) {
			for (uint32_t l = 0; l < 128; l++)
				for (uint32_t k = 0; k < K; k++)
					A[l * K + k] = a_tmem(pc[h], op, l, k);
		} else {
			gather_smem(pc[h], op, op->adesc, !op->id.ta, op->id.afmt, rows, A);
			if (lb)
				memcpy(&A[rows * K], A, sizeof(float) * rows * K);
		}
		for (uint32_t r = 0; r < rows; r++)
			for (uint32_t j = 0; j < (lb ? 2u : 1u); j++)
				dense_row(&half, &pc[h]->tmem[(r + rows * j) * EMU_TMEM_COLS + dcol],
				          &A[(r + rows * j) * K], &B[j * half.id.N * K]);
	}
	free(A);
	free(B);
	emu_tc_smem_done(pc[0], op->chunks, op->nchunks);
	emu_tc_smem_done(pc[1], op->pchunks, op->npchunks);
	free(op->chunks);
	free(op->pchunks);
	op->chunks = op->pchunks = NULL;
	return 0;
}

void
emu_tc_mma_drop(EmuAsync *q)
{
	MmaOp *op = q->data;
	if (op) {
		free(op->chunks);
		free(op->pchunks);
		op->chunks = op->pchunks = NULL;
	}
}

int
emu_tc_mma_complete(EmuCta *c, EmuAsync *q)
{
	MmaOp *op = q->data;
	if (op->pair)
		return pair_complete(c, q);
	const Idesc *id = &op->id;
	uint32_t M = id->M, N = id->N, K = id->K;
	float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
	if (!A || !B) {
		free(A);
		free(B);
		return emu_fault(c, &c->t[q->tid], q->in, "out of host memory");
	}
	gather_a(c, op, A);
	gather_smem(c, op, op->bdesc, !id->tb, id->bfmt, N, B);
	uint32_t dlane0 = op->dt >> 16, dcol = op->dt & 0xffff;
	for (uint32_t r = 0; r < M; r++) {
		uint32_t lane = d_lane(M, dlane0, r);
		if (op->mask[lane / 32] >> (lane % 32) & 1)
			continue;
		uint32_t *row = &c->tmem[lane * EMU_TMEM_COLS + dcol];
		if (op->vec)
			scaled_row(c, op, r, lane / 32, row, &A[r * K], B);
		else
			dense_row(op, row, &A[r * K], B);
	}
	free(A);
	free(B);
	emu_tc_smem_done(c, op->chunks, op->nchunks);
	free(op->chunks);
	op->chunks = NULL;
	return 0;
}
