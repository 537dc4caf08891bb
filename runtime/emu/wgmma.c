/* Hopper warpgroup MMA (PTX ISA §9.7.15; docs/hardware.md, "wgmma syntax and fences").
 *
 * wgmma.mma_async is issued by the four warps of a warpgroup; each warp's
 * lanes hold rows 16w..16w+15 of the 64-row accumulator (w = warp % 4,
 * fragment docs/hardware.md, "wgmma accumulator fragment"), so the emulator keeps the
 * operations per warp and each warp computes its own rows. Results land only at
 * wgmma.wait_group (the latest legal point): until then the accumulator registers are marked in
 * flight and touching them is a hazard, and the smem the MMA reads is marked
 * in flight so a TMA or store over it is one too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

/* aux: [0] M, [1] N, [2] K, [3] 1 = A from registers (RS), [4] trans immediates present */
int
emu_mod_wgmma(EmuInsn *in, const char *m, EmuParse *p)
{
	unsigned mm, nn, kk;
	char tail;
	if (sscanf(m, "m%un%uk%u%c", &mm, &nn, &kk, &tail) == 3) {
		in->aux[0] = mm;
		in->aux[1] = nn;
		in->aux[2] = kk;
		return 1;
	}
	EmuType ty = emu_type_find(m);
	if (ty != T_NONE) {
		if (in->ntypes == 3)
			return emu_parse_fail(p, "wgmma.mma_async: more than three types");
		in->t[in->ntypes++] = (uint8_t)ty;
		return 1;
	}
	if (strcmp(m, "satfinite") == 0)
		return emu_parse_fail(p, "wgmma integer MMAs are not supported by the emulator");
	return 0;
}

static int
ebytes(EmuType t)
{
	return t == T_TF32 ? 4 : t == T_E4M3 || t == T_E5M2 ? 1 : 2;
}

int
emu_chk_wgmma(EmuInsn *in, EmuParse *p)
{
	if (in->ntypes != 3 || !in->aux[0])
		return emu_parse_fail(p, "wgmma.mma_async needs a shape and dtype.atype.btype");
	EmuType d = in->t[0], a = in->t[1], b = in->t[2];
	uint32_t M = in->aux[0], N = in->aux[1], K = in->aux[2];
	int half = (a == T_F16 || a == T_BF16) && a == b;
	int fp8 = (a == T_E4M3 || a == T_E5M2) && (b == T_E4M3 || b == T_E5M2);
	int tf32 = a == T_TF32 && b == T_TF32;
	if (!half && !fp8 && !tf32)
		return emu_parse_fail(p, "wgmma .%s.%s inputs are not supported by the emulator",
		                      emu_types[a].name, emu_types[b].name);
	uint32_t wantk = half ? 16 : fp8 ? 32 : 8;
	if (M != 64 || N < 8 || N > 256 || N % 8 || K != wantk)
		return emu_parse_fail(p, "wgmma shape m%un%uk%u is invalid for .%s (m64nNk%u, N = "
		                      "8..256 step 8; docs/hardware.md, \"wgmma syntax and fences\")", M, N, K, emu_types[a].name,
		                      wantk);
	if (!(d == T_F32 || (d == T_F16 && (a == T_F16 || fp8))))
		return emu_parse_fail(p, "wgmma accumulator .%s is invalid for .%s inputs",
		                      emu_types[d].name, emu_types[a].name);
	return 0;
}

int
emu_chk_wgmma_wait(EmuInsn *in, EmuParse *p)
{
	(void)in;
	(void)p;
	return 0;
}

/* Operand layout, decided from operand kinds at issue. */
typedef struct WgForm {
	int rs;
	int nacc;
	int i_b, i_sd, i_sa, i_sb, i_ta, i_tb; /* operand indices, -1 absent */
} WgForm;

