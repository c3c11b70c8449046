// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The library at the edges of a process: each scenario in a child process
 * of its own.
 *
 *   process LIBPVREAD.SO           children where MADV_WIPEONFORK is refused,
 *                                  transient errors at the first mapping, a
 *                                  record odd while the header's wait ran out
 *   process --shim LIBPVREAD.SO    with libpvread-preload.so preloaded: the
 *                                  program's libpvread.a and a dlopen()ed
 *                                  libpvread.so share the shim's state
 *
 * The device is reached through syscall(SYS_openat), which this program
 * defines (the library's syscall() is the program's): it fails, or opens
 * a file holding a synthetic page, as a scenario says.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "synthetic.h"
#include "tap.h"

#define NSEC_PER_SEC 1000000000LL
#define SLACK_NS 200000LL

static int64_t ns_of(const struct timespec *ts)
{
	return ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

/* The system call itself, for the calls the hook below does not take. */
static long raw_syscall(long nr, long a, long b, long c, long d, long e,
			long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ __volatile__("syscall" : "=a"(ret)
			     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10),
			       "r"(r8), "r"(r9)
			     : "rcx", "r11", "memory");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* What an openat() of the device does: shared with the children. */
enum device { DEVICE_REAL, DEVICE_FAILS, DEVICE_FILE };
struct hook {
	int device;		/* DEVICE_* */
	int error;		/* DEVICE_FAILS: this errno */
	int opens;		/* openat() calls of the device */
	int proc_opens;		/* openat() calls of a file in /proc */
	int no_timens;		/* /proc/self/timens_offsets: ENOENT */
	char file[64];		/* DEVICE_FILE: this file instead */
};
static struct hook *hook;

long syscall(long nr, ...)
{
	long a[6] = { 0 };
	va_list ap;
	int i, n;

	/* No more arguments than the caller passed: the library's calls. */
	switch (nr) {
	case SYS_close:
		n = 1;
		break;
	case SYS_clock_gettime:
	case SYS_gettimeofday:
		n = 2;
		break;
	case SYS_read:
	case SYS_openat:
	case SYS_getcpu:
		n = 3;
		break;
	case SYS_readlinkat:
		n = 4;
		break;
	default:
		n = 6;
	}
	va_start(ap, nr);
	for (i = 0; i < n; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (hook && nr == SYS_openat &&
	    !strncmp((const char *)a[1], "/proc/", 6))
		__atomic_fetch_add(&hook->proc_opens, 1, __ATOMIC_SEQ_CST);
	if (hook && hook->no_timens && nr == SYS_openat &&
	    !strcmp((const char *)a[1], "/proc/self/timens_offsets")) {
		errno = ENOENT;
		return -1;
	}
	if (hook && nr == SYS_openat && !strcmp((const char *)a[1], PVREAD_DEVICE)) {
		__atomic_fetch_add(&hook->opens, 1, __ATOMIC_SEQ_CST);
		if (hook->device == DEVICE_FAILS) {
			errno = hook->error;
			return -1;
		}
		if (hook->device == DEVICE_FILE)
			a[1] = (long)hook->file;
	}
	return raw_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static int64_t sys_ns(clockid_t clock)
{
	struct timespec ts;

	raw_syscall(SYS_clock_gettime, clock, (long)&ts, 0, 0, 0, 0);
	return ns_of(&ts);
}

/* A scenario's exit status when this host cannot run it, and why. */
#define SKIPPED 3
static char *skip_reason;
#define SKIP_REASON_LEN 160

static int skip(const char *why)
{
	snprintf(skip_reason, SKIP_REASON_LEN, "%s", why);
	return SKIPPED;
}

static void scenario(const char *what, int (*fn)(void))
{
	int status;
	pid_t pid;

	fflush(stdout);
	skip_reason[0] = '\0';
	if (hook)
		memset(hook, 0, sizeof(*hook));
	pid = fork();
	if (pid == 0) {
		int rc = fn();

		fflush(stdout);
		_exit(rc);
	}
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		printf("# killed by signal %d\n", WTERMSIG(status));
	if (WIFEXITED(status) && WEXITSTATUS(status) == SKIPPED &&
	    skip_reason[0]) {
		printf("ok %d - %s # SKIP %s\n", ++tap_count, what, skip_reason);
		return;
	}
	tap_result(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", what);
}

static struct synthetic page;
static const char *libpvread_so;
static char **self_argv;

/* @n reads of @clock bracketed by the system call: those outside. */
static long bracketed(clockid_t clock, int n)
{
	struct timespec ts;
	long bad = 0;
	int i;

	for (i = 0; i < n; i++) {
		int64_t before = sys_ns(clock), after;

		pvread_clock_gettime(clock, &ts);
		after = sys_ns(clock);
		bad += ns_of(&ts) < before - SLACK_NS ||
		       ns_of(&ts) > after + SLACK_NS;
	}
	if (bad)
		printf("# clock %d: %ld of %d readings outside the system calls (the last %lld ns from the kernel's)\n",
		       (int)clock, bad, n,
		       (long long)(ns_of(&ts) - sys_ns(clock)));
	return bad;
}

/*
 * Where MADV_WIPEONFORK is refused (here a seccomp filter that fails
 * madvise() with EPERM, installed before this program was executed): a
 * child of fork() made after unshare(CLONE_NEWTIME) is in the new time
 * namespace, and its clocks must be that namespace's, not the parent's
 * offsets it inherited.
 */
static int wipe_refused_child(void)
{
	static const char offsets[] = "monotonic 86400 0\nboottime 86400 0\n";
	static const clockid_t shifted[] = { CLOCK_MONOTONIC,
		CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME };
	void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned int i;
	int fd, status, refused;
	long bad = 0;
	pid_t pid;

	/* As the library's constructor met it, before main(). */
	refused = madvise(probe, 4096, MADV_WIPEONFORK) != 0;
	printf("# madvise(MADV_WIPEONFORK) %s\n",
	       refused ? "refused" : "not refused");
	if (!refused)
		return 1;
	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    pvread_use_page(page.hdr, page.size))
		return 1;
	synthetic_tick(&page);
	for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		bad += bracketed(shifted[i], 100);
	if (unshare(CLONE_NEWTIME))
		return skip(errno == EPERM ? "unshare(CLONE_NEWTIME): not permitted (needs CAP_SYS_ADMIN)" :
			    "unshare(CLONE_NEWTIME): no time namespaces in this kernel");
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, offsets, sizeof(offsets) - 1) !=
		      (ssize_t)sizeof(offsets) - 1) {
		printf("# /proc/self/timens_offsets: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	synthetic_tick(&page);
	pid = fork();
	if (pid == 0) {
		long b = 0;

		for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
			b += bracketed(shifted[i], 100);
		_exit(b != 0);
	}
	waitpid(pid, &status, 0);
	return bad || !WIFEXITED(status) || WEXITSTATUS(status);
}

/*
 * A child of fork() in a namespace whose monotonic offset is its parent's
 * (0) and whose boottime offset is not: the child's check of the
 * monotonic offset passes, and cannot vouch for BOOTTIME's, which must be
 * the kernel's.
 */
static int boottime_only_namespace(void)
{
	static const char offsets[] = "monotonic 0 0\nboottime 3600 0\n";
	static const clockid_t shifted[] = { CLOCK_MONOTONIC,
		CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME };
	unsigned int i;
	int fd, status;
	long bad = 0;
	pid_t pid;

	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    pvread_use_page(page.hdr, page.size))
		return 1;
	synthetic_tick(&page);
	for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		bad += bracketed(shifted[i], 100);
	if (unshare(CLONE_NEWTIME))
		return skip(errno == EPERM ? "unshare(CLONE_NEWTIME): not permitted (needs CAP_SYS_ADMIN)" :
			    "unshare(CLONE_NEWTIME): no time namespaces in this kernel");
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, offsets, sizeof(offsets) - 1) !=
		      (ssize_t)sizeof(offsets) - 1) {
		printf("# /proc/self/timens_offsets: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	synthetic_tick(&page);
	pid = fork();
	if (pid == 0) {
		struct pvread_stats a, b;
		long bb = 0;

		pvread_get_stats_size(&a, sizeof(a));
		for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
			bb += bracketed(shifted[i], 100);
		pvread_get_stats_size(&b, sizeof(b));
		printf("# in the child: %llu fallbacks for \"timens\" in 300 reads\n",
		       (unsigned long long)(b.slow_by_reason[PVREAD_SLOW_TIMENS] -
					    a.slow_by_reason[PVREAD_SLOW_TIMENS]));
		_exit(bb != 0);
	}
	waitpid(pid, &status, 0);
	return bad || !WIFEXITED(status) || WEXITSTATUS(status);
}

/* The kernel's answers of @clock counted in @b since @a, for @why. */
static uint64_t slow_for(const struct pvread_stats *a,
			 const struct pvread_stats *b,
			 enum pvread_slow_reason why)
{
	return b->slow_by_reason[why] - a->slow_by_reason[why];
}

/*
 * In a forked child: one read of @clock (the check of the offsets, at the
 * first call), then @n bracketed; those outside, the kernel's answers
 * among the @n in *@slow, and those for "bound" in *@bound.
 */
static long child_reads(clockid_t clock, int n, uint64_t *slow,
			uint64_t *bound)
{
	struct pvread_stats a, b;
	long bad = bracketed(clock, 1);

	pvread_get_stats_size(&a, sizeof(a));
	bad += bracketed(clock, n);
	pvread_get_stats_size(&b, sizeof(b));
	*slow = b.slow - a.slow;
	*bound = slow_for(&a, &b, PVREAD_SLOW_BOUND);
	return bad;
}

/*
 * The synthetic line page, made and ticked: in the root time namespace,
 * whose clocks the module's page holds (synthetic.c reads the caller's).
 */
static int make_page(void)
{
	if (synthetic_init(&page, PVREAD_MODE_LINE))
		return 1;
	synthetic_tick(&page);
	return 0;
}

/* The page made, adopted and read, 100 times per clock. */
static int adopt_page(void)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_BOOTTIME };
	unsigned int i;
	long bad = 0;

	if (pvread_use_page(page.hdr, page.size))
		return 1;
	for (i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++)
		bad += bracketed(clocks[i], 100);
	return bad != 0;
}

