/* Indexer scoring on sm_90a's tensor cores (--score wgmma; docs/indexer.md,
 * "Tensor-core scoring"): Q's heads are the A operand (64 rows of 128 E4M3,
 * rows past the heads zero), a tile of 64 keys the B operand; S = Q·K^T is
 * four wgmma m64n64k32 e4m3 into 32 f32 registers a thread. Each of the
 * CTA's two warpgroups takes every other tile: its 128 threads gather the
 * tile's key rows from their pages with 16-byte loads into the 128-byte
 * swizzled K-major layout a TMA box would write (Q too, a copy per
 * warpgroup, before the first tile), and the scales beside, then fence the
 * generic stores for the async proxy (PTX ISA "Asynchronous proxy") and
 * meet at the warpgroup's barrier before the MMAs. A tile's loads are
 * issued one tile ahead, into registers, while the previous tile's MMAs
 * and epilogue run (docs/indexer.md, "Tensor-core scoring"). The
 * epilogue weighs each row (head) h of a column (key) j by
 * w[h]·max(0, S·s_j), sums a thread's two rows, the eight lanes that share
 * a column (shfl, halving the values at each step), and the four warps
 * (shared memory). */
#include <stdio.h>

#include "../indexer.h"
#include "../layout.h"
#include "../ops.h"
#include "indexer_mma.h"
#include "mma.h"

enum { WGS = IDX_THREADS / 128 };

/* bar.sync 1 + wg, 128 with an immediate id (a register id would read as
 * an optional turn wait to the mutation test): one predicated line per
 * warpgroup. */
static void
emit_wg_bar(Emit *e, Reg wg0, const char *why)
{
	emitf(e, "\t@%s bar.sync 1, 128; // warpgroup 0: %s\n\t@!%s bar.sync 2, 128; // warpgroup 1: %s\n", wg0.s, why,
	      wg0.s, why);
}

