/* The completion of a queued tcgen05 operation (EmuAsync.done of every
 * mma, cp, shift and commit): hands it to the file that models the
 * operation. Kept apart from the issuing code (tcgen05.c, tc_mma.c,
 * tc_cp.c), which only stores this function's address, so that no file
 * calls a file that calls it back. */
#include "emu.h"
#include "ops.h"
#include "tc.h"

int
emu_tc_complete(EmuCta *c, EmuAsync *q)
{
	switch (q->kind) {
	case AS_TC_MMA: return emu_tc_mma_complete(c, q);
	case AS_TC_CP: return emu_tc_cp_complete(c, q);
	case AS_TC_SHIFT: return emu_tc_shift_complete(c, q);
	default: return emu_tc_commit_complete(c, q);
	}
}

void
emu_tc_drop(EmuAsync *q)
{
	if (q->kind == AS_TC_MMA)
		emu_tc_mma_drop(q);
	else if (q->kind == AS_TC_CP)
		emu_tc_cp_drop(q);
}