static int take_page(void)
{
	return make_page() || adopt_page();
}

/*
 * A child of fork() in its parent's time namespace: one check of its
 * offsets at its first call (the vDSO's coarse clocks for the monotonic
 * one, brackets of clock calls for the boottime one), then CLOCK_BOOTTIME
 * from the page like the others.
 */
static int child_boottime_from_page(void)
{
	uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status;
	pid_t pid;

	if (shared == MAP_FAILED || take_page())
		return 1;
	pid = fork();
	if (pid == 0)
		_exit(child_reads(CLOCK_BOOTTIME, 1000, &shared[0],
				  &shared[1]) != 0);
	waitpid(pid, &status, 0);
	printf("# the child: %llu of 1000 BOOTTIME readings after its check from the kernel\n",
	       (unsigned long long)shared[0]);
	return !WIFEXITED(status) || WEXITSTATUS(status) || shared[0];
}

/*
 * A kernel without time namespaces (no /proc/self/timens_offsets): a
 * child knows its offsets at once, CLOCK_BOOTTIME's too, within the whole
 * tolerance.
 */
static int child_without_namespaces(void)
{
	uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status;
	pid_t pid;

	hook->no_timens = 1;
	if (shared == MAP_FAILED || take_page())
		return 1;
	pid = fork();
	if (pid == 0)
		_exit(child_reads(CLOCK_BOOTTIME, 1000, &shared[0],
				  &shared[1]) != 0);
	waitpid(pid, &status, 0);
	printf("# no time namespaces: the child's BOOTTIME %llu of 1000 from the kernel (%llu for \"bound\")\n",
	       (unsigned long long)shared[0], (unsigned long long)shared[1]);
	return !WIFEXITED(status) || WEXITSTATUS(status) || shared[0];
}

