/* Execution of a launch: clusters one at a time, the CTAs of a cluster
 * interleaved under one scheduler (so one CTA may wait on another), every
 * thread an interpreter state with its own pc and registers.
 *
 * Scheduling. Each ready thread runs until it blocks (bar.sync, an mbarrier
 * wait, a warp rendezvous) or exits. Async work (TMA, tcgen05.mma/cp/shift/commit,
 * bulk stores) sits in a queue and completes only when no thread can run:
 * that is the latest point the PTX memory model allows, so a consumer that
 * forgot to wait reads stale data or trips a hazard check instead of
 * passing by luck. With KRT_EMU_SEED set, completions are picked at random
 * among the legal ones and may also happen early, between thread slices;
 * a thread runs a random number of instructions, and after each scheduling
 * point (a store, an arrive, a commit, a TMA issue: OPF_SCHED) it may give
 * way to a randomly chosen thread, so a consumer can run between a
 * producer's publishing step and the writes that should have preceded it.
 *
 * When nothing can run and nothing is queued, threads spinning in
 * mbarrier.try_wait get one timeout (try_wait returns false, as the hardware
 * may); if they come back to the same waits without changing any state, the
 * launch is a deadlock and the report says who waits on what. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

/* ---- warp collectives ---------------------------------------------------------- */

static void
lanes_str(uint32_t m, char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = 0;
	for (int l = 0; l < 32 && at + 8 < n;) {
		if (!(m >> l & 1)) {
			l++;
			continue;
		}
		int e = l;
		while (e + 1 < 32 && (m >> (e + 1) & 1))
			e++;
		int w = e > l ? snprintf(buf + at, n - at, "%s%d-%d", at ? "," : "", l, e)
		              : snprintf(buf + at, n - at, "%s%d", at ? "," : "", l);
		if (w < 0)
			break;
		at += (size_t)w;
		l = e + 1;
	}
}

/* Runs the collective once all needed lanes arrived. */
static int
rendezvous_fire(EmuCta *c, EmuWarp *w)
{
	const EmuInsn *in = &c->prog->insn[w->coll_pc];
	uint32_t lanes = w->arrived;
	EmuThread *base = &c->t[w->id * 32];
	if (w->need & ~w->live) {
		char gone[128], here[128];
		lanes_str(w->need & ~w->live, gone, sizeof gone);
		lanes_str(lanes, here, sizeof here);
		return emu_hazard(c, &base[__builtin_ctz(lanes)], in, "partial-warp",
		                  "%s is executed by lanes %s of warp %d only; lanes %s have exited. "
		                  "%s requires every thread of the %s to execute it",
		                  in->def->name, here, w->id, gone,
		                  (in->def->flags & OPF_MEMBERMASK) ? "The membermask" : ".sync.aligned",
		                  (in->def->flags & OPF_MEMBERMASK) ? "membermask" : "warp");
	}
	emu_warp_sync(c, w, lanes);
	int rc = in->def->wexec(c, w, in, lanes);
	if (rc == EMU_BLOCK) {
		w->coll_retry = 1;
		return EMU_BLOCK;
	}
	if (rc == EMU_STOP)
		return EMU_STOP;
	w->coll_retry = 0;
	w->coll_pc = -1;
	w->arrived = 0;
	for (int l = 0; l < 32; l++)
		if (lanes >> l & 1) {
			base[l].pc++;
			base[l].state = TS_READY;
		}
	c->gen++;
	return EMU_JUMP;
}

static int
arrive(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuWarp *w = t->w;
	uint32_t need = w->all;
	if (in->def->flags & OPF_MEMBERMASK) {
		uint64_t mask;
		if (emu_geti(c, t, in, in->nop - 1, &mask))
			return EMU_STOP;
		need = (uint32_t)mask & w->all;
		if (!(need >> t->lane & 1))
			return emu_hazard(c, t, in, "non-uniform-sync-aligned",
			                  "lane %d executes %s with membermask 0x%08x, which does not "
			                  "include it", t->lane, in->def->name, (uint32_t)mask);
	}
	if (w->coll_pc >= 0 && (uint32_t)w->coll_pc != t->pc) {
		const EmuInsn *o = &c->prog->insn[w->coll_pc];
		char here[128], text[200];
		lanes_str(w->arrived, here, sizeof here);
		emu_line_text(c->prog, o->line, text, sizeof text);
		return emu_hazard(c, t, in, "non-uniform-sync-aligned",
		                  "warp %d diverges at a collective: lanes %s wait at PTX line %d `%s`, "
		                  "lane %d reached this one. .sync.aligned instructions must be executed "
		                  "by all threads of the warp at the same instruction (PTX ISA §9.7.16.5; "
		                  "a partial-warp tcgen05.ld hung the GPU: docs/lessons.md, \"Concurrency bugs\")",
		                  w->id, here, o->line, text, t->lane);
	}
	if (w->coll_pc < 0) {
		w->coll_pc = (int)t->pc;
		w->arrived = 0;
		w->need = need;
	} else if (w->need != need) {
		return emu_hazard(c, t, in, "non-uniform-sync-aligned",
		                  "lanes of warp %d pass different membermasks (0x%08x and 0x%08x) to "
		                  "the same %s", w->id, w->need, need, in->def->name);
	}
	w->arrived |= 1u << t->lane;
	t->state = TS_COLL;
	if (w->arrived == (w->need & w->live))
		return rendezvous_fire(c, w);
	return EMU_BLOCK;
}

