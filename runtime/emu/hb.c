/* Happens-before for the hazard checks.
 *
 * Every thread carries a vector clock. Synchronization moves clocks the way
 * the PTX memory model moves knowledge (PTX ISA §8 "Memory consistency
 * model"): an mbarrier arrive releases the arriving thread's clock into the
 * barrier's current phase; try_wait that observes a completed phase acquires
 * everything released into the barrier so far; bar.sync joins all clocks of
 * its participants; a warp collective joins its lanes. Async units are
 * clock slots of their own: one per mbarrier (its completed-phase count, so
 * "TMA bytes landed in phase k" is known to whoever observed phase k) and one
 * per tcgen05 issue pipe (its completed-commit count).
 *
 * Each 16-byte smem chunk and each TMEM (lane quarter, column) cell keeps a
 * tag of its last async write and last async read: the slot and clock value
 * an accessor must know to be ordered after it. A thread keeps a second
 * clock, vc_tc, copied from vc at tcgen05.fence::after_thread_sync: tcgen05
 * operations may only rely on synchronization fenced that way
 * (docs/hardware.md, "tcgen05 ordering"), so a check that passes with vc but not
 * with vc_tc is reported as the missing fence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

int
emu_hb_init(EmuCta *c)
{
	c->nslots = (c->nthreads + EMU_MAX_MBAR + EMU_MAX_AGENTS) * (c->lc->cl_n > 0 ? c->lc->cl_n : 1);
	/* per thread: vc, vc_tc; per mbarrier: pend_vc, done_vc; 16 named barriers */
	size_t n = (size_t)(2 * c->nthreads + 2 * EMU_MAX_MBAR + 16) * (size_t)c->nslots;
	c->clocks = calloc(n, sizeof *c->clocks);
	if (!c->clocks)
		return -1;
	EmuClock *at = c->clocks;
	for (int i = 0; i < c->nthreads; i++) {
		c->t[i].vc = at;
		at += c->nslots;
		c->t[i].vc_tc = at;
		at += c->nslots;
	}
	for (int i = 0; i < EMU_MAX_MBAR; i++) {
		c->mbar[i].pend_vc = at;
		at += c->nslots;
		c->mbar[i].done_vc = at;
		at += c->nslots;
	}
	return 0;
}

EmuClock *
emu_vc_new(EmuCta *c)
{
	return calloc((size_t)c->nslots, sizeof(EmuClock));
}

void
emu_vc_join(const EmuCta *c, EmuClock *dst, const EmuClock *src)
{
	int n = c->nslots;
	for (int i = 0; i < n; i++)
		dst[i] = dst[i] > src[i] ? dst[i] : src[i]; /* branch-free: vectorizes */
}

int
emu_vc_covers(const EmuCta *c, const EmuClock *vc, int self, const EmuTag *tag)
{
	(void)c;
	if (tag->kind == TAGK_NONE)
		return 1;
	/* a pending event is not ordered yet, except the allocating thread's
	 * own tcgen05.alloc result: alloc completes in program order */
	if (tag->slot == self && (!tag->pending || tag->kind == TAGK_ALLOC))
		return 1;
	if (tag->pending)
		return 0;
	return vc[tag->slot] >= tag->val;
}

void
emu_sread_note(EmuCta *c, uint32_t ch, const EmuTag *tag)
{
	EmuTag *set = &c->srtag[(size_t)ch * EMU_SREADERS];
	int n = c->snr[ch];
	/* one slot's clock only grows: its newest read covers its older ones */
	for (int i = 0; i < n; i++)
		if (set[i].slot == tag->slot) {
			set[i] = *tag;
			return;
		}
	if (n == EMU_SREADERS) {
		memmove(set, set + 1, (EMU_SREADERS - 1) * sizeof *set);
		n--;
	}
	set[n] = *tag;
	c->snr[ch] = (uint8_t)(n + 1);
}

const EmuTag *
emu_sread_unordered(const EmuCta *c, const EmuClock *vc, int self, uint32_t ch)
{
	const EmuTag *set = &c->srtag[(size_t)ch * EMU_SREADERS];
	for (int i = 0; i < c->snr[ch]; i++)
		if (!emu_vc_covers(c, vc, self, &set[i]))
			return &set[i];
	return NULL;
}

