// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pvread-bench: ns per read of the raw counter (lfence; rdtsc, and rdtscp
 * where the CPU offers it: libpvread's line read takes rdtscp there, as
 * the vDSO does), libpvread for each clock, libc's clock_gettime (the vDSO
 * where it can) and the clock_gettime system call, in one run, with min
 * and median over repetitions and the ratios.  Short batches taken in
 * turns (10 ms, 51 times, by default), so that a noisy neighbour's moments
 * fall on every method alike.
 *
 *   pvread-bench [-t MS] [-r REPS] [-n RUNS] [-j THREADS] [-s line|none]
 *   pvread-bench -l N -v libc|pvread|syscall
 *
 * The row "counter, then the line's sum": the ordered counter as the
 * library reads it, and the arithmetic every line read does after it (no
 * load, no check), the floor under any read of the line on this host.
 *
 * -s line reads a synthetic page built in memory (no module needed) in
 * line mode, the one fast mode of the page since its ABI version 3, kept
 * current by a thread ticking every 4 ms like the kernel's timekeeper;
 * -s none, the same page in mode none (the kernel answers every read, as
 * where the module is loaded but serves no line): what libpvread costs
 * over libc there.  Without -s, the page of /dev/pvread if there is one,
 * else none at all.  -n RUNS whole runs, one after the other: the figures
 * are the median of their medians, and each run's median of the vDSO
 * ratio is printed too.
 * -j runs one reader per CPU, all at once, and reports the mean of their
 * figures.  -l makes N reads of CLOCK_MONOTONIC, for counting system calls
 * from outside.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "pvread.h"
#include "synthetic.h"

enum via { VIA_RDTSC, VIA_RDTSCP, VIA_PRODUCT, VIA_PVREAD, VIA_PVREAD_NS,
	   VIA_LIBC, VIA_SYSCALL };

struct method {
	const char *name;
	enum via via;
	clockid_t clock;
};

static const struct method methods[] = {
	{ "lfence; rdtsc",                 VIA_RDTSC,   0 },
	{ "rdtscp",                        VIA_RDTSCP,  0 },
	{ "counter, then the line's sum",  VIA_PRODUCT, 0 },
	{ "pvread CLOCK_MONOTONIC",        VIA_PVREAD,  CLOCK_MONOTONIC },
	{ "pvread CLOCK_REALTIME",         VIA_PVREAD,  CLOCK_REALTIME },
	{ "pvread CLOCK_MONOTONIC_RAW",    VIA_PVREAD,  CLOCK_MONOTONIC_RAW },
	{ "pvread CLOCK_BOOTTIME",         VIA_PVREAD,  CLOCK_BOOTTIME },
	{ "pvread CLOCK_TAI",              VIA_PVREAD,  CLOCK_TAI },
	{ "pvread CLOCK_MONOTONIC_COARSE", VIA_PVREAD,  CLOCK_MONOTONIC_COARSE },
	{ "pvread_ns CLOCK_MONOTONIC",     VIA_PVREAD_NS, CLOCK_MONOTONIC },
	{ "libc (vDSO) CLOCK_MONOTONIC",   VIA_LIBC,    CLOCK_MONOTONIC },
	{ "syscall CLOCK_MONOTONIC",       VIA_SYSCALL, CLOCK_MONOTONIC },
};
#define NR_METHODS (sizeof(methods) / sizeof(methods[0]))
#define RDTSC 0
#define VDSO (NR_METHODS - 2)
#define SYSCALL (NR_METHODS - 1)
#define MAX_REPS 1001
#define MAX_RUNS 15
#define PVREAD_MONO 3

