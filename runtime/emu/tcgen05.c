/* Blackwell tcgen05 (PTX ISA §9.7.16; hardware-facts §2, §3).
 *
 * alloc/dealloc/relinquish, ld/st and wait::ld/st are warp collectives.
 * mma and commit have single-thread semantics: the issuing thread's
 * operations go into its issue pipe (an "agent" of the async queue) and
 * complete in order; an MMA's D lands in TMEM at completion, and a commit
 * arrives on its mbarrier once every earlier op of the pipe completed
 * (§3.5). tcgen05.ld values land in registers at wait::ld, tcgen05.st
 * values in TMEM at wait::st: the latest legal points. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

/* aux of ld/st: [0] shape, [1] num, [2] pack/unpack; of mma: [0] kind;
 * of commit: [3] multicast; of all: [7] cta_group */
enum { SH_32x32b = 1, SH_16x64b, SH_16x128b, SH_16x256b, SH_16x32bx2 };
enum { KIND_F16 = 1, KIND_TF32, KIND_F8F6F4, KIND_I8 };

int
emu_mod_tc(EmuInsn *in, const char *m, EmuParse *p)
{
	static const char *const shapes[] = {"", "32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2"};
	static const char *const kinds[] = {"", "kind::f16", "kind::tf32", "kind::f8f6f4", "kind::i8"};
	if (strcmp(m, "cta_group::1") == 0 || strcmp(m, "cta_group::2") == 0) {
		if (m[11] == '2')
			return emu_parse_fail(p, "%s.cta_group::2 needs a CTA pair; the emulator runs "
			                      "clusters of one", in->def->name);
		in->aux[7] = 1;
		return 1;
	}
	for (int i = 1; i <= SH_16x32bx2; i++)
		if (strcmp(shapes[i], m) == 0) {
			in->aux[0] = (uint32_t)i;
			return 1;
		}
	for (int i = 1; i <= KIND_I8; i++)
		if (strcmp(kinds[i], m) == 0) {
			in->aux[0] = (uint32_t)i;
			return 1;
		}
	if (m[0] == 'x' && m[1] >= '1' && m[1] <= '9') {
		unsigned n = (unsigned)strtoul(m + 1, NULL, 10);
		if (n == 0 || n > 128 || (n & (n - 1)))
			return emu_parse_fail(p, "%s: .%s is not one of .x1 .. .x128", in->def->name, m);
		in->aux[1] = n;
		return 1;
	}
	if (strcmp(m, "pack::16b") == 0 || strcmp(m, "unpack::16b") == 0)
		return emu_parse_fail(p, "%s.%s is not supported by the emulator yet", in->def->name, m);
	if (strcmp(m, "mbarrier::arrive::one") == 0)
		return 1;
	if (strcmp(m, "multicast::cluster") == 0) {
		in->aux[3] = 1;
		return 1;
	}
	if (strncmp(m, "collector::a::", 14) == 0)
		return 1; /* operand reuse: no effect on results */
	if (strncmp(m, "kind::", 6) == 0 || strcmp(m, "block_scale") == 0 || strcmp(m, "ws") == 0 ||
	    strcmp(m, "ashift") == 0 || strncmp(m, "scale_vec", 9) == 0 || strcmp(m, "sp") == 0)
		return emu_parse_fail(p, "%s.%s is not supported by the emulator yet", in->def->name, m);
	return 0;
}

/* registers per thread for one repetition of a shape (§3.6 Table 49) */
static int
shape_regs(uint32_t shape)
{
	return shape == SH_16x128b ? 2 : shape == SH_16x256b ? 4 : 1;
}

static int
shape_lanes(uint32_t shape)
{
	return shape == SH_32x32b ? 32 : 16;
}

int
emu_chk_tc_ldst(EmuInsn *in, EmuParse *p)
{
	if (!in->aux[0] || !in->aux[1])
		return emu_parse_fail(p, "%s needs a shape (.32x32b, ...) and a count (.x1 .. .x128)",
		                      in->def->name);
	if (in->ntypes != 1 || in->t[0] != T_B32)
		return emu_parse_fail(p, "%s needs .b32", in->def->name);
	int nregs = shape_regs(in->aux[0]) * (int)in->aux[1];
	if (nregs > 128)
		return emu_parse_fail(p, "%s: %d registers per thread exceed 128 (§3.6)", in->def->name,
		                      nregs);
	int split = in->aux[0] == SH_16x32bx2;
	if (in->nop != 2 + split)
		return emu_parse_fail(p, "%s takes %d operands", in->def->name, 2 + split);
	in->aux[2] = (uint32_t)nregs;
	return 0;
}

int
emu_chk_tc_alloc(EmuInsn *in, EmuParse *p)
{
	(void)in;
	(void)p;
	return 0;
}

int
emu_chk_tc_cp(EmuInsn *in, EmuParse *p)
{
	return emu_parse_fail(p, "tcgen05.cp is not supported by the emulator yet");
}

int
emu_chk_tc_mma(EmuInsn *in, EmuParse *p)
{
	if (!in->aux[0])
		return emu_parse_fail(p, "tcgen05.mma needs a .kind");
	if (!in->aux[7])
		return emu_parse_fail(p, "tcgen05.mma needs .cta_group::1");
	return 0;
}

static int
group_check(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	int g = in->aux[7] ? (int)in->aux[7] : 1;
	if (!c->cta_group)
		c->cta_group = g;
	else if (c->cta_group != g)
		return emu_hazard(c, t, in, "cta-group",
		                  "tcgen05 with .cta_group::%d after .cta_group::%d: every tcgen05 "
		                  "instruction of a kernel must use the same cta_group (pitfall 12)",
		                  g, c->cta_group);
	return 0;
}

/* TMEM tag checks for one tcgen05 access by thread t (vc_tc: it must have
 * fenced after the sync that ordered it, §3.8). self: slot counted as
 * program order (the thread, or its issue pipe for MMA chains). */
