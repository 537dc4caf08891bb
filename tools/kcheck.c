/* kcheck: run one kernel on seeded random inputs at several shapes and
 * compare each result with the float64 reference (tools/check.c).
 *
 *   kcheck [options] FILE.ptx
 *   kcheck [options] --gen gemm --target sm_90a --tile-n 128 ...
 *   kcheck [options] --gen fmha --target sm_90a --head-dim 128 --mask causal ...
 *
 * With --gen, every option kcheck does not know goes to kgen_generate. The
 * family's dimensions are options too (gemm: --m --n --k; fmha: --batch
 * --seqlen-q --seqlen-k [--varlen 0|1|2]); repeating one starts the next
 * shape. Without shapes, the family's default list runs: small, odd sizes
 * that are not multiples of any tile (fmha: decode, tails, varlen).
 *
 * Exit status (tools/check.h): 0 all passed, 1 a check failed, 2 bad input
 * (usage, generation error, malformed header, no checker for the family, a
 * kernel that needs more than the device allows), 74 output lost, 77
 * nothing here can run the kernel (no GPU and no emulator, or a target this
 * device cannot run), the code meson counts as skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "gen/numarg.h"
#include "gen/outfile.h"
#include "tools/check.h"

enum { MAX_OPTS = 128, MAX_SHAPES = 64 };

typedef struct Opt {
	const char *raw;   /* as given: "--tile-n" */
	const char *name;  /* without the leading "--" */
	const char *value; /* NULL for a flag */
} Opt;

typedef struct Args {
	const char *device;
	uint64_t seed;
	int have_seed;
	int fills;          /* bit i: CheckFill i */
	const char *file;
	const char *gen;    /* family to generate */
	Opt rest[MAX_OPTS]; /* options kcheck does not know, in order */
	int nrest;
	CheckShape shapes[MAX_SHAPES];
	int nshapes;
	uint64_t full_limit;
} Args;

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: kcheck [options] FILE.ptx\n"
	        "       kcheck [options] --gen FAMILY [kgen arguments...]\n"
	        "options:\n"
	        "  --device cuda|emu|auto   where to run (default auto: a GPU, else the emulator)\n"
	        "  --seed N                 base seed (default: from the clock; always printed)\n"
	        "  --fill normal|edge|all   input pattern (default all: both)\n"
	        "  --m M --n N --k K        one shape (gemm); repeat for more\n"
	        "  --batch B --seqlen-q SQ --seqlen-k SK [--varlen 0|1|2]\n"
	        "                           one shape (fmha); varlen 1 draws per-sequence\n"
	        "                           lengths up to SQ and SK, 2 also empty sequences\n"
	        "  --shape MxNxK            one shape, all dimensions at once (fmha: BxSQxSK[xV])\n"
	        "  --full-limit W           compare every row while the reference costs at most\n"
	        "                           W multiply-adds (gemm M*N*K; default 2^33)\n"
	        "  --schedules N            emulator: run each launch under N seeded schedules\n"
	        "                           (KRT_EMU_SEEDS=N; differing results fail)\n"
	        "exit: 0 pass, 1 fail, 2 bad input, 74 output lost, 77 no device can run it\n");
}

/* One option's number (gen/numarg.h); prints why and returns -1. */
static int
parse_u64(const char *opt, const char *s, uint64_t *out)
{
	KgErr err = {{0}};
	if (kg_parse_u64(opt, s, UINT64_MAX, out, &err) == 0)
		return 0;
	fprintf(stderr, "kcheck: %s\n", err.msg);
	return -1;
}

static int
known(const char *opt)
{
	static const char *const names[] = {
		"--device", "--seed", "--fill", "--shape", "--full-limit", "--gen", "--schedules",
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(opt, names[i]))
			return 1;
	return 0;
}

