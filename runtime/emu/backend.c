/* The emulator as a libkrt backend (runtime/backend.h): device memory,
 * module load (parse and validate the PTX against its ABI header), launch
 * (build the param buffer, run the grid on the interpreter).
 *
 * Devices: ordinal 0 emulates an sm_100 (B200-class) GPU, ordinal 1 an
 * sm_90 (H100-class) one; KRT_EMU_CC=90|100 sets what ordinal 0 is.
 * Environment, read at each launch:
 *   KRT_EMU_SEED=N          random legal completion order / scheduling, 0 off
 *   KRT_EMU_SMEM_BASE=A     shared-window address of the first shared
 *                           variable (default 0x400: the sm_90 reserved KiB)
 *   KRT_EMU_SMEM_MISALIGN=B bytes added to the dynamic array's address
 *                           (default 16: only 16-byte alignment is promised,
 *                           docs/hardware.md, "Base offset and alignment")
 *   KRT_EMU_MAX_STEPS=N     instruction limit per CTA (default 2e9)
 *   KRT_EMU_MAX_THREADS=N   blocks x threads of one launch (default 2^21),
 *                           refused before anything is allocated
 *   KRT_EMU_MAX_LAUNCH_STEPS=N instructions of all CTAs of one launch
 *                           (default 2^32), the launch stopped past it
 *   KRT_EMU_MAX_MEM=BYTES   emulated device memory in all (default 2 GiB),
 *                           an allocation beyond it refused before it is made
 *   KRT_EMU_TRACE=T         print each instruction thread T of CTA 0 executes */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "emu.h"

enum { SMEM_OPTIN = 232448 }; /* 227 KiB per block on sm_90 and sm_100 */

static EmuDev *
dev_of(const KrtDevice *d)
{
	return d->impl;
}

/* A number from the environment, read like every number people type
 * (gen/numarg.h): decimal or 0x hex, a leading 0 still decimal, nothing
 * after it. */
static int
env_u64(const char *name, uint64_t def, uint64_t *out, KrtErr *err)
{
	const char *s = getenv(name);
	*out = def;
	if (!s || !*s)
		return 0;
	const char *d = s;
	int base = 10;
	if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
		base = 16;
		d += 2;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(d, &end, base);
	if (errno || end == d || *end || !(base == 16 ? isxdigit((unsigned char)*d) : isdigit((unsigned char)*d)))
		return krt_errf(err, KRT_EINVAL, "emu: %s=%s: must be an integer in 0..2^64-1 "
		                "(decimal or 0x hex)", name, s);
	*out = v;
	return 0;
}

static int
emu_open(KrtDevice *d, int ordinal, KrtErr *err)
{
	uint64_t cc0;
	if (env_u64("KRT_EMU_CC", 100, &cc0, err))
		return err->code;
	if (cc0 != 90 && cc0 != 100)
		return krt_errf(err, KRT_EINVAL, "emu: KRT_EMU_CC=%" PRIu64 ": the emulator models "
		                "sm_90 (90) and sm_100 (100)", cc0);
	if (ordinal > 1)
		return krt_errf(err, KRT_ENODEV, "emu: device %d: the emulator has devices 0 (sm_%d) and "
		                "1 (sm_90)", ordinal, (int)cc0);
	EmuDev *e = calloc(1, sizeof *e);
	if (!e)
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory");
	d->impl = e;
	d->cc = ordinal == 1 ? 90 : (int)cc0;
	/* without KRT_EMU_CC a module runs as its own target (any_target below),
	 * so the name promises no particular GPU */
	if (getenv("KRT_EMU_CC") || ordinal == 1)
		snprintf(d->name, sizeof d->name, "emulated %s (CPU interpreter, sm_%d)",
		         d->cc == 100 ? "B200" : "H100", d->cc);
	else
		snprintf(d->name, sizeof d->name, "CPU emulator (each kernel as its own target)");
	d->ptx_isa = 92;
	/* kcheck, quickstart and the tests open "emu" without knowing the
	 * target: accept both; the module's own target selects the semantics */
	d->any_target = getenv("KRT_EMU_CC") == NULL;
	d->driver_version = 0;
	d->smem_optin = SMEM_OPTIN;
	return KRT_OK;
}

static void
emu_close(KrtDevice *d)
{
	EmuDev *e = dev_of(d);
	if (!e)
		return;
	emu_mem_release(e);
	free(e);
	d->impl = NULL;
}

