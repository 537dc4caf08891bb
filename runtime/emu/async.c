/* The CTA's queue of async operations (TMA, bulk copies, tcgen05 pipe ops).
 * Each queued op carries its own completion function, set by the unit that
 * issued it, so the queue knows none of them. */
#include <stdlib.h>
#include <string.h>

#include "emu.h"

void
emu_async_push(EmuCta *c, const EmuAsync *a)
{
	if (c->naq == c->capaq) {
		int nc = c->capaq ? c->capaq * 2 : 64;
		EmuAsync *nq = realloc(c->aq, (size_t)nc * sizeof *nq);
		if (!nq) {
			emu_fault(c, NULL, a->in, "out of host memory");
			return;
		}
		c->aq = nq;
		c->capaq = nc;
	}
	c->aq[c->naq] = *a;
	c->aq[c->naq].seq = c->aseq++;
	c->naq++;
	c->gen++;
}

/* A queued op may complete now if nothing it follows is still queued:
 * tcgen05 ops of one issue pipe complete in order (PTX ISA §9.7.16.6.2:
 * mma->mma and mma->commit are pipelined). */
static int
ready(const EmuCta *c, int i)
{
	const EmuAsync *a = &c->aq[i];
	if (a->agent < 0)
		return 1;
	for (int k = 0; k < i; k++)
		if (c->aq[k].agent == a->agent)
			return 0;
	return 1;
}

void
emu_async_free(EmuAsync *a)
{
	if (a->drop)
		a->drop(a);
	free(a->vc);
	free(a->data);
}

static int
complete(EmuCta *c, int i)
{
	EmuAsync a = c->aq[i];
	memmove(&c->aq[i], &c->aq[i + 1], (size_t)(c->naq - i - 1) * sizeof *c->aq);
	c->naq--;
	c->gen++;
	int rc = a.done(c, &a);
	emu_async_free(&a);
	return rc;
}

int
emu_async_complete_one(EmuCta *c)
{
	int pick = -1, nready = 0;
	for (int i = 0; i < c->naq; i++) {
		if (!ready(c, i))
			continue;
		nready++;
		if (pick < 0)
			pick = i;
		else if (c->lc->seed && emu_rand(c) % (uint64_t)nready == 0)
			pick = i;
	}
	if (pick < 0)
		return emu_fault(c, NULL, NULL, "async queue stuck (emulator bug)");
	return complete(c, pick);
}

int
emu_async_drain(EmuCta *c, int tid, unsigned kinds, int maxgroup)
{
	for (int i = 0; i < c->naq;) {
		EmuAsync *a = &c->aq[i];
		if ((tid < 0 || a->tid == tid) && (kinds >> a->kind & 1) && a->group <= maxgroup) {
			if (complete(c, i))
				return EMU_STOP;
			continue;
		}
		i++;
	}
	return 0;
}
