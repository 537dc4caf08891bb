/* The static cost of one KV tile of an sm_100a fmha plan (fmha_cost.h;
 * docs/estimate.md, "sm_100a fmha plans"). */
#include <string.h>

#include "../layout.h"
#include "fmha_cost.h"
#include "rates.h"

/* op_exp2_fma takes ten instructions where ex2 took one. The H100 agrees
 * on the extra nine: at hd64, each eighth of the exponentials moved to the
 * polynomial added the issue time of 8.5 instructions per moved
 * exponential (BENCHMARKS.md). */
#define SOFTMAX_ISSUE_PER_SCORE SM100_SOFTMAX_ISSUE_PER_SCORE
#define EXP2_FMA_EXTRA_ISSUE 9.0
/* The TMA fill of shared memory from L2 per clock and SM: assumed, as on
 * the H100 (docs/estimate.md, "H100 rates"); a single stage exposes it. */
#define L2_B_CLK 64.0
/* A pair64 softmax thread per tile: the row-max hand-off to the thread
 * holding the row's other half (st.shared, bar.sync, ld.shared, max) */
#define PAIR_MAX_ISSUE 4.0
/* registers of a softmax thread beyond its scores (row state, addresses,
 * mask limits), and the most one thread may have */
#define SOFTMAX_REGS_BASE 40
#define REGS_MAX 240
/* shared memory of a plan beyond Q and the KV stages: barriers, the TMEM
 * address, rescale factors (the generator's plan holds the exact figure) */
#define SMEM_FIXED 2048

static const char *const kind_names[FP_COUNT] = {
	[FP_CTA] = "cta",
	[FP_OSPLIT] = "o-split",
	[FP_M64] = "m64",
	[FP_PAIR64] = "pair64",
};

const char *
sm100_fmha_kind_name(FmhaPlanKind k)
{
	return k < FP_COUNT ? kind_names[k] : "?";
}

/* Per kind: what one CTA of the plan owns. rows: query rows; dvc: O
 * columns; split: O columns are split over a pair (S recomputed); rate:
 * the tensor core's FLOPs per clock at the plan's M (M = 64 uses half the
 * data path, PTX "Layout F"; docs/hardware.md, "Accumulator layout in
 * TMEM"). */
static void
amounts(const FmhaCand *c, FmhaCost *o)
{
	double bn = c->bn, d = c->d, dv = c->dv, esz = c->esz;
	double exp_share = (8 - c->e2f) / 8.0, issue_score = SOFTMAX_ISSUE_PER_SCORE + EXP2_FMA_EXTRA_ISSUE * c->e2f / 8.0;
	double rate = B200_MMA_FLOP_CLK;

	switch (c->kind) {
	case FP_CTA:
	case FP_OSPLIT: {
		int halves = c->kind == FP_OSPLIT ? 2 : 1;
		double dvc = dv / halves, rows = 128.0 * c->qt;
		o->rows = 128 * c->qt;
		o->mma = 2.0 * rows * bn * (d + dvc);
		o->ex2 = rows * (bn * exp_share + 1);
		o->issue = rows * bn * issue_score;
		/* Q and K per S, V per P·V; P comes from TMEM */
		o->smem = c->qt * (128.0 * d + bn * d + bn * dvc) * esz;
		o->tmem = rows * bn * (4 + 2);
		o->l2 = bn * d * esz + (c->kv_shared ? 0.0 : bn * dvc * esz);
		o->useful = 2.0 * rows * bn * (d + dv) / halves;
		o->tmem_cols = 2 * c->bn + c->qt * (int)dvc;
		o->smem_bytes = (uint32_t)(c->qt * 128.0 * d * esz + c->stages * o->l2);
		break;
	}
	case FP_M64:
		/* 64 rows in lanes 0-15 of each quarter: a warp instruction
		 * serves 16 rows, so the issue counts 128 threads per row pair */
		o->rows = 64;
		o->mma = 2.0 * 64 * bn * (d + dv);
		o->ex2 = 64 * (bn * exp_share + 1);
		o->issue = 2.0 * 64 * bn * issue_score;
		o->smem = (64.0 * d + bn * d + bn * dv) * esz;
		o->tmem = 64 * bn * (4 + 2);
		o->l2 = bn * d * esz + (c->kv_shared ? 0.0 : bn * dv * esz);
		o->useful = o->mma;
		/* S slots in the lane halves (bn), a copy of P at O's other
		 * lane alignment (bn/2), O's column halves in the lane halves */
		o->tmem_cols = c->bn + c->bn / 2 + c->dv / 2;
		o->smem_bytes = (uint32_t)(64.0 * d * esz + c->stages * o->l2);
		rate = B200_MMA_FLOP_CLK / 2.0;
		break;
	case FP_PAIR64:
		/* per CTA: 64 rows of the pair's 128; S keys 0..bn/2-1 of a row
		 * in lane r, bn/2.. in lane r+64 (Layout B), so 128 softmax
		 * threads take half a row each, hand their half of P to the
		 * other (shared memory) and store the whole row's P in their
		 * lane: the TS MMA reads A duplicated in both lane halves. */
		o->rows = 64;
		o->mma = 2.0 * 64 * bn * (d + dv);
		o->ex2 = 64 * bn * exp_share + 128;
		o->issue = 64 * bn * issue_score + 128 * (PAIR_MAX_ISSUE + bn / 2);
		/* Q (64 rows), K (this CTA's bn/2 keys), V (this CTA's dv/2
		 * columns of all bn keys), the P hand-off written and read */
		o->smem = (64.0 * d + bn / 2 * d + bn * dv / 2) * esz + 128 * bn * esz;
		o->tmem = 64 * bn * (4 + 4);
		/* K=V too: the key half for S and the V half for P·V are
		 * loaded apart (the generator's pair64; the key half holds half
		 * of the V half, which a later plan could reuse) */
		o->l2 = (bn / 2 * d + bn * dv / 2) * esz;
		o->useful = o->mma;
		/* two S slots and O in Layout B (docs/hardware.md, "Accumulator layout of the CTA pair") */
		o->tmem_cols = 2 * tmem_pair128_d_cols(c->bn) + tmem_pair128_d_cols(c->dv);
		o->smem_bytes = (uint32_t)(64.0 * d * esz + c->stages * o->l2 + 64 * bn * esz);
		break;
	default:
		break;
	}
	o->smem_bytes += SMEM_FIXED;
	o->c_mma = o->mma / rate;
}

