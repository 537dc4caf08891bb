/* The opcode table and the modifier vocabulary of the emulator.
 *
 * An opcode as written (`mbarrier.try_wait.parity.shared::cta.b64`) is split
 * at dots; the longest leading run of components that names a row below is
 * the operation (`mbarrier.try_wait`), the rest are modifiers. A row's `mod`
 * hook takes the modifiers only that operation knows (`parity`); every other
 * modifier must be in the generic vocabulary and in a category the row
 * allows. So anything the emulator does not implement fails at load with the
 * PTX line, never runs as a no-op. */
#include <stdio.h>
#include <string.h>

#include "emu.h"
#include "ops.h"

const EmuTypeInfo emu_types[T_COUNT] = {
	[T_NONE] = {"", 0, TK_NONE},
	[T_PRED] = {"pred", 1, TK_PRED},
	[T_B8] = {"b8", 8, TK_BITS},       [T_B16] = {"b16", 16, TK_BITS},
	[T_B32] = {"b32", 32, TK_BITS},    [T_B64] = {"b64", 64, TK_BITS},
	[T_B128] = {"b128", 128, TK_BITS},
	[T_U8] = {"u8", 8, TK_UINT},       [T_U16] = {"u16", 16, TK_UINT},
	[T_U32] = {"u32", 32, TK_UINT},    [T_U64] = {"u64", 64, TK_UINT},
	[T_S8] = {"s8", 8, TK_SINT},       [T_S16] = {"s16", 16, TK_SINT},
	[T_S32] = {"s32", 32, TK_SINT},    [T_S64] = {"s64", 64, TK_SINT},
	[T_F16] = {"f16", 16, TK_FLOAT},   [T_F16X2] = {"f16x2", 32, TK_FLOAT},
	[T_BF16] = {"bf16", 16, TK_FLOAT}, [T_BF16X2] = {"bf16x2", 32, TK_FLOAT},
	[T_F32] = {"f32", 32, TK_FLOAT},   [T_F64] = {"f64", 64, TK_FLOAT},
	[T_TF32] = {"tf32", 32, TK_FLOAT},
	[T_E4M3] = {"e4m3", 8, TK_FLOAT},  [T_E5M2] = {"e5m2", 8, TK_FLOAT},
	[T_E4M3X2] = {"e4m3x2", 16, TK_FLOAT}, [T_E5M2X2] = {"e5m2x2", 16, TK_FLOAT},
	[T_F32X2] = {"f32x2", 64, TK_FLOAT},
};

EmuType
emu_type_find(const char *name)
{
	for (int i = 1; i < T_COUNT; i++)
		if (strcmp(emu_types[i].name, name) == 0)
			return (EmuType)i;
	return T_NONE;
}

/* ---- the opcode table ----------------------------------------------------
 *
 *  name        the operation (dotted prefix of the opcode)
 *  exec        per-thread semantics (NULL: collective only)
 *  wexec       collective semantics, run once every lane of the warp (or of
 *              the membermask) has arrived with the same operands
 *  mod         hook for modifiers only this operation knows
 *  check       operand checks and decoding into EmuInsn.aux after parsing
 *  cats        generic modifier categories it accepts
 *  min, max    operand counts
 *  flags       OPF_*: COLL collective, SINGLE single-thread issue,
 *              MEMBERMASK collective over a mask operand, BRANCH takes a
 *              label, FIMM immediates take the float type of the instruction
 */
#define ALU (CAT_TYPE | CAT_RND | CAT_FTZ | CAT_SAT | CAT_CC)
#define MEMC (CAT_TYPE | CAT_SPACE | CAT_VEC | CAT_ORDER | CAT_SCOPE | CAT_CACHE)

