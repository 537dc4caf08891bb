/* Mutation test: the emulator must notice every missing synchronization.
 * For each emitted kernel (gemm, gemm_moe, fmha, decode, indexer, topk), each single tcgen05.wait::ld,
 * tcgen05.wait::st, tcgen05.fence::after_thread_sync and
 * ::before_thread_sync, tcgen05.commit, mbarrier wait loop (the try_wait
 * and its branch back), fence.proxy.async, wgmma.fence,
 * wgmma.wait_group, cp.async.wait_all / wait_group / commit_group, bar.sync and bar.arrive
 * is removed in turn
 * (the line becomes a comment, so line numbers stay), and the mutant must
 * either report a hazard or compute a wrong result. Two more mutants per
 * site: a st.shared that precedes the mbarrier.arrive publishing it (within
 * three lines) moves after the arrive, and an mbarrier.init expecting N > 1
 * arrivals expects one arrival fewer, or one warp fewer when N counts whole
 * warps (a lane's arrival after its warp's .sync.aligned tcgen05.st/wait
 * orders nothing its warp did not already order). The shape has at least
 * twice as many K tiles as pipeline stages, so every stage is refilled.
 *
 *   test_emu_mutate SRC_ROOT [FILE.ptx ...]
 *
 * Exit 0 when every mutant is caught and every original passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"

typedef struct Line {
	const char *s;
	size_t n;
} Line;

static int
split(char *text, Line **out)
{
	int n = 0, cap = 256;
	Line *v = malloc((size_t)cap * sizeof *v);
	for (char *s = text; v && *s;) {
		char *e = strchr(s, '\n');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (n == cap) {
			cap *= 2;
			Line *nv = realloc(v, (size_t)cap * sizeof *nv);
			if (!nv) {
				free(v);
				return -1;
			}
			v = nv;
		}
		v[n].s = s;
		v[n].n = len;
		n++;
		s += len + (e ? 1 : 0);
	}
	*out = v;
	return v ? n : -1;
}

static int
has(const Line *l, const char *what)
{
	size_t k = strlen(what);
	for (size_t i = 0; i + k <= l->n; i++)
		if (memcmp(l->s + i, what, k) == 0)
			return 1;
	return 0;
}

/* The text with lines [a, b] turned into comments. */
static char *
mutate(const Line *lines, int n, int a, int b, size_t *len)
{
	size_t cap = 64;
	for (int i = 0; i < n; i++)
		cap += lines[i].n + 32;
	char *out = malloc(cap);
	size_t at = 0;
	for (int i = 0; out && i < n; i++) {
		if (i >= a && i <= b)
			at += (size_t)snprintf(out + at, cap - at, "\t// mutation: removed\n");
		else {
			memcpy(out + at, lines[i].s, lines[i].n);
			at += lines[i].n;
			out[at++] = '\n';
		}
	}
	if (out)
		out[at] = 0;
	*len = at;
	return out;
}

/* The text with line `from` moved after line `to` (from < to). */
static char *
mutate_move(const Line *lines, int n, int from, int to, size_t *len)
{
	size_t cap = 64;
	for (int i = 0; i < n; i++)
		cap += lines[i].n + 32;
	char *out = malloc(cap);
	size_t at = 0;
	for (int i = 0; out && i < n; i++) {
		if (i == from)
			continue;
		memcpy(out + at, lines[i].s, lines[i].n);
		at += lines[i].n;
		out[at++] = '\n';
		if (i == to) {
			memcpy(out + at, lines[from].s, lines[from].n);
			at += lines[from].n;
			out[at++] = '\n';
		}
	}
	if (out)
		out[at] = 0;
	*len = at;
	return out;
}

/* The text with the arrival count of the mbarrier.init on line i one short
 * (a warp short for a multiple of 32 above 32); NULL when the line has no
 * count above 1. */