static int
form(EmuCta *c, const EmuInsn *in, WgForm *f)
{
	const EmuOperand *a = emu_opnd(c, in, 1);
	EmuType d = in->t[0], at = in->t[1];
	int half = at == T_F16 || at == T_BF16;
	f->rs = a->kind == OPK_VEC;
	f->nacc = (int)in->aux[1] / (d == T_F32 ? 2 : 4);
	f->i_b = 2;
	f->i_sd = 3;
	f->i_sa = 4;
	f->i_sb = 5;
	f->i_ta = half && !f->rs ? 6 : -1;
	f->i_tb = half ? (f->rs ? 6 : 7) : -1;
	int want = 6 + (f->i_ta >= 0) + (f->i_tb >= 0);
	const EmuOperand *acc = emu_opnd(c, in, 0);
	if (in->nop != want || acc->kind != OPK_VEC || acc->nsub != f->nacc ||
	    (f->rs && a->nsub != 4))
		return -1;
	return 0;
}

int
emu_wop_wgmma_fence(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	(void)in;
	int nr = c->prog->nregs;
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		EmuThread *t = &c->t[w->id * 32 + l];
		if (!t->npend)
			continue;
		for (int r = 0; r < nr; r++)
			t->pend[r] &= (uint8_t)~PEND_DIRTY;
	}
	return EMU_NEXT;
}

static int
group_push(EmuWgGroup *g, const EmuWgOp *op)
{
	if (g->n == g->cap) {
		int nc = g->cap ? g->cap * 2 : 8;
		EmuWgOp *no = realloc(g->op, (size_t)nc * sizeof *no);
		if (!no)
			return -1;
		g->op = no;
		g->cap = nc;
	}
	g->op[g->n++] = *op;
	return 0;
}

