/* Control flow, barriers, warp collectives and fences (PTX ISA §9.7.12
 * control flow, §9.7.13 parallel synchronization, §9.7.9.6 shfl, §9.7.13.7
 * vote, §9.7.13.8 elect.sync, §9.7.19.4 setmaxnreg, §9.7.13.4 membar/fence). */
#include <string.h>

#include "emu.h"
#include "ops.h"

int
emu_op_bra(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	t->pc = (uint32_t)emu_opnd(c, in, 0)->imm;
	return EMU_JUMP;
}

int
emu_op_ret(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	(void)c;
	(void)t;
	(void)in;
	return EMU_EXIT;
}

int
emu_op_trap(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return emu_fault(c, t, in, "trap executed");
}

int
emu_op_activemask(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	/* threads run one at a time here: the warp's live lanes are "active" */
	return emu_set(c, t, in, emu_opnd(c, in, 0), t->w->live) ? EMU_STOP : EMU_NEXT;
}

/* ---- bar / barrier ------------------------------------------------------------- */

enum { BAR_SYNC = 1, BAR_ARRIVE, BAR_RED };

int
emu_mod_bar(EmuInsn *in, const char *m, EmuParse *p)
{
	if (strcmp(m, "sync") == 0)
		in->aux[0] = BAR_SYNC;
	else if (strcmp(m, "arrive") == 0)
		in->aux[0] = BAR_ARRIVE;
	else if (strcmp(m, "cta") == 0)
		return 1;
	else if (strcmp(m, "red") == 0 || strcmp(m, "cluster") == 0)
		return emu_parse_fail(p, "%s.%s is not supported by the emulator", in->def->name, m);
	else
		return 0;
	return 1;
}

/* bar.sync a{, b} == barrier.sync.aligned (PTX ISA §9.7.13.1): b threads
 * (a multiple of 32) or all threads of the CTA arrive at named barrier a. */
int
emu_op_bar(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (!in->aux[0])
		return emu_fault(c, t, in, "%s without .sync or .arrive", in->def->name);
	uint64_t id = 0, count = UINT64_MAX;
	if (in->nop >= 1 && emu_geti(c, t, in, 0, &id))
		return EMU_STOP;
	if (in->nop >= 2 && emu_geti(c, t, in, 1, &count))
		return EMU_STOP;
	if (in->aux[0] == BAR_ARRIVE && in->nop < 2)
		return emu_fault(c, t, in, "bar.arrive needs a thread count");
	return emu_bar_arrive(c, t, in, (int)id, count == UINT64_MAX ? -1 : (int)count,
	                      in->aux[0] == BAR_SYNC);
}

int
emu_wop_bar_warp(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	(void)c;
	(void)w;
	(void)in;
	(void)lanes;
	return EMU_NEXT; /* the rendezvous joined the lanes' clocks */
}

/* ---- fences -------------------------------------------------------------------- */

enum { FN_PROXY = 1, FN_ASYNC = 2, FN_MBINIT = 4 };

int
emu_mod_fence(EmuInsn *in, const char *m, EmuParse *p)
{
	static const char *const ok[] = {"shared::cta", "shared::cluster", "global", "alias",
	                                 "tensormap", "generic", "gl", "release", "acquire",
	                                 "sync_restrict::shared::cta", "sync_restrict::shared::cluster",
	                                 "to_proxy::generic", "from_proxy::async"};
	if (strcmp(m, "proxy") == 0)
		in->aux[0] |= FN_PROXY;
	else if (strcmp(m, "async") == 0)
		in->aux[0] |= FN_ASYNC;
	else if (strcmp(m, "mbarrier_init") == 0)
		in->aux[0] |= FN_MBINIT;
	else {
		for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
			if (strcmp(ok[i], m) == 0)
				return 1;
		return 0;
	}
	return 1;
}

/* fence.proxy.async orders this thread's generic smem accesses with later
 * async-proxy accesses (docs/hardware.md, "Proxy fences"). Other fences order memory
 * among threads, which the emulator's sequential memory already does;
 * fence.mbarrier_init matters only across a cluster. */
int
emu_op_fence(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if ((in->aux[0] & (FN_PROXY | FN_ASYNC)) == (FN_PROXY | FN_ASYNC))
		emu_proxy_fence(c, t);
	return EMU_NEXT;
}

/* ---- warp collectives --------------------------------------------------------------- */

int
emu_mod_elect(EmuInsn *in, const char *m, EmuParse *p)
{
	(void)in;
	(void)m;
	(void)p;
	return 0;
}

/* elect.sync d|p, membermask: one leader among the lanes (the lowest; with
 * KRT_EMU_SEED a random one, so no kernel relies on lane 0). */
