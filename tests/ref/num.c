/* Element conversions and random numbers for the references (see num.h).
 * The f32 -> half conversions work on the bits, the way hardware does; the
 * f64 ones round once through nearbyint() and then encode the exact result,
 * and tests/ref/test_ref.c checks the two paths against each other. */
#include <math.h>
#include <string.h>

#include "num.h"

/* ---- conversions -------------------------------------------------------- */

static uint32_t
f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static float
bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

uint16_t
num_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x0040u); /* keep NaN a quiet NaN */
	/* bf16 is the top half of an f32: add just under half an ulp, plus one
	 * when the kept part is odd, and truncate. A carry runs into the
	 * exponent and, past the largest finite value, into Inf, as it should.
	 * Subnormals need nothing special: the exponent fields are the same. */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float
num_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

/* Shifts v right by s (1..31) rounding to nearest even on the dropped bits. */
static uint32_t
shift_rne(uint32_t v, unsigned s)
{
	uint32_t kept = v >> s;
	uint32_t rest = v & ((1u << s) - 1u);
	uint32_t half = 1u << (s - 1);

	if (rest > half || (rest == half && (kept & 1u)))
		kept++;
	return kept;
}

uint16_t
num_f32_to_fp16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t a = u & 0x7fffffffu;

	if (a > 0x7f800000u)
		return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x1ffu);
	/* 65520 is half way between 65504 (the largest fp16) and 65536; the
	 * tie goes to the even neighbour, 65536, which is Inf. */
	if (a >= 0x477ff000u)
		return sign | 0x7c00u;
	if (a >= 0x38800000u) /* 2^-14 and up: fp16 normal */
		return sign | (uint16_t)shift_rne(a - (112u << 23), 13);
	/* 2^-25 is half way between 0 and the smallest subnormal 2^-24; the
	 * tie goes to 0. */
	if (a <= 0x33000000u)
		return sign;
	/* fp16 subnormal: the value in units of 2^-24 is mant * 2^(exp-126). */
	uint32_t mant = (a & 0x7fffffu) | 0x800000u;
	unsigned exp = a >> 23;
	return sign | (uint16_t)shift_rne(mant, 126u - exp);
}

float
num_fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;

	if (exp == 0x1f)
		return bits_f32(sign | 0x7f800000u | (mant << 13));
	if (exp == 0) {
		float v = (float)mant * 0x1p-24f; /* exact: 10 bits times 2^-24 */
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* Rounds d to `bits` significand bits (implicit bit included) with the
 * exponent floored at emin, so that subnormals get a fixed quantum; the
 * result is exact in float. Overflow past maxv gives Inf. */
static double
round_format(double d, int bits, int emin, double maxv)
{
	if (isnan(d) || isinf(d) || d == 0.0)
		return d;
	int e = ilogb(d);
	if (e < emin)
		e = emin;
	double q = ldexp(1.0, e - (bits - 1));
	double r = nearbyint(d / q) * q; /* default rounding: nearest even */
	if (fabs(r) > maxv)
		return copysign(INFINITY, d);
	return r;
}

uint16_t
num_f64_to_bf16(double d)
{
	if (isnan(d))
		return num_f32_to_bf16((float)d);
	return num_f32_to_bf16((float)round_format(d, 8, -126, 0x1.fep127));
}

uint16_t
num_f64_to_fp16(double d)
{
	if (isnan(d))
		return num_f32_to_fp16((float)d);
	return num_f32_to_fp16((float)round_format(d, 11, -14, 65504.0));
}

/* ---- element types ------------------------------------------------------ */

static double
load_bf16(const void *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return num_bf16_to_f32(h);
}

static double
load_fp16(const void *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return num_fp16_to_f32(h);
}

static double
load_f32(const void *p)
{
	float f;
	memcpy(&f, p, 4);
	return f;
}

static void
store_bf16(void *p, double v)
{
	uint16_t h = num_f64_to_bf16(v);
	memcpy(p, &h, 2);
}

static void
store_fp16(void *p, double v)
{
	uint16_t h = num_f64_to_fp16(v);
	memcpy(p, &h, 2);
}

static void
store_f32(void *p, double v)
{
	float f = (float)v; /* one rounding, nearest even */
	memcpy(p, &f, 4);
}

/* Columns: ABI name, accepted alias (as gen/dtype.c), bytes per element,
 * exact decoder, rounding encoder. */
static const struct {
	const char *name;
	const char *alias;
	int size;
	double (*load)(const void *p);
	void (*store)(void *p, double v);
} num_types[NUM_NTYPES] = {
	[NUM_BF16] = {"bf16", "bf16", 2, load_bf16, store_bf16},
	[NUM_FP16] = {"fp16", "f16", 2, load_fp16, store_fp16},
	[NUM_F32] = {"f32", "fp32", 4, load_f32, store_f32},
};

int
num_type_parse(const char *name, NumType *out)
{
	for (int i = 0; i < NUM_NTYPES; i++)
		if (strcmp(name, num_types[i].name) == 0 ||
		    strcmp(name, num_types[i].alias) == 0) {
			*out = (NumType)i;
			return 0;
		}
	return -1;
}

const char *
num_type_name(NumType t)
{
	return (unsigned)t < NUM_NTYPES ? num_types[t].name : "?";
}

int
num_type_size(NumType t)
{
	return (unsigned)t < NUM_NTYPES ? num_types[t].size : 0;
}

double
num_load(NumType t, const void *base, size_t i)
{
	return num_types[t].load((const char *)base + (size_t)num_types[t].size * i);
}

void
num_store(NumType t, void *base, size_t i, double v)
{
	num_types[t].store((char *)base + (size_t)num_types[t].size * i, v);
}

int
num_is_fill(NumType t, const void *base, size_t i, uint8_t b)
{
	int n = num_type_size(t);
	const uint8_t *p = (const uint8_t *)base + (size_t)n * i;

	for (int j = 0; j < n; j++)
		if (p[j] != b)
			return 0;
	return 1;
}

/* ---- random numbers ----------------------------------------------------- */

uint64_t
num_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

uint64_t
num_mix(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t s = seed;
	uint64_t h = num_splitmix64(&s);
	s ^= a;
	h ^= num_splitmix64(&s);
	s ^= b;
	h ^= num_splitmix64(&s);
	s ^= c;
	return h ^ num_splitmix64(&s);
}

void
num_rng_seed(NumRng *r, uint64_t seed)
{
	uint64_t s = seed;
	for (int i = 0; i < 4; i++)
		r->s[i] = num_splitmix64(&s);
	r->have_spare = 0;
	r->spare = 0.0;
}

static uint64_t
rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t
num_rng_u64(NumRng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t
num_rng_below(NumRng *r, uint64_t n)
{
	/* Rejection keeps it exactly uniform; the loop almost never repeats. */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;

	do
		x = num_rng_u64(r);
	while (x >= limit);
	return x % n;
}

double
num_rng_uniform(NumRng *r)
{
	return (double)(num_rng_u64(r) >> 11) * 0x1p-53;
}

double
num_rng_normal(NumRng *r)
{
	if (r->have_spare) {
		r->have_spare = 0;
		return r->spare;
	}
	/* Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
	double u = 1.0 - num_rng_uniform(r);
	double v = num_rng_uniform(r);
	double rad = sqrt(-2.0 * log(u));
	double ang = 6.283185307179586 * v;
	r->spare = rad * sin(ang);
	r->have_spare = 1;
	return rad * cos(ang);
}
