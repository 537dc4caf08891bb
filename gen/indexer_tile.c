/* The Q and key tiles the tensor-core indexer scorings share (gen/indexer.h,
 * indexer_emit_q_tile, indexer_emit_key_tile): each target's MMA reads the same K-major,
 * 128-byte-swizzled E4M3 tile; only the tile's key count and the threads
 * that stage it differ. */
#include "indexer.h"
#include "layout.h"
#include "w4a8.h"


/* The registers of the fp4 -> E4M3 gather (gen/w4a8.h). */
typedef struct Fp4Fold {
	W4a8Regs wr;
	Reg in[2], w, emax, ec, base, addr, t0, t1, lut; /* b32 */
	Reg q;                                          /* pred */
} Fp4Fold;

static void
fp4_fold_init(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Fp4Fold *f)
{
	Reg *b[] = {&f->in[0], &f->in[1], &f->w, &f->emax, &f->ec, &f->base, &f->addr, &f->t0, &f->t1, &f->lut};

	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
		*b[i] = reg_new(e, RC_B32);
	f->q = reg_new(e, RC_PRED);
	w4a8_emit_init(e, &f->wr);
	emitf(e, "\tadd.u32 %s, %s, %u;\n", f->lut.s, r->base.s, c->plan.smem[c->r_lut].offset);
}

/* One chunk of an fp4 key as E4M3 (docs/indexer.md, "FP4 keys as E4M3"):
 * the 8 bytes of part pt (16 codes of group pt / 2) and the key's
 * exponent word at s->a + s->o (the page at s->a), into s->v[0..3]; the
 * key's exponents fold to e_ref = max - 6 as W4A8's block does. */
static void
fp4_fold_chunk(Emit *e, const IndexerCfg *c, const IdxTileScratch *s, Fp4Fold *f)
{
	emitf(e, "\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n\tmov.b32 %s, 0;\n", f->in[0].s, f->in[1].s, f->w.s);
	emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.v2.b32 {%s, %s}, [%s];\n", s->o.s, s->a.s, s->o.s,
	      s->p.s, f->in[0].s, f->in[1].s, s->o.s);
	/* the key's word: 4·(j % ps) into the page's tail, after ps rows */
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", f->ec.s, s->j.s,
	      c->ps - 1, s->o.s, f->ec.s, s->a.s, s->a.s, s->o.s);
	emitf(e, "\t@%s ld.global.nc.b32 %s, [%s+%d];\n", s->p.s, f->w.s, s->a.s, c->ps * c->fmt->key_bytes);
	/* group pt / 2's exponent against the key's largest, its table */
	w4a8_emit_emax(e, f->emax, f->w, f->ec);
	w4a8_emit_table_base(e, f->base, f->emax, f->lut);
	emitf(e, "\tand.b32 %s, %s, 6;\n\tshl.b32 %s, %s, 2;\n\tbfe.u32 %s, %s, %s, 8;\n", f->ec.s, s->pt.s,
	      f->ec.s, f->ec.s, f->ec.s, f->w.s, f->ec.s);
	w4a8_emit_table_addr(e, f->addr, f->ec, f->base, f->lut);
	emitf(e, "\tld.shared.v2.b32 {%s, %s}, [%s];\n", f->t0.s, f->t1.s, f->addr.s);
	w4a8_emit_expand(e, &f->wr, s->v[0], s->v[1], f->in[0], f->t0, f->t1);
	w4a8_emit_expand(e, &f->wr, s->v[2], s->v[3], f->in[1], f->t0, f->t1);
}

