// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A program that confines itself with seccomp before its first clock read:
 * a filter that allows the clock's system calls, write, exit, fork's and
 * wait's, and kills the process at any other.  It must read every clock
 * as without the library, and so must a child it forks under the filter.
 *
 *   seccomp          through libc's names: run it with the shim preloaded
 *                    (LD_PRELOAD=libpvread-preload.so), which finds no
 *                    /dev/pvread on a host without the module
 *   seccomp page     through pvread_*(), over a synthetic line page given
 *                    before the filter: the parent's reads, then a forked
 *                    child's first reads, under the filter
 *
 * Each read is bracketed by the kernel's answer (the system call, which
 * the filter allows).  A process the filter kills is "not ok".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pvread.h"
#include "synthetic.h"
#include "tap.h"

#define NSEC_PER_SEC 1000000000LL
/* The synthetic page follows the host between hand ticks within this. */
#define SLACK_NS 200000LL
#define COARSE_SLACK_NS 50000000LL

static const int allowed[] = {
	SYS_clock_gettime, SYS_gettimeofday, SYS_time, SYS_write, SYS_exit,
	SYS_exit_group, SYS_clone, SYS_clone3, SYS_wait4, SYS_rt_sigreturn,
	/* glibc's fork() in the child */
	SYS_set_robust_list, SYS_rseq, SYS_getpid, SYS_gettid,
};

/* Allow the calls above, kill the process at any other. */
static int confine(void)
{
	struct sock_filter f[4 + 2 * sizeof(allowed) / sizeof(allowed[0]) + 1];
	struct sock_fprog prog = { .filter = f };
	unsigned int i, n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		AUDIT_ARCH_X86_64, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
		SECCOMP_RET_KILL_PROCESS);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		offsetof(struct seccomp_data, nr));
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
			(unsigned int)allowed[i], 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
			SECCOMP_RET_ALLOW);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
		SECCOMP_RET_KILL_PROCESS);
	prog.len = (unsigned short)n;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
		printf("# seccomp: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int64_t ns_of(const struct timespec *ts)
{
	return ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static int64_t sys_ns(clockid_t clock)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clock, &ts);
	return ns_of(&ts);
}

static bool use_pvread;

static int read_clock(clockid_t clock, struct timespec *ts)
{
	return use_pvread ? pvread_clock_gettime(clock, ts) :
	       clock_gettime(clock, ts);
}

static const clockid_t clocks[] = {
	CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,
	CLOCK_TAI, CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE,
};

/*
 * Every clock, gettimeofday() and time(), @n times each, bracketed by the
 * system calls: the number of readings outside (with @slack), or -1.
 */
static long read_all(int n, int64_t slack)
{
	struct timeval tv;
	unsigned int c;
	long bad = 0;
	int i;

	for (c = 0; c < sizeof(clocks) / sizeof(clocks[0]); c++)
		for (i = 0; i < n; i++) {
			struct timespec ts;
			int64_t before = sys_ns(clocks[c]), after;

			/*
			 * A page ticked by hand holds the coarse clocks of
			 * its last tick, the kernel's may be a tick later.
			 */
			int64_t sl = slack && (clocks[c] == CLOCK_REALTIME_COARSE ||
				     clocks[c] == CLOCK_MONOTONIC_COARSE) ?
				     COARSE_SLACK_NS : slack;

			if (read_clock(clocks[c], &ts))
				return -1;
			after = sys_ns(clocks[c]);
			if (ns_of(&ts) < before - sl || ns_of(&ts) > after + sl) {
				if (!bad++)
					printf("# clock %d: %lld ns from [%lld, %lld]\n",
					       (int)clocks[c],
					       (long long)ns_of(&ts),
					       (long long)before,
					       (long long)after);
			}
		}
	for (i = 0; i < n; i++) {
		struct timeval a, b;
		time_t t0, t, t1;

		syscall(SYS_gettimeofday, &a, NULL);
		if (use_pvread ? pvread_gettimeofday(&tv, NULL) :
		    gettimeofday(&tv, NULL))
			return -1;
		syscall(SYS_gettimeofday, &b, NULL);
		/* The page's REALTIME, within the fine clocks' slack. */
		bad += (int64_t)tv.tv_sec * 1000000 + tv.tv_usec <
		       (int64_t)a.tv_sec * 1000000 + a.tv_usec - slack / 1000 ||
		       (int64_t)tv.tv_sec * 1000000 + tv.tv_usec >
		       (int64_t)b.tv_sec * 1000000 + b.tv_usec + slack / 1000;
		t0 = syscall(SYS_time, NULL);
		t = use_pvread ? pvread_time(NULL) : time(NULL);
		t1 = syscall(SYS_time, NULL);
		/* A page ticked by hand: its coarse second may be the last. */
		bad += t < t0 - (slack ? 1 : 0) || t > t1;
	}
	return bad;
}

static struct synthetic page;

/* The page current, as the module keeps it: by hand, no ticker thread. */
static void tick(void)
{
	if (use_pvread) {
		synthetic_tick(&page);
		synthetic_line_update(&page);
	}
}

