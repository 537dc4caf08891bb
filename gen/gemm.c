/* The GEMM family's shared half (gemm.h): the parameter table, the
 * configuration and plan every target starts from, the kernel name, the
 * ABI, the prologue and the TMA producer. The target's GemmOps emit the
 * MMA and epilogue. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "desc.h"
#include "family.h"
#include "gemm.h"
#include "ops.h"

#define P(f) offsetof(GemmParams, f)

/* See family.h for the columns. */
static const ParamSpec gemm_params[] = {
	{"target", PK_TARGET, P(target), "sm_90a,sm_100a", 0, 0, 0, "sm_90a",
	 "sm_90a: wgmma consumers; sm_100a: tcgen05 + TMEM", NULL},
	{"tile-m", PK_INT, P(tile_m), "8,16,64,128,192,256", 0, 0, 0, "128",
	 "C rows per CTA (sm_90a: 64 per consumer warpgroup; sm_100a: 128; --scale w4a8: the 8 or 16 "
	 "tokens that are the MMA's N)", NULL},
	{"tile-n", PK_INT, P(tile_n), NULL, 16, 256, 16, "256", "C columns per CTA = MMA N", NULL},
	{"tile-k", PK_INT, P(tile_k), "16,32,64,128,256", 0, 0, 0, "64", "K elements per pipeline stage", NULL},
	{"stages", PK_INT, P(stages), NULL, 2, 8, 1, "4", "TMA ring depth (full/empty mbarrier pairs)", NULL},
	{"swizzle", PK_SWIZZLE, P(swizzle), "none,32,64,128", 0, 0, 0, "128",
	 "smem swizzle of the A/B tiles (TMA and MMA agree)", NULL},
	{"dtype", PK_DTYPE, P(dtype), "bf16,fp16,e4m3,e2m1", 0, 0, 0, "bf16",
	 "A and B element type (e4m3 needs --scale block128 or mx32; e2m1, packed two per byte, "
	 "--scale mx32 or nv16)", NULL},
	{"out-dtype", PK_DTYPE, P(out_dtype), "bf16,f32,e4m3", 0, 0, 0, "bf16",
	 "C element type (e4m3: the SwiGLU output as MXFP8 with its UE8M0 factor images CS, sm_100a)", NULL},
	{"cta-pair", PK_INT, P(cta_pair), "0,1", 0, 0, 0, "0",
	 "1: clusters of 2 CTAs, one cta_group::2 MMA of M = 2*tile-m per pair", "target=sm_100a"},
	{"cluster-n", PK_INT, P(cluster_n), "1,2", 0, 0, 0, "1",
	 "CTAs (sm_100a: pairs) per cluster along N; 2 multicasts each A tile to both (sm_90a: "
	 "docs/estimate.md, \"A multicast\")", "cta-pair=1;target=sm_90a"},
	{"scale", PK_ENUM, P(scale), "none,block128,mx32,nv16,w4a8", 0, 0, 0, "none",
	 "block128 (sm_90a): C = sum over 128-wide K blocks of SA[kb,m]·SB[n/128,kb]·(A·B^T of the "
	 "block), promoted into the f32 accumulator once per block; mx32 (sm_100a): a UE8M0 per 32 "
	 "of K for every row of A and of B, applied by tcgen05.mma kind::mxf8f6f4 (e4m3) or "
	 "kind::mxf4nvf4 (e2m1); nv16 (sm_100a, e2m1): NVFP4, a UE4M3 per 16 of K and C scaled by "
	 "the fp32 alpha[expert]; w4a8 (sm_90a, e4m3): A as block128, B E2M1 (low nibble = even K) "
	 "with a UE8M0 per 32 of K, turned into E4M3 on chip (docs/ABI.md \"W4A8 weights\")",
	 "dtype=e4m3|e2m1"},
	{"scale-b", PK_DTYPE, P(scale_b), "f32,ue8m0", 0, 0, 0, "f32",
	 "block128: B's 128x128 scales as fp32, or as UE8M0 powers of two (2^(e-127))", "scale=block128"},
	{"moe", PK_ENUM, P(moe), "none,contiguous,masked", 0, 0, 0, "none",
	 "one launch for E experts, B[E,N,K]: contiguous (rows of all experts along M, s32 "
	 "offsets[E+1]) or masked (E slabs of M rows, s32 counts[E]); docs/ABI.md \"MoE layouts\"",
	 "dtype=e4m3|e2m1"},
	{"dtype-b", PK_ENUM, P(dtype_b), "same,e2m1", 0, 0, 0, "same",
	 "B's element type when it is not A's: e2m1 under --dtype e4m3 --scale mx32 (FP4 weights x FP8 "
	 "activations, tcgen05.mma kind::mxf8f6f4; B packed two per byte in global memory, a byte per "
	 "value in shared memory by TMA 16U4_ALIGN16B)", "dtype-b=e2m1"},
	{"epilogue", PK_ENUM, P(epilogue), "none,swiglu", 0, 0, 0, "none",
	 "swiglu: B's N rows are the gate then the up half, C[:,j] = silu(min(gate,L))·clamp(up,-L,L) "
	 "over N/2 columns, L the f32 param swiglu_limit (DeepSeek-V4: 10); docs/ABI.md \"SwiGLU epilogue\"",
	 "dtype=e4m3|e2m1"},
};

/* Validates the parameter combination and builds the plan. Every rule that
 * is not a plain allowed-values check is here, with its reason. */