int
emu_wop_wgmma_mma(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	EmuThread *base = &c->t[w->id * 32];
	EmuThread *t0 = &base[__builtin_ctz(lanes)];
	WgForm f;
	if (form(c, in, &f))
		return emu_fault(c, t0, in, "wgmma.mma_async operands do not match its shape and types "
		                 "(accumulator of N/2 f32 or N/4 f16x2 registers, descriptors, scale-d, "
		                 "imm-scale-a/b, imm-trans-a/b)");
	EmuWgOp op;
	memset(&op, 0, sizeof op);
	op.in = in;
	op.lanes = lanes;
	uint64_t sd;
	if ((!f.rs && emu_uniform(c, w, in, lanes, 1, &op.adesc)) ||
	    emu_uniform(c, w, in, lanes, f.i_b, &op.bdesc) ||
	    emu_uniform(c, w, in, lanes, f.i_sd, &sd))
		return EMU_STOP;
	op.scale_d = (int)(sd & 1);
	EmuSmemDesc da, db;
	char why[256];
	if (!f.rs && emu_desc_decode(op.adesc, ARCH_SM90, &da, why, sizeof why))
		return emu_hazard(c, t0, in, "descriptor", "A descriptor 0x%016llx: %s",
		                  (unsigned long long)op.adesc, why);
	if (emu_desc_decode(op.bdesc, ARCH_SM90, &db, why, sizeof why))
		return emu_hazard(c, t0, in, "descriptor", "B descriptor 0x%016llx: %s",
		                  (unsigned long long)op.bdesc, why);
	if ((!f.rs && emu_desc_aligned(&da)) || emu_desc_aligned(&db))
		return emu_hazard(c, t0, in, "swizzle-align",
		                  "%s descriptor start 0x%x is not on its %dB swizzle pattern "
		                  "(period %d bytes) and base_offset is 0 (docs/hardware.md, \"Base offset and alignment\")",
		                  !f.rs && emu_desc_aligned(&da) ? "A" : "B",
		                  !f.rs && emu_desc_aligned(&da) ? da.start : db.start,
		                  !f.rs && emu_desc_aligned(&da) ? da.swizzle : db.swizzle,
		                  8 * (!f.rs && emu_desc_aligned(&da) ? da.swizzle : db.swizzle));
	int ta = f.i_ta >= 0 ? (int)emu_opnd(c, in, f.i_ta)->imm : 0;
	int tb = f.i_tb >= 0 ? (int)emu_opnd(c, in, f.i_tb)->imm : 0;
	EmuType at = in->t[1], bt = in->t[2];
	int q = w->id % 4;
	uint32_t N = in->aux[1], K = in->aux[2];
	/* smem footprint: this warp's 16 rows of A and all of B */
	uint32_t bad = 0;
	int cap = 0;
	c->stamp++;
	if ((!f.rs && emu_desc_chunks(c, &da, !ta, ebytes(at), (uint32_t)q * 16, 16, K, &op.chunks,
	                              &op.nchunks, &cap, &bad)) ||
	    emu_desc_chunks(c, &db, !tb, ebytes(bt), 0, N, K, &op.chunks, &op.nchunks, &cap, &bad)) {
		free(op.chunks);
		return emu_fault(c, t0, in, "wgmma operand element at smem 0x%x is outside the CTA's "
		                 "shared memory (descriptor start/LBO/SBO wrong?)", bad);
	}
	for (int i = 0; i < op.nchunks; i++)
		if (emu_smem_async_read_check(c, t0, in, op.chunks[i], t0->vc, "wgmma.mma_async reads")) {
			free(op.chunks);
			return EMU_STOP;
		}
	/* accumulators: in flight now; a register written since the last
	 * wgmma.fence makes this MMA read a stale value (docs/hardware.md,
	 * "wgmma syntax and fences": the fence is mandatory) */
	const EmuOperand *acc = emu_opnd(c, in, 0);
	for (int l = 0; l < 32; l++) {
		if (!(lanes >> l & 1))
			continue;
		EmuThread *t = &base[l];
		for (int i = 0; i < f.nacc; i++) {
			int r = emu_sub(c, acc, i)->reg;
			uint8_t pf = t->pend[r];
			if (pf & (PEND_TCLD | PEND_WGSRC)) {
				free(op.chunks);
				return emu_hazard(c, t, in, "wgmma-acc-in-flight",
				                  "accumulator register %s is still the destination of another "
				                  "in-flight operation", c->prog->reg[r].name);
			}
			if (pf & PEND_DIRTY) {
				free(op.chunks);
				return emu_hazard(c, t, in, "wgmma-fence",
				                  "accumulator register %s was accessed since the last wgmma.fence: "
				                  "wgmma.fence.sync.aligned is required before a wgmma.mma_async "
				                  "whose registers other instructions touched (PTX ISA §9.7.15.6)",
				                  c->prog->reg[r].name);
			}
			t->pend[r] = (uint8_t)((pf | PEND_WGMMA | PEND_WATCH) & ~PEND_DIRTY);
		}
		t->npend = 1;
	}
	if (f.rs) {
		op.afrag = malloc(32 * 4 * sizeof *op.afrag);
		if (!op.afrag) {
			free(op.chunks);
			return emu_fault(c, t0, in, "out of host memory");
		}
		const EmuOperand *av = emu_opnd(c, in, 1);
		for (int l = 0; l < 32; l++) {
			if (!(lanes >> l & 1))
				continue;
			EmuThread *t = &base[l];
			for (int i = 0; i < 4; i++) {
				uint64_t v;
				const EmuOperand *ro = emu_sub(c, av, i);
				uint8_t pf = t->pend[ro->reg];
				if (pf & PEND_DIRTY) {
					free(op.chunks);
					free(op.afrag);
					return emu_hazard(c, t, in, "wgmma-fence",
					                  "A-fragment register %s was accessed since the last "
					                  "wgmma.fence (PTX ISA §9.7.15.6)", c->prog->reg[ro->reg].name);
				}
				if (emu_get(c, t, in, ro, &v)) {
					free(op.chunks);
					free(op.afrag);
					return EMU_STOP;
				}
				op.afrag[l * 4 + i] = (uint32_t)v;
				/* the MMA's own read is not an access that needs a fence */
				t->pend[ro->reg] = pf | PEND_WGSRC;
			}
		}
	}
	for (int i = 0; i < op.nchunks; i++) {
		c->sinflight[op.chunks[i]]++;
		c->sinflight_line[op.chunks[i]] = in->line;
	}
	if (group_push(&w->open, &op)) {
		free(op.chunks);
		free(op.afrag);
		return emu_fault(c, t0, in, "out of host memory");
	}
	return EMU_NEXT;
}

