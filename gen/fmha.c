/* The FMHA family's shared half (fmha.h): the parameter table, the
 * configuration every target starts from, the shared-memory plan of Q/K/V,
 * the kernel name, the ABI, the prologue and the TMA producer. The target's
 * FmhaOps choose tiles, finish the plan and emit the consumers. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "family.h"
#include "fmha.h"
#include "ops.h"

#define P(f) offsetof(FmhaParams, f)

/* See family.h for the columns. */
static const ParamSpec fmha_params[] = {
	{"target", PK_TARGET, P(target), "sm_90a,sm_100a", 0, 0, 0, "sm_90a",
	 "sm_90a: wgmma SS for Q·K^T, RS for P·V (P in registers); sm_100a: tcgen05 S in TMEM, P·V with P in TMEM", NULL},
	{"head-dim", PK_INT, P(head_dim), "64,128,256,512", 0, 0, 0, "128", "D of Q and K", NULL},
	{"head-dim-v", PK_INT, P(head_dim_v), "0,64,128,256,512", 0, 0, 0, "0",
	 "D of V and O (0: same as head-dim)", NULL},
	{"heads-q", PK_INT, P(heads_q), NULL, 1, 256, 1, "16", "query heads (grid y: heads-q / heads per CTA)", NULL},
	{"heads-kv", PK_INT, P(heads_kv), NULL, 1, 256, 1, "16",
	 "key/value heads; heads-q/heads-kv query heads share one (GQA, MQA)", NULL},
	{"kv-shared", PK_INT, P(kv_shared), "0,1", 0, 0, 0, "0",
	 "K and V are one tensor: one TMA load feeds both operands", NULL},
	{"mask", PK_ENUM, P(mask), FMHA_MASKS, 0, 0, 0, "none",
	 "causal: query i sees keys j <= i + Sk - Sq (bottom-right); window: sliding", NULL},
	{"window-left", PK_INT, P(window_left), NULL, 0, 1 << 20, 1, "128",
	 "window: keys j >= i + Sk - Sq - window-left", "mask=window"},
	{"window-right", PK_INT, P(window_right), NULL, 0, 1 << 20, 1, "0",
	 "window: keys j <= i + Sk - Sq + window-right", "mask=window"},
	{"lse", PK_INT, P(lse), "0,1", 0, 0, 0, "0", "also write LSE (natural log, f32)", NULL},
	{"tile-m", PK_INT, P(tile_m), "0,64,128,192,256", 0, 0, 0, "0",
	 "Q-tile rows per CTA, query rows x packed heads (0: by target and head-dim; sm_90a 64/128/192, sm_100a 128/256)", NULL},
	{"tile-n", PK_INT, P(tile_n), NULL, 0, 256, 16, "0", "keys per KV tile (0: by target and head-dim)", NULL},
	{"stages", PK_INT, P(stages), "0,1,2,3,4", 0, 0, 0, "0",
	 "KV ring depth (0: by target; sm_90a 3 with kv-shared, else 2, split O 2/1; sm_100a as many as fit)", NULL},
	{"pack-heads", PK_INT, P(pack_heads), "1,2,4,8,16,32,64,128", 0, 0, 0, "1",
	 "query heads of one KV head packed into a Q tile's rows (decode, MQA: fills the tile when seqlen-q is short)", NULL},
	{"exp2-fma", PK_INT, P(exp2_fma), NULL, -1, 8, 1, "-1",
	 "of every 8 softmax exponentials, how many an FMA-pipe polynomial computes instead of MUFU ex2 (-1: by target and head-dim)", NULL},
	{"s-ahead", PK_INT, P(s_ahead), NULL, -1, 1, 1, "-1",
	 "split O (head-dim 512): 1 issues S_j before P_{j-1}'s hand-off, 0 after it (-1: 0, measured faster; docs/estimate.md)", "target=sm_90a"},
	{"kv-multicast", PK_INT, P(kv_multicast), NULL, -1, 1, 1, "-1",
	 "split O with separate K and V (head-dim 512): 1 pairs adjacent 64-row CTAs in a cluster, each loading half of every K/V tile for both (-1: 0, measured slower; docs/estimate.md)", "target=sm_90a"},
	{"dtype", PK_DTYPE, P(dtype), "bf16,fp16", 0, 0, 0, "bf16", "Q, K, V, O element type", NULL},
};