static int
tmem_tag_check(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuTag *tag, int self,
               uint32_t lane, uint32_t col, const char *what)
{
	if (emu_vc_covers(c, t->vc_tc, self, tag))
		return 0;
	char d[320];
	emu_tag_describe(c, tag, d, sizeof d);
	if (tag->pending)
		return emu_hazard(c, t, in, "async-in-flight",
		                  "%s TMEM lane %u column %u while the %s has not completed (no "
		                  "tcgen05.wait::ld/st or fence::before_thread_sync ordered it)",
		                  what, lane, col, d);
	int agent = tag->slot - c->nthreads - EMU_MAX_MBAR;
	if (tag->kind == TAGK_TC && agent >= 0 && agent < c->nagents &&
	    c->agent_done[agent] < tag->val)
		return emu_hazard(c, t, in, "async-in-flight",
		                  "%s TMEM lane %u column %u while the %s is still in flight: the "
		                  "tcgen05.commit that tracks it has not arrived on its mbarrier, and "
		                  "nothing waited for it", what, lane, col, d);
	if (emu_vc_covers(c, t->vc, self, tag))
		return emu_hazard(c, t, in, "missing-fence-after-thread-sync",
		                  "%s TMEM lane %u column %u: the %s was observed through a thread sync "
		                  "(PTX line %d) but no tcgen05.fence::after_thread_sync followed it "
		                  "before this tcgen05 operation (hardware-facts §3.8, pitfall 10)",
		                  what, lane, col, d, t->synced_line);
	return emu_hazard(c, t, in, "unordered-async",
	                  "%s TMEM lane %u column %u, which the %s writes or reads, without waiting "
	                  "for it: no mbarrier wait observed its tcgen05.commit / no barrier ordered it",
	                  what, lane, col, d);
}

/* ---- alloc / dealloc / relinquish ------------------------------------------------------ */

int
emu_wop_tc_alloc(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *t0 = &c->t[w->id * 32 + __builtin_ctz(lanes)];
	uint64_t dst, n;
	if (emu_uniform(c, w, in, lanes, 0, &dst) || emu_uniform(c, w, in, lanes, 1, &n) ||
	    group_check(c, t0, in))
		return EMU_STOP;
	if (!c->tmem)
		return emu_fault(c, t0, in, "tcgen05 on a device without tensor memory");
	if (n < 32 || n > 512 || (n & (n - 1)))
		return emu_hazard(c, t0, in, "tmem-alloc",
		                  "tcgen05.alloc of %" PRIu64 " columns: the count must be a power of two "
		                  "in [32, 512] (hardware-facts §3.1)", n);
	if (c->relinquished)
		return emu_hazard(c, t0, in, "tmem-alloc",
		                  "tcgen05.alloc after tcgen05.relinquish_alloc_permit (§3.2)");
	uint32_t sa;
	if (emu_shared_addr(c, t0, in, 0, &sa))
		return EMU_STOP;
	if (sa & 3)
		return emu_fault(c, t0, in, "tcgen05.alloc destination smem 0x%x is not 4-byte aligned", sa);
	/* first fit, aligned to the count (a buddy allocator's placement) */
	uint32_t col = UINT32_MAX;
	for (uint32_t s = 0; s + n <= EMU_TMEM_COLS && col == UINT32_MAX; s += (uint32_t)n) {
		int clash = 0;
		for (int i = 0; i < EMU_MAX_TMEM_ALLOCS; i++) {
			EmuTmemAlloc *a = &c->talloc[i];
			if (a->live && s < a->col + a->ncols && a->col < s + n)
				clash = 1;
		}
		if (!clash)
			col = s;
	}
	if (col == UINT32_MAX)
		return EMU_BLOCK; /* waits until columns are freed (§3.2) */
	int slot = -1;
	for (int i = 0; i < EMU_MAX_TMEM_ALLOCS && slot < 0; i++)
		if (!c->talloc[i].live)
			slot = i;
	if (slot < 0)
		return emu_fault(c, t0, in, "more than %d live TMEM allocations", EMU_MAX_TMEM_ALLOCS);
	EmuTmemAlloc *a = &c->talloc[slot];
	a->live = 1;
	a->col = col;
	a->ncols = (uint32_t)n;
	a->warp = w->id;
	a->line = in->line;
	/* the address goes to smem as a tcgen05 write: readers need a barrier
	 * and tcgen05.fence::after_thread_sync, the writer before_thread_sync */
	memcpy(c->smem + sa, &col, 4);
	uint32_t ch = sa >> 4;
	EmuTag *tag = &c->swtag[ch];
	tag->kind = TAGK_ALLOC;
	tag->pending = 1;
	tag->slot = (uint16_t)t0->tid;
	tag->val = 0;
	tag->line = in->line;
	tag->tid = t0->tid;
	c->sflags[ch] &= (uint8_t)~SF_UNFENCED;
	emu_tcpend_add(c, t0, ch | 0x80000000u);
	c->gen++;
	return EMU_NEXT;
}

int
emu_wop_tc_relinquish(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *t0 = &c->t[w->id * 32 + __builtin_ctz(lanes)];
	if (group_check(c, t0, in))
		return EMU_STOP;
	c->relinquished = 1;
	return EMU_NEXT;
}

