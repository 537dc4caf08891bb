/* Budgets, built in one place: shared-memory regions with their alignment,
 * tensor-memory columns (a power of two in [32, 512]), mbarriers with their
 * arrival counts and transaction bytes, warp roles and registers. Families
 * fill a Plan; plan_check rejects what does not fit, naming the limit. */
#ifndef KGEN_PLAN_H
#define KGEN_PLAN_H

#include <stdint.h>
#include "emit.h"
#include "err.h"
#include "target.h"

enum { PLAN_MAX_REGIONS = 24, PLAN_MAX_BARS = 16, PLAN_MAX_ROLES = 8, PLAN_MAX_TMEM = 8 };

typedef struct SmemRegion {
	char name[32];
	uint32_t offset; /* from the aligned base */
	uint32_t bytes;
	uint32_t align;  /* required alignment of offset (base is aligned to max) */
	int count;       /* replicated regions (pipeline stages): stride = bytes */
} SmemRegion;

typedef struct Barrier {
	char name[32];
	int count;         /* how many mbarriers (one per stage) */
	int arrivals;      /* expected arrivals per phase */
	uint32_t tx_bytes; /* transaction bytes expected per phase (0: none) */
	char who[96];      /* who arrives, for the plan printout */
	uint32_t offset;   /* smem offset of the first, 8-byte aligned */
} Barrier;

typedef struct TmemRegion {
	char name[32];
	int col, cols;     /* column range [col, col+cols) */
	int lanes;         /* 128, or 64 for M=64 layouts */
	int alias_of;      /* -1, or the region whose columns this one reuses */
	char why[64];      /* for an alias: why the two are never live at once */
} TmemRegion;

typedef struct Role {
	char name[32];
	int warp0, nwarps; /* warps [warp0, warp0+nwarps) */
	int regs;          /* setmaxnreg target, 0 = no reallocation */
	char does[160];
} Role;

typedef struct Plan {
	const Target *target;
	int threads;
	SmemRegion smem[PLAN_MAX_REGIONS];
	int nsmem;
	uint32_t smem_bytes;   /* end of the last region */
	uint32_t smem_align;   /* alignment the dynamic base is rounded up to */
	uint32_t smem_request; /* smem_bytes + slack to align the base at run time */
	Barrier bars[PLAN_MAX_BARS];
	int nbars;
	TmemRegion tmem[PLAN_MAX_TMEM];
	int ntmem;
	int tmem_alloc;        /* columns to allocate (power of two) or 0 */
	Role roles[PLAN_MAX_ROLES];
	int nroles;
	int regs_entry;        /* register cap at entry: regs_per_sm / threads, rounded down to 8 */
	int regs_need_max;     /* estimate of the heaviest role's registers */
	char regs_need_who[32];
} Plan;

void plan_init(Plan *p, const Target *t);
/* The plan_smem/barrier/tmem/role functions return the new entry's index,
 * always valid: the tables are sized for every family, so running out of
 * entries (or aliasing a region that does not exist) is a bug in kgen and
 * stops with kg_bug rather than returning an index nobody may use. */
/* Appends a region of count*bytes aligned to align; returns its index. */
int plan_smem(Plan *p, const char *name, uint32_t bytes, uint32_t align, int count);
/* Appends count mbarriers (8 bytes each) expecting `arrivals` arrivals and
 * tx_bytes per phase; returns its index. */
int plan_barrier(Plan *p, const char *name, int count, int arrivals, uint32_t tx_bytes,
                 const char *who);
int plan_tmem(Plan *p, const char *name, int col, int cols, int lanes);
/* A region inside `parent`'s columns that is live only while the parent's
 * contents are dead (P written over S once S is read); plan_check allows
 * exactly this overlap and prints `why`. */
int plan_tmem_alias(Plan *p, const char *name, int parent, int col_off, int cols, const char *why);
int plan_role(Plan *p, const char *name, int warp0, int nwarps, int regs, const char *does);
/* Smallest power of two >= cols and >= 32 (tcgen05.alloc rule,
 * docs/hardware.md, "TMEM allocation"); -1 if cols > 512. */
int plan_tmem_columns(int cols);
/* Places the barriers after the regions and sets smem_bytes and
 * smem_request (the bytes plus the slack to align the base); returns
 * smem_request. plan_check calls it; a planner measuring a candidate may
 * call it on its own. */
uint32_t plan_smem_total(Plan *p);
/* Largest setmaxnreg value (multiple of 8, <= 240... 256) the consumers can
 * take when the other warpgroups keep `other_regs` each. */
int plan_regs_split(const Plan *p, int consumer_threads, int other_threads, int other_regs);
/* Lays barriers out after the regions and checks every budget against the
 * target: smem, TMEM (power of two, within the target's columns, live
 * regions disjoint), threads, registers. */
int plan_check(Plan *p, KgErr *err);
void plan_print(const Plan *p, Buf *out);

#endif
