/* The public API of libkrt (krt.h): device selection, and the
 * device-independent half of module load and launch (ABI, target and
 * version checks, argument and tensor-map validation, grid evaluation).
 * Backends (backend.h) do the rest. Nothing here exits. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "internal.h"
#include "krt.h"

/* ---- launch arguments ----------------------------------------------------- */

/* "A:tmap B:tmap C:ptr M:u32", the signature for count mismatches. */
static void
signature(const KrtAbi *abi, char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = 0;
	for (int i = 0; i < abi->nparams; i++) {
		int w = snprintf(buf + at, n - at, "%s%s:%s", i ? " " : "", abi->params[i].name,
		                 krt_arg_kind_name(abi->params[i].kind));
		if (w < 0 || (size_t)w >= n - at)
			break;
		at += (size_t)w;
	}
}

int
krt_args_check(const KrtAbi *abi, const KrtArg *args, int nargs, KrtTmapArgs *tm, KrtErr *err)
{
	if (nargs != abi->nparams || (nargs > 0 && !args)) {
		char sig[1024];
		signature(abi, sig, sizeof sig);
		return krt_errf(err, KRT_EINVAL, "kernel %s takes %d args (%s), the caller gave %d%s",
		                abi->kernel, abi->nparams, sig, nargs,
		                nargs > 0 && !args ? " with args = NULL" : "");
	}
	for (int i = 0; i < nargs; i++) {
		const KrtAbiParam *p = &abi->params[i];
		const KrtArg *a = &args[i];
		if (a->kind != p->kind) {
			char detail[160] = "";
			if (p->kind == KRT_ARG_TMAP || p->kind == KRT_ARG_PTR)
				snprintf(detail, sizeof detail, " (dtype=%s tensor=%s)", p->dtype, p->tensor);
			char given[32];
			if (strcmp(krt_arg_kind_name(a->kind), "?"))
				snprintf(given, sizeof given, "%s", krt_arg_kind_name(a->kind));
			else
				snprintf(given, sizeof given, "%d (not a KrtArgKind)", (int)a->kind);
			return krt_errf(err, KRT_EINVAL,
			                "kernel %s: arg %d (%s): expected kind %s%s, given kind %s",
			                abi->kernel, i, p->name, krt_arg_kind_name(p->kind), detail, given);
		}
		/* a ptr's address: a multiple of its align=N, else of its element
		 * size (docs/ABI.md: param kinds) */
		if (a->kind == KRT_ARG_PTR) {
			int al = p->align ? p->align : p->elem_bytes;
			if (al > 1 && a->v.p % (uint64_t)al)
				return krt_errf(err, KRT_EINVAL,
				                "kernel %s: arg %d (%s): address 0x%llx is not %d-byte aligned (%s)",
				                abi->kernel, i, p->name, (unsigned long long)a->v.p, al,
				                p->align ? "align= in its //@param line: the kernel moves it in vectors of that size"
				                         : "its dtype's element size");
		}
		if (a->kind == KRT_ARG_TMAP) {
			KrtTmapArgs scratch;
			if (krt_tmap_prepare(abi, i, &a->v.t, tm ? &tm[i] : &scratch, err))
				return krt_err_prefix(err, "kernel %s: ", abi->kernel);
		}
	}
	return krt_shape_check(abi, args, nargs, err);
}

/* ---- devices ------------------------------------------------------------- */

/* Backends by name; `missing` says why one is not there. */
static const struct {
	const char *kind;
	const KrtBackend *be;
	const char *missing;
} backends[] = {
	{"cuda", &krt_cuda_backend, NULL},
#ifdef KRT_HAVE_EMU
	{"emu", &krt_emu_backend, NULL},
#else
	{"emu", NULL, "the emulator backend is not built yet"},
#endif
};

