/* Instruction idioms that both targets share (mbarriers, TMA, elect,
 * barriers). Per-target MMA and accumulator access live in sm90/ and sm100/. */
#ifndef KGEN_OPS_H
#define KGEN_OPS_H

#include <stdint.h>
#include "desc.h"
#include "emit.h"
#include "err.h"
#include "plan.h"

void op_mbar_init(Emit *e, Reg addr, int arrivals);
void op_fence_mbar_init(Emit *e);
/* Shared addresses of a plan's region / first barrier of a barrier array,
 * from the aligned dynamic base. */
Reg op_plan_smem(Emit *e, const Plan *plan, Reg base, int region);
Reg op_plan_bar(Emit *e, const Plan *plan, Reg base, int bar);
/* stage = (stage + 1) % stages, flipping phase on wrap; p is scratch. */
void op_ring_advance(Emit *e, Reg stage, Reg phase, int stages, Reg p);
/* Thread 0 initializes every mbarrier of the plan (arrival counts from the
 * plan, never constants: docs/lessons.md,
 * "Concurrency bugs") and fences the inits; `block` names
 * the provenance block. The caller's CTA barrier publishes them. */
void op_init_barriers(Emit *e, const Plan *plan, Reg base, Reg tid, const char *block);
/* Loops on try_wait until the phase of parity `parity` (a register or an
 * immediate, as text) has completed. */
int op_mbar_wait(Emit *e, KgErr *err, Reg bar, const char *parity);
void op_mbar_arrive(Emit *e, Reg bar, const char *guard);
void op_mbar_arrive_expect_tx(Emit *e, Reg bar, uint32_t bytes);
/* A plain arrive on a shared::cluster address (another CTA's barrier). */
void op_mbar_arrive_cluster(Emit *e, Reg bar);
/* The same on a shared::cluster address (another CTA's barrier, from mapa). */
void op_mbar_arrive_expect_tx_cluster(Emit *e, Reg bar, uint32_t bytes);
/* One TMA tile box of rank n (1..5) with coordinates c[0..n-1], innermost first. */
int op_tma_load(Emit *e, KgErr *err, Reg dst, Reg tmap, const Reg *c, int n, Reg bar);
/* A plain bulk copy (no tensor map) of `bytes` (a multiple of 16, both
 * addresses 16-byte aligned) from global `src` to shared `dst`, completing
 * on `bar` (PTX ISA §9.7.9.25). */
void op_bulk_load(Emit *e, Reg dst, Reg src, uint32_t bytes, Reg bar);
/* cta_group 2: bar may be the peer CTA's barrier (a shared::cluster address,
 * docs/cta-pair.md); cta_group 1 is op_tma_load. */
int op_tma_load_group(Emit *e, KgErr *err, Reg dst, Reg tmap, const Reg *c, int n, Reg bar,
                      int cta_group);
/* barrier.cluster arrive (release) + wait (acquire): every thread of the
 * cluster, its shared-memory writes and barrier inits published to all. */
void op_cluster_sync(Emit *e);
/* .multicast::cluster: the box lands at dst in every CTA of the 16-bit
 * mask. cta_group 1 (sm_90a's form): each completes on the mbarrier at
 * bar's offset in it (PTX ISA §9.7.9.26); cta_group 2: on its pair
 * leader's barrier (the pair CTA with bar's rank parity, docs/cta-pair.md). */
int op_tma_load_mcast(Emit *e, KgErr *err, Reg dst, Reg tmap, const Reg *c, int n, Reg bar, Reg mask,
                      int cta_group);
/* pred = true in exactly one active lane of the (converged) warp. */
void op_elect_one(Emit *e, Reg pred);
/* bar.sync id, threads with `why` (the barrier's role) in a comment. */
void op_bar_sync(Emit *e, int id, int threads);
void op_bar_sync_why(Emit *e, int id, int threads, const char *why);
/* dst = the high word of shared-memory descriptor `desc` / dst = the
 * instruction descriptor `idesc`, each with its decoding (gen/desc) and
 * `what` in a comment, so a changed field reads in the diff. */
