/* The "cuda" backend: the CUDA Driver API through dlopen("libcuda.so.1"), so
 * libkrt builds and its tests run where there is no driver. Every symbol is
 * resolved by the exact name cuda.h's macros map to (cuMemAlloc ->
 * cuMemAlloc_v2, ...) and typed by cudaTypedefs.h. Every CUresult is checked;
 * a failure names the call, its error name and text, and our file:line.
 * The device retains its primary context and makes it current on every
 * call, so modules, memory and events all live in that one context. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "backend.h"
#include "internal.h"
#include "krt.h"

/* type (cudaTypedefs.h), symbol, older symbol with the same signature or
 * NULL. cuEventElapsedTime_v2 appeared in CUDA 12.8. */
#define CU_FUNCS(X)                                                                  \
	X(PFN_cuGetErrorName_v6000, cuGetErrorName, NULL)                                \
	X(PFN_cuGetErrorString_v6000, cuGetErrorString, NULL)                            \
	X(PFN_cuInit_v2000, cuInit, NULL)                                                \
	X(PFN_cuDriverGetVersion_v2020, cuDriverGetVersion, NULL)                        \
	X(PFN_cuDeviceGetCount_v2000, cuDeviceGetCount, NULL)                            \
	X(PFN_cuDeviceGet_v2000, cuDeviceGet, NULL)                                      \
	X(PFN_cuDeviceGetName_v2000, cuDeviceGetName, NULL)                              \
	X(PFN_cuDeviceGetAttribute_v2000, cuDeviceGetAttribute, NULL)                    \
	X(PFN_cuDevicePrimaryCtxRetain_v7000, cuDevicePrimaryCtxRetain, NULL)            \
	X(PFN_cuDevicePrimaryCtxRelease_v11000, cuDevicePrimaryCtxRelease_v2, NULL)      \
	X(PFN_cuCtxSetCurrent_v4000, cuCtxSetCurrent, NULL)                              \
	X(PFN_cuCtxSynchronize_v2000, cuCtxSynchronize, NULL)                            \
	X(PFN_cuMemAlloc_v3020, cuMemAlloc_v2, NULL)                                     \
	X(PFN_cuMemFree_v3020, cuMemFree_v2, NULL)                                       \
	X(PFN_cuMemcpyHtoD_v3020, cuMemcpyHtoD_v2, NULL)                                 \
	X(PFN_cuMemcpyDtoH_v3020, cuMemcpyDtoH_v2, NULL)                                 \
	X(PFN_cuMemsetD8_v3020, cuMemsetD8_v2, NULL)                                     \
	X(PFN_cuModuleLoadDataEx_v2010, cuModuleLoadDataEx, NULL)                        \
	X(PFN_cuModuleUnload_v2000, cuModuleUnload, NULL)                                \
	X(PFN_cuModuleGetFunction_v2000, cuModuleGetFunction, NULL)                      \
	X(PFN_cuFuncGetAttribute_v2020, cuFuncGetAttribute, NULL)                        \
	X(PFN_cuFuncSetAttribute_v9000, cuFuncSetAttribute, NULL)                        \
	X(PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050,                          \
	  cuOccupancyMaxActiveBlocksPerMultiprocessor, NULL)                             \
	X(PFN_cuLaunchKernelEx_v11060, cuLaunchKernelEx, NULL)                           \
	X(PFN_cuTensorMapEncodeTiled_v12000, cuTensorMapEncodeTiled, NULL)              \
	X(PFN_cuEventCreate_v2000, cuEventCreate, NULL)                                  \
	X(PFN_cuEventRecord_v2000, cuEventRecord, NULL)                                  \
	X(PFN_cuEventSynchronize_v2000, cuEventSynchronize, NULL)                        \
	X(PFN_cuEventElapsedTime_v12080, cuEventElapsedTime_v2, "cuEventElapsedTime")   \
	X(PFN_cuEventDestroy_v4000, cuEventDestroy_v2, NULL)