int
emu_wop_wgmma_commit(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	(void)lanes;
	if (w->ngroups == w->capgroups) {
		int nc = w->capgroups ? w->capgroups * 2 : 8;
		EmuWgGroup *ng = realloc(w->groups, (size_t)nc * sizeof *ng);
		if (!ng)
			return emu_fault(c, &c->t[w->id * 32], in, "out of host memory");
		w->groups = ng;
		w->capgroups = nc;
	}
	w->groups[w->ngroups++] = w->open;
	memset(&w->open, 0, sizeof w->open);
	return EMU_NEXT;
}

/* floor(log2|x|) of a nonzero finite float */
static int
exp2i(float x)
{
	uint32_t b;
	memcpy(&b, &x, 4);
	int e = (int)(b >> 23 & 0xff);
	if (e)
		return e - 127;
	int f;
	frexpf(x, &f); /* subnormal */
	return f - 1;
}

/* 2^e for |e| < 1000, without a libm call */
static double
pow2(int e)
{
	uint64_t b = (uint64_t)(e + 1023) << 52;
	double d;
	memcpy(&d, &b, 8);
	return d;
}

/* One K step of a wgmma into an f32 accumulator, as Hopper's tensor cores
 * do it (docs/hardware.md, "wgmma accumulation"): each product a_k b_k is
 * exact with exponent e_k = exp(a_k) + exp(b_k) (significand in [1, 4));
 * the accumulator's exponent is exp(d); all terms are aligned to the
 * largest of these, E, truncated toward zero to multiples of 2^(E-bits),
 * summed exactly, and the sum is rounded toward zero to f32. bits is 25 for
 * the 16-bit forms (k16 steps; fitted bit-exactly to H200 results, bf16
 * inputs with exponents spread over 2^-14..2^16, K = 64 and 1024: every
 * output equal, where plain f32 sums in K order differ in the last bits of
 * ~80%) and 13 for FP8 (k32 steps; fitted to H100 results of the block-
 * scaled SwiGLU gemm: every reported output equal, the model at 12 or 25
 * bits far from them).
 * Inputs must be finite. In units of 2^(E-bits) every term is below
 * 2^(bits+2), so the terms and their sum are exact in int64. */
float
emu_hopper_step(float d, const float *a, const int *ea, const float *b, const int *eb, uint32_t K, int bits)
{
	int emax = INT32_MIN;
	for (uint32_t k = 0; k < K; k++)
		if (a[k] != 0.0f && b[k] != 0.0f && ea[k] + eb[k] > emax)
			emax = ea[k] + eb[k];
	if (d != 0.0f && exp2i(d) > emax)
		emax = exp2i(d);
	if (emax == INT32_MIN)
		return d;
	double scale = pow2(bits - emax);
	int64_t s = (int64_t)((double)d * scale); /* the cast truncates toward zero */
	for (uint32_t k = 0; k < K; k++)
		s += (int64_t)((double)a[k] * (double)b[k] * scale);
	if (s == 0)
		return 0.0f;
	uint64_t m = s < 0 ? (uint64_t)-s : (uint64_t)s;
	int sh = 0;
	while (m >> 24) { /* keep 24 significant bits: truncation = toward zero */
		m >>= 1;
		sh++;
	}
	/* m has at most 24 bits: exact in f32 unless the result is subnormal */
	float r = (float)((double)m * pow2(sh + emax - bits));
	return s < 0 ? -r : r;
}

/* D(rows of this warp) = A·B (+ D). 16-bit inputs into f32 follow the
 * Hopper datapath at 25 bits and FP8 inputs into f32 at 13 (emu_hopper_step);
 * other types sum exact products in f32 in K order. */