void op_desc_hi(Emit *e, Reg dst, DescArch arch, uint64_t desc, const char *what);
/* guard (e.g. "@%p ") arrive on a peer CTA's mbarrier (a mapa address)
 * that frees a stage this thread's wgmmas have finished reading */
void op_mbar_arrive_peer(Emit *e, Reg bar, const char *guard);
/* lo = the start-address field of a matrix descriptor from shared address
 * lo, in place; clustered: drop the rank bits first (gen/desc.h) */
void op_desc_start(Emit *e, Reg lo, int clustered);
void op_idesc(Emit *e, Reg dst, IdescKind kind, uint32_t idesc, const char *what);
/* dst = addr of .param symbol `sym` in the generic space (tensor maps). */
void op_param_addr(Emit *e, Reg dst, const char *sym);
/* dst = the global pointer kernel parameter p_<name> holds (b64); the
 * name is printf's format and arguments. */
void op_param_global(Emit *e, Reg dst, const char *name, ...) __attribute__((format(printf, 3, 4)));

/* Warpgroup-wide register reallocation (PTX setmaxnreg: 24..256 in steps
 * of 8; every warp of the warpgroup executes it). */
void op_setmaxnreg(Emit *e, int inc, int regs);

/* 2^x on the FMA and integer pipes instead of MUFU ex2 (FA4's exp2
 * emulation: a softmax bound by 16 ex2 per clock and SM trades some of its
 * exponentials for FMA throughput). x = j + f with j = round(x) by the
 * 1.5·2^23 shifter, 2^f for f in [-1/2, 1/2] by the degree-3 polynomial
 * exp2_poly (minimax in relative error, 7.5e-5; bf16 P rounds at 3.9e-3),
 * and j added into the result's exponent field. x < -125 (masked scores,
 * -inf; 2^-125 is 2e-38) gives 0, keeping the result a normal float. dst may be x; f (.f32), pb and j
 * (.b32) are scratch, p a scratch predicate. Ten instructions. */
extern const float exp2_poly[4]; /* c0 + c1·f + c2·f² + c3·f³ */
void op_exp2_fma(Emit *e, Reg dst, Reg x, Reg f, Reg pb, Reg j, Reg p);
/* Whether element i of a row takes op_exp2_fma when k of every 8 do:
 * spread evenly (floor((i+1)k/8) > floor(ik/8)), so the MUFU and FMA
 * sequences interleave. */
int exp2_fma_takes(int i, int k);

/* A softmax's exponentials with k of every 8 on the FMA pipe: the
 * scratch op_exp2_fma needs (allocated only when k > 0). */
typedef struct Exp2Mix {
	int k;
	Reg f, pb, j, p;
} Exp2Mix;
void exp2_mix_init(Emit *e, Exp2Mix *m, int k);
/* x = 2^x in place for element i of a row: op_exp2_fma where
 * exp2_fma_takes(i, k), else ex2.approx.ftz. */
void op_exp2_mix(Emit *e, const Exp2Mix *m, int i, Reg x);

/* out = silu(min(gate, L)) · clamp(up, -L, L), DeepSeek-V4's clamped SwiGLU
 * (docs/ABI.md, "SwiGLU epilogue"), with lim = L and nlim = -L; gate is
 * clamped in place, t is scratch. silu(g) = g / (1 + 2^(-g·log2 e)): a very
 * negative g makes the power +inf and the quotient -0, silu's limit. */
void op_swiglu(Emit *e, Reg out, Reg gate, Reg up, Reg lim, Reg nlim, Reg t);
/* The fp32 scale s of a block of values quantized to E4M3 whose largest
 * magnitude is amax: amax / 448 (E4M3's largest finite value), 1 for an
 * all-zero block; p is scratch. */
void op_e4m3_scale(Emit *e, Reg s, Reg amax, Reg p);

#endif