/*
 * The bracket's width is CLOCK_BOOTTIME's to pay for: with the page's
 * bound 10 ns under the tolerance (1010 ns, more where clock calls are
 * system calls), the parent reads BOOTTIME from the page, the child (whose
 * offset is known to within a bracket of tens of ns, or hundreds) falls
 * back for "bound", and reads MONOTONIC, whose offset it knows exactly,
 * from the page.
 */
static int child_boottime_tolerance(void)
{
	uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct pvread_stats a, b;
	uint64_t parent_slow;
	int status;
	long bad;
	pid_t pid;

	struct timespec t1, tb, t2;
	int64_t w, narrowest = INT64_MAX;
	char tolerance[32];
	int i;

	/*
	 * The check's brackets are as narrow as the kernel's clock calls:
	 * tens of ns through the vDSO, hundreds as system calls (a
	 * clocksource the vDSO cannot read, xen's).  A tolerance an eighth of
	 * which holds twice the narrowest of these, at least 1010 ns, and
	 * the page's bound 10 ns under it.
	 */
	for (i = 0; i < 64; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		clock_gettime(CLOCK_BOOTTIME, &tb);
		clock_gettime(CLOCK_MONOTONIC, &t2);
		w = ns_of(&t2) - ns_of(&t1);
		if (w < narrowest)
			narrowest = w;
	}
	if (narrowest < 16)
		narrowest = 16;
	if (narrowest > 1010 / 16) {
		printf("# clock calls %lld ns apart: a tolerance of %lld ns\n",
		       (long long)narrowest, (long long)narrowest * 16);
	}
	snprintf(tolerance, sizeof(tolerance), "%lld",
		 (long long)(narrowest > 1010 / 16 ? narrowest * 16 : 1010));
	setenv("PVREAD_MAX_ERROR_NS", tolerance, 1);
	if (shared == MAP_FAILED || make_page())
		return 1;
	synthetic_write_begin(&page);
	__atomic_store_n(&page.hdr->error_bound_ns,
			 strtoull(tolerance, NULL, 10) - 10, __ATOMIC_RELAXED);
	synthetic_write_end(&page);
	if (adopt_page())
		return 1;
	pvread_get_stats_size(&a, sizeof(a));
	bad = bracketed(CLOCK_BOOTTIME, 1000);
	pvread_get_stats_size(&b, sizeof(b));
	parent_slow = b.slow - a.slow;
	pid = fork();
	if (pid == 0) {
		long bb = child_reads(CLOCK_BOOTTIME, 1000, &shared[0],
				      &shared[1]);

		bb += child_reads(CLOCK_MONOTONIC, 1000, &shared[2],
				  &shared[3]);
		_exit(bb != 0);
	}
	waitpid(pid, &status, 0);
	printf("# the parent: %llu of 1000 BOOTTIME readings from the kernel; the child: BOOTTIME %llu (%llu for \"bound\"), MONOTONIC %llu\n",
	       (unsigned long long)parent_slow, (unsigned long long)shared[0],
	       (unsigned long long)shared[1], (unsigned long long)shared[2]);
	return bad || !WIFEXITED(status) || WEXITSTATUS(status) ||
	       parent_slow || shared[1] != 1000 || shared[2];
}

