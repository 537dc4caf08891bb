/* kbench: time one kernel, then its peers at the same shape, in the same
 * run on the same machine, and print them side by side.
 *
 *   kbench gemm [--m 8192 --n 8192 --k 8192] [--iters 50] [--warmup 10]
 *               [FILE.ptx | kgen arguments...]
 *   kbench fmha [--batch 4 --seqlen-q 8192 --seqlen-k 8192] [--iters 50]
 *               [FILE.ptx | --head-dim 128 --heads-q 16 --mask causal ...]
 *
 * Method (/work/.library/device/METHOD.md): the kernel is checked first on
 * its own inputs (a row subset of the float64 reference; --no-check skips
 * it); inputs are random N(0,1), never zeros; when one input set fits in L2
 * several sets are rotated so that the cache does not serve them; each
 * launch is timed with device events (krt_time) and the median is reported,
 * TFLOP/s = flops / median (the family's count: check_gemm.c,
 * check_fmha.c). The peers (tools/peers.py: torch.matmul, i.e. cuBLAS, for
 * gemm; PyTorch SDPA with each of its cuDNN, flash and efficient backends
 * forced, for fmha) run afterwards in their own process with the same
 * shape, iteration counts and median, when `python3 -c "import torch"`
 * works; a peer that cannot run the shape is listed with the reason.
 *
 * Exit status (tools/check.h): 0 done, 1 the check or a launch failed, 2 bad
 * input (usage, generation, a kernel or shape the device or emulator
 * refuses), 74 output lost, 77 no device can run the kernel. The last lines
 * are a table, one machine-readable `kbench-result` line (ours against the
 * fastest peer), which tools/gpu-check collects, and one `kbench-peer` line
 * per peer. --json FILE appends the same run as one JSON object on one line
 * (JSON Lines; the fields are listed at write_json), which tools/plot-bench
 * draws.
 *
 * On the emulator the time is the CPU interpreter's, not a GPU's; a shape
 * above EMU_MAX_MACS multiply-adds is refused before any launch
 * (runtime/emu/README.md, "Limits"). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gen/emit.h"
#include "gen/kgen.h"
#include "gen/numarg.h"
#include "gen/outfile.h"
#include "tools/check.h"

#ifndef KGEN_SOURCE_ROOT
#define KGEN_SOURCE_ROOT "."
#endif

enum { MAX_OPTS = 128, MAX_SETS = 64, MAX_PEERS = 8 };
/* about a minute of the interpreter (a 1024^3 gemm, 2^30, takes seconds) */
#define EMU_MAX_MACS 17179869184.0 /* 2^34 */

typedef struct Args {
	const CheckFamily *fam;
	CheckShape shape;
	int iters, warmup;
	const char *device;
	uint64_t seed;
	int no_check, no_peer;
	double l2_mb;
	const char *file;
	const char *json;               /* --json FILE, or NULL */
	const char *kgen[2 * MAX_OPTS]; /* kgen arguments as given */
	int nkgen;
} Args;

typedef struct Timing {
	double median_ms, min_ms, max_ms;
	double tflops;
	double gbps;     /* the family's traffic / median; 0 without a count */
	double flops;    /* of one launch (the family's count) */
	uint64_t bytes;  /* device bytes of one input set */
	int sets;
} Timing;

typedef struct Peer {
	char name[64];  /* "torch.matmul", "sdpa-flash" */
	double tflops;  /* 0 if it did not run */
	char why[256];  /* why it did not */
} Peer;

typedef struct Peers {
	Peer p[MAX_PEERS];
	int n;
	char why[256];  /* why there are none at all */
} Peers;

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: kbench FAMILY [options] [FILE.ptx | kgen arguments...]\n"
	        "options:\n"
	        "  --m M --n N --k K    shape (gemm; default 8192 each)\n"
	        "  --batch B --seqlen-q SQ --seqlen-k SK [--varlen 0|1|2]\n"
	        "                       shape (fmha; default 4, 8192, 8192, fixed lengths;\n"
	        "                       varlen shapes have no peer)\n"
	        "  --iters N            timed launches (default 50)\n"
	        "  --warmup N           launches before timing (default 10)\n"
	        "  --device cuda|emu|auto\n"
	        "  --seed N             input seed (default 1)\n"
	        "  --l2-mb X            L2 size for input rotation (default 64)\n"
	        "  --no-check           skip the correctness check before timing\n"
	        "  --no-peer            skip tools/peers.py\n"
	        "  --json FILE          append the run to FILE as one JSON line (tools/plot-bench)\n"
	        "kgen arguments: --target is added from the device when not given\n");
}

