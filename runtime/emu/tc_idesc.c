/* The tcgen05.mma instruction-descriptor combinations the emulator accepts
 * (no sparsity, no .ws), one row per kind: which A/B and D type codes (PTX
 * ISA §9.7.16.10.1 Tables 39-41, the codes of §9.7.16.4.2 Tables 42-44),
 * whether A and B must be one type, whether negation exists, and the legal
 * M and N for cta_group::1 and for cta_group::2 (PTX ISA §9.7.16.10.1,
 * valid shapes; docs/hardware.md, "MMA shapes"; docs/emu-idesc.md).
 * tests/emu/test_emu_idesc.c checks that every idesc gen/desc builds passes
 * these rules and that the combinations gen/desc refuses are refused here. */
#include <stdarg.h>
#include <stdio.h>

#include "emu.h"
#include "tc.h"

typedef struct IdescRule {
	const char *name;
	unsigned ab;        /* bit c: A/B type code c */
	unsigned d;         /* bit c: D type code c; 0: block-scaled (F32) */
	int same_ab;        /* A and B of one type */
	int negate;         /* bits 13/14 may be set */
	/* cta_group::1 */
	unsigned m;         /* bit 0: M = 64, bit 1: M = 128 */
	uint32_t nstep64, nstep128; /* N = nstep..256 step nstep for M = 64 / 128 */
	uint32_t nfine;     /* also 8..nfine step 8 (kind::i8) */
	/* cta_group::2 (a CTA pair): M = 128 or 256, N = nstep2..256 step nstep2 */
	uint32_t nstep2;
} IdescRule;

enum { M64 = 1, M128 = 2, M256 = 4 };

static const IdescRule rules[] = {
	[KIND_F16] = {"kind::f16", 0x3, 0x3, 1, 1, M64 | M128, 8, 16, 0, 16},
	[KIND_TF32] = {"kind::tf32", 0x4, 0x2, 1, 1, M64 | M128, 8, 16, 0, 16},
	[KIND_F8F6F4] = {"kind::f8f6f4", 0x3b, 0x3, 0, 1, M64 | M128, 8, 16, 0, 16},
	[KIND_I8] = {"kind::i8", 0x3, 0x4, 0, 0, M64 | M128, 16, 16, 32, 32},
	[KIND_MXF8F6F4] = {"kind::mxf8f6f4", 0x3b, 0, 0, 1, M128, 8, 8, 0, 16},
	[KIND_MXF4] = {"kind::mxf4", 0x2, 0, 1, 1, M128, 8, 8, 0, 16},
	[KIND_MXF4NVF4] = {"kind::mxf4nvf4", 0x2, 0, 1, 1, M128, 8, 8, 0, 16},
};

static int
fail(char *why, size_t n, const char *fmt, ...) KRT_PRINTF(3, 4);

static int
fail(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -1;
}

int
emu_tc_idesc_rules(int kind, int ts, const EmuIdescFields *f, char *why, size_t n)
{
	if (kind <= 0 || kind > KIND_MXF4NVF4)
		return fail(why, n, "unknown MMA kind %d", kind);
	const IdescRule *r = &rules[kind];
	if (!(r->ab >> f->afmt & 1) || !(r->ab >> f->bfmt & 1))
		return fail(why, n, "%s: A type (bits 7-9) = %d or B type (bits 10-12) = %d is not "
		            "one of the kind's types (PTX ISA Tables 39-41)", r->name, f->afmt, f->bfmt);
	if (r->same_ab && f->afmt != f->bfmt)
		return fail(why, n, "%s: A type %d and B type %d differ; the kind takes one type for "
		            "both (PTX ISA Table 39)", r->name, f->afmt, f->bfmt);
	if (r->d && !(r->d >> f->dfmt & 1))
		return fail(why, n, "%s: D type (bits 4-5) = %d is not one of the kind's accumulators",
		            r->name, f->dfmt);
	if (kind == KIND_F16 && f->dfmt == 0 && f->afmt != 0)
		return fail(why, n, "kind::f16: D type F16 (bits 4-5 = 0) with BF16 A/B (bits 7-12 = "
		            "1): an F16 accumulator takes F16 operands only (PTX ISA Table 39)");
	if (!r->negate && (f->nega || f->negb))
		return fail(why, n, "%s: negate A/B (bits 13/14) is not available for integer MMAs "
		            "(PTX ISA Table 42)", r->name);
	if (ts && f->ta)
		return fail(why, n, "%s: transpose A (bit 15) is set, but A comes from tensor memory, "
		            "which holds it K-major only (PTX ISA §9.7.16.10.3)", r->name);
	if (f->group != 1 && f->group != 2)
		return fail(why, n, "%s: .cta_group::%d: must be 1 or 2", r->name, f->group);
	unsigned mbit = f->M == 64 ? M64 : f->M == 128 ? M128 : f->M == 256 ? M256 : 0;
	if (f->group == 2) {
		if (!((M128 | M256) & mbit))
			return fail(why, n, "%s: M = %u with cta_group::2 must be 128 or 256 (PTX ISA "
			            "§9.7.16.10.1, valid shapes)", r->name, f->M);
		if (f->N < r->nstep2 || f->N > 256 || f->N % r->nstep2)
			return fail(why, n, "%s: N = %u (bits 17-22) with cta_group::2: must be %u..256 "
			            "step %u (PTX ISA §9.7.16.10.1, valid shapes)", r->name, f->N,
			            r->nstep2, r->nstep2);
		return 0;
	}
	if (!(r->m & mbit))
		return fail(why, n, "%s: M = %u with cta_group::1 must be %s%s", r->name, f->M,
		            r->m == M128 ? "128" : "64 or 128",
		            f->M == 256 ? " (M = 256 is a CTA pair's shape: cta_group::2)" : "");
	uint32_t step = f->M == 64 ? r->nstep64 : r->nstep128;
	int fine = r->nfine && f->N >= 8 && f->N <= r->nfine && f->N % 8 == 0;
	if (!fine && (f->N < step || f->N > 256 || f->N % step)) {
		if (r->nfine)
			return fail(why, n, "%s: N = %u (bits 17-22): must be 8..%u step 8 or %u..256 "
			            "step %u (PTX ISA §9.7.16.10.1, valid shapes)", r->name, f->N,
			            r->nfine, r->nfine, step);
		return fail(why, n, "%s: N = %u (bits 17-22) with M = %u: must be %u..256 step %u (PTX "
		            "ISA §9.7.16.10.1, valid shapes)", r->name, f->N, f->M, step, step);
	}
	return 0;
}
