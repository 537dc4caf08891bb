/* Named barriers (bar.sync, barrier.sync, bar.arrive; PTX ISA §9.7.13.1):
 * arrival counts and the clocks the completion hands to the waiters. */
#include <string.h>

#include "emu.h"

static EmuClock *
bar_vc(EmuCta *c, int id)
{
	return c->clocks + (size_t)(2 * c->nthreads + 2 * EMU_MAX_MBAR + id) * (size_t)c->nslots;
}

int
emu_bar_try_complete(EmuCta *c, int id)
{
	EmuBar *b = &c->bar[id];
	int expected = b->expected < 0 ? c->live : b->expected;
	if (b->expected == 0 || b->arrived < expected)
		return 0;
	EmuClock *vc = bar_vc(c, id);
	for (int i = 0; i < c->nthreads; i++) {
		EmuThread *t = &c->t[i];
		if (t->state == TS_BAR && t->wait_bar == id) {
			emu_acquire(c, t, vc);
			t->synced_line = b->line;
			t->state = TS_READY;
			t->pc++;
		}
	}
	memset(vc, 0, (size_t)c->nslots * sizeof *vc);
	b->expected = 0;
	b->arrived = 0;
	c->gen++;
	return 0;
}

/* Arrival at barrier id; count < 0 when the instruction names no count
 * (all threads of the CTA). wait: bar.sync vs bar.arrive. */
int
emu_bar_arrive(EmuCta *c, EmuThread *t, const EmuInsn *in, int id, int count, int wait)
{
	if (id < 0 || id > 15)
		return emu_fault(c, t, in, "barrier %d: named barriers are 0..15", id);
	EmuBar *b = &c->bar[id];
	int want = count < 0 ? -1 : count;
	if (count >= 0 && (count % 32 || count == 0 || count > c->nthreads))
		return emu_hazard(c, t, in, "barrier",
		                  "barrier %d: thread count %d must be a positive multiple of 32 and at "
		                  "most the CTA's %d threads (PTX ISA §9.7.13.1)", id, count, c->nthreads);
	if (b->expected == 0) {
		b->expected = want;
		b->line = in->line;
	} else if (b->expected != want) {
		return emu_hazard(c, t, in, "barrier",
		                  "barrier %d: this arrival expects %d threads, an earlier one at PTX line "
		                  "%d expects %d", id, count, b->line, b->expected);
	}
	b->arrived++;
	emu_release(c, t, bar_vc(c, id));
	c->gen++;
	if (wait) {
		t->state = TS_BAR;
		t->wait_bar = id;
		t->wait_line = in->line;
	}
	int expected = b->expected < 0 ? c->live : b->expected;
	if (b->arrived >= expected) {
		if (emu_bar_try_complete(c, id))
			return EMU_STOP;
		if (!wait)
			t->pc++; /* waiters were advanced by the completion */
		return EMU_JUMP;
	}
	if (wait)
		return EMU_BLOCK;
	t->pc++;
	return EMU_JUMP;
}
