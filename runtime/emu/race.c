/* Data races between the generic accesses of the threads of a CTA.
 *
 * PTX ISA §8 "Memory consistency model": two accesses to the same location,
 * at least one a write, by different threads, with neither ordered before
 * the other by a synchronization chain (bar.sync / bar.arrive pairs,
 * mbarrier arrive -> a wait that observes the phase, warp collectives) form
 * a data race, and the read may see either value. The thread clocks of hb.c
 * say what is ordered; this file keeps, per 4-byte word of shared memory and
 * per touched 4-byte word of global memory, the epoch (thread, own clock) and
 * the bytes of the last write and of up to EMU_RACE_READERS unordered reads
 * (two threads storing the two bf16 halves of one word do not conflict;
 * when they are unordered the word keeps only the later write, which can
 * only miss a race on the other half, never invent one) (FastTrack,
 * Flanagan & Freund 2009: a read ordered after an earlier one subsumes it,
 * so the list only holds concurrent readers; when it is full the oldest is
 * dropped, which can only miss a race, never invent one).
 *
 * Threads are named by their vector-clock slot (hb.c), so the CTAs of a
 * cluster, which run together, share one history: a CTA's shared memory
 * keeps its own (generic ld/st.shared::cluster from other CTAs included),
 * global memory one table per cluster (the first CTA's).
 *
 * Strong accesses (atom/red, and ld/st with .volatile, .relaxed, .acquire
 * or .release) are morally strong with each other when each one's scope
 * includes the other's thread (PTX ISA §8, "Morally strong operations"),
 * and two such never race; a strong access and a weak one do, unordered: a
 * red.shared count read by a plain load with no barrier between them is a
 * data race. The threads here are one cluster's, so .cluster, .gpu and
 * .sys (and no scope: atom's default is .gpu, .volatile's .sys) include
 * all of them; .cta only its own CTA's, so two .cta atomics on one word
 * from two CTAs of a cluster race. Async-proxy
 * accesses (TMA, MMA operands) have their own tags in hb.c; an async write
 * into shared memory must be ordered after the generic accesses of the
 * words it overwrites and then starts their history afresh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

enum { NO_SLOT = 0xffff };

static void
fresh(uint32_t gen, EmuRaceWord *e)
{
	e->gen = gen;
	e->wslot = NO_SLOT;
	e->nr = 0;
}

static int
covered(const EmuThread *t, uint16_t slot, uint32_t clk)
{
	return slot == (uint16_t)t->slot || t->vc[slot] >= clk;
}

static int
report(EmuCta *c, EmuThread *t, const EmuInsn *in, const char *space, uint64_t addr,
       int write, int other_write, uint16_t other_slot, int32_t other_line)
{
	char text[200], cta[48] = "";
	emu_line_text(c->prog, other_line, text, sizeof text);
	const EmuCta *oc = EMU_SLOT_CTA(c, other_slot);
	int tid = other_slot - oc->slot0;
	if (c->cl->n > 1)
		snprintf(cta, sizeof cta, " of CTA rank %d", oc->rank);
	return emu_hazard(c, t, in, "data-race",
	                  "this %s of %s 0x%llx races with the %s by thread %d (warp %d)%s at PTX "
	                  "line %d `%s`: nothing orders the two (no bar.sync/bar.arrive pair, "
	                  "mbarrier arrive -> wait, warp collective or cluster barrier between "
	                  "them; PTX ISA §8 \"Memory consistency model\", data races)",
	                  write ? "write" : "read", space, (unsigned long long)addr,
	                  other_write ? "write" : "read", tid, tid / 32, cta, other_line, text);
}

/* Whether an access of strength bits sk by thread t and one of bits osk
 * by the thread of clock slot `slot` are morally strong with each other:
 * both strong, and a .cta one only with a thread of its own CTA. */
static int
moral(const EmuCta *c, const EmuThread *t, int sk, uint16_t slot, int osk)
{
	if (!(sk & osk & EMU_RACE_STRONG))
		return 0;
	return !((sk | osk) & EMU_RACE_CTA) || EMU_SLOT_CTA(c, t->slot) == EMU_SLOT_CTA(c, slot);
}

