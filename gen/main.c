/* kgen: plan a tensor-core kernel and print its PTX.
 *
 *   kgen FAMILY [--param value ...] [-o FILE.ptx]
 *   kgen plan FAMILY [--param value ...] [shape]   shape: gemm --m --n --k,
 *                                                  fmha --batch --seqlen-q --seqlen-k
 *   kgen list
 *   kgen desc ... | kgen idesc ...
 *
 * Bad input: one line naming the parameter, the value and the rule, exit 2.
 * Output files are written to a temporary name and renamed into place
 * (outfile.c); a write that fails, to -o or to stdout, exits 74 with the
 * reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "family.h"
#include "kgen.h"
#include "outfile.h"

static const char usage[] =
	"usage: kgen FAMILY [--param value ...] [-o FILE.ptx]   generate a kernel\n"
	"       kgen plan FAMILY [--param value ...]            print its budget and, for gemm\n"
	"                                                       (--m --n --k) and fmha (--batch\n"
	"                                                       --seqlen-q --seqlen-k), its estimated time\n"
	"       kgen list                                       families and parameters\n"
	"       kgen FAMILY --help | kgen desc --help | ...     one subcommand's options\n"
	"       kgen desc --target T --major K|MN --swizzle S --dtype D --rows R --cols C [--addr A]\n"
	"       kgen idesc --kind K --a T --b T --d T --m M --n N [...]\n"
	"exit: 0 done, 2 bad input, 74 output lost (a write failed), 70 internal error (a bug)\n";

enum { EXIT_INPUT = 2, EXIT_IO = 74 };

static int
fail(const KgErr *err)
{
	fprintf(stderr, "kgen: %s\n", err->msg);
	return EXIT_INPUT;
}

/* The status once everything printed to stdout has reached it. */
static int
finish(int rc)
{
	KgErr err = {{0}};
	if (kg_close_stdout(&err) < 0) {
		fprintf(stderr, "kgen: %s\n", err.msg);
		return rc ? rc : EXIT_IO;
	}
	return rc;
}

static int
wants_help(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

/* `kgen [plan] FAMILY --help`: the family's rows of the table `kgen list`
 * prints. */
static int
family_usage(const char *name)
{
	const Family *f = family_find(name);
	KgErr err = {{0}};
	if (!f) {
		Buf names = {0};
		family_names(&names);
		kg_fail(&err, "family=%s: unknown (families: %s)", name, names.p ? names.p : "");
		buf_free(&names);
		return fail(&err);
	}
	Buf b = {0};
	family_help(f, &b);
	fputs(b.p ? b.p : "", stdout);
	buf_free(&b);
	return finish(0);
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
		return argc < 2 ? EXIT_INPUT : finish(0);
	}
	if (!strcmp(argv[1], "list")) {
		Buf b = {0};
		family_list(&b);
		fputs(b.p ? b.p : "", stdout);
		buf_free(&b);
		return finish(0);
	}
	if (!strcmp(argv[1], "desc"))
		return cli_desc(argc - 2, argv + 2, stdout, &err) < 0 ? fail(&err) : finish(0);
	if (!strcmp(argv[1], "idesc"))
		return cli_idesc(argc - 2, argv + 2, stdout, &err) < 0 ? fail(&err) : finish(0);
	if (!strcmp(argv[1], "plan")) {
		if (argc < 3) {
			fputs(usage, stderr);
			return EXIT_INPUT;
		}
		if (wants_help(argc - 3, argv + 3))
			return family_usage(argv[2]);
		if (kgen_plan_text(argv[2], argc - 3, (const char *const *)argv + 3, &text, &err) < 0)
			return fail(&err);
		fputs(text, stdout);
		free(text);
		return finish(0);
	}
	if (wants_help(argc - 2, argv + 2))
		return family_usage(argv[1]);
	/* pull -o out of the family arguments */
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-o")) {
			if (i + 1 == argc) {
				fprintf(stderr, "kgen: -o: missing file name\n");
				return EXIT_INPUT;
			}
			out = argv[++i];
			continue;
		}
		argv[2 + n++] = argv[i];
	}
	if (kgen_generate(argv[1], n, (const char *const *)argv + 2, &text, &len, &err) < 0)
		return fail(&err);
	int rc = 0;
	if (out) {
		if (kg_write_file(out, text, len, &err) < 0) {
			fprintf(stderr, "kgen: %s\n", err.msg);
			rc = EXIT_IO;
		}
	} else {
		fwrite(text, 1, len, stdout);
	}
	free(text);
	return finish(rc);
}
