/* Device memory of the emulator: each allocation is a host buffer behind a
 * fake device address. Allocations are 256-byte aligned (as cuMemAlloc's)
 * and separated by unmapped gaps, so an access just past the end of a
 * buffer is an error rather than a read of its neighbour. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

enum { GAP = 1 << 16 };

int
emu_mem_alloc(EmuDev *d, size_t bytes, uint64_t *out, KrtErr *err)
{
	if (d->n == d->cap) {
		int nc = d->cap ? d->cap * 2 : 16;
		EmuAlloc *na = realloc(d->a, (size_t)nc * sizeof *na);
		if (!na)
			return krt_errf(err, KRT_ENOMEM, "emu: out of host memory");
		d->a = na;
		d->cap = nc;
	}
	uint8_t *host = malloc(bytes);
	if (!host)
		return krt_errf(err, KRT_ENOMEM, "emu: cannot allocate %zu bytes of host memory for a "
		                "device buffer", bytes);
	/* fresh device memory holds garbage: a pattern that is not zero */
	memset(host, 0xa5, bytes);
	if (!d->next)
		d->next = EMU_GLOBAL_BASE;
	uint64_t base = (d->next + 255) & ~UINT64_C(255);
	d->next = base + bytes + GAP;
	d->a[d->n].base = base;
	d->a[d->n].size = bytes;
	d->a[d->n].host = host;
	d->n++;
	*out = base;
	return KRT_OK;
}

static int
find(EmuDev *d, uint64_t addr)
{
	if (d->last >= 0 && d->last < d->n) {
		EmuAlloc *a = &d->a[d->last];
		if (addr >= a->base && addr - a->base < a->size)
			return d->last;
	}
	for (int i = 0; i < d->n; i++) {
		EmuAlloc *a = &d->a[i];
		if (addr >= a->base && addr - a->base < a->size) {
			d->last = i;
			return i;
		}
	}
	return -1;
}

int
emu_mem_free(EmuDev *d, uint64_t p, KrtErr *err)
{
	for (int i = 0; i < d->n; i++)
		if (d->a[i].base == p) {
			free(d->a[i].host);
			d->a[i] = d->a[--d->n];
			d->last = -1;
			return KRT_OK;
		}
	return krt_errf(err, KRT_EINVAL, "emu: krt_free(0x%" PRIx64 "): not an allocation", p);
}

uint8_t *
emu_mem_at(EmuDev *d, uint64_t addr, size_t bytes)
{
	int i = find(d, addr);
	if (i < 0)
		return NULL;
	EmuAlloc *a = &d->a[i];
	if (bytes > a->size - (addr - a->base))
		return NULL;
	return a->host + (addr - a->base);
}

void
emu_mem_explain(EmuDev *d, uint64_t addr, size_t bytes, char *buf, size_t n)
{
	int i = find(d, addr);
	if (i >= 0) {
		EmuAlloc *a = &d->a[i];
		snprintf(buf, n, "0x%" PRIx64 "+%zu runs %zu bytes past the end of the %zu-byte "
		         "allocation at 0x%" PRIx64, addr, bytes,
		         (size_t)(addr - a->base) + bytes - a->size, a->size, a->base);
		return;
	}
	/* the nearest allocation below, to say how far off it is */
	int best = -1;
	for (int k = 0; k < d->n; k++)
		if (d->a[k].base <= addr && (best < 0 || d->a[k].base > d->a[best].base))
			best = k;
	if (best >= 0)
		snprintf(buf, n, "0x%" PRIx64 " is not in any allocation (%" PRIu64 " bytes past the end "
		         "of the %zu-byte allocation at 0x%" PRIx64 ")", addr,
		         addr - d->a[best].base - d->a[best].size, d->a[best].size, d->a[best].base);
	else
		snprintf(buf, n, "0x%" PRIx64 " is not in any allocation", addr);
}

void
emu_mem_release(EmuDev *d)
{
	for (int i = 0; i < d->n; i++)
		free(d->a[i].host);
	free(d->a);
	memset(d, 0, sizeof *d);
}
