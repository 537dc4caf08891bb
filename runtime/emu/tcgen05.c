/* Blackwell tcgen05 (PTX ISA §9.7.16; docs/hardware.md, "Instruction descriptor" and
 * "TMEM addressing"): modifiers of every tcgen05 row, the helpers tc_mma.c and tc_cp.c
 * share (tc.h), alloc/dealloc/relinquish, ld/st, wait, fence and commit.
 *
 * alloc/dealloc/relinquish, ld/st and wait::ld/st are warp collectives.
 * mma, cp, shift and commit have single-thread semantics: the issuing
 * thread's operations go into its issue pipe (an "agent" of the async
 * queue) and complete in order; their TMEM results land at completion, and
 * a commit arrives on its mbarrier once every earlier op of the pipe
 * completed (docs/hardware.md, "tcgen05.commit"). tcgen05.ld values land in registers at wait::ld,
 * tcgen05.st values in TMEM at wait::st: the latest legal points. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"
#include "tc.h"

/* ---- modifiers --------------------------------------------------------------------------- */

int
emu_tc_word(EmuInsn *in, const char *m, EmuParse *p, const TcWord *words, int n)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(words[i].name, m) != 0)
			continue;
		uint32_t *a = &in->aux[words[i].aux];
		if (*a && *a != words[i].val)
			return emu_parse_fail(p, "%s: .%s conflicts with an earlier modifier of the same "
			                      "kind", in->def->name, m);
		*a = words[i].val;
		return 1;
	}
	return 0;
}

#define WORDS(in, m, p, w) emu_tc_word(in, m, p, w, (int)(sizeof w / sizeof w[0]))

/* .cta_group::1 or ::2 (a CTA pair: alloc/dealloc/relinquish, mma, commit) */
int
emu_mod_tc(EmuInsn *in, const char *m, EmuParse *p)
{
	if (strcmp(m, "cta_group::2") == 0) {
		if (strcmp(in->def->name, "tcgen05.cp") == 0 || strcmp(in->def->name, "tcgen05.shift") == 0)
			return emu_parse_fail(p, "%s.cta_group::2 (a CTA pair's %s) is not supported by "
			                      "the emulator yet", in->def->name, in->def->name + 8);
		in->aux[TC_GROUP] = 2;
		return 1;
	}
	if (strcmp(m, "cta_group::1") != 0)
		return 0;
	in->aux[TC_GROUP] = 1;
	return 1;
}

static const TcWord ldst_words[] = {
	{"32x32b", 0, SH_32x32b}, {"16x64b", 0, SH_16x64b}, {"16x128b", 0, SH_16x128b},
	{"16x256b", 0, SH_16x256b}, {"16x32bx2", 0, SH_16x32bx2},
};
static const TcWord ld_words[] = {{"pack::16b", 3, 1}};
static const TcWord st_words[] = {{"unpack::16b", 3, 1}};

static int
mod_ldst(EmuInsn *in, const char *m, EmuParse *p, const TcWord *pack)
{
	int r = emu_mod_tc(in, m, p);
	if (r)
		return r;
	if (m[0] == 'x' && m[1] >= '1' && m[1] <= '9') {
		unsigned n = (unsigned)strtoul(m + 1, NULL, 10);
		if (n == 0 || n > 128 || (n & (n - 1)))
			return emu_parse_fail(p, "%s: .%s is not one of .x1 .. .x128", in->def->name, m);
		in->aux[1] = n;
		return 1;
	}
	r = WORDS(in, m, p, ldst_words);
	return r ? r : emu_tc_word(in, m, p, pack, 1);
}

int
emu_mod_tc_ld(EmuInsn *in, const char *m, EmuParse *p)
{
	return mod_ldst(in, m, p, ld_words);
}

int
emu_mod_tc_st(EmuInsn *in, const char *m, EmuParse *p)
{
	return mod_ldst(in, m, p, st_words);
}

