/* The device backend interface. krt.c owns everything that does not depend
 * on the device (ABI parsing, target/version checks, argument and tensor-map
 * validation, grid evaluation) and calls a backend only for the operations
 * below. "cuda" is runtime/cuda.c; "emu" (runtime/emu/) plugs in the same way
 * and is compiled in when KRT_HAVE_EMU is defined. */
#ifndef KRT_BACKEND_H
#define KRT_BACKEND_H

#include "internal.h"
#include "krt.h"

/* One launch, already validated and with the grid evaluated. */
typedef struct KrtLaunch {
	const KrtArg *args;        /* abi.nparams entries, kinds checked */
	const KrtTmapArgs *tmaps;  /* tmaps[i] valid where args[i] is a tmap */
	int nargs;
	uint32_t grid[3];          /* in CTAs, a multiple of cluster */
	uint32_t block[3];
	uint32_t cluster[3];
	uint32_t smem;             /* dynamic shared memory bytes */
} KrtLaunch;

typedef struct KrtBackend {
	const char *kind;
	/* Fills dev->name, cc, ptx_isa, driver_version, smem_optin, any_target,
	 * impl. */
	int (*open)(KrtDevice *dev, int ordinal, KrtErr *err);
	void (*close)(KrtDevice *dev);
	int (*alloc)(KrtDevice *dev, size_t bytes, KrtPtr *out, KrtErr *err);
	int (*free)(KrtDevice *dev, KrtPtr p, KrtErr *err);
	int (*upload)(KrtDevice *dev, KrtPtr dst, const void *src, size_t bytes, KrtErr *err);
	int (*download)(KrtDevice *dev, void *dst, KrtPtr src, size_t bytes, KrtErr *err);
	int (*memset8)(KrtDevice *dev, KrtPtr dst, uint8_t v, size_t bytes, KrtErr *err);
	int (*sync)(KrtDevice *dev, KrtErr *err);
	/* m->dev and m->abi are set and checked against the device; ptx is
	 * NUL-terminated at ptx[len]. Fills m->impl, resources and jit_log. */
	int (*module_load)(KrtModule *m, const char *ptx, size_t len, KrtErr *err);
	void (*module_unload)(KrtModule *m);
	int (*launch)(KrtModule *m, const KrtLaunch *l, void *stream, KrtErr *err);
	/* `warmup` untimed launches, then `iters` timed ones: ms[i] each. */
	int (*time)(KrtModule *m, const KrtLaunch *l, int warmup, int iters, float *ms,
	            KrtErr *err);
} KrtBackend;

struct KrtDevice {
	const KrtBackend *be;
	int ordinal;
	char name[256];
	int cc;             /* 90, 100, ... */
	int ptx_isa;        /* highest PTX ISA the device's JIT accepts, major*10+minor */
	int driver_version; /* cuDriverGetVersion(), e.g. 13000; 0 for emu */
	int smem_optin;     /* max dynamic+static smem per block after opt-in; 0: no limit */
	int any_target;     /* 1: runs PTX of every target (the emulator); skips the
	                     * target/CC check */
	void *impl;
};

struct KrtModule {
	KrtDevice *dev;
	KrtAbi abi;
	int regs, local_bytes, static_smem; /* -1 where unknown */
	int ctas_per_sm;                    /* resident CTAs an SM (krt_module_ctas_per_sm); -1 where unknown */
	char *jit_log;                      /* malloc'ed, never NULL after load */
	void *impl;
};

extern const KrtBackend krt_cuda_backend;
#ifdef KRT_HAVE_EMU
extern const KrtBackend krt_emu_backend;
#endif

/* cuda.c: >0 (the device count) if libcuda loads, initializes and sees a
 * GPU; else 0 with the reason in why ("libcuda.so.1: cannot open ..."). */
int krt_cuda_probe(char *why, size_t n);

#endif
