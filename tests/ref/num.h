/* Numbers for the references and the checkers: the element types kernels
 * read and write (bf16, fp16, f32) with exact decoding and round-to-nearest-
 * even encoding, and a seeded random generator. No global state: every
 * stream of random numbers lives in a NumRng that its caller owns, so a
 * seed alone replays a run. */
#ifndef KGEN_REF_NUM_H
#define KGEN_REF_NUM_H

#include <stddef.h>
#include <stdint.h>

/* ---- conversions -------------------------------------------------------- */

/* Round to nearest, ties to even. NaN stays NaN (quiet, sign kept), overflow
 * gives Inf, values under the smallest subnormal round to signed zero. */
uint16_t num_f32_to_bf16(float f);
uint16_t num_f32_to_fp16(float f);
/* Exact: every bf16 and fp16 value, subnormals included, is a float. */
float num_bf16_to_f32(uint16_t h);
float num_fp16_to_f32(uint16_t h);
/* Straight from double, with one rounding (not double -> float -> half,
 * which can round twice). */
uint16_t num_f64_to_bf16(double d);
uint16_t num_f64_to_fp16(double d);

/* Element types by the names the ABI header uses. */
typedef enum NumType {
	NUM_BF16,
	NUM_FP16,
	NUM_F32,
	NUM_NTYPES
} NumType;

int num_type_parse(const char *name, NumType *out); /* 0, or -1 if unknown */
const char *num_type_name(NumType t);
int num_type_size(NumType t);                        /* bytes per element */
/* Element i of an array of type t, exactly, as a double. */
double num_load(NumType t, const void *base, size_t i);
/* Stores v rounded (nearest even) to type t at element i. */
void num_store(NumType t, void *base, size_t i, double v);
/* 1 if element i has every byte equal to b (an unwritten poison value). */
int num_is_fill(NumType t, const void *base, size_t i, uint8_t b);

/* ---- random numbers ----------------------------------------------------- */

/* xoshiro256** (Blackman and Vigna), seeded through splitmix64 so that any
 * 64-bit seed, 0 included, gives a well-mixed state. */
typedef struct NumRng {
	uint64_t s[4];
	int have_spare;  /* Box-Muller makes normals in pairs */
	double spare;
} NumRng;

uint64_t num_splitmix64(uint64_t *state);
/* A 64-bit hash of a few values: derives independent seeds from one. */
uint64_t num_mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);
void num_rng_seed(NumRng *r, uint64_t seed);
uint64_t num_rng_u64(NumRng *r);
uint64_t num_rng_below(NumRng *r, uint64_t n); /* uniform in [0, n), n > 0 */
double num_rng_uniform(NumRng *r);             /* uniform in [0, 1) */
double num_rng_normal(NumRng *r);              /* N(0, 1) */

#endif
