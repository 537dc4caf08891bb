/* The decode_merge family: combines N partial decode outputs of
 * `decode --unnormalized 1` (O without 1/rowsum, LSE and the reference max
 * M per part) into the normalized O and the LSE of their union, the sink
 * joining the denominator once (docs/ABI.md,
 * "decode_merge (combining partial decode outputs)"). Plain
 * CUDA-core PTX (loads, ex2, FMAs): one warp per (query token, head), lane
 * l owning columns 16l .. 16l+15, so it serves every target. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "abi.h"
#include "family.h"
#include "ops.h"
#include "target.h"

typedef struct MergeParams {
	int target;
	int heads_q;
	int sink;
} MergeParams;

#define P(f) offsetof(MergeParams, f)

/* See family.h for the columns. */
static const ParamSpec merge_params[] = {
	{"target", PK_TARGET, P(target), "sm_90a,sm_100a", 0, 0, 0, "sm_90a", "any: the kernel uses no tensor cores",
	 NULL},
	{"heads-q", PK_INT, P(heads_q), NULL, 1, 128, 1, "64", "query heads of the parts", NULL},
	{"sink", PK_INT, P(sink), "0,1", 0, 0, 0, "0", "per-head attention-sink logits join the denominator", NULL},
};

enum { WARPS = 8, COLS = 512, PER_LANE = COLS / 32 };

static void
merge_name(const MergeParams *p, char *name, size_t n)
{
	snprintf(name, n, "decode_merge_h%d%s_%s", p->heads_q, p->sink ? "_sink" : "", targets[p->target].tag);
}

/* e^x for x in natural-log units: ex2(x·log2 e) */
static void
emit_exp(Emit *e, Reg d, Reg x)
{
	emitf(e, "\tmul.f32 %s, %s, 0f3FB8AA3B;\n\tex2.approx.f32 %s, %s;\n", d.s, x.s, d.s, d.s);
}

/* G = max(sink, LSE_p): lanes over parts p = lane, lane+32, .., then the
 * warp; the sum L = e^(sink - G) + Σ_p e^(LSE_p - G) and the output O =
 * Σ_p e^(M_p - G)·O_p / L, LSE = G + ln L: every lane walks all parts, two
 * at a time so their loads overlap. A part with LSE_p = -inf (no key)
 * weighs 0 whatever its M_p; no part with a key and no sink gives O = 0,
 * LSE = -inf. */
