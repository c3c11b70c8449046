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

#endif /* PVREAD_HARNESS_H */
