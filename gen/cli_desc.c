/* The `kgen desc` and `kgen idesc` calculators (cli.h): read a tile or the
 * fields of a descriptor from the command line, encode or decode it through
 * desc.c, and print the word with one row per field. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "desc.h"
#include "dtype.h"
#include "layout.h"
#include "numarg.h"

/* `kgen desc` and `kgen idesc`: calculators over desc.c, printing the value
 * on the first line and one row per field after it (docs/hardware.md,
 * "Shared-memory descriptor (sm_100)" and "Instruction descriptor"). */

typedef struct Opt {
	const char *name;
	int flag;        /* takes no value */
	const char *val; /* NULL when absent; "1" for a given flag */
} Opt;

enum {
	D_TARGET, D_MAJOR, D_SWIZZLE, D_DTYPE, D_ROWS, D_COLS, D_ADDR, D_LBO,
	D_SBO, D_BASE_OFFSET, D_DECODE, D_COUNT
};

enum {
	I_KIND, I_A, I_B, I_D, I_M, I_N, I_A_MAJOR, I_B_MAJOR, I_NEG_A, I_NEG_B,
	I_CTA_GROUP, I_SCALE, I_SFA_ID, I_SFB_ID, I_SPARSE, I_SPARSE_SEL,
	I_SATURATE, I_MAX_SHIFT, I_K96, I_DECODE, I_COUNT
};

static const struct {
	const char *name;
	DescArch arch;
} targets[] = {
	{"sm_90a", DESC_SM90},
	{"sm_100a", DESC_SM100},
};

/* Accepts --name value and --name=value; a flag takes no value. */
/* 1 after printing the options for --help or -h. */
static int
parse_opts(Opt *opts, int nopts, const char *cmd, int argc, char **argv, FILE *out,
           KgErr *err)
{
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *eq;
		Opt *o = NULL;
		size_t len;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fprintf(out, "kgen %s options:\n", cmd);
			for (int j = 0; j < nopts; j++)
				fprintf(out, "  --%s%s\n", opts[j].name, opts[j].flag ? "" : " VALUE");
			return 1;
		}
		if (strncmp(a, "--", 2) != 0)
			return kg_fail(err, "%s: unexpected argument (kgen %s takes "
			               "--name value options)", a, cmd);
		eq = strchr(a + 2, '=');
		len = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
		for (int j = 0; j < nopts; j++)
			if (strlen(opts[j].name) == len
			    && strncmp(opts[j].name, a + 2, len) == 0)
				o = &opts[j];
		if (!o)
			return kg_fail(err, "--%.*s: unknown option of kgen %s", (int)len,
			               a + 2, cmd);
		if (o->val)
			return kg_fail(err, "--%s: given twice", o->name);
		if (o->flag && eq)
			return kg_fail(err, "--%s=%s: --%s takes no value", o->name,
			               eq + 1, o->name);
		if (o->flag)
			o->val = "1";
		else if (eq)
			o->val = eq + 1;
		else if (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0)
			o->val = argv[++i];
		else
			return kg_fail(err, "--%s: missing value", o->name);
		if (!*o->val)
			return kg_fail(err, "--%s=: empty value", o->name);
	}
	return 0;
}

static int
opt_u64(const Opt *o, uint64_t max, uint64_t *out, KgErr *err)
{
	char name[40];

	snprintf(name, sizeof name, "--%s", o->name);
	return kg_parse_u64(name, o->val, max, out, err);
}

static int
opt_int(const Opt *o, int *out, KgErr *err)
{
	uint64_t v;

	if (opt_u64(o, INT32_MAX, &v, err))
		return -1;
	*out = (int)v;
	return 0;
}

static int
opt_dtype(const Opt *o, DType *out, KgErr *err)
{
	if (dtype_parse(o->val, out))
		return kg_fail(err, "--%s=%s: unknown type (bf16, fp16, f32, tf32, "
		               "e4m3, e5m2, e2m3, e3m2, e2m1, ue8m0, ue4m3, s8, u8, s32)",
		               o->name, o->val);
	return 0;
}

