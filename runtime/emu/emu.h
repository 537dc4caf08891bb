/* The emulator backend's internals: a CPU interpreter for the PTX subset kgen
 * emits (runtime/emu/README.md). One header for the decoded program, the
 * execution state of one CTA, and the functions the files of this folder
 * share. Nothing here exits; every failure is a KrtErr. */
#ifndef KRT_EMU_H
#define KRT_EMU_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "internal.h"
#include "krt.h"

/* A launch stopped by a hazard returns this code with "emu hazard [CLASS]:"
 * and the report in KrtErr.msg. A dedicated code in krt.h (KRT_EHAZARD)
 * would replace this one line. Faults (out-of-bounds, trap) are KRT_ECUDA,
 * as a failed launch on a GPU would be. */
#define EMU_EHAZARD KRT_ELOAD

/* ---- address map ---------------------------------------------------------
 * Device allocations are host buffers behind fake device addresses. The
 * generic address space is carved into windows so a generic pointer says
 * which state space it points into (PTX ISA §6.4 "Generic addressing"). */
#define EMU_GLOBAL_BASE UINT64_C(0x00007f0000000000)
#define EMU_GENERIC_SHARED UINT64_C(0x0000100000000000) /* + shared address */
#define EMU_GENERIC_PARAM UINT64_C(0x0000200000000000)  /* + param offset */
#define EMU_WINDOW_SIZE UINT64_C(0x0000000100000000)

enum {
	EMU_MAX_THREADS = 1024,
	EMU_MAX_MBAR = 128,   /* live mbarrier objects per CTA */
	EMU_MAX_AGENTS = 16,  /* threads that issue tcgen05.mma/cp/shift per CTA */
	EMU_TMEM_LANES = 128, /* docs/hardware.md, "TMEM addressing" */
	EMU_TMEM_COLS = 512,
	EMU_MAX_TMEM_ALLOCS = 16,
	EMU_MAX_CLUSTER = 16, /* CTAs per cluster (16 with the non-portable size) */
	EMU_MAX_SYNC = 16,    /* global words a cluster synchronizes through (atom .release) */
};

/* Shared addresses carry the CTA's %cluster_ctarank in bits 24-27 above
 * the offset in its shared memory, as on the H100: the address of a shared
 * variable in CTA rank r is r << 24 | offset; a shared::cluster access goes
 * to the CTA its bits name (mapa replaces them), and a shared::cta access
 * must name the executing CTA. Inside the emulator shared memory is indexed
 * by the offset alone (EMU_SMEM_LOCAL). The wgmma and tcgen05 matrix
 * descriptors hold address bits 4-17 only, so a kernel that adds a whole
 * address into one spills the rank into the next field, as the hardware
 * does (docs/hardware.md, "Shared addresses in a cluster"). */
#define EMU_SMEM_TAG(rank) ((uint32_t)(rank) << 24)
#define EMU_SMEM_RANK(a) ((int)((a) >> 24 & 0xf))
#define EMU_SMEM_LOCAL(a) ((a) & UINT32_C(0x00ffffff))

/* ---- types ------------------------------------------------------------- */

/* Instruction and register types (PTX ISA §5.2.1 "Fundamental types"). */
typedef enum EmuType {
	T_NONE,
	T_PRED,
	T_B8, T_B16, T_B32, T_B64, T_B128,
	T_U8, T_U16, T_U32, T_U64,
	T_S8, T_S16, T_S32, T_S64,
	T_F16, T_F16X2, T_BF16, T_BF16X2, T_F32, T_F64, T_TF32,
	T_E4M3, T_E5M2, T_E4M3X2, T_E5M2X2,
	T_F32X2,   /* two f32 in a .b64 register, low half first (add, sub, mul, fma; sm_100) */
	T_COUNT,
} EmuType;

typedef enum EmuTypeKind { TK_NONE, TK_PRED, TK_BITS, TK_UINT, TK_SINT, TK_FLOAT } EmuTypeKind;

typedef struct EmuTypeInfo {
	const char *name;
	int bits;
	EmuTypeKind kind;
} EmuTypeInfo;

extern const EmuTypeInfo emu_types[T_COUNT];

/* ---- decoded program ------------------------------------------------------ */

typedef enum EmuOpKind {
	OPK_NONE,
	OPK_REG,     /* reg: slot; neg: !%p */
	OPK_IMM,     /* imm: the bits (integers sign-extended, floats as bits) */
	OPK_SPECIAL, /* reg: EmuSpecial */
	OPK_SYM,     /* reg: symbol index; its address */
	OPK_LABEL,   /* imm: target pc */
	OPK_VEC,     /* {a, b, ...}: nsub operands from sub */
	OPK_MEM,     /* [base+imm] or [base, {vec}]: reg/sym base, imm offset,
	              * nsub > 0 for the tensor-map coordinate vector at sub */
	OPK_SINK,    /* _ */
	OPK_PAIR,    /* p|q: 2 operands at sub */
} EmuOpKind;

typedef struct EmuOperand {
	uint8_t kind;
	uint8_t neg;
	uint8_t fimm;  /* IMM: 1 hex float (0f/0d), 2 decimal float (imm holds double bits) */
	uint8_t pad;
	uint16_t nsub;
	int32_t reg;   /* REG slot, SPECIAL id, SYM index, MEM base reg (-1 none) */
	int32_t sym;   /* MEM: symbol base (-1 none) */
	int32_t sub;
	int64_t imm;
} EmuOperand;