int
gemm_configure(GemmCfg *g, const GemmParams *p, KgErr *err)
{
	memset(g, 0, sizeof *g);
	g->t = &targets[p->target];
	g->tm = p->tile_m;
	g->tn = p->tile_n;
	g->tk = p->tile_k;
	g->stages = p->stages;
	g->swz = (Swizzle)p->swizzle;
	g->in = (DType)p->dtype;
	g->out = (DType)p->out_dtype;
	g->ebits = dtype_bits(g->in);
	/* e2m1 is packed two per byte; TMA moves it as bytes (docs/ABI.md, "gemm") */
	g->esz_in = g->ebits < 8 ? 1 : g->ebits / 8;
	g->esz_out = dtype_bits(g->out) / 8;
	g->span = swizzle_span(g->swz);
	/* one MMA consumes 32 bytes of K (docs/hardware.md, "Scale-factor images") */
	g->kmma = 256 / g->ebits;
	g->tk_tma = g->tk * g->ebits / 8 / g->esz_in;
	g->w4a8 = p->scale == GS_W4A8;
	g->sblock = p->scale == GS_BLOCK128 || g->w4a8 ? 128 : 0;
	g->sfvec = p->scale == GS_MX32 ? 32 : p->scale == GS_NV16 ? 16 : 0;
	g->sbtype = g->w4a8 ? DT_UE8M0 : (DType)p->scale_b;
	g->sftype = p->scale == GS_NV16 ? DT_UE4M3 : DT_UE8M0;
	g->kind = g->ebits == 4 ? IK_MXF4NVF4 : IK_MXF8F6F4;
	g->alpha = p->scale == GS_NV16;
	g->in_b = p->dtype_b ? DT_E2M1 : g->in;
	g->r_sfa = g->r_sfb = g->r_lut = -1;
	g->group_m = 8;
	g->r_slot = g->b_acc = -1;
	g->pair = p->cta_pair;
	g->tile_rows = g->tm * (1 + g->pair);
	/* a pair's MMA reads half of B's N rows from each CTA (docs/cta-pair.md);
	 * tile-n steps by 16, so a half is whole 8-row core-matrix groups and
	 * N is the multiple of 16 that M = 256 needs */
	g->tn_cta = g->tn / (1 + g->pair);
	g->cn = p->cluster_n;
	g->moe = p->moe;
	g->swiglu = p->epilogue == GE_SWIGLU;
	g->r_amax = -1;
	/* the gate+up GEMM of the experts: a tile's B rows come from both
	 * halves of its expert's B (docs/ABI.md, "SwiGLU epilogue") */
	if (g->swiglu && !g->moe)
		return kg_fail(err, "--epilogue=swiglu with --moe=none: the SwiGLU epilogue is the experts' "
		               "gate+up GEMM; add --moe contiguous or masked");
	if (g->moe && g->pair)
		return kg_fail(err, "--moe=%s with --cta-pair=1: the MoE layouts map one CTA to one "
		               "expert's tile; use --cta-pair 0", g->moe == GM_MASKED ? "masked" : "contiguous");
	if (g->cn > 1 && !g->pair && g->t->gemm != &gemm_sm90)
		return kg_fail(err, "--cluster-n=%d: on %s clusters along N are pairs sharing A; it needs "
		               "--cta-pair 1", g->cn, g->t->name);
	/* sm_90a: two CTAs of one M tile side by side along N; the MoE layouts
	 * give each CTA its own expert's rows, which the pair would not share */
	if (g->cn > 1 && !g->pair && (g->moe || p->scale == GS_W4A8))
		return kg_fail(err, "--cluster-n=%d with %s: the CTAs of a cluster share their A rows; "
		               "the MoE and W4A8 layouts give each CTA its own", g->cn,
		               g->moe ? "--moe" : "--scale w4a8");

	/* W4A8 (docs/ABI.md, "W4A8 weights"): the tile's A rows are the few
	 * tokens of a decode step, the wgmma's N, and B's rows its M, 64 per
	 * consumer warpgroup; a stage is one 128-K block, 128 bytes of A (one
	 * 128B-swizzled row) and 64 bytes of B (one 64B-swizzled row) */
	if (g->w4a8 && g->t->gemm != &gemm_sm90)
		return kg_fail(err, "--scale=w4a8 with --target=%s: W4A8 turns FP4 into E4M3 for Hopper's "
		               "wgmma; use --target sm_90a", g->t->name);
	if (!g->w4a8 && (g->tm == 8 || g->tm == 16))
		return kg_fail(err, "--tile-m=%d: tile-m 8 and 16 are the W4A8 kernel's tokens per CTA; "
		               "add --scale w4a8 or use 64 or more", g->tm);
	if (g->w4a8 && g->tm != 8 && g->tm != 16)
		return kg_fail(err, "--tile-m=%d with --scale=w4a8: tile-m is the tokens per CTA, the "
		               "wgmma's N: 8 or 16", g->tm);
	if (g->w4a8 && g->tn % 64)
		return kg_fail(err, "--tile-n=%d with --scale=w4a8: tile-n is 64 weight rows per consumer "
		               "warpgroup, 64, 128, 192 or 256", g->tn);
	if (g->w4a8 && g->swz != SWZ_128B)
		return kg_fail(err, "--swizzle=%s with --scale=w4a8: a stage is one 128-byte row of A per "
		               "token; use --swizzle 128", swizzle_name(g->swz));
	if (g->w4a8 && !g->moe)
		return kg_fail(err, "--scale=w4a8 with --moe=none: the W4A8 kernel is the experts' decode "
		               "GEMM; add --moe masked or contiguous (one dense matrix is E = 1)");
	if (g->w4a8 && g->out == DT_E4M3 && !(g->swiglu && g->tn == 256))
		return kg_fail(err, "--out-dtype=e4m3 with --scale=w4a8: an FP8 C is the SwiGLU output "
		               "quantized per 1x128 for the down GEMM; it needs --epilogue swiglu --tile-n 256 "
		               "(128 columns of C per CTA)");

	const char *sname = g->w4a8 ? "w4a8" : g->sblock ? "block128" : p->scale == GS_NV16 ? "nv16" : "mx32";

	/* FP8 values are only meaningful with their scales; the scales only
	 * exist for FP8 (DeepSeek's block scaling, docs/ABI.md "gemm"). */
	if (dtype_bits(g->in) == 8 && !g->sblock && !g->sfvec)
		return kg_fail(err, "--dtype=%s: FP8 inputs carry block scales; add --scale block128 "
		               "(sm_90a) or mx32 (sm_100a)", dtype_name(g->in));
	/* FP4 likewise: MXFP4 (UE8M0 per 32) or NVFP4 (UE4M3 per 16), both
	 * applied by tcgen05.mma kind::mxf4nvf4 (docs/hardware.md, "Scale-factor images") */
	if (g->sblock && g->ebits == 4)
		return kg_fail(err, "--scale=block128 with --dtype=e2m1: FP4 takes --scale nv16 or mx32 "
		               "(sm_100a)");
	if (g->ebits == 4 && !g->sfvec)
		return kg_fail(err, "--dtype=e2m1: FP4 inputs carry block scales; add --scale nv16 (NVFP4) or "
		               "mx32 (MXFP4), sm_100a");
	/* FP4 B under FP8 A: kind::mxf8f6f4's E2M1 with UE8M0 per 32 (docs/ABI.md, "gemm") */
	if (p->dtype_b && !(g->in == DT_E4M3 && p->scale == GS_MX32))
		return kg_fail(err, "--dtype-b=e2m1 with --dtype=%s --scale=%s: FP4 weights under FP8 "
		               "activations need --dtype e4m3 --scale mx32 (tcgen05.mma kind::mxf8f6f4)",
		               dtype_name(g->in), sname);
	/* the MoE layouts carry per-expert scales (docs/ABI.md, "MoE layouts") */
	if (g->moe && g->ebits > 8)
		return kg_fail(err, "--moe=%s with --dtype=%s: the MoE layouts are for the block-scaled "
		               "gemm (--dtype e4m3 with --scale block128 or mx32, or e2m1 with nv16 or mx32)",
		               g->moe == GM_MASKED ? "masked" : "contiguous", dtype_name(g->in));
	if ((g->sblock || g->sfvec) && g->ebits > 8)
		return kg_fail(err, "--scale=%s with --dtype=%s: block scales apply to FP8 inputs "
		               "(--dtype e4m3) and FP4 inputs (--dtype e2m1)", sname, dtype_name(g->in));
	if (p->scale == GS_NV16 && g->ebits != 4)
		return kg_fail(err, "--scale=nv16 with --dtype=%s: NVFP4's UE4M3 per 16 scales E2M1 only "
		               "(tcgen05.mma kind::mxf4nvf4 .block16); use --dtype e2m1", dtype_name(g->in));
	/* mx32: a stage is 128 of K, four scale factors per row, one byte each
	 * of the TMEM word the MMA's scale-factor id selects (gen/layout.h);
	 * B's factors are staged 128 rows per tcgen05.cp */
	if (g->sfvec && g->ebits == 8 && g->tk != SF_BLOCKS * g->sfvec)
		return kg_fail(err, "--tile-k=%d with --scale=mx32: tile-k must be %d (four 32-wide scale "
		               "blocks, one TMEM word per row)", g->tk, SF_BLOCKS * g->sfvec);
	/* FP4: a stage is one 128-byte swizzle row of K, 256 values: four
	 * K = 64 MMAs, whole scale-factor images (two MXFP4, four NVFP4) */
	if (g->sfvec && g->ebits == 4 && g->tk != 256)
		return kg_fail(err, "--tile-k=%d with --dtype=e2m1: tile-k must be 256 (one 128-byte row of "
		               "packed FP4 per stage, four K = 64 MMAs)", g->tk);
	if (g->ebits == 4 && g->swz != SWZ_128B)
		return kg_fail(err, "--swizzle=%s with --dtype=e2m1: FP4 stages are 128-byte rows; use "
		               "--swizzle 128", swizzle_name(g->swz));
	if (g->ebits == 4 && g->out == DT_E4M3)
		return kg_fail(err, "--out-dtype=e4m3 with --dtype=e2m1: the MXFP8 SwiGLU output feeds an "
		               "e4m3 down GEMM; the FP4 gemm writes bf16 or f32");
	if (g->sfvec && g->tn % SF_ROWS)
		return kg_fail(err, "--tile-n=%d with --scale=%s: tile-n must be a multiple of %d (B's "
		               "scale factors are copied 128 rows at a time)", g->tn, sname, SF_ROWS);
	/* One stage is one scale block, so the promotion runs once per stage;
	 * a tile's columns meet whole 128-row blocks of B's scales. */
	if (g->sblock && g->tk != g->sblock)
		return kg_fail(err, "--tile-k=%d with --scale=%s: tile-k must be the scale block, "
		               "128", g->tk, g->w4a8 ? "w4a8" : "block128");
	if (g->sblock && g->swiglu && !g->w4a8 && g->sblock % (g->tn / 2))
		return kg_fail(err, "--tile-n=%d with --epilogue=swiglu: tile-n/2 must divide 128 (each half "
		               "of the tile, gate and up, shares one B scale per K block)", g->tn);
	/* FP8 out: the scales the down GEMM reads as its SA: mx32's factor
	 * images, or block128's fp32 per 1x128, whose 128 columns of C one
	 * CTA covers with two warpgroups on the same 64 rows (split) */
	if (g->out == DT_E4M3 && !(g->swiglu && (g->sfvec || g->w4a8 || (g->sblock && g->tm == 64 && g->tn == 256))))
		return kg_fail(err, "--out-dtype=e4m3: an FP8 C is the SwiGLU output quantized for the down "
		               "GEMM; it needs --epilogue swiglu with --scale mx32 (sm_100a) or --scale block128 "
		               "--tile-m 64 --tile-n 256 (sm_90a: 128 columns of C per CTA, one scale per row)");
	g->split = g->out == DT_E4M3 && g->sblock && !g->w4a8;
	g->wn = g->tn >> g->split;
	if (g->sfvec && g->swiglu && g->tn != 2 * SF_ROWS)
		return kg_fail(err, "--tile-n=%d with --epilogue=swiglu and --scale=%s: tile-n must be %d "
		               "(gate and up halves of %d rows, one factor image each)", g->tn, sname, 2 * SF_ROWS,
		               SF_ROWS);
	if (g->sblock && !g->swiglu && !g->w4a8 && g->sblock % g->tn)
		return kg_fail(err, "--tile-n=%d with --scale=block128: tile-n must divide 128 (a tile's "
		               "columns share one B scale per K block)", g->tn);

	/* One MMA consumes 32 bytes of K (docs/hardware.md, "Advancing along K"); a stage holds
	 * whole swizzle rows so TMA boxes and descriptors tile it exactly. */
	if (g->tk * g->ebits / 8 % g->span)
		return kg_fail(err, "--tile-k=%d with --swizzle=%s: tile-k x %d bytes must be a multiple of the %d-byte swizzle span",
		               g->tk, swizzle_name(g->swz), g->esz_in, g->span);
	g->kslices = g->tk * g->ebits / 8 / g->span;
	if (layout_canonical(&g->la, MAJOR_K, g->swz, g->ebits, g->tm, g->tk, err) < 0 ||
	    (g->w4a8 ? layout_canonical(&g->lb, MAJOR_K, SWZ_64B, 8, g->tn, g->tk / 2, err)
	             : layout_canonical(&g->lb, MAJOR_K, g->swz, g->ebits, g->tn_cta, g->tk, err)) < 0)
		return -1;
	g->stage_bytes = g->la.bytes + g->lb.bytes;
	if (g->sfvec) {
		g->sf_imgs = g->tk / (SF_BLOCKS * g->sfvec);
		g->sf_stage = SF_IMAGE_BYTES * (uint32_t)g->sf_imgs;
		g->sfa_bytes = g->sf_stage * (uint32_t)(g->tm / SF_ROWS);
		g->sfb_bytes = g->sf_stage * (uint32_t)(g->tn / SF_ROWS);
		g->stage_bytes += g->sfa_bytes + g->sfb_bytes;
	}

	plan_init(&g->plan, g->t);
	/* TMA destinations need 128 B, swizzled tiles their period (docs/hardware.md,
	 * "Base offset and alignment"). */
	uint32_t align = (uint32_t)swizzle_period(g->swz) > 128 ? (uint32_t)swizzle_period(g->swz) : 128;
	g->r_a = plan_smem(&g->plan, "A stages", g->la.bytes, align, g->stages);
	g->r_b = plan_smem(&g->plan, "B stages", g->lb.bytes, align, g->stages);
	if (g->sfvec) {
		/* bulk copies and tcgen05.cp descriptors want 16-byte alignment */
		g->r_sfa = plan_smem(&g->plan, "A scale factors", g->sfa_bytes, 128, g->stages);
		g->r_sfb = plan_smem(&g->plan, "B scale factors", g->sfb_bytes, 128, g->stages);
	}
	if (g->t->gemm->plan(g, err) < 0)
		return -1;
	snprintf(g->name, sizeof g->name, "gemm_%s%s_%s_m%dn%dk%d_s%d_sw%s%s%s_%s", dtype_name(g->in),
	         g->in_b != g->in ? dtype_name(g->in_b) : "", dtype_name(g->out), g->tile_rows, g->tn, g->tk, g->stages,
	         g->swz == SWZ_NONE ? "none" : (g->swz == SWZ_32B ? "32" : g->swz == SWZ_64B ? "64" : "128"),
	         g->cn > 1 ? (g->pair ? "_pair2" : "_cn2") : g->pair ? "_pair" : "", g->w4a8 ? "_w4a8" : g->sblock ? (g->sbtype == DT_UE8M0 ? "_bs128e8" : "_bs128") : g->sfvec == 16 ? "_nv16" : g->sfvec ? "_mx32" : "", g->t->tag);
	if (g->moe) {
		/* the layout (and epilogue) before the target tag: gemm_..._moec_swiglu_sm90a */
		size_t n = strlen(g->name), tl = strlen(g->t->tag);
		char tail[16];
		snprintf(tail, sizeof tail, "%s", g->name + n - tl);
		snprintf(g->name + n - tl, sizeof g->name - (n - tl), "%s_%s%s",
		         g->moe == GM_MASKED ? "moem" : "moec", g->swiglu ? "swiglu_" : "", tail);
	}
	return plan_check(&g->plan, err);
}

