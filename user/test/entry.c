// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pvread_gettimeofday() and pvread_time(), the entry points around
 * pvread_clock_gettime(): their arguments as gettimeofday(2) and time(2)
 * take them, and what they return when the kernel's answer fails, as it
 * does under a seccomp filter that returns EPERM for clock_gettime (a
 * sandbox's) where the vDSO must make the system call (the xen
 * clocksource).
 *
 * The kernel's answer is this program's own (below; it links libpvread.a,
 * whose kernel.o the linker then leaves out), so that it can fail on
 * demand.  Over a synthetic page in mode none: every read falls back to
 * it, whether or not this host has /dev/pvread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "pvread.h"
#include "synthetic.h"
#include "tap.h"

#define NSEC_PER_SEC 1000000000LL

/* 0: the kernel answers; else its answer fails with this errno. */
static int kernel_errno;
static unsigned long kernel_calls;

int pvread_kernel_clock_gettime(clockid_t clock, struct timespec *ts)
{
	kernel_calls++;
	if (kernel_errno) {
		errno = kernel_errno;
		return -1;
	}
	return (int)syscall(SYS_clock_gettime, clock, ts);
}

int pvread_kernel_gettimeofday(struct timeval *tv, void *tz)
{
	kernel_calls++;
	if (kernel_errno) {
		errno = kernel_errno;
		return -1;
	}
	return (int)syscall(SYS_gettimeofday, tv, tz);
}

int pvread_kernel_has_vdso(void)
{
	return 0;
}

static long long sys_ns(clockid_t clock)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clock, &ts);
	return ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

/* Values no answer has: a field the call wrote shows. */
#define POISON_SEC 0x5a5a5a5aL
#define POISON_USEC 0x5a5aL

static void poison_tv(struct timeval *tv)
{
	tv->tv_sec = POISON_SEC;
	tv->tv_usec = POISON_USEC;
}

static int poisoned_tv(const struct timeval *tv)
{
	return tv->tv_sec == POISON_SEC && tv->tv_usec == POISON_USEC;
}

static void poison_tz(struct timezone *tz)
{
	tz->tz_minuteswest = 0x5a5a;
	tz->tz_dsttime = 0x5a5a;
}

/* The kernel answers: gettimeofday() bracketed, with and without @tz. */
static void kernel_answers(void)
{
	struct timezone tz, sys_tz;
	long long before, after, v;
	struct timeval tv;
	time_t t, r;
	int ret;

	poison_tv(&tv);
	before = sys_ns(CLOCK_REALTIME) / 1000;
	ret = pvread_gettimeofday(&tv, NULL);
	after = sys_ns(CLOCK_REALTIME) / 1000;
	v = tv.tv_sec * 1000000LL + tv.tv_usec;
	tap_result(ret == 0 && v >= before && v <= after,
		   "pvread_gettimeofday(tv, NULL): 0, bracketed by the kernel's clock (returned %d)",
		   ret);

	t = 0;
	before = sys_ns(CLOCK_REALTIME_COARSE) / NSEC_PER_SEC;
	r = pvread_time(&t);
	after = sys_ns(CLOCK_REALTIME_COARSE) / NSEC_PER_SEC;
	tap_result(r == t && r >= before && r <= after,
		   "pvread_time(&t): CLOCK_REALTIME_COARSE's seconds, returned and in *t");

	/* The kernel's time zone, as gettimeofday(2) gives it. */
	syscall(SYS_gettimeofday, NULL, &sys_tz);
	poison_tz(&tz);
	poison_tv(&tv);
	before = sys_ns(CLOCK_REALTIME) / 1000;
	ret = pvread_gettimeofday(&tv, &tz);
	after = sys_ns(CLOCK_REALTIME) / 1000;
	v = tv.tv_sec * 1000000LL + tv.tv_usec;
	tap_result(ret == 0 && v >= before && v <= after &&
		   !memcmp(&tz, &sys_tz, sizeof(tz)),
		   "pvread_gettimeofday(tv, tz): 0, tv bracketed, tz the kernel's");

	poison_tz(&tz);
	ret = pvread_gettimeofday(NULL, &tz);
	tap_result(ret == 0 && !memcmp(&tz, &sys_tz, sizeof(tz)),
		   "pvread_gettimeofday(NULL, tz): 0, tz the kernel's");
}

/* The kernel's answer fails with EPERM: so does every call that needs it. */
static void kernel_fails(void)
{
	struct timezone tz;
	struct timespec ts;
	struct timeval tv;
	unsigned long calls;
	time_t t, r;
	int ret, e;

	kernel_errno = EPERM;

	errno = 0;
	ret = pvread_clock_gettime(CLOCK_REALTIME, &ts);
	e = errno;
	tap_result(ret == -1 && e == EPERM,
		   "failing kernel: pvread_clock_gettime() -1, EPERM (returned %d, %s)",
		   ret, strerror(e));

	poison_tv(&tv);
	errno = 0;
	ret = pvread_gettimeofday(&tv, NULL);
	e = errno;
	tap_result(ret == -1 && e == EPERM && poisoned_tv(&tv),
		   "failing kernel: pvread_gettimeofday(tv, NULL) -1, EPERM, tv not written (returned %d, %s)",
		   ret, strerror(e));

	/*
	 * C (7.27.2.4) and POSIX: the return value is also stored in *t;
	 * glibc's own time() built on a clock that can fail stores -1 there
	 * too.
	 */
	t = 12345;
	errno = 0;
	r = pvread_time(&t);
	e = errno;
	tap_result(r == (time_t)-1 && t == (time_t)-1 && e == EPERM,
		   "failing kernel: pvread_time(&t) (time_t)-1, in *t too, EPERM (returned %lld, *t %lld, %s)",
		   (long long)r, (long long)t, strerror(e));

	errno = 0;
	r = pvread_time(NULL);
	e = errno;
	tap_result(r == (time_t)-1 && e == EPERM,
		   "failing kernel: pvread_time(NULL) (time_t)-1, EPERM (returned %lld, %s)",
		   (long long)r, strerror(e));

	poison_tz(&tz);
	errno = 0;
	ret = pvread_gettimeofday(NULL, &tz);
	e = errno;
	tap_result(ret == -1 && e == EPERM,
		   "failing kernel: pvread_gettimeofday(NULL, tz) -1, EPERM: the kernel's answer (returned %d, %s)",
		   ret, strerror(e));

	/*
	 * Nothing to read, nothing to fail: glibc's gettimeofday (the
	 * vDSO's) returns 0 without a system call, and the kernel's own
	 * returns 0 too.
	 */
	calls = kernel_calls;
	errno = 0;
	ret = pvread_gettimeofday(NULL, NULL);
	tap_result(ret == 0 && kernel_calls == calls,
		   "pvread_gettimeofday(NULL, NULL): 0, without asking the (failing) kernel (returned %d, %lu kernel calls)",
		   ret, kernel_calls - calls);

	kernel_errno = 0;
}

int main(void)
{
	struct synthetic page;

	tap_plan(10);
	if (synthetic_init(&page, PVREAD_MODE_NONE) ||
	    pvread_use_page(page.hdr, page.size)) {
		printf("# a synthetic page in mode none: %s\n", strerror(errno));
		return 1;
	}
	kernel_answers();
	kernel_fails();
	return tap_exit();
}
