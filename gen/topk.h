/* The standalone top-k family (docs/ABI.md "topk"): the indices of the K
 * largest of each row of fp32 logits [rows, n], split over several CTAs
 * per row (docs/indexer.md, "Standalone top-k"). Every instruction it
 * emits exists on every target, so the whole family is shared code: the
 * target only names the PTX target and its limits. */
#ifndef KGEN_TOPK_H
#define KGEN_TOPK_H

#include "emit.h"
#include "plan.h"
#include "target.h"

/* Threads of a CTA, keys of a row one CTA stages (its chunk), radix bins
 * of the 8-bit passes (gen/select.h: a first pass of 11 bits, then 8, 8
 * and 5), the candidates (pass 0's bin and above) a select keeps in
 * shared memory (TK_CAND; more fall back to every key). */
enum { TK_THREADS = 512, TK_CHUNK = 16384, TK_PER = TK_CHUNK / TK_THREADS, TK_BINS = 256 };
enum { TK_CAND = 3072 };
/* A merge window: candidates staged with their indices in the chunk's
 * shared memory (keys, then indices). */
enum { TK_WIN = TK_CHUNK / 2 };

typedef struct TopkParams {
	int target;
	int topk;
} TopkParams;

typedef struct TopkCfg {
	const Target *t;
	int topk;
	Plan plan;
	int r_keys, r_hist, r_scan, r_state; /* smem regions */
	int r_cand;
	char name[64];
} TopkCfg;

#endif