/* ---- running threads -------------------------------------------------------------- */

/* Single-thread-issue instructions (tcgen05.mma/cp/shift/commit): the n-th
 * execution of one by two lanes of a warp is two issues of one converged
 * instruction, i.e. the whole warp issuing (docs/hardware.md, "tcgen05.mma"). */
static int
check_single(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	EmuWarp *w = t->w;
	uint32_t n = t->single_n[in->single]++;
	int32_t **arr = &w->single_first[in->single];
	int *cap = &w->single_cap[in->single];
	if ((int)n >= *cap) {
		int nc = *cap ? *cap * 2 : 16;
		while (nc <= (int)n)
			nc *= 2;
		int32_t *na = realloc(*arr, (size_t)nc * sizeof *na);
		if (!na)
			return emu_fault(c, t, in, "out of host memory");
		for (int i = *cap; i < nc; i++)
			na[i] = -1;
		*arr = na;
		*cap = nc;
	}
	int32_t first = (*arr)[n];
	if (first < 0) {
		(*arr)[n] = t->lane;
		return 0;
	}
	if (first != t->lane)
		return emu_hazard(c, t, in, "multi-thread-issue",
		                  "%s has single-thread semantics, but lanes %d and %d of warp %d both "
		                  "execute it (instance %u): each executing thread issues its own "
		                  "operation. Pick one thread with elect.sync (docs/hardware.md, \"tcgen05.mma\")",
		                  in->def->name, first, t->lane, w->id, n + 1);
	return 0;
}

static int thread_exit(EmuCta *c, EmuThread *t);

static int
step(EmuCta *c, EmuThread *t)
{
	const EmuInsn *in = &c->prog->insn[t->pc];
	if (in->guard >= 0) {
		if (t->npend && (t->pend[in->guard] & (PEND_TCLD | PEND_WGMMA)))
			return emu_reg_hazard(c, t, in, in->guard, 0);
		if (((int)(t->r[in->guard] & 1) ^ in->guard_neg) == 0) {
			t->pc++;
			return EMU_JUMP;
		}
	}
	if (in->def->flags & OPF_COLL)
		return arrive(c, t, in);
	if (in->single >= 0 && check_single(c, t, in))
		return EMU_STOP;
	return in->def->exec(c, t, in);
}

/* A thread sleeping in a polling loop (nanosleep) lets time pass: one
 * async operation still queued in its cluster completes (legal at any
 * point after its issue), so a poll that waits for another CTA's progress
 * (the decode split-KV combine, docs/ABI.md "decode") cannot starve that
 * CTA's copies, which otherwise complete only when the whole cluster
 * stalls. Nonzero when the completion failed. */
static int
sleep_passes_time(EmuCta *c)
{
	for (int r = 0; c->cl && r < c->cl->n; r++)
		if (c->cl->cta[r]->naq)
			return emu_async_complete_one(c->cl->cta[r]);
	return 0;
}

static int
run_thread(EmuCta *c, EmuThread *t, int budget)
{
	while (budget-- > 0) {
		if (t->pc >= (uint32_t)c->prog->ninsn)
			return emu_fault(c, t, NULL, "ran past the last instruction of %s (no ret/exit)",
			                 c->prog->entry);
		t->steps++;
		c->steps++;
		if (c->lc->trace == t->tid + 1 && !c->ctaid[0] && !c->ctaid[1] && !c->ctaid[2]) {
			char text[200];
			emu_line_text(c->prog, c->prog->insn[t->pc].line, text, sizeof text);
			fprintf(stderr, "[emu] thread %d line %d: %s\n", t->tid, c->prog->insn[t->pc].line,
			        text);
		}
		const EmuInsn *in = &c->prog->insn[t->pc];
		int rc = step(c, t);
		switch (rc) {
		case EMU_NEXT:
			t->pc++;
			if (t->state != TS_READY)
				return EMU_BLOCK; /* test_wait polled: continue later */
			break;
		case EMU_JUMP:
			if (t->state != TS_READY)
				return EMU_BLOCK;
			break;
		case EMU_BLOCK:
			return EMU_BLOCK;
		case EMU_EXIT:
			return thread_exit(c, t);
		default:
			return EMU_STOP;
		}
		if ((in->def->flags & OPF_YIELD) && rc == EMU_NEXT)
			return sleep_passes_time(c) ? EMU_STOP : EMU_YIELD;
		/* a scheduling point: what it published may be seen (or missed)
		 * by any other warp before this thread goes on */
		if (c->lc->seed && (in->def->flags & OPF_SCHED) && emu_rand(c) % 2)
			return EMU_YIELD;
	}
	return EMU_NEXT;
}

