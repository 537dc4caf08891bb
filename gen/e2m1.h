/* E2M1 (OCP MX FP4): its values (from dtype_decode, the one table of the
 * narrow formats) in the form the on-chip decode looks them up in (docs/indexer.md, "FP4 keys"). A code is a sign
 * bit (bit 3), two exponent bits (bias 1) and one mantissa bit; two codes
 * share a byte, the even element in the low nibble. */
#ifndef KGEN_E2M1_H
#define KGEN_E2M1_H

#include <stdint.h>

/* |value| of code c (0..7; code c | 8 is its negative), by dtype_decode */
float e2m1_magnitude(int c);

/* The high bytes of the f16 encodings of the 8 magnitudes (their low bytes
 * are all zero), packed for prmt.b32: byte c of out[0] (c < 4) or of
 * out[1] (c >= 4) is magnitude c's. Returns -1 if a magnitude's f16 has a
 * nonzero low byte (the table could not be decoded this way). */
int e2m1_f16_hi_bytes(uint32_t out[2]);

/* The f16 bits of code c (0..15) as the decode forms them: the magnitude's
 * high byte from the table, the sign moved to bit 15. */
uint16_t e2m1_f16_bits(int c);

#endif
