/* libkrt: load kgen PTX and launch it, on a GPU (CUDA driver, dlopen'ed) or
 * on the emulator. Every function returns 0 or a KRT_E* code after filling
 * the KrtErr with a message for people; nothing here exits. */
#ifndef KRT_H
#define KRT_H

#include <stddef.h>
#include <stdint.h>

enum {
	KRT_OK = 0,
	KRT_ENODEV = 1,    /* no such device / backend (no GPU, no libcuda) */
	KRT_EINVAL = 2,    /* bad argument from the caller */
	KRT_EABI = 3,      /* malformed or missing ABI header */
	KRT_EMISMATCH = 4, /* PTX target or version cannot run on this device/driver */
	KRT_ELOAD = 5,     /* module load (JIT) failed */
	KRT_ECUDA = 6,     /* a driver call failed */
	KRT_ENOMEM = 7,
	KRT_ERESOURCE = 8, /* the kernel or launch asks for more than the device has or
	                    * than the emulator's stated limits (runtime/emu/README.md) */
};

typedef struct KrtErr {
	int code;
	char msg[8192];
} KrtErr;

typedef struct KrtDevice KrtDevice;
typedef struct KrtModule KrtModule;
typedef uint64_t KrtPtr; /* a device address */

/* ---- devices ---------------------------------------------------------- */

/* kind: "cuda", "emu", or NULL/"auto" (env KRT_DEVICE if set, else cuda when
 * a GPU is present, else emu). */
int krt_device_open(KrtDevice **out, const char *kind, int ordinal, KrtErr *err);
void krt_device_close(KrtDevice *dev);
const char *krt_device_kind(const KrtDevice *dev); /* "cuda" or "emu" */
const char *krt_device_name(const KrtDevice *dev);
int krt_device_cc(const KrtDevice *dev);           /* compute capability, e.g. 90, 100 */
int krt_gpu_present(void);                         /* 1 if libcuda loads and sees a device */

int krt_alloc(KrtDevice *dev, size_t bytes, KrtPtr *out, KrtErr *err);
int krt_free(KrtDevice *dev, KrtPtr p, KrtErr *err);
int krt_upload(KrtDevice *dev, KrtPtr dst, const void *src, size_t bytes, KrtErr *err);
int krt_download(KrtDevice *dev, void *dst, KrtPtr src, size_t bytes, KrtErr *err);
int krt_memset8(KrtDevice *dev, KrtPtr dst, uint8_t v, size_t bytes, KrtErr *err);
int krt_sync(KrtDevice *dev, KrtErr *err);

/* ---- the ABI header (docs/ABI.md) -------------------------------------- */

enum { KRT_MAX_PARAMS = 24, KRT_MAX_RANK = 5, KRT_MAX_SHAPE = 16 };

typedef enum KrtArgKind {
	KRT_ARG_TMAP,
	KRT_ARG_PTR,
	KRT_ARG_U32,
	KRT_ARG_S32,
	KRT_ARG_U64,
	KRT_ARG_F32,
} KrtArgKind;

typedef struct KrtAbiParam {
	KrtArgKind kind;
	char name[32];
	char dtype[16];  /* tmap/ptr: element type name ("bf16", "f32", ...) */
	int elem_bytes;  /* tmap/ptr */
	int rank;        /* tmap */
	uint32_t box[KRT_MAX_RANK]; /* tmap, innermost first */
	int swizzle;     /* tmap: 0 (none), 32, 64, 128 */
	char tensor[64]; /* description, e.g. "A[M,K]" */
	int align;       /* ptr: the address must be a multiple of this (the optional align=N; else elem_bytes) */
} KrtAbiParam;

/* One NAME=VALUE field of //@shape (docs/ABI.md, "Shape fields"). */
typedef struct KrtShapeField {
	char name[16];
	char value[32];
} KrtShapeField;

typedef struct KrtAbi {
	char kernel[128];
	char family[32];
	char target[16];    /* "sm_90a" */
	int target_cc;      /* 90, 100 */
	int ptx_major, ptx_minor;
	char args[1024];
	int nshape;         /* 0: the header has no //@shape */
	KrtShapeField shape[KRT_MAX_SHAPE];
	int threads;
	int cluster[3];
	uint32_t smem;
	char grid[3][128];
	int nparams;
	KrtAbiParam params[KRT_MAX_PARAMS];
} KrtAbi;

int krt_abi_parse(const char *ptx, size_t len, KrtAbi *out, KrtErr *err);
const KrtAbiParam *krt_abi_find(const KrtAbi *abi, const char *name);
/* The value of //@shape field `name`, NULL if the header has none. */
const char *krt_abi_shape(const KrtAbi *abi, const char *name);
/* A gemm kernel with a MoE layout (//@shape moe; docs/ABI.md, "MoE
 * layouts"): checks the host copy of its expert table before a launch,
 * v = offsets[E+1] (contiguous: non-decreasing from >= 0 to <= M) or
 * counts[E] (masked: each in 0..M). KRT_EINVAL names the entry, its value
 * and the rule; KRT_OK also for kernels without a MoE layout. */
int krt_moe_check(const KrtAbi *abi, const int32_t *v, uint32_t E, uint32_t M, KrtErr *err);

/* ---- modules and launches --------------------------------------------- */

/* Parses the ABI, refuses a target/device or .version/driver mismatch with
 * the numbers, JIT-loads with error+info logs (naming the kernel, target and
 * the `// @block` behind a failing line), raises dynamic smem. */
int krt_module_load(KrtDevice *dev, const char *ptx, size_t len, KrtModule **out, KrtErr *err);
void krt_module_unload(KrtModule *m);
const KrtAbi *krt_module_abi(const KrtModule *m);
/* Resources as the JIT reports them (-1 where unknown). */
int krt_module_resources(const KrtModule *m, int *regs, int *local_bytes, int *static_smem);
/* How many CTAs of the kernel (its //@threads and //@smem) one SM holds at
 * once, as the driver's occupancy calculator reports it, so a caller can
 * size a grid to whole waves; -1 where unknown (the emulator, NULL). */
int krt_module_ctas_per_sm(const KrtModule *m);
const char *krt_module_jit_log(const KrtModule *m); /* info log of the load */

typedef struct KrtTensor {
	KrtPtr ptr;
	int rank;
	uint64_t dims[KRT_MAX_RANK];    /* elements, innermost first */
	uint64_t strides[KRT_MAX_RANK]; /* bytes; strides[0] = element size (unused by TMA) */
} KrtTensor;

typedef struct KrtArg {
	KrtArgKind kind;
	union {
		KrtTensor t;
		KrtPtr p;
		uint32_t u32;
		int32_t s32;
		uint64_t u64;
		float f32;
	} v;
} KrtArg;

/* One KrtArg per ABI param, in order; kinds must match. The grid comes from
 * the ABI's grid expressions over the scalar args. stream may be NULL. */
int krt_launch(KrtModule *m, const KrtArg *args, int nargs, void *stream, KrtErr *err);

/* Times `iters` launches (after `warmup`) with device events; ms[i] is the
 * time of launch i. */
int krt_time(KrtModule *m, const KrtArg *args, int nargs, int warmup, int iters,
             float *ms, KrtErr *err);

#endif
