/* Operand access for the instruction implementations: registers (with the
 * in-flight register checks of tcgen05.ld and wgmma), immediates, special
 * registers, symbols, addresses and their resolution to host memory. */
#include <inttypes.h>
#include <string.h>

#include "emu.h"

const EmuOperand *
emu_opnd(const EmuCta *c, const EmuInsn *in, int i)
{
	return &c->prog->ops[in->op + i];
}

const EmuOperand *
emu_sub(const EmuCta *c, const EmuOperand *o, int i)
{
	return &c->prog->ops[o->sub + i];
}

/* Which in-flight operation holds register `reg` of thread t. */
int
emu_reg_hazard(EmuCta *c, EmuThread *t, const EmuInsn *in, int reg, int write)
{
	uint8_t f = t->pend[reg];
	const char *name = c->prog->reg[reg].name;
	const char *acc = write ? "written" : "read";
	int line = 0;
	EmuWarp *w = t->w;
	if (f & PEND_TCLD) {
		for (int i = 0; i < w->npld && !line; i++) {
			const EmuInsn *li = w->pld[i].in;
			const EmuOperand *v = emu_opnd(c, li, 0);
			for (int k = 0; v->kind == OPK_VEC && k < v->nsub; k++)
				if (emu_sub(c, v, k)->reg == reg)
					line = li->line;
		}
		return emu_hazard(c, t, in, "tcgen05.ld-before-wait",
		                  "register %s is %s before tcgen05.wait::ld: it is a destination of "
		                  "tcgen05.ld at PTX line %d, whose values are undefined until the wait "
		                  "(docs/hardware.md, \"tcgen05 ordering\")", name, acc, line);
	}
	const EmuWgGroup *gs[65];
	int ng = 0;
	gs[ng++] = &w->open;
	for (int i = 0; i < w->ngroups && ng < 65; i++)
		gs[ng++] = &w->groups[i];
	for (int g = 0; g < ng && !line; g++)
		for (int i = 0; i < gs[g]->n && !line; i++)
			line = gs[g]->op[i].in->line;
	if (f & PEND_WGSRC)
		return emu_hazard(c, t, in, "wgmma-acc-in-flight",
		                  "register %s is written while the wgmma.mma_async at PTX line %d "
		                  "that reads it as its A fragment has not completed (wgmma.wait_group)",
		                  name, line);
	return emu_hazard(c, t, in, "wgmma-acc-in-flight",
	                  "register %s is %s between wgmma.mma_async (PTX line %d) and the "
	                  "wgmma.wait_group that completes it: accumulators are undefined while the "
	                  "MMA is in flight (PTX ISA §9.7.15.6)", name, acc, line);
}

static uint64_t
special(EmuCta *c, EmuThread *t, int id)
{
	const KrtLaunch *l = c->lc->l;
	uint32_t bx = l->block[0], by = l->block[1];
	uint32_t tid = (uint32_t)t->tid;
	uint32_t lane = (uint32_t)t->lane;
	switch ((EmuSpecial)id) {
	case SP_TID_X: return tid % bx;
	case SP_TID_Y: return tid / bx % by;
	case SP_TID_Z: return tid / (bx * by);
	case SP_NTID_X: return bx;
	case SP_NTID_Y: return by;
	case SP_NTID_Z: return l->block[2];
	case SP_CTAID_X: return c->ctaid[0];
	case SP_CTAID_Y: return c->ctaid[1];
	case SP_CTAID_Z: return c->ctaid[2];
	case SP_NCTAID_X: return l->grid[0];
	case SP_NCTAID_Y: return l->grid[1];
	case SP_NCTAID_Z: return l->grid[2];
	case SP_CLUSTERID_X: return c->cl->solo ? c->ctaid[0] : c->cl->id[0];
	case SP_CLUSTERID_Y: return c->cl->solo ? c->ctaid[1] : c->cl->id[1];
	case SP_CLUSTERID_Z: return c->cl->solo ? c->ctaid[2] : c->cl->id[2];
	case SP_NCLUSTERID_X: return c->cl->solo ? l->grid[0] : l->grid[0] / c->cl->dim[0];
	case SP_NCLUSTERID_Y: return l->grid[1] / c->cl->dim[1];
	case SP_NCLUSTERID_Z: return l->grid[2] / c->cl->dim[2];
	case SP_LANEID: return lane;
	case SP_WARPID: return tid / 32;
	case SP_NWARPID: return 64;
	case SP_SMID: return 0;
	case SP_NSMID: return 1;
	case SP_CLOCK: return (uint32_t)c->steps;
	case SP_CLOCK64: case SP_GLOBALTIMER: return c->steps;
	case SP_LANEMASK_EQ: return 1u << lane;
	case SP_LANEMASK_LT: return (1u << lane) - 1;
	case SP_LANEMASK_LE: return lane == 31 ? 0xffffffffu : (2u << lane) - 1;
	case SP_LANEMASK_GT: return lane == 31 ? 0 : ~((2u << lane) - 1);
	case SP_LANEMASK_GE: return ~((1u << lane) - 1);
	case SP_CLUSTER_CTARANK: return (uint32_t)emu_rank(c);
	case SP_CLUSTER_NCTARANK: return (uint32_t)emu_cluster_n(c);
	case SP_IS_EXPLICIT_CLUSTER: return emu_cluster_n(c) > 1 || c->prog->reqncluster[0];
	case SP_CLUSTER_CTAID_X: return c->cl->solo ? 0 : c->ctaid[0] % c->cl->dim[0];
	case SP_CLUSTER_CTAID_Y: return c->ctaid[1] % c->cl->dim[1];
	case SP_CLUSTER_CTAID_Z: return c->ctaid[2] % c->cl->dim[2];
	case SP_CLUSTER_NCTAID_X: return c->cl->solo ? 1 : c->cl->dim[0];
	case SP_CLUSTER_NCTAID_Y: return c->cl->dim[1];
	case SP_CLUSTER_NCTAID_Z: return c->cl->dim[2];
	case SP_DYN_SMEM: return l->smem;
	case SP_TOTAL_SMEM: return c->smem_end - c->lc->smem_base;
	default: return 0;
	}
}