static int
open_kind(KrtDevice **out, const char *kind, int ordinal, KrtErr *err)
{
	size_t i = 0, n = sizeof backends / sizeof backends[0];
	while (i < n && strcmp(backends[i].kind, kind) != 0)
		i++;
	if (i == n)
		return krt_errf(err, KRT_EINVAL, "device '%s': expected cuda, emu or auto", kind);
	if (!backends[i].be)
		return krt_errf(err, KRT_ENODEV, "device=%s: %s", kind, backends[i].missing);
	KrtDevice *d = calloc(1, sizeof *d);
	if (!d)
		return krt_errf(err, KRT_ENOMEM, "device=%s: out of host memory", kind);
	d->be = backends[i].be;
	d->ordinal = ordinal;
	int rc = d->be->open(d, ordinal, err);
	if (rc) {
		free(d);
		return rc;
	}
	*out = d;
	return KRT_OK;
}

int
krt_device_open(KrtDevice **out, const char *kind, int ordinal, KrtErr *err)
{
	KrtErr scratch;
	if (!err)
		err = &scratch;
	krt_err_clear(err);
	if (!out)
		return krt_errf(err, KRT_EINVAL, "krt_device_open: out is NULL");
	*out = NULL;
	if (ordinal < 0)
		return krt_errf(err, KRT_EINVAL, "krt_device_open: ordinal %d is negative", ordinal);
	if (kind && strcmp(kind, "auto") != 0)
		return open_kind(out, kind, ordinal, err);
	const char *env = getenv("KRT_DEVICE");
	if (env && *env && strcmp(env, "auto") != 0) {
		if (open_kind(out, env, ordinal, err))
			return krt_err_prefix(err, "KRT_DEVICE=%s: ", env);
		return KRT_OK;
	}
	char why[512];
	if (krt_cuda_probe(why, sizeof why) > 0)
		return open_kind(out, "cuda", ordinal, err);
	int rc = open_kind(out, "emu", ordinal, err);
	if (rc == KRT_ENODEV) {
		char emu[sizeof err->msg / 2];
		snprintf(emu, sizeof emu, "%.*s", (int)sizeof emu - 1, err->msg);
		return krt_errf(err, KRT_ENODEV,
		                "no GPU found (%s) and the emulator is not available (%s)", why, emu);
	}
	return rc;
}

void
krt_device_close(KrtDevice *dev)
{
	if (!dev)
		return;
	dev->be->close(dev);
	free(dev);
}

const char *
krt_device_kind(const KrtDevice *dev)
{
	return dev ? dev->be->kind : "";
}

const char *
krt_device_name(const KrtDevice *dev)
{
	return dev ? dev->name : "";
}

int
krt_device_cc(const KrtDevice *dev)
{
	return dev ? dev->cc : 0;
}

int
krt_gpu_present(void)
{
	char why[512];
	return krt_cuda_probe(why, sizeof why) > 0;
}

/* ---- memory --------------------------------------------------------------- */

/* Common entry of the calls below: a scratch KrtErr when the caller gave
 * none, and a device. */
#define ENTER(fn)                                                                    \
	KrtErr scratch_;                                                                 \
	if (!err)                                                                        \
		err = &scratch_;                                                             \
	krt_err_clear(err);                                                              \
	if (!dev)                                                                        \
		return krt_errf(err, KRT_EINVAL, fn ": device is NULL")

int
krt_alloc(KrtDevice *dev, size_t bytes, KrtPtr *out, KrtErr *err)
{
	if (out)
		*out = 0;
	ENTER("krt_alloc");
	if (!out)
		return krt_errf(err, KRT_EINVAL, "krt_alloc: out is NULL");
	if (bytes == 0)
		return krt_errf(err, KRT_EINVAL, "krt_alloc: 0 bytes");
	return dev->be->alloc(dev, bytes, out, err);
}

int
krt_free(KrtDevice *dev, KrtPtr p, KrtErr *err)
{
	ENTER("krt_free");
	if (!p)
		return KRT_OK;
	return dev->be->free(dev, p, err);
}

