/* The W4A8 gemm's sm_90a roles (gemm_w4a8.c; docs/ABI.md, "W4A8 weights"):
 * plan, the byte tables' setup, and the consumer warpgroups. */
#ifndef KGEN_SM90_GEMM_W4A8_H
#define KGEN_SM90_GEMM_W4A8_H

#include "../gemm.h"

int sm90_w4a8_plan(GemmCfg *g, KgErr *err);
int sm90_w4a8_setup(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err);
int sm90_w4a8_consumer(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err);

#endif
