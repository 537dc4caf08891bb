/* TMA: cp.async.bulk.tensor tile mode 1D-5D (PTX ISA §9.7.9.26.5.2),
 * plain cp.async.bulk copies (§9.7.9.25) and st.async (a register store
 * that completes like a bulk copy), against the tensor-map arguments
 * the runtime prepared (KrtTmapArgs: there is no driver to encode a
 * CUtensorMap, so the emulator reads the encode arguments directly).
 *
 * A load is queued at issue and lands at completion: the box is gathered
 * from global memory (out-of-bounds elements zero-filled,
 * docs/hardware.md, "TMA copies"), laid out densely innermost-first, XOR-swizzled on the absolute
 * smem address (docs/hardware.md, "TMA swizzle"), and its bytes complete_tx on the mbarrier. Until
 * then the destination chunks are marked in flight. A store reads smem at
 * completion and writes only in-bounds elements. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

enum {
	TF_MBAR = 1,      /* .mbarrier::complete_tx::bytes */
	TF_BULK = 2,      /* .bulk_group */
	TF_MCAST = 4,     /* .multicast::cluster */
	TF_HINT = 8,      /* .L2::cache_hint: a cache-policy operand */
	TF_READ = 16,     /* wait_group.read */
};

/* aux: [0] dims, [1] destination space, [2] source space, [3] TF_*, [4] cta_group */
int
emu_mod_tma(EmuInsn *in, const char *m, EmuParse *p)
{
	if (m[0] >= '1' && m[0] <= '5' && m[1] == 'd' && !m[2]) {
		in->aux[0] = (uint32_t)(m[0] - '0');
		return 1;
	}
	int sp = strcmp(m, "global") == 0 ? SPACE_GLOBAL
	       : strcmp(m, "shared::cta") == 0 ? SPACE_SHARED
	       : strcmp(m, "shared::cluster") == 0 ? SPACE_CLUSTER : -1;
	if (sp >= 0) {
		/* shared operands (smem, mbarrier) are shared-window addresses */
		if (sp != SPACE_GLOBAL)
			in->space = (uint8_t)sp;
		if (!in->aux[1])
			in->aux[1] = (uint32_t)sp;
		else
			in->aux[2] = (uint32_t)sp;
		return 1;
	}
	if (strcmp(m, "mbarrier::complete_tx::bytes") == 0)
		in->aux[3] |= TF_MBAR;
	else if (strcmp(m, "bulk_group") == 0)
		in->aux[3] |= TF_BULK;
	else if (strcmp(m, "multicast::cluster") == 0)
		in->aux[3] |= TF_MCAST;
	else if (strcmp(m, "L2::cache_hint") == 0)
		in->aux[3] |= TF_HINT;
	else if (strcmp(m, "read") == 0)
		in->aux[3] |= TF_READ;
	else if (strcmp(m, "cta_group::1") == 0)
		in->aux[4] = 1;
	else if (strcmp(m, "cta_group::2") == 0)
		in->aux[4] = 2;
	else if (strcmp(m, "tile") == 0 || strcmp(m, "L2") == 0)
		return 1;
	else if (strncmp(m, "im2col", 6) == 0 || strncmp(m, "tile::", 6) == 0)
		return emu_parse_fail(p, "%s.%s: only the tile mode is supported by the emulator",
		                      in->def->name, m);
	else
		return 0;
	return 1;
}

static int
is_load(const EmuInsn *in)
{
	return in->aux[1] == SPACE_SHARED || in->aux[1] == SPACE_CLUSTER;
}