int
krt_upload(KrtDevice *dev, KrtPtr dst, const void *src, size_t bytes, KrtErr *err)
{
	ENTER("krt_upload");
	if (bytes == 0)
		return KRT_OK;
	if (!src || !dst)
		return krt_errf(err, KRT_EINVAL, "krt_upload: %s is NULL", src ? "dst" : "src");
	return dev->be->upload(dev, dst, src, bytes, err);
}

int
krt_download(KrtDevice *dev, void *dst, KrtPtr src, size_t bytes, KrtErr *err)
{
	ENTER("krt_download");
	if (bytes == 0)
		return KRT_OK;
	if (!src || !dst)
		return krt_errf(err, KRT_EINVAL, "krt_download: %s is NULL", src ? "dst" : "src");
	return dev->be->download(dev, dst, src, bytes, err);
}

int
krt_memset8(KrtDevice *dev, KrtPtr dst, uint8_t v, size_t bytes, KrtErr *err)
{
	ENTER("krt_memset8");
	if (bytes == 0)
		return KRT_OK;
	if (!dst)
		return krt_errf(err, KRT_EINVAL, "krt_memset8: dst is NULL");
	return dev->be->memset8(dev, dst, v, bytes, err);
}

int
krt_sync(KrtDevice *dev, KrtErr *err)
{
	ENTER("krt_sync");
	return dev->be->sync(dev, err);
}

/* ---- modules --------------------------------------------------------------- */

int
krt_module_load(KrtDevice *dev, const char *ptx, size_t len, KrtModule **out, KrtErr *err)
{
	if (out)
		*out = NULL;
	ENTER("krt_module_load");
	if (!out)
		return krt_errf(err, KRT_EINVAL, "krt_module_load: out is NULL");
	if (!ptx)
		return krt_errf(err, KRT_EINVAL, "krt_module_load: ptx is NULL");
	if (len > 0 && ptx[len - 1] == 0)
		len--; /* callers may count the terminating NUL */
	if (len == 0)
		return krt_errf(err, KRT_EINVAL, "krt_module_load: the PTX is empty");
	const char *nul = memchr(ptx, 0, len);
	if (nul)
		return krt_errf(err, KRT_EINVAL, "krt_module_load: NUL byte at offset %zu of the PTX",
		                (size_t)(nul - ptx));
	KrtModule *m = calloc(1, sizeof *m);
	char *text = malloc(len + 1);
	if (!m || !text) {
		free(m);
		free(text);
		return krt_errf(err, KRT_ENOMEM, "krt_module_load: out of host memory");
	}
	m->dev = dev;
	m->regs = m->local_bytes = m->static_smem = m->ctas_per_sm = -1;
	/* Everything that can be refused without the driver is refused before
	 * the JIT runs: a mismatch then reads as one, not as a JIT error. */
	int rc = krt_abi_parse(ptx, len, &m->abi, err);
	if (!rc)
		rc = krt_ptx_check_body(&m->abi, ptx, len, err);
	if (!rc && !dev->any_target)
		rc = krt_target_check(&m->abi, dev->cc, dev->name, err);
	if (!rc)
		rc = krt_ptx_version_check(&m->abi, dev->ptx_isa, dev->driver_version, err);
	if (!rc && dev->smem_optin > 0 && m->abi.smem > (uint32_t)dev->smem_optin)
		rc = krt_errf(err, KRT_ERESOURCE,
		              "kernel %s: %u bytes of dynamic shared memory (//@smem) exceed what %s "
		              "allows one block (%d)",
		              m->abi.kernel, m->abi.smem, dev->name, dev->smem_optin);
	if (!rc) {
		memcpy(text, ptx, len);
		text[len] = 0;
		rc = dev->be->module_load(m, text, len, err);
	}
	free(text);
	if (!rc && !m->jit_log && !(m->jit_log = calloc(1, 1))) {
		dev->be->module_unload(m);
		rc = krt_errf(err, KRT_ENOMEM, "krt_module_load: out of host memory");
	}
	if (rc) {
		free(m);
		return rc;
	}
	*out = m;
	return KRT_OK;
}

