/* Indexer scoring on sm_90a's tensor cores (--score wgmma; docs/indexer.md,
 * "Tensor-core scoring"): Q's heads are the A operand (64 rows of 128 E4M3,
 * rows past the heads zero), a tile of 64 keys the B operand; S = Q·K^T is
 * four wgmma m64n64k32 e4m3 into 32 f32 registers a thread. Each of the
 * CTA's two warpgroups takes every other tile: its 128 threads gather the
 * tile's key rows from their pages into the 128-byte swizzled K-major
 * layout a TMA box would write (Q too, a copy per warpgroup, before the
 * first tile), and the scales beside, then fence the generic writes for
 * the async proxy (PTX ISA "Asynchronous proxy") and meet at the
 * warpgroup's barrier before the MMAs. fp8 keys are copied by cp.async
 * into the other of two buffers while a tile's MMAs and epilogue run, fp4
 * keys loaded into registers one tile ahead and turned into E4M3 as they
 * are stored (docs/indexer.md, "Tensor-core scoring"). The epilogue
 * weighs each row (head) h of a column (key) j by w[h]·max(0, S·s_j),
 * sums a thread's two rows, the eight lanes that share a column (shfl,
 * halving the values at each step), and the four warps (shared memory). */
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

/* IndexerOps.plan_mma: fp8 keys copied by cp.async take a second buffer
 * of key tiles and scales a warpgroup */
