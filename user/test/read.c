// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read path over a synthetic page: every scenario runs in a child
 * process of its own (the library adopts one page per process), with a page
 * the test rewrites the way Xen and the module would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <cpuid.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

#include "pvread.h"
#include "arith.h"
#include "synthetic.h"
#include "tap.h"

#define NSEC_PER_SEC 1000000000LL
/* How far the synthetic page may drift from the host between ticks. */
#define SLACK_NS 200000LL

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

/* A scenario's exit status when this host cannot run it, and why. */
#define SKIPPED 3
static char *skip_reason;	/* shared with the children */
#define SKIP_REASON_LEN 160

static int skip(const char *why)
{
	snprintf(skip_reason, SKIP_REASON_LEN, "%s", why);
	return SKIPPED;
}

/* Run @fn in a child; its exit status 0 is a pass, SKIPPED a skip. */
static void scenario(const char *what, int (*fn)(void))
{
	pid_t pid;
	int status;

	fflush(stdout);
	skip_reason[0] = '\0';
	pid = fork();
	if (pid == 0) {
		int rc = fn();

		fflush(stdout);
		_exit(rc);
	}
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == SKIPPED &&
	    skip_reason[0]) {
		printf("ok %d - %s # SKIP %s\n", ++tap_count, what, skip_reason);
		return;
	}
	tap_result(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", what);
}

static struct synthetic page;

static int adopt(uint32_t mode, long tick_us)
{
	if (synthetic_init(&page, mode) || pvread_use_page(page.hdr, page.size)) {
		printf("# synthetic page: %s\n", strerror(errno));
		return -1;
	}
	if (tick_us && synthetic_start(&page, tick_us))
		return -1;
	return 0;
}

enum expect { ANY, FAST, SLOW };
#define STRICT true
#define MIXED_OK false

/*
 * @n reads of @clock, each bracketed by the kernel's clock: within SLACK_NS
 * of the bracket, never behind the previous read.  Returns failures.
 *
 * A synthetic stable page is steered towards the host's clock but is not
 * it, so a fall-back read can land a little behind a fast one; on a real
 * stable page both are the kernel's reading of one line.  Such steps are
 * reported, and count as failures only when @strict (per-CPU pages, where
 * the library's floor must hide every step).
 */
static long bracketed(clockid_t clock, long n, enum expect want, bool strict)
{
	struct pvread_stats st0, st1, a, b;
	int64_t before, after, v, prev = 0, worst = 0;
	long i, bad = 0, back = 0, back_mixed = 0;
	bool fast, prev_fast = false;
	struct timespec ts;

	pvread_get_stats(&st0);
	for (i = 0; i < n; i++) {
		before = sys_ns(clock);
		pvread_get_stats(&a);
		pvread_clock_gettime(clock, &ts);
		pvread_get_stats(&b);
		after = sys_ns(clock);
		v = ns_of(&ts);
		fast = b.fast != a.fast;
		if (v < before - SLACK_NS || v > after + SLACK_NS)
			bad++;
		if (v < before - worst)
			worst = before - v;
		if (v > after + worst)
			worst = v - after;
		if (v < prev && i) {
			if (fast == prev_fast)
				back++;
			else
				back_mixed++;
		}
		prev = v;
		prev_fast = fast;
	}
	pvread_get_stats(&st1);
	printf("# clock %d: %ld reads, %llu fast, %llu slow, %ld outside, %ld back, %ld back between fast and slow, worst %lld ns\n",
	       (int)clock, n, (unsigned long long)(st1.fast - st0.fast),
	       (unsigned long long)(st1.slow - st0.slow), bad, back,
	       back_mixed, (long long)worst);
	/*
	 * Fast: all but the reads that met an update in progress too often
	 * (they ask the kernel, correctly), and the one that enters per-CPU
	 * mode through the kernel.
	 */
	if (want == FAST && st1.slow - st0.slow > (uint64_t)n / 1000 + 1)
		bad++;
	if (want == SLOW && st1.slow - st0.slow != (uint64_t)n)
		bad++;
	if (clock != CLOCK_REALTIME)
		bad += back + (strict ? back_mixed : 0);
	return bad;
}

/* This thread's fallbacks for @reason so far. */
static uint64_t slow_for(enum pvread_slow_reason reason)
{
	struct pvread_stats st;

	pvread_get_stats(&st);
	return st.slow_by_reason[reason];
}

