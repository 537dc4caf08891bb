/* mbarrier objects (PTX ISA §9.7.13.15; docs/hardware.md, "mbarrier").
 *
 * State per barrier: the arrivals still missing in the current phase, the
 * transaction count, and the number of completed phases (its parity is the
 * phase parity try_wait.parity tests). A phase completes when both pending
 * arrivals and tx-count reach zero; the arrival count then reloads. The
 * objects live beside shared memory, keyed by their address; the 8 bytes in
 * smem are marked so a generic store over a live barrier is reported. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

enum {
	MB_EXPECT_TX = 1, /* .expect_tx */
	MB_PARITY = 2,    /* .parity */
	MB_NOCOMPLETE = 4,
};

int
emu_mod_mbar(EmuInsn *in, const char *m, EmuParse *p)
{
	if (strcmp(m, "expect_tx") == 0)
		in->aux[0] |= MB_EXPECT_TX;
	else if (strcmp(m, "parity") == 0)
		in->aux[0] |= MB_PARITY;
	else if (strcmp(m, "noComplete") == 0)
		in->aux[0] |= MB_NOCOMPLETE;
	else
		return 0;
	return 1;
}

int
emu_chk_mbar(EmuInsn *in, EmuParse *p)
{
	if (in->space == SPACE_GLOBAL || in->space == SPACE_LOCAL || in->space == SPACE_PARAM)
		return emu_parse_fail(p, "%s: mbarrier objects live in shared memory", in->def->name);
	return 0;
}

EmuMbar *
emu_mbar_find(EmuCta *c, uint32_t addr)
{
	for (int i = 0; i < c->nmbar; i++)
		if (c->mbar[i].live && c->mbar[i].addr == addr)
			return &c->mbar[i];
	return NULL;
}

void
emu_mbar_describe(const EmuCta *c, const EmuMbar *m, char *buf, size_t n)
{
	(void)c;
	snprintf(buf, n, "mbarrier state: %" PRIu64 " phases completed (current parity %u), %d of %u "
	         "arrivals pending, tx-count %" PRId64 " (initialized at PTX line %d)",
	         m->phases, (unsigned)(m->phases & 1), m->pending, m->expected, m->tx, m->init_line);
}

static void
wake(EmuCta *c, uint32_t addr)
{
	for (int i = 0; i < c->nthreads; i++) {
		EmuThread *t = &c->t[i];
		if (t->state == TS_MBAR && t->wait_addr == addr)
			t->state = TS_READY;
	}
}

static void
complete_phase(EmuCta *c, EmuMbar *m)
{
	m->phases++;
	m->pending = (int32_t)m->expected;
	m->tx = 0;
	/* observers of this phase know its arrivals and that it completed */
	m->pend_vc[m->slot] = (EmuClock)(m->cbase + m->phases);
	emu_vc_join(c, m->done_vc, m->pend_vc);
	memset(m->pend_vc, 0, (size_t)c->nslots * sizeof *m->pend_vc);
	c->gen++;
	wake(c, m->addr);
}

void
emu_mbar_arrive(EmuCta *c, EmuMbar *m, uint32_t count, const EmuClock *rel)
{
	if (rel)
		emu_vc_join(c, m->pend_vc, rel);
	m->pending -= (int32_t)count;
	c->gen++;
	if (m->pending == 0 && m->tx == 0)
		complete_phase(c, m);
}

void
emu_mbar_tx(EmuCta *c, EmuMbar *m, int64_t delta)
{
	m->tx += delta;
	c->gen++;
	if (m->pending == 0 && m->tx == 0)
		complete_phase(c, m);
}

int
emu_mbar_visible(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuMbar *m)
{
	if (t->slot == m->init_slot || t->vc[m->init_slot] >= m->init_val)
		return 0;
	char text[200];
	emu_line_text(c->prog, m->init_line, text, sizeof text);
	return emu_hazard(c, t, in, "mbarrier",
	                  "the mbarrier at smem 0x%x is used before its initialization is visible to "
	                  "this thread: mbarrier.init at PTX line %d `%s` (thread %d) is not ordered "
	                  "before this use by a barrier (fence.mbarrier_init + bar.sync)",
	                  m->addr, m->init_line, text, m->init_tid);
}

/* The mbarrier operand i names; *oc gets the CTA that holds it (another
 * CTA of the cluster for a .shared::cluster address from mapa). */