int
sm90_indexer_plan(IndexerCfg *c, KgErr *err)
{
	(void)err;
	if (c->fp4_e4m3)
		return 0;
	c->r_tiles2 = plan_smem(&c->plan, "key tiles, second buffer (cp.async)", (uint32_t)IDX_TILE * 128u, 1024,
	                        IDX_THREADS / 128);
	c->r_scales2 = plan_smem(&c->plan, "key tile scales, second buffer", 4u * IDX_TILE, 16, IDX_THREADS / 128);
	return 0;
}

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
	Reg flip = reg_new(e, RC_B32), kcur = reg_new(e, RC_B32), scur = reg_new(e, RC_B32), tnxt = reg_new(e, RC_B32);
	Reg snxt = reg_new(e, RC_B32), l = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), o = reg_new(e, RC_B64), ad = reg_new(e, RC_B64), bd = reg_new(e, RC_B64);
	Reg sc = reg_new(e, RC_F32), y = reg_new(e, RC_F32), z = reg_new(e, RC_F32);
	Reg p = reg_new(e, RC_PRED), pl = reg_new(e, RC_PRED), wg0 = reg_new(e, RC_PRED);
	IdxTileLoad ld;
	IdxTileCopy cp;
	int copy = !c->fp4_e4m3;
	/* fp8: the second buffers' distance from the first (both regions
	 * hold a warpgroup's tile, then the next's) */
	uint32_t dt = copy ? c->plan.smem[c->r_tiles2].offset - c->plan.smem[c->r_tiles].offset : 0;
	uint32_t ds = copy ? c->plan.smem[c->r_scales2].offset - c->plan.smem[c->r_scales].offset : 0;
	char loop[48], done[48];

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
	/* warpgroup wg: tiles wg, wg + 2, ..; its Q, tiles and scales */
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tand.b32 %s, %s, 127;\n\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n", wg.s,
	      r->tid.s, wt.s, r->tid.s, warp.s, wt.s, lane.s, wt.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n", wg0.s, wg.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", q0.s, r->base.s, c->plan.smem[c->r_q].offset,
	      q0.s, wg.s, 64 * 128, q0.s);
	/* each warpgroup stages its own copy of Q (its B tile), so its first
	 * tile's proxy fence and barrier publish Q to its MMAs too */
	indexer_emit_q_tile(e, c, r, q0, wt, 64, 128);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", tile.s, r->base.s,
	      c->plan.smem[c->r_tiles].offset, tile.s, wg.s, IDX_TILE * 128, tile.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n\tmad.lo.u32 %s, %s, %u, %s;\n", scs.s, r->base.s,
	      c->plan.smem[c->r_scales].offset, scs.s, wg.s, 4 * IDX_TILE, scs.s);
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
	/* the first tile's loads (fp8: its copies, and the next tile's
	 * pages); each tile's MMAs then run while the next tile's loads are
	 * in flight */
	if (copy) {
		indexer_tile_copy_init(e, c, &cp, wt);
		indexer_emit_tile_pages(e, c, r, &ts, &cp, i);
		indexer_emit_tile_copy(e, c, r, &ts, &cp, i, wt, tile, scs);
		emitf(e, "\tadd.u32 %s, %s, %s;\n", in.s, i.s, stride.s);
		indexer_emit_tile_pages(e, c, r, &ts, &cp, in);
		emitf(e, "\tmov.u32 %s, 0;\n", flip.s);
	} else {
		indexer_key_tile_regs(e, c, &ld, IDX_TILE, 128);
		indexer_emit_key_tile_load(e, c, r, &ts, &ld, i, wt, IDX_TILE, 128);
	}
	emit_label(e, loop);
	emitf(e, "\tshl.b32 %s, %s, 6;\n\tsetp.ge.s32 %s, %s, %s;\n\t@%s bra %s;\n", t.s, i.s, p.s, t.s, r->n.s, p.s,
	      done);
	if (copy) {
		/* buffer `flip` holds tile i, its copies in this thread's one
		 * group in flight; the other takes tile in */
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n\tmad.lo.u32 %s, %s, %u, %s;\n", kcur.s, flip.s, dt >> 4, klo.s,
		      scur.s, flip.s, ds, scs.s);
		emitf(e, "\txor.b32 %s, %s, 1;\n\tmad.lo.u32 %s, %s, %u, %s;\n\tmad.lo.u32 %s, %s, %u, %s;\n", d.s, flip.s,
		      tnxt.s, d.s, dt, tile.s, snxt.s, d.s, ds, scs.s);
		emitf(e, "\tcp.async.wait_group 0;\n");
	} else {
		emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", kcur.s, klo.s, scur.s, scs.s);
		indexer_emit_key_tile_store(e, c, r, &ts, &ld, i, wt, tile, scs, IDX_TILE, 128);
	}
	/* this thread's generic writes (the tile: its stores, or its copies
	 * once waited for; Q before the first), read by the async proxy
	 * (wgmma) */
	emitf(e, "\tfence.proxy.async.shared::cta;\n");
	emit_wg_bar(e, wg0, "its key tile stored");
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
	/* the next tile: fp8 copies into the other buffer, which every
	 * thread of the warpgroup finished reading before the barrier above,
	 * then the pages of the one after; fp4 loads into the registers
	 * stored above */
	emitf(e, "\tadd.u32 %s, %s, %s;\n", in.s, i.s, stride.s);
	if (copy) {
		indexer_emit_tile_copy(e, c, r, &ts, &cp, in, wt, tnxt, snxt);
		emitf(e, "\tadd.u32 %s, %s, %s;\n", t.s, in.s, stride.s);
		indexer_emit_tile_pages(e, c, r, &ts, &cp, t);
	} else {
		indexer_emit_key_tile_load(e, c, r, &ts, &ld, in, wt, IDX_TILE, 128);
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
	indexer_emit_keep(e, c, r, l, j, z, &pl);
	emit_block(e, "sm90.indexer_mma");
	emitf(e, "\tadd.u32 %s, %s, %d;\n", l.s, l.s, WGS * IDX_TILE);
	/* no barrier here: every thread waited for its MMAs, so the tile was
	 * consumed, and read its two scales before the next tile barrier */
	if (copy)
		emitf(e, "\txor.b32 %s, %s, 1;\n", flip.s, flip.s);
	emitf(e, "\tmov.u32 %s, %s;\n\tbra.uni %s;\n", i.s, in.s, loop);
	emit_label(e, done);
	/* the copies of the tile past n, issued by the last iteration */
	if (copy)
		emitf(e, "\tcp.async.wait_all;\n");
	return 0;
}
