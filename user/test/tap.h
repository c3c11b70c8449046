/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Just enough TAP for the host tests: "ok N - what" / "not ok N - what". */
#ifndef PVREAD_TAP_H
#define PVREAD_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_count, tap_failed, tap_planned;

static inline void tap_plan(int n)
{
	tap_planned = n;
	printf("TAP version 13\n1..%d\n", n);
}

__attribute__((format(printf, 2, 3)))
static inline void tap_result(int pass, const char *fmt, ...)
{
	va_list ap;

	printf("%sok %d - ", pass ? "" : "not ", ++tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	tap_failed |= !pass;
}

/* A plan that is not the count of results fails the run. */
static inline int tap_exit(void)
{
	if (tap_count != tap_planned) {
		printf("# planned %d tests, ran %d\n", tap_planned, tap_count);
		tap_failed = 1;
	}
	printf("# %s\n", tap_failed ? "FAILED" : "all passed");
	return tap_failed;
}

#endif /* PVREAD_TAP_H */
