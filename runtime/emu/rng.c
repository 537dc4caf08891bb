/* The CTA's deterministic random stream (KRT_EMU_SEED): schedule choices,
 * completion order, elected lanes. */
#include "emu.h"

uint64_t
emu_rand(EmuCta *c)
{
	/* xorshift64*: deterministic per seed */
	uint64_t x = c->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	c->rng = x;
	return x * UINT64_C(0x2545F4914F6CDD1D);
}