/* Returns 0, or 2 after printing why. */
static int
parse_args(int argc, char **argv, Args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = v != NULL; /* this option consumed argv[i + 1] */

		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			usage(stdout);
			exit(0);
		} else if (strncmp(s, "--", 2) != 0) {
			if (a->file) {
				fprintf(stderr, "kcheck: two files: %s and %s\n", a->file, s);
				return 2;
			}
			a->file = s;
			takes = 0;
		} else if (!v && known(s)) {
			fprintf(stderr, "kcheck: %s needs a value\n", s);
			return 2;
		} else if (!strcmp(s, "--device"))
			a->device = v;
		else if (!strcmp(s, "--seed")) {
			if (parse_u64("--seed", v, &a->seed))
				return 2;
			a->have_seed = 1;
		} else if (!strcmp(s, "--fill")) {
			CheckFill f;
			if (!strcmp(v, "all"))
				a->fills = (1 << CHECK_FILL_NORMAL) | (1 << CHECK_FILL_EDGE);
			else if (check_fill_parse(v, &f) == 0)
				a->fills = 1 << f;
			else {
				fprintf(stderr, "kcheck: --fill %s: normal, edge or all\n", v);
				return 2;
			}
		} else if (!strcmp(s, "--shape")) {
			if (a->nshapes == MAX_SHAPES || check_shape_parse(v, &a->shapes[a->nshapes])) {
				fprintf(stderr, "kcheck: --shape %s: want e.g. 127x129x72\n", v);
				return 2;
			}
			a->nshapes++;
		} else if (!strcmp(s, "--full-limit")) {
			if (parse_u64("--full-limit", v, &a->full_limit))
				return 2;
		} else if (!strcmp(s, "--schedules")) {
			uint64_t n;
			if (parse_u64("--schedules", v, &n))
				return 2;
			if (n < 1 || n > 64) {
				fprintf(stderr, "kcheck: --schedules %s: a count from 1 to 64\n", v);
				return 2;
			}
			/* read by the emulator at each launch (runtime/emu/README.md) */
			setenv("KRT_EMU_SEEDS", v, 1);
		} else if (!strcmp(s, "--gen"))
			a->gen = v;
		else {
			/* kgen's or a dimension: decided once the family is known */
			if (a->nrest == MAX_OPTS) {
				fprintf(stderr, "kcheck: too many options\n");
				return 2;
			}
			takes = v && strncmp(v, "--", 2) != 0;
			a->rest[a->nrest].raw = s;
			a->rest[a->nrest].name = s + 2;
			a->rest[a->nrest++].value = takes ? v : NULL;
		}
		i += takes;
	}
	if (!a->file == !a->gen) {
		fprintf(stderr, "kcheck: give one FILE.ptx or --gen FAMILY\n");
		usage(stderr);
		return 2;
	}
	return 0;
}

/* Moves the dimension options out of a->rest into shapes: a dimension that
 * the current shape already has starts a new one; optional dimensions
 * (fmha's varlen) not given are 0. */
static int
take_dims(Args *a, const CheckFamily *fam)
{
	CheckShape cur = {0};
	unsigned have = 0;
	int kept = 0;
	unsigned need = (1u << (fam->nrequired ? fam->nrequired : fam->ndims)) - 1;

	for (int i = 0; i < a->nrest; i++) {
		int d = check_family_dim(fam, a->rest[i].name);
		if (d < 0) {
			a->rest[kept++] = a->rest[i];
			continue;
		}
		uint64_t v;
		if (!a->rest[i].value) {
			fprintf(stderr, "kcheck: --%s needs a number\n", a->rest[i].name);
			return 2;
		}
		if (parse_u64(a->rest[i].raw, a->rest[i].value, &v))
			return 2;
		if (have & (1u << d)) {
			if ((have & need) != need) {
				fprintf(stderr, "kcheck: family %s: --%s again before the shape has each "
				        "of", fam->name, a->rest[i].name);
				check_family_print_dims(stderr, fam);
				return 2;
			}
			if (a->nshapes == MAX_SHAPES) {
				fprintf(stderr, "kcheck: more than %d shapes\n", MAX_SHAPES);
				return 2;
			}
			a->shapes[a->nshapes++] = cur;
			cur = (CheckShape){0};
			have = 0;
		}
		cur.d[d] = v;
		cur.n = fam->ndims;
		have |= 1u << d;
	}
	a->nrest = kept;
	if (have && (have & need) != need) {
		fprintf(stderr, "kcheck: family %s: a shape needs each of", fam->name);
		check_family_print_dims(stderr, fam);
		return 2;
	}
	if (have) {
		if (a->nshapes == MAX_SHAPES)
			return 2;
		a->shapes[a->nshapes++] = cur;
	}
	for (int i = 0; i < a->nshapes; i++)
		if (check_shape_fit(fam, &a->shapes[i])) {
			fprintf(stderr, "kcheck: family %s: a shape has %d dimensions (%s), the first "
			        "%d required\n", fam->name, fam->ndims, fam->dims,
			        fam->nrequired ? fam->nrequired : fam->ndims);
			return 2;
		}
	return 0;
}

