/* PTX text emission. One printf-checked emitf appends text to the kernel
 * body; typed virtual registers come from per-kernel pools and are declared
 * once when the kernel is finished, so the output depends only on the order
 * of calls (deterministic). Floats are written as exact hex bit patterns. */
#ifndef KGEN_EMIT_H
#define KGEN_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

typedef enum RegClass {
	RC_PRED, /* %p  .pred */
	RC_B16,  /* %h  .b16 */
	RC_B32,  /* %r  .b32 */
	RC_B64,  /* %rd .b64 */
	RC_F32,  /* %f  .f32 */
	RC_COUNT
} RegClass;

/* A register is carried by its printable name so call sites can hand it to
 * emitf's "%s" (checked by the compiler like any printf argument). */
typedef struct Reg {
	char s[12];
} Reg;

typedef struct Buf {
	char *p;
	size_t len, cap;
} Buf;

typedef struct Emit {
	Buf body;
	int nreg[RC_COUNT];
	int nlabel;
	int ptx_version; /* highest .version (major*10+minor) the body needs */
	int oom;         /* sticky: an allocation failed */
	void *scratch;   /* strings made by reg_vec, freed by emit_free */
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
 * generator function that wrote it (docs/ABI.md). */
void emit_block(Emit *e, const char *name);
/* A fresh label "$L_<stem>_<n>" (n counts per kernel: stable across runs). */
void label_new(Emit *e, char *out, size_t size, const char *stem);
void emit_label(Emit *e, const char *label);
/* Records that the body needs PTX ISA `version` (e.g. 80 for 8.0). */
void emit_need_ptx(Emit *e, int version);

/* "0f3F800000": the exact bit pattern of f, as PTX spells float immediates. */
void fimm(char out[12], float f);

/* Expands an embedded template (templates/NAME.ptx): each ${key} is
 * replaced by its value from the NULL-terminated key/value list. An unknown
 * template or an unbound ${key} is a generator bug: returns -1. */
int emit_template(Emit *e, KgErr *err, const char *name, ...) __attribute__((sentinel));

/* The virtual register declarations of the body, e.g.
 * "\t.reg .pred %p<4>;\n\t.reg .b32 %r<37>;\n". */
void emit_reg_decls(const Emit *e, Buf *out);

#endif