/* Checks one access (kind: EMU_RACE_WRITE, EMU_RACE_STRONG and
 * EMU_RACE_CTA bits) of bytes `mask` of word e (of a history of generation
 * gen) against its history, then records it; a race is reported on c. Two
 * morally strong accesses do not conflict: an unordered strong write over
 * a strong one keeps only the later, which can only miss a race, never
 * invent one. */
static int
access(EmuCta *c, EmuThread *t, const EmuInsn *in, EmuRaceWord *e, uint32_t gen,
       const char *space, uint64_t addr, int kind, uint8_t mask)
{
	int write = (kind & EMU_RACE_WRITE) != 0, strong = kind & (EMU_RACE_STRONG | EMU_RACE_CTA);
	if (e->gen != gen)
		fresh(gen, e);
	if (e->wslot != NO_SLOT && (e->wmask & mask) && !covered(t, e->wslot, e->wclk) &&
	    !moral(c, t, strong, e->wslot, e->wstrong))
		return report(c, t, in, space, addr, write, 1, e->wslot, e->wline);
	uint32_t now = (uint32_t)t->vc[t->slot];
	int k = 0;
	if (write) {
		for (int i = 0; i < e->nr; i++) {
			int ordered = covered(t, e->rslot[i], e->rclk[i]);
			if (!ordered && (e->rmask[i] & mask) && !moral(c, t, strong, e->rslot[i], e->rstrong[i]))
				return report(c, t, in, space, addr, 1, 0, e->rslot[i], e->rline[i]);
			if (!ordered) { /* a concurrent read of other bytes, or a strong one, stays */
				e->rslot[k] = e->rslot[i];
				e->rclk[k] = e->rclk[i];
				e->rline[k] = e->rline[i];
				e->rmask[k] = e->rmask[i];
				e->rstrong[k] = e->rstrong[i];
				k++;
			}
		}
		e->nr = (uint8_t)k;
		e->wslot = (uint16_t)t->slot;
		e->wclk = now;
		e->wline = in->line;
		e->wmask = mask;
		e->wstrong = (uint8_t)strong;
		return 0;
	}
	for (int i = 0; i < e->nr; i++) /* drop readers this read is ordered after */
		if (!covered(t, e->rslot[i], e->rclk[i])) {
			e->rslot[k] = e->rslot[i];
			e->rclk[k] = e->rclk[i];
			e->rline[k] = e->rline[i];
			e->rmask[k] = e->rmask[i];
			e->rstrong[k] = e->rstrong[i];
			k++;
		} else {
			mask |= e->rmask[i]; /* a write after this read is after that one */
		}
	if (k == EMU_RACE_READERS) {
		memmove(&e->rslot[0], &e->rslot[1], (EMU_RACE_READERS - 1) * sizeof e->rslot[0]);
		memmove(&e->rclk[0], &e->rclk[1], (EMU_RACE_READERS - 1) * sizeof e->rclk[0]);
		memmove(&e->rline[0], &e->rline[1], (EMU_RACE_READERS - 1) * sizeof e->rline[0]);
		memmove(&e->rmask[0], &e->rmask[1], (EMU_RACE_READERS - 1) * sizeof e->rmask[0]);
		memmove(&e->rstrong[0], &e->rstrong[1], (EMU_RACE_READERS - 1) * sizeof e->rstrong[0]);
		k--;
	}
	e->rslot[k] = (uint16_t)t->slot;
	e->rclk[k] = now;
	e->rline[k] = in->line;
	e->rmask[k] = mask;
	e->rstrong[k] = (uint8_t)strong;
	e->nr = (uint8_t)(k + 1);
	return 0;
}