static int
thread_exit(EmuCta *c, EmuThread *t)
{
	EmuWarp *w = t->w;
	if (emu_cp_async_exit(c, t))
		return EMU_STOP;
	t->state = TS_EXITED;
	c->live--;
	w->live &= ~(1u << t->lane);
	c->gen++;
	if (!w->live) {
		/* tcgen05.st data still in flight lands when the warp is gone */
		if (emu_tc_land(c, w, 1))
			return EMU_STOP;
		emu_wgmma_drop(c, w);
	}
	if (emu_cluster_bar_try(c->cl))
		c->gen++;
	/* barriers without a thread count wait for every live thread */
	for (int i = 0; i < 16; i++)
		if (c->bar[i].expected < 0 && emu_bar_try_complete(c, i))
			return EMU_STOP;
	if (w->coll_pc >= 0 && w->arrived && w->arrived == (w->need & w->live)) {
		int rc = rendezvous_fire(c, w);
		if (rc == EMU_STOP)
			return EMU_STOP;
	}
	return EMU_EXIT;
}

/* ---- CTA setup ------------------------------------------------------------------ */

static void
cta_free(EmuCta *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nthreads; i++) {
		free(c->t[i].unfenced);
		free(c->t[i].cpa);
		free(c->t[i].tcpend);
		free(c->t[i].single_n);
	}
	for (int i = 0; i < c->nwarps; i++) {
		EmuWarp *w = &c->w[i];
		emu_wgmma_drop(c, w);
		for (int k = 0; k < w->npld; k++)
			free(w->pld[k].vals);
		free(w->pld);
		free(w->open.op);
		free(w->groups);
		for (int k = 0; k < c->prog->nsingle; k++)
			free(w->single_first[k]);
		free(w->single_first);
		free(w->single_cap);
	}
	for (int i = 0; i < c->naq; i++)
		emu_async_free(&c->aq[i]);
	free(c->aq);
	free(c->t);
	free(c->w);
	free(c->regs);
	free(c->pend);
	free(c->smem);
	free(c->swtag);
	free(c->srtag);
	free(c->snr);
	free(c->sinflight);
	free(c->sinflight_line);
	free(c->sflags);
	free(c->sstamp);
	free(c->swriter);
	free(c->swline);
	free(c->tmem);
	free(c->twtag);
	free(c->trtag);
	free(c->tacc);
	free(c->clocks);
	free(c->race);
	free(c->gr);
	free(c);
}

static EmuCta *
cta_new(EmuLaunchCtx *lc, EmuCluster *cl, int rank, KrtErr *err)
{
	const EmuProgram *p = lc->prog;
	const KrtLaunch *l = lc->l;
	EmuCta *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->lc = lc;
	c->cl = cl;
	c->rank = rank;
	c->prog = p;
	c->err = err;
	c->nthreads = (int)(l->block[0] * l->block[1] * l->block[2]);
	c->slot0 = rank * (c->nthreads + EMU_MAX_MBAR + EMU_MAX_AGENTS);
	c->nwarps = (c->nthreads + 31) / 32;
	c->t = calloc((size_t)c->nthreads, sizeof *c->t);
	c->w = calloc((size_t)c->nwarps, sizeof *c->w);
	size_t nr = (size_t)c->nthreads * (size_t)(p->nregs ? p->nregs : 1);
	c->regs = malloc(nr * sizeof *c->regs);
	c->pend = calloc(nr, 1);
	/* shared window: [0, smem_end) with shared variables from smem_base */
	uint32_t dyn_align = p->dyn_align ? p->dyn_align : 16;
	uint32_t stat_end = lc->smem_base + p->static_smem;
	c->dyn_addr = (stat_end + dyn_align - 1) & ~(dyn_align - 1);
	c->dyn_addr += lc->smem_misalign;
	c->smem_lo = lc->smem_base;
	c->smem_end = c->dyn_addr + l->smem;
	c->nchunks = (c->smem_end + 15) / 16 + 1;
	c->smem = malloc((size_t)c->nchunks * 16);
	c->swtag = malloc((size_t)c->nchunks * sizeof *c->swtag);
	c->srtag = malloc((size_t)c->nchunks * EMU_SREADERS * sizeof *c->srtag);
	c->snr = malloc(c->nchunks);
	c->sinflight = malloc((size_t)c->nchunks * sizeof *c->sinflight);
	c->sinflight_line = malloc((size_t)c->nchunks * sizeof *c->sinflight_line);
	c->sflags = malloc(c->nchunks);
	c->sstamp = calloc(c->nchunks, sizeof *c->sstamp);
	c->swriter = malloc((size_t)c->nchunks * sizeof *c->swriter);
	c->swline = malloc((size_t)c->nchunks * sizeof *c->swline);
	c->nrace = c->smem_end / 4 + 1;
	c->race = calloc(c->nrace, sizeof *c->race);
	if (lc->cc >= 100) {
		c->tmem = malloc((size_t)EMU_TMEM_LANES * EMU_TMEM_COLS * sizeof *c->tmem);
		c->twtag = malloc(4 * EMU_TMEM_COLS * sizeof *c->twtag);
		c->trtag = malloc(4 * EMU_TMEM_COLS * sizeof *c->trtag);
		c->tacc = calloc(4 * EMU_TMEM_COLS, sizeof *c->tacc);
	}
	int bad = !c->t || !c->w || !c->regs || !c->pend || !c->smem || !c->swtag || !c->srtag || !c->snr ||
	          !c->sstamp ||
	          !c->sinflight || !c->sinflight_line || !c->sflags || !c->swriter || !c->swline || !c->race ||
	          (lc->cc >= 100 && (!c->tmem || !c->twtag || !c->trtag || !c->tacc));
	for (int i = 0; !bad && i < c->nthreads; i++) {
		EmuThread *t = &c->t[i];
		t->tid = i;
		t->slot = c->slot0 + i;
		t->lane = i % 32;
		t->w = &c->w[i / 32];
		t->r = c->regs + (size_t)i * (size_t)p->nregs;
		t->pend = c->pend + (size_t)i * (size_t)p->nregs;
		if (p->nsingle && !(t->single_n = calloc((size_t)p->nsingle, sizeof *t->single_n)))
			bad = 1;
	}
	for (int i = 0; !bad && i < c->nwarps; i++) {
		EmuWarp *w = &c->w[i];
		w->id = i;
		if (p->nsingle && (!(w->single_first = calloc((size_t)p->nsingle, sizeof *w->single_first)) ||
		                   !(w->single_cap = calloc((size_t)p->nsingle, sizeof *w->single_cap))))
			bad = 1;
	}
	if (bad || emu_hb_init(c)) {
		cta_free(c);
		return NULL;
	}
	return c;
}