int
gemm_clustered(const GemmCfg *g)
{
	return g->pair || g->cn > 1;
}

int
gemm_desc_words(const GemmCfg *g, const TileLayout *l, uint32_t *lo0, uint32_t *hi, KgErr *err)
{
	uint64_t d;

	/* Encoded at address 0: the start field is then added at run time as
	 * (addr >> 4), which cannot carry out of its 14 bits below 256 KiB. */
	if (desc_for_tile(&d, g->t->desc, l, 0, err) < 0)
		return -1;
	*lo0 = (uint32_t)d;
	*hi = (uint32_t)(d >> 32);
	return 0;
}

int
gemm_mma_loop_head(Emit *e, KgErr *err, const GemmRegs *r, Reg stage, Reg phase, Reg kt,
                   Reg full0, Reg full, Reg p, char *loop, char *done, size_t n)
{
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", stage.s, phase.s, kt.s);
	label_new(e, loop, n, "mma");
	label_new(e, done, n, "mma_done");
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->nk.s, p.s, done);
	emit_label(e, loop);
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s;\n", full.s, stage.s, full0.s);
	return op_mbar_wait(e, err, full, phase.s);
}

/* mx32: where the producer copies each stage's scale-factor images from.
 * The sf_imgs images of (row block rb, stage kt) of SA / SB are sf_stage
 * bytes at (rb * nk + kt) * sf_stage (docs/ABI.md, "gemm"). */
typedef struct SfSrc {
	Reg a, b;       /* the first (kt = 0) image of this tile's rows */
	Reg sa0, sb0;   /* smem of stage 0 */
	Reg dst, src;   /* scratch */
	int nb;         /* B images per stage: tile-n / 128 */
} SfSrc;

static void
emit_sf_setup(Emit *e, const GemmCfg *g, const GemmRegs *r, SfSrc *sf)
{
	Reg t = reg_new(e, RC_B32), w = reg_new(e, RC_B64);

	sf->a = reg_new(e, RC_B64);
	sf->b = reg_new(e, RC_B64);
	sf->dst = reg_new(e, RC_B32);
	sf->src = reg_new(e, RC_B64);
	sf->nb = g->tn / SF_ROWS;
	sf->sa0 = op_plan_smem(e, &g->plan, r->base, g->r_sfa);
	sf->sb0 = op_plan_smem(e, &g->plan, r->base, g->r_sfb);
	/* A: row block m0 / 128 (tile-m is 128); MoE: the walk's */
	if (g->moe)
		emitf(e, "\tmul.lo.u32 %s, %s, %s;\n", t.s, r->sfa_rb.s, r->nk.s);
	else
		emitf(e, "\tshr.u32 %s, %s, 7;\n\tmul.lo.u32 %s, %s, %s;\n", t.s, r->m0.s, t.s, t.s, r->nk.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", w.s, t.s, g->sf_stage, sf->a.s,
	      r->sa.s, w.s);
	if (g->moe) /* B: expert*cdiv(N,128) + n0/128 */
		emitf(e, "\tmul.lo.u32 %s, %s, %s;\n", t.s, r->sbrow.s, r->nk.s);
	else
		emitf(e, "\tshr.u32 %s, %s, 7;\n\tmul.lo.u32 %s, %s, %s;\n", t.s, r->n0.s, t.s, t.s, r->nk.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", w.s, t.s, g->sf_stage, sf->b.s,
	      r->sb.s, w.s);
}

