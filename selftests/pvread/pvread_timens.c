// SPDX-License-Identifier: GPL-2.0
/*
 * In a time namespace (a child made after unshare(CLONE_NEWTIME), as
 * `unshare --time --fork` runs a program) the library's CLOCK_MONOTONIC,
 * _RAW, _COARSE and BOOTTIME are the namespace's: within the published
 * bound of the system call, which adds the offsets too, and from the page
 * in line mode; in mode none every read from the kernel, which adds them
 * itself (the library must not add them again).
 */
#define _GNU_SOURCE
#include <sys/wait.h>

#include "pvread_harness.h"

#define MONOTONIC_OFFSET_S 86400
#define BOOTTIME_OFFSET_S 172800

FIXTURE(timens) {
	bool in_ns;
};

FIXTURE_VARIANT(timens) {
	clockid_t clock;
	const char *name;
};

FIXTURE_VARIANT_ADD(timens, monotonic) {
	.clock = CLOCK_MONOTONIC, .name = "CLOCK_MONOTONIC",
};
FIXTURE_VARIANT_ADD(timens, boottime) {
	.clock = CLOCK_BOOTTIME, .name = "CLOCK_BOOTTIME",
};
FIXTURE_VARIANT_ADD(timens, monotonic_raw) {
	.clock = CLOCK_MONOTONIC_RAW, .name = "CLOCK_MONOTONIC_RAW",
};
FIXTURE_VARIANT_ADD(timens, monotonic_coarse) {
	.clock = CLOCK_MONOTONIC_COARSE, .name = "CLOCK_MONOTONIC_COARSE",
};

FIXTURE_SETUP(timens)
{
	static const char offsets[] = "monotonic 86400 0\nboottime 172800 0\n";
	int fd;

	if (unshare(CLONE_NEWTIME)) {
		if (errno == EPERM)
			SKIP(return, "unshare(CLONE_NEWTIME) not permitted");
		SKIP(return, "no time namespaces in this kernel (%s)",
		     strerror(errno));
	}
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	ASSERT_LE(0, fd) TH_LOG("open timens_offsets: %s", strerror(errno));
	ASSERT_EQ((ssize_t)sizeof(offsets) - 1,
		  write(fd, offsets, sizeof(offsets) - 1))
		TH_LOG("write timens_offsets: %s", strerror(errno));
	close(fd);
	self->in_ns = true;
}

FIXTURE_TEARDOWN(timens)
{
}

/* The namespace is its children's: the reads are made in one. */
TEST_F_TIMEOUT(timens, within_bound, 300)
{
	long want = pvst_reads() / 4, reads = 0, beyond = 0, fast = 0;
	uint32_t mode0, mode1;
	bool fast_ok;
	double min_seconds = pvst_seconds();
	struct pvread_stats st0, st1;
	struct pvst_bracket b;
	int64_t t0, worst = 0, host;
	int status;
	pid_t pid;

	/* The 6.1 harness runs a test after its setup's SKIP (6.12's not). */
	if (!self->in_ns)
		return;
	host = pvst_sys_ns(variant->clock);
	fflush(stdout);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int64_t in_ns = pvst_sys_ns(variant->clock);

		mode0 = pvst_page_mode();
		pvread_get_stats(&st0);
		t0 = pvst_sys_ns(CLOCK_MONOTONIC);
		while (reads < want || pvst_elapsed(t0) < min_seconds) {
			pvst_bracket(variant->clock, &b);
			if (b.dev > worst)
				worst = b.dev;
			if ((uint64_t)b.dev > b.bound && beyond++ < 5)
				ksft_print_msg("%s: %lld ns %s the syscalls, bound %llu ns\n",
					       variant->name, (long long)b.dev,
					       b.ahead ? "ahead of" : "behind",
					       (unsigned long long)b.bound);
			reads++;
		}
		pvread_get_stats(&st1);
		mode1 = pvst_page_mode();
		/* Fast reads are not counted: the reads less the slow. */
		fast = reads - (long)(st1.slow - st0.slow);
		/*
		 * Line mode: from the page.  Mode none: every read the
		 * kernel's.  A change of mode in between proves neither.
		 */
		fast_ok = mode0 == mode1 &&
			  (mode0 == PVREAD_MODE_LINE ? fast >= reads * 9 / 10 :
						       fast == 0);
		ksft_print_msg("%s: in the namespace %+.0f s from outside; mode %s -> %s; %ld reads (%ld fast, want %s), largest deviation %lld ns, %ld beyond the bound\n",
			       variant->name, (in_ns - host) / 1e9,
			       pvst_mode_name(mode0), pvst_mode_name(mode1),
			       reads, fast,
			       mode0 == PVREAD_MODE_LINE ? "90 %" : "none",
			       (long long)worst, beyond);
		fflush(stdout);
		/* The offsets must show: else this proves nothing. */
		_exit(beyond || !fast_ok ||
		      (variant->clock != CLOCK_BOOTTIME ?
		       in_ns - host < (MONOTONIC_OFFSET_S - 60) * 1000000000LL :
		       in_ns - host < (BOOTTIME_OFFSET_S - 60) * 1000000000LL));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

PVREAD_XEN_HARNESS_MAIN
