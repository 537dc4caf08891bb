/* FMHA forward on sm_100a (tcgen05, tensor memory).
 *
 * One CTA owns qt Q tiles of 128 rows (qt = 2 where TMEM holds two O
 * accumulators, else 1). Warpgroups, in warp order:
 *   softmax q (qt of them)  thread t of warp w owns row 32(w%4)+t of Q tile
 *                           q = its TMEM lane (docs/hardware.md, "Lane
 *                           quarters"): tcgen05.ld of S, the
 *                           online softmax with exp2, P written back over
 *                           S with tcgen05.st, the epilogue (O/l, LSE);
 *   correction              rescales O_q in TMEM when a row max moved;
 *   load/MMA                warp 0: one elected lane issues TMA (the shared
 *                           producer); warp 1: allocates TMEM, and one
 *                           elected lane issues every tcgen05.mma:
 *                           S = Q·K^T (SS) into an S slot, O += P·V (TS: P
 *                           from TMEM, V from smem) into O_q.
 * Two S slots alternate between work items (a Q tile against a KV tile).
 * P is written over its slot's S once S is read, so the MMA that next
 * writes S into a slot waits for the P·V that read the slot's P (its
 * commit), never relying on tensor-core issue order (docs/hardware.md, "tcgen05 ordering").
 * Each hand-off is an mbarrier: MMA -> others by tcgen05.commit, others
 * -> MMA by arrive after tcgen05.wait::st; every waiter fences
 * after_thread_sync before touching TMEM (docs/hardware.md, "tcgen05 ordering"). No
 * synchronization is emitted that another already implies: the mutation test removes each
 * one and requires the emulator to notice. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../desc.h"
#include "../fmha.h"
#include "../ops.h"
#include "fmha_cost.h"
#include "mma.h"
#include "rates.h"

#define NEG_INF "0fFF800000"

enum {
	SLOTS = 2,
	CHUNK = 32,          /* TMEM columns per tcgen05.ld of S and in the epilogue */
	CORR_CHUNK = 16,     /* ... in the correction warpgroup, which runs on few registers */
	REGS_CORRECTION = 48,
	/* decode's correction warpgroup: the prologue leaves more values
	 * live across its setmaxnreg.dec (gen/decode.c); ptxas spills below
	 * 112 */
	REGS_CORRECTION_GATHER = 112,
	/* the MMA issuer keeps its loop-invariant Q descriptors live: 2 per
	 * 16 head-dim columns and Q tile; one Q tile leaves room for more */
	REGS_LOADMMA = 120,
	REGS_LOADMMA_1Q = 168,
};



static int
qtiles(const FmhaCfg *f)
{
	return f->qblocks;
}

static int w_corr(const FmhaCfg *f) { return 4 * qtiles(f); }
static int w_load(const FmhaCfg *f) { return 4 * qtiles(f) + 4; }
static int w_mma(const FmhaCfg *f) { return 4 * qtiles(f) + 5; }
/* decode (f->gather): a fourth kind of warpgroup, after load/MMA, gathers
 * the K=V tiles in place of the TMA producer */
static int w_gather(const FmhaCfg *f) { return 4 * qtiles(f) + 8; }

/* TMEM columns: S slots, then one O accumulator per Q tile. */
/* TMEM columns of one S slot: a pair's M = 128 (layout B) folds the bn
 * keys of its 64 rows into bn/2 columns of all 128 lanes (docs/hardware.md,
 * "Accumulator layout of the CTA pair") */
static int slot_cols(const FmhaCfg *f) { return f->pair ? f->bn / 2 : f->bn; }
static int col_s(const FmhaCfg *f, int slot) { return slot * slot_cols(f); }
static int col_o(const FmhaCfg *f, int q) { return SLOTS * slot_cols(f) + q * f->dvc; }
/* N of one P·V MMA: a pair's O goes in chunks of up to 256 columns, each
 * CTA holding pv_n/2 of every chunk's columns in pv_n/2 TMEM columns */
static int pv_n(const FmhaCfg *f) { return f->pair ? (f->dv < 256 ? f->dv : 256) : f->dvc; }

static int
regs_loadmma(int qt)
{
	return qt == 1 ? REGS_LOADMMA_1Q : REGS_LOADMMA;
}

/* Registers of a softmax thread: its S row and the row's exp2 values,
 * which ptxas keeps live together (bn = 128 spilled at 240), plus row
 * state, addresses and mask limits (~40). */
static int
softmax_regs_need(int bn)
{
	return 2 * bn + 40;
}

/* What the softmax warpgroups get once correction and load/MMA have
 * theirs (the MMA issuer keeps its loop-invariant Q descriptors live). */
static int
softmax_regs(const Plan *p, int qt)
{
	int r = plan_regs_split(p, 128 * qt, 128, REGS_CORRECTION + regs_loadmma(qt));
	return r > 240 ? 240 : r;
}

/* The shared memory the plan of these tiles requests: the kernel's own plan
 * (fmha_plan_kernel, then sm100_fmha_plan) on a copy; UINT32_MAX if it
 * cannot be planned at all. */
static uint32_t
smem_need(const FmhaCfg *f, int qt, int bn, int stages)
{
	FmhaCfg *g = malloc(sizeof *g);
	KgErr err;
	uint32_t need = UINT32_MAX;

	if (!g)
		return need;
	*g = *f;
	g->qblocks = qt;
	g->bn = bn;
	g->stages = stages;
	if (fmha_plan_kernel(g, &err) == 0)
		need = plan_smem_total(&g->plan);
	free(g);
	return need;
}


/* The cost of this kernel's kind of plan at a tile shape (fmha_cost.h):
 * one CTA, or an O-column pair beyond 256 columns of O. */
static void
estimate(const FmhaCfg *f, int qt, int bn, int stages, int e2f, FmhaCost *o)
{
	FmhaCand c = {f->pair ? FP_PAIR64 : f->ohalves > 1 ? FP_OSPLIT : FP_CTA, f->d, f->dv, f->esz, f->kv_shared,
	              qt, bn, stages, e2f};

	sm100_fmha_cost(&c, o);
}

/* pair64 (fmha_cost.h), where one CTA's TMEM cannot hold O: one Q tile
 * per CTA (packed heads: the pair's CTAs take consecutive query rows of
 * the same heads), no window, no tile shape forced; the cost model's tile,
 * with as many of its stages as the plan's regions leave room for. 0: the
 * o-split plan instead. */
static int
pair_tiles(FmhaCfg *f, const FmhaParams *p)
{
	FmhaCand c;
	FmhaCost cost;
	int st;

	if (f->dv <= 256 || f->dv % 256 || f->mask == MASK_WINDOW || p->tile_m || p->tile_n ||
	    !sm100_fmha_best(FP_PAIR64, f->d, f->dv, f->esz, f->kv_shared, f->t->smem_max, &c, &cost))
		return 0;
	f->pair = 1;
	f->ohalves = 1;
	f->q_rows = 64;
	f->dvc = f->dv / 2;
	for (st = c.stages; st >= 1; st--)
		if (smem_need(f, 1, c.bn, st) <= f->t->smem_max)
			break;
	if (p->stages)
		st = p->stages <= st ? p->stages : 0;
	if (st < 1) {
		f->pair = 0;
		f->q_rows = 128;
		return 0;
	}
	f->qblocks = 1;
	f->bn = c.bn;
	f->stages = st;
	f->e2f = p->exp2_fma < 0 ? c.e2f : p->exp2_fma;
	f->bm = 128;
	f->wgs = 1;
	return 1;
}

/* Tiles: of the (Q tiles, KV tile) pairs that fit TMEM (two S slots and
 * qt O accumulators in 512 columns) and shared memory (Q and as many KV
 * stages as fit, up to 4, 3 with K=V), the one with the best estimate;
 * ties keep the earlier (two Q tiles ping-pong, which the estimate does
 * not credit). */