int
emu_wop_tc_dealloc(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *t0 = &c->t[w->id * 32 + __builtin_ctz(lanes)];
	uint64_t taddr, n;
	if (emu_uniform(c, w, in, lanes, 0, &taddr) || emu_uniform(c, w, in, lanes, 1, &n) ||
	    group_check(c, t0, in))
		return EMU_STOP;
	uint32_t col = (uint32_t)taddr & 0xffff, lane = (uint32_t)(taddr >> 16);
	EmuTmemAlloc *a = NULL;
	for (int i = 0; i < EMU_MAX_TMEM_ALLOCS; i++)
		if (c->talloc[i].live && c->talloc[i].col == col)
			a = &c->talloc[i];
	if (!a || lane != 0)
		return emu_hazard(c, t0, in, "tmem-alloc",
		                  "tcgen05.dealloc of TMEM address 0x%08x: no live allocation starts there",
		                  (uint32_t)taddr);
	if (a->ncols != n)
		return emu_hazard(c, t0, in, "tmem-alloc",
		                  "tcgen05.dealloc of %" PRIu64 " columns at column %u, but %u were "
		                  "allocated there (PTX line %d)", n, col, a->ncols, a->line);
	/* no MMA may still write, no tcgen05 access may still be unordered */
	for (int i = 0; i < c->naq; i++) {
		const EmuAsync *q = &c->aq[i];
		if (q->kind == AS_TC_MMA)
			return emu_hazard(c, t0, in, "async-in-flight",
			                  "tcgen05.dealloc while the tcgen05.mma at PTX line %d (thread %d) "
			                  "has not completed", q->line, q->tid);
	}
	for (uint32_t q = 0; q < 4; q++)
		for (uint32_t k = col; k < col + a->ncols; k++) {
			uint32_t cell = q * EMU_TMEM_COLS + k;
			if (tmem_tag_check(c, t0, in, &c->twtag[cell], t0->tid, q * 32, k, "tcgen05.dealloc of") ||
			    tmem_tag_check(c, t0, in, &c->trtag[cell], t0->tid, q * 32, k, "tcgen05.dealloc of"))
				return EMU_STOP;
			memset(&c->twtag[cell], 0, sizeof c->twtag[cell]);
			memset(&c->trtag[cell], 0, sizeof c->trtag[cell]);
		}
	a->live = 0;
	c->gen++;
	return EMU_NEXT;
}

/* ---- ld / st ---------------------------------------------------------------------------- */

/* (lane, column) offsets of value v of thread t (§3.6 table) */
static void
ldst_map(uint32_t shape, int t, int v, uint32_t split, uint32_t *lane, uint32_t *col)
{
	int rep, e;
	switch (shape) {
	case SH_32x32b:
		*lane = (uint32_t)t;
		*col = (uint32_t)v;
		break;
	case SH_16x256b:
		rep = v / 4;
		e = v % 4;
		*lane = (uint32_t)(t / 4 + 8 * (e / 2));
		*col = (uint32_t)(2 * (t % 4) + e % 2 + 8 * rep);
		break;
	case SH_16x128b:
		rep = v / 2;
		e = v % 2;
		*lane = (uint32_t)(t / 4 + 8 * e);
		*col = (uint32_t)(t % 4 + 4 * rep);
		break;
	case SH_16x64b:
		*lane = (uint32_t)(t / 4 + 8 * (t % 2));
		*col = (uint32_t)((t / 2) % 2 + 2 * v);
		break;
	default: /* 16x32bx2 */
		*lane = (uint32_t)(t % 16);
		*col = (uint32_t)(t / 16) * split + (uint32_t)v;
		break;
	}
}

/* Columns touched: the widest column offset + 1. */
static uint32_t
ldst_cols(const EmuInsn *in, uint32_t split)
{
	uint32_t maxc = 0;
	for (int t = 0; t < 32; t++)
		for (int v = 0; v < (int)in->aux[2]; v++) {
			uint32_t l, c;
			ldst_map(in->aux[0], t, v, split, &l, &c);
			if (c + 1 > maxc)
				maxc = c + 1;
		}
	return maxc;
}

/* Shared checks of ld and st: uniform address, lane quarter, allocation. */
static int
ldst_common(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes, int st, uint32_t *taddr,
            uint32_t *split)
{
	EmuThread *t0 = &c->t[w->id * 32 + __builtin_ctz(lanes)];
	uint64_t a, s = 0;
	if (emu_uniform(c, w, in, lanes, st ? 0 : 1, &a) || group_check(c, t0, in))
		return EMU_STOP;
	if (in->aux[0] == SH_16x32bx2 && emu_uniform(c, w, in, lanes, st ? 1 : 2, &s))
		return EMU_STOP;
	if (!c->tmem)
		return emu_fault(c, t0, in, "tcgen05 on a device without tensor memory");
	*taddr = (uint32_t)a;
	*split = (uint32_t)s;
	uint32_t lane = *taddr >> 16, col = *taddr & 0xffff;
	uint32_t nl = (uint32_t)shape_lanes(in->aux[0]);
	uint32_t q = (uint32_t)(w->id % 4);
	if (lane < 32 * q || lane + nl > 32 * q + 32)
		return emu_hazard(c, t0, in, "tmem-lane-quarter",
		                  "warp %d (warp %u of its warpgroup) accesses TMEM lanes %u..%u, but it "
		                  "may only reach lanes %u..%u (warp %% 4 selects the 32-lane quarter, "
		                  "hardware-facts §3.7, pitfall 8)",
		                  w->id, q, lane, lane + nl - 1, 32 * q, 32 * q + 31);
	return emu_tmem_check(c, t0, in, lane, nl, col, ldst_cols(in, *split));
}

static int
pld_push(EmuCta *c, EmuWarp *w, const EmuInsn *in, const EmuPendLd *p)
{
	if (w->npld == w->cappld) {
		int nc = w->cappld ? w->cappld * 2 : 8;
		EmuPendLd *np = realloc(w->pld, (size_t)nc * sizeof *np);
		if (!np)
			return emu_fault(c, &c->t[w->id * 32], in, "out of host memory");
		w->pld = np;
		w->cappld = nc;
	}
	w->pld[w->npld++] = *p;
	return 0;
}