static const EmuOpDef optab[] = {
	/* name, exec, wexec, mod, check, cats, min, max, flags */
	/* ops_alu.c: PTX ISA §9.7.1 integer, §9.7.3 float, §9.7.7 logic, §9.7.6 comparison */
	{"add", emu_op_add, NULL, NULL, emu_chk_alu, ALU, 3, 3, OPF_FIMM},
	{"sub", emu_op_sub, NULL, NULL, emu_chk_alu, ALU, 3, 3, OPF_FIMM},
	{"mul", emu_op_mul, NULL, NULL, emu_chk_alu, ALU | CAT_MUL, 3, 3, OPF_FIMM},
	{"mad", emu_op_mad, NULL, NULL, emu_chk_alu, ALU | CAT_MUL, 4, 4, OPF_FIMM},
	{"fma", emu_op_fma, NULL, NULL, emu_chk_alu, ALU, 4, 4, OPF_FIMM},
	{"div", emu_op_div, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 3, 3, OPF_FIMM},
	{"rem", emu_op_rem, NULL, NULL, emu_chk_alu, CAT_TYPE, 3, 3, 0},
	{"min", emu_op_min, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 3, 3, OPF_FIMM},
	{"max", emu_op_max, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 3, 3, OPF_FIMM},
	{"abs", emu_op_abs, NULL, NULL, emu_chk_alu, ALU, 2, 2, OPF_FIMM},
	{"neg", emu_op_neg, NULL, NULL, emu_chk_alu, ALU, 2, 2, OPF_FIMM},
	{"and", emu_op_and, NULL, NULL, emu_chk_alu, CAT_TYPE, 3, 3, 0},
	{"or", emu_op_or, NULL, NULL, emu_chk_alu, CAT_TYPE, 3, 3, 0},
	{"xor", emu_op_xor, NULL, NULL, emu_chk_alu, CAT_TYPE, 3, 3, 0},
	{"not", emu_op_not, NULL, NULL, emu_chk_alu, CAT_TYPE, 2, 2, 0},
	{"cnot", emu_op_cnot, NULL, NULL, emu_chk_alu, CAT_TYPE, 2, 2, 0},
	{"shl", emu_op_shl, NULL, NULL, emu_chk_alu, CAT_TYPE, 3, 3, 0},
	{"shr", emu_op_shr, NULL, NULL, emu_chk_alu, CAT_TYPE, 3, 3, 0},
	{"popc", emu_op_popc, NULL, NULL, emu_chk_alu, CAT_TYPE, 2, 2, 0},
	{"clz", emu_op_clz, NULL, NULL, emu_chk_alu, CAT_TYPE, 2, 2, 0},
	{"brev", emu_op_brev, NULL, NULL, emu_chk_alu, CAT_TYPE, 2, 2, 0},
	{"bfe", emu_op_bfe, NULL, NULL, emu_chk_alu, CAT_TYPE, 4, 4, 0},
	{"bfi", emu_op_bfi, NULL, NULL, emu_chk_alu, CAT_TYPE, 5, 5, 0},
	{"prmt", emu_op_prmt, NULL, NULL, emu_chk_alu, CAT_TYPE, 4, 4, 0},
	{"lop3", emu_op_lop3, NULL, NULL, emu_chk_alu, CAT_TYPE, 5, 5, 0},
	{"setp", emu_op_setp, NULL, NULL, emu_chk_setp, CAT_TYPE | CAT_CMP | CAT_BOOL | CAT_FTZ, 3, 4, OPF_FIMM},
	{"selp", emu_op_selp, NULL, NULL, emu_chk_alu, CAT_TYPE, 4, 4, OPF_FIMM},
	{"rcp", emu_op_rcp, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"sqrt", emu_op_sqrt, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"rsqrt", emu_op_rsqrt, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"ex2", emu_op_ex2, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"lg2", emu_op_lg2, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"sin", emu_op_sin, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"cos", emu_op_cos, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"tanh", emu_op_tanh, NULL, NULL, emu_chk_alu, ALU | CAT_APPROX, 2, 2, OPF_FIMM},
	{"copysign", emu_op_copysign, NULL, NULL, emu_chk_alu, CAT_TYPE, 3, 3, OPF_FIMM},
	/* ops_cvt.c: §9.7.9.21 cvt */
	{"cvt", emu_op_cvt, NULL, emu_mod_cvt, emu_chk_cvt, ALU, 2, 3, OPF_FIMM},
	/* ops_mem.c: §9.7.9.1 mov, §9.7.9.8 ld, §9.7.9.10 st, §9.7.9.19 cvta, §9.7.13.5 atom */
	{"mov", emu_op_mov, NULL, NULL, emu_chk_mov, CAT_TYPE, 2, 2, OPF_FIMM},
	{"ld", emu_op_ld, NULL, emu_mod_ld, emu_chk_ldst, MEMC, 2, 3, 0},
	{"ldu", emu_op_ld, NULL, emu_mod_ld, emu_chk_ldst, MEMC, 2, 2, 0},
	{"st", emu_op_st, NULL, emu_mod_ld, emu_chk_ldst, MEMC, 2, 3, OPF_SCHED},
	{"cvta", emu_op_cvta, NULL, emu_mod_cvta, NULL, CAT_TYPE | CAT_SPACE, 2, 2, 0},
	{"atom", emu_op_atom, NULL, emu_mod_atom, NULL, MEMC, 3, 4, OPF_SCHED},
	{"red", emu_op_atom, NULL, emu_mod_atom, NULL, MEMC, 2, 2, OPF_SCHED},
	{"prefetch", emu_op_nop, NULL, emu_mod_prefetch, NULL, CAT_SPACE, 1, 1, 0},
	{"prefetchu", emu_op_nop, NULL, emu_mod_prefetch, NULL, 0, 1, 1, 0},
	{"createpolicy", emu_op_createpolicy, NULL, emu_mod_prefetch, NULL, CAT_TYPE, 2, 3, 0},
	{"nanosleep", emu_op_nop, NULL, NULL, NULL, CAT_TYPE, 1, 1, OPF_YIELD},
	{"pmevent", emu_op_nop, NULL, NULL, NULL, 0, 1, 1, 0},
	/* ops_ctl.c: §9.7.12 control flow, §9.7.13 synchronization */
	{"bra", emu_op_bra, NULL, NULL, NULL, CAT_UNI, 1, 1, OPF_BRANCH},
	{"ret", emu_op_ret, NULL, NULL, NULL, CAT_UNI, 0, 0, 0},
	{"exit", emu_op_ret, NULL, NULL, NULL, 0, 0, 0, 0},
	{"trap", emu_op_trap, NULL, NULL, NULL, 0, 0, 0, 0},
	{"bar", emu_op_bar, NULL, emu_mod_bar, NULL, CAT_SYNC, 1, 3, OPF_SCHED},
	{"barrier", emu_op_bar, NULL, emu_mod_bar, NULL, CAT_SYNC, 0, 3, OPF_SCHED},
	/* cluster.c: §9.7.13.2 barrier.cluster, §9.7.9.20 mapa */
	{"barrier.cluster.arrive", emu_op_cluster_arrive, NULL, NULL, NULL, CAT_SYNC | CAT_ORDER, 0, 0, OPF_SCHED},
	{"barrier.cluster.wait", emu_op_cluster_wait, NULL, NULL, NULL, CAT_SYNC | CAT_ORDER, 0, 0, 0},
	{"mapa", emu_op_mapa, NULL, NULL, emu_chk_mapa, CAT_SPACE | CAT_TYPE, 3, 3, 0},
	{"bar.warp.sync", NULL, emu_wop_bar_warp, NULL, NULL, 0, 1, 1, OPF_COLL | OPF_MEMBERMASK},
	{"membar", emu_op_fence, NULL, emu_mod_fence, NULL, CAT_SCOPE, 0, 0, 0},
	{"fence", emu_op_fence, NULL, emu_mod_fence, NULL, CAT_ORDER | CAT_SCOPE, 0, 0, 0},
	{"activemask", emu_op_activemask, NULL, NULL, NULL, CAT_TYPE, 1, 1, 0},
	{"elect", NULL, emu_wop_elect, emu_mod_elect, NULL, CAT_SYNC, 2, 2, OPF_COLL | OPF_MEMBERMASK},
	{"shfl", NULL, emu_wop_shfl, emu_mod_shfl, NULL, CAT_SYNC | CAT_TYPE, 4, 5, OPF_COLL | OPF_MEMBERMASK},
	{"vote", NULL, emu_wop_vote, emu_mod_vote, NULL, CAT_SYNC | CAT_TYPE, 3, 3, OPF_COLL | OPF_MEMBERMASK},
	{"setmaxnreg", NULL, emu_wop_setmaxnreg, NULL, emu_chk_setmaxnreg, CAT_SYNC | CAT_TYPE | CAT_INCDEC, 1, 1, OPF_COLL},
	/* mbar.c: §9.7.13.15 mbarrier */
	{"mbarrier.init", emu_op_mbar_init, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE, 2, 2, 0},
	{"mbarrier.arrive", emu_op_mbar_arrive, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE | CAT_ORDER | CAT_SCOPE, 2, 3, OPF_SCHED},
	{"mbarrier.arrive_drop", emu_op_mbar_arrive, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE | CAT_ORDER | CAT_SCOPE, 2, 3, OPF_SCHED},
	{"mbarrier.expect_tx", emu_op_mbar_expect_tx, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE | CAT_ORDER | CAT_SCOPE, 2, 2, OPF_SCHED},
	{"mbarrier.complete_tx", emu_op_mbar_complete_tx, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE | CAT_ORDER | CAT_SCOPE, 2, 2, 0},
	{"mbarrier.try_wait", emu_op_mbar_wait, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE | CAT_ORDER | CAT_SCOPE, 3, 4, 0},
	{"mbarrier.test_wait", emu_op_mbar_wait, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE | CAT_ORDER | CAT_SCOPE, 3, 3, 0},
	{"mbarrier.inval", emu_op_mbar_inval, NULL, emu_mod_mbar, emu_chk_mbar, CAT_SPACE | CAT_TYPE, 1, 1, 0},
	/* cpasync.c: §9.7.9.24.3-6 cp.async (non-bulk) */
	{"cp.async", emu_op_cp_async, NULL, emu_mod_cp_async, emu_chk_cp_async, 0, 3, 4, OPF_SCHED},
	{"cp.async.commit_group", emu_op_cp_async_commit, NULL, NULL, NULL, 0, 0, 0, 0},
	{"cp.async.wait_group", emu_op_cp_async_wait, NULL, NULL, NULL, 0, 1, 1, 0},
	{"cp.async.wait_all", emu_op_cp_async_wait, NULL, NULL, NULL, 0, 0, 0, 0},
	/* tma.c: §9.7.9.25 cp.async.bulk, §9.7.9.26 cp.async.bulk.tensor */
	{"cp.async.bulk.tensor", emu_op_tma, NULL, emu_mod_tma, emu_chk_tma, CAT_CACHE, 2, 5, OPF_SCHED},
	{"cp.async.bulk.prefetch.tensor", emu_op_nop, NULL, emu_mod_tma, NULL, CAT_CACHE, 1, 2, 0},
	{"cp.async.bulk.prefetch", emu_op_nop, NULL, emu_mod_tma, NULL, CAT_CACHE, 2, 3, 0},
	{"cp.async.bulk.commit_group", emu_op_bulk_commit, NULL, NULL, NULL, 0, 0, 0, OPF_SCHED},
	{"cp.async.bulk.wait_group", emu_op_bulk_wait, NULL, emu_mod_tma, NULL, 0, 1, 1, 0},
	{"cp.async.bulk", emu_op_bulk_copy, NULL, emu_mod_tma, emu_chk_bulk_copy, CAT_CACHE, 3, 5, OPF_SCHED},
	/* tma.c: st.async, a store from registers completing on an mbarrier */
	{"st.async", emu_op_st_async, NULL, emu_mod_tma, emu_chk_st_async, CAT_TYPE | CAT_VEC | CAT_ORDER, 3, 3, OPF_SCHED},
	/* wgmma.c: §9.7.15 (sm_90a) */
	{"wgmma.fence", NULL, emu_wop_wgmma_fence, NULL, NULL, CAT_SYNC, 0, 0, OPF_COLL},
	{"wgmma.mma_async", NULL, emu_wop_wgmma_mma, emu_mod_wgmma, emu_chk_wgmma, CAT_SYNC, 5, 9, OPF_COLL},
	{"wgmma.commit_group", NULL, emu_wop_wgmma_commit, NULL, NULL, CAT_SYNC, 0, 0, OPF_COLL},
	{"wgmma.wait_group", NULL, emu_wop_wgmma_wait, NULL, emu_chk_wgmma_wait, CAT_SYNC, 1, 1, OPF_COLL},
	/* tcgen05.c, tc_mma.c, tc_cp.c: §9.7.16 (sm_100a) */
	{"tcgen05.alloc", NULL, emu_wop_tc_alloc, emu_mod_tc, emu_chk_tc_alloc, CAT_SYNC | CAT_SPACE | CAT_TYPE, 2, 2, OPF_COLL},
	{"tcgen05.dealloc", NULL, emu_wop_tc_dealloc, emu_mod_tc, emu_chk_tc_alloc, CAT_SYNC | CAT_TYPE, 2, 2, OPF_COLL},
	{"tcgen05.relinquish_alloc_permit", NULL, emu_wop_tc_relinquish, emu_mod_tc, NULL, CAT_SYNC, 0, 0, OPF_COLL},
	{"tcgen05.ld", NULL, emu_wop_tc_ld, emu_mod_tc_ld, emu_chk_tc_ldst, CAT_SYNC | CAT_TYPE, 2, 3, OPF_COLL},
	{"tcgen05.st", NULL, emu_wop_tc_st, emu_mod_tc_st, emu_chk_tc_ldst, CAT_SYNC | CAT_TYPE, 2, 3, OPF_COLL},
	{"tcgen05.wait::ld", NULL, emu_wop_tc_wait, NULL, NULL, CAT_SYNC, 0, 0, OPF_COLL},
	{"tcgen05.wait::st", NULL, emu_wop_tc_wait, NULL, NULL, CAT_SYNC, 0, 0, OPF_COLL},
	{"tcgen05.mma", emu_op_tc_mma, NULL, emu_mod_tc_mma, emu_chk_tc_mma, 0, 4, 7, OPF_SINGLE},
	{"tcgen05.commit", emu_op_tc_commit, NULL, emu_mod_tc_commit, NULL, CAT_SPACE | CAT_TYPE, 1, 2, OPF_SINGLE | OPF_SCHED},
	{"tcgen05.cp", emu_op_tc_cp, NULL, emu_mod_tc_cp, emu_chk_tc_cp, 0, 2, 2, OPF_SINGLE},
	{"tcgen05.shift", emu_op_tc_shift, NULL, emu_mod_tc_shift, emu_chk_tc_shift, 0, 1, 1, OPF_SINGLE},
	{"tcgen05.fence::before_thread_sync", emu_op_tc_fence, NULL, NULL, NULL, 0, 0, 0, 0},
	{"tcgen05.fence::after_thread_sync", emu_op_tc_fence, NULL, NULL, NULL, 0, 0, 0, 0},
};