int
emu_chk_tma(EmuInsn *in, EmuParse *p)
{
	if (!in->aux[0])
		return emu_parse_fail(p, "cp.async.bulk.tensor needs .1d .. .5d");
	int load = is_load(in);
	if (load && in->aux[2] != SPACE_GLOBAL)
		return emu_parse_fail(p, "cp.async.bulk.tensor: expected .shared::cluster.global or "
		                      ".shared::cta.global for a load");
	if (!load && !(in->aux[1] == SPACE_GLOBAL && in->aux[2] == SPACE_SHARED))
		return emu_parse_fail(p, "cp.async.bulk.tensor: expected .global.shared::cta for a store");
	if (load && !(in->aux[3] & TF_MBAR))
		return emu_parse_fail(p, "a cp.async.bulk.tensor load needs .mbarrier::complete_tx::bytes");
	if (!load && !(in->aux[3] & TF_BULK))
		return emu_parse_fail(p, "a cp.async.bulk.tensor store needs .bulk_group");
	int want = load ? 3 + !!(in->aux[3] & TF_MCAST) + !!(in->aux[3] & TF_HINT)
	                : 2 + !!(in->aux[3] & TF_HINT);
	if (in->nop != want)
		return emu_parse_fail(p, "cp.async.bulk.tensor with these modifiers takes %d operands, "
		                      "found %d", want, in->nop);
	return 0;
}

int
emu_chk_bulk_copy(EmuInsn *in, EmuParse *p)
{
	int load = is_load(in);
	if (load && !(in->aux[3] & TF_MBAR))
		return emu_parse_fail(p, "cp.async.bulk into shared memory needs "
		                      ".mbarrier::complete_tx::bytes");
	if (!load && !(in->aux[3] & TF_BULK))
		return emu_parse_fail(p, "cp.async.bulk to global memory needs .bulk_group");
	return 0;
}

/* One queued TMA / bulk copy. */
typedef struct TmaOp {
	int tmap;          /* param index, -1 for a plain bulk copy */
	int32_t coord[KRT_MAX_RANK];
	uint32_t smem;     /* destination (load) or source (store) */
	uint32_t mbar;
	uint64_t gaddr;    /* plain copies: the global (or source smem) address */
	uint32_t bytes;
	int load;
	uint32_t dsts;     /* loads: %cluster_ctarank bits of the destination CTAs */
	int8_t mbr[EMU_MAX_CLUSTER]; /* the CTA whose mbarrier each destination signals */
	int from_regs;     /* st.async: the bytes are data[], taken from registers at issue */
	uint8_t data[16];
} TmaOp;

static const KrtTmapArgs *
find_tmap(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t a, int *index)
{
	const EmuProgram *p = c->prog;
	uint64_t off = a >= EMU_GENERIC_PARAM && a - EMU_GENERIC_PARAM < EMU_WINDOW_SIZE
	             ? a - EMU_GENERIC_PARAM : a;
	for (int i = 0; i < p->nparams; i++) {
		const EmuSym *s = &p->sym[p->param_sym[i]];
		if (s->addr != off)
			continue;
		if (i >= c->lc->l->nargs || c->lc->l->args[i].kind != KRT_ARG_TMAP) {
			emu_fault(c, t, in, "the tensor-map operand points at param %s, which is not a "
			          "tensor map", s->name);
			return NULL;
		}
		*index = i;
		return &c->lc->l->tmaps[i];
	}
	emu_fault(c, t, in, "tensor-map operand 0x%" PRIx64 " is not the address of a tensor-map "
	          "kernel parameter (mov.b64 %%rd, p_X; cvta.param.u64 %%rd, %%rd)", a);
	return NULL;
}

/* Elements of the box along each dimension: ceil(box / elementStride). */
static void
box_dims(const KrtTmapArgs *m, uint32_t n[KRT_MAX_RANK], uint32_t *bytes)
{
	uint64_t total = (uint64_t)m->elem_bytes;
	for (uint32_t d = 0; d < KRT_MAX_RANK; d++) {
		uint32_t es = m->estrides[d] ? m->estrides[d] : 1;
		n[d] = d < m->rank ? (m->box[d] + es - 1) / es : 1;
		total *= n[d];
	}
	*bytes = (uint32_t)total;
}