/*
 * The module holds its MONOTONIC_COARSE ahead of the kernel's after an NTP
 * frequency change (before Linux 6.15): a child's check of its monotonic
 * offset, which compares the page's fine bases, still agrees, and reads no
 * /proc (a system call a sandbox may forbid).
 */
static int child_check_while_coarse_held(void)
{
	uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct pvread_clock_base *b;
	int status, opens;
	pid_t pid;

	if (shared == MAP_FAILED || take_page())
		return 1;
	b = &page.hdr->tk.base[CLOCK_MONOTONIC_COARSE];
	synthetic_write_begin(&page);
	__atomic_store_n(&b->snsec, b->snsec + 1000, __ATOMIC_RELAXED);
	synthetic_write_end(&page);
	opens = hook->proc_opens;
	pid = fork();
	if (pid == 0)
		_exit(child_reads(CLOCK_MONOTONIC, 1000, &shared[0],
				  &shared[1]) != 0 ||
		      child_reads(CLOCK_BOOTTIME, 1000, &shared[2],
				  &shared[3]) != 0);
	waitpid(pid, &status, 0);
	opens = hook->proc_opens - opens;
	printf("# MONOTONIC_COARSE held 1 us ahead in the page; the child: %d opens in /proc, %llu MONOTONIC and %llu BOOTTIME of 1000 each from the kernel\n",
	       opens, (unsigned long long)shared[0],
	       (unsigned long long)shared[2]);
	return !WIFEXITED(status) || WEXITSTATUS(status) || opens ||
	       shared[0] || shared[2];
}

