/* Budgets (plan.h): shared-memory regions, TMEM columns, mbarriers, warp
 * roles and registers are recorded here, checked against the target's
 * limits by plan_check, and printed by plan_print. */
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "plan.h"

void
plan_init(Plan *p, const Target *t)
{
	memset(p, 0, sizeof *p);
	p->target = t;
	p->smem_align = 16;
}

static uint32_t
align_up(uint32_t x, uint32_t a)
{
	return (x + a - 1) / a * a;
}

int
plan_smem(Plan *p, const char *name, uint32_t bytes, uint32_t align, int count)
{
	SmemRegion *r;

	if (p->nsmem == PLAN_MAX_REGIONS)
		kg_bug("plan: more than %d shared-memory regions (%s)", PLAN_MAX_REGIONS, name);
	r = &p->smem[p->nsmem];
	snprintf(r->name, sizeof r->name, "%s", name);
	r->bytes = bytes;
	r->align = align;
	r->count = count;
	r->offset = align_up(p->smem_bytes, align);
	p->smem_bytes = r->offset + bytes * (uint32_t)count;
	if (align > p->smem_align)
		p->smem_align = align;
	return p->nsmem++;
}

int
plan_barrier(Plan *p, const char *name, int count, int arrivals, uint32_t tx_bytes,
             const char *who)
{
	Barrier *b;

	if (p->nbars == PLAN_MAX_BARS)
		kg_bug("plan: more than %d mbarriers (%s)", PLAN_MAX_BARS, name);
	b = &p->bars[p->nbars];
	snprintf(b->name, sizeof b->name, "%s", name);
	snprintf(b->who, sizeof b->who, "%s", who);
	b->count = count;
	b->arrivals = arrivals;
	b->tx_bytes = tx_bytes;
	return p->nbars++;
}

int
plan_tmem(Plan *p, const char *name, int col, int cols, int lanes)
{
	TmemRegion *r;

	if (p->ntmem == PLAN_MAX_TMEM)
		kg_bug("plan: more than %d TMEM regions (%s)", PLAN_MAX_TMEM, name);
	r = &p->tmem[p->ntmem];
	snprintf(r->name, sizeof r->name, "%s", name);
	r->col = col;
	r->cols = cols;
	r->lanes = lanes;
	r->alias_of = -1;
	return p->ntmem++;
}

int
plan_tmem_alias(Plan *p, const char *name, int parent, int col_off, int cols, const char *why)
{
	int i;

	if (parent < 0 || parent >= p->ntmem)
		kg_bug("plan: TMEM alias %s of region %d, which does not exist", name, parent);
	i = plan_tmem(p, name, p->tmem[parent].col + col_off, cols, p->tmem[parent].lanes);
	p->tmem[i].alias_of = parent;
	snprintf(p->tmem[i].why, sizeof p->tmem[i].why, "%s", why);
	return i;
}

int
plan_role(Plan *p, const char *name, int warp0, int nwarps, int regs, const char *does)
{
	Role *r;

	if (p->nroles == PLAN_MAX_ROLES)
		kg_bug("plan: more than %d warp roles (%s)", PLAN_MAX_ROLES, name);
	r = &p->roles[p->nroles];
	snprintf(r->name, sizeof r->name, "%s", name);
	snprintf(r->does, sizeof r->does, "%s", does);
	r->warp0 = warp0;
	r->nwarps = nwarps;
	r->regs = regs;
	return p->nroles++;
}

int
plan_tmem_columns(int cols)
{
	if (cols > 512)
		return -1;
	return cols > 32 ? pow2_ceil(cols) : 32;
}

int
plan_regs_split(const Plan *p, int consumer_threads, int other_threads, int other_regs)
{
	/* The CTA's register pool is what it launched with: the entry cap times
	 * its threads. setmaxnreg moves registers between warpgroups within it
	 * and takes 24..256 in steps of 8 (PTX setmaxnreg); ptxas caps a thread
	 * at 255, so 248 is the usable top. */
	int entry = p->target->regs_per_sm / p->threads / 8 * 8;
	int r;

	if (entry > p->target->regs_max_thread / 8 * 8)
		entry = p->target->regs_max_thread / 8 * 8;
	r = (entry * p->threads - other_threads * other_regs) / consumer_threads / 8 * 8;
	return r > 248 ? 248 : r;
}

uint32_t
plan_smem_total(Plan *p)
{
	uint32_t off = 0;

	for (int i = 0; i < p->nsmem; i++) {
		uint32_t end = p->smem[i].offset + p->smem[i].bytes * (uint32_t)p->smem[i].count;
		if (end > off)
			off = end;
	}
	off = align_up(off, 8);
	for (int i = 0; i < p->nbars; i++) {
		p->bars[i].offset = off;
		off += 8u * (uint32_t)p->bars[i].count;
	}
	p->smem_bytes = off;
	/* The dynamic base is only guaranteed 16-byte aligned; round it up at run
	 * time and request the slack (docs/lessons.md, "Size and budget
	 * bugs"; docs/hardware.md, "Base offset and alignment"). */
	p->smem_request = p->smem_bytes + (p->smem_align > 16 ? p->smem_align : 0);
	return p->smem_request;
}

