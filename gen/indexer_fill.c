/* The indexer's -inf fill of the masked logits (gen/indexer.h), used
 * after the fused top-k's join (gen/indexer_topk.c) and by the logits
 * alone (gen/indexer.c), so neither of those files calls the other. */
#include "indexer.h"

/* logits[row, j] = -inf for the masked keys n <= j < max_len, so the whole
 * row is defined (docs/ABI.md "indexer"): by the one CTA that goes on
 * after the fused top-k's join, or (every_part) by each of the row's
 * CTAs, part split taking j = n + 256·(split + splits·m) + tid. */
void
indexer_emit_fill(Emit *e, const IndexerRegs *r, int every_part)
{
	Reg j = reg_new(e, RC_B32), a = reg_new(e, RC_B64), p = reg_new(e, RC_PRED);
	Reg step = every_part ? reg_new(e, RC_B32) : j;
	char loop[48], done[48];

	emit_block(e, "indexer.fill");
	label_new(e, loop, sizeof loop, "fill");
	label_new(e, done, sizeof done, "fill_done");
	if (every_part) {
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tadd.u32 %s, %s, %s;\n", j.s, r->split.s, IDX_THREADS, r->n.s,
		      j.s, j.s, r->tid.s);
		emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", step.s, r->splits.s, IDX_THREADS);
	} else {
		emitf(e, "\tadd.u32 %s, %s, %s;\n", j.s, r->n.s, r->tid.s);
	}
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->max_len.s, p.s, done);
	emit_label(e, loop);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.f32 [%s], 0fFF800000;\n", a.s, j.s,
	      a.s, a.s, r->logits.s, a.s);
	if (every_part)
		emitf(e, "\tadd.u32 %s, %s, %s;\n", j.s, j.s, step.s);
	else
		emitf(e, "\tadd.u32 %s, %s, %d;\n", j.s, j.s, IDX_THREADS);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->max_len.s, p.s, loop);
	emit_label(e, done);
}
