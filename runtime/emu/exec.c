/* Execution of a launch: CTAs one at a time (clusters of one), every thread
 * an interpreter state with its own pc and registers.
 *
 * Scheduling. Each ready thread runs until it blocks (bar.sync, an mbarrier
 * wait, a warp rendezvous) or exits. Async work (TMA, tcgen05.mma/cp/shift/commit,
 * bulk stores) sits in a queue and completes only when no thread can run:
 * that is the latest point the PTX memory model allows, so a consumer that
 * forgot to wait reads stale data or trips a hazard check instead of
 * passing by luck. With KRT_EMU_SEED set, completions are picked at random
 * among the legal ones and may also happen early, between thread slices.
 *
 * When nothing can run and nothing is queued, threads spinning in
 * mbarrier.try_wait get one timeout (try_wait returns false, as the hardware
 * may); if they come back to the same waits without changing any state, the
 * launch is a deadlock and the report says who waits on what. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

/* ---- reports ---------------------------------------------------------------- */

static void
where(const EmuCta *c, const EmuThread *t, const EmuInsn *in, char *buf, size_t n)
{
	char text[200] = "";
	if (in)
		emu_line_text(c->prog, in->line, text, sizeof text);
	int at = snprintf(buf, n, "kernel %s, CTA (%u,%u,%u)", c->prog->entry, c->ctaid[0],
	                  c->ctaid[1], c->ctaid[2]);
	if (t && at >= 0 && (size_t)at < n)
		at += snprintf(buf + at, n - (size_t)at, ", thread %d (warp %d, lane %d)", t->tid,
		               t->tid / 32, t->lane);
	if (in && at >= 0 && (size_t)at < n)
		snprintf(buf + at, n - (size_t)at, ", PTX line %d `%s`", in->line, text);
}

int
emu_hazard(EmuCta *c, const EmuThread *t, const EmuInsn *in, const char *cls, const char *fmt,
           ...)
{
	if (c->failed)
		return EMU_STOP;
	c->failed = 1;
	char loc[512], why[4096];
	where(c, t, in, loc, sizeof loc);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	krt_errf(c->err, EMU_EHAZARD, "emu hazard [%s]: %s: %s", cls, loc, why);
	return EMU_STOP;
}

int
emu_fault(EmuCta *c, const EmuThread *t, const EmuInsn *in, const char *fmt, ...)
{
	if (c->failed)
		return EMU_STOP;
	c->failed = 1;
	char loc[512], why[4096];
	where(c, t, in, loc, sizeof loc);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	krt_errf(c->err, KRT_ECUDA, "emu fault: %s: %s", loc, why);
	return EMU_STOP;
}

uint64_t
emu_rand(EmuCta *c)
{
	/* xorshift64*: deterministic per seed */
	uint64_t x = c->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	c->rng = x;
	return x * UINT64_C(0x2545F4914F6CDD1D);
}

/* ---- operands ------------------------------------------------------------- */

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
static int
reg_hazard(EmuCta *c, EmuThread *t, const EmuInsn *in, int reg, int write)
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
		                  "(hardware-facts §3.8, pitfall 9)", name, acc, line);
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
	case SP_CTAID_X: case SP_CLUSTERID_X: return c->ctaid[0];
	case SP_CTAID_Y: case SP_CLUSTERID_Y: return c->ctaid[1];
	case SP_CTAID_Z: case SP_CLUSTERID_Z: return c->ctaid[2];
	case SP_NCTAID_X: case SP_NCLUSTERID_X: return l->grid[0];
	case SP_NCTAID_Y: case SP_NCLUSTERID_Y: return l->grid[1];
	case SP_NCTAID_Z: case SP_NCLUSTERID_Z: return l->grid[2];
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
	case SP_CLUSTER_CTARANK: return 0;
	case SP_CLUSTER_NCTARANK: return 1;
	case SP_IS_EXPLICIT_CLUSTER: return 0;
	case SP_CLUSTER_CTAID_X: case SP_CLUSTER_CTAID_Y: case SP_CLUSTER_CTAID_Z: return 0;
	case SP_CLUSTER_NCTAID_X: case SP_CLUSTER_NCTAID_Y: case SP_CLUSTER_NCTAID_Z: return 1;
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
		return y->dynamic ? c->dyn_addr : c->lc->smem_base + y->addr;
	return y->addr;
}