void
indexer_emit_key_tile(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                      Reg i, Reg id, Reg tile, Reg scs, int keys, int threads)
{
	int lk = log2_ceil(keys), fp4 = c->fmt->value_bits == 4, kb = c->fmt->key_bytes;
	Fp4Fold f;

	if (c->fp4_e4m3)
		fp4_fold_init(e, c, r, &f);

	if (fp4 && (layout_sf_offset(1, 0) != 16 || layout_sf_offset(32, 0) != 4))
		kg_bug("indexer fp4 tile: the scale-factor image is 16·(row%%32) + 4·(row/32)");
	for (int k = 0; k < keys * 8 / threads; k++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 3;\n\tand.b32 %s, %s, 7;\n", s->x.s, id.s,
		      threads * k, s->key.s, s->x.s, s->pt.s, s->x.s);
		emitf(e, "\tshl.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n", s->j.s, i.s, lk,
		      s->j.s, s->j.s, s->key.s, s->p.s, s->j.s, r->n.s);
		for (int q = 0; q < 4; q++)
			emitf(e, "\tmov.b32 %s, 0;\n", s->v[q].s);
		/* the key's page from the block table, its row in the page */
		emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s,
		      c->log2ps, s->a.s, s->d.s, s->a.s, r->bt.s, s->a.s);
		emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", s->p.s,
		      s->pg.s, s->a.s, s->o.s, s->pg.s, c->page_bytes, s->a.s, r->kv.s, s->o.s);
		/* part pt of the key's row: 16 values, 16 bytes (fp4: 8) */
		emitf(e, "\tand.b32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 8, %s;\n\tmul.wide.u32 %s, %s, %d;\n", s->d.s,
		      s->j.s, c->ps - 1, s->d.s, s->d.s, s->pt.s, s->o.s, s->d.s, kb / 8);
		if (c->fp4_e4m3)
			fp4_fold_chunk(e, c, s, &f);
		else if (fp4)
			emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.v2.b32 {%s, %s}, [%s];\n", s->a.s, s->a.s,
			      s->o.s, s->p.s, s->v[0].s, s->v[1].s, s->a.s);
		else
			emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s];\n", s->a.s,
			      s->a.s, s->o.s, s->p.s, s->v[0].s, s->v[1].s, s->v[2].s, s->v[3].s, s->a.s);
		/* 16-byte part pt of key row key at key·128 + ((pt ^ key % 8) << 4)
		 * (docs/hardware.md, "Swizzle modes") */
		emitf(e, "\tand.b32 %s, %s, 7;\n\txor.b32 %s, %s, %s;\n\tshl.b32 %s, %s, 4;\n", s->d.s, s->key.s, s->d.s,
		      s->d.s, s->pt.s, s->d.s, s->d.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tadd.u32 %s, %s, %s;\n", s->d.s, s->key.s, s->d.s, s->d.s,
		      s->d.s, tile.s);
		emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", s->d.s, s->v[0].s, s->v[1].s, s->v[2].s,
		      s->v[3].s);
	}
	/* scales: thread id < keys takes key id's, after the page's key rows */
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n", s->j.s, i.s, lk, s->j.s,
	      s->j.s, id.s, s->p.s, s->j.s, r->n.s);
	emitf(e, "\tsetp.lt.and.u32 %s, %s, %d, %s;\n\tmov.f32 %s, 0f00000000;\n", s->p.s, id.s, keys, s->p.s,
	      s->sc.s);
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s, c->log2ps,
	      s->a.s, s->d.s, s->a.s, r->bt.s, s->a.s);
	emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", s->p.s,
	      s->pg.s, s->a.s, s->o.s, s->pg.s, c->page_bytes, s->a.s, r->kv.s, s->o.s);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s,
	      c->ps - 1, s->o.s, s->d.s, s->a.s, s->a.s, s->o.s);
	if (c->fp4_e4m3) {
		/* the key's scale 2^(e_ref - 127) (0 past n) */
		emitf(e, "\tmov.b32 %s, 0;\n\t@%s ld.global.nc.b32 %s, [%s+%d];\n", f.w.s, s->p.s, f.w.s, s->a.s,
		      c->ps * kb);
		w4a8_emit_emax(e, f.emax, f.w, f.ec);
		w4a8_emit_scale(e, f.w, f.emax, f.ec, f.base, f.q);
		emitf(e, "\t@!%s mov.b32 %s, 0;\n", s->p.s, f.w.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.b32 [%s], %s;\n",
		      s->pl.s, id.s, keys, s->d.s, id.s, scs.s, s->pl.s, s->d.s, f.w.s);
		return;
	}
	if (fp4) {
		/* the UE8M0 word (byte g: values 32g..) of key id at its image row */
		emitf(e, "\tmov.b32 %s, 0;\n\t@%s ld.global.nc.b32 %s, [%s+%d];\n", s->v[0].s, s->p.s, s->v[0].s, s->a.s,
		      c->ps * kb);
		emitf(e, "\tand.b32 %s, %s, 31;\n\tshr.u32 %s, %s, 5;\n\tshl.b32 %s, %s, 2;\n\tmad.lo.u32 %s, %s, 16, %s;\n",
		      s->d.s, id.s, s->x.s, id.s, s->x.s, s->x.s, s->d.s, s->d.s, s->x.s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\t@%s st.shared.b32 [%s], %s;\n", s->pl.s,
		      id.s, keys, s->d.s, s->d.s, scs.s, s->pl.s, s->d.s, s->v[0].s);
		return;
	}
	emitf(e, "\t@%s ld.global.nc.f32 %s, [%s+%d];\n", s->p.s, s->sc.s, s->a.s, c->ps * 128);
	emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.f32 [%s], %s;\n", s->pl.s,
	      id.s, keys, s->d.s, id.s, scs.s, s->pl.s, s->d.s, s->sc.s);
}

