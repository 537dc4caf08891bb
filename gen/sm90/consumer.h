/* Building blocks of the sm_90a FMHA consumers (consumer.c), shared by the
 * plan of one to three warpgroups taking MMA turns in a ring (fmha.c) and
 * the split-O plan for head-dim 512 (fmha_split.c). Register fragment maps: docs/hardware.md,
 * "wgmma accumulator fragment" and "wgmma A fragment". */
#ifndef KGEN_SM90_CONSUMER_H
#define KGEN_SM90_CONSUMER_H

#include "../fmha.h"
#include "../ops.h"

#define NEG_INF "0fFF800000"

/* Everything one consumer thread keeps across KV tiles. */
typedef struct Consumer {
	Reg S[128], O[128], P[64];
	Reg m[2], l[2], ms[2], nms[2], corr[2], mx[2];
	Reg lim[2];       /* exclusive key limit of rows g and g+8 (masked tiles) */
	Reg klo_row[2];   /* window: lowest visible key of rows g and g+8 */
	Reg rowq[2];      /* query index within the sequence of rows g and g+8 */
	Reg trow[2];      /* rows g and g+8 within the CTA's tile (q_rows·block + ...) */
	Reg hrow[2];      /* their query heads (fmha_emit_row_head) */
	Reg colb;         /* key index of this thread's first S column in the tile */
	Reg j, stage, phase, pstage, pphase;
	Reg myturn, otherturn; /* named barrier ids 1+w and 1+(w+1)%wgs (turn ring) */
	Reg q0, k0, v0, qbar, kbar0, vbar0, kfree0, vfree0, bar;
	Reg qlo, klo, vlo, dhi, vhi, lo, ad, bd;
	Reg t, p, lane0;
	Reg peer;         /* mcast: the other CTA's rank (%cluster_ctarank ^ 1) */
	Reg ntot;         /* mcast: the prologue's n_total (no peer arrival for the last tile) */
	Exp2Mix ex;       /* the exponentials, f->e2f of 8 on the FMA pipe */
	int ocol0, ocols;  /* the O columns this warpgroup holds */
	int l_from_smem;   /* split O: row sums come from the other warpgroup */
	int l_to_smem;     /* split O: publish row sums for the other warpgroup */
	Reg lsum0, lbar;   /* shared address of the row sums and their barrier */
	Reg sc;           /* softmax_scale·log2(e) (fmha_emit_scale_log2) */
	char guard0[16];  /* "@%p ": lane 0 of the warp */
	uint32_t dq_lo, dv_lo; /* descriptor low words at address 0 (LBO field) */
} Consumer;

/* Which of the thread's two rows (g, g+8) accumulator register i is in. */
static inline int
row_of(int i)
{
	int drow, dcol;

	wgmma_acc_reg(i, &drow, &dcol);
	return drow / 8;
}

/* The column of accumulator register i past the thread's first column. */
static inline int
col_of(int i)
{
	int drow, dcol;

	wgmma_acc_reg(i, &drow, &dcol);
	return dcol;
}

/* Allocates the consumer's registers, descriptors and row bookkeeping
 * (the caller waits on c->qbar if it reads Q). */
int fmha90_consumer_init(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, Reg wgc,
                         Reg row_block, int ocol0, int ocols, KgErr *err);
void fmha90_scores_issue(Emit *e, const FmhaCfg *f, Consumer *c);
void fmha90_mask(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c);
void fmha90_softmax_exp(Emit *e, const FmhaCfg *f, Consumer *c);
void fmha90_softmax_rescale(Emit *e, const FmhaCfg *f, Consumer *c, int pack);
void fmha90_release_k(Emit *e, const FmhaCfg *f, Consumer *c);
/* Lane 0 of the warp arrives on the free barrier c->bar names, the slot
 * of tile c->j - prev; mcast: on the peer CTA's too, and for neither on
 * the CTA's last tile: no producer waits for that slot, so no arrival can
 * reach the peer after it exited (its producer waited for every earlier
 * one before loading the last tile, which its consumers wait for), and no
 * barrier is left with a phase half arrived. */
void fmha90_free(Emit *e, const FmhaCfg *f, Consumer *c, int prev);
void fmha90_advance(Emit *e, const FmhaCfg *f, Consumer *c);
int fmha90_epilogue(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Consumer *c, KgErr *err);

/* Warpgroup 0, the producer, in both plans: gives registers back (role 0
 * of the plan), lets one elected lane of warp 0 issue the TMA loads
 * (fmha_emit_producer) and sends everyone else to `out`; p and el are
 * scratch predicates. */
int fmha90_producer_role(Emit *e, const FmhaCfg *f, const FmhaRegs *r, Reg p, Reg el,
                         const char *out, KgErr *err);

/* A KV loop's labels and bound (fmha90_loop_head / fmha90_loop_foot). */
typedef struct FmhaLoop {
	char loop[48], done[48];
	Reg end;
} FmhaLoop;
int fmha90_loop_head(Emit *e, KgErr *err, const FmhaCfg *f, Consumer *c, const char *name,
                     const char *block, Reg end, FmhaLoop *l);
void fmha90_loop_foot(Emit *e, Consumer *c, const FmhaLoop *l);

#endif
