// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The natural way to use libpvread without the shim: define clock_gettime()
 * and gettimeofday() as calls of libpvread's.  Its fallbacks must then not
 * call those names (they would recurse until the stack runs out): they are
 * the kernel's, through the vDSO.  Run on a host without /dev/pvread, so
 * that every read is a fallback; built static and dynamic (Makefile).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pvread.h"
#include "tap.h"

#define NSEC_PER_SEC 1000000000LL

int clock_gettime(clockid_t clock, struct timespec *ts)
{
	return pvread_clock_gettime(clock, ts);
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	return pvread_gettimeofday(tv, tz);
}

static long long sys_ns(clockid_t clock)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clock, &ts);
	return ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

/* @n reads of @clock through the program's own clock_gettime(): bracketed. */
static int bracketed(clockid_t clock, int n)
{
	long long before, after, v, outside = 0;
	struct timespec ts;
	int i;

	for (i = 0; i < n; i++) {
		before = sys_ns(clock);
		if (clock_gettime(clock, &ts))
			return 0;
		after = sys_ns(clock);
		v = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
		outside += v < before || v > after;
	}
	printf("# clock %d: %d reads, %lld outside the system calls\n",
	       (int)clock, n, outside);
	return !outside;
}

int main(void)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
		CLOCK_BOOTTIME, CLOCK_MONOTONIC_RAW, CLOCK_PROCESS_CPUTIME_ID };
	struct pvread_stats st;
	struct timeval tv;
	/* libc declares clock_gettime() nonnull: pvread_clock_gettime() */
	struct timespec ts, *volatile no_ts = NULL;
	long long before, after, v;
	unsigned int i;
	int r, e;

	tap_plan(4);
	for (i = 0, r = 1; i < sizeof(clocks) / sizeof(clocks[0]); i++)
		r &= bracketed(clocks[i], 1000);
	pvread_get_stats(&st);
	printf("# %llu fallbacks, %llu for no-page\n",
	       (unsigned long long)st.slow,
	       (unsigned long long)st.slow_by_reason[PVREAD_SLOW_NO_PAGE]);
	tap_result(r && st.slow >= 4000,
		   "clock_gettime() defined as pvread_clock_gettime(): the fallbacks are the kernel's, no recursion");
	before = sys_ns(CLOCK_REALTIME) / 1000;
	r = gettimeofday(&tv, NULL);
	after = sys_ns(CLOCK_REALTIME) / 1000;
	v = tv.tv_sec * 1000000LL + tv.tv_usec;
	tap_result(!r && v >= before && v <= after,
		   "gettimeofday() defined as pvread_gettimeofday(): bracketed, no recursion");
	errno = 0;
	r = clock_gettime(12345, &ts);
	e = errno;
	errno = 0;
	r = r == -1 && e == EINVAL && pvread_clock_gettime(CLOCK_MONOTONIC, no_ts) == -1 &&
	    errno == EFAULT;
	tap_result(r, "a bad clock id: EINVAL; no timespec: EFAULT (%s)", strerror(e));
#ifdef PVREAD_STATIC_TEST
	{
		int pvread_kernel_has_vdso(void);	/* libpvread.a's own */

		tap_result(pvread_kernel_has_vdso() ==
			   (getauxval(AT_SYSINFO_EHDR) != 0),
			   "the vDSO's clock_gettime is found where the kernel maps one (%s)",
			   pvread_kernel_has_vdso() ? "found" : "none");
	}
#else
	tap_result(1, "the vDSO's clock_gettime is found # SKIP the static build checks it");
#endif
	return tap_exit();
}