static char *
mutate_count(const Line *lines, int n, int i, size_t *len)
{
	const Line *l = &lines[i];
	size_t e = l->n;
	while (e > 0 && l->s[e - 1] != ';')
		e--;
	size_t b = e ? e - 1 : 0;
	while (b > 0 && l->s[b - 1] >= '0' && l->s[b - 1] <= '9')
		b--;
	if (!e || b == e - 1 || b == 0 || l->s[b - 1] != ' ')
		return NULL;
	long count = strtol(l->s + b, NULL, 10);
	if (count < 2)
		return NULL;
	size_t cap = 64;
	for (int k = 0; k < n; k++)
		cap += lines[k].n + 32;
	char *out = malloc(cap);
	size_t at = 0;
	for (int k = 0; out && k < n; k++) {
		if (k == i)
			at += (size_t)snprintf(out + at, cap - at, "%.*s%ld;\n", (int)b, l->s,
			                       count > 32 && count % 32 == 0 ? count - 32 : count - 1);
		else {
			memcpy(out + at, lines[k].s, lines[k].n);
			at += lines[k].n;
			out[at++] = '\n';
		}
	}
	if (out)
		out[at] = 0;
	*len = at;
	return out;
}

typedef struct Kind {
	const char *what;   /* substring that marks the line */
	int with_next;      /* remove the following line too (the loop branch) */
	const char *unless; /* not a mutant when the line also holds this */
} Kind;

static const Kind kinds[] = {
	{"tcgen05.wait::ld", 0, NULL},
	{"tcgen05.wait::st", 0, NULL},
	{"tcgen05.fence::after_thread_sync", 0, NULL},
	{"tcgen05.fence::before_thread_sync", 0, NULL},
	{"tcgen05.commit", 0, NULL},
	{"mbarrier.try_wait", 1, NULL},
	{"fence.proxy.async", 0, NULL},
	{"wgmma.fence", 0, NULL},
	{"wgmma.wait_group", 0, NULL},
	{"cp.async.wait_all", 0, NULL},
	{"cp.async.wait_group", 0, NULL},
	{"cp.async.commit_group", 0, NULL},
	/* named barriers. A turn wait of the sm_90a ring (its barrier id in a
	 * register) only orders MMA issue between warpgroups for speed: with
	 * it gone the results stay right, so it is not a mutant. Its passes
	 * (bar.arrive) and the closing bar.sync of the ring are: a missing
	 * pass deadlocks, a missing closing sync leaves arrivals at exit. */
	{"bar.sync", 0, "bar.sync %"},
	{"bar.arrive", 0, NULL},
	/* cluster barriers of the CTA-pair kernels (docs/cta-pair.md) */
	{"barrier.cluster.arrive", 0, NULL},
	{"barrier.cluster.wait", 0, NULL},
};

/* One run of the kernel at the mutation shape: 0 pass, 1 wrong, -1 launch
 * error (message in msg). */
typedef struct Shape {
	int fmha, decode, indexer, moe, topk;
	uint32_t M, N, K;
	uint32_t parts;    /* indexer: CTAs per row whose candidates take two merge rounds */
	uint32_t long_len; /* indexer: keys of a part whose select takes two rounds */
	EtFmhaShape f;
} Shape;

/* One full tile and a tail along the output dimensions (so every epilogue
 * chunk stores), more K (key) tiles than pipeline stages and a tail (so
 * every stage is refilled): taken from the //@args of the kernel. */
