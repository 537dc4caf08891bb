/* Shared-memory matrix descriptors and the canonical operand layouts they
 * describe (docs/hardware.md, "Shared-memory descriptor (sm_100)": PTX ISA §9.7.16.4.1 tcgen05 and
 * §9.7.15.5.1.2.2 wgmma descriptor formats, canonical layouts docs/hardware.md,
 * "Canonical layouts, LBO and SBO", swizzle functions docs/hardware.md, "Swizzle modes"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

int
emu_desc_decode(uint64_t v, int arch, EmuSmemDesc *d, char *why, size_t n)
{
	d->start = (uint32_t)(v & 0x3fff) << 4;
	d->lbo = (uint32_t)(v >> 16 & 0x3fff) << 4;
	d->sbo = (uint32_t)(v >> 32 & 0x3fff) << 4;
	d->base_offset = (int)(v >> 49 & 7);
	d->lbo_mode = (int)(v >> 52 & 1);
	d->version = (int)(v >> 46 & 7);
	if (arch == ARCH_SM90) {
		/* bits 62-63: 0 none, 1 128B, 2 64B, 3 32B (docs/hardware.md,
		 * "Shared-memory descriptor (sm_90)") */
		static const int sw[4] = {0, 128, 64, 32};
		d->layout = (int)(v >> 62);
		d->swizzle = sw[d->layout];
	} else {
		/* bits 61-63: 0 none, 1 128B_BASE32B, 2 128B, 4 64B, 6 32B
		 * (docs/hardware.md, "Shared-memory descriptor (sm_100)") */
		d->layout = (int)(v >> 61);
		if (d->version != 1) {
			snprintf(why, n, "bits 46-48 are 0b%d%d%d, tcgen05 descriptors need the fixed "
			         "constant 0b001 (docs/hardware.md, \"Shared-memory descriptor (sm_100)\")", d->version >> 2 & 1,
			         d->version >> 1 & 1, d->version & 1);
			return -1;
		}
		if (d->lbo_mode) {
			snprintf(why, n, "bit 52 (LBO mode) is 1: absolute LBO is sm_103a only");
			return -1;
		}
		if (v >> 53 & 0xff) {
			snprintf(why, n, "bits 53-60 must be 0");
			return -1;
		}
		switch (d->layout) {
		case 0: d->swizzle = 0; break;
		case 2: d->swizzle = 128; break;
		case 4: d->swizzle = 64; break;
		case 6: d->swizzle = 32; break;
		case 1:
			snprintf(why, n, "layout 1 (128B swizzle with 32B atoms) is not supported by the "
			         "emulator");
			return -1;
		default:
			snprintf(why, n, "layout/swizzle code %d is invalid (3, 5, 7)", d->layout);
			return -1;
		}
	}
	if (d->base_offset) {
		snprintf(why, n, "base offset %d: the emulator models base_offset 0 only (tiles aligned "
		         "to the swizzle period, docs/hardware.md, \"Base offset and alignment\")", d->base_offset);
		return -1;
	}
	return 0;
}

uint32_t
emu_swizzle(uint32_t a, int sw)
{
	switch (sw) {
	case 128: return a ^ ((a >> 7 & 7) << 4);
	case 64: return a ^ ((a >> 7 & 3) << 4);
	case 32: return a ^ ((a >> 7 & 1) << 4);
	default: return a;
	}
}

/* Canonical layouts in bytes (docs/hardware.md, "Canonical layouts, LBO and SBO"). T =
 * 16/ebytes elements per 16 bytes; W = swizzle width in bytes.
 *   K-major, none: core matrices of 8 rows x 16 B; rows 16 B apart, SBO
 *     between 8-row groups, LBO between K core-matrix columns.
 *   K-major, W: rows W bytes apart inside an 8-row atom, SBO between atoms,
 *     K contiguous (LBO unused).
 *   MN-major, none: 16 B of MN contiguous, K rows 16 B apart, SBO between
 *     MN core matrices, LBO between 8-row K groups.
 *   MN-major, W: W bytes of MN contiguous, K rows W apart, LBO between MN
 *     atoms, SBO between 8-row K groups.
 * The swizzle XOR applies to the absolute address. */