typedef enum EmuSpecial {
	SP_TID_X, SP_TID_Y, SP_TID_Z,
	SP_NTID_X, SP_NTID_Y, SP_NTID_Z,
	SP_CTAID_X, SP_CTAID_Y, SP_CTAID_Z,
	SP_NCTAID_X, SP_NCTAID_Y, SP_NCTAID_Z,
	SP_LANEID, SP_WARPID, SP_NWARPID, SP_SMID, SP_NSMID,
	SP_CLOCK, SP_CLOCK64, SP_GLOBALTIMER,
	SP_LANEMASK_EQ, SP_LANEMASK_LT, SP_LANEMASK_LE, SP_LANEMASK_GT, SP_LANEMASK_GE,
	SP_CLUSTER_CTARANK, SP_CLUSTER_NCTARANK, SP_IS_EXPLICIT_CLUSTER,
	SP_CLUSTERID_X, SP_CLUSTERID_Y, SP_CLUSTERID_Z,
	SP_NCLUSTERID_X, SP_NCLUSTERID_Y, SP_NCLUSTERID_Z,
	SP_CLUSTER_CTAID_X, SP_CLUSTER_CTAID_Y, SP_CLUSTER_CTAID_Z,
	SP_CLUSTER_NCTAID_X, SP_CLUSTER_NCTAID_Y, SP_CLUSTER_NCTAID_Z,
	SP_DYN_SMEM, SP_TOTAL_SMEM,
	SP_COUNT,
} EmuSpecial;

typedef enum EmuSpace {
	SPACE_GENERIC,
	SPACE_PARAM,
	SPACE_SHARED,  /* .shared, .shared::cta */
	SPACE_CLUSTER, /* .shared::cluster (one CTA per cluster: same window) */
	SPACE_GLOBAL,
	SPACE_LOCAL,
	SPACE_CONST,
} EmuSpace;

typedef struct EmuSym {
	char name[64];
	EmuSpace space;
	uint32_t addr;  /* param: offset in the param buffer; shared: window address */
	uint32_t size;  /* bytes; 0 for the dynamic extern array */
	uint32_t align;
	EmuType type;   /* param: the declared type (.b8 arrays: T_B8) */
	int is_entry_param;
	int dynamic;    /* the extern .shared array: the dynamic smem */
} EmuSym;

typedef struct EmuReg {
	char name[24];
	EmuType type;
} EmuReg;

typedef struct EmuInsn EmuInsn;
typedef struct EmuCta EmuCta;
typedef struct EmuThread EmuThread;
typedef struct EmuWarp EmuWarp;
typedef struct EmuOpDef EmuOpDef;

/* What an exec function tells the interpreter. */
enum {
	EMU_NEXT = 0,  /* pc + 1 */
	EMU_JUMP = 1,  /* the function set pc */
	EMU_BLOCK = 2, /* not done: run the same instruction again when woken */
	EMU_EXIT = 3,
	EMU_YIELD = 4, /* run_thread: gave way at a scheduling point (seeded runs) */
	EMU_STOP = -1, /* error or hazard recorded in the CTA */
};

typedef int (*EmuExecFn)(EmuCta *c, EmuThread *t, const EmuInsn *in);
/* Warp collectives run once all lanes `lanes` have arrived. */
typedef int (*EmuWarpFn)(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes);

/* Flags of the opcode table (optab.c). */
enum {
	OPF_COLL = 1 << 0,      /* warp collective: rendezvous before wexec */
	OPF_SINGLE = 1 << 1,    /* single-thread semantics: one issue per executing thread
	                         * (tcgen05.mma/cp/shift/commit, PTX ISA §9.7.16.5) */
	OPF_MEMBERMASK = 1 << 2,/* collective over a membermask operand (elect, shfl, vote) */
	OPF_BRANCH = 1 << 3,
	OPF_FIMM = 1 << 4,      /* immediates take the instruction's (float) type */
	OPF_SCHED = 1 << 5,     /* publishes to other threads: with KRT_EMU_SEED the
	                         * scheduler may switch warps right after it */
	OPF_YIELD = 1 << 6,     /* the thread gives way once it has executed it (nanosleep:
	                         * a loop polling global memory lets the others run) */
};

typedef struct EmuParse EmuParse;

struct EmuOpDef {
	const char *name;  /* dotted prefix, e.g. "mbarrier.try_wait" */
	EmuExecFn exec;    /* per thread (NULL for pure collectives) */
	EmuWarpFn wexec;   /* collective part */
	/* Consumes op-specific modifiers (returns 1 if it took `m`, 0 if the
	 * generic vocabulary should try, -1 after setting an error). */
	int (*mod)(EmuInsn *in, const char *m, EmuParse *p);
	/* Checks operands and fills aux after the whole line is parsed. */
	int (*check)(EmuInsn *in, EmuParse *p);
	uint32_t cats;     /* generic modifier categories allowed (EMU_CAT_*) */
	uint8_t min_ops, max_ops;
	uint16_t flags;
};

/* Generic modifier categories. */
enum {
	CAT_TYPE = 1 << 0, CAT_CMP = 1 << 1, CAT_BOOL = 1 << 2, CAT_RND = 1 << 3,
	CAT_FTZ = 1 << 4, CAT_SAT = 1 << 5, CAT_APPROX = 1 << 6, CAT_MUL = 1 << 7,
	CAT_SPACE = 1 << 8, CAT_VEC = 1 << 9, CAT_SYNC = 1 << 10, CAT_ORDER = 1 << 11,
	CAT_SCOPE = 1 << 12, CAT_CACHE = 1 << 13, CAT_SHFL = 1 << 14, CAT_VOTE = 1 << 15,
	CAT_INCDEC = 1 << 16, CAT_UNI = 1 << 17, CAT_CC = 1 << 18,
};

enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_LO, CMP_LS, CMP_HI, CMP_HS,
       CMP_EQU, CMP_NEU, CMP_LTU, CMP_LEU, CMP_GTU, CMP_GEU, CMP_NUM, CMP_NAN };
enum { BOP_NONE, BOP_AND, BOP_OR, BOP_XOR };
enum { RND_NONE, RND_RN, RND_RZ, RND_RM, RND_RP, RND_RNI, RND_RZI, RND_RMI, RND_RPI, RND_RNA };
enum { MUL_NONE, MUL_LO, MUL_HI, MUL_WIDE };

struct EmuInsn {
	const EmuOpDef *def;
	int line;          /* 1-based PTX line */
	int32_t guard;     /* predicate slot, -1 none */
	uint8_t guard_neg;
	uint8_t ntypes;
	uint8_t t[3];      /* types in the order written (cvt: dst, src) */
	uint8_t cmp, bop, rnd, mul, space, vec;
	uint8_t ftz, sat, approx, sync, aligned, uni;
	uint8_t sub;       /* op-specific sub-operation (shfl mode, vote mode, inc/dec, ...) */
	uint8_t order, scope;
	int32_t op, nop;   /* operand pool range */
	int32_t single;    /* OPF_SINGLE: index of this instruction among them, else -1 */
	uint32_t aux[8];   /* op-specific decoded fields (see each op file) */
};

typedef struct EmuProgram {
	char entry[128];
	int target_cc;
	int ptx_version;     /* major*10+minor */
	EmuInsn *insn;
	int ninsn;
	EmuOperand *ops;
	int nops;
	EmuSym *sym;
	int nsym;
	EmuReg *reg;
	int nregs;
	int nparams;         /* entry params, in order: sym indices */
	int param_sym[KRT_MAX_PARAMS];
	uint32_t param_bytes;
	uint32_t static_smem; /* bytes of .shared variables before the dynamic array */
	uint32_t dyn_align;   /* alignment the extern array declares */
	int dyn_sym;          /* -1 if none */
	int nsingle;          /* OPF_SINGLE instructions */
	int has_wgmma;        /* any wgmma.*: register writes are tracked */
	int maxntid;          /* .maxntid/.reqntid x*y*z, 0 if absent */
	uint32_t reqncluster[3]; /* .reqnctapercluster, 0 if absent */
	/* Source, for messages: the text and where each line starts. */
	char *src;
	int *line_start;
	int nlines;
} EmuProgram;

/* parse.c */
int emu_parse(const char *ptx, size_t len, EmuProgram **out, KrtErr *err);
void emu_program_free(EmuProgram *p);
/* The PTX text of line n without leading blanks, into buf. */
void emu_line_text(const EmuProgram *p, int line, char *buf, size_t n);

/* optab.c: longest dotted-prefix match of an opcode. */
const EmuOpDef *emu_op_find(char **comps, int ncomps, int *used);
/* The generic modifier vocabulary; returns 1 if known (filled), 0 if not, -1
 * if known but not allowed in cats (message in why). */
int emu_mod_generic(EmuInsn *in, const char *m, uint32_t cats, char *why, size_t n);
EmuType emu_type_find(const char *name);

/* Parse-time error from op hooks. */
int emu_parse_fail(EmuParse *p, const char *fmt, ...) KRT_PRINTF(2, 3);
/* For check hooks: the kind (OPK_*) of operand i, OPK_NONE past the end. */
int emu_opnd_kind(const EmuInsn *in, const EmuParse *p, int i);

/* ---- devices and memory (mem.c) ----------------------------------------- */

typedef struct EmuAlloc {
	uint64_t base;
	size_t size;
	uint8_t *host;
} EmuAlloc;

typedef struct EmuDev {
	EmuAlloc *a;
	int n, cap;
	uint64_t next;
	int last; /* most recently hit allocation */
} EmuDev;

int emu_mem_alloc(EmuDev *d, size_t bytes, uint64_t *out, KrtErr *err);
int emu_mem_free(EmuDev *d, uint64_t p, KrtErr *err);
/* Host pointer for [addr, addr+bytes) inside one allocation, NULL if not. */
uint8_t *emu_mem_at(EmuDev *d, uint64_t addr, size_t bytes);
void emu_mem_release(EmuDev *d);
/* "0x... is 16 bytes past the end of the 4096-byte allocation at 0x..." */
void emu_mem_explain(EmuDev *d, uint64_t addr, size_t bytes, char *buf, size_t n);

/* ---- happens-before (hb.c) ----------------------------------------------
 * Vector clocks over threads, mbarrier phases and tensor-core agents decide
 * whether an access is ordered after the async write (or read) it depends
 * on. Slots: [0, nthreads) threads, then EMU_MAX_MBAR mbarrier phase
 * counters, then EMU_MAX_AGENTS tcgen05 issue pipes. */

typedef uint32_t EmuClock;

/* One tag per 16-byte smem chunk and per TMEM (lane quarter, column). */
enum { TAGK_NONE, TAGK_GENERIC, TAGK_TMA, TAGK_TC, TAGK_ALLOC, TAGK_TCST, TAGK_TCCP,
       TAGK_TCSHIFT, TAGK_CPASYNC };
/* Tags of an issue pipe's async ops (mma, cp, shift): ordered by its commits. */
#define EMU_TAGK_PIPE(k) ((k) == TAGK_TC || (k) == TAGK_TCCP || (k) == TAGK_TCSHIFT)
typedef struct EmuTag {
	uint16_t slot;   /* who: a VC slot */
	uint8_t kind;    /* TAGK_* of the last writer / reader */
	uint8_t pending; /* 1: the event is not yet ordered (value not final) */
	EmuClock val;    /* covered when vc[slot] >= val */
	int32_t line;    /* PTX line of the access, for messages */
	int32_t tid;     /* thread that issued it */
} EmuTag;