/* This stage's images: A's, then those of B's tile-n / 128 row blocks,
 * each row block's sf_imgs images one sf_stage-byte bulk copy on the
 * stage's full barrier (counted in stage_bytes). A B row
 * block past N (tile-n 256 at the edge) is not read: its B rows are TMA's
 * zero fill, so any finite factor serves, and the copy repeats the last
 * real block (min). */
static void
emit_sf_loads(Emit *e, const GemmCfg *g, const GemmRegs *r, SfSrc *sf, Reg stage, Reg kt, Reg full)
{
	Reg t = reg_new(e, RC_B32), w = reg_new(e, RC_B64), lastb = reg_new(e, RC_B32);

	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", sf->dst.s, stage.s, g->sfa_bytes, sf->sa0.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", w.s, kt.s, g->sf_stage, sf->src.s,
	      sf->a.s, w.s);
	op_bulk_load(e, sf->dst, sf->src, g->sfa_bytes, full);
	if (sf->nb > 1 && !g->swiglu) {
		/* images of B row blocks n0/128 + j, j < nb, but at most cdiv(N,128) - 1 */
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 7;\n", lastb.s, r->N.s, SF_ROWS - 1, lastb.s,
		      lastb.s);
		emitf(e, "\tshr.u32 %s, %s, 7;\n\tsub.u32 %s, %s, %s;\n\tsub.u32 %s, %s, 1;\n", t.s, r->n0.s,
		      lastb.s, lastb.s, t.s, lastb.s, lastb.s);
	}
	for (int j = 0; j < sf->nb; j++) {
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", sf->dst.s, stage.s, g->sfb_bytes, sf->sb0.s);
		if (j)
			emitf(e, "\tadd.u32 %s, %s, %u;\n", sf->dst.s, sf->dst.s, j * g->sf_stage);
		if (j && g->swiglu) {
			/* the up half's images: (N/2)/128 row blocks past the gate's */
			emitf(e, "\tshr.u32 %s, %s, 8;\n\tmad.lo.u32 %s, %s, %s, %s;\n", t.s, r->N.s, t.s, t.s,
			      r->nk.s, kt.s);
		} else if (j) {
			/* row block min(j, last - n0/128) past this tile's first */
			emitf(e, "\tmin.u32 %s, %s, %d;\n\tmad.lo.u32 %s, %s, %s, %s;\n", t.s, lastb.s, j, t.s, t.s,
			      r->nk.s, kt.s);
		} else {
			emitf(e, "\tmov.u32 %s, %s;\n", t.s, kt.s);
		}
		emitf(e, "\tmul.wide.u32 %s, %s, %u;\n\tadd.u64 %s, %s, %s;\n", w.s, t.s, g->sf_stage,
		      sf->src.s, sf->b.s, w.s);
		op_bulk_load(e, sf->dst, sf->src, g->sf_stage, full);
	}
}

int
gemm_emit_producer(Emit *e, const GemmCfg *g, const GemmRegs *r, KgErr *err)
{
	Reg stage = reg_new(e, RC_B32), phase = reg_new(e, RC_B32), kt = reg_new(e, RC_B32);
	Reg full0, empty0, a0, b0, full, empty, par, adst, bdst, kc, kx, p;
	char loop[48], done[48];

	emit_block(e, "gemm.producer");
	full0 = op_plan_bar(e, &g->plan, r->base, g->b_full);
	if (g->pair) {
		/* both CTAs' boxes complete on the leader's full barrier, which
		 * its MMA thread waits on (docs/cta-pair.md) */
		Reg lead = reg_new(e, RC_B32);
		if (g->cn > 1) {
			Reg lr = reg_new(e, RC_B32);
			emitf(e, "\tand.b32 %s, %s, -2;\n", lr.s, r->rank.s);
			emitf(e, "\tmapa.shared::cluster.u32 %s, %s, %s;\n", lead.s, full0.s, lr.s);
		} else {
			emitf(e, "\tmapa.shared::cluster.u32 %s, %s, 0;\n", lead.s, full0.s);
		}
		full0 = lead;
	}
	empty0 = op_plan_bar(e, &g->plan, r->base, g->b_empty);
	a0 = op_plan_smem(e, &g->plan, r->base, g->r_a);
	b0 = op_plan_smem(e, &g->plan, r->base, g->r_b);
	full = reg_new(e, RC_B32);
	empty = reg_new(e, RC_B32);
	par = reg_new(e, RC_B32);
	adst = reg_new(e, RC_B32);
	bdst = reg_new(e, RC_B32);
	kc = reg_new(e, RC_B32);
	kx = reg_new(e, RC_B32);
	p = reg_new(e, RC_PRED);
	/* B rows of this CTA: the pair's second CTA holds the upper half */
	Reg nb = r->nb;
	if (g->pair) {
		nb = reg_new(e, RC_B32);
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", nb.s, r->prank.s, g->tn_cta, r->n0.s);
	}
	/* cn = 2: the CTAs at this place of both pairs hold the same A rows;
	 * each loads half of them and multicasts it to both (mask: ranks r
	 * and r ^ 2), completing on each destination's leader barrier */
	Reg am = r->m0, mask = {0};
	uint32_t ahalf = 0;
	if (g->cn > 1) {
		am = reg_new(e, RC_B32);
		mask = reg_new(e, RC_B16);
		ahalf = (uint32_t)(g->tm / 2);
		Reg t = reg_new(e, RC_B32);
		emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", am.s, r->pairid.s, ahalf, r->m0.s);
		if (g->pair)
			emitf(e, "\tshl.b32 %s, 5, %s;\n\tcvt.u16.u32 %s, %s;\n", t.s, r->prank.s, mask.s, t.s);
		else
			emitf(e, "\tmov.b16 %s, 3;\n", mask.s);
	}
	Reg nbu = {0};
	if (g->swiglu) {
		nbu = reg_new(e, RC_B32);
		emitf(e, "\tshr.u32 %s, %s, 1;\n\tadd.u32 %s, %s, %s;\n", nbu.s, r->N.s, nbu.s, nbu.s, nb.s);
	}
	SfSrc sf;
	if (g->sfvec)
		emit_sf_setup(e, g, r, &sf);
	label_new(e, loop, sizeof loop, "produce");
	label_new(e, done, sizeof done, "produce_done");
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", stage.s, phase.s, kt.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, r->nk.s, p.s, done);
	emit_label(e, loop);
	/* Empty barriers start in phase 0 with nothing consumed: waiting on
	 * parity phase^1 passes at once the first round (docs/hardware.md, "mbarrier"). */
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", empty.s, stage.s, empty0.s,
	      g->plan.bars[g->b_empty].name);
	emitf(e, "\txor.b32 %s, %s, 1;\n", par.s, phase.s);
	if (op_mbar_wait(e, err, empty, par.s) < 0)
		return -1;
	emitf(e, "\tmad.lo.u32 %s, %s, 8, %s; // mbar %s[stage]\n", full.s, stage.s, full0.s,
	      g->plan.bars[g->b_full].name);
	/* Every byte of every box of the stage, out-of-bounds fill included
	 * (a missing count deadlocks: docs/lessons.md,
	 * "Size and budget bugs"). */
	if (g->pair)
		op_mbar_arrive_expect_tx_cluster(e, full, g->stage_bytes);
	else
		op_mbar_arrive_expect_tx(e, full, g->stage_bytes);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", adst.s, stage.s, g->la.bytes, a0.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %u, %s;\n", bdst.s, stage.s, g->lb.bytes, b0.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", kc.s, kt.s, g->tk_tma);
	for (int j = 0; j < g->kslices; j++) {
		Reg da = reg_new(e, RC_B32), db = reg_new(e, RC_B32);
		emitf(e, "\tadd.u32 %s, %s, %d;\n", kx.s, kc.s, j * g->span / g->esz_in);
		/* box j lands where the canonical layout puts element (0, its first k) */
		if (g->cn > 1) {
			Reg dh = reg_new(e, RC_B32);
			emitf(e, "\tadd.u32 %s, %s, %u;\n", da.s, adst.s, layout_offset(&g->la, 0, j * g->span * 8 / g->ebits));
			emitf(e, "\tadd.u32 %s, %s, %u;\n", dh.s, adst.s, layout_offset(&g->la, ahalf, j * g->span * 8 / g->ebits));
			/* this CTA's half: rows pairid * tm/2 of the A tile */
			emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\tselp.b32 %s, %s, %s, %s;\n", p.s, r->pairid.s, da.s, dh.s,
			      da.s, p.s);
		} else {
			emitf(e, "\tadd.u32 %s, %s, %u;\n", da.s, adst.s, layout_offset(&g->la, 0, j * g->span * 8 / g->ebits));
		}
		emitf(e, "\tadd.u32 %s, %s, %u;\n", db.s, bdst.s, layout_offset(&g->lb, 0, j * g->span * 8 / g->ebits));
		Reg ca[2] = {kx, am}, cb[2] = {kx, nb};
		if (g->w4a8) {
			/* B's inner coordinate counts bytes: two E2M1 codes each */
			cb[0] = reg_new(e, RC_B32);
			emitf(e, "\tshr.u32 %s, %s, 1;\n", cb[0].s, kx.s);
		}
		if ((g->cn > 1 ? op_tma_load_mcast(e, err, da, r->tmap_a, ca, 2, full, mask, 1 + g->pair)
		               : op_tma_load_group(e, err, da, r->tmap_a, ca, 2, full, 1 + g->pair)) < 0 ||
		    op_tma_load_group(e, err, db, r->tmap_b, cb, 2, full, 1 + g->pair) < 0)
			return -1;
		if (g->swiglu && !g->split) {
			/* the up half: B rows N/2 + n0.., tile rows tn/2.. */
			Reg du = reg_new(e, RC_B32), cu[2] = {cb[0], nbu};
			emitf(e, "\tadd.u32 %s, %s, %u;\n", du.s, bdst.s,
			      layout_offset(&g->lb, g->tn / 2, j * g->span * 8 / g->ebits));
			if (op_tma_load_group(e, err, du, r->tmap_b, cu, 2, full, 1) < 0)
				return -1;
		}
		for (int w = 0; g->split && w < 4; w++) {
			/* split: tile rows 64w.. hold gate (w even) or up (w odd) rows
			 * of columns n0 + 64·(w/2): warpgroup h reads rows 128h.. */
			if (w == 0)
				continue; /* the gate box above */
			Reg du = reg_new(e, RC_B32), bx = reg_new(e, RC_B32), cu[2] = {kx, bx};
			emitf(e, "\tadd.u32 %s, %s, %d;\n", bx.s, (w & 1 ? nbu : nb).s, g->tn / 4 * (w / 2));
			emitf(e, "\tadd.u32 %s, %s, %u;\n", du.s, bdst.s,
			      layout_offset(&g->lb, g->tn / 4 * w, j * g->span * 8 / g->ebits));
			if (op_tma_load_group(e, err, du, r->tmap_b, cu, 2, full, 1) < 0)
				return -1;
		}
	}
	if (g->sfvec)
		emit_sf_loads(e, g, r, &sf, stage, kt, full);
	op_ring_advance(e, stage, phase, g->stages, reg_new(e, RC_PRED));
	emitf(e, "\tadd.u32 %s, %s, 1;\n", kt.s, kt.s);
	emitf(e, "\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, kt.s, r->nk.s, p.s, loop);
	emit_label(e, done);
	return 0;
}