static uint32_t
sym_addr(const EmuCta *c, int s)
{
	const EmuSym *y = &c->prog->sym[s];
	if (y->space == SPACE_SHARED)
		return EMU_SMEM_TAG(emu_rank(c)) | (y->dynamic ? c->dyn_addr : c->lc->smem_base + y->addr);
	return y->addr;
}

int
emu_get(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuOperand *o, uint64_t *v)
{
	switch (o->kind) {
	case OPK_REG:
		if (t->npend && t->pend[o->reg]) {
			uint8_t f = t->pend[o->reg];
			if ((f & PEND_HAZARD) && (f & (PEND_TCLD | PEND_WGMMA)))
				return emu_reg_hazard(c, t, in, o->reg, 0);
			/* a read is an access too: the next wgmma.mma_async on
			 * this register needs a wgmma.fence after it (PTX ISA
			 * §9.7.15.6.1, wgmma.fence) */
			if (f & PEND_WATCH)
				t->pend[o->reg] = f | PEND_DIRTY;
		}
		*v = t->r[o->reg];
		if (o->neg)
			*v = !(*v & 1);
		return 0;
	case OPK_IMM:
		*v = (uint64_t)o->imm;
		return 0;
	case OPK_SPECIAL:
		*v = special(c, t, o->reg);
		return 0;
	case OPK_SYM:
		*v = sym_addr(c, o->reg);
		return 0;
	default:
		return emu_fault(c, t, in, "operand of kind %d where a value is expected", o->kind);
	}
}

int
emu_set(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuOperand *o, uint64_t v)
{
	if (o->kind == OPK_SINK)
		return 0;
	if (o->kind != OPK_REG)
		return emu_fault(c, t, in, "destination is not a register");
	int r = o->reg;
	if (t->npend && t->pend[r]) {
		uint8_t f = t->pend[r];
		if (f & PEND_HAZARD)
			return emu_reg_hazard(c, t, in, r, 1);
		if (f & PEND_WATCH)
			t->pend[r] = f | PEND_DIRTY;
	}
	EmuType ty = c->prog->reg[r].type;
	int bits = emu_types[ty].bits;
	if (ty == T_PRED)
		v &= 1;
	else if (bits < 64)
		v &= (UINT64_C(1) << bits) - 1;
	t->r[r] = v;
	return 0;
}

int
emu_geti(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, uint64_t *v)
{
	return emu_get(c, t, in, emu_opnd(c, in, i), v);
}

int
emu_addr(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuOperand *o, uint64_t *a)
{
	if (o->kind != OPK_MEM)
		return emu_fault(c, t, in, "expected an address operand [..]");
	uint64_t base = 0;
	if (o->reg >= 0) {
		EmuOperand r = {0};
		r.kind = OPK_REG;
		r.reg = o->reg;
		if (emu_get(c, t, in, &r, &base))
			return EMU_STOP;
	} else if (o->sym >= 0) {
		base = sym_addr(c, o->sym);
	}
	*a = base + (uint64_t)o->imm;
	return 0;
}

