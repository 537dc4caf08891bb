/* gen/desc and the emulator agree on tcgen05.mma instruction descriptors:
 * every idesc gen/desc builds for cta_group::1 and ::2 (each kind, every pair
 * of operand types, D type, M, N) passes the emulator's validity table
 * (runtime/emu/tc_idesc.c), and hand-made descriptors of combinations both
 * must refuse are refused by the emulator with the field named.
 *
 *   test_emu_idesc */
#include <stdio.h>
#include <string.h>

#include "desc.h"
#include "emu.h"
#include "tc.h"

static int fails;

/* The scale vector size a block-scaled kind is checked with. */
static int
vec_of(IdescKind k, DType scale)
{
	if (k == IK_MXF8F6F4)
		return 1;
	if (k == IK_MXF4)
		return 2;
	return k == IK_MXF4NVF4 ? (scale == DT_UE4M3 ? 4 : 2) : 0;
}

static void
agree(void)
{
	static const int ms[] = {32, 64, 128, 256};
	long built = 0, pairs = 0;
	for (int g = 1; g <= 2; g++)
	for (int k = 0; k < IK_COUNT; k++)
		for (int a = 0; a < DT_COUNT; a++)
			for (int b = 0; b < DT_COUNT; b++)
				for (int dd = 0; dd < DT_COUNT; dd++)
					for (int sc = DT_UE8M0; sc <= DT_UE4M3; sc++)
						for (int mi = 0; mi < 4; mi++)
							for (int n = 8; n <= 256; n += 8)
								for (int ts = 0; ts < 2; ts++) {
									Idesc d;
									memset(&d, 0, sizeof d);
									d.kind = (IdescKind)k;
									d.a = (DType)a;
									d.b = (DType)b;
									d.d = (DType)dd;
									d.scale = (DType)sc;
									d.m = ms[mi];
									d.n = n;
									d.cta_group = g;
									uint32_t v;
									if (idesc_encode(&v, &d, NULL))
										continue;
									built++;
									pairs += g == 2;
									char why[320];
									if (emu_tc_idesc_check(v, k + 1, vec_of(d.kind, d.scale), ts,
									                       g, why, sizeof why)) {
										printf("FAIL gen/desc builds kind::%s a=%s b=%s d=%s "
										       "M=%d N=%d cta_group::%d (0x%08x)%s, the "
										       "emulator refuses it: %s\n",
										       idesc_kind_name(d.kind), dtype_name(d.a),
										       dtype_name(d.b), dtype_name(d.d), d.m, d.n, g, v,
										       ts ? " as TS" : "", why);
										if (++fails > 20)
											return;
									}
								}
	printf("ok   %ld idesc combinations gen/desc builds (%ld of them cta_group::2) pass the "
	       "emulator's table\n", built, pairs);
	if (built < 1000 || pairs < 500) {
		printf("FAIL only %ld combinations built, %ld of them cta_group::2\n", built, pairs);
		fails++;
	}
}

/* idesc fields (PTX ISA Table 42): D type bits 4-5, A 7-9, B 10-12, negate
 * 13/14, transpose A 15, N/8 bits 17-22, M/16 bits 24-28 */
#define dense(dfmt, afmt, bfmt, neg, ta, m, n)                                                \
	((uint32_t)(dfmt) << 4 | (uint32_t)(afmt) << 7 | (uint32_t)(bfmt) << 10 |                    \
	 (uint32_t)(neg) << 13 | (uint32_t)(ta) << 15 | (uint32_t)((n) >> 3) << 17 |                  \
	 (uint32_t)((m) >> 4) << 24)

