/* kgen: plan a tensor-core kernel and print its PTX.
 *
 *   kgen FAMILY [--param value ...] [-o FILE.ptx]
 *   kgen plan FAMILY [--param value ...]
 *   kgen list
 *   kgen desc ... | kgen idesc ...
 *
 * Bad input: one line naming the parameter, the value and the rule, exit 2.
 * Output files are written to a temporary name and renamed into place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "family.h"
#include "kgen.h"

static const char usage[] =
	"usage: kgen FAMILY [--param value ...] [-o FILE.ptx]   generate a kernel\n"
	"       kgen plan FAMILY [--param value ...]            print its budget\n"
	"       kgen list                                       families and parameters\n"
	"       kgen desc --target T --major K|MN --swizzle S --dtype D --rows R --cols C [--addr A]\n"
	"       kgen idesc --kind K --a T --b T --d T --m M --n N [...]\n";

static int
write_file(const char *path, const char *text, size_t len)
{
	char tmp[4096];
	FILE *f;

	if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
		fprintf(stderr, "kgen: -o %s: path too long\n", path);
		return -1;
	}
	f = fopen(tmp, "w");
	if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
		perror(tmp);
		if (f)
			remove(tmp);
		return -1;
	}
	if (rename(tmp, path) != 0) {
		perror(path);
		remove(tmp);
		return -1;
	}
	return 0;
}

static int
fail(const KgErr *err)
{
	fprintf(stderr, "kgen: %s\n", err->msg);
	return 2;
}

int
main(int argc, char **argv)
{
	KgErr err = {{0}};
	const char *out = NULL;
	char *text;
	size_t len;
	int n = 0;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "list")) {
		Buf b = {0};
		family_list(&b);
		fputs(b.p ? b.p : "", stdout);
		buf_free(&b);
		return 0;
	}
	if (!strcmp(argv[1], "desc"))
		return cli_desc(argc - 2, argv + 2, stdout, &err) < 0 ? fail(&err) : 0;
	if (!strcmp(argv[1], "idesc"))
		return cli_idesc(argc - 2, argv + 2, stdout, &err) < 0 ? fail(&err) : 0;
	if (!strcmp(argv[1], "plan")) {
		if (argc < 3) {
			fputs(usage, stderr);
			return 2;
		}
		if (kgen_plan_text(argv[2], argc - 3, (const char *const *)argv + 3, &text, &err) < 0)
			return fail(&err);
		fputs(text, stdout);
		free(text);
		return 0;
	}
	/* pull -o out of the family arguments */
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-o")) {
			if (i + 1 == argc) {
				fprintf(stderr, "kgen: -o: missing file name\n");
				return 2;
			}
			out = argv[++i];
			continue;
		}
		argv[2 + n++] = argv[i];
	}
	if (kgen_generate(argv[1], n, (const char *const *)argv + 2, &text, &len, &err) < 0)
		return fail(&err);
	if (out) {
		if (write_file(out, text, len) < 0) {
			free(text);
			return 1;
		}
	} else {
		fwrite(text, 1, len, stdout);
	}
	free(text);
	return 0;
}