const EmuOpDef *
emu_op_find(char **comps, int ncomps, int *used)
{
	char name[256];
	for (int k = ncomps < 5 ? ncomps : 5; k >= 1; k--) {
		size_t at = 0;
		name[0] = 0;
		for (int i = 0; i < k; i++) {
			size_t l = strlen(comps[i]);
			if (at + l + 2 >= sizeof name)
				return NULL;
			if (i)
				name[at++] = '.';
			memcpy(name + at, comps[i], l + 1);
			at += l;
		}
		for (size_t i = 0; i < sizeof optab / sizeof optab[0]; i++)
			if (strcmp(optab[i].name, name) == 0) {
				*used = k;
				return &optab[i];
			}
	}
	return NULL;
}

/* ---- the generic modifier vocabulary --------------------------------------
 *
 *  name   as written after a dot
 *  cat    CAT_*: the row must allow it
 *  field  which EmuInsn field it sets
 *  value  the value
 */
enum { F_TYPE, F_CMP, F_BOP, F_RND, F_FTZ, F_SAT, F_APPROX, F_MUL, F_SPACE, F_VEC, F_SYNC,
       F_ALIGNED, F_ORDER, F_SCOPE, F_NONE, F_SUB, F_UNI };

static const struct {
	const char *name;
	uint32_t cat;
	uint8_t field;
	uint8_t value;
} vocab[] = {
	{"eq", CAT_CMP, F_CMP, CMP_EQ}, {"ne", CAT_CMP, F_CMP, CMP_NE},
	{"lt", CAT_CMP, F_CMP, CMP_LT}, {"le", CAT_CMP, F_CMP, CMP_LE},
	{"gt", CAT_CMP, F_CMP, CMP_GT}, {"ge", CAT_CMP, F_CMP, CMP_GE},
	{"lo", CAT_CMP | CAT_MUL, F_CMP, CMP_LO}, {"ls", CAT_CMP, F_CMP, CMP_LS},
	{"hi", CAT_CMP | CAT_MUL, F_CMP, CMP_HI}, {"hs", CAT_CMP, F_CMP, CMP_HS},
	{"equ", CAT_CMP, F_CMP, CMP_EQU}, {"neu", CAT_CMP, F_CMP, CMP_NEU},
	{"ltu", CAT_CMP, F_CMP, CMP_LTU}, {"leu", CAT_CMP, F_CMP, CMP_LEU},
	{"gtu", CAT_CMP, F_CMP, CMP_GTU}, {"geu", CAT_CMP, F_CMP, CMP_GEU},
	{"num", CAT_CMP, F_CMP, CMP_NUM}, {"nan", CAT_CMP, F_CMP, CMP_NAN},
	{"and", CAT_BOOL, F_BOP, BOP_AND}, {"or", CAT_BOOL, F_BOP, BOP_OR},
	{"xor", CAT_BOOL, F_BOP, BOP_XOR},
	{"rn", CAT_RND, F_RND, RND_RN}, {"rz", CAT_RND, F_RND, RND_RZ},
	{"rm", CAT_RND, F_RND, RND_RM}, {"rp", CAT_RND, F_RND, RND_RP},
	{"rni", CAT_RND, F_RND, RND_RNI}, {"rzi", CAT_RND, F_RND, RND_RZI},
	{"rmi", CAT_RND, F_RND, RND_RMI}, {"rpi", CAT_RND, F_RND, RND_RPI},
	{"rna", CAT_RND, F_RND, RND_RNA},
	{"ftz", CAT_FTZ, F_FTZ, 1}, {"sat", CAT_SAT, F_SAT, 1}, {"satfinite", CAT_SAT, F_SAT, 2},
	{"approx", CAT_APPROX, F_APPROX, 1}, {"full", CAT_APPROX, F_APPROX, 2},
	{"wide", CAT_MUL, F_MUL, MUL_WIDE},
	{"param", CAT_SPACE, F_SPACE, SPACE_PARAM}, {"global", CAT_SPACE, F_SPACE, SPACE_GLOBAL},
	{"shared", CAT_SPACE, F_SPACE, SPACE_SHARED}, {"shared::cta", CAT_SPACE, F_SPACE, SPACE_SHARED},
	{"shared::cluster", CAT_SPACE, F_SPACE, SPACE_CLUSTER}, {"local", CAT_SPACE, F_SPACE, SPACE_LOCAL},
	{"const", CAT_SPACE, F_SPACE, SPACE_CONST},
	{"v2", CAT_VEC, F_VEC, 2}, {"v4", CAT_VEC, F_VEC, 4}, {"v8", CAT_VEC, F_VEC, 8},
	{"sync", CAT_SYNC, F_SYNC, 1}, {"aligned", CAT_SYNC, F_ALIGNED, 1},
	{"weak", CAT_ORDER, F_ORDER, 1}, {"volatile", CAT_ORDER, F_ORDER, 2},
	{"relaxed", CAT_ORDER, F_ORDER, 3}, {"acquire", CAT_ORDER, F_ORDER, 4},
	{"release", CAT_ORDER, F_ORDER, 5}, {"acq_rel", CAT_ORDER, F_ORDER, 6},
	{"sc", CAT_ORDER, F_ORDER, 7}, {"mmio", CAT_ORDER, F_ORDER, 8},
	{"cta", CAT_SCOPE, F_SCOPE, 1}, {"cluster", CAT_SCOPE, F_SCOPE, 2},
	{"gpu", CAT_SCOPE, F_SCOPE, 3}, {"sys", CAT_SCOPE, F_SCOPE, 4},
	{"ca", CAT_CACHE, F_NONE, 0}, {"cg", CAT_CACHE, F_NONE, 0}, {"cs", CAT_CACHE, F_NONE, 0},
	{"lu", CAT_CACHE, F_NONE, 0}, {"cv", CAT_CACHE, F_NONE, 0}, {"wb", CAT_CACHE, F_NONE, 0},
	{"wt", CAT_CACHE, F_NONE, 0}, {"nc", CAT_CACHE, F_NONE, 0},
	{"L2::cache_hint", CAT_CACHE, F_NONE, 0}, {"L1::no_allocate", CAT_CACHE, F_NONE, 0},
	{"L1::evict_normal", CAT_CACHE, F_NONE, 0}, {"L1::evict_first", CAT_CACHE, F_NONE, 0},
	{"L1::evict_last", CAT_CACHE, F_NONE, 0}, {"L1::evict_unchanged", CAT_CACHE, F_NONE, 0},
	{"L2::evict_normal", CAT_CACHE, F_NONE, 0}, {"L2::evict_first", CAT_CACHE, F_NONE, 0},
	{"L2::evict_last", CAT_CACHE, F_NONE, 0}, {"L2::64B", CAT_CACHE, F_NONE, 0},
	{"L2::128B", CAT_CACHE, F_NONE, 0}, {"L2::256B", CAT_CACHE, F_NONE, 0},
	{"uni", CAT_UNI, F_UNI, 1},
	{"inc", CAT_INCDEC, F_SUB, 1}, {"dec", CAT_INCDEC, F_SUB, 2},
	{"cc", CAT_CC, F_NONE, 0},
};