/* Did the last @n fallbacks, from @before, all give @reason? */
static long reason_was(enum pvread_slow_reason reason, uint64_t before,
		       uint64_t n)
{
	uint64_t got = slow_for(reason) - before;

	printf("# %llu of %llu fallbacks for \"%s\"\n", (unsigned long long)got,
	       (unsigned long long)n, pvread_slow_reason_name(reason));
	return got != n;
}

static int stable_all_clocks(void)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
		CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW };
	long bad = 0;
	unsigned int i;

	if (adopt(PVREAD_MODE_STABLE, 1000))
		return 1;
	for (i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++)
		bad += bracketed(clocks[i], 200000, FAST, MIXED_OK);
	return bad != 0;
}

static bool cpu_has_rdtscp(void)
{
	unsigned int eax, ebx, ecx, edx;

	return __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
	       (edx & (1U << 27));
}

/*
 * Can a per-CPU page be read fast here?  rdtscp must be offered and name
 * the CPU (the module programs TSC_AUX in a guest; a host's kernel does the
 * same when it uses rdtscp for getcpu).
 */
static bool tsc_aux_names_cpu(void)
{
	unsigned int aux;

	if (!cpu_has_rdtscp())
		return false;
	__rdtscp(&aux);
	return (int)(aux & PVREAD_TSC_AUX_CPU_MASK) == sched_getcpu();
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * Per-CPU: fast where rdtscp names the CPU; where the CPU does not offer
 * rdtscp at all, every read goes to libc and says why.
 */
static int percpu_mode(void)
{
	uint64_t before;
	long bad;

	if (!cpu_has_rdtscp()) {
		if (adopt(PVREAD_MODE_PERCPU, 1000))
			return 1;
		before = slow_for(PVREAD_SLOW_RDTSCP);
		bad = bracketed(CLOCK_MONOTONIC, 20000, SLOW, STRICT);
		bad += reason_was(PVREAD_SLOW_RDTSCP, before, 20000);
		return bad != 0;
	}
	if (!tsc_aux_names_cpu())
		return skip("this host's TSC_AUX does not name the CPU");
	if (adopt(PVREAD_MODE_PERCPU, 1000))
		return 1;
	return bracketed(CLOCK_MONOTONIC, 200000, FAST, STRICT) != 0;
}

/* Xen rewrites the record all the time, between two equal-valued lines. */
static atomic_bool stop_writer;

static void *flip_record(void *arg)
{
	struct pvread_pvclock *p = &synthetic_record(&page, 0)->pvclock;
	const uint64_t d = 1ULL << 36;	/* a torn read is off by ~half a minute */
	uint64_t ts0 = p->tsc_timestamp, st0 = p->system_time;
	uint64_t dns = pvread_pvclock_ns(ts0, ts0 - d, 0, p->tsc_to_system_mul,
					 p->tsc_shift);
	unsigned long n = 0;

	(void)arg;
	while (!atomic_load_explicit(&stop_writer, memory_order_relaxed)) {
		__atomic_store_n(&p->version, p->version + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		if (n++ & 1) {
			__atomic_store_n(&p->tsc_timestamp, ts0, __ATOMIC_RELAXED);
			__atomic_store_n(&p->system_time, st0, __ATOMIC_RELAXED);
		} else {
			__atomic_store_n(&p->tsc_timestamp, ts0 - d, __ATOMIC_RELAXED);
			__atomic_store_n(&p->system_time, st0 - dns, __ATOMIC_RELAXED);
		}
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&p->version, p->version + 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int record_rewritten_mid_read(void)
{
	struct pvread_stats st;
	pthread_t writer;
	long bad;

	bool percpu = tsc_aux_names_cpu();

	/* Per-CPU where it can be, so the floor must hide every step. */
	if (adopt(percpu ? PVREAD_MODE_PERCPU : PVREAD_MODE_STABLE, 1000))
		return 1;
	pin(0);		/* on the CPU whose record is being rewritten */
	pthread_create(&writer, NULL, flip_record, NULL);
	bad = bracketed(CLOCK_MONOTONIC, 300000, ANY, percpu);
	atomic_store(&stop_writer, true);
	pthread_join(writer, NULL);
	pvread_get_stats(&st);
	printf("# %llu retries, %llu fast, %llu slow\n",
	       (unsigned long long)st.retries, (unsigned long long)st.fast,
	       (unsigned long long)st.slow);
	/* Some reads give up (slow) after retries; none may be torn. */
	return bad || !st.retries;
}

static int header_rewritten_mid_read(void)
{
	struct pvread_stats st;
	long bad;

	bool percpu = tsc_aux_names_cpu();

	/* The timekeeper updates as fast as it can. */
	if (adopt(percpu ? PVREAD_MODE_PERCPU : PVREAD_MODE_STABLE, 1))
		return 1;
	bad = bracketed(CLOCK_MONOTONIC, 300000, ANY, percpu);
	pvread_get_stats(&st);
	printf("# %llu retries, %llu fast, %llu slow, %llu updates\n",
	       (unsigned long long)st.retries, (unsigned long long)st.fast,
	       (unsigned long long)st.slow,
	       (unsigned long long)page.hdr->updates);
	return bad || !st.fast || !st.retries;
}

static void set_mode(uint32_t mode)
{
	synthetic_write_begin(&page);
	page.hdr->mode = mode;
	synthetic_write_end(&page);
}

static int clocksource_flip(void)
{
	uint64_t before;
	long bad = 0;

	if (adopt(PVREAD_MODE_STABLE, 1000))
		return 1;
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST, MIXED_OK);
	set_mode(PVREAD_MODE_NONE);	/* clocksource no longer "xen" */
	before = slow_for(PVREAD_SLOW_MODE);
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW, MIXED_OK);
	bad += bracketed(CLOCK_REALTIME, 10000, SLOW, MIXED_OK);
	bad += reason_was(PVREAD_SLOW_MODE, before, 20000);
	set_mode(PVREAD_MODE_STABLE);
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST, MIXED_OK);
	return bad != 0;
}

static int bound_above_tolerance(void)
{
	uint64_t before;
	long bad = 0;

	setenv("PVREAD_MAX_ERROR_NS", "500", 1);
	if (adopt(PVREAD_MODE_PERCPU, 1000))
		return 1;
	/* The page promises 1000 ns: more than the 500 ns asked for. */
	before = slow_for(PVREAD_SLOW_BOUND);
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW, STRICT);
	bad += reason_was(PVREAD_SLOW_BOUND, before, 10000);
	if (!tsc_aux_names_cpu()) {
		printf("# within the tolerance: not tried, rdtscp does not name the CPU here\n");
		return bad != 0;
	}
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 400;
	synthetic_write_end(&page);
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST, STRICT);
	return bad != 0;
}