void
krt_module_unload(KrtModule *m)
{
	if (!m)
		return;
	m->dev->be->module_unload(m);
	free(m->jit_log);
	free(m);
}

const KrtAbi *
krt_module_abi(const KrtModule *m)
{
	return m ? &m->abi : NULL;
}

int
krt_module_resources(const KrtModule *m, int *regs, int *local_bytes, int *static_smem)
{
	if (regs)
		*regs = m ? m->regs : -1;
	if (local_bytes)
		*local_bytes = m ? m->local_bytes : -1;
	if (static_smem)
		*static_smem = m ? m->static_smem : -1;
	return m ? KRT_OK : KRT_EINVAL;
}

int
krt_module_ctas_per_sm(const KrtModule *m)
{
	return m ? m->ctas_per_sm : -1;
}

const char *
krt_module_jit_log(const KrtModule *m)
{
	return m && m->jit_log ? m->jit_log : "";
}

/* ---- launches ---------------------------------------------------------------- */

/* Arguments, tensor maps, grid and cluster for one launch. */
static int
prepare(KrtModule *m, const KrtArg *args, int nargs, KrtTmapArgs *tm, KrtLaunch *l,
        KrtErr *err)
{
	const KrtAbi *a = &m->abi;
	if (krt_args_check(a, args, nargs, tm, err) || krt_grid_eval(a, args, l->grid, err))
		return err->code;
	l->args = args;
	l->tmaps = tm;
	l->nargs = nargs;
	l->block[0] = (uint32_t)a->threads;
	l->block[1] = l->block[2] = 1;
	l->smem = a->smem;
	for (int i = 0; i < 3; i++) {
		l->cluster[i] = (uint32_t)a->cluster[i];
		/* The driver's grid counts CTAs; it must tile into whole clusters
		 * (docs/hardware.md, "Limits and peak rates"). */
		if (l->grid[i] % l->cluster[i])
			return krt_errf(err, KRT_EINVAL,
			                "kernel %s: grid %c = %s = %u is not a multiple of the cluster "
			                "dimension %u",
			                a->kernel, "xyz"[i], a->grid[i], l->grid[i], l->cluster[i]);
	}
	return KRT_OK;
}

int
krt_launch(KrtModule *m, const KrtArg *args, int nargs, void *stream, KrtErr *err)
{
	KrtErr scratch;
	if (!err)
		err = &scratch;
	krt_err_clear(err);
	if (!m)
		return krt_errf(err, KRT_EINVAL, "krt_launch: module is NULL");
	KrtTmapArgs tm[KRT_MAX_PARAMS];
	KrtLaunch l;
	if (prepare(m, args, nargs, tm, &l, err))
		return err->code;
	return m->dev->be->launch(m, &l, stream, err);
}

int
krt_time(KrtModule *m, const KrtArg *args, int nargs, int warmup, int iters, float *ms,
         KrtErr *err)
{
	KrtErr scratch;
	if (!err)
		err = &scratch;
	krt_err_clear(err);
	if (!m)
		return krt_errf(err, KRT_EINVAL, "krt_time: module is NULL");
	if (warmup < 0 || iters < 1 || !ms)
		return krt_errf(err, KRT_EINVAL,
		                "krt_time: needs warmup >= 0 (got %d), iters >= 1 (got %d) and ms "
		                "not NULL (got %s)",
		                warmup, iters, ms ? "an array" : "NULL");
	KrtTmapArgs tm[KRT_MAX_PARAMS];
	KrtLaunch l;
	if (prepare(m, args, nargs, tm, &l, err))
		return err->code;
	return m->dev->be->time(m, &l, warmup, iters, ms, err);
}