static const TcWord mma_words[] = {
	{"kind::f16", 0, KIND_F16}, {"kind::tf32", 0, KIND_TF32}, {"kind::f8f6f4", 0, KIND_F8F6F4},
	{"kind::i8", 0, KIND_I8}, {"kind::mxf8f6f4", 0, KIND_MXF8F6F4},
	{"kind::mxf4", 0, KIND_MXF4}, {"kind::mxf4nvf4", 0, KIND_MXF4NVF4},
	{"block_scale", 2, 1},
	{"scale_vec::1X", 1, 1}, {"scale_vec::2X", 1, 2}, {"scale_vec::4X", 1, 4},
	{"block16", 3, 16}, {"block32", 3, 32},
};

int
emu_mod_tc_mma(EmuInsn *in, const char *m, EmuParse *p)
{
	int r = emu_mod_tc(in, m, p);
	if (r)
		return r;
	r = WORDS(in, m, p, mma_words);
	if (r)
		return r;
	static const char *const coll[] = {[TC_COLL_FILL] = "fill", [TC_COLL_USE] = "use",
	                                   [TC_COLL_LASTUSE] = "lastuse",
	                                   [TC_COLL_DISCARD] = "discard"};
	if (strncmp(m, "collector::a::", 14) == 0) {
		for (uint32_t i = TC_COLL_FILL; i <= TC_COLL_DISCARD; i++)
			if (strcmp(m + 14, coll[i]) == 0) {
				in->aux[TC_COLL] = i;
				return 1;
			}
		return emu_parse_fail(p, "%s.%s: the A collector usage is fill, use, lastuse or "
		                      "discard (PTX ISA, tcgen05.mma .collector_usage)", in->def->name, m);
	}
	if (strncmp(m, "kind::", 6) == 0 || strcmp(m, "ws") == 0 || strcmp(m, "ashift") == 0 ||
	    strcmp(m, "sp") == 0 || strncmp(m, "collector::b", 12) == 0)
		return emu_parse_fail(p, "%s.%s is not supported by the emulator yet", in->def->name, m);
	return 0;
}

static const TcWord commit_words[] = {
	{"mbarrier::arrive::one", 6, 1}, {"multicast::cluster", 3, 1},
};

int
emu_mod_tc_commit(EmuInsn *in, const char *m, EmuParse *p)
{
	int r = emu_mod_tc(in, m, p);
	return r ? r : WORDS(in, m, p, commit_words);
}

static const TcWord cp_words[] = {
	{"128x256b", 0, CP_128x256b}, {"4x256b", 0, CP_4x256b}, {"128x128b", 0, CP_128x128b},
	{"64x128b", 0, CP_64x128b}, {"32x128b", 0, CP_32x128b},
	{"warpx2::02_13", 1, MC_02_13}, {"warpx2::01_23", 1, MC_01_23}, {"warpx4", 1, MC_X4},
	{"b6x16_p32", 2, CPF_B6}, {"b4x16_p64", 2, CPF_B4}, {"b8x16", 3, 1},
};

int
emu_mod_tc_cp(EmuInsn *in, const char *m, EmuParse *p)
{
	int r = emu_mod_tc(in, m, p);
	return r ? r : WORDS(in, m, p, cp_words);
}

static const TcWord shift_words[] = {{"down", 0, 1}};

int
emu_mod_tc_shift(EmuInsn *in, const char *m, EmuParse *p)
{
	int r = emu_mod_tc(in, m, p);
	return r ? r : WORDS(in, m, p, shift_words);
}

/* ---- operand checks at load ---------------------------------------------------------------- */