int
emu_wop_elect(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *base = &c->t[w->id * 32];
	int leader = __builtin_ctz(lanes);
	if (c->lc->seed) {
		int n = __builtin_popcount(lanes);
		int k = (int)(emu_rand(c) % (uint64_t)n);
		for (int l = 0; l < 32; l++)
			if ((lanes >> l & 1) && k-- == 0) {
				leader = l;
				break;
			}
	}
	const EmuOperand *d = emu_opnd(c, in, 0);
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		EmuThread *t = &base[l];
		if (d->kind == OPK_PAIR) {
			if (emu_set(c, t, in, emu_sub(c, d, 0), (uint64_t)leader) ||
			    emu_set(c, t, in, emu_sub(c, d, 1), l == leader))
				return EMU_STOP;
		} else if (emu_set(c, t, in, d, l == leader)) {
			return EMU_STOP;
		}
	}
	return EMU_NEXT;
}

enum { SH_UP = 1, SH_DOWN, SH_BFLY, SH_IDX };

int
emu_mod_shfl(EmuInsn *in, const char *m, EmuParse *p)
{
	static const char *const modes[] = {"", "up", "down", "bfly", "idx"};
	for (int i = 1; i <= SH_IDX; i++)
		if (strcmp(modes[i], m) == 0) {
			in->sub = (uint8_t)i;
			return 1;
		}
	return 0;
}

/* shfl.sync.mode.b32 d{|p}, a, b, c, membermask (PTX ISA §9.7.9.6) */
int
emu_wop_shfl(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *base = &c->t[w->id * 32];
	uint64_t src[32], bv[32], cv[32];
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		if (emu_geti(c, &base[l], in, 1, &src[l]) || emu_geti(c, &base[l], in, 2, &bv[l]) ||
		    emu_geti(c, &base[l], in, 3, &cv[l]))
			return EMU_STOP;
	}
	const EmuOperand *d = emu_opnd(c, in, 0);
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		uint32_t b = (uint32_t)bv[l] & 31, cc = (uint32_t)cv[l] & 31;
		uint32_t segmask = (uint32_t)(cv[l] >> 8) & 31;
		uint32_t maxl = ((uint32_t)l & segmask) | (cc & ~segmask);
		uint32_t minl = (uint32_t)l & segmask;
		int j;
		int pv;
		switch (in->sub) {
		case SH_UP: j = l - (int)b; pv = j >= (int)maxl; break;
		case SH_DOWN: j = l + (int)b; pv = j <= (int)maxl; break;
		case SH_BFLY: j = l ^ (int)b; pv = j <= (int)maxl; break;
		default: j = (int)(minl | (b & ~segmask)); pv = j <= (int)maxl; break;
		}
		if (!pv)
			j = l;
		if (j < 0 || j > 31 || !(lanes >> j & 1))
			return emu_hazard(c, &base[l], in, "non-uniform-sync-aligned",
			                  "shfl.sync: lane %d reads lane %d, which is not in the membermask", l, j);
		uint64_t v = src[j];
		if (d->kind == OPK_PAIR) {
			if (emu_set(c, &base[l], in, emu_sub(c, d, 0), v) ||
			    emu_set(c, &base[l], in, emu_sub(c, d, 1), (uint64_t)pv))
				return EMU_STOP;
		} else if (emu_set(c, &base[l], in, d, v)) {
			return EMU_STOP;
		}
	}
	return EMU_NEXT;
}

enum { VO_ALL = 1, VO_ANY, VO_UNI, VO_BALLOT };

int
emu_mod_vote(EmuInsn *in, const char *m, EmuParse *p)
{
	static const char *const modes[] = {"", "all", "any", "uni", "ballot"};
	for (int i = 1; i <= VO_BALLOT; i++)
		if (strcmp(modes[i], m) == 0) {
			in->sub = (uint8_t)i;
			return 1;
		}
	return 0;
}

int
emu_wop_vote(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *base = &c->t[w->id * 32];
	uint32_t ballot = 0;
	for (int l = 0; l < 32; l++) {
		uint64_t v;
		if (!(lanes >> l & 1))
			continue;
		if (emu_geti(c, &base[l], in, 1, &v))
			return EMU_STOP;
		if (v & 1)
			ballot |= 1u << l;
	}
	uint64_t r;
	switch (in->sub) {
	case VO_ALL: r = ballot == lanes; break;
	case VO_ANY: r = ballot != 0; break;
	case VO_UNI: r = ballot == lanes || ballot == 0; break;
	default: r = ballot; break;
	}
	for (int l = 0; l < 32; l++)
		if ((lanes >> l & 1) && emu_set(c, &base[l], in, emu_opnd(c, in, 0), r))
			return EMU_STOP;
	return EMU_NEXT;
}

int
emu_chk_setmaxnreg(EmuInsn *in, EmuParse *p)
{
	(void)in;
	(void)p;
	return 0;
}

/* setmaxnreg.{inc,dec}.sync.aligned.u32 N: registers are unlimited here;
 * only the operand rules are checked (PTX ISA §9.7.19.4). */
int
emu_wop_setmaxnreg(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	uint64_t n;
	if (emu_uniform(c, w, in, lanes, 0, &n))
		return EMU_STOP;
	if (n < 24 || n > 256 || n % 8)
		return emu_fault(c, &c->t[w->id * 32], in,
		                 "setmaxnreg %u: must be a multiple of 8 in 24..256", (unsigned)n);
	return EMU_NEXT;
}