static void
emit_merge(Emit *e, const MergeParams *mp)
{
	enum { U = 2 };
	Reg tid = reg_new(e, RC_B32), warp = reg_new(e, RC_B32), lane = reg_new(e, RC_B32);
	Reg head = reg_new(e, RC_B32), y = reg_new(e, RC_B32), b = reg_new(e, RC_B32), sq = reg_new(e, RC_B32);
	Reg n = reg_new(e, RC_B32), bn = reg_new(e, RC_B32), li = reg_new(e, RC_B32), ro = reg_new(e, RC_B32);
	Reg pp = reg_new(e, RC_B32), t = reg_new(e, RC_B32), ls = reg_new(e, RC_B32), os = reg_new(e, RC_B32);
	Reg lp = reg_new(e, RC_B64), mpp = reg_new(e, RC_B64), op = reg_new(e, RC_B64), a = reg_new(e, RC_B64);
	Reg o64 = reg_new(e, RC_B64), ti = reg_new(e, RC_B32);
	Reg g = reg_new(e, RC_F32), go = reg_new(e, RC_F32), x = reg_new(e, RC_F32), L = reg_new(e, RC_F32);
	Reg sk = reg_new(e, RC_F32), inv = reg_new(e, RC_F32);
	Reg acc[PER_LANE], v[U][PER_LANE], wl[U], wu[U], lv[U], mv[U], pk[PER_LANE / 2];
	Reg p = reg_new(e, RC_PRED), pe = reg_new(e, RC_PRED), pu[U];
	char s1[48], s1end[48], s2[48], s2end[48], out[48];

	reg_array(e, RC_F32, acc, PER_LANE);
	reg_array(e, RC_B32, pk, PER_LANE / 2);
	for (int u = 0; u < U; u++) {
		reg_array(e, RC_F32, v[u], PER_LANE);
		wl[u] = reg_new(e, RC_F32);
		wu[u] = reg_new(e, RC_F32);
		lv[u] = reg_new(e, RC_F32);
		mv[u] = reg_new(e, RC_F32);
		pu[u] = reg_new(e, RC_PRED);
	}
	label_new(e, s1, sizeof s1, "merge_max");
	label_new(e, s1end, sizeof s1end, "merge_max_done");
	label_new(e, s2, sizeof s2, "merge_sum");
	label_new(e, s2end, sizeof s2end, "merge_sum_done");
	label_new(e, out, sizeof out, "merge_out");
	emit_block(e, "decode_merge");
	emitf(e, "\tmov.u32 %s, %%tid.x;\n\tshr.u32 %s, %s, 5;\n\tand.b32 %s, %s, 31;\n", tid.s, warp.s, tid.s,
	      lane.s, tid.s);
	/* CTA (x, y, z): heads 8x .. 8x+7 of query token y of sequence z */
	emitf(e, "\tmov.u32 %s, %%ctaid.x;\n\tmad.lo.u32 %s, %s, %d, %s;\n", t.s, head.s, t.s, WARPS, warp.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %d;\n\t@%s bra %s;\n", p.s, head.s, mp->heads_q, p.s, out);
	emitf(e, "\tmov.u32 %s, %%ctaid.y;\n\tmov.u32 %s, %%ctaid.z;\n", y.s, b.s);
	emitf(e, "\tld.param.u32 %s, [p_s_q];\n\tld.param.u32 %s, [p_parts];\n\tld.param.u32 %s, [p_batch];\n", sq.s,
	      n.s, bn.s);
	/* li = (b·Hq + head)·s_q + y (LSE, M); ro = (b·s_q + y)·Hq + head (O
	 * rows); per part: ls = batch·Hq·s_q entries, os = the same rows */
	emitf(e, "\tmad.lo.u32 %s, %s, %d, %s;\n\tmad.lo.u32 %s, %s, %s, %s;\n", li.s, b.s, mp->heads_q, head.s, li.s,
	      li.s, sq.s, y.s);
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tmad.lo.u32 %s, %s, %d, %s;\n", ro.s, b.s, sq.s, y.s, ro.s, ro.s,
	      mp->heads_q, head.s);
	emitf(e, "\tmul.lo.u32 %s, %s, %s;\n\tmul.lo.u32 %s, %s, %d;\n\tmov.u32 %s, %s;\n", ls.s, bn.s, sq.s, ls.s,
	      ls.s, mp->heads_q, os.s, ls.s);
	op_param_global(e, lp, "LSE_parts");
	op_param_global(e, mpp, "M_parts");
	op_param_global(e, op, "O_parts");
	if (mp->sink) {
		op_param_global(e, a, "sink");
		emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n\tld.global.nc.f32 %s, [%s];\n", o64.s, head.s,
		      a.s, a.s, o64.s, sk.s, a.s);
	} else {
		emitf(e, "\tmov.f32 %s, 0fFF800000;\n", sk.s);
	}
	/* pass 1: G */
	emitf(e, "\tmov.f32 %s, %s;\n\tmov.u32 %s, %s;\n", g.s, sk.s, pp.s, lane.s);
	emitf(e, "\tsetp.ge.u32 %s, %s, %s;\n\t@%s bra %s;\n", p.s, pp.s, n.s, p.s, s1end);
	emit_label(e, s1);
	emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", t.s, pp.s, ls.s,
	      li.s, o64.s, t.s, a.s, lp.s, o64.s);
	emitf(e, "\tld.global.nc.f32 %s, [%s];\n\tmax.f32 %s, %s, %s;\n", x.s, a.s, g.s, g.s, x.s);
	emitf(e, "\tadd.u32 %s, %s, 32;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", pp.s, pp.s, p.s, pp.s, n.s, p.s,
	      s1);
	emit_label(e, s1end);
	for (int k = 16; k >= 1; k /= 2)
		emitf(e, "\tshfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff;\n\tmax.f32 %s, %s, %s;\n", x.s, g.s, k, g.s,
		      g.s, x.s);
	/* G = -inf: nothing to attend; offset 0 keeps -inf - -inf out */
	emitf(e, "\tsetp.eq.f32 %s, %s, 0fFF800000;\n\tselp.f32 %s, 0f00000000, %s, %s;\n", pe.s, g.s, go.s, g.s,
	      pe.s);
	emitf(e, "\tsub.f32 %s, %s, %s;\n", x.s, sk.s, go.s);
	emit_exp(e, L, x);
	for (int i = 0; i < PER_LANE; i++)
		emitf(e, "\tmov.f32 %s, 0f00000000;\n", acc[i].s);
	/* pass 2: the weighted sum, parts pp, pp+1 */
	emitf(e, "\tmov.u32 %s, 0;\n\tsetp.eq.u32 %s, %s, 0;\n\t@%s bra %s;\n", pp.s, p.s, n.s, p.s, s2end);
	emit_label(e, s2);
	for (int u = 0; u < U; u++) {
		emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n", t.s, pp.s, u, pu[u].s, t.s, n.s);
		emitf(e, "\tmov.f32 %s, 0fFF800000;\n\tmov.f32 %s, 0f00000000;\n", lv[u].s, mv[u].s);
		emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tmul.wide.u32 %s, %s, 4;\n", ti.s, t.s, ls.s, li.s, o64.s, ti.s);
		emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.f32 %s, [%s];\n", a.s, lp.s, o64.s, pu[u].s, lv[u].s,
		      a.s);
		emitf(e, "\tadd.u64 %s, %s, %s;\n\t@%s ld.global.nc.f32 %s, [%s];\n", a.s, mpp.s, o64.s, pu[u].s, mv[u].s,
		      a.s);
		/* O_p row: (p·os + ro)·512 + 16·lane floats */
		emitf(e, "\tmad.lo.u32 %s, %s, %s, %s;\n\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", ti.s, t.s,
		      os.s, ro.s, o64.s, ti.s, 4 * COLS, a.s, op.s, o64.s);
		emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o64.s, lane.s, 4 * PER_LANE, a.s, a.s,
		      o64.s);
		for (int i = 0; i < PER_LANE; i++)
			emitf(e, "\tmov.f32 %s, 0f00000000;\n", v[u][i].s);
		for (int q = 0; q < PER_LANE / 4; q++)
			emitf(e, "\t@%s ld.global.nc.v4.f32 {%s, %s, %s, %s}, [%s+%d];\n", pu[u].s, v[u][4 * q].s,
			      v[u][4 * q + 1].s, v[u][4 * q + 2].s, v[u][4 * q + 3].s, a.s, 16 * q);
	}
	for (int u = 0; u < U; u++) {
		/* wl = e^(LSE_p - G) (0 for -inf); wu = e^(M_p - G), 0 when LSE_p = -inf */
		emitf(e, "\tsub.f32 %s, %s, %s;\n", x.s, lv[u].s, go.s);
		emit_exp(e, wl[u], x);
		emitf(e, "\tsub.f32 %s, %s, %s;\n", x.s, mv[u].s, go.s);
		emit_exp(e, wu[u], x);
		emitf(e, "\tsetp.eq.f32 %s, %s, 0fFF800000;\n\t@%s mov.f32 %s, 0f00000000;\n", p.s, lv[u].s, p.s, wu[u].s);
		emitf(e, "\tadd.f32 %s, %s, %s;\n", L.s, L.s, wl[u].s);
		for (int i = 0; i < PER_LANE; i++)
			emitf(e, "\tfma.rn.f32 %s, %s, %s, %s;\n", acc[i].s, wu[u].s, v[u][i].s, acc[i].s);
	}
	emitf(e, "\tadd.u32 %s, %s, %d;\n\tsetp.lt.u32 %s, %s, %s;\n\t@%s bra %s;\n", pp.s, pp.s, U, p.s, pp.s, n.s,
	      p.s, s2);
	emit_label(e, s2end);
	/* O = acc / L (0 when L = 0), bf16; LSE = G + ln L */
	emitf(e, "\tsetp.gt.f32 %s, %s, 0f00000000;\n\trcp.rn.f32 %s, %s;\n\tselp.f32 %s, %s, 0f00000000, %s;\n", p.s,
	      L.s, inv.s, L.s, inv.s, inv.s, p.s);
	for (int i = 0; i < PER_LANE / 2; i++)
		emitf(e, "\tmul.f32 %s, %s, %s;\n\tmul.f32 %s, %s, %s;\n\tcvt.rn.bf16x2.f32 %s, %s, %s;\n", acc[2 * i].s,
		      acc[2 * i].s, inv.s, acc[2 * i + 1].s, acc[2 * i + 1].s, inv.s, pk[i].s, acc[2 * i + 1].s,
		      acc[2 * i].s);
	op_param_global(e, a, "O");
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o64.s, ro.s, 2 * COLS, a.s, a.s, o64.s);
	emitf(e, "\tmul.wide.u32 %s, %s, %d;\n\tadd.u64 %s, %s, %s;\n", o64.s, lane.s, 2 * PER_LANE, a.s, a.s, o64.s);
	for (int q = 0; q < PER_LANE / 8; q++)
		emitf(e, "\tst.global.v4.b32 [%s+%d], {%s, %s, %s, %s};\n", a.s, 16 * q, pk[4 * q].s, pk[4 * q + 1].s,
		      pk[4 * q + 2].s, pk[4 * q + 3].s);
	emitf(e, "\tlg2.approx.f32 %s, %s;\n\tfma.rn.f32 %s, %s, 0f3F317218, %s;\n", L.s, L.s, L.s, L.s, go.s);
	emitf(e, "\tselp.f32 %s, %s, 0fFF800000, %s;\n", L.s, L.s, p.s);
	op_param_global(e, a, "LSE");
	emitf(e, "\tmul.wide.u32 %s, %s, 4;\n\tadd.u64 %s, %s, %s;\n", o64.s, li.s, a.s, a.s, o64.s);
	emitf(e, "\tsetp.eq.u32 %s, %s, 0;\n\t@%s st.global.f32 [%s], %s;\n", p.s, lane.s, p.s, a.s, L.s);
	emit_label(e, out);
	emitf(e, "\tret;\n");
}