static int
sm100_fmha_tiles(FmhaCfg *f, const FmhaParams *p, KgErr *err)
{
	static const int cand[][2] = {{2, 128}, {2, 64}, {1, 128}, {1, 64}, {1, 32}};
	double best_rate = 0;
	int best = -1;
	char why[200] = "no tile shape matches --tile-m/--tile-n";

	f->esz = dtype_bits(f->in) / 8;
	f->split = 0;
	f->q_rows = 128;
	/* beyond 256 columns O and two S slots leave TMEM: a CTA pair splits
	 * O's columns, each recomputing S (stated by `kgen plan`) */
	f->ohalves = f->dv > 256 ? 2 : 1;
	f->dvc = f->dv / f->ohalves;
	if (p->tile_m && p->tile_m != 128 && p->tile_m != 256)
		return kg_fail(err, "--tile-m=%d: sm_100a fmha works on one or two 128-row Q tiles (M=128 tcgen05.mma); use 128 or 256",
		               p->tile_m);
	if (p->tile_n && (p->tile_n % 32 || p->tile_n > 128))
		return kg_fail(err, "--tile-n=%d: sm_100a fmha takes 32, 64, 96 or 128 keys per KV tile (S is read in 32-column loads)",
		               p->tile_n);
	if (pair_tiles(f, p))
		return 0;
	/* exp2-fma: as given, or the best of 0..4 by the estimate (beyond
	 * half, the issue it adds outweighs the ex2 it saves) */
	int e2f_lo = p->exp2_fma < 0 ? 0 : p->exp2_fma, e2f_hi = p->exp2_fma < 0 ? 4 : p->exp2_fma;

	for (int c = 0; c < (int)(sizeof cand / sizeof cand[0]); c++) {
		int qt = cand[c][0], bn = p->tile_n ? p->tile_n : cand[c][1], st;
		double rate;
		FmhaCost est;
		Plan tmp;

		if ((p->tile_m && qt * 128 != p->tile_m) || (p->tile_n && c && cand[c][1] != 128))
			continue;
		/* packed heads: the CTA's Q tiles take qt head blocks of one KV head */
		if (p->pack_heads > 1 && f->group % (qt * p->pack_heads)) {
			snprintf(why, sizeof why, "%d Q tiles of %d packed heads: %d heads per CTA do not divide the group of %d",
			         qt, p->pack_heads, qt * p->pack_heads, f->group);
			continue;
		}
		if (SLOTS * bn + qt * f->dvc > 512) {
			snprintf(why, sizeof why, "%d query rows, %d keys: two S slots (%d) and %d O columns need %d TMEM columns, sm_100a has 512",
			         128 * qt, bn, SLOTS * bn, qt * f->dvc, SLOTS * bn + qt * f->dvc);
			continue;
		}
		plan_init(&tmp, f->t);
		tmp.threads = 128 * (qt + 2);
		if (softmax_regs_need(bn) > softmax_regs(&tmp, qt)) {
			snprintf(why, sizeof why, "%d query rows, %d keys: a softmax thread needs %d registers (2*keys+40), it gets %d",
			         128 * qt, bn, softmax_regs_need(bn), softmax_regs(&tmp, qt));
			continue;
		}
		for (st = 4; st >= 1; st--)
			if (smem_need(f, qt, bn, st) <= f->t->smem_max)
				break;
		if (f->kv_shared && st > 3)
			st = 3;
		if (p->stages)
			st = p->stages <= st ? p->stages : 0;
		if (st < 1) {
			snprintf(why, sizeof why, "%d query rows, %d keys: Q and %d KV stage(s) need %u bytes of shared memory, sm_100a has %u",
			         128 * qt, bn, p->stages ? p->stages : 1,
			         smem_need(f, qt, bn, p->stages ? p->stages : 1), f->t->smem_max);
			continue;
		}
		for (int k = e2f_lo; k <= e2f_hi; k++) {
			estimate(f, qt, bn, st, k, &est);
			/* within 1%, a ring (stages >= 2) beats a single stage: the
			 * estimate does not model the producer waiting on P·V */
			rate = est.useful / est.clk * (st >= 2 ? 1.0 : 0.99);
			if (best < 0 || rate > best_rate * 1.0001) {
				best = c;
				best_rate = rate;
				f->qblocks = qt;
				f->bn = bn;
				f->stages = st;
				f->e2f = k;
			}
		}
	}
	if (best < 0)
		return kg_fail(err, "--head-dim=%d --head-dim-v=%d --tile-m=%d --tile-n=%d --stages=%d: no sm_100a plan fits (%s)",
		               f->d, f->dv, p->tile_m, p->tile_n, p->stages, why);
	f->bm = 128 * f->qblocks;
	f->wgs = f->qblocks;
	return 0;
}

/* The S of item i+1 is issued before the P·V of item i when one Q tile
 * alternates the two slots; it then holds two KV tiles at once, which
 * K=V needs two stages for. Two Q tiles ping-pong instead. */
static int
lookahead(const FmhaCfg *f)
{
	return qtiles(f) == 1 && (!fmha_kv_one(f) || f->stages >= 2);
}

/* With one Q tile, item t+1's S needs only the P·V of item t-1, so the
 * softmax can store item t+1's rescale factor and complete its "rescale
 * full" phase before the correction warpgroup has read item t's (a data
 * race) or even waited for it (a phase it can no longer tell from item
 * t+2's: parity aliasing). Factor and barrier then alternate with the S
 * slot: item t+2 reuses slot t&1 only after its P·V, which waits for the
 * correction of item t. With two Q tiles, item t+1's S of a Q tile waits
 * for that tile's P·V of item t, which orders both. */
static int
corr_ring(const FmhaCfg *f)
{
	return qtiles(f) == 1;
}

/* Whether S waits for "slot free" (the P·V that read the slot's P). With
 * K=V in as many stages as S slots and one Q tile, a tile's stage last
 * held the tile whose P·V read its slot, and the MMA issuer's K=V full
 * wait already follows that P·V's "K=V free" commit through the
 * producer: the slot is free, and the barrier would order nothing. With
 * one stage (decode at head_dim_qk 576) the K=V full wait follows the
 * previous tile's P·V commit, which tracks the slot's reader before it. */
static int
slot_free_barrier(const FmhaCfg *f)
{
	return !(fmha_kv_one(f) && f->stages <= SLOTS && qtiles(f) == 1);
}

static int
sm100_fmha_plan(FmhaCfg *f, KgErr *err)
{
	Plan *p = &f->plan;
	int qt = qtiles(f), soft;
	uint32_t id;
	char does[96];

	if (sm100_idesc_f16_group(f->in, 128, f->bn, 0, 1 + f->pair, &id, err) < 0 ||
	    sm100_idesc_f16_group(f->in, 128, pv_n(f), 1, 1 + f->pair, &id, err) < 0)
		return -1;
	p->threads = 128 * (qt + 2 + (f->gather != NULL));
	/* With the gathering warpgroup (512 threads, 128 registers each at
	 * entry) only the correction gives registers, to the softmax (144):
	 * the gather and load/MMA keep 128 (role regs 0: the entry cap).
	 * ptxas spills with the softmax at 128 or at 152 and more
	 * (emitted/sm_100a/decode_*.ptxas.txt holds the chosen split). */
	soft = f->gather ? plan_regs_split(p, 128 * qt, 128, REGS_CORRECTION_GATHER + 2 * p->target->regs_per_sm / p->threads)
	                 : softmax_regs(p, qt);
	for (int q = 0; q < qt; q++) {
		char name[32];
		snprintf(name, sizeof name, "softmax%d", q);
		snprintf(does, sizeof does, "Q tile %d: tcgen05.ld S, exp2, tcgen05.st P; epilogue O/l, LSE", q);
		plan_role(p, name, 4 * q, 4, soft, does);
	}
	plan_role(p, "correction", w_corr(f), 4, f->gather ? REGS_CORRECTION_GATHER : REGS_CORRECTION,
	          "rescale O in TMEM (tcgen05.ld/st) when a row max moved");
	if (f->gather)
		plan_role(p, "gather", w_gather(f), 4, 0,
		          "Q, then gathers and dequantizes K=V tiles (st.shared, fence.proxy.async)");
	else
		plan_role(p, "load", w_load(f), 1, regs_loadmma(qt), "one elected lane: TMA Q once, then K/V tiles");
	if (f->pair)
		snprintf(does, sizeof does, "TMEM alloc; rank 0, one elected lane: the pair's tcgen05.mma S (N=%d), O (N=%d)",
		         f->bn, pv_n(f));
	else
		snprintf(does, sizeof does, "TMEM alloc; one elected lane: tcgen05.mma S (N=%d), O (N=%d)", f->bn, f->dvc);
	plan_role(p, "mma", w_mma(f), 1, f->gather ? 0 : regs_loadmma(qt), does);
	/* decode: the estimate 2·keys+40 is an upper bound that ptxas beats
	 * at 64 keys (above); the ptxas suite holds the real count */
	p->regs_need_max = f->gather ? 0 : softmax_regs_need(f->bn);
	snprintf(p->regs_need_who, sizeof p->regs_need_who, "softmax0");
	f->r_tslot = plan_smem(p, "TMEM address", 4, 16, 1);
	f->r_corr = plan_smem(p, "rescale", 128 * 4, 16, corr_ring(f) ? SLOTS : qt);
	if (f->pair) {
		/* a row's two halves (lanes r and r+64) hand each other their
		 * max, sum and half of P (bn/4 words) */
		f->r_xrow = plan_smem(p, "row max/sum hand-off", 128 * 4, 16, 1);
		f->r_xp = plan_smem(p, "P hand-off", 128 * (uint32_t)f->bn, 16, 1);
	}

	if (fmha_kv_one(f)) {
		f->b_kfree = f->b_vfree = plan_barrier(p, "K=V free", f->stages, 1, 0,
		                                       "tcgen05.commit after the tile's P·V");
	} else {
		f->b_kfree = plan_barrier(p, "K free", f->stages, 1, 0, "tcgen05.commit after the tile's S MMAs");
		f->b_vfree = plan_barrier(p, "V free", f->stages, 1, 0, "tcgen05.commit after the tile's P·V");
	}
	f->b_sfull = plan_barrier(p, "S full", SLOTS, 1, 0, "tcgen05.commit after S=QK^T into the slot");
	/* a pair's MMA thread waits on rank 0's: both CTAs' threads arrive
	 * there (P written in each CTA's TMEM, O rescaled in each) */
	f->b_pfull = plan_barrier(p, "P full", SLOTS, 128 * (1 + f->pair), 0,
	                          f->pair ? "both CTAs' softmax threads on rank 0's: tcgen05.st P, wait::st"
	                                  : "softmax threads: tcgen05.st P, wait::st");
	f->b_cfull = plan_barrier(p, "rescale full", corr_ring(f) ? SLOTS : qt, 128, 0, "softmax threads after storing row rescale factors");
	f->b_oready = plan_barrier(p, "O ready", qt, 128 * (1 + f->pair), 0,
	                           f->pair ? "both CTAs' correction threads on rank 0's once O is rescaled"
	                                   : "correction threads once O is rescaled");
	if (slot_free_barrier(f))
		f->b_pvdone = plan_barrier(p, "slot free", SLOTS, 1, 0, "tcgen05.commit after the P·V that read the slot's P");
	if (lookahead(f))
		f->b_odone = plan_barrier(p, "O done", 1, 1, 0, "tcgen05.commit after each P·V into O");
	f->b_ofinal = plan_barrier(p, "O final", 1, 1, 0, "tcgen05.commit after the last MMA");

	for (int s = 0; s < SLOTS; s++) {
		char name[16];
		int t;
		snprintf(name, sizeof name, "S%d", s);
		t = plan_tmem(p, name, col_s(f, s), slot_cols(f), 128);
		snprintf(name, sizeof name, "P%d", s);
		plan_tmem_alias(p, name, t, 0, f->bn / 2, "P written once S is read; next S after P·V");
	}
	for (int q = 0; q < qt; q++) {
		char name[16];
		snprintf(name, sizeof name, "O%d", q);
		plan_tmem(p, name, col_o(f, q), f->dvc, 128);
	}
	return 0;
}