static void
pick_shape(const KrtAbi *abi, Shape *s)
{
	memset(s, 0, sizeof *s);
	uint32_t tm = (uint32_t)et_arg(abi, "tile-m", 128), st = (uint32_t)et_arg(abi, "stages", 4);
	if (strcmp(abi->family, "indexer") == 0) {
		/* 2 sequences of 2 query rows: sequence 0's rows see more keys
		 * than top-k (the radix select and its barriers run), sequence
		 * 1's fewer; run with one CTA per row and with two; then
		 * (run_once) one row of 2·win + 40 keys alone (the chunk
		 * select's first round takes 2·win, a second the rest), and
		 * one of 2·topk + 40 keys split into enough parts that their
		 * candidates take two merge rounds (windows of 2·win, win the
		 * least power of two >= 2·topk and >= 2048: docs/indexer.md,
		 * "Fused top-k"); the logits alone (top-k 0): rows of 300
		 * keys (three parts), one of many tiles a CTA (the copy ring
		 * wraps), and 560 keys in three parts, each filling its own
		 * masked logits */
		uint32_t k = (uint32_t)et_arg(abi, "topk", 512), win = 2048;
		while (win < 2 * k)
			win *= 2;
		s->indexer = 1;
		s->M = 2;
		s->N = 2;
		s->K = k ? k + 40 : 300;
		s->parts = k ? 2 * win / k + 1 : 3;
		s->long_len = 2 * win + 40;
		return;
	}
	if (strcmp(abi->family, "topk") == 0) {
		/* one row of one chunk with few ties (a histogram read before
		 * every count is in picks a wrong digit, and the CTA writes
		 * the list itself, past its end into the guard band if it
		 * places too many); then, each when the run before passes, one
		 * row of two chunks and a last one of fewer than k logits (the
		 * chunk select, the padding, the join, one merge round), most
		 * logits tied, and one row of enough chunks that their
		 * candidates take two merge rounds (chunks of 16384, windows
		 * of 8192: docs/indexer.md, "Standalone top-k") */
		uint32_t k = (uint32_t)et_arg(abi, "topk", 512);
		s->topk = 1;
		s->M = 1;
		s->N = 2 * 16384 + 100;
		s->K = (8192 / k + 1) * 16384 - 5;
		return;
	}
	if (strcmp(abi->family, "decode") == 0 || strcmp(abi->family, "decode_merge") == 0) {
		/* 2 query rows: the second attends about 3/4 of its top-k (more
		 * key tiles than the 2 stages); the first skips everything */
		s->decode = 1;
		s->M = 2;
		s->N = 2; /* split-KV parts: the combine's fence and barriers count too */
		return;
	}
	if (strcmp(abi->family, "fmha") == 0) {
		/* the kernel name says the tiles and stages the plan chose:
		 * ..._m128n64_s2_... (//@args may say 0, "chosen by the plan") */
		const char *n = strstr(abi->kernel, "_m");
		uint32_t tn = 128;
		char w[64];
		if (n && n[2] >= '0' && n[2] <= '9')
			tm = (uint32_t)atoi(n + 2);
		if (n && strchr(n, 'n'))
			tn = (uint32_t)atoi(strchr(n, 'n') + 1);
		const char *sn = n ? strstr(n, "_s") : NULL;
		if (sn && sn[2] >= '0' && sn[2] <= '9')
			st = (uint32_t)atoi(sn + 2);
		if (st < 2)
			st = 2;
		/* packed heads: a CTA covers q_rows/pack query rows (q_rows 64
		 * on sm_90a, 128 on sm_100a), all of its tiles over them */
		const char *pk = strstr(abi->kernel, "_pk");
		if (pk && atoi(pk + 3) > 1)
			tm = (strcmp(abi->target, "sm_90a") == 0 ? 64u : 128u) / (uint32_t)atoi(pk + 3);
		s->fmha = 1;
		s->f.batch = 1;
		s->f.sq[0] = tm + 2;
		s->f.sk[0] = tn * (st + 1) + 8;
		/* a sliding window visits few tiles per CTA: two query tiles and
		 * keys offset from the queries by more than the window's left
		 * extent, so its left edge straddles tiles in the second and
		 * every loop (left edge, middle, right edge) runs */
		if (strcmp(et_args_word(abi, "mask", w, sizeof w), "window") == 0) {
			s->f.sq[0] = 2 * tm + 2;
			s->f.sk[0] = s->f.sq[0] + (uint32_t)et_arg(abi, "window-left", 128) + tn + 6;
			/* a CTA of fewer rows than a tile has keys straddles a tile
			 * edge only if it starts in the tile's last tm keys: put
			 * the second CTA's left edge at tn - tm/2 within a tile */
			if (tm < tn)
				s->f.sk[0] += 2 * tn - tm - tm / 2 - 6;
		}
		return;
	}
	uint32_t tn = (uint32_t)et_arg(abi, "tile-n", 128), tk = (uint32_t)et_arg(abi, "tile-k", 64);
	/* MoE: three experts (the checker's: empty, one row, the rest) */
	s->moe = strcmp(abi->family, "gemm_moe") == 0;
	s->M = tm + 2;
	s->N = tn + 40;
	if (krt_abi_shape(abi, "nmult")) /* SwiGLU: whole gate and up halves, two N tiles */
		s->N = 2 * tn > 256 ? 2 * tn : 256;
	s->K = tk * 2 * st + 8; /* 2·st tiles and a tail: every stage refilled */
	s->K = et_gemm_k(abi, s->K); /* block-scaled: whole scale blocks (2·st + 1 tiles) */
}

