/* The table of targets: the only place an `sm` number appears. Shared code
 * asks a Target for features and limits and calls its ops; each target
 * folder (sm90/, sm100/) provides the same roles. */
#ifndef KGEN_TARGET_H
#define KGEN_TARGET_H

#include <stdint.h>
#include "desc.h"
#include "err.h"

enum {
	FEAT_WGMMA = 1 << 0,      /* wgmma.mma_async, register accumulators */
	FEAT_TCGEN05 = 1 << 1,    /* tcgen05.*, tensor memory */
	FEAT_SETMAXNREG = 1 << 2, /* setmaxnreg.inc/dec between warpgroups */
	FEAT_TMA = 1 << 3,        /* cp.async.bulk.tensor + mbarrier tx counts */
};

struct GemmOps;
struct FmhaOps;
struct IndexerOps;
struct EstOps;

typedef struct Target {
	const char *name;     /* .target spelling, also the CLI value */
	const char *tag;      /* in kernel names: "sm90a" */
	int cc;               /* compute capability the `a` target runs on, exactly */
	int ptx_min;          /* lowest PTX ISA (major*10+minor) knowing this target */
	unsigned feat;
	uint32_t smem_max;    /* dynamic smem per block after opt-in, bytes */
	int tmem_cols;        /* tensor-memory columns per CTA (0: none) */
	int max_threads;      /* per block */
	int regs_per_sm;      /* 32-bit registers per SM */
	int regs_max_thread;  /* per thread */
	DescArch desc;        /* smem descriptor format */
	const struct GemmOps *gemm;
	const struct FmhaOps *fmha; /* NULL: not generated for this target yet */
	const struct DecodeOps *decode; /* NULL: not generated for this target yet */
	const struct IndexerOps *indexer; /* NULL: not generated for this target yet */
	const struct EstOps *est; /* launch-time models (gen/estimate.h); NULL: none yet */
} Target;

extern const Target targets[];
extern const int ntargets;

const Target *target_find(const char *name); /* NULL if unknown */

#endif