static int
sm100_fmha_setup(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	return sm100_setup_tmem_group(e, err, "sm100.fmha_tmem_alloc", r->warp, w_mma(f), &f->plan, r->base,
	                              f->r_tslot, 1 + f->pair);
}

/* Loop over KV tiles j in [j0, n_total): `head` gets the label at the
 * top, `done` the one after; the caller emits the body and the back edge
 * with emit_loop_end. */
static void
emit_loop_begin(Emit *e, const FmhaRegs *r, Reg j, Reg p, char *head, char *done, const char *name)
{
	label_new(e, head, 48, name);
	label_new(e, done, 48, "tiles_done");
	emitf(e, "\tmov.u32 %s, %s;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, r->j0.s, p.s, j.s,
	      r->n_total.s, p.s, done);
	emit_label(e, head);
}

static void
emit_loop_end(Emit *e, const FmhaRegs *r, Reg j, Reg p, const char *head, const char *done)
{
	emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, p.s, j.s,
	      r->n_total.s, p.s, head);
	emit_label(e, done);
}

/* ---- MMA issuer ------------------------------------------------------ */

typedef struct Mma {
	Reg tmem, q0, k0, v0, kfull0, vfull0, kfree0, vfree0, sfull0, pfull0, oready0, pvdone0, odone0;
	Reg kst, kph, vst, vph, si, pi, j, jn, t, x, slot, par, bar, lo, ad, bd, dt, at, p, acc;
	Reg id_s, id_o, qhi, khi, vhi, vcol_lo;
	Reg both, lead;            /* pair: commit masks, rank 0's and both CTAs' barriers */
	uint32_t q_lo, k_lo, v_lo;
} Mma;

/* pair: rank 0's copy of this CTA's barrier (mapa), the one its MMA
 * thread waits on; one CTA: the barrier itself */
static Reg
lead_addr(Emit *e, const FmhaCfg *f, Reg b0)
{
	Reg lead;

	if (!f->pair)
		return b0;
	lead = reg_new(e, RC_B32);
	emitf(e, "\tmapa.shared::cluster.u32 %s, %s, 0;\n", lead.s, b0.s);
	return lead;
}

static void
arrive(Emit *e, const FmhaCfg *f, Reg bar)
{
	if (f->pair)
		op_mbar_arrive_cluster(e, bar);
	else
		op_mbar_arrive(e, bar, NULL);
}

static int
wait_bar(Emit *e, KgErr *err, Reg bar0, int idx_imm, const Reg *idx, Reg bar, const char *par)
{
	if (idx)
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", bar.s, idx->s, bar0.s);
	else
		emitf(e, "\tadd.u32 %s, %s, %d;\n", bar.s, bar0.s, 8 * idx_imm);
	return op_mbar_wait(e, err, bar, par);
}

/* A pair's commits (docs/cta-pair.md) arrive on the barrier at this
 * offset in both CTAs (mask 3) or in rank 0 only (lead: mask 1, a barrier
 * only rank 0's MMA thread waits on); one CTA's are plain. */
static void
mma_commit(Emit *e, const Mma *m, Reg bar, int lead)
{
	if (m->both.s[0])
		sm100_commit_pair(e, bar, lead ? m->lead : m->both);
	else
		sm100_commit(e, bar);
}

static void
commit_bar(Emit *e, const Mma *m, Reg bar0, int idx_imm, const Reg *idx, Reg bar, int lead)
{
	if (idx)
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", bar.s, idx->s, bar0.s);
	else
		emitf(e, "\tadd.u32 %s, %s, %d;\n", bar.s, bar0.s, 8 * idx_imm);
	mma_commit(e, m, bar, lead);
}

/* S-phase of KV tile (register jt): for each Q tile, once the slot's last
 * P·V has completed, S_slot = Q_q·K^T; then K's stage is free. */
static int
emit_s_phase(Emit *e, const FmhaCfg *f, Mma *m, int first, KgErr *err)
{
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", m->bar.s, m->kst.s, m->kfull0.s);
	if (op_mbar_wait(e, err, m->bar, m->kph.s) < 0)
		return -1;
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", m->lo.s, m->kst.s, f->k_bytes, m->k0.s);
	op_desc_start(e, m->lo, fmha_clustered(f));
	emitf(e, "\tadd.u32 %s, %s, %u;\n", m->lo.s, m->lo.s, m->k_lo);
	for (int q = 0; q < qtiles(f); q++) {
		/* slot = si & 1; its previous P·V is completion (si>>1)-1 of
		 * "slot free": parity ((si>>1)&1)^1, which a fresh barrier
		 * passes at once (docs/hardware.md, "mbarrier") */
		emitf(e, "\tand.b32 %s, %s, 1;\n\tshr.u32 %s, %s, 1;\n\tand.b32 %s, %s, 1;\n\txor.b32 %s, %s, 1;\n",
		      m->slot.s, m->si.s, m->par.s, m->si.s, m->par.s, m->par.s, m->par.s, m->par.s);
		/* the first tile's one S uses a fresh slot: nothing to wait for */
		if (!first && slot_free_barrier(f) &&
		    wait_bar(e, err, m->pvdone0, 0, &m->slot, m->bar, m->par.s) < 0)
			return -1;
		/* orders these MMAs after both waits (K's and the slot's) */
		sm100_fence_after(e);
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", m->dt.s, m->slot.s, slot_cols(f), m->tmem.s);
		for (int kk = 0; kk < f->d / 16; kk++) {
			uint32_t qa = (layout_offset(&f->lq, 0, 16 * kk) + (uint32_t)q * f->lq.bytes) >> 4;
			uint32_t ka = layout_offset(&f->lk, 0, 16 * kk) >> 4;
			emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", m->x.s, m->q0.s, m->q_lo + qa,
			      m->ad.s, m->x.s, m->qhi.s);
			emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", m->x.s, m->lo.s, ka, m->bd.s,
			      m->x.s, m->khi.s);
			if (f->pair)
				sm100_mma_f16_ss_pair(e, m->dt, m->ad, m->bd, m->id_s, kk ? "1" : "0");
			else
				sm100_mma_f16_ss(e, m->dt, m->ad, m->bd, m->id_s, kk ? "1" : "0");
		}
		commit_bar(e, m, m->sfull0, 0, &m->slot, m->bar, 0);
		emitf(e, "\tadd.u32 %s, %s, 1;\n", m->si.s, m->si.s);
	}
	if (!fmha_kv_one(f)) {
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", m->bar.s, m->kst.s, m->kfree0.s);
		mma_commit(e, m, m->bar, 0);
	}
	op_ring_advance(e, m->kst, m->kph, f->stages, m->p);
	return 0;
}

/* PV-phase of KV tile j: for each Q tile, once P is in its slot and O is
 * rescaled, O_q (+)= P·V_j; then V's stage is free. */
static int
emit_pv_phase(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Mma *m, KgErr *err)
{
	uint32_t vstride = fmha_kv_one(f) ? f->k_bytes : f->v_bytes;

	if (!fmha_kv_one(f)) {
		emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", m->bar.s, m->vst.s, m->vfull0.s);
		if (op_mbar_wait(e, err, m->bar, m->vph.s) < 0)
			return -1;
	}
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", m->lo.s, m->vst.s, vstride, m->v0.s);
	op_desc_start(e, m->lo, fmha_clustered(f));
	emitf(e, "\tadd.u32 %s, %s, %s;\n", m->lo.s, m->lo.s, m->vcol_lo.s);
	/* the first P·V of a Q tile overwrites O */
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tsetp.ne.u32 %s, %s, 0;\n", m->t.s, m->j.s, r->j0.s, m->acc.s, m->t.s);
	for (int q = 0; q < qtiles(f); q++) {
		emitf(e, "\tand.b32 %s, %s, 1;\n\tshr.u32 %s, %s, 1;\n\tand.b32 %s, %s, 1;\n", m->slot.s,
		      m->pi.s, m->par.s, m->pi.s, m->par.s, m->par.s);
		if (wait_bar(e, err, m->pfull0, 0, &m->slot, m->bar, m->par.s) < 0)
			return -1;
		emitf(e, "\tand.b32 %s, %s, 1;\n", m->par.s, m->t.s);
		if (wait_bar(e, err, m->oready0, q, NULL, m->bar, m->par.s) < 0)
			return -1;
		sm100_fence_after(e);
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", m->at.s, m->slot.s, slot_cols(f), m->tmem.s);
		/* a pair: O in chunks of pv_n columns, pv_n/2 TMEM columns and
		 * pv_n/2 of V's columns per CTA each (layout B) */
		for (int ch = 0; ch < f->dvc / (f->pair ? pv_n(f) / 2 : f->dvc); ch++) {
			int half = f->pair ? pv_n(f) / 2 : 0;
			emitf(e, "\tadd.u32 %s, %s, %d;\n", m->dt.s, m->tmem.s, col_o(f, q) + ch * half);
			for (int kk = 0; kk < f->bn / 16; kk++) {
				/* 16 keys: 8 TMEM columns of packed P (docs/hardware.md,
				 * "A operand in TMEM"), two 8-key groups of V (+2 SBO,
				 * docs/hardware.md, "Advancing along K") */
				uint32_t va = layout_offset(fmha_kv_one(f) ? &f->lk : &f->lv, 16 * kk, ch * half) >> 4;
				Reg a = m->at;
				if (kk) {
					emitf(e, "\tadd.u32 %s, %s, %d;\n", m->jn.s, m->at.s, 8 * kk);
					a = m->jn;
				}
				emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", m->x.s, m->lo.s, m->v_lo + va,
				      m->bd.s, m->x.s, m->vhi.s);
				if (f->pair)
					sm100_mma_f16_ts_pair(e, m->dt, a, m->bd, m->id_o, kk ? "1" : m->acc.s);
				else
					sm100_mma_f16_ts(e, m->dt, a, m->bd, m->id_o, kk ? "1" : m->acc.s);
			}
		}
		if (slot_free_barrier(f))
			commit_bar(e, m, m->pvdone0, 0, &m->slot, m->bar, 1);
		if (lookahead(f))
			commit_bar(e, m, m->odone0, 0, NULL, m->bar, 0);
		emitf(e, "\tadd.u32 %s, %s, 1;\n", m->pi.s, m->pi.s);
	}
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", m->bar.s, m->vst.s, m->vfree0.s);
	mma_commit(e, m, m->bar, 0);
	op_ring_advance(e, m->vst, m->vph, f->stages, m->p);
	return 0;
}

