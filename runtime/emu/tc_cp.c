/* tcgen05.cp and tcgen05.shift (PTX ISA §9.7.16.9; docs/hardware.md, "tcgen05.cp"):
 * async ops of the issuing thread's pipe, tracked by tcgen05.commit and
 * pipelined before a later tcgen05.mma of the same thread (§9.7.16.6.2).
 *
 * tcgen05.cp copies rows of 128 or 256 bits from shared memory into TMEM
 * lanes. The source is a K-major canonical operand of bytes (docs/hardware.md,
 * "Canonical layouts, LBO and SBO") behind an smem descriptor: logical row r is the operand's row r,
 * each 16 bytes of it one core-matrix row (LBO apart without swizzle). The
 * destination lanes of row r (relative to the address's lane):
 *   .128x256b, .128x128b   r
 *   .4x256b                32 r
 *   .64x128b.warpx2::02_13 r, r + 64         (warps 0/2 and 1/3 pair up)
 *   .64x128b.warpx2::01_23 64(r/32) + r%32, +32  (warps 0/1 and 2/3)
 *   .32x128b.warpx4        r + 32 i, i = 0..3
 * (the multicast places as the TVM TIRx tcgen05.cp table spells out the
 * PTX text "each warp pair receives half of the data"). With .b8x16 each
 * 16-byte source chunk holds 16 packed 6- or 4-bit codes and padding
 * (.b6x16_p32, .b4x16_p64, PTX ISA §9.7.16.9.1) and lands as 16 8-bit
 * containers (emu_tc_container).
 *
 * tcgen05.shift.down moves the 32-byte (8-column) rows of the 32-lane
 * block at taddr down by one lane: lane l+1 gets lane l's row for l = 0..30
 * (the implicit .31x256b shape of PTX ISA §9.7.16.2.3); the first lane keeps
 * its contents. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"
#include "tc.h"

typedef struct CpShape {
	const char *name;
	uint32_t rows;    /* logical rows */
	uint32_t bytes;   /* per row */
	unsigned mc;      /* multicasts it takes: bit MC_* */
} CpShape;

static const CpShape cp_shapes[] = {
	[CP_128x256b] = {".128x256b", 128, 32, 1u << MC_NONE},
	[CP_4x256b] = {".4x256b", 4, 32, 1u << MC_NONE},
	[CP_128x128b] = {".128x128b", 128, 16, 1u << MC_NONE},
	[CP_64x128b] = {".64x128b", 64, 16, 1u << MC_02_13 | 1u << MC_01_23},
	[CP_32x128b] = {".32x128b", 32, 16, 1u << MC_X4},
};

static const char *const mc_names[] = {"no multicast", ".warpx2::02_13", ".warpx2::01_23",
                                       ".warpx4"};

int
emu_chk_tc_cp(EmuInsn *in, EmuParse *p)
{
	if (!in->aux[0])
		return emu_parse_fail(p, "tcgen05.cp needs a shape (.128x256b, .4x256b, .128x128b, "
		                      ".64x128b, .32x128b)");
	if (!in->aux[TC_GROUP])
		return emu_parse_fail(p, "tcgen05.cp needs .cta_group::1");
	const CpShape *s = &cp_shapes[in->aux[0]];
	if (!(s->mc >> in->aux[1] & 1))
		return emu_parse_fail(p, "tcgen05.cp%s cannot take %s: .64x128b needs .warpx2::02_13 or "
		                      "::01_23, .32x128b needs .warpx4, the other shapes no multicast "
		                      "(PTX ISA §9.7.16.9.2)", s->name, mc_names[in->aux[1]]);
	if (!in->aux[2] != !in->aux[3])
		return emu_parse_fail(p, "tcgen05.cp: .b8x16 (dst_fmt) and .b6x16_p32 / .b4x16_p64 "
		                      "(src_fmt) come together");
	if (emu_opnd_kind(in, p, 0) != OPK_MEM)
		return emu_parse_fail(p, "tcgen05.cp takes [taddr], s-desc");
	return 0;
}

/* lane of logical row r, replica i, relative to the address's lane */
static uint32_t
cp_lane(const EmuInsn *in, uint32_t r, uint32_t i)
{
	switch (in->aux[1]) {
	case MC_02_13: return r + 64 * i;
	case MC_01_23: return 64 * (r / 32) + r % 32 + 32 * i;
	case MC_X4: return r + 32 * i;
	default: return in->aux[0] == CP_4x256b ? 32 * r : r;
	}
}

static uint32_t
cp_replicas(const EmuInsn *in)
{
	return in->aux[1] == MC_X4 ? 4 : in->aux[1] ? 2 : 1;
}