int
fmha_plan_kernel(FmhaCfg *f, KgErr *err)
{
	/* Q, K, V land as 128-byte swizzled rows of 64 elements (one TMA box
	 * per 64 columns), read by K-major (Q, K) and MN-major (V) descriptors. */
	if (layout_canonical(&f->lq, MAJOR_K, SWZ_128B, 8 * f->esz, f->q_rows, f->d, err) < 0 ||
	    layout_canonical(&f->lk, MAJOR_K, SWZ_128B, 8 * f->esz, f->pair ? f->bn / 2 : f->bn, f->d, err) < 0 ||
	    layout_canonical(&f->lv, MAJOR_K, SWZ_128B, 8 * f->esz, f->bn, f->dvc, err) < 0)
		return -1;
	f->q_bytes = f->lq.bytes * (uint32_t)f->qblocks;
	f->k_bytes = f->lk.bytes;
	f->v_bytes = f->lv.bytes;

	plan_init(&f->plan, f->t);
	f->r_q = plan_smem(&f->plan, "Q", f->q_bytes, 1024, 1);
	f->r_k = plan_smem(&f->plan, fmha_kv_one(f) ? "K=V stages" : "K stages", f->k_bytes, 1024, f->stages);
	f->r_v = fmha_kv_one(f) ? f->r_k : plan_smem(&f->plan, "V stages", f->v_bytes, 1024, f->stages);
	/* the barriers the shared producer (fmha_emit_producer) completes, the
	 * first of every target's barriers */
	{
		/* a pair: both producers arrive on rank 0's (docs/cta-pair.md) */
		int n = 1 + f->pair;
		const char *who = f->pair ? "both producers: expect_tx on rank 0's + TMA" : "producer: expect_tx + TMA";
		f->b_q = plan_barrier(&f->plan, "Q full", 1, n, f->q_bytes * (uint32_t)n, who);
		f->b_k = plan_barrier(&f->plan, fmha_kv_one(f) ? "K=V full" : "K full", f->stages, n,
		                      f->k_bytes * (uint32_t)n, who);
		f->b_v = fmha_kv_one(f) ? f->b_k
		                      : plan_barrier(&f->plan, "V full", f->stages, n, f->v_bytes * (uint32_t)n, who);
	}
	return f->t->fmha->plan(f, err);
}

int
fmha_configure(FmhaCfg *f, const FmhaParams *p, KgErr *err)
{
	memset(f, 0, sizeof *f);
	f->t = &targets[p->target];
	if (!f->t->fmha)
		return kg_fail(err, "--target=%s: fmha is not generated for this target yet", f->t->name);
	f->d = p->head_dim;
	f->dv = p->head_dim_v ? p->head_dim_v : p->head_dim;
	f->hq = p->heads_q;
	f->hkv = p->heads_kv;
	if (f->hq % f->hkv)
		return kg_fail(err, "--heads-q=%d --heads-kv=%d: heads-q must be a multiple of heads-kv",
		               f->hq, f->hkv);
	f->group = f->hq / f->hkv;
	f->kv_shared = p->kv_shared;
	if (f->kv_shared && f->dv != f->d)
		return kg_fail(err, "--kv-shared=1 with --head-dim=%d --head-dim-v=%d: one tensor serves K and V, so the dims must match",
		               f->d, f->dv);
	f->mask = p->mask;
	f->wl = f->mask == MASK_WINDOW ? p->window_left : 1 << 30;
	f->wr = f->mask == MASK_WINDOW ? p->window_right : 0;
	f->lse = p->lse;
	f->in = (DType)p->dtype;
	f->ohalves = 1;
	f->e2f = p->exp2_fma < 0 ? 0 : p->exp2_fma;
	if (f->t->fmha->tiles(f, p, err) < 0)
		return -1;
	f->dvc = f->pair ? f->dv / 2 : f->dv / f->ohalves;
	f->pack = p->pack_heads;
	if (f->q_rows % f->pack)
		return kg_fail(err, "--pack-heads=%d: a Q tile of %d rows holds whole query rows of the packed heads, so pack-heads must divide %d",
		               f->pack, f->q_rows, f->q_rows);
	f->htiles = f->pack > 1 ? f->qblocks : 1;
	f->hcta = f->pack * f->htiles;
	f->rows = f->qblocks / f->htiles * (f->q_rows / f->pack) * (1 + f->pair + f->mcast);
	if (f->group % f->hcta)
		return kg_fail(err, "--pack-heads=%d with %d Q tile%s per CTA: the CTA's %d query heads must share one KV head, so %d must divide the group of %d (heads-q/heads-kv)",
		               f->pack, f->qblocks, f->qblocks > 1 ? "s" : "", f->hcta, f->hcta, f->group);
	f->esz = dtype_bits(f->in) / 8;
	if (fmha_plan_kernel(f, err) < 0)
		return -1;
	{
		Buf n = {0};
		buf_printf(&n, "fmha_%s_d%d", dtype_name(f->in), f->d);
		if (f->dv != f->d)
			buf_printf(&n, "v%d", f->dv);
		buf_printf(&n, "_h%dkv%d%s%s", f->hq, f->hkv, f->kv_shared ? "_kvshared" : "",
		           f->mask == MASK_CAUSAL ? "_causal" : "");
		if (f->mask == MASK_WINDOW)
			buf_printf(&n, "_win%dr%d", f->wl, f->wr);
		if (f->pack > 1)
			buf_printf(&n, "_pk%d", f->pack);
		if (f->e2f)
			buf_printf(&n, "_e%d", f->e2f);
		if (f->s_ahead)
			buf_printf(&n, "_sa");
		if (f->mcast)
			buf_printf(&n, "_mc");
		buf_printf(&n, "%s%s_m%dn%d_s%d_%s", f->lse ? "_lse" : "", f->pair ? "_pair" : "", f->bm, f->bn,
		           f->stages, f->t->tag);
		snprintf(f->name, sizeof f->name, "%s", n.p ? n.p : "fmha");
		buf_free(&n);
	}
	return plan_check(&f->plan, err);
}

