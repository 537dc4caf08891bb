/* The decode family (gen/decode.h): parameters, cache formats, the
 * configuration that reuses fmha's sm_90a split-O consumers, the prologue
 * (index compaction, split-KV ranges), the split-KV combine, ABI and plan. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "family.h"
#include "ops.h"

#define P(f) offsetof(DecodeParams, f)

/* See family.h for the columns. */
static const ParamSpec decode_params[] = {
	{"target", PK_TARGET, P(target), "sm_90a,sm_100a", 0, 0, 0, "sm_90a",
	 "sm_90a: a producer warpgroup gathers and dequantizes K=V tiles to bf16 in smem; fmha's split-O consumers. sm_100a: the same producer feeding fmha's tcgen05 pipeline",
	 NULL},
	{"format", PK_ENUM, P(format), "bf16,fp8-token,fp8-v4,fp8-v32", 0, 0, 0, "fp8-v4",
	 "KV cache format (docs/ABI.md \"decode\", \"Cache formats\")", NULL},
	{"head-dim-qk", PK_INT, P(head_dim_qk), "0,512,576", 0, 0, 0, "0",
	 "Q and K dims, 64 of them RoPE (0: the format's own, 576 for fp8-v32, else 512); V is the first 512", NULL},
	{"heads-q", PK_INT, P(heads_q), NULL, 1, 128, 1, "64", "query heads sharing the one KV head", NULL},
	{"addressing", PK_ENUM, P(addressing), "sparse,paged", 0, 0, 0, "sparse",
	 "main source: sparse (an index list per query row) or paged (a block table; the first seqlens[b] tokens)",
	 NULL},
	{"topk", PK_INT, P(topk), NULL, 1, 4096, 1, "512", "main source: indices per query row", "addressing=sparse"},
	{"page-size", PK_INT, P(page_size), NULL, 1, 4096, 1, "64", "main source: tokens per page", NULL},
	{"addressing-extra", PK_ENUM, P(addressing_extra), "sparse,paged", 0, 0, 0, "sparse",
	 "extra source: sparse (needs --topk-extra > 0) or paged (the SWA ring: a block table and lengths)", NULL},
	{"topk-extra", PK_INT, P(topk_extra), NULL, 0, 4096, 1, "0",
	 "extra source (SWA window): indices per query row (0: no sparse extra source)", "addressing-extra=sparse"},
	{"page-size-extra", PK_INT, P(page_size_extra), NULL, 1, 4096, 1, "256", "extra source: tokens per page",
	 NULL},
	{"topk-length", PK_INT, P(topk_length), "0,1", 0, 0, 0, "0",
	 "per-row valid lengths of the index lists (topk_length tensors)", NULL},
	{"sink", PK_INT, P(sink), "0,1", 0, 0, 0, "0", "per-head attention-sink logits join the denominator", NULL},
	{"unnormalized", PK_INT, P(unnormalized), "0,1", 0, 0, 0, "0",
	 "O as f32 without the 1/rowsum, plus LSE and the reference max M, for a later merge (no split-KV, no sink)",
	 NULL},
	{"stage-rows", PK_INT, P(stage_rows), "0,1", 0, 0, 0, "0",
	 "1: the staged gather where it fits (token rows copied by cp.async.bulk into a smem ring two tiles ahead, one K=V stage; kernel name ends _sr; 6-12 % slower than the register gather on the H100, BENCHMARKS.md); 0: the register gather",
	 "target=sm_90a"},
};

static int decode_finish(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);

/* Lays out shared memory, barriers and the consumers' plan for f->stages
 * K=V stages. */
static int
decode_plan_stages(DecodeCfg *d, KgErr *err)
{
	FmhaCfg *f = &d->f;

	if (layout_canonical(&f->lq, MAJOR_K, SWZ_128B, 16, 64, f->d, err) < 0 ||
	    layout_canonical(&f->lk, MAJOR_K, SWZ_128B, 16, f->bn, f->d, err) < 0 ||
	    layout_canonical(&f->lv, MAJOR_K, SWZ_128B, 16, f->bn, f->dv, err) < 0)
		return -1;
	f->q_bytes = f->lq.bytes;
	f->k_bytes = f->lk.bytes;
	f->v_bytes = f->lv.bytes;
	plan_init(&f->plan, f->t);
	f->r_q = plan_smem(&f->plan, "Q", f->q_bytes + (uint32_t)d->q_pad_slices * f->lq.slice_bytes, 1024, 1);
	f->r_k = f->r_v = plan_smem(&f->plan, "K=V stages (bf16)", f->k_bytes, 1024, f->stages);
	/* Q needs no barrier of its own: the producer threads that store it
	 * fence and arrive on K=V full after their first tile, which every
	 * consumer waits for before its first read of Q */
	f->b_q = -1;
	f->b_k = f->b_v = plan_barrier(&f->plan, "K=V full", f->stages, 128, 0,
	                               "every producer thread after its stores and proxy fence");
	if (f->t->fmha->plan(f, err) < 0)
		return -1;
	/* The split plan's estimate keeps 56 registers of row state beside S,
	 * half of O and P (232); ptxas allocates these consumers 168 in all
	 * (emitted/sm_90a/fmha_bf16_d512_h128kv1_kvshared_causal_pk64_*.ptxas.txt).
	 * The gathering producer needs more than a TMA thread, so decode holds
	 * the consumers to 24 beside S, O and P: 200 of what the producer leaves, and the
	 * ptxas suite to no spills. */
	if (f->split)
		f->plan.regs_need_max = f->bn / 2 + f->dv / 4 + f->bn / 4 + 24;
	d->r_list = plan_smem(&f->plan, "key list", d->list_len ? 4u * (uint32_t)d->list_len : 16, 16, 1);
	d->r_count = plan_smem(&f->plan, "key count", 16, 16, 1);
	d->r_keys = d->nsparse < d->nsrc ? plan_smem(&f->plan, "tile keys (paged)", 64 * 4, 16, 3) : -1;
	d->r_chunks = plan_smem(&f->plan, "chunk counts",
	                        d->list_len ? 4u * (uint32_t)((d->topk[0] + 31) / 32 + (d->topk[1] + 31) / 32) : 16,
	                        16, 1);
	if (d->raw_slots) {
		d->r_raw = plan_smem(&f->plan, "token rows (staging ring)", d->raw_bytes, 128, d->raw_slots);
		d->b_raw = plan_barrier(&f->plan, "token rows full", d->raw_slots, 128, 0,
		                        "every producer thread, expect_tx of its copy; the copies' complete_tx");
	}
	return 0;
}

/* Whether the staged gather (DecodeOps.stage_rows) can copy this cache's
 * tokens with cp.async.bulk: rows 16-byte aligned and a multiple of 16
 * bytes (PTX ISA "cp.async.bulk"), and each tail scale entry inside a
 * 16-byte pair that stays inside its page (the copy takes the pair);
 * then sets the ring's slot layout. */
static int
decode_stage_fits(DecodeCfg *d)
{
	const DecodeFormat *fm = d->fmt;
	int tail = fm->nscales && fm->scale_at < 0;

	if (!fm->nope_fp8 || fm->row_bytes % 16)
		return 0;
	if (tail && (fm->scale_bytes > 16 || 16 % fm->scale_bytes))
		return 0;
	for (int s = 0; s < d->nsrc; s++) {
		if (d->page_bytes[s] % 16)
			return 0;
		if (tail && (decode_scale_offset(fm, d->ps[s], d->ps[s] - 1) & ~15u) + 16 > d->page_bytes[s])
			return 0;
	}
	d->raw_scales_at = 64u * (uint32_t)fm->row_bytes;
	d->raw_flags_at = d->raw_scales_at + (tail ? 64u * 16 : 0);
	d->raw_bytes = d->raw_flags_at + 64u * 4;
	return 1;
}