typedef struct CpOp {
	uint32_t taddr;
	EmuSmemDesc d;
	uint32_t *chunks;
	int nchunks;
} CpOp;

/* Destination lanes inside TMEM and one allocation; the quarters they touch. */
static int
cp_place(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t taddr, unsigned *qmask)
{
	const CpShape *s = &cp_shapes[in->aux[0]];
	uint32_t lane0 = taddr >> 16, hi = 0;
	*qmask = 0;
	for (uint32_t r = 0; r < s->rows; r++)
		for (uint32_t i = 0; i < cp_replicas(in); i++) {
			uint32_t l = lane0 + cp_lane(in, r, i);
			hi = l > hi ? l : hi;
			*qmask |= 1u << (l / 32 & 3);
		}
	if (hi >= EMU_TMEM_LANES)
		return emu_hazard(c, t, in, "tmem-alloc", "tcgen05.cp%s to TMEM address 0x%08x reaches "
		                  "lane %u: its lanes must stay inside the 128 TMEM lanes",
		                  s->name, taddr, hi);
	return emu_tmem_check(c, t, in, lane0, hi - lane0 + 1, taddr & 0xffff, s->bytes / 4);
}

static int
cp_desc(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t v, EmuSmemDesc *d)
{
	char why[256];
	if (emu_desc_decode(v, ARCH_SM100, d, why, sizeof why))
		return emu_hazard(c, t, in, "descriptor", "tcgen05.cp source smem descriptor 0x%016" PRIx64
		                  ": %s", v, why);
	if (emu_desc_aligned(d))
		return emu_hazard(c, t, in, "swizzle-align",
		                  "tcgen05.cp source descriptor start 0x%x is not on its %dB swizzle "
		                  "pattern (period %d bytes) and base_offset is 0 (docs/hardware.md, \"Base offset and alignment\")",
		                  d->start, d->swizzle, d->swizzle * 8);
	return 0;
}

int
emu_op_tc_cp(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (emu_tc_group_check(c, t, in))
		return EMU_STOP;
	if (!c->tmem)
		return emu_fault(c, t, in, "tcgen05 on a device without tensor memory");
	const CpShape *s = &cp_shapes[in->aux[0]];
	CpOp op;
	memset(&op, 0, sizeof op);
	uint64_t taddr, desc;
	unsigned qmask;
	if (emu_addr(c, t, in, emu_opnd(c, in, 0), &taddr) || emu_geti(c, t, in, 1, &desc) ||
	    cp_desc(c, t, in, desc, &op.d) || cp_place(c, t, in, (uint32_t)taddr, &qmask))
		return EMU_STOP;
	op.taddr = (uint32_t)taddr;
	int a = emu_tc_agent(c, t, in);
	if (a < 0)
		return EMU_STOP;
	int slot = emu_tc_agent_slot(c, a);
	EmuClock j = (EmuClock)(c->agent_commits[a] + 1);
	uint32_t bad = 0, col0 = op.taddr & 0xffff;
	int cap = 0;
	c->stamp++;
	if (emu_desc_chunks(c, &op.d, 1, 1, 0, s->rows, s->bytes, &op.chunks, &op.nchunks, &cap,
	                    &bad)) {
		free(op.chunks);
		return emu_fault(c, t, in, "tcgen05.cp source byte at smem 0x%x is outside the CTA's "
		                 "shared memory (descriptor start/LBO/SBO wrong?)", bad);
	}
	CpOp *d = NULL;
	if (emu_tc_smem_issue(c, t, in, op.chunks, op.nchunks, TAGK_TCCP, slot, j, "tcgen05.cp reads") ||
	    emu_tc_pipe_check(c, t, in, qmask, col0, s->bytes / 4, slot, TAGK_TCCP, 0,
	                      "tcgen05.cp writes") ||
	    emu_tc_pipe_check(c, t, in, qmask, col0, s->bytes / 4, slot, TAGK_TC, 0,
	                      "tcgen05.cp writes") ||
	    emu_tc_cells_check(c, t, in, qmask, col0, s->bytes / 4, slot, 1, "tcgen05.cp writes") ||
	    !(d = malloc(sizeof *d))) {
		free(op.chunks);
		return c->failed ? EMU_STOP : emu_fault(c, t, in, "out of host memory");
	}
	emu_tc_cells_tag(c, in, t->tid, qmask, col0, s->bytes / 4, TAGK_TCCP, slot, j, 1);
	*d = op;
	return emu_tc_push(c, t, in, AS_TC_CP, a, d);
}

/* One 16-byte source chunk into 16 destination bytes: a copy, or 16 codes
 * of 6 / 4 bits (lowest element in the lowest bits) into containers. */