int
emu_resolve(EmuCta *c, EmuThread *t, const EmuInsn *in, EmuSpace space, uint64_t addr,
            uint32_t bytes, int write, uint8_t **host, uint32_t *shared_addr)
{
	*shared_addr = UINT32_MAX;
	if (space == SPACE_GENERIC) {
		if (addr >= EMU_GENERIC_SHARED && addr - EMU_GENERIC_SHARED < EMU_WINDOW_SIZE) {
			space = SPACE_SHARED;
			addr -= EMU_GENERIC_SHARED;
		} else if (addr >= EMU_GENERIC_PARAM && addr - EMU_GENERIC_PARAM < EMU_WINDOW_SIZE) {
			space = SPACE_PARAM;
			addr -= EMU_GENERIC_PARAM;
		} else {
			space = SPACE_GLOBAL;
		}
	}
	uint32_t align = bytes > 16 ? 16 : bytes;
	if (align && (addr & (align - 1)))
		return emu_fault(c, t, in, "misaligned %u-byte access at 0x%" PRIx64, bytes, addr);
	if (space == SPACE_SHARED && emu_smem_own(c, t, in, addr, &addr))
		return EMU_STOP;
	if (space == SPACE_CLUSTER) {
		/* another CTA's shared memory: no shared_addr, so no
		 * async-proxy tag checks; ld/st check data races in its history
		 * (runtime/emu/README.md) */
		EmuCta *o;
		uint32_t local;
		if (emu_cluster_resolve(c, t, in, addr, &o, &local))
			return EMU_STOP;
		if (local + bytes > o->smem_end)
			return emu_fault(c, t, in, "shared::cluster access of %u bytes at 0x%x runs past the "
			                 "shared memory of CTA rank %d", bytes, local, o->rank);
		if (o != c) {
			*host = o->smem + local;
			return 0;
		}
		addr = local;
	}
	switch (space) {
	case SPACE_SHARED:
	case SPACE_CLUSTER:
		if (addr < c->smem_lo || addr + bytes > c->smem_end || addr + bytes < addr)
			return emu_fault(c, t, in,
			                 "shared memory access of %u bytes at 0x%" PRIx64 " is outside the "
			                 "CTA's shared memory [0x%x, 0x%x) (dynamic smem starts at 0x%x)",
			                 bytes, addr, c->smem_lo, c->smem_end, c->dyn_addr);
		*host = c->smem + addr;
		*shared_addr = (uint32_t)addr;
		return 0;
	case SPACE_PARAM:
		if (write)
			return emu_fault(c, t, in, "store to kernel parameter space");
		if (addr + bytes > c->prog->param_bytes)
			return emu_fault(c, t, in, "param access of %u bytes at offset %" PRIu64 " is past the "
			                 "%u bytes of kernel parameters", bytes, addr, c->prog->param_bytes);
		*host = c->lc->params + addr;
		return 0;
	case SPACE_GLOBAL: {
		uint8_t *h = emu_mem_at(c->lc->dev, addr, bytes);
		if (!h) {
			char why[256];
			emu_mem_explain(c->lc->dev, addr, bytes, why, sizeof why);
			return emu_fault(c, t, in, "out-of-bounds global %s of %u bytes: %s",
			                 write ? "store" : "load", bytes, why);
		}
		*host = h;
		return 0;
	}
	default:
		return emu_fault(c, t, in, "the %s state space is not supported by the emulator",
		                 space == SPACE_LOCAL ? "local" : "const");
	}
}

int
emu_rank(const EmuCta *c)
{
	return c->cl->solo ? 0 : c->rank;
}

int
emu_cluster_n(const EmuCta *c)
{
	return c->cl->solo ? 1 : c->cl->n;
}

/* a shared::cta address: the executing CTA's rank bits, or none outside a
 * cluster (emu.h) */
int
emu_smem_own(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t a, uint64_t *local)
{
	if (a >> 28 || EMU_SMEM_RANK(a) != emu_rank(c))
		return emu_fault(c, t, in, "shared::cta address 0x%" PRIx64 " does not name this CTA: a "
		                 "CTA's shared addresses carry its %%cluster_ctarank (%d) in bits 24-27, and "
		                 "another CTA's shared memory is reached through shared::cluster "
		                 "(docs/hardware.md, \"Shared addresses in a cluster\")", a, emu_rank(c));
	*local = EMU_SMEM_LOCAL(a);
	return 0;
}