static int
decode_configure(DecodeCfg *d, const DecodeParams *p, KgErr *err)
{
	FmhaCfg *f = &d->f;
	const DecodeOps *ops;

	memset(d, 0, sizeof *d);
	f->t = &targets[p->target];
	ops = f->t->decode;
	if (!ops)
		return kg_fail(err, "--target=%s: decode is not generated for this target yet", f->t->name);
	if (decode_format_resolve(p->format, p->head_dim_qk, &d->fmtv, err) < 0)
		return -1;
	d->fmt = &d->fmtv;
	d->hq = p->heads_q;
	d->hblocks = (d->hq + 63) / 64;
	d->paged[0] = p->addressing == DEC_ADDR_PAGED;
	d->paged[1] = p->addressing_extra == DEC_ADDR_PAGED;
	if (d->paged[1] && p->topk_extra)
		return kg_fail(err, "--topk-extra=%d with --addressing-extra=paged: a paged source has no index list (leave it 0)",
		               p->topk_extra);
	d->nsrc = p->topk_extra || d->paged[1] ? 2 : 1;
	d->topk[0] = d->paged[0] ? 0 : p->topk;
	d->ps[0] = p->page_size;
	d->topk[1] = d->paged[1] ? 0 : p->topk_extra;
	d->ps[1] = p->page_size_extra;
	for (int s = 0; s < d->nsrc; s++)
		if (!d->paged[s])
			d->sp[d->nsparse++] = s;
	if (p->topk_length && !d->nsparse)
		return kg_fail(err, "--topk-length=1: every source is paged, so there is no index list to shorten");
	for (int s = 0; s < d->nsrc; s++)
		d->page_bytes[s] = decode_page_bytes(d->fmt, d->ps[s]);
	d->has_len = p->topk_length;
	d->sink = p->sink;
	d->unnorm = p->unnormalized;
	if (d->unnorm && d->sink)
		return kg_fail(err, "--sink=1 with --unnormalized=1: the sink joins the denominator once, in the merge (docs/ABI.md \"decode\")");
	d->list_len = d->topk[0] + d->topk[1];

	/* The consumers: fmha's split-O plan over one query token of 64 packed
	 * heads, K = V (V is the first head_dim_v columns of each key row). */
	f->d = d->fmt->d_qk;
	f->dv = 512;
	f->hq = d->hq;
	f->hkv = 1;
	f->group = d->hq;
	f->kv_shared = 1;
	f->mask = MASK_NONE;
	f->wl = 1 << 30;
	f->lse = 1;
	f->in = DT_BF16;
	f->esz = 2;
	f->ohalves = 1;
	f->split = 1;
	f->bm = 64;
	f->bn = 64;
	f->stages = 2;
	f->wgs = 2;
	f->q_rows = 64;
	f->qblocks = 1;
	f->dvc = f->dv;
	f->pack = 64;
	f->htiles = 1;
	f->hcta = 64;
	f->rows = 1;
	f->head_guard = d->hq % 64 != 0;
	f->gather = ops->gather;
	f->finish = d->unnorm ? NULL : decode_finish;
	f->o_unnorm = d->unnorm;
	f->o_stage = 1;
	f->load_q = ops->load_q;
	f->producer_regs = ops->regs_for ? ops->regs_for(d->fmt) : ops->producer_regs;
	f->p_in_kv = f->d > f->dv;
	f->ext = d;
	d->cons_tid0 = 128;
	d->cons_threads = 256;
	if (ops->configure && ops->configure(d, err) < 0)
		return -1;
	/* The staged gather where it fits: one K=V stage and the ring of
	 * token rows (fp8-v4: 64 + 75 KiB in place of two 64 KiB stages) */
	if (ops->stage_rows && p->stage_rows && decode_stage_fits(d)) {
		KgErr why; /* a plan one stage cannot take (P in the K=V stages needs two): today's gather */

		f->stages = 1;
		d->raw_slots = DEC_RAW_SLOTS;
		if (decode_plan_stages(d, &why) < 0 || plan_smem_total(&f->plan) > f->t->smem_max) {
			d->raw_slots = 0;
			f->stages = 2;
		}
	}
	/* The most K=V stages, up to the target's, whose plan fits shared
	 * memory: head_dim_qk 576 on sm_100a (Q, its zero slice and two 72
	 * KiB stages) keeps one, which exposes each tile's gather */
	while (!d->raw_slots) {
		if (decode_plan_stages(d, err) < 0)
			return -1;
		if (f->stages == 1 || plan_smem_total(&f->plan) <= f->t->smem_max)
			break;
		f->stages--;
	}
	snprintf(f->name, sizeof f->name, "decode_%s%s_h%d_", d->fmt->name, d->fmt->d_qk != 512 ? "_d576" : "", d->hq);
	{
		size_t n = strlen(f->name);
		if (d->paged[0])
			snprintf(f->name + n, sizeof f->name - n, "pg%d", d->ps[0]);
		else
			snprintf(f->name + n, sizeof f->name - n, "k%dp%d", d->topk[0], d->ps[0]);
	}
	for (char *c = f->name; *c; c++)
		if (*c == '-')
			*c = '_';
	if (d->nsrc > 1) {
		size_t n = strlen(f->name);
		if (d->paged[1])
			snprintf(f->name + n, sizeof f->name - n, "_xpg%d", d->ps[1]);
		else
			snprintf(f->name + n, sizeof f->name - n, "_x%dp%d", d->topk[1], d->ps[1]);
	}
	{
		size_t n = strlen(f->name);
		/* _sr: the staged gather (--stage-rows 1 where it fits) */
		snprintf(f->name + n, sizeof f->name - n, "%s%s%s%s_%s", d->has_len ? "_len" : "",
		         d->sink ? "_sink" : "", d->unnorm ? "_unnorm" : "", d->raw_slots ? "_sr" : "", f->t->tag);
	}
	return plan_check(&f->plan, err);
}

static const char *const src_sfx[2] = {"", "_extra"};

Reg
decode_emit_paged_len(Emit *e, const DecodeCfg *d, const FmhaRegs *r, int s)
{
	Reg l = reg_new(e, RC_B32), m = reg_new(e, RC_B32), a = reg_new(e, RC_B64), o = reg_new(e, RC_B64);

	op_param_global(e, a, "seqlens%s", src_sfx[s]);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tld.global.nc.s32 %s, [%s];\n", o.s, r->b.s,
	      a.s, a.s, o.s, l.s, a.s);
	emitf(e, "\tld.param.u32 %s, [p_max_pages%s];\n\tmul.lo.u32 %s, %s, %d;\n", m.s, src_sfx[s], m.s, m.s,
	      d->ps[s]);
	emitf(e, "\tmax.s32 %s, %s, 0;\n\tmin.u32 %s, %s, %s;\n", l.s, l.s, l.s, l.s, m.s);
	return l;
}

void
decode_emit_tile_keys(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg n0, Reg j, Reg tid, Reg dst)
{
	Reg pos = reg_new(e, RC_B32), loc = reg_new(e, RC_B32), ent = reg_new(e, RC_B32), t = reg_new(e, RC_B32);
	Reg pg = reg_new(e, RC_B32), a = reg_new(e, RC_B64), o = reg_new(e, RC_B64);
	Reg act = reg_new(e, RC_PRED), v = reg_new(e, RC_PRED), s1 = reg_new(e, RC_PRED), q = reg_new(e, RC_PRED);
	Reg list = op_plan_smem(e, &d->f.plan, r->base, d->r_list);

	emit_block(e, "decode.tile_keys");
	emitf(e, "\tsetp.lt.u32 %s, %s, 64;\n\tmad.lo.u32 %s, %s, 64, %s;\n\tmov.u32 %s, -1;\n", act.s, tid.s, pos.s,
	      j.s, tid.s, ent.s);
	emitf(e, "\tsetp.lt.and.u32 %s, %s, %s, %s;\n", v.s, pos.s, r->sk.s, act.s);
	if (d->nsrc > 1) {
		emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\tselp.u32 %s, %s, 0, %s;\n\tsub.u32 %s, %s, %s;\n", s1.s, pos.s,
		      n0.s, t.s, n0.s, s1.s, loc.s, pos.s, t.s);
	} else {
		emitf(e, "\tmov.u32 %s, %s;\n", loc.s, pos.s);
	}
	for (int s = 0; s < d->nsrc; s++) {
		emitf(e, "\tsetp.%s.and.u32 %s, %s, %s, %s;\n", s ? "ge" : "lt", q.s, pos.s, d->nsrc > 1 ? n0.s : "0x7fffffff",
		      v.s);
		if (!d->paged[s]) {
			/* the list holds this source alone */
			emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s ld.shared.u32 %s, [%s];\n", t.s, loc.s, list.s, q.s,
			      ent.s, t.s);
			if (s)
				emitf(e, "\t@%s or.b32 %s, %s, 0x80000000;\n", q.s, ent.s, ent.s);
			continue;
		}
		/* key i: token block_table[b, i / ps]·ps + i % ps */
		emitf(e, "\tdiv.u32 %s, %s, %d;\n", pg.s, loc.s, d->ps[s]);
		emitf(e, "\tld.param.u32 %s, [p_max_pages%s];\n\tmad.lo.u32 %s, %s, %s, %s;\n", t.s, src_sfx[s], t.s, t.s,
		      r->b.s, pg.s);
		op_param_global(e, a, "block_table%s", src_sfx[s]);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.u32 %s, [%s];\n", o.s,
		      t.s, a.s, a.s, o.s, q.s, t.s, a.s);
		/* a page outside the cache (capacity / ps pages): no key */
		emitf(e, "\tld.param.u32 %s, [p_capacity%s];\n\tdiv.u32 %s, %s, %d;\n", pg.s, src_sfx[s], pg.s, pg.s,
		      d->ps[s]);
		emitf(e, "\tsetp.lt.and.u32 %s, %s, %s, %s;\n", q.s, t.s, pg.s, q.s);
		emitf(e, "\trem.u32 %s, %s, %d;\n\t@%s mad.lo.u32 %s, %s, %d, %s;\n", pg.s, loc.s, d->ps[s], q.s, ent.s,
		      t.s, d->ps[s], pg.s);
		if (s)
			emitf(e, "\t@%s or.b32 %s, %s, 0x80000000;\n", q.s, ent.s, ent.s);
	}
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.u32 [%s], %s;\n", t.s, tid.s, dst.s, act.s, t.s, ent.s);
}