static int
check_dst(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t smem, uint32_t bytes, int sw)
{
	if (smem & 127)
		return emu_hazard(c, t, in, "swizzle-align",
		                  "TMA smem address 0x%x is not 128-byte aligned (PTX ISA "
		                  "§9.7.9.26: tensor copies need 128-byte aligned shared memory)", smem);
	uint32_t period = (uint32_t)sw * 8;
	if (sw && smem % period)
		return emu_hazard(c, t, in, "swizzle-align",
		                  "TMA smem address 0x%x (kg_smem%+d) with %dB swizzle is not aligned to "
		                  "the %u-byte swizzle period: the XOR pattern is a function of the "
		                  "absolute address, so the data lands with another phase than the MMA "
		                  "descriptor assumes (docs/hardware.md, \"Tensor map encoding\")",
		                  smem, (int)(smem - c->dyn_addr), sw, period);
	if (smem < c->smem_lo || smem + bytes > c->smem_end)
		return emu_fault(c, t, in, "TMA box of %u bytes at smem 0x%x is outside the CTA's "
		                 "shared memory [0x%x, 0x%x)", bytes, smem, c->smem_lo, c->smem_end);
	return 0;
}

/* The destination of an async write: ordered after earlier readers, not
 * overlapping another in-flight write. */
static int
claim_dst(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t smem, uint32_t bytes,
          EmuMbar *m)
{
	for (uint32_t ch = smem >> 4; ch <= (smem + bytes - 1) >> 4; ch++) {
		if (c->sflags[ch] & SF_TMA_FLIGHT) {
			char d[320];
			emu_tag_describe(c, &c->swtag[ch], d, sizeof d);
			return emu_hazard(c, t, in, "async-in-flight",
			                  "TMA into smem 0x%x while the %s to the same bytes has not landed",
			                  ch * 16, d);
		}
		if (c->sinflight[ch]) {
			char text[200];
			emu_line_text(c->prog, c->sinflight_line[ch], text, sizeof text);
			return emu_hazard(c, t, in, "async-in-flight",
			                  "TMA overwrites smem 0x%x, which the async operation at PTX line %d "
			                  "`%s` still reads (wait for its completion / the empty barrier)",
			                  ch * 16, c->sinflight_line[ch], text);
		}
		const EmuTag *r = emu_sread_unordered(c, t->vc, t->slot, ch);
		if (r) {
			char d[320];
			emu_tag_describe(c, r, d, sizeof d);
			return emu_hazard(c, t, in, "unordered-async",
			                  "TMA overwrites smem 0x%x that the async read by %s may still use: "
			                  "no mbarrier wait ordered this TMA after that read's completion",
			                  ch * 16, d);
		}
	}
	if (emu_race_async_write(c, t, in, smem, bytes))
		return EMU_STOP;
	for (uint32_t ch = smem >> 4; ch <= (smem + bytes - 1) >> 4; ch++) {
		EmuTag *w = &c->swtag[ch];
		c->sflags[ch] = (uint8_t)((c->sflags[ch] | SF_TMA_FLIGHT) & ~SF_UNFENCED);
		w->kind = TAGK_TMA;
		w->pending = 0;
		w->slot = m ? (uint16_t)m->slot : (uint16_t)t->slot;
		w->val = m ? (EmuClock)(m->cbase + m->phases + 1) : t->vc[t->slot];
		w->line = in->line;
		w->tid = t->tid;
	}
	return 0;
}

static int
mbar_at(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t a, EmuMbar **out)
{
	*out = NULL;
	EmuMbar *m = emu_mbar_find(c, a);
	if (!m)
		return emu_hazard(c, t, in, "mbarrier",
		                  "the TMA's mbarrier at smem 0x%x is not initialized", a);
	if (emu_mbar_visible(c, t, in, m))
		return EMU_STOP;
	*out = m;
	return 0;
}

static int
mbar_of(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, EmuMbar **out)
{
	*out = NULL;
	uint32_t a;
	if (emu_shared_addr(c, t, in, i, &a))
		return EMU_STOP;
	return mbar_at(c, t, in, a, out);
}

/* The CTAs a load writes and the mbarrier each signals (PTX ISA §9.7.9.26:
 * with .multicast::cluster the box lands at the same offset in every CTA of
 * the mask and completes on the mbarrier at the same offset there; with
 * .cta_group::2 that mbarrier may be the one of the destination's peer CTA,
 * the one of the mbarrier operand's parity). */
