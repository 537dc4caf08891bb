/* The sm_90a launch-time model (docs/estimate.md): one tile of a plan,
 * priced unit by unit at H100 rates (rates.h), and a CTA's fixed cost.
 * gen/estimate.c lays the CTAs onto the SMs. */
#include <stdio.h>

#include "../estimate.h"
#include "../fmha.h"
#include "../gemm.h"
#include "rates.h"

/* Softmax thread-instructions per score (max, scale FMA, ex2, sum, half a
 * cvt pack; the polynomial exp2 nine more), the mask's per score (index,
 * compare, select), and per thread and tile the rest of a consumer's loop
 * (barrier waits, descriptors, wgmma issue, row statistics): counted in
 * emitted/sm_90a/fmha_bf16_d128_h16kv16_causal_m128n176_s2_sm90a.ptx. */
#define SOFTMAX_ISSUE_PER_SCORE 4.5
#define EXP2_FMA_EXTRA_ISSUE 9.0
#define MASK_ISSUE_PER_SCORE 3.0
#define LOOP_ISSUE_PER_THREAD 90.0

static const EstGpu h100 = {"H100 SXM", H100_SMS, H100_CLK_MHZ, H100_LAUNCH_NS / 1000.0,
                            H100_HBM_GB_S};

static double
mma_rate(DType t)
{
	return dtype_bits(t) == 8 ? H100_MMA_FP8_FLOP_CLK : H100_MMA_FLOP_CLK;
}

/* CTAs resident per SM: registers (the entry cap x threads), threads and
 * shared memory (1 KiB of it reserved per CTA). */
static int
per_sm(const Plan *p)
{
	int regs = p->regs_entry * p->threads, n = H100_SM_REGS / (regs > 0 ? regs : 1);
	int by_smem = H100_SM_SMEM_BYTES / (int)(p->smem_request + 1024);
	int by_threads = H100_SM_THREADS / p->threads;

	if (by_smem < n)
		n = by_smem;
	if (by_threads < n)
		n = by_threads;
	return n < 1 ? 1 : n;
}

/* One KV tile for the whole CTA: every consumer warpgroup's 64 rows
 * against bn keys. Ping-pong (W warpgroups taking MMA turns): the tensor
 * core runs W turns per tile while the warpgroups not at their turn run
 * their softmax, which the ring hides only in part (the p-norm of the
 * two); one warpgroup's own S, softmax and P·V must also fit (its chain).
 * Split O (head dims above 256): S, the softmax and P's trip through
 * shared memory run in series with the P·V halves, the tensor core idle
 * meanwhile. */
static void
fmha(const FmhaCfg *f, Estimate *e)
{
	double r = mma_rate(f->in), rows = 64, bn = f->bn;
	double kv = bn * f->d * f->esz + (f->kv_shared ? 0.0 : bn * f->dv * f->esz);
	double ex2 = rows * (bn * (8 - f->e2f) / 8.0 + 1) / H100_EX2_CLK;
	double soft = rows * bn * (SOFTMAX_ISSUE_PER_SCORE + EXP2_FMA_EXTRA_ISSUE * f->e2f / 8.0);
	/* mcast halves the bytes each SM requests from L2, not those it
	 * receives: every tile still lands whole in each CTA's shared memory
	 * at the SM's port rate, and the H100 ran the multicast kernels no
	 * faster (docs/estimate.md, "K/V multicast") */
	double load = kv / H100_L2_B_CLK;

	e->per_sm = per_sm(&f->plan);
	if (f->split) {
		double s = 2 * rows * bn * f->d / r, pv = 2 * rows * bn * f->dv / r;
		double smem = ((rows + bn) * f->d + 2 * rows * bn + bn * f->dv) * f->esz / H100_SMEM_B_CLK;
		double chain = (ex2 > soft / H100_ISSUE_CLK ? ex2 : soft / H100_ISSUE_CLK) +
		               128.0 * (f->dv / 4 + LOOP_ISSUE_PER_THREAD) / H100_ISSUE_CLK + H100_HANDOFF_CLK;
		double need = H100_LOAD_LAT_CLK + bn * f->d * f->esz / H100_L2_B_CLK, win;
		snprintf(e->tile, sizeof e->tile, "KV tile of %d keys against 64 query rows (split O%s%s)", f->bn,
		         f->s_ahead ? ", S ahead" : "", f->mcast ? ", K/V multicast to a cluster of 2" : "");
		est_unit(e, "tensor core", s + pv);
		est_unit(e, "shared memory", smem);
		est_unit(e, "K/V from L2", load);
		if (f->s_ahead) {
			/* S_{j+1} is issued before P_j's hand-off and the O
			 * rescale. The warpgroups' wgmmas share the tensor core
			 * rather than queue in issue order, so S_{j+1} completes
			 * with P_j·V_j, not before it: the softmax and P's stores
			 * (the chain less the rescale, which runs under S) and the
			 * wait for P·V's completion follow both, as the H100
			 * measured (docs/estimate.md, "Split O with S ahead"). */
			double sm = chain - 128.0 * (f->dv / 4) / H100_ISSUE_CLK;
			win = sm + H100_WGMMA_LAT_CLK;
			est_unit(e, "scores warpgroup cycle", s + pv + win);
			e->serial_clk = 0;
		} else {
			/* the softmax and P's hand-off: the tensor core waits for them */
			e->serial_clk = chain;
			win = chain + pv;
		}
		/* one stage: the next K waits for this S, then its latency */
		if (f->stages == 1)
			e->serial_clk += need > win ? need - win : 0;
		e->masked_clk = rows * bn * MASK_ISSUE_PER_SCORE / H100_ISSUE_CLK;
		e->fill_clk = H100_CTA_CLK + H100_LOAD_LAT_CLK + (f->q_bytes + kv) / H100_L2_B_CLK + s;
		e->drain_clk = pv + H100_WGMMA_LAT_CLK + rows * f->dv * f->esz / H100_STORE_B_CLK;
		return;
	}
	int w = f->wgs;
	double mma = 2 * rows * bn * (f->d + f->dv) / r;
	double issue = (soft + 128.0 * (f->dv / 2 + LOOP_ISSUE_PER_THREAD)) / H100_ISSUE_CLK;
	double softmax = ex2 > issue ? ex2 : issue;
	snprintf(e->tile, sizeof e->tile, "KV tile of %d keys against %d x 64 query rows (MMA turns)",
	         f->bn, w);
	/* W warpgroups' MMAs take turns on the tensor core while the others
	 * run their softmax (ex2 and the rest of the issue): the ring overlaps
	 * the two imperfectly */
	est_unit(e, "MMA ring with softmax", est_overlap(w * mma, w * softmax, H100_SOFTMAX_OVERLAP_P10 / 10.0));
	est_unit(e, "shared memory", w * ((rows + bn) * f->d + bn * f->dv) * f->esz / H100_SMEM_B_CLK);
	est_unit(e, "K/V from L2", load);
	est_unit(e, "one warpgroup's chain", mma + softmax);
	e->masked_clk = w * rows * bn * MASK_ISSUE_PER_SCORE / H100_ISSUE_CLK;
	e->fill_clk = H100_CTA_CLK + H100_LOAD_LAT_CLK + (f->q_bytes + kv) / H100_L2_B_CLK +
	              2 * rows * bn * f->d / r;
	e->drain_clk = 2 * rows * bn * f->dv / r + H100_WGMMA_LAT_CLK +
	               w * rows * f->dv * f->esz / H100_STORE_B_CLK;
}