uint32_t
emu_desc_addr(const EmuSmemDesc *d, int kmajor, int eb, uint32_t mn, uint32_t k)
{
	uint32_t off;
	uint32_t T = 16u / (uint32_t)eb;
	uint32_t W = (uint32_t)d->swizzle;
	if (!W) {
		if (kmajor)
			off = mn % 8 * 16 + mn / 8 * d->sbo + k % T * (uint32_t)eb + k / T * d->lbo;
		else
			off = mn % T * (uint32_t)eb + mn / T * d->sbo + k % 8 * 16 + k / 8 * d->lbo;
	} else {
		if (kmajor) {
			off = mn % 8 * W + mn / 8 * d->sbo + k * (uint32_t)eb;
		} else {
			uint32_t per = W / (uint32_t)eb;
			off = mn % per * (uint32_t)eb + mn / per * d->lbo + k % 8 * W + k / 8 * d->sbo;
		}
	}
	return emu_swizzle(d->start + off, d->swizzle);
}

int
emu_desc_aligned(const EmuSmemDesc *d)
{
	if (!d->swizzle)
		return 0;
	uint32_t period = (uint32_t)d->swizzle * 8;
	/* inside the period only the K offset of a K-major atom row may move
	 * the start (+32 B per MMA, docs/hardware.md, "Advancing along K"): the row
	 * bits must be zero */
	return (d->start & (period - 1)) >= (uint32_t)d->swizzle ? -1 : 0;
}

/* Elements along the contiguous dimension (K for K-major, MN otherwise)
 * share a 16-byte chunk in groups of 16/eb starting at multiples of 16/eb,
 * in every layout above: address one element per chunk. */
int
emu_desc_chunks(EmuCta *c, const EmuSmemDesc *d, int kmajor, int eb, uint32_t mn0,
                uint32_t nmn, uint32_t nk, uint32_t **list, int *n, int *cap, uint32_t *bad)
{
	uint32_t T = 16u / (uint32_t)eb;
	uint32_t smn = kmajor ? 1 : T, sk = kmajor ? T : 1;
	for (uint32_t mn = mn0; mn < mn0 + nmn; mn += smn)
		for (uint32_t k = 0; k < nk; k += sk) {
			uint32_t a = emu_desc_addr(d, kmajor, eb, mn, k);
			if (a < c->smem_lo || a + 16 > c->smem_end) {
				*bad = a;
				return -1;
			}
			uint32_t ch = a >> 4;
			if (c->sstamp[ch] == c->stamp)
				continue;
			c->sstamp[ch] = c->stamp;
			if (*n == *cap) {
				int nc = *cap ? *cap * 2 : 256;
				uint32_t *nl = realloc(*list, (size_t)nc * sizeof *nl);
				if (!nl) {
					*bad = UINT32_MAX;
					return -1;
				}
				*list = nl;
				*cap = nc;
			}
			(*list)[(*n)++] = ch;
		}
	return 0;
}

static float
elem(const EmuCta *c, uint32_t a, EmuType ty, int eb)
{
	uint32_t v = 0;
	if (ty == T_BF16) { /* the common case, without the type dispatch */
		uint16_t h;
		memcpy(&h, c->smem + a, 2);
		v = (uint32_t)h << 16;
		float f;
		memcpy(&f, &v, 4);
		return f;
	}
	memcpy(&v, c->smem + a, (size_t)eb);
	if (ty == T_U8)
		return (float)(uint8_t)v;
	if (ty == T_S8)
		return (float)(int8_t)v;
	return emu_to_f32(v, ty);
}

/* out[mn][k] = scale * element (mn0 + mn, k); one address computation per
 * 16-byte run (see emu_desc_chunks). MN-major needs mn0 % (16/eb) == 0. */
void
emu_desc_gather(const EmuCta *c, const EmuSmemDesc *d, int kmajor, EmuType ty, int eb,
                uint32_t mn0, uint32_t nmn, uint32_t nk, float scale, float *out)
{
	uint32_t T = 16u / (uint32_t)eb;
	if (kmajor) {
		for (uint32_t mn = 0; mn < nmn; mn++)
			for (uint32_t k = 0; k < nk; k += T) {
				uint32_t base = emu_desc_addr(d, 1, eb, mn0 + mn, k);
				for (uint32_t j = 0; j < T && k + j < nk; j++)
					out[mn * nk + k + j] = scale * elem(c, base + j * (uint32_t)eb, ty, eb);
			}
		return;
	}
	for (uint32_t k = 0; k < nk; k++)
		for (uint32_t mn = 0; mn < nmn; mn += T) {
			uint32_t base = emu_desc_addr(d, 0, eb, mn0 + mn, k);
			for (uint32_t j = 0; j < T && mn + j < nmn; j++)
				out[(mn + j) * nk + k] = scale * elem(c, base + j * (uint32_t)eb, ty, eb);
		}
}