int
emu_wop_tc_ld(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	uint32_t taddr, split;
	if (ldst_common(c, w, in, lanes, 0, &taddr, &split))
		return EMU_STOP;
	EmuThread *base = &c->t[w->id * 32];
	uint32_t lane0 = taddr >> 16, col0 = taddr & 0xffff;
	uint32_t ncols = ldst_cols(in, split);
	uint32_t q = lane0 / 32;
	/* ordered after the MMA / st that wrote these cells */
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		for (uint32_t k = col0; k < col0 + ncols; k++)
			if (tmem_tag_check(c, &base[l], in, &c->twtag[q * EMU_TMEM_COLS + k], base[l].tid,
			                   lane0, k, "tcgen05.ld reads"))
				return EMU_STOP;
	}
	const EmuOperand *d = emu_opnd(c, in, 0);
	int nregs = (int)in->aux[2];
	if ((d->kind == OPK_VEC ? d->nsub : 1) != nregs)
		return emu_fault(c, &base[__builtin_ctz(lanes)], in, "tcgen05.ld needs %d destination "
		                 "registers", nregs);
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		EmuThread *t = &base[l];
		for (int i = 0; i < nregs; i++) {
			const EmuOperand *r = d->kind == OPK_VEC ? emu_sub(c, d, i) : d;
			if (r->kind != OPK_REG)
				return emu_fault(c, t, in, "tcgen05.ld destination is not a register");
			if (t->pend[r->reg] & (PEND_WGMMA | PEND_WGSRC))
				return emu_hazard(c, t, in, "wgmma-acc-in-flight", "tcgen05.ld into a register "
				                  "of an in-flight wgmma");
			t->pend[r->reg] |= PEND_TCLD;
		}
		t->npend = 1;
	}
	EmuThread *t0 = &base[__builtin_ctz(lanes)];
	for (uint32_t k = col0; k < col0 + ncols; k++) {
		EmuTag *tag = &c->trtag[q * EMU_TMEM_COLS + k];
		tag->kind = TAGK_TCST;
		tag->pending = 1;
		tag->slot = (uint16_t)t0->tid;
		tag->val = 0;
		tag->line = in->line;
		tag->tid = t0->tid;
		emu_tcpend_add(c, t0, q * EMU_TMEM_COLS + k);
	}
	EmuPendLd p;
	memset(&p, 0, sizeof p);
	p.in = in;
	p.taddr = taddr; /* the 16x32bx2 split is an immediate of the insn */
	return pld_push(c, w, in, &p) ? EMU_STOP : EMU_NEXT;
}

int
emu_wop_tc_st(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	uint32_t taddr, split;
	if (ldst_common(c, w, in, lanes, 1, &taddr, &split))
		return EMU_STOP;
	EmuThread *base = &c->t[w->id * 32];
	uint32_t lane0 = taddr >> 16, col0 = taddr & 0xffff;
	uint32_t ncols = ldst_cols(in, split);
	uint32_t q = lane0 / 32;
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		for (uint32_t k = col0; k < col0 + ncols; k++) {
			uint32_t cell = q * EMU_TMEM_COLS + k;
			if (tmem_tag_check(c, &base[l], in, &c->twtag[cell], base[l].tid, lane0, k,
			                   "tcgen05.st overwrites") ||
			    tmem_tag_check(c, &base[l], in, &c->trtag[cell], base[l].tid, lane0, k,
			                   "tcgen05.st overwrites"))
				return EMU_STOP;
		}
	}
	const EmuOperand *s = emu_opnd(c, in, in->nop - 1);
	int nregs = (int)in->aux[2];
	if ((s->kind == OPK_VEC ? s->nsub : 1) != nregs)
		return emu_fault(c, &base[__builtin_ctz(lanes)], in, "tcgen05.st needs %d source "
		                 "registers", nregs);
	EmuPendLd p;
	memset(&p, 0, sizeof p);
	p.in = in;
	p.taddr = taddr;
	p.st = 1;
	p.vals = calloc((size_t)32 * (size_t)nregs, sizeof *p.vals);
	if (!p.vals)
		return emu_fault(c, &base[0], in, "out of host memory");
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		for (int i = 0; i < nregs; i++) {
			uint64_t v;
			if (emu_get(c, &base[l], in, s->kind == OPK_VEC ? emu_sub(c, s, i) : s, &v)) {
				free(p.vals);
				return EMU_STOP;
			}
			p.vals[l * nregs + i] = (uint32_t)v;
		}
	}
	EmuThread *t0 = &base[__builtin_ctz(lanes)];
	for (uint32_t k = col0; k < col0 + ncols; k++) {
		EmuTag *tag = &c->twtag[q * EMU_TMEM_COLS + k];
		tag->kind = TAGK_TCST;
		tag->pending = 1;
		tag->slot = (uint16_t)t0->tid;
		tag->val = 0;
		tag->line = in->line;
		tag->tid = t0->tid;
	}
	if (pld_push(c, w, in, &p)) {
		free(p.vals);
		return EMU_STOP;
	}
	return EMU_NEXT;
}

/* Performs pending tcgen05.ld (registers) and/or tcgen05.st (TMEM) of the
 * warp; their tags become ordered before the first lane's next release. */