void
indexer_key_tile_regs(Emit *e, const IndexerCfg *c, IdxTileLoad *l, int keys, int threads)
{
	l->chunks = keys * 8 / threads;
	if (l->chunks > IDX_TILE_CHUNKS || (c->fmt->value_bits == 4 && !c->fp4_e4m3))
		kg_bug("indexer tile loads: %d chunks a thread, format %s", l->chunks, c->fmt->name);
	for (int k = 0; k < l->chunks; k++)
		reg_array(e, RC_B32, l->v[k], c->fp4_e4m3 ? 3 : 4);
	l->sc = reg_new(e, RC_B32);
}

/* Chunk k of thread id in tile i: its key, part, position j (s->j), the
 * predicate j < n (s->p), and its page's address (s->a) with the chunk's
 * offset in it (s->o). */
static void
emit_chunk_addr(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s, Reg i, Reg id, int k,
                int keys, int threads)
{
	int lk = log2_ceil(keys), kb = c->fmt->key_bytes;

	emitf(e, "\tadd.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 3;\n\tand.b32 %s, %s, 7;\n", s->x.s, id.s, threads * k,
	      s->key.s, s->x.s, s->pt.s, s->x.s);
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n", s->j.s, i.s, lk, s->j.s,
	      s->j.s, s->key.s, s->p.s, s->j.s, r->n.s);
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s, c->log2ps,
	      s->a.s, s->d.s, s->a.s, r->bt.s, s->a.s);
	emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", s->p.s,
	      s->pg.s, s->a.s, s->o.s, s->pg.s, c->page_bytes, s->a.s, r->kv.s, s->o.s);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 8, %s;\n\tmul.wide.u32 %s, %s, %d;\n", s->d.s, s->j.s,
	      c->ps - 1, s->d.s, s->d.s, s->pt.s, s->o.s, s->d.s, kb / 8);
}

void
indexer_emit_key_tile_load(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                           const IdxTileLoad *l, Reg i, Reg id, int keys, int threads)
{
	int lk = log2_ceil(keys), kb = c->fmt->key_bytes;

	for (int k = 0; k < l->chunks; k++) {
		const Reg *v = l->v[k];

		emit_chunk_addr(e, c, r, s, i, id, k, keys, threads);
		emitf(e, "\tadd.u64 %s, %s, %s;\n", s->o.s, s->a.s, s->o.s);
		for (int q = 0; q < (c->fp4_e4m3 ? 3 : 4); q++)
			emitf(e, "\tmov.b32 %s, 0;\n", v[q].s);
		if (!c->fp4_e4m3) {
			emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s];\n", s->p.s, v[0].s, v[1].s, v[2].s,
			      v[3].s, s->o.s);
			continue;
		}
		/* 8 bytes of codes; the key's exponent word, 4·(j % ps) into
		 * the page's tail */
		emitf(e, "\t@%s ld.global.nc.v2.b32 {%s, %s}, [%s];\n", s->p.s, v[0].s, v[1].s, s->o.s);
		emitf(e, "\tand.b32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s,
		      c->ps - 1, s->o.s, s->d.s, s->a.s, s->a.s, s->o.s);
		emitf(e, "\t@%s ld.global.nc.b32 %s, [%s+%d];\n", s->p.s, v[2].s, s->a.s, c->ps * kb);
	}
	/* scales: thread id < keys takes key id's, after the page's key rows */
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n", s->j.s, i.s, lk, s->j.s,
	      s->j.s, id.s, s->p.s, s->j.s, r->n.s);
	emitf(e, "\tsetp.lt.and.u32 %s, %s, %d, %s;\n\tmov.b32 %s, 0;\n", s->p.s, id.s, keys, s->p.s, l->sc.s);
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s, c->log2ps,
	      s->a.s, s->d.s, s->a.s, r->bt.s, s->a.s);
	emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", s->p.s,
	      s->pg.s, s->a.s, s->o.s, s->pg.s, c->page_bytes, s->a.s, r->kv.s, s->o.s);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s,
	      c->ps - 1, s->o.s, s->d.s, s->a.s, s->a.s, s->o.s);
	emitf(e, "\t@%s ld.global.nc.b32 %s, [%s+%d];\n", s->p.s, l->sc.s, s->a.s, c->ps * kb);
}

