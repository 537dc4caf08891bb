/* wgmma building blocks (PTX §9.7.15; hardware-facts §4): issue, fences,
 * groups, and the accumulator fragment map. */
#ifndef KGEN_SM90_MMA_H
#define KGEN_SM90_MMA_H

#include "../dtype.h"
#include "../emit.h"

void sm90_wgmma_fence(Emit *e);
void sm90_wgmma_commit(Emit *e);
void sm90_wgmma_wait(Emit *e, int pending);
/* D(64xN, f32) += A(64x16 via desc) · B(Nx16 via desc)^T, both K-major. */
void sm90_wgmma_ss(Emit *e, int n, DType in, const Reg *acc, Reg adesc, Reg bdesc);
/* Row and column inside the 64xN tile of accumulator register i of thread
 * t of the warpgroup (hardware-facts §4.2, H200-checked). */
void sm90_acc_coord(int t, int i, int *row, int *col);
void sm90_setmaxnreg(Emit *e, int inc, int regs);

#endif