static void
refused(void)
{
	const struct {
		const char *what;
		int kind, ts, group;
		uint32_t v;
		const char *field; /* in the message */
	} c[] = {
		{"kind::f16 D F16 with BF16 A/B", KIND_F16, 0, 1, dense(0, 1, 1, 0, 0, 128, 64), "D type F16"},
		{"kind::f16 A F16, B BF16", KIND_F16, 0, 1, dense(1, 0, 1, 0, 0, 128, 64), "A type 0 and B type 1"},
		{"kind::i8 N = 40", KIND_I8, 0, 1, dense(2, 1, 1, 0, 0, 128, 40), "N = 40"},
		{"kind::i8 negate", KIND_I8, 0, 1, dense(2, 1, 1, 1, 0, 128, 64), "negate"},
		{"kind::f16 M = 128 N = 24", KIND_F16, 0, 1, dense(1, 1, 1, 0, 0, 128, 24), "N = 24"},
		{"TS kind::f16 M = 128 N = 72", KIND_F16, 1, 1, dense(1, 1, 1, 0, 0, 128, 72), "N = 72"},
		{"TS with transposed A", KIND_F16, 1, 1, dense(1, 1, 1, 0, 1, 128, 64), "transpose A"},
		{"kind::tf32 D F16", KIND_TF32, 0, 1, dense(0, 2, 2, 0, 0, 64, 64), "D F32"},
		{"kind::f16 M = 256 with cta_group::1", KIND_F16, 0, 1, dense(1, 1, 1, 0, 0, 256, 64), "M = 256"},
		{"kind::f16 cta_group::2 M = 64", KIND_F16, 0, 2, dense(1, 1, 1, 0, 0, 64, 64), "M = 64"},
		{"kind::f16 cta_group::2 M = 256 N = 24", KIND_F16, 0, 2, dense(1, 1, 1, 0, 0, 256, 24), "N = 24"},
		{"kind::i8 cta_group::2 M = 256 N = 48", KIND_I8, 0, 2, dense(2, 1, 1, 0, 0, 256, 48), "N = 48"},
		{"kind::f16 cta_group::2 F16 D with BF16 A/B", KIND_F16, 0, 2, dense(0, 1, 1, 0, 0, 256, 64), "D type F16"},
	};
	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char why[320] = "";
		if (!emu_tc_idesc_check(c[i].v, c[i].kind, 0, c[i].ts, c[i].group, why, sizeof why)) {
			printf("FAIL the emulator accepts %s (0x%08x)\n", c[i].what, c[i].v);
			fails++;
		} else if (!strstr(why, c[i].field)) {
			printf("FAIL %s: the message does not name `%s`: %s\n", c[i].what, c[i].field, why);
			fails++;
		} else {
			printf("ok   %s: %s\n", c[i].what, why);
		}
	}
	/* gen/desc refuses the ones it can express */
	Idesc d;
	memset(&d, 0, sizeof d);
	d.kind = IK_F16, d.a = d.b = DT_BF16, d.d = DT_F16, d.m = 128, d.n = 64, d.cta_group = 1;
	uint32_t v;
	if (!idesc_encode(&v, &d, NULL)) {
		printf("FAIL gen/desc builds kind::f16 D F16 with BF16 A/B\n");
		fails++;
	}
	d.d = DT_F32, d.n = 24;
	if (!idesc_encode(&v, &d, NULL)) {
		printf("FAIL gen/desc builds kind::f16 M = 128 N = 24\n");
		fails++;
	}
	d.m = 256, d.n = 64;
	if (!idesc_encode(&v, &d, NULL)) {
		printf("FAIL gen/desc builds kind::f16 M = 256 with cta_group::1\n");
		fails++;
	}
	d.cta_group = 2, d.n = 24;
	if (!idesc_encode(&v, &d, NULL)) {
		printf("FAIL gen/desc builds kind::f16 cta_group::2 M = 256 N = 24\n");
		fails++;
	}
	d.kind = IK_I8, d.a = d.b = DT_S8, d.d = DT_S32, d.n = 48;
	if (!idesc_encode(&v, &d, NULL)) {
		printf("FAIL gen/desc builds kind::i8 cta_group::2 M = 256 N = 48\n");
		fails++;
	}
}

int
main(void)
{
	agree();
	refused();
	printf("%d failure(s)\n", fails);
	return fails != 0;
}