void
sm100_fmha_cost(const FmhaCand *c, FmhaCost *o)
{
	memset(o, 0, sizeof *o);
	o->bound = "-";
	if (c->bn <= 0 || c->kind >= FP_COUNT)
		return;
	amounts(c, o);
	o->c_ex2 = o->ex2 / B200_EX2_CLK;
	o->c_issue = o->issue / B200_ISSUE_CLK;
	o->c_smem = o->smem / B200_SMEM_B_CLK;
	o->c_l2 = o->l2 / L2_B_CLK;
	o->c_exposed = c->stages > 1 ? 0.0 : o->c_l2;
	/* the slowest unit bounds the tile (the first of equals) */
	const struct {
		double clk;
		const char *name;
	} units[] = {
		{o->c_mma, "tensor core"},
		{o->c_ex2, "exp unit"},
		{o->c_issue, "softmax instruction issue"},
		{o->c_smem, "shared-memory bandwidth"},
		{o->c_l2, "TMA fill from L2"},
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (units[i].clk > o->clk) {
			o->clk = units[i].clk;
			o->bound = units[i].name;
		}
	o->clk += o->c_exposed;
}

double
sm100_fmha_peak(const FmhaCost *o)
{
	return o->clk > 0 ? o->useful / B200_MMA_FLOP_CLK / o->clk : 0.0;
}

/* The MMA shapes the kind issues are legal (docs/hardware.md, "MMA
 * shapes"): S has N = keys, 16..256 in steps of 16 (M = 64: steps of 8). */
static int
fits(const FmhaCand *c, const FmhaCost *o, uint32_t smem_max)
{
	int scores = c->kind == FP_PAIR64 ? c->bn / 2 + c->bn / 4 : c->bn;

	return c->bn <= 256 && o->tmem_cols <= 512 && o->smem_bytes <= smem_max &&
	       2 * scores + SOFTMAX_REGS_BASE <= REGS_MAX;
}

int
sm100_fmha_best(FmhaPlanKind kind, int d, int dv, int esz, int kv_shared, uint32_t smem_max,
                FmhaCand *best, FmhaCost *cost)
{
	static const int keys[] = {128, 64, 32};
	int found = 0;

	if (kind != FP_M64 && kind != FP_PAIR64)
		return 0;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		for (int st = kv_shared ? 3 : 4; st >= 1; st--)
			for (int e2f = 0; e2f <= 4; e2f++) {
				FmhaCand c = {kind, d, dv, esz, kv_shared, 1, keys[i], st, e2f};
				FmhaCost o;
				sm100_fmha_cost(&c, &o);
				if (!fits(&c, &o, smem_max))
					continue;
				/* ties keep the earlier: more keys, more stages, fewer polynomials */
				if (!found || sm100_fmha_peak(&o) > sm100_fmha_peak(cost) * 1.0001) {
					*best = c;
					*cost = o;
					found = 1;
				}
			}
	return found;
}