/* 0 = K-major, 1 = MN-major. */
static int
opt_major(const Opt *o, int *mn, KgErr *err)
{
	*mn = 0;
	if (strcasecmp(o->val, "K") == 0)
		*mn = 0;
	else if (strcasecmp(o->val, "MN") == 0)
		*mn = 1;
	else
		return kg_fail(err, "--%s=%s: must be K or MN", o->name, o->val);
	return 0;
}

static int
required(const Opt *o, const char *what, KgErr *err)
{
	if (!o->val)
		return kg_fail(err, "--%s: required (%s)", o->name, what);
	return 0;
}

static void
print_fields(FILE *out, const DescField *f, int n)
{
	fprintf(out, "%-6s %-12s %-8s %s\n", "bits", "field", "raw", "meaning");
	for (int i = 0; i < n; i++) {
		char bits[16], raw[24];

		if (f[i].lo == f[i].hi)
			snprintf(bits, sizeof bits, "%d", f[i].lo);
		else
			snprintf(bits, sizeof bits, "%d-%d", f[i].lo, f[i].hi);
		snprintf(raw, sizeof raw, "0x%llx", (unsigned long long)f[i].raw);
		if (f[i].meaning[0])
			fprintf(out, "%-6s %-12s %-8s %s\n", bits, f[i].name, raw,
			        f[i].meaning);
		else
			fprintf(out, "%-6s %-12s %s\n", bits, f[i].name, raw);
	}
}

static int
print_desc(FILE *out, DescArch arch, uint64_t v)
{
	DescField f[16];
	int n = desc_fields(f, 16, arch, v);

	if (n < 0)
		return -1;
	fprintf(out, "0x%016llx\n", (unsigned long long)v);
	print_fields(out, f, n);
	return 0;
}

/* The layout that supplies LBO/SBO unless both are given by hand. */
static int
desc_layout(Opt *o, DescArch arch, Swizzle swz, SmemDesc *d, KgErr *err)
{
	static const int need[] = {D_MAJOR, D_DTYPE, D_ROWS, D_COLS};
	TileLayout t;
	DType dt;
	int mn, rows, cols;

	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
		if (required(&o[need[i]], "to lay out the tile; or give --lbo and "
		             "--sbo with no tile", err))
			return -1;
	if (opt_major(&o[D_MAJOR], &mn, err) || opt_dtype(&o[D_DTYPE], &dt, err)
	    || opt_int(&o[D_ROWS], &rows, err) || opt_int(&o[D_COLS], &cols, err))
		return -1;
	if (layout_canonical(&t, mn ? MAJOR_MN : MAJOR_K, swz, dtype_bits(dt), rows,
	                     cols, err))
		return -1;
	d->lbo = t.lbo;
	d->sbo = t.sbo;
	/* Without hand overrides the tile's own rules apply (period alignment). */
	if (!o[D_LBO].val && !o[D_SBO].val && !o[D_BASE_OFFSET].val) {
		uint64_t v;

		if (desc_for_tile(&v, arch, &t, d->addr, err))
			return -1;
	}
	return 0;
}

static int
desc_decode_cmd(Opt *o, DescArch arch, FILE *out, KgErr *err)
{
	SmemDesc d;
	uint64_t v;

	for (int i = 0; i < D_COUNT; i++)
		if (i != D_TARGET && i != D_DECODE && o[i].val)
			return kg_fail(err, "--%s=%s: --decode takes only --target",
			               o[i].name, o[i].val);
	if (opt_u64(&o[D_DECODE], UINT64_MAX, &v, err)
	    || desc_decode(&d, arch, v, err))
		return -1;
	return print_desc(out, arch, v);
}