static int64_t now_ns(void)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * The raw counter reads, the floor under every fast read: lfence; rdtsc,
 * which every CPU has, and rdtscp, measured where the CPU offers it (a
 * guest's CPUID may hide it); libpvread's line read takes rdtscp where it
 * is offered.
 */
static int have_rdtscp;

static int cpu_has_rdtscp(void)
{
	unsigned int eax, ebx, ecx, edx;

	return __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
	       (edx & (1U << 27));
}

/* One tight loop per kind of read: no dispatch inside what is measured. */
static uint64_t run(const struct method *m, long n)
{
	struct timespec ts = { 0, 0 };
	uint64_t sink = 0;
	unsigned int aux;
	long i;

	switch (m->via) {
	case VIA_RDTSC:
		for (i = 0; i < n; i++) {
			_mm_lfence();
			sink += __rdtsc();
		}
		break;
	case VIA_RDTSCP:
		for (i = 0; i < n; i++)
			sink += __rdtscp(&aux);
		break;
	case VIA_PRODUCT: {
		/*
		 * What any line read does after the counter, and no more:
		 * the product, the offset, the shift, the seconds (no load,
		 * no check), on the counter as libpvread reads it.  The floor
		 * under pvread_ns() on this host.
		 */
		volatile uint64_t vrate = 0x1234567ULL << 5, voff = 12345;
		volatile uint64_t vbase = 1000000000ULL * 86400;
		const uint64_t rate = vrate, off = voff, base = vbase;

		if (have_rdtscp) {
			for (i = 0; i < n; i++)
				sink += base + ((__rdtscp(&aux) * rate + off) >> 32);
		} else {
			for (i = 0; i < n; i++) {
				_mm_lfence();
				sink += base + ((__rdtsc() * rate + off) >> 32);
			}
		}
		break;
	}
	case VIA_PVREAD:
		for (i = 0; i < n; i++) {
			pvread_clock_gettime(m->clock, &ts);
			sink += ts.tv_nsec;
		}
		break;
	case VIA_PVREAD_NS:
		for (i = 0; i < n; i++)
			sink += pvread_ns(m->clock);
		break;
	case VIA_LIBC:
		for (i = 0; i < n; i++) {
			clock_gettime(m->clock, &ts);
			sink += ts.tv_nsec;
		}
		break;
	case VIA_SYSCALL:
		for (i = 0; i < n; i++) {
			syscall(SYS_clock_gettime, m->clock, &ts);
			sink += ts.tv_nsec;
		}
		break;
	}
	return sink;
}

/*
 * This thread's pvread_clock_gettime() calls: libpvread counts only those
 * the kernel answered ("slow"), so the fast ones are these less that.
 */
static __thread uint64_t pvread_reads;

/* This thread's pvread reads the kernel did not answer, derived. */
static unsigned long long fast_reads(const struct pvread_stats *st)
{
	return pvread_reads > st->slow ? pvread_reads - st->slow : 0;
}

/* ns per read of one batch sized to last about @ms milliseconds. */
static double measure(const struct method *m, long ms)
{
	static volatile uint64_t sink;
	long n = 16;
	int64_t t;

	for (;;) {
		t = now_ns();
		sink += run(m, n);
		t = now_ns() - t;
		if (m->via == VIA_PVREAD || m->via == VIA_PVREAD_NS)
			pvread_reads += n;
		if (t >= ms * 1000000LL || n > (1L << 40))
			return (double)t / n;
		n = t > 0 ? (long)(n * (ms * 1e6 / t) * 1.2) + 1 : n * 16;
	}
}

struct reader {
	pthread_t tid;
	int cpu;
	const struct method *m;
	long ms;
	pthread_barrier_t *start;
	double ns;
};

static void *reader(void *arg)
{
	struct reader *r = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(r->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	pthread_barrier_wait(r->start);
	r->ns = measure(r->m, r->ms);
	return NULL;
}

/* All @threads readers at once, one per CPU: the mean of their figures. */
static double measure_parallel(const struct method *m, long ms, int threads)
{
	struct reader r[CPU_SETSIZE];
	pthread_barrier_t start;
	double sum = 0;
	int i;

	if (threads <= 1)
		return measure(m, ms);
	pthread_barrier_init(&start, NULL, threads);
	for (i = 0; i < threads; i++) {
		r[i] = (struct reader){ .cpu = i, .m = m, .ms = ms,
					.start = &start };
		pthread_create(&r[i].tid, NULL, reader, &r[i]);
	}
	for (i = 0; i < threads; i++) {
		pthread_join(r[i].tid, NULL);
		sum += r[i].ns;
	}
	pthread_barrier_destroy(&start);
	return sum / threads;
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
	pvread_reads++;
	run(&m, n);
	if (m.via == VIA_PVREAD || m.via == VIA_PVREAD_NS)
		pvread_reads += n;
	pvread_get_stats(&st);
	printf("%ld reads of CLOCK_MONOTONIC via %s (pvread: %llu fast, %llu via libc)\n",
	       n, via, fast_reads(&st), (unsigned long long)st.slow);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pvread-bench [-t MS] [-r REPS] [-n RUNS] [-j THREADS] [-s line|none]\n"
		"       pvread-bench -l N -v libc|pvread|syscall\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static double samples[NR_METHODS][MAX_REPS];
	static double run_min[NR_METHODS][MAX_RUNS], run_med[NR_METHODS][MAX_RUNS];
	double min[NR_METHODS], med[NR_METHODS];
	long ms = 10, reps = 51, n = 0, threads = 1, runs = 3, k;
	uint32_t mode = PVREAD_MODE_LINE;
	const char *via = NULL, *synth = NULL;
	static struct synthetic page;
	struct pvread_info info;
	unsigned int i, r;
	int opt;

	while ((opt = getopt(argc, argv, "t:r:n:j:s:l:v:")) != -1) {
		switch (opt) {
		case 't': ms = atol(optarg); break;
		case 'r': reps = atol(optarg); break;
		case 'n': runs = atol(optarg); break;
		case 'j': threads = atol(optarg); break;
		case 's': synth = optarg; break;
		case 'l': n = atol(optarg); break;
		case 'v': via = optarg; break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	if (via)
		return loop(n ? n : 100000, via);
	if (reps < 1 || reps > MAX_REPS || ms < 1 || threads < 1 ||
	    runs < 1 || runs > MAX_RUNS ||
	    threads > CPU_SETSIZE || threads > sysconf(_SC_NPROCESSORS_ONLN)) {
		fprintf(stderr, "pvread-bench: 1 <= REPS <= %d, 1 <= RUNS <= %d, MS >= 1, 1 <= THREADS <= online CPUs\n",
			MAX_REPS, MAX_RUNS);
		return 2;
	}
	if (synth) {
		if (!strcmp(synth, "none")) {
			mode = PVREAD_MODE_NONE;
		} else if (strcmp(synth, "line")) {
			fprintf(stderr, "pvread-bench: -s %s: the synthetic page is in line mode (-s line) or mode none (-s none); the page has no per-CPU or stable mode since its ABI version 3\n",
				synth);
			usage();
		}
		if (synthetic_init(&page, mode) ||
		    pvread_use_page(page.hdr, page.size) ||
		    synthetic_start(&page, 4000)) {
			perror("pvread-bench: synthetic page");
			return 1;
		}
	}
	have_rdtscp = cpu_has_rdtscp();
	pvread_get_info(&info);
	printf("page: %s, mode %u (%s), fast path %s; %ld thread%s, %ld ms x %ld, %ld run%s; rdtscp %s\n",
	       synth ? "synthetic" : info.mapped ? PVREAD_DEVICE : "none",
	       info.mode, info.mode == PVREAD_MODE_LINE ? "line" :
	       info.mode == PVREAD_MODE_NONE ? "none" : "unknown",
	       info.fast ? "yes" : "no", threads, threads > 1 ? "s" : "", ms,
	       reps, runs, runs > 1 ? "s" : "",
	       have_rdtscp ? "offered" : "not offered");

	for (k = 0; k < runs; k++) {
		for (r = 0; r < reps; r++)
			for (i = 0; i < NR_METHODS; i++)
				if (methods[i].via != VIA_RDTSCP || have_rdtscp)
					samples[i][r] = measure_parallel(
						&methods[i], ms, threads);
		for (i = 0; i < NR_METHODS; i++) {
			if (methods[i].via == VIA_RDTSCP && !have_rdtscp)
				continue;
			qsort(samples[i], reps, sizeof(double), cmp_double);
			run_min[i][k] = samples[i][0];
			run_med[i][k] = samples[i][reps / 2];
		}
		if (runs > 1)
			printf("run %ld: pvread CLOCK_MONOTONIC median %.1f ns, the vDSO's %.1f (%.3fx)\n",
			       k + 1, run_med[PVREAD_MONO][k], run_med[VDSO][k],
			       run_med[PVREAD_MONO][k] / run_med[VDSO][k]);
	}
	/* The least of the minima; the median of the medians. */
	for (i = 0; i < NR_METHODS; i++) {
		if (methods[i].via == VIA_RDTSCP && !have_rdtscp)
			continue;
		qsort(run_min[i], runs, sizeof(double), cmp_double);
		qsort(run_med[i], runs, sizeof(double), cmp_double);
		min[i] = run_min[i][0];
		med[i] = run_med[i][runs / 2];
	}
	/*
	 * /vDSO min: the least batch's ratio, this host at its quietest;
	 * -rdtsc: the median less lfence; rdtsc's, what a read adds to it.
	 */
	printf("%-30s %9s %9s %9s %9s %9s %9s\n", "method", "min ns",
	       "median ns", "/syscall", "/vDSO", "/vDSO min", "-rdtsc");
	for (i = 0; i < NR_METHODS; i++) {
		if (methods[i].via == VIA_RDTSCP && !have_rdtscp) {
			printf("%-30s %9s %9s %9s %9s %9s %9s\n",
			       "rdtscp (not offered)", "-", "-", "-", "-", "-",
			       "-");
			continue;
		}
		printf("%-30s %9.1f %9.1f %9.3f %9.3f %9.3f %9.1f\n",
		       methods[i].name, min[i], med[i], med[i] / med[SYSCALL],
		       med[i] / med[VDSO], min[i] / min[VDSO],
		       med[i] - med[RDTSC]);
	}
	if (threads == 1) {
		struct pvread_stats st;

		pvread_get_stats(&st);
		printf("pvread reads: %llu fast, %llu via libc, %llu retries, %llu raised to the floor\n",
		       fast_reads(&st), (unsigned long long)st.slow,
		       (unsigned long long)st.retries,
		       (unsigned long long)st.clamped);
		for (i = 0; i < PVREAD_SLOW_NR_REASONS; i++)
			if (st.slow_by_reason[i])
				printf("  via libc for \"%s\": %llu\n",
				       pvread_slow_reason_name(i),
				       (unsigned long long)st.slow_by_reason[i]);
	}
	synthetic_stop(&page);
	return 0;
}
