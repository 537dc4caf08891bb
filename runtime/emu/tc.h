/* Internals shared by the tcgen05 files: tcgen05.c (modifiers, alloc, ld/st,
 * wait, fence, commit), tc_mma.c (mma) and tc_cp.c (cp, shift).
 *
 * EmuInsn.aux of the tcgen05 rows:
 *   ld/st   [0] shape (SH_*)  [1] .num  [2] registers per thread
 *           [3] .pack::16b (ld) / .unpack::16b (st)
 *   mma     [0] kind (KIND_*)  [1] scale factors per row and MMA (1, 2, 4;
 *           0 unscaled)  [2] .block_scale  [3] .block16/.block32 as written
 *   commit  [3] .multicast::cluster  [6] .mbarrier::arrive::one
 *   cp      [0] shape (CP_*)  [1] multicast (MC_*)  [2] source format (CPF_*)
 *           [3] .b8x16
 *   shift   [0] .down
 *   all     [7] cta_group */
#ifndef KRT_EMU_TC_H
#define KRT_EMU_TC_H

#include "emu.h"

enum { TC_GROUP = 7 };
/* tcgen05.mma .collector::a::* in aux[TC_COLL] (0: none, i.e. discard) */
enum { TC_COLL = 5, TC_COLL_FILL = 1, TC_COLL_USE, TC_COLL_LASTUSE, TC_COLL_DISCARD };
enum { SH_32x32b = 1, SH_16x64b, SH_16x128b, SH_16x256b, SH_16x32bx2 };
enum { KIND_F16 = 1, KIND_TF32, KIND_F8F6F4, KIND_I8, KIND_MXF8F6F4, KIND_MXF4, KIND_MXF4NVF4 };
enum { CP_128x256b = 1, CP_4x256b, CP_128x128b, CP_64x128b, CP_32x128b };
enum { MC_NONE, MC_02_13, MC_01_23, MC_X4 };
enum { CPF_NONE, CPF_B6, CPF_B4 };

/* A modifier word of one tcgen05 row: sets aux[aux] = val. */
typedef struct TcWord {
	const char *name;
	uint8_t aux, val;
} TcWord;

/* 1 if m is in words (aux set), 0 if not, -1 on a conflicting repeat. */
int emu_tc_word(EmuInsn *in, const char *m, EmuParse *p, const TcWord *words, int n);

/* Every tcgen05 instruction of a kernel must use one cta_group (docs/hardware.md,
 * "TMEM allocation"). */
int emu_tc_group_check(EmuCta *c, EmuThread *t, const EmuInsn *in);
/* The thread's issue pipe (an async-queue agent), -1 after an error. */
int emu_tc_agent(EmuCta *c, EmuThread *t, const EmuInsn *in);
int emu_tc_agent_slot(const EmuCta *c, int agent);
/* One TMEM tag check for a tcgen05 access by t (hb.c rules, vc_tc). self:
 * the slot counted as program order (the thread, or its issue pipe). */
int emu_tc_tag_check(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuTag *tag, int self,
                     uint32_t lane, uint32_t col, const char *what);
/* Tag checks over lane quarters qmask (bit q) x columns [col0, col0+n):
 * the last write always, the last async read too when `write`. */
int emu_tc_cells_check(EmuCta *c, EmuThread *t, const EmuInsn *in, unsigned qmask,
                       uint32_t col0, uint32_t n, int self, int write, const char *what);
/* Marks those cells as written (w) or read (r) by an op of pipe slot
 * `slot` that completes with the pipe's commit number val. */
void emu_tc_cells_tag(EmuCta *c, const EmuInsn *in, int tid, unsigned qmask, uint32_t col0,
                      uint32_t n, int kind, int slot, EmuClock val, int write);
/* The idesc fields the validity table looks at (tc_idesc.c), and the
 * instruction's .cta_group (1 or 2). */
typedef struct EmuIdescFields {
	int afmt, bfmt, dfmt, nega, negb, ta;
	uint32_t M, N;
	int group;
} EmuIdescFields;
/* The kind's valid combinations of types and shape (dense, either
 * cta_group); ts: A comes from tensor memory. 0, or -1 with the field and
 * rule in why. */
int emu_tc_idesc_rules(int kind, int ts, const EmuIdescFields *f, char *why, size_t n);
/* A whole idesc as tcgen05.mma.cta_group::group would decode it (vec: scale
 * vector size of a block-scaled kind, 0 for dense). */
int emu_tc_idesc_check(uint32_t v, int kind, int vec, int ts, int group, char *why, size_t n);

/* Ops of one issue pipe that the PTX ISA does not pipeline (§9.7.16.6.2
 * "Pipelined tcgen05 instructions": only mma->mma on the same accumulator
 * and shape, cp->mma, shift->mma, shift->cp.4x256b and mma->shift are):
 * a [tcgen05-unpipelined] hazard when a cell of quarters qmask x [col0,
 * col0+n) was last written by an op of kind `kind` of this pipe (slot)
 * whose commit the issuer has not observed. acc: the writing MMA's
 * accumulator key (emu_tc_acc_key) that is pipelined, 0 for none. */
int emu_tc_pipe_check(EmuCta *c, EmuThread *t, const EmuInsn *in, unsigned qmask, uint32_t col0,
                      uint32_t n, int slot, int kind, uint32_t acc, const char *what);
/* An MMA's accumulator and shape as one key: D column, N, M. */
uint32_t emu_tc_acc_key(uint32_t dcol, uint32_t n, uint32_t m);
/* smem chunks an async tcgen05 op reads: checked at issue (ordered after
 * their writers, fence.proxy.async after generic stores), in flight until it
 * completes. */
int emu_tc_smem_issue(EmuCta *c, EmuThread *t, const EmuInsn *in, const uint32_t *chunks, int n,
                      int kind, int slot, EmuClock val, const char *what);
void emu_tc_smem_done(EmuCta *c, const uint32_t *chunks, int n);
/* Queues an op of t's issue pipe; data is freed at completion. */
int emu_tc_push(EmuCta *c, EmuThread *t, const EmuInsn *in, EmuAsyncKind kind, int agent,
                void *data);

/* An fp6/fp4 code in its 8-bit TMEM container (tc_mma.c): what tcgen05.cp's
 * .b8x16 decompression writes and an f8f6f4-family A in TMEM holds. */
uint8_t emu_tc_container(int bits, uint8_t code);

/* completions (EmuAsync.done = emu_tc_complete, tc_done.c -> these) */
int emu_tc_commit_complete(EmuCta *c, EmuAsync *q);
int emu_tc_mma_complete(EmuCta *c, EmuAsync *q);
int emu_tc_cp_complete(EmuCta *c, EmuAsync *q);
int emu_tc_shift_complete(EmuCta *c, EmuAsync *q);
/* what a queued op holds besides its data, for a launch that stops with it
 * still queued (emu_tc_drop) */
void emu_tc_mma_drop(EmuAsync *q);
void emu_tc_cp_drop(EmuAsync *q);

#endif
