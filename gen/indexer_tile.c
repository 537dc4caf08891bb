/* The Q and key tiles the tensor-core indexer scorings share (gen/indexer.h):
 * each target's MMA reads the same K-major, 128-byte-swizzled E4M3 tile,
 * filled by loads and stores (indexer_emit_key_tile, or in two steps for
 * fp4 keys as E4M3) or by cp.async (indexer_emit_tile_copy, fp8 keys);
 * only the tile's key count and the threads that fill it differ. */
#include "indexer.h"
#include "layout.h"
#include "ops.h"
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
	if (!c->fp4_e4m3 || 2 * keys != threads)
		kg_bug("indexer tile loads: %d keys by %d threads, format %s", keys, threads, c->fmt->name);
	for (int k = 0; k < 2; k++)
		reg_array(e, RC_B32, l->v[k], 4);
	l->sc = reg_new(e, RC_B32);
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
	if (!c->fp4_e4m3 || 2 * keys != threads)
		kg_bug("indexer tile loads: fp4 keys as E4M3 only, half a key a thread");
	emit_fp4_half_load(e, c, r, s, l, i, id, log2_ceil(keys));
}

void
indexer_emit_key_tile_store(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                            const IdxTileLoad *l, Reg i, Reg id, Reg tile, Reg scs, int keys, int threads)
{
	if (!c->fp4_e4m3 || 2 * keys != threads)
		kg_bug("indexer tile stores: fp4 keys as E4M3 only, half a key a thread");
	emit_fp4_half_store(e, c, r, s, l, i, id, tile, scs, log2_ceil(keys));
}

/* The copy's geometry (gen/indexer.h, IdxTileCopy): 128 threads, warp w
 * copying key rows 16w .. 16w + 15 of the tile (the rows of A its own
 * MMA reads), lane l part l % 8 of rows 16w + l / 8 + 4q. Pages hold a
 * multiple of 16 keys (every --page-size), so a warp's rows lie in one
 * page. */
enum { COPY_THREADS = 128, COPY_ROWS = IDX_TILE / (COPY_THREADS / 32), COPY_CHUNKS = IDX_TILE * 8 / COPY_THREADS };
_Static_assert(COPY_ROWS * 8 == COPY_CHUNKS * 32, "a warp's rows split evenly over its lanes' chunks");

void
indexer_tile_copy_init(Emit *e, const IndexerCfg *c, IdxTileCopy *k, Reg id)
{
	Reg l = reg_new(e, RC_B32), g = reg_new(e, RC_B32), t = reg_new(e, RC_B32), u = reg_new(e, RC_B32);

	if (c->fmt->value_bits != 8 || c->ps % COPY_ROWS)
		kg_bug("indexer tile copy: fp8 keys, pages of a multiple of %d keys", COPY_ROWS);
	k->pg = reg_new(e, RC_B32);
	k->w16 = reg_new(e, RC_B32);
	k->row0 = reg_new(e, RC_B32);
	k->dst0 = reg_new(e, RC_B32);
	k->dst1 = reg_new(e, RC_B32);
	k->off0 = reg_new(e, RC_B64);
	k->soff = reg_new(e, RC_B64);
	/* w16 = 16·warp, its first row; row0 = w16 + g with g = lane / 8 */
	emitf(e, "\tand.b32 %s, %s, 31;\n\tshr.u32 %s, %s, 5;\n\tshl.b32 %s, %s, 4;\n\tshr.u32 %s, %s, 3;\n", l.s, id.s,
	      t.s, id.s, k->w16.s, t.s, g.s, l.s);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", k->row0.s, k->w16.s, g.s);
	/* part p = lane % 8 of row row0 + 4q lands at (row0 + 4q)·128 +
	 * ((p ^ row % 8) << 4) (docs/hardware.md, "Swizzle modes"), with row
	 * % 8 = g for even q and g ^ 4 for odd q: dst0 and dst1, the chunks
	 * after them 1024 bytes apart */
	emitf(e, "\tand.b32 %s, %s, 7;\n\txor.b32 %s, %s, %s;\n\tshl.b32 %s, %s, 4;\n", t.s, l.s, u.s, t.s, g.s, u.s,
	      u.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\txor.b32 %s, %s, 64;\n\tmad.lo.u32 %s, %s, 128, %s;\n", k->dst0.s,
	      k->row0.s, u.s, u.s, u.s, k->dst1.s, k->row0.s, u.s);
	emitf(e, "\tadd.u32 %s, %s, 512;\n", k->dst1.s, k->dst1.s);
	/* off0 = (w16 % ps + g)·128 + p·16: chunk 0's bytes in the page
	 * (when the tile starts a page); chunk q adds 512·q */
	emitf(e, "\tand.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tshl.b32 %s, %s, 4;\n", u.s, k->w16.s, c->ps - 1, g.s,
	      g.s, u.s, t.s, t.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 128, %s;\n\tcvt.u64.u32 %s, %s;\n", t.s, g.s, t.s, k->off0.s, t.s);
	/* lanes 0-3: soff = ps·128 + 4·(w16 % ps + 4·lane), the scales of the
	 * warp's keys 4·lane .. 4·lane + 3 in the page's tail */
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tmad.lo.u32 %s, %s, 4, %d;\n\tcvt.u64.u32 %s, %s;\n", t.s, l.s, u.s, t.s,
	      t.s, c->ps * 128, k->soff.s, t.s);
}

