/* Helpers shared by the emulator tests: files, the emu devices, and a gemm
 * run checked against a float64 reference. */
#ifndef KGEN_TESTS_EMU_TEST_H
#define KGEN_TESTS_EMU_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/krt.h"

/* Reads a whole file (NUL-terminated); NULL with a message on stderr. */
char *et_read(const char *path, size_t *len);
/* Sorted paths matching a glob pattern; returns the count, -1 on error. */
int et_glob(const char *pattern, char ***paths);
void et_free_list(char **paths, int n);

/* Opens the emulated device that runs ABI target `target` (sm_90a: the
 * sm_90 device, sm_100a: the sm_100 one). */
int et_open_for(const char *target, KrtDevice **dev, KrtErr *err);

typedef struct EtGemm {
	int keep;          /* in: 1 to keep the downloaded C in out */
	void *out;         /* C as the kernel wrote it (free it) */
	size_t out_bytes;
	double max_err;    /* max relative error over C */
	double tol;        /* the tolerance for the output type */
	uint64_t bad;      /* elements over tol (or not finite) */
	int rc;            /* krt_launch's return */
	KrtErr err;        /* its message */
	char first_bad[256];
} EtGemm;

/* Runs a gemm module (params A B C M N K, docs/ABI.md) at M x N x K on
 * seeded N(0,1) inputs and compares C = A·B^T with a float64 reference.
 * Relative error of element (m,n): |got - ref| / max(|ref|, s/8) where s =
 * sqrt(sum_k (a_mk b_nk)^2), the natural scale of that dot product (so an
 * output that cancels to near zero is not held to an impossible bound).
 * Tolerance 1e-2 for bf16 output, 1e-3 for f32. Returns 0 if it ran and
 * passed, 1 if it ran and failed, -1 on a launch error. */
int et_gemm(KrtDevice *dev, KrtModule *mod, uint32_t M, uint32_t N, uint32_t K, uint64_t seed,
            EtGemm *res);
/* The block-scaled form (//@shape kblock, params SA and SB, docs/ABI.md,
 * "gemm") runs through et_gemm too: A and B are E4M3 of N(0,1) values
 * times 2^u per scale block (u in -3..3), scaled as DeepSeek quantizes
 * (block max to 448), and the reference multiplies the dequantized
 * operands; with UE8M0 SA, SB (--scale mx32) a factor per 32 of K of each
 * row instead, in the images of docs/ABI.md, "gemm". Its K must be a
 * multiple of kblock: et_gemm_k rounds a shape's K up to one (K itself for
 * other kernels). */
uint32_t et_gemm_k(const KrtAbi *abi, uint32_t K);

/* An attention problem: batch sequences of seqlen_q[b] queries and
 * seqlen_k[b] keys (varlen, packed back to back). */
typedef struct EtFmhaShape {
	uint32_t batch;
	uint32_t sq[8], sk[8];
} EtFmhaShape;

typedef struct EtFmha {
	int keep;              /* in: 1 to keep O (then LSE) in out */
	void *out;
	size_t out_bytes, o_bytes;
	double max_err, tol;   /* O: |got - ref| / max |ref| of the row (tools/check_fmha.c) */
	double lse_err, lse_tol; /* LSE: |got - ref| / max(1, |ref|) */
	uint64_t bad;
	int rc;
	KrtErr err;
	char first_bad[256];
} EtFmha;

/* Runs an fmha module (docs: kgen fmha; params Q K [V] O [LSE] cu_seqlens_q
 * cu_seqlens_k max_seqlen_q batch; configuration from its //@args) on
 * seeded N(0,1) inputs against a float64 reference of
 * O = softmax(scale Q K^T + mask) V. Returns as et_gemm. */
int et_fmha(KrtDevice *dev, KrtModule *mod, const EtFmhaShape *shape, uint64_t seed, EtFmha *res);

/* Runs a decode module through the checker (tools/check_decode.c: real
 * caches of its format, -1/out-of-range/duplicate indices or block tables,
 * a row that skips everything) at batch x s_q on seeded inputs. Fills
 * max_err, tol, bad, first_bad (the checker's report) or err; returns as
 * et_gemm. splits > 1 runs split-KV parts and their combine. A
 * decode_merge module (tools/check_decode_merge.c) merges `splits` parts
 * (0: 3). */
int et_decode(KrtDevice *dev, KrtModule *mod, uint32_t batch, uint32_t sq, uint32_t splits, uint64_t seed,
              EtFmha *res);

/* Runs an indexer module through the checker (tools/check_indexer.c:
 * scattered pages, odd lengths, rows that see no key; edge 1 its edge
 * fill, most keys tied; edge 0 the normal fill, few ties, so a histogram
 * missing a late count changes the pick) at batch x s_q x max_len (0:
 * 2·topk + 37), splits CTAs per query row. Fills res as et_decode. */
int et_indexer(KrtDevice *dev, KrtModule *mod, uint32_t batch, uint32_t sq, uint32_t max_len, uint32_t splits,
               uint64_t seed, int edge, EtFmha *res);
/* topk (tools/check_topk.c): rows x n logits; the edge fill (edge 1) shares the
 * k-th value among many logits, the normal fill has few ties, so a
 * histogram missing a late count changes the pick. */
int et_topk(KrtDevice *dev, KrtModule *mod, uint32_t rows, uint32_t n, uint64_t seed, int edge, EtFmha *res);

/* Runs a gemm_moe module (docs/ABI.md, "MoE layouts") through the checker
 * (tools/check_moe.c: an expert of 0 rows, one of 1, NaN rows that no
 * expert owns) at M x N x K with E experts (M: all rows when contiguous,
 * a slab's when masked). Fills res as et_decode. */
int et_gemm_moe(KrtDevice *dev, KrtModule *mod, uint32_t M, uint32_t N, uint32_t K, uint32_t E, uint64_t seed,
                EtFmha *res);

/* An integer kgen argument of the module (//@args "--name N"), or def. */
int et_arg(const KrtAbi *abi, const char *name, int def);
/* The word after --name in the ABI's //@args ("" if absent), in buf. */
const char *et_args_word(const KrtAbi *abi, const char *name, char *buf, size_t n);

#endif