/* Fresh state for CTA ctaid: memory holds garbage (a pattern), not zeros. */
static void
cta_reset(EmuCta *c, const uint32_t ctaid[3])
{
	const EmuProgram *p = c->prog;
	memcpy(c->ctaid, ctaid, sizeof c->ctaid);
	c->failed = 0;
	c->finished = 0;
	c->live = c->nthreads;
	c->steps = 0;
	c->gen = 0;
	size_t nr = (size_t)c->nthreads * (size_t)p->nregs;
	for (size_t i = 0; i < nr; i++)
		c->regs[i] = UINT64_C(0x7fb1dead7fb1dead) & 0xffffffffu;
	/* with wgmma, every register write is tracked so an MMA that reads a
	 * register written after the last wgmma.fence is caught (docs/hardware.md,
	 * "wgmma syntax and fences") */
	memset(c->pend, p->has_wgmma ? PEND_WATCH | PEND_DIRTY : 0, nr);
	memset(c->smem, 0xdb, (size_t)c->nchunks * 16);
	memset(c->swtag, 0, (size_t)c->nchunks * sizeof *c->swtag);
	memset(c->snr, 0, c->nchunks);
	memset(c->sinflight, 0, (size_t)c->nchunks * sizeof *c->sinflight);
	memset(c->sflags, 0, c->nchunks);
	memset(c->swriter, 0, (size_t)c->nchunks * sizeof *c->swriter);
	emu_race_reset(c);
	if (c->tmem) {
		/* TMEM before an MMA writes it: a NaN pattern */
		for (size_t i = 0; i < (size_t)EMU_TMEM_LANES * EMU_TMEM_COLS; i++)
			c->tmem[i] = 0x7fc0dead;
		memset(c->twtag, 0, 4 * EMU_TMEM_COLS * sizeof *c->twtag);
		memset(c->trtag, 0, 4 * EMU_TMEM_COLS * sizeof *c->trtag);
		memset(c->tacc, 0, 4 * EMU_TMEM_COLS * sizeof *c->tacc);
	}
	memset(c->talloc, 0, sizeof c->talloc);
	c->relinquished = 0;
	c->cta_group = 0;
	c->palloc_state = 0;
	for (int i = 0; i < EMU_MAX_MBAR; i++) {
		EmuClock *pv = c->mbar[i].pend_vc, *dv = c->mbar[i].done_vc;
		memset(&c->mbar[i], 0, sizeof c->mbar[i]);
		c->mbar[i].pend_vc = pv;
		c->mbar[i].done_vc = dv;
	}
	c->nmbar = 0;
	memset(c->bar, 0, sizeof c->bar);
	memset(c->clocks, 0, (size_t)(2 * c->nthreads + 2 * EMU_MAX_MBAR + 16) * (size_t)c->nslots *
	                         sizeof *c->clocks);
	c->nagents = 0;
	memset(c->coll, 0, sizeof c->coll);
	for (int i = 0; i < c->naq; i++)
		emu_async_free(&c->aq[i]);
	c->naq = 0;
	for (int i = 0; i < c->nthreads; i++) {
		EmuThread *t = &c->t[i];
		t->pc = 0;
		t->state = TS_READY;
		t->timeout = 0;
		t->cbar_pending = 0;
		t->cbar_synced = 0;
		t->npend = p->has_wgmma;
		t->vc[t->slot] = 1;
		t->synced_line = 0;
		t->agent = -1;
		t->nunfenced = 0;
		t->ntcpend = 0;
		t->bulk_groups = 0;
		t->bulk_open = 0;
		t->ncpa = 0;
		t->cpa_groups = 0;
		t->steps = 0;
		if (p->nsingle)
			memset(t->single_n, 0, (size_t)p->nsingle * sizeof *t->single_n);
	}
	for (int i = 0; i < c->nwarps; i++) {
		EmuWarp *w = &c->w[i];
		int n = c->nthreads - i * 32 < 32 ? c->nthreads - i * 32 : 32;
		w->all = w->live = n == 32 ? 0xffffffffu : (1u << n) - 1;
		w->coll_pc = -1;
		w->arrived = 0;
		w->coll_retry = 0;
		for (int k = 0; k < w->npld; k++)
			free(w->pld[k].vals);
		w->npld = 0;
		emu_wgmma_drop(c, w);
		for (int k = 0; k < p->nsingle; k++)
			for (int j = 0; j < w->single_cap[k]; j++)
				w->single_first[k][j] = -1;
	}
	c->rng = c->lc->seed ^ (UINT64_C(0x9e3779b97f4a7c15) *
	                        (1 + ctaid[0] + 7919u * ctaid[1] + 104729u * ctaid[2]));
	if (!c->rng)
		c->rng = 1;
}