static int
emit_mma(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg tmem, KgErr *err)
{
	Mma m;
	Reg qbar, ofinal;
	uint64_t dq, dk, dv;
	uint32_t ids, ido;
	char head[48], done[48], nolook[48];
	int la = lookahead(f);

	memset(&m, 0, sizeof m);
	if (desc_for_tile(&dq, f->t->desc, &f->lq, 0, err) < 0 ||
	    desc_for_tile(&dk, f->t->desc, &f->lk, 0, err) < 0)
		return -1;
	/* V as B of P·V: N (head dim) contiguous in 128-byte swizzled rows, K
	 * (keys) across rows */
	if (desc_for_tile_mn(&dv, f->t->desc, fmha_kv_one(f) ? &f->lk : &f->lv, 0, err) < 0)
		return -1;
	if (sm100_idesc_f16_group(f->in, 128, f->bn, 0, 1 + f->pair, &ids, err) < 0 ||
	    sm100_idesc_f16_group(f->in, 128, pv_n(f), 1, 1 + f->pair, &ido, err) < 0)
		return -1;
	m.q_lo = (uint32_t)dq;
	m.k_lo = (uint32_t)dk;
	m.v_lo = (uint32_t)dv;
	m.tmem = tmem;
	emit_block(e, "sm100.fmha_mma");
	m.q0 = op_plan_smem(e, &f->plan, r->base, f->r_q);
	m.k0 = op_plan_smem(e, &f->plan, r->base, f->r_k);
	m.v0 = op_plan_smem(e, &f->plan, r->base, f->r_v);
	qbar = f->b_q >= 0 ? op_plan_bar(e, &f->plan, r->base, f->b_q) : (Reg){{0}};
	m.kfull0 = op_plan_bar(e, &f->plan, r->base, f->b_k);
	m.vfull0 = op_plan_bar(e, &f->plan, r->base, f->b_v);
	m.kfree0 = op_plan_bar(e, &f->plan, r->base, f->b_kfree);
	m.vfree0 = op_plan_bar(e, &f->plan, r->base, f->b_vfree);
	m.sfull0 = op_plan_bar(e, &f->plan, r->base, f->b_sfull);
	m.pfull0 = op_plan_bar(e, &f->plan, r->base, f->b_pfull);
	m.oready0 = op_plan_bar(e, &f->plan, r->base, f->b_oready);
	if (slot_free_barrier(f))
		m.pvdone0 = op_plan_bar(e, &f->plan, r->base, f->b_pvdone);
	ofinal = op_plan_bar(e, &f->plan, r->base, f->b_ofinal);
	if (lookahead(f))
		m.odone0 = op_plan_bar(e, &f->plan, r->base, f->b_odone);
	{
		Reg *regs[] = {&m.kst, &m.kph, &m.vst, &m.vph, &m.si, &m.pi, &m.j, &m.jn, &m.t, &m.x, &m.slot,
		               &m.par, &m.bar, &m.lo, &m.dt, &m.at, &m.id_s, &m.id_o, &m.qhi, &m.khi,
		               &m.vhi, &m.vcol_lo};
		for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
			*regs[i] = reg_new(e, RC_B32);
	}
	m.ad = reg_new(e, RC_B64);
	m.bd = reg_new(e, RC_B64);
	m.p = reg_new(e, RC_PRED);
	m.acc = reg_new(e, RC_PRED);
	if (f->pair) {
		m.both = reg_new(e, RC_B16);
		m.lead = reg_new(e, RC_B16);
		emitf(e, "\tmov.b16 %s, 3;\n\tmov.b16 %s, 1;\n", m.both.s, m.lead.s);
	}
	op_desc_start(e, m.q0, fmha_clustered(f));
	op_idesc(e, m.id_s, IK_F16, ids, "S = Q*K^T");
	op_idesc(e, m.id_o, IK_F16, ido, "O += P*V");
	op_desc_hi(e, m.qhi, f->t->desc, dq, "Q");
	op_desc_hi(e, m.khi, f->t->desc, dk, "K");
	op_desc_hi(e, m.vhi, f->t->desc, dv, "V, MN-major");
	/* with K=V, this CTA's V columns start vcol/64 slices into the tile
	 * (a V tile holds only this CTA's columns) */
	if (f->ohalves > 1 && f->kv_shared)
		emitf(e, "\tshr.u32 %s, %s, 6;\n\tmul.lo.u32 %s, %s, %u;\n", m.vcol_lo.s, r->vcol.s, m.vcol_lo.s,
		      m.vcol_lo.s, f->lk.slice_bytes >> 4);
	else
		emitf(e, "\tmov.u32 %s, 0;\n", m.vcol_lo.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", m.kst.s, m.kph.s,
	      m.vst.s, m.vph.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", m.si.s, m.pi.s);
	/* Q is read by the first S MMA, after the fence that follows its
	 * slot wait: that fence orders what this wait observed too. Without a
	 * Q barrier (decode) the first K=V full barrier publishes Q. */
	if (f->b_q >= 0 && op_mbar_wait(e, err, qbar, "0") < 0)
		return -1;
	emit_loop_begin(e, r, m.j, m.p, head, done, "mma_tile");
	/* the loop head already tested j0 < n_total: S of the first tile */
	if (la) {
		char first[48];
		label_new(e, first, sizeof first, "mma_first_done");
		emitf(e, "\tsetp.ne.u32 %s, %s, %s;\n\t@%s bra %s;\n", m.p.s, m.j.s, r->j0.s, m.p.s, first);
		if (emit_s_phase(e, f, &m, qtiles(f) == 1, err) < 0)
			return -1;
		emit_label(e, first);
		/* S of tile j+1 before P·V of tile j: it overlaps tile j's softmax */
		label_new(e, nolook, sizeof nolook, "mma_no_next");
		emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", m.jn.s, m.j.s, m.p.s,
		      m.jn.s, r->n_total.s, m.p.s, nolook);
		if (emit_s_phase(e, f, &m, 0, err) < 0)
			return -1;
		emit_label(e, nolook);
	} else if (emit_s_phase(e, f, &m, 0, err) < 0) {
		return -1;
	}
	if (emit_pv_phase(e, f, r, &m, err) < 0)
		return -1;
	emit_loop_end(e, r, m.j, m.p, head, done);
	/* tracks every MMA above: the epilogue's signal */
	mma_commit(e, &m, ofinal, 0);
	return 0;
}

/* ---- correction ------------------------------------------------------ */

static int
emit_correction(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg tmem, KgErr *err)
{
	Reg v[CORR_CHUNK], j = reg_new(e, RC_B32), t = reg_new(e, RC_B32), par = reg_new(e, RC_B32);
	Reg tl = reg_new(e, RC_B32), ta = reg_new(e, RC_B32), ca = reg_new(e, RC_B32);
	Reg bar = reg_new(e, RC_B32), corr = reg_new(e, RC_F32), p = reg_new(e, RC_PRED);
	Reg any = reg_new(e, RC_PRED), corr0, cfull0, oready0, odone0 = {{0}};
	char head[48], done[48];

	reg_array(e, RC_F32, v, CORR_CHUNK);
	emit_block(e, "sm100.fmha_correction");
	corr0 = op_plan_smem(e, &f->plan, r->base, f->r_corr);
	cfull0 = op_plan_bar(e, &f->plan, r->base, f->b_cfull);
	oready0 = lead_addr(e, f, op_plan_bar(e, &f->plan, r->base, f->b_oready));
	if (lookahead(f))
		odone0 = op_plan_bar(e, &f->plan, r->base, f->b_odone);
	/* warp w%4 reaches TMEM lanes 32(w%4).. (docs/hardware.md, "Lane quarters"):
	 * row 32(w%4)+lane */
	sm100_quarter_taddr(e, tl, r->warp, tmem, 1);
	sm100_quarter_row(e, ca, r->warp, r->lane, 1);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n", ca.s, ca.s, corr0.s);
	emit_loop_begin(e, r, j, p, head, done, "correct_tile");
	emitf(e, "\tsub.u32 %s, %s, %s;\n", t.s, j.s, r->j0.s);
	for (int q = 0; q < qtiles(f); q++) {
		char skip[48], same[48];
		label_new(e, skip, sizeof skip, "correct_first");
		label_new(e, same, sizeof same, "correct_same");
		if (corr_ring(f)) {
			emitf(e, "\tand.b32 %s, %s, 1;\n\tshr.u32 %s, %s, 1;\n\tand.b32 %s, %s, 1;\n", ta.s,
			      t.s, par.s, t.s, par.s, par.s);
			if (wait_bar(e, err, cfull0, 0, &ta, bar, par.s) < 0)
				return -1;
		} else {
			emitf(e, "\tand.b32 %s, %s, 1;\n", par.s, t.s);
			if (wait_bar(e, err, cfull0, q, NULL, bar, par.s) < 0)
				return -1;
		}
		/* the first P·V overwrites O: nothing to rescale. Later, the
		 * previous P·V into O_q must be complete. With two Q tiles it
		 * is: the softmax arrived on "rescale full" after waiting for
		 * this item's S, whose commit tracks every earlier MMA of the
		 * issuer, that P·V included (docs/hardware.md, "tcgen05.commit"); the
		 * first Q tile's fence covers the second's. With the S of the next item issued
		 * first (one Q tile), it waits for the P·V's own commit. */
		emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, t.s, p.s, skip);
		if (corr_ring(f)) {
			emitf(e, "\tmad.lo.u32 %s, %s, 512, %s;\n", bar.s, ta.s, ca.s);
			emitf(e, "\tld.shared.f32 %s, [%s];\n", corr.s, bar.s);
		} else {
			emitf(e, "\tld.shared.f32 %s, [%s+%d];\n", corr.s, ca.s, 512 * q);
		}
		if (lookahead(f)) {
			emitf(e, "\tsub.u32 %s, %s, 1;\n\tand.b32 %s, %s, 1;\n", par.s, t.s, par.s, par.s);
			if (wait_bar(e, err, odone0, 0, NULL, bar, par.s) < 0)
				return -1;
		}
		if (q == 0)
			sm100_fence_after(e);
		/* a warp touches O only when one of its rows' max moved */
		emitf(e, "\tsetp.lt.f32 %s, %s, 0f3F800000;\n", p.s, corr.s);
		emitf(e, "\tvote.sync.any.pred %s, %s, 0xffffffff;\n\t@!%s bra %s;\n", any.s, p.s, any.s, same);
		for (int c = 0; c < f->dvc; c += CORR_CHUNK) {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", ta.s, tl.s, col_o(f, q) + c);
			sm100_ld_32x32b(e, v, CORR_CHUNK, ta);
			sm100_wait_ld(e);
			for (int i = 0; i < CORR_CHUNK; i++)
				emitf(e, "\tmul.f32 %s, %s, %s;\n", v[i].s, v[i].s, corr.s);
			sm100_st_32x32b(e, v, CORR_CHUNK, ta);
		}
		/* wait::st completes the stores before the arrive (docs/hardware.md,
		 * "tcgen05 ordering") */
		sm100_wait_st(e);
		emit_label(e, same);
		emit_label(e, skip);
		emitf(e, "\tadd.u32 %s, %s, %d;\n", bar.s, oready0.s, 8 * q);
		arrive(e, f, bar);
	}
	emit_loop_end(e, r, j, p, head, done);
	return 0;
}