/* The limits of what one emulator takes on (runtime/emu/README.md, "Limits"):
 * past them a run would take hours or more host memory than a test machine
 * has, so it is refused up front with the limit and its variable named. */
enum {
	MAX_THREADS_DEFAULT = 1 << 21,
};
#define MAX_MEM_DEFAULT (UINT64_C(2) << 30)
#define MAX_LAUNCH_STEPS_DEFAULT (UINT64_C(1) << 32)

static int
emu_alloc(KrtDevice *d, size_t bytes, KrtPtr *out, KrtErr *err)
{
	EmuDev *e = dev_of(d);
	uint64_t limit, used = 0;
	if (env_u64("KRT_EMU_MAX_MEM", MAX_MEM_DEFAULT, &limit, err))
		return err->code;
	for (int i = 0; i < e->n; i++)
		used += e->a[i].size;
	if (bytes > limit || used > limit - bytes)
		return krt_errf(err, KRT_ERESOURCE, "emu: allocating %zu bytes (%" PRIu64 " already "
		                "allocated) exceeds the emulator's memory limit of %" PRIu64 " bytes "
		                "(KRT_EMU_MAX_MEM; runtime/emu/README.md): emulate a smaller shape",
		                bytes, used, limit);
	return emu_mem_alloc(e, bytes, out, err);
}

static int
emu_free(KrtDevice *d, KrtPtr p, KrtErr *err)
{
	return emu_mem_free(dev_of(d), p, err);
}

static uint8_t *
span(KrtDevice *d, KrtPtr p, size_t bytes, const char *what, KrtErr *err)
{
	uint8_t *h = emu_mem_at(dev_of(d), p, bytes);
	if (!h) {
		char why[256];
		emu_mem_explain(dev_of(d), p, bytes, why, sizeof why);
		krt_errf(err, KRT_EINVAL, "emu: %s of %zu bytes: %s", what, bytes, why);
	}
	return h;
}

static int
emu_upload(KrtDevice *d, KrtPtr dst, const void *src, size_t bytes, KrtErr *err)
{
	uint8_t *h = span(d, dst, bytes, "krt_upload", err);
	if (!h)
		return err->code;
	memcpy(h, src, bytes);
	return KRT_OK;
}

static int
emu_download(KrtDevice *d, void *dst, KrtPtr src, size_t bytes, KrtErr *err)
{
	uint8_t *h = span(d, src, bytes, "krt_download", err);
	if (!h)
		return err->code;
	memcpy(dst, h, bytes);
	return KRT_OK;
}

static int
emu_memset8(KrtDevice *d, KrtPtr dst, uint8_t v, size_t bytes, KrtErr *err)
{
	uint8_t *h = span(d, dst, bytes, "krt_memset8", err);
	if (!h)
		return err->code;
	memset(h, v, bytes);
	return KRT_OK;
}

static int
emu_sync(KrtDevice *d, KrtErr *err)
{
	(void)d;
	(void)err;
	return KRT_OK; /* launches run to completion */
}

/* ---- modules ------------------------------------------------------------------ */

/* The .entry params against the ABI header: count, order and kinds. */
static int
check_params(KrtModule *m, const EmuProgram *p, KrtErr *err)
{
	const KrtAbi *a = &m->abi;
	if (strcmp(p->entry, a->kernel) != 0)
		return krt_errf(err, KRT_EABI, "emu: the .entry is %s, the ABI header says %s", p->entry,
		                a->kernel);
	if (p->nparams != a->nparams)
		return krt_errf(err, KRT_EABI, "emu: kernel %s: .entry has %d params, the ABI header %d",
		                a->kernel, p->nparams, a->nparams);
	for (int i = 0; i < p->nparams; i++) {
		const EmuSym *s = &p->sym[p->param_sym[i]];
		const KrtAbiParam *ap = &a->params[i];
		int ok;
		switch (ap->kind) {
		case KRT_ARG_TMAP: ok = s->size == 128 && s->align >= 64; break;
		case KRT_ARG_PTR:
		case KRT_ARG_U64: ok = s->size == 8 && s->type != T_F64; break;
		case KRT_ARG_F32: ok = s->size == 4 && (s->type == T_F32 || s->type == T_B32); break;
		default: ok = s->size == 4 && s->type != T_F32; break;
		}
		if (!ok)
			return krt_errf(err, KRT_EABI, "emu: kernel %s: param %d (%s, .%s, %u bytes) does not "
			                "fit the ABI's %s %s", a->kernel, i, s->name, emu_types[s->type].name,
			                s->size, krt_arg_kind_name(ap->kind), ap->name);
	}
	return KRT_OK;
}

