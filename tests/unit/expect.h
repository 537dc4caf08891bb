/* The libkrt unit tests' checks: EXPECT counts a failed condition in
 * `failures` with its file and line; EXPECT_MSG checks that an error
 * message names every one of the given substrings (errors name the
 * parameter, the value and the rule). */
#ifndef KGEN_TESTS_EXPECT_H
#define KGEN_TESTS_EXPECT_H

#include <stdio.h>
#include <string.h>

static int failures;

#define EXPECT(cond)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                                \
			fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond);         \
			failures++;                                                               \
		}                                                                             \
	} while (0)

/* The message contains every one of the NULL-terminated substrings. */
static int
has_all(const char *msg, const char *const *subs)
{
	for (; *subs; subs++)
		if (!strstr(msg, *subs)) {
			fprintf(stderr, "  message lacks '%s':\n  %s\n", *subs, msg);
			return 0;
		}
	return 1;
}

#define EXPECT_MSG(msg, ...) EXPECT(has_all((msg), (const char *const[]){__VA_ARGS__, NULL}))

#endif