static int
generate(const Args *a, char **ptx, size_t *len)
{
	const char *argv[2 * MAX_OPTS];
	int n = 0;
	KgErr kerr = {{0}};

	for (int i = 0; i < a->nrest; i++) {
		argv[n++] = a->rest[i].raw;
		if (a->rest[i].value)
			argv[n++] = a->rest[i].value;
	}
	/* a checker family emitted by another kgen family (gemm_moe: gemm --moe) */
	const CheckFamily *fam = check_family(a->gen);
	const char *kfam = fam && fam->kgen ? fam->kgen : a->gen;
	if (kgen_generate(kfam, n, argv, ptx, len, &kerr)) {
		fprintf(stderr, "kcheck: kgen %s: %s\n", kfam, kerr.msg);
		return 2;
	}
	return 0;
}

/* The command line that replays one case. */
static void
replay_label(const Args *a, const char *device, const CheckShape *s, CheckFill fill,
             char *buf, size_t n)
{
	char shape[128];
	size_t used;

	check_shape_str(s, shape, sizeof shape);
	used = (size_t)snprintf(buf, n, "kcheck --device %s --seed %llu --shape %s --fill %s",
	                        device, (unsigned long long)a->seed, shape, check_fill_name(fill));
	if (a->file) {
		snprintf(buf + used, n - used, " %s", a->file);
		return;
	}
	used += (size_t)snprintf(buf + used, n - used, " --gen %s", a->gen);
	for (int i = 0; i < a->nrest && used < n; i++)
		used += (size_t)snprintf(buf + used, n - used, " --%s%s%s", a->rest[i].name,
		                         a->rest[i].value ? " " : "",
		                         a->rest[i].value ? a->rest[i].value : "");
}

static int
run_shapes(const Args *a, KrtDevice *dev, KrtModule *mod, const CheckFamily *fam)
{
	const CheckShape *shapes = a->nshapes ? a->shapes : fam->shapes;
	int nshapes = a->nshapes ? a->nshapes : fam->nshapes;
	int failed = 0, total = 0, refused = 0;

	for (int i = 0; i < nshapes; i++)
		for (int f = 0; f <= CHECK_FILL_EDGE; f++) {
			char shape[128], label[2048];
			CheckResult r;
			KrtErr err = {0};
			CheckShape sh = shapes[i];
			if (!(a->fills & (1 << f)))
				continue;
			if (!a->nshapes && fam->fit_default)
				fam->fit_default(krt_module_abi(mod), &sh);
			check_shape_str(&sh, shape, sizeof shape);
			replay_label(a, krt_device_kind(dev), &sh, (CheckFill)f, label, sizeof label);
			CheckOpts o = {
				.seed = check_case_seed(a->seed, &sh, (CheckFill)f),
				.fill = (CheckFill)f,
				.full_limit = a->full_limit,
				.log = stdout,
				.label = label,
			};
			fflush(stdout);
			int rc = check_run(dev, mod, &sh, &o, &r, &err);
			total++;
			if (rc) {
				failed++;
				refused += check_exit_of(rc) == CHECK_EXIT_INPUT;
				printf("FAIL  %-18s %-6s  error: %s\n", shape, check_fill_name(o.fill),
				       err.msg);
				if (rc == KRT_ECUDA) {
					printf("kcheck: stopping: the device reported an error; later "
					       "launches in this context would fail too\n");
					return 1;
				}
				continue;
			}
			failed += !r.pass;
			printf("%s  %-18s %-6s  max rel err %.2e  tol %.0e  checked %llu of %llu%s",
			       r.pass ? "PASS" : "FAIL", shape, check_fill_name(o.fill), r.max_err,
			       r.tol, (unsigned long long)r.checked, (unsigned long long)r.total,
			       r.subset ? " (row subset)" : "");
			if (r.lse_tol > 0)
				printf("  lse err %.2e tol %.0e", r.lse_err, r.lse_tol);
			if (r.unwritten)
				printf("  UNWRITTEN %llu", (unsigned long long)r.unwritten);
			if (r.guard_bad)
				printf("  GUARD %llu bytes", (unsigned long long)r.guard_bad);
			printf("\n");
		}
	printf("kcheck: %d of %d passed (seed %llu)\n", total - failed, total,
	       (unsigned long long)a->seed);
	/* a shape the kernel or the device refuses is bad input, not a failed check */
	return failed > refused ? CHECK_EXIT_FAIL : refused ? CHECK_EXIT_INPUT : 0;
}