/* Tile coordinates with grouped rasterization: consecutive CTAs walk
 * group_m M-tiles down one N column before moving right, so a wave reuses
 * the same B tiles and a narrow band of A from L2. */
static void
emit_tile_coords(Emit *e, const GemmCfg *g, GemmRegs *r)
{
	Reg mt = reg_new(e, RC_B32), nt = reg_new(e, RC_B32), id = reg_new(e, RC_B32);
	Reg gw = reg_new(e, RC_B32), grp = reg_new(e, RC_B32), first = reg_new(e, RC_B32);
	Reg gs = reg_new(e, RC_B32), within = reg_new(e, RC_B32), t = reg_new(e, RC_B32);

	emit_block(e, "gemm.tile_coords");
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", mt.s, r->M.s, g->tile_rows - 1, mt.s, mt.s,
	      g->tile_rows);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", nt.s, r->N.s, g->tn * g->cn - 1, nt.s, nt.s,
	      g->tn * g->cn);
	if (gemm_clustered(g))
		emitf(e, "\tmov.u32 %s, %%clusterid.x;\n", id.s);
	else
		emitf(e, "\tmov.u32 %s, %%ctaid.x;\n", id.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", gw.s, nt.s, g->group_m);
	emitf(e, "\tdiv.u32 %s, %s, %s;\n", grp.s, id.s, gw.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", first.s, grp.s, g->group_m);
	emitf(e, "\tsub.u32 %s, %s, %s;\n", gs.s, mt.s, first.s);
	emitf(e, "\tmin.u32 %s, %s, %d;\n", gs.s, gs.s, g->group_m);
	emitf(e, "\tmul.lo.u32 %s, %s, %s;\n", t.s, grp.s, gw.s);
	emitf(e, "\tsub.u32 %s, %s, %s;\n", within.s, id.s, t.s);
	emitf(e, "\trem.u32 %s, %s, %s;\n", t.s, within.s, gs.s);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", t.s, t.s, first.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", r->m0.s, t.s, g->tile_rows);
	if (g->pair)
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", r->m0.s, r->prank.s, g->tm, r->m0.s);
	emitf(e, "\tdiv.u32 %s, %s, %s;\n", t.s, within.s, gs.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %d;\n", r->n0.s, t.s, g->tn * g->cn >> g->swiglu);
	if (g->cn > 1)
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", r->n0.s, r->pairid.s, g->tn, r->n0.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", r->nk.s, r->K.s, g->tk - 1, r->nk.s, r->nk.s, g->tk);
}

/* MoE (docs/ABI.md, "MoE layouts"): CTA id -> (N tile, global M tile),
 * N tiles fastest so that live tiles form a prefix of the grid; the M
 * tile is then found in the experts' tile counts by every warp alike: 32
 * experts per round, an inclusive warp scan of their tile counts, and a
 * ballot for the first expert whose running count passes the tile. A tile
 * past every expert's tiles exits the whole CTA (uniform: every warp walks
 * the same values) before any barrier or TMEM exists, so experts without
 * rows cost one walk and write nothing. Counts and offsets are clamped into
 * 0..M, so bad ones cannot send a tile outside A and C.
 *
 * Contiguous: expert e owns rows [offsets[e], offsets[e+1]); its tiles are
 * the tile-m aligned row blocks its rows meet (so mx32's 128-row SA images
 * are the dense gemm's), rows of a neighbour computed but not stored.
 * Masked: expert e's slab is rows e*M .. e*M+M-1, of which the first
 * counts[e] are live; its tiles start at the slab. */