int
plan_check(Plan *p, KgErr *err)
{
	const Target *t = p->target;

	plan_smem_total(p);
	for (int i = 0; i < p->nbars; i++) {
		if (p->bars[i].arrivals < 1 || p->bars[i].arrivals > (1 << 20) - 1)
			return kg_fail(err, "plan: barrier %s expects %d arrivals; mbarrier counts are 1..2^20-1",
			               p->bars[i].name, p->bars[i].arrivals);
		if (p->bars[i].tx_bytes > (1u << 20) - 1)
			return kg_fail(err, "plan: barrier %s expects %u transaction bytes; the tx-count limit is 2^20-1",
			               p->bars[i].name, p->bars[i].tx_bytes);
	}
	if (p->smem_request > t->smem_max)
		return kg_fail(err, "plan needs %u bytes (%.1f KiB) of shared memory, %s allows %u (%.1f KiB)",
		               p->smem_request, p->smem_request / 1024.0, t->name, t->smem_max,
		               t->smem_max / 1024.0);
	if (p->threads < 32 || p->threads > t->max_threads || p->threads % 32)
		return kg_fail(err, "plan: %d threads per block; %s allows 32..%d in whole warps",
		               p->threads, t->name, t->max_threads);
	p->regs_entry = t->regs_per_sm / p->threads / 8 * 8;
	if (p->regs_entry > t->regs_max_thread)
		p->regs_entry = t->regs_max_thread / 8 * 8;
	for (int i = 0; i < p->nroles; i++) {
		int cap = p->roles[i].regs ? p->roles[i].regs : p->regs_entry;
		if (strcmp(p->roles[i].name, p->regs_need_who) == 0 && p->regs_need_max > cap)
			return kg_fail(err, "plan: the %s role needs about %d registers/thread, the register file allows %d (%d regs / %d threads%s)",
			               p->roles[i].name, p->regs_need_max, cap, t->regs_per_sm,
			               p->threads, p->roles[i].regs ? ", after setmaxnreg" : "");
	}
	if (p->ntmem) {
		int end = 0;
		if (!t->tmem_cols)
			return kg_fail(err, "plan uses tensor memory, %s has none", t->name);
		for (int i = 0; i < p->ntmem; i++) {
			const TmemRegion *a = &p->tmem[i];
			if (a->col + a->cols > end)
				end = a->col + a->cols;
			if (a->alias_of >= 0) {
				const TmemRegion *b = &p->tmem[a->alias_of];
				if (a->col < b->col || a->col + a->cols > b->col + b->cols)
					return kg_fail(err, "plan: TMEM %s [%d,%d) reuses %s but leaves its columns [%d,%d)",
					               a->name, a->col, a->col + a->cols, b->name, b->col,
					               b->col + b->cols);
			}
			for (int j = 0; j < i; j++) {
				const TmemRegion *b = &p->tmem[j];
				if (a->alias_of == j || b->alias_of == i)
					continue;
				if (a->col < b->col + b->cols && b->col < a->col + a->cols)
					return kg_fail(err, "plan: TMEM %s [%d,%d) overlaps %s [%d,%d)", a->name,
					               a->col, a->col + a->cols, b->name, b->col,
					               b->col + b->cols);
			}
		}
		p->tmem_alloc = plan_tmem_columns(end);
		if (p->tmem_alloc < 0 || end > t->tmem_cols)
			return kg_fail(err, "plan needs %d TMEM columns, %s has %d per CTA", end, t->name,
			               t->tmem_cols);
	}
	return 0;
}

void
plan_print(const Plan *p, Buf *o)
{
	buf_printf(o, "target          %s\n", p->target->name);
	buf_printf(o, "threads         %d (%d warps)\n", p->threads, p->threads / 32);
	buf_printf(o, "registers       %d/thread at entry (%d / %d threads)\n", p->regs_entry,
	           p->target->regs_per_sm, p->threads);
	buf_printf(o, "roles\n");
	for (int i = 0; i < p->nroles; i++) {
		const Role *r = &p->roles[i];
		char regs[24] = "-";
		if (r->regs)
			snprintf(regs, sizeof regs, "setmaxnreg %d", r->regs);
		buf_printf(o, "  warps %2d-%-2d   %-10s %-15s %s\n", r->warp0, r->warp0 + r->nwarps - 1,
		           r->name, regs, r->does);
	}
	buf_printf(o, "shared memory   %u bytes used, %u requested (base aligned to %u at run time), limit %u\n",
	           p->smem_bytes, p->smem_request, p->smem_align, p->target->smem_max);
	for (int i = 0; i < p->nsmem; i++) {
		const SmemRegion *r = &p->smem[i];
		buf_printf(o, "  %-14s @%6u  %6u bytes x %d  align %u\n", r->name, r->offset, r->bytes,
		           r->count, r->align);
	}
	buf_printf(o, "mbarriers\n");
	for (int i = 0; i < p->nbars; i++) {
		const Barrier *b = &p->bars[i];
		buf_printf(o, "  %-14s @%6u  x%d  arrivals %d  tx %u bytes  (%s)\n", b->name, b->offset,
		           b->count, b->arrivals, b->tx_bytes, b->who);
	}
	if (p->ntmem) {
		buf_printf(o, "tensor memory   %d columns allocated (power of two >= 32), %d available\n",
		           p->tmem_alloc, p->target->tmem_cols);
		for (int i = 0; i < p->ntmem; i++) {
			const TmemRegion *t = &p->tmem[i];
			buf_printf(o, "  %-14s columns %3d-%3d  lanes 0-%d", t->name, t->col,
			           t->col + t->cols - 1, t->lanes - 1);
			if (t->alias_of >= 0)
				buf_printf(o, "  (inside %s: %s)", p->tmem[t->alias_of].name, t->why);
			buf_printf(o, "\n");
		}
	}
}