/* ---- deadlock report ---------------------------------------------------------------- */

/* Appends who waits on what in CTA x. */
static void
deadlock_threads(EmuCta *x, char *msg, size_t cap, size_t *at)
{
	/* group threads waiting at the same instruction on the same object */
	char rank[32] = "";
	if (x->cl->n > 1)
		snprintf(rank, sizeof rank, "CTA rank %d: ", x->rank);
	uint8_t *done = calloc((size_t)x->nthreads, 1);
	for (int i = 0; i < x->nthreads && *at + 256 < cap; i++) {
		EmuThread *t = &x->t[i];
		if (t->state == TS_EXITED || (done && done[i]))
			continue;
		int n = 0, lo = i, hi = i;
		for (int k = i; k < x->nthreads; k++) {
			EmuThread *u = &x->t[k];
			if (u->state == t->state && u->pc == t->pc && u->wait_addr == t->wait_addr &&
			    u->wait_parity == t->wait_parity && u->wait_bar == t->wait_bar) {
				if (done)
					done[k] = 1;
				n++;
				hi = k;
			}
		}
		char text[200], obj[512] = "";
		const EmuInsn *in = &x->prog->insn[t->pc < (uint32_t)x->prog->ninsn ? t->pc : 0];
		emu_line_text(x->prog, in->line, text, sizeof text);
		if (t->state == TS_MBAR) {
			EmuMbar *m = emu_mbar_find(x, t->wait_addr);
			char st[256] = "not initialized";
			if (m)
				emu_mbar_describe(x, m, st, sizeof st);
			snprintf(obj, sizeof obj, "wait on mbarrier 0x%x (kg_smem%+d) for the phase with "
			         "parity %u; %s", t->wait_addr, (int)(t->wait_addr - x->dyn_addr),
			         t->wait_parity, st);
		} else if (t->state == TS_BAR) {
			EmuBar *b = &x->bar[t->wait_bar];
			snprintf(obj, sizeof obj, "wait at barrier %d: %d of %d threads arrived",
			         t->wait_bar, b->arrived, b->expected < 0 ? x->live : b->expected);
		} else if (t->state == TS_CBAR) {
			snprintf(obj, sizeof obj, "wait at barrier.cluster (phase %" PRIu64 ") for threads of "
			         "the cluster that never arrive", x->cl->bar_phase);
		} else if (t->state == TS_COLL) {
			char here[128], miss[128];
			lanes_str(t->w->arrived, here, sizeof here);
			lanes_str(t->w->need & t->w->live & ~t->w->arrived, miss, sizeof miss);
			snprintf(obj, sizeof obj, "wait at a warp collective for lanes %s of warp %d "
			         "(lanes %s arrived)%s", miss, t->w->id, here,
			         t->w->coll_retry ? (x->palloc_state == 1 ? "; its tcgen05.alloc.cta_group::2 "
			                             "waits for the peer CTA's warp to allocate too"
			                             : "; it waits for TMEM columns to be freed") : "");
		}
		char who[96];
		if (n == 1)
			snprintf(who, sizeof who, "thread %d (warp %d)", lo, lo / 32);
		else
			snprintf(who, sizeof who, "threads %d-%d (%d threads, warps %d-%d)", lo, hi, n,
			         lo / 32, hi / 32);
		int w = snprintf(msg + *at, cap - *at, "\n  %s%s at PTX line %d `%s`: %s", rank, who,
		                 in->line, text, obj);
		if (w > 0)
			*at += (size_t)w;
	}
	free(done);
}