static void
emit_moe_coords(Emit *e, const GemmCfg *g, GemmRegs *r)
{
	Reg E = reg_new(e, RC_B32), lay = reg_new(e, RC_B64), ntn = reg_new(e, RC_B32);
	Reg id = reg_new(e, RC_B32), mt = reg_new(e, RC_B32), base = reg_new(e, RC_B32);
	Reg c = reg_new(e, RC_B32), ex = reg_new(e, RC_B32), lo = reg_new(e, RC_B32);
	Reg hi = reg_new(e, RC_B32), t = reg_new(e, RC_B32), s = reg_new(e, RC_B32);
	Reg x = reg_new(e, RC_B32), b = reg_new(e, RC_B32), l = reg_new(e, RC_B32);
	Reg a = reg_new(e, RC_B64), p = reg_new(e, RC_PRED), pin = reg_new(e, RC_PRED);
	Reg w = reg_new(e, RC_B64);
	int masked = g->moe == GM_MASKED, tm = g->tm;
	char loop[48], found[48];

	r->mlo = reg_new(e, RC_B32);
	r->mhi = reg_new(e, RC_B32);
	r->rows = masked ? reg_new(e, RC_B32) : r->M;
	r->nb = reg_new(e, RC_B32);
	r->sbrow = reg_new(e, RC_B32);
	r->sfa_rb = reg_new(e, RC_B32);
	emit_block(e, "gemm.moe_tiles");
	label_new(e, loop, sizeof loop, "moe_walk");
	label_new(e, found, sizeof found, "moe_found");
	emitf(e, "\tld.param.u32 %s, [p_E];\n", E.s);
	op_param_global(e, lay, "%s", masked ? "counts" : "offsets");
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", ntn.s, r->N.s, g->tn - 1, ntn.s, ntn.s, g->tn);
	emitf(e, "\tmov.u32 %s, %%ctaid.x;\n", id.s);
	/* swiglu: n0 is C's column, tn/2 per tile (B's gate row; its up row N/2 + n0) */
	emitf(e, "\trem.u32 %s, %s, %s;\n\tmul.lo.u32 %s, %s, %d;\n", t.s, id.s, ntn.s, r->n0.s, t.s,
	      g->tn >> g->swiglu);
	emitf(e, "\tdiv.u32 %s, %s, %s;\n", mt.s, id.s, ntn.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", base.s, c.s);
	emit_label(e, loop);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s ret;\n", p.s, c.s, E.s, p.s);
	emitf(e, "\tadd.u32 %s, %s, %s;\n\tsetp.lt.u32 %s, %s, %s;\n", ex.s, c.s, r->lane.s, pin.s, ex.s, E.s);
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", w.s, ex.s, a.s, lay.s, w.s);
	emitf(e, "\tmov.u32 %s, 0;\n\tmov.u32 %s, 0;\n", lo.s, hi.s);
	if (masked) {
		/* rows live in the slab: counts[e] in 0..M */
		emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n", pin.s, hi.s, a.s);
		emitf(e, "\tmax.s32 %s, %s, 0;\n\tmin.u32 %s, %s, %s;\n", hi.s, hi.s, hi.s, hi.s, r->M.s);
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", t.s, hi.s, tm - 1, t.s, t.s, tm);
	} else {
		/* rows [lo, hi) with 0 <= lo <= hi <= M; tiles: the tm-row
		 * blocks from lo/tm to (hi-1)/tm, none when empty */
		emitf(e, "\t@%s ld.global.nc.u32 %s, [%s];\n\t@%s ld.global.nc.u32 %s, [%s+4];\n", pin.s, lo.s,
		      a.s, pin.s, hi.s, a.s);
		emitf(e, "\tmax.s32 %s, %s, 0;\n\tmin.u32 %s, %s, %s;\n", lo.s, lo.s, lo.s, lo.s, r->M.s);
		emitf(e, "\tmax.s32 %s, %s, %s;\n\tmin.u32 %s, %s, %s;\n", hi.s, hi.s, lo.s, hi.s, hi.s, r->M.s);
		emitf(e, "\tsub.u32 %s, %s, 1;\n\tdiv.u32 %s, %s, %d;\n", x.s, hi.s, x.s, x.s, tm);
		emitf(e, "\tdiv.u32 %s, %s, %d;\n\tsub.u32 %s, %s, %s;\n\tadd.u32 %s, %s, 1;\n", t.s, lo.s, tm, t.s,
		      x.s, t.s, t.s, t.s);
		emitf(e, "\tsetp.gt.u32 %s, %s, %s;\n\tselp.b32 %s, %s, 0, %s;\n", p.s, hi.s, lo.s, t.s, t.s, p.s);
	}
	/* inclusive scan of the tile counts over the warp */
	emitf(e, "\tmov.u32 %s, %s;\n", s.s, t.s);
	for (int d = 1; d < 32; d *= 2) {
		emitf(e, "\tshfl.sync.up.b32 %s|%s, %s, %d, 0, 0xffffffff;\n", x.s, p.s, s.s, d);
		emitf(e, "\t@%s add.u32 %s, %s, %s;\n", p.s, s.s, s.s, x.s);
	}
	emitf(e, "\tadd.u32 %s, %s, %s;\n", s.s, s.s, base.s);
	emitf(e, "\tsetp.gt.u32 %s, %s, %s;\n\tvote.sync.ballot.b32 %s, %s, 0xffffffff;\n", p.s, s.s, mt.s,
	      b.s, p.s);
	emitf(e, "\tsetp.ne.u32 %s, %s, 0;\n\t@%s bra %s;\n", p.s, b.s, p.s, found);
	emitf(e, "\tshfl.sync.idx.b32 %s, %s, 31, 0x1f, 0xffffffff;\n", base.s, s.s);
	emitf(e, "\tadd.u32 %s, %s, 32;\n\tbra %s;\n", c.s, c.s, loop);
	emit_label(e, found);
	/* the first lane whose running count passes mt holds the expert */
	emitf(e, "\tbrev.b32 %s, %s;\n\tclz.b32 %s, %s;\n", x.s, b.s, l.s, x.s);
	emitf(e, "\tshfl.sync.idx.b32 %s, %s, %s, 0x1f, 0xffffffff;\n", s.s, s.s, l.s);
	emitf(e, "\tshfl.sync.idx.b32 %s, %s, %s, 0x1f, 0xffffffff;\n", t.s, t.s, l.s);
	emitf(e, "\tshfl.sync.idx.b32 %s, %s, %s, 0x1f, 0xffffffff;\n", lo.s, lo.s, l.s);
	emitf(e, "\tshfl.sync.idx.b32 %s, %s, %s, 0x1f, 0xffffffff;\n", hi.s, hi.s, l.s);
	emitf(e, "\tadd.u32 %s, %s, %s;\n", ex.s, c.s, l.s);
	/* the tile's place among its expert's: mt - (s - t) */
	emitf(e, "\tsub.u32 %s, %s, %s;\n\tsub.u32 %s, %s, %s;\n", s.s, s.s, t.s, mt.s, mt.s, s.s);
	if (masked) {
		emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tadd.u32 %s, %s, %s;\n", r->mlo.s, ex.s, r->M.s, r->mhi.s,
		      r->mlo.s, hi.s);
		emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n", r->m0.s, mt.s, tm, r->mlo.s);
		emitf(e, "\tmul.lo.u32 %s, %s, %s;\n", r->rows.s, E.s, r->M.s);
		/* mx32: SA's images are per slab, cdiv(M,128) of them */
		emitf(e, "\tadd.u32 %s, %s, 127;\n\tshr.u32 %s, %s, 7;\n", t.s, r->M.s, t.s, t.s);
		emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n", r->sfa_rb.s, ex.s, t.s, mt.s);
	} else {
		emitf(e, "\tmov.u32 %s, %s;\n\tmov.u32 %s, %s;\n", r->mlo.s, lo.s, r->mhi.s, hi.s);
		emitf(e, "\tdiv.u32 %s, %s, %d;\n\tadd.u32 %s, %s, %s;\n", t.s, lo.s, tm, t.s, t.s, mt.s);
		emitf(e, "\tmul.lo.u32 %s, %s, %d;\n\tshr.u32 %s, %s, 7;\n", r->m0.s, t.s, tm, r->sfa_rb.s, r->m0.s);
	}
	r->expert = ex;
	/* B rows and SB row blocks of expert ex */
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n", r->nb.s, ex.s, r->N.s, r->n0.s);
	emitf(e, "\tadd.u32 %s, %s, 127;\n\tshr.u32 %s, %s, 7;\n", t.s, r->N.s, t.s, t.s);
	emitf(e, "\tshr.u32 %s, %s, 7;\n\tmad.lo.u32 %s, %s, %s, %s;\n", x.s, r->n0.s, r->sbrow.s, ex.s, t.s, x.s);
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tdiv.u32 %s, %s, %d;\n", r->nk.s, r->K.s, g->tk - 1, r->nk.s, r->nk.s, g->tk);
}