/* Instructions of the other architecture are load errors, as for ptxas
 * (docs/hardware.md, "Targets and PTX versions": no wgmma on sm_100a; tcgen05 needs sm_100a). */
static int
check_arch(KrtModule *m, const EmuProgram *p, KrtErr *err)
{
	for (int i = 0; i < p->ninsn; i++) {
		const char *n = p->insn[i].def->name;
		const char *bad = NULL;
		if (p->target_cc < 100 && strncmp(n, "tcgen05", 7) == 0)
			bad = "tcgen05 needs sm_100a";
		if (p->target_cc >= 100 && strncmp(n, "wgmma", 5) == 0)
			bad = "wgmma does not exist on sm_100a";
		if (p->target_cc < 90 && (strncmp(n, "wgmma", 5) == 0 || strncmp(n, "cp.async.bulk", 13) == 0 ||
		                          strncmp(n, "mbarrier", 8) == 0))
			bad = "needs sm_90 or later";
		if (bad) {
			char text[200];
			emu_line_text(p, p->insn[i].line, text, sizeof text);
			return krt_errf(err, KRT_ELOAD, "emu: kernel %s (.target sm_%d): PTX line %d `%s`: %s",
			                m->abi.kernel, p->target_cc, p->insn[i].line, text, bad);
		}
	}
	return KRT_OK;
}

static int
emu_module_load(KrtModule *m, const char *ptx, size_t len, KrtErr *err)
{
	EmuProgram *p;
	int rc = emu_parse(ptx, len, &p, err);
	if (rc)
		return krt_err_prefix(err, "kernel %s: ", m->abi.kernel);
	if ((rc = check_params(m, p, err)) || (rc = check_arch(m, p, err))) {
		emu_program_free(p);
		return rc;
	}
	m->impl = p;
	m->regs = -1;
	m->local_bytes = 0;
	m->static_smem = (int)p->static_smem;
	char log[256];
	snprintf(log, sizeof log, "emu: %s: %d instructions, %d registers per thread, %u bytes of "
	         "params, %u bytes of static smem\n", p->entry, p->ninsn, p->nregs, p->param_bytes,
	         p->static_smem);
	m->jit_log = strdup(log);
	return KRT_OK;
}

static void
emu_module_unload(KrtModule *m)
{
	emu_program_free(m->impl);
	m->impl = NULL;
}

/* ---- launches ---------------------------------------------------------------------- */

static int
params(const EmuProgram *p, const KrtLaunch *l, uint8_t *buf)
{
	for (int i = 0; i < l->nargs && i < p->nparams; i++) {
		const EmuSym *s = &p->sym[p->param_sym[i]];
		uint8_t *at = buf + s->addr;
		const KrtArg *a = &l->args[i];
		switch (a->kind) {
		case KRT_ARG_TMAP: {
			/* opaque to the kernel; TMA finds KrtTmapArgs by the param */
			const KrtTmapArgs *t = &l->tmaps[i];
			memset(at, 0, 128);
			memcpy(at, "KRTEMUTM", 8);
			memcpy(at + 8, &t->address, 8);
			break;
		}
		case KRT_ARG_PTR: memcpy(at, &a->v.p, 8); break;
		case KRT_ARG_U32: memcpy(at, &a->v.u32, 4); break;
		case KRT_ARG_S32: memcpy(at, &a->v.s32, 4); break;
		case KRT_ARG_U64: memcpy(at, &a->v.u64, 8); break;
		case KRT_ARG_F32: memcpy(at, &a->v.f32, 4); break;
		}
	}
	return 0;
}