enum { EMU_SREADERS = 16 }; /* async readers remembered per smem chunk */

/* ---- data races (race.c) ------------------------------------------------ */

enum { EMU_RACE_READERS = 3 };

/* The generic access history of one 4-byte word. */
typedef struct EmuRaceWord {
	uint64_t key;       /* global: the word's address / 4 */
	uint32_t gen;       /* EmuCta.race_gen when written; another value: empty */
	uint32_t wclk;      /* last write: the thread of clock slot wslot at its own clock wclk */
	int32_t wline;
	uint16_t wslot;
	uint8_t wmask;      /* bytes of the word the last write wrote (bit i: byte i) */
	uint8_t wstrong;    /* the last write's EMU_RACE_STRONG and EMU_RACE_CTA bits */
	uint8_t nr;         /* unordered reads since that write */
	uint8_t rmask[EMU_RACE_READERS]; /* bytes each read read */
	uint8_t rstrong[EMU_RACE_READERS]; /* each read's EMU_RACE_STRONG and EMU_RACE_CTA bits */
	uint16_t rslot[EMU_RACE_READERS];
	uint32_t rclk[EMU_RACE_READERS];
	int32_t rline[EMU_RACE_READERS];
} EmuRaceWord;

/* A tcgen05 pipe's A collector (.collector::a::fill/use/lastuse). */
typedef struct EmuCollector {
	int line;           /* the filling MMA's PTX line; 0: empty */
	int ts;             /* A from TMEM */
	uint64_t a;         /* its A descriptor or TMEM address */
} EmuCollector;

/* ---- async operations (async.c queue; tma.c, tcgen05.c) ----------------- */

typedef enum EmuAsyncKind {
	AS_TMA_LOAD,
	AS_TMA_STORE,
	AS_BULK_COPY,
	AS_TC_MMA,
	AS_TC_CP,
	AS_TC_SHIFT,
	AS_TC_COMMIT,
} EmuAsyncKind;

typedef struct EmuAsync {
	EmuAsyncKind kind;
	int tid;            /* issuing thread */
	int line;
	const EmuInsn *in;
	int agent;          /* tcgen05: the issue pipe; -1 otherwise */
	uint64_t seq;       /* issue order */
	int group;          /* bulk_group number for stores */
	EmuClock *vc;       /* issuer's clock at issue (commit payload) */
	void *data;         /* kind-specific record, freed on completion */
	/* completes it (set by the issuing unit: tma.c, tcgen05.c) */
	int (*done)(EmuCta *c, struct EmuAsync *a);
	/* frees what it holds besides data, completed or not (NULL: nothing) */
	void (*drop)(struct EmuAsync *a);
} EmuAsync;

/* One cp.async copy (cpasync.c): its source bytes, read at issue, land at
 * the issuing thread's wait. */
typedef struct EmuCpAsync {
	uint32_t smem, bytes;
	int group;          /* the commit group it belongs to */
	const EmuInsn *in;
	uint8_t data[16];   /* zeros past the source size */
} EmuCpAsync;

/* ---- mbarriers (mbar.c) ------------------------------------------------- */

typedef struct EmuMbar {
	uint32_t addr;
	int live;
	int slot;           /* VC slot index (nthreads + i) */
	uint32_t expected;  /* arrivals per phase */
	int32_t pending;    /* arrivals still missing in the current phase */
	int64_t tx;         /* transaction count of the current phase */
	uint64_t phases;    /* completed phases since the last init */
	uint64_t cbase;     /* phases of earlier inits: the slot's clock is cbase + phases */
	int init_line;
	int init_tid;       /* the initializing thread, for messages */
	int init_slot;      /* the init is visible to t once t->vc[init_slot] >= init_val */
	EmuClock init_val;
	EmuClock *pend_vc;  /* releases into the current phase */
	EmuClock *done_vc;  /* everything released into completed phases */
	int tx_line;        /* last expect_tx, for messages */
	int tx_tid;
} EmuMbar;

/* ---- TMEM (tmem.c) ------------------------------------------------------ */

typedef struct EmuTmemAlloc {
	int live;
	uint32_t col, ncols;
	int warp;
	int line;
} EmuTmemAlloc;

/* ---- warps and threads -------------------------------------------------- */

enum {
	TS_READY,
	TS_BAR,    /* bar.sync: waiting for the named barrier */
	TS_MBAR,   /* mbarrier.try_wait / test_wait */
	TS_COLL,   /* at a warp rendezvous */
	TS_CBAR,   /* barrier.cluster.wait */
	TS_EXITED,
};

/* Register hazard flags (EmuThread.pend). */
enum {
	PEND_TCLD = 1,   /* destination of a tcgen05.ld not yet waited */
	PEND_WGMMA = 2,  /* accumulator of an in-flight wgmma */
	PEND_WGSRC = 4,  /* A-fragment register of an in-flight wgmma (read-only) */
	PEND_WATCH = 8,  /* used by a wgmma (or not yet fenced): reads and writes make it DIRTY */
	PEND_DIRTY = 16, /* read or written since the last wgmma.fence */
	PEND_HAZARD = PEND_TCLD | PEND_WGMMA | PEND_WGSRC,
};

