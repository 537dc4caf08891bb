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
	Reg w, emax, ec, base, addr, t0, t1, lut; /* b32 */
	Reg q;                                    /* pred */
} Fp4Fold;

static void
fp4_fold_init(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Fp4Fold *f)
{
	Reg *b[] = {&f->w, &f->emax, &f->ec, &f->base, &f->addr, &f->t0, &f->t1, &f->lut};

	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
		*b[i] = reg_new(e, RC_B32);
	f->q = reg_new(e, RC_PRED);
	w4a8_emit_init(e, &f->wr);
	emitf(e, "\tadd.u32 %s, %s, %u;\n", f->lut.s, r->base.s, c->plan.smem[c->r_lut].offset);
}

/* Chunk id + off of a tile: x = it, row = x / 8, part = x % 8. */
static void
emit_chunk_of(Emit *e, Reg x, Reg row, Reg part, Reg id, int off)
{
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 3;\n\tand.b32 %s, %s, 7;\n", x.s, id.s, off, row.s, x.s,
	      part.s, x.s);
}

/* Key `key` of tile i (2^lk keys a tile): its position s->j and s->p =
 * s->j < n. */
static void
emit_key_pos(Emit *e, const IndexerRegs *r, const IdxTileScratch *s, Reg i, Reg key, int lk)
{
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n", s->j.s, i.s, lk, s->j.s,
	      s->j.s, key.s, s->p.s, s->j.s, r->n.s);
}

/* d = base + row·128 + ((part ^ row % 8) << 4): 16-byte part `part` of a
 * 128-byte row in the 128-byte-swizzled K-major tile at base
 * (docs/hardware.md, "Swizzle modes"). */
static void
emit_swizzled_part(Emit *e, Reg d, Reg row, Reg part, Reg base)
{
	emitf(e, "\tand.b32 %s, %s, 7;\n\txor.b32 %s, %s, %s;\n\tshl.b32 %s, %s, 4;\n", d.s, row.s, d.s, d.s, part.s,
	      d.s, d.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tadd.u32 %s, %s, %s;\n", d.s, row.s, d.s, d.s, d.s, base.s);
}

/* The page of key s->j (under s->p) from the block table: its address in
 * s->a (s->d, s->pg, s->o scratch). */
static void
emit_key_page(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s)
{
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s, c->log2ps,
	      s->a.s, s->d.s, s->a.s, r->bt.s, s->a.s);
	emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", s->p.s,
	      s->pg.s, s->a.s, s->o.s, s->pg.s, c->page_bytes, s->a.s, r->kv.s, s->o.s);
}

/* s->a += 4·(s->j % ps): key s->j's scale word is then at s->a + ps·key
 * bytes, in the page's tail (s->d = s->j % ps). */
static void
emit_key_word_addr(Emit *e, const IndexerCfg *c, const IdxTileScratch *s)
{
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s,
	      c->ps - 1, s->o.s, s->d.s, s->a.s, s->a.s, s->o.s);
}

void
indexer_emit_key_tile(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                      Reg i, Reg id, Reg tile, Reg scs, int keys, int threads)
{
	int lk = log2_ceil(keys), fp4 = c->fmt->value_bits == 4, kb = c->fmt->key_bytes;

	if (c->fp4_e4m3)
		kg_bug("indexer fp4 tile: keys turned into E4M3 go through indexer_emit_key_tile_load/_store");
	if (fp4 && (layout_sf_offset(1, 0) != 16 || layout_sf_offset(32, 0) != 4))
		kg_bug("indexer fp4 tile: the scale-factor image is 16·(row%%32) + 4·(row/32)");
	for (int k = 0; k < keys * 8 / threads; k++) {
		emit_chunk_of(e, s->x, s->key, s->pt, id, threads * k);
		emit_key_pos(e, r, s, i, s->key, lk);
		for (int q = 0; q < 4; q++)
			emitf(e, "\tmov.b32 %s, 0;\n", s->v[q].s);
		/* the key's page from the block table, its row in the page */
		emit_key_page(e, c, r, s);
		/* part pt of the key's row: 16 values, 16 bytes (fp4: 8) */
		emitf(e, "\tand.b32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 8, %s;\n\tmul.wide.u32 %s, %s, %d;\n", s->d.s,
		      s->j.s, c->ps - 1, s->d.s, s->d.s, s->pt.s, s->o.s, s->d.s, kb / 8);
		if (fp4)
			emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.v2.b32 {%s, %s}, [%s];\n", s->a.s, s->a.s,
			      s->o.s, s->p.s, s->v[0].s, s->v[1].s, s->a.s);
		else
			emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s];\n", s->a.s,
			      s->a.s, s->o.s, s->p.s, s->v[0].s, s->v[1].s, s->v[2].s, s->v[3].s, s->a.s);
		emit_swizzled_part(e, s->d, s->key, s->pt, tile);
		emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", s->d.s, s->v[0].s, s->v[1].s, s->v[2].s,
		      s->v[3].s);
	}
	/* scales: thread id < keys takes key id's, after the page's key rows */
	emit_key_pos(e, r, s, i, id, lk);
	emitf(e, "\tsetp.lt.and.u32 %s, %s, %d, %s;\n\tmov.f32 %s, 0f00000000;\n", s->p.s, id.s, keys, s->p.s,
	      s->sc.s);
	emit_key_page(e, c, r, s);
	emit_key_word_addr(e, c, s);
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
	/* fp8: chunks of 16 bytes; fp4: half a key's codes, 32 bytes */
	l->chunks = c->fp4_e4m3 ? 2 : keys * 8 / threads;
	if (l->chunks > IDX_TILE_CHUNKS || (c->fmt->value_bits == 4 && !c->fp4_e4m3) ||
	    (c->fp4_e4m3 && 2 * keys != threads))
		kg_bug("indexer tile loads: %d keys by %d threads, format %s", keys, threads, c->fmt->name);
	for (int k = 0; k < l->chunks; k++)
		reg_array(e, RC_B32, l->v[k], 4);
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

	emit_chunk_of(e, s->x, s->key, s->pt, id, threads * k);
	emit_key_pos(e, r, s, i, s->key, lk);
	emit_key_page(e, c, r, s);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 8, %s;\n\tmul.wide.u32 %s, %s, %d;\n", s->d.s, s->j.s,
	      c->ps - 1, s->d.s, s->d.s, s->pt.s, s->o.s, s->d.s, kb / 8);
}

