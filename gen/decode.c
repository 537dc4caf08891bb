#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "family.h"
#include "ops.h"

#define P(f) offsetof(DecodeParams, f)

/* Columns: name, d_qk, d_nope, d_rope, row bytes, NoPE values per scale,
 * scale bytes per token, page alignment. fp8-v4: 448 E4M3 + 64 BF16 RoPE
 * (576 bytes) per token; after a page's rows, 8 bytes per token: 7 UE8M0
 * exponents (one per 64 NoPE values) and a pad byte; a page's bytes round
 * up to a multiple of 576 (FlashMLA's MODEL1 layout, docs/ABI.md "decode"). */
const DecodeFormat decode_formats[] = {
	[DEC_FMT_FP8_V4] = {"fp8-v4", 512, 448, 64, 576, 64, 8, 576},
};

uint32_t
decode_page_bytes(const DecodeFormat *fmt, int ps)
{
	uint32_t b = (uint32_t)ps * (uint32_t)(fmt->row_bytes + fmt->scale_bytes);

	return (b + (uint32_t)fmt->page_align - 1) / (uint32_t)fmt->page_align * (uint32_t)fmt->page_align;
}

/* See family.h for the columns. */
static const ParamSpec decode_params[] = {
	{"target", PK_TARGET, P(target), "sm_90a,sm_100a", 0, 0, 0, "sm_90a",
	 "sm_90a: a producer warpgroup gathers and dequantizes K=V tiles to bf16 in smem; fmha's split-O consumers"},
	{"format", PK_ENUM, P(format), "fp8-v4", 0, 0, 0, "fp8-v4",
	 "KV cache format (docs/ABI.md \"decode\")"},
	{"heads-q", PK_INT, P(heads_q), NULL, 1, 128, 1, "64", "query heads sharing the one KV head"},
	{"topk", PK_INT, P(topk), NULL, 1, 4096, 1, "512", "main source: indices per query row"},
	{"page-size", PK_INT, P(page_size), NULL, 1, 4096, 1, "64", "main source: tokens per page"},
	{"topk-extra", PK_INT, P(topk_extra), NULL, 0, 4096, 1, "0",
	 "extra source (SWA window): indices per query row (0: no extra source)"},
	{"page-size-extra", PK_INT, P(page_size_extra), NULL, 1, 4096, 1, "256",
	 "extra source: tokens per page"},
	{"topk-length", PK_INT, P(topk_length), "0,1", 0, 0, 0, "0",
	 "per-row valid lengths of the index lists (topk_length tensors)"},
	{"sink", PK_INT, P(sink), "0,1", 0, 0, 0, "0", "per-head attention-sink logits join the denominator"},
};

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
	d->fmt = &decode_formats[p->format];
	d->hq = p->heads_q;
	d->hblocks = (d->hq + 63) / 64;
	d->nsrc = p->topk_extra ? 2 : 1;
	d->topk[0] = p->topk;
	d->ps[0] = p->page_size;
	d->topk[1] = p->topk_extra;
	d->ps[1] = p->page_size_extra;
	for (int s = 0; s < d->nsrc; s++)
		d->page_bytes[s] = decode_page_bytes(d->fmt, d->ps[s]);
	d->has_len = p->topk_length;
	d->sink = p->sink;
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
	f->producer_regs = ops->producer_regs;
	f->ext = d;
	if (layout_canonical(&f->lq, MAJOR_K, SWZ_128B, 16, 64, f->d, err) < 0 ||
	    layout_canonical(&f->lk, MAJOR_K, SWZ_128B, 16, f->bn, f->d, err) < 0 ||
	    layout_canonical(&f->lv, MAJOR_K, SWZ_128B, 16, f->bn, f->dv, err) < 0)
		return -1;
	f->q_bytes = f->lq.bytes;
	f->k_bytes = f->lk.bytes;
	f->v_bytes = f->lv.bytes;
	plan_init(&f->plan, f->t);
	f->r_q = plan_smem(&f->plan, "Q", f->q_bytes, 1024, 1);
	f->r_k = f->r_v = plan_smem(&f->plan, "K=V stages (bf16)", f->k_bytes, 1024, f->stages);
	if (f->t->fmha->plan(f, err) < 0)
		return -1;
	/* The split plan's estimate keeps 56 registers of row state beside S,
	 * half of O and P (232); ptxas allocates these consumers 168 in all
	 * (emitted/sm_90a/fmha_bf16_d512_h128kv1_kvshared_causal_pk64_*.ptxas.txt).
	 * The gathering producer needs more than a TMA thread, so decode holds
	 * the consumers to 24 beside S, O and P: 200 of the 208 left, and the
	 * ptxas suite to no spills. */
	f->plan.regs_need_max = f->bn / 2 + f->dv / 4 + f->bn / 4 + 24;
	d->r_list = plan_smem(&f->plan, "key list", 4u * (uint32_t)d->list_len, 16, 1);
	d->r_count = plan_smem(&f->plan, "key count", 16, 16, 1);
	snprintf(f->name, sizeof f->name, "decode_%s_h%d_k%dp%d", d->fmt->name, d->hq, d->topk[0], d->ps[0]);
	for (char *c = f->name; *c; c++)
		if (*c == '-')
			*c = '_';
	if (d->nsrc > 1) {
		size_t n = strlen(f->name);
		snprintf(f->name + n, sizeof f->name - n, "_x%dp%d", d->topk[1], d->ps[1]);
	}
	{
		size_t n = strlen(f->name);
		snprintf(f->name + n, sizeof f->name - n, "%s%s_%s", d->has_len ? "_len" : "",
		         d->sink ? "_sink" : "", f->t->tag);
	}
	return plan_check(&f->plan, err);
}