Reg
decode_emit_main_count(Emit *e, const DecodeCfg *d, const FmhaRegs *r)
{
	Reg n;

	if (d->paged[0])
		return decode_emit_paged_len(e, d, r, 0);
	n = reg_new(e, RC_B32);
	emitf(e, "\tld.shared.u32 %s, [%s];\n", n.s, op_plan_smem(e, &d->f.plan, r->base, d->r_count).s);
	return n;
}

/* Every warp of the CTA compacts 32-entry chunks of the two index lists
 * (chunk c: source 0's chunks first) into one key list in shared memory
 * (source in bit 31): an entry is valid when its position is below the
 * row's length and its index is in [0, capacity) (anything else is -1,
 * skipped). Phase 1 loads all of a warp's chunks at once and counts each
 * chunk's valid entries (ballot); after a CTA barrier phase 2 places each
 * at its chunk's offset (the counts before it) plus its rank in the
 * chunk, so the list keeps index order whatever the timing. Warp 0 also
 * stores the total. The caller's CTA barrier publishes the list. */
static void
emit_compact(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg qrow)
{
	int ns = d->nsparse, nch0 = (d->topk[d->sp[0]] + 31) / 32;
	int nch = nch0 + (ns > 1 ? (d->topk[d->sp[1]] + 31) / 32 : 0);
	int warps = d->f.plan.threads / 32, K = (nch + warps - 1) / warps, G = (nch + 31) / 32;
	Reg len[2], cap[2], base[2], v[64], c = reg_new(e, RC_B32), t = reg_new(e, RC_B32);
	Reg pos = reg_new(e, RC_B32), ln = reg_new(e, RC_B32), cp = reg_new(e, RC_B32);
	Reg off = reg_new(e, RC_B32), bal = reg_new(e, RC_B32), lt = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), b = reg_new(e, RC_B64);
	Reg p = reg_new(e, RC_PRED), s1 = reg_new(e, RC_PRED), ok = reg_new(e, RC_PRED);
	Reg list = op_plan_smem(e, &d->f.plan, r->base, d->r_list);
	Reg cnt = op_plan_smem(e, &d->f.plan, r->base, d->r_count);
	Reg counts = op_plan_smem(e, &d->f.plan, r->base, d->r_chunks);

	emit_block(e, "decode.compact");
	emitf(e, "\tmov.u32 %s, %%lanemask_lt;\n", lt.s);
	for (int k = 0; k < ns; k++) {
		int s = d->sp[k];
		len[k] = reg_new(e, RC_B32);
		cap[k] = reg_new(e, RC_B32);
		base[k] = reg_new(e, RC_B64);
		emitf(e, "\tmov.u32 %s, %d;\n", len[k].s, d->topk[s]);
		if (d->has_len) {
			/* clamp the row's length to [0, topk] */
			op_param_global(e, a, "topk_length%s", src_sfx[s]);
			emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", b.s, qrow.s, a.s, a.s, b.s);
			emitf(e, "\tld.global.nc.s32 %s, [%s];\n\tmax.s32 %s, %s, 0;\n\tmin.s32 %s, %s, %d;\n", len[k].s,
			      a.s, len[k].s, len[k].s, len[k].s, len[k].s, d->topk[s]);
		}
		emitf(e, "\tld.param.u32 %s, [p_capacity%s];\n", cap[k].s, src_sfx[s]);
		op_param_global(e, base[k], "indices%s", src_sfx[s]);
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", b.s, qrow.s, 4 * d->topk[s],
		      base[k].s, base[k].s, b.s);
	}
	/* phase 1: chunk warp + warps·k; v = the index, or -1 when skipped */
	for (int k = 0; k < K; k++) {
		v[k] = reg_new(e, RC_B32);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tmov.u32 %s, -1;\n", c.s, r->warp.s, warps * k, v[k].s);
		if (ns > 1) {
			emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n", s1.s, c.s, nch0);
			emitf(e, "\tselp.u32 %s, %d, 0, %s;\n\tsub.u32 %s, %s, %s;\n", t.s, nch0, s1.s, pos.s, c.s, t.s);
			emitf(e, "\tselp.u32 %s, %s, %s, %s;\n\tselp.b64 %s, %s, %s, %s;\n", ln.s, len[1].s, len[0].s,
			      s1.s, a.s, base[1].s, base[0].s, s1.s);
		} else {
			emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n\tmov.b64 %s, %s;\n", pos.s, c.s, ln.s,
			      len[0].s, a.s, base[0].s);
		}
		emitf(e, "\tmad.lo.u32 %s, %s, 32, %s;\n\tsetp.lt.u32 %s, %s, %s;\n", pos.s, pos.s, r->lane.s, p.s,
		      pos.s, ln.s);
		emitf(e, "\tsetp.lt.and.u32 %s, %s, %d, %s;\n", p.s, c.s, nch, p.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.u32 %s, [%s];\n", b.s,
		      pos.s, a.s, a.s, b.s, p.s, v[k].s, a.s);
	}
	for (int k = 0; k < K; k++) {
		/* unsigned: -1 and every negative index fail; the valid ones of
		 * source 1 carry bit 31 */
		emitf(e, "\tadd.u32 %s, %s, %d;\n", c.s, r->warp.s, warps * k);
		if (ns > 1) {
			emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\tselp.u32 %s, %s, %s, %s;\n", s1.s, c.s, nch0, cp.s,
			      cap[1].s, cap[0].s, s1.s);
			emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s or.b32 %s, %s, 0x80000000;\n", ok.s, v[k].s, cp.s,
			      s1.s, v[k].s, v[k].s);
		} else {
			emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", ok.s, v[k].s, cap[0].s);
		}
		emitf(e, "\tselp.u32 %s, %s, -1, %s;\n", v[k].s, v[k].s, ok.s);
		emitf(e, "\tvote.sync.ballot.b32 %s, %s, 0xffffffff;\n\tpopc.b32 %s, %s;\n", bal.s, ok.s, t.s, bal.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tsetp.eq.and.u32 %s, %s, 0, %s;\n", p.s, c.s, nch, p.s,
		      r->lane.s, p.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.u32 [%s], %s;\n", off.s, c.s, counts.s, p.s,
		      off.s, t.s);
	}
	op_bar_sync(e, 0, d->f.plan.threads);
	/* phase 2: offset of chunk c = Σ counts[c' < c] (lane l adds chunks
	 * l, l+32, .., then the warp's sum); warp 0 lane 0 also the total */
	for (int k = 0; k <= K; k++) {
		if (k < K)
			emitf(e, "\tadd.u32 %s, %s, %d;\n", c.s, r->warp.s, warps * k);
		else
			emitf(e, "\tmov.u32 %s, %d;\n", c.s, nch);
		emitf(e, "\tmov.u32 %s, 0;\n", off.s);
		for (int g = 0; g < G; g++) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", pos.s, r->lane.s, 32 * g, p.s,
			      pos.s, c.s);
			emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tmov.u32 %s, 0;\n\t@%s ld.shared.u32 %s, [%s];\n", pos.s,
			      pos.s, counts.s, t.s, p.s, t.s, pos.s);
			emitf(e, "\tadd.u32 %s, %s, %s;\n", off.s, off.s, t.s);
		}
		for (int x = 16; x >= 1; x /= 2)
			emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n\tadd.u32 %s, %s, %s;\n", t.s,
			      off.s, x, off.s, off.s, t.s);
		if (k == K) {
			emitf(e, "\tor.b32 %s, %s, %s;\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s st.shared.u32 [%s], %s;\n", t.s,
			      r->warp.s, r->lane.s, p.s, t.s, p.s, cnt.s, off.s);
			break;
		}
		emitf(e, "\tsetp.ne.u32 %s, %s, -1;\n\tvote.sync.ballot.b32 %s, %s, 0xffffffff;\n", ok.s, v[k].s,
		      bal.s, ok.s);
		emitf(e, "\tand.b32 %s, %s, %s;\n\tpopc.b32 %s, %s;\n\tadd.u32 %s, %s, %s;\n", t.s, bal.s, lt.s, t.s,
		      t.s, t.s, t.s, off.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.u32 [%s], %s;\n", t.s, t.s, list.s, ok.s, t.s,
		      v[k].s);
	}
}