static int unregistered_record(void)
{
	uint64_t before;
	unsigned int i;
	long bad;

	/* Per-CPU where it can be; stable mode's one record otherwise. */
	if (adopt(tsc_aux_names_cpu() ? PVREAD_MODE_PERCPU :
		  PVREAD_MODE_STABLE, 1000))
		return 1;
	for (i = 0; i < page.hdr->nr_records; i++)
		synthetic_record(&page, i)->state = 0;
	before = slow_for(PVREAD_SLOW_RECORD);
	bad = bracketed(CLOCK_MONOTONIC, 10000, SLOW, STRICT);
	bad += reason_was(PVREAD_SLOW_RECORD, before, 10000);
	return bad != 0;
}

/*
 * The page's MONOTONIC_COARSE is held against the kernel's stepping back;
 * a fallback must not return less than the page did.
 */
static int coarse_fallback_not_behind_page(void)
{
	struct pvread_clock_base *b;
	struct timespec fast, slow;
	int64_t kernel;

	if (adopt(PVREAD_MODE_STABLE, 0))	/* no ticker: the test writes */
		return 1;
	b = &page.hdr->tk.base[CLOCK_MONOTONIC_COARSE];
	pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &fast);
	kernel = sys_ns(CLOCK_MONOTONIC_COARSE);
	synthetic_write_begin(&page);
	b->sec = (kernel + 5000000) / NSEC_PER_SEC;	/* page 5 ms ahead */
	b->snsec = (kernel + 5000000) % NSEC_PER_SEC;
	synthetic_write_end(&page);
	pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &fast);
	set_mode(PVREAD_MODE_NONE);
	pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &slow);
	printf("# fast %lld, then via libc %lld (kernel %lld)\n",
	       (long long)ns_of(&fast), (long long)ns_of(&slow),
	       (long long)sys_ns(CLOCK_MONOTONIC_COARSE));
	return ns_of(&slow) < ns_of(&fast) ||
	       slow_for(PVREAD_SLOW_MODE) != 1;
}

/*
 * The same when the page cannot be read at all: its writer stalled in the
 * middle of an update, so the fallback has nothing to compare with but
 * what this process returned before.
 */