static const char *const src_sfx[2] = {"", "_extra"};

/* Warp 0 compacts the valid entries of both sources' index lists for this
 * query row into one key list in shared memory (source in bit 31): an
 * entry is valid when its position is below the row's length and its
 * index is in [0, capacity) (anything else is -1, skipped). A ballot per
 * 32 entries keeps the order, so the result does not depend on timing. */
static void
emit_compact(Emit *e, const DecodeCfg *d, const FmhaRegs *r, Reg qrow)
{
	Reg n = reg_new(e, RC_B32), i = reg_new(e, RC_B32), len = reg_new(e, RC_B32);
	Reg cap = reg_new(e, RC_B32), v = reg_new(e, RC_B32), t = reg_new(e, RC_B32);
	Reg bal = reg_new(e, RC_B32), lt = reg_new(e, RC_B32), a = reg_new(e, RC_B64);
	Reg o = reg_new(e, RC_B64), p = reg_new(e, RC_PRED), ok = reg_new(e, RC_PRED);
	Reg list = op_plan_smem(e, &d->f.plan, r->base, d->r_list);
	Reg cnt = op_plan_smem(e, &d->f.plan, r->base, d->r_count);
	char skip[48];

	emit_block(e, "decode.compact");
	label_new(e, skip, sizeof skip, "compact_done");
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->warp.s, p.s, skip);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, %%lanemask_lt;\n", n.s, lt.s);
	for (int s = 0; s < d->nsrc; s++) {
		char loop[48], done[48];

		label_new(e, loop, sizeof loop, "compact");
		label_new(e, done, sizeof done, "compact_src_done");
		emitf(e, "\tmov.u32 %s, %d;\n", len.s, d->topk[s]);
		if (d->has_len) {
			/* clamp the row's length to [0, topk] */
			emitf(e, "\tld.param.u64 %s, [p_topk_length%s];\n\tcvta.to.global.u64 %s, %s;\n", a.s,
			      src_sfx[s], a.s, a.s);
			emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, qrow.s, a.s, a.s, o.s);
			emitf(e, "\tld.global.nc.s32 %s, [%s];\n\tmax.s32 %s, %s, 0;\n\tmin.s32 %s, %s, %d;\n", len.s,
			      a.s, len.s, len.s, len.s, len.s, d->topk[s]);
		}
		emitf(e, "\tld.param.u32 %s, [p_capacity%s];\n", cap.s, src_sfx[s]);
		emitf(e, "\tld.param.u64 %s, [p_indices%s];\n\tcvta.to.global.u64 %s, %s;\n", a.s, src_sfx[s],
		      a.s, a.s);
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, qrow.s, 4 * d->topk[s], a.s,
		      a.s, o.s);
		emitf(e, "\tmov.u32 %s, 0;\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s bra %s;\n", i.s, p.s, len.s, p.s, done);
		emit_label(e, loop);
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tsetp.lt.u32 %s, %s, %s;\n\tmov.u32 %s, -1;\n", t.s, i.s,
		      r->lane.s, p.s, t.s, len.s, v.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, t.s, o.s, a.s, o.s);
		emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n", p.s, v.s, o.s);
		/* unsigned: -1 and every negative index fail */
		emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", ok.s, v.s, cap.s);
		emitf(e, "\tvote.sync.ballot.b32 %s, %s, 0xffffffff;\n", bal.s, ok.s);
		emitf(e, "\tand.b32 %s, %s, %s;\n\tpopc.b32 %s, %s;\n\tadd.u32 %s, %s, %s;\n", t.s, bal.s, lt.s,
		      t.s, t.s, t.s, t.s, n.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", t.s, t.s, list.s);
		if (s)
			emitf(e, "\tor.b32 %s, %s, 0x80000000;\n", v.s, v.s);
		emitf(e, "\t@%s st.shared.u32 [%s], %s;\n", ok.s, t.s, v.s);
		emitf(e, "\tpopc.b32 %s, %s;\n\tadd.u32 %s, %s, %s;\n", t.s, bal.s, n.s, n.s, t.s);
		emitf(e, "\tadd.u32 %s, %s, 32;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", i.s, i.s, p.s, i.s,
		      len.s, p.s, loop);
		emit_label(e, done);
	}
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@%s st.shared.u32 [%s], %s;\n", p.s, r->lane.s, p.s, cnt.s, n.s);
	emit_label(e, skip);
}