int
fmha_clustered(const FmhaCfg *f)
{
	return f->pair || f->mcast;
}

int
fmha_kv_one(const FmhaCfg *f)
{
	return f->kv_shared && !f->pair;
}

int
fmha_has_unmasked_tiles(const FmhaCfg *f)
{
	return f->mask != MASK_WINDOW || f->wl + f->wr >= f->rows + f->bn - 2;
}

/* The boxes of one operand tile: 64 columns each, rows [row, row+rows). */
static int
emit_tile_loads(Emit *e, KgErr *err, const TileLayout *l, int cols, Reg dst0, Reg tmap, Reg head,
                Reg row, Reg bar, const Reg *col0, int group)
{
	Reg x = reg_new(e, RC_B32), dst = reg_new(e, RC_B32);
	Reg c[3] = {x, head, row};

	for (int s = 0; s < cols / 64; s++) {
		if (col0)
			emitf(e, "\tadd.u32 %s, %s, %d;\n", x.s, col0->s, 64 * s);
		else
			emitf(e, "\tmov.u32 %s, %d;\n", x.s, 64 * s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n", dst.s, dst0.s, layout_offset(l, 0, 64 * s));
		if ((group > 1 ? op_tma_load_group(e, err, dst, tmap, c, 3, bar, group)
		               : op_tma_load(e, err, dst, tmap, c, 3, bar)) < 0)
			return -1;
	}
	return 0;
}

/* mcast: this CTA's half of an operand tile's 64-column boxes (rank h:
 * boxes h·n/2..), each multicast to both CTAs of the cluster at the same
 * offset, completing on the full barrier at the same offset in each */
static int
emit_mcast_loads(Emit *e, KgErr *err, const FmhaRegs *r, const TileLayout *l, int cols, Reg dst0,
                 Reg tmap, Reg row, Reg bar)
{
	Reg x = reg_new(e, RC_B32), dst = reg_new(e, RC_B32), mask = reg_new(e, RC_B16);
	Reg c[3] = {x, r->hk, row};
	int half = cols / 2;

	emitf(e, "\tmov.b16 %s, 3;\n", mask.s);
	for (int s = 0; s < half / 64; s++) {
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %d;\n", x.s, r->rank.s, half, 64 * s);
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", dst.s, r->rank.s, layout_offset(l, 0, half), dst0.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n", dst.s, dst.s, layout_offset(l, 0, 64 * s));
		if (op_tma_load_mcast(e, err, dst, tmap, c, 3, bar, mask, 1) < 0)
			return -1;
	}
	return 0;
}

/* A pair's V stage (pair64): of each chunk of min(dv, 256) columns (one
 * P·V MMA's N), this CTA's half, columns rank·N/2.. of the chunk, at the
 * stage's columns c·N/2.. (docs/cta-pair.md) */
static int
emit_pair_v_loads(Emit *e, KgErr *err, const FmhaCfg *f, const FmhaRegs *r, Reg vd, Reg row, Reg bar)
{
	int n = f->dv < 256 ? f->dv : 256;
	/* with K=V the tensor map's box is K's, bn/2 rows: two per tile */
	int rows = f->kv_shared ? f->bn / 2 : f->bn;
	Reg col = reg_new(e, RC_B32), dst = reg_new(e, RC_B32), vr = row;

	if (rows < f->bn)
		vr = reg_new(e, RC_B32);
	for (int h = 0; h < f->bn / rows; h++) {
		if (rows < f->bn)
			emitf(e, "\tadd.u32 %s, %s, %d;\n", vr.s, row.s, h * rows);
		for (int c = 0; c < f->dv / n; c++) {
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %d;\n", col.s, r->rank.s, n / 2, c * n);
			emitf(e, "\tadd.u32 %s, %s, %u;\n", dst.s, vd.s, layout_offset(&f->lv, h * rows, c * n / 2));
			if (emit_tile_loads(e, err, &f->lv, n / 2, dst, r->tv, r->hk, vr, bar, &col, 2) < 0)
				return -1;
		}
	}
	return 0;
}