/* Numbers as every CLI reads them (gen/numarg.h); prints why. */
static int
parse_count(const char *opt, const char *v, uint64_t lo, uint64_t max, uint64_t *out)
{
	KgErr err = {{0}};
	if (kg_parse_u64(opt, v, max, out, &err) == 0 && *out >= lo)
		return 0;
	if (!err.msg[0])
		kg_fail(&err, "%s=%s: must be at least %llu", opt, v, (unsigned long long)lo);
	fprintf(stderr, "kbench: %s\n", err.msg);
	return -1;
}

/* The options kbench takes a value for; anything else goes to kgen. */
static int
own_option(Args *a, const char *s, const char *v)
{
	uint64_t n;
	KgErr err = {{0}};
	int dim = check_family_dim(a->fam, s + 2);

	if (dim >= 0) {
		/* optional dimensions (fmha's varlen) may be 0 */
		int req = a->fam->nrequired ? a->fam->nrequired : a->fam->ndims;
		if (parse_count(s, v, dim < req ? 1 : 0, UINT32_MAX, &a->shape.d[dim]))
			return -1;
	} else if (!strcmp(s, "--iters")) {
		if (parse_count(s, v, 1, 1000000, &n))
			return -1;
		a->iters = (int)n;
	} else if (!strcmp(s, "--warmup")) {
		if (parse_count(s, v, 0, 1000000, &n))
			return -1;
		a->warmup = (int)n;
	} else if (!strcmp(s, "--seed")) {
		if (parse_count(s, v, 0, UINT64_MAX, &a->seed))
			return -1;
	} else if (!strcmp(s, "--l2-mb")) {
		if (kg_parse_real(s, v, 0, 1e6, &a->l2_mb, &err)) {
			fprintf(stderr, "kbench: %s\n", err.msg);
			return -1;
		}
	} else if (!strcmp(s, "--json")) {
		if (!v) {
			fprintf(stderr, "kbench: --json: missing file name\n");
			return -1;
		}
		a->json = v;
	} else if (!strcmp(s, "--device")) {
		if (!v)
			return -1;
		a->device = v;
	} else
		return 0;
	return 1;
}

static int
parse_args(int argc, char **argv, Args *a)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : -1;
	}
	if (!(a->fam = check_family(argv[1]))) {
		fprintf(stderr, "kbench: family '%s': no checker or bench for it\n", argv[1]);
		return 2;
	}
	a->shape = a->fam->bench;
	for (int i = 2; i < argc; i++) {
		const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int own;
		if (!strcmp(s, "--no-check"))
			a->no_check = 1;
		else if (!strcmp(s, "--no-peer"))
			a->no_peer = 1;
		else if (strncmp(s, "--", 2) != 0) {
			if (a->file) {
				fprintf(stderr, "kbench: two files: %s and %s\n", a->file, s);
				return 2;
			}
			a->file = s;
		} else if ((own = own_option(a, s, v)) < 0)
			return 2;
		else if (own)
			i++;
		else {
			if (a->nkgen + 2 > 2 * MAX_OPTS)
				return 2;
			a->kgen[a->nkgen++] = s;
			if (v && strncmp(v, "--", 2) != 0)
				a->kgen[a->nkgen++] = argv[++i];
		}
	}
	if (a->file && a->nkgen) {
		fprintf(stderr, "kbench: %s: kgen arguments and a file; give one\n", a->kgen[0]);
		return 2;
	}
	return 0;
}

/* The PTX: the file, or kgen's output for the arguments, with the device's
 * target when none was named. */
static int
get_ptx(const Args *a, KrtDevice *dev, char **ptx, size_t *len)
{
	KrtErr err = {0};
	KgErr kerr = {{0}};
	const char *argv[2 * MAX_OPTS + 2];
	char target[32];
	int n = 0, has_target = 0;

	if (a->file) {
		if (check_read_file(a->file, ptx, len, &err)) {
			fprintf(stderr, "kbench: %s\n", err.msg);
			return 2;
		}
		return 0;
	}
	for (int i = 0; i < a->nkgen; i++) {
		has_target |= !strcmp(a->kgen[i], "--target");
		argv[n++] = a->kgen[i];
	}
	if (!has_target && !strcmp(krt_device_kind(dev), "cuda")) {
		snprintf(target, sizeof target, "sm_%da", krt_device_cc(dev));
		argv[n++] = "--target";
		argv[n++] = target;
	}
	const char *kfam = a->fam->kgen ? a->fam->kgen : a->fam->name;
	if (kgen_generate(kfam, n, argv, ptx, len, &kerr)) {
		fprintf(stderr, "kbench: kgen %s: %s\n", kfam, kerr.msg);
		return 2;
	}
	return 0;
}

