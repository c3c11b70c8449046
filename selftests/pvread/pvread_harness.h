/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The test programs' harness: the kernel's kselftest_harness.h (TEST_F,
 * FIXTURE_VARIANT, a process per test, the plan counted), the helpers of
 * pvread_selftest.h, and the main() of a program that needs pvread.ko.
 */
#ifndef PVREAD_HARNESS_H
#define PVREAD_HARNESS_H

#include "pvread_selftest.h"

/*
 * As the kernel builds it: without -Wextra's -Wunused-parameter (and
 * -Wclobbered, which the Makefile turns off: it is reported where TEST_F
 * expands, past this pop).
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

/*
 * main() of a program whose every test needs pvread.ko on a Xen guest:
 * elsewhere the whole program is a skip that says why.  The library is
 * let through at the test tolerance (its reads are judged against the
 * published bound), and stdout is line-buffered so that a test's "# "
 * lines come out in order with the harness's.
 */
#define PVREAD_XEN_HARNESS_MAIN						\
	int main(int argc, char **argv)					\
	{								\
		const char *why = pvst_why_not_xen();			\
									\
		setvbuf(stdout, NULL, _IOLBF, 0);			\
		if (why) {						\
			ksft_print_header();				\
			ksft_exit_skip("%s\n", why);			\
		}							\
		setenv("PVREAD_MAX_ERROR_NS", PVREAD_TEST_TOLERANCE_NS, 1); \
		return test_harness_run(argc, argv);			\
	}

/*
 * Why a program that tests the page's fast path has nothing to test: the
 * page settled (pvst_settled(), up to 20 s) in mode none, which the
 * expectation (PVREAD_EXPECT_MODE) allows; NULL when there is a line to
 * read, or when the machine expects one (then the tests run, and fail).
 */
static inline const char *pvst_why_no_line(const char *what)
{
	static char why[200];
	int expect = pvst_expect_mode(), expect_line = pvst_expect_line();
	int64_t t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	struct pvst_page pg = { 0 };
	struct pvread_info info;

	do {
		pvread_get_info(&info);
		if (!pvst_page_sample(&pg))
			return NULL;
		if (pvst_settled(expect, expect_line, &pg, &info))
			break;
		usleep(100000);
	} while (pvst_elapsed(t0) < 20);
	if (pg.mode != PVREAD_MODE_NONE || expect == PVREAD_MODE_LINE)
		return NULL;
	snprintf(why, sizeof(why),
		 "mode none (line %s): the kernel answers every read, no %s",
		 pvst_line_name(pg.line_state), what);
	return why;
}

/*
 * The main() of PVREAD_XEN_LINE_HARNESS_MAIN, for a program that takes
 * options of its own first (and leaves the harness's in @argv): in mode
 * none the whole program is a skip that says why.
 */
static inline int pvst_xen_line_main(int argc, char **argv, const char *what)
{
	const char *why = pvst_why_not_xen();

	setvbuf(stdout, NULL, _IOLBF, 0);
	setenv("PVREAD_MAX_ERROR_NS", PVREAD_TEST_TOLERANCE_NS, 1);
	if (!why)
		why = pvst_why_no_line(what);
	if (why) {
		ksft_print_header();
		ksft_exit_skip("%s\n", why);
	}
	return test_harness_run(argc, argv);
}

/*
 * PVREAD_XEN_HARNESS_MAIN for a program that tests the line (@what it
 * tests).
 */
#define PVREAD_XEN_LINE_HARNESS_MAIN(what)				\
	int main(int argc, char **argv)					\
	{								\
		return pvst_xen_line_main(argc, argv, what);		\
	}

#endif /* PVREAD_HARNESS_H */
