/* Static launch-time estimate (docs/estimate.md): a target's model
 * (gen/sm90/estimate.c) prices one tile of a plan from its rates.h, unit
 * by unit, and the fixed cost of a CTA; the shared code here lays the
 * launch's CTAs onto the SMs in launch order and prints the figures
 * `kgen plan` shows. No sm is named here. */
#ifndef KGEN_ESTIMATE_H
#define KGEN_ESTIMATE_H

#include <stdint.h>
#include "emit.h"

/* EST_MAX_CTAS: launches placed CTA by CTA (a few seconds at most) */
enum { EST_MAX_UNITS = 8, EST_MAX_CTAS = 1 << 22 };

struct FmhaCfg;
struct GemmCfg;

/* The GPU a model prices for: SMs, the clock kernels run at under load,
 * the host-visible cost of one launch. */
typedef struct EstGpu {
	const char *name;
	int sms;
	double clk_mhz;
	double launch_us;
	double hbm_gb_s;
} EstGpu;

/* One unit's clocks per tile (tensor core, exp, issue, shared memory,
 * loads, a serial chain): the slowest bounds the tile. */
typedef struct EstUnit {
	char name[48];
	double clk;
} EstUnit;

typedef struct Estimate {
	const EstGpu *gpu;
	char tile[96];          /* what one tile is, for the printout */
	EstUnit unit[EST_MAX_UNITS];
	int nunit;
	double tile_clk;        /* the slowest unit plus the serial terms */
	const char *bound;      /* its name */
	double serial_clk;      /* added to the slowest unit (exposed load, hand-offs) */
	double masked_clk;      /* extra per masked tile (fmha: the mask's issue) */
	double fill_clk;        /* per CTA before its first tile completes */
	double drain_clk;       /* per CTA after its last tile: epilogue */
	int per_sm;             /* CTAs resident per SM */
	/* filled by est_schedule */
	uint64_t ctas;
	double tiles, tiles_max;    /* tiles of all CTAs, of the longest CTA */
	double busy_clk;            /* sum of the CTAs' clocks / slots: no quantization */
	double makespan_clk;        /* the last SM's finish, CTAs placed in launch order */
	double us;                  /* makespan at the clock + one launch */
	double flops;               /* the family's useful FLOPs (0: not counted) */
	double hbm_bytes;           /* bytes the launch must move at least once (the floor) */
} Estimate;

/* The per-target models, reached through Target.est; NULL members: no
 * model for that family. Each fills units, serial, masked, fill, drain and
 * per_sm of e for the configured plan. */
typedef struct EstOps {
	const EstGpu *gpu;
	void (*fmha)(const struct FmhaCfg *f, Estimate *e);
	void (*gemm)(const struct GemmCfg *g, Estimate *e);
} EstOps;

extern const EstOps est_sm90, est_sm100;

void est_init(Estimate *e, const EstGpu *gpu);
/* (a^p + b^p)^(1/p): two units that take turns, neither waiting for the
 * other (p large: the larger) nor fully serial (p = 1: the sum). */
double est_overlap(double a, double b, double p);
void est_unit(Estimate *e, const char *name, double clk);
/* tile_clk = the slowest unit + serial_clk; sets bound. */
void est_bound(Estimate *e);
/* Places n CTAs of cta_clk(i) clocks each, in launch order (i = 0 first),
 * on per_sm x sms slots, each on the slot that frees first (the hardware
 * block scheduler's greedy order); sets ctas, busy, makespan and us. */
void est_schedule(Estimate *e, uint64_t n, double (*cta_clk)(uint64_t i, void *arg, double *tiles),
                  void *arg);
/* The "estimate" lines of `kgen plan`. */
void est_print(const Estimate *e, const char *shape, Buf *out);

#endif
