/* libkrt without a GPU: device selection and its errors, tensor-map argument
 * validation (every cuTensorMapEncodeTiled rule of docs/hardware.md, "Tensor map encoding"
 * broken once), launch-argument checks, and the error helpers. Where
 * libcuda.so.1 cannot be loaded (this CI), the cuda backend must refuse
 * cleanly; on a machine with a driver those checks are skipped. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "krt.h"

#include "expect.h"

static const char header[] =
	"//@kgen-abi 1\n"
	"//@kernel gemm_test\n"
	"//@family gemm\n"
	"//@target sm_90a\n"
	"//@ptx 8.0\n"
	"//@args --target sm_90a\n"
	"//@threads 384\n"
	"//@cluster 2 1 1\n"
	"//@smem 197632\n"
	"//@grid cdiv(M,128)*cdiv(N,256) 1 1\n"
	"//@param tmap A dtype=bf16 rank=2 box=64,128 swizzle=128 tensor=A[M,K]\n"
	"//@param tmap S dtype=f32 rank=3 box=4,8,2 swizzle=none tensor=S[X,Y,Z]\n"
	"//@param tmap Q dtype=e4m3 rank=2 box=128,64 swizzle=64 tensor=Q[S,D]\n"
	"//@param ptr C dtype=bf16 tensor=C[M,N]\n"
	"//@param u32 M\n"
	"//@param u32 N\n"
	"//@param f32 alpha\n"
	"//@end\n";

static KrtAbi abi;

/* A valid A: bf16 [M=1000, K=4096] row-major. */
static KrtTensor
tensor_a(void)
{
	KrtTensor t = {.ptr = 0x7f0000100000ull, .rank = 2};
	t.dims[0] = 4096;
	t.dims[1] = 1000;
	t.strides[0] = 2;
	t.strides[1] = 4096 * 2;
	return t;
}

/* Every argument is printed with a rejection. */
static void
expect_all_args(const char *msg)
{
	EXPECT_MSG(msg, "cuTensorMapEncodeTiled arguments:", "dtype=", "rank=", "address=0x",
	           "dims={", "globalStrides={", "box={", "elementStrides={", "interleave=NONE",
	           "swizzle=", "l2Promotion=L2_256B", "oobFill=NONE");
}

static void
test_tmap_valid(void)
{
	KrtTmapArgs a;
	KrtErr e;
	KrtTensor t = tensor_a();
	EXPECT(krt_tmap_prepare(&abi, 0, &t, &a, &e) == KRT_OK);
	EXPECT(a.index == 0 && strcmp(a.param, "A") == 0 && strcmp(a.tensor, "A[M,K]") == 0);
	EXPECT(a.data_type == 9 /* CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 */);
	EXPECT(a.elem_bytes == 2 && a.rank == 2 && a.address == 0x7f0000100000ull);
	EXPECT(a.dims[0] == 4096 && a.dims[1] == 1000);
	EXPECT(a.strides[0] == 8192);
	EXPECT(a.box[0] == 64 && a.box[1] == 128);
	EXPECT(a.estrides[0] == 1 && a.estrides[1] == 1);
	EXPECT(a.interleave == 0 && a.swizzle == 3 /* SWIZZLE_128B */ && a.swizzle_bytes == 128);
	EXPECT(a.l2_promotion == 3 /* L2_256B */ && a.oob_fill == 0);

	char desc[1024];
	krt_tmap_describe(&a, desc, sizeof desc);
	EXPECT_MSG(desc, "dtype=bf16 (CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2 bytes)", "rank=2",
	           "address=0x7f0000100000", "dims={4096,1000}", "globalStrides={8192}",
	           "box={64,128}", "elementStrides={1,1}", "swizzle=128B");

	/* A box larger than the tensor is fine: TMA fills out of bounds. */
	t.dims[0] = 16;
	t.dims[1] = 3;
	t.strides[1] = 32;
	EXPECT(krt_tmap_prepare(&abi, 0, &t, &a, &e) == KRT_OK);
	/* strides[0] = 0 means contiguous too. */
	t.strides[0] = 0;
	EXPECT(krt_tmap_prepare(&abi, 0, &t, &a, &e) == KRT_OK);

	/* rank 3, f32, no swizzle. */
	KrtTensor s = {.ptr = 0x10000, .rank = 3};
	s.dims[0] = 100;
	s.dims[1] = 7;
	s.dims[2] = 5;
	s.strides[0] = 4;
	s.strides[1] = 400;
	s.strides[2] = 2800;
	EXPECT(krt_tmap_prepare(&abi, 1, &s, &a, &e) == KRT_OK);
	EXPECT(a.data_type == 7 /* FLOAT32 */ && a.swizzle == 0 && a.rank == 3);
	EXPECT(a.strides[0] == 400 && a.strides[1] == 2800);

	/* e4m3 goes as UINT8, swizzle 64 -> SWIZZLE_64B, 64-byte inner box. */
	KrtTensor q = {.ptr = 0x20000, .rank = 2};
	q.dims[0] = 64;
	q.dims[1] = 64;
	q.strides[0] = 1;
	q.strides[1] = 64;
	abi.params[2].box[0] = 64;
	EXPECT(krt_tmap_prepare(&abi, 2, &q, &a, &e) == KRT_OK);
	EXPECT(a.data_type == 0 /* UINT8 */ && a.swizzle == 2 /* SWIZZLE_64B */);
	abi.params[2].box[0] = 128;
}