static int
run(Args *a)
{
	char *ptx = NULL;
	size_t len = 0;
	KrtErr err = {0};
	KrtAbi abi;
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;
	const CheckFamily *fam = a->gen ? check_family(a->gen) : NULL;
	int rc;

	if (a->gen && !fam) {
		fprintf(stderr, "kcheck: --gen %s: no checker for that family\n", a->gen);
		return 2;
	}
	if (a->gen && (rc = take_dims(a, fam)))
		return rc;
	if (a->gen ? generate(a, &ptx, &len) : check_read_file(a->file, &ptx, &len, &err)) {
		if (!a->gen)
			fprintf(stderr, "kcheck: %s\n", err.msg);
		return 2;
	}
	if (krt_abi_parse(ptx, len, &abi, &err)) {
		fprintf(stderr, "kcheck: %s: bad ABI header: %s\n", a->file ? a->file : "kgen output",
		        err.msg);
		free(ptx);
		return CHECK_EXIT_INPUT;
	}
	if (!fam && !(fam = check_family(abi.family))) {
		fprintf(stderr, "kcheck: %s: no checker for family '%s' yet; not checked\n",
		        abi.kernel, abi.family);
		free(ptx);
		return CHECK_EXIT_INPUT;
	}
	if (a->file && ((rc = take_dims(a, fam)) || a->nrest)) {
		if (!rc)
			fprintf(stderr, "kcheck: --%s: unknown option (kgen arguments need --gen)\n",
			        a->rest[0].name);
		free(ptx);
		return 2;
	}
	printf("kcheck: %s (family %s, target %s), seed %llu\n", abi.kernel, abi.family,
	       abi.target, (unsigned long long)a->seed);
	if ((rc = krt_device_open(&dev, a->device, 0, &err))) {
		/* With auto, the runtime's reason already says "no GPU found ...
		 * and the emulator is not available (...)". */
		printf("kcheck: no device to run on: %s; stopped after %s\n", err.msg,
		       a->gen ? "generation" : "reading the file");
		free(ptx);
		return check_exit_of(rc);
	}
	char devs[512];
	check_device_str(dev, &abi, devs, sizeof devs);
	printf("kcheck: device %s: %s\n", krt_device_kind(dev), devs);
	rc = krt_module_load(dev, ptx, len, &mod, &err);
	free(ptx);
	if (rc) {
		printf("kcheck: %s: %s%s\n", abi.kernel, err.msg,
		       rc == KRT_EMISMATCH ? "; not checked on this device" : "");
		krt_device_close(dev);
		return check_exit_of(rc);
	}
	rc = run_shapes(a, dev, mod, fam);
	krt_module_unload(mod);
	krt_device_close(dev);
	return rc;
}

int
main(int argc, char **argv)
{
	static Args a = {.fills = (1 << CHECK_FILL_NORMAL) | (1 << CHECK_FILL_EDGE)};
	int rc = parse_args(argc, argv, &a);

	if (rc)
		return rc;
	if (!a.have_seed)
		a.seed = check_seed_from_time();
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = run(&a);
	KgErr err = {{0}};
	if (kg_close_stdout(&err)) {
		fprintf(stderr, "kcheck: %s\n", err.msg);
		return rc ? rc : CHECK_EXIT_IO;
	}
	return rc;
}