static int
run_once(KrtDevice *dev, KrtModule *mod, const Shape *s, char *msg, size_t n)
{
	EtGemm g = {.keep = 0};
	EtFmha f = {.keep = 0};
	int rc;
	if (s->indexer) {
		/* one part per row, then two (the join and its counter run);
		 * then one row of at least twice top-k keys, so the k-th score
		 * falls inside a group of tied or nearly tied keys (a histogram
		 * read before every count is in picks a wrong digit): in one
		 * part of more keys than the scoring keeps (the select's second
		 * round stages the rest), and of 2·top-k + 40
		 * keys in enough parts that the merge takes two rounds */
		rc = et_indexer(dev, mod, s->M, s->N, s->K, 1, 7, 1, &f);
		if (rc == 0)
			rc = et_indexer(dev, mod, s->M, s->N, s->K, 2, 7, 1, &f);
		if (rc == 0)
			rc = et_indexer(dev, mod, 1, 1, s->long_len, 1, 7, 1, &f);
		if (rc == 0)
			rc = et_indexer(dev, mod, 1, 1, s->K + s->K - 40, s->parts, 7, 1, &f);
		/* the later radix passes of the long row's select and of the
		 * merge count only the keys that tie with the k-th past the
		 * earlier digits, which one set of logits may leave to one key
		 * of the thread that reads its bin: a second draw of both */
		if (rc == 0)
			rc = et_indexer(dev, mod, 1, 1, s->long_len, 1, 8, 1, &f);
		if (rc == 0)
			rc = et_indexer(dev, mod, 1, 1, s->K + s->K - 40, s->parts, 8, 1, &f);
		/* and the long row and the merge under the normal fill: FP4
		 * keys' coarse values tie there, where the edge fill's wide
		 * exponents do not */
		if (rc == 0)
			rc = et_indexer(dev, mod, 1, 1, s->long_len, 1, 7, 0, &f);
		if (rc == 0)
			rc = et_indexer(dev, mod, 1, 1, s->K + s->K - 40, s->parts, 7, 0, &f);
		snprintf(msg, n, "%.500s", rc < 0 ? f.err.msg : f.first_bad);
		if (rc > 0)
			snprintf(msg, n, "%llu bad, %.400s", (unsigned long long)f.bad, f.first_bad);
	} else if (s->topk) {
		rc = et_topk(dev, mod, s->M, 16384 - 3, 7, 0, &f);
		if (rc == 0)
			rc = et_topk(dev, mod, s->M, s->N, 7, 1, &f);
		if (rc == 0)
			rc = et_topk(dev, mod, s->M, s->K, 7, 0, &f);
		snprintf(msg, n, "%.500s", rc < 0 ? f.err.msg : f.first_bad);
		if (rc > 0)
			snprintf(msg, n, "%llu bad, %.400s", (unsigned long long)f.bad, f.first_bad);
	} else if (s->decode) {
		rc = et_decode(dev, mod, 1, s->M, s->N, 7, &f);
		snprintf(msg, n, "%.500s", rc < 0 ? f.err.msg : f.first_bad);
		if (rc > 0)
			snprintf(msg, n, "%llu bad, %.400s", (unsigned long long)f.bad, f.first_bad);
	} else if (s->fmha) {
		rc = et_fmha(dev, mod, &s->f, 7, &f);
		snprintf(msg, n, "%.500s", rc < 0 ? f.err.msg : f.first_bad);
		if (rc > 0)
			snprintf(msg, n, "%llu bad, %.400s", (unsigned long long)f.bad, f.first_bad);
	} else if (s->moe) {
		rc = et_gemm_moe(dev, mod, s->M, s->N, s->K, 3, 7, &f);
		snprintf(msg, n, "%.500s", rc < 0 ? f.err.msg : f.first_bad);
		if (rc > 0)
			snprintf(msg, n, "%llu bad, %.400s", (unsigned long long)f.bad, f.first_bad);
	} else {
		rc = et_gemm(dev, mod, s->M, s->N, s->K, 7, &g);
		snprintf(msg, n, "%.500s", rc < 0 ? g.err.msg : g.first_bad);
		if (rc > 0)
			snprintf(msg, n, "%llu bad, %.400s", (unsigned long long)g.bad, g.first_bad);
	}
	return rc;
}

