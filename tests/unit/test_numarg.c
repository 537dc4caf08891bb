/* The one parser of typed numbers (gen/numarg.h): decimal or 0x hex, a
 * leading 0 still decimal, no trailing text, no overflow, and every error
 * naming the parameter, the value and the rule. */
#include <float.h>
#include <stdint.h>

#include "gen/numarg.h"

#include "expect.h"

static void
test_u64(void)
{
	KgErr e = {{0}};
	uint64_t v = 7;

	EXPECT(kg_parse_u64("--tile-n", "0200", 1000, &v, &e) == 0 && v == 200);
	EXPECT(kg_parse_u64("--tile-n", "0x80", 1000, &v, &e) == 0 && v == 128);
	EXPECT(kg_parse_u64("--tile-n", "0X1f", 1000, &v, &e) == 0 && v == 31);
	EXPECT(kg_parse_u64("--n", "0", 1000, &v, &e) == 0 && v == 0);
	EXPECT(kg_parse_u64("--seed", "18446744073709551615", UINT64_MAX, &v, &e) == 0 &&
	       v == UINT64_MAX);
	v = 7;
	EXPECT(kg_parse_u64("--seed", "18446744073709551616", UINT64_MAX, &v, &e) < 0 && v == 7);
	EXPECT_MSG(e.msg, "--seed=18446744073709551616", "0..18446744073709551615");
	EXPECT(kg_parse_u64("--tile-n", "128x", 1000, &v, &e) < 0);
	EXPECT_MSG(e.msg, "--tile-n=128x", "integer", "0..1000");
	EXPECT(kg_parse_u64("--tile-n", "1001", 1000, &v, &e) < 0);
	EXPECT(kg_parse_u64("--tile-n", "-1", 1000, &v, &e) < 0);
	EXPECT(kg_parse_u64("--tile-n", "+1", 1000, &v, &e) < 0);
	EXPECT(kg_parse_u64("--tile-n", " 1", 1000, &v, &e) < 0);
	EXPECT(kg_parse_u64("--tile-n", "", 1000, &v, &e) < 0);
	EXPECT(kg_parse_u64("--tile-n", "0x", 1000, &v, &e) < 0);
	EXPECT(kg_parse_u64("--tile-n", "1e3", 1000, &v, &e) < 0);
	EXPECT(kg_parse_u64("--tile-n", NULL, 1000, &v, &e) < 0);
}

static void
test_int(void)
{
	KgErr e = {{0}};
	long long v = 0;

	EXPECT(kg_parse_int("--exp2-fma", "-1", -1, 8, &v, &e) == 0 && v == -1);
	EXPECT(kg_parse_int("--exp2-fma", "08", -1, 8, &v, &e) == 0 && v == 8);
	EXPECT(kg_parse_int("--exp2-fma", "-2", -1, 8, &v, &e) < 0);
	EXPECT_MSG(e.msg, "--exp2-fma=-2", "-1..8");
	EXPECT(kg_parse_int("--n", "-1", 0, 8, &v, &e) < 0);
	EXPECT(kg_parse_int("--n", "--1", -9, 8, &v, &e) < 0);
	EXPECT(kg_parse_int("--n", "-9223372036854775808", INT64_MIN, 0, &v, &e) == 0 &&
	       v == INT64_MIN);
	EXPECT(kg_parse_int("--n", "9223372036854775808", INT64_MIN, INT64_MAX, &v, &e) < 0);
}

static void
test_real(void)
{
	KgErr e = {{0}};
	double v = 0;
	static const char *const bad[] = {"nan", "-nan", "inf", "-inf", "1e999", "0x1p3", "1.5x",
	                                  "", " 1", "1e-400"};

	EXPECT(kg_parse_real("--softmax-scale", "0.125", 0, 1000, &v, &e) == 0 && v == 0.125);
	EXPECT(kg_parse_real("--softmax-scale", "1e-50", 0, 1000, &v, &e) == 0 && v == 1e-50);
	EXPECT(kg_parse_real("--softmax-scale", "-1", 0, 1000, &v, &e) < 0);
	EXPECT_MSG(e.msg, "--softmax-scale=-1", "finite", "0..1000");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		e.msg[0] = 0;
		EXPECT(kg_parse_real("--l2-mb", bad[i], -1e300, 1e300, &v, &e) < 0);
		EXPECT_MSG(e.msg, "--l2-mb=");
	}
}

int
main(void)
{
	test_u64();
	test_int();
	test_real();
	if (failures) {
		fprintf(stderr, "test_numarg: %d failure%s\n", failures, failures == 1 ? "" : "s");
		return 1;
	}
	printf("numarg: all passed\n");
	return 0;
}