/* ---- softmax and epilogue ------------------------------------------- */

typedef struct Soft {
	Reg S[128], P[64];
	Reg q, row, qrow, tl, j, t, i, slot, par, bar, ta, tt, kt, lim, klo;
	Reg hrow;                  /* this row's query head (fmha_emit_row_head) */
	Exp2Mix ex;                /* the exponentials, f->e2f of 8 on the FMA pipe */
	Reg m, l, mx, mx2, ms, nms, corr, sum[4], ca;
	Reg p, pm;
	Reg sfull0, pfull0, cfull0;
	Reg sc;                    /* softmax_scale·log2(e) */
	Reg sc2, nms2, x2, sum2[2];/* .b64 pairs of the packed f32x2 scale and sums */
	/* pair: this thread's row half hh = lane / 64 (keys hh·bn/2..),
	 * its and its partner's (lane ^ 64) hand-off slots, the TMEM column
	 * offsets of its own and its partner's P words */
	Reg kofs, xa, xb, pa, pb, pown, ppart;
	int nsc;                   /* scores a thread holds per tile: bn, a pair's bn/2 */
} Soft;

static void
emit_mask(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Soft *s)
{
	char skip[48];

	label_new(e, skip, sizeof skip, "mask_done");
	/* only tiles outside [n_lead, n_full) hold a key some row cannot see */
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\tsetp.ge.or.u32 %s, %s, %s, %s;\n\t@!%s bra %s;\n", s->pm.s, s->j.s,
	      r->n_lead.s, s->pm.s, s->j.s, r->n_full.s, s->pm.s, s->pm.s, skip);
	emit_block(e, "sm100.fmha_mask");
	/* column c is key j*bn + c: masked when c >= lim - j*bn (or, window,
	 * c < klo - j*bn) */
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", s->tt.s, s->j.s, f->bn);
	/* a pair's thread holds keys kofs.. of the tile */
	if (f->pair)
		emitf(e, "\tadd.u32 %s, %s, %s;\n", s->tt.s, s->tt.s, s->kofs.s);
	emitf(e, "\tsub.s32 %s, %s, %s;\n", s->kt.s, s->klo.s, s->tt.s);
	emitf(e, "\tsub.s32 %s, %s, %s;\n", s->tt.s, s->lim.s, s->tt.s);
	for (int c = 0; c < s->nsc; c++) {
		emitf(e, "\tsetp.le.s32 %s, %s, %d;\n", s->p.s, s->tt.s, c);
		if (f->mask == MASK_WINDOW)
			emitf(e, "\tsetp.gt.or.s32 %s, %s, %d, %s;\n", s->p.s, s->kt.s, c, s->p.s);
		emitf(e, "\t@%s mov.f32 %s, %s;\n", s->p.s, s->S[c].s, NEG_INF);
	}
	emit_label(e, skip);
}

static int
emit_softmax_tile(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Soft *s, KgErr *err)
{
	int bn = s->nsc;

	emit_block(e, "sm100.fmha_softmax");
	/* item i = t*qt + q uses slot i&1 for the (i>>1)-th time */
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tmad.lo.u32 %s, %s, %d, %s;\n", s->t.s, s->j.s, r->j0.s, s->i.s, s->t.s,
	      qtiles(f), s->q.s);
	emitf(e, "\tand.b32 %s, %s, 1;\n\tshr.u32 %s, %s, 1;\n\tand.b32 %s, %s, 1;\n", s->slot.s, s->i.s,
	      s->par.s, s->i.s, s->par.s, s->par.s);
	if (wait_bar(e, err, s->sfull0, 0, &s->slot, s->bar, s->par.s) < 0)
		return -1;
	sm100_fence_after(e);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", s->ta.s, s->slot.s, slot_cols(f), s->tl.s);
	sm100_ldst_32x32b_cols(e, 0, s->S, bn, CHUNK, s->ta, s->tt);
	sm100_wait_ld(e);
	emit_mask(e, f, r, s);
	emit_block(e, "sm100.fmha_softmax_exp");
	/* row max (two chains for latency), the new max, and the rescale
	 * factor of the running sum and O; a row that has seen only masked
	 * keys keeps max -inf, offset 0, so no -inf - -inf NaN appears */
	emitf(e, "\tmov.f32 %s, %s;\n\tmov.f32 %s, %s;\n", s->mx.s, s->m.s, s->mx2.s, s->S[0].s);
	for (int c = 1; c < bn; c++)
		emitf(e, "\tmax.f32 %s, %s, %s;\n", (c & 1) ? s->mx.s : s->mx2.s, (c & 1) ? s->mx.s : s->mx2.s,
		      s->S[c].s);
	emitf(e, "\tmax.f32 %s, %s, %s;\n", s->mx.s, s->mx.s, s->mx2.s);
	if (f->pair) {
		/* the row's other half (lane ^ 64, another warp): its max
		 * through shared memory; the softmax warpgroup's named barrier
		 * orders the stores before the loads, and the previous tile's
		 * loads (before its P hand-off barrier) before these stores */
		emitf(e, "\tst.shared.f32 [%s], %s;\n", s->xa.s, s->mx.s);
		op_bar_sync_why(e, 1, 128, "softmax: row max halves stored");
		emitf(e, "\tld.shared.f32 %s, [%s];\n\tmax.f32 %s, %s, %s;\n", s->mx2.s, s->xb.s, s->mx.s, s->mx.s,
		      s->mx2.s);
	}
	emitf(e, "\tsetp.eq.f32 %s, %s, %s;\n", s->p.s, s->mx.s, NEG_INF);
	emitf(e, "\tmul.f32 %s, %s, %s;\n\tselp.f32 %s, 0f00000000, %s, %s;\n", s->ms.s, s->mx.s, s->sc.s, s->ms.s,
	      s->ms.s, s->p.s);
	emitf(e, "\tneg.f32 %s, %s;\n", s->nms.s, s->ms.s);
	emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n\tex2.approx.ftz.f32 %s, %s;\n", s->corr.s, s->m.s, s->sc.s,
	      s->nms.s, s->corr.s, s->corr.s);
	emitf(e, "\tmov.f32 %s, %s;\n", s->m.s, s->mx.s);
	/* the correction warpgroup rescales O with it while P is computed */
	if (corr_ring(f)) {
		emitf(e, "\tmad.lo.u32 %s, %s, 512, %s;\n", s->bar.s, s->slot.s, s->ca.s);
		emitf(e, "\tst.shared.f32 [%s], %s;\n", s->bar.s, s->corr.s);
	} else {
		emitf(e, "\tst.shared.f32 [%s], %s;\n", s->ca.s, s->corr.s);
	}
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", s->bar.s, corr_ring(f) ? s->slot.s : s->q.s, s->cfull0.s);
	op_mbar_arrive(e, s->bar, NULL);
	/* scores two at a time: the scale fma and the sum add as packed
	 * f32x2 operations, each half the f32 one (sm_100; the .b64 pairs are
	 * register pairs to ptxas). sum2[k] holds the partial sums of the
	 * scores c = 4i + 2k (low) and 4i + 2k + 1 (high). */
	emitf(e, "\tmov.b64 %s, {%s, %s};\n", s->nms2.s, s->nms.s, s->nms.s);
	emitf(e, "\tmov.b64 %s, 0;\n\tmov.b64 %s, 0;\n", s->sum2[0].s, s->sum2[1].s);
	for (int c = 0; c < bn; c += 2) {
		emitf(e, "\tmov.b64 %s, {%s, %s};\n", s->x2.s, s->S[c].s, s->S[c + 1].s);
		emitf(e, "\tfma.rn.f32x2 %s, %s, %s, %s;\n", s->x2.s, s->x2.s, s->sc2.s, s->nms2.s);
		emitf(e, "\tmov.b64 {%s, %s}, %s;\n", s->S[c].s, s->S[c + 1].s, s->x2.s);
		op_exp2_mix(e, &s->ex, c, s->S[c]);
		op_exp2_mix(e, &s->ex, c + 1, s->S[c + 1]);
		emitf(e, "\tmov.b64 %s, {%s, %s};\n\tadd.rn.f32x2 %s, %s, %s;\n", s->x2.s, s->S[c].s, s->S[c + 1].s,
		      s->sum2[c / 2 & 1].s, s->sum2[c / 2 & 1].s, s->x2.s);
		emitf(e, "\tcvt.rn.%s.f32 %s, %s, %s;\n", f->in == DT_BF16 ? "bf16x2" : "f16x2", s->P[c / 2].s,
		      s->S[c + 1].s, s->S[c].s);
	}
	emitf(e, "\tmov.b64 {%s, %s}, %s;\n\tmov.b64 {%s, %s}, %s;\n", s->sum[0].s, s->sum[1].s, s->sum2[0].s,
	      s->sum[2].s, s->sum[3].s, s->sum2[1].s);
	emitf(e, "\tadd.f32 %s, %s, %s;\n\tadd.f32 %s, %s, %s;\n\tadd.f32 %s, %s, %s;\n", s->sum[0].s, s->sum[0].s,
	      s->sum[1].s, s->sum[2].s, s->sum[2].s, s->sum[3].s, s->sum[0].s, s->sum[0].s, s->sum[2].s);
	emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", s->l.s, s->l.s, s->corr.s, s->sum[0].s);
	if (f->pair) {
		/* the row's P, all f->bn keys (bf16 pairs along K), in this
		 * thread's lane: the pair's TS MMA reads A duplicated in both
		 * lane halves (docs/hardware.md, "Accumulator layout of the CTA
		 * pair"); the other half's words come through shared memory,
		 * the named barrier ordering their stores before the loads */
		for (int w = 0; w < bn / 2; w += 4)
			emitf(e, "\tst.shared.v4.b32 [%s+%d], {%s, %s, %s, %s};\n", s->pa.s, 4 * w, s->P[w].s,
			      s->P[w + 1].s, s->P[w + 2].s, s->P[w + 3].s);
		op_bar_sync_why(e, 1, 128, "softmax: P halves stored");
		for (int w = 0; w < bn / 2; w += 4)
			emitf(e, "\tld.shared.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", s->P[bn / 2 + w].s,
			      s->P[bn / 2 + w + 1].s, s->P[bn / 2 + w + 2].s, s->P[bn / 2 + w + 3].s, s->pb.s, 4 * w);
		emitf(e, "\tadd.u32 %s, %s, %s;\n", s->kt.s, s->ta.s, s->pown.s);
		sm100_ldst_32x32b_cols(e, 1, s->P, bn / 2, 128, s->kt, s->tt);
		emitf(e, "\tadd.u32 %s, %s, %s;\n", s->kt.s, s->ta.s, s->ppart.s);
		sm100_ldst_32x32b_cols(e, 1, s->P + bn / 2, bn / 2, 128, s->kt, s->tt);
	} else {
		/* P over the slot's first bn/2 columns: 16-bit pairs along K (docs/hardware.md,
		 * "A operand in TMEM"); 48 columns (96 keys) go as 32 + 16 */
		sm100_ldst_32x32b_cols(e, 1, s->P, bn / 2, 128, s->ta, s->tt);
	}
	/* complete before the arrive that hands P to the MMA issuer (docs/hardware.md,
	 * "tcgen05 ordering") */
	sm100_wait_st(e);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", s->bar.s, s->slot.s, s->pfull0.s);
	arrive(e, f, s->bar);
	return 0;
}

