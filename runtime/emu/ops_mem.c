/* Moves, loads, stores, address conversion and atomics (PTX ISA §9.7.9.1
 * mov, §9.7.9.8 ld, §9.7.9.10 st, §9.7.9.19 cvta, §9.7.13.5 atom/red).
 * Shared-memory accesses go through the hazard checks of hb.c; global ones
 * must fall inside a device allocation. */
#include <inttypes.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

int
emu_op_nop(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	(void)c;
	(void)t;
	(void)in;
	return EMU_NEXT;
}

/* createpolicy: any 64-bit value works as a cache policy for the emulator */
int
emu_op_createpolicy(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	if (emu_set(c, t, in, emu_opnd(c, in, 0), UINT64_C(0x1000000000000000)))
		return EMU_STOP;
	return EMU_NEXT;
}

int
emu_mod_prefetch(EmuInsn *in, const char *m, EmuParse *p)
{
	static const char *const ok[] = {
		"L1", "L2", "tensormap", "fractional", "range", "L2::evict_last", "L2::evict_first",
		"L2::evict_normal", "L2::evict_unchanged", "L2::evict_first", "global", "param", "const",
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (strcmp(ok[i], m) == 0)
			return 1;
	return 0;
}

static int
tbytes(EmuType ty)
{
	int b = emu_types[ty].bits / 8;
	return b ? b : 1;
}

int
emu_chk_mov(EmuInsn *in, EmuParse *p)
{
	if (in->ntypes != 1)
		return emu_parse_fail(p, "mov takes one type");
	return 0;
}

int
emu_op_mov(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	const EmuOperand *d = emu_opnd(c, in, 0), *s = emu_opnd(c, in, 1);
	int n = emu_types[in->t[0]].bits;
	if (s->kind == OPK_VEC) {
		/* mov.b64 d, {lo, hi}: element 0 in the low bits */
		int w = n / s->nsub;
		uint64_t v = 0;
		for (int i = 0; i < s->nsub; i++) {
			uint64_t e;
			if (emu_get(c, t, in, emu_sub(c, s, i), &e))
				return EMU_STOP;
			if (w < 64)
				e &= (UINT64_C(1) << w) - 1;
			v |= e << (w * i);
		}
		return emu_set(c, t, in, d, v) ? EMU_STOP : EMU_NEXT;
	}
	uint64_t v;
	if (emu_get(c, t, in, s, &v))
		return EMU_STOP;
	if (d->kind == OPK_VEC) {
		int w = n / d->nsub;
		for (int i = 0; i < d->nsub; i++) {
			uint64_t e = w >= 64 ? v : v >> (w * i) & ((UINT64_C(1) << w) - 1);
			if (emu_set(c, t, in, emu_sub(c, d, i), e))
				return EMU_STOP;
		}
		return EMU_NEXT;
	}
	if (n < 64)
		v &= (UINT64_C(1) << n) - 1;
	return emu_set(c, t, in, d, v) ? EMU_STOP : EMU_NEXT;
}

int
emu_mod_ld(EmuInsn *in, const char *m, EmuParse *p)
{
	return strcmp(m, "unified") == 0 ? 1 : 0;
}

int
emu_chk_ldst(EmuInsn *in, EmuParse *p)
{
	if (in->ntypes != 1)
		return emu_parse_fail(p, "%s takes one type", in->def->name);
	int n = in->vec ? in->vec : 1;
	if (in->t[0] == T_PRED)
		return emu_parse_fail(p, "%s.pred is not valid", in->def->name);
	if (n * tbytes((EmuType)in->t[0]) > 16 && !(in->vec == 8 && tbytes((EmuType)in->t[0]) <= 4))
		return emu_parse_fail(p, "%s: %d x %d bytes is wider than 16 bytes", in->def->name, n,
		                      tbytes((EmuType)in->t[0]));
	return 0;
}

static uint64_t
load_elem(const uint8_t *h, EmuType ty)
{
	int b = tbytes(ty);
	uint64_t v = 0;
	memcpy(&v, h, (size_t)b);
	if (emu_types[ty].kind == TK_SINT && b < 8) {
		uint64_t m = UINT64_C(1) << (8 * b - 1);
		v = (v ^ m) - m;
	}
	return v;
}

/* Kernel parameters are read-only: no race to check. */
static int
param_bytes(const EmuCta *c, const uint8_t *h)
{
	return h >= c->lc->params && h < c->lc->params + c->prog->param_bytes + 16;
}

/* The data-race check (race.c) of a generic access at a resolved to h: this
 * CTA's shared memory (sa), another CTA's through shared::cluster (its
 * history, which its own threads' accesses share), or global memory. */
static int
race_check(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t a, const uint8_t *h, uint32_t sa,
           uint32_t bytes, int kind)
{
	if (sa != UINT32_MAX)
		return emu_race_smem(c, t, in, sa, bytes, kind);
	if (in->space == SPACE_CLUSTER) {
		EmuCta *o;
		uint32_t local;
		return emu_cluster_resolve(c, t, in, a, &o, &local) ||
		       emu_race_smem(o, t, in, local, bytes, kind);
	}
	return !param_bytes(c, h) && emu_race_global(c, t, in, a, bytes, kind);
}

/* The race kind of an ld/st (strong with .volatile or a stronger order;
 * optab.c: weak 1, volatile 2, relaxed 3, acquire 4, release 5) or of an
 * atom/red (always strong); a strong one of scope .cta (optab.c: cta 1,
 * cluster 2, gpu 3, sys 4) is marked so (race.c, morally strong). */
static int
race_kind(const EmuInsn *in, int write, int strong)
{
	strong = strong || in->order >= 2;
	return (write ? EMU_RACE_WRITE : 0) | (strong ? EMU_RACE_STRONG : 0) |
	       (strong && in->scope == 1 ? EMU_RACE_CTA : 0);
}

int
emu_op_ld(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	const EmuOperand *d = emu_opnd(c, in, 0);
	EmuType ty = (EmuType)in->t[0];
	int n = in->vec ? in->vec : 1;
	if (in->vec && (d->kind != OPK_VEC || d->nsub != n))
		return emu_fault(c, t, in, "ld.v%d needs a vector of %d registers", n, n);
	uint32_t bytes = (uint32_t)(n * tbytes(ty));
	uint64_t a;
	uint8_t *h;
	uint32_t sa;
	if (emu_addr(c, t, in, emu_opnd(c, in, 1), &a) ||
	    emu_resolve(c, t, in, (EmuSpace)in->space, a, bytes, 0, &h, &sa))
		return EMU_STOP;
	if ((sa != UINT32_MAX && emu_smem_read(c, t, in, sa, bytes)) ||
	    race_check(c, t, in, a, h, sa, bytes, race_kind(in, 0, 0)))
		return EMU_STOP;
	for (int i = 0; i < n; i++) {
		uint64_t v = load_elem(h + i * tbytes(ty), ty);
		if (emu_set(c, t, in, in->vec ? emu_sub(c, d, i) : d, v))
			return EMU_STOP;
	}
	if (sa == UINT32_MAX && (in->order == 4 || in->order == 7) && emu_sync_global(c, t, in, a, 1, 0) != EMU_NEXT)
		return EMU_STOP;
	return EMU_NEXT;
}

int
emu_op_st(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	const EmuOperand *s = emu_opnd(c, in, 1);
	EmuType ty = (EmuType)in->t[0];
	int n = in->vec ? in->vec : 1;
	if (in->vec && (s->kind != OPK_VEC || s->nsub != n))
		return emu_fault(c, t, in, "st.v%d needs a vector of %d registers", n, n);
	uint32_t eb = (uint32_t)tbytes(ty), bytes = (uint32_t)n * eb;
	uint64_t vals[8];
	for (int i = 0; i < n; i++)
		if (emu_get(c, t, in, in->vec ? emu_sub(c, s, i) : s, &vals[i]))
			return EMU_STOP;
	uint64_t a;
	uint8_t *h;
	uint32_t sa;
	if (emu_addr(c, t, in, emu_opnd(c, in, 0), &a) ||
	    emu_resolve(c, t, in, (EmuSpace)in->space, a, bytes, 1, &h, &sa))
		return EMU_STOP;
	if ((sa != UINT32_MAX && emu_smem_write(c, t, in, sa, bytes)) ||
	    race_check(c, t, in, a, h, sa, bytes, race_kind(in, 1, 0)))
		return EMU_STOP;
	for (int i = 0; i < n; i++)
		memcpy(h + (uint32_t)i * eb, &vals[i], eb);
	c->gen++;
	return EMU_NEXT;
}

enum { CVTA_TO = 1 };

int
emu_mod_cvta(EmuInsn *in, const char *m, EmuParse *p)
{
	if (strcmp(m, "to") == 0) {
		in->aux[0] |= CVTA_TO;
		return 1;
	}
	return 0;
}

/* Generic addresses are windows (emu.h): shared and param addresses move
 * into and out of theirs; global addresses are already generic. */
int
emu_op_cvta(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	uint64_t a;
	if (emu_geti(c, t, in, 1, &a))
		return EMU_STOP;
	uint64_t base;
	switch (in->space) {
	case SPACE_SHARED:
	case SPACE_CLUSTER: base = EMU_GENERIC_SHARED; break;
	case SPACE_PARAM: base = EMU_GENERIC_PARAM; break;
	case SPACE_GLOBAL: base = 0; break;
	default: return emu_fault(c, t, in, "cvta: unsupported state space");
	}
	uint64_t r;
	if (in->aux[0] & CVTA_TO) {
		if (base && (a < base || a - base >= EMU_WINDOW_SIZE))
			return emu_fault(c, t, in, "cvta.to: generic address 0x%" PRIx64 " is not in that "
			                 "state space's window", a);
		r = a - base;
	} else {
		r = a + base;
	}
	if (in->ntypes && in->t[0] == T_U32)
		r &= 0xffffffffu;
	return emu_set(c, t, in, emu_opnd(c, in, 0), r) ? EMU_STOP : EMU_NEXT;
}

enum { AT_ADD = 1, AT_MIN, AT_MAX, AT_INC, AT_DEC, AT_AND, AT_OR, AT_XOR, AT_EXCH, AT_CAS };

int
emu_mod_atom(EmuInsn *in, const char *m, EmuParse *p)
{
	static const char *const names[] = {"", "add", "min", "max", "inc", "dec", "and", "or",
	                                    "xor", "exch", "cas"};
	for (int i = 1; i <= AT_CAS; i++)
		if (strcmp(names[i], m) == 0) {
			in->sub = (uint8_t)i;
			return 1;
		}
	return 0;
}

int
emu_op_atom(EmuCta *c, EmuThread *t, const EmuInsn *in)
{
	int red = in->def->name[0] == 'r';
	int ai = red ? 0 : 1;
	EmuType ty = (EmuType)in->t[0];
	if (!in->ntypes || !in->sub)
		return emu_fault(c, t, in, "%s needs an operation and a type", in->def->name);
	uint32_t bytes = (uint32_t)tbytes(ty);
	uint64_t a, b, cv = 0;
	uint8_t *h;
	uint32_t sa;
	if (emu_addr(c, t, in, emu_opnd(c, in, ai), &a) || emu_geti(c, t, in, ai + 1, &b) ||
	    (in->sub == AT_CAS && emu_geti(c, t, in, ai + 2, &cv)) ||
	    emu_resolve(c, t, in, (EmuSpace)in->space, a, bytes, 1, &h, &sa))
		return EMU_STOP;
	if ((sa != UINT32_MAX && (emu_smem_read(c, t, in, sa, bytes) || emu_smem_write(c, t, in, sa, bytes))) ||
	    race_check(c, t, in, a, h, sa, bytes, race_kind(in, 1, 1)))
		return EMU_STOP;
	uint64_t old = load_elem(h, ty), r = old;
	int n = emu_types[ty].bits;
	uint64_t m = n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
	int sign = emu_types[ty].kind == TK_SINT;
	int fl = emu_types[ty].kind == TK_FLOAT;
	switch (in->sub) {
	case AT_ADD:
		if (fl && ty == T_F32)
			r = emu_f32_bits(emu_f32((uint32_t)old) + emu_f32((uint32_t)b));
		else if (fl)
			r = emu_f64_bits(emu_f64(old) + emu_f64(b));
		else
			r = old + b;
		break;
	case AT_MIN:
	case AT_MAX: {
		int64_t so = (int64_t)(n >= 64 ? old : ((old & m) ^ (m >> 1 ^ m)) - (m >> 1 ^ m));
		int64_t sb = (int64_t)(n >= 64 ? b : ((b & m) ^ (m >> 1 ^ m)) - (m >> 1 ^ m));
		int less = sign ? so < sb : (old & m) < (b & m);
		r = (in->sub == AT_MIN) == less ? old : b;
		break;
	}
	case AT_INC: r = (old & m) >= (b & m) ? 0 : old + 1; break;
	case AT_DEC: r = (old & m) == 0 || (old & m) > (b & m) ? b : old - 1; break;
	case AT_AND: r = old & b; break;
	case AT_OR: r = old | b; break;
	case AT_XOR: r = old ^ b; break;
	case AT_EXCH: r = b; break;
	case AT_CAS: r = (old & m) == (b & m) ? cv : old; break;
	default: return emu_fault(c, t, in, "unknown atomic operation");
	}
	r &= m;
	memcpy(h, &r, bytes);
	c->gen++;
	if (sa == UINT32_MAX && in->order >= 4 && in->order <= 7 &&
	    emu_sync_global(c, t, in, a, in->order != 5, in->order != 4) != EMU_NEXT)
		return EMU_STOP;
	if (!red && emu_set(c, t, in, emu_opnd(c, in, 0), old & m))
		return EMU_STOP;
	return EMU_NEXT;
}
