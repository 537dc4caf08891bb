/* Indexer scoring on sm_90a's tensor cores (--score wgmma; docs/indexer.md,
 * "Tensor-core scoring"): a tile of 64 keys is the A operand, the CTA's Q
 * tile (64 rows of 128 E4M3, rows past the heads zero, staged by the
 * prologue) the B operand; S^T = K·Q^T is four wgmma m64n64k32 e4m3 into
 * 32 f32 registers a thread. Each of the CTA's two warpgroups takes every
 * other tile, and each warp fills the 16 key rows its own part of the MMA
 * reads, in the 128-byte swizzled K-major layout a TMA box would write,
 * with their scales, then fences its writes for the async proxy (PTX ISA
 * "Asynchronous proxy"): no barrier in the loop. fp8 keys are copied by
 * cp.async two tiles ahead into a ring of three tiles; fp4 keys are loaded
 * into registers two tiles ahead (two register sets, the loop unrolled
 * twice) and turned into E4M3 as they are stored.
 * The epilogue weighs each row (key) j's column (head) h by
 * w[h]·max(0, S·s_j), sums a thread's 16 heads of its two keys and the
 * quad's four lanes (two shuffles), and stores the logits. */
#include <stdio.h>

#include "../indexer.h"
#include "../layout.h"
#include "../ops.h"
#include "indexer_mma.h"
#include "mma.h"

enum { WGS = IDX_THREADS / 128 };