/* pair: the address of this CTA's barrier `b0` in rank 0 */
static Reg
lead_bar(Emit *e, const FmhaCfg *f, Reg b0)
{
	Reg lead;

	if (!f->pair)
		return b0;
	lead = reg_new(e, RC_B32);
	emitf(e, "\tmapa.shared::cluster.u32 %s, %s, 0;\n", lead.s, b0.s);
	return lead;
}

int
fmha_emit_producer(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	Reg stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32), j = reg_new(e, RC_B32);
	Reg row = reg_new(e, RC_B32), par = reg_new(e, RC_B32), bar = reg_new(e, RC_B32);
	Reg kd = reg_new(e, RC_B32), vd = reg_new(e, RC_B32), p = reg_new(e, RC_PRED);
	Reg q0, k0, v0, qbar, kbar0, vbar0, kfree0, vfree0;
	char loop[48], done[48];

	emit_block(e, "fmha.producer");
	q0 = op_plan_smem(e, &f->plan, r->base, f->r_q);
	k0 = op_plan_smem(e, &f->plan, r->base, f->r_k);
	v0 = op_plan_smem(e, &f->plan, r->base, f->r_v);
	qbar = op_plan_bar(e, &f->plan, r->base, f->b_q);
	kbar0 = op_plan_bar(e, &f->plan, r->base, f->b_k);
	vbar0 = op_plan_bar(e, &f->plan, r->base, f->b_v);
	kfree0 = op_plan_bar(e, &f->plan, r->base, f->b_kfree);
	vfree0 = op_plan_bar(e, &f->plan, r->base, f->b_vfree);
	/* a pair's loads complete on rank 0's full barriers, which its MMA
	 * thread waits on (docs/cta-pair.md) */
	qbar = lead_bar(e, f, qbar);
	kbar0 = lead_bar(e, f, kbar0);
	if (!fmha_kv_one(f))
		vbar0 = lead_bar(e, f, vbar0);
	/* Q once: each Q tile's rows, all head-dim columns */
	if (f->pair)
		op_mbar_arrive_expect_tx_cluster(e, qbar, f->q_bytes);
	else
		op_mbar_arrive_expect_tx(e, qbar, f->q_bytes);
	for (int w = 0; w < f->qblocks; w++) {
		Reg dst = reg_new(e, RC_B32), head = r->h;
		emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %d;\n", row.s, r->qs.s, r->m0.s, row.s,
		      row.s, w / f->htiles * (f->q_rows / f->pack));
		if (f->pair) /* rank 1: the pair's next query rows (packed: of the same heads) */
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", row.s, r->rank.s, f->q_rows / f->pack, row.s);
		if (w % f->htiles) {
			head = reg_new(e, RC_B32);
			emitf(e, "\tadd.u32 %s, %s, %d;\n", head.s, r->h.s, w % f->htiles * f->pack);
		}
		emitf(e, "\tadd.u32 %s, %s, %u;\n", dst.s, q0.s, (uint32_t)w * f->lq.bytes);
		if (emit_tile_loads(e, err, &f->lq, f->d, dst, r->tq, head, row, qbar, NULL, 1 + f->pair) < 0)
			return -1;
	}
	label_new(e, loop, sizeof loop, "produce");
	label_new(e, done, sizeof done, "produce_done");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, %s;\n", stage.s, phase.s, j.s, r->j0.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->n_total.s, p.s, done);
	emit_label(e, loop);
	/* K and V have their own free barriers: K_j's slot frees once S_j is
	 * done, V_j's once P_j·V_j is, a tile later (the consumers overlap
	 * S_{j+1} with P_j·V_j) */
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n\txor.b32 %s, %s, 1;\n", bar.s, stage.s, kfree0.s,
	      f->plan.bars[f->b_kfree].name, par.s, phase.s);
	if (op_mbar_wait(e, err, bar, par.s) < 0)
		return -1;
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", row.s, j.s, f->bn, r->ks.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", bar.s, stage.s, kbar0.s, f->plan.bars[f->b_k].name);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", kd.s, stage.s, f->k_bytes, k0.s);
	/* K first, on its own barrier, so Q·K^T can start before V lands */
	if (f->pair) {
		/* this CTA's bn/2 keys of the tile */
		Reg kr = reg_new(e, RC_B32);
		op_mbar_arrive_expect_tx_cluster(e, bar, f->k_bytes);
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", kr.s, r->rank.s, f->bn / 2, row.s);
		if (emit_tile_loads(e, err, &f->lk, f->d, kd, r->tk, r->hk, kr, bar, NULL, 2) < 0)
			return -1;
	} else if (f->mcast) {
		/* the whole tile lands here: half from this CTA, half from the peer */
		op_mbar_arrive_expect_tx(e, bar, f->k_bytes);
		if (emit_mcast_loads(e, err, r, &f->lk, f->d, kd, r->tk, row, bar) < 0)
			return -1;
	} else {
		op_mbar_arrive_expect_tx(e, bar, f->k_bytes);
		if (emit_tile_loads(e, err, &f->lk, f->d, kd, r->tk, r->hk, row, bar, NULL, 1) < 0)
			return -1;
	}
	if (!fmha_kv_one(f)) {
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", bar.s, stage.s, vfree0.s,
		      f->plan.bars[f->b_vfree].name);
		if (op_mbar_wait(e, err, bar, par.s) < 0)
			return -1;
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", bar.s, stage.s, vbar0.s, f->plan.bars[f->b_v].name);
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", vd.s, stage.s, f->v_bytes, v0.s);
		if (f->pair) {
			op_mbar_arrive_expect_tx_cluster(e, bar, f->v_bytes);
			if (emit_pair_v_loads(e, err, f, r, vd, row, bar) < 0)
				return -1;
		} else if (f->mcast) {
			op_mbar_arrive_expect_tx(e, bar, f->v_bytes);
			if (emit_mcast_loads(e, err, r, &f->lv, f->dvc, vd, r->tv, row, bar) < 0)
				return -1;
		} else {
			op_mbar_arrive_expect_tx(e, bar, f->v_bytes);
			if (emit_tile_loads(e, err, &f->lv, f->dvc, vd, r->tv, r->hk, row, bar,
			                    f->ohalves > 1 ? &r->vcol : NULL, 1) < 0)
				return -1;
		}
	}
	op_ring_advance(e, stage, phase, f->stages, p);
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, p.s, j.s,
	      r->n_total.s, p.s, loop);
	emit_label(e, done);
	return 0;
}

