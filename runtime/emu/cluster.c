/* Clusters (PTX ISA §5.2.3 "Cluster of Cooperative Thread Arrays"): mapa
 * (§9.7.9.20) and barrier.cluster (§9.7.13.2). A shared address is
 * rank << 24 | offset (emu.h); operand.c resolves them. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

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
	uint64_t local;
	if (emu_smem_own(c, t, in, a, &local))
		return EMU_STOP;
	if (r >= (uint64_t)emu_cluster_n(c))
		return emu_fault(c, t, in, "mapa to CTA rank %" PRIu64 " of a cluster of %d", r, emu_cluster_n(c));
	if (local < c->smem_lo || local >= c->smem_end)
		return emu_fault(c, t, in, "mapa of 0x%" PRIx64 ", which is not a shared memory address of "
		                 "this CTA [0x%x, 0x%x)", local, c->smem_lo, c->smem_end);
	return emu_set(c, t, in, emu_opnd(c, in, 0), EMU_SMEM_TAG(r) | (uint32_t)local)
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
	if (c->cl->solo)
		return emu_fault(c, t, in, "barrier.cluster in a co-resident group (KRT_EMU_CORESIDENT): "
		                 "the group interleaves CTAs that are each a cluster of one, and its "
		                 "cluster barrier would join them (runtime/emu/README.md)");
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