/*
 * Run @fn in a child made in a new time namespace with @offsets: its
 * exit status, SKIPPED where this host has no time namespaces for us.
 */
static int in_namespace(const char *offsets, int (*fn)(void))
{
	int fd, status;
	pid_t pid;

	if (unshare(CLONE_NEWTIME))
		return skip(errno == EPERM ? "unshare(CLONE_NEWTIME): not permitted (needs CAP_SYS_ADMIN)" :
			    "unshare(CLONE_NEWTIME): no time namespaces in this kernel");
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, offsets, strlen(offsets)) !=
		      (ssize_t)strlen(offsets)) {
		printf("# /proc/self/timens_offsets: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int rc = fn();

		fflush(stdout);
		_exit(rc);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* In a namespace that shifts both clocks: its child's BOOTTIME fast. */
static int shifted_parent_and_child(void)
{
	uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status;
	pid_t pid;

	if (shared == MAP_FAILED || adopt_page())
		return 1;
	pid = fork();
	if (pid == 0)
		_exit(child_reads(CLOCK_BOOTTIME, 1000, &shared[0],
				  &shared[1]) != 0 ||
		      child_reads(CLOCK_MONOTONIC, 1000, &shared[2],
				  &shared[3]) != 0);
	waitpid(pid, &status, 0);
	printf("# offsets monotonic +500 s, boottime +7200 s; the child: %llu BOOTTIME and %llu MONOTONIC of 1000 each from the kernel\n",
	       (unsigned long long)shared[0], (unsigned long long)shared[2]);
	return !WIFEXITED(status) || WEXITSTATUS(status) || shared[0] ||
	       shared[2];
}

static int child_in_shifted_namespace(void)
{
	return make_page() ||
	       in_namespace("monotonic 500 0\nboottime 7200 0\n",
			    shifted_parent_and_child);
}

/*
 * Mapped in a namespace that shifts BOOTTIME alone, then unshared into
 * one set to children_offsets: a child inherits a boottime offset of 3600 s
 * (and more) that is not its own, and a monotonic one (0) that is.
 */
static const char *children_offsets;

static int unshared_after_mapping(void)
{
	const char *zero = children_offsets;
	uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int fd, status;
	pid_t pid;

	if (shared == MAP_FAILED || adopt_page())
		return 1;
	/* A new namespace starts with its parent's offsets: set them. */
	if (unshare(CLONE_NEWTIME)) {
		printf("# unshare(CLONE_NEWTIME) again: %s\n", strerror(errno));
		return 1;
	}
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, zero, strlen(zero)) != (ssize_t)strlen(zero)) {
		printf("# /proc/self/timens_offsets: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	pid = fork();
	if (pid == 0)
		_exit(child_reads(CLOCK_BOOTTIME, 1000, &shared[0],
				  &shared[1]) != 0);
	waitpid(pid, &status, 0);
	printf("# the child: %llu of 1000 BOOTTIME readings from the kernel (all: the inherited offset is not its own)\n",
	       (unsigned long long)shared[0]);
	return !WIFEXITED(status) || WEXITSTATUS(status) || shared[0] != 1000;
}

static int child_inherits_wrong_boottime_offset(void)
{
	children_offsets = "monotonic 0 0\nboottime 0 0\n";
	return make_page() ||
	       in_namespace("monotonic 0 0\nboottime 3600 0\n",
			    unshared_after_mapping);
}

/* The same, with boottime offsets 500 us either side of the inherited. */
static int child_inherits_nearly_its_boottime_offset(void)
{
	if (make_page())
		return 1;
	children_offsets = "monotonic 0 0\nboottime 3600 500000\n";
	if (in_namespace("monotonic 0 0\nboottime 3600 0\n",
			 unshared_after_mapping))
		return 1;
	children_offsets = "monotonic 0 0\nboottime 3599 999500000\n";
	return in_namespace("monotonic 0 0\nboottime 3600 0\n",
			    unshared_after_mapping);
}

/* madvise() fails with EPERM, every other call is allowed. */
static int refuse_madvise(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	       raw_syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, (long)&prog,
			   0, 0, 0);
}

/* This program again, under the filter, for wipe_refused_child(). */
static int wipe_refused(void)
{
	char *argv[] = { self_argv[0], "--wipe-refused", NULL };
	int status;
	pid_t pid = fork();

	/* The exec'd program cannot say why it skips: ask here. */
	if (pid == 0)
		_exit(unshare(CLONE_NEWTIME) ? errno : 0);
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return skip(WEXITSTATUS(status) == EPERM ? "unshare(CLONE_NEWTIME): not permitted (needs CAP_SYS_ADMIN)" :
			    "unshare(CLONE_NEWTIME): no time namespaces in this kernel");

	if (refuse_madvise()) {
		printf("# seccomp: %s\n", strerror(errno));
		return 1;
	}
	fflush(stdout);
	execv("/proc/self/exe", argv);
	printf("# execv: %s\n", strerror(errno));
	return 1;
}

/* The synthetic page in a file, which the hook opens for the device. */
static int page_file(void)
{
	int fd;

	if (synthetic_init(&page, PVREAD_MODE_LINE))
		return -1;
	synthetic_tick(&page);
	snprintf(hook->file, sizeof(hook->file), "/tmp/pvread-page.XXXXXX");
	fd = mkstemp(hook->file);
	if (fd < 0)
		return -1;
	if (write(fd, page.hdr, page.size) != (ssize_t)page.size) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/*
 * A transient error at the first call (EMFILE): the kernel answers, and
 * no call tries again at once; a call some time later does, and maps the
 * device, now there.
 */
static int transient_error(void)
{
	struct pvread_info info;
	struct timespec ts;
	int64_t t0;
	int i, first, later;

	if (page_file())
		return 1;
	hook->device = DEVICE_FAILS;
	hook->error = EMFILE;
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	for (i = 0; i < 1000; i++)
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	first = hook->opens;
	hook->device = DEVICE_FILE;
	t0 = sys_ns(CLOCK_MONOTONIC);
	while (hook->opens == first && sys_ns(CLOCK_MONOTONIC) - t0 < 5 * NSEC_PER_SEC)
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	later = hook->opens;
	pvread_get_info(&info);
	printf("# EMFILE at the first call: %d opens in 1001 reads; then %d, %lld ms later; mapped %d\n",
	       first, later - first,
	       (long long)(sys_ns(CLOCK_MONOTONIC) - t0) / 1000000,
	       info.mapped);
	unlink(hook->file);
	return first != 1 || later != 2 || !info.mapped;
}

/* ENOENT (no module): final, no call tries again. */
static int definite_absence(void)
{
	struct timespec ts;
	int64_t t0;

	hook->device = DEVICE_FAILS;
	hook->error = ENOENT;
	t0 = sys_ns(CLOCK_MONOTONIC);
	while (sys_ns(CLOCK_MONOTONIC) - t0 < 2 * NSEC_PER_SEC)
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	printf("# ENOENT at the first call: %d opens in 2 s of reads\n",
	       hook->opens);
	return hook->opens != 1;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void *complete_record(void *arg)
{
	struct timespec pause = { 0, 50 * 1000 * 1000 };
	struct pvread_record *r = arg;

	nanosleep(&pause, NULL);
	__atomic_fetch_add(&r->pvclock.version, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * The header's update runs out of time while record 0 happens to be in an
 * update of its own: only the header is remembered stuck.  A sample of
 * record 0 then waits for its update to complete (50 ms later), instead
 * of giving up at once.
 */
static int record_odd_at_header_stuck(void)
{
	struct pvread_record *r;
	struct pvread_sample smp;
	struct timespec ts;
	pthread_t t;
	int ret, err;

	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    pvread_use_page(page.hdr, page.size))
		return 1;
	synthetic_tick(&page);
	pin(0);
	r = synthetic_record(&page, 0);
	synthetic_write_begin(&page);	/* and no end: the header is stuck */
	r->pvclock.version++;		/* record 0 in an update */
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* waits 1-2 s */
	pthread_create(&t, NULL, complete_record, r);
	errno = 0;
	ret = pvread_sample_pvclock(&smp);
	err = errno;
	pthread_join(t, NULL);
	printf("# record 0 odd when the header's wait ran out, complete 50 ms later: pvread_sample_pvclock %d (%s)\n",
	       ret, ret ? strerror(err) : "sampled");
	synthetic_write_end(&page);
	return ret != 0;
}

/*
 * With the shim preloaded: a copy of libpvread.so dlopen()ed RTLD_LOCAL,
 * and this program's own libpvread.a, use the shim's state, which chose
 * its page at load: pvread_use_page() through either is EBUSY.
 */
static int shim_and_copies(void)
{
	int (*use_page)(const void *, size_t);
	struct timespec ts;
	int r1, e1, r2, e2;
	void *h;

	if (!dlsym(RTLD_DEFAULT, "pvread_time"))
		return skip("libpvread-preload.so is not preloaded");
	clock_gettime(CLOCK_MONOTONIC, &ts);	/* the shim's, as ever */
	if (synthetic_init(&page, PVREAD_MODE_LINE))
		return 1;
	h = dlopen(libpvread_so, RTLD_NOW | RTLD_LOCAL);
	*(void **)&use_page = h ? dlsym(h, "pvread_use_page") : NULL;
	if (!use_page)
		return 1;
	errno = 0;
	r1 = use_page(page.hdr, page.size);
	e1 = errno;
	errno = 0;
	r2 = pvread_use_page(page.hdr, page.size);
	e2 = errno;
	printf("# pvread_use_page: through libpvread.so %d (%s), through the program's libpvread.a %d (%s)\n",
	       r1, r1 ? strerrorname_np(e1) : "taken", r2,
	       r2 ? strerrorname_np(e2) : "taken");
	return r1 != -1 || e1 != EBUSY || r2 != -1 || e2 != EBUSY;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	self_argv = argv;
	skip_reason = mmap(NULL, SKIP_REASON_LEN + sizeof(*hook),
			   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
	if (skip_reason == MAP_FAILED)
		return 1;
	if (argc == 2 && !strcmp(argv[1], "--wipe-refused")) {
		int rc = wipe_refused_child();

		if (rc == SKIPPED)
			printf("# SKIP %s\n", skip_reason);
		return rc;
	}
	hook = (struct hook *)(skip_reason + SKIP_REASON_LEN);
	if (argc == 3 && !strcmp(argv[1], "--shim")) {
		libpvread_so = argv[2];
		tap_plan(1);
		scenario("with the shim preloaded, a dlopen()ed libpvread.so and the program's libpvread.a share its state",
			 shim_and_copies);
		return tap_exit();
	}
	if (argc != 2) {
		fprintf(stderr, "usage: process [--shim] LIBPVREAD.SO\n");
		return 2;
	}
	libpvread_so = argv[1];
	tap_plan(12);
	scenario("a child forked in its parent's time namespace: CLOCK_BOOTTIME from the page after one check",
		 child_boottime_from_page);
	scenario("a kernel without time namespaces: a child's CLOCK_BOOTTIME from the page, within the whole tolerance",
		 child_without_namespaces);
	scenario("the check's bracket is CLOCK_BOOTTIME's to pay for: bound + width above the tolerance, the child's BOOTTIME falls back, its MONOTONIC does not",
		 child_boottime_tolerance);
	scenario("the page's MONOTONIC_COARSE held ahead (the module's hold): a child's check agrees, opens nothing in /proc",
		 child_check_while_coarse_held);
	scenario("a child in its parent's namespace that shifts MONOTONIC and BOOTTIME apart: both from the page after the check",
		 child_in_shifted_namespace);
	scenario("a child that inherits a boottime offset not its own (its parent mapped, then unshared): BOOTTIME the kernel's",
		 child_inherits_wrong_boottime_offset);
	scenario("a child that inherits a boottime offset 500 us either side of its own: BOOTTIME the kernel's",
		 child_inherits_nearly_its_boottime_offset);
	scenario("MADV_WIPEONFORK refused: a child forked after unshare(CLONE_NEWTIME) reads its own namespace's clocks",
		 wipe_refused);
	scenario("a child in a namespace that shifts BOOTTIME alone: its monotonic offset checked, BOOTTIME the kernel's",
		 boottime_only_namespace);
	scenario("EMFILE at the first call: the kernel answers, a later call maps (not at once, not never)",
		 transient_error);
	scenario("ENOENT at the first call: final, no second open", definite_absence);
	scenario("a record odd when only the header's wait ran out is not remembered stuck: a sample waits for it",
		 record_odd_at_header_stuck);
	return tap_exit();
}
