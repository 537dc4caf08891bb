/* wgmma issue, fence, commit and wait on sm_90a (mma.h), and the
 * accumulator fragment map. */
#include "../layout.h"
#include "mma.h"

void
sm90_wgmma_fence(Emit *e)
{
	/* Required before a wgmma whose accumulator registers were written by
	 * other instructions (docs/hardware.md, "wgmma syntax and fences"). */
	emitf(e, "\twgmma.fence.sync.aligned;\n");
}

void
sm90_wgmma_commit(Emit *e)
{
	emitf(e, "\twgmma.commit_group.sync.aligned;\n");
}

void
sm90_wgmma_wait(Emit *e, int pending)
{
	emitf(e, "\twgmma.wait_group.sync.aligned %d;\n", pending);
}

/* Columns: input type, its wgmma spelling, K of one MMA (32 bytes of K), and
 * whether the form has transpose operands (only 16-bit inputs may be
 * MN-major; PTX ISA §9.7.15.5.2; docs/hardware.md, "wgmma syntax and fences"). */
static const struct {
	DType in;
	const char *name;
	int k, trans;
} wgmma_types[] = {
	{DT_BF16, "bf16", 16, 1},
	{DT_F16, "f16", 16, 1},
	{DT_E4M3, "e4m3", 32, 0},
	{DT_E5M2, "e5m2", 32, 0},
};

void
sm90_wgmma(Emit *e, int n, DType in, const Reg *acc, const Reg *adesc, const Reg *afrag, Reg bdesc,
           int scale_d, int trans_b)
{
	const char *t = "?";
	int k = 0, trans = 1;

	for (size_t i = 0; i < sizeof wgmma_types / sizeof wgmma_types[0]; i++)
		if (wgmma_types[i].in == in) {
			t = wgmma_types[i].name;
			k = wgmma_types[i].k;
			trans = wgmma_types[i].trans;
		}
	/* operands: d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, [imm-trans-a,]
	 * imm-trans-b (PTX §9.7.15.5.2); the RS form has no trans-a, FP8 neither */
	if (!trans)
		emitf(e, "\twgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s %s, %s, %s, %d, 1, 1;\n", n, k, t,
		      t, reg_vec(e, acc, n / 2), afrag ? reg_vec(e, afrag, 4) : adesc->s, bdesc.s, scale_d);
	else if (afrag)
		emitf(e, "\twgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s %s, %s, %s, %d, 1, 1, %d;\n", n,
		      t, t, reg_vec(e, acc, n / 2), reg_vec(e, afrag, 4), bdesc.s, scale_d, trans_b);
	else
		emitf(e, "\twgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s %s, %s, %s, %d, 1, 1, 0, %d;\n",
		      n, t, t, reg_vec(e, acc, n / 2), adesc->s, bdesc.s, scale_d, trans_b);
	emit_need_ptx(e, 80);
}

void
sm90_wgmma_ss(Emit *e, int n, DType in, const Reg *acc, Reg adesc, Reg bdesc)
{
	/* scale-d = 1: gemm's accumulators start at zero, so every MMA adds */
	sm90_wgmma(e, n, in, acc, &adesc, NULL, bdesc, 1, 0);
}

void
sm90_acc_coord(int t, int i, int *row, int *col)
{
	int drow, dcol;

	wgmma_acc_reg(i, &drow, &dcol);
	*row = wgmma_acc_row(t) + drow;
	*col = wgmma_acc_col(t) + dcol;
}

/* Lanes that share a row: the first thread whose row is 1 (4). */
static int
lanes_per_row(void)
{
	int t = 0;

	while (wgmma_acc_row(t) == 0)
		t++;
	return t;
}

void
sm90_acc_row0(Emit *e, Reg row0, Reg block, Reg warp, Reg lane, Reg t)
{
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, %d;\n", t.s, warp.s, t.s, t.s,
	      log2_ceil(wgmma_acc_row(32)));
	/* a warpgroup's accumulator is M = 64 rows (wgmma m64nNk16) */
	emitf(e, "\tmad.lo.u32 %s, %s, 64, %s;\n", row0.s, block.s, t.s);
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n", t.s, lane.s, log2_ceil(lanes_per_row()),
	      row0.s, row0.s, t.s);
}

void
sm90_acc_col0(Emit *e, Reg col0, Reg lane)
{
	emitf(e, "\tand.b32 %s, %s, %d;\n\tshl.b32 %s, %s, %d;\n", col0.s, lane.s, lanes_per_row() - 1,
	      col0.s, col0.s, log2_ceil(wgmma_acc_col(1)));
}
