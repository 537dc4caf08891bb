/* The indexer's -inf fill of the masked logits (gen/indexer.h), after
 * the fused top-k's join (gen/indexer_topk.c). */
#include "indexer.h"

/* logits[row, j] = -inf for the masked keys n <= j < max_len, so the whole
 * row is defined (docs/ABI.md "indexer"), by the one CTA that goes on
 * after the fused top-k's join. */
void
indexer_emit_fill(Emit *e, const IndexerRegs *r)
{
	Reg j = reg_new(e, RC_B32), a = reg_new(e, RC_B64), p = reg_new(e, RC_PRED);
	char loop[48], done[48];

	emit_block(e, "indexer.fill");
	label_new(e, loop, sizeof loop, "fill");
	label_new(e, done, sizeof done, "fill_done");
	emitf(e, "\tadd.u32 %s, %s, %s;\n", j.s, r->n.s, r->tid.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, j.s, r->max_len.s, p.s, done);
	emit_label(e, loop);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tst.global.f32 [%s], 0fFF800000;\n", a.s, j.s,
	      a.s, a.s, r->logits.s, a.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", j.s, j.s, IDX_THREADS, p.s,
	      j.s, r->max_len.s, p.s, loop);
	emit_label(e, done);
}