Reg
fmha_emit_scale_log2(Emit *e)
{
	Reg sc = reg_new(e, RC_F32);

	/* 0f3FB8AA3B: log2(e) rounded to f32 */
	emitf(e, "\tld.param.f32 %s, [p_softmax_scale];\n\tmul.f32 %s, %s, 0f3FB8AA3B;\n", sc.s, sc.s, sc.s);
	return sc;
}

Reg
fmha_emit_row_head(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg trow, Reg rowq)
{
	Reg head, t;

	if (f->pack == 1) {
		emitf(e, "\tadd.u32 %s, %s, %s;\n", rowq.s, trow.s, r->m0.s);
		return r->h;
	}
	/* packed (htiles = qblocks, every tile over the same query rows):
	 * query row m0 + t/pack, head h + pack·w + t%pack; a pair's rank w
	 * instead takes query rows w·q_rows/pack.. of the same heads. pack and
	 * q_rows are powers of two */
	head = reg_new(e, RC_B32);
	t = reg_new(e, RC_B32);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tshr.u32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n", rowq.s, trow.s,
	      f->q_rows - 1, rowq.s, rowq.s, log2_ceil(f->pack), rowq.s, rowq.s, r->m0.s);
	if (f->pair) {
		emitf(e, "\tshr.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, trow.s, log2_ceil(f->q_rows),
		      rowq.s, t.s, f->q_rows / f->pack, rowq.s);
		emitf(e, "\tand.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n", head.s, trow.s, f->pack - 1, head.s, head.s,
		      r->h.s);
		return head;
	}
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tshl.b32 %s, %s, %d;\n", t.s, trow.s, log2_ceil(f->q_rows), t.s,
	      t.s, log2_ceil(f->pack));
	emitf(e, "\tand.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", head.s, trow.s,
	      f->pack - 1, head.s, head.s, t.s, head.s, head.s, r->h.s);
	return head;
}

static void
ld_seqlen(Emit *e, const char *param, Reg b, Reg start, Reg len)
{
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), end = reg_new(e, RC_B32);

	op_param_global(e, a, "%s", param);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, b.s, a.s, a.s, o.s);
	emitf(e, "\tld.global.nc.u32 %s, [%s];\n\tld.global.nc.u32 %s, [%s+4];\n", start.s, a.s, end.s, a.s);
	emitf(e, "\tsub.u32 %s, %s, %s;\n", len.s, end.s, start.s);
}

/* The KV tiles this CTA visits and which need a mask. Rows m0..m0+rows-1,
 * off = Sk - Sq: row i sees keys [i+off-wl, i+off+wr] (causal: wl = inf,
 * wr = 0; none: all keys), clipped to [0, Sk). The first row bounds the
 * lowest tile and the unmasked right end, the last row the highest tile
 * and the unmasked left end. */
