/* wgmma issue, fence, commit and wait on sm_90a (mma.h), and the
 * accumulator fragment map. */
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

void
sm90_wgmma(Emit *e, int n, DType in, const Reg *acc, const Reg *adesc, const Reg *afrag, Reg bdesc,
           int scale_d, int trans_b)
{
	const char *t = in == DT_BF16 ? "bf16" : "f16";

	/* operands: d, a, b-desc, scale-d, imm-scale-a, imm-scale-b, [imm-trans-a,]
	 * imm-trans-b (PTX §9.7.15.5.2); the RS form has no trans-a */
	if (afrag)
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
	int w = t / 32, l = t % 32;

	*row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
	*col = 2 * (l % 4) + (i % 2) + 8 * (i / 4);
}