/* Tiles the gather (gen/sm90/decode.c) prefetches ahead of the tile whose loads come next,
 * issued after a tile is published, where the producer holds the fewest
 * registers (fp8-v32 and the paged fp8-token spill at the loop's top).
 * With only sparse sources the whole key list is known: one for the
 * register gather (H100, h64 batch 128: 43.6 µs, against 46.0 at two and
 * 48.8 at four, whose start-up prefetches crowd out the first tile's
 * loads; BENCHMARKS.md "decode"), two beyond the staged gather's copies
 * (as measured there). With a paged source the keys are resolved one tile
 * ahead (the 3-tile ring) at the loop's top, so none: the next tile,
 * whose first pass is already loading. */
int
decode_prefetch_tiles(const DecodeCfg *d)
{
	if (d->nsparse < d->nsrc)
		return 0;
	return d->raw_slots ? 2 : 1;
}

/* cnt = &counters[qrow·HB + h/64]: the row's split-KV completion word. */
static void
decode_emit_counter(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg cnt, Reg a, Reg t)
{
	op_param_global(e, cnt, "counters");
	emitf(e, "\tshr.u32 %s, %s, 6;\n\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, r->h.s, t.s, r->qrow.s, d->hblocks,
	      t.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, t.s, cnt.s, cnt.s, a.s);
}

/* With splits > 1 the part's O and LSE go to its row of O_partial and
 * LSE_partial, without the sink. */
static void
emit_split_rows(Emit *e, const DecodeCfg *d, FmhaRegs *r, Reg t, Reg ps)
{
	emitf(e, "\tsetp.gt.u32 %s, %s, 1;\n", ps.s, r->splits.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\t@%s mov.u32 %s, %s;\n", t.s, r->qrow.s, r->splits.s, r->split.s,
	      ps.s, r->qs.s, t.s);
	emitf(e, "\t@%s mov.u32 %s, 1;\n\t@%s mul.lo.u32 %s, %s, %d;\n", ps.s, r->total_q.s, ps.s, r->lse_q0.s,
	      t.s, d->hq);
	emitf(e, "\t@%s mov.u32 %s, 0;\n", ps.s, r->sink_hq.s);
	emitf(e, "\t@%s ld.param.u64 %s, [p_O_partial];\n\t@%s ld.param.u64 %s, [p_LSE_partial];\n", ps.s,
	      r->o.s, ps.s, r->lse.s);
	emitf(e, "\t@%s cvta.to.global.u64 %s, %s;\n\t@%s cvta.to.global.u64 %s, %s;\n", ps.s, r->o.s, r->o.s,
	      ps.s, r->lse.s, r->lse.s);
}

/* Q's rows of this head block into L2 before the key list is compacted
 * (targets without DecodeOps.issue_q):
 * thread tid < 64 (and head h + tid < Hq) prefetches row (qrow·Hq + h +
 * tid) of Q, 2·D bytes at a 16-byte aligned offset (PTX ISA
 * "cp.async.bulk.prefetch"), so the producer's Q loads later hit L2. */
static void
emit_q_prefetch(Emit *e, const DecodeCfg *d, const FmhaRegs *r)
{
	Reg t = reg_new(e, RC_B32), a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), p = reg_new(e, RC_PRED);

	emitf(e, "\tadd.u32 %s, %s, %s;\n\tsetp.lt.u32 %s, %s, %d;\n", t.s, r->h.s, r->tid.s, p.s, t.s, d->hq);
	emitf(e, "\tsetp.lt.and.u32 %s, %s, 64, %s;\n", p.s, r->tid.s, p.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmul.wide.u32 %s, %s, %d;\n", t.s, r->qrow.s, d->hq, t.s, o.s, t.s,
	      2 * d->f.d);
	op_param_global(e, a, "Q");
	emitf(e, "\tadd.u64 %s, %s, %s;\n", a.s, a.s, o.s);
	emitf(e, "\t@%s cp.async.bulk.prefetch.L2.global [%s], %d;\n", p.s, a.s, 2 * d->f.d);
}

