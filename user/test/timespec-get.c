// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * timespec_get() with every time base, for the preload shim: an unmodified,
 * dynamically linked program that knows nothing of libpvread (its counters
 * are looked up, as timeloop's are).  Run with libpvread-preload.so
 * preloaded on a host without /dev/pvread, where the kernel answers every
 * read and libpvread counts each as a fallback: a base the shim answers
 * through libpvread shows in the count, one libc answered does not.  It
 * defines dlsym() (below), and counts the calls the shim makes.
 *
 * C23's bases, as glibc 2.43 defines them (each its clock id plus 1), for
 * a libc whose headers do not define them yet: the shim answers them
 * whatever the libc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pvread.h"	/* for struct pvread_stats only: nothing is linked */
#include "tap.h"

#ifndef TIME_MONOTONIC
#define TIME_MONOTONIC 2
#endif
#ifndef TIME_ACTIVE
#define TIME_ACTIVE 3
#endif
#ifndef TIME_THREAD_ACTIVE
#define TIME_THREAD_ACTIVE 4
#endif

#define NSEC_PER_SEC 1000000000LL

static long long ns_of(const struct timespec *ts)
{
	return ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static long long sys_ns(clockid_t clock)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clock, &ts);
	return ns_of(&ts);
}

/*
 * The preloaded libpvread's, if any: a weak reference, so that the program
 * runs without it (and needs no dlsym() of its own, below).
 */
extern void pvread_get_stats(struct pvread_stats *stats) __attribute__((weak));

/* The preloaded libpvread's fallbacks in this thread; -1 without one. */
static long long pvread_slow(void)
{
	struct pvread_stats st;

	if (!pvread_get_stats)
		return -1;
	pvread_get_stats(&st);
	return (long long)st.slow;
}

/*
 * timespec_get() must call no dlsym(): it is not async-signal-safe, and
 * slow.  This program's, exported (the Makefile's --export-dynamic-symbol)
 * so that the shim's reference binds here, counts the calls and finds
 * nothing: a shim that looks for libc's timespec_get() does not find it.
 */
static unsigned long dlsym_calls;

__attribute__((visibility("default")))
void *dlsym(void *restrict handle, const char *restrict name)
{
	(void)handle;
	(void)name;
	dlsym_calls++;
	return NULL;
}

static const struct {
	int base;
	clockid_t clock;
	const char *name;
} bases[] = {
	{ TIME_UTC, CLOCK_REALTIME, "TIME_UTC" },
	{ TIME_MONOTONIC, CLOCK_MONOTONIC, "TIME_MONOTONIC" },
	{ TIME_ACTIVE, CLOCK_PROCESS_CPUTIME_ID, "TIME_ACTIVE" },
	{ TIME_THREAD_ACTIVE, CLOCK_THREAD_CPUTIME_ID, "TIME_THREAD_ACTIVE" },
};

/* Each base: its number returned, its clock's reading, libpvread's answer. */
static void each_base(void)
{
	long long before, after, v, slow;
	struct timespec ts;
	unsigned int i;
	int ret;

	for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		memset(&ts, 0, sizeof(ts));
		slow = pvread_slow();
		before = sys_ns(bases[i].clock);
		ret = timespec_get(&ts, bases[i].base);
		after = sys_ns(bases[i].clock);
		slow = pvread_slow() - slow;
		v = ns_of(&ts);
		tap_result(ret == bases[i].base && v >= before && v <= after &&
			   slow == 1,
			   "timespec_get(%s): %d, its clock bracketed by the kernel's, answered through libpvread (returned %d, %lld ns outside, %lld fallbacks counted)",
			   bases[i].name, bases[i].base, ret,
			   v < before ? before - v : v > after ? v - after : 0,
			   slow);
	}
}

/* A base C does not define: 0, *ts not written. */
static void unknown_bases(void)
{
	static const int unknown[] = { 0, -1, 5, 1000 };
	struct timespec ts;
	unsigned int i;
	int bad = 0;

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		ts.tv_sec = 12345;
		ts.tv_nsec = 678;
		bad += timespec_get(&ts, unknown[i]) != 0 ||
		       ts.tv_sec != 12345 || ts.tv_nsec != 678;
	}
	tap_result(!bad, "timespec_get() with a base C does not define (0, -1, 5, 1000): 0, ts not written");
}

/*
 * TIME_MONOTONIC and clock_gettime(CLOCK_MONOTONIC) interleaved: one clock,
 * with libpvread's floors, never back.
 */
static void interleaved(long n)
{
	long long prev = 0, v, back = 0, failed = 0;
	struct timespec ts;
	long i;

	for (i = 0; i < n; i++) {
		if (i & 1)
			failed += clock_gettime(CLOCK_MONOTONIC, &ts) != 0;
		else
			failed += timespec_get(&ts, TIME_MONOTONIC) !=
				  TIME_MONOTONIC;
		v = ns_of(&ts);
		back += v < prev;
		prev = v;
	}
	tap_result(!failed && !back,
		   "timespec_get(TIME_MONOTONIC) interleaved with clock_gettime(CLOCK_MONOTONIC): %ld reads, %lld failed, %lld back",
		   n, failed, back);
}

/*
 * A seccomp filter that returns EPERM for clock_gettime: the vDSO makes
 * the system call for the CPU-time clocks, so TIME_ACTIVE's answer fails,
 * and timespec_get() returns 0, as C says for a failure.  In a child: the
 * filter stays for the life of the process.
 */
static void kernel_refuses(void)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = sizeof(insns) / sizeof(insns[0]),
		.filter = insns,
	};
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct timespec ts = { 12345, 678 };

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(3);
		_exit(timespec_get(&ts, TIME_ACTIVE) == 0 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
		tap_result(1, "timespec_get(TIME_ACTIVE) under a filter refusing clock_gettime: 0 # SKIP no seccomp filter here");
	else
		tap_result(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			   "timespec_get(TIME_ACTIVE) under a filter refusing clock_gettime: 0, a failure");
}

int main(void)
{
	unsigned long calls;

	tap_plan(8);
	if (pvread_slow() < 0)
		printf("# no libpvread preloaded: the counts say 0 answered\n");
	calls = dlsym_calls;
	each_base();
	unknown_bases();
	interleaved(200000);
	calls = dlsym_calls - calls;
	tap_result(!calls, "timespec_get() calls no dlsym(), whatever the base (%lu calls)",
		   calls);
	kernel_refuses();
	return tap_exit();
}