typedef struct EmuPendLd {
	const EmuInsn *in;
	uint32_t taddr;
	int st;          /* 1: tcgen05.st (values captured in vals) */
	uint32_t *vals;  /* st: [lane][reg] */
} EmuPendLd;

typedef struct EmuWgOp {
	const EmuInsn *in;
	uint64_t adesc, bdesc;
	int scale_d;
	uint32_t *afrag;  /* RS: [lane][4] captured A registers */
	uint32_t lanes;
	uint32_t *chunks; /* smem chunks it reads (in flight until it completes) */
	int nchunks;
} EmuWgOp;

typedef struct EmuWgGroup {
	EmuWgOp *op;
	int n, cap;
} EmuWgGroup;

struct EmuWarp {
	int id;
	uint32_t live;       /* lanes not exited */
	uint32_t all;        /* lanes that exist */
	int coll_pc;         /* open rendezvous, -1 none */
	uint32_t arrived;
	uint32_t need;
	int coll_retry;      /* a collective blocked after the rendezvous (alloc) */
	/* tcgen05.ld/st issued, results land at wait::ld / wait::st */
	EmuPendLd *pld;
	int npld, cappld;
	/* wgmma: the open group, then committed groups (oldest first) */
	EmuWgGroup open;
	EmuWgGroup *groups;
	int ngroups, capgroups;
	/* single-thread instructions: which lane issued instance n first */
	int32_t **single_first;
	int *single_cap;
};

struct EmuThread {
	int tid;
	int slot;            /* its vector-clock slot: the CTA's slot0 + tid */
	int lane;
	EmuWarp *w;
	uint32_t pc;
	uint8_t state;
	uint8_t timeout;     /* next try_wait returns false instead of blocking */
	uint8_t exited_by_ret;
	uint32_t wait_addr;
	uint32_t wait_parity;
	int wait_bar;
	int wait_line;
	uint64_t *r;
	uint8_t *pend;
	int npend;           /* registers with a PEND_* flag */
	EmuClock *vc;        /* generic knowledge */
	EmuClock *vc_tc;     /* knowledge tcgen05 ops may use: vc at the last
	                      * tcgen05.fence::after_thread_sync (docs/hardware.md,
	                      * "tcgen05 ordering") */
	int synced_line;     /* line of the last thread sync not yet fenced for tcgen05 */
	int agent;           /* tcgen05 issue pipe, -1 until first mma/cp */
	uint32_t *single_n;  /* executions of each OPF_SINGLE instruction */
	/* generic smem writes not yet ordered for the async proxy */
	uint32_t *unfenced;  /* chunk indices */
	int nunfenced, capunfenced;
	/* tcgen05 tags whose value waits for wait::ld / before_thread_sync */
	uint32_t *tcpend;    /* TMEM cell indices (quarter*512+col) | 1<<31 for smem chunk */
	int ntcpend, captcpend;
	int cbar_pending;    /* barrier.cluster.arrive without its wait yet */
	uint64_t cbar_phase; /* the cluster barrier phase it arrived in */
	int cbar_synced;     /* it completed a barrier.cluster.wait */
	int bulk_groups;     /* cp.async.bulk commit groups issued */
	int bulk_open;       /* ops since the last commit_group */
	struct EmuCpAsync *cpa; /* cp.async copies not yet waited for (cpasync.c) */
	int ncpa, capcpa;
	int cpa_groups;      /* cp.async commit groups issued */
	uint64_t steps;
};

typedef struct EmuBar {
	int expected;   /* 0: not in use */
	int arrived;
	int line;
} EmuBar;

/* One launch, shared by its CTAs. */
typedef struct EmuLaunchCtx {
	EmuDev *dev;
	const EmuProgram *prog;
	const KrtAbi *abi;
	const KrtLaunch *l;
	uint8_t *params;     /* the param buffer */
	int cc;
	uint64_t seed;       /* 0: deterministic */
	uint32_t smem_base;  /* window address of the first shared variable */
	uint32_t smem_misalign; /* bytes added to the dynamic array's address */
	uint64_t max_steps;
	uint64_t max_launch_steps; /* all CTAs together (KRT_EMU_MAX_LAUNCH_STEPS) */
	uint64_t launch_steps;     /* of the CTAs finished so far */
	int trace;           /* thread id + 1 to trace in CTA 0, 0 off */
	int cl_n;            /* CTAs per cluster */
	uint32_t coresident; /* KRT_EMU_CORESIDENT: CTAs interleaved per group (1: off) */
} EmuLaunchCtx;

/* The CTAs of one cluster run together: one scheduler over all their
 * threads, one vector-clock slot space (CTA r owns slots [r*per, r*per+per)),
 * so waits, arrivals and async units across CTAs order like local ones. */
typedef struct EmuCluster {
	int n;
	/* a co-resident group (KRT_EMU_CORESIDENT): the n CTAs of a launch
	 * without clusters run interleaved under one scheduler, but each is a
	 * cluster of one to the kernel (emu_rank 0, its own shared memory) */
	int solo;
	uint32_t dim[3];
	uint32_t id[3];      /* %clusterid */
	int per;             /* clock slots per CTA */
	EmuCta *cta[EMU_MAX_CLUSTER];
	/* barrier.cluster: arrivals of the current phase, and what they released */
	int bar_arrived;
	uint64_t bar_phase;
	EmuClock *bar_vc;
	EmuClock *bar_done_vc;
	int start;           /* the CTA the scheduler started with this pass */
	/* global words released into by atomics (hb.c emu_sync_global) */
	int nsync;
	uint64_t sync_addr[EMU_MAX_SYNC];
	EmuClock *sync_vc[EMU_MAX_SYNC];
} EmuCluster;