int
cli_desc(int argc, char **argv, FILE *out, KgErr *err)
{
	Opt o[D_COUNT] = {
		[D_TARGET] = {"target", 0, NULL},
		[D_MAJOR] = {"major", 0, NULL},
		[D_SWIZZLE] = {"swizzle", 0, NULL},
		[D_DTYPE] = {"dtype", 0, NULL},
		[D_ROWS] = {"rows", 0, NULL},
		[D_COLS] = {"cols", 0, NULL},
		[D_ADDR] = {"addr", 0, NULL},
		[D_LBO] = {"lbo", 0, NULL},
		[D_SBO] = {"sbo", 0, NULL},
		[D_BASE_OFFSET] = {"base-offset", 0, NULL},
		[D_DECODE] = {"decode", 0, NULL},
	};
	DescArch arch;
	SmemDesc d = {0};
	Swizzle swz;
	uint64_t v, x;
	size_t i;

	int rc = parse_opts(o, D_COUNT, "desc", argc, argv, out, err);
	if (rc)
		return rc < 0 ? -1 : 0;
	if (required(&o[D_TARGET], "sm_90a or sm_100a", err))
		return -1;
	for (i = 0; i < sizeof targets / sizeof targets[0]; i++)
		if (strcmp(o[D_TARGET].val, targets[i].name) == 0)
			break;
	if (i == sizeof targets / sizeof targets[0])
		return kg_fail(err, "--target=%s: must be sm_90a or sm_100a",
		               o[D_TARGET].val);
	arch = targets[i].arch;
	if (o[D_DECODE].val)
		return desc_decode_cmd(o, arch, out, err);

	if (required(&o[D_SWIZZLE], "none, 32, 64 or 128", err))
		return -1;
	if (swizzle_parse(o[D_SWIZZLE].val, &swz))
		return kg_fail(err, "--swizzle=%s: must be none, 32, 64 or 128",
		               o[D_SWIZZLE].val);
	d.swz = swz;
	if (o[D_ADDR].val) {
		if (opt_u64(&o[D_ADDR], UINT32_MAX, &x, err))
			return -1;
		d.addr = (uint32_t)x;
	}
	if ((!o[D_LBO].val || !o[D_SBO].val || o[D_MAJOR].val || o[D_DTYPE].val
	     || o[D_ROWS].val || o[D_COLS].val)
	    && desc_layout(o, arch, swz, &d, err))
		return -1;
	if (o[D_LBO].val) {
		if (opt_u64(&o[D_LBO], UINT32_MAX, &x, err))
			return -1;
		d.lbo = (uint32_t)x;
	}
	if (o[D_SBO].val) {
		if (opt_u64(&o[D_SBO], UINT32_MAX, &x, err))
			return -1;
		d.sbo = (uint32_t)x;
	}
	if (o[D_BASE_OFFSET].val && opt_int(&o[D_BASE_OFFSET], &d.base_offset, err))
		return -1;
	if (desc_encode(&v, arch, &d, err))
		return -1;
	return print_desc(out, arch, v);
}

static int
print_idesc(FILE *out, IdescKind kind, uint32_t v)
{
	DescField f[32];
	int n = idesc_fields(f, 32, kind, v);

	if (n < 0)
		return -1;
	fprintf(out, "0x%08x\n", v);
	print_fields(out, f, n);
	return 0;
}

/* Numeric options that map straight onto Idesc fields. */
static int
idesc_numbers(Opt *o, Idesc *d, KgErr *err)
{
	static const struct {
		int opt;
		size_t off;
	} nums[] = {
		{I_M, offsetof(Idesc, m)},
		{I_N, offsetof(Idesc, n)},
		{I_CTA_GROUP, offsetof(Idesc, cta_group)},
		{I_SFA_ID, offsetof(Idesc, sfa_id)},
		{I_SFB_ID, offsetof(Idesc, sfb_id)},
		{I_SPARSE_SEL, offsetof(Idesc, sparse_sel)},
		{I_MAX_SHIFT, offsetof(Idesc, max_shift)},
	};

	for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
		int v;

		if (!o[nums[i].opt].val)
			continue;
		if (opt_int(&o[nums[i].opt], &v, err))
			return -1;
		memcpy((char *)d + nums[i].off, &v, sizeof v);
	}
	return 0;
}

static int
idesc_decode_cmd(Opt *o, IdescKind kind, FILE *out, KgErr *err)
{
	uint64_t v;

	for (int i = 0; i < I_COUNT; i++)
		if (i != I_KIND && i != I_DECODE && o[i].val)
			return kg_fail(err, "--%s=%s: --decode takes only --kind",
			               o[i].name, o[i].val);
	if (opt_u64(&o[I_DECODE], UINT32_MAX, &v, err))
		return -1;
	return print_idesc(out, kind, (uint32_t)v);
}