static int
load_targets(EmuCta *c, EmuThread *t, const EmuInsn *in, TmaOp *op, uint32_t *sa, uint32_t *ma)
{
	EmuCta *dc, *mc;
	if (emu_cluster_addr(c, t, in, 0, &dc, sa) || emu_cluster_addr(c, t, in, 2, &mc, ma))
		return EMU_STOP;
	int cg2 = in->aux[4] == 2, n = c->cl->n;
	uint32_t mask = 1u << dc->rank;
	if (in->aux[3] & TF_MCAST) {
		uint64_t v;
		if (emu_geti(c, t, in, 3, &v))
			return EMU_STOP;
		mask = (uint32_t)v & 0xffff;
		if (!mask || (mask >> emu_cluster_n(c)))
			return emu_fault(c, t, in, "multicast mask 0x%x: the cluster has CTA ranks 0..%d",
			                 mask, emu_cluster_n(c) - 1);
		/* a co-resident group: the kernel's rank 0 is this CTA */
		if (c->cl->solo)
			mask = 1u << c->rank;
	}
	op->dsts = mask;
	for (int r = 0; r < n; r++) {
		if (!(mask >> r & 1))
			continue;
		int mr = !(in->aux[3] & TF_MCAST) ? mc->rank : cg2 ? (r & ~1) | (mc->rank & 1) : r;
		if (mr != r && !(cg2 && (mr ^ r) == 1))
			return emu_hazard(c, t, in, "cluster",
			                  "the TMA into CTA rank %d completes on an mbarrier of CTA rank %d: "
			                  "the mbarrier must be in the destination CTA%s (PTX ISA §9.7.9.26)",
			                  r, mr, cg2 ? " or its peer" : " unless .cta_group::2 names the peer");
		if (mr >= n)
			return emu_fault(c, t, in, "mbarrier of CTA rank %d in a cluster of %d", mr, n);
		op->mbr[r] = (int8_t)mr;
	}
	return 0;
}

static int
push(EmuCta *c, EmuThread *t, const EmuInsn *in, EmuAsyncKind kind, TmaOp *op)
{
	TmaOp *d = malloc(sizeof *d);
	if (!d)
		return emu_fault(c, t, in, "out of host memory");
	*d = *op;
	EmuAsync a;
	memset(&a, 0, sizeof a);
	a.kind = kind;
	a.tid = t->tid;
	a.line = in->line;
	a.in = in;
	a.agent = -1;
	a.group = op->load ? 0 : t->bulk_groups;
	a.data = d;
	a.done = emu_tma_complete;
	if (!op->load)
		t->bulk_open++;
	emu_async_push(c, &a);
	return c->failed ? EMU_STOP : EMU_NEXT;
}

/* Smem read by an async store: no unfenced generic writes, ordered after
 * async writes; in flight until the store completes. */
static int
claim_src(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t smem, uint32_t bytes)
{
	if (smem < c->smem_lo || smem + bytes > c->smem_end)
		return emu_fault(c, t, in, "async store source [0x%x, +%u) is outside the CTA's shared "
		                 "memory", smem, bytes);
	for (uint32_t ch = smem >> 4; ch <= (smem + bytes - 1) >> 4; ch++)
		if (emu_smem_async_read_check(c, t, in, ch, t->vc, "TMA store reads"))
			return EMU_STOP;
	for (uint32_t ch = smem >> 4; ch <= (smem + bytes - 1) >> 4; ch++) {
		c->sinflight[ch]++;
		c->sinflight_line[ch] = in->line;
	}
	return 0;
}

