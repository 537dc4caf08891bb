/* PTX text emission. One printf-checked emitf appends text to the kernel
 * body; typed virtual registers come from per-block pools and are declared
 * once when the kernel is finished, so the output depends only on the order
 * of calls (deterministic). Floats are written as exact hex bit patterns.
 *
 * Naming, so that a change to one block changes only that block's lines in
 * emitted/ (README, "Working on generated code"): each emit_block NAME opens
 * (or re-enters) a scope with a short prefix. Every register and label is
 * named after the block its first appearance in the text falls in, and
 * numbered there in the order the generator made them (reg_new, label_new):
 *   register  %<prefix>_<class><n>     e.g. %soft_f3, %cons_rd0
 *   label     $L_<prefix>_<stem>_<n>   e.g. $L_cons_wait_2
 *   declared  .reg .f32 %soft_f<4>;    one line per (prefix, class)
 * Registers count from 0, labels from 1. So a block that uses one more
 * register or label changes only its own declaration line and renames at
 * most its own registers made after the new one (none, when the new one is
 * made last); which block's code allocates a register does not matter.
 * A block emitted several times (helpers, per-warpgroup copies) keeps
 * counting in its one scope across its copies; other blocks' names stay
 * put. Text before the first block takes the prefix "k". The names
 * are given when the kernel is written out (emit_body_text).
 * The prefix: from the last dotted component of NAME, less its first '_'
 * word when that word is the first component of a block opened earlier in
 * this kernel (after "fmha.prologue", "sm90.fmha_tile_first" reads as
 * "tile_first"); one word gives its first 4 letters ("softmax": "soft"),
 * several give their initials, at most 4 ("tile_first": "tf"). A prefix
 * already taken by another NAME gets a number appended (2, 3, ...).
 * emit_block_as gives the prefix explicitly. */
#ifndef KGEN_EMIT_H
#define KGEN_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

typedef enum RegClass {
	RC_PRED, /* %<prefix>_p  .pred */
	RC_B16,  /* %<prefix>_h  .b16 */
	RC_B32,  /* %<prefix>_r  .b32 */
	RC_B64,  /* %<prefix>_rd .b64 */
	RC_F32,  /* %<prefix>_f  .f32 */
	RC_COUNT
} RegClass;

/* A register is carried by its printable name so call sites can hand it to
 * emitf's "%s" (checked by the compiler like any printf argument). */
typedef struct Reg {
	char s[12];
} Reg;

/* Longest prefix emit_block_as keeps (a collision digit may follow). */
enum { EMIT_PREFIX_MAX = 4 };

typedef struct Buf {
	char *p;
	size_t len, cap;
} Buf;

typedef struct Emit {
	Buf body;
	int nreg[RC_COUNT]; /* registers of each class, all scopes together */
	int nlabel;         /* labels, all scopes together */
	int ptx_version; /* highest .version (major*10+minor) the body needs */
	int oom;         /* sticky: an allocation failed */
	void *scratch;   /* strings made by reg_vec, freed by emit_free */
	/* naming (emit.c): block scopes, where each block starts in body,
	 * label stems */
	void *scopes, *marks, *labels;
	int nscopes, capscopes, nmarks, capmarks, caplabels;
} Emit;

void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(Buf *b);

void emit_init(Emit *e);
void emit_free(Emit *e);
void emitf(Emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

Reg reg_new(Emit *e, RegClass c);
/* n consecutive registers of one class (accumulator fragments). */
void reg_array(Emit *e, RegClass c, Reg *out, int n);
/* "{%f1, %f2, ...}" of regs[0..n-1]; the string lives until emit_free. */
const char *reg_vec(Emit *e, const Reg *regs, int n);

/* Provenance: "// @block NAME" so a JIT error at line N maps to the
 * generator function that wrote it (docs/ABI.md); also makes NAME's scope
 * current for register and label names (see the top of this file). */
void emit_block(Emit *e, const char *name);
/* The same with an explicit prefix: letters and digits, a letter first, at
 * most EMIT_PREFIX_MAX (other characters are dropped, the rest cut). The
 * first call for a NAME fixes its prefix. */
void emit_block_as(Emit *e, const char *name, const char *prefix);
/* A fresh label "$L_<prefix>_<stem>_<n>" (n counts per scope). */
void label_new(Emit *e, char *out, size_t size, const char *stem);
/* The same, numbered after every label of its scope made by label_new: a
 * label that code emitted before the labels after it branches to, added
 * without renaming them. */
void label_new_late(Emit *e, char *out, size_t size, const char *stem);
void emit_label(Emit *e, const char *label);
/* Records that the body needs PTX ISA `version` (e.g. 80 for 8.0). */
void emit_need_ptx(Emit *e, int version);

/* "0f3F800000": the exact bit pattern of f, as PTX spells float immediates. */
void fimm(char out[12], float f);

/* Expands an embedded template (templates/NAME.ptx): each ${key} is
 * replaced by its value from the NULL-terminated key/value list. An unknown
 * template or an unbound ${key} is a generator bug: returns -1. */
int emit_template(Emit *e, KgErr *err, const char *name, ...) __attribute__((sentinel));

/* The virtual register declarations of the body, one line per (scope,
 * class) in the order the blocks were first opened, e.g.
 * "\t.reg .b32 %prol_r<12>;\n\t.reg .pred %soft_p<1>;\n". */
void emit_reg_decls(const Emit *e, Buf *out);
/* The body with every register and label under its final name. Until
 * then, Reg.s and label_new's text are placeholders ("%#r12", "$#3"): fine
 * to print into the body and compare, not final PTX. */
void emit_body_text(const Emit *e, Buf *out);

/* ceil(log2 v): the shift that multiplies or divides by a power of two v
 * from a plan (emitters use it for row and lane arithmetic). */
int log2_ceil(int v);
/* The least power of two >= v: 1 << log2_ceil(v), so 1 for v <= 1. */
int pow2_ceil(int v);

#endif