static void
test_tmap_rules(void)
{
	/* Each case breaks one rule of docs/hardware.md, "Tensor map encoding" on a valid A. */
	static const struct {
		const char *what;
		int field; /* which mutation */
	} cases[] = {
		{"rank 3 given, the ABI declares rank=2", 0},
		{"rank 0: cuTensorMapEncodeTiled takes rank 1..5", 1},
		{"rank 6: cuTensorMapEncodeTiled takes rank 1..5", 2},
		{"address is NULL", 3},
		{"address 0x7f0000100008 is not 16-byte aligned", 4},
		{"dims[1] = 0: every dimension must be nonzero", 5},
		{"dims[0] = 4294967297 exceeds 2^32", 6},
		{"strides[0] = 4: the innermost dimension must be contiguous", 7},
		{"strides[1] = 8200 bytes is not a multiple of 16", 8},
		{"strides[1] = 1099511627776 bytes is not below 2^40", 9},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		KrtTensor t = tensor_a();
		switch (cases[i].field) {
		case 0:
			t.rank = 3;
			t.dims[2] = 1;
			t.strides[2] = 8192 * 1000;
			break;
		case 1:
			t.rank = 0;
			break;
		case 2:
			t.rank = 6;
			break;
		case 3:
			t.ptr = 0;
			break;
		case 4:
			t.ptr += 8;
			break;
		case 5:
			t.dims[1] = 0;
			break;
		case 6:
			t.dims[0] = (1ull << 32) + 1;
			break;
		case 7:
			t.strides[0] = 4;
			break;
		case 8:
			t.strides[1] = 8200;
			break;
		case 9:
			t.strides[1] = 1ull << 40;
			break;
		}
		KrtTmapArgs a;
		KrtErr e;
		int rc = krt_tmap_prepare(&abi, 0, &t, &a, &e);
		if (rc != KRT_EINVAL || e.code != KRT_EINVAL || !strstr(e.msg, cases[i].what) ||
		    !strstr(e.msg, "tensor map arg 0 (A, tensor A[M,K])")) {
			fprintf(stderr, "%s:%d: FAIL: tmap case '%s': rc %d\n  msg: %s\n", __FILE__,
			        __LINE__, cases[i].what, rc, e.msg);
			failures++;
		}
		expect_all_args(e.msg);
	}
	/* dims == 2^32 is still allowed. */
	KrtTensor t = tensor_a();
	t.dims[0] = 1ull << 32;
	KrtTmapArgs a;
	KrtErr e;
	EXPECT(krt_tmap_prepare(&abi, 0, &t, &a, &e) == KRT_OK);

	/* The printed arguments are those of the failing call. */
	t = tensor_a();
	t.strides[1] = 8200;
	EXPECT(krt_tmap_prepare(&abi, 0, &t, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "dtype=bf16 (CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2 bytes)", "rank=2",
	           "address=0x7f0000100000", "dims={4096,1000}", "globalStrides={8200}",
	           "box={64,128}", "elementStrides={1,1}", "swizzle=128B");

	/* Rules on the ABI side: box[0]*elemsize a multiple of 16 ... */
	KrtAbi b = abi;
	KrtTensor s = {.ptr = 0x10000, .rank = 3};
	s.dims[0] = s.dims[1] = s.dims[2] = 8;
	s.strides[0] = 4;
	s.strides[1] = 32;
	s.strides[2] = 256;
	b.params[1].box[0] = 2; /* 8 bytes */
	EXPECT(krt_tmap_prepare(&b, 1, &s, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "tensor map arg 1 (S, tensor S[X,Y,Z])",
	           "box[0]*elemsize = 2*4 = 8 bytes is not a multiple of 16");
	expect_all_args(e.msg);
	/* ... box in 1..256 ... */
	b = abi;
	b.params[1].box[2] = 300;
	EXPECT(krt_tmap_prepare(&b, 1, &s, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "box[2] = 300 is not in 1..256");
	expect_all_args(e.msg);
	b.params[1].box[2] = 0;
	EXPECT(krt_tmap_prepare(&b, 1, &s, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "box[2] = 0 is not in 1..256");
	/* ... the inner box within the swizzle span: 128 e4m3 = 128 B > 64 B ... */
	KrtTensor q = {.ptr = 0x20000, .rank = 2};
	q.dims[0] = q.dims[1] = 64;
	q.strides[0] = 1;
	q.strides[1] = 64;
	EXPECT(krt_tmap_prepare(&abi, 2, &q, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "tensor map arg 2 (Q, tensor Q[S,D])",
	           "box[0]*elemsize = 128 bytes exceeds the 64-byte swizzle span", "swizzle=64B",
	           "dtype=e4m3 (CU_TENSOR_MAP_DATA_TYPE_UINT8, 1 bytes)");
	expect_all_args(e.msg);
	/* ... and 128 bf16 = 256 B > 128 B. */
	b = abi;
	b.params[0].box[0] = 128;
	t = tensor_a();
	EXPECT(krt_tmap_prepare(&b, 0, &t, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "256 bytes exceeds the 128-byte swizzle span");
	/* A dtype TMA cannot move, and a swizzle that is not a mode. */
	b = abi;
	snprintf(b.params[0].dtype, sizeof b.params[0].dtype, "f64");
	EXPECT(krt_tmap_prepare(&b, 0, &t, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "dtype f64 cannot be moved by TMA");
	b = abi;
	b.params[0].swizzle = 16;
	EXPECT(krt_tmap_prepare(&b, 0, &t, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "swizzle 16 is not none, 32, 64 or 128");
	/* Not a tmap param, no tensor. */
	EXPECT(krt_tmap_prepare(&abi, 3, &t, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "tensor map arg 3: the ABI has no tmap param there");
	EXPECT(krt_tmap_prepare(&abi, 0, NULL, &a, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 0 (A): no tensor given");
}

static void
test_dtypes(void)
{
	static const struct {
		const char *name;
		int bytes, tmap;
	} t[] = {
		{"bf16", 2, 9}, {"fp16", 2, 6}, {"f32", 4, 7},   {"e4m3", 1, 0}, {"e5m2", 1, 0},
		{"u8", 1, 0},   {"s8", 1, 0},   {"ue8m0", 1, 0}, {"s32", 4, 3},  {"e2m1", 1, 0},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		const KrtDtype *d = krt_dtype_find(t[i].name);
		EXPECT(d && d->bytes == t[i].bytes && d->tmap_type == t[i].tmap);
	}
	EXPECT(krt_dtype_find("f64") == NULL);
	EXPECT(krt_dtype_find("BF16") == NULL);
}

/* Valid launch args for `header`. */
static void
launch_args(KrtArg *args)
{
	memset(args, 0, 7 * sizeof *args);
	args[0].kind = KRT_ARG_TMAP;
	args[0].v.t = tensor_a();
	args[1].kind = KRT_ARG_TMAP;
	KrtTensor *s = &args[1].v.t;
	s->ptr = 0x10000;
	s->rank = 3;
	s->dims[0] = s->dims[1] = s->dims[2] = 8;
	s->strides[0] = 4;
	s->strides[1] = 32;
	s->strides[2] = 256;
	args[2].kind = KRT_ARG_TMAP;
	KrtTensor *q = &args[2].v.t;
	q->ptr = 0x20000;
	q->rank = 2;
	q->dims[0] = q->dims[1] = 64;
	q->strides[0] = 1;
	q->strides[1] = 64;
	args[3].kind = KRT_ARG_PTR;
	args[3].v.p = 0x30000;
	args[4].kind = KRT_ARG_U32;
	args[4].v.u32 = 1000;
	args[5].kind = KRT_ARG_U32;
	args[5].v.u32 = 4096;
	args[6].kind = KRT_ARG_F32;
	args[6].v.f32 = 1.0f;
}

static void
test_args(void)
{
	KrtArg args[7];
	KrtTmapArgs tm[KRT_MAX_PARAMS];
	KrtErr e;
	KrtAbi b = abi;
	b.params[2].box[0] = 64; /* fits the 64-byte swizzle */

	launch_args(args);
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_OK);
	EXPECT(tm[0].data_type == 9 && tm[1].rank == 3 && tm[2].data_type == 0);
	EXPECT(krt_args_check(&b, args, 7, NULL, &e) == KRT_OK);

	EXPECT(krt_args_check(&b, args, 6, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg,
	           "kernel gemm_test takes 7 args (A:tmap S:tmap Q:tmap C:ptr M:u32 N:u32 "
	           "alpha:f32), the caller gave 6");
	EXPECT(krt_args_check(&b, NULL, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "args = NULL");

	args[3].kind = KRT_ARG_U32;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "kernel gemm_test: arg 3 (C): expected kind ptr (dtype=bf16 "
	                  "tensor=C[M,N]), given kind u32");
	launch_args(args);
	args[6].kind = KRT_ARG_U32;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 6 (alpha): expected kind f32, given kind u32");
	launch_args(args);
	args[0].kind = KRT_ARG_PTR;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 0 (A): expected kind tmap (dtype=bf16 tensor=A[M,K]), given kind ptr");
	launch_args(args);
	args[4].kind = (KrtArgKind)42;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 4 (M): expected kind u32, given kind 42 (not a KrtArgKind)");

	/* A ptr's address: its dtype's element size, or its align=N. */
	launch_args(args);
	args[3].v.p = 0x30001;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "kernel gemm_test: arg 3 (C): address 0x30001 is not 2-byte aligned (its dtype's element size)");
	args[3].v.p = 0x30008;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_OK);
	b.params[3].align = 16;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "arg 3 (C): address 0x30008 is not 16-byte aligned (align= in its //@param line");
	args[3].v.p = 0x30010;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_OK);
	b.params[3].align = 0;

	/* A tensor-map problem inside a launch names the kernel too. */
	launch_args(args);
	args[1].v.t.strides[2] = 250;
	EXPECT(krt_args_check(&b, args, 7, tm, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "kernel gemm_test: tensor map arg 1 (S, tensor S[X,Y,Z])",
	           "strides[2] = 250 bytes is not a multiple of 16");
	expect_all_args(e.msg);

	/* The grid over the same args. */
	launch_args(args);
	uint32_t g[3];
	EXPECT(krt_grid_eval(&b, args, g, &e) == KRT_OK);
	EXPECT(g[0] == 8 * 16 && g[1] == 1 && g[2] == 1);

	EXPECT(strcmp(krt_arg_kind_name(KRT_ARG_S32), "s32") == 0);
	EXPECT(strcmp(krt_arg_kind_name((KrtArgKind)99), "?") == 0);
}

static int
libcuda_loads(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h)
		dlclose(h);
	return h != NULL;
}

static void
test_devices(void)
{
	KrtDevice *dev = (KrtDevice *)0x1;
	KrtErr e;

	/* The emulator is always built in: it opens on any machine. */
	EXPECT(krt_device_open(&dev, "emu", 0, &e) == KRT_OK && dev != NULL);
	if (dev) {
		EXPECT(strcmp(krt_device_kind(dev), "emu") == 0);
		krt_device_close(dev);
	}
	/* Backends that do not exist, and bad arguments. */
	EXPECT(krt_device_open(&dev, "tpu", 0, &e) == KRT_EINVAL && dev == NULL);
	EXPECT_MSG(e.msg, "device 'tpu': expected cuda, emu or auto");
	EXPECT(krt_device_open(&dev, "cuda", -1, &e) == KRT_EINVAL);
	EXPECT(krt_device_open(NULL, "cuda", 0, &e) == KRT_EINVAL);

	if (libcuda_loads()) {
		printf("test_krt: libcuda.so.1 loads here; GPU-less checks skipped\n");
		return;
	}
	EXPECT(krt_gpu_present() == 0);
	EXPECT(krt_device_open(&dev, "cuda", 0, &e) == KRT_ENODEV && dev == NULL);
	EXPECT(e.code == KRT_ENODEV);
	EXPECT_MSG(e.msg, "device=cuda: no GPU: libcuda.so.1");
	/* Twice: the failed load is remembered, not retried into a crash. */
	EXPECT(krt_device_open(&dev, "cuda", 0, NULL) == KRT_ENODEV && dev == NULL);

	/* auto: cuda when a GPU is present, else the emulator */
	unsetenv("KRT_DEVICE");
	EXPECT(krt_device_open(&dev, NULL, 0, &e) == KRT_OK && dev != NULL);
	if (dev) {
		EXPECT(strcmp(krt_device_kind(dev), "emu") == 0);
		krt_device_close(dev);
	}
	setenv("KRT_DEVICE", "cuda", 1);
	EXPECT(krt_device_open(&dev, NULL, 0, &e) == KRT_ENODEV);
	EXPECT_MSG(e.msg, "KRT_DEVICE=cuda");
	setenv("KRT_DEVICE", "bogus", 1);
	EXPECT(krt_device_open(&dev, "auto", 0, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "KRT_DEVICE=bogus: device 'bogus'");
	/* An explicit kind wins over the environment. */
	setenv("KRT_DEVICE", "cuda", 1);
	EXPECT(krt_device_open(&dev, "emu", 0, &e) == KRT_OK && dev != NULL);
	if (dev)
		krt_device_close(dev);
	unsetenv("KRT_DEVICE");
}

static void
test_null_safety(void)
{
	KrtErr e;
	KrtPtr p = 1;
	krt_device_close(NULL);
	krt_module_unload(NULL);
	EXPECT(strcmp(krt_device_name(NULL), "") == 0);
	EXPECT(strcmp(krt_device_kind(NULL), "") == 0);
	EXPECT(krt_device_cc(NULL) == 0);
	EXPECT(krt_alloc(NULL, 16, &p, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "krt_alloc: device is NULL");
	EXPECT(krt_upload(NULL, 0, NULL, 1, NULL) == KRT_EINVAL);
	EXPECT(krt_sync(NULL, &e) == KRT_EINVAL);
	KrtModule *m = (KrtModule *)0x1;
	EXPECT(krt_module_load(NULL, "x", 1, &m, &e) == KRT_EINVAL && m == NULL);
	EXPECT(krt_launch(NULL, NULL, 0, NULL, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "krt_launch: module is NULL");
	float ms[1];
	EXPECT(krt_time(NULL, NULL, 0, 0, 1, ms, &e) == KRT_EINVAL);
	int regs = 0, local = 0, smem = 0;
	EXPECT(krt_module_resources(NULL, &regs, &local, &smem) == KRT_EINVAL);
	EXPECT(regs == -1 && local == -1 && smem == -1);
	EXPECT(krt_module_ctas_per_sm(NULL) == -1);
	EXPECT(strcmp(krt_module_jit_log(NULL), "") == 0);
	EXPECT(krt_module_abi(NULL) == NULL);
}

static void
test_errors(void)
{
	KrtErr e;
	EXPECT(krt_errf(&e, KRT_ECUDA, "cuMemAlloc_v2 failed: %s", "X") == KRT_ECUDA);
	EXPECT(e.code == KRT_ECUDA && strcmp(e.msg, "cuMemAlloc_v2 failed: X") == 0);
	EXPECT(krt_err_prefix(&e, "krt_alloc(%d bytes): ", 16) == KRT_ECUDA);
	EXPECT(strcmp(e.msg, "krt_alloc(16 bytes): cuMemAlloc_v2 failed: X") == 0);
	EXPECT(krt_err_append(&e, " [%s]", "more") == KRT_ECUDA);
	EXPECT(strcmp(e.msg, "krt_alloc(16 bytes): cuMemAlloc_v2 failed: X [more]") == 0);
	/* Long text truncates instead of overflowing. */
	char big[10000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	krt_errf(&e, KRT_EINVAL, "%s", big);
	EXPECT(strlen(e.msg) == sizeof e.msg - 1);
	krt_err_prefix(&e, "p: ");
	EXPECT(strncmp(e.msg, "p: xxx", 6) == 0 && strlen(e.msg) == sizeof e.msg - 1);
	krt_err_append(&e, "tail");
	EXPECT(strlen(e.msg) == sizeof e.msg - 1);
	krt_err_clear(&e);
	EXPECT(e.code == 0 && e.msg[0] == 0);
	EXPECT(krt_errf(NULL, KRT_EABI, "x") == KRT_EABI);

	EXPECT(strcmp(krt_site("../runtime/cuda.c"), "runtime/cuda.c") == 0);
	EXPECT(strcmp(krt_site("/a/runtime/b/runtime/krt.c"), "runtime/krt.c") == 0);
	EXPECT(strcmp(krt_site("x/y/z.c"), "z.c") == 0);
}

/* MoE expert tables (krt_moe_check): each rule refused with the entry,
 * its value and the rule; good tables, empty experts included, pass. */
static void
test_moe(void)
{
	static const char *const lays[] = {"contiguous", "masked"};
	KrtAbi a[2];
	KrtErr e;

	for (int i = 0; i < 2; i++) {
		char h[1024];
		snprintf(h, sizeof h, "%.*s//@shape kblock=128 moe=%s\n%s", (int)(strstr(header, "//@threads") - header),
		         header, lays[i], strstr(header, "//@threads"));
		EXPECT(krt_abi_parse(h, strlen(h), &a[i], &e) == KRT_OK);
	}
	/* no MoE layout: nothing to check */
	EXPECT(krt_moe_check(&abi, NULL, 0, 0, &e) == KRT_OK);
	const int32_t good[] = {0, 0, 1, 1, 7, 9};
	EXPECT(krt_moe_check(&a[0], good, 5, 9, &e) == KRT_OK);
	EXPECT(krt_moe_check(&a[0], good, 5, 100, &e) == KRT_OK); /* rows past offsets[E]: no expert's */
	const int32_t counts[] = {0, 1, 9, 3};
	EXPECT(krt_moe_check(&a[1], counts, 4, 9, &e) == KRT_OK);

	const int32_t dec[] = {0, 4, 3, 8};
	EXPECT(krt_moe_check(&a[0], dec, 3, 8, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "offsets[2]=3: must be >= offsets[1]=4", "non-decreasing");
	EXPECT(krt_moe_check(&a[0], good, 5, 8, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "offsets[5]=9: must be <= M=8");
	const int32_t neg[] = {-2, 4};
	EXPECT(krt_moe_check(&a[0], neg, 1, 8, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "offsets[0]=-2: must be >= 0");
	EXPECT(krt_moe_check(&a[1], counts, 4, 8, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "counts[2]=9: must be in 0..M=8");
	const int32_t cneg[] = {1, -1};
	EXPECT(krt_moe_check(&a[1], cneg, 2, 8, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "counts[1]=-1: must be in 0..M=8");
	EXPECT(krt_moe_check(&a[1], counts, 0, 8, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "E=0: a MoE launch needs at least one expert");
	EXPECT(krt_moe_check(&a[0], NULL, 2, 8, &e) == KRT_EINVAL);
	EXPECT_MSG(e.msg, "offsets: no host copy given");
}

/* Packed FP4 for kind::mxf8f6f4 (tmap dtype e2m1p, 16U4_ALIGN16B; runtime/abi.c,
 * docs/hardware.md "Tensor map encoding"): dims count values, the rows are
 * K/2 bytes; each rule of that data type refused with its name. */
static void
test_tmap_fp4(void)
{
	static const char h[] = "//@kgen-abi 1\n//@kernel w\n//@family gemm\n//@target sm_100a\n"
	                        "//@ptx 8.8\n//@args x\n//@threads 192\n//@cluster 1 1 1\n//@smem 1024\n"
	                        "//@grid 1 1 1\n"
	                        "//@param tmap B dtype=e2m1p rank=2 box=128,256 swizzle=128 tensor=B[N,K]\n"
	                        "//@end\n";
	KrtAbi w;
	KrtTmapArgs a;
	KrtErr e;
	KrtTensor t = {.ptr = 0x30000, .rank = 2};

	EXPECT(krt_abi_parse(h, sizeof h - 1, &w, &e) == KRT_OK);
	t.dims[0] = 7168; /* K values */
	t.dims[1] = 300;
	t.strides[0] = 1;
	t.strides[1] = 7168 / 2;
	EXPECT(krt_tmap_prepare(&w, 0, &t, &a, &e) == KRT_OK);
	EXPECT(a.data_type == 14 /* 16U4_ALIGN16B */ && a.elem_bytes == 1 && a.strides[0] == 3584);
	t.ptr = 0x30010;
	EXPECT(krt_tmap_prepare(&w, 0, &t, &a, &e) != KRT_OK && strstr(e.msg, "not 32-byte aligned"));
	t.ptr = 0x30000;
	t.dims[0] = 7168 + 64;
	t.strides[1] = (7168 + 64) / 2;
	EXPECT(krt_tmap_prepare(&w, 0, &t, &a, &e) != KRT_OK && strstr(e.msg, "not a multiple of 128"));
	t.dims[0] = 7168;
	t.strides[1] = 3584 + 16;
	EXPECT(krt_tmap_prepare(&w, 0, &t, &a, &e) != KRT_OK && strstr(e.msg, "not a multiple of 32"));
	t.strides[1] = 3584;
	w.params[0].box[0] = 64;
	EXPECT(krt_tmap_prepare(&w, 0, &t, &a, &e) != KRT_OK && strstr(e.msg, "boxDim[0] = 128"));
	w.params[0].box[0] = 128;
	w.params[0].swizzle = 64;
	EXPECT(krt_tmap_prepare(&w, 0, &t, &a, &e) != KRT_OK && strstr(e.msg, "64-byte swizzle span"));
}

int
main(void)
{
	KrtErr e;
	if (krt_abi_parse(header, sizeof header - 1, &abi, &e) != KRT_OK) {
		fprintf(stderr, "test_krt: the test header does not parse: %s\n", e.msg);
		return 1;
	}
	test_tmap_valid();
	test_tmap_rules();
	test_tmap_fp4();
	test_dtypes();
	test_args();
	test_devices();
	test_null_safety();
	test_errors();
	test_moe();
	if (failures) {
		fprintf(stderr, "test_krt: %d failure%s\n", failures, failures == 1 ? "" : "s");
		return 1;
	}
	printf("test_krt: ok\n");
	return 0;
}
