#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "suite.h"

void
gpu_check_module(KrtDevice *dev, const GpuSuite *s, const char *ptx, size_t len,
                 const char *what, const char *replay, GpuTally *t)
{
	KrtModule *mod = NULL;
	KrtErr err = {0};

	if (krt_module_load(dev, ptx, len, &mod, &err)) {
		printf("FAIL  %s: load: %s\n", what, err.msg);
		t->run++;
		t->failed++;
		return;
	}
	const KrtAbi *abi = krt_module_abi(mod);
	const char *only = getenv("KGEN_GPU_ONLY");
	if (only && *only && !strstr(abi->kernel, only)) {
		printf("-- %s: %s (skipped: KGEN_GPU_ONLY=%s)\n", what, abi->kernel, only);
		krt_module_unload(mod);
		return;
	}
	/* the driver sizes every kernel it loaded: at least one CTA an SM */
	int per_sm = krt_module_ctas_per_sm(mod);
	printf("-- %s: %s (%d CTAs an SM)\n", what, abi->kernel, per_sm);
	if (strcmp(krt_device_kind(dev), "cuda") == 0 && per_sm < 1) {
		printf("FAIL  %s: krt_module_ctas_per_sm %d: want >= 1 for a loaded kernel\n", what, per_sm);
		t->run++;
		t->failed++;
	}
	t->modules++;
	const CheckFamily *fam = check_family(abi->family);
	for (size_t i = 0; i < s->ncases && !t->dead; i++) {
		/* fitted to the kernel as kcheck fits its defaults (block-scaled
		 * K in whole blocks, a SwiGLU gemm's N in whole halves) */
		GpuCase fitted = s->cases[i];
		if (fam && fam->fit_default)
			fam->fit_default(abi, &fitted.shape);
		const GpuCase *c = &fitted;
		char shape[64], label[2048], lse[96] = "";
		CheckResult r;
		check_shape_str(&c->shape, shape, sizeof shape);
		snprintf(label, sizeof label, "kcheck --device cuda --seed %llu --shape %s --fill %s %s",
		         (unsigned long long)t->seed, shape, check_fill_name(c->fill), replay);
		CheckOpts o = {
			.seed = check_case_seed(t->seed, &c->shape, c->fill),
			.fill = c->fill,
			.full_limit = s->full_limit,
			.log = stdout,
			.label = label,
		};
		int rc = check_run(dev, mod, &c->shape, &o, &r, &err);
		t->run++;
		if (rc || !r.pass)
			t->failed++;
		if (rc) {
			printf("FAIL  %-16s %-6s error: %s\n", shape, check_fill_name(o.fill), err.msg);
			if (rc == KRT_ECUDA) {
				printf("stopping: the device reported an error; later launches in this "
				       "context would fail too\n");
				t->dead = 1;
			}
		} else {
			if (r.lse_tol > 0)
				snprintf(lse, sizeof lse, "  lse err %.2e  tol %.0e", r.lse_err, r.lse_tol);
			printf("%s  %-16s %-6s max rel err %.2e  tol %.0e%s  unwritten %llu  guard %llu%s\n",
			       r.pass ? "PASS" : "FAIL", shape, check_fill_name(o.fill), r.max_err, r.tol, lse,
			       (unsigned long long)r.unwritten, (unsigned long long)r.guard_bad,
			       r.subset ? "  (row subset)" : "");
		}
		fflush(stdout);
	}
	krt_module_unload(mod);
}

void
gpu_check_emitted(KrtDevice *dev, const GpuSuite *s, const char *root, const char *prefix,
                  GpuTally *t)
{
	char pattern[4096];
	glob_t g;

	snprintf(pattern, sizeof pattern, "%s/emitted/sm_90a/%s*.ptx", root, prefix);
	if (glob(pattern, 0, NULL, &g) != 0) {
		printf("note: no files match %s\n", pattern);
		return;
	}
	for (size_t i = 0; i < g.gl_pathc && !t->dead; i++) {
		char *ptx = NULL;
		size_t len = 0;
		KrtErr err = {0};
		if (check_read_file(g.gl_pathv[i], &ptx, &len, &err)) {
			printf("FAIL  %s\n", err.msg);
			t->run++;
			t->failed++;
			continue;
		}
		gpu_check_module(dev, s, ptx, len, g.gl_pathv[i], g.gl_pathv[i], t);
		free(ptx);
	}
	globfree(&g);
}

void
gpu_check_config(KrtDevice *dev, GpuTally *t, const char *family, const GpuSuite *gs, const char *const *cfg)
{
	const char *args[24] = {"--target", "sm_90a"};
	int n = 2;
	char replay[1024], what[256] = "";
	char *ptx = NULL;
	size_t len = 0;
	KgErr kerr = {{0}};

	snprintf(replay, sizeof replay, "--gen %s", family);
	for (int i = 0; i < 20 && cfg[i]; i++)
		args[n++] = cfg[i];
	for (int i = 0; i < n; i++) {
		snprintf(replay + strlen(replay), sizeof replay - strlen(replay), " %s", args[i]);
		if (i >= 2)
			snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s", i > 2 ? " " : "", args[i]);
	}
	if (kgen_generate(family, n, args, &ptx, &len, &kerr)) {
		printf("FAIL  %s: kgen refuses: %s\n", what, kerr.msg);
		t->refused++;
		t->failed++;
		t->run++;
		return;
	}
	gpu_check_module(dev, gs, ptx, len, what, replay, t);
	free(ptx);
}