void
indexer_emit_key_tile_store(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                            const IdxTileLoad *l, Reg i, Reg id, Reg tile, Reg scs, int keys, int threads)
{
	int lk = log2_ceil(keys);
	Fp4Fold f;

	if (c->fp4_e4m3)
		fp4_fold_init(e, c, r, &f);
	for (int k = 0; k < l->chunks; k++) {
		const Reg *v = l->v[k], *out = v;

		emitf(e, "\tadd.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 3;\n\tand.b32 %s, %s, 7;\n", s->x.s, id.s,
		      threads * k, s->key.s, s->x.s, s->pt.s, s->x.s);
		if (c->fp4_e4m3) {
			/* group pt / 2's exponent against the key's largest, its table */
			w4a8_emit_emax(e, f.emax, v[2], f.ec);
			w4a8_emit_table_base(e, f.base, f.emax, f.lut);
			emitf(e, "\tand.b32 %s, %s, 6;\n\tshl.b32 %s, %s, 2;\n\tbfe.u32 %s, %s, %s, 8;\n", f.ec.s, s->pt.s,
			      f.ec.s, f.ec.s, f.ec.s, v[2].s, f.ec.s);
			w4a8_emit_table_addr(e, f.addr, f.ec, f.base, f.lut);
			emitf(e, "\tld.shared.v2.b32 {%s, %s}, [%s];\n", f.t0.s, f.t1.s, f.addr.s);
			w4a8_emit_expand(e, &f.wr, s->v[0], s->v[1], v[0], f.t0, f.t1);
			w4a8_emit_expand(e, &f.wr, s->v[2], s->v[3], v[1], f.t0, f.t1);
			out = s->v;
		}
		/* 16-byte part pt of key row key at key·128 + ((pt ^ key % 8) << 4)
		 * (docs/hardware.md, "Swizzle modes") */
		emitf(e, "\tand.b32 %s, %s, 7;\n\txor.b32 %s, %s, %s;\n\tshl.b32 %s, %s, 4;\n", s->d.s, s->key.s, s->d.s,
		      s->d.s, s->pt.s, s->d.s, s->d.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tadd.u32 %s, %s, %s;\n", s->d.s, s->key.s, s->d.s, s->d.s,
		      s->d.s, tile.s);
		emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", s->d.s, out[0].s, out[1].s, out[2].s, out[3].s);
	}
	/* the key's scale (fp4: 2^(e_ref - 127) from its word; 0 past n) */
	if (c->fp4_e4m3) {
		emitf(e, "\tshl.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n", s->j.s, i.s, lk,
		      s->j.s, s->j.s, id.s, s->p.s, s->j.s, r->n.s);
		w4a8_emit_emax(e, f.emax, l->sc, f.ec);
		w4a8_emit_scale(e, f.w, f.emax, f.ec, f.base, f.q);
		emitf(e, "\tselp.b32 %s, %s, 0, %s;\n", l->sc.s, f.w.s, s->p.s);
	}
	emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.b32 [%s], %s;\n", s->pl.s,
	      id.s, keys, s->d.s, id.s, scs.s, s->pl.s, s->d.s, l->sc.s);
}

void
indexer_emit_q_tile(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg q0, Reg id, int rows, int threads)
{
	Reg ch = reg_new(e, RC_B32), row = reg_new(e, RC_B32), part = reg_new(e, RC_B32), d = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), p = reg_new(e, RC_PRED), v[4];

	reg_array(e, RC_B32, v, 4);
	emitf(e, "\tld.param.u64 %s, [p_Q];\n\tcvta.to.global.u64 %s, %s;\n", a.s, a.s, a.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o.s, r->row.s, c->heads * 128, a.s, a.s, o.s);
	for (int i = 0; i < rows * 8 / threads; i++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 3;\n\tand.b32 %s, %s, 7;\n", ch.s, id.s,
		      threads * i, row.s, ch.s, part.s, ch.s);
		for (int k = 0; k < 4; k++)
			emitf(e, "\tmov.b32 %s, 0;\n", v[k].s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 16;\n\tadd.u64 %s, %s, %s;\n", p.s, row.s,
		      c->heads, o.s, ch.s, o.s, a.s, o.s);
		emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s];\n", p.s, v[0].s, v[1].s, v[2].s, v[3].s, o.s);
		/* row·128 + (part ^ row % 8)·16: the 128-byte swizzle */
		emitf(e, "\tand.b32 %s, %s, 7;\n\txor.b32 %s, %s, %s;\n\tshl.b32 %s, %s, 4;\n", d.s, row.s, d.s, d.s,
		      part.s, d.s, d.s);
		emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tadd.u32 %s, %s, %s;\n", d.s, row.s, d.s, d.s, d.s, q0.s);
		emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", d.s, v[0].s, v[1].s, v[2].s, v[3].s);
	}
}
