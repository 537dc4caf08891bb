/* Tensor memory (docs/hardware.md, "TMEM addressing"-docs/hardware.md,
 * "TMEM allocation"): 128 lanes x 512 columns of 32-bit cells per CTA, allocated in
 * power-of-two column counts in [32, 512] by a warp and freed by it before the kernel exits. */
#include <stdio.h>

#include "emu.h"

/* Every access must fall inside one live allocation. */
int
emu_tmem_check(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t lane0, uint32_t nlanes,
               uint32_t col0, uint32_t ncols)
{
	if (lane0 + nlanes > EMU_TMEM_LANES || col0 + ncols > EMU_TMEM_COLS)
		return emu_hazard(c, t, in, "tmem-alloc",
		                  "TMEM lanes %u..%u, columns %u..%u are outside the 128 x 512 tensor "
		                  "memory (address = lane << 16 | column)", lane0, lane0 + nlanes - 1,
		                  col0, col0 + ncols - 1);
	for (int i = 0; i < EMU_MAX_TMEM_ALLOCS; i++) {
		EmuTmemAlloc *a = &c->talloc[i];
		if (a->live && col0 >= a->col && col0 + ncols <= a->col + a->ncols)
			return 0;
	}
	char live[256] = "none";
	size_t at = 0;
	for (int i = 0; i < EMU_MAX_TMEM_ALLOCS; i++) {
		EmuTmemAlloc *a = &c->talloc[i];
		if (!a->live || at + 32 > sizeof live)
			continue;
		int w = snprintf(live + at, sizeof live - at, "%s%u..%u", at ? ", " : "", a->col,
		                 a->col + a->ncols - 1);
		if (w > 0)
			at += (size_t)w;
	}
	return emu_hazard(c, t, in, "tmem-alloc",
	                  "TMEM columns %u..%u are not inside one live tcgen05.alloc allocation "
	                  "(live: %s)", col0, col0 + ncols - 1, live);
}

int
emu_tmem_exit_check(EmuCta *c)
{
	for (int i = 0; i < EMU_MAX_TMEM_ALLOCS; i++) {
		EmuTmemAlloc *a = &c->talloc[i];
		if (!a->live)
			continue;
		char text[200];
		emu_line_text(c->prog, a->line, text, sizeof text);
		return emu_hazard(c, NULL, NULL, "tmem-alloc",
		                  "%u TMEM columns at column %u, allocated by warp %d at PTX line %d "
		                  "`%s`, were not freed with tcgen05.dealloc before the CTA exited "
		                  "(docs/hardware.md, \"TMEM addressing\")", a->ncols, a->col, a->warp, a->line,
		                  text);
	}
	return 0;
}
