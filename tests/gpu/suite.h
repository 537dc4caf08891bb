/* What the GPU suites (test_gemm_gpu, test_fmha_gpu) share: a module run
 * over a table of shapes against the float64 reference, and the emitted
 * sm_90a kernels of a family run the same way. */
#ifndef KGEN_TESTS_GPU_SUITE_H
#define KGEN_TESTS_GPU_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "tools/check.h"

/* One shape of a suite's table and its input pattern. */
typedef struct GpuCase {
	CheckShape shape;
	CheckFill fill;
} GpuCase;

typedef struct GpuTally {
	int run, failed;
	int modules;  /* configurations or files that loaded and ran */
	int refused;  /* configurations kgen refused */
	int dead;     /* the context is gone: stop */
	uint64_t seed;
} GpuTally;

typedef struct GpuSuite {
	const GpuCase *cases;
	size_t ncases;
	uint64_t full_limit; /* CheckOpts.full_limit; 0: the checker's default */
} GpuSuite;

/* Loads the PTX and checks it at every case, printing a line per case and
 * the kcheck command that replays it (`replay`: the kgen arguments or the
 * file); stops the suite when the device reports an error. With
 * KGEN_GPU_ONLY set, a kernel whose name does not contain it is skipped
 * (to rerun part of a suite while working on one kernel). */
void gpu_check_module(KrtDevice *dev, const GpuSuite *s, const char *ptx, size_t len,
                      const char *what, const char *replay, GpuTally *t);
/* The sm_90a kernel `family` generated in process from cfg (kgen
 * arguments, NULL-terminated or at most 20), through gpu_check_module; a
 * configuration kgen refuses counts as a failure. */
void gpu_check_config(KrtDevice *dev, GpuTally *t, const char *family, const GpuSuite *s, const char *const *cfg);
/* Every emitted/sm_90a/<prefix>*.ptx under root, through gpu_check_module. */
void gpu_check_emitted(KrtDevice *dev, const GpuSuite *s, const char *root, const char *prefix,
                       GpuTally *t);

#endif