/* The bytes of word w that [addr, addr+bytes) covers, as a mask. */
static uint8_t
word_mask(uint64_t w, uint64_t addr, uint32_t bytes)
{
	uint64_t lo = addr > 4 * w ? addr - 4 * w : 0;
	uint64_t hi = addr + bytes < 4 * w + 4 ? addr + bytes - 4 * w : 4;
	return (uint8_t)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

int
emu_race_smem(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr, uint32_t bytes,
              int kind)
{
	for (uint32_t w = addr >> 2; w <= (addr + bytes - 1) >> 2; w++)
		if (access(c, t, in, &c->race[w], c->race_gen, "smem", (uint64_t)w * 4, kind,
		           word_mask(w, addr, bytes)))
			return EMU_STOP;
	return 0;
}

/* An async write of [addr, addr+bytes) issued by t: ordered after every
 * generic access of those words (else a race with the issuer's program
 * order), and from then on their generic history is the async write's. */
int
emu_race_async_write(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr, uint32_t bytes)
{
	for (uint32_t w = addr >> 2; w <= (addr + bytes - 1) >> 2; w++) {
		EmuRaceWord *e = &c->race[w];
		if (e->gen != c->race_gen)
			continue;
		uint8_t mask = word_mask(w, addr, bytes);
		if (e->wslot != NO_SLOT && (e->wmask & mask) && !covered(t, e->wslot, e->wclk))
			return report(c, t, in, "smem", (uint64_t)w * 4, 1, 1, e->wslot, e->wline);
		for (int i = 0; i < e->nr; i++)
			if ((e->rmask[i] & mask) && !covered(t, e->rslot[i], e->rclk[i]))
				return report(c, t, in, "smem", (uint64_t)w * 4, 1, 0, e->rslot[i], e->rline[i]);
		e->gen = 0;
	}
	return 0;
}

/* ---- global memory: an open-addressing table of the words a cluster touched ---- */

static EmuRaceWord *
global_word(EmuCta *c, uint64_t w)
{
	if (2 * (c->gr_used + 1) > c->gr_cap) {
		uint32_t nc = c->gr_cap ? c->gr_cap * 2 : 4096;
		EmuRaceWord *nt = calloc(nc, sizeof *nt);
		if (!nt)
			return NULL;
		for (uint32_t i = 0; i < c->gr_cap; i++) {
			EmuRaceWord *o = &c->gr[i];
			if (o->gen != c->race_gen)
				continue;
			uint32_t h = (uint32_t)(o->key * UINT64_C(0x9e3779b97f4a7c15) >> 32) & (nc - 1);
			while (nt[h].gen == c->race_gen)
				h = (h + 1) & (nc - 1);
			nt[h] = *o;
		}
		free(c->gr);
		c->gr = nt;
		c->gr_cap = nc;
	}
	uint32_t h = (uint32_t)(w * UINT64_C(0x9e3779b97f4a7c15) >> 32) & (c->gr_cap - 1);
	for (;;) {
		EmuRaceWord *e = &c->gr[h];
		if (e->gen != c->race_gen) {
			fresh(c->race_gen, e);
			e->key = w;
			c->gr_used++;
			return e;
		}
		if (e->key == w)
			return e;
		h = (h + 1) & (c->gr_cap - 1);
	}
}

int
emu_race_global(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t addr, uint32_t bytes,
                int kind)
{
	EmuCta *g = c->cl->cta[0]; /* the cluster's table */
	for (uint64_t w = addr >> 2; w <= (addr + bytes - 1) >> 2; w++) {
		EmuRaceWord *e = global_word(g, w);
		if (!e)
			return emu_fault(c, t, in, "out of host memory");
		if (access(c, t, in, e, g->race_gen, "global", w * 4, kind, word_mask(w, addr, bytes)))
			return EMU_STOP;
	}
	return 0;
}

/* A new CTA (the first of a cluster: a new cluster): every word's history
 * is forgotten at once (the generation). */
void
emu_race_reset(EmuCta *c)
{
	if (++c->race_gen == 0) {
		memset(c->race, 0, (size_t)c->nrace * sizeof *c->race);
		if (c->gr)
			memset(c->gr, 0, (size_t)c->gr_cap * sizeof *c->gr);
		c->race_gen = 1;
	}
	c->gr_used = 0;
}
