/* Exec, modifier and check functions of the opcode table (optab.c), one
 * group per file. */
#ifndef KRT_EMU_OPS_H
#define KRT_EMU_OPS_H

#include "emu.h"

/* ops_alu.c: integer and float arithmetic, logic, comparison */
int emu_op_add(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_sub(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_mul(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_mad(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_div(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_rem(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_min(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_max(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_abs(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_neg(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_and(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_or(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_xor(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_not(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cnot(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_shl(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_shr(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_popc(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_clz(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_brev(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_bfe(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_bfi(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_prmt(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_lop3(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_setp(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_selp(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_fma(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_rcp(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_sqrt(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_rsqrt(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_ex2(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_lg2(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_sin(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cos(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_tanh(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_copysign(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_chk_alu(EmuInsn *in, EmuParse *p);
int emu_chk_setp(EmuInsn *in, EmuParse *p);

/* ops_cvt.c */
int emu_op_cvt(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_mod_cvt(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_cvt(EmuInsn *in, EmuParse *p);

/* ops_mem.c: moves, loads, stores, address conversion, atomics */
int emu_op_mov(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_ld(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_st(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cvta(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_atom(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_nop(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_createpolicy(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_mod_ld(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_atom(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_cvta(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_prefetch(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_mov(EmuInsn *in, EmuParse *p);
int emu_chk_ldst(EmuInsn *in, EmuParse *p);

/* ops_ctl.c: control flow, barriers, warp collectives, fences */
int emu_op_bra(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_ret(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_bar(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_fence(EmuCta *c, EmuThread *t, const EmuInsn *in);

/* cluster.c: mapa, barrier.cluster */
int emu_chk_mapa(EmuInsn *in, EmuParse *p);
int emu_op_mapa(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cluster_arrive(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cluster_wait(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_trap(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_activemask(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_wop_elect(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_shfl(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_vote(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_setmaxnreg(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_bar_warp(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_mod_bar(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_fence(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_shfl(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_vote(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_elect(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_setmaxnreg(EmuInsn *in, EmuParse *p);

/* mbar.c */
int emu_op_mbar_init(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_mbar_arrive(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_mbar_expect_tx(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_mbar_complete_tx(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_mbar_wait(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_mbar_inval(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_mod_mbar(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_mbar(EmuInsn *in, EmuParse *p);

/* tma.c */
int emu_op_tma(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cp_async(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cp_async_commit(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_cp_async_wait(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_mod_cp_async(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_cp_async(EmuInsn *in, EmuParse *p);
int emu_op_bulk_copy(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_bulk_commit(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_bulk_wait(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_mod_tma(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_tma(EmuInsn *in, EmuParse *p);
int emu_chk_bulk_copy(EmuInsn *in, EmuParse *p);
int emu_op_st_async(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_chk_st_async(EmuInsn *in, EmuParse *p);
/* completion of a queued TMA / bulk copy (its EmuAsync.done) */
int emu_tma_complete(EmuCta *c, EmuAsync *a);

/* wgmma.c */
int emu_wop_wgmma_fence(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_wgmma_mma(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_wgmma_commit(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_wgmma_wait(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_mod_wgmma(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_wgmma(EmuInsn *in, EmuParse *p);
int emu_chk_wgmma_wait(EmuInsn *in, EmuParse *p);
void emu_wgmma_drop(EmuCta *c, EmuWarp *w);
/* one K step of Hopper's wgmma datapath keeping `bits` fraction bits below the
 * largest term (docs/hardware.md, "wgmma accumulation"); ea/eb: the inputs' exponents */
float emu_hopper_step(float d, const float *a, const int *ea, const float *b, const int *eb, uint32_t K,
                      int bits);

/* tcgen05.c, tc_mma.c, tc_cp.c */
int emu_wop_tc_alloc(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_tc_dealloc(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_tc_relinquish(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_tc_ld(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_tc_st(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_wop_tc_wait(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);
int emu_op_tc_mma(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_tc_commit(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_tc_cp(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_tc_shift(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_op_tc_fence(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_mod_tc(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_tc_ld(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_tc_st(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_tc_mma(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_tc_commit(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_tc_cp(EmuInsn *in, const char *m, EmuParse *p);
int emu_mod_tc_shift(EmuInsn *in, const char *m, EmuParse *p);
int emu_chk_tc_ldst(EmuInsn *in, EmuParse *p);
int emu_chk_tc_mma(EmuInsn *in, EmuParse *p);
int emu_chk_tc_alloc(EmuInsn *in, EmuParse *p);
int emu_chk_tc_cp(EmuInsn *in, EmuParse *p);
int emu_chk_tc_shift(EmuInsn *in, EmuParse *p);
int emu_tc_complete(EmuCta *c, EmuAsync *a);
/* Frees what a tcgen05 op holds besides a->data (completed or not); other
 * kinds hold nothing more. */
void emu_tc_drop(EmuAsync *a);
/* tcgen05.ld/st in flight when a thread exits or waits */
int emu_tc_land(EmuCta *c, EmuWarp *w, int st_only);
/* A thread's exit: a hazard if it has cp.async copies it never waited for. */
int emu_cp_async_exit(EmuCta *c, EmuThread *t);

#endif