static int
lookup_in(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, EmuMbar **out, EmuCta **oc)
{
	uint32_t a;
	*out = NULL;
	*oc = c;
	if (in->space == SPACE_CLUSTER ? emu_cluster_addr(c, t, in, i, oc, &a)
	                               : emu_shared_addr(c, t, in, i, &a))
		return EMU_STOP;
	EmuMbar *m = emu_mbar_find(*oc, a);
	if (!m)
		return emu_hazard(c, t, in, "mbarrier",
		                  "no initialized mbarrier at smem 0x%x (kg_smem%+d) of CTA rank %d: "
		                  "mbarrier.init it (and make the init visible with a fence/barrier) "
		                  "before use", a, (int)(a - c->dyn_addr), (*oc)->rank);
	if (emu_mbar_visible(*oc, t, in, m))
		return EMU_STOP;
	*out = m;
	return 0;
}

static int
lookup(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, EmuMbar **out)
{
	EmuCta *oc;
	if (lookup_in(c, t, in, i, out, &oc))
		return EMU_STOP;
	if (oc != c)
		return emu_fault(c, t, in, "%s on the mbarrier of CTA rank %d: only arrive, expect_tx "
		                 "and complete_tx take a remote mbarrier (PTX ISA §9.7.13.15)",
		                 in->def->name, oc->rank);
	return 0;
}

int
emu_op_mbar_init(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint32_t a;
	uint64_t count;
	if (emu_shared_addr(c, t, in, 0, &a) || emu_geti(c, t, in, 1, &count))
		return EMU_STOP;
	if (a & 7)
		return emu_fault(c, t, in, "mbarrier at smem 0x%x is not 8-byte aligned", a);
	if (count == 0 || count > (1u << 20) - 1)
		return emu_hazard(c, t, in, "mbarrier", "mbarrier.init count %" PRIu64 " is not in "
		                  "1..2^20-1 (docs/hardware.md, \"mbarrier\")", count);
	EmuMbar *m = emu_mbar_find(c, a);
	if (m) {
		for (int i = 0; i < c->nthreads; i++)
			if (c->t[i].state == TS_MBAR && c->t[i].wait_addr == a)
				return emu_hazard(c, t, in, "mbarrier",
				                  "mbarrier.init of the live mbarrier at smem 0x%x while thread %d "
				                  "waits on it", a, i);
	} else {
		if (c->nmbar == EMU_MAX_MBAR) {
			/* reuse an invalidated slot */
			for (int i = 0; i < c->nmbar && !m; i++)
				if (!c->mbar[i].live)
					m = &c->mbar[i];
			if (!m)
				return emu_fault(c, t, in, "more than %d mbarriers in one CTA", EMU_MAX_MBAR);
		} else {
			m = &c->mbar[c->nmbar++];
		}
	}
	/* the slot's clock keeps counting across re-inits so old tags stay valid */
	int idx = (int)(m - c->mbar);
	m->cbase += m->phases;
	m->addr = a;
	m->live = 1;
	m->slot = c->slot0 + c->nthreads + idx;
	m->expected = (uint32_t)count;
	m->pending = (int32_t)count;
	m->tx = 0;
	m->phases = 0;
	m->init_line = in->line;
	m->init_tid = t->tid;
	m->init_val = t->vc[t->slot];
	m->init_slot = t->slot;
	memset(m->pend_vc, 0, (size_t)c->nslots * sizeof *m->pend_vc);
	/* a store by the initializing thread: others may use the barrier once
	 * a barrier orders the init before them (emu_mbar_visible) */
	c->sflags[a >> 4] |= SF_MBAR;
	c->gen++;
	return EMU_NEXT;
}

static int
over_arrival(EmuCta *c, EmuThread *t, const EmuInsn *in, EmuMbar *m)
{
	char st[256];
	emu_mbar_describe(c, m, st, sizeof st);
	return emu_hazard(c, t, in, "mbarrier",
	                  "more arrivals than the mbarrier at smem 0x%x expects in its current phase "
	                  "(its count is %u; an arrival count or a thread count is wrong): %s",
	                  m->addr, m->expected, st);
}