static int
emit_prologue(Emit *e, const DecodeCfg *d, FmhaRegs *r, KgErr *err)
{
	const FmhaCfg *f = &d->f;
	Reg raw = reg_new(e, RC_B32), qrow = reg_new(e, RC_B32), sc = reg_new(e, RC_F32);
	Reg cnt;

	memset(r, 0, sizeof *r);
	reg_array(e, RC_B32, &r->tid, 4);
	r->b = reg_new(e, RC_B32);
	r->h = reg_new(e, RC_B32);
	r->hk = reg_new(e, RC_B32);
	r->qs = reg_new(e, RC_B32);
	r->sq = reg_new(e, RC_B32);
	r->ks = reg_new(e, RC_B32);
	r->sk = reg_new(e, RC_B32);
	r->m0 = reg_new(e, RC_B32);
	r->total_q = reg_new(e, RC_B32);
	r->j0 = reg_new(e, RC_B32);
	r->n_lead = reg_new(e, RC_B32);
	r->n_full = reg_new(e, RC_B32);
	r->n_total = reg_new(e, RC_B32);
	r->o = reg_new(e, RC_B64);
	r->lse = reg_new(e, RC_B64);
	r->scale_log2 = reg_new(e, RC_F32);
	r->lse_q0 = reg_new(e, RC_B32);
	if (d->sink)
		r->sink = reg_new(e, RC_B64);

	emit_block(e, "decode.prologue");
	emitf(e, "\tmov.u32 %s, %%tid.x;\n\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n", r->tid.s,
	      r->warp.s, r->tid.s, r->lane.s, r->tid.s);
	/* CTA (x, y, z): head block x, query token y of sequence z */
	emitf(e, "\tmov.u32 %s, %%ctaid.z;\n\tmov.u32 %s, %%ctaid.x;\n\tshl.b32 %s, %s, 6;\n", r->b.s, r->h.s,
	      r->h.s, r->h.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 1;\n", r->hk.s, r->ks.s,
	      r->m0.s, r->sq.s);
	/* Q row qs = b·s_q + y; LSE [batch, Hq, s_q]: head stride s_q (total_q),
	 * head 0 at b·Hq·s_q + y */
	emitf(e, "\tld.param.u32 %s, [p_s_q];\n\tmov.u32 %s, %%ctaid.y;\n", r->total_q.s, qrow.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %s, %s;\n", r->lse_q0.s, r->b.s, d->hq,
	      r->lse_q0.s, r->lse_q0.s, r->total_q.s, qrow.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tmov.u32 %s, %s;\n", qrow.s, r->b.s, r->total_q.s, qrow.s,
	      r->qs.s, qrow.s);
	emitf(e, "\tld.param.f32 %s, [p_softmax_scale];\n\tmul.f32 %s, %s, 0f3FB8AA3B;\n", sc.s,
	      r->scale_log2.s, sc.s);
	emitf(e, "\tmov.u32 %s, kg_smem;\n\tadd.u32 %s, %s, 1023;\n\tand.b32 %s, %s, -1024;\n", raw.s,
	      r->base.s, raw.s, r->base.s, r->base.s);
	emitf(e, "\tld.param.u64 %s, [p_O];\n\tcvta.to.global.u64 %s, %s;\n", r->o.s, r->o.s, r->o.s);
	emitf(e, "\tld.param.u64 %s, [p_LSE];\n\tcvta.to.global.u64 %s, %s;\n", r->lse.s, r->lse.s, r->lse.s);
	if (d->sink)
		emitf(e, "\tld.param.u64 %s, [p_sink];\n\tcvta.to.global.u64 %s, %s;\n", r->sink.s, r->sink.s,
		      r->sink.s);
	op_init_barriers(e, &f->plan, r->base, r->tid, "decode.barrier_init");
	emit_compact(e, d, r, qrow);
	op_bar_sync(e, 0, f->plan.threads);
	emit_block(e, "decode.tile_counts");
	cnt = op_plan_smem(e, &f->plan, r->base, d->r_count);
	emitf(e, "\tld.shared.u32 %s, [%s];\n", r->sk.s, cnt.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", r->j0.s, r->n_lead.s);
	emitf(e, "\tshr.u32 %s, %s, 6;\n\tadd.u32 %s, %s, 63;\n\tshr.u32 %s, %s, 6;\n", r->n_full.s, r->sk.s,
	      r->n_total.s, r->sk.s, r->n_total.s, r->n_total.s);
	(void)err;
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
	snprintf(k->grid[0], sizeof k->grid[0], "%d", d->hblocks);
	snprintf(k->grid[1], sizeof k->grid[1], "s_q");
	snprintf(k->grid[2], sizeof k->grid[2], "batch");
	p = abi_add(k, ABI_PTR, "Q");
	p->dtype = DT_BF16;
	snprintf(p->tensor, sizeof p->tensor, "Q[batch,s_q,Hq,%d]", d->f.d);
	p = abi_add(k, ABI_PTR, "O");
	p->dtype = DT_BF16;
	snprintf(p->tensor, sizeof p->tensor, "O[batch,s_q,Hq,%d]", d->f.dv);
	p = abi_add(k, ABI_PTR, "LSE");
	p->dtype = DT_F32;
	snprintf(p->tensor, sizeof p->tensor, "LSE[batch,Hq,s_q]");
	for (int s = 0; s < d->nsrc; s++) {
		char n[32];
		snprintf(n, sizeof n, "KV%s", src_sfx[s]);
		p = abi_add(k, ABI_PTR, n);
		p->dtype = DT_U8;
		snprintf(p->tensor, sizeof p->tensor, "%s[pages%s,%u]", n, src_sfx[s], d->page_bytes[s]);
		snprintf(n, sizeof n, "indices%s", src_sfx[s]);
		p = abi_add(k, ABI_PTR, n);
		p->dtype = DT_S32;
		snprintf(p->tensor, sizeof p->tensor, "%s[batch,s_q,%d]", n, d->topk[s]);
		if (d->has_len) {
			snprintf(n, sizeof n, "topk_length%s", src_sfx[s]);
			p = abi_add(k, ABI_PTR, n);
			p->dtype = DT_S32;
			snprintf(p->tensor, sizeof p->tensor, "%s[batch,s_q]", n);
		}
	}
	if (d->sink) {
		p = abi_add(k, ABI_PTR, "sink");
		p->dtype = DT_F32;
		snprintf(p->tensor, sizeof p->tensor, "sink[Hq]");
	}
	abi_add(k, ABI_U32, "batch");
	abi_add(k, ABI_U32, "s_q");
	abi_add(k, ABI_U32, "capacity");
	if (d->nsrc > 1)
		abi_add(k, ABI_U32, "capacity_extra");
	abi_add(k, ABI_F32, "softmax_scale");
}

static int
decode_generate(const void *params, const char *args, Buf *out, KgErr *err)
{
	DecodeCfg d;
	FmhaRegs r;
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

static int
decode_plan(const void *params, Buf *text, KgErr *err)
{
	DecodeCfg d;

	if (decode_configure(&d, params, err) < 0)
		return -1;
	buf_printf(text, "kernel          %s\n", d.f.name);
	buf_printf(text, "cache           %s: %d NoPE E4M3 + %d RoPE BF16 = %d bytes per token row; %d-byte scale tail per token (%d UE8M0 exponents, one per %d NoPE values); head_dim_qk %d, head_dim_v %d\n",
	           d.fmt->name, d.fmt->d_nope, d.fmt->d_rope, d.fmt->row_bytes, d.fmt->scale_bytes,
	           d.fmt->d_nope / d.fmt->group, d.fmt->group, d.f.d, d.f.dv);
	for (int s = 0; s < d.nsrc; s++)
		buf_printf(text, "source %d        %s: top-k %d, page %d tokens, %u bytes per page\n", s,
		           s ? "extra" : "main", d.topk[s], d.ps[s], d.page_bytes[s]);
	buf_printf(text, "heads           %d query heads over one KV head; %d head block%s of 64 (rows of heads >= %d not stored)\n",
	           d.hq, d.hblocks, d.hblocks > 1 ? "s" : "", d.hq);
	buf_printf(text, "dequant         %s\n", d.f.t->decode->how);
	buf_printf(text, "keys            warp 0 compacts the valid indices of %s into one list (%d entries at most); all sources share one softmax\n",
	           d.nsrc > 1 ? "both sources" : "the source", d.list_len);
	buf_printf(text, "softmax         exp2(s*scale*log2(e) - m), scale a run-time argument%s; LSE natural log\n",
	           d.sink ? ", sink exp(sink[h]) added to the denominator" : "");
	d.f.t->fmha->describe(&d.f, text);
	buf_printf(text, "grid            %d x s_q x batch\n", d.hblocks);
	plan_print(&d.f.plan, text);
	return 0;
}

const Family family_decode = {
	"decode",
	"decode attention over a paged FP8 KV cache: sparse top-k indices, an extra (SWA) source, sink, LSE",
	decode_params,
	sizeof decode_params / sizeof decode_params[0],
	sizeof(DecodeParams),
	decode_generate,
	decode_plan,
};