static int
cmp_float(const void *x, const void *y)
{
	float a = *(const float *)x, b = *(const float *)y;
	return (a > b) - (a < b);
}

static void
summarize(float *ms, int n, double flops, Timing *t)
{
	qsort(ms, (size_t)n, sizeof *ms, cmp_float);
	t->median_ms = n % 2 ? ms[n / 2] : 0.5 * ((double)ms[n / 2 - 1] + ms[n / 2]);
	t->min_ms = ms[0];
	t->max_ms = ms[n - 1];
	t->tflops = flops / (t->median_ms * 1e-3) / 1e12;
}

/* How many input sets to rotate: one when a set is well past L2, else
 * enough that the sets together are 4x L2, so each launch finds its inputs
 * in memory rather than in the cache, as they would be in real use. */
static int
set_count(uint64_t bytes, double l2_mb)
{
	double l2 = l2_mb * 1048576.0;

	if ((double)bytes > 2 * l2 || bytes == 0)
		return 1;
	double n = ceil(4 * l2 / (double)bytes);
	return n > MAX_SETS ? MAX_SETS : (int)n;
}

/* Correctness first: a fast wrong kernel is not worth timing. */
static int
check_first(const Args *a, KrtDevice *dev, KrtModule *mod, CheckCase *c)
{
	CheckOpts o = {.seed = a->seed, .fill = CHECK_FILL_NORMAL, .log = stdout};
	CheckResult r;
	KrtErr err = {0};
	int nargs;
	const KrtArg *args = check_case_args(c, &nargs);
	int rc = check_case_poison(c, &err);

	if (!rc)
		rc = krt_launch(mod, args, nargs, NULL, &err);
	if (!rc)
		rc = krt_sync(dev, &err);
	if (!rc)
		rc = check_case_verify(c, &o, &r, &err);
	if (rc) {
		printf("kbench: check: %s\n", err.msg);
		return check_exit_of(rc);
	}
	printf("kbench: check %s: max rel err %.2e (tol %.0e)", r.pass ? "PASS" : "FAIL", r.max_err,
	       r.tol);
	if (r.lse_tol > 0)
		printf(", LSE err %.2e (tol %.0e)", r.lse_err, r.lse_tol);
	printf(", %llu of %llu elements compared%s\n", (unsigned long long)r.checked,
	       (unsigned long long)r.total, r.subset ? " (row subset)" : "");
	return r.pass ? 0 : 1;
}

static int
time_sets(const Args *a, KrtModule *mod, CheckCase **sets, int nsets, float *ms)
{
	KrtErr err = {0};
	int nargs, rc = 0;
	const KrtArg *args = check_case_args(sets[0], &nargs);
	float skip;

	if (nsets == 1)
		rc = krt_time(mod, args, nargs, a->warmup, a->iters, ms, &err);
	/* Rotating: one timed launch per call, round robin over the sets. */
	for (int i = 0; nsets > 1 && !rc && i < a->warmup + a->iters; i++) {
		args = check_case_args(sets[i % nsets], &nargs);
		rc = krt_time(mod, args, nargs, 0, 1, i < a->warmup ? &skip : &ms[i - a->warmup],
		              &err);
	}
	if (rc)
		printf("kbench: timing: %s\n", err.msg);
	return rc ? check_exit_of(rc) : 0;
}

