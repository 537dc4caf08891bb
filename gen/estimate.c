/* The shared half of the launch-time estimate (estimate.h): units, the
 * bound, CTAs laid onto SMs, the printout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

void
est_init(Estimate *e, const EstGpu *gpu)
{
	memset(e, 0, sizeof *e);
	e->gpu = gpu;
	e->per_sm = 1;
}

double
est_overlap(double a, double b, double p)
{
	if (a <= 0 || b <= 0)
		return a > b ? a : b;
	return pow(pow(a, p) + pow(b, p), 1.0 / p);
}

void
est_unit(Estimate *e, const char *name, double clk)
{
	if (e->nunit == EST_MAX_UNITS)
		return;
	snprintf(e->unit[e->nunit].name, sizeof e->unit[0].name, "%s", name);
	e->unit[e->nunit++].clk = clk;
}

void
est_bound(Estimate *e)
{
	double top = 0;

	e->bound = "-";
	for (int i = 0; i < e->nunit; i++)
		if (e->unit[i].clk > top) {
			top = e->unit[i].clk;
			e->bound = e->unit[i].name;
		}
	e->tile_clk = top + e->serial_clk;
}

/* The slot that frees first: a binary heap of finish times would do it in
 * log time; slots are at most a few hundred and launches a few 10^4 CTAs,
 * so a scan is quick enough and obviously right. */
static int
first_free(const double *slot, int n)
{
	int best = 0;

	for (int i = 1; i < n; i++)
		if (slot[i] < slot[best])
			best = i;
	return best;
}

void
est_schedule(Estimate *e, uint64_t n, double (*cta_clk)(uint64_t i, void *arg, double *tiles),
             void *arg)
{
	int slots = e->gpu->sms * (e->per_sm > 0 ? e->per_sm : 1);
	double *slot = calloc((size_t)slots, sizeof *slot), sum = 0, end = 0;

	e->ctas = n;
	e->tiles = e->tiles_max = 0;
	for (uint64_t i = 0; slot && i < n; i++) {
		double tiles = 0, clk = cta_clk(i, arg, &tiles);
		int s = first_free(slot, slots);
		/* CTAs sharing an SM share its units: each runs per_sm times slower */
		slot[s] += clk * e->per_sm;
		sum += clk;
		e->tiles += tiles;
		if (tiles > e->tiles_max)
			e->tiles_max = tiles;
		if (slot[s] > end)
			end = slot[s];
	}
	free(slot);
	e->busy_clk = sum / e->gpu->sms;
	e->makespan_clk = end;
	e->us = end / e->gpu->clk_mhz;
	if (e->hbm_bytes / e->gpu->hbm_gb_s / 1e3 > e->us)
		e->us = e->hbm_bytes / e->gpu->hbm_gb_s / 1e3;
	e->us += e->gpu->launch_us;
}

void
est_print(const Estimate *e, const char *shape, Buf *o)
{
	buf_printf(o, "estimate        %s at %s rates, %d SMs at %.0f MHz (docs/estimate.md); per %s:\n",
	           shape, e->gpu->name, e->gpu->sms, e->gpu->clk_mhz, e->tile);
	buf_printf(o, "                 ");
	for (int i = 0; i < e->nunit; i++)
		buf_printf(o, "%s%s %.0f clk", i ? ", " : "", e->unit[i].name, e->unit[i].clk);
	buf_printf(o, "\n");
	buf_printf(o, "                 bound: %s; %.0f clk per tile (%.0f serial beyond the bound unit)\n",
	           e->bound, e->tile_clk, e->serial_clk);
	if (e->masked_clk > 0)
		buf_printf(o, "                 a masked tile adds %.0f clk\n", e->masked_clk);
	buf_printf(o, "                 per CTA: fill %.0f clk, drain %.0f clk; %d CTA%s per SM\n",
	           e->fill_clk, e->drain_clk, e->per_sm, e->per_sm > 1 ? "s" : "");
	buf_printf(o, "launch          %llu CTAs, %.0f tiles (longest CTA %.0f) on %d SMs: %.0f clk busy per SM, last SM done at %.0f clk (%.1f%% lost to waves and imbalance)\n",
	           (unsigned long long)e->ctas, e->tiles, e->tiles_max, e->gpu->sms, e->busy_clk,
	           e->makespan_clk, e->makespan_clk > 0 ? 100.0 * (1 - e->busy_clk / e->makespan_clk) : 0.0);
	buf_printf(o, "predicted       %.1f us (SMs %.1f us, HBM floor %.1f us for %.0f MB, + %.1f us launch)",
	           e->us, e->makespan_clk / e->gpu->clk_mhz, e->hbm_bytes / e->gpu->hbm_gb_s / 1e3,
	           e->hbm_bytes / 1e6, e->gpu->launch_us);
	if (e->flops > 0 && e->us > 0)
		buf_printf(o, ", %.1f TFLOP/s", e->flops / (e->us * 1e-6) / 1e12);
	buf_printf(o, "\n");
}