int
emu_shared_addr(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, uint32_t *out)
{
	uint64_t a;
	if (emu_addr(c, t, in, emu_opnd(c, in, i), &a))
		return EMU_STOP;
	if (in->space == SPACE_GENERIC) {
		if (a < EMU_GENERIC_SHARED || a - EMU_GENERIC_SHARED >= EMU_WINDOW_SIZE)
			return emu_fault(c, t, in, "generic address 0x%" PRIx64 " is not in the shared "
			                 "window (%s needs shared memory)", a, in->def->name);
		a -= EMU_GENERIC_SHARED;
	}
	if (emu_smem_own(c, t, in, a, &a))
		return EMU_STOP;
	if (a < c->smem_lo || a >= c->smem_end)
		return emu_fault(c, t, in, "shared address 0x%" PRIx64 " is outside the CTA's shared "
		                 "memory [0x%x, 0x%x)", a, c->smem_lo, c->smem_end);
	*out = (uint32_t)a;
	return 0;
}

/* Operand i must be the same in every lane (.sync.aligned, PTX ISA §9.7.16.5). */
int
emu_uniform(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes, int i, uint64_t *v)
{
	EmuThread *base = &c->t[w->id * 32];
	int first = -1;
	uint64_t v0 = 0;
	const EmuOperand *o = emu_opnd(c, in, i);
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		uint64_t x;
		if (o->kind == OPK_MEM) {
			if (emu_addr(c, &base[l], in, o, &x))
				return EMU_STOP;
		} else if (emu_get(c, &base[l], in, o, &x)) {
			return EMU_STOP;
		}
		if (first < 0) {
			first = l;
			v0 = x;
		} else if (x != v0) {
			return emu_hazard(c, &base[l], in, "non-uniform-sync-aligned",
			                  "operand %d of %s differs across the warp: lane %d has 0x%" PRIx64
			                  ", lane %d has 0x%" PRIx64 "; it must be warp-uniform",
			                  i + 1, in->def->name, first, v0, l, x);
		}
	}
	*v = v0;
	return 0;
}

/* ---- shared::cluster addresses (docs/cta-pair.md, "Clusters") ---------------- */

int
emu_cluster_resolve(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t a, EmuCta **owner,
                    uint32_t *out)
{
	if (in->space == SPACE_GENERIC) {
		if (a < EMU_GENERIC_SHARED || a - EMU_GENERIC_SHARED >= EMU_WINDOW_SIZE)
			return emu_fault(c, t, in, "generic address 0x%" PRIx64 " is not in the shared "
			                 "window (%s needs shared memory)", a, in->def->name);
		a -= EMU_GENERIC_SHARED;
	}
	EmuCta *o = c;
	uint32_t local = (uint32_t)a;
	if (a >> 28)
		return emu_fault(c, t, in, "shared::cluster address 0x%" PRIx64 " has bits above 27 "
		                 "(a rank in bits 24-27, the offset below: emu.h)", a);
	int r = EMU_SMEM_RANK(local);
	if (r >= emu_cluster_n(c))
		return emu_fault(c, t, in, "shared::cluster address 0x%x names CTA rank %d of a "
		                 "cluster of %d", local, r, emu_cluster_n(c));
	o = c->cl->solo ? c : c->cl->cta[r];
	local = EMU_SMEM_LOCAL(local);
	if (o != c && !t->cbar_synced)
		return emu_hazard(c, t, in, "cluster",
		                  "%s accesses the shared memory of CTA rank %d (0x%x) before this thread "
		                  "completed a barrier.cluster.wait: a CTA of the cluster may not have "
		                  "started, and its barrier inits are not visible, until every CTA "
		                  "arrived at a cluster barrier (PTX ISA §9.7.13.2, docs/cta-pair.md)",
		                  in->def->name, o->rank, local);
	if (o != c && o->finished)
		return emu_hazard(c, t, in, "cluster",
		                  "%s accesses the shared memory of CTA rank %d (0x%x) after that CTA "
		                  "exited: a CTA's shared memory must stay alive while the cluster uses "
		                  "it (barrier.cluster.arrive/wait before exit, PTX ISA §9.7.13.2)",
		                  in->def->name, o->rank, local);
	if (local < o->smem_lo || local >= o->smem_end)
		return emu_fault(c, t, in, "shared address 0x%x is outside the shared memory [0x%x, "
		                 "0x%x) of CTA rank %d", local, o->smem_lo, o->smem_end, o->rank);
	*owner = o;
	*out = local;
	return 0;
}

int
emu_cluster_addr(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, EmuCta **owner,
                 uint32_t *out)
{
	uint64_t a;
	if (emu_addr(c, t, in, emu_opnd(c, in, i), &a))
		return EMU_STOP;
	return emu_cluster_resolve(c, t, in, a, owner, out);
}