int
emu_get(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuOperand *o, uint64_t *v)
{
	switch (o->kind) {
	case OPK_REG:
		if (t->npend && (t->pend[o->reg] & PEND_HAZARD) &&
		    (t->pend[o->reg] & (PEND_TCLD | PEND_WGMMA)))
			return reg_hazard(c, t, in, o->reg, 0);
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
			return reg_hazard(c, t, in, r, 1);
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
	if (a < c->smem_lo || a >= c->smem_end)
		return emu_fault(c, t, in, "shared address 0x%" PRIx64 " is outside the CTA's shared "
		                 "memory [0x%x, 0x%x)", a, c->smem_lo, c->smem_end);
	*out = (uint32_t)a;
	return 0;
}

/* ---- the async queue --------------------------------------------------------- */

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

/* An op's record, completed or still queued when a launch stops. */
static void
async_free(EmuAsync *a)
{
	emu_tc_drop(a);
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
	int rc;
	switch (a.kind) {
	case AS_TMA_LOAD:
	case AS_TMA_STORE:
	case AS_BULK_COPY:
		rc = emu_tma_complete(c, &a);
		break;
	default:
		rc = emu_tc_complete(c, &a);
		break;
	}
	async_free(&a);
	return rc;
}

/* Completes one queued op: the oldest ready one, or a random ready one. */
static int
complete_one(EmuCta *c)
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

/* ---- waking ------------------------------------------------------------------ */

void
emu_wake_mbar(EmuCta *c, uint32_t addr)
{
	for (int i = 0; i < c->nthreads; i++) {
		EmuThread *t = &c->t[i];
		if (t->state == TS_MBAR && t->wait_addr == addr)
			t->state = TS_READY;
	}
}

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
		                  "seed-lessons: a partial-warp tcgen05.ld hung the GPU)",
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

/* ---- running threads -------------------------------------------------------------- */

/* Single-thread-issue instructions (tcgen05.mma/cp/shift/commit): the n-th
 * execution of one by two lanes of a warp is two issues of one converged
 * instruction, i.e. the whole warp issuing (hardware-facts pitfall 5). */
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
		                  "operation. Pick one thread with elect.sync (hardware-facts pitfall 5)",
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
			return reg_hazard(c, t, in, in->guard, 0);
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
	}
	return EMU_NEXT;
}

static int try_bar_complete(EmuCta *c, int id);

static int
thread_exit(EmuCta *c, EmuThread *t)
{
	EmuWarp *w = t->w;
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
	/* barriers without a thread count wait for every live thread */
	for (int i = 0; i < 16; i++)
		if (c->bar[i].expected < 0 && try_bar_complete(c, i))
			return EMU_STOP;
	if (w->coll_pc >= 0 && w->arrived && w->arrived == (w->need & w->live)) {
		int rc = rendezvous_fire(c, w);
		if (rc == EMU_STOP)
			return EMU_STOP;
	}
	return EMU_EXIT;
}

/* ---- named barriers (bar.sync, barrier.sync, bar.arrive) ------------------------ */

static EmuClock *
bar_vc(EmuCta *c, int id)
{
	return c->clocks + (size_t)(2 * c->nthreads + 2 * EMU_MAX_MBAR + id) * (size_t)c->nslots;
}

static int
try_bar_complete(EmuCta *c, int id)
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
		if (try_bar_complete(c, id))
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

/* ---- CTA setup ------------------------------------------------------------------ */

