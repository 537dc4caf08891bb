/* The split-O plan of the sm_90a FMHA for head-dim 512 (fmha_split.c),
 * chosen by fmha.c. */
#ifndef KGEN_SM90_FMHA_SPLIT_H
#define KGEN_SM90_FMHA_SPLIT_H

#include "../fmha.h"

int fmha90_split_plan(FmhaCfg *f, KgErr *err);
int fmha90_split_body(Emit *e, const FmhaCfg *f, const FmhaRegs *r, KgErr *err);

#endif