static void
cp_chunk(uint32_t fmt, const uint8_t *src, uint8_t *dst)
{
	if (fmt == CPF_NONE) {
		memcpy(dst, src, 16);
		return;
	}
	for (uint32_t j = 0; j < 16; j++) {
		uint32_t code;
		if (fmt == CPF_B4) {
			code = src[j / 2] >> (4 * (j % 2)) & 0xf;
		} else {
			uint32_t bit = 6 * j; /* <= 90: src[bit / 8 + 1] is inside the chunk */
			code = (src[bit / 8] | (uint32_t)src[bit / 8 + 1] << 8) >> (bit % 8) & 0x3f;
		}
		dst[j] = emu_tc_container(fmt == CPF_B4 ? 4 : 6, (uint8_t)code);
	}
}

void
emu_tc_cp_drop(EmuAsync *q)
{
	CpOp *op = q->data;
	if (op) {
		free(op->chunks);
		op->chunks = NULL;
	}
}

int
emu_tc_cp_complete(EmuCta *c, EmuAsync *q)
{
	CpOp *op = q->data;
	const EmuInsn *in = q->in;
	const CpShape *s = &cp_shapes[in->aux[0]];
	uint32_t lane0 = op->taddr >> 16, col0 = op->taddr & 0xffff;
	for (uint32_t r = 0; r < s->rows; r++) {
		uint8_t row[32];
		for (uint32_t b = 0; b < s->bytes; b += 16)
			cp_chunk(in->aux[2], c->smem + emu_desc_addr(&op->d, 1, 1, r, b), row + b);
		for (uint32_t i = 0; i < cp_replicas(in); i++) {
			uint32_t *cell = &c->tmem[(lane0 + cp_lane(in, r, i)) * EMU_TMEM_COLS + col0];
			for (uint32_t w = 0; w < s->bytes / 4; w++)
				cell[w] = (uint32_t)row[4 * w] | (uint32_t)row[4 * w + 1] << 8 |
				          (uint32_t)row[4 * w + 2] << 16 | (uint32_t)row[4 * w + 3] << 24;
		}
	}
	emu_tc_smem_done(c, op->chunks, op->nchunks);
	free(op->chunks);
	op->chunks = NULL;
	return 0;
}

/* ---- shift ------------------------------------------------------------------------------------ */

enum { SHIFT_COLS = 8 }; /* 256 bits per row */

int
emu_op_tc_shift(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (emu_tc_group_check(c, t, in))
		return EMU_STOP;
	if (!c->tmem)
		return emu_fault(c, t, in, "tcgen05 on a device without tensor memory");
	uint64_t v;
	if (emu_addr(c, t, in, emu_opnd(c, in, 0), &v))
		return EMU_STOP;
	uint32_t taddr = (uint32_t)v, lane0 = taddr >> 16, col0 = taddr & 0xffff;
	if (lane0 % 32)
		return emu_hazard(c, t, in, "tmem-lane-quarter", "tcgen05.shift at TMEM address 0x%08x: "
		                  "its lane %u is not a multiple of 32 (PTX ISA §9.7.16.9.3)", taddr, lane0);
	if (emu_tmem_check(c, t, in, lane0, 32, col0, SHIFT_COLS))
		return EMU_STOP;
	int a = emu_tc_agent(c, t, in);
	if (a < 0)
		return EMU_STOP;
	int slot = emu_tc_agent_slot(c, a);
	EmuClock j = (EmuClock)(c->agent_commits[a] + 1);
	unsigned qmask = 1u << (lane0 / 32 & 3);
	if (emu_tc_cells_check(c, t, in, qmask, col0, SHIFT_COLS, slot, 1, "tcgen05.shift moves"))
		return EMU_STOP;
	uint32_t *d = malloc(sizeof *d);
	if (!d)
		return emu_fault(c, t, in, "out of host memory");
	*d = taddr;
	emu_tc_cells_tag(c, in, t->tid, qmask, col0, SHIFT_COLS, TAGK_TCSHIFT, slot, j, 1);
	return emu_tc_push(c, t, in, AS_TC_SHIFT, a, d);
}

int
emu_tc_shift_complete(EmuCta *c, EmuAsync *q)
{
	uint32_t taddr = *(uint32_t *)q->data, lane0 = taddr >> 16, col0 = taddr & 0xffff;
	for (uint32_t l = lane0 + 31; l > lane0; l--)
		memcpy(&c->tmem[l * EMU_TMEM_COLS + col0], &c->tmem[(l - 1) * EMU_TMEM_COLS + col0],
		       SHIFT_COLS * sizeof *c->tmem);
	return 0;
}