struct EmuCta {
	EmuLaunchCtx *lc;
	EmuCluster *cl;
	int rank;            /* %cluster_ctarank */
	int slot0;           /* first clock slot of this CTA */
	int finished;        /* every thread exited and its async work drained */
	const EmuProgram *prog;
	KrtErr *err;
	int failed;
	uint32_t ctaid[3];
	int nthreads, nwarps;
	EmuThread *t;
	EmuWarp *w;
	uint64_t *regs;      /* nthreads * nregs */
	uint8_t *pend;
	/* shared memory: the window [0, smem_end) */
	uint8_t *smem;
	uint32_t smem_lo, smem_end; /* valid: [smem_lo, smem_end) */
	uint32_t dyn_addr;          /* the extern array */
	EmuTag *swtag;       /* per 16-B chunk: last write */
	EmuTag *srtag;       /* per 16-B chunk: EMU_SREADERS async-read tags (hb.c) */
	uint8_t *snr;        /* per 16-B chunk: how many of them are in use */
	uint16_t *sinflight; /* per chunk: in-flight async reads */
	int32_t *sinflight_line;
	uint8_t *sflags;     /* per chunk: SF_* */
	uint32_t *sstamp;    /* per chunk: dedupe stamp for operand footprints */
	uint32_t stamp;
	uint16_t *swriter;   /* per chunk: thread+1 of an unfenced generic write */
	int32_t *swline;
	uint32_t nchunks;
	/* TMEM */
	uint32_t *tmem;      /* [lane][col] */
	EmuTag *twtag;       /* [quarter][col] */
	EmuTag *trtag;
	uint32_t *tacc;      /* [quarter][col]: accumulator key of the MMA in twtag */
	EmuTmemAlloc talloc[EMU_MAX_TMEM_ALLOCS];
	int relinquished;
	int cta_group;       /* first cta_group used by a tcgen05 op, 0 none */
	/* tcgen05.alloc.cta_group::2 (tcgen05.c pair_alloc): 1 waits for the
	 * peer with palloc_n columns, 2 granted palloc_col */
	int palloc_state;
	uint32_t palloc_n, palloc_col;
	/* mbarriers */
	EmuMbar mbar[EMU_MAX_MBAR];
	int nmbar;
	/* named barriers */
	EmuBar bar[16];
	/* clocks */
	int nslots;
	EmuClock *clocks;    /* backing store */
	/* tcgen05 agents */
	int agent_tid[EMU_MAX_AGENTS];
	uint64_t agent_commits[EMU_MAX_AGENTS]; /* commits issued */
	uint64_t agent_done[EMU_MAX_AGENTS];    /* commits completed */
	EmuCollector coll[EMU_MAX_AGENTS];      /* each pipe's A collector */
	int nagents;
	/* async queue */
	EmuAsync *aq;
	int naq, capaq;
	uint64_t aseq;
	/* data-race shadows (race.c) */
	EmuRaceWord *race;   /* per smem word */
	uint32_t nrace;
	uint32_t race_gen;
	EmuRaceWord *gr;     /* global words, open addressing */
	uint32_t gr_cap, gr_used;
	/* scheduling */
	uint64_t gen;        /* bumps on anything that may unblock a thread */
	uint64_t steps;
	uint64_t rng;
	int live;            /* threads not exited */
};

/* Chunk flags (EmuCta.sflags). */
enum {
	SF_UNFENCED = 1, /* generic write not yet fenced for the async proxy */
	SF_MBAR = 2,     /* holds a live mbarrier */
	SF_TMA_FLIGHT = 4, /* a TMA write to it has not landed */
};

/* ---- execution (exec.c) -------------------------------------------------- */

int emu_run_launch(EmuLaunchCtx *lc, KrtErr *err);

/* ---- schedule exploration (schedules.c) ----------------------------------- */

enum { EMU_MAX_SEEDS = 64, EMU_MAX_SEED_IMAGE = 256 << 20 };
/* Runs the launch under nseeds schedules (seeds lc->seed or 1, then +1, ...)
 * from the same device memory; differing results are a hazard. */
int emu_run_seeds(EmuLaunchCtx *lc, uint64_t nseeds, KrtErr *err);

/* ---- reports (report.c), the random stream (rng.c) ------------------------ */

/* Records the first error/hazard of the CTA and returns EMU_STOP. */
int emu_hazard(EmuCta *c, const EmuThread *t, const EmuInsn *in, const char *cls,
               const char *fmt, ...) KRT_PRINTF(5, 6);
int emu_fault(EmuCta *c, const EmuThread *t, const EmuInsn *in, const char *fmt, ...)
	KRT_PRINTF(4, 5);
uint64_t emu_rand(EmuCta *c);

/* ---- operands (operand.c) ------------------------------------------------- */

/* Operand access. Values are raw bits; reads check register hazards. */
const EmuOperand *emu_opnd(const EmuCta *c, const EmuInsn *in, int i);
const EmuOperand *emu_sub(const EmuCta *c, const EmuOperand *o, int i);
int emu_get(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuOperand *o, uint64_t *v);
int emu_set(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuOperand *o, uint64_t v);
/* Reads operand i as an integer/bits of the instruction type. */
int emu_geti(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, uint64_t *v);
/* Address of a MEM operand (base + offset), in the space's own numbering. */
int emu_addr(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuOperand *o, uint64_t *a);
/* Resolve an address of `space` to host memory: smem or global. *shared_addr
 * gets the window address when it is shared memory (else UINT32_MAX). */
int emu_resolve(EmuCta *c, EmuThread *t, const EmuInsn *in, EmuSpace space, uint64_t addr,
                uint32_t bytes, int write, uint8_t **host, uint32_t *shared_addr);