/* registers per thread for one repetition of a shape (docs/hardware.md,
 * "tcgen05.ld and tcgen05.st" Table 49) */
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
		return emu_parse_fail(p, "%s: %d registers per thread exceed 128 (docs/hardware.md, \"tcgen05.ld and tcgen05.st\")", in->def->name,
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
emu_chk_tc_shift(EmuInsn *in, EmuParse *p)
{
	if (!in->aux[0])
		return emu_parse_fail(p, "tcgen05.shift needs .down (PTX ISA §9.7.16.9.3)");
	if (!in->aux[TC_GROUP])
		return emu_parse_fail(p, "tcgen05.shift needs .cta_group::1");
	if (emu_opnd_kind(in, p, 0) != OPK_MEM)
		return emu_parse_fail(p, "tcgen05.shift takes a TMEM address [taddr]");
	return 0;
}

/* ---- shared helpers (tc.h) ------------------------------------------------------------------ */

int
emu_tc_group_check(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	/* ld/st/wait name no cta_group: they work on the CTA's own TMEM */
	if (!in->aux[TC_GROUP])
		return 0;
	int g = (int)in->aux[TC_GROUP];
	if (!c->cta_group)
		c->cta_group = g;
	else if (c->cta_group != g)
		return emu_hazard(c, t, in, "cta-group",
		                  "tcgen05 with .cta_group::%d after .cta_group::%d: every tcgen05 "
		                  "instruction of a kernel must use the same cta_group (pitfall 12)",
		                  g, c->cta_group);
	return 0;
}

int
emu_tc_tag_check(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuTag *tag, int self,
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
	const EmuCta *oc = EMU_SLOT_CTA(c, tag->slot);
	int agent = tag->slot - oc->slot0 - oc->nthreads - EMU_MAX_MBAR;
	if (EMU_TAGK_PIPE(tag->kind) && agent >= 0 && agent < oc->nagents &&
	    oc->agent_done[agent] < tag->val)
		return emu_hazard(c, t, in, "async-in-flight",
		                  "%s TMEM lane %u column %u while the %s is still in flight: the "
		                  "tcgen05.commit that tracks it has not arrived on its mbarrier, and "
		                  "nothing waited for it", what, lane, col, d);
	if (emu_vc_covers(c, t->vc, self, tag))
		return emu_hazard(c, t, in, "missing-fence-after-thread-sync",
		                  "%s TMEM lane %u column %u: the %s was observed through a thread sync "
		                  "(PTX line %d) but no tcgen05.fence::after_thread_sync followed it "
		                  "before this tcgen05 operation (docs/hardware.md, \"tcgen05 ordering\")",
		                  what, lane, col, d, t->synced_line);
	return emu_hazard(c, t, in, "unordered-async",
	                  "%s TMEM lane %u column %u, which the %s writes or reads, without waiting "
	                  "for it: no mbarrier wait observed its tcgen05.commit / no barrier ordered it",
	                  what, lane, col, d);
}

int
emu_tc_cells_check(EmuCta *c, EmuThread *t, const EmuInsn *in, unsigned qmask, uint32_t col0,
                   uint32_t n, int self, int write, const char *what)
{
	for (uint32_t q = 0; q < 4; q++) {
		if (!(qmask >> q & 1))
			continue;
		for (uint32_t k = col0; k < col0 + n; k++) {
			uint32_t cell = q * EMU_TMEM_COLS + k;
			if (emu_tc_tag_check(c, t, in, &c->twtag[cell], self, q * 32, k, what) ||
			    (write && emu_tc_tag_check(c, t, in, &c->trtag[cell], self, q * 32, k, what)))
				return EMU_STOP;
		}
	}
	return 0;
}

uint32_t
emu_tc_acc_key(uint32_t dcol, uint32_t n, uint32_t m)
{
	return 1 + (dcol | n << 10 | m << 19);
}

int
emu_tc_pipe_check(EmuCta *c, EmuThread *t, const EmuInsn *in, unsigned qmask, uint32_t col0,
                  uint32_t n, int slot, int kind, uint32_t acc, const char *what)
{
	static const char *const names[] = {[TAGK_TC] = "tcgen05.mma", [TAGK_TCCP] = "tcgen05.cp"};
	for (uint32_t q = 0; q < 4; q++)
		for (uint32_t k = col0; (qmask >> q & 1) && k < col0 + n; k++) {
			uint32_t cell = q * EMU_TMEM_COLS + k;
			const EmuTag *tag = &c->twtag[cell];
			if (tag->kind != kind || tag->slot != slot || (acc && c->tacc[cell] == acc) ||
			    emu_vc_covers(c, t->vc_tc, -1, tag))
				continue;
			char text[200];
			emu_line_text(c->prog, tag->line, text, sizeof text);
			return emu_hazard(c, t, in, "tcgen05-unpipelined",
			                  "%s TMEM lane %u column %u, which the %s at PTX line %d `%s` "
			                  "writes and which has not completed: the PTX ISA orders one "
			                  "thread's tcgen05 ops implicitly only for mma->mma on the same "
			                  "accumulator and shape, cp->mma, shift->mma, shift->cp.4x256b and "
			                  "mma->shift (§9.7.16.6.2); commit and wait for the earlier op first",
			                  what, q * 32, k, names[kind], tag->line, text);
		}
	return 0;
}

static void
tag_set(EmuTag *tag, const EmuInsn *in, int tid, int kind, int slot, EmuClock val, int pending)
{
	tag->kind = (uint8_t)kind;
	tag->pending = (uint8_t)pending;
	tag->slot = (uint16_t)slot;
	tag->val = val;
	tag->line = in->line;
	tag->tid = tid;
}

void
emu_tc_cells_tag(EmuCta *c, const EmuInsn *in, int tid, unsigned qmask, uint32_t col0, uint32_t n,
                 int kind, int slot, EmuClock val, int write)
{
	for (uint32_t q = 0; q < 4; q++)
		for (uint32_t k = col0; (qmask >> q & 1) && k < col0 + n; k++) {
			tag_set(write ? &c->twtag[q * EMU_TMEM_COLS + k] : &c->trtag[q * EMU_TMEM_COLS + k],
			        in, tid, kind, slot, val, 0);
			if (write)
				c->tacc[q * EMU_TMEM_COLS + k] = 0;
		}
}

int
emu_tc_smem_issue(EmuCta *c, EmuThread *t, const EmuInsn *in, const uint32_t *chunks, int n,
                  int kind, int slot, EmuClock val, const char *what)
{
	for (int k = 0; k < n; k++)
		if (emu_smem_async_read_check(c, t, in, chunks[k], t->vc_tc, what))
			return EMU_STOP;
	for (int k = 0; k < n; k++) {
		uint32_t ch = chunks[k];
		c->sinflight[ch]++;
		c->sinflight_line[ch] = in->line;
		EmuTag r;
		tag_set(&r, in, t->tid, kind, slot, val, 0);
		emu_sread_note(c, ch, &r);
	}
	return 0;
}

void
emu_tc_smem_done(EmuCta *c, const uint32_t *chunks, int n)
{
	for (int k = 0; k < n; k++)
		if (c->sinflight[chunks[k]])
			c->sinflight[chunks[k]]--;
}

int
emu_tc_agent(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (t->agent >= 0)
		return t->agent;
	if (c->nagents == EMU_MAX_AGENTS)
		return emu_fault(c, t, in, "more than %d threads issue tcgen05 MMAs/copies/commits",
		                 EMU_MAX_AGENTS), -1;
	int a = c->nagents++;
	c->agent_tid[a] = t->tid;
	c->agent_commits[a] = 0;
	c->agent_done[a] = 0;
	t->agent = a;
	return a;
}

int
emu_tc_agent_slot(const EmuCta *c, int a)
{
	return c->slot0 + c->nthreads + EMU_MAX_MBAR + a;
}

int
emu_tc_push(EmuCta *c, EmuThread *t, const EmuInsn *in, EmuAsyncKind kind, int agent, void *data)
{
	EmuAsync q;
	memset(&q, 0, sizeof q);
	q.kind = kind;
	q.tid = t->tid;
	q.line = in->line;
	q.in = in;
	q.agent = agent;
	q.data = data;
	q.done = emu_tc_complete;
	q.drop = emu_tc_drop;
	emu_async_push(c, &q);
	return c->failed ? EMU_STOP : EMU_NEXT;
}

/* ---- alloc / dealloc / relinquish ------------------------------------------------------ */

/* First fit of n columns aligned to n (a buddy allocator's placement),
 * free in c and, for a pair's allocation, in its peer too. */
static uint32_t
free_cols(const EmuCta *c, const EmuCta *peer, uint32_t n)
{
	for (uint32_t s = 0; s + n <= EMU_TMEM_COLS; s += n) {
		int clash = 0;
		for (int k = 0; k < 2; k++) {
			const EmuCta *x = k ? peer : c;
			for (int i = 0; x && i < EMU_MAX_TMEM_ALLOCS; i++) {
				const EmuTmemAlloc *a = &x->talloc[i];
				if (a->live && s < a->col + a->ncols && a->col < s + n)
					clash = 1;
			}
		}
		if (!clash)
			return s;
	}
	return UINT32_MAX;
}

/* tcgen05.alloc.cta_group::2: one warp of each CTA of the pair allocates
 * together (PTX ISA §9.7.16.7.1, docs/cta-pair.md): the first to arrive
 * waits for the peer; the second picks columns free in both and grants
 * them to the first. Returns the column, or UINT32_MAX to wait. */
static int
pair_alloc(EmuCta *c, EmuThread *t0, const EmuInsn *in, uint32_t n, uint32_t *col)
{
	EmuCta *pc = c->cl->cta[c->rank ^ 1];
	*col = UINT32_MAX;
	if (c->palloc_state == 2) {
		*col = c->palloc_col;
		c->palloc_state = 0;
		return 0;
	}
	if (pc->palloc_state != 1) {
		c->palloc_state = 1;
		c->palloc_n = n;
		return 0;
	}
	if (pc->palloc_n != n)
		return emu_hazard(c, t0, in, "tmem-alloc",
		                  "tcgen05.alloc.cta_group::2 of %u columns here but %u in the peer CTA "
		                  "(rank %d): the pair's warps allocate the same columns together "
		                  "(docs/cta-pair.md, \"The tcgen05 CTA pair\")", n, pc->palloc_n,
		                  pc->rank);
	*col = free_cols(c, pc, n);
	if (*col == UINT32_MAX)
		return 0;
	pc->palloc_state = 2;
	pc->palloc_col = *col;
	pc->gen++;
	return 0;
}

int
emu_wop_tc_alloc(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *t0 = &c->t[w->id * 32 + __builtin_ctz(lanes)];
	uint64_t dst, n;
	if (emu_uniform(c, w, in, lanes, 0, &dst) || emu_uniform(c, w, in, lanes, 1, &n) ||
	    emu_tc_group_check(c, t0, in))
		return EMU_STOP;
	if (!c->tmem)
		return emu_fault(c, t0, in, "tcgen05 on a device without tensor memory");
	if (in->aux[TC_GROUP] == 2 && (c->rank ^ 1) >= emu_cluster_n(c))
		return emu_hazard(c, t0, in, "cta-group",
		                  "tcgen05.alloc.cta_group::2 in CTA rank %d of a cluster of %d: "
		                  "cta_group::2 needs the peer CTA (rank %d) of the pair in the cluster "
		                  "(docs/cta-pair.md, \"The tcgen05 CTA pair\")", c->rank, emu_cluster_n(c), c->rank ^ 1);
	if (n < 32 || n > 512 || (n & (n - 1)))
		return emu_hazard(c, t0, in, "tmem-alloc",
		                  "tcgen05.alloc of %" PRIu64 " columns: the count must be a power of two "
		                  "in [32, 512] (docs/hardware.md, \"TMEM addressing\")", n);
	if (c->relinquished)
		return emu_hazard(c, t0, in, "tmem-alloc",
		                  "tcgen05.alloc after tcgen05.relinquish_alloc_permit (docs/hardware.md, \"TMEM allocation\")");
	uint32_t sa;
	if (emu_shared_addr(c, t0, in, 0, &sa))
		return EMU_STOP;
	if (sa & 3)
		return emu_fault(c, t0, in, "tcgen05.alloc destination smem 0x%x is not 4-byte aligned", sa);
	uint32_t col;
	if (in->aux[TC_GROUP] == 2) {
		if (pair_alloc(c, t0, in, (uint32_t)n, &col))
			return EMU_STOP;
	} else {
		col = free_cols(c, NULL, (uint32_t)n);
	}
	if (col == UINT32_MAX)
		return EMU_BLOCK; /* waits until columns are freed (docs/hardware.md, "TMEM allocation") or the peer allocates */
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
	tag->slot = (uint16_t)t0->slot;
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
	if (emu_tc_group_check(c, t0, in))
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
	    emu_tc_group_check(c, t0, in))
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
	/* no MMA/cp/shift may still write, no tcgen05 access may still be unordered */
	for (int i = 0; i < c->naq; i++) {
		const EmuAsync *q = &c->aq[i];
		if (q->kind == AS_TC_MMA || q->kind == AS_TC_CP || q->kind == AS_TC_SHIFT)
			return emu_hazard(c, t0, in, "async-in-flight",
			                  "tcgen05.dealloc while the %s at PTX line %d (thread %d) has not "
			                  "completed", q->in->def->name, q->line, q->tid);
	}
	for (uint32_t q = 0; q < 4; q++)
		for (uint32_t k = col; k < col + a->ncols; k++) {
			uint32_t cell = q * EMU_TMEM_COLS + k;
			if (emu_tc_tag_check(c, t0, in, &c->twtag[cell], t0->slot, q * 32, k, "tcgen05.dealloc of") ||
			    emu_tc_tag_check(c, t0, in, &c->trtag[cell], t0->slot, q * 32, k, "tcgen05.dealloc of"))
				return EMU_STOP;
			memset(&c->twtag[cell], 0, sizeof c->twtag[cell]);
			memset(&c->trtag[cell], 0, sizeof c->trtag[cell]);
		}
	a->live = 0;
	c->gen++;
	return EMU_NEXT;
}