static int
run_file(const char *path, int *mutants, int *missed)
{
	size_t len;
	char *ptx = et_read(path, &len);
	if (!ptx)
		return 1;
	KrtErr err;
	KrtAbi abi;
	KrtDevice *dev = NULL;
	if (krt_abi_parse(ptx, len, &abi, &err) ||
	    (strcmp(abi.family, "gemm") != 0 && strcmp(abi.family, "gemm_moe") != 0 && strcmp(abi.family, "fmha") != 0 &&
	     strcmp(abi.family, "decode") != 0 && strcmp(abi.family, "decode_merge") != 0 &&
	     strcmp(abi.family, "indexer") != 0 && strcmp(abi.family, "topk") != 0) ||
	    et_open_for(abi.target, &dev, &err)) {
		printf("FAIL %s: %s\n", path, err.msg);
		free(ptx);
		return 1;
	}
	Shape shape;
	pick_shape(&abi, &shape);
	int fails = 0;
	char msg[600];
	Line *lines = NULL;
	int n = split(ptx, &lines);
	/* the original must pass, or the mutants prove nothing */
	KrtModule *mod;
	msg[0] = 0;
	if (krt_module_load(dev, ptx, len, &mod, &err) ||
	    (run_once(dev, mod, &shape, msg, sizeof msg) != 0 && (krt_module_unload(mod), 1))) {
		printf("FAIL %s: the unmutated kernel does not pass at the mutation shape: %s%s\n",
		       abi.kernel, err.msg, msg);
		free(lines);
		free(ptx);
		krt_device_close(dev);
		return 1;
	}
	krt_module_unload(mod);
	size_t nkinds = sizeof kinds / sizeof kinds[0];
	for (size_t k = 0; k < nkinds + 2; k++)
		for (int i = 0; i < n; i++) {
			size_t ml;
			char *m = NULL;
			const char *what;
			if (k == nkinds) { /* a published store after its arrive */
				what = "st.shared moved after mbarrier.arrive";
				int to = -1;
				if (!has(&lines[i], "st.shared"))
					continue;
				for (int j = i + 1; j < n && j <= i + 3 && to < 0; j++)
					if (has(&lines[j], "mbarrier.arrive"))
						to = j;
					else if (has(&lines[j], "st.shared") || has(&lines[j], "bra") ||
					         has(&lines[j], ":"))
						break;
				if (to < 0)
					continue;
				m = mutate_move(lines, n, i, to, &ml);
			} else if (k == nkinds + 1) { /* an expected count one short */
				what = "mbarrier.init count one arrival/warp short";
				if (!has(&lines[i], "mbarrier.init") ||
				    !(m = mutate_count(lines, n, i, &ml)))
					continue;
			} else {
				what = kinds[k].what;
				if (!has(&lines[i], kinds[k].what) ||
				    lines[i].s[strspn(lines[i].s, " \t")] == '/' ||
				    (kinds[k].unless && has(&lines[i], kinds[k].unless)))
					continue;
				m = mutate(lines, n, i, i + kinds[k].with_next, &ml);
			}
			if (!m) {
				fails++;
				continue;
			}
			(*mutants)++;
			const char *verdict;
			char detail[600] = "";
			if (krt_module_load(dev, m, ml, &mod, &err)) {
				verdict = "caught at load";
				snprintf(detail, sizeof detail, "%.500s", err.msg);
			} else {
				int rc = run_once(dev, mod, &shape, msg, sizeof msg);
				krt_module_unload(mod);
				if (rc < 0) {
					const char *h = strstr(msg, "hazard [");
					verdict = h ? "hazard" : "launch failed";
					snprintf(detail, sizeof detail, "%.300s", h ? h : msg);
				} else if (rc > 0) {
					verdict = "wrong result";
					snprintf(detail, sizeof detail, "%.300s", msg);
				} else {
					verdict = "MISSED";
					(*missed)++;
					fails++;
				}
			}
			printf("%-14s %s line %d (%s%s): %s\n", verdict, abi.kernel, i + 1, what,
			       k < nkinds ? " removed" : "", detail);
			free(m);
		}
	free(lines);
	free(ptx);
	krt_device_close(dev);
	return fails;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_emu_mutate SRC_ROOT [FILE.ptx ...]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fails = 0, mutants = 0, missed = 0;
	char **paths = NULL;
	int n;
	if (argc > 2) {
		paths = argv + 2;
		n = argc - 2;
	} else {
		char pat[4096];
		snprintf(pat, sizeof pat, "%s/emitted/*/*.ptx", argv[1]);
		n = et_glob(pat, &paths);
		if (n <= 0) {
			fprintf(stderr, "no PTX files match %s\n", pat);
			return 1;
		}
	}
	for (int i = 0; i < n; i++)
		fails += run_file(paths[i], &mutants, &missed);
	if (argc == 2)
		et_free_list(paths, n);
	printf("%d mutants, %d missed, %d failures\n", mutants, missed, fails);
	return fails ? 1 : 0;
}