/* Reports register reg of t as used while an in-flight tcgen05.ld or wgmma
 * holds it. */
int emu_reg_hazard(EmuCta *c, EmuThread *t, const EmuInsn *in, int reg, int write);
/* Operand i must be warp-uniform over lanes; its value (an address for MEM). */
int emu_uniform(EmuCta *c, EmuWarp *w, const EmuInsn *in, uint32_t lanes, int i, uint64_t *v);
/* Address operand i as a shared-window address (generic converted). */
int emu_shared_addr(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, uint32_t *out);
int emu_smem_own(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t a, uint64_t *local);
/* %cluster_ctarank and the CTAs in the kernel's cluster (1 in a co-resident group) */
int emu_rank(const EmuCta *c);
int emu_cluster_n(const EmuCta *c);
/* Address operand i of a .shared::cluster instruction: the CTA whose shared
 * memory it names (*owner) and the window address there. A CTA's shared
 * memory used by another before that thread completed a barrier.cluster.wait,
 * or after the owner exited, is a hazard [cluster] (PTX ISA §9.7.13.2). */
int emu_cluster_addr(EmuCta *c, EmuThread *t, const EmuInsn *in, int i, EmuCta **owner,
                     uint32_t *out);
/* The same for an address value a. */
int emu_cluster_resolve(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t a, EmuCta **owner,
                        uint32_t *out);
/* The CTA of the cluster that owns clock slot `slot`. */
#define EMU_SLOT_CTA(c, slot) ((c)->cl->cta[(slot) / (c)->cl->per])
/* Completes the barrier.cluster phase once every live thread arrived. */
int emu_cluster_bar_try(EmuCluster *cl);

/* ---- the async queue (async.c) ---------------------------------------------- */

void emu_async_push(EmuCta *c, const EmuAsync *a);
/* Frees a dequeued or still queued op's records (a launch may stop with
 * ops queued). */
void emu_async_free(EmuAsync *a);
/* Completes one queued op: the oldest ready one, or a random ready one. */
int emu_async_complete_one(EmuCta *c);
/* Completes queued ops of thread tid (-1: any) whose kind bit is in kinds and
 * whose group is <= maxgroup, in issue order. */
int emu_async_drain(EmuCta *c, int tid, unsigned kinds, int maxgroup);

/* ---- named barriers (bar.c) ------------------------------------------------- */

/* Arrival at named barrier id; count < 0: all threads. wait: bar.sync. */
int emu_bar_arrive(EmuCta *c, EmuThread *t, const EmuInsn *in, int id, int count, int wait);
/* Completes barrier id if every expected thread arrived (waiters go on). */
int emu_bar_try_complete(EmuCta *c, int id);

/* ---- memory-model helpers (hb.c) ---------------------------------------- */

int emu_hb_init(EmuCta *c);
EmuClock *emu_vc_new(EmuCta *c);
void emu_vc_join(const EmuCta *c, EmuClock *dst, const EmuClock *src);
int emu_vc_covers(const EmuCta *c, const EmuClock *vc, int self, const EmuTag *tag);
/* A release by t (arrive, barrier): its events so far become visible through
 * `into` (may be NULL), then its own clock ticks. */
void emu_release(EmuCta *c, EmuThread *t, EmuClock *into);
void emu_acquire(EmuCta *c, EmuThread *t, const EmuClock *from);
/* Release/acquire through global word addr by an atom/red or ld: acq, rel
 * say which the instruction's order does. EMU_STOP when the cluster's
 * table of such words is full. */
int emu_sync_global(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t addr, int acq, int rel);
/* Merge the clocks of the lanes of a collective. */
void emu_warp_sync(EmuCta *c, EmuWarp *w, uint32_t lanes);
/* Checks of smem accesses against in-flight and unordered async writes and
 * reads; `async` selects the async-proxy rules (wgmma/tcgen05/TMA reads). */
int emu_smem_read(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr, uint32_t bytes);
int emu_smem_write(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr, uint32_t bytes);
/* Async-proxy reader at issue: ordered after the writes, no unfenced generic
 * writes. vc is the clock to check with (vc_tc for tcgen05). */
int emu_smem_async_read_check(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t chunk,
                              const EmuClock *vc, const char *what);
/* The completed async reads of a chunk, one tag per reader slot (a warp's
 * wgmma, a tcgen05 pipe, a TMA store's thread): a later write must be
 * ordered after every one of them, not only the last (several consumer
 * warps read one stage, and the empty barrier must wait for each).
 * Beyond EMU_SREADERS slots the oldest is dropped (runtime/emu/README.md,
 * known gaps). */
void emu_sread_note(EmuCta *c, uint32_t ch, const EmuTag *tag);
/* The first read tag of chunk ch that vc (thread self's) does not cover, or
 * NULL. */
const EmuTag *emu_sread_unordered(const EmuCta *c, const EmuClock *vc, int self, uint32_t ch);
void emu_proxy_fence(EmuCta *c, EmuThread *t);
/* The tcgen05 fences (docs/hardware.md, "tcgen05 ordering"). */
void emu_tc_after_sync(EmuCta *c, EmuThread *t);
void emu_tc_before_sync(EmuCta *c, EmuThread *t);
void emu_tcpend_add(EmuCta *c, EmuThread *t, uint32_t cell);
/* Describes a tag's origin: "TMA write at PTX line 140 (thread 128)". */
void emu_tag_describe(const EmuCta *c, const EmuTag *tag, char *buf, size_t n);

/* ---- data races (race.c) -------------------------------------------------- */