static void
merge_abi(const MergeParams *mp, const char *name, const char *args, KernelAbi *k)
{
	memset(k, 0, sizeof *k);
	snprintf(k->kernel, sizeof k->kernel, "%s", name);
	k->family = "decode_merge";
	k->target = &targets[mp->target];
	snprintf(k->args, sizeof k->args, "%s", args);
	k->threads = 32 * WARPS;
	k->cluster[0] = k->cluster[1] = k->cluster[2] = 1;
	snprintf(k->grid[0], sizeof k->grid[0], "%d", (mp->heads_q + WARPS - 1) / WARPS);
	snprintf(k->grid[1], sizeof k->grid[1], "s_q");
	snprintf(k->grid[2], sizeof k->grid[2], "batch");
	abi_ptr(k, "O_parts", DT_F32, "O_parts[parts,batch,s_q,Hq,%d]", COLS);
	abi_ptr(k, "LSE_parts", DT_F32, "LSE_parts[parts,batch,Hq,s_q]");
	abi_ptr(k, "M_parts", DT_F32, "M_parts[parts,batch,Hq,s_q]");
	if (mp->sink)
		abi_ptr(k, "sink", DT_F32, "sink[Hq]");
	abi_ptr(k, "O", DT_BF16, "O[batch,s_q,Hq,%d]", COLS);
	abi_ptr(k, "LSE", DT_F32, "LSE[batch,Hq,s_q]");
	abi_add(k, ABI_U32, "batch");
	abi_add(k, ABI_U32, "s_q");
	abi_add(k, ABI_U32, "parts");
}