static int coarse_fallback_writer_stalled(void)
{
	struct timespec fast, slow;
	struct pvread_clock_base *b;
	uint64_t before;
	int64_t kernel;

	if (adopt(PVREAD_MODE_STABLE, 0))
		return 1;
	b = &page.hdr->tk.base[CLOCK_MONOTONIC_COARSE];
	kernel = sys_ns(CLOCK_MONOTONIC_COARSE);
	synthetic_write_begin(&page);
	/* ahead by more than the library waits for a writer (1-2 s) */
	b->sec = (kernel + 60 * NSEC_PER_SEC) / NSEC_PER_SEC;
	b->snsec = (kernel + 60 * NSEC_PER_SEC) % NSEC_PER_SEC;
	synthetic_write_end(&page);
	pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &fast);
	before = slow_for(PVREAD_SLOW_BUSY);
	synthetic_write_begin(&page);	/* and no end while we read */
	pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &slow);
	synthetic_write_end(&page);
	printf("# fast %lld, then via libc with the writer stalled %lld (kernel %lld)\n",
	       (long long)ns_of(&fast), (long long)ns_of(&slow),
	       (long long)sys_ns(CLOCK_MONOTONIC_COARSE));
	return ns_of(&slow) < ns_of(&fast) ||
	       slow_for(PVREAD_SLOW_BUSY) != before + 1;
}

static int use_page_errors(void)
{
	struct timespec ts;
	char junk[8192] = { 0 };

	if (pvread_use_page(junk, sizeof(junk)) != -1 || errno != EINVAL)
		return 1;
	if (synthetic_init(&page, PVREAD_MODE_STABLE))
		return 1;
	if (pvread_use_page(page.hdr, 100) != -1 || errno != EINVAL)
		return 1;
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* chooses /dev/pvread */
	return pvread_use_page(page.hdr, page.size) != -1 || errno != EBUSY;
}

/* Clocks the page does not mirror, and bad ids, answer exactly like libc. */
static int passthrough(void)
{
	struct timespec a, b;
	int ra, rb, ea, eb;

	if (adopt(PVREAD_MODE_STABLE, 1000))
		return 1;
	errno = 0;
	ra = clock_gettime(12345, &a);
	ea = errno;
	errno = 0;
	rb = pvread_clock_gettime(12345, &b);
	eb = errno;
	printf("# bad clock id: libc %d/%s, pvread %d/%s\n", ra, strerror(ea),
	       rb, strerror(eb));
	if (ra != rb || ea != eb)
		return 1;
	errno = 0;
	ra = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	rb = pvread_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	return ra || rb || ns_of(&b) < ns_of(&a);
}

/* The library keeps working in a child forked after it chose its page. */
static int after_fork(void)
{
	pid_t pid;
	int status;

	if (adopt(PVREAD_MODE_STABLE, 1000) ||
	    bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK))
		return 1;
	pid = fork();
	if (pid == 0) {
		/* The ticker thread is gone here: tick by hand. */
		synthetic_tick(&page);
		_exit(bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK) != 0);
	}
	waitpid(pid, &status, 0);
	return !WIFEXITED(status) || WEXITSTATUS(status);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_plan(12);
	skip_reason = mmap(NULL, SKIP_REASON_LEN, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (skip_reason == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	printf("# rdtscp: %s\n", !cpu_has_rdtscp() ? "not offered by this CPU" :
	       tsc_aux_names_cpu() ? "names the CPU" :
	       "offered, TSC_AUX does not name the CPU");
	scenario("stable page: every clock fast and within the syscalls", stable_all_clocks);
	scenario("per-CPU page: fast, or libc where the CPU has no rdtscp", percpu_mode);
	scenario("record rewritten mid-read: retried, never torn", record_rewritten_mid_read);
	scenario("header rewritten mid-read: retried, never torn", header_rewritten_mid_read);
	scenario("clocksource flip: falls back, then fast again", clocksource_flip);
	scenario("error bound above PVREAD_MAX_ERROR_NS: falls back", bound_above_tolerance);
	scenario("unregistered record: falls back", unregistered_record);
	scenario("MONOTONIC_COARSE via libc never behind the page", coarse_fallback_not_behind_page);
	scenario("MONOTONIC_COARSE via libc, writer stalled: never behind", coarse_fallback_writer_stalled);
	scenario("pvread_use_page: EINVAL, EBUSY", use_page_errors);
	scenario("other clocks and bad ids: exactly libc's answer", passthrough);
	scenario("correct in a child after fork()", after_fork);
	return tap_exit();
}