static int
emit_prologue(Emit *e, const DecodeCfg *d, FmhaRegs *r, KgErr *err)
{
	const FmhaCfg *f = &d->f;
	Reg raw = reg_new(e, RC_B32), y = reg_new(e, RC_B32);
	Reg t = reg_new(e, RC_B32), tiles = reg_new(e, RC_B32), ps = reg_new(e, RC_PRED);
	Reg cnt;

	fmha_regs_new(e, r);
	r->o = reg_new(e, RC_B64);
	r->lse = reg_new(e, RC_B64);
	r->lse_q0 = reg_new(e, RC_B32);
	r->splits = reg_new(e, RC_B32);
	r->split = reg_new(e, RC_B32);
	if (d->sink)
		r->sink = reg_new(e, RC_B64);

	r->sink_hq = reg_new(e, RC_B32);
	r->qrow = reg_new(e, RC_B32);

	emit_block(e, "decode.prologue");
	emitf(e, "\tmov.u32 %s, %%tid.x;\n\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n", r->tid.s,
	      r->warp.s, r->tid.s, r->lane.s, r->tid.s);
	/* CTA (x, y, z): head block x % HB of split x / HB, query token y of
	 * sequence z; with O split by columns (ohalves 2), x first picks the
	 * half: columns vcol = (x % 2)·dv/2 */
	if (d->unnorm)
		emitf(e, "\tmov.u32 %s, 1;\n\tmov.u32 %s, %%ctaid.x;\n", r->splits.s, t.s);
	else
		emitf(e, "\tld.param.u32 %s, [p_splits];\n\tmov.u32 %s, %%ctaid.x;\n", r->splits.s, t.s);
	if (f->ohalves > 1) {
		r->vcol = reg_new(e, RC_B32);
		emitf(e, "\trem.u32 %s, %s, %d;\n\tmul.lo.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", r->vcol.s, t.s,
		      f->ohalves, r->vcol.s, r->vcol.s, f->dvc, t.s, t.s, f->ohalves);
	}
	emitf(e, "\tdiv.u32 %s, %s, %d;\n\trem.u32 %s, %s, %d;\n\tshl.b32 %s, %s, 6;\n", r->split.s, t.s,
	      d->hblocks, r->h.s, t.s, d->hblocks, r->h.s, r->h.s);
	emitf(e, "\tmov.u32 %s, %%ctaid.z;\n", r->b.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 1;\n", r->hk.s, r->ks.s,
	      r->m0.s, r->sq.s);
	/* Q row b·s_q + y; LSE [batch, Hq, s_q]: head stride s_q (total_q),
	 * head 0 at b·Hq·s_q + y */
	emitf(e, "\tld.param.u32 %s, [p_s_q];\n\tmov.u32 %s, %%ctaid.y;\n", r->total_q.s, y.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %s, %s;\n", r->lse_q0.s, r->b.s, d->hq,
	      r->lse_q0.s, r->lse_q0.s, r->total_q.s, y.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tmov.u32 %s, %s;\n", r->qrow.s, r->b.s, r->total_q.s, y.s,
	      r->qs.s, r->qrow.s);
	emitf(e, "\tmov.u32 %s, kg_smem;\n\tadd.u32 %s, %s, 1023;\n\tand.b32 %s, %s, -1024;\n", raw.s,
	      r->base.s, raw.s, r->base.s, r->base.s);
	op_param_global(e, r->o, "O");
	op_param_global(e, r->lse, "LSE");
	emitf(e, "\tmov.u32 %s, %d;\n", r->sink_hq.s, d->sink ? d->hq : 0);
	if (d->sink)
		op_param_global(e, r->sink, "sink");
	if (d->unnorm) {
		r->mref = reg_new(e, RC_B64);
		op_param_global(e, r->mref, "M");
	}
	/* Split-KV (docs/ABI.md "decode"): a part writes its normalized O and
	 * LSE, without the sink, to row (qrow·splits + split) of O_partial /
	 * LSE_partial ([.., Hq] rows: head stride 1), and the last part to
	 * finish combines them (decode_finish). */
	if (!d->unnorm) {
		Reg ctr = reg_new(e, RC_B64), a = reg_new(e, RC_B64), p0 = reg_new(e, RC_PRED);

		emit_split_rows(e, d, r, t, ps);
		/* the part counts itself started (decode_finish): resident, with
		 * everything a part that waits for it needs from it (its smem is
		 * the launch's; sm_100a's TMEM comes later, but no sm_100a part
		 * waits, DecodeOps.combine_wait) */
		decode_emit_counter(e, d, r, ctr, a, t);
		emitf(e, "\tsetp.eq.and.u32 %s, %s, 0, %s;\n", p0.s, r->tid.s, ps.s);
		emitf(e, "\t@%s red.relaxed.gpu.global.add.u32 [%s], %d;\n", p0.s, ctr.s, DEC_CNT_START);
	}
	if (f->t->decode->issue_q) {
		f->t->decode->issue_q(e, d, r, op_plan_smem(e, &f->plan, r->base, f->r_q));
		/* back in the prologue's block (gen/emit.h, "Naming") */
		emit_block(e, "decode.prologue");
	} else {
		emit_q_prefetch(e, d, r);
	}
	op_init_barriers(e, &f->plan, r->base, r->tid, "decode.barrier_init");
	if (f->t->fmha->setup && f->t->fmha->setup(e, f, r, err) < 0)
		return -1;
	if (d->nsparse)
		emit_compact(e, d, r, r->qrow);
	op_bar_sync(e, 0, f->plan.threads);
	/* this part's tiles: [split·T/splits, (split+1)·T/splits) of T keys:
	 * the compacted list, then each paged source's keys */
	emit_block(e, "decode.tile_counts");
	cnt = op_plan_smem(e, &f->plan, r->base, d->r_count);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", r->sk.s, r->n_lead.s);
	if (d->nsparse)
		emitf(e, "\tld.shared.u32 %s, [%s];\n", r->sk.s, cnt.s);
	for (int s = 0; s < d->nsrc; s++)
		if (d->paged[s]) {
			Reg l = decode_emit_paged_len(e, d, r, s);
			emitf(e, "\tadd.u32 %s, %s, %s;\n", r->sk.s, r->sk.s, l.s);
		}
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", tiles.s, r->sk.s, f->bn - 1, tiles.s,
	      tiles.s, f->bn);
	emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tdiv.u32 %s, %s, %s;\n", r->j0.s, r->split.s, tiles.s, r->j0.s,
	      r->j0.s, r->splits.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tdiv.u32 %s, %s, %s;\n", r->n_total.s, r->split.s, tiles.s,
	      tiles.s, r->n_total.s, r->n_total.s, r->splits.s);
	emitf(e, "\tdiv.u32 %s, %s, %d;\n\tmin.u32 %s, %s, %s;\n", r->n_full.s, r->sk.s, f->bn, r->n_full.s,
	      r->n_full.s, r->n_total.s);
	(void)err;
	return 0;
}

/* Split-KV combine, run by the consumer threads (d->cons_threads from
 * tid d->cons_tid0) once their part's O and LSE are stored
 * (decode.finish): every warp of every part (and, with O split by
 * columns, of each half of it) fences its stores and counts itself in
 * counters[qrow·HB + hb]; the CTA whose warp counts last reads
 * all parts and writes the row's O and LSE, the sink joining the
 * denominator once: LSE = ln(Σ_s e^LSE_s + e^sink), O = Σ_s e^(LSE_s -
 * LSE) O_s. It then resets the counter to 0 for the next launch. A part
 * with no key has LSE_s = -inf and weighs 0. Warp w of W takes heads w,
 * w+W, ..; lane l the parts l, l+32, .. of the LSE pass and columns 16l ..
 * 16l+15 of O, whose parts it reads UNROLL at a time so their loads
 * overlap. */
enum { UNROLL = 4 };