static int
bench_ours(const Args *a, KrtDevice *dev, KrtModule *mod, Timing *t, char *peer_args,
           size_t peer_len)
{
	CheckCase *sets[MAX_SETS] = {0};
	float *ms = calloc((size_t)a->iters, sizeof *ms);
	KrtErr err = {0};
	int nsets = 1, rc = 1;

	if (!ms || check_case_new(&sets[0], dev, mod, &a->shape, a->seed, CHECK_FILL_NORMAL, &err)) {
		printf("kbench: inputs: %s\n", ms ? err.msg : "out of memory");
		rc = ms ? check_exit_of(err.code) : CHECK_EXIT_FAIL;
		goto out;
	}
	if (!strcmp(krt_device_kind(dev), "emu") && check_case_flops(sets[0]) / 2 > EMU_MAX_MACS) {
		printf("kbench: %.3g multiply-adds: the emulator refuses more than %.3g in kbench "
		       "(hours of CPU interpreter; runtime/emu/README.md, \"Limits\"): give a smaller "
		       "shape\n", check_case_flops(sets[0]) / 2, EMU_MAX_MACS);
		rc = CHECK_EXIT_INPUT;
		goto out;
	}
	if (!a->no_check && (rc = check_first(a, dev, mod, sets[0])))
		goto out;
	rc = 1;
	nsets = set_count(check_case_bytes(sets[0]), a->l2_mb);
	/* Every set from the same seed: the same values at other addresses
	 * is what keeps the cache from serving them, and a varlen shape then
	 * draws the same lengths, so that every set does the same work. */
	for (int i = 1; i < nsets; i++)
		if (check_case_new(&sets[i], dev, mod, &a->shape, a->seed, CHECK_FILL_NORMAL, &err)) {
			printf("kbench: input set %d: %s\n", i, err.msg);
			goto out;
		}
	printf("kbench: %d input set%s of %llu bytes (L2 taken as %g MiB), %d warmup, %d timed "
	       "launches\n", nsets, nsets > 1 ? "s" : "",
	       (unsigned long long)check_case_bytes(sets[0]), a->l2_mb, a->warmup, a->iters);
	if ((rc = time_sets(a, mod, sets, nsets, ms)))
		goto out;
	t->sets = nsets;
	t->flops = check_case_flops(sets[0]);
	t->bytes = check_case_bytes(sets[0]);
	summarize(ms, a->iters, t->flops, t);
	t->gbps = check_case_traffic(sets[0]) / (t->median_ms * 1e-3) / 1e9;
	if (a->fam->peer_args(sets[0], a->iters, a->warmup, peer_args, peer_len))
		peer_args[0] = 0;
	rc = 0;
out:
	for (int i = 0; i < nsets; i++)
		check_case_free(sets[i]);
	free(ms);
	return rc;
}

static const char *
python(void)
{
	const char *p = getenv("KBENCH_PYTHON");
	return p && *p ? p : "python3";
}

/* One line of peers.py: "peer NAME TFLOPS", "peer NAME - WHY" (that peer
 * cannot run this case) or "peer none WHY" (no peer at all). */
static void
parse_peer_line(const char *line, Peers *ps)
{
	char name[64], val[256], *end;

	if (sscanf(line, "peer %63s %255[^\n]", name, val) != 2)
		return;
	if (!strcmp(name, "none")) {
		snprintf(ps->why, sizeof ps->why, "%s", val);
		return;
	}
	if (ps->n == MAX_PEERS)
		return;
	Peer *p = &ps->p[ps->n++];
	snprintf(p->name, sizeof p->name, "%s", name);
	p->tflops = strtod(val, &end);
	if (end == val || p->tflops <= 0) {
		p->tflops = 0;
		snprintf(p->why, sizeof p->why, "%s", val[0] == '-' && val[1] == ' ' ? val + 2 : val);
	}
}

/* Runs tools/peers.py in a child process and reads its `peer` lines; its
 * other output passes through. */
static void
bench_peers(const char *peer_args, Peers *ps)
{
	const char *script = getenv("KBENCH_PEERS");
	char cmd[2048], line[1024];

	ps->n = 0;
	if (!script || !*script)
		script = KGEN_SOURCE_ROOT "/tools/peers.py";
	snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", python());
	if (system(cmd) != 0) {
		snprintf(ps->why, sizeof ps->why, "%s cannot import torch", python());
		return;
	}
	if (access(script, R_OK) != 0) {
		snprintf(ps->why, sizeof ps->why, "%s: %s", script, strerror(errno));
		return;
	}
	snprintf(cmd, sizeof cmd, "'%s' '%s' %s", python(), script, peer_args);
	printf("kbench: peer: %s\n", cmd);
	fflush(stdout);
	FILE *f = popen(cmd, "r");
	if (!f) {
		snprintf(ps->why, sizeof ps->why, "popen: %s", strerror(errno));
		return;
	}
	snprintf(ps->why, sizeof ps->why, "peers.py printed no result");
	while (fgets(line, sizeof line, f)) {
		fputs(line, stdout);
		parse_peer_line(line, ps);
	}
	int status = pclose(f);
	if (status != 0 && ps->n == 0)
		snprintf(ps->why, sizeof ps->why, "peers.py failed (status %d)", status);
}