static int
land(EmuCta *c, EmuWarp *w, int want_st)
{
	EmuThread *base = &c->t[w->id * 32];
	int keep = 0;
	for (int i = 0; i < w->npld; i++) {
		EmuPendLd *p = &w->pld[i];
		if (p->st != want_st) {
			w->pld[keep++] = *p;
			continue;
		}
		const EmuInsn *in = p->in;
		uint32_t lane0 = p->taddr >> 16, col0 = p->taddr & 0xffff;
		uint32_t split = in->aux[0] == SH_16x32bx2 ? (uint32_t)emu_opnd(c, in, p->st ? 1 : 2)->imm : 0;
		int nregs = (int)in->aux[2];
		const EmuOperand *d = emu_opnd(c, in, 0);
		int first = -1;
		for (int l = 0; l < 32; l++) {
			if (!(w->all >> l & 1))
				continue;
			if (first < 0 && (w->live >> l & 1))
				first = l;
			EmuThread *t = &base[l];
			for (int v = 0; v < nregs; v++) {
				uint32_t lo, co;
				ldst_map(in->aux[0], l, v, split, &lo, &co);
				uint32_t *cell = &c->tmem[(lane0 + lo) * EMU_TMEM_COLS + col0 + co];
				if (p->st) {
					*cell = p->vals[l * nregs + v];
				} else {
					const EmuOperand *r = d->kind == OPK_VEC ? emu_sub(c, d, v) : d;
					t->r[r->reg] = *cell;
					t->pend[r->reg] &= (uint8_t)~PEND_TCLD;
				}
			}
		}
		uint32_t q = lane0 / 32;
		uint32_t ncols = ldst_cols(in, split);
		EmuThread *t0 = &base[first < 0 ? 0 : first];
		for (uint32_t k = col0; k < col0 + ncols; k++) {
			EmuTag *tag = p->st ? &c->twtag[q * EMU_TMEM_COLS + k] : &c->trtag[q * EMU_TMEM_COLS + k];
			if (tag->pending && tag->line == in->line) {
				tag->pending = 0;
				tag->slot = (uint16_t)t0->tid;
				tag->val = t0->vc[t0->tid];
			}
		}
		free(p->vals);
	}
	w->npld = keep;
	return 0;
}

int
emu_tc_land(EmuCta *c, EmuWarp *w, int st_only)
{
	if (land(c, w, 1))
		return EMU_STOP;
	return st_only ? 0 : land(c, w, 0);
}

int
emu_wop_tc_wait(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	(void)lanes;
	int st = strcmp(in->def->name, "tcgen05.wait::st") == 0;
	return land(c, w, st) ? EMU_STOP : EMU_NEXT;
}

int
emu_op_tc_fence(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (in->def->name[15] == 'b')
		emu_tc_before_sync(c, t);
	else
		emu_tc_after_sync(c, t);
	return EMU_NEXT;
}

/* ---- mma / commit ----------------------------------------------------------------------- */

typedef struct Idesc {
	int dfmt, afmt, bfmt, nega, negb, ta, tb, sat;
	uint32_t M, N, K;
} Idesc;

/* Instruction descriptor (hardware-facts §2.1, PTX ISA §9.7.16.4.2). */
static int
idesc_decode(uint32_t v, int kind, Idesc *d, char *why, size_t n)
{
	d->sat = (int)(v >> 3 & 1);
	d->dfmt = (int)(v >> 4 & 3);
	d->afmt = (int)(v >> 7 & 7);
	d->bfmt = (int)(v >> 10 & 7);
	d->nega = (int)(v >> 13 & 1);
	d->negb = (int)(v >> 14 & 1);
	d->ta = (int)(v >> 15 & 1);
	d->tb = (int)(v >> 16 & 1);
	d->N = (v >> 17 & 0x3f) << 3;
	d->M = (v >> 24 & 0x1f) << 4;
	if (v & 7 && kind != KIND_I8) {
		snprintf(why, n, "sparsity bits 0-2 are set (0x%x): sparse MMAs are not supported", v & 7);
		return -1;
	}
	if (v & (1u << 6 | 1u << 23 | 1u << 29)) {
		snprintf(why, n, "reserved bits 6/23/29 are set");
		return -1;
	}
	if (v >> 30) {
		snprintf(why, n, "bits 30-31 (B reuse shift) are only valid for .ws");
		return -1;
	}
	if (d->M != 64 && d->M != 128) {
		snprintf(why, n, "M = %u (bits 24-28 = %u): cta_group::1 takes M = 64 or 128", d->M,
		         d->M >> 4);
		return -1;
	}
	if (d->N < 8 || d->N > 256) {
		snprintf(why, n, "N = %u (bits 17-22 = %u): must be 8..256", d->N, d->N >> 3);
		return -1;
	}
	switch (kind) {
	case KIND_F16:
		d->K = 16;
		if (d->afmt > 1 || d->bfmt > 1 || d->dfmt > 1) {
			snprintf(why, n, "kind::f16 takes A/B F16 (0) or BF16 (1) and D F16 (0) or F32 (1); "
			         "got A %d, B %d, D %d", d->afmt, d->bfmt, d->dfmt);
			return -1;
		}
		break;
	case KIND_TF32:
		d->K = 8;
		if (d->afmt != 2 || d->bfmt != 2 || d->dfmt != 1) {
			snprintf(why, n, "kind::tf32 takes A/B TF32 (2) and D F32 (1)");
			return -1;
		}
		break;
	case KIND_F8F6F4:
		d->K = 32;
		if (d->afmt > 1 || d->bfmt > 1 || d->dfmt > 1) {
			snprintf(why, n, "kind::f8f6f4: the emulator supports E4M3 (0) / E5M2 (1) inputs "
			         "and F16/F32 D; got A %d, B %d, D %d", d->afmt, d->bfmt, d->dfmt);
			return -1;
		}
		break;
	default:
		d->K = 32;
		if (d->afmt > 1 || d->bfmt > 1 || d->dfmt != 2) {
			snprintf(why, n, "kind::i8 takes U8 (0) / S8 (1) inputs and D S32 (2)");
			return -1;
		}
		break;
	}
	return 0;
}

static EmuType
in_type(int kind, int fmt)
{
	switch (kind) {
	case KIND_F16: return fmt ? T_BF16 : T_F16;
	case KIND_TF32: return T_TF32;
	case KIND_F8F6F4: return fmt ? T_E5M2 : T_E4M3;
	default: return fmt ? T_S8 : T_U8;
	}
}