static int
decode_finish(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	const DecodeCfg *d = f->ext;
	int wait = f->t->decode->combine_wait;
	Reg c = reg_new(e, RC_B32), w8 = reg_new(e, RC_B32), t = reg_new(e, RC_B32), hh = reg_new(e, RC_B32);
	Reg s = reg_new(e, RC_B32), head = reg_new(e, RC_B32), row0 = reg_new(e, RC_B32), flag = reg_new(e, RC_B32);
	Reg bq = reg_new(e, RC_B32), yq = reg_new(e, RC_B32), sl = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), cnt = reg_new(e, RC_B64), op = reg_new(e, RC_B64), lp = reg_new(e, RC_B64);
	Reg sk = reg_new(e, RC_B64), o = reg_new(e, RC_B64), l = reg_new(e, RC_B64), tt = reg_new(e, RC_B64);
	Reg m = reg_new(e, RC_F32), ls = reg_new(e, RC_F32), w = reg_new(e, RC_F32), L = reg_new(e, RC_F32);
	Reg x = reg_new(e, RC_F32), mo = reg_new(e, RC_F32);
	Reg nn = reg_new(e, RC_B32), lo = reg_new(e, RC_B32), hi = reg_new(e, RC_B32), pcl = reg_new(e, RC_PRED);
	Reg acc[16], v[UNROLL][8], ws[UNROLL], h[2], pk[8];
	Reg p = reg_new(e, RC_PRED), pc = reg_new(e, RC_PRED), pe = reg_new(e, RC_PRED), pu[UNROLL];
	Reg fl = op_plan_smem(e, &f->plan, r->base, d->r_count);
	char done[48], hloop[48], s1[48], s1end[48], s2[48], out[48], spin[48], spun[48];

	(void)err;
	reg_array(e, RC_F32, acc, 16);
	for (int u = 0; u < UNROLL; u++) {
		reg_array(e, RC_B32, v[u], 8);
		ws[u] = reg_new(e, RC_F32);
		pu[u] = reg_new(e, RC_PRED);
	}
	reg_array(e, RC_B16, h, 2);
	reg_array(e, RC_B32, pk, 8);
	emit_block(e, "decode.finish");
	label_new(e, done, sizeof done, "combine_done");
	label_new(e, hloop, sizeof hloop, "combine_head");
	label_new(e, s1, sizeof s1, "combine_max");
	label_new(e, s1end, sizeof s1end, "combine_max_done");
	label_new(e, s2, sizeof s2, "combine_sum");
	label_new(e, out, sizeof out, "combine_store");
	label_new(e, spin, sizeof spin, "combine_wait");
	label_new(e, spun, sizeof spun, "combine_waited");
	emitf(e, "\tsetp.le.u32 %s, %s, 1;\n\t@%s bra %s;\n", p.s, r->splits.s, p.s, done);
	/* The counter word (gen/decode.h DEC_CNT_*, docs/ABI.md "decode"):
	 * every consumer thread fences its part's stores and meets the others
	 * at a CTA barrier; then the last consumer thread reads how many of the
	 * row's N = splits·ohalves parts have started and, in one atomic, counts
	 * its part done and claims a slice when all N have started (then each
	 * part is resident or finished, so waiting for them cannot deadlock).
	 * Slice i is heads [i·64/N, (i+1)·64/N) of the block. The part that
	 * completes the count combines slices [claims before it, N), its own
	 * among them, and takes the row's counts and its claim back out; a part
	 * that claimed earlier waits (every consumer thread) until the done
	 * count is N or taken out, combines its slice, then takes its claim
	 * out: the word is 0 once every part is gone. Every atomic is acq_rel,
	 * so a reader of the word synchronizes with every part before it (PTX
	 * ISA "Memory consistency model"). The first consumer thread clears
	 * [fl+4] lo, [fl+8] hi, [fl+12] wait (no slice) before the barrier; the
	 * counting thread sets them when it has slices; a second barrier hands
	 * them to every consumer thread. */
	emitf(e, "\tsub.u32 %s, %s, %d;\n\tsetp.eq.u32 %s, %s, 0;\n", c.s, r->tid.s, d->cons_tid0, pe.s, c.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, %d;\n\tmov.u32 %s, 0;\n", pc.s, c.s, d->cons_threads - 1, flag.s);
	for (int i = 1; i < 4; i++)
		emitf(e, "\t@%s st.shared.u32 [%s+%d], %s;\n", pe.s, fl.s, 4 * i, flag.s);
	emitf(e, "\tfence.acq_rel.gpu;\n\tbar.sync 1, %d;\n", d->cons_threads);
	decode_emit_counter(e, d, r, cnt, a, t);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", nn.s, r->splits.s, f->ohalves);
	if (wait) {
		emitf(e, "\t@%s ld.relaxed.gpu.global.u32 %s, [%s];\n", pc.s, flag.s, cnt.s);
		emitf(e, "\tand.b32 %s, %s, %d;\n\tsetp.eq.and.u32 %s, %s, %s, %s;\n", t.s, flag.s, DEC_CNT_MASK, pcl.s,
		      t.s, nn.s, pc.s);
	} else {
		emitf(e, "\tsetp.ne.u32 %s, 0, 0;\n", pcl.s);
	}
	emitf(e, "\tselp.u32 %s, %u, %u, %s;\n", t.s, DEC_CNT_DONE + DEC_CNT_CLAIM, DEC_CNT_DONE, pcl.s);
	emitf(e, "\t@%s atom.acq_rel.gpu.global.add.u32 %s, [%s], %s;\n", pc.s, flag.s, cnt.s, t.s);
	/* lo = the claims before this one; the last part: done + 1 = N */
	emitf(e, "\tbfe.u32 %s, %s, %d, %d;\n\tbfe.u32 %s, %s, %d, %d;\n", lo.s, flag.s, DEC_CNT_CLAIM_AT,
	      DEC_CNT_BITS, t.s, flag.s, DEC_CNT_DONE_AT, DEC_CNT_BITS);
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.eq.and.u32 %s, %s, %s, %s;\n", t.s, t.s, pe.s, t.s, nn.s, pc.s);
	/* the last part takes the row's counts and its own claim back out */
	emitf(e, "\tselp.u32 %s, %u, 0, %s;\n\tmad.lo.u32 %s, %s, %u, %s;\n\tneg.s32 %s, %s;\n", t.s,
	      DEC_CNT_CLAIM, pcl.s, t.s, nn.s, DEC_CNT_START + DEC_CNT_DONE, t.s, t.s, t.s);
	emitf(e, "\t@%s atom.acq_rel.gpu.global.add.u32 %s, [%s], %s;\n", pe.s, t.s, cnt.s, t.s);
	/* slices: a claim [lo, lo + 1), waited for; the last [lo, N), not */
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tselp.u32 %s, %s, %s, %s;\n\tselp.u32 %s, 0, 1, %s;\n", hi.s, lo.s, hi.s,
	      nn.s, hi.s, pe.s, flag.s, pe.s);
	emitf(e, "\tor.pred %s, %s, %s;\n", pcl.s, pcl.s, pe.s);
	emitf(e, "\t@%s st.shared.u32 [%s+4], %s;\n\t@%s st.shared.u32 [%s+8], %s;\n\t@%s st.shared.u32 [%s+12], %s;\n",
	      pcl.s, fl.s, lo.s, pcl.s, fl.s, hi.s, pcl.s, fl.s, flag.s);
	emitf(e, "\tbar.sync 1, %d;\n", d->cons_threads);
	emitf(e, "\tld.shared.u32 %s, [%s+4];\n\tld.shared.u32 %s, [%s+8];\n\tld.shared.u32 %s, [%s+12];\n", lo.s,
	      fl.s, hi.s, fl.s, flag.s, fl.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, lo.s, hi.s, p.s, done);
	/* a claim before the last: wait until the done count is N or 0 */
	if (wait) {
		emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, flag.s, p.s, spun);
		emit_label(e, spin);
		emitf(e, "\tld.acquire.gpu.global.u32 %s, [%s];\n\tbfe.u32 %s, %s, %d, %d;\n", t.s, cnt.s, t.s, t.s,
		      DEC_CNT_DONE_AT, DEC_CNT_BITS);
		emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\tsetp.ne.and.u32 %s, %s, %s, %s;\n", p.s, t.s, p.s, t.s, nn.s, p.s);
		emitf(e, "\t@%s nanosleep.u32 64;\n\t@%s bra %s;\n", p.s, p.s, spin);
		emitf(e, "\tmov.u32 %s, %u;\n\tneg.s32 %s, %s;\n\t@%s atom.acq_rel.gpu.global.add.u32 %s, [%s], %s;\n", t.s,
		      DEC_CNT_CLAIM, t.s, t.s, pc.s, t.s, cnt.s, t.s);
		emit_label(e, spun);
	}
	emitf(e, "\tfence.acq_rel.gpu;\n");
	op_param_global(e, op, "O_partial");
	op_param_global(e, lp, "LSE_partial");
	op_param_global(e, o, "O");
	op_param_global(e, l, "LSE");
	if (d->sink)
		op_param_global(e, sk, "sink");
	/* heads [lo·64/N, hi·64/N) of the block; parts' rows qrow·splits + s;
	 * this warp's first head */
	emitf(e, "\tshl.b32 %s, %s, 6;\n\tdiv.u32 %s, %s, %s;\n\tshl.b32 %s, %s, 6;\n\tdiv.u32 %s, %s, %s;\n",
	      lo.s, lo.s, lo.s, lo.s, nn.s, hi.s, hi.s, hi.s, hi.s, nn.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tshr.u32 %s, %s, 5;\n\tadd.u32 %s, %s, %s;\n", row0.s, r->qrow.s,
	      r->splits.s, w8.s, c.s, hh.s, w8.s, lo.s);
	emitf(e, "\tld.param.u32 %s, [p_s_q];\n\tdiv.u32 %s, %s, %s;\n\trem.u32 %s, %s, %s;\n", t.s, bq.s,
	      r->qrow.s, t.s, yq.s, r->qrow.s, t.s);
	emit_label(e, hloop);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, hh.s, hi.s, p.s, out);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", head.s, r->h.s, hh.s, p.s,
	      head.s, d->hq, p.s, out);
	/* m = max(sink, LSE_s): lanes over parts, then the warp */
	if (d->sink) {
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, head.s, a.s, a.s, sk.s);
		emitf(e, "\tld.global.nc.f32 %s, [%s];\n", x.s, a.s);
	} else {
		emitf(e, "\tmov.f32 %s, 0fFF800000;\n", x.s);
	}
	emitf(e, "\tmov.f32 %s, %s;\n\tmov.u32 %s, %s;\n", m.s, x.s, s.s, r->lane.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, s.s, r->splits.s, p.s, s1end);
	emit_label(e, s1);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, row0.s, s.s, t.s, t.s, d->hq,
	      head.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tld.global.f32 %s, [%s];\n", a.s, t.s, a.s,
	      a.s, lp.s, ls.s, a.s);
	emitf(e, "\tmax.f32 %s, %s, %s;\n\tadd.u32 %s, %s, 32;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", m.s,
	      m.s, ls.s, s.s, s.s, p.s, s.s, r->splits.s, p.s, s1);
	emit_label(e, s1end);
	for (int xx = 16; xx >= 1; xx /= 2)
		emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n\tmax.f32 %s, %s, %s;\n", ls.s, m.s, xx,
		      m.s, m.s, ls.s);
	/* m = -inf: nothing and no sink: O = 0, LSE = -inf (offset 0 keeps
	 * -inf - -inf out); L starts with the sink's e^(sink - m) */
	emitf(e, "\tsetp.eq.f32 %s, %s, 0fFF800000;\n\tselp.f32 %s, 0f00000000, %s, %s;\n", pe.s, m.s, mo.s, m.s,
	      pe.s);
	emitf(e, "\tsub.f32 %s, %s, %s;\n\tmul.f32 %s, %s, 0f3FB8AA3B;\n\tex2.approx.f32 %s, %s;\n", L.s, x.s,
	      mo.s, L.s, L.s, L.s, L.s);
	for (int i = 0; i < 16; i++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", acc[i].s);
	emitf(e, "\tmov.u32 %s, 0;\n", s.s);
	emit_label(e, s2);
	for (int u = 0; u < UNROLL; u++) {
		/* part s+u: weight e^(LSE - m) (0 past the last part), its 16 columns */
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", sl.s, s.s, u, pu[u].s, sl.s,
		      r->splits.s);
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, row0.s, sl.s, t.s, t.s, d->hq,
		      head.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tmov.f32 %s, 0fFF800000;\n", a.s, t.s,
		      a.s, a.s, lp.s, ws[u].s);
		emitf(e, "\t@%s ld.global.f32 %s, [%s];\n", pu[u].s, ws[u].s, a.s);
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", a.s, t.s, 2 * f->dv, a.s, a.s, op.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 32;\n\tadd.u64 %s, %s, %s;\n", tt.s, r->lane.s, a.s, a.s, tt.s);
		/* past the last part: zeros, never 0·garbage */
		for (int i = 0; i < 8; i++)
			emitf(e, "\tmov.b32 %s, 0;\n", v[u][i].s);
		for (int q = 0; q < 2; q++)
			emitf(e, "\t@%s ld.global.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", pu[u].s, v[u][4 * q].s,
			      v[u][4 * q + 1].s, v[u][4 * q + 2].s, v[u][4 * q + 3].s, a.s, 16 * q);
	}
	for (int u = 0; u < UNROLL; u++) {
		emitf(e, "\tsub.f32 %s, %s, %s;\n\tmul.f32 %s, %s, 0f3FB8AA3B;\n\tex2.approx.f32 %s, %s;\n", ws[u].s,
		      ws[u].s, mo.s, ws[u].s, ws[u].s, ws[u].s, ws[u].s);
		emitf(e, "\tselp.f32 %s, %s, 0f00000000, %s;\n\tadd.f32 %s, %s, %s;\n", ws[u].s, ws[u].s, pu[u].s,
		      L.s, L.s, ws[u].s);
		for (int i = 0; i < 8; i++) {
			emitf(e, "\tmov.b32 {%s, %s}, %s;\n", h[0].s, h[1].s, v[u][i].s);
			for (int k = 0; k < 2; k++)
				emitf(e, "\tcvt.f32.bf16 %s, %s;\n\tfma.rn.f32 %s, %s, %s, %s;\n", x.s, h[k].s,
				      acc[2 * i + k].s, ws[u].s, x.s, acc[2 * i + k].s);
		}
	}
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", s.s, s.s, UNROLL, p.s, s.s,
	      r->splits.s, p.s, s2);
	/* O = acc / L (0 when L = 0), LSE = m + ln L */
	emitf(e, "\tsetp.gt.f32 %s, %s, 0f00000000;\n\trcp.rn.f32 %s, %s;\n\tselp.f32 %s, %s, 0f00000000, %s;\n",
	      p.s, L.s, w.s, L.s, w.s, w.s, p.s);
	for (int i = 0; i < 8; i++)
		emitf(e, "\tmul.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n\tcvt.rn.bf16x2.f32 %s, %s, %s;\n",
		      acc[2 * i].s, acc[2 * i].s, w.s, acc[2 * i + 1].s, acc[2 * i + 1].s, w.s, pk[i].s,
		      acc[2 * i + 1].s, acc[2 * i].s);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", t.s,
	      r->qrow.s, d->hq, head.s, a.s, t.s, 2 * f->dv, a.s, a.s, o.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 32;\n\tadd.u64 %s, %s, %s;\n", tt.s, r->lane.s, a.s, a.s, tt.s);
	for (int q = 0; q < 2; q++)
		emitf(e, "\tst.global.v4.b32 [%s+%d], {%s, %s, %s, %s};\n", a.s, 16 * q, pk[4 * q].s, pk[4 * q + 1].s,
		      pk[4 * q + 2].s, pk[4 * q + 3].s);
	emitf(e, "\tlg2.approx.f32 %s, %s;\n\tmul.f32 %s, %s, 0f3F317218;\n\tadd.f32 %s, %s, %s;\n", L.s, L.s,
	      L.s, L.s, L.s, L.s, mo.s);
	/* LSE[b, head, y] = (b·Hq + head)·s_q + y */
	emitf(e, "\tld.param.u32 %s, [p_s_q];\n\tmad.lo.u32 %s, %s, %d, %s;\n\tmad.lo.u32 %s, %s, %s, %s;\n", t.s,
	      flag.s, bq.s, d->hq, head.s, flag.s, flag.s, t.s, yq.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, flag.s, a.s, a.s, l.s);
	emitf(e, "\tselp.f32 %s, 0fFF800000, %s, %s;\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s st.global.f32 [%s], %s;\n",
	      L.s, L.s, pe.s, p.s, r->lane.s, p.s, a.s, L.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", hh.s, hh.s,
	      d->cons_threads / 32, p.s, hh.s, hi.s, p.s, hloop);
	emit_label(e, out);
	emit_label(e, done);
	return 0;
}