static void
deadlock(EmuCta *c)
{
	char msg[6144];
	size_t at = 0;
	msg[0] = 0;
	/* every CTA of the cluster: one may wait on another */
	for (int r = 0; r < c->cl->n; r++)
		if (c->cl->cta[r]->live)
			deadlock_threads(c->cl->cta[r], msg, sizeof msg, &at);
	/* barriers still expecting transaction bytes */
	const char *cls = "deadlock";
	for (int r = 0; r < c->cl->n; r++)
	for (int i = 0; i < c->cl->cta[r]->nmbar && at + 256 < sizeof msg; i++) {
		EmuMbar *m = &c->cl->cta[r]->mbar[i];
		if (!m->live || m->tx <= 0)
			continue;
		cls = "mbarrier-tx";
		char text[200];
		emu_line_text(c->prog, m->tx_line, text, sizeof text);
		int w = snprintf(msg + at, sizeof msg - at, "\n  mbarrier 0x%x expects %" PRId64 " more "
		                 "transaction bytes that no pending TMA will deliver (expect_tx at PTX "
		                 "line %d `%s`)", m->addr, m->tx, m->tx_line, text);
		if (w > 0)
			at += (size_t)w;
	}
	emu_hazard(c, NULL, NULL, cls, "deadlock: every live thread is blocked and no async operation "
	           "is pending:%s", msg);
}

/* ---- end of a CTA ------------------------------------------------------------------- */

static int
cta_finish(EmuCta *c)
{
	/* async work still queued when every thread exited (bulk stores,
	 * commits): it completes, the kernel is not done before it */
	while (c->naq && !c->failed)
		if (emu_async_complete_one(c))
			return EMU_STOP;
	if (c->failed)
		return EMU_STOP;
	/* a named barrier left mid-phase (arrivals without the syncs that
	 * complete them, e.g. an unbalanced turn ring) would carry its count
	 * into whatever the hardware next runs with that barrier */
	for (int id = 0; id < 16; id++) {
		const EmuBar *b = &c->bar[id];
		if (b->arrived > 0) {
			char text[200];
			emu_line_text(c->prog, b->line, text, sizeof text);
			return emu_hazard(c, NULL, NULL, "barrier",
			                  "at exit named barrier %d holds %d arrival%s of %d (first at PTX line "
			                  "%d `%s`) that no bar.sync completed", id, b->arrived,
			                  b->arrived > 1 ? "s" : "", b->expected, b->line, text);
		}
	}
	for (int i = 0; i < c->nmbar; i++) {
		EmuMbar *m = &c->mbar[i];
		/* arrivals that completed no phase: the init's count does not
		 * match the arrivals the kernel makes (one short shifts every
		 * later phase by one arrival and leaves the rest mid-phase), so
		 * some wait completed before all the work it stands for */
		if (m->live && m->pending > 0 && (uint32_t)m->pending < m->expected) {
			char text[200];
			emu_line_text(c->prog, m->init_line, text, sizeof text);
			return emu_hazard(c, NULL, NULL, "mbarrier",
			                  "at exit mbarrier 0x%x holds %u arrival%s of the %u its init (PTX "
			                  "line %d `%s`) expects per phase, after %" PRIu64 " completed "
			                  "phase%s: the init's count and the arrivals do not match",
			                  m->addr, m->expected - (uint32_t)m->pending,
			                  m->expected - (uint32_t)m->pending > 1 ? "s" : "", m->expected,
			                  m->init_line, text, m->phases, m->phases == 1 ? "" : "s");
		}
		if (m->live && m->tx < 0) {
			char text[200];
			emu_line_text(c->prog, m->init_line, text, sizeof text);
			return emu_hazard(c, NULL, NULL, "mbarrier-tx",
			                  "at exit mbarrier 0x%x (initialized at PTX line %d `%s`) received "
			                  "%" PRId64 " transaction bytes that no expect_tx announced: an async "
			                  "copy completed on a phase nobody waited for (a missing expect_tx, "
			                  "e.g. for a multicast destination)", m->addr, m->init_line, text,
			                  -m->tx);
		}
		if (m->live && m->tx > 0) {
			char text[200];
			emu_line_text(c->prog, m->tx_line, text, sizeof text);
			return emu_hazard(c, NULL, NULL, "mbarrier-tx",
			                  "at exit mbarrier 0x%x still expects %" PRId64 " transaction bytes "
			                  "(expect_tx at PTX line %d `%s`) that never arrived", m->addr, m->tx,
			                  m->tx_line, text);
		}
	}
	return emu_tmem_exit_check(c);
}

/* One pass over the ready threads of c. */
static int
cta_round(EmuCta *c, int *progressed)
{
	int quantum = 1 << 16;
	int start = c->lc->seed ? (int)(emu_rand(c) % (uint64_t)c->nthreads) : 0;
	for (int k = 0; k < c->nthreads; k++) {
		EmuThread *t = &c->t[(start + k) % c->nthreads];
		if (t->state != TS_READY)
			continue;
		uint64_t s0 = t->steps;
		if (c->lc->seed)
			quantum = 1 + (int)(emu_rand(c) % 2048);
		int rc = run_thread(c, t, quantum);
		if (rc == EMU_STOP || c->failed)
			return EMU_STOP;
		if (t->steps != s0)
			*progressed = 1;
		if (c->lc->seed && c->naq && emu_rand(c) % 8 == 0 && emu_async_complete_one(c))
			return EMU_STOP;
		if (rc == EMU_YIELD)
			break; /* the next thread to run: a random one, maybe of another CTA */
	}
	if (c->steps > c->lc->max_steps)
		return emu_fault(c, NULL, NULL, "more than %" PRIu64 " instructions executed in one "
		                 "CTA (set KRT_EMU_MAX_STEPS to raise the limit): a livelock?",
		                 c->lc->max_steps);
	return c->failed ? EMU_STOP : 0;
}