/* ---- ld / st ---------------------------------------------------------------------------- */

/* (lane, column) offsets of register v of thread t (docs/hardware.md,
 * "tcgen05.ld and tcgen05.st" table). With .pack::16b / .unpack::16b a register holds
 * the low 16 bits of two adjacent columns, the lower column in its low half (PTX ISA
 * §9.7.16.8.2): each 32-bit position of the pattern spans two columns; 16x32bx2's immediate
 * split stays a column offset. */
static void
ldst_map(const EmuInsn *in, int t, int v, uint32_t split, uint32_t *lane, uint32_t *col)
{
	uint32_t w = in->aux[3] ? 2 : 1;
	int rep, e;
	switch (in->aux[0]) {
	case SH_32x32b:
		*lane = (uint32_t)t;
		*col = w * (uint32_t)v;
		break;
	case SH_16x256b:
		rep = v / 4;
		e = v % 4;
		*lane = (uint32_t)(t / 4 + 8 * (e / 2));
		*col = w * (uint32_t)(2 * (t % 4) + e % 2 + 8 * rep);
		break;
	case SH_16x128b:
		rep = v / 2;
		e = v % 2;
		*lane = (uint32_t)(t / 4 + 8 * e);
		*col = w * (uint32_t)(t % 4 + 4 * rep);
		break;
	case SH_16x64b:
		*lane = (uint32_t)(t / 4 + 8 * (t % 2));
		*col = w * (uint32_t)((t / 2) % 2 + 2 * v);
		break;
	default: /* 16x32bx2 */
		*lane = (uint32_t)(t % 16);
		*col = (uint32_t)(t / 16) * split + w * (uint32_t)v;
		break;
	}
}

