// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A fake clock a day ahead of the kernel's, as libfaketime gives one:
 * preloaded after the shim, it must not become the shim's fallback.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

__attribute__((visibility("default")))
int clock_gettime(clockid_t clock, struct timespec *ts)
{
	int (*next)(clockid_t, struct timespec *);
	int ret;

	*(void **)&next = dlsym(RTLD_NEXT, "clock_gettime");
	ret = next(clock, ts);
	if (!ret)
		ts->tv_sec += 86400;
	return ret;
}