static void
emit_tile_counts(Emit *e, const FmhaCfg *f, FmhaRegs *r)
{
	Reg off = reg_new(e, RC_B32), t = reg_new(e, RC_B32);

	emit_block(e, "fmha.tile_counts");
	if (f->mask == MASK_NONE) {
		emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", r->j0.s, r->n_lead.s);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", r->n_total.s, r->sk.s, f->bn - 1,
		      r->n_total.s, r->n_total.s, f->bn);
		emitf(e, "\tdiv.u32 %s, %s, %d;\n", r->n_full.s, r->sk.s, f->bn);
		return;
	}
	emitf(e, "\tsub.s32 %s, %s, %s;\n\tadd.s32 %s, %s, %s;\n", off.s, r->sk.s, r->sq.s, off.s, off.s,
	      r->m0.s);
	/* n_total = cdiv(clamp(off + rows + wr, 0, Sk), bn) */
	emitf(e, "\tadd.s32 %s, %s, %d;\n\tmin.s32 %s, %s, %s;\n\tmax.s32 %s, %s, 0;\n", t.s, off.s,
	      f->rows + f->wr, t.s, t.s, r->sk.s, t.s, t.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", r->n_total.s, t.s, f->bn - 1,
	      r->n_total.s, r->n_total.s, f->bn);
	/* n_full = clamp(off + 1 + wr, 0, Sk) / bn */
	emitf(e, "\tadd.s32 %s, %s, %d;\n\tmin.s32 %s, %s, %s;\n\tmax.s32 %s, %s, 0;\n", t.s, off.s,
	      1 + f->wr, t.s, t.s, r->sk.s, t.s, t.s);
	emitf(e, "\tdiv.u32 %s, %s, %d;\n", r->n_full.s, t.s, f->bn);
	if (f->mask == MASK_CAUSAL) {
		emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", r->j0.s, r->n_lead.s);
		return;
	}
	/* j0 = max(off - wl, 0) / bn; n_lead = cdiv(max(off + rows - 1 - wl, 0), bn) */
	emitf(e, "\tsub.s32 %s, %s, %d;\n\tmax.s32 %s, %s, 0;\n\tdiv.u32 %s, %s, %d;\n", t.s, off.s, f->wl,
	      t.s, t.s, r->j0.s, t.s, f->bn);
	emitf(e, "\tadd.s32 %s, %s, %d;\n\tmax.s32 %s, %s, 0;\n", t.s, off.s, f->rows - 1 - f->wl, t.s, t.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", r->n_lead.s, t.s, f->bn - 1, r->n_lead.s,
	      r->n_lead.s, f->bn);
	/* the left edge can reach past the last tile when the window is wide
	 * against a short sequence: never wait for a tile that is not loaded */
	emitf(e, "\tmin.u32 %s, %s, %s;\n", r->n_lead.s, r->n_lead.s, r->n_total.s);
}

/* The registers every attention prologue sets (thread, batch, heads, query
 * and key ranges, tile counts), allocated in one order for fmha and decode. */
void
fmha_regs_new(Emit *e, FmhaRegs *r)
{
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
}