static int
in_bytes(int kind)
{
	return kind == KIND_F16 ? 2 : kind == KIND_TF32 ? 4 : 1;
}

/* TMEM lane of row r of D (hardware-facts §3.10): M=128 lane r; M=64
 * layout F: lane 32(r/16) + r%16 + the address's lane offset (0 or 16). */
static uint32_t
d_lane(uint32_t M, uint32_t lane0, uint32_t r)
{
	return M == 128 ? r : 32 * (r / 16) + r % 16 + lane0;
}

typedef struct MmaOp {
	Idesc id;
	int kind;
	uint32_t dt, at;     /* TMEM addresses (at: TS form) */
	int ts;
	uint64_t adesc, bdesc;
	int enable;
	int scale_shift;     /* scale-input-d, -1 none */
	uint32_t mask[4];    /* disable-output-lane */
	uint32_t *chunks;
	int nchunks;
} MmaOp;

static int
agent_of(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (t->agent >= 0)
		return t->agent;
	if (c->nagents == EMU_MAX_AGENTS)
		return emu_fault(c, t, in, "more than %d threads issue tcgen05 MMAs/commits",
		                 EMU_MAX_AGENTS), -1;
	int a = c->nagents++;
	c->agent_tid[a] = t->tid;
	c->agent_commits[a] = 0;
	c->agent_done[a] = 0;
	t->agent = a;
	return a;
}

static int
agent_slot(const EmuCta *c, int a)
{
	return c->nthreads + EMU_MAX_MBAR + a;
}

