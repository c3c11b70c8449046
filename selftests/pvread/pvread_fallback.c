// SPDX-License-Identifier: GPL-2.0
/*
 * Where pvread.ko is not loaded (a guest without Xen: it refuses to load)
 * there is no /dev/pvread, and the library answers every read through
 * libc, exactly: between two system calls, never from a page.
 */
#define _GNU_SOURCE
#include <sys/stat.h>

#include "pvread_harness.h"

FIXTURE(fallback) {
};

FIXTURE_SETUP(fallback)
{
}

FIXTURE_TEARDOWN(fallback)
{
}

TEST_F(fallback, no_device)
{
	struct stat sb;

	EXPECT_TRUE(stat(PVREAD_DEVICE, &sb) && errno == ENOENT)
		TH_LOG("%s: %s", PVREAD_DEVICE, strerror(errno));
}

TEST_F_TIMEOUT(fallback, libc_exact, 300)
{
	long min_reads = pvst_reads(), reads = 0, outside = 0;
	double min_seconds = pvst_seconds();
	struct pvread_stats st0, st;
	struct pvread_info info;
	struct timespec ts;
	int64_t s1, s2, v, t0;
	long slow;

	pvread_get_info(&info);
	pvread_get_stats(&st0);
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	while (reads < min_reads || pvst_elapsed(t0) < min_seconds) {
		s1 = pvst_sys_ns(CLOCK_MONOTONIC);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		s2 = pvst_sys_ns(CLOCK_MONOTONIC);
		v = pvst_ns(&ts);
		outside += v < s1 || v > s2;
		reads++;
	}
	pvread_get_stats(&st);
	/* Fast reads are not counted: the reads less the slow ones. */
	slow = (long)(st.slow - st0.slow);
	ksft_print_msg("fallback: %ld reads, %ld fast, %ld via libc, %ld outside the syscalls\n",
		       reads, reads - slow, slow, outside);
	EXPECT_FALSE(info.mapped);
	EXPECT_EQ(reads, slow);	/* no read was fast */
	EXPECT_EQ(0, outside);
}

/* Where the device is, the other programs test it: this one is a skip. */
int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!access(PVREAD_DEVICE, F_OK)) {
		ksft_print_header();
		ksft_exit_skip("%s exists: pvread.ko is loaded, the fallback is tested where it is not\n",
			       PVREAD_DEVICE);
	}
	return test_harness_run(argc, argv);
}