/* The attention sink (decode): exp(sink[head]) joins the row's sum in
 * its units 2^(s·scale·log2e - ms): l += 2^(sink·log2e - ms). A row that
 * saw no key has ms = 0, so l = e^sink, O = 0 and LSE = sink. Heads from
 * r->sink_hq on (past hq; every head of a split-KV part, whose combine
 * adds the sink once) read no sink. */
static void
emit_sink(Emit *e, const FmhaRegs *r, Soft *s)
{
	Reg a = reg_new(e, RC_B64), x = reg_new(e, RC_F32), ok = reg_new(e, RC_PRED);

	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", ok.s, s->hrow.s, r->sink_hq.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", a.s, s->hrow.s, a.s, a.s, r->sink.s);
	emitf(e, "\tmov.f32 %s, %s;\n\t@%s ld.global.nc.f32 %s, [%s];\n", x.s, NEG_INF, ok.s, x.s, a.s);
	emitf(e, "\tmul.f32 %s, %s, 0f3FB8AA3B;\n\tsub.f32 %s, %s, %s;\n", x.s, x.s, x.s, x.s, s->ms.s);
	emitf(e, "\tex2.approx.ftz.f32 %s, %s;\n\tadd.f32 %s, %s, %s;\n", x.s, x.s, s->l.s, s->l.s, x.s);
}

/* O_q / l to global, 32 columns at a time: thread t holds its row's
 * columns, stored as 16-byte vectors (Dv and the column offset are
 * multiples of 64, so rows are 16-byte aligned). zero: no KV tile was
 * visited, O is 0 and TMEM is never read. decode --unnormalized 1
 * (f->o_unnorm): O as f32 without the 1/l, straight from TMEM. */
static void
emit_store_o(Emit *e, const FmhaCfg *f, Soft *s, Reg addr, Reg prow, Reg inv, Reg ta, int zero)
{
	Reg v[CHUNK], pk[CHUNK / 2];

	reg_array(e, RC_F32, v, CHUNK);
	reg_array(e, RC_B32, pk, CHUNK / 2);
	/* a pair's TMEM column c holds O column (c / h)·pv_n + c % h of its
	 * lane half, h = pv_n/2 (the half's offset is in addr) */
	int h = f->pair ? pv_n(f) / 2 : f->dvc;

	for (int c = 0; c < f->dvc; c += CHUNK) {
		int g = c / h * (f->pair ? pv_n(f) : h) + c % h;
		if (f->o_unnorm) {
			if (zero) {
				for (int i = 0; i < CHUNK; i++)
					emitf(e, "\tmov.f32 %s, 0f00000000;\n", v[i].s);
			} else {
				emitf(e, "\tadd.u32 %s, %s, %d;\n", ta.s, s->tl.s, col_o(f, 0) + c);
				emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", ta.s, s->q.s, f->dvc, ta.s);
				sm100_ld_32x32b(e, v, CHUNK, ta);
				sm100_wait_ld(e);
			}
			for (int q4 = 0; q4 < CHUNK / 4; q4++)
				emitf(e, "\t@%s st.global.v4.f32 [%s+%d], {%s, %s, %s, %s};\n", prow.s, addr.s,
				      (c + 4 * q4) * 4, v[4 * q4].s, v[4 * q4 + 1].s, v[4 * q4 + 2].s, v[4 * q4 + 3].s);
			continue;
		}
		if (zero) {
			for (int i = 0; i < CHUNK / 2; i++)
				emitf(e, "\tmov.b32 %s, 0;\n", pk[i].s);
		} else {
			emitf(e, "\tadd.u32 %s, %s, %d;\n", ta.s, s->tl.s, col_o(f, 0) + c);
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", ta.s, s->q.s, f->dvc, ta.s);
			sm100_ld_32x32b(e, v, CHUNK, ta);
			sm100_wait_ld(e);
			for (int i = 0; i < CHUNK; i += 2) {
				emitf(e, "\tmul.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n", v[i].s, v[i].s, inv.s, v[i + 1].s,
				      v[i + 1].s, inv.s);
				emitf(e, "\tcvt.rn.%s.f32 %s, %s, %s;\n", f->in == DT_BF16 ? "bf16x2" : "f16x2",
				      pk[i / 2].s, v[i + 1].s, v[i].s);
			}
		}
		for (int q4 = 0; q4 < CHUNK / 8; q4++)
			emitf(e, "\t@%s st.global.v4.b32 [%s+%d], {%s, %s, %s, %s};\n", prow.s, addr.s,
			      (g + 8 * q4) * f->esz, pk[4 * q4].s, pk[4 * q4 + 1].s, pk[4 * q4 + 2].s, pk[4 * q4 + 3].s);
	}
}

