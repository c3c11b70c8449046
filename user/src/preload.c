// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread-preload.so: LD_PRELOAD it and an unmodified program's
 * clock_gettime(), gettimeofday(), time(), timespec_get() and ftime() --
 * every libc entry point that reads the clock (nm -D of libc.so.6, glibc
 * 2.36) -- are libpvread's.  What libpvread cannot answer is the kernel's
 * (kernel.c), never the next definition of the name.
 *
 * The shim exports libpvread's own pvread_*() at libpvread.so.2's symbol
 * versions (the same version script): a program linked with libpvread.so.2
 * that runs with the shim preloaded binds both to the shim, one state.
 *
 * Not interposed: ntp_gettime() and ntp_gettimex() (adjtimex(2), which also
 * reports the kernel's NTP state: a clock read would not be the same
 * answer); glibc's internal __clock_gettime@GLIBC_PRIVATE, which programs
 * cannot link against and libc calls directly.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/time.h>
#include <time.h>

#include "pvread.h"
#include "internal.h"

/* <sys/timeb.h> is deprecated; its struct, as glibc defines it. */
struct timeb {
	time_t time;
	unsigned short int millitm;
	short int timezone;
	short int dstflag;
};

#define EXPORT __attribute__((visibility("default")))

/*
 * The mapping, before main(): a program that confines itself with seccomp
 * before its first clock read (openat, mmap, madvise, rt_sigprocmask,
 * readlinkat... not allowed) reads the clock through the shim as through
 * libc.  After the library's own constructor (priority 101), which found
 * or made the process's state.
 */
__attribute__((constructor)) static void map_at_load(void)
{
	pvread_map_now();
}

EXPORT int clock_gettime(clockid_t clock, struct timespec *ts)
{
	return pvread_clock_gettime(clock, ts);
}

EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	return pvread_gettimeofday(tv, tz);
}

/* An alias of gettimeofday() that glibc exports at a public version. */
EXPORT int __gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	return pvread_gettimeofday(tv, tz);
}

EXPORT time_t time(time_t *t)
{
	return pvread_time(t);
}

/*
 * C23's time bases, for a libc whose headers do not define them yet (glibc
 * before 2.43): the values glibc 2.43 gives them, each its clock id plus
 * 1, as TIME_UTC is CLOCK_REALTIME's; musl's are the same.  A program
 * built with a newer libc's headers passes these, whatever the libc it
 * runs with.
 */
#ifndef TIME_MONOTONIC
#define TIME_MONOTONIC 2
#endif
#ifndef TIME_ACTIVE
#define TIME_ACTIVE 3
#endif
#ifndef TIME_THREAD_ACTIVE
#define TIME_THREAD_ACTIVE 4
#endif

/*
 * C23's bases, each its POSIX clock, all through libpvread:
 * TIME_MONOTONIC must share CLOCK_MONOTONIC's floors, or its readings
 * could step back against the shim's own clock_gettime(); the CPU-time
 * clocks are not on the page, and pvread_clock_gettime() hands them to
 * the kernel.  Any other base is 0 (C's "not supported"), and not
 * libc's: a dlsym() on every call would be slow and is not
 * async-signal-safe, and a base a later libc adds (it could be another
 * mirrored clock's) would bypass the floors; a program told 0 reads
 * clock_gettime(), which is the shim's.  A read that fails is 0 too, as
 * C says, with the kernel's errno.
 *
 * timespec_getres() is not interposed: it reads no clock, and libc's
 * answer is the kernel's clock_getres(), the resolution of the same
 * clocks the shim reads (the page's readings are in ns, as the kernel's
 * high-resolution clocks report).
 */
EXPORT int timespec_get(struct timespec *ts, int base)
{
	clockid_t clock;

	switch (base) {
	case TIME_UTC:
		clock = CLOCK_REALTIME;
		break;
	case TIME_MONOTONIC:
		clock = CLOCK_MONOTONIC;
		break;
	case TIME_ACTIVE:
		clock = CLOCK_PROCESS_CPUTIME_ID;
		break;
	case TIME_THREAD_ACTIVE:
		clock = CLOCK_THREAD_CPUTIME_ID;
		break;
	default:
		return 0;
	}
	return pvread_clock_gettime(clock, ts) ? 0 : base;
}

/* As glibc's: CLOCK_REALTIME in ms, no time zone. */
EXPORT int ftime(struct timeb *tp)
{
	struct timespec ts;

	if (pvread_clock_gettime(CLOCK_REALTIME, &ts))
		return -1;
	tp->time = ts.tv_sec;
	tp->millitm = (unsigned short int)(ts.tv_nsec / 1000000);
	tp->timezone = 0;
	tp->dstflag = 0;
	return 0;
}