static void
print_table(const KrtAbi *abi, const CheckShape *s, const Timing *t, const Peers *ps)
{
	char shape[128], best_tf[32] = "-", ratio[32] = "-";
	const Peer *best = NULL;
	int kw = (int)strlen(abi->kernel) > 48 ? (int)strlen(abi->kernel) : 48;

	check_shape_str(s, shape, sizeof shape);
	printf("\n%-*s %-16s %13s  %-22s %13s  %6s\n", kw, "kernel", "shape", "ours TFLOP/s", "peer",
	       "peer TFLOP/s", "ratio");
	for (int i = 0; i < ps->n; i++) {
		const Peer *p = &ps->p[i];
		char tf[32] = "-", r[32] = "-";
		if (p->tflops > 0) {
			snprintf(tf, sizeof tf, "%.1f", p->tflops);
			snprintf(r, sizeof r, "%.3f", t->tflops / p->tflops);
			if (!best || p->tflops > best->tflops)
				best = p;
		}
		printf("%-*s %-16s %13.1f  %-22s %13s  %6s%s%s\n", kw, i ? "" : abi->kernel,
		       i ? "" : shape, t->tflops, p->name, tf, r, p->tflops > 0 ? "" : "  ",
		       p->tflops > 0 ? "" : p->why);
	}
	if (ps->n == 0) {
		printf("%-*s %-16s %13.1f  %-22s %13s  %6s\n", kw, abi->kernel, shape, t->tflops, "-",
		       "-", "-");
		printf("(no peer: %s)\n", ps->why);
	} else if (!best)
		printf("(no peer ran this shape)\n");
	if (best) {
		snprintf(best_tf, sizeof best_tf, "%.1f", best->tflops);
		snprintf(ratio, sizeof ratio, "%.3f", t->tflops / best->tflops);
	}
	printf("kbench-result %s %s %.1f %s %s %s\n", abi->kernel, shape, t->tflops,
	       best ? best->name : "-", best_tf, ratio);
	for (int i = 0; i < ps->n; i++) {
		const Peer *p = &ps->p[i];
		if (p->tflops > 0)
			printf("kbench-peer %s %s %s %.1f %.3f\n", abi->kernel, shape, p->name, p->tflops,
			       t->tflops / p->tflops);
		else
			printf("kbench-peer %s %s %s - - %s\n", abi->kernel, shape, p->name, p->why);
	}
}

/* s as a JSON string */
static void
json_str(Buf *b, const char *s)
{
	buf_printf(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			buf_printf(b, "\\u%04x", c);
		else
			buf_printf(b, "%c", c);
	}
	buf_printf(b, "\"");
}

/* One run as one line of JSON, appended to FILE (JSON Lines: each run's own
 * line, written with one write(2) so concurrent runs do not interleave):
 *   tool "kbench", format 1, date (UTC, ISO 8601), family, kernel, args
 *   (kgen's canonical line), target, device ("cuda"|"emu"), device_name, cc,
 *   shape {DIM: n for each of the family's dimensions}, flops, bytes (one
 *   input set), traffic (the family's count of the bytes one launch must
 *   move, e.g. decode's Q + distinct tokens + O; 0 without a count), iters,
 *   warmup, sets, seed,
 *   ours {median_ms, min_ms, max_ms, tflops, gbps (traffic / median)},
 *   peers [{name, tflops (null if it did not run), why}], peers_why. */