static struct {
	int ok;         /* libcuda loaded, every symbol found, cuInit(0) done */
	char why[512];  /* if not ok: why, for people */
	void *lib;
#define X(type, name, alt) type name;
	CU_FUNCS(X)
#undef X
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void *
cu_sym(const char *name, const char *alt)
{
	void *s = dlsym(cu.lib, name);
	if (!s && alt)
		s = dlsym(cu.lib, alt);
	return s;
}

static void
cu_load(void)
{
	dlerror();
	cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu.lib) {
		const char *e = dlerror();
		snprintf(cu.why, sizeof cu.why, "%s", e ? e : "libcuda.so.1: dlopen failed");
		return;
	}
	void *s;
#define X(type, name, alt)                                                            \
	if (!(s = cu_sym(#name, alt))) {                                                 \
		snprintf(cu.why, sizeof cu.why,                                              \
		         "libcuda.so.1 has no %s: the driver is older than libkrt needs "    \
		         "(CUDA 12.0 or newer)",                                             \
		         #name);                                                             \
		return;                                                                      \
	}                                                                                \
	cu.name = (type)s;
	CU_FUNCS(X)
#undef X
	CUresult r = cu.cuInit(0);
	if (r != CUDA_SUCCESS) {
		const char *n = NULL, *t = NULL;
		if (cu.cuGetErrorName(r, &n) != CUDA_SUCCESS)
			n = NULL;
		if (cu.cuGetErrorString(r, &t) != CUDA_SUCCESS)
			t = NULL;
		snprintf(cu.why, sizeof cu.why, "libcuda.so.1: cuInit failed: %s (%s)",
		         n ? n : "?", t ? t : "?");
		return;
	}
	cu.ok = 1;
}

static int
cu_ready(void)
{
	pthread_once(&cu_once, cu_load);
	return cu.ok;
}

/* The CHECK of every driver call: 0, or a KRT code with the message. */
static int
cu_check(KrtErr *err, CUresult r, const char *call, const char *file, int line)
{
	if (r == CUDA_SUCCESS)
		return 0;
	const char *name = NULL, *text = NULL;
	if (cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
		name = "unknown CUresult";
	if (cu.cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
		text = "no description";
	return krt_errf(err, r == CUDA_ERROR_OUT_OF_MEMORY ? KRT_ENOMEM : KRT_ECUDA,
	                "%s failed: %s = %d (%s) at %s:%d", call, name, (int)r, text,
	                krt_site(file), line);
}

#define CHECK(err, fn, args) cu_check((err), cu.fn args, #fn, __FILE__, __LINE__)

int
krt_cuda_probe(char *why, size_t n)
{
	if (!cu_ready()) {
		snprintf(why, n, "%s", cu.why);
		return 0;
	}
	int count = 0;
	KrtErr e;
	if (CHECK(&e, cuDeviceGetCount, (&count))) {
		snprintf(why, n, "libcuda.so.1: %s", e.msg);
		return 0;
	}
	if (count <= 0)
		snprintf(why, n, "libcuda.so.1 loaded but cuDeviceGetCount reports no device");
	return count > 0 ? count : 0;
}

/* ---- devices ------------------------------------------------------------- */

typedef struct CuDev {
	CUdevice dev;
	CUcontext ctx;
} CuDev;

static CuDev *
cd_of(const KrtDevice *d)
{
	return d->impl;
}

static int
enter(KrtDevice *d, KrtErr *err)
{
	return CHECK(err, cuCtxSetCurrent, (cd_of(d)->ctx));
}

static int
cuda_open(KrtDevice *d, int ordinal, KrtErr *err)
{
	if (!cu_ready())
		return krt_errf(err, KRT_ENODEV, "device=cuda: no GPU: %s", cu.why);
	int n = 0, major = 0, minor = 0;
	if (CHECK(err, cuDeviceGetCount, (&n)))
		return err->code;
	if (ordinal >= n)
		return krt_errf(err, KRT_ENODEV, "device=cuda ordinal %d: this machine has %d GPU%s",
		                ordinal, n, n == 1 ? "" : "s");
	CuDev *cd = calloc(1, sizeof *cd);
	if (!cd)
		return krt_errf(err, KRT_ENOMEM, "device=cuda: out of host memory");
	if (CHECK(err, cuDeviceGet, (&cd->dev, ordinal)) ||
	    CHECK(err, cuDeviceGetName, (d->name, (int)sizeof d->name, cd->dev)) ||
	    CHECK(err, cuDeviceGetAttribute,
	          (&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, cd->dev)) ||
	    CHECK(err, cuDeviceGetAttribute,
	          (&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, cd->dev)) ||
	    CHECK(err, cuDeviceGetAttribute,
	          (&d->smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
	           cd->dev)) ||
	    CHECK(err, cuDriverGetVersion, (&d->driver_version))) {
		free(cd);
		return krt_err_prefix(err, "device=cuda ordinal %d: ", ordinal);
	}
	d->cc = major * 10 + minor;
	d->ptx_isa = krt_driver_ptx_isa(d->driver_version);
	if (CHECK(err, cuDevicePrimaryCtxRetain, (&cd->ctx, cd->dev))) {
		free(cd);
		return krt_err_prefix(err, "device=cuda ordinal %d (%s): ", ordinal, d->name);
	}
	d->impl = cd;
	if (enter(d, err)) {
		cu.cuDevicePrimaryCtxRelease_v2(cd->dev);
		free(cd);
		d->impl = NULL;
		return krt_err_prefix(err, "device=cuda ordinal %d (%s): ", ordinal, d->name);
	}
	return KRT_OK;
}

static void
cuda_close(KrtDevice *d)
{
	CuDev *cd = cd_of(d);
	if (!cd)
		return;
	/* Modules loaded on this device die with the context: unload them
	 * first. The result is not actionable at close. */
	(void)cu.cuDevicePrimaryCtxRelease_v2(cd->dev);
	free(cd);
	d->impl = NULL;
}

static int
cuda_alloc(KrtDevice *d, size_t bytes, KrtPtr *out, KrtErr *err)
{
	CUdeviceptr p = 0;
	if (enter(d, err) || CHECK(err, cuMemAlloc_v2, (&p, bytes)))
		return krt_err_prefix(err, "krt_alloc(%zu bytes) on %s: ", bytes, d->name);
	*out = (KrtPtr)p;
	return KRT_OK;
}

static int
cuda_free(KrtDevice *d, KrtPtr p, KrtErr *err)
{
	if (enter(d, err) || CHECK(err, cuMemFree_v2, ((CUdeviceptr)p)))
		return krt_err_prefix(err, "krt_free(0x%llx) on %s: ", (unsigned long long)p, d->name);
	return KRT_OK;
}

static int
cuda_upload(KrtDevice *d, KrtPtr dst, const void *src, size_t bytes, KrtErr *err)
{
	if (enter(d, err) || CHECK(err, cuMemcpyHtoD_v2, ((CUdeviceptr)dst, src, bytes)))
		return krt_err_prefix(err, "krt_upload(%zu bytes to 0x%llx) on %s: ", bytes,
		                      (unsigned long long)dst, d->name);
	return KRT_OK;
}

static int
cuda_download(KrtDevice *d, void *dst, KrtPtr src, size_t bytes, KrtErr *err)
{
	if (enter(d, err) || CHECK(err, cuMemcpyDtoH_v2, (dst, (CUdeviceptr)src, bytes)))
		return krt_err_prefix(err, "krt_download(%zu bytes from 0x%llx) on %s: ", bytes,
		                      (unsigned long long)src, d->name);
	return KRT_OK;
}

static int
cuda_memset8(KrtDevice *d, KrtPtr dst, uint8_t v, size_t bytes, KrtErr *err)
{
	if (enter(d, err) || CHECK(err, cuMemsetD8_v2, ((CUdeviceptr)dst, v, bytes)))
		return krt_err_prefix(err, "krt_memset8(0x%llx, %u, %zu bytes) on %s: ",
		                      (unsigned long long)dst, v, bytes, d->name);
	return KRT_OK;
}

static int
cuda_sync(KrtDevice *d, KrtErr *err)
{
	/* Asynchronous kernel faults surface here. */
	if (enter(d, err) || CHECK(err, cuCtxSynchronize, ()))
		return krt_err_prefix(err, "krt_sync on %s: ", d->name);
	return KRT_OK;
}

/* ---- modules ------------------------------------------------------------- */

typedef struct CuMod {
	CUmodule mod;
	CUfunction fn;
} CuMod;

enum {
	ERROR_LOG = 16384,
	INFO_LOG = 65536,
	LOG_IN_MSG = 4000, /* of KrtErr.msg's 8192, the rest for context */
	DEFAULT_SMEM = 48 * 1024,
};

/* The JIT rejected the PTX: say which kernel, target and ISA, what the
 * driver takes, the error log, and the `// @block` behind each line the log
 * names. */
static int
jit_failed(KrtModule *m, const char *ptx, size_t len, CUresult r, const char *elog,
           const char *ilog, int site, KrtErr *err)
{
	const KrtDevice *d = m->dev;
	const KrtAbi *a = &m->abi;
	cu_check(err, r, "cuModuleLoadDataEx", __FILE__, site);
	if (err->code != KRT_ENOMEM)
		err->code = KRT_ELOAD;
	krt_err_prefix(err,
	               "kernel %s (target %s, PTX ISA %d.%d): the driver's JIT rejected the PTX "
	               "on %s (sm_%d; driver CUDA %d.%d takes PTX ISA up to %d.%d): ",
	               a->kernel, a->target, a->ptx_major, a->ptx_minor, d->name, d->cc,
	               d->driver_version / 1000, d->driver_version % 1000 / 10, d->ptx_isa / 10,
	               d->ptx_isa % 10);
	const char *log = elog[0] ? elog : ilog;
	size_t n = strlen(log), shown = n < LOG_IN_MSG ? n : LOG_IN_MSG;
	krt_err_append(err, "\nJIT %s log%s:\n%.*s%s", elog[0] ? "error" : "info",
	               shown < n ? " (truncated)" : "", (int)shown, log,
	               shown && log[shown - 1] == '\n' ? "" : "\n");
	char where[2048];
	if (krt_jit_log_explain(ptx, len, log, where, sizeof where) > 0)
		krt_err_append(err, "where:\n%s", where);
	return err->code;
}

static int
read_attr(CUfunction fn, CUfunction_attribute attr, int *out, KrtErr *err)
{
	return CHECK(err, cuFuncGetAttribute, (out, attr, fn));
}

static int
cuda_module_load(KrtModule *m, const char *ptx, size_t len, KrtErr *err)
{
	KrtDevice *d = m->dev;
	const KrtAbi *a = &m->abi;
	if (enter(d, err))
		return krt_err_prefix(err, "kernel %s: ", a->kernel);
	CuMod *cm = calloc(1, sizeof *cm);
	char *elog = calloc(1, ERROR_LOG), *ilog = calloc(1, INFO_LOG);
	if (!cm || !elog || !ilog) {
		free(cm);
		free(elog);
		free(ilog);
		return krt_errf(err, KRT_ENOMEM, "kernel %s: out of host memory", a->kernel);
	}
	/* Log buffers and verbose ptxas report (docs/hardware.md, "Driver JIT logs"). */
	CUjit_option opt[] = {
		CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
		CU_JIT_INFO_LOG_BUFFER,  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
		CU_JIT_LOG_VERBOSE,
	};
	void *val[] = {
		elog, (void *)(uintptr_t)ERROR_LOG, ilog, (void *)(uintptr_t)INFO_LOG,
		(void *)(uintptr_t)1,
	};
	CUresult r = cu.cuModuleLoadDataEx(&cm->mod, ptx, sizeof opt / sizeof opt[0], opt, val);
	elog[ERROR_LOG - 1] = 0;
	ilog[INFO_LOG - 1] = 0;
	if (r != CUDA_SUCCESS) {
		jit_failed(m, ptx, len, r, elog, ilog, __LINE__, err);
		goto fail;
	}
	if (CHECK(err, cuModuleGetFunction, (&cm->fn, cm->mod, a->kernel))) {
		krt_err_prefix(err, "kernel %s: the loaded module has no such .entry: ", a->kernel);
		goto fail_unload;
	}
	if (read_attr(cm->fn, CU_FUNC_ATTRIBUTE_NUM_REGS, &m->regs, err) ||
	    read_attr(cm->fn, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &m->local_bytes, err) ||
	    read_attr(cm->fn, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &m->static_smem, err)) {
		krt_err_prefix(err, "kernel %s: ", a->kernel);
		goto fail_unload;
	}
	/* Static + dynamic smem must fit the opt-in limit (227 KiB on sm_90,
	 * docs/hardware.md, "Limits and peak rates"; Triton uses optin - static). */
	if ((uint64_t)a->smem + (uint64_t)m->static_smem > (uint64_t)d->smem_optin) {
		krt_errf(err, KRT_ERESOURCE,
		         "kernel %s: %u bytes of dynamic shared memory (//@smem) + %d static = %llu "
		         "exceed what %s allows one block (%d, "
		         "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)",
		         a->kernel, a->smem, m->static_smem,
		         (unsigned long long)a->smem + (unsigned long long)m->static_smem, d->name,
		         d->smem_optin);
		goto fail_unload;
	}
	/* Above 48 KiB the kernel must opt in (docs/hardware.md, "Limits and peak rates"). */
	if (a->smem > DEFAULT_SMEM &&
	    CHECK(err, cuFuncSetAttribute,
	          (cm->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)a->smem))) {
		krt_err_prefix(err, "kernel %s: raising dynamic shared memory to %u bytes: ",
		               a->kernel, a->smem);
		goto fail_unload;
	}
	/* Resident CTAs an SM, for callers sizing grids to whole waves; a
	 * kernel the calculator cannot size still loads (-1: unknown). */
	if (cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&m->ctas_per_sm, cm->fn, (int)a->threads, a->smem) !=
	    CUDA_SUCCESS)
		m->ctas_per_sm = -1;
	/* Keep only what the log holds, not the 64 KiB buffer. */
	m->jit_log = strdup(ilog);
	if (m->jit_log)
		free(ilog);
	else
		m->jit_log = ilog;
	free(elog);
	m->impl = cm;
	return KRT_OK;
fail_unload:
	(void)cu.cuModuleUnload(cm->mod);
fail:
	free(cm);
	free(elog);
	free(ilog);
	return err->code;
}

static void
cuda_module_unload(KrtModule *m)
{
	CuMod *cm = m->impl;
	if (!cm)
		return;
	/* Unload in the context that owns the module; nothing to report. */
	if (cu.cuCtxSetCurrent(cd_of(m->dev)->ctx) == CUDA_SUCCESS)
		(void)cu.cuModuleUnload(cm->mod);
	free(cm);
	m->impl = NULL;
}

/* ---- launches -------------------------------------------------------------- */

/* Everything cuLaunchKernelEx points into; built once per krt_launch or
 * krt_time. Tensor maps are passed by value as `.param .align 128 .b8
 * NAME[128]` (docs/hardware.md, "Tensor map parameter"); the driver requires the host copy be
 * 64-byte aligned, CUDA 13 declares it alignas(128). */
typedef struct CuPack {
	struct {
		alignas(128) CUtensorMap map;
	} tm[KRT_MAX_PARAMS];
	union {
		uint64_t u64;
		uint32_t u32;
		int32_t s32;
		float f32;
	} scalar[KRT_MAX_PARAMS];
	void *params[KRT_MAX_PARAMS];
	CUlaunchAttribute attr[1];
	CUlaunchConfig cfg;
} CuPack;

_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 16 qwords");

static int
encode(CuPack *pk, int i, const KrtTmapArgs *t, KrtErr *err)
{
	CUresult r = cu.cuTensorMapEncodeTiled(
		&pk->tm[i].map, (CUtensorMapDataType)t->data_type, t->rank,
		(void *)(uintptr_t)t->address, t->dims, t->strides, t->box, t->estrides,
		(CUtensorMapInterleave)t->interleave, (CUtensorMapSwizzle)t->swizzle,
		(CUtensorMapL2promotion)t->l2_promotion, (CUtensorMapFloatOOBfill)t->oob_fill);
	if (cu_check(err, r, "cuTensorMapEncodeTiled", __FILE__, __LINE__)) {
		char args[1024];
		krt_tmap_describe(t, args, sizeof args);
		krt_err_prefix(err, "tensor map arg %d (%s, tensor %s): ", i, t->param, t->tensor);
		return krt_err_append(err, "\n  cuTensorMapEncodeTiled arguments: %s", args);
	}
	return KRT_OK;
}

static int
pack(KrtModule *m, const KrtLaunch *l, void *stream, CuPack *pk, KrtErr *err)
{
	for (int i = 0; i < l->nargs; i++) {
		const KrtArg *a = &l->args[i];
		switch (a->kind) {
		case KRT_ARG_TMAP:
			if (encode(pk, i, &l->tmaps[i], err))
				return krt_err_prefix(err, "kernel %s: ", m->abi.kernel);
			pk->params[i] = &pk->tm[i].map;
			continue;
		case KRT_ARG_PTR:
			pk->scalar[i].u64 = a->v.p;
			break;
		case KRT_ARG_U32:
			pk->scalar[i].u32 = a->v.u32;
			break;
		case KRT_ARG_S32:
			pk->scalar[i].s32 = a->v.s32;
			break;
		case KRT_ARG_U64:
			pk->scalar[i].u64 = a->v.u64;
			break;
		case KRT_ARG_F32:
			pk->scalar[i].f32 = a->v.f32;
			break;
		}
		pk->params[i] = &pk->scalar[i];
	}
	CUlaunchConfig *c = &pk->cfg;
	memset(c, 0, sizeof *c);
	c->gridDimX = l->grid[0];
	c->gridDimY = l->grid[1];
	c->gridDimZ = l->grid[2];
	c->blockDimX = l->block[0];
	c->blockDimY = l->block[1];
	c->blockDimZ = l->block[2];
	c->sharedMemBytes = l->smem;
	c->hStream = (CUstream)stream;
	if (l->cluster[0] * l->cluster[1] * l->cluster[2] != 1) {
		memset(pk->attr, 0, sizeof pk->attr);
		pk->attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		pk->attr[0].value.clusterDim.x = l->cluster[0];
		pk->attr[0].value.clusterDim.y = l->cluster[1];
		pk->attr[0].value.clusterDim.z = l->cluster[2];
		c->attrs = pk->attr;
		c->numAttrs = 1;
	}
	return KRT_OK;
}

static int
launch_failed(KrtModule *m, const KrtLaunch *l, KrtErr *err)
{
	return krt_err_prefix(err,
	                      "kernel %s: launch with grid (%u,%u,%u) block (%u,%u,%u) cluster "
	                      "(%u,%u,%u) dynamic smem %u on %s: ",
	                      m->abi.kernel, l->grid[0], l->grid[1], l->grid[2], l->block[0],
	                      l->block[1], l->block[2], l->cluster[0], l->cluster[1],
	                      l->cluster[2], l->smem, m->dev->name);
}

static int
cuda_launch(KrtModule *m, const KrtLaunch *l, void *stream, KrtErr *err)
{
	CuPack pk;
	CuMod *cm = m->impl;
	if (enter(m->dev, err) || pack(m, l, stream, &pk, err))
		return err->code;
	if (CHECK(err, cuLaunchKernelEx, (&pk.cfg, cm->fn, pk.params, NULL)))
		return launch_failed(m, l, err);
	return KRT_OK;
}

static int
cuda_time(KrtModule *m, const KrtLaunch *l, int warmup, int iters, float *ms, KrtErr *err)
{
	CuPack pk;
	CuMod *cm = m->impl;
	if (enter(m->dev, err) || pack(m, l, NULL, &pk, err))
		return err->code;
	for (int i = 0; i < warmup; i++)
		if (CHECK(err, cuLaunchKernelEx, (&pk.cfg, cm->fn, pk.params, NULL)))
			return launch_failed(m, l, err);
	/* ev[i] before launch i and ev[i+1] after it: back-to-back launches,
	 * each timed by the events around it. */
	CUevent *ev = calloc((size_t)iters + 1, sizeof *ev);
	if (!ev)
		return krt_errf(err, KRT_ENOMEM, "krt_time: out of host memory");
	int created = 0, rc = KRT_OK;
	for (; created <= iters; created++)
		if ((rc = CHECK(err, cuEventCreate, (&ev[created], CU_EVENT_DEFAULT))) != 0)
			goto done;
	if ((rc = CHECK(err, cuEventRecord, (ev[0], NULL))) != 0)
		goto done;
	for (int i = 0; i < iters; i++) {
		if ((rc = CHECK(err, cuLaunchKernelEx, (&pk.cfg, cm->fn, pk.params, NULL))) != 0) {
			launch_failed(m, l, err);
			goto done;
		}
		if ((rc = CHECK(err, cuEventRecord, (ev[i + 1], NULL))) != 0)
			goto done;
	}
	if ((rc = CHECK(err, cuEventSynchronize, (ev[iters]))) != 0)
		goto done;
	for (int i = 0; i < iters; i++)
		if ((rc = CHECK(err, cuEventElapsedTime_v2, (&ms[i], ev[i], ev[i + 1]))) != 0)
			goto done;
done:
	for (int i = 0; i < created; i++)
		(void)cu.cuEventDestroy_v2(ev[i]);
	free(ev);
	if (rc)
		krt_err_prefix(err, "krt_time of kernel %s: ", m->abi.kernel);
	return rc;
}

const KrtBackend krt_cuda_backend = {
	.kind = "cuda",
	.open = cuda_open,
	.close = cuda_close,
	.alloc = cuda_alloc,
	.free = cuda_free,
	.upload = cuda_upload,
	.download = cuda_download,
	.memset8 = cuda_memset8,
	.sync = cuda_sync,
	.module_load = cuda_module_load,
	.module_unload = cuda_module_unload,
	.launch = cuda_launch,
	.time = cuda_time,
};