void
emu_release(EmuCta *c, EmuThread *t, EmuClock *into)
{
	if (into)
		emu_vc_join(c, into, t->vc);
	t->vc[t->slot]++;
}

void
emu_acquire(EmuCta *c, EmuThread *t, const EmuClock *from)
{
	emu_vc_join(c, t->vc, from);
}

/* Release and acquire through global memory (PTX ISA §8 "Memory
 * consistency model", release and acquire patterns): an atom or red with
 * .release, .acq_rel or .sc releases the thread's clock into the word's;
 * an ld or atom with .acquire, .acq_rel or .sc acquires it (an RMW
 * acquires first, so what it releases includes what it observed). A word
 * keeps every release so far, as a release sequence does when every later
 * write to it is an atomic, which is how kernels count through such words
 * (gen/decode.c's split-KV counter). Fences are not modeled: a relaxed
 * atomic after fence.acq_rel orders nothing here. */
int
emu_sync_global(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t addr, int acq, int rel)
{
	EmuCluster *cl = c->cl;
	int i = 0;

	while (i < cl->nsync && cl->sync_addr[i] != addr)
		i++;
	if (i == cl->nsync) {
		if (!rel)
			return EMU_NEXT; /* nothing released there yet */
		if (i == EMU_MAX_SYNC)
			return emu_fault(c, t, in, "more than %d global words released into by atomics in one cluster",
			                 EMU_MAX_SYNC);
		cl->sync_addr[i] = addr;
		memset(cl->sync_vc[i], 0, (size_t)c->nslots * sizeof *cl->sync_vc[i]);
		cl->nsync++;
	}
	if (acq)
		emu_acquire(c, t, cl->sync_vc[i]);
	if (rel)
		emu_release(c, t, cl->sync_vc[i]);
	return EMU_NEXT;
}

void
emu_warp_sync(EmuCta *c, EmuWarp *w, uint32_t lanes)
{
	if (!(lanes & (lanes - 1)))
		return; /* one lane: nothing to join */
	EmuThread *base = &c->t[w->id * 32];
	EmuClock *acc = NULL;
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		if (!acc) {
			acc = base[l].vc;
			continue;
		}
		emu_vc_join(c, acc, base[l].vc);
	}
	for (int l = 0; l < 32; l++)
		if ((lanes >> l & 1) && base[l].vc != acc)
			memcpy(base[l].vc, acc, (size_t)c->nslots * sizeof *acc);
	/* what each lane does next is not known to the others: a new epoch */
	for (int l = 0; l < 32; l++)
		if (lanes >> l & 1)
			base[l].vc[base[l].slot]++;
}

void
emu_tc_after_sync(EmuCta *c, EmuThread *t)
{
	memcpy(t->vc_tc, t->vc, (size_t)c->nslots * sizeof *t->vc);
	t->synced_line = 0;
}

void
emu_tcpend_add(EmuCta *c, EmuThread *t, uint32_t cell)
{
	(void)c;
	if (t->ntcpend == t->captcpend) {
		int nc = t->captcpend ? t->captcpend * 2 : 64;
		uint32_t *nv = realloc(t->tcpend, (size_t)nc * sizeof *nv);
		if (!nv)
			return; /* the tag stays pending: reported, never missed */
		t->tcpend = nv;
		t->captcpend = nc;
	}
	t->tcpend[t->ntcpend++] = cell;
}

/* tcgen05.fence::before_thread_sync and wait::ld/st: tcgen05 events of this
 * thread become ordered before its next release. */
void
emu_tc_before_sync(EmuCta *c, EmuThread *t)
{
	for (int i = 0; i < t->ntcpend; i++) {
		uint32_t cell = t->tcpend[i];
		EmuTag *tag;
		if (cell & 0x80000000u) {
			uint32_t ch = cell & 0x7fffffffu;
			tag = &c->swtag[ch];
		} else if (cell & 0x40000000u) {
			continue; /* tcgen05.st data: ordered only by wait::st */
		} else {
			tag = &c->trtag[cell];
		}
		if (tag->pending && tag->slot == (uint16_t)t->slot) {
			tag->pending = 0;
			tag->val = t->vc[t->slot];
		}
	}
	t->ntcpend = 0;
}

