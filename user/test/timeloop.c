// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * An unmodified program that asks the time in a loop, the way a JVM or a
 * database does: for the preload shim.  It knows nothing of libpvread.
 *
 *   timeloop [-c [-e]] CALL N
 *
 * CALL: gettimeofday, time, clock_gettime (CLOCK_MONOTONIC), boottime or
 * monotonic_raw (clock_gettime of those clocks), timespec_get (TIME_UTC)
 * or ftime.  N calls, then the last
 * value.  -c: also bracket a read every 1024 by two raw system calls and
 * count those outside, and steps back (exit 1 if any).  -e: a reading may
 * lie outside by the error bound a preloaded libpvread publishes
 * (pvread_get_info(), read after each bracket), as its fast path may.
 *
 * The loop is framed by two getppid() system calls, so that a syscall trace
 * can tell the loop's clock calls from libc's own (glibc's malloc reads the
 * clock when getrandom() has no entropy yet, as early in a VM's life).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <getopt.h>
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
 * libpvread counts only the reads the kernel answered ("slow"), so "fast"
 * is derived: the loop's @n calls less those, at least 0.  libc's own
 * clock reads count as slow too, so it is a lower bound.
 */
static void print_pvread_stats(long long n)
{
	void (*get_stats)(struct pvread_stats *);
	const char *(*name)(unsigned int);
	struct pvread_stats st;
	unsigned long long fast;
	unsigned int i;

	*(void **)&get_stats = dlsym(RTLD_DEFAULT, "pvread_get_stats");
	*(void **)&name = dlsym(RTLD_DEFAULT, "pvread_slow_reason_name");
	if (!get_stats || !name)
		return;
	get_stats(&st);
	fast = (unsigned long long)n > st.slow ?
	       (unsigned long long)n - st.slow : 0;
	printf("timeloop: libpvread: %llu fast, %llu slow, %llu retries, %llu raised to the floor",
	       fast, (unsigned long long)st.slow,
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

/*
 * The error bound a preloaded libpvread publishes now (0 without one): a
 * reading's, taken just before and after it, is the larger.
 */
static long long published_bound(void)
{
	static int (*get_info)(struct pvread_info *);
	struct pvread_info info;

	if (!get_info)
		*(void **)&get_info = dlsym(RTLD_DEFAULT, "pvread_get_info");
	if (!get_info || get_info(&info))
		return 0;
	return (long long)info.error_bound_ns;
}

static const struct {
	const char *name;
	clockid_t clock;
} calls[] = {
	{ "gettimeofday", CLOCK_REALTIME },
	{ "clock_gettime", CLOCK_MONOTONIC },
	{ "time", CLOCK_REALTIME_COARSE },
	{ "boottime", CLOCK_BOOTTIME },
	{ "monotonic_raw", CLOCK_MONOTONIC_RAW },
	{ "timespec_get", CLOCK_REALTIME },
	{ "ftime", CLOCK_REALTIME },
};

/* <sys/timeb.h> is deprecated, and ftime() with it; glibc 2.36 has both. */
struct timeb {
	time_t time;
	unsigned short int millitm;
	short int timezone;
	short int dstflag;
};
int ftime(struct timeb *tp);

int main(int argc, char **argv)
{
	long long before = 0, after = 0, v = 0, prev = 0, n, i, slack = 0;
	long long outside = 0, backwards = 0, checked = 0, worst = 0;
	int check = 0, with_bound = 0, kind = -1, opt;
	const char *what;
	struct timespec ts;
	struct timeval tv;
	clockid_t clock;
	unsigned int k;

	while ((opt = getopt(argc, argv, "ce")) != -1) {
		if (opt == 'c')
			check = 1;
		else if (opt == 'e')
			with_bound = 1;
		else
			goto usage;
	}
	if (argc - optind != 2)
		goto usage;
	what = argv[optind];
	n = atoll(argv[optind + 1]);
	for (k = 0; k < sizeof(calls) / sizeof(calls[0]); k++)
		if (!strcmp(what, calls[k].name))
			kind = (int)k;
	if (kind < 0 || n < 1)
		goto usage;
	clock = calls[kind].clock;

	syscall(SYS_getppid);
	for (i = 0; i < n; i++) {
		int bracket = check && !(i & 1023);

		if (bracket && with_bound)
			slack = published_bound();
		if (bracket)
			before = kernel_ns(clock);
		switch (kind) {
		case 0:
			gettimeofday(&tv, NULL);
			v = tv.tv_sec * 1000000000LL + tv.tv_usec * 1000LL;
			break;
		case 2:
			v = time(NULL) * 1000000000LL;
			break;
		case 5:
			timespec_get(&ts, TIME_UTC);
			v = ts.tv_sec * 1000000000LL + ts.tv_nsec;
			break;
		case 6: {
			struct timeb tb;

			ftime(&tb);
			v = tb.time * 1000000000LL + tb.millitm * 1000000LL;
			break;
		}
		default:
			clock_gettime(clock, &ts);
			v = ts.tv_sec * 1000000000LL + ts.tv_nsec;
			break;
		}
		/* gettimeofday, time and ftime truncate: the fine clocks */
		if (kind != 0 && kind != 2 && kind != 6 && v < prev)
			backwards++;
		prev = v;
		if (!bracket)
			continue;
		after = kernel_ns(clock);
		if (with_bound && published_bound() > slack)
			slack = published_bound();
		checked++;
		/* gettimeofday, time, ftime truncate: at their resolution */
		if (kind == 0)
			before -= before % 1000;
		if (kind == 2)
			before -= before % 1000000000LL;
		if (kind == 6)
			before -= before % 1000000LL;
		if (before - v > worst)
			worst = before - v;
		if (v - after > worst)
			worst = v - after;
		if (v < before - slack || v > after + slack)
			outside++;
	}
	syscall(SYS_getppid);
	printf("timeloop: %lld %s calls, last %lld.%09lld", n, what,
	       v / 1000000000LL, v % 1000000000LL);
	if (check)
		printf(", %lld bracketed by system calls, %lld outside%s, %lld backwards, largest deviation %lld ns",
		       checked, outside, with_bound ? " the published bound" : "",
		       backwards, worst);
	printf("\n");
	print_pvread_stats(n);
	return check && (outside || backwards);
usage:
	fprintf(stderr, "usage: timeloop [-c [-e]] gettimeofday|clock_gettime|time|boottime|monotonic_raw|timespec_get|ftime N\n");
	return 2;
}