static int
emit_prologue(Emit *e, const FmhaCfg *f, FmhaRegs *r, KgErr *err)
{
	Reg raw = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), nb = reg_new(e, RC_B32);
	Reg t = reg_new(e, RC_B32);

	fmha_regs_new(e, r);
	if (f->ohalves > 1)
		r->vcol = reg_new(e, RC_B32);
	if (f->pair || f->mcast)
		r->rank = reg_new(e, RC_B32);
	r->tq = reg_new(e, RC_B64);
	r->tk = reg_new(e, RC_B64);
	r->tv = reg_new(e, RC_B64);
	r->o = reg_new(e, RC_B64);
	r->lse = reg_new(e, RC_B64);

	emit_block(e, "fmha.prologue");
	emitf(e, "\tmov.u32 %s, %%tid.x;\n\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n", r->tid.s,
	      r->warp.s, r->tid.s, r->lane.s, r->tid.s);
	emitf(e, "\tmov.u32 %s, %%ctaid.z;\n\tmov.u32 %s, %%ctaid.y;\n", r->b.s, r->h.s);
	if (f->hcta > 1)
		emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", r->h.s, r->h.s, f->hcta);
	emitf(e, "\tdiv.u32 %s, %s, %d;\n", r->hk.s, r->h.s, f->group);
	ld_seqlen(e, "cu_seqlens_q", r->b, r->qs, r->sq);
	ld_seqlen(e, "cu_seqlens_k", r->b, r->ks, r->sk);
	emitf(e, "\tmov.u32 %s, %%ctaid.x;\n", t.s);
	if (f->ohalves > 1) {
		/* the two CTAs of a row block are adjacent in x: even ones take
		 * O columns [0, dvc), odd ones [dvc, dv) */
		emitf(e, "\tand.b32 %s, %s, 1;\n\tmul.lo.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 1;\n", r->vcol.s,
		      t.s, r->vcol.s, r->vcol.s, f->dvc, t.s, t.s);
	}
	if (f->pair || f->mcast)
		/* a cluster of two CTAs adjacent in x per row block of 128 */
		emitf(e, "\tmov.u32 %s, %%cluster_ctarank;\n\tshr.u32 %s, %s, 1;\n", r->rank.s, t.s, t.s);
	if (f->mask == MASK_CAUSAL) {
		/* causal work grows with the query tile: launch the longest first
		 * so the short ones fill the last wave */
		Reg n = reg_new(e, RC_B32);
		emitf(e, "\tmov.u32 %s, %%nctaid.x;\n", n.s);
		if (f->ohalves > 1 || f->pair || f->mcast)
			emitf(e, "\tshr.u32 %s, %s, 1;\n", n.s, n.s);
		emitf(e, "\tsub.u32 %s, %s, 1;\n\tsub.u32 %s, %s, %s;\n", n.s, n.s, t.s, n.s, t.s);
	}
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", r->m0.s, t.s, f->rows);
	/* The grid covers the longest sequence; shorter ones leave whole CTAs
	 * idle. Uniform across the CTA, before any barrier. */
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s ret;\n", p.s, r->m0.s, r->sq.s, p.s);
	{
		Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64);
		emitf(e, "\tld.param.u32 %s, [p_batch];\n", nb.s);
		op_param_global(e, a, "cu_seqlens_q");
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o.s, nb.s, a.s, a.s, o.s);
		emitf(e, "\tld.global.nc.u32 %s, [%s];\n", r->total_q.s, a.s);
	}
	emit_tile_counts(e, f, r);
	/* mcast: both CTAs visit the tiles of the cluster's 128 rows (every
	 * load feeds both); each then takes its own 64 */
	if (f->mcast)
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", r->m0.s, r->rank.s, f->q_rows, r->m0.s);
	emitf(e, "\tmov.u32 %s, kg_smem;\n\tadd.u32 %s, %s, 1023;\n\tand.b32 %s, %s, -1024;\n", raw.s,
	      r->base.s, raw.s, r->base.s, r->base.s);
	op_param_addr(e, r->tq, "p_Q");
	op_param_addr(e, r->tk, "p_K");
	op_param_addr(e, r->tv, f->kv_shared ? "p_K" : "p_V");
	op_param_global(e, r->o, "O");
	if (f->lse)
		op_param_global(e, r->lse, "LSE");

	op_init_barriers(e, &f->plan, r->base, r->tid, "fmha.barrier_init");
	if (f->t->fmha->setup && f->t->fmha->setup(e, f, r, err) < 0)
		return -1;
	if (f->pair || f->mcast)
		/* the peer uses rank 0's barriers and both share the TMEM
		 * columns (mcast: the peer's loads and arrivals reach this CTA's
		 * barriers): inits and allocation published cluster-wide (PTX ISA
		 * §9.7.13.2) */
		op_cluster_sync(e);
	else
		op_bar_sync_why(e, 0, f->plan.threads, "CTA: mbarrier inits and setup visible");
	return 0;
}