int
emu_op_tc_mma(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (group_check(c, t, in))
		return EMU_STOP;
	if (!c->tmem)
		return emu_fault(c, t, in, "tcgen05 on a device without tensor memory");
	MmaOp op;
	memset(&op, 0, sizeof op);
	op.kind = (int)in->aux[0];
	op.scale_shift = -1;
	uint64_t v;
	const EmuOperand *o;
	if (emu_addr(c, t, in, emu_opnd(c, in, 0), &v))
		return EMU_STOP;
	op.dt = (uint32_t)v;
	o = emu_opnd(c, in, 1);
	op.ts = o->kind == OPK_MEM;
	if (op.ts) {
		if (emu_addr(c, t, in, o, &v))
			return EMU_STOP;
		op.at = (uint32_t)v;
	} else if (emu_get(c, t, in, o, &op.adesc)) {
		return EMU_STOP;
	}
	uint64_t idv;
	if (emu_geti(c, t, in, 2, &op.bdesc) || emu_geti(c, t, in, 3, &idv))
		return EMU_STOP;
	int i = 4;
	if (i < in->nop && emu_opnd(c, in, i)->kind == OPK_VEC) {
		const EmuOperand *m = emu_opnd(c, in, i);
		if (m->nsub != 4)
			return emu_fault(c, t, in, "disable-output-lane takes 4 registers for cta_group::1");
		for (int k = 0; k < 4; k++) {
			if (emu_get(c, t, in, emu_sub(c, m, k), &v))
				return EMU_STOP;
			op.mask[k] = (uint32_t)v;
		}
		i++;
	}
	if (i >= in->nop)
		return emu_fault(c, t, in, "tcgen05.mma: missing enable-input-d");
	if (emu_geti(c, t, in, i++, &v))
		return EMU_STOP;
	op.enable = (int)(v & 1);
	if (i < in->nop) {
		if (emu_geti(c, t, in, i++, &v))
			return EMU_STOP;
		if (op.kind != KIND_F16 && op.kind != KIND_TF32)
			return emu_fault(c, t, in, "scale-input-d is only valid for kind::f16 and kind::tf32");
		if (v > 15)
			return emu_fault(c, t, in, "scale-input-d %" PRIu64 " is not in 0..15", v);
		op.scale_shift = (int)v;
	}
	if (i != in->nop)
		return emu_fault(c, t, in, "tcgen05.mma: unexpected operands");
	char why[256];
	if (idesc_decode((uint32_t)idv, op.kind, &op.id, why, sizeof why))
		return emu_hazard(c, t, in, "descriptor", "instruction descriptor 0x%08x: %s "
		                  "(hardware-facts §2.1; the idesc is its own 32-bit operand, pitfall 4)",
		                  (uint32_t)idv, why);
	EmuSmemDesc da, db;
	if (!op.ts && emu_desc_decode(op.adesc, ARCH_SM100, &da, why, sizeof why))
		return emu_hazard(c, t, in, "descriptor", "A smem descriptor 0x%016" PRIx64 ": %s",
		                  op.adesc, why);
	if (emu_desc_decode(op.bdesc, ARCH_SM100, &db, why, sizeof why))
		return emu_hazard(c, t, in, "descriptor", "B smem descriptor 0x%016" PRIx64 ": %s",
		                  op.bdesc, why);
	for (int k = 0; k < 2; k++) {
		const EmuSmemDesc *d = k ? &db : &da;
		if ((k || !op.ts) && emu_desc_aligned(d))
			return emu_hazard(c, t, in, "swizzle-align",
			                  "%s descriptor start 0x%x is not on its %dB swizzle pattern (period "
			                  "%d bytes) and base_offset is 0 (hardware-facts §1.3, pitfall 3)",
			                  k ? "B" : "A", d->start, d->swizzle, d->swizzle * 8);
	}
	const Idesc *id = &op.id;
	if ((op.kind == KIND_F8F6F4 || op.kind == KIND_I8) && (id->ta || id->tb) && id->N % 16)
		return emu_hazard(c, t, in, "descriptor", "8-bit MN-major B needs N %% 16 == 0");
	/* D and A-in-TMEM placement */
	uint32_t dlane = op.dt >> 16, dcol = op.dt & 0xffff;
	if ((id->M == 128 && dlane != 0) || (id->M == 64 && dlane != 0 && dlane != 16))
		return emu_hazard(c, t, in, "tmem-alloc",
		                  "D TMEM address 0x%08x: an M=%u accumulator starts at lane %s",
		                  op.dt, id->M, id->M == 128 ? "0" : "0 or 16");
	uint32_t dcols = id->N;
	if (emu_tmem_check(c, t, in, 0, 128, dcol, dcols))
		return EMU_STOP;
	uint32_t acols = 0;
	if (op.ts) {
		if (id->ta)
			return emu_hazard(c, t, in, "descriptor", "A in TMEM cannot be transposed (§3.11)");
		acols = id->K * (uint32_t)in_bytes(op.kind) / 4;
		if ((op.at >> 16) != dlane || emu_tmem_check(c, t, in, 0, 128, op.at & 0xffff, acols))
			return EMU_STOP;
	}
	int a = agent_of(c, t, in);
	if (a < 0)
		return EMU_STOP;
	int slot = agent_slot(c, a);
	EmuClock j = (EmuClock)(c->agent_commits[a] + 1);
	/* smem operands: ordered after their TMA writes through a fenced sync */
	uint32_t bad = 0;
	int cap = 0;
	c->stamp++;
	int eb = in_bytes(op.kind);
	if ((!op.ts && emu_desc_chunks(c, &da, !id->ta, eb, 0, id->M, id->K, &op.chunks, &op.nchunks,
	                               &cap, &bad)) ||
	    emu_desc_chunks(c, &db, !id->tb, eb, 0, id->N, id->K, &op.chunks, &op.nchunks, &cap, &bad)) {
		free(op.chunks);
		return emu_fault(c, t, in, "tcgen05.mma operand element at smem 0x%x is outside the CTA's "
		                 "shared memory (descriptor start/LBO/SBO wrong?)", bad);
	}
	for (int k = 0; k < op.nchunks; k++)
		if (emu_smem_async_read_check(c, t, in, op.chunks[k], t->vc_tc, "tcgen05.mma reads")) {
			free(op.chunks);
			return EMU_STOP;
		}
	/* TMEM: D must not be read/written by an unordered tcgen05.ld/st;
	 * earlier MMAs of this pipe are pipelined (§3.8 implicit ordering) */
	for (uint32_t q = 0; q < 4; q++) {
		for (uint32_t k = dcol; k < dcol + dcols; k++) {
			uint32_t cell = q * EMU_TMEM_COLS + k;
			if (tmem_tag_check(c, t, in, &c->twtag[cell], slot, q * 32, k, "tcgen05.mma writes") ||
			    tmem_tag_check(c, t, in, &c->trtag[cell], slot, q * 32, k, "tcgen05.mma writes")) {
				free(op.chunks);
				return EMU_STOP;
			}
		}
		for (uint32_t k = op.at & 0xffff; op.ts && k < (op.at & 0xffff) + acols; k++)
			if (tmem_tag_check(c, t, in, &c->twtag[q * EMU_TMEM_COLS + k], slot, q * 32, k,
			                   "tcgen05.mma reads A from")) {
				free(op.chunks);
				return EMU_STOP;
			}
	}
	/* in flight until its commit completes */
	for (int k = 0; k < op.nchunks; k++) {
		uint32_t ch = op.chunks[k];
		c->sinflight[ch]++;
		c->sinflight_line[ch] = in->line;
		EmuTag *r = &c->srtag[ch];
		r->kind = TAGK_TC;
		r->pending = 0;
		r->slot = (uint16_t)slot;
		r->val = j;
		r->line = in->line;
		r->tid = t->tid;
	}
	for (uint32_t q = 0; q < 4; q++) {
		for (uint32_t k = dcol; k < dcol + dcols; k++) {
			EmuTag *w = &c->twtag[q * EMU_TMEM_COLS + k];
			w->kind = TAGK_TC;
			w->pending = 0;
			w->slot = (uint16_t)slot;
			w->val = j;
			w->line = in->line;
			w->tid = t->tid;
		}
		for (uint32_t k = op.at & 0xffff; op.ts && k < (op.at & 0xffff) + acols; k++) {
			EmuTag *r = &c->trtag[q * EMU_TMEM_COLS + k];
			r->kind = TAGK_TC;
			r->pending = 0;
			r->slot = (uint16_t)slot;
			r->val = j;
			r->line = in->line;
			r->tid = t->tid;
		}
	}
	MmaOp *d = malloc(sizeof *d);
	if (!d) {
		free(op.chunks);
		return emu_fault(c, t, in, "out of host memory");
	}
	*d = op;
	EmuAsync q;
	memset(&q, 0, sizeof q);
	q.kind = AS_TC_MMA;
	q.tid = t->tid;
	q.line = in->line;
	q.in = in;
	q.agent = a;
	q.data = d;
	emu_async_push(c, &q);
	return c->failed ? EMU_STOP : EMU_NEXT;
}

typedef struct CommitOp {
	uint32_t mbar;
	EmuClock seq;
} CommitOp;

int
emu_op_tc_commit(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (group_check(c, t, in))
		return EMU_STOP;
	uint32_t mb;
	if (emu_shared_addr(c, t, in, 0, &mb))
		return EMU_STOP;
	if (in->aux[3]) {
		uint64_t mask;
		if (emu_geti(c, t, in, 1, &mask))
			return EMU_STOP;
		if ((mask & 0xffff) != 1)
			return emu_fault(c, t, in, "commit multicast mask 0x%x: the emulator runs clusters "
			                 "of one CTA (mask must be 1)", (unsigned)mask);
	}
	EmuMbar *cm = emu_mbar_find(c, mb);
	if (!cm)
		return emu_hazard(c, t, in, "mbarrier", "tcgen05.commit to smem 0x%x, where no mbarrier "
		                  "is initialized", mb);
	if (emu_mbar_visible(c, t, in, cm))
		return EMU_STOP;
	int a = agent_of(c, t, in);
	if (a < 0)
		return EMU_STOP;
	CommitOp *d = malloc(sizeof *d);
	EmuClock *vc = emu_vc_new(c);
	if (!d || !vc) {
		free(d);
		free(vc);
		return emu_fault(c, t, in, "out of host memory");
	}
	d->mbar = mb;
	d->seq = (EmuClock)++c->agent_commits[a];
	/* the arrive carries what the issuing thread knew at the commit */
	memcpy(vc, t->vc, (size_t)c->nslots * sizeof *vc);
	t->vc[t->tid]++;
	EmuAsync q;
	memset(&q, 0, sizeof q);
	q.kind = AS_TC_COMMIT;
	q.tid = t->tid;
	q.line = in->line;
	q.in = in;
	q.agent = a;
	q.vc = vc;
	q.data = d;
	emu_async_push(c, &q);
	return c->failed ? EMU_STOP : EMU_NEXT;
}