int
cli_idesc(int argc, char **argv, FILE *out, KgErr *err)
{
	Opt o[I_COUNT] = {
		[I_KIND] = {"kind", 0, NULL},
		[I_A] = {"a", 0, NULL},
		[I_B] = {"b", 0, NULL},
		[I_D] = {"d", 0, NULL},
		[I_M] = {"m", 0, NULL},
		[I_N] = {"n", 0, NULL},
		[I_A_MAJOR] = {"a-major", 0, NULL},
		[I_B_MAJOR] = {"b-major", 0, NULL},
		[I_NEG_A] = {"neg-a", 1, NULL},
		[I_NEG_B] = {"neg-b", 1, NULL},
		[I_CTA_GROUP] = {"cta-group", 0, NULL},
		[I_SCALE] = {"scale", 0, NULL},
		[I_SFA_ID] = {"sfa-id", 0, NULL},
		[I_SFB_ID] = {"sfb-id", 0, NULL},
		[I_SPARSE] = {"sparse", 1, NULL},
		[I_SPARSE_SEL] = {"sparse-sel", 0, NULL},
		[I_SATURATE] = {"saturate", 1, NULL},
		[I_MAX_SHIFT] = {"max-shift", 0, NULL},
		[I_K96] = {"k96", 1, NULL},
		[I_DECODE] = {"decode", 0, NULL},
	};
	Idesc d = {0};
	uint32_t v;
	int block;

	int rc = parse_opts(o, I_COUNT, "idesc", argc, argv, out, err);
	if (rc)
		return rc < 0 ? -1 : 0;
	if (required(&o[I_KIND], "f16, tf32, f8f6f4, i8, mxf8f6f4, mxf4 or "
	                "mxf4nvf4", err))
		return -1;
	if (idesc_kind_parse(o[I_KIND].val, &d.kind))
		return kg_fail(err, "--kind=%s: must be f16, tf32, f8f6f4, i8, "
		               "mxf8f6f4, mxf4 or mxf4nvf4", o[I_KIND].val);
	if (o[I_DECODE].val)
		return idesc_decode_cmd(o, d.kind, out, err);
	block = d.kind == IK_MXF8F6F4 || d.kind == IK_MXF4 || d.kind == IK_MXF4NVF4;

	if (required(&o[I_A], "operand type", err)
	    || required(&o[I_B], "operand type", err)
	    || required(&o[I_M], "M of the MMA", err)
	    || required(&o[I_N], "N of the MMA", err)
	    || opt_dtype(&o[I_A], &d.a, err) || opt_dtype(&o[I_B], &d.b, err))
		return -1;
	/* Block-scaled kinds have no D field: they accumulate in f32 (docs/hardware.md,
	 * "Block-scaled instruction descriptor"). */
	d.d = DT_F32;
	if (!block && required(&o[I_D], "accumulator type", err))
		return -1;
	if (o[I_D].val && opt_dtype(&o[I_D], &d.d, err))
		return -1;
	if (block && d.d != DT_F32)
		return kg_fail(err, "--d=%s: block-scaled kinds accumulate in f32 "
		               "(docs/hardware.md, \"Block-scaled instruction descriptor\")", o[I_D].val);
	if (!block && o[I_SCALE].val)
		return kg_fail(err, "--scale=%s: only block-scaled kinds take a scale "
		               "type", o[I_SCALE].val);
	/* ue8m0 is the only choice except for mxf4nvf4, where it must be said. */
	d.scale = DT_UE8M0;
	if (d.kind == IK_MXF4NVF4 && required(&o[I_SCALE], "ue8m0 or ue4m3", err))
		return -1;
	if (o[I_SCALE].val && opt_dtype(&o[I_SCALE], &d.scale, err))
		return -1;
	d.cta_group = 1;
	if (idesc_numbers(o, &d, err))
		return -1;
	if (o[I_A_MAJOR].val && opt_major(&o[I_A_MAJOR], &d.a_major_mn, err))
		return -1;
	if (o[I_B_MAJOR].val && opt_major(&o[I_B_MAJOR], &d.b_major_mn, err))
		return -1;
	d.neg_a = o[I_NEG_A].val != NULL;
	d.neg_b = o[I_NEG_B].val != NULL;
	d.sparse = o[I_SPARSE].val != NULL;
	d.saturate = o[I_SATURATE].val != NULL;
	d.k96 = o[I_K96].val != NULL;
	if (idesc_encode(&v, &d, err))
		return -1;
	return print_idesc(out, d.kind, v);
}
