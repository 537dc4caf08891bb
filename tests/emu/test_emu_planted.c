/* Planted bugs: each tests/emu/planted/NAME.ptx carries exactly one bug of
 * a class the emulator must report, named by a `// @expect-hazard CLASS`
 * line after its ABI header (none: must run clean; fault: an emu fault such
 * as an out-of-bounds store; load: refused at module load). CLASS|CLASS
 * accepts either: a read of data still in flight is [async-in-flight] when
 * the async op has not completed yet and [unordered-async] when it has but
 * nothing ordered the read after it, which KRT_EMU_SEED can change. Arguments come
 * from the ABI: a tensor map gets a tensor of exactly one box of seeded
 * values, a pointer 64 KiB (a 128x128 f32 C), a u32 64.
 *
 *   test_emu_planted SRC_ROOT [FILE.ptx ...]
 *
 * Prints each report, so the messages can be read; exit 0 if every file
 * got its expected outcome. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu_test.h"

static int
expected(const char *ptx, char *out, size_t n)
{
	const char *k = strstr(ptx, "// @expect-hazard ");
	if (!k)
		return -1;
	k += strlen("// @expect-hazard ");
	size_t i = 0;
	while (k[i] && k[i] != '\n' && k[i] != ' ' && i + 1 < n) {
		out[i] = k[i];
		i++;
	}
	out[i] = 0;
	return 0;
}

/* Runs the module once with arguments made from its ABI. */
static int
launch(KrtDevice *dev, KrtModule *mod, KrtErr *err)
{
	const KrtAbi *abi = krt_module_abi(mod);
	KrtArg args[KRT_MAX_PARAMS];
	KrtPtr bufs[KRT_MAX_PARAMS];
	memset(args, 0, sizeof args);
	memset(bufs, 0, sizeof bufs);
	int rc = 0;
	uint64_t s = 12345;
	for (int i = 0; i < abi->nparams && !rc; i++) {
		const KrtAbiParam *p = &abi->params[i];
		args[i].kind = p->kind;
		if (p->kind == KRT_ARG_TMAP) {
			size_t bytes = (size_t)p->elem_bytes;
			KrtTensor *t = &args[i].v.t;
			t->rank = p->rank;
			t->strides[0] = (uint64_t)p->elem_bytes;
			for (int d = 0; d < p->rank; d++) {
				t->dims[d] = p->box[d];
				if (d > 0)
					t->strides[d] = t->strides[d - 1] * p->box[d - 1];
				bytes *= p->box[d];
			}
			uint8_t *h = malloc(bytes);
			for (size_t k = 0; h && k < bytes; k += 2) {
				s = s * 6364136223846793005ull + 1442695040888963407ull;
				uint16_t v = (uint16_t)(0x3c00 | (s >> 56 & 0x3ff)); /* smallish bf16/f16 */
				memcpy(h + k, &v, k + 2 <= bytes ? 2 : 1);
			}
			rc = !h || krt_alloc(dev, bytes, &bufs[i], err) || krt_upload(dev, bufs[i], h, bytes, err);
			free(h);
			t->ptr = bufs[i];
		} else if (p->kind == KRT_ARG_PTR) {
			rc = krt_alloc(dev, 1 << 16, &bufs[i], err) || krt_memset8(dev, bufs[i], 0, 1 << 16, err);
			args[i].v.p = bufs[i];
		} else {
			args[i].v.u64 = 64;
		}
	}
	if (!rc)
		rc = krt_launch(mod, args, abi->nparams, NULL, err);
	for (int i = 0; i < abi->nparams; i++)
		krt_free(dev, bufs[i], NULL);
	return rc;
}

static int
run_file(const char *path)
{
	size_t len;
	char *ptx = et_read(path, &len);
	if (!ptx)
		return 1;
	char want[64];
	KrtErr err;
	KrtAbi abi;
	KrtDevice *dev = NULL;
	KrtModule *mod = NULL;
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	if (expected(ptx, want, sizeof want) || krt_abi_parse(ptx, len, &abi, &err) ||
	    et_open_for(abi.target, &dev, &err)) {
		printf("FAIL %s: no '// @expect-hazard' line or no usable ABI header\n", base);
		free(ptx);
		return 1;
	}
	int ok;
	char got[128];
	int lrc = krt_module_load(dev, ptx, len, &mod, &err);
	free(ptx);
	if (lrc) {
		ok = strcmp(want, "load") == 0 && strstr(err.msg, "PTX line") != NULL;
		snprintf(got, sizeof got, "load error");
	} else {
		int rc = launch(dev, mod, &err);
		krt_module_unload(mod);
		if (!rc) {
			ok = strcmp(want, "none") == 0;
			snprintf(got, sizeof got, "clean run");
			err.msg[0] = 0;
		} else if (strstr(err.msg, "emu fault")) {
			ok = strcmp(want, "fault") == 0;
			snprintf(got, sizeof got, "fault");
		} else {
			ok = 0;
			char alts[64];
			snprintf(alts, sizeof alts, "%s", want);
			for (char *a = strtok(alts, "|"); a && !ok; a = strtok(NULL, "|")) {
				char key[96];
				snprintf(key, sizeof key, "hazard [%s]", a);
				ok = strstr(err.msg, key) != NULL;
			}
			const char *h = strstr(err.msg, "hazard [");
			snprintf(got, sizeof got, "%.*s", h ? (int)(strchr(h, ']') - h + 1) : 12,
			         h ? h : "other error");
		}
	}
	printf("%s %s: expected %s, got %s\n", ok ? "ok  " : "FAIL", base, want, got);
	if (err.msg[0])
		printf("     %s\n", err.msg);
	krt_device_close(dev);
	return !ok;
}

int
main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_emu_planted SRC_ROOT [FILE.ptx ...]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fails = 0, n;
	char **paths;
	if (argc > 2) {
		paths = argv + 2;
		n = argc - 2;
	} else {
		char pat[4096];
		snprintf(pat, sizeof pat, "%s/tests/emu/planted/*.ptx", argv[1]);
		n = et_glob(pat, &paths);
		if (n <= 0) {
			fprintf(stderr, "no planted kernels match %s\n", pat);
			return 1;
		}
	}
	for (int i = 0; i < n; i++)
		fails += run_file(paths[i]);
	if (argc == 2)
		et_free_list(paths, n);
	printf("%d of %d planted kernels got the wrong outcome\n", fails, n);
	return fails ? 1 : 0;
}