static void
decode_abi(const DecodeCfg *d, const char *args, KernelAbi *k)
{
	AbiParam *p;

	memset(k, 0, sizeof *k);
	snprintf(k->kernel, sizeof k->kernel, "%s", d->f.name);
	k->family = "decode";
	k->target = d->f.t;
	snprintf(k->args, sizeof k->args, "%s", args);
	k->threads = d->f.plan.threads;
	k->min_ctas = 1;
	k->cluster[0] = k->cluster[1] = k->cluster[2] = 1;
	k->smem = d->f.plan.smem_request;
	if (d->unnorm)
		snprintf(k->grid[0], sizeof k->grid[0], "%d", d->hblocks * d->f.ohalves);
	else
		snprintf(k->grid[0], sizeof k->grid[0], "%d*splits", d->hblocks * d->f.ohalves);
	snprintf(k->grid[1], sizeof k->grid[1], "s_q");
	snprintf(k->grid[2], sizeof k->grid[2], "batch");
	/* Q, O, the caches and O_partial move as 16-byte vectors (docs/ABI.md
	 * "decode"): libkrt refuses other addresses (align=16) */
	p = abi_ptr(k, "Q", DT_BF16, "Q[batch,s_q,Hq,%d]", d->f.d);
	p->align = 16;
	p = abi_ptr(k, "O", d->unnorm ? DT_F32 : DT_BF16, "O[batch,s_q,Hq,%d]", d->f.dv);
	p->align = 16;
	abi_ptr(k, "LSE", DT_F32, "LSE[batch,Hq,s_q]");
	if (d->unnorm)
		abi_ptr(k, "M", DT_F32, "M[batch,Hq,s_q]");
	for (int s = 0; s < d->nsrc; s++) {
		char n[32];
		snprintf(n, sizeof n, "KV%s", src_sfx[s]);
		p = abi_ptr(k, n, DT_U8, "%s[pages%s,%u]", n, src_sfx[s], d->page_bytes[s]);
		p->align = 16;
		if (d->paged[s]) {
			snprintf(n, sizeof n, "block_table%s", src_sfx[s]);
			abi_ptr(k, n, DT_S32, "%s[batch,max_pages%s]", n, src_sfx[s]);
			snprintf(n, sizeof n, "seqlens%s", src_sfx[s]);
			abi_ptr(k, n, DT_S32, "%s[batch]", n);
			continue;
		}
		snprintf(n, sizeof n, "indices%s", src_sfx[s]);
		abi_ptr(k, n, DT_S32, "%s[batch,s_q,%d]", n, d->topk[s]);
		if (d->has_len) {
			snprintf(n, sizeof n, "topk_length%s", src_sfx[s]);
			abi_ptr(k, n, DT_S32, "%s[batch,s_q]", n);
		}
	}
	if (d->sink)
		abi_ptr(k, "sink", DT_F32, "sink[Hq]");
	if (!d->unnorm) {
		p = abi_ptr(k, "O_partial", DT_BF16, "O_partial[batch,s_q,splits,Hq,%d]", d->f.dv);
		p->align = 16;
		abi_ptr(k, "LSE_partial", DT_F32, "LSE_partial[batch,s_q,splits,Hq]");
		abi_ptr(k, "counters", DT_S32, "counters[batch,s_q,%d]", d->hblocks);
	}
	abi_add(k, ABI_U32, "batch");
	abi_add(k, ABI_U32, "s_q");
	abi_add(k, ABI_U32, "capacity");
	if (d->nsrc > 1)
		abi_add(k, ABI_U32, "capacity_extra");
	for (int s = 0; s < d->nsrc; s++)
		if (d->paged[s])
			abi_add(k, ABI_U32, s ? "max_pages_extra" : "max_pages");
	abi_add(k, ABI_F32, "softmax_scale");
	if (!d->unnorm)
		abi_add(k, ABI_U32, "splits");
}