static void
cta_free(EmuCta *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nthreads; i++) {
		free(c->t[i].unfenced);
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
		async_free(&c->aq[i]);
	free(c->aq);
	free(c->t);
	free(c->w);
	free(c->regs);
	free(c->pend);
	free(c->smem);
	free(c->swtag);
	free(c->srtag);
	free(c->sinflight);
	free(c->sinflight_line);
	free(c->sflags);
	free(c->sstamp);
	free(c->swriter);
	free(c->swline);
	free(c->tmem);
	free(c->twtag);
	free(c->trtag);
	free(c->clocks);
	free(c);
}

static EmuCta *
cta_new(EmuLaunchCtx *lc, KrtErr *err)
{
	const EmuProgram *p = lc->prog;
	const KrtLaunch *l = lc->l;
	EmuCta *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->lc = lc;
	c->prog = p;
	c->err = err;
	c->nthreads = (int)(l->block[0] * l->block[1] * l->block[2]);
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
	c->srtag = malloc((size_t)c->nchunks * sizeof *c->srtag);
	c->sinflight = malloc((size_t)c->nchunks * sizeof *c->sinflight);
	c->sinflight_line = malloc((size_t)c->nchunks * sizeof *c->sinflight_line);
	c->sflags = malloc(c->nchunks);
	c->sstamp = calloc(c->nchunks, sizeof *c->sstamp);
	c->swriter = malloc((size_t)c->nchunks * sizeof *c->swriter);
	c->swline = malloc((size_t)c->nchunks * sizeof *c->swline);
	if (lc->cc >= 100) {
		c->tmem = malloc((size_t)EMU_TMEM_LANES * EMU_TMEM_COLS * sizeof *c->tmem);
		c->twtag = malloc(4 * EMU_TMEM_COLS * sizeof *c->twtag);
		c->trtag = malloc(4 * EMU_TMEM_COLS * sizeof *c->trtag);
	}
	int bad = !c->t || !c->w || !c->regs || !c->pend || !c->smem || !c->swtag || !c->srtag ||
	          !c->sstamp ||
	          !c->sinflight || !c->sinflight_line || !c->sflags || !c->swriter || !c->swline ||
	          (lc->cc >= 100 && (!c->tmem || !c->twtag || !c->trtag));
	for (int i = 0; !bad && i < c->nthreads; i++) {
		EmuThread *t = &c->t[i];
		t->tid = i;
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
	c->live = c->nthreads;
	c->steps = 0;
	c->gen = 0;
	size_t nr = (size_t)c->nthreads * (size_t)p->nregs;
	for (size_t i = 0; i < nr; i++)
		c->regs[i] = UINT64_C(0x7fb1dead7fb1dead) & 0xffffffffu;
	/* with wgmma, every register write is tracked so an MMA that reads a
	 * register written after the last wgmma.fence is caught (§4.1) */
	memset(c->pend, p->has_wgmma ? PEND_WATCH | PEND_DIRTY : 0, nr);
	memset(c->smem, 0xdb, (size_t)c->nchunks * 16);
	memset(c->swtag, 0, (size_t)c->nchunks * sizeof *c->swtag);
	memset(c->srtag, 0, (size_t)c->nchunks * sizeof *c->srtag);
	memset(c->sinflight, 0, (size_t)c->nchunks * sizeof *c->sinflight);
	memset(c->sflags, 0, c->nchunks);
	memset(c->swriter, 0, (size_t)c->nchunks * sizeof *c->swriter);
	if (c->tmem) {
		/* TMEM before an MMA writes it: a NaN pattern */
		for (size_t i = 0; i < (size_t)EMU_TMEM_LANES * EMU_TMEM_COLS; i++)
			c->tmem[i] = 0x7fc0dead;
		memset(c->twtag, 0, 4 * EMU_TMEM_COLS * sizeof *c->twtag);
		memset(c->trtag, 0, 4 * EMU_TMEM_COLS * sizeof *c->trtag);
	}
	memset(c->talloc, 0, sizeof c->talloc);
	c->relinquished = 0;
	c->cta_group = 0;
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
	for (int i = 0; i < c->naq; i++)
		async_free(&c->aq[i]);
	c->naq = 0;
	for (int i = 0; i < c->nthreads; i++) {
		EmuThread *t = &c->t[i];
		t->pc = 0;
		t->state = TS_READY;
		t->timeout = 0;
		t->npend = p->has_wgmma;
		t->vc[t->tid] = 1;
		t->synced_line = 0;
		t->agent = -1;
		t->nunfenced = 0;
		t->ntcpend = 0;
		t->bulk_groups = 0;
		t->bulk_open = 0;
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

static void
deadlock(EmuCta *c)
{
	char msg[6144];
	size_t at = 0;
	msg[0] = 0;
	/* group threads waiting at the same instruction on the same object */
	uint8_t *done = calloc((size_t)c->nthreads, 1);
	for (int i = 0; i < c->nthreads && at + 256 < sizeof msg; i++) {
		EmuThread *t = &c->t[i];
		if (t->state == TS_EXITED || (done && done[i]))
			continue;
		int n = 0, lo = i, hi = i;
		for (int k = i; k < c->nthreads; k++) {
			EmuThread *u = &c->t[k];
			if (u->state == t->state && u->pc == t->pc && u->wait_addr == t->wait_addr &&
			    u->wait_parity == t->wait_parity && u->wait_bar == t->wait_bar) {
				if (done)
					done[k] = 1;
				n++;
				hi = k;
			}
		}
		char text[200], obj[512] = "";
		const EmuInsn *in = &c->prog->insn[t->pc < (uint32_t)c->prog->ninsn ? t->pc : 0];
		emu_line_text(c->prog, in->line, text, sizeof text);
		if (t->state == TS_MBAR) {
			EmuMbar *m = emu_mbar_find(c, t->wait_addr);
			char st[256] = "not initialized";
			if (m)
				emu_mbar_describe(c, m, st, sizeof st);
			snprintf(obj, sizeof obj, "wait on mbarrier 0x%x (kg_smem%+d) for the phase with "
			         "parity %u; %s", t->wait_addr, (int)(t->wait_addr - c->dyn_addr),
			         t->wait_parity, st);
		} else if (t->state == TS_BAR) {
			EmuBar *b = &c->bar[t->wait_bar];
			snprintf(obj, sizeof obj, "wait at barrier %d: %d of %d threads arrived",
			         t->wait_bar, b->arrived, b->expected < 0 ? c->live : b->expected);
		} else if (t->state == TS_COLL) {
			char here[128], miss[128];
			lanes_str(t->w->arrived, here, sizeof here);
			lanes_str(t->w->need & t->w->live & ~t->w->arrived, miss, sizeof miss);
			snprintf(obj, sizeof obj, "wait at a warp collective for lanes %s of warp %d "
			         "(lanes %s arrived)%s", miss, t->w->id, here,
			         t->w->coll_retry ? "; it waits for TMEM columns to be freed" : "");
		}
		char who[96];
		if (n == 1)
			snprintf(who, sizeof who, "thread %d (warp %d)", lo, lo / 32);
		else
			snprintf(who, sizeof who, "threads %d-%d (%d threads, warps %d-%d)", lo, hi, n,
			         lo / 32, hi / 32);
		int w = snprintf(msg + at, sizeof msg - at, "\n  %s at PTX line %d `%s`: %s", who,
		                 in->line, text, obj);
		if (w > 0)
			at += (size_t)w;
	}
	free(done);
	/* barriers still expecting transaction bytes */
	const char *cls = "deadlock";
	for (int i = 0; i < c->nmbar && at + 256 < sizeof msg; i++) {
		EmuMbar *m = &c->mbar[i];
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
		if (complete_one(c))
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

static int
run_cta(EmuCta *c)
{
	uint64_t timeout_gen = UINT64_MAX;
	int quantum = 1 << 16;
	for (;;) {
		int progressed = 0;
		int start = c->lc->seed ? (int)(emu_rand(c) % (uint64_t)c->nthreads) : 0;
		for (int k = 0; k < c->nthreads; k++) {
			EmuThread *t = &c->t[(start + k) % c->nthreads];
			if (t->state != TS_READY)
				continue;
			uint64_t s0 = t->steps;
			int rc = run_thread(c, t, quantum);
			if (rc == EMU_STOP || c->failed)
				return EMU_STOP;
			if (t->steps != s0)
				progressed = 1;
			if (c->lc->seed && c->naq && emu_rand(c) % 8 == 0 && complete_one(c))
				return EMU_STOP;
		}
		if (c->failed)
			return EMU_STOP;
		if (c->steps > c->lc->max_steps)
			return emu_fault(c, NULL, NULL, "more than %" PRIu64 " instructions executed in one "
			                 "CTA (set KRT_EMU_MAX_STEPS to raise the limit): a livelock?",
			                 c->lc->max_steps);
		if (c->lc->launch_steps + c->steps > c->lc->max_launch_steps)
			return emu_fault(c, NULL, NULL, "more than %" PRIu64 " instructions executed in one "
			                 "launch (KRT_EMU_MAX_LAUNCH_STEPS; runtime/emu/README.md): emulate "
			                 "a smaller shape", c->lc->max_launch_steps);
		if (!c->live)
			return cta_finish(c);
		if (progressed)
			continue;
		/* nothing can run */
		int retried = 0;
		for (int i = 0; i < c->nwarps; i++) {
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
		if (retried)
			continue;
		if (c->naq) {
			if (complete_one(c))
				return EMU_STOP;
			continue;
		}
		if (c->gen != timeout_gen) {
			timeout_gen = c->gen;
			int woke = 0;
			for (int i = 0; i < c->nthreads; i++) {
				EmuThread *t = &c->t[i];
				if (t->state == TS_MBAR) {
					t->state = TS_READY;
					t->timeout = 1;
					woke = 1;
				}
			}
			if (woke)
				continue;
		}
		deadlock(c);
		return EMU_STOP;
	}
}

int
emu_run_launch(EmuLaunchCtx *lc, KrtErr *err)
{
	const KrtLaunch *l = lc->l;
	uint64_t nthreads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
	if (nthreads == 0 || nthreads > EMU_MAX_THREADS)
		return krt_errf(err, KRT_EINVAL, "emu: kernel %s: block of %" PRIu64 " threads (1..%d)",
		                lc->prog->entry, nthreads, EMU_MAX_THREADS);
	if (l->cluster[0] * l->cluster[1] * l->cluster[2] != 1)
		return krt_errf(err, KRT_EINVAL, "emu: kernel %s: clusters of %ux%ux%u CTAs; the emulator "
		                "runs clusters of one CTA only", lc->prog->entry, l->cluster[0],
		                l->cluster[1], l->cluster[2]);
	EmuCta *c = cta_new(lc, err);
	if (!c)
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory for a CTA of kernel %s",
		                lc->prog->entry);
	int rc = KRT_OK;
	uint32_t id[3];
	for (id[2] = 0; id[2] < l->grid[2] && !rc; id[2]++)
		for (id[1] = 0; id[1] < l->grid[1] && !rc; id[1]++)
			for (id[0] = 0; id[0] < l->grid[0] && !rc; id[0]++) {
				cta_reset(c, id);
				if (run_cta(c) == EMU_STOP || c->failed)
					rc = err->code ? err->code : KRT_ECUDA;
				lc->launch_steps += c->steps;
			}
	cta_free(c);
	return rc;
}