static int
emit_epilogue(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Soft *s, KgErr *err)
{
	Reg inv = reg_new(e, RC_F32), addr = reg_new(e, RC_B64), t64 = reg_new(e, RC_B64);
	Reg prow = reg_new(e, RC_PRED), has = reg_new(e, RC_PRED), ta = reg_new(e, RC_B32);
	Reg lse = reg_new(e, RC_F32), ofinal;
	char empty[48], stored[48];

	emit_block(e, "sm100.fmha_epilogue");
	ofinal = op_plan_bar(e, &f->plan, r->base, f->b_ofinal);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n", prow.s, s->qrow.s, r->sq.s);
	if (f->head_guard)
		emitf(e, "\tsetp.lt.and.u32 %s, %s, %d, %s;\n", prow.s, s->hrow.s, f->hq, prow.s);
	/* element ((qs + row) * Hq + head) * Dv + vcol */
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tmul.wide.u32 %s, %s, %d;\n", s->t.s, s->qrow.s, r->qs.s, addr.s, s->t.s,
	      f->hq * f->dv);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", t64.s, s->hrow.s, f->dv, addr.s, addr.s,
	      t64.s);
	if (f->ohalves > 1) {
		emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", t64.s, r->vcol.s, addr.s, addr.s, t64.s);
	}
	if (f->pair) {
		/* this lane half's columns of each chunk; the row sum is the
		 * two halves' (the hand-off slot is free: the partner read the
		 * last max before the last P barrier) */
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", t64.s, s->kofs.s,
		      pv_n(f) / 2 / (f->bn / 2), addr.s, addr.s, t64.s);
		emitf(e, "\tst.shared.f32 [%s], %s;\n", s->xa.s, s->l.s);
		op_bar_sync_why(e, 1, 128, "softmax: row sum halves stored");
		emitf(e, "\tld.shared.f32 %s, [%s];\n\tadd.f32 %s, %s, %s;\n", inv.s, s->xb.s, s->l.s, s->l.s, inv.s);
	}
	emitf(e, "\tmad.lo.u64 %s, %s, %d, %s;\n", addr.s, addr.s, f->o_unnorm ? 4 : f->esz, r->o.s);
	if (r->sink.s[0])
		emit_sink(e, r, s);
	emitf(e, "\tsetp.gt.f32 %s, %s, 0f00000000;\n", s->p.s, s->l.s);
	emitf(e, "\trcp.rn.f32 %s, %s;\n\tselp.f32 %s, %s, 0f00000000, %s;\n", inv.s, s->l.s, inv.s, inv.s,
	      s->p.s);
	label_new(e, empty, sizeof empty, "epilogue_empty");
	label_new(e, stored, sizeof stored, "epilogue_stored");
	emitf(e, "\tsetp.gt.u32 %s, %s, %s;\n\t@!%s bra %s;\n", has.s, r->n_total.s, r->j0.s, has.s, empty);
	if (op_mbar_wait(e, err, ofinal, "0") < 0)
		return -1;
	sm100_fence_after(e);
	emit_store_o(e, f, s, addr, prow, inv, ta, 0);
	emitf(e, "\tbra %s;\n", stored);
	emit_label(e, empty);
	emit_store_o(e, f, s, addr, prow, inv, ta, 1);
	emit_label(e, stored);
	if (f->lse) {
		/* LSE = ln(sum exp(scale s)) = (max·scale·log2e + log2 l)·ln 2;
		 * one CTA of an O-column pair writes it */
		emitf(e, "\tlg2.approx.f32 %s, %s;\n\tadd.f32 %s, %s, %s;\n", lse.s, s->l.s, lse.s, lse.s, s->ms.s);
		emitf(e, "\tmul.f32 %s, %s, 0f3F317218;\n\tselp.f32 %s, %s, %s, %s;\n", lse.s, lse.s, lse.s, lse.s,
		      NEG_INF, s->p.s);
		if (f->ohalves > 1)
			emitf(e, "\tsetp.eq.and.u32 %s, %s, 0, %s;\n", prow.s, r->vcol.s, prow.s);
		if (f->pair)
			emitf(e, "\tsetp.eq.and.u32 %s, %s, 0, %s;\n", prow.s, s->kofs.s, prow.s);
		emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", s->t.s, s->hrow.s, r->total_q.s,
		      r->lse_q0.s[0] ? r->lse_q0.s : r->qs.s, s->t.s, s->t.s, s->qrow.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", addr.s, s->t.s, addr.s, addr.s,
		      r->lse.s);
		emitf(e, "\t@%s st.global.f32 [%s], %s;\n", prow.s, addr.s, lse.s);
		if (f->o_unnorm) {
			/* M = the row max, ms·ln 2 (0 for a row with no key): O·e^(M - LSE)
			 * is the normalized output (docs/ABI.md "decode") */
			emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", addr.s, s->t.s, addr.s, addr.s,
			      r->mref.s);
			emitf(e, "\tmul.f32 %s, %s, 0f3F317218;\n\t@%s st.global.f32 [%s], %s;\n", lse.s, s->ms.s, prow.s,
			      addr.s, lse.s);
		}
	}
	return f->finish ? f->finish(e, f, r, err) : 0;
}

static int
emit_softmax(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg tmem, KgErr *err)
{
	Soft s;
	char head[48], done[48];

	memset(&s, 0, sizeof s);
	s.nsc = slot_cols(f);
	reg_array(e, RC_F32, s.S, s.nsc);
	reg_array(e, RC_B32, s.P, f->bn / 2);
	{
		Reg *b32[] = {&s.q, &s.row, &s.qrow, &s.tl, &s.j, &s.t, &s.i, &s.slot, &s.par, &s.bar, &s.ta,
		              &s.tt, &s.kt, &s.lim, &s.klo, &s.ca};
		Reg *f32[] = {&s.m, &s.l, &s.mx, &s.mx2, &s.ms, &s.nms, &s.corr, &s.sum[0], &s.sum[1],
		              &s.sum[2], &s.sum[3]};
		for (size_t i = 0; i < sizeof b32 / sizeof b32[0]; i++)
			*b32[i] = reg_new(e, RC_B32);
		for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++)
			*f32[i] = reg_new(e, RC_F32);
	}
	s.p = reg_new(e, RC_PRED);
	s.pm = reg_new(e, RC_PRED);
	exp2_mix_init(e, &s.ex, f->e2f);
	s.sc = fmha_emit_scale_log2(e);
	s.sc2 = reg_new(e, RC_B64);
	s.nms2 = reg_new(e, RC_B64);
	s.x2 = reg_new(e, RC_B64);
	s.sum2[0] = reg_new(e, RC_B64);
	s.sum2[1] = reg_new(e, RC_B64);
	emitf(e, "\tmov.b64 %s, {%s, %s};\n", s.sc2.s, s.sc.s, s.sc.s);
	emit_block(e, "sm100.fmha_softmax_init");
	s.sfull0 = op_plan_bar(e, &f->plan, r->base, f->b_sfull);
	s.pfull0 = lead_addr(e, f, op_plan_bar(e, &f->plan, r->base, f->b_pfull));
	s.cfull0 = op_plan_bar(e, &f->plan, r->base, f->b_cfull);
	{
		Reg corr0 = op_plan_smem(e, &f->plan, r->base, f->r_corr);
		/* Q tile q = warp/4; row 32(warp%4) + lane is TMEM lane row,
		 * reached from the warp's quarter base (docs/hardware.md, "Lane quarters") */
		emitf(e, "\tshr.u32 %s, %s, 2;\n", s.q.s, r->warp.s);
		sm100_quarter_taddr(e, s.tl, r->warp, tmem, 1);
		sm100_quarter_row(e, s.row, r->warp, r->lane, 1);
		emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", s.ca.s, s.q.s, s.row.s,
		      s.ca.s, s.ca.s, corr0.s);
	}
	if (f->pair) {
		/* lane L: row 64·rank + L % 64 of the pair, keys (L / 64)·bn/2..
		 * of each tile; P words: own at column (L / 64)·bn/4, the
		 * partner's at the other quarter */
		Reg x0 = op_plan_smem(e, &f->plan, r->base, f->r_xrow), p0 = op_plan_smem(e, &f->plan, r->base, f->r_xp);
		s.kofs = reg_new(e, RC_B32);
		s.xa = reg_new(e, RC_B32);
		s.xb = reg_new(e, RC_B32);
		s.pa = reg_new(e, RC_B32);
		s.pb = reg_new(e, RC_B32);
		s.pown = reg_new(e, RC_B32);
		s.ppart = reg_new(e, RC_B32);
		emitf(e, "\tshr.u32 %s, %s, 6;\n\tmul.lo.u32 %s, %s, %d;\n", s.kofs.s, s.row.s, s.kofs.s, s.kofs.s,
		      f->bn / 2);
		emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\txor.b32 %s, %s, 64;\n\tmad.lo.u32 %s, %s, 4, %s;\n", s.xa.s,
		      s.row.s, x0.s, s.t.s, s.row.s, s.xb.s, s.t.s, x0.s);
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmad.lo.u32 %s, %s, %d, %s;\n", s.pa.s, s.row.s, f->bn, p0.s,
		      s.pb.s, s.t.s, f->bn, p0.s);
		emitf(e, "\tshr.u32 %s, %s, 1;\n\tsub.u32 %s, %d, %s;\n", s.pown.s, s.kofs.s, s.ppart.s, f->bn / 4,
		      s.pown.s);
		emitf(e, "\tand.b32 %s, %s, 63;\n\tmad.lo.u32 %s, %s, 64, %s;\n", s.t.s, s.row.s, s.t.s, r->rank.s,
		      s.t.s);
	} else {
		emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n", s.t.s, s.q.s, s.row.s);
	}
	s.hrow = fmha_emit_row_head(e, f, r, s.t, s.qrow);
	/* visible keys of this row: [qrow + Sk - Sq - wl, qrow + Sk - Sq + wr],
	 * clipped to [0, Sk); `none` only clips */
	if (f->mask != MASK_NONE) {
		emitf(e, "\tsub.s32 %s, %s, %s;\n\tadd.s32 %s, %s, %s;\n", s.lim.s, r->sk.s, r->sq.s, s.lim.s, s.lim.s,
		      s.qrow.s);
		emitf(e, "\tsub.s32 %s, %s, %d;\n", s.klo.s, s.lim.s, f->mask == MASK_WINDOW ? f->wl : 0);
		emitf(e, "\tadd.s32 %s, %s, %d;\n\tmin.s32 %s, %s, %s;\n", s.lim.s, s.lim.s, 1 + f->wr, s.lim.s,
		      s.lim.s, r->sk.s);
	} else {
		emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, 0;\n", s.lim.s, r->sk.s, s.klo.s);
	}
	emitf(e, "\tmov.f32 %s, %s;\n\tmov.f32 %s, 0f00000000;\n\tmov.f32 %s, 0f00000000;\n", s.m.s, NEG_INF,
	      s.l.s, s.ms.s);
	emit_loop_begin(e, r, s.j, s.p, head, done, "softmax_tile");
	if (emit_softmax_tile(e, f, r, &s, err) < 0)
		return -1;
	emit_loop_end(e, r, s.j, s.p, head, done);
	return emit_epilogue(e, f, r, &s, err);
}