int
emu_op_tc_cp(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	return emu_fault(c, t, in, "tcgen05.cp is not supported by the emulator yet");
}

/* ---- completion --------------------------------------------------------------------------- */

static int
mma_complete(EmuCta *c, EmuAsync *q, MmaOp *op)
{
	const Idesc *id = &op->id;
	uint32_t M = id->M, N = id->N, K = id->K;
	EmuType at = in_type(op->kind, id->afmt), bt = in_type(op->kind, id->bfmt);
	int eb = in_bytes(op->kind);
	float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
	if (!A || !B) {
		free(A);
		free(B);
		return emu_fault(c, &c->t[q->tid], q->in, "out of host memory");
	}
	EmuSmemDesc da, db;
	char why[8];
	emu_desc_decode(op->bdesc, ARCH_SM100, &db, why, sizeof why);
	uint32_t dlane0 = op->dt >> 16, dcol = op->dt & 0xffff;
	if (op->ts) {
		/* §3.11: A row r in the lane of D's row r, elements packed along columns */
		uint32_t acol = op->at & 0xffff;
		int per = 4 / eb;
		for (uint32_t r = 0; r < M; r++)
			for (uint32_t k = 0; k < K; k++) {
				uint32_t cell = c->tmem[d_lane(M, dlane0, r) * EMU_TMEM_COLS + acol + k / (uint32_t)per];
				uint32_t v = cell >> (8 * eb * (int)(k % (uint32_t)per));
				v &= eb == 4 ? 0xffffffffu : (1u << (8 * eb)) - 1;
				A[r * K + k] = at == T_U8 ? (float)(uint8_t)v : at == T_S8 ? (float)(int8_t)v
				                          : emu_to_f32(v, at);
			}
	} else {
		emu_desc_decode(op->adesc, ARCH_SM100, &da, why, sizeof why);
		emu_desc_gather(c, &da, !id->ta, at, eb, 0, M, K, 1.0f, A);
	}
	emu_desc_gather(c, &db, !id->tb, bt, eb, 0, N, K, 1.0f, B);
	float sa = id->nega ? -1.0f : 1.0f, sb = id->negb ? -1.0f : 1.0f;
	for (uint32_t r = 0; r < M; r++) {
		uint32_t lane = d_lane(M, dlane0, r);
		if (op->mask[lane / 32] >> (lane % 32) & 1)
			continue;
		uint32_t *row = &c->tmem[lane * EMU_TMEM_COLS + dcol];
		const float *ar = &A[r * K];
		for (uint32_t n = 0; n < N; n++) {
			const float *br = &B[n * K];
			if (op->kind == KIND_I8) {
				int64_t acc = op->enable ? (int64_t)(int32_t)row[n] : 0;
				for (uint32_t k = 0; k < K; k++)
					acc += (int64_t)ar[k] * (int64_t)br[k];
				if (id->sat)
					acc = acc > INT32_MAX ? INT32_MAX : acc < INT32_MIN ? INT32_MIN : acc;
				row[n] = (uint32_t)(int32_t)acc;
				continue;
			}
			float d = 0.0f;
			if (op->enable) {
				d = id->dfmt == 1 ? emu_f32(row[n]) : emu_f16_to_f32((uint16_t)row[n]);
				if (op->scale_shift > 0)
					d = ldexpf(d, -op->scale_shift);
			}
			for (uint32_t k = 0; k < K; k++)
				d += (sa * ar[k]) * (sb * br[k]);
			row[n] = id->dfmt == 1 ? emu_f32_bits(d) : emu_f32_to_f16(d, RND_RN, 0);
		}
	}
	free(A);
	free(B);
	for (int k = 0; k < op->nchunks; k++)
		if (c->sinflight[op->chunks[k]])
			c->sinflight[op->chunks[k]]--;
	free(op->chunks);
	op->chunks = NULL;
	return 0;
}

int
emu_tc_complete(EmuCta *c, EmuAsync *q)
{
	if (q->kind == AS_TC_MMA)
		return mma_complete(c, q, q->data);
	CommitOp *op = q->data;
	EmuThread *t = &c->t[q->tid];
	EmuMbar *m = emu_mbar_find(c, op->mbar);
	if (!m)
		return emu_hazard(c, t, q->in, "mbarrier", "the tcgen05.commit issued here arrives on "
		                  "smem 0x%x, which no longer holds an mbarrier", op->mbar);
	if (m->pending < 1) {
		char st[256];
		emu_mbar_describe(c, m, st, sizeof st);
		return emu_hazard(c, t, q->in, "mbarrier", "tcgen05.commit arrives on an mbarrier that "
		                  "expects no more arrivals in its phase: %s", st);
	}
	int slot = agent_slot(c, q->agent);
	c->agent_done[q->agent] = op->seq;
	if (q->vc[slot] < op->seq)
		q->vc[slot] = op->seq;
	emu_mbar_arrive(c, m, 1, q->vc);
	return 0;
}