static int
compute(EmuCta *c, EmuWarp *w, const EmuWgOp *op)
{
	const EmuInsn *in = op->in;
	EmuThread *base = &c->t[w->id * 32];
	WgForm f;
	form(c, in, &f);
	EmuType dt = in->t[0], at = in->t[1], bt = in->t[2];
	uint32_t N = in->aux[1], K = in->aux[2];
	int q = w->id % 4;
	float A[16 * 32], B[256 * 32];
	EmuSmemDesc da, db;
	char why[8];
	emu_desc_decode(op->bdesc, ARCH_SM90, &db, why, sizeof why);
	int ta = f.i_ta >= 0 ? (int)emu_opnd(c, in, f.i_ta)->imm : 0;
	int tb = f.i_tb >= 0 ? (int)emu_opnd(c, in, f.i_tb)->imm : 0;
	float sa = emu_opnd(c, in, f.i_sa)->imm < 0 ? -1.0f : 1.0f;
	float sb = emu_opnd(c, in, f.i_sb)->imm < 0 ? -1.0f : 1.0f;
	if (!f.rs) {
		emu_desc_decode(op->adesc, ARCH_SM90, &da, why, sizeof why);
		emu_desc_gather(c, &da, !ta, at, ebytes(at), (uint32_t)q * 16, 16, K, sa, A);
	} else if (ebytes(at) == 1) {
		/* 8-bit (docs/hardware.md, "wgmma A fragment"): lane l, register i,
		 * byte b: row l/4 + 8(i%2), k 4(l%4) + b + 16(i/2) */
		for (int l = 0; l < 32; l++)
			for (int i = 0; i < 4; i++)
				for (int b = 0; b < 4; b++) {
					int row = l / 4 + 8 * (i % 2), k = 4 * (l % 4) + b + 16 * (i / 2);
					uint32_t reg = op->afrag ? op->afrag[l * 4 + i] : 0;
					A[row * (int)K + k] = sa * emu_to_f32(reg >> (8 * b) & 0xff, at);
				}
	} else {
		/* docs/hardware.md, "wgmma A fragment": lane l, element e: row l/4 +
		 * 8((e/2)%2), k 2(l%4) + e%2 + 8(e/4); register e/2, low half for even e */
		for (int l = 0; l < 32; l++)
			for (int e = 0; e < 8; e++) {
				int row = l / 4 + 8 * ((e / 2) % 2), k = 2 * (l % 4) + e % 2 + 8 * (e / 4);
				uint32_t reg = op->afrag ? op->afrag[l * 4 + e / 2] : 0;
				uint16_t h = (uint16_t)(e % 2 ? reg >> 16 : reg);
				A[row * (int)K + k] = sa * emu_to_f32(h, at);
			}
	}
	emu_desc_gather(c, &db, !tb, bt, ebytes(bt), 0, N, K, sb, B);
	/* fraction bits kept per step, 0: no datapath model */
	int hw = dt != T_F32 ? 0 : ebytes(at) == 2 && ebytes(bt) == 2 ? 25 : ebytes(at) == 1 && ebytes(bt) == 1 ? 13 : 0;
	int EA[16 * 32], EB[256 * 32];
	uint8_t finite_a[16], finite_b[256];
	if (hw) {
		memset(finite_a, 1, sizeof finite_a);
		memset(finite_b, 1, sizeof finite_b);
		for (uint32_t i = 0; i < 16 * K; i++) {
			EA[i] = A[i] != 0.0f && isfinite(A[i]) ? exp2i(A[i]) : 0;
			if (!isfinite(A[i]))
				finite_a[i / K] = 0;
		}
		for (uint32_t i = 0; i < N * K; i++) {
			EB[i] = B[i] != 0.0f && isfinite(B[i]) ? exp2i(B[i]) : 0;
			if (!isfinite(B[i]))
				finite_b[i / K] = 0;
		}
	}
	const EmuOperand *acc = emu_opnd(c, in, 0);
	for (int l = 0; l < 32; l++) {
		if (!(op->lanes >> l & 1))
			continue;
		EmuThread *t = &base[l];
		for (uint32_t i = 0; i < N / 2; i++) {
			int row = l / 4 + 8 * (int)((i / 2) % 2);
			int col = 2 * (l % 4) + (int)(i % 2) + 8 * (int)(i / 4);
			int r = dt == T_F32 ? emu_sub(c, acc, (int)i)->reg : emu_sub(c, acc, (int)i / 2)->reg;
			float d = 0.0f;
			if (op->scale_d) {
				if (dt == T_F32)
					d = emu_f32((uint32_t)t->r[r]);
				else
					d = emu_f16_to_f32((uint16_t)(t->r[r] >> (i % 2 ? 16 : 0)));
			}
			const float *ar = &A[(uint32_t)row * K], *br = &B[(uint32_t)col * K];
			/* non-finite values: IEEE arithmetic, no datapath model */
			if (hw && finite_a[row] && finite_b[col] && isfinite(d)) {
				d = emu_hopper_step(d, ar, &EA[(uint32_t)row * K], br, &EB[(uint32_t)col * K], K, hw);
			} else {
				for (uint32_t k = 0; k < K; k++)
					d += ar[k] * br[k];
			}
			if (dt == T_F32) {
				t->r[r] = emu_f32_bits(d);
			} else {
				uint64_t h = emu_f32_to_f16(d, RND_RN, 0);
				int sh = i % 2 ? 16 : 0;
				t->r[r] = (t->r[r] & ~(UINT64_C(0xffff) << sh)) | h << sh;
			}
		}
	}
	return 0;
}