static int
decode_generate(const void *params, const char *args, Buf *out, KgErr *err)
{
	DecodeCfg d;
	FmhaRegs r = {0};
	KernelAbi k;
	Emit e;
	int rc;

	if (decode_configure(&d, params, err) < 0)
		return -1;
	emit_init(&e);
	rc = emit_prologue(&e, &d, &r, err);
	if (rc == 0)
		rc = d.f.t->fmha->body(&e, &d.f, &r, err);
	if (rc == 0 && e.oom)
		rc = kg_fail(err, "out of memory");
	if (rc == 0) {
		decode_abi(&d, args, &k);
		abi_module(&k, &e, out);
	}
	emit_free(&e);
	return rc;
}

/* The cache line of `kgen plan`: the token's bytes and what dequantizing
 * them costs in accuracy. */
static void
decode_plan_format(const DecodeFormat *fm, Buf *text)
{
	static const char *const sk[] = {"", "UE8M0 exponent", "fp32"};

	buf_printf(text, "cache           %s: %d NoPE %s + %d RoPE BF16 = %d bytes per token row", fm->name, fm->d_nope,
	           fm->nope_fp8 ? "E4M3" : "BF16", fm->d_rope, fm->row_bytes);
	if (fm->nscales)
		buf_printf(text, "; %d %s scale%s (one per %d NoPE values) %s", fm->nscales, sk[fm->scale],
		           fm->nscales > 1 ? "s" : "", fm->group,
		           fm->scale_at >= 0 ? "inside the row" : "in the page's tail");
	if (fm->scale_bytes)
		buf_printf(text, ", %d bytes per token", fm->scale_bytes);
	buf_printf(text, "; head_dim_qk %d, head_dim_v 512\n", fm->d_qk);
	buf_printf(text, "accuracy        %s\n",
	           !fm->nope_fp8 ? "the cache is BF16: keys as stored"
	           : fm->scale == DEC_SCALE_UE8M0
	               ? "E4M3 times a power of two is exact in BF16: keys as stored"
	               : "E4M3 times an fp32 scale rounds to BF16 (2^-9 relative per value; exact when the scale is a power of two)");
}

static int
decode_plan(const void *params, Buf *text, KgErr *err)
{
	DecodeCfg d;
	const char *q_how;

	if (decode_configure(&d, params, err) < 0)
		return -1;
	buf_printf(text, "kernel          %s\n", d.f.name);
	decode_plan_format(d.fmt, text);
	for (int s = 0; s < d.nsrc; s++)
		if (d.paged[s])
			buf_printf(text, "source %d        %s: paged (block table, the first seqlens[b] tokens), page %d tokens, %u bytes per page\n",
			           s, s ? "extra" : "main", d.ps[s], d.page_bytes[s]);
		else
			buf_printf(text, "source %d        %s: sparse, top-k %d, page %d tokens, %u bytes per page\n", s,
			           s ? "extra" : "main", d.topk[s], d.ps[s], d.page_bytes[s]);
	buf_printf(text, "heads           %d query heads over one KV head; %d head block%s of 64", d.hq, d.hblocks,
	           d.hblocks > 1 ? "s" : "");
	if (d.f.head_guard)
		buf_printf(text, " (rows of heads >= %d not stored)", d.hq);
	buf_printf(text, "\n");
	buf_printf(text, "dequant         %s\n", d.f.t->decode->how);
	if (d.nsparse)
		buf_printf(text, "keys            every warp compacts 32-entry chunks of %s into one list in index order (%d entries at most)%s; all sources share one softmax\n",
		           d.nsparse > 1 ? "both index lists" : "the index list", d.list_len,
		           d.nsparse < d.nsrc ? ", then the paged source's keys" : "");
	else
		buf_printf(text, "keys            the paged source%s' first seqlens[b] tokens%s; all sources share one softmax\n",
		           d.nsrc > 1 ? "s" : "", d.nsrc > 1 ? ", main then extra" : "");
	if (d.raw_slots) {
		uint32_t tile = 64u * (uint32_t)(d.fmt->row_bytes + (d.raw_flags_at > d.raw_scales_at ? 16 : 0));

		buf_printf(text, "gather          staged: once tile j is dequantized, the producer copies tile j+%d's token rows (cp.async.bulk, %d bytes each)%s into slot j%%%d of a %d-slot ring in smem (%u bytes each): %u-%u bytes in flight per CTA, none of them in registers; dequantized from smem into one K=V stage, so P·V of a tile follows its P\n",
		           DEC_RAW_SLOTS, d.fmt->row_bytes,
		           d.raw_flags_at > d.raw_scales_at ? " and the 16-byte pairs holding their tail scales" : "",
		           DEC_RAW_SLOTS, d.raw_slots, d.raw_bytes, tile, (uint32_t)DEC_RAW_SLOTS * tile);
	} else {
		buf_printf(text, "gather          registers: 16-byte ld.global.nc of one pass of tokens in flight, dequantized in registers into %d K=V stage%s\n",
		           d.f.stages, d.f.stages > 1 ? "s" : "");
	}
	if (d.nsparse < d.nsrc)
		buf_printf(text, "paged keys      per 64-key tile, 64 producer threads resolve each key to its token (block table, list) into a 3-tile ring in smem, a tile ahead\n");
	q_how = d.f.t->decode->issue_q ? "Q copied into its tile by the consumers' cp.async while the key list is compacted"
	                               : "Q's rows into L2 at the start";
	if (d.f.t->decode->l2_prefetch && d.raw_slots && !decode_prefetch_tiles(&d))
		buf_printf(text, "prefetch        %s; no token rows (the ring's copies are the paged source's earliest resolved keys)\n", q_how);
	else if (d.f.t->decode->l2_prefetch) {
		int ahead = decode_prefetch_tiles(&d), first = d.raw_slots ? DEC_RAW_SLOTS : 1;
		char why[96];

		if (d.nsparse < d.nsrc)
			snprintf(why, sizeof why, "a paged source's keys are resolved one tile ahead");
		else if (d.raw_slots)
			snprintf(why, sizeof why, "the key list is known: tiles %d..%d before the first, whose copies take tiles 0..%d",
			         first, first + ahead - 1, first - 1);
		else
			snprintf(why, sizeof why, "the key list is known: tiles 0..%d behind the first tile's loads", ahead);
		buf_printf(text, "prefetch        %s; once tile j is published, tile j+%d's token rows (and tail scales) into L2 (%s)\n",
		           q_how, first + ahead, why);
	} else
		buf_printf(text, "prefetch        %s; no token rows (the gatherer has no registers to spare for their addresses)\n", q_how);
	if (!d.unnorm)
		buf_printf(text, "combine         split-KV: %s\n",
		           d.f.t->decode->combine_wait
		               ? "every part that finds all parts started claims a slice of the heads, waits for the count and combines it; the last part combines the rest"
		               : "the last part to finish combines every head");
	buf_printf(text, "softmax         exp2(s*scale*log2(e) - m), scale a run-time argument%s; LSE natural log\n",
	           d.sink ? ", sink exp(sink[h]) added to the denominator" : "");
	d.f.t->fmha->describe(&d.f, text);
	if (d.unnorm)
		buf_printf(text, "output          unnormalized: O f32 = sum_j e^(s_j - M) V_j, LSE and M (the row max) for a merge; no split-KV\n");
	buf_printf(text, "grid            %d head block%s%s x splits (run time: split-KV parts, combined in head slices) x s_q x batch\n",
	           d.hblocks, d.hblocks > 1 ? "s" : "", d.f.ohalves > 1 ? " x 2 O-column halves" : "");
	if (d.f.t->decode->bound)
		d.f.t->decode->bound(&d, text);
	plan_print(&d.f.plan, text);
	return 0;
}

const Family family_decode = {
	"decode",
	"decode attention over a paged KV cache (bf16, fp8-token, fp8-v4, fp8-v32): sparse top-k indices or block tables, an extra (SWA) source, sink, LSE",
	decode_params,
	sizeof decode_params / sizeof decode_params[0],
	sizeof(DecodeParams),
	decode_generate,
	decode_plan,
};
