/* The launch of an fmha plan for `kgen plan`'s estimate: which KV tiles
 * each CTA visits (the prologue's tile counts, gen/fmha.c
 * emit_tile_counts, in C), in launch order, priced by the target's model
 * (estimate.h) and laid onto the SMs. */
#include <stdio.h>

#include "estimate.h"
#include "fmha.h"

typedef struct Launch {
	const FmhaCfg *f;
	const Estimate *e;
	uint64_t gx, gy;       /* grid x (row blocks x O halves), y (head blocks) */
	int64_t sq, sk;
} Launch;

static int64_t
clamp64(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static int64_t
cdiv64(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

void
fmha_cta_tiles(const FmhaCfg *f, int64_t sq, int64_t sk, int64_t m0, int64_t *visited,
               int64_t *masked)
{
	int64_t j0 = 0, lead = 0, total, full, unmasked;

	if (f->mask == MASK_NONE) {
		total = cdiv64(sk, f->bn);
		full = sk / f->bn;
	} else {
		int64_t off = sk - sq + m0;
		total = cdiv64(clamp64(off + f->rows + f->wr, 0, sk), f->bn);
		full = clamp64(off + 1 + f->wr, 0, sk) / f->bn;
		if (f->mask == MASK_WINDOW) {
			j0 = (off - f->wl > 0 ? off - f->wl : 0) / f->bn;
			lead = cdiv64(off + f->rows - 1 - f->wl > 0 ? off + f->rows - 1 - f->wl : 0, f->bn);
			if (lead > total)
				lead = total;
		}
	}
	*visited = total > j0 ? total - j0 : 0;
	/* the first tile is always masked; then [j0+1, lead) masked, [.., full)
	 * unmasked, [.., total) masked (the consumer loops) */
	unmasked = fmha_has_unmasked_tiles(f) ? full - (lead > j0 + 1 ? lead : j0 + 1) : 0;
	if (unmasked < 0)
		unmasked = 0;
	if (unmasked > *visited)
		unmasked = *visited;
	*masked = *visited - unmasked;
}

static double
cta_clk(uint64_t i, void *arg, double *tiles)
{
	const Launch *l = arg;
	const FmhaCfg *f = l->f;
	int64_t per = f->ohalves * (1 + f->mcast); /* CTAs per row block */
	int64_t x = (int64_t)(i % l->gx), blocks = (int64_t)l->gx / per, t, visited, masked;

	t = x / per;
	/* causal: the prologue launches the longest row block first */
	if (f->mask == MASK_CAUSAL)
		t = blocks - 1 - t;
	fmha_cta_tiles(f, l->sq, l->sk, t * f->rows, &visited, &masked);
	*tiles = (double)visited;
	return l->e->fill_clk + l->e->drain_clk + (double)visited * l->e->tile_clk +
	       (double)masked * l->e->masked_clk;
}

int
fmha_estimate(const FmhaCfg *f, uint64_t batch, uint64_t sq, uint64_t sk, Buf *out, KgErr *err)
{
	const EstOps *ops = f->t->est;
	Estimate e;
	Launch l;
	char shape[96];

	if (!ops || !ops->fmha) {
		buf_printf(out, "estimate        none for %s yet (docs/estimate.md)\n", f->t->name);
		return 0;
	}
	if (sq > (1u << 30) || sk > (1u << 30) || batch > (1u << 20))
		return kg_fail(err, "--batch=%llu --seqlen-q=%llu --seqlen-k=%llu: the estimate takes at most 2^20 sequences of 2^30 rows",
		               (unsigned long long)batch, (unsigned long long)sq, (unsigned long long)sk);
	est_init(&e, ops->gpu);
	ops->fmha(f, &e);
	est_bound(&e);
	l.f = f;
	l.e = &e;
	l.sq = (int64_t)sq;
	l.sk = (int64_t)sk;
	l.gx = (uint64_t)cdiv64((int64_t)sq, f->rows) * (uint64_t)(f->ohalves * (1 + f->mcast));
	l.gy = (uint64_t)(f->hq / f->hcta);
	if (l.gx * l.gy * batch > EST_MAX_CTAS)
		return kg_fail(err, "--batch=%llu --seqlen-q=%llu: %llu CTAs; the estimate places at most %d, give a smaller shape",
		               (unsigned long long)batch, (unsigned long long)sq,
		               (unsigned long long)(l.gx * l.gy * batch), EST_MAX_CTAS);
	/* kbench's count (halved for causal); a window's has no such figure */
	e.flops = f->mask == MASK_WINDOW ? 0.0
	                                  : (double)batch * f->hq * (double)sq * (double)sk * 2.0 *
	                                        (f->d + f->dv) * (f->mask == MASK_CAUSAL ? 0.5 : 1.0);
	e.hbm_bytes = (double)batch * f->esz *
	              ((double)sq * f->hq * (f->d + f->dv) +
	               (double)sk * f->hkv * (f->d + (f->kv_shared ? 0 : f->dv)));
	est_schedule(&e, l.gx * l.gy * batch, cta_clk, &l);
	snprintf(shape, sizeof shape, "batch %llu, seqlen-q %llu, seqlen-k %llu",
	         (unsigned long long)batch, (unsigned long long)sq, (unsigned long long)sk);
	est_print(&e, shape, out);
	return 0;
}

int
fmha_predict(const void *params, const uint64_t *shape, Buf *text, KgErr *err)
{
	FmhaCfg f;

	if (fmha_configure(&f, params, err) < 0)
		return -1;
	return fmha_estimate(&f, shape[0], shape[1], shape[2], text, err);
}