static int
merge_generate(const void *params, const char *args, Buf *out, KgErr *err)
{
	const MergeParams *mp = params;
	KernelAbi k;
	Emit e;
	char name[96];
	int rc = 0;

	merge_name(mp, name, sizeof name);
	emit_init(&e);
	emit_merge(&e, mp);
	if (e.oom)
		rc = kg_fail(err, "out of memory");
	if (rc == 0) {
		merge_abi(mp, name, args, &k);
		abi_module(&k, &e, out);
	}
	emit_free(&e);
	return rc;
}

static int
merge_plan(const void *params, Buf *text, KgErr *err)
{
	const MergeParams *mp = params;
	char name[96];

	(void)err;
	merge_name(mp, name, sizeof name);
	buf_printf(text, "kernel          %s\n", name);
	buf_printf(text, "inputs          N parts of decode --unnormalized 1: O_p (f32, no 1/rowsum), LSE_p, M_p; N = parts at run time\n");
	buf_printf(text, "output          O = sum_p e^(M_p - G) O_p / L, L = %ssum_p e^(LSE_p - G), LSE = G + ln L, G = max(%sLSE_p)\n",
	           mp->sink ? "e^(sink - G) + " : "", mp->sink ? "sink, " : "");
	buf_printf(text, "grid            %d x s_q x batch CTAs of %d warps: warp = one head of one query token, lane = 16 columns\n",
	           (mp->heads_q + WARPS - 1) / WARPS, WARPS);
	buf_printf(text, "bound           memory: reads N·(512·4 + 8) bytes per head row, writes 512·2 + 4\n");
	return 0;
}

const Family family_decode_merge = {
	"decode_merge",
	"merges N unnormalized partial decode outputs (O, LSE, M) into O and LSE, the sink joining once",
	merge_params,
	sizeof merge_params / sizeof merge_params[0],
	sizeof(MergeParams),
	merge_generate,
	merge_plan,
};