static void
release_op(EmuCta *c, EmuWarp *w, EmuWgOp *op, int completed)
{
	EmuThread *t0 = &c->t[w->id * 32 + (op->lanes ? __builtin_ctz(op->lanes) : 0)];
	for (int i = 0; i < op->nchunks; i++) {
		uint32_t ch = op->chunks[i];
		if (c->sinflight[ch])
			c->sinflight[ch]--;
		if (completed) {
			EmuTag r = {(uint16_t)t0->slot, TAGK_TC, 0, t0->vc[t0->slot], op->in->line, t0->tid};
			emu_sread_note(c, ch, &r);
		}
	}
	free(op->chunks);
	free(op->afrag);
	op->chunks = NULL;
	op->afrag = NULL;
}

/* Re-derives the in-flight marks of the warp's registers from the ops that
 * are still pending. */
static void
remark(EmuCta *c, EmuWarp *w)
{
	int nr = c->prog->nregs;
	for (int l = 0; l < 32; l++) {
		if (!(w->all >> l & 1))
			continue;
		EmuThread *t = &c->t[w->id * 32 + l];
		if (!t->npend)
			continue;
		for (int r = 0; r < nr; r++)
			t->pend[r] &= (uint8_t)~(PEND_WGMMA | PEND_WGSRC);
	}
	const EmuWgGroup *gs[1] = {&w->open};
	for (int g = -1; g < w->ngroups; g++) {
		const EmuWgGroup *grp = g < 0 ? gs[0] : &w->groups[g];
		for (int i = 0; i < grp->n; i++) {
			const EmuWgOp *op = &grp->op[i];
			WgForm f;
			form(c, op->in, &f);
			const EmuOperand *acc = emu_opnd(c, op->in, 0);
			const EmuOperand *av = emu_opnd(c, op->in, 1);
			for (int l = 0; l < 32; l++) {
				if (!(op->lanes >> l & 1))
					continue;
				EmuThread *t = &c->t[w->id * 32 + l];
				for (int k = 0; k < f.nacc; k++)
					t->pend[emu_sub(c, acc, k)->reg] |= PEND_WGMMA;
				if (f.rs)
					for (int k = 0; k < 4; k++)
						t->pend[emu_sub(c, av, k)->reg] |= PEND_WGSRC;
			}
		}
	}
}

/* wgmma.wait_group N: all but the N most recent committed groups complete. */
int
emu_wop_wgmma_wait(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes)
{
	(void)lanes;
	uint64_t n = (uint64_t)emu_opnd(c, in, 0)->imm;
	int done = 0;
	while ((uint64_t)w->ngroups > n) {
		EmuWgGroup g = w->groups[0];
		memmove(&w->groups[0], &w->groups[1], (size_t)(w->ngroups - 1) * sizeof *w->groups);
		w->ngroups--;
		for (int i = 0; i < g.n; i++) {
			if (compute(c, w, &g.op[i]))
				return EMU_STOP;
			release_op(c, w, &g.op[i], 1);
		}
		free(g.op);
		done = 1;
	}
	if (done)
		remark(c, w);
	return EMU_NEXT;
}

void
emu_wgmma_drop(EmuCta *c, EmuWarp *w)
{
	for (int i = 0; i < w->open.n; i++)
		release_op(c, w, &w->open.op[i], 0);
	w->open.n = 0;
	for (int g = 0; g < w->ngroups; g++) {
		for (int i = 0; i < w->groups[g].n; i++)
			release_op(c, w, &w->groups[g].op[i], 0);
		free(w->groups[g].op);
	}
	w->ngroups = 0;
}