static int
emit_prologue(Emit *e, const GemmCfg *g, GemmRegs *r, KgErr *err)
{
	Reg raw = reg_new(e, RC_B32);

	r->tid = reg_new(e, RC_B32);
	r->warp = reg_new(e, RC_B32);
	r->lane = reg_new(e, RC_B32);
	r->base = reg_new(e, RC_B32);
	r->M = reg_new(e, RC_B32);
	r->N = reg_new(e, RC_B32);
	r->K = reg_new(e, RC_B32);
	r->nk = reg_new(e, RC_B32);
	r->m0 = reg_new(e, RC_B32);
	r->n0 = reg_new(e, RC_B32);
	r->tmap_a = reg_new(e, RC_B64);
	r->tmap_b = reg_new(e, RC_B64);
	r->c = reg_new(e, RC_B64);
	if (gemm_clustered(g))
		r->rank = reg_new(e, RC_B32);

	emit_block(e, "gemm.prologue");
	emitf(e, "\tmov.u32 %s, %%tid.x;\n", r->tid.s);
	emitf(e, "\tshr.u32 %s, %s, 5;\n", r->warp.s, r->tid.s);
	emitf(e, "\tand.b32 %s, %s, 31;\n", r->lane.s, r->tid.s);
	/* Round the dynamic base up to the largest alignment any region needs;
	 * the plan requested the slack (docs/hardware.md, "Base offset and alignment"). */
	emitf(e, "\tmov.u32 %s, kg_smem;\n", raw.s);
	emitf(e, "\tadd.u32 %s, %s, %u;\n", r->base.s, raw.s, g->plan.smem_align - 1);
	emitf(e, "\tand.b32 %s, %s, %d;\n", r->base.s, r->base.s, -(int)g->plan.smem_align);
	emitf(e, "\tld.param.u32 %s, [p_M];\n\tld.param.u32 %s, [p_N];\n\tld.param.u32 %s, [p_K];\n",
	      r->M.s, r->N.s, r->K.s);
	op_param_global(e, r->c, "C");
	op_param_addr(e, r->tmap_a, "p_A");
	op_param_addr(e, r->tmap_b, "p_B");
	if (g->sblock || g->sfvec) {
		r->sa = reg_new(e, RC_B64);
		r->sb = reg_new(e, RC_B64);
		op_param_global(e, r->sa, "SA");
		op_param_global(e, r->sb, "SB");
	}
	r->prank = r->rank;
	if (gemm_clustered(g))
		emitf(e, "\tmov.u32 %s, %%cluster_ctarank;\n", r->rank.s);
	if (g->cn > 1 && !g->pair) {
		/* sm_90a: the cluster is the two CTAs along N */
		r->pairid = r->rank;
	} else if (g->cn > 1) {
		r->prank = reg_new(e, RC_B32);
		r->pairid = reg_new(e, RC_B32);
		emitf(e, "\tand.b32 %s, %s, 1;\n\tshr.u32 %s, %s, 1;\n", r->prank.s, r->rank.s, r->pairid.s,
		      r->rank.s);
	}
	r->mhi = r->rows = r->M;
	r->nb = r->n0;
	if (g->moe)
		emit_moe_coords(e, g, r);
	else
		emit_tile_coords(e, g, r);

	op_init_barriers(e, &g->plan, r->base, r->tid, "gemm.barrier_init");
	if (g->t->gemm->setup && g->t->gemm->setup(e, g, r, err) < 0)
		return -1;
	if (gemm_clustered(g))
		/* the peer uses this CTA's barriers: the inits and the TMEM
		 * allocation are published cluster-wide (PTX ISA §9.7.13.2) */
		op_cluster_sync(e);
	else
		op_bar_sync_why(e, 0, g->plan.threads, "CTA: mbarrier inits and setup visible");
	return 0;
}

static void
gemm_abi(const GemmCfg *g, const char *args, KernelAbi *k)
{
	AbiParam *p;

	memset(k, 0, sizeof *k);
	snprintf(k->kernel, sizeof k->kernel, "%s", g->name);
	k->family = g->moe ? "gemm_moe" : "gemm"; /* its own checker: tools/check_moe.c */
	k->kgen_family = "gemm";
	k->target = g->t;
	snprintf(k->args, sizeof k->args, "%s", args);
	k->threads = g->plan.threads;
	k->min_ctas = 1; /* a register cap at entry, so setmaxnreg takes effect */
	k->cluster[0] = k->cluster[1] = k->cluster[2] = 1;
	k->cluster[0] = (1 + g->pair) * g->cn;
	k->smem = g->plan.smem_request;
	if (g->moe == GM_CONTIGUOUS)
		/* every expert adds at most one partial row block */
		snprintf(k->grid[0], sizeof k->grid[0], "cdiv(M,%d)*cdiv(N,%d)+E*cdiv(N,%d)", g->tm, g->tn, g->tn);
	else if (g->moe == GM_MASKED)
		snprintf(k->grid[0], sizeof k->grid[0], "E*cdiv(M,%d)*cdiv(N,%d)", g->tm, g->tn);
	else if (gemm_clustered(g))
		snprintf(k->grid[0], sizeof k->grid[0], "cdiv(M,%d)*cdiv(N,%d)*%d", g->tile_rows, g->tn * g->cn,
		         (1 + g->pair) * g->cn);
	else
		snprintf(k->grid[0], sizeof k->grid[0], "cdiv(M,%d)*cdiv(N,%d)", g->tm, g->tn);
	snprintf(k->grid[1], sizeof k->grid[1], "1");
	snprintf(k->grid[2], sizeof k->grid[2], "1");
	/* A and B: K-major, one swizzle span of K by the rows one CTA loads per box (a multicast
	 * slice of A under --cluster-n, a pair's half of B under --cta-pair) */
	for (int i = 0; i < 2; i++) {
		p = abi_add(k, ABI_TMAP, i ? "B" : "A");
		p->dtype = i ? g->in_b : g->in;
		if (i && g->in_b != g->in)
			p->tmap_dtype = "e2m1p"; /* K values a row, packed; 16U4_ALIGN16B */
		p->rank = 2;
		p->box[0] = g->span / g->esz_in;
		p->box[1] = i ? g->tn_cta >> (g->swiglu + g->split) : g->tm / g->cn; /* swiglu: a box per half (quarter) */
		p->swz = g->swz;
		/* e2m1: K/2 bytes of packed pairs per row (docs/ABI.md, "gemm") */
		snprintf(p->tensor, sizeof p->tensor, "%s%s", i ? (g->moe ? "B[E*N," : "B[N,")
		         : g->moe == GM_MASKED ? "A[E*M," : "A[M,", g->ebits == 4 ? "K/2]" : "K]");
		if (i && g->w4a8) {
			/* E2M1 bytes, 64 of them (128 of K) per row and stage */
			p->dtype = DT_U8;
			p->box[0] = (uint32_t)g->tk / 2;
			p->swz = SWZ_64B;
			snprintf(p->tensor, sizeof p->tensor, "%s", g->moe ? "B[E*N,K/2]" : "B[N,K/2]");
		}
	}
	/* MoE: the rows of A, SA and C (E slabs of M when masked), and B's
	 * experts (a prefix EB of "E*" on B's and SB's rows) */
	const char *rows = g->moe == GM_MASKED ? "E*M" : "M", *eb = g->moe ? "E*" : "";
	abi_ptr(k, "C", g->out, "C[%s,%s]", rows, g->swiglu ? "N/2" : "N");
	if (g->sblock) {
		/* K-block-major SA, so that the rows of one K block are adjacent */
		abi_ptr(k, "SA", DT_F32, "SA[cdiv(K,%d),%s]", g->sblock, rows);
		if (g->w4a8)
			abi_ptr(k, "SB", g->sbtype, "SB[%sN,K/32]", eb);
		else
			abi_ptr(k, "SB", g->sbtype, "SB[%scdiv(N,%d),cdiv(K,%d)]", eb, g->sblock, g->sblock);
	}
	if (g->sfvec) {
		/* the tcgen05.cp images of each 128 rows by four scale vectors of K:
		 * 128 of K for 32-wide vectors, 64 for NVFP4's 16 (docs/ABI.md, "gemm") */
		abi_ptr(k, "SA", g->sftype, "SA[%scdiv(M,128),cdiv(K,%d),512]", g->moe == GM_MASKED ? "E*" : "", SF_BLOCKS * g->sfvec);
		abi_ptr(k, "SB", g->sftype, "SB[%scdiv(N,128),cdiv(K,%d),512]", eb, SF_BLOCKS * g->sfvec);
	}
	if (g->alpha) {
		/* NVFP4: the product of A's and B's per-tensor fp32 scales, one per
		 * expert (docs/ABI.md, "gemm") */
		abi_ptr(k, "alpha", DT_F32, "%s", g->moe ? "alpha[E]" : "alpha[1]");
	}
	if (g->out == DT_E4M3 && g->sblock) {
		/* C's fp32 scales per 1x128, as the SA of a block128 gemm with
		 * K = N/2 (docs/ABI.md, "SwiGLU epilogue") */
		abi_ptr(k, "CS", DT_F32, "CS[cdiv(N/2,128),%s]", rows);
	} else if (g->out == DT_E4M3) {
		/* C's UE8M0 factors per 32 columns, as the images SA of an mx32
		 * gemm with K = N/2 (docs/ABI.md, "SwiGLU epilogue") */
		abi_ptr(k, "CS", DT_UE8M0, "CS[%scdiv(M,128),cdiv(N/2,128),512]", g->moe == GM_MASKED ? "E*" : "");
	}
	if (g->moe) {
		abi_ptr(k, g->moe == GM_MASKED ? "counts" : "offsets", DT_S32, "%s",
		        g->moe == GM_MASKED ? "counts[E]" : "offsets[E+1]");
	}
	abi_add(k, ABI_U32, "M");
	abi_add(k, ABI_U32, "N");
	abi_add(k, ABI_U32, "K");
	if (g->moe)
		abi_add(k, ABI_U32, "E");
	if (g->swiglu)
		abi_add(k, ABI_F32, "swiglu_limit");
	/* A and B rows are K elements: their byte stride must be a multiple of
	 * 16 (docs/hardware.md, "Tensor map encoding") */
	abi_shape(k, "kmult", "%d", 128 / g->ebits);
	if (g->sblock || g->sfvec)
		abi_shape(k, "kblock", "%d", g->sblock ? g->sblock : g->tk);
	if (g->moe)
		abi_shape(k, "moe", "%s", g->moe == GM_MASKED ? "masked" : "contiguous");
	if (g->w4a8)
		abi_shape(k, "weights", "e2m1");
	if (g->swiglu) {
		/* gate and up halves of whole 128-row scale blocks */
		abi_shape(k, "nmult", "256");
		abi_shape(k, "epilogue", "swiglu");
	}
}

