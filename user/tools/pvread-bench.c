// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pvread-bench: ns per read of raw rdtscp, libpvread, libc's clock_gettime
 * (the vDSO where it can) and the clock_gettime system call, in one run.
 *
 *   pvread-bench [-t MS] [-r REPS]   the table
 *   pvread-bench -l N -v libc|pvread|syscall   N reads of CLOCK_MONOTONIC,
 *                                  for counting system calls from outside
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "pvread.h"

enum via { VIA_RDTSCP, VIA_PVREAD, VIA_LIBC, VIA_SYSCALL };

struct method {
	const char *name;
	enum via via;
	clockid_t clock;
};

static const struct method methods[] = {
	{ "rdtscp",                         VIA_RDTSCP,  0 },
	{ "pvread CLOCK_MONOTONIC",         VIA_PVREAD,  CLOCK_MONOTONIC },
	{ "pvread CLOCK_REALTIME",          VIA_PVREAD,  CLOCK_REALTIME },
	{ "libc (vDSO) CLOCK_MONOTONIC",    VIA_LIBC,    CLOCK_MONOTONIC },
	{ "syscall CLOCK_MONOTONIC",        VIA_SYSCALL, CLOCK_MONOTONIC },
};
#define NR_METHODS (sizeof(methods) / sizeof(methods[0]))

static int64_t now_ns(void)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t sink;

static void run(const struct method *m, long n)
{
	struct timespec ts;
	unsigned int aux;
	long i;

	for (i = 0; i < n; i++) {
		switch (m->via) {
		case VIA_RDTSCP:
			sink += __rdtscp(&aux);
			continue;
		case VIA_PVREAD:
			pvread_clock_gettime(m->clock, &ts);
			break;
		case VIA_LIBC:
			clock_gettime(m->clock, &ts);
			break;
		case VIA_SYSCALL:
			syscall(SYS_clock_gettime, m->clock, &ts);
			break;
		}
		sink += ts.tv_nsec;
	}
}

/* ns per read of one batch sized to last about @ms milliseconds. */
static double measure(const struct method *m, long ms)
{
	long n = 16;
	int64_t t;

	for (;;) {
		t = now_ns();
		run(m, n);
		t = now_ns() - t;
		if (t >= ms * 1000000LL || n > (1L << 40))
			return (double)t / n;
		n = t > 0 ? (long)(n * (ms * 1e6 / t) * 1.2) + 1 : n * 16;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int loop(long n, const char *via)
{
	struct method m = { via, VIA_LIBC, CLOCK_MONOTONIC };
	struct pvread_stats st;
	struct timespec ts;

	if (!strcmp(via, "pvread"))
		m.via = VIA_PVREAD;
	else if (!strcmp(via, "syscall"))
		m.via = VIA_SYSCALL;
	else if (strcmp(via, "libc")) {
		fprintf(stderr, "pvread-bench: -v libc|pvread|syscall\n");
		return 2;
	}
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* map before counting */
	run(&m, n);
	pvread_get_stats(&st);
	printf("%ld reads of CLOCK_MONOTONIC via %s (pvread: %llu fast, %llu via libc)\n",
	       n, via, (unsigned long long)st.fast, (unsigned long long)st.slow);
	return 0;
}

int main(int argc, char **argv)
{
	double samples[NR_METHODS][64], min[NR_METHODS], med[NR_METHODS];
	long ms = 200, reps = 5, n = 0;
	const char *via = NULL;
	struct pvread_stats st;
	struct timespec ts;
	unsigned int i, r;
	int opt;

	while ((opt = getopt(argc, argv, "t:r:l:v:")) != -1) {
		switch (opt) {
		case 't': ms = atol(optarg); break;
		case 'r': reps = atol(optarg); break;
		case 'l': n = atol(optarg); break;
		case 'v': via = optarg; break;
		default:
			fprintf(stderr, "usage: pvread-bench [-t MS] [-r REPS] | -l N -v libc|pvread|syscall\n");
			return 2;
		}
	}
	if (via)
		return loop(n ? n : 100000, via);
	if (reps < 1 || reps > 64 || ms < 1) {
		fprintf(stderr, "pvread-bench: 1 <= REPS <= 64, MS >= 1\n");
		return 2;
	}

	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	for (r = 0; r < reps; r++)
		for (i = 0; i < NR_METHODS; i++)
			samples[i][r] = measure(&methods[i], ms);
	for (i = 0; i < NR_METHODS; i++) {
		qsort(samples[i], reps, sizeof(double), cmp_double);
		min[i] = samples[i][0];
		med[i] = samples[i][reps / 2];
	}
	pvread_get_stats(&st);
	printf("%-30s %10s %10s %10s %10s\n", "method", "min ns", "median ns",
	       "/syscall", "/vDSO");
	for (i = 0; i < NR_METHODS; i++)
		printf("%-30s %10.1f %10.1f %10.3f %10.3f\n", methods[i].name,
		       min[i], med[i], med[i] / med[NR_METHODS - 1],
		       med[i] / med[NR_METHODS - 2]);
	printf("pvread reads: %llu fast, %llu via libc\n",
	       (unsigned long long)st.fast, (unsigned long long)st.slow);
	return 0;
}