int
emu_mod_generic(EmuInsn *in, const char *m, uint32_t cats, char *why, size_t n)
{
	EmuType ty = emu_type_find(m);
	if (ty != T_NONE) {
		if (!(cats & CAT_TYPE)) {
			snprintf(why, n, "type .%s is not valid here", m);
			return -1;
		}
		if (in->ntypes == 3) {
			snprintf(why, n, "more than three types");
			return -1;
		}
		in->t[in->ntypes++] = (uint8_t)ty;
		return 1;
	}
	for (size_t i = 0; i < sizeof vocab / sizeof vocab[0]; i++) {
		if (strcmp(vocab[i].name, m) != 0)
			continue;
		uint32_t cat = vocab[i].cat;
		if (!(cats & cat)) {
			snprintf(why, n, "modifier .%s is not valid here", m);
			return -1;
		}
		/* lo/hi: a comparison for setp, a half for mul/mad */
		if ((cat & CAT_MUL) && (cats & CAT_MUL)) {
			in->mul = strcmp(m, "lo") == 0 ? MUL_LO : strcmp(m, "hi") == 0 ? MUL_HI : MUL_WIDE;
			return 1;
		}
		uint8_t v = vocab[i].value;
		switch (vocab[i].field) {
		case F_CMP: in->cmp = v; break;
		case F_BOP: in->bop = v; break;
		case F_RND: in->rnd = v; break;
		case F_FTZ: in->ftz = v; break;
		case F_SAT: in->sat = v; break;
		case F_APPROX: in->approx = v; break;
		case F_MUL: in->mul = v; break;
		case F_SPACE: in->space = v; break;
		case F_VEC: in->vec = v; break;
		case F_SYNC: in->sync = v; break;
		case F_ALIGNED: in->aligned = v; break;
		case F_ORDER: in->order = v; break;
		case F_SCOPE: in->scope = v; break;
		case F_SUB: in->sub = v; break;
		case F_UNI: in->uni = v; break;
		default: break;
		}
		return 1;
	}
	return 0;
}