int
sm90_indexer_score_mma(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err)
{
	TileLayout lt;
	uint64_t desc;
	Reg acc[32], part[16], v[4], wr[2];
	Reg wg = reg_new(e, RC_B32), wt = reg_new(e, RC_B32), warp = reg_new(e, RC_B32), lane = reg_new(e, RC_B32);
	Reg i = reg_new(e, RC_B32), j = reg_new(e, RC_B32), t = reg_new(e, RC_B32), key = reg_new(e, RC_B32);
	Reg pt = reg_new(e, RC_B32), d = reg_new(e, RC_B32), pg = reg_new(e, RC_B32), x = reg_new(e, RC_B32);
	Reg q0 = reg_new(e, RC_B32), tile = reg_new(e, RC_B32), scs = reg_new(e, RC_B32), sums = reg_new(e, RC_B32);
	Reg ws = reg_new(e, RC_B32), qlo = reg_new(e, RC_B32), klo = reg_new(e, RC_B32), hi = reg_new(e, RC_B32);
	Reg stride = reg_new(e, RC_B32), lo = reg_new(e, RC_B32), row0 = reg_new(e, RC_B32), col0 = reg_new(e, RC_B32);
	Reg in = reg_new(e, RC_B32);
	IdxTileLoad ld;
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), ad = reg_new(e, RC_B64), bd = reg_new(e, RC_B64);
	Reg sc = reg_new(e, RC_F32), y = reg_new(e, RC_F32), z = reg_new(e, RC_F32);
	Reg p = reg_new(e, RC_PRED), pl = reg_new(e, RC_PRED), wg0 = reg_new(e, RC_PRED), l = reg_new(e, RC_B32);
	char loop[48], done[48];

	if (layout_canonical(&lt, MAJOR_K, SWZ_128B, 8, 64, 128, err) < 0 ||
	    desc_for_tile(&desc, c->t->desc, &lt, 0, err) < 0)
		return -1;
	reg_array(e, RC_F32, acc, 32);
	reg_array(e, RC_F32, part, 16);
	reg_array(e, RC_B32, v, 4);
	reg_array(e, RC_F32, wr, 2);
	IdxTileScratch ts = {x, key, pt, j, d, pg, a, o, {v[0], v[1], v[2], v[3]}, sc, p, pl};

	emit_block(e, "sm90.indexer_mma");
	label_new(e, loop, sizeof loop, "tile");
	label_new(e, done, sizeof done, "tiles_done");
	/* warpgroup wg: tiles wg, wg + 2, ..; its Q, tile, scales and sums */
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tand.b32 %s, %s, 127;\n\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n", wg.s,
	      r->tid.s, wt.s, r->tid.s, warp.s, wt.s, lane.s, wt.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", wg0.s, wg.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", q0.s, r->base.s, c->plan.smem[c->r_q].offset,
	      q0.s, wg.s, 64 * 128, q0.s);
	/* each warpgroup stages its own copy of Q (its A tile), so its first
	 * tile's proxy fence and barrier publish Q to its MMAs too */
	indexer_emit_q_tile(e, c, r, q0, wt, 64, 128);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", tile.s, r->base.s,
	      c->plan.smem[c->r_tiles].offset, tile.s, wg.s, IDX_TILE * 128, tile.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", scs.s, r->base.s,
	      c->plan.smem[c->r_scales].offset, scs.s, wg.s, 4 * IDX_TILE, scs.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", sums.s, r->base.s,
	      c->plan.smem[c->r_sums].offset, sums.s, wg.s, 4 * 4 * IDX_TILE, sums.s);
	/* descriptors: start address >> 4 in the low word (gen/desc) */
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n", qlo.s, q0.s, qlo.s, qlo.s, (uint32_t)desc);
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n", klo.s, tile.s, klo.s, klo.s, (uint32_t)desc);
	op_desc_hi(e, hi, c->t->desc, desc, "Q and key tiles, K-major E4M3");
	/* this thread's accumulator rows (heads) and their weights */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, 4;\n\tshr.u32 %s, %s, 2;\n\tadd.u32 %s, %s, %s;\n", row0.s,
	      warp.s, row0.s, row0.s, t.s, lane.s, row0.s, row0.s, t.s);
	sm90_acc_col0(e, col0, lane);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 4, %s;\n", ws.s, r->base.s, c->plan.smem[c->r_w].offset,
	      ws.s, row0.s, ws.s);
	emitf(e, "\tld.shared.f32 %s, [%s];\n\tld.shared.f32 %s, [%s+32];\n", wr[0].s, ws.s, wr[1].s, ws.s);

	/* tiles wg + 2·(split + splits·m); the part's local keys
	 * l = 128·m + 64·wg + wt */
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmul.lo.u32 %s, %s, %d;\n", i.s, r->split.s, WGS, wg.s, stride.s,
	      r->splits.s, WGS);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", l.s, wg.s, IDX_TILE, wt.s);
	/* the first tile's loads; each tile's MMAs then run while the next
	 * tile's loads are in flight */
	indexer_key_tile_regs(e, c, &ld, IDX_TILE, 128);
	indexer_emit_key_tile_load(e, c, r, &ts, &ld, i, wt, IDX_TILE, 128);
	emit_label(e, loop);
	emitf(e, "\tshl.b32 %s, %s, 6;\n\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", t.s, i.s, p.s, t.s, r->n.s, p.s,
	      done);
	indexer_emit_key_tile_store(e, c, r, &ts, &ld, i, wt, tile, scs, IDX_TILE, 128);
	/* this thread's generic stores (the tile, and Q before the first),
	 * read by the async proxy (wgmma) */
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	emit_wg_bar(e, wg0, "its key tile stored");
	/* S = Q·K^T: 32 bytes of K (k32) per MMA, the first overwriting */
	sm90_wgmma_fence(e);
	for (int kk = 0; kk < 4; kk++) {
		uint32_t off = layout_offset(&lt, 0, 32 * kk) >> 4;
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, qlo.s, off, ad.s, lo.s, hi.s);
		emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, klo.s, off, bd.s, lo.s, hi.s);
		emitf(e, "\twgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 %s, %s, %s, %d, 1, 1;\n",
		      reg_vec(e, acc, 32), ad.s, bd.s, kk > 0);
	}
	sm90_wgmma_commit(e);
	/* the next tile's loads (its registers were stored above) */
	emitf(e, "\tadd.u32 %s, %s, %s;\n", in.s, i.s, stride.s);
	indexer_emit_key_tile_load(e, c, r, &ts, &ld, in, wt, IDX_TILE, 128);
	sm90_wgmma_wait(e, 0);
	/* register 4g + 2r + e: row row0 + 8r, column col0 + 8g + e
	 * (docs/hardware.md, "wgmma accumulator fragment") */
	for (int g = 0; g < 8; g++)
		for (int ee = 0; ee < 2; ee++) {
			Reg *s = &part[2 * g + ee];
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, 4, %s;\n\tld.shared.f32 %s, [%s];\n", d.s,
			      col0.s, 8 * g + ee, d.s, d.s, scs.s, sc.s, d.s);
			emitf(e, "\tmul.f32 %s, %s, %s;\n\tmax.f32 %s, %s, 0f00000000;\n\tmul.f32 %s, %s, %s;\n", y.s,
			      acc[4 * g + ee].s, sc.s, y.s, y.s, s->s, y.s, wr[0].s);
			emitf(e, "\tmul.f32 %s, %s, %s;\n\tmax.f32 %s, %s, 0f00000000;\n\tfma.rn.f32 %s, %s, %s, %s;\n",
			      z.s, acc[4 * g + 2 + ee].s, sc.s, z.s, z.s, s->s, z.s, wr[1].s, s->s);
		}
	/* the eight lanes that share columns (lane bits 2-4) sum them by
	 * halving: over lane bit b each lane keeps one half of its values,
	 * sends the other to its partner and adds what comes back, so 16 + 8
	 * + 4 values take 14 shuffles; lane l then holds the columns
	 * col0 + 8g, col0 + 8g + 1 of g = b4 + 2·b3 + 4·b2 */
	for (int half = 8, m = 4; half >= 2; half /= 2, m *= 2) {
		emitf(e, "\tand.b32 %s, %s, %d;\n\tsetp.ne.u32 %s, %s, 0;\n", t.s, lane.s, m, pl.s, t.s);
		for (int k = 0; k < half; k++) {
			emitf(e, "\tselp.f32 %s, %s, %s, %s;\n\tselp.f32 %s, %s, %s, %s;\n", y.s, part[k].s, part[k + half].s,
			      pl.s, z.s, part[k + half].s, part[k].s, pl.s);
			emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n\tadd.f32 %s, %s, %s;\n", y.s, y.s, m,
			      part[k].s, z.s, y.s);
		}
	}
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tand.b32 %s, %s, 1;\n\tshr.u32 %s, %s, 2;\n\tand.b32 %s, %s, 2;\n", t.s,
	      lane.s, t.s, t.s, d.s, lane.s, d.s, d.s);
	emitf(e, "\tor.b32 %s, %s, %s;\n\tand.b32 %s, %s, 4;\n\tor.b32 %s, %s, %s;\n", t.s, t.s, d.s, d.s, lane.s,
	      t.s, t.s, d.s);
	/* the warp's sums of columns col0 + 8g + {0, 1} */
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n\tand.b32 %s, %s, 3;\n\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, t.s, col0.s,
	      d.s, warp.s, d.s, d.s, 4 * IDX_TILE, sums.s);
	emitf(e, "\tmad.lo.u32 %s, %s, 4, %s;\n\tst.shared.v2.f32 [%s], {%s, %s};\n", d.s, t.s, d.s, d.s, part[0].s,
	      part[1].s);
	emit_wg_bar(e, wg0, "the warps' sums stored");
	/* thread wt < 64: key 64i + wt's logit = the four warps' sums */
	emitf(e, "\tsetp.lt.u32 %s, %s, %d;\n\tshl.b32 %s, %s, 6;\n\tadd.u32 %s, %s, %s;\n", pl.s, wt.s, IDX_TILE, j.s,
	      i.s, j.s, j.s, wt.s);
	emitf(e, "\tsetp.lt.and.s32 %s, %s, %s, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", pl.s, j.s, r->n.s, pl.s, d.s, wt.s,
	      sums.s);
	emitf(e, "\tmov.f32 %s, 0f00000000;\n\tmov.f32 %s, 0f00000000;\n", y.s, z.s);
	emitf(e, "\t@%s ld.shared.f32 %s, [%s];\n\t@%s ld.shared.f32 %s, [%s+%d];\n", pl.s, y.s, d.s, pl.s, z.s, d.s,
	      4 * IDX_TILE);
	emitf(e, "\tadd.f32 %s, %s, %s;\n", y.s, y.s, z.s);
	emitf(e, "\t@%s ld.shared.f32 %s, [%s+%d];\n\tadd.f32 %s, %s, %s;\n", pl.s, z.s, d.s, 8 * IDX_TILE, y.s, y.s,
	      z.s);
	emitf(e, "\t@%s ld.shared.f32 %s, [%s+%d];\n\tadd.f32 %s, %s, %s;\n", pl.s, z.s, d.s, 12 * IDX_TILE, y.s, y.s,
	      z.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\t@%s st.global.f32 [%s], %s;\n", a.s, j.s, a.s,
	      a.s, r->logits.s, pl.s, a.s, y.s);
	indexer_emit_keep(e, c, r, l, j, y, &pl);
	emit_block(e, "sm90.indexer_mma");
	emitf(e, "\tadd.u32 %s, %s, %d;\n", l.s, l.s, WGS * IDX_TILE);
	/* no barrier here: the tile and scales were consumed before the sums
	 * barrier (each thread waited for its MMAs), and the next tile's sums
	 * are stored after the next tile barrier, which the readers above
	 * must reach first */
	emitf(e, "\tmov.u32 %s, %s;\n\tbra.uni %s;\n", i.s, in.s, loop);
	emit_label(e, done);
	return 0;
}