static int
launch(KrtModule *m, const KrtLaunch *l, KrtErr *err)
{
	const EmuProgram *p = m->impl;
	EmuLaunchCtx lc;
	memset(&lc, 0, sizeof lc);
	uint64_t seed, seeds, base, mis, steps, trace, max_threads, launch_steps, coresident;
	if (env_u64("KRT_EMU_SEED", 0, &seed, err) || env_u64("KRT_EMU_SEEDS", 1, &seeds, err) ||
	     env_u64("KRT_EMU_SMEM_BASE", 0x400, &base, err) ||
	    env_u64("KRT_EMU_TRACE", UINT64_MAX, &trace, err) ||
	    env_u64("KRT_EMU_SMEM_MISALIGN", 16, &mis, err) ||
	    env_u64("KRT_EMU_MAX_STEPS", UINT64_C(2000000000), &steps, err) ||
	    env_u64("KRT_EMU_MAX_THREADS", MAX_THREADS_DEFAULT, &max_threads, err) ||
	    env_u64("KRT_EMU_MAX_LAUNCH_STEPS", MAX_LAUNCH_STEPS_DEFAULT, &launch_steps, err) ||
	    env_u64("KRT_EMU_CORESIDENT", 1, &coresident, err))
		return err->code;
	uint64_t threads = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2] *
	                   ((uint64_t)l->block[0] * l->block[1] * l->block[2]);
	if (threads > max_threads)
		return krt_errf(err, KRT_ERESOURCE, "emu: kernel %s: grid (%u,%u,%u) x block (%u,%u,%u) "
		                "= %" PRIu64 " threads exceeds the emulator's limit of %" PRIu64 " per "
		                "launch (KRT_EMU_MAX_THREADS; runtime/emu/README.md): emulate a smaller "
		                "shape", p->entry, l->grid[0], l->grid[1], l->grid[2], l->block[0],
		                l->block[1], l->block[2], threads, max_threads);
	if ((uint64_t)l->smem + p->static_smem > SMEM_OPTIN)
		return krt_errf(err, KRT_ECUDA, "emu: kernel %s: %u bytes of dynamic + %u of static shared "
		                "memory exceed the %d bytes a block may use", p->entry, l->smem,
		                p->static_smem, SMEM_OPTIN);
	if (base < 16 || base % 16 || mis % 16 || base + mis + l->smem + p->static_smem + 1024 > 0x40000)
		return krt_errf(err, KRT_EINVAL, "emu: KRT_EMU_SMEM_BASE=0x%" PRIx64 " / MISALIGN=%" PRIu64
		                " must be multiples of 16 and keep shared memory below 256 KiB", base, mis);
	lc.dev = dev_of(m->dev);
	lc.prog = p;
	lc.abi = &m->abi;
	lc.l = l;
	/* one emulated device runs the PTX of either target, as that target */
	lc.cc = m->dev->any_target ? m->abi.target_cc : m->dev->cc;
	lc.seed = seed;
	lc.smem_base = (uint32_t)base;
	lc.smem_misalign = (uint32_t)mis;
	lc.max_steps = steps;
	lc.max_launch_steps = launch_steps;
	if (coresident < 1 || coresident > EMU_MAX_CLUSTER)
		return krt_errf(err, KRT_EINVAL, "emu: KRT_EMU_CORESIDENT=%" PRIu64 ": CTAs run "
		                "interleaved per group of 1..%d", coresident, EMU_MAX_CLUSTER);
	lc.coresident = (uint32_t)coresident;
	lc.trace = trace == UINT64_MAX ? 0 : (int)trace + 1;
	lc.params = calloc(1, p->param_bytes + 16);
	if (!lc.params)
		return krt_errf(err, KRT_ENOMEM, "emu: out of host memory");
	params(p, l, lc.params);
	int rc = emu_run_seeds(&lc, seeds, err);
	free(lc.params);
	if (rc && !strstr(err->msg, "grid ("))
		krt_err_append(err, " [launch grid (%u,%u,%u) block (%u,%u,%u) dynamic smem %u%s%s]",
		               l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
		               l->smem, seed ? ", KRT_EMU_SEED=" : "", seed ? getenv("KRT_EMU_SEED") : "");
	return rc;
}

static int
emu_launch(KrtModule *m, const KrtLaunch *l, void *stream, KrtErr *err)
{
	(void)stream;
	return launch(m, l, err);
}

/* Wall-clock time of each emulated launch: the interpreter's speed, not a
 * GPU's. */
static int
emu_time(KrtModule *m, const KrtLaunch *l, int warmup, int iters, float *ms, KrtErr *err)
{
	for (int i = 0; i < warmup; i++)
		if (launch(m, l, err))
			return err->code;
	for (int i = 0; i < iters; i++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (launch(m, l, err))
			return err->code;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms[i] = (float)((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	}
	return KRT_OK;
}

const KrtBackend krt_emu_backend = {
	.kind = "emu",
	.open = emu_open,
	.close = emu_close,
	.alloc = emu_alloc,
	.free = emu_free,
	.upload = emu_upload,
	.download = emu_download,
	.memset8 = emu_memset8,
	.sync = emu_sync,
	.module_load = emu_module_load,
	.module_unload = emu_module_unload,
	.launch = emu_launch,
	.time = emu_time,
};