/* wgmma operand bytes per clock from shared memory for this swizzle span */
static double
smem_rate(int span)
{
	for (size_t i = 0; i < sizeof h100_smem_by_span / sizeof h100_smem_by_span[0]; i++)
		if (h100_smem_by_span[i].span == span)
			return h100_smem_by_span[i].b_clk;
	return H100_SMEM_B_CLK;
}

/* One K tile of the CTA's output tile: the consumers' wgmmas, the bytes
 * they read from shared memory (each warpgroup its 64 rows of A and all of
 * B) at the swizzle's rate, the stage's TMA bytes; block-scaled, each
 * warpgroup waits for the K block's MMAs (its own and, queued before them,
 * the other's), then scales them into the accumulator, in series. The
 * epilogue stores C from registers after the last tile. */
static void
gemm(const GemmCfg *g, Estimate *e)
{
	double r = mma_rate(g->in), c = g->consumers, tm = g->tm, tn = g->tn, tk = g->tk;
	double mma = 2 * tm * tn * tk / r, stage = (tm + tn) * tk * g->esz_in;

	e->per_sm = per_sm(&g->plan);
	snprintf(e->tile, sizeof e->tile, "K tile of %d (a %dx%d output tile)", g->tk, g->tm, g->tn);
	if (g->w4a8) {
		/* W4A8 (gen/sm90/gemm_w4a8.c): per consumer thread and K block
		 * about 50 instructions of folding, 8 x 17 of table lookup, FP4
		 * loads and expansion, 30 of wgmma issue, scale prefetch and ring
		 * (counted in the emitted PTX), and the promotion's tile-m/2
		 * FMAs; the stage is tile-m x 128 token bytes, tile-n x 64 FP4
		 * bytes and tile-n x 4 exponent bytes */
		double issue = 50 + 8 * 17 + 30 + tm / 2, bytes = tm * tk + tn * (tk / 2 + tk / 32);
		est_unit(e, "tensor core", mma);
		est_unit(e, "tokens + FP4 weights from L2", bytes / H100_L2_B_CLK);
		est_unit(e, "instruction issue", c * 128 * issue / H100_ISSUE_CLK);
		e->fill_clk = H100_CTA_CLK + H100_LOAD_LAT_CLK + bytes / H100_L2_B_CLK;
		e->drain_clk = H100_WGMMA_LAT_CLK + tm * tn * g->esz_out / H100_STORE_B_CLK;
		return;
	}
	/* wgmma against its operand reads from shared memory */
	est_unit(e, "tensor core with smem reads",
	         est_overlap(mma, c * (64 + tn) * tk * g->esz_in / smem_rate(g->span), H100_SMEM_OVERLAP_P10 / 10.0));
	est_unit(e, "A/B from L2", stage / H100_L2_B_CLK);
	if (g->sblock) {
		/* per thread: tn/2 FMAs of acc += tmp * SA * SB, ~16 for the
		 * scales' loads and products (gen/sm90/gemm.c emit_promote) */
		double promote = tn / 2 + 16;
		est_unit(e, "instruction issue", c * 128 * promote / H100_ISSUE_CLK);
		est_unit(e, "one warpgroup's chain", mma + H100_WGMMA_LAT_CLK + promote);
	}
	e->fill_clk = H100_CTA_CLK + H100_LOAD_LAT_CLK + stage / H100_L2_B_CLK;
	e->drain_clk = H100_WGMMA_LAT_CLK + tm * tn * g->esz_out / H100_STORE_B_CLK;
}

const EstOps est_sm90 = {&h100, fmha, gemm};