/* fp4 keys as E4M3 (c->fp4_e4m3): thread id takes half h = id % 2 of key
 * id / 2 of tile i, codes 32h .. 32h+31 (bytes 32h.. of its row: groups
 * 2h and 2h+1), with two 16-byte loads, and the key's exponent word;
 * the exponents fold once per key and per thread (gen/w4a8.h). */
static void
emit_fp4_half_load(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s, const IdxTileLoad *l,
                   Reg i, Reg id, int lk)
{
	int kb = c->fmt->key_bytes;

	emitf(e, "\tshr.u32 %s, %s, 1;\n\tand.b32 %s, %s, 1;\n", s->key.s, id.s, s->pt.s, id.s);
	emit_key_pos(e, r, s, i, s->key, lk);
	for (int k = 0; k < 2; k++)
		for (int q = 0; q < 4; q++)
			emitf(e, "\tmov.b32 %s, 0;\n", l->v[k][q].s);
	emitf(e, "\tmov.b32 %s, 0;\n", l->sc.s);
	/* the key's page from the block table, its row in the page */
	emit_key_page(e, c, r, s);
	emitf(e, "\tand.b32 %s, %s, %d;\n\tshl.b32 %s, %s, 5;\n\tmad.lo.u32 %s, %s, %d, %s;\n", s->d.s, s->j.s,
	      c->ps - 1, s->x.s, s->pt.s, s->x.s, s->d.s, kb, s->x.s);
	emitf(e, "\tcvt.u64.u32 %s, %s;\n\tadd.u64 %s, %s, %s;\n", s->o.s, s->x.s, s->o.s, s->a.s, s->o.s);
	for (int k = 0; k < 2; k++)
		emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s+%d];\n", s->p.s, l->v[k][0].s, l->v[k][1].s,
		      l->v[k][2].s, l->v[k][3].s, s->o.s, 16 * k);
	/* the key's exponent word: 4·(j % ps) into the page's tail */
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.b32 %s, [%s+%d];\n", s->o.s,
	      s->d.s, s->a.s, s->a.s, s->o.s, s->p.s, l->sc.s, s->a.s, c->ps * kb);
}

/* The half key into the tile: each group's byte table (offset from the
 * key's largest exponent), two parts of 16 codes a group into 16 E4M3
 * bytes each, stored at key·128 + ((part ^ key % 8) << 4); the even
 * thread stores the key's scale 2^(e_ref - 127) (0 past n). */
