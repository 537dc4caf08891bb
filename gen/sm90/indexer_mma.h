/* The sm_90a indexer's tensor-core scoring (gen/sm90/indexer_mma.c), for
 * the target's IndexerOps (gen/sm90/indexer.c). */
#ifndef KGEN_SM90_INDEXER_MMA_H
#define KGEN_SM90_INDEXER_MMA_H

#include "../indexer.h"

int sm90_indexer_score_mma(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err);

#endif
