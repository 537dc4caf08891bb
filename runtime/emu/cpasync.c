/* cp.async (PTX ISA §9.7.9.24.3-6): copies of 16 bytes from global to
 * shared memory, issued by one thread and complete only at that thread's
 * cp.async.wait_group / cp.async.wait_all. Copies of 4 and 8 bytes are
 * refused: the emulator tags shared memory in 16-byte chunks, so two of
 * them in flight into one chunk could not be told apart.
 *
 * The emulator reads the source at issue and lands the bytes at the wait,
 * the latest point the memory model allows: until then the destination is
 * in flight, so any access to it (by the issuer too) is a hazard. At the
 * wait the bytes become the issuing thread's generic stores, made at that
 * point: other threads see them only through a later synchronization with
 * it, and the async proxy (wgmma, TMA stores) only after its
 * fence.proxy.async. A thread that exits with copies it never waited for
 * is a hazard. A source size below the copy size zero-fills the rest; 0
 * reads nothing. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

/* aux[0]: 1 once the destination space (.shared) is named, [1]: the
 * source's (.global), [2]: 1 for .cg (16-byte copies only) */
int
emu_mod_cp_async(EmuInsn *in, const char *m, EmuParse *p)
{
	if (strcmp(m, "shared") == 0 || strcmp(m, "shared::cta") == 0) {
		if (in->aux[1])
			return emu_parse_fail(p, "cp.async: the destination .shared comes before the source .global");
		in->space = SPACE_SHARED;
		in->aux[0] = 1;
		return 1;
	}
	if (strcmp(m, "global") == 0) {
		in->aux[1] = 1;
		return 1;
	}
	if (strcmp(m, "cg") == 0) {
		in->aux[2] = 1;
		return 1;
	}
	return strcmp(m, "ca") == 0 || strcmp(m, "L2::64B") == 0 || strcmp(m, "L2::128B") == 0 ||
	       strcmp(m, "L2::256B") == 0;
}

int
emu_chk_cp_async(EmuInsn *in, EmuParse *p)
{
	if (!in->aux[0] || !in->aux[1])
		return emu_parse_fail(p, "cp.async: expected .shared{::cta}.global (global to shared memory)");
	return 0;
}

int
emu_op_cp_async(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t ga, size, src_size;
	uint32_t sa;
	if (emu_shared_addr(c, t, in, 0, &sa) || emu_addr(c, t, in, emu_opnd(c, in, 1), &ga) ||
	    emu_geti(c, t, in, 2, &size))
		return EMU_STOP;
	src_size = size;
	if (in->nop > 3) {
		const EmuOperand *o = emu_opnd(c, in, 3);
		if (o->kind == OPK_REG && c->prog->reg[o->reg].type == T_PRED)
			return emu_fault(c, t, in, "cp.async: the ignore-src predicate form is not supported by the "
			                 "emulator");
		if (emu_geti(c, t, in, 3, &src_size))
			return EMU_STOP;
	}
	if (size != 4 && size != 8 && size != 16)
		return emu_fault(c, t, in, "cp.async: cp-size %" PRIu64 " is not 4, 8 or 16 (PTX ISA §9.7.9.24.3)", size);
	if (in->aux[2] && size != 16)
		return emu_fault(c, t, in, "cp.async.cg: cp-size %" PRIu64 " is not 16 (PTX ISA §9.7.9.24.3)", size);
	if (size != 16)
		return emu_fault(c, t, in, "cp.async of %" PRIu64 " bytes: the emulator runs 16-byte copies only "
		                 "(its shared-memory tags cover 16-byte chunks)", size);
	if (src_size > size)
		return emu_fault(c, t, in, "cp.async: src-size %" PRIu64 " exceeds cp-size %" PRIu64, src_size, size);
	if ((sa % size) || (ga % size))
		return emu_fault(c, t, in, "cp.async: addresses smem 0x%x and global 0x%" PRIx64 " must be "
		                 "aligned to the cp-size %" PRIu64, sa, ga, size);
	if (sa + size > c->smem_end)
		return emu_fault(c, t, in, "cp.async: destination [0x%x, +%" PRIu64 ") is outside the CTA's shared "
		                 "memory", sa, size);
	EmuCpAsync op = {.smem = sa, .bytes = (uint32_t)size, .group = t->cpa_groups, .in = in};
	if (src_size) {
		uint8_t *h = emu_mem_at(c->lc->dev, ga, (size_t)src_size);
		if (!h) {
			char why[256];
			emu_mem_explain(c->lc->dev, ga, (size_t)src_size, why, sizeof why);
			return emu_fault(c, t, in, "cp.async source: %s", why);
		}
		if (emu_race_global(c, t, in, ga, (uint32_t)src_size, 0))
			return EMU_STOP;
		memcpy(op.data, h, (size_t)src_size);
	}
	/* the destination as a generic store now (its ordering checks), then in flight */
	if (emu_smem_write(c, t, in, sa, op.bytes))
		return EMU_STOP;
	for (uint32_t ch = sa >> 4; ch <= (sa + op.bytes - 1) >> 4; ch++) {
		c->sflags[ch] |= SF_TMA_FLIGHT;
		c->swtag[ch].kind = TAGK_CPASYNC;
	}
	if (t->ncpa == t->capcpa) {
		int nc = t->capcpa ? t->capcpa * 2 : 16;
		EmuCpAsync *nv = realloc(t->cpa, (size_t)nc * sizeof *nv);
		if (!nv)
			return emu_fault(c, t, in, "out of host memory");
		t->cpa = nv;
		t->capcpa = nc;
	}
	t->cpa[t->ncpa++] = op;
	return EMU_NEXT;
}

int
emu_op_cp_async_commit(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	(void)c;
	(void)in;
	t->cpa_groups++;
	return EMU_NEXT;
}

/* Lands t's copies of groups <= upto, in issue order. */
static int
land_upto(EmuCta *c, EmuThread *t, int upto)
{
	int k = 0;
	for (int i = 0; i < t->ncpa; i++) {
		EmuCpAsync *op = &t->cpa[i];
		if (op->group > upto) {
			t->cpa[k++] = *op;
			continue;
		}
		for (uint32_t ch = op->smem >> 4; ch <= (op->smem + op->bytes - 1) >> 4; ch++)
			c->sflags[ch] &= (uint8_t)~SF_TMA_FLIGHT;
		if (emu_smem_write(c, t, op->in, op->smem, op->bytes) ||
		    emu_race_smem(c, t, op->in, op->smem, op->bytes, 1))
			return EMU_STOP;
		memcpy(c->smem + op->smem, op->data, op->bytes);
	}
	t->ncpa = k;
	return 0;
}

/* cp.async.wait_group N: all but the N most recent committed groups;
 * cp.async.wait_all: commit, then wait for every group. */
int
emu_op_cp_async_wait(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t n = 0;
	if (strcmp(in->def->name, "cp.async.wait_all") == 0)
		t->cpa_groups++;
	else if (emu_geti(c, t, in, 0, &n))
		return EMU_STOP;
	return land_upto(c, t, t->cpa_groups - (int)n - 1) ? EMU_STOP : EMU_NEXT;
}

/* At thread exit: copies never waited for. */
int
emu_cp_async_exit(EmuCta *c, EmuThread *t)
{
	if (!t->ncpa)
		return 0;
	return emu_hazard(c, t, t->cpa[0].in, "async-in-flight",
	                  "the thread exits with %d cp.async copies it never waited for "
	                  "(cp.async.wait_group / wait_all, PTX ISA §9.7.9.24.6)", t->ncpa);
}