int
emu_op_tma(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	TmaOp op;
	memset(&op, 0, sizeof op);
	op.load = is_load(in);
	const EmuOperand *mo = emu_opnd(c, in, op.load ? 1 : 0);
	uint64_t ta;
	if (emu_addr(c, t, in, mo, &ta))
		return EMU_STOP;
	const KrtTmapArgs *m = find_tmap(c, t, in, ta, &op.tmap);
	if (!m)
		return EMU_STOP;
	if (mo->nsub != in->aux[0] || in->aux[0] != m->rank)
		return emu_fault(c, t, in, "%u coordinates for a .%ud copy of a rank-%u tensor map (%s)",
		                 mo->nsub, in->aux[0], m->rank, m->param);
	for (int d = 0; d < mo->nsub; d++) {
		uint64_t v;
		if (emu_get(c, t, in, emu_sub(c, mo, d), &v))
			return EMU_STOP;
		op.coord[d] = (int32_t)(uint32_t)v;
	}
	uint32_t n[KRT_MAX_RANK];
	box_dims(m, n, &op.bytes);
	if (m->swizzle_bytes && n[0] * (uint32_t)m->elem_bytes != (uint32_t)m->swizzle_bytes)
		return emu_fault(c, t, in, "tensor map %s: inner box of %u bytes with %dB swizzle; the "
		                 "emulator models inner box == swizzle span only", m->param,
		                 n[0] * (uint32_t)m->elem_bytes, m->swizzle_bytes);
	uint32_t sa, ma;
	if (op.load) {
		if (load_targets(c, t, in, &op, &sa, &ma))
			return EMU_STOP;
		op.smem = sa;
		op.mbar = ma;
		for (int r = 0; r < c->cl->n; r++) {
			EmuCta *d = c->cl->cta[r];
			EmuMbar *mb;
			if ((op.dsts >> r & 1) &&
			    (check_dst(d, t, in, sa, op.bytes, m->swizzle_bytes) ||
			     mbar_at(c->cl->cta[op.mbr[r]], t, in, ma, &mb) ||
			     claim_dst(d, t, in, sa, op.bytes, mb)))
				return EMU_STOP;
		}
		return push(c, t, in, AS_TMA_LOAD, &op);
	}
	if (emu_shared_addr(c, t, in, 1, &sa))
		return EMU_STOP;
	op.smem = sa;
	if (check_dst(c, t, in, sa, op.bytes, m->swizzle_bytes))
		return EMU_STOP;
	if (claim_src(c, t, in, sa, op.bytes))
		return EMU_STOP;
	return push(c, t, in, AS_TMA_STORE, &op);
}

/* st.async{.weak}.shared::cluster.mbarrier::complete_tx::bytes.v4.b32
 * [a], {v0, v1, v2, v3}, [mbar] (PTX ISA "st.async"): 16 bytes from
 * registers into the shared memory of a CTA of the cluster, completing
 * with complete_tx of its bytes on an mbarrier of that CTA. Queued at issue
 * like a bulk copy: the destination chunk is in flight until it lands, and
 * a reader must wait on the mbarrier's phase. The emulator implements the
 * 16-byte form only (emu_chk_st_async). */
int
emu_op_st_async(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	const EmuOperand *s = emu_opnd(c, in, 1);
	EmuCta *dc, *mc;
	EmuMbar *mb;
	uint32_t sa, ma;
	TmaOp op;

	memset(&op, 0, sizeof op);
	op.tmap = -1;
	op.load = 1;
	op.bytes = 16;
	op.from_regs = 1;
	if (s->kind != OPK_VEC || s->nsub != 4)
		return emu_fault(c, t, in, "st.async.v4 needs a vector of 4 registers");
	for (int i = 0; i < 4; i++) {
		uint64_t v;
		uint32_t w;
		if (emu_get(c, t, in, emu_sub(c, s, i), &v))
			return EMU_STOP;
		w = (uint32_t)v;
		memcpy(op.data + 4 * i, &w, 4);
	}
	if (emu_cluster_addr(c, t, in, 0, &dc, &sa) || emu_cluster_addr(c, t, in, 2, &mc, &ma))
		return EMU_STOP;
	if (dc != mc)
		return emu_hazard(c, t, in, "cluster",
		                  "st.async into CTA rank %d completes on an mbarrier of CTA rank %d: the "
		                  "mbarrier must be in the destination CTA (PTX ISA \"st.async\")", dc->rank,
		                  mc->rank);
	if (sa & 15)
		return emu_fault(c, t, in, "st.async.v4 address 0x%x is not 16-byte aligned", sa);
	if (sa < dc->smem_lo || sa + op.bytes > dc->smem_end)
		return emu_fault(c, t, in, "st.async of %u bytes at smem 0x%x is outside the shared memory "
		                 "[0x%x, 0x%x) of CTA rank %d", op.bytes, sa, dc->smem_lo, dc->smem_end, dc->rank);
	if (mbar_at(mc, t, in, ma, &mb) || claim_dst(dc, t, in, sa, op.bytes, mb))
		return EMU_STOP;
	op.smem = sa;
	op.mbar = ma;
	op.dsts = 1u << dc->rank;
	op.mbr[dc->rank] = (int8_t)mc->rank;
	return push(c, t, in, AS_TMA_LOAD, &op);
}

