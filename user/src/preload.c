// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread-preload.so: LD_PRELOAD it and clock_gettime(), gettimeofday()
 * and time() of an unmodified program are libpvread's.  What libpvread
 * cannot answer goes to the next definition (libc's, with its vDSO), found
 * once at load time; before that, to the system call itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pvread.h"
#include "preload.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);

static clock_gettime_fn next_clock_gettime;
static gettimeofday_fn next_gettimeofday;

/* dlsym() is not async-signal-safe: resolve before main(), not in a read. */
__attribute__((constructor)) static void find_next(void)
{
	__atomic_store_n(&next_clock_gettime,
			 (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime"),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&next_gettimeofday,
			 (gettimeofday_fn)dlsym(RTLD_NEXT, "gettimeofday"),
			 __ATOMIC_RELEASE);
}

int pvread_next_clock_gettime(clockid_t clock, struct timespec *ts)
{
	clock_gettime_fn f = __atomic_load_n(&next_clock_gettime,
					     __ATOMIC_ACQUIRE);

	if (f)
		return f(clock, ts);
	return (int)syscall(SYS_clock_gettime, clock, ts);
}

int pvread_next_gettimeofday(struct timeval *tv, void *tz)
{
	gettimeofday_fn f = __atomic_load_n(&next_gettimeofday,
					    __ATOMIC_ACQUIRE);

	if (f)
		return f(tv, tz);
	return (int)syscall(SYS_gettimeofday, tv, tz);
}

EXPORT int clock_gettime(clockid_t clock, struct timespec *ts)
{
	return pvread_clock_gettime(clock, ts);
}

EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	return pvread_gettimeofday(tv, tz);
}

EXPORT time_t time(time_t *t)
{
	return pvread_time(t);
}