/* ---- roles ----------------------------------------------------------- */

static int
sm100_fmha_body(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	Reg tmem = reg_new(e, RC_B32), p = reg_new(e, RC_PRED), el = reg_new(e, RC_PRED);
	char corr[48], other[48], mma[48], join[48], out[48], gat[48];
	int soft = f->plan.roles[0].regs;

	label_new(e, corr, sizeof corr, "role_correction");
	label_new(e, other, sizeof other, "role_load_mma");
	label_new(e, mma, sizeof mma, "role_mma");
	label_new(e, join, sizeof join, "join");
	label_new(e, out, sizeof out, "exit");
	emit_block(e, "sm100.fmha_roles");
	sm100_read_taddr(e, tmem, &f->plan, r->base, f->r_tslot);
	if (f->gather) {
		label_new(e, gat, sizeof gat, "role_gather");
		emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, w_gather(f), p.s, gat);
	}
	emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, w_load(f), p.s, other);
	emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, w_corr(f), p.s, corr);
	op_setmaxnreg(e, 1, soft);
	if (emit_softmax(e, f, r, tmem, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", join);
	emit_label(e, corr);
	op_setmaxnreg(e, 0, f->gather ? REGS_CORRECTION_GATHER : REGS_CORRECTION);
	if (emit_correction(e, f, r, tmem, err) < 0)
		return -1;
	emitf(e, "\tbra %s;\n", join);
	emit_label(e, other);
	if (!f->gather)
		op_setmaxnreg(e, regs_loadmma(qtiles(f)) > f->plan.regs_entry, regs_loadmma(qtiles(f)));
	emitf(e, "\tsetp.eq.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, w_mma(f), p.s, mma);
	if (!f->gather) {
		emitf(e, "\tsetp.ne.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, w_load(f), p.s, join);
		op_elect_one(e, el);
		emitf(e, "\t@!%s bra %s;\n", el.s, join);
		if (fmha_emit_producer(e, f, r, err) < 0)
			return -1;
	}
	emitf(e, "\tbra %s;\n", join);
	if (f->gather) {
		/* the gathering warpgroup sees its own thread index 0..127 */
		FmhaRegs g = *r;
		emit_label(e, gat);
		g.tid = reg_new(e, RC_B32);
		emitf(e, "\tsub.u32 %s, %s, %d;\n", g.tid.s, r->tid.s, 32 * w_gather(f));
		if (f->gather(e, f, &g, err) < 0)
			return -1;
		emitf(e, "\tbra %s;\n", join);
	}
	emit_label(e, mma);
	op_elect_one(e, el);
	emitf(e, "\t@!%s bra %s;\n", el.s, join);
	if (f->pair)
		/* the pair's MMAs are issued by rank 0 alone */
		emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->rank.s, p.s, join);
	if (emit_mma(e, f, r, tmem, err) < 0)
		return -1;
	emit_label(e, join);
	emit_block(e, "sm100.fmha_teardown");
	/* every TMEM access is complete before the allocating warp frees it
	 * (docs/hardware.md, "Order of a warp-specialized GEMM" step 6): the
	 * epilogue waited for the last MMA's commit, the loads and stores for
	 * wait::ld/st, so the CTA barrier needs no fence::before_thread_sync */
	if (f->pair)
		/* rank 0's barriers take the peer's arrivals and its MMAs read
		 * the peer's smem and TMEM until its last commit landed: both
		 * CTAs free their columns together (docs/cta-pair.md) */
		op_cluster_sync(e);
	else
		op_bar_sync_why(e, 0, f->plan.threads, "CTA: TMEM no longer accessed");
	sm100_fence_after(e);
	emitf(e, "\tsetp.ne.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, r->warp.s, w_mma(f), p.s, out);
	if (sm100_tmem_dealloc_group(e, err, tmem, f->plan.tmem_alloc, 1 + f->pair) < 0)
		return -1;
	emit_label(e, out);
	emitf(e, "\tret;\n");
	return 0;
}

/* ---- plan printout ---------------------------------------------------- */

/* The plans of fmha_cost.h ranked by the fraction of the tensor peak
 * their best tile shape can reach: this kernel's (its own tiles) and the
 * best of each plan the generator does not emit yet. */
static void
describe_candidates(const FmhaCfg *f, const FmhaCost *mine, Buf *o)
{
	static const FmhaPlanKind others[] = {FP_M64, FP_PAIR64};
	struct {
		FmhaCand c;
		FmhaCost cost;
		int emitted;
	} r[3], t;
	int n = 0;

	r[0].c = (FmhaCand){f->pair ? FP_PAIR64 : f->ohalves > 1 ? FP_OSPLIT : FP_CTA, f->d, f->dv, f->esz,
	                    f->kv_shared, qtiles(f), f->bn, f->stages, f->e2f};
	r[0].cost = *mine;
	r[0].emitted = 1;
	n = 1;
	for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
		if (others[i] != r[0].c.kind && sm100_fmha_best(others[i], f->d, f->dv, f->esz, f->kv_shared, f->t->smem_max, &r[n].c,
		                    &r[n].cost)) {
			r[n].emitted = 0;
			n++;
		}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && sm100_fmha_peak(&r[j].cost) > sm100_fmha_peak(&r[j - 1].cost); j--) {
			t = r[j];
			r[j] = r[j - 1];
			r[j - 1] = t;
		}
	buf_printf(o, "candidates      the plans of the cost model (docs/estimate.md, \"sm_100a fmha plans\"), ranked by their best tile's bound per KV tile and CTA:\n");
	for (int i = 0; i < n; i++) {
		const FmhaCost *c = &r[i].cost;
		buf_printf(o, "                  %d. %-8s %3d rows per CTA, %3d keys, %d stage%s: MMA %.0f, ex2 %.0f, issue %.0f, smem %.0f, L2 fill %.0f, exposed load %.0f clk; bound %s -> %.0f%%%s\n",
		           i + 1, sm100_fmha_kind_name(r[i].c.kind), c->rows, r[i].c.bn, r[i].c.stages,
		           r[i].c.stages > 1 ? "s" : "", c->c_mma, c->c_ex2, c->c_issue, c->c_smem, c->c_l2,
		           c->c_exposed, c->bound, 100.0 * sm100_fmha_peak(c),
		           r[i].emitted ? " (this kernel)"
		           : r[i].c.kind == FP_PAIR64 ? " (emitted only without a window)"
		                                      : " (not emitted by kgen yet)");
	}
	for (int i = 0; i < n; i++)
		if (r[i].emitted)
			buf_printf(o, "choice          %s, the best plan the generator emits (%s)\n",
			           sm100_fmha_kind_name(r[i].c.kind),
			           i ? "the plans above it wait for the generator" : "ranked first");
}

static void
sm100_fmha_describe(const FmhaCfg *f, Buf *o)
{
	int qt = qtiles(f);
	FmhaCost est;

	estimate(f, qt, f->bn, f->stages, f->e2f, &est);
	buf_printf(o, "tiles           %d Q tile%s of %d rows per CTA (%s), %d keys per KV tile, %d stages; S slots alternate, S of the next item %s\n",
	           qt, qt > 1 ? "s" : "", f->q_rows, qt > 1 ? "two softmax warpgroups ping-pong on the tensor core" : "one softmax warpgroup",
	           f->bn, f->stages,
	           lookahead(f) ? "is issued before this item's P·V" : "waits for its slot's P·V");
	if (f->pair)
		buf_printf(o, "pair            a cluster of 2 CTAs issues M = 128 cta_group::2 MMAs (data path layout B): each CTA holds 64 query rows of S (%d TMEM columns per slot) and all %d columns of O (%d TMEM columns), loads %d of each tile's %d keys and %d of V's columns per %d; S is computed once, rank 0 issues every MMA; a row's two lane halves exchange max, sum and P through shared memory\n",
		           slot_cols(f), f->dv, f->dvc, f->bn / 2, f->bn, pv_n(f) / 2, pv_n(f));
	if (f->ohalves > 1)
		buf_printf(o, "split           O has %d columns: two S slots (%d) and O (%d) exceed 512 TMEM columns, so the two CTAs of a pair (adjacent in grid x) each own %d O columns and recompute S (%.0f%% of the MMA work is useful). A cta_group::2 plan computes S once (pair64 in the candidates below).\n",
		           f->dv, SLOTS * f->bn, f->dv, f->dvc,
		           100.0 * (f->d + f->dv) / (2.0 * f->d + f->dv));
	buf_printf(o, "estimate        per KV tile and CTA at B200 rates (8192 FLOP, 16 ex2, 128 thread-instructions, 128 smem bytes per clock and SM; a single stage exposes the tile load at 64 B/clock):\n");
	buf_printf(o, "                  MMA %.3g MFLOP (%.0f clk), MUFU ex2 %.0f (%.0f clk; %d of 8 scores by FMA polynomial), softmax issue %.0f (%.0f clk), smem read by MMA %.0f KiB (%.0f clk), TMEM S ld + P st %.0f KiB, exposed load %.0f clk\n",
	           est.mma / 1e6, est.c_mma, est.ex2, est.c_ex2, f->e2f, est.issue, est.c_issue, est.smem / 1024,
	           est.c_smem, est.tmem / 1024, est.c_exposed);
	buf_printf(o, "                  bound: %s, %.0f clk per tile -> at most %.0f%% of tensor peak in useful FLOPs (the tile shape with the best such figure is the default)\n",
	           est.bound, est.clk, 100.0 * est.useful / B200_MMA_FLOP_CLK / est.clk);
	describe_candidates(f, &est, o);
}

const FmhaOps fmha_sm100 = {sm100_fmha_tiles, sm100_fmha_plan, sm100_fmha_setup, sm100_fmha_body,
                            sm100_fmha_describe};