static void
fmha_abi(const FmhaCfg *f, const char *args, KernelAbi *k)
{
	AbiParam *p;
	char mask[16];
	static const char *const names[3] = {"Q", "K", "V"};

	memset(k, 0, sizeof *k);
	snprintf(k->kernel, sizeof k->kernel, "%s", f->name);
	k->family = "fmha";
	k->target = f->t;
	snprintf(k->args, sizeof k->args, "%s", args);
	k->threads = f->plan.threads;
	k->min_ctas = 1;
	k->cluster[0] = k->cluster[1] = k->cluster[2] = 1;
	k->cluster[0] += f->pair + f->mcast;
	k->smem = f->plan.smem_request;
	snprintf(k->grid[0], sizeof k->grid[0], "cdiv(max_seqlen_q,%d)%s", f->rows,
	         f->ohalves > 1 || f->pair || f->mcast ? "*2" : "");
	snprintf(k->grid[1], sizeof k->grid[1], "%d", f->hq / f->hcta);
	snprintf(k->grid[2], sizeof k->grid[2], "batch");
	for (int i = 0; i < (f->kv_shared ? 2 : 3); i++) {
		p = abi_add(k, ABI_TMAP, names[i]);
		p->dtype = f->in;
		p->rank = 3;
		p->box[0] = 64;
		p->box[1] = i == 0 ? f->pack : 1;
		/* a pair's CTA loads half of each K tile's keys */
		p->box[2] = i == 0 ? f->q_rows / f->pack : i == 1 && f->pair ? f->bn / 2 : f->bn;
		p->swz = SWZ_128B;
		snprintf(p->tensor, sizeof p->tensor, "%s[total_%s,%s,%s]", names[i], i ? "k" : "q",
		         i ? "Hkv" : "Hq", i == 2 ? "Dv" : "D");
	}
	abi_ptr(k, "O", f->in, "O[total_q,Hq,Dv]");
	if (f->lse)
		abi_ptr(k, "LSE", DT_F32, "LSE[Hq,total_q]");
	abi_ptr(k, "cu_seqlens_q", DT_S32, "cu_seqlens_q[batch+1]");
	abi_ptr(k, "cu_seqlens_k", DT_S32, "cu_seqlens_k[batch+1]");
	abi_add(k, ABI_U32, "max_seqlen_q");
	abi_add(k, ABI_U32, "batch");
	abi_add(k, ABI_F32, "softmax_scale");
	abi_shape(k, "Hq", "%d", f->hq);
	abi_shape(k, "Hkv", "%d", f->hkv);
	abi_shape(k, "D", "%d", f->d);
	abi_shape(k, "Dv", "%d", f->dv);
	family_list_word(FMHA_MASKS, f->mask, mask, sizeof mask);
	abi_shape(k, "mask", "%s", mask);
	if (f->mask == MASK_WINDOW)
		abi_shape(k, "window", "%d,%d", f->wl, f->wr);
	abi_shape(k, "lse", "%d", f->lse);
	abi_shape(k, "pack", "%d", f->pack);
	abi_shape(k, "kv-shared", "%d", f->kv_shared);
}

static int
fmha_generate(const void *params, const char *args, Buf *out, KgErr *err)
{
	FmhaCfg f;
	FmhaRegs r = {0};
	KernelAbi k;
	Emit e;
	int rc;

	if (fmha_configure(&f, params, err) < 0)
		return -1;
	emit_init(&e);
	rc = emit_prologue(&e, &f, &r, err);
	if (rc == 0)
		rc = f.t->fmha->body(&e, &f, &r, err);
	if (rc == 0 && e.oom)
		rc = kg_fail(err, "out of memory");
	if (rc == 0) {
		fmha_abi(&f, args, &k);
		abi_module(&k, &e, out);
	}
	emit_free(&e);
	return rc;
}

static int
fmha_plan(const void *params, Buf *text, KgErr *err)
{
	FmhaCfg f;

	if (fmha_configure(&f, params, err) < 0)
		return -1;
	buf_printf(text, "kernel          %s\n", f.name);
	buf_printf(text, "attention       D=%d Dv=%d, %d query heads over %d KV heads (group %d)%s, mask %s%s\n",
	           f.d, f.dv, f.hq, f.hkv, f.group, f.kv_shared ? ", K=V one tensor" : "",
	           f.mask == MASK_CAUSAL ? "causal (bottom-right)" : f.mask == MASK_WINDOW ? "sliding window" : "none",
	           f.lse ? ", LSE out" : "");
	if (f.mask == MASK_WINDOW)
		buf_printf(text, "window          query i sees keys i+Sk-Sq-%d .. i+Sk-Sq+%d\n", f.wl, f.wr);
	f.t->fmha->describe(&f, text);
	buf_printf(text, "softmax         exp2(s*c - m), c = softmax_scale*log2(e) from the run-time argument");
	if (f.e2f)
		buf_printf(text, "; %d of every 8 exp2 by a degree-3 polynomial on the FMA pipe, the rest MUFU ex2", f.e2f);
	buf_printf(text, "\n");
	if (f.pack > 1)
		buf_printf(text, "head packing    a Q tile holds %d query row%s x %d heads (row t: query t/%d, head t%%%d); the CTA's %s heads h..h+%d of one KV head\n",
		           f.q_rows / f.pack, f.q_rows > f.pack ? "s" : "", f.pack, f.pack, f.pack,
		           f.qblocks > 1 ? "Q tiles cover" : "Q tile covers", f.hcta - 1);
	buf_printf(text, "grid            cdiv(max_seqlen_q,%d)%s x %d %s%s x batch\n", f.rows,
	           f.ohalves > 1 ? " x 2 O-column halves" : f.pair ? " x 2 CTAs of a cluster pair" : "", f.hq / f.hcta,
	           f.hcta > 1 ? "head block" : "head", f.hq > f.hcta ? "s" : "");
	plan_print(&f.plan, text);
	return 0;
}

const Family family_fmha = {
	"fmha",
	"attention forward O = softmax(scale·Q·K^T)·V, varlen, MHA/GQA/MQA, causal, LSE",
	fmha_params,
	sizeof fmha_params / sizeof fmha_params[0],
	sizeof(FmhaParams),
	fmha_generate,
	fmha_plan,
};