static int
write_json(const Args *a, const KrtAbi *abi, KrtDevice *dev, const Timing *t, const Peers *ps)
{
	Buf b = {0};
	char date[32], dims[128];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
	buf_printf(&b, "{\"tool\": \"kbench\", \"format\": 1, \"date\": \"%s\", \"family\": ", date);
	json_str(&b, a->fam->name);
	buf_printf(&b, ", \"kernel\": ");
	json_str(&b, abi->kernel);
	buf_printf(&b, ", \"args\": ");
	json_str(&b, abi->args);
	buf_printf(&b, ", \"target\": ");
	json_str(&b, abi->target);
	buf_printf(&b, ", \"device\": ");
	json_str(&b, krt_device_kind(dev));
	buf_printf(&b, ", \"device_name\": ");
	json_str(&b, krt_device_name(dev));
	buf_printf(&b, ", \"cc\": %d, \"shape\": {", krt_device_cc(dev));
	snprintf(dims, sizeof dims, "%s", a->fam->dims);
	char *save = NULL;
	int i = 0;
	for (char *d = strtok_r(dims, ",", &save); d && i < a->shape.n;
	     d = strtok_r(NULL, ",", &save), i++) {
		buf_printf(&b, "%s", i ? ", " : "");
		json_str(&b, d);
		buf_printf(&b, ": %llu", (unsigned long long)a->shape.d[i]);
	}
	buf_printf(&b, "}, \"flops\": %.17g, \"bytes\": %llu, \"traffic\": %.17g, \"iters\": %d, "
	           "\"warmup\": %d, \"sets\": %d, \"seed\": %llu, \"ours\": {\"median_ms\": %.6g, "
	           "\"min_ms\": %.6g, \"max_ms\": %.6g, \"tflops\": %.6g, \"gbps\": %.6g}, \"peers\": [",
	           t->flops, (unsigned long long)t->bytes, t->gbps * t->median_ms * 1e6, a->iters,
	           a->warmup, t->sets, (unsigned long long)a->seed, t->median_ms, t->min_ms, t->max_ms,
	           t->tflops, t->gbps);
	for (int k = 0; k < ps->n; k++) {
		const Peer *p = &ps->p[k];
		buf_printf(&b, "%s{\"name\": ", k ? ", " : "");
		json_str(&b, p->name);
		if (p->tflops > 0)
			buf_printf(&b, ", \"tflops\": %.6g}", p->tflops);
		else {
			buf_printf(&b, ", \"tflops\": null, \"why\": ");
			json_str(&b, p->why);
			buf_printf(&b, "}");
		}
	}
	buf_printf(&b, "], \"peers_why\": ");
	json_str(&b, ps->n ? "" : ps->why);
	buf_printf(&b, "}\n");

	KgErr err = {{0}};
	int rc = kg_append_line(a->json, b.p, b.len, &err);
	buf_free(&b);
	if (rc)
		fprintf(stderr, "kbench: %s\n", err.msg);
	return rc ? CHECK_EXIT_IO : 0;
}

static int
run(Args *a)
{
	KrtErr err = {0};
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;
	char *ptx = NULL, shape[128], peer_args[512] = "";
	size_t len = 0;
	Timing t = {0};
	Peers ps = {.n = 0};
	int rc = krt_device_open(&dev, a->device, 0, &err);

	if (rc) {
		printf("kbench: no device to run on: %s\n", err.msg);
		return check_exit_of(rc);
	}
	if ((rc = get_ptx(a, dev, &ptx, &len)) != 0)
		goto out;
	if ((rc = krt_module_load(dev, ptx, len, &mod, &err))) {
		printf("kbench: %s\n", err.msg);
		rc = check_exit_of(rc);
		goto out;
	}
	const KrtAbi *abi = krt_module_abi(mod);
	check_shape_str(&a->shape, shape, sizeof shape);
	char devs[512];
	check_device_str(dev, abi, devs, sizeof devs);
	printf("kbench: %s %s on %s: %s, seed %llu\n", abi->kernel, shape, krt_device_kind(dev),
	       devs, (unsigned long long)a->seed);
	printf("kbench: kgen args: %s\n", abi->args);
	if ((rc = bench_ours(a, dev, mod, &t, peer_args, sizeof peer_args)))
		goto out;
	printf("ours  %s %s: median %.4f ms (min %.4f, max %.4f) over %d launches: %.1f TFLOP/s",
	       abi->kernel, shape, t.median_ms, t.min_ms, t.max_ms, a->iters, t.tflops);
	if (t.gbps > 0)
		printf(", %.0f GB/s", t.gbps);
	printf("\n");
	if (a->no_peer || !peer_args[0])
		snprintf(ps.why, sizeof ps.why, a->no_peer ? "--no-peer" : "no peer for this case");
	else
		bench_peers(peer_args, &ps);
	print_table(abi, &a->shape, &t, &ps);
	if (a->json)
		rc = write_json(a, abi, dev, &t, &ps);
out:
	if (mod)
		krt_module_unload(mod);
	krt_device_close(dev);
	free(ptx);
	return rc;
}

int
main(int argc, char **argv)
{
	static Args a = {.iters = 50, .warmup = 10, .seed = 1, .l2_mb = 64};
	int rc = parse_args(argc, argv, &a);

	if (rc)
		return rc < 0 ? 0 : rc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = run(&a);
	KgErr err = {{0}};
	if (kg_close_stdout(&err)) {
		fprintf(stderr, "kbench: %s\n", err.msg);
		return rc ? rc : CHECK_EXIT_IO;
	}
	return rc;
}
