/* wgmma building blocks (PTX §9.7.15; docs/hardware.md, "wgmma syntax and fences"): issue, fences,
 * groups, and the accumulator fragment map. */
#ifndef KGEN_SM90_MMA_H
#define KGEN_SM90_MMA_H

#include "../dtype.h"
#include "../emit.h"

void sm90_wgmma_fence(Emit *e);
void sm90_wgmma_commit(Emit *e);
void sm90_wgmma_wait(Emit *e, int pending);
/* D(64xN, f32) += A(64 x 32 bytes of K via desc) · B(N x 32 bytes)^T, both
 * K-major: k16 for bf16/fp16, k32 for e4m3/e5m2. */
void sm90_wgmma_ss(Emit *e, int n, DType in, const Reg *acc, Reg adesc, Reg bdesc);
/* The general form: A from a descriptor (SS) or, when `afrag` is non-NULL,
 * from four registers of 16-bit pairs (RS, docs/hardware.md, "wgmma A fragment"); scale_d 0
 * overwrites D; trans_b 1 reads B N-major (MN-major descriptor). */
void sm90_wgmma(Emit *e, int n, DType in, const Reg *acc, const Reg *adesc, const Reg *afrag,
                Reg bdesc, int scale_d, int trans_b);
/* Row and column inside the 64xN tile of accumulator register i of thread
 * t of the warpgroup (docs/hardware.md, "wgmma accumulator fragment", H200-checked). */
void sm90_acc_coord(int t, int i, int *row, int *col);

/* The first accumulator row and column of thread (warp, lane) of the
 * warpgroup that holds rows 64*block.. (layout.c's wgmma_acc_row/col, as
 * PTX): row0 = 64*block + 16*(warp%4) + lane/4, col0 = 2*(lane%4); t is
 * scratch. */
void sm90_acc_row0(Emit *e, Reg row0, Reg block, Reg warp, Reg lane, Reg t);
void sm90_acc_col0(Emit *e, Reg col0, Reg lane);

#endif
