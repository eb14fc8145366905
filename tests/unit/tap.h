/* tap.h - the tiny test harness every tests/unit/test_<module>.c uses.
 * Prints "ok N - name" / "not ok N - name" lines and, from tap_done(), a
 * summary "N passed, N failed"; tap_done() returns the exit status. */
#ifndef FG_TAP_H
#define FG_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                   \
	do {                                                            \
		int tap_c_ = !!(cond);                                  \
		tap_n++;                                                \
		if (!tap_c_)                                            \
			tap_failed++;                                   \
		printf("%sok %d - ", tap_c_ ? "" : "not ", tap_n);      \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                           \
		if (!tap_c_)                                            \
			printf("#   at %s:%d\n", __FILE__, __LINE__);   \
		fflush(stdout);                                         \
	} while (0)

#define is_int(a, b, ...)                                                           \
	do {                                                                        \
		long long tap_a_ = (long long)(a), tap_b_ = (long long)(b);         \
		ok(tap_a_ == tap_b_, __VA_ARGS__);                                  \
		if (tap_a_ != tap_b_)                                               \
			printf("#   got %lld, expected %lld\n", tap_a_, tap_b_);        \
	} while (0)

#define is_str(a, b, ...)                                                          \
	do {                                                                       \
		const char *tap_a_ = (a), *tap_b_ = (b);                           \
		int tap_eq_ = tap_a_ && tap_b_ && !strcmp(tap_a_, tap_b_);         \
		ok(tap_eq_, __VA_ARGS__);                                          \
		if (!tap_eq_)                                                      \
			printf("#   got \"%s\", expected \"%s\"\n", tap_a_ ? tap_a_ : "(null)", \
			       tap_b_ ? tap_b_ : "(null)");                         \
	} while (0)

static inline int tap_done(void)
{
	printf("%d passed, %d failed\n", tap_n - tap_failed, tap_failed);
	return tap_failed ? 1 : 0;
}

#endif
