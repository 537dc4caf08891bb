/* W4A8 (docs/hardware.md, "FP4 weights as E4M3"): E2M1 weights with a
 * UE8M0 exponent per 32 of K, turned into E4M3 on chip with the four
 * exponents of a 128-K block folded into one power of two per (row,
 * block). The one place the folding rule and its E4M3 bytes are built;
 * the values come from the narrow-format table (dtype.c). */
#ifndef KGEN_W4A8_H
#define KGEN_W4A8_H

#include <stdint.h>

#include "emit.h"

enum {
	W4A8_VEC = 32,     /* K values per UE8M0 exponent */
	W4A8_BLOCK = 128,  /* K values per folded scale (the FP8 activations' block) */
	W4A8_DMAX = 6,     /* largest offset d = e_i - e_ref: 6·2^6 = 384 <= 448 */
	W4A8_DEXACT = -8,  /* smallest offset at which every code is exact */
	W4A8_SPAN = W4A8_DMAX - W4A8_DEXACT, /* 14: exponent span that folds exactly */
	W4A8_DZERO = -13,  /* at this offset and below every code rounds to ±0 */
	W4A8_NLUT = W4A8_DMAX - W4A8_DZERO + 1, /* 20 byte tables, d = DZERO..DMAX */
};

/* The folded exponent of one row's 128-K block: e_ref = max(e_i) - 6 over
 * its n (<= 4) UE8M0 codes, so the block's scale is 2^(e_ref - 127) and
 * code c of group i becomes the E4M3 of value(c)·2^(e_i - e_ref). -1000 if
 * a code is 0xFF (NaN: the block cannot be folded). */
int w4a8_ref_exponent(const uint8_t *e, int n);

/* Whether the block's n exponents fold exactly (every code of every group
 * is an E4M3 value): no NaN code and max - min <= W4A8_SPAN. */
int w4a8_block_exact(const uint8_t *e, int n);

/* The host check before a launch: how many (row, 128-K block) pairs of a
 * weight scale tensor S (UE8M0, rows x K/32 row-major, docs/ABI.md
 * "gemm") do not fold exactly. -1 if K is not a multiple of 128. */
int64_t w4a8_inexact_blocks(const uint8_t *s, uint64_t rows, uint32_t K);

/* The E4M3 byte of E2M1 code c (0..15) times 2^d, d <= W4A8_DMAX: the
 * nearest E4M3 value, ties to the even code (the kernel's rounding where a
 * block breaks the rule); offsets below W4A8_DZERO act as W4A8_DZERO (±0).
 * The sign is the code's (bit 3 -> bit 7, so -0 is 0x80). -1 if c or d is
 * out of range. */
int w4a8_e4m3(int c, int d);

/* The E4M3 bytes of the 8 magnitudes at offset d (clamped as above),
 * packed for prmt.b32 like e2m1_f16_hi_bytes: byte c of out[c / 4]. -1 if
 * d > W4A8_DMAX. */
int w4a8_lut(int d, uint32_t out[2]);

/* PTX building blocks of the expansion (the one place it is emitted). */
typedef struct W4a8Regs {
	Reg sel, sg, t; /* scratch */
} W4a8Regs;
/* Declares the registers. */
void w4a8_emit_init(Emit *e, W4a8Regs *w);
/* One thread writes the W4A8_NLUT tables of w4a8_lut, d = W4A8_DZERO..
 * W4A8_DMAX, 8 bytes each, to shared address `at` (16-byte aligned). */
void w4a8_emit_tables(Emit *e, Reg at, Reg t);
/* The shared address of group exponent ec's table in a block whose
 * largest is emax: lut + 8·max(ec - (emax - W4A8_DMAX) - W4A8_DZERO, 0),
 * as max(8·ec + base, lut) with base = lut + 8·(W4A8_DMAX - W4A8_DZERO -
 * emax) from w4a8_emit_table_base (addresses are below 2^31). */
void w4a8_emit_table_base(Emit *e, Reg base, Reg emax, Reg lut);
void w4a8_emit_table_addr(Emit *e, Reg addr, Reg ec, Reg base, Reg lut);
/* emax = the largest of the four UE8M0 bytes of word w; t is scratch. */
void w4a8_emit_emax(Emit *e, Reg emax, Reg w, Reg t);
/* The block's scale 2^(emax - W4A8_DMAX - 127) as f32 bits in out (a
 * subnormal below 2^-126; NaN when emax is 0xFF); t, t2, p are scratch. */
void w4a8_emit_scale(Emit *e, Reg out, Reg emax, Reg t, Reg t2, Reg p);
/* Eight E2M1 codes x (nibble j = element j) into E4M3 by one group's
 * table {t0, t1}: elements 0..3 into bytes 0..3 of lo, 4..7 into hi. */
void w4a8_emit_expand(Emit *e, const W4a8Regs *w, Reg lo, Reg hi, Reg x, Reg t0, Reg t1);

#endif