int
sm90_indexer_score_mma(Emit *e, const IndexerCfg *c, const IndexerRegs *r, KgErr *err)
{
	TileLayout lt;
	uint64_t desc;
	Reg acc[32], w[16], sum[2], scr[2], v[4];
	Reg wg = reg_new(e, RC_B32), wt = reg_new(e, RC_B32), warp = reg_new(e, RC_B32), lane = reg_new(e, RC_B32);
	Reg i = reg_new(e, RC_B32), j = reg_new(e, RC_B32), t = reg_new(e, RC_B32), key = reg_new(e, RC_B32);
	Reg pt = reg_new(e, RC_B32), d = reg_new(e, RC_B32), pg = reg_new(e, RC_B32), x = reg_new(e, RC_B32);
	Reg q0 = reg_new(e, RC_B32), tile = reg_new(e, RC_B32), scs = reg_new(e, RC_B32), kt = reg_new(e, RC_B32);
	Reg ws = reg_new(e, RC_B32), qlo = reg_new(e, RC_B32), klo = reg_new(e, RC_B32), hi = reg_new(e, RC_B32);
	Reg stride = reg_new(e, RC_B32), lo = reg_new(e, RC_B32), col0 = reg_new(e, RC_B32), in = reg_new(e, RC_B32);
	Reg bi = reg_new(e, RC_B32), kcur = reg_new(e, RC_B32), scur = reg_new(e, RC_B32), tprev = reg_new(e, RC_B32);
	Reg sprev = reg_new(e, RC_B32), l = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), ad = reg_new(e, RC_B64), bd = reg_new(e, RC_B64);
	Reg sc = reg_new(e, RC_F32), y = reg_new(e, RC_F32), z = reg_new(e, RC_F32);
	Reg p = reg_new(e, RC_PRED), pl = reg_new(e, RC_PRED);
	IdxTileLoad ld[2];
	IdxTileCopy cp;
	/* fp8 keys: copied NB - 1 tiles ahead into a ring of NB buffers, the
	 * loop body emitted once; fp4 keys: loaded `sets` tiles ahead into as
	 * many register sets, the loop body emitted once per set */
	int nb = c->bufs, copy = nb > 1, sets = copy ? 1 : 2;
	char loop[48], done[48];

	if (copy == c->fp4_e4m3)
		kg_bug("sm90 indexer: fp8 keys are copied into a ring of tiles, fp4 keys stored into one");
	if (layout_canonical(&lt, MAJOR_K, SWZ_128B, 8, 64, 128, err) < 0 ||
	    desc_for_tile(&desc, c->t->desc, &lt, 0, err) < 0)
		return -1;
	reg_array(e, RC_F32, acc, 32);
	reg_array(e, RC_F32, w, 16);
	reg_array(e, RC_F32, sum, 2);
	reg_array(e, RC_F32, scr, 2);
	reg_array(e, RC_B32, v, 4);
	IdxTileScratch ts = {x, key, pt, j, d, pg, a, o, {v[0], v[1], v[2], v[3]}, sc, p, pl};

	emit_block(e, "sm90.indexer_mma");
	label_new(e, loop, sizeof loop, "tile");
	label_new(e, done, sizeof done, "tiles_done");
	/* warpgroup wg: tiles wg, wg + 2, ..; its ring of key tiles and
	 * scales; the CTA's Q tile (B, staged by the prologue) */
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tand.b32 %s, %s, 127;\n\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n", wg.s,
	      r->tid.s, wt.s, r->tid.s, warp.s, wt.s, lane.s, wt.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n", q0.s, r->base.s, c->plan.smem[c->r_q].offset);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", tile.s, r->base.s,
	      c->plan.smem[c->r_tiles].offset, tile.s, wg.s, nb * IDX_TILE * 128, tile.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", scs.s, r->base.s,
	      c->plan.smem[c->r_scales].offset, scs.s, wg.s, nb * 4 * IDX_TILE, scs.s);
	/* descriptors: start address >> 4 in the low word (gen/desc) */
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n", qlo.s, q0.s, qlo.s, qlo.s, (uint32_t)desc);
	emitf(e, "\tshr.u32 %s, %s, 4;\n\tadd.u32 %s, %s, %u;\n", klo.s, tile.s, klo.s, klo.s, (uint32_t)desc);
	op_desc_hi(e, hi, c->t->desc, desc, "Q and key tiles, K-major E4M3");
	/* this thread's accumulator rows (keys) kt and kt + 8, kt = 16·warp
	 * + lane / 4, and columns (heads) col0 + 8g + {0, 1}, whose weights
	 * it keeps (docs/hardware.md, "wgmma accumulator fragment") */
	emitf(e, "\tand.b32 %s, %s, 3;\n\tshl.b32 %s, %s, 4;\n\tshr.u32 %s, %s, 2;\n\tadd.u32 %s, %s, %s;\n", kt.s,
	      warp.s, kt.s, kt.s, t.s, lane.s, kt.s, kt.s, t.s);
	sm90_acc_col0(e, col0, lane);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, 4, %s;\n", ws.s, r->base.s, c->plan.smem[c->r_w].offset,
	      ws.s, col0.s, ws.s);
	for (int g = 0; g < 8; g++)
		emitf(e, "\tld.shared.v2.f32 {%s, %s}, [%s+%d];\n", w[2 * g].s, w[2 * g + 1].s, ws.s, 4 * 8 * g);

	/* tiles wg + 2·(split + splits·m); the lanes with lane bit 1 clear
	 * store the logits of key kt + 8·(lane bit 0): the part's local key
	 * l = 128·m + 64·wg + that key */
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmul.lo.u32 %s, %s, %d;\n", i.s, r->split.s, WGS, wg.s, stride.s,
	      r->splits.s, WGS);
	emitf(e, "\tand.b32 %s, %s, 1;\n\tmad.lo.u32 %s, %s, 8, %s;\n", t.s, lane.s, kt.s, t.s, kt.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", l.s, wg.s, IDX_TILE, kt.s);
	/* the first tiles' loads (fp8: the copies of the first NB - 1 into
	 * buffers 0 .., one group each, and the next tile's pages; fp4: the
	 * first tile into registers); each tile's MMAs then run while later
	 * tiles' loads are in flight */
	if (copy) {
		indexer_tile_copy_init(e, c, &cp, wt);
		emitf(e, "\tmov.u32 %s, %s;\n", in.s, i.s);
		for (int k = 0; k < nb - 1; k++) {
			indexer_emit_tile_pages(e, c, r, &ts, &cp, in);
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tadd.u32 %s, %s, %d;\n", tprev.s, tile.s, k * IDX_TILE * 128,
			      sprev.s, scs.s, k * 4 * IDX_TILE);
			indexer_emit_tile_copy(e, c, r, &ts, &cp, in, wt, tprev, sprev);
			emitf(e, "\tadd.u32 %s, %s, %s;\n", in.s, in.s, stride.s);
		}
		indexer_emit_tile_pages(e, c, r, &ts, &cp, in);
		emitf(e, "\tmov.u32 %s, 0;\n", bi.s);
	} else {
		emitf(e, "\tmov.u32 %s, %s;\n", in.s, i.s);
		for (int u = 0; u < sets; u++) {
			indexer_key_tile_regs(e, c, &ld[u], IDX_TILE, 128);
			indexer_emit_key_tile_load(e, c, r, &ts, &ld[u], in, wt, IDX_TILE, 128);
			if (u + 1 < sets)
				emitf(e, "\tadd.u32 %s, %s, %s;\n", in.s, in.s, stride.s);
		}
	}
	emit_label(e, loop);
	for (int u = 0; u < sets; u++) {
		emitf(e, "\tshl.b32 %s, %s, 6;\n\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", t.s, i.s, p.s, t.s, r->n.s, p.s,
		      done);
		if (copy) {
			/* buffer bi holds tile i, the oldest of this thread's NB - 1
			 * groups in flight; buffer bi - 1 (mod NB), which the last
			 * iteration read, takes tile i + (NB - 1)·stride */
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmad.lo.u32 %s, %s, %d, %s;\n", kcur.s, bi.s,
			      IDX_TILE * 128 >> 4, klo.s, scur.s, bi.s, 4 * IDX_TILE, scs.s);
			emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.ge.u32 %s, %s, %d;\n\t@%s sub.u32 %s, %s, %d;\n", d.s, bi.s,
			      nb - 1, p.s, d.s, nb, p.s, d.s, d.s, nb);
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmad.lo.u32 %s, %s, %d, %s;\n", tprev.s, d.s, IDX_TILE * 128,
			      tile.s, sprev.s, d.s, 4 * IDX_TILE, scs.s);
			emitf(e, "\tcp.async.wait_group %d;\n", nb - 2);
		} else {
			emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", kcur.s, klo.s, scur.s, scs.s);
			indexer_emit_key_tile_store(e, c, r, &ts, &ld[u], i, wt, tile, scs, IDX_TILE, 128);
		}
		/* this thread's generic writes to the tile (its stores, or its
		 * copies once waited for), read by the async proxy: each warp
		 * writes the rows of A its own part of the MMA reads, so the warp's
		 * wgmma.fence orders them, no barrier (docs/indexer.md) */
		emitf(e, "\tfence.proxy.async.shared::cta;\n");
		/* S^T = K·Q^T, keys (A) by heads (B): 32 bytes of K (k32) per MMA,
		 * the first overwriting */
		sm90_wgmma_fence(e);
		for (int kk = 0; kk < 4; kk++) {
			uint32_t off = layout_offset(&lt, 0, 32 * kk) >> 4;
			emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, kcur.s, off, ad.s, lo.s, hi.s);
			emitf(e, "\tadd.u32 %s, %s, %u;\n\tmov.b64 %s, {%s, %s};\n", lo.s, qlo.s, off, bd.s, lo.s, hi.s);
			emitf(e, "\twgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 %s, %s, %s, %d, 1, 1;\n",
			      reg_vec(e, acc, 32), ad.s, bd.s, kk > 0);
		}
		sm90_wgmma_commit(e);
		/* fp8: the copies of tile i + (NB - 1)·stride into the buffer every
		 * thread of the warpgroup finished reading before the barrier above,
		 * then the pages of the tile after it; fp4: the loads of tile i +
		 * sets·stride into the registers stored above */
		emitf(e, "\tadd.u32 %s, %s, %s;\n", in.s, i.s, stride.s);
		if (copy) {
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, stride.s, nb - 1, i.s);
			indexer_emit_tile_copy(e, c, r, &ts, &cp, t, wt, tprev, sprev);
			emitf(e, "\tadd.u32 %s, %s, %s;\n", t.s, t.s, stride.s);
			indexer_emit_tile_pages(e, c, r, &ts, &cp, t);
		} else {
			emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, stride.s, sets, i.s);
			indexer_emit_key_tile_load(e, c, r, &ts, &ld[u], t, wt, IDX_TILE, 128);
		}
		/* the scales of this thread's keys kt, kt + 8 (with kt's lane bit 0
		 * folded in above: kt - 8·(lane bit 0) is the first row) */
		emitf(e, "\tand.b32 %s, %s, 1;\n\tshl.b32 %s, %s, 3;\n\tsub.u32 %s, %s, %s;\n\tmad.lo.u32 %s, %s, 4, %s;\n", d.s,
		      lane.s, d.s, d.s, d.s, kt.s, d.s, d.s, d.s, scur.s);
		emitf(e, "\tld.shared.f32 %s, [%s];\n\tld.shared.f32 %s, [%s+32];\n", scr[0].s, d.s, scr[1].s, d.s);
		sm90_wgmma_wait(e, 0);
		/* register 4g + 2r + e: key row kt0 + 8r, head col0 + 8g + e:
		 * sum[r] = Σ w[head]·max(0, S·s_key) over this thread's 16 heads */
		for (int g = 0; g < 8; g++)
			for (int rr = 0; rr < 2; rr++)
				for (int ee = 0; ee < 2; ee++) {
					Reg s = acc[4 * g + 2 * rr + ee];
					emitf(e, "\tmul.f32 %s, %s, %s;\n\tmax.f32 %s, %s, 0f00000000;\n", y.s, s.s, scr[rr].s, y.s, y.s);
					if (g == 0 && ee == 0)
						emitf(e, "\tmul.f32 %s, %s, %s;\n", sum[rr].s, y.s, w[2 * g + ee].s);
					else
						emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", sum[rr].s, y.s, w[2 * g + ee].s, sum[rr].s);
				}
		/* the quad's four lanes hold the same two keys' other heads: over
		 * lane bit 0 a lane keeps key kt0 + 8·(its bit 0) and sends its
		 * partner the other, then over lane bit 1 both add */
		emitf(e, "\tand.b32 %s, %s, 1;\n\tsetp.ne.u32 %s, %s, 0;\n", t.s, lane.s, pl.s, t.s);
		emitf(e, "\tselp.f32 %s, %s, %s, %s;\n\tselp.f32 %s, %s, %s, %s;\n", y.s, sum[0].s, sum[1].s, pl.s, z.s,
		      sum[1].s, sum[0].s, pl.s);
		emitf(e, "\tshfl.sync.bfly.b32 %s, %s, 1, 0x1f, 0xffffffff;\n\tadd.f32 %s, %s, %s;\n", y.s, y.s, z.s, z.s, y.s);
		emitf(e, "\tshfl.sync.bfly.b32 %s, %s, 2, 0x1f, 0xffffffff;\n\tadd.f32 %s, %s, %s;\n", y.s, z.s, z.s, z.s, y.s);
		/* lanes with bit 1 clear: key j = 64i + kt's logit */
		emitf(e, "\tand.b32 %s, %s, 2;\n\tsetp.eq.u32 %s, %s, 0;\n\tshl.b32 %s, %s, 6;\n\tadd.u32 %s, %s, %s;\n", t.s,
		      lane.s, pl.s, t.s, j.s, i.s, j.s, j.s, kt.s);
		emitf(e, "\tsetp.lt.and.s32 %s, %s, %s, %s;\n", pl.s, j.s, r->n.s, pl.s);
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\t@%s st.global.f32 [%s], %s;\n", a.s, j.s, a.s,
		      a.s, r->logits.s, pl.s, a.s, z.s);
		indexer_emit_keep(e, c, r, l, z, &pl);
		emit_block(e, "sm90.indexer_mma");
		emitf(e, "\tadd.u32 %s, %s, %d;\n", l.s, l.s, WGS * IDX_TILE);
		/* no barrier here: every thread waited for its MMAs, so the tile was
		 * consumed, and read its two scales before the next tile barrier */
		if (copy)
			emitf(e, "\tadd.u32 %s, %s, 1;\n\tsetp.eq.u32 %s, %s, %d;\n\tselp.u32 %s, 0, %s, %s;\n", bi.s, bi.s, p.s,
			      bi.s, nb, bi.s, bi.s, p.s);
		emitf(e, "\tmov.u32 %s, %s;\n", i.s, in.s);
	}
	emitf(e, "\tbra.uni %s;\n", loop);
	emit_label(e, done);
	/* the copies of the tiles past n, issued by the last iterations */
	if (copy)
		emitf(e, "\tcp.async.wait_all;\n");
	return 0;
}
