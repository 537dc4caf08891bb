/* The launch of a gemm plan for `kgen plan`'s estimate: one CTA (or CTA
 * pair) per output tile, every one the same K loop, priced by the target's
 * model (estimate.h) and laid onto the SMs. */
#include <stdio.h>

#include "estimate.h"
#include "gemm.h"

typedef struct Launch {
	const Estimate *e;
	double ktiles;
} Launch;

static double
cta_clk(uint64_t i, void *arg, double *tiles)
{
	const Launch *l = arg;

	(void)i;
	*tiles = l->ktiles;
	return l->e->fill_clk + l->e->drain_clk + l->ktiles * l->e->tile_clk;
}

int
gemm_estimate(const GemmCfg *g, uint64_t m, uint64_t n, uint64_t k, Buf *out, KgErr *err)
{
	const EstOps *ops = g->t->est;
	Estimate e;
	Launch l;
	char shape[96];

	if (!ops || !ops->gemm) {
		buf_printf(out, "estimate        none for %s yet (docs/estimate.md)\n", g->t->name);
		return 0;
	}
	if (m > (1u << 31) || n > (1u << 31) || k > (1u << 31))
		return kg_fail(err, "--m=%llu --n=%llu --k=%llu: the estimate takes dimensions up to 2^31",
		               (unsigned long long)m, (unsigned long long)n, (unsigned long long)k);
	est_init(&e, ops->gpu);
	ops->gemm(g, &e);
	est_bound(&e);
	uint64_t ctas = (m + (uint64_t)g->tile_rows - 1) / (uint64_t)g->tile_rows *
	                ((n + (uint64_t)g->tn - 1) / (uint64_t)g->tn) * (uint64_t)(g->pair ? 2 : 1);
	if (ctas > EST_MAX_CTAS)
		return kg_fail(err, "--m=%llu --n=%llu: %llu CTAs; the estimate places at most %d, give a smaller shape",
		               (unsigned long long)m, (unsigned long long)n, (unsigned long long)ctas,
		               EST_MAX_CTAS);
	l.e = &e;
	l.ktiles = (double)((k + (uint64_t)g->tk - 1) / (uint64_t)g->tk);
	e.flops = 2.0 * (double)m * (double)n * (double)k;
	e.hbm_bytes = ((double)m * g->ebits + (double)n * dtype_bits(g->in_b)) * (double)k / 8 +
	              (double)m * (double)n * g->esz_out;
	if (g->w4a8) /* B is E2M1 bytes (half a byte per weight) and one UE8M0 per 32 */
		e.hbm_bytes = (double)m * (double)k + (double)n * (double)k * (0.5 + 1.0 / 32) +
		              (double)m * (double)n * g->esz_out;
	/* a CTA pair's two CTAs each hold one of the pair's SM slots */
	est_schedule(&e, ctas, cta_clk, &l);
	snprintf(shape, sizeof shape, "M %llu, N %llu, K %llu", (unsigned long long)m,
	         (unsigned long long)n, (unsigned long long)k);
	est_print(&e, shape, out);
	return 0;
}

int
gemm_predict(const void *params, const uint64_t *shape, Buf *text, KgErr *err)
{
	GemmCfg g;

	if (gemm_configure(&g, params, err) < 0)
		return -1;
	return gemm_estimate(&g, shape[0], shape[1], shape[2], text, err);
}
