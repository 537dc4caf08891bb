/* tcgen05 building blocks (PTX §9.7.16; docs/hardware.md, "TMEM addressing"): TMEM
 * allocation, single-thread MMA issue and commit, warp-collective TMEM
 * loads, and the fences that order them around thread synchronization. */
#ifndef KGEN_SM100_MMA_H
#define KGEN_SM100_MMA_H

#include "../desc.h"
#include "../dtype.h"
#include "../emit.h"
#include "../err.h"
#include "../plan.h"

int sm100_tmem_alloc(Emit *e, KgErr *err, Reg slot, int ncols);
/* Warp `warp_alloc` allocates the plan's TMEM into the address slot (the
 * plan's smem region `slot_region`) and fences the allocation before the
 * CTA barrier that publishes it (emitted after the barrier inits;
 * provenance block `block`). */
int sm100_setup_tmem(Emit *e, KgErr *err, const char *block, Reg warp, int warp_alloc,
                     const Plan *plan, Reg base, int slot_region);
int sm100_tmem_dealloc(Emit *e, KgErr *err, Reg taddr, int ncols);
/* The same with .cta_group::2: one warp of each CTA of a pair allocates
 * (frees) the same columns in its own TMEM (docs/cta-pair.md). */
int sm100_tmem_alloc_group(Emit *e, KgErr *err, Reg slot, int ncols, int cta_group);
int sm100_tmem_dealloc_group(Emit *e, KgErr *err, Reg taddr, int ncols, int cta_group);
int sm100_setup_tmem_group(Emit *e, KgErr *err, const char *block, Reg warp, int warp_alloc,
                           const Plan *plan, Reg base, int slot_region, int cta_group);
/* Instruction descriptor of a cta_group::1 kind::f16 MMA: `in` operands
 * (bf16/fp16), f32 accumulator, M x N, A K-major, B MN-major when b_mn
 * (docs/hardware.md, "Instruction descriptor"; built by desc.c's idesc_encode). */
int sm100_idesc_f16(DType in, int m, int n, int b_mn, uint32_t *out, KgErr *err);
/* The same for cta_group 1 or 2 (a pair: M = 256). */
int sm100_idesc_f16_group(DType in, int m, int n, int b_mn, int cta_group, uint32_t *out,
                          KgErr *err);
/* kind::f16 SS with .cta_group::2: issued by one thread of the pair. */
void sm100_mma_f16_ss_pair(Emit *e, Reg d, Reg adesc, Reg bdesc, Reg idesc, const char *enable_d);
/* kind::f16 TS with .cta_group::2 (M = 128, layout B): A from TMEM. */
void sm100_mma_f16_ts_pair(Emit *e, Reg d, Reg a, Reg bdesc, Reg idesc, const char *enable_d);
/* tcgen05.commit.cta_group::2 multicast to `bar`'s offset in the CTAs of
 * the 16-bit `mask` (bit = %cluster_ctarank; 3 for both of a pair). */
void sm100_commit_pair(Emit *e, Reg bar, Reg mask);
/* D[tmem] (+)= A(desc)·B(desc)^T, kind::f16; enable_d: predicate text or "1". */
void sm100_mma_f16_ss(Emit *e, Reg d, Reg adesc, Reg bdesc, Reg idesc, const char *enable_d);
/* D[tmem] (+)= A[tmem]·B(desc)^T, kind::f16 TS form: A read from TMEM
 * (K-major, same lanes as D; docs/hardware.md, "A operand in TMEM"). */
void sm100_mma_f16_ts(Emit *e, Reg d, Reg a, Reg bdesc, Reg idesc, const char *enable_d);
/* D[tmem] (+)= A(desc)·B(desc)^T, block-scaled: kind::mxf8f6f4 (UE8M0 per
 * 32 of K, .block32) or kind::mxf4nvf4 (E2M1, .block32 with UE8M0 or
 * .block16 with UE4M3), the factors from TMEM at sfa and sfb
 * (docs/hardware.md, "Block-scaled tcgen05.mma", "Scale-factor images"). */
void sm100_mma_mx_ss(Emit *e, IdescKind kind, int block, Reg d, Reg adesc, Reg bdesc, Reg idesc,
                     Reg sfa, Reg sfb, const char *enable_d);
/* 32 rows of 16 bytes from shared memory (descriptor sdesc) into 32 lanes
 * x 4 columns at taddr, replicated to all four lane quarters
 * (.32x128b.warpx4, docs/hardware.md, "tcgen05.cp"). */
void sm100_cp_32x128b_x4(Emit *e, Reg taddr, Reg sdesc);
/* Arrive on `bar` once all prior async tcgen05 ops of this thread complete. */
void sm100_commit(Emit *e, Reg bar);
/* 32 lanes x n columns starting at taddr into v[0..n-1] (32x32b.xN):
 * thread t gets lane (taddr.lane + t), register j = column + j (docs/hardware.md,
 * "tcgen05.ld and tcgen05.st"). */
void sm100_ld_32x32b(Emit *e, const Reg *v, int n, Reg taddr);
void sm100_wait_ld(Emit *e);
/* v[0..n-1] into 32 lanes x n columns at taddr (32x32b.xN, same map). */
void sm100_st_32x32b(Emit *e, const Reg *v, int n, Reg taddr);
/* n columns of v loaded (st 0) or stored (st 1) from taddr on, as pieces
 * of at most `max` columns, each the largest power of two that fits (.num
 * is .x1 .. .x128, docs/hardware.md, "tcgen05.ld and tcgen05.st"); a piece after the
 * first addresses taddr plus its column through `scratch`. */
void sm100_ldst_32x32b_cols(Emit *e, int st, const Reg *v, int n, int max, Reg taddr, Reg scratch);
void sm100_wait_st(Emit *e);
void sm100_fence_before(Emit *e);
void sm100_fence_after(Emit *e);

/* After the CTA barrier that follows the allocation: orders later tcgen05
 * operations after it and reads the TMEM base address the allocating warp
 * stored in plan region `slot` (docs/hardware.md, "TMEM allocation"). */
void sm100_read_taddr(Emit *e, Reg dst, const Plan *plan, Reg base, int slot);

/* The lane quarter of warp `warp` (docs/hardware.md, "Lane quarters"):
 * sm100_quarter_taddr sets dst = base + the TMEM address of the quarter's
 * first lane, sm100_quarter_row dst = that lane + `lane` (the lane, and
 * the accumulator row, that thread `lane` reaches with the 32x32b shape).
 * `any_warp` 1: warp is any warp of the CTA and is reduced mod 4 first; 0:
 * it is already 0..3. The shifts come from layout.c. */
void sm100_quarter_taddr(Emit *e, Reg dst, Reg warp, Reg base, int any_warp);
void sm100_quarter_row(Emit *e, Reg dst, Reg warp, Reg lane, int any_warp);

#endif
