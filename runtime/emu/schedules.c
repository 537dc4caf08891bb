/* Schedule exploration (KRT_EMU_SEEDS=N): one launch run under N seeded
 * schedules, each from the same device memory. A race-free kernel computes
 * the same bytes under every schedule, so besides the hazard checks of each
 * run, results that differ between two schedules are reported
 * [schedule-dependent], naming the first differing address. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

/* The device memory image: every allocation, back to back. */
static size_t
image_bytes(const EmuDev *d)
{
	size_t n = 0;
	for (int i = 0; i < d->n; i++)
		n += d->a[i].size;
	return n;
}

static void
image_save(const EmuDev *d, uint8_t *img)
{
	for (int i = 0; i < d->n; i++) {
		memcpy(img, d->a[i].host, d->a[i].size);
		img += d->a[i].size;
	}
}

static void
image_load(EmuDev *d, const uint8_t *img)
{
	for (int i = 0; i < d->n; i++) {
		memcpy(d->a[i].host, img, d->a[i].size);
		img += d->a[i].size;
	}
}

/* First byte where the device memory differs from img; 0 if none. */
static int
image_diff(const EmuDev *d, const uint8_t *img, uint64_t *addr, uint8_t *was, uint8_t *is)
{
	for (int i = 0; i < d->n; i++) {
		const EmuAlloc *a = &d->a[i];
		if (memcmp(a->host, img, a->size)) {
			size_t k = 0;
			while (a->host[k] == img[k])
				k++;
			*addr = a->base + k;
			*was = img[k];
			*is = a->host[k];
			return 1;
		}
		img += a->size;
	}
	return 0;
}

int
emu_run_seeds(EmuLaunchCtx *lc, uint64_t nseeds, KrtErr *err)
{
	if (nseeds <= 1)
		return emu_run_launch(lc, err);
	if (nseeds > EMU_MAX_SEEDS)
		return krt_errf(err, KRT_EINVAL, "emu: KRT_EMU_SEEDS=%" PRIu64 ": at most %d schedules "
		                "per launch", nseeds, EMU_MAX_SEEDS);
	EmuDev *d = lc->dev;
	size_t bytes = image_bytes(d);
	if (bytes > EMU_MAX_SEED_IMAGE)
		return krt_errf(err, KRT_EINVAL, "emu: KRT_EMU_SEEDS needs two copies of the %zu bytes of "
		                "device memory; at most %d MiB are copied", bytes,
		                EMU_MAX_SEED_IMAGE >> 20);
	uint8_t *in = malloc(bytes ? bytes : 1), *out = malloc(bytes ? bytes : 1);
	if (!in || !out) {
		free(in);
		free(out);
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory for KRT_EMU_SEEDS");
	}
	image_save(d, in);
	uint64_t base = lc->seed ? lc->seed : 1;
	int rc = 0;
	for (uint64_t k = 0; k < nseeds && !rc; k++) {
		if (k)
			image_load(d, in);
		lc->seed = base + k;
		rc = emu_run_launch(lc, err);
		if (rc) {
			krt_err_append(err, " [schedule KRT_EMU_SEED=%" PRIu64 " of KRT_EMU_SEEDS=%" PRIu64 "]",
			               lc->seed, nseeds);
			break;
		}
		uint64_t at;
		uint8_t was, is;
		if (!k)
			image_save(d, out);
		else if (image_diff(d, out, &at, &was, &is))
			rc = krt_errf(err, EMU_EHAZARD, "emu hazard [schedule-dependent]: kernel %s: the "
			              "schedules KRT_EMU_SEED=%" PRIu64 " and %" PRIu64 " leave different "
			              "device memory: byte 0x%" PRIx64 " is 0x%02x after the first and "
			              "0x%02x after the second (a race the checks did not name)",
			              lc->prog->entry, base, lc->seed, at, was, is);
	}
	lc->seed = base;
	free(in);
	free(out);
	return rc;
}
