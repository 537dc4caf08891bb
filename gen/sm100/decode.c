/* Decode on sm_100a: fmha's tcgen05 pipeline (gen/sm100/fmha.c: MMA warp,
 * softmax and correction warpgroups, S and O in TMEM, K=V shared tile)
 * fed by the gathering producer warpgroup (decode_gather_warpgroup: the
 * same generic-proxy stores into the same K-major 128-byte swizzled tiles
 * as on sm_90a, published by fence.proxy.async before the K=V full
 * arrival, which tcgen05.mma reads through the async proxy like wgmma;
 * PTX ISA "Asynchronous proxy").
 *
 * The 64 heads of a head block fill rows 0..63 of an M=128 tcgen05.mma
 * (docs/hardware.md, "Accumulator layout in TMEM", Layout D: row r in
 * lane r, one softmax thread per row). O has 512 columns; with two S
 * slots they exceed TMEM's 512, so, as fmha does for head_dim_v 512, the
 * two CTAs of a pair (adjacent in grid x) each own 256 O columns and both
 * compute S. The Q tile in shared memory holds only the 64 rows: the
 * MMA's rows 64..127 lie one 8-row group stride (SBO) x 8 further, which
 * is rows 0..63 of the next 64-column slice (docs/hardware.md,
 * "Shared-memory descriptor (sm_100)"), and, for the last slice, a zero
 * slice planned after Q (DecodeCfg.q_pad_slices). Those rows compute
 * finite scores whose O is never stored (their query row, 1, is past
 * s_q = 1 of the CTA). */
#include <stdio.h>
#include <string.h>

#include "../decode.h"
#include "../ops.h"
#include "fmha_cost.h"
#include "rates.h"

/* Softmax thread-instructions per score (fmha_cost.h) and the gather's
 * per E4M3 word (ld share, 2 cvt.f16x2.e4m3x2, 4 cvt.f32.f16, 4 mul, 2
 * cvt.bf16x2, moves: about 16). */
#define SOFTMAX_ISSUE_PER_SCORE SM100_SOFTMAX_ISSUE_PER_SCORE
#define GATHER_ISSUE_PER_WORD 16.0

static int
sm100_decode_configure(DecodeCfg *d, KgErr *err)
{
	FmhaCfg *f = &d->f;

	(void)err;
	f->split = 0;
	f->q_rows = 128;
	f->bm = 128;
	f->qblocks = 1;
	f->wgs = 1;
	f->htiles = 1;
	f->rows = f->q_rows / f->pack;
	/* two S slots of 64 keys and one O accumulator of dv/2 columns in
	 * TMEM's 512 (docs/hardware.md, "TMEM addressing") */
	f->ohalves = 2;
	f->dvc = f->dv / f->ohalves;
	f->bn = 64;
	/* Q (64 KiB), the zero slice (8 KiB) and two 64-key K=V stages (64
	 * KiB each) fit 227 KiB; a third stage does not */
	f->stages = 2;
	f->e2f = 0;
	d->q_pad_slices = 1;
	d->cons_tid0 = 0;
	d->cons_threads = 128;
	return 0;
}

/* The zero slice after Q (rows 64..127 of the last slice's MMA), then the
 * shared gather. Its stores precede the gather's first fence.proxy.async
 * and K=V full arrival, which publish them with Q. */
static int
sm100_decode_gather(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err)
{
	const DecodeCfg *d = f->ext;
	uint32_t slice = f->lq.slice_bytes, per = slice / 128;
	Reg pad, a = reg_new(e, RC_B32), z = reg_new(e, RC_B32);

	if (slice != 64 * 128 || per % 16)
		return kg_fail(err, "sm_100a decode: a Q slice of %u bytes; the M=128 MMA reads rows 64..127 one 64-row slice on (64 rows of 128 bytes)",
		               slice);
	emit_block(e, "sm100.decode_qpad");
	pad = op_plan_smem(e, &f->plan, r->base, f->r_q);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b32 %s, 0;\n", pad.s, pad.s, (uint32_t)f->d / 64 * slice, z.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", a.s, r->tid.s, per, pad.s);
	for (uint32_t o = 0; o < per; o += 16)
		emitf(e, "\tst.shared.v4.b32 [%s+%u], {%s, %s, %s, %s};\n", a.s, o, z.s, z.s, z.s, z.s);
	(void)d;
	return decode_gather_warpgroup(e, f, r, err);
}

/* Per key and head block at B200 rates: what HBM must deliver (one token
 * row and its scales, shared by every head block and CTA that gathers it:
 * the second CTA of a pair and other head blocks hit L2) against what
 * the two CTAs of the pair compute (each: S over 128 rows and d_qk, its
 * 256 O columns, the softmax of 128 rows, the gather's dequantization;
 * shared memory: the SS MMA rereads the 128-row Q for every S, then K and
 * its V columns, and the gather stores the bf16 row). */