static const char *const kind_names[] = {
	[TAGK_NONE] = "nothing", [TAGK_GENERIC] = "generic store", [TAGK_TMA] = "TMA write",
	[TAGK_TC] = "tcgen05.mma", [TAGK_ALLOC] = "tcgen05.alloc writing the TMEM address",
	[TAGK_TCST] = "tcgen05 access", [TAGK_TCCP] = "tcgen05.cp",
	[TAGK_TCSHIFT] = "tcgen05.shift", [TAGK_CPASYNC] = "cp.async",
};

void
emu_tag_describe(const EmuCta *c, const EmuTag *tag, char *buf, size_t n)
{
	char text[200];
	emu_line_text(c->prog, tag->line, text, sizeof text);
	snprintf(buf, n, "%s at PTX line %d `%s` (thread %d)", kind_names[tag->kind], tag->line,
	         text, tag->tid);
}

/* ---- smem checks ----------------------------------------------------------- */

static int
in_flight_reader(EmuCta *c, const EmuThread *t, const EmuInsn *in, uint32_t ch, const char *what)
{
	char text[200];
	emu_line_text(c->prog, c->sinflight_line[ch], text, sizeof text);
	return emu_hazard(c, t, in, "async-in-flight",
	                  "%s smem 0x%x, which the async operation at PTX line %d `%s` still reads "
	                  "(it has not completed: wait for its mbarrier / wait_group first)",
	                  what, ch * 16, c->sinflight_line[ch], text);
}

static int
tma_in_flight(EmuCta *c, const EmuThread *t, const EmuInsn *in, uint32_t ch, const char *what)
{
	char d[320];
	emu_tag_describe(c, &c->swtag[ch], d, sizeof d);
	if (c->swtag[ch].kind == TAGK_CPASYNC)
		return emu_hazard(c, t, in, "async-in-flight",
		                  "%s smem 0x%x while the %s has not completed (the issuing thread's "
		                  "cp.async.wait_group / wait_all, then a barrier, come first)",
		                  what, ch * 16, d);
	return emu_hazard(c, t, in, "async-in-flight",
	                  "%s smem 0x%x while the %s has not landed (its mbarrier phase has not "
	                  "completed, or completed without these bytes: expect_tx too small?)",
	                  what, ch * 16, d);
}

static int
unordered(EmuCta *c, const EmuThread *t, const EmuInsn *in, const EmuTag *tag, uint32_t addr,
          const char *what, int fence_would_fix)
{
	char d[320];
	emu_tag_describe(c, tag, d, sizeof d);
	if (tag->pending && tag->kind == TAGK_ALLOC)
		return emu_hazard(c, t, in, "missing-fence-before-thread-sync",
		                  "%s 0x%x: the %s is not ordered before the thread sync: the allocating "
		                  "warp issued no tcgen05.fence::before_thread_sync between the alloc and "
		                  "the barrier (docs/hardware.md, \"TMEM allocation\" and \"tcgen05 ordering\")", what, addr, d);
	if (fence_would_fix)
		return emu_hazard(c, t, in, "missing-fence-after-thread-sync",
		                  "%s 0x%x: the %s was synchronized with (thread sync at PTX line %d) "
		                  "but no tcgen05.fence::after_thread_sync followed the sync before this "
		                  "tcgen05 operation (docs/hardware.md, \"tcgen05 ordering\")",
		                  what, addr, d, t->synced_line);
	return emu_hazard(c, t, in, "unordered-async",
	                  "%s 0x%x is not ordered after the %s: no mbarrier wait / barrier observed "
	                  "its completion",
	                  what, addr, d);
}

int
emu_smem_read(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr, uint32_t bytes)
{
	uint32_t ch0 = addr >> 4, ch1 = (addr + bytes - 1) >> 4;
	for (uint32_t ch = ch0; ch <= ch1; ch++) {
		uint8_t f = c->sflags[ch];
		if (f & SF_TMA_FLIGHT)
			return tma_in_flight(c, t, in, ch, "reads");
		EmuTag *w = &c->swtag[ch];
		if (w->kind == TAGK_TMA && !emu_vc_covers(c, t->vc, t->slot, w))
			return unordered(c, t, in, w, ch * 16, "reads smem", 0);
		if (w->kind == TAGK_ALLOC && !emu_vc_covers(c, t->vc_tc, t->slot, w))
			return unordered(c, t, in, w, ch * 16, "reads smem",
			                 emu_vc_covers(c, t->vc, t->slot, w));
	}
	return 0;
}