static int
gemm_generate(const void *params, const char *args, Buf *out, KgErr *err)
{
	GemmCfg g;
	GemmRegs r;
	KernelAbi k;
	Emit e;
	int rc;

	if (gemm_configure(&g, params, err) < 0)
		return -1;
	emit_init(&e);
	rc = emit_prologue(&e, &g, &r, err);
	if (rc == 0)
		rc = g.t->gemm->body(&e, &g, &r, err);
	if (rc == 0 && e.oom)
		rc = kg_fail(err, "out of memory");
	if (rc == 0) {
		gemm_abi(&g, args, &k);
		abi_module(&k, &e, out);
	}
	emit_free(&e);
	return rc;
}

static int
gemm_plan(const void *params, Buf *text, KgErr *err)
{
	GemmCfg g;

	if (gemm_configure(&g, params, err) < 0)
		return -1;
	buf_printf(text, "kernel          %s\n", g.name);
	buf_printf(text, "tile            %d x %d x %d, %d stages, swizzle %s, %s -> %s\n", g.tm, g.tn,
	           g.tk, g.stages, swizzle_name(g.swz), dtype_name(g.in), dtype_name(g.out));
	if (g.sblock && !g.w4a8)
		buf_printf(text, "block scales    fp32 SA per 1x%d of A, %s SB per %dx%d of B; one wgmma group per K block into a temporary, then acc += tmp * SA * SB\n",
		           g.sblock, dtype_name(g.sbtype), g.sblock, g.sblock);
	if (g.w4a8)
		buf_printf(text, "w4a8            B E2M1 %dx%d bytes per stage (64B swizzle) + UE8M0 per 32: each consumer warpgroup turns its 64 rows into E4M3 wgmma A fragments in registers (one power of two per row and K block, docs/hardware.md \"FP4 weights as E4M3\"), tokens are the wgmma's N = %d from smem\n",
		           g.tn, g.tk / 2, g.tm);
	if (g.sfvec && g.ebits == 8)
		buf_printf(text, "block scales    UE8M0 per 1x%d of A and of B: one %d-byte image per 128 rows per stage, tcgen05.cp .32x128b.warpx4 into TMEM, kind::mxf8f6f4 scale-factor id = K block\n",
		           g.sfvec, SF_IMAGE_BYTES);
	if (g.in_b != g.in)
		buf_printf(text, "fp4 weights     B is e2m1 packed two per byte in global memory; its tensor map (16U4_ALIGN16B) lands each 16 values in 16 bytes of shared memory, read by kind::mxf8f6f4 with b=e2m1\n");
	else if (g.sfvec)
		buf_printf(text, "block scales    e2m1 packed two per byte, %s per 1x%d of A and of B: %d %d-byte images per 128 rows per stage, tcgen05.cp .32x128b.warpx4 into TMEM, kind::mxf4nvf4.block%d (K = %d per MMA, %dX)%s\n",
		           dtype_name(g.sftype), g.sfvec, g.sf_imgs, SF_IMAGE_BYTES, g.sfvec, g.kmma, g.kmma / g.sfvec,
		           g.alpha ? "; C = alpha[expert] * accumulator in the epilogue" : "");
	buf_printf(text, "smem tiles      A %dx%d (%u B, SBO %u LBO %u), B %dx%d (%u B); %d TMA boxes per operand per stage\n",
	           g.tm, g.tk, g.la.bytes, g.la.sbo, g.la.lbo, g.tn_cta, g.tk, g.lb.bytes, g.kslices);
	if (g.pair)
		buf_printf(text, "cta pair        clusters of %d CTAs: rank 0 issues tcgen05.mma.cta_group::2 M=%d N=%d; each CTA holds %d rows of A, %d of B and D\n",
		           2 * g.cn, g.tile_rows, g.tn, g.tm, g.tn_cta);
	if (g.cn > 1)
		buf_printf(text, "multicast       %d %s along N; each CTA loads %d of its %d A rows and multicasts them to the same place in the other%s\n",
		           g.cn, g.pair ? "pairs" : "CTAs of one M tile", g.tm / g.cn, g.tm,
		           g.pair ? " pair" : " CTA; each stage is freed by both CTAs' consumers");
	if (g.moe == GM_CONTIGUOUS)
		buf_printf(text, "moe             contiguous: expert e owns rows offsets[e]..offsets[e+1]-1 of A and C, B[e] its N rows; one CTA per (tile-m row block met by an expert, N tile), found by a warp scan of the experts' tile counts\n");
	if (g.moe == GM_MASKED)
		buf_printf(text, "moe             masked: expert e owns slab rows e*M..e*M+counts[e]-1 of A and C, B[e] its N rows; one CTA per (tile of a slab's live rows, N tile), found by a warp scan of the experts' tile counts\n");
	if (g.swiglu)
		buf_printf(text, "epilogue        swiglu: tile rows 0..%d of B are gate rows n0.., %d.. up rows N/2+n0..; C[m, n0+j] = silu(min(gate,L))*clamp(up,-L,L), N/2 columns\n",
		           g.tn / 2 - 1, g.tn / 2);
	if (g.moe)
		buf_printf(text, "grid            %s CTAs, N tiles fastest; CTAs past the experts' tiles exit at once\n",
		           g.moe == GM_MASKED ? "E*cdiv(M,tile-m)*cdiv(N,tile-n)" : "cdiv(M,tile-m)*cdiv(N,tile-n)+E*cdiv(N,tile-n)");
	else
	buf_printf(text, "grid            cdiv(M,%d)*cdiv(N,%d)%s CTAs, grouped %d M-tiles per column band\n",
	           g.tile_rows, g.tn, g.pair ? "*2" : "", g.group_m);
	plan_print(&g.plan, text);
	return 0;
}

const Family family_gemm = {
	"gemm",
	"C[M,N] = A[M,K]·B[N,K]^T, bf16/fp16 (or block-scaled e4m3, e2m1, e4m3 x e2m1) in, f32 accumulate, bf16/f32 out",
	gemm_params,
	sizeof gemm_params / sizeof gemm_params[0],
	sizeof(GemmParams),
	gemm_generate,
	gemm_plan,
};