static void
sm100_decode_bound(const DecodeCfg *d, Buf *out)
{
	const FmhaCfg *f = &d->f;
	double hbm = d->fmt->row_bytes + d->fmt->scale_bytes;
	double mma = 2.0 * 128 * (f->d + f->dvc) / B200_MMA_FLOP_CLK;
	double ex2 = 128.0 / B200_EX2_CLK;
	double words = d->fmt->d_nope / 4.0;
	double issue = (128.0 * SOFTMAX_ISSUE_PER_SCORE + words * GATHER_ISSUE_PER_WORD) / B200_ISSUE_CLK;
	double smem = ((128.0 * f->d) / f->bn + f->d + f->dvc + f->d) * 2 / B200_SMEM_B_CLK;
	double cta = mma > issue ? mma : issue;

	if (smem > cta)
		cta = smem;
	/* one K=V stage (head_dim_qk 576: two do not fit): a tile's gather
	 * waits for the P.V of the one before, the MMA for the gather, so
	 * the gather's issue and stores add to the rest instead of overlapping */
	if (f->stages == 1) {
		double g_issue = words * GATHER_ISSUE_PER_WORD / B200_ISSUE_CLK, g_smem = f->d * 2.0 / B200_SMEM_B_CLK;
		double rest = 128.0 * SOFTMAX_ISSUE_PER_SCORE / B200_ISSUE_CLK;
		double mma_smem = ((128.0 * f->d) / f->bn + f->d + f->dvc) * 2 / B200_SMEM_B_CLK;

		if (mma > rest)
			rest = mma;
		if (mma_smem > rest)
			rest = mma_smem;
		cta = (g_issue > g_smem ? g_issue : g_smem) + rest;
	}
	double clk_token = cta * f->ohalves * d->hblocks;   /* SM clocks per token of a query row */
	/* SM clocks of HBM time per token, the whole GPU's HBM shared by its SMs */
	double hbm_clk = hbm * B200_SMS * B200_CLK_MHZ * 1e6 / (B200_HBM_GB_S * 1e9);
	double useful = 2.0 * d->hq * (f->d + f->dv);

	buf_printf(out, "bound           B200, per token of a query row: %.0f HBM bytes (%.1f SM-clk at %.0f TB/s over %d SMs) vs %d CTA%s x %s(tensor %.1f clk [M=128 of which %d rows are heads, S recomputed per O half], shared memory %.1f clk [Q reread per S, K, V, the gather's stores], issue %.1f clk [softmax + dequant], ex2 %.1f clk) = %.1f SM-clk\n",
	           hbm, hbm_clk, B200_HBM_GB_S / 1e3, B200_SMS, f->ohalves * d->hblocks, f->ohalves * d->hblocks > 1 ? "s" : "",
	           f->stages == 1 ? "[one K=V stage: the gather, then the rest] " : "max", mma,
	           d->hq < 64 ? d->hq : 64, smem, issue, ex2, clk_token);
	double clk = clk_token > hbm_clk ? clk_token : hbm_clk, tok_s = B200_SMS * B200_CLK_MHZ * 1e6 / clk;

	buf_printf(out, "                -> %s-bound: at most %.2f TB/s of unique KV (%.0f%% of HBM), %.0f TFLOP/s useful (%.0f%% of bf16 peak); rows 64..127 and the S recompute are the price of reusing fmha's M=128 pipeline (an M=64 Layout F plan with O halves at lane offsets 0/16 would remove both)\n",
	           clk_token <= hbm_clk ? "HBM" : f->stages == 1 ? "serialized-gather" : cta == smem ? "shared-memory" : cta == mma ? "tensor" : "issue", tok_s * hbm / 1e12, 100.0 * hbm_clk / clk,
	           tok_s * useful / 1e12, 100.0 * useful / clk / B200_MMA_FLOP_CLK);
}

const DecodeOps decode_sm100 = {
	sm100_decode_gather,
	0, /* no setmaxnreg: every warpgroup keeps the entry 128 (gen/sm100/fmha.c, plan) */
	"sm_100a: E4M3 -> f16 -> f32 x 2^(e-127) -> bf16 in the gathering warpgroup's registers, stored to "
	"smem for kind::f16 tcgen05.mma; exact (E4M3 times a power of two fits bf16), so the only rounding "
	"is the bf16 P. kind::f8f6f4 with FP8 Q would halve the K=V tile but round Q to E4M3 (~2^-4 "
	"relative per element) and still need V in a second format for P.V: not taken",
	sm100_decode_configure,
	sm100_decode_bound,
	NULL,
	0, /* the combine's waiting path hangs on the emulator here (a cluster per row): not taken */
	0, /* its addresses spill the 128-register gatherer of the unnormalized kernel; unmeasured here */
	0, /* today's register gather */
	NULL, /* the gather loads Q: load_q is called by the sm_90a split-O consumers only */
	NULL, /* Q's rows are prefetched into L2 in the prologue */
};