/* Fallbacks so far on this thread, and those for "timens". */
static void count(uint64_t *slow, uint64_t *timens)
{
	struct pvread_stats st;

	pvread_get_stats_size(&st, sizeof(st));
	*slow = st.slow;
	*timens = st.slow_by_reason[PVREAD_SLOW_TIMENS];
}

/*
 * exit_group, not _exit(): AddressSanitizer's _exit() runs its leak check,
 * with system calls no filter here allows.
 */
static __attribute__((noreturn)) void leave(int code)
{
	syscall(SYS_exit_group, code);
	__builtin_unreachable();
}

/* What the confined program found, for the process that reports it. */
struct outcome {
	int parent_read;	/* 1: its own reads passed */
	int forked;		/* 1: its child's status below */
	int child_status;
	int fallbacks_read;	/* 1: its fallbacks after line readings passed */
};

/* The confined program: never returns. */
static void program(struct outcome *o)
{
	uint64_t s0, n0, s1, n1;
	int status, reads = 100;
	long bad;
	pid_t pid;

	if (use_pvread &&
	    (synthetic_init(&page, PVREAD_MODE_LINE) ||
	     pvread_use_page(page.hdr, page.size))) {
		printf("# synthetic page: %s\n", strerror(errno));
		leave(1);
	}
	tick();
	if (use_pvread)
		read_all(1, SLACK_NS);	/* the line used before the filter */
	fflush(stdout);
	if (confine())
		leave(1);
	tick();
	count(&s0, &n0);
	bad = read_all(reads, use_pvread ? SLACK_NS : 0);
	count(&s1, &n1);
	printf("# confined program: %ld readings outside the system calls, %llu fallbacks\n",
	       bad, (unsigned long long)(s1 - s0));
	o->parent_read = bad == 0 && (!use_pvread || s1 == s0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		tick();
		count(&s0, &n0);
		bad = read_all(reads, use_pvread ? SLACK_NS : 0);
		count(&s1, &n1);
		printf("# its forked child: %ld readings outside the system calls, %llu fallbacks (%llu timens)\n",
		       bad, (unsigned long long)(s1 - s0),
		       (unsigned long long)(n1 - n0));
		/*
		 * From the page, BOOTTIME too (its offset checked by clock
		 * calls), but the first read, which checks the offsets.
		 */
		fflush(stdout);
		leave(bad ? 1 : use_pvread && s1 - s0 > 8 ? 2 : 0);
	}
	if (pid > 0 && waitpid(pid, &status, 0) == pid) {
		o->child_status = status;
		o->forked = 1;
	}
	if (use_pvread) {
		/*
		 * Line readings returned, then the page leaves line mode:
		 * each clock's first fallback holds at the line (a fallback
		 * that blocked signals there made rt_sigprocmask calls).
		 */
		synthetic_line_leave(&page);
		count(&s0, &n0);
		bad = read_all(reads, SLACK_NS);
		count(&s1, &n1);
		printf("# after line mode: %ld readings outside the system calls, %llu fallbacks\n",
		       bad, (unsigned long long)(s1 - s0));
		fflush(stdout);
		o->fallbacks_read = bad == 0 && s1 > s0;
	}
	leave(0);
}

static void say_killed(const char *who, int status)
{
	if (WIFSIGNALED(status))
		printf("# %s was killed by signal %d (%s)\n", who,
		       WTERMSIG(status), strsignal(WTERMSIG(status)));
}

int main(int argc, char **argv)
{
	static char out[1 << 16];
	struct outcome *o;
	const char *who;
	int status;
	pid_t pid;

	use_pvread = argc > 1 && !strcmp(argv[1], "page");
	who = use_pvread ? "pvread over a page given before the filter" :
	      "libc's names";
	/* stdout's buffer now: malloc() may need mmap() later. */
	setvbuf(stdout, out, _IOLBF, sizeof(out));
	tap_plan(use_pvread ? 4 : 2);
	o = mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (o == MAP_FAILED)
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		program(o);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	say_killed("the confined program", status);
	if (o->forked)
		say_killed("its child", o->child_status);
	/*
	 * Each run's names its own (the manifest holds a name to one
	 * result); the page's checks only where there is one.
	 */
	tap_result(WIFEXITED(status) && !WEXITSTATUS(status) && o->parent_read,
		   "%s: every clock, gettimeofday, time under a seccomp filter, as the kernel's%s",
		   who, use_pvread ? ", from the page" : "");
	tap_result(o->forked && WIFEXITED(o->child_status) &&
		   WEXITSTATUS(o->child_status) != 1,
		   "%s: a child forked under the filter: not killed, every reading as the kernel's",
		   who);
	if (!use_pvread)
		return tap_exit();
	tap_result(o->forked && WIFEXITED(o->child_status) &&
		   !WEXITSTATUS(o->child_status),
		   "%s: the child's reads: from the page, CLOCK_BOOTTIME too",
		   who);
	tap_result(o->fallbacks_read,
		   "%s: the page leaves line mode after line readings: the fallbacks under the filter, as the kernel's",
		   who);
	return tap_exit();
}