int
emu_chk_st_async(EmuInsn *in, EmuParse *p)
{
	if (!(in->aux[3] & TF_MBAR) || in->space != SPACE_CLUSTER)
		return emu_parse_fail(p, "st.async: expected .shared::cluster.mbarrier::complete_tx::bytes");
	if (in->ntypes != 1 || in->vec != 4 || emu_types[in->t[0]].bits != 32)
		return emu_parse_fail(p, "st.async: the emulator implements the 16-byte form (.v4 of a "
		                      "32-bit type) only");
	return 0;
}

/* cp.async.bulk [dst], [src], size{, [mbar]} */
int
emu_op_bulk_copy(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	TmaOp op;
	memset(&op, 0, sizeof op);
	op.tmap = -1;
	op.load = is_load(in);
	uint64_t size, dst, src;
	if (emu_geti(c, t, in, 2, &size) || emu_addr(c, t, in, emu_opnd(c, in, 0), &dst) ||
	    emu_addr(c, t, in, emu_opnd(c, in, 1), &src))
		return EMU_STOP;
	if (size == 0 || size % 16 || (dst & 15) || (src & 15))
		return emu_fault(c, t, in, "cp.async.bulk: size %" PRIu64 " and both addresses must be "
		                 "multiples of 16 (PTX ISA §9.7.9.25.4.1)", size);
	op.bytes = (uint32_t)size;
	if (op.load) {
		EmuMbar *mb;
		if (mbar_of(c, t, in, 3, &mb))
			return EMU_STOP;
		op.mbar = mb->addr;
		op.smem = (uint32_t)dst;
		op.gaddr = src;
		if (in->aux[2] == SPACE_SHARED && claim_src(c, t, in, (uint32_t)src, op.bytes))
			return EMU_STOP;
		if (op.smem < c->smem_lo || op.smem + op.bytes > c->smem_end)
			return emu_fault(c, t, in, "cp.async.bulk destination outside shared memory");
		if (claim_dst(c, t, in, op.smem, op.bytes, mb))
			return EMU_STOP;
		return push(c, t, in, AS_BULK_COPY, &op);
	}
	op.smem = (uint32_t)src;
	op.gaddr = dst;
	if (claim_src(c, t, in, op.smem, op.bytes))
		return EMU_STOP;
	return push(c, t, in, AS_BULK_COPY, &op);
}

int
emu_op_bulk_commit(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	(void)c;
	(void)in;
	t->bulk_groups++;
	t->bulk_open = 0;
	return EMU_NEXT;
}

/* cp.async.bulk.wait_group{.read} N: all but the N most recent committed
 * groups of this thread complete (the emulator completes the whole copy,
 * which is at least what .read waits for). */
int
emu_op_bulk_wait(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t n;
	if (emu_geti(c, t, in, 0, &n))
		return EMU_STOP;
	int upto = t->bulk_groups - (int)n - 1;
	if (upto >= 0 &&
	    emu_async_drain(c, t->tid, 1u << AS_TMA_STORE | 1u << AS_BULK_COPY, upto))
		return EMU_STOP;
	/* the completed stores' smem reads are now ordered before this thread */
	return EMU_NEXT;
}