/* A generic access by t: a [data-race] unless ordered after the conflicting
 * accesses of other threads or morally strong with them (race.c).
 * `kind`: 0 a read, else EMU_RACE_WRITE and EMU_RACE_STRONG bits (an
 * atom/red is a strong write; ld/st with .volatile, .relaxed, .acquire or
 * .release are strong), and EMU_RACE_CTA for a strong access of scope
 * .cta, which is morally strong only with accesses of threads of its own
 * CTA. */
enum { EMU_RACE_WRITE = 1, EMU_RACE_STRONG = 2, EMU_RACE_CTA = 4 };
int emu_race_smem(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr, uint32_t bytes,
                  int kind);
int emu_race_global(EmuCta *c, EmuThread *t, const EmuInsn *in, uint64_t addr, uint32_t bytes,
                    int kind);
/* An async write issued by t over smem [addr, addr+bytes). */
int emu_race_async_write(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t addr,
                         uint32_t bytes);
void emu_race_reset(EmuCta *c);

/* ---- mbarrier (mbar.c) ---------------------------------------------------- */

EmuMbar *emu_mbar_find(EmuCta *c, uint32_t addr);
/* Thread t may use m only once m's mbarrier.init is ordered before it. */
int emu_mbar_visible(EmuCta *c, EmuThread *t, const EmuInsn *in, const EmuMbar *m);
/* An arrival of `count` with an optional release clock; may complete the phase. */
void emu_mbar_arrive(EmuCta *c, EmuMbar *m, uint32_t count, const EmuClock *rel);
void emu_mbar_tx(EmuCta *c, EmuMbar *m, int64_t delta);
void emu_mbar_describe(const EmuCta *c, const EmuMbar *m, char *buf, size_t n);

/* ---- TMEM (tmem.c) -------------------------------------------------------- */

int emu_tmem_check(EmuCta *c, EmuThread *t, const EmuInsn *in, uint32_t lane0, uint32_t nlanes,
                   uint32_t col0, uint32_t ncols);
int emu_tmem_exit_check(EmuCta *c);

/* ---- descriptors (desc.c) ------------------------------------------------- */

typedef struct EmuSmemDesc {
	uint32_t start, lbo, sbo;  /* bytes */
	int base_offset;
	int swizzle;               /* bytes: 0, 32, 64, 128 */
	int lbo_mode;
	int version;               /* bits 46-48 */
	int layout;                /* raw layout/swizzle code */
} EmuSmemDesc;

enum { ARCH_SM90, ARCH_SM100 };
/* Decodes and validates (docs/hardware.md, "Shared-memory descriptor (sm_100)" and
 * "Shared-memory descriptor (sm_90)"); why gets the reason. */
int emu_desc_decode(uint64_t v, int arch, EmuSmemDesc *d, char *why, size_t n);
/* Byte address (swizzle applied) of element (mn, k) of a canonical operand
 * (docs/hardware.md, "Canonical layouts, LBO and SBO"): kmajor 1 for K-major, ebytes
 * the element size. */
uint32_t emu_desc_addr(const EmuSmemDesc *d, int kmajor, int ebytes, uint32_t mn, uint32_t k);
uint32_t emu_swizzle(uint32_t addr, int swizzle_bytes);
/* Appends the distinct smem chunks of rows [mn0, mn0+nmn) x k [0, nk) of an
 * operand to *list; -1 with the first address outside smem in *bad. Bump
 * c->stamp before each operand set to dedupe across calls. */
int emu_desc_chunks(EmuCta *c, const EmuSmemDesc *d, int kmajor, int eb, uint32_t mn0,
                    uint32_t nmn, uint32_t nk, uint32_t **list, int *n, int *cap, uint32_t *bad);
/* out[mn][k] = scale * element (mn0+mn, k) read from smem as ty. */
void emu_desc_gather(const EmuCta *c, const EmuSmemDesc *d, int kmajor, EmuType ty, int eb,
                     uint32_t mn0, uint32_t nmn, uint32_t nk, float scale, float *out);
/* The swizzled tile behind a descriptor must start on its swizzle period
 * (base_offset 0, docs/hardware.md, "Base offset and alignment"): 0 if so. */
int emu_desc_aligned(const EmuSmemDesc *d);

/* ---- numbers (num.c) ------------------------------------------------------ */

float emu_f32(uint32_t bits);
uint32_t emu_f32_bits(float f);
double emu_f64(uint64_t bits);
uint64_t emu_f64_bits(double d);
float emu_bf16_to_f32(uint16_t h);
uint16_t emu_f32_to_bf16(float f, int rnd);
float emu_f16_to_f32(uint16_t h);
uint16_t emu_f32_to_f16(float f, int rnd, int sat);
float emu_e4m3_to_f32(uint8_t v);
float emu_e5m2_to_f32(uint8_t v);
/* fp6/fp4 codes in the low bits (E2M3, E3M2: 6; E2M1: 4) */
float emu_e2m3_to_f32(uint8_t v);
float emu_e3m2_to_f32(uint8_t v);
float emu_e2m1_to_f32(uint8_t v);
/* block-scale factors (docs/hardware.md, "Number formats") */
float emu_ue8m0_to_f32(uint8_t v);
float emu_ue4m3_to_f32(uint8_t v);
uint8_t emu_f32_to_e4m3(float f, int satfinite);
uint8_t emu_f32_to_e5m2(float f, int satfinite);
float emu_tf32(float f);
/* Float value of raw bits of type ty (f16/bf16/f32/fp8/tf32). */
float emu_to_f32(uint64_t bits, EmuType ty);

#endif