int
emu_op_mbar_arrive(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuMbar *m;
	EmuCta *oc;
	if (lookup_in(c, t, in, 1, &m, &oc))
		return EMU_STOP;
	uint64_t n = 1;
	if (in->nop == 3 && emu_geti(c, t, in, 2, &n))
		return EMU_STOP;
	uint64_t state = m->phases;
	if (in->aux[0] & MB_EXPECT_TX) {
		if (in->nop != 3)
			return emu_fault(c, t, in, "arrive.expect_tx needs a byte count");
		if (m->tx + (int64_t)n > (1 << 20) - 1)
			return emu_hazard(c, t, in, "mbarrier-tx",
			                  "expect_tx of %" PRIu64 " bytes overflows the tx-count of the "
			                  "mbarrier at smem 0x%x (limit 2^20-1)", n, m->addr);
		m->tx_line = in->line;
		m->tx_tid = t->tid;
		m->tx += (int64_t)n;
		n = 1;
	}
	int drop = strcmp(in->def->name, "mbarrier.arrive_drop") == 0;
	if ((int64_t)n > m->pending)
		return over_arrival(c, t, in, m);
	emu_release(c, t, m->pend_vc);
	if (drop)
		m->expected -= (uint32_t)n;
	emu_mbar_arrive(oc, m, (uint32_t)n, NULL);
	if (emu_set(c, t, in, emu_opnd(c, in, 0), state))
		return EMU_STOP;
	return EMU_NEXT;
}

int
emu_op_mbar_expect_tx(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuMbar *m;
	EmuCta *oc;
	uint64_t n;
	if (lookup_in(c, t, in, 0, &m, &oc) || emu_geti(c, t, in, 1, &n))
		return EMU_STOP;
	m->tx_line = in->line;
	m->tx_tid = t->tid;
	emu_mbar_tx(oc, m, (int64_t)n);
	return EMU_NEXT;
}

int
emu_op_mbar_complete_tx(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuMbar *m;
	EmuCta *oc;
	uint64_t n;
	if (lookup_in(c, t, in, 0, &m, &oc) || emu_geti(c, t, in, 1, &n))
		return EMU_STOP;
	emu_release(c, t, m->pend_vc);
	emu_mbar_tx(oc, m, -(int64_t)n);
	return EMU_NEXT;
}

/* try_wait.parity P: true once the phase with parity P has completed, i.e.
 * the current phase's parity differs from P. try_wait{.parity} may also
 * return false after a timeout (docs/hardware.md, "mbarrier"), which the scheduler
 * grants once when nothing else can run; test_wait never blocks. */
int
emu_op_mbar_wait(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuMbar *m;
	uint64_t arg;
	if (lookup(c, t, in, 1, &m) || emu_geti(c, t, in, 2, &arg))
		return EMU_STOP;
	int done;
	if (in->aux[0] & MB_PARITY)
		done = (m->phases & 1) != (arg & 1);
	else
		done = m->phases > arg;
	int test = strcmp(in->def->name, "mbarrier.test_wait") == 0;
	if (done) {
		t->timeout = 0;
		emu_acquire(c, t, m->done_vc);
		t->synced_line = in->line;
		if (emu_set(c, t, in, emu_opnd(c, in, 0), 1))
			return EMU_STOP;
		return EMU_NEXT;
	}
	if (test || t->timeout) {
		t->timeout = 0;
		if (emu_set(c, t, in, emu_opnd(c, in, 0), 0))
			return EMU_STOP;
		if (test) {
			/* a polling loop: run others until the barrier moves */
			t->state = TS_MBAR;
			t->wait_addr = m->addr;
			t->wait_parity = (uint32_t)(arg & 1);
			t->wait_line = in->line;
		}
		return EMU_NEXT;
	}
	t->state = TS_MBAR;
	t->wait_addr = m->addr;
	t->wait_parity = (uint32_t)(arg & 1);
	t->wait_line = in->line;
	return EMU_BLOCK;
}

int
emu_op_mbar_inval(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuMbar *m;
	if (lookup(c, t, in, 0, &m))
		return EMU_STOP;
	for (int i = 0; i < c->nthreads; i++)
		if (c->t[i].state == TS_MBAR && c->t[i].wait_addr == m->addr)
			return emu_hazard(c, t, in, "mbarrier",
			                  "mbarrier.inval while thread %d waits on it", i);
	m->live = 0;
	int other = 0;
	for (int i = 0; i < c->nmbar; i++)
		if (c->mbar[i].live && c->mbar[i].addr >> 4 == m->addr >> 4)
			other = 1;
	if (!other)
		c->sflags[m->addr >> 4] &= (uint8_t)~SF_MBAR;
	c->gen++;
	return EMU_NEXT;
}
