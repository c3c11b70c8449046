// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * An unmodified program that asks the time in a loop, the way a JVM or a
 * database does: for the preload shim.  It knows nothing of libpvread.
 *
 *   timeloop gettimeofday|clock_gettime|time N      N calls, then the last value
 *   timeloop -c gettimeofday|clock_gettime|time N   also bracket a read every
 *       1024 by two raw system calls and count those outside (exit 1 if any)
 *
 * The loop is framed by two getppid() system calls, so that a syscall trace
 * can tell the loop's clock calls from libc's own (glibc's malloc reads the
 * clock when getrandom() has no entropy yet, as early in a VM's life).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "pvread.h"	/* for struct pvread_stats only: nothing is linked */

/*
 * If a preloaded libpvread answered, say how: a loop that made a clock
 * system call should say why.  Looked up, so the program runs without it.
 */
static void print_pvread_stats(void)
{
	void (*get_stats)(struct pvread_stats *);
	const char *(*name)(unsigned int);
	struct pvread_stats st;
	unsigned int i;

	*(void **)&get_stats = dlsym(RTLD_DEFAULT, "pvread_get_stats");
	*(void **)&name = dlsym(RTLD_DEFAULT, "pvread_slow_reason_name");
	if (!get_stats || !name)
		return;
	get_stats(&st);
	printf("timeloop: libpvread: %llu fast, %llu slow, %llu retries, %llu raised to the floor",
	       (unsigned long long)st.fast, (unsigned long long)st.slow,
	       (unsigned long long)st.retries, (unsigned long long)st.clamped);
	for (i = 0; i < PVREAD_SLOW_NR_REASONS; i++)
		if (st.slow_by_reason[i])
			printf(", %llu slow for %s",
			       (unsigned long long)st.slow_by_reason[i],
			       name(i));
	printf("\n");
}

static long long kernel_ns(clockid_t clock)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clock, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int check = argc > 1 && !strcmp(argv[1], "-c");
	long long before = 0, after = 0, v = 0, prev = 0, n, i;
	long long outside = 0, backwards = 0, checked = 0;
	const char *what;
	struct timespec ts;
	struct timeval tv;
	clockid_t clock;
	int kind;

	if (argc != 3 + check) {
		fprintf(stderr, "usage: timeloop [-c] gettimeofday|clock_gettime|time N\n");
		return 2;
	}
	what = argv[1 + check];
	n = atoll(argv[2 + check]);
	if (!strcmp(what, "gettimeofday"))
		kind = 0, clock = CLOCK_REALTIME;
	else if (!strcmp(what, "clock_gettime"))
		kind = 1, clock = CLOCK_MONOTONIC;
	else if (!strcmp(what, "time"))
		kind = 2, clock = CLOCK_REALTIME_COARSE;
	else
		return 2;

	syscall(SYS_getppid);
	for (i = 0; i < n; i++) {
		int bracket = check && !(i & 1023);

		if (bracket)
			before = kernel_ns(clock);
		switch (kind) {
		case 0:
			gettimeofday(&tv, NULL);
			v = tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
			break;
		case 1:
			clock_gettime(CLOCK_MONOTONIC, &ts);
			v = ts.tv_sec * 1000000000LL + ts.tv_nsec;
			break;
		default:
			v = time(NULL) * 1000000000LL;
			break;
		}
		if (kind == 1 && v < prev)
			backwards++;
		prev = v;
		if (!bracket)
			continue;
		after = kernel_ns(clock);
		checked++;
		/* gettimeofday and time truncate: compare at their resolution */
		if (kind == 0)
			before -= before % 1000;
		if (kind == 2)
			before -= before % 1000000000LL;
		if (v < before || v > after)
			outside++;
	}
	syscall(SYS_getppid);
	printf("timeloop: %lld %s calls, last %lld.%09lld", n, what,
	       v / 1000000000LL, v % 1000000000LL);
	if (check)
		printf(", %lld bracketed by system calls, %lld outside, %lld backwards",
		       checked, outside, backwards);
	printf("\n");
	print_pvread_stats();
	return check && (outside || backwards);
}