static void
emit_fp4_half_store(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                    const IdxTileLoad *l, Reg i, Reg id, Reg tile, Reg scs, int lk)
{
	Fp4Fold f;

	fp4_fold_init(e, c, r, &f);
	emitf(e, "\tshr.u32 %s, %s, 1;\n\tand.b32 %s, %s, 1;\n", s->key.s, id.s, s->pt.s, id.s);
	w4a8_emit_emax(e, f.emax, l->sc, f.ec);
	w4a8_emit_table_base(e, f.base, f.emax, f.lut);
	for (int g = 0; g < 2; g++) {
		/* group 2h + g: its exponent, byte 2h + g of the word */
		emitf(e, "\tshl.b32 %s, %s, 4;\n\tadd.u32 %s, %s, %d;\n\tbfe.u32 %s, %s, %s, 8;\n", f.ec.s, s->pt.s, f.ec.s,
		      f.ec.s, 8 * g, f.ec.s, l->sc.s, f.ec.s);
		w4a8_emit_table_addr(e, f.addr, f.ec, f.base, f.lut);
		emitf(e, "\tld.shared.v2.b32 {%s, %s}, [%s];\n", f.t0.s, f.t1.s, f.addr.s);
		for (int q = 0; q < 2; q++) {
			w4a8_emit_expand(e, &f.wr, s->v[0], s->v[1], l->v[g][2 * q], f.t0, f.t1);
			w4a8_emit_expand(e, &f.wr, s->v[2], s->v[3], l->v[g][2 * q + 1], f.t0, f.t1);
			/* part 4h + 2g + q */
			emitf(e, "\tshl.b32 %s, %s, 2;\n\tadd.u32 %s, %s, %d;\n", s->x.s, s->pt.s, s->x.s, s->x.s, 2 * g + q);
			emit_swizzled_part(e, s->d, s->key, s->x, tile);
			emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", s->d.s, s->v[0].s, s->v[1].s, s->v[2].s,
			      s->v[3].s);
		}
	}
	emit_key_pos(e, r, s, i, s->key, lk);
	w4a8_emit_scale(e, f.w, f.emax, f.ec, f.base, f.q);
	emitf(e, "\tselp.b32 %s, %s, 0, %s;\n\tsetp.eq.u32 %s, %s, 0;\n", f.w.s, f.w.s, s->p.s, s->pl.s, s->pt.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\t@%s st.shared.b32 [%s], %s;\n", s->d.s, s->key.s, scs.s, s->pl.s, s->d.s,
	      f.w.s);
}

void
indexer_emit_key_tile_load(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                           const IdxTileLoad *l, Reg i, Reg id, int keys, int threads)
{
	int lk = log2_ceil(keys), kb = c->fmt->key_bytes;

	if (c->fp4_e4m3) {
		emit_fp4_half_load(e, c, r, s, l, i, id, lk);
		return;
	}
	for (int k = 0; k < l->chunks; k++) {
		const Reg *v = l->v[k];

		emit_chunk_addr(e, c, r, s, i, id, k, keys, threads);
		emitf(e, "\tadd.u64 %s, %s, %s;\n", s->o.s, s->a.s, s->o.s);
		for (int q = 0; q < 4; q++)
			emitf(e, "\tmov.b32 %s, 0;\n", v[q].s);
		emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s];\n", s->p.s, v[0].s, v[1].s, v[2].s, v[3].s,
		      s->o.s);
	}
	/* scales: thread id < keys takes key id's, after the page's key rows */
	emit_key_pos(e, r, s, i, id, lk);
	emitf(e, "\tsetp.lt.and.u32 %s, %s, %d, %s;\n\tmov.b32 %s, 0;\n", s->p.s, id.s, keys, s->p.s, l->sc.s);
	emit_key_page(e, c, r, s);
	emit_key_word_addr(e, c, s);
	emitf(e, "\t@%s ld.global.nc.b32 %s, [%s+%d];\n", s->p.s, l->sc.s, s->a.s, c->ps * kb);
}

void
indexer_emit_key_tile_store(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                            const IdxTileLoad *l, Reg i, Reg id, Reg tile, Reg scs, int keys, int threads)
{
	if (c->fp4_e4m3) {
		emit_fp4_half_store(e, c, r, s, l, i, id, tile, scs, log2_ceil(keys));
		return;
	}
	for (int k = 0; k < l->chunks; k++) {
		const Reg *v = l->v[k];

		emit_chunk_of(e, s->x, s->key, s->pt, id, threads * k);
		emit_swizzled_part(e, s->d, s->key, s->pt, tile);
		emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", s->d.s, v[0].s, v[1].s, v[2].s, v[3].s);
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
		emit_chunk_of(e, ch, row, part, id, threads * i);
		for (int k = 0; k < 4; k++)
			emitf(e, "\tmov.b32 %s, 0;\n", v[k].s);
		emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 16;\n\tadd.u64 %s, %s, %s;\n", p.s, row.s,
		      c->heads, o.s, ch.s, o.s, a.s, o.s);
		emitf(e, "\t@%s ld.global.nc.v4.b32 {%s, %s, %s, %s}, [%s];\n", p.s, v[0].s, v[1].s, v[2].s, v[3].s, o.s);
		emit_swizzled_part(e, d, row, part, q0);
		emitf(e, "\tst.shared.v4.b32 [%s], {%s, %s, %s, %s};\n", d.s, v[0].s, v[1].s, v[2].s, v[3].s);
	}
}