/* ---- completion --------------------------------------------------------------------- */

static void
release_src(EmuCta *c, const EmuAsync *a, uint32_t smem, uint32_t bytes)
{
	EmuThread *t = &c->t[a->tid];
	for (uint32_t ch = smem >> 4; ch <= (smem + bytes - 1) >> 4; ch++) {
		if (c->sinflight[ch])
			c->sinflight[ch]--;
		EmuTag r = {(uint16_t)t->slot, TAGK_TMA, 0, t->vc[t->slot], a->line, a->tid};
		emu_sread_note(c, ch, &r);
	}
}

static int
land(EmuCta *c, const EmuAsync *a, const TmaOp *op, EmuCta *d, EmuCta *mc)
{
	EmuThread *t = &c->t[a->tid];
	if (d->finished || mc->finished)
		return emu_hazard(c, t, a->in, "cluster",
		                  "the TMA issued here lands in CTA rank %d after it exited: a CTA must "
		                  "wait for every copy into its shared memory (PTX ISA §9.7.9.26)",
		                  d->finished ? d->rank : mc->rank);
	EmuMbar *m = emu_mbar_find(mc, op->mbar);
	if (!m)
		return emu_hazard(c, t, a->in, "mbarrier",
		                  "the TMA issued here completes on the mbarrier at smem 0x%x of CTA rank "
		                  "%d, which is no longer valid", op->mbar, mc->rank);
	for (uint32_t ch = op->smem >> 4; ch <= (op->smem + op->bytes - 1) >> 4; ch++) {
		d->sflags[ch] &= (uint8_t)~SF_TMA_FLIGHT;
		/* the bytes land in the barrier's current phase */
		d->swtag[ch].val = (EmuClock)(m->cbase + m->phases + 1);
	}
	emu_mbar_tx(mc, m, -(int64_t)op->bytes);
	return 0;
}

/* One box between global memory and the shared memory of CTA sc. */
/* CUtensorMapDataType 16U4_ALIGN16B (cuda.h; docs/hardware.md, "Tensor map
 * encoding"): packed FP4 in global memory, each 16 values (8 bytes) in 16
 * bytes of shared memory, the 8 after them a gap (zeros here); loads only */
enum { TMAP_16U4_ALIGN16B = 14 };

