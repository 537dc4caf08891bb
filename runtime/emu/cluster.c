/* Clusters (PTX ISA §5.2.3 "Cluster of Cooperative Thread Arrays"): the
 * addresses of distributed shared memory (§5.1.3), mapa (§9.7.9.20) and
 * barrier.cluster (§9.7.13.2).
 *
 * A shared::cluster address is EMU_DSMEM_BIT | rank << 24 | window address
 * (emu.h); a plain shared::cta address names the executing CTA. Accessing a
 * CTA's shared memory after it exited is a hazard [cluster]: the PTX ISA
 * requires the owner to stay resident (a barrier.cluster before exit). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

EmuCta *
emu_slot_cta(const EmuCta *c, int slot)
{
	const EmuCluster *cl = c->cl;
	int r = slot / cl->per;
	return cl->cta[r < cl->n ? r : 0];
}

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
	if (a >> 32)
		return emu_fault(c, t, in, "shared::cluster address 0x%" PRIx64 " has bits above 31", a);
	if (local & EMU_DSMEM_BIT) {
		if (in->space != SPACE_CLUSTER)
			return emu_fault(c, t, in, "address 0x%x from mapa names another CTA's shared "
			                 "memory, but %s uses the shared::cta window (PTX ISA §5.1.3)",
			                 local, in->def->name);
		int r = EMU_DSMEM_RANK(local);
		if (r >= c->cl->n)
			return emu_fault(c, t, in, "shared::cluster address 0x%x names CTA rank %d of a "
			                 "cluster of %d", local, r, c->cl->n);
		o = c->cl->cta[r];
		local = EMU_DSMEM_LOCAL(local);
	}
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

/* ---- mapa ------------------------------------------------------------------------------- */

int
emu_chk_mapa(EmuInsn *in, EmuParse *p)
{
	if (in->space != SPACE_CLUSTER)
		return emu_parse_fail(p, "mapa: the emulator supports mapa.shared::cluster only (a "
		                      "generic DSMEM address has no window here)");
	if (in->ntypes != 1 || (in->t[0] != T_U32 && in->t[0] != T_B32))
		return emu_parse_fail(p, "mapa.shared::cluster needs .u32");
	return 0;
}

/* mapa.shared::cluster.u32 d, a, rank: a's variable in CTA `rank` */
int
emu_op_mapa(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a, r;
	if (emu_geti(c, t, in, 1, &a) || emu_geti(c, t, in, 2, &r))
		return EMU_STOP;
	uint32_t local = (uint32_t)a & EMU_DSMEM_BIT ? EMU_DSMEM_LOCAL((uint32_t)a) : (uint32_t)a;
	if (r >= (uint64_t)c->cl->n)
		return emu_fault(c, t, in, "mapa to CTA rank %" PRIu64 " of a cluster of %d", r, c->cl->n);
	if (local < c->smem_lo || local >= c->smem_end)
		return emu_fault(c, t, in, "mapa of 0x%x, which is not a shared memory address of "
		                 "this CTA [0x%x, 0x%x)", local, c->smem_lo, c->smem_end);
	return emu_set(c, t, in, emu_opnd(c, in, 0), EMU_DSMEM_BIT | (uint32_t)r << 24 | local)
	               ? EMU_STOP : EMU_NEXT;
}

/* ---- barrier.cluster ------------------------------------------------------------------------ */

/* Every live thread of the cluster arrived: the phase completes. */
int
emu_cluster_bar_try(EmuCluster *cl)
{
	int live = 0;
	for (int r = 0; r < cl->n; r++)
		live += cl->cta[r]->live;
	if (!cl->bar_arrived || cl->bar_arrived < live)
		return 0;
	cl->bar_phase++;
	cl->bar_arrived = 0;
	emu_vc_join(cl->cta[0], cl->bar_done_vc, cl->bar_vc);
	memset(cl->bar_vc, 0, (size_t)cl->cta[0]->nslots * sizeof *cl->bar_vc);
	for (int r = 0; r < cl->n; r++) {
		EmuCta *c = cl->cta[r];
		c->gen++;
		for (int i = 0; i < c->nthreads; i++)
			if (c->t[i].state == TS_CBAR)
				c->t[i].state = TS_READY;
	}
	return 1;
}

int
emu_op_cluster_arrive(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (t->cbar_pending)
		return emu_hazard(c, t, in, "cluster",
		                  "barrier.cluster.arrive twice without a barrier.cluster.wait between "
		                  "(PTX ISA §9.7.13.2: each arrive is followed by its wait)");
	t->cbar_pending = 1;
	t->cbar_phase = c->cl->bar_phase;
	/* .release is the default; .relaxed releases nothing */
	emu_release(c, t, in->order == 3 ? NULL : c->cl->bar_vc);
	c->cl->bar_arrived++;
	emu_cluster_bar_try(c->cl);
	return EMU_NEXT;
}

int
emu_op_cluster_wait(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (!t->cbar_pending)
		return emu_hazard(c, t, in, "cluster",
		                  "barrier.cluster.wait without a barrier.cluster.arrive of this thread "
		                  "before it (PTX ISA §9.7.13.2)");
	if (c->cl->bar_phase <= t->cbar_phase) {
		t->state = TS_CBAR;
		t->wait_line = in->line;
		return EMU_BLOCK;
	}
	t->cbar_pending = 0;
	t->cbar_synced = 1;
	t->state = TS_READY;
	emu_acquire(c, t, c->cl->bar_done_vc);
	return EMU_NEXT;
}