void
indexer_emit_tile_pages(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                        const IdxTileCopy *k, Reg i)
{
	/* this warp's rows of tile i: keys 64i + w16 .., block-table entry
	 * (64i + w16) >> log2 ps, loaded while that key is visible */
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n\tsetp.lt.s32 %s, %s, %s;\n", s->j.s, i.s,
	      log2_ceil(IDX_TILE), s->j.s, s->j.s, k->w16.s, s->p.s, s->j.s, r->n.s);
	emitf(e, "\tshr.u32 %s, %s, %d;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", s->d.s, s->j.s, c->log2ps,
	      s->a.s, s->d.s, s->a.s, r->bt.s, s->a.s);
	emitf(e, "\tmov.b32 %s, 0;\n\t@%s ld.global.nc.u32 %s, [%s];\n", k->pg.s, s->p.s, k->pg.s, s->a.s);
}

/* s->a = the page (s->o) + off, plus `bytes` times the tile's first key's
 * row in it (s->d) where a page holds more than a tile. */
static void
emit_page_part(Emit *e, const IndexerCfg *c, const IdxTileScratch *s, Reg off, int bytes)
{
	emitf(e, "\tadd.u64 %s, %s, %s;\n", s->a.s, s->o.s, off.s);
	if (c->ps > IDX_TILE)
		emitf(e, "\tmad.wide.u32 %s, %s, %d, %s;\n", s->a.s, s->d.s, bytes, s->a.s);
}

void
indexer_emit_tile_copy(Emit *e, const IndexerCfg *c, const IndexerRegs *r, const IdxTileScratch *s,
                       const IdxTileCopy *k, Reg i, Reg id, Reg tile, Reg scs)
{
	/* s->j = n - 64i, the keys left from the tile's first; s->o = the
	 * page; s->d = the tile's first key's row in it where a page holds
	 * more than a tile (else 0) */
	emitf(e, "\tshl.b32 %s, %s, %d;\n\tsub.s32 %s, %s, %s;\n", s->x.s, i.s, log2_ceil(IDX_TILE), s->j.s, r->n.s,
	      s->x.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", s->o.s, k->pg.s, c->page_bytes, s->o.s, s->o.s,
	      r->kv.s);
	if (c->ps > IDX_TILE)
		emitf(e, "\tand.b32 %s, %s, %d;\n", s->d.s, s->x.s, c->ps - 1);
	emit_page_part(e, c, s, k->off0, 128);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", s->pg.s, tile.s, k->dst0.s, s->pt.s, tile.s,
	      k->dst1.s);
	for (int q = 0; q < COPY_CHUNKS; q++) {
		/* row0 + 4q < n - 64i, else the chunk is zero-filled */
		emitf(e, "\tsub.s32 %s, %s, %d;\n\tsetp.lt.s32 %s, %s, %s;\n\tselp.u32 %s, 16, 0, %s;\n", s->key.s,
		      s->j.s, 4 * q, s->p.s, k->row0.s, s->key.s, s->key.s, s->p.s);
		emitf(e, "\tcp.async.cg.shared.global [%s+%d], [%s+%d], 16, %s;\n", q % 2 ? s->pt.s : s->pg.s,
		      1024 * (q / 2), s->a.s, 512 * q, s->key.s);
	}
	/* lanes 0-3: the scales of the warp's keys w16 + 4·lane .. + 3 (whole
	 * when the first is visible) at scs + 4·(w16 + 4·lane) */
	emit_page_part(e, c, s, k->soff, 4);
	emitf(e, "\tand.b32 %s, %s, 31;\n\tsetp.lt.u32 %s, %s, 4;\n\tmad.lo.u32 %s, %s, 4, %s;\n", s->x.s, id.s, s->pl.s,
	      s->x.s, s->x.s, s->x.s, k->w16.s);
	emitf(e, "\tsetp.lt.s32 %s, %s, %s;\n\tselp.u32 %s, 16, 0, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", s->p.s, s->x.s,
	      s->j.s, s->key.s, s->p.s, s->x.s, s->x.s, scs.s);
	emitf(e, "\t@%s cp.async.cg.shared.global [%s], [%s], 16, %s;\n\tcp.async.commit_group;\n", s->pl.s, s->x.s,
	      s->a.s, s->key.s);
}

void
indexer_emit_q_tile(Emit *e, const IndexerCfg *c, const IndexerRegs *r, Reg q0, Reg id, int rows, int threads)
{
	Reg ch = reg_new(e, RC_B32), row = reg_new(e, RC_B32), part = reg_new(e, RC_B32), d = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), p = reg_new(e, RC_PRED), v[4];

	reg_array(e, RC_B32, v, 4);
	op_param_global(e, a, "Q");
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