static int
tensor_copy(EmuCta *c, const EmuAsync *a, const TmaOp *op, EmuCta *sc)
{
	EmuThread *t = &c->t[a->tid];
	const KrtTmapArgs *m = &c->lc->l->tmaps[op->tmap];
	uint32_t n[KRT_MAX_RANK], bytes;
	box_dims(m, n, &bytes);
	uint32_t eb = (uint32_t)m->elem_bytes;
	uint32_t rowb = n[0] * eb;
	int p4 = m->data_type == TMAP_16U4_ALIGN16B;
	if (p4 && !op->load)
		return emu_fault(c, t, a->in, "TMA store through tensor map %s (%s): 16U4_ALIGN16B is "
		                 "load only", m->param, m->tensor);
	uint8_t row[256 * 16];
	uint64_t stride[KRT_MAX_RANK];
	stride[0] = eb;
	for (uint32_t d = 1; d < m->rank; d++)
		stride[d] = m->strides[d - 1];
	uint32_t nrows = 1;
	for (uint32_t d = 1; d < KRT_MAX_RANK; d++)
		nrows *= n[d];
	for (uint32_t r = 0; r < nrows; r++) {
		/* coordinates of this row in dims 1.. */
		uint32_t rem = r;
		int oob = 0;
		uint64_t off = 0;
		for (uint32_t d = 1; d < m->rank; d++) {
			uint32_t j = rem % n[d];
			rem /= n[d];
			int64_t x = (int64_t)op->coord[d] + (int64_t)j * (m->estrides[d] ? m->estrides[d] : 1);
			if (x < 0 || (uint64_t)x >= m->dims[d])
				oob = 1;
			off += (uint64_t)x * stride[d];
		}
		uint32_t sbase = op->smem + r * rowb;
		if (op->load)
			memset(row, 0, rowb);
		else
			for (uint32_t b = 0; b < rowb; b += 16)
				memcpy(row + b, sc->smem + emu_swizzle(sbase + b, m->swizzle_bytes), 16);
		for (uint32_t i = 0; i < n[0] && !oob; i++) {
			int64_t x = (int64_t)op->coord[0] + (int64_t)i * (m->estrides[0] ? m->estrides[0] : 1);
			if (x < 0 || (uint64_t)x >= m->dims[0])
				continue;
			uint64_t ga = m->address + off + (p4 ? (uint64_t)x / 2 : (uint64_t)x * eb);
			uint8_t *h = emu_mem_at(c->lc->dev, ga, eb);
			if (!h) {
				char why[256];
				emu_mem_explain(c->lc->dev, ga, eb, why, sizeof why);
				return emu_fault(c, t, a->in, "TMA %s of tensor map %s (%s) element outside "
				                 "its allocation: %s", op->load ? "load" : "store", m->param,
				                 m->tensor, why);
			}
			if (p4) /* value i: nibble i%2 of byte i/2 of its 16-byte group */
				row[i / 16 * 16 + i % 16 / 2] |= (uint8_t)((*h >> (4 * (x % 2)) & 15) << (4 * (i % 2)));
			else if (op->load)
				memcpy(row + i * eb, h, eb);
			else
				memcpy(h, row + i * eb, eb);
		}
		if (op->load)
			for (uint32_t b = 0; b < rowb; b += 16)
				memcpy(sc->smem + emu_swizzle(sbase + b, m->swizzle_bytes), row + b, 16);
	}
	return 0;
}

int
emu_tma_complete(EmuCta *c, EmuAsync *a)
{
	const TmaOp *op = a->data;
	EmuThread *t = &c->t[a->tid];
	if (op->from_regs) {
		/* st.async: its one destination and that CTA's mbarrier */
		for (int r = 0; r < c->cl->n; r++) {
			EmuCta *d = c->cl->cta[r];
			if (!(op->dsts >> r & 1))
				continue;
			if (land(c, a, op, d, c->cl->cta[op->mbr[r]]))
				return EMU_STOP;
			memcpy(d->smem + op->smem, op->data, op->bytes);
		}
		return 0;
	}
	if (op->tmap >= 0 && op->load) {
		for (int r = 0; r < c->cl->n; r++)
			if ((op->dsts >> r & 1) && (tensor_copy(c, a, op, c->cl->cta[r]) ||
			                            land(c, a, op, c->cl->cta[r], c->cl->cta[op->mbr[r]])))
				return EMU_STOP;
		return 0;
	}
	if (op->tmap >= 0) {
		if (tensor_copy(c, a, op, c))
			return EMU_STOP;
	} else if (op->load) {
		uint8_t *src;
		if (a->in->aux[2] == SPACE_GLOBAL) {
			src = emu_mem_at(c->lc->dev, op->gaddr, op->bytes);
			if (!src) {
				char why[256];
				emu_mem_explain(c->lc->dev, op->gaddr, op->bytes, why, sizeof why);
				return emu_fault(c, t, a->in, "cp.async.bulk source: %s", why);
			}
		} else {
			src = c->smem + op->gaddr;
			release_src(c, a, (uint32_t)op->gaddr, op->bytes);
		}
		memmove(c->smem + op->smem, src, op->bytes);
	} else {
		uint8_t *dst = emu_mem_at(c->lc->dev, op->gaddr, op->bytes);
		if (!dst) {
			char why[256];
			emu_mem_explain(c->lc->dev, op->gaddr, op->bytes, why, sizeof why);
			return emu_fault(c, t, a->in, "cp.async.bulk destination: %s", why);
		}
		memcpy(dst, c->smem + op->smem, op->bytes);
	}
	if (op->load)
		return land(c, a, op, c, c);
	release_src(c, a, op->smem, op->bytes);
	return 0;
}