/* Columns touched: the widest column offset + 1 (+ 2 packed). */
static uint32_t
ldst_cols(const EmuInsn *in, uint32_t split)
{
	uint32_t maxc = 0, w = in->aux[3] ? 2 : 1;
	for (int t = 0; t < 32; t++)
		for (int v = 0; v < (int)in->aux[2]; v++) {
			uint32_t l, c;
			ldst_map(in, t, v, split, &l, &c);
			if (c + w > maxc)
				maxc = c + w;
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
	if (emu_uniform(c, w, in, lanes, st ? 0 : 1, &a) || emu_tc_group_check(c, t0, in))
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
		                  "docs/hardware.md, \"Lane quarters\")",
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

/* Orders a warp's tcgen05.ld/st after the ops that last touched its cells
 * (tags: twtag or trtag). Tags are kept per lane quarter and column and
 * name the first active thread of the collective that set them. A warp's
 * own earlier ld/st of the same cells is ordered by that thread's program
 * order (the warp runs its .sync.aligned collectives together), so it is
 * judged once, by that thread's clocks; an access of another warp by each
 * active thread's own. */
static int
ldst_cells_check(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes, const EmuTag *tags,
                 uint32_t lane0, uint32_t col0, uint32_t ncols, const char *what)
{
	EmuThread *base = &c->t[w->id * 32];
	uint32_t q = lane0 / 32;
	for (uint32_t k = col0; k < col0 + ncols; k++) {
		const EmuTag *tag = &tags[q * EMU_TMEM_COLS + k];
		if (tag->line && tag->kind == TAGK_TCST && (int)tag->tid / 32 == w->id) {
			EmuThread *t = &c->t[tag->tid];
			if (emu_tc_tag_check(c, t, in, tag, t->slot, lane0, k, what))
				return EMU_STOP;
			continue;
		}
		for (int l = 0; l < 32; l++)
			if ((lanes >> l & 1) &&
			    emu_tc_tag_check(c, &base[l], in, tag, base[l].slot, lane0, k, what))
				return EMU_STOP;
	}
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
	if (ldst_cells_check(c, w, in, lanes, c->twtag, lane0, col0, ncols, "tcgen05.ld reads"))
		return EMU_STOP;
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
		tag_set(&c->trtag[q * EMU_TMEM_COLS + k], in, t0->tid, TAGK_TCST, t0->tid, 0, 1);
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
	if (ldst_cells_check(c, w, in, lanes, c->twtag, lane0, col0, ncols, "tcgen05.st overwrites") ||
	    ldst_cells_check(c, w, in, lanes, c->trtag, lane0, col0, ncols, "tcgen05.st overwrites"))
		return EMU_STOP;
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
	for (uint32_t k = col0; k < col0 + ncols; k++)
		tag_set(&c->twtag[q * EMU_TMEM_COLS + k], in, t0->tid, TAGK_TCST, t0->tid, 0, 1);
	if (pld_push(c, w, in, &p)) {
		free(p.vals);
		return EMU_STOP;
	}
	return EMU_NEXT;
}

/* A register's bits from / to its TMEM cells; packed: the low halves of two
 * adjacent cells (the upper halves of unpacked stores are zero). */
static uint32_t
cell_load(const EmuInsn *in, const uint32_t *cell)
{
	return in->aux[3] ? (cell[0] & 0xffffu) | cell[1] << 16 : cell[0];
}

static void
cell_store(const EmuInsn *in, uint32_t *cell, uint32_t v)
{
	if (!in->aux[3]) {
		cell[0] = v;
		return;
	}
	cell[0] = v & 0xffffu;
	cell[1] = v >> 16;
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
				ldst_map(in, l, v, split, &lo, &co);
				uint32_t *cell = &c->tmem[(lane0 + lo) * EMU_TMEM_COLS + col0 + co];
				if (p->st) {
					cell_store(in, cell, p->vals[l * nregs + v]);
				} else {
					const EmuOperand *r = d->kind == OPK_VEC ? emu_sub(c, d, v) : d;
					t->r[r->reg] = cell_load(in, cell);
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
				tag->slot = (uint16_t)t0->slot;
				tag->val = t0->vc[t0->slot];
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

/* ---- commit ------------------------------------------------------------------------------- */

typedef struct CommitOp {
	uint32_t mbar;
	uint32_t ctas;  /* %cluster_ctarank bits of the CTAs whose mbarrier it arrives on */
	EmuClock seq;
} CommitOp;

/* The mbarriers a commit arrives on: the one its address names, or with
 * .multicast::cluster the one at the same offset in every CTA of the mask
 * (PTX ISA §9.7.16.9.6). */
static int
commit_targets(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t *mb, uint32_t *ctas)
{
	EmuCta *oc = c;
	if (in->space == SPACE_CLUSTER ? emu_cluster_addr(c, t, in, 0, &oc, mb)
	                               : emu_shared_addr(c, t, in, 0, mb))
		return EMU_STOP;
	*ctas = 1u << oc->rank;
	if (in->aux[3]) {
		uint64_t mask;
		if (emu_geti(c, t, in, 1, &mask))
			return EMU_STOP;
		*ctas = (uint32_t)mask & 0xffff;
		if (!*ctas || *ctas >> emu_cluster_n(c))
			return emu_fault(c, t, in, "commit multicast mask 0x%x: the cluster has CTA ranks "
			                 "0..%d", (unsigned)mask, emu_cluster_n(c) - 1);
	}
	for (int r = 0; r < c->cl->n; r++) {
		if (!(*ctas >> r & 1))
			continue;
		EmuCta *d = c->cl->cta[r];
		EmuMbar *cm = emu_mbar_find(d, *mb);
		if (!cm)
			return emu_hazard(c, t, in, "mbarrier", "tcgen05.commit to smem 0x%x of CTA rank "
			                  "%d, where no mbarrier is initialized", *mb, r);
		if (emu_mbar_visible(d, t, in, cm))
			return EMU_STOP;
	}
	return 0;
}

int
emu_op_tc_commit(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (emu_tc_group_check(c, t, in))
		return EMU_STOP;
	uint32_t mb, ctas;
	if (commit_targets(c, t, in, &mb, &ctas))
		return EMU_STOP;
	int a = emu_tc_agent(c, t, in);
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
	d->ctas = ctas;
	d->seq = (EmuClock)++c->agent_commits[a];
	/* the arrive carries what the issuing thread knew at the commit */
	memcpy(vc, t->vc, (size_t)c->nslots * sizeof *vc);
	t->vc[t->slot]++;
	EmuAsync q;
	memset(&q, 0, sizeof q);
	q.kind = AS_TC_COMMIT;
	q.tid = t->tid;
	q.line = in->line;
	q.in = in;
	q.agent = a;
	q.vc = vc;
	q.data = d;
	q.done = emu_tc_complete;
	q.drop = emu_tc_drop;
	emu_async_push(c, &q);
	return c->failed ? EMU_STOP : EMU_NEXT;
}

/* ---- completion --------------------------------------------------------------------------- */

int
emu_tc_commit_complete(EmuCta *c, EmuAsync *q)
{
	CommitOp *op = q->data;
	EmuThread *t = &c->t[q->tid];
	int slot = emu_tc_agent_slot(c, q->agent);
	c->agent_done[q->agent] = op->seq;
	if (q->vc[slot] < op->seq)
		q->vc[slot] = op->seq;
	for (int r = 0; r < c->cl->n; r++) {
		if (!(op->ctas >> r & 1))
			continue;
		EmuCta *d = c->cl->cta[r];
		EmuMbar *m = emu_mbar_find(d, op->mbar);
		if (!m)
			return emu_hazard(c, t, q->in, "mbarrier", "the tcgen05.commit issued here arrives "
			                  "on smem 0x%x of CTA rank %d, which no longer holds an mbarrier",
			                  op->mbar, r);
		if (m->pending < 1) {
			char st[256];
			emu_mbar_describe(d, m, st, sizeof st);
			return emu_hazard(c, t, q->in, "mbarrier", "tcgen05.commit arrives on an mbarrier "
			                  "of CTA rank %d that expects no more arrivals in its phase: %s", r,
			                  st);
		}
		emu_mbar_arrive(d, m, 1, q->vc);
	}
	return 0;
}