static void
unfenced_add(EmuCta *c, EmuThread *t, uint32_t ch)
{
	(void)c;
	if (t->nunfenced == t->capunfenced) {
		int nc = t->capunfenced ? t->capunfenced * 2 : 64;
		uint32_t *nv = realloc(t->unfenced, (size_t)nc * sizeof *nv);
		if (!nv)
			return; /* stays flagged: the worst case is a report */
		t->unfenced = nv;
		t->capunfenced = nc;
	}
	t->unfenced[t->nunfenced++] = ch;
}

int
emu_smem_write(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr, uint32_t bytes)
{
	uint32_t ch0 = addr >> 4, ch1 = (addr + bytes - 1) >> 4;
	for (uint32_t ch = ch0; ch <= ch1; ch++) {
		uint8_t f = c->sflags[ch];
		if (f & SF_MBAR)
			for (int i = 0; i < c->nmbar; i++) {
				EmuMbar *m = &c->mbar[i];
				if (m->live && m->addr < addr + bytes && addr < m->addr + 8)
					return emu_hazard(c, t, in, "mbarrier",
					                  "generic store to smem 0x%x overwrites the live mbarrier "
					                  "at 0x%x (mbarrier.inval it first)", addr, m->addr);
			}
		if (f & SF_TMA_FLIGHT)
			return tma_in_flight(c, t, in, ch, "writes");
		if (c->sinflight[ch])
			return in_flight_reader(c, t, in, ch, "writes");
		const EmuTag *r = emu_sread_unordered(c, t->vc, t->slot, ch);
		if (r)
			return unordered(c, t, in, r, ch * 16, "overwrites smem (an async read's source)", 0);
		EmuTag *w = &c->swtag[ch];
		if ((w->kind == TAGK_TMA || w->kind == TAGK_ALLOC) && !emu_vc_covers(c, t->vc, t->slot, w))
			return unordered(c, t, in, w, ch * 16, "overwrites smem", 0);
		w->kind = TAGK_GENERIC;
		w->pending = 0;
		w->slot = (uint16_t)t->slot;
		w->val = t->vc[t->slot];
		w->line = in->line;
		w->tid = t->tid;
		if (!((f & SF_UNFENCED) && c->swriter[ch] == t->tid + 1))
			unfenced_add(c, t, ch);
		c->sflags[ch] = f | SF_UNFENCED;
		c->swriter[ch] = (uint16_t)(t->tid + 1);
		c->swline[ch] = in->line;
	}
	c->gen++;
	return 0;
}

int
emu_smem_async_read_check(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t ch,
                          const EmuClock *vc, const char *what)
{
	uint8_t f = c->sflags[ch];
	if (f & SF_TMA_FLIGHT)
		return tma_in_flight(c, t, in, ch, what);
	EmuTag *w = &c->swtag[ch];
	if (w->kind == TAGK_GENERIC && (f & SF_UNFENCED)) {
		char text[200];
		emu_line_text(c->prog, c->swline[ch], text, sizeof text);
		return emu_hazard(c, t, in, "missing-proxy-fence",
		                  "%s smem 0x%x through the async proxy, but the generic store at PTX "
		                  "line %d `%s` (thread %d) was not followed by fence.proxy.async "
		                  "(docs/hardware.md, \"Proxy fences\")",
		                  what, ch * 16, c->swline[ch], text, c->swriter[ch] - 1);
	}
	if (!emu_vc_covers(c, vc, t->slot, w))
		return unordered(c, t, in, w, ch * 16, what,
		                 vc == t->vc_tc && emu_vc_covers(c, t->vc, t->slot, w));
	return 0;
}

/* fence.proxy.async: this thread's generic stores become visible to the
 * async proxy here, not at the store, so a reader must be ordered after
 * the fence: the store's tag takes the fence's clock. */
void
emu_proxy_fence(EmuCta *c, EmuThread *t)
{
	for (int i = 0; i < t->nunfenced; i++) {
		uint32_t ch = t->unfenced[i];
		EmuTag *w = &c->swtag[ch];
		if (c->swriter[ch] != t->tid + 1)
			continue;
		c->sflags[ch] &= (uint8_t)~SF_UNFENCED;
		if (w->kind == TAGK_GENERIC && w->slot == t->slot)
			w->val = t->vc[t->slot];
	}
	t->nunfenced = 0;
}