static uint64_t
cluster_steps(const EmuCluster *cl)
{
	uint64_t n = 0;
	for (int r = 0; r < cl->n; r++)
		n += cl->cta[r]->steps;
	return n;
}

static int
cluster_failed(const EmuCluster *cl)
{
	for (int r = 0; r < cl->n; r++)
		if (cl->cta[r]->failed)
			return 1;
	return 0;
}

/* Nothing ran in a whole pass: retry blocked collectives, complete one
 * async operation, grant try_wait timeouts, or report the deadlock.
 * Returns 1 when something may run again, EMU_STOP otherwise. */
static int
cluster_stalled(EmuCluster *cl, uint64_t *timeout_gen)
{
	int retried = 0;
	for (int r = 0; r < cl->n; r++) {
		EmuCta *c = cl->cta[r];
		for (int i = 0; i < c->nwarps && c->live; i++) {
			EmuWarp *w = &c->w[i];
			if (w->coll_retry) {
				uint64_t g = c->gen;
				int rc = rendezvous_fire(c, w);
				if (rc == EMU_STOP)
					return EMU_STOP;
				if (rc != EMU_BLOCK || c->gen != g)
					retried = 1;
			}
		}
	}
	if (retried)
		return 1;
	int first = cl->start;
	for (int k = 0; k < cl->n; k++) {
		EmuCta *c = cl->cta[(first + k) % cl->n];
		if (c->naq)
			return emu_async_complete_one(c) ? EMU_STOP : 1;
	}
	uint64_t gen = 0;
	for (int r = 0; r < cl->n; r++)
		gen += cl->cta[r]->gen;
	if (gen != *timeout_gen) {
		*timeout_gen = gen;
		int woke = 0;
		for (int r = 0; r < cl->n; r++)
			for (int i = 0; i < cl->cta[r]->nthreads; i++) {
				EmuThread *t = &cl->cta[r]->t[i];
				if (t->state == TS_MBAR) {
					t->state = TS_READY;
					t->timeout = 1;
					woke = 1;
				}
			}
		if (woke)
			return 1;
	}
	for (int r = 0; r < cl->n; r++)
		if (cl->cta[r]->live) {
			deadlock(cl->cta[r]);
			break;
		}
	return EMU_STOP;
}

static int
run_cluster(EmuCluster *cl)
{
	uint64_t timeout_gen = UINT64_MAX;
	for (;;) {
		int progressed = 0, left = 0;
		EmuCta *c0 = cl->cta[0];
		int start = c0->lc->seed ? (int)(emu_rand(c0) % (uint64_t)cl->n) : 0;
		cl->start = start;
		for (int k = 0; k < cl->n; k++) {
			EmuCta *c = cl->cta[(start + k) % cl->n];
			if (c->finished)
				continue;
			if (c->live && cta_round(c, &progressed))
				return EMU_STOP;
			if (cluster_failed(cl))
				return EMU_STOP;
			if (!c->live) {
				if (cta_finish(c) || cluster_failed(cl))
					return EMU_STOP;
				c->finished = 1;
				progressed = 1;
			} else {
				left = 1;
			}
		}
		if (c0->lc->launch_steps + cluster_steps(cl) > c0->lc->max_launch_steps)
			return emu_fault(c0, NULL, NULL, "more than %" PRIu64 " instructions executed in one "
			                 "launch (KRT_EMU_MAX_LAUNCH_STEPS; runtime/emu/README.md): emulate "
			                 "a smaller shape", c0->lc->max_launch_steps);
		if (!left)
			return 0;
		if (progressed)
			continue;
		if (cluster_stalled(cl, &timeout_gen) == EMU_STOP)
			return EMU_STOP;
	}
}

static void
cluster_free(EmuCluster *cl)
{
	for (int r = 0; r < cl->n; r++)
		cta_free(cl->cta[r]);
	free(cl->bar_vc);
	free(cl->bar_done_vc);
	for (int i = 0; i < EMU_MAX_SYNC; i++)
		free(cl->sync_vc[i]);
}

/* Cluster shape: the launch's, else the kernel's .reqnctapercluster. */
static int
cluster_dims(EmuLaunchCtx *lc, uint32_t d[3], KrtErr *err)
{
	const KrtLaunch *l = lc->l;
	for (int i = 0; i < 3; i++)
		d[i] = l->cluster[i] ? l->cluster[i] : 1;
	if (d[0] * d[1] * d[2] == 1 && lc->prog->reqncluster[0])
		for (int i = 0; i < 3; i++)
			d[i] = lc->prog->reqncluster[i] ? lc->prog->reqncluster[i] : 1;
	uint32_t n = d[0] * d[1] * d[2];
	if (n > EMU_MAX_CLUSTER)
		return krt_errf(err, KRT_EINVAL, "emu: kernel %s: a cluster of %ux%ux%u = %u CTAs; at "
		                "most %d (PTX ISA §5.2.3 \"Cluster of Cooperative Thread Arrays\")",
		                lc->prog->entry, d[0], d[1], d[2], n, EMU_MAX_CLUSTER);
	for (int i = 0; i < 3; i++)
		if (l->grid[i] % d[i])
			return krt_errf(err, KRT_EINVAL, "emu: kernel %s: grid dimension %c = %u is not a "
			                "multiple of the cluster dimension %u", lc->prog->entry, "xyz"[i],
			                l->grid[i], d[i]);
	if (lc->prog->reqncluster[0] && n != lc->prog->reqncluster[0] * lc->prog->reqncluster[1] *
	                                     lc->prog->reqncluster[2])
		return krt_errf(err, KRT_EINVAL, "emu: kernel %s: launched with clusters of %ux%ux%u but "
		                "it declares .reqnctapercluster %u, %u, %u", lc->prog->entry, d[0], d[1],
		                d[2], lc->prog->reqncluster[0], lc->prog->reqncluster[1],
		                lc->prog->reqncluster[2]);
	return 0;
}

int
emu_run_launch(EmuLaunchCtx *lc, KrtErr *err)
{
	const KrtLaunch *l = lc->l;
	uint64_t nthreads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
	if (nthreads == 0 || nthreads > EMU_MAX_THREADS)
		return krt_errf(err, KRT_EINVAL, "emu: kernel %s: block of %" PRIu64 " threads (1..%d)",
		                lc->prog->entry, nthreads, EMU_MAX_THREADS);
	EmuCluster cl;
	memset(&cl, 0, sizeof cl);
	if (cluster_dims(lc, cl.dim, err))
		return err->code;
	cl.n = (int)(cl.dim[0] * cl.dim[1] * cl.dim[2]);
	if (cl.n == 1 && lc->coresident > 1) {
		/* runtime/emu/README.md, "Co-resident CTAs" */
		if (l->grid[0] % lc->coresident)
			return krt_errf(err, KRT_EINVAL, "emu: kernel %s: KRT_EMU_CORESIDENT=%u needs grid x "
			                "(%u) to be a multiple of it", lc->prog->entry, lc->coresident, l->grid[0]);
		cl.dim[0] = lc->coresident;
		cl.n = (int)lc->coresident;
		cl.solo = 1;
	}
	cl.per = (int)nthreads + EMU_MAX_MBAR + EMU_MAX_AGENTS;
	lc->cl_n = cl.n;
	for (int r = 0; r < cl.n; r++)
		if (!(cl.cta[r] = cta_new(lc, &cl, r, err))) {
			cluster_free(&cl);
			return krt_errf(err, KRT_ENOMEM, "emu: out of host memory for a CTA of kernel %s",
			                lc->prog->entry);
		}
	cl.bar_vc = emu_vc_new(cl.cta[0]);
	cl.bar_done_vc = emu_vc_new(cl.cta[0]);
	int sync_ok = 1;
	for (int i = 0; i < EMU_MAX_SYNC; i++)
		sync_ok &= (cl.sync_vc[i] = emu_vc_new(cl.cta[0])) != NULL;
	if (!cl.bar_vc || !cl.bar_done_vc || !sync_ok) {
		cluster_free(&cl);
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory");
	}
	int rc = KRT_OK;
	uint32_t g[3], id[3];
	for (int i = 0; i < 3; i++)
		g[i] = l->grid[i] / cl.dim[i];
	for (cl.id[2] = 0; cl.id[2] < g[2] && !rc; cl.id[2]++)
		for (cl.id[1] = 0; cl.id[1] < g[1] && !rc; cl.id[1]++)
			for (cl.id[0] = 0; cl.id[0] < g[0] && !rc; cl.id[0]++) {
				/* %cluster_ctarank: x fastest (PTX ISA §10.24) */
				for (int r = 0; r < cl.n; r++) {
					uint32_t cx = (uint32_t)r % cl.dim[0];
					uint32_t cy = (uint32_t)r / cl.dim[0] % cl.dim[1];
					uint32_t cz = (uint32_t)r / (cl.dim[0] * cl.dim[1]);
					id[0] = cl.id[0] * cl.dim[0] + cx;
					id[1] = cl.id[1] * cl.dim[1] + cy;
					id[2] = cl.id[2] * cl.dim[2] + cz;
					cta_reset(cl.cta[r], id);
				}
				cl.bar_arrived = 0;
				cl.nsync = 0;
				cl.bar_phase = 0;
				memset(cl.bar_vc, 0, (size_t)cl.cta[0]->nslots * sizeof *cl.bar_vc);
				memset(cl.bar_done_vc, 0, (size_t)cl.cta[0]->nslots * sizeof *cl.bar_vc);
				if (run_cluster(&cl) == EMU_STOP || cluster_failed(&cl))
					rc = err->code ? err->code : KRT_ECUDA;
				lc->launch_steps += cluster_steps(&cl);
			}
	cluster_free(&cl);
	return rc;
}
