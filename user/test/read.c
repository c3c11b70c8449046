// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The read path over a synthetic page: every scenario runs in a child
 * process of its own (the library adopts one page per process), with a page
 * the test rewrites the way Xen and the module would.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <asm/prctl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

#include "pvread.h"
#include "arith.h"
#include "synthetic.h"
#include "tap.h"
#include "tsc-trap.h"

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

/* A thread held by a hook below says so on @held and waits for @go_on. */
static sem_t held, go_on;

/* Wait for the held thread, 10 s at most: false if it never got there. */
static bool wait_held(const char *who)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	if (!sem_timedwait(&held, &until))
		return true;
	printf("# %s never reached the hook\n", who);
	return false;
}

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

/*
 * @n reads of @clock, each bracketed by the kernel's clock: within SLACK_NS
 * of the bracket, never behind the previous read (but REALTIME, which the
 * kernel steps), also between a line reading and a fallback: the floors
 * and the hold at the line must hide every such step.  Returns failures.
 */
static long bracketed(clockid_t clock, long n, enum expect want)
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
		fast = b.slow == a.slow;	/* fast reads are not counted */
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
	       (int)clock, n, (unsigned long long)(n - (st1.slow - st0.slow)),
	       (unsigned long long)(st1.slow - st0.slow), bad, back,
	       back_mixed, (long long)worst);
	/*
	 * Fast: all but the reads that met an update in progress too often
	 * (they ask the kernel, correctly).
	 */
	if (want == FAST && st1.slow - st0.slow > (uint64_t)n / 1000 + 1)
		bad++;
	if (want == SLOW && st1.slow - st0.slow != (uint64_t)n)
		bad++;
	if (clock != CLOCK_REALTIME)
		bad += back + back_mixed;
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

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * The ticker is the page's one writer while it runs; a test that writes
 * the page itself stops it first, or two writers would tear the seqcount.
 */
static long paused_period_us;

static void pause_ticker(void)
{
	paused_period_us = page.ticking ? page.period_us : 0;
	synthetic_stop(&page);
}

static void resume_ticker(void)
{
	if (paused_period_us)
		synthetic_start(&page, paused_period_us);
}

/* header.mode = @mode, nothing else: the line stays as it is. */
static void set_mode(uint32_t mode)
{
	pause_ticker();
	synthetic_write_begin(&page);
	page.hdr->mode = mode;
	synthetic_write_end(&page);
	resume_ticker();
}

static const clockid_t all_clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
	CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC_COARSE,
	CLOCK_REALTIME_COARSE };
#define NR_ALL_CLOCKS (sizeof(all_clocks) / sizeof(all_clocks[0]))

/*
 * A page made in mode none (no line yet, as the module's is until its
 * cross-vCPU check and its first 2 s are done): the kernel answers every
 * clock, for "mode", and pvread_get_info() says so.
 */
static int none_page(void)
{
	struct pvread_info info;
	uint64_t before;
	unsigned int i;
	long bad = 0;

	if (adopt(PVREAD_MODE_NONE, 1000))
		return 1;
	before = slow_for(PVREAD_SLOW_MODE);
	for (i = 0; i < NR_ALL_CLOCKS; i++)
		bad += bracketed(all_clocks[i], 2000, SLOW);
	bad += reason_was(PVREAD_SLOW_MODE, before, 2000 * NR_ALL_CLOCKS);
	bad += pvread_get_info(&info) != 0;
	printf("# pvread_get_info: mode %u, line_state %u, fast %d\n",
	       info.mode, info.line_state, info.fast);
	bad += info.mode != PVREAD_MODE_NONE || info.fast ||
	       info.line_state != PVREAD_LINE_UNVOUCHED;
	return bad != 0;
}

/*
 * ABI version 2's per-CPU (1), stable (2) and line (3) modes: 1 is the
 * line now, the others no mode this library reads -- not 3 either, with
 * a line on the page as good as mode 1's.  Every clock the kernel's,
 * for "mode"; fast again in mode 1.
 */
static __thread unsigned long kernel_reads;

/*
 * Each a fallback that asks the kernel once (one more, at most, a clock's
 * first fallback after line readings: the hold at the line reads it again).
 */
static int old_mode_numbers(void)
{
	static const uint32_t modes[] = { 2, 3, 4, UINT32_MAX };
	struct pvread_info info;
	unsigned long reads;
	uint64_t before;
	unsigned int i, m;
	long bad = 0;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	bad += bracketed(CLOCK_MONOTONIC, 2000, FAST);
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		set_mode(modes[m]);
		printf("# mode %u, the ticker re-anchoring the line still:\n",
		       modes[m]);
		before = slow_for(PVREAD_SLOW_MODE);
		reads = kernel_reads;
		for (i = 0; i < NR_ALL_CLOCKS; i++)
			bad += bracketed(all_clocks[i], 1000, SLOW);
		reads = kernel_reads - reads;
		bad += reason_was(PVREAD_SLOW_MODE, before,
				  1000 * NR_ALL_CLOCKS);
		printf("# %lu reads of the kernel's clock for %lu fallbacks\n",
		       reads, (unsigned long)(1000 * NR_ALL_CLOCKS));
		bad += reads > 1000 * NR_ALL_CLOCKS + NR_ALL_CLOCKS;
		bad += pvread_get_info(&info) != 0 || info.mode != modes[m] ||
		       info.fast;
		printf("# pvread_get_info: mode %u, fast %d\n", info.mode,
		       info.fast);
	}
	set_mode(PVREAD_MODE_LINE);
	/* the fine clocks: the page's coarse ones lag the kernel's a tick */
	for (i = 0; i < NR_ALL_CLOCKS - 2; i++)
		bad += bracketed(all_clocks[i], 1000, FAST);
	return bad != 0;
}

/*
 * Xen rewrites the record all the time, on another CPU, between two
 * equal-valued lines: one anchored now, one anchored 10 ms in the future,
 * as a record rewritten after the reader's rdtsc is.  A sample torn
 * between the two is off by 10 ms; one that takes the future record for a
 * TSC before it, by years.
 */
static atomic_bool stop_writer;

static void *flip_record(void *arg)
{
	struct pvread_pvclock *p = &synthetic_record(&page, 0)->pvclock;
	const uint64_t d = page.tsc_hz / 100;
	uint64_t ts0 = p->tsc_timestamp, st0 = p->system_time;
	uint64_t dns = pvread_pvclock_ns(ts0 + d, ts0, 0, p->tsc_to_system_mul,
					 p->tsc_shift);
	unsigned long n = 0;
	int i;

	pin(*(int *)arg);
	while (!atomic_load_explicit(&stop_writer, memory_order_relaxed)) {
		__atomic_store_n(&p->version, p->version + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		/*
		 * In the opposite order of the reader's loads, a moment apart:
		 * a reader between the two stores sees a torn record.
		 */
		__atomic_store_n(&p->system_time, n & 1 ? st0 : st0 + dns,
				 __ATOMIC_RELAXED);
		for (i = 0; i < 32; i++)
			_mm_pause();
		__atomic_store_n(&p->tsc_timestamp, n & 1 ? ts0 : ts0 + d,
				 __ATOMIC_RELAXED);
		n++;
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&p->version, p->version + 1, __ATOMIC_RELAXED);
		/* As long again whole: readers must get through too. */
		for (i = 0; i < 32; i++)
			_mm_pause();
	}
	return NULL;
}

/*
 * pvread_sample_pvclock() on CPU 0 while record 0 is rewritten: retried
 * or given up (EAGAIN), never torn -- every sample on record 0's line
 * at its TSC, to the nanosecond of the two lines' rounding.  The line
 * reads of the clocks meanwhile are fast: they read no record.
 */
static int record_rewritten_mid_sample(void)
{
	struct pvread_record r0;
	struct pvread_sample smp;
	pthread_t writer;
	int writer_cpu = 1;
	long i, ok = 0, again = 0, torn = 0, bad = 0;
	int64_t off, worst = 0;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return skip("one CPU: the writer could never overlap the reader");
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	r0 = *synthetic_record(&page, 0);
	/* Reader on the CPU whose record is rewritten, writer beside it. */
	pin(0);
	pthread_create(&writer, NULL, flip_record, &writer_cpu);
	for (i = 0; i < 400000; i++) {
		if (pvread_sample_pvclock(&smp)) {
			again += errno == EAGAIN;
			bad += errno != EAGAIN;
			continue;
		}
		ok++;
		off = (int64_t)(smp.cycles -
				pvread_pvclock_ns(smp.tsc,
						  r0.pvclock.tsc_timestamp,
						  r0.pvclock.system_time,
						  r0.pvclock.tsc_to_system_mul,
						  r0.pvclock.tsc_shift));
		if (off > 2 || off < -2)
			torn++;
		if (off > worst || -off > worst)
			worst = off < 0 ? -off : off;
		bad += smp.cpu != 0;
	}
	bad += bracketed(CLOCK_MONOTONIC, 100000, FAST);
	atomic_store(&stop_writer, true);
	pthread_join(writer, NULL);
	printf("# 400000 samples on cpu0: %ld taken, %ld gave up (EAGAIN), %ld off record 0's line, by up to %lld ns\n",
	       ok, again, torn, (long long)worst);
	return bad || torn || ok < 1000;
}

/*
 * A record anchored after the TSC the reader reads (Xen rewrote it after
 * the reader's rdtsc): pvread_sample_pvclock() gives up (EAGAIN) rather
 * than return the record's line extended backwards through a wrapped
 * delta.  The clocks, read from the line, stay fast.
 */
static int record_from_the_future(void)
{
	struct pvread_pvclock *p;
	struct pvread_sample smp;
	uint64_t ahead;
	unsigned int i;
	long bad;
	int r;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	ahead = page.tsc_hz * 60;
	synthetic_write_begin(&page);
	for (i = 0; i < page.hdr->nr_records; i++) {
		p = &synthetic_record(&page, i)->pvclock;
		p->version++;
		p->system_time += pvread_pvclock_ns(p->tsc_timestamp + ahead,
						    p->tsc_timestamp, 0,
						    p->tsc_to_system_mul,
						    p->tsc_shift);
		p->tsc_timestamp += ahead;
		p->version++;
	}
	synthetic_write_end(&page);
	bad = bracketed(CLOCK_MONOTONIC, 1000, FAST);
	pin(0);
	errno = 0;
	r = pvread_sample_pvclock(&smp);
	printf("# pvread_sample_pvclock: %d (%s), cycles %llu, the kernel's MONOTONIC_RAW %lld\n",
	       r, strerror(errno), r ? 0ULL : (unsigned long long)smp.cycles,
	       (long long)sys_ns(CLOCK_MONOTONIC_RAW));
	return bad || r != -1 || errno != EAGAIN;
}

/* The line re-anchored as fast as the ticker can: retried, never torn. */
static int header_rewritten_mid_read(void)
{
	struct pvread_stats st;
	long bad;

	long reads = 0;
	int round;

	if (adopt(PVREAD_MODE_LINE, 1))
		return 1;
	/*
	 * Until an update has met a read: on a loaded host the ticker and
	 * the reader may share a CPU, and then they meet only when the
	 * reader is preempted mid-read (seen: none in 300000 reads).
	 */
	for (bad = 0, round = 0; round < 20; round++) {
		bad += bracketed(CLOCK_MONOTONIC, 300000, ANY);
		reads += 300000;
		pvread_get_stats(&st);
		if (st.retries)
			break;
	}
	printf("# %llu retries, %llu fast, %llu slow, %llu updates, %llu anchors\n",
	       (unsigned long long)st.retries,
	       (unsigned long long)(reads - st.slow),
	       (unsigned long long)st.slow,
	       (unsigned long long)page.hdr->updates,
	       (unsigned long long)page.hdr->line.anchors);
	return bad || (long)st.slow >= reads || !st.retries;
}

/*
 * pvread_sample_pvclock() pinned to each CPU in turn: the record of that
 * CPU (getcpu(2) names it), evaluated at the sample's TSC exactly, as the
 * selftests' per-vCPU checks expect.  The records lie 3 ms apart, so that
 * another CPU's would show.
 */
static int sample_pvclock_cpu(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct pvread_sample smp;
	struct pvread_record *r;
	unsigned int i;
	uint64_t want;
	int cpu, bad = 0;

	if (ncpu < 2)
		printf("# one CPU: no record apart to tell from its own\n");
	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	for (i = 0; i < page.hdr->nr_records; i++) {
		r = synthetic_record(&page, i);
		r->pvclock.version++;
		r->pvclock.system_time += (uint64_t)i * 3000000;
		r->pvclock.version++;
	}
	for (cpu = 0; cpu < ncpu && cpu < (int)page.hdr->nr_records; cpu++) {
		pin(cpu);
		if (pvread_sample_pvclock(&smp)) {
			printf("# cpu%d: %s\n", cpu, strerror(errno));
			bad++;
			continue;
		}
		r = synthetic_record(&page, (unsigned int)cpu);
		want = pvread_pvclock_ns(smp.tsc, r->pvclock.tsc_timestamp,
					 r->pvclock.system_time,
					 r->pvclock.tsc_to_system_mul,
					 r->pvclock.tsc_shift);
		printf("# on cpu%d: the sample of record %u, version %u, %llu ns (record %d's evaluation: %llu)\n",
		       cpu, smp.cpu, smp.version,
		       (unsigned long long)smp.cycles, cpu,
		       (unsigned long long)want);
		bad += smp.cpu != (unsigned int)cpu || smp.cycles != want ||
		       smp.version != r->pvclock.version;
	}
	return bad != 0;
}

/* line -> none (the clocksource no longer "xen") -> line. */
static int clocksource_flip(void)
{
	uint64_t before;
	long bad = 0;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST);
	pause_ticker();
	synthetic_line_leave(&page);
	resume_ticker();
	before = slow_for(PVREAD_SLOW_MODE);
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW);
	bad += bracketed(CLOCK_REALTIME, 10000, SLOW);
	bad += reason_was(PVREAD_SLOW_MODE, before, 20000);
	pause_ticker();
	synthetic_line_enter(&page, 0);
	resume_ticker();
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST);
	bad += bracketed(CLOCK_REALTIME, 10000, FAST);
	return bad != 0;
}

/*
 * No record registered: the line is read all the same (reason "record"
 * is no more), and pvread_sample_pvclock() has no record: ENODEV.
 */
static int unregistered_record(void)
{
	struct pvread_sample smp;
	uint64_t before;
	unsigned int i;
	long bad;
	int r;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	for (i = 0; i < page.hdr->nr_records; i++)
		synthetic_record(&page, i)->state = 0;
	before = slow_for(PVREAD_SLOW_RECORD);
	bad = bracketed(CLOCK_MONOTONIC, 10000, FAST);
	bad += reason_was(PVREAD_SLOW_RECORD, before, 0);
	pin(0);
	errno = 0;
	r = pvread_sample_pvclock(&smp);
	printf("# pvread_sample_pvclock without a registered record: %d (%s)\n",
	       r, strerror(errno));
	return bad || r != -1 || errno != ENODEV;
}

/*
 * The header page alone, as the module maps it for an unprivileged opener
 * (its tk without cycle_last): every clock fast all the same; the records
 * absent, so pvread_get_record() and pvread_sample_pvclock() say EPERM.
 */
static int header_page_only(void)
{
	struct pvread_record rec;
	struct pvread_sample smp;
	struct pvread_info info;
	int r1, e1, r2, e2, r3, e3;
	long bad;

	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    pvread_use_page(page.hdr, page.hdr->record_offset) ||
	    synthetic_start(&page, 1000)) {
		printf("# header page: %s\n", strerror(errno));
		return 1;
	}
	bad = bracketed(CLOCK_MONOTONIC, 10000, FAST);
	bad += bracketed(CLOCK_MONOTONIC_RAW, 10000, FAST);
	bad += bracketed(CLOCK_REALTIME, 10000, FAST);
	pin(0);
	errno = 0;
	r1 = pvread_get_record(0, &rec);
	e1 = errno;
	r2 = pvread_sample_pvclock(&smp);
	e2 = errno;
	r3 = pvread_get_record(page.hdr->nr_records, &rec);
	e3 = errno;
	pvread_get_info(&info);
	printf("# header page only: get_record %d (%s), sample_pvclock %d (%s), get_record past the last %d (%s); mapped %d, fast %d, header cycle_last %llu\n",
	       r1, strerror(e1), r2, strerror(e2), r3, strerror(e3),
	       info.mapped, info.fast,
	       (unsigned long long)page.hdr->tk.cycle_last);
	return bad || r1 != -1 || e1 != EPERM || r2 != -1 || e2 != EPERM ||
	       r3 != -1 || e3 != ERANGE || !info.mapped || !info.fast ||
	       page.hdr->tk.cycle_last;
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

	if (adopt(PVREAD_MODE_LINE, 0))	/* no ticker: the test writes */
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

	if (adopt(PVREAD_MODE_LINE, 0))
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

/* ---- PVREAD_MODE_LINE ---- */

static const clockid_t never_back_clocks[] = { CLOCK_MONOTONIC,
	CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME };
#define NR_NEVER_BACK (sizeof(never_back_clocks) / sizeof(never_back_clocks[0]))

static int line_all_clocks(void)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
		CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW };
	struct pvread_stats st;
	long bad = 0;
	unsigned int i;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	for (i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++)
		bad += bracketed(clocks[i], 200000, FAST);
	pvread_get_stats(&st);
	printf("# %llu line anchors, %llu retries, %llu raised to the floor\n",
	       (unsigned long long)page.hdr->line.anchors,
	       (unsigned long long)st.retries, (unsigned long long)st.clamped);
	return bad || page.hdr->line.anchors < 100;
}

/*
 * pvread_ns(): the line page's clocks as counts of ns, each bracketed by
 * the kernel's, and in order with pvread_clock_gettime()'s readings taken
 * in turn (never back either way); fast (no fallback counted); a bad
 * clock id 0 and EINVAL; a clock the page does not hold the kernel's.
 */
static int line_ns(void)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
		CLOCK_BOOTTIME, CLOCK_TAI, CLOCK_MONOTONIC_RAW };
	struct pvread_stats st0, st1;
	long outside = 0, back = 0, i;
	struct timespec ts;
	unsigned int c;
	uint64_t v, cpu;
	int64_t before, after, prev;
	int err;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	for (c = 0; c < sizeof(clocks) / sizeof(clocks[0]); c++) {
		pvread_clock_gettime(clocks[c], &ts);
		prev = ns_of(&ts);
		pvread_get_stats(&st0);
		for (i = 0; i < 100000; i++) {
			before = sys_ns(clocks[c]);
			v = pvread_ns(clocks[c]);
			after = sys_ns(clocks[c]);
			outside += (int64_t)v < before - SLACK_NS ||
				   (int64_t)v > after + SLACK_NS;
			/* REALTIME and TAI may go back with the kernel's. */
			if (clocks[c] != CLOCK_REALTIME && clocks[c] != CLOCK_TAI)
				back += (int64_t)v < prev;
			pvread_clock_gettime(clocks[c], &ts);
			if (clocks[c] != CLOCK_REALTIME && clocks[c] != CLOCK_TAI)
				back += ns_of(&ts) < (int64_t)v;
			prev = ns_of(&ts);
		}
		pvread_get_stats(&st1);
		printf("# clock %d: 100000 pvread_ns readings, %ld outside, %ld back, %llu fallbacks\n",
		       (int)clocks[c], outside, back,
		       (unsigned long long)(st1.slow - st0.slow));
		outside += st1.slow - st0.slow > 1000;
	}
	errno = 0;
	v = pvread_ns(12345);
	err = errno;
	cpu = pvread_ns(CLOCK_PROCESS_CPUTIME_ID);
	printf("# pvread_ns(12345): %llu, %s; CLOCK_PROCESS_CPUTIME_ID %llu ns\n",
	       (unsigned long long)v, strerror(err), (unsigned long long)cpu);
	return outside || back || v || err != EINVAL || !cpu;
}

/*
 * pvread_ns() in mode none asks the kernel first, as pvread_clock_gettime()
 * does there: every clock the page serves bracketed by the kernel's (the
 * coarse ones included: a clock read for another would stray from it),
 * one fallback each for "mode"; a CPU-time clock the kernel's for
 * "other", as pvread(3) counts it; a bad id 0 and EINVAL; the line's
 * readings, not a fallback, once the page is in line mode again.
 */
static int none_ns(void)
{
	struct pvread_stats st0, st1;
	uint64_t before, other, v;
	long outside = 0, i;
	clockid_t cpu;
	int64_t lo, hi;
	unsigned int c;
	int err;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	set_mode(PVREAD_MODE_NONE);
	pvread_ns(CLOCK_MONOTONIC);	/* the mapping, and the hint */
	before = slow_for(PVREAD_SLOW_MODE);
	for (c = 0; c < NR_ALL_CLOCKS; c++) {
		for (i = 0; i < 1000; i++) {
			lo = sys_ns(all_clocks[c]);
			v = pvread_ns(all_clocks[c]);
			hi = sys_ns(all_clocks[c]);
			if ((int64_t)v < lo - SLACK_NS ||
			    (int64_t)v > hi + SLACK_NS) {
				if (outside++ < 3)
					printf("# clock %d: %llu not within [%lld, %lld]\n",
					       (int)all_clocks[c],
					       (unsigned long long)v,
					       (long long)lo, (long long)hi);
			}
		}
	}
	outside += reason_was(PVREAD_SLOW_MODE, before, 1000 * NR_ALL_CLOCKS);
	other = slow_for(PVREAD_SLOW_OTHER);
	outside += !pvread_ns(CLOCK_PROCESS_CPUTIME_ID);
	outside += reason_was(PVREAD_SLOW_OTHER, other, 1);
	/*
	 * Ids beyond the page's whose low 5 bits name one of its clocks: this
	 * thread's CPU clock (the kernel's; from the page it would be a
	 * monotonic time), and 38 (EINVAL, its bits CLOCK_MONOTONIC_RAW's).
	 */
	pthread_getcpuclockid(pthread_self(), &cpu);
	lo = sys_ns(cpu);
	v = pvread_ns(cpu);
	hi = sys_ns(cpu);
	printf("# pvread_ns(this thread's CPU clock %d, low bits %d): %llu within [%lld, %lld]\n",
	       (int)cpu, (int)cpu & 31, (unsigned long long)v, (long long)lo,
	       (long long)hi);
	outside += (int64_t)v < lo || (int64_t)v > hi;
	errno = 0;
	v = pvread_ns(38);
	printf("# pvread_ns(38): %llu, %s\n", (unsigned long long)v,
	       strerror(errno));
	outside += v || errno != EINVAL;
	errno = 0;
	v = pvread_ns(12345);
	err = errno;
	printf("# pvread_ns(12345): %llu, %s\n", (unsigned long long)v,
	       strerror(err));
	set_mode(PVREAD_MODE_LINE);
	/* the kernel-first hint stale, the page in line mode: still EINVAL */
	errno = 0;
	v = pvread_ns(33);
	printf("# pvread_ns(33) in line mode after mode none: %llu, %s\n",
	       (unsigned long long)v, strerror(errno));
	outside += v || errno != EINVAL;
	pvread_ns(CLOCK_MONOTONIC);	/* the kernel first, then the page's */
	pvread_get_stats(&st0);
	for (i = 0; i < 1000; i++)
		pvread_ns(CLOCK_MONOTONIC);
	pvread_get_stats(&st1);
	printf("# line mode again: %llu of 1000 pvread_ns readings the kernel's\n",
	       (unsigned long long)(st1.slow - st0.slow));
	return outside || v || err != EINVAL || st1.slow - st0.slow > 10;
}

/*
 * pvread_ns() holds to the floor as pvread_clock_gettime() does: the line
 * 100 ms back, the page's coarse clocks 150 ms old (so that the line is not
 * below them: no hold at the coarse clocks hides it), the kernel's answers
 * in mode none raise the floor, and the line's readings after them, below
 * it, are raised to it.
 */
static int ns_not_below_floor(void)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC,
					    CLOCK_MONOTONIC_RAW };
	struct timespec ts, pause = { 0, 150000000 };
	int64_t floor[2], v, lowest[2] = { INT64_MAX, INT64_MAX };
	int i, c, bad = 0;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	/* Line readings: the floors are kept. */
	for (c = 0; c < 2; c++)
		pvread_ns(clocks[c]);
	synthetic_tick(&page);
	synthetic_line_shift(&page, -100000000);
	nanosleep(&pause, NULL);
	set_mode(PVREAD_MODE_NONE);
	for (c = 0; c < 2; c++) {
		for (i = 0; i < 10; i++)
			pvread_clock_gettime(clocks[c], &ts);
		floor[c] = ns_of(&ts);
	}
	set_mode(PVREAD_MODE_LINE);
	for (c = 0; c < 2; c++) {
		for (i = 0; i < 1000; i++) {
			v = (int64_t)pvread_ns(clocks[c]);
			if (v < lowest[c])
				lowest[c] = v;
		}
		/* MONOTONIC from its line record, MONOTONIC_RAW from the page. */
		printf("# clock %d, the line 100 ms back: the lowest of 1000 pvread_ns readings %lld ns from the floor the kernel's answers raised\n",
		       (int)clocks[c], (long long)(lowest[c] - floor[c]));
		bad += lowest[c] < floor[c];
	}
	return bad != 0;
}

/* The line's fields, written as the module would, with no ticker running. */
static void write_line(uint64_t stamp, uint64_t span, uint32_t mul,
		       unsigned int shift, uint32_t raw_mul,
		       unsigned int raw_shift, int64_t sec, uint64_t snsec)
{
	struct pvread_line *l = &page.hdr->line;
	int c;

	synthetic_write_begin(&page);
	l->tsc_timestamp = stamp;
	l->tsc_span = span;
	l->mul = mul;
	l->shift = (uint8_t)shift;
	l->raw_mul = raw_mul;
	l->raw_shift = (uint8_t)raw_shift;
	for (c = 0; c < PVREAD_NR_CLOCK_BASES; c++) {
		l->base[c].sec = sec;
		l->base[c].snsec = snsec;
	}
	l->anchors++;
	synthetic_write_end(&page);
}

/* The page's coarse clocks (MONOTONIC_COARSE and REALTIME_COARSE). */
static void write_coarse(int64_t sec, uint64_t ns)
{
	synthetic_write_begin(&page);
	page.hdr->tk.base[CLOCK_MONOTONIC_COARSE].sec = sec;
	page.hdr->tk.base[CLOCK_MONOTONIC_COARSE].snsec = ns;
	page.hdr->tk.base[CLOCK_REALTIME_COARSE].sec = sec;
	page.hdr->tk.base[CLOCK_REALTIME_COARSE].snsec = ns;
	synthetic_write_end(&page);
}

/* A line whose anchor lies 100 ms of ticks back, every base at @base_ns. */
static uint64_t line_from_past(uint32_t mul, unsigned int shift,
			       uint32_t raw_mul, unsigned int raw_shift,
			       int64_t base_ns)
{
	uint64_t back = page.tsc_hz / 10;

	write_coarse(0, 0);	/* not above the line: see line_below_coarse() */
	write_line(__rdtsc() - back, 2 * page.tsc_hz, mul, shift, raw_mul,
		   raw_shift, base_ns / NSEC_PER_SEC,
		   (uint64_t)(base_ns % NSEC_PER_SEC) << 32);
	return back;
}

/*
 * CLOCK_MONOTONIC_RAW runs at raw_mul << raw_shift: give it half the rate
 * of the others in a form that neither mul nor shift alone can give.
 */
static int line_raw_rate(void)
{
	struct timespec mono, raw;
	int64_t base = 1000 * NSEC_PER_SEC;
	struct pvread_line *l;
	double ratio;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	l = &page.hdr->line;
	/* rate m; (m / 4) << (shift + 1) is m / 2 */
	line_from_past(l->mul, l->shift, l->mul / 4, l->shift + 1u, base);
	pvread_clock_gettime(CLOCK_MONOTONIC, &mono);
	pvread_clock_gettime(CLOCK_MONOTONIC_RAW, &raw);
	ratio = (double)(ns_of(&raw) - base) / (double)(ns_of(&mono) - base);
	printf("# 100 ms of ticks: MONOTONIC +%lld ns, MONOTONIC_RAW +%lld ns, ratio %.4f (want 0.5)\n",
	       (long long)(ns_of(&mono) - base), (long long)(ns_of(&raw) - base),
	       ratio);
	return ratio < 0.499 || ratio > 0.501 || slow_for(PVREAD_SLOW_OTHER);
}

/*
 * A TSC read before the line's anchor (the module anchors a little ahead)
 * holds the anchor's value: exactly, fast, without a retry.
 */
static int line_before_anchor(void)
{
	const uint64_t snsec = (123456789ULL << 32) | 0xfedcba98;
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
		CLOCK_MONOTONIC_RAW };
	struct pvread_stats st0, st1;
	struct pvread_line *l;
	struct timespec ts;
	long bad = 0, i;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	l = &page.hdr->line;
	write_coarse(4999, 0);
	/* anchored a second of ticks from now, at 5000.123456789 s */
	write_line(__rdtsc() + page.tsc_hz, 2 * page.tsc_hz, l->mul, l->shift,
		   l->raw_mul, l->raw_shift, 5000, snsec);
	pvread_get_stats(&st0);
	for (i = 0; i < 30000; i++) {
		pvread_clock_gettime(clocks[i % 3], &ts);
		if (ts.tv_sec != 5000 || ts.tv_nsec != 123456789)
			bad++;
	}
	pvread_get_stats(&st1);
	printf("# 30000 reads before the anchor: %ld not the anchor's value, %llu fast, %llu retries, %llu slow\n",
	       bad, (unsigned long long)(30000 - (st1.slow - st0.slow)),
	       (unsigned long long)(st1.retries - st0.retries),
	       (unsigned long long)(st1.slow - st0.slow));
	return bad || st1.slow != st0.slow || st1.retries != st0.retries;
}

/*
 * The kernel's fine clocks are never below its coarse ones, and the line
 * behind the kernel must not be either: held at the coarse value until it
 * passes it, so that CLOCK_MONOTONIC is not below CLOCK_MONOTONIC_COARSE
 * and gettimeofday()'s second not below time().  MONOTONIC_RAW, BOOTTIME
 * and TAI have no coarse clock and stay on the line.
 */
static int line_below_coarse(void)
{
	const uint64_t half = 500000000ULL << 32;
	struct pvread_stats st0, st1;
	struct timespec ts;
	struct timeval tv;
	long bad = 0, i;
	time_t t;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	/* a line at 5000.5 s for a second, the coarse clocks at 5001.25 s */
	write_coarse(5001, 250000000);
	write_line(__rdtsc(), page.tsc_hz, 0, 0, 0, 0, 5000, half);
	pvread_get_stats(&st0);
	for (i = 0; i < 10000; i++) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		bad += ts.tv_sec != 5001 || ts.tv_nsec != 250000000;
		pvread_clock_gettime(CLOCK_REALTIME, &ts);
		bad += ts.tv_sec != 5001 || ts.tv_nsec != 250000000;
		pvread_clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
		bad += ts.tv_sec != 5000 || ts.tv_nsec != 500000000;
		t = pvread_time(NULL);
		pvread_gettimeofday(&tv, NULL);
		bad += t != 5001 || tv.tv_sec != 5001 || tv.tv_usec != 250000;
	}
	pvread_get_stats(&st1);
	printf("# line 5000.5 s, coarse 5001.25 s: %ld wrong of 40000, %llu fast\n",
	       bad, (unsigned long long)(40000 - (st1.slow - st0.slow)));
	bad += 40000 - (st1.slow - st0.slow) < 30000;
	/*
	 * The wall clock 1.7e9 s past MONOTONIC (the line's REALTIME base
	 * that far above its MONOTONIC one, REALTIME_COARSE too): REALTIME
	 * is held at MONOTONIC_COARSE's instant on the wall clock.
	 */
	synthetic_write_begin(&page);
	page.hdr->line.base[CLOCK_REALTIME].sec += 1700000000;
	page.hdr->tk.base[CLOCK_REALTIME_COARSE].sec += 1700000000;
	synthetic_write_end(&page);
	for (i = 0; i < 1000; i++) {
		pvread_clock_gettime(CLOCK_REALTIME, &ts);
		bad += ts.tv_sec != 1700005001 || ts.tv_nsec != 250000000;
		pvread_gettimeofday(&tv, NULL);
		bad += tv.tv_sec < pvread_time(NULL);
	}
	printf("# wall clock 1.7e9 s on: REALTIME %lld.%09ld\n",
	       (long long)ts.tv_sec, ts.tv_nsec);
	/* the line past the coarse clocks again: the line's value */
	write_line(__rdtsc(), page.tsc_hz, 0, 0, 0, 0, 5002, half);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	bad += ts.tv_sec != 5002 || ts.tv_nsec != 500000000;
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	bad += ts.tv_sec != 5002 || ts.tv_nsec != 500000000;
	printf("# line 5002.5 s: MONOTONIC %lld.%09ld\n", (long long)ts.tv_sec,
	       ts.tv_nsec);
	return bad != 0;
}

/* lfence; rdtsc: a TSC not before what came before it. */
static uint64_t tsc_now(void)
{
	_mm_lfence();
	return __rdtsc();
}

/*
 * A line that passes the coarse clocks 3 ms after its anchor, read where
 * the page was checked whole once (the pass point in ticks, and one
 * compare of the delta with it): MONOTONIC and REALTIME held at the
 * coarse value by every read whose TSC bracket ends before the line's
 * first tick at or above it, the line's value, within the bracket, by
 * every read whose bracket starts there or later; never below the coarse
 * value, never back, and never the kernel's.  Read until 2000 readings of
 * the line, or 100 ms past the crossing (a busy host's preemption).
 */
static int line_passes_coarse(void)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME };
	const uint64_t lag = 3000000;
	struct pvread_stats st0, st1;
	uint64_t stamp, rate, cross, t0, t1, held = 0, on = 0, n = 0;
	int64_t prev[2] = { 0, 0 };
	struct pvread_line *l;
	struct timespec ts;
	long bad = 0;
	int c;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	l = &page.hdr->line;
	rate = (uint64_t)l->mul << l->shift;
	write_coarse(5000, lag);
	stamp = tsc_now();
	write_line(stamp, page.tsc_hz, l->mul, l->shift, l->raw_mul,
		   l->raw_shift, 5000, 0);
	/* the first tick at which the line's ns << 32 reach lag << 32 */
	cross = stamp + ((lag << 32) + rate - 1) / rate;
	pvread_get_stats(&st0);
	do {
		for (c = 0; c < 2; c++) {
			int64_t v;

			t0 = tsc_now();
			pvread_clock_gettime(clocks[c], &ts);
			t1 = tsc_now();
			n++;
			v = ns_of(&ts) - 5000 * NSEC_PER_SEC;
			if (v < (int64_t)lag || v < prev[c] ||
			    (t1 < cross && v != (int64_t)lag) ||
			    (t0 >= cross &&
			     (v < (int64_t)((t0 - stamp) * rate >> 32) ||
			      v > (int64_t)((t1 - stamp) * rate >> 32)))) {
				if (bad++ < 3)
					printf("# clock %d: %lld ns past 5000 s at ticks [%llu, %llu], the line passing %llu ns at %llu\n",
					       (int)clocks[c], (long long)v,
					       (unsigned long long)(t0 - stamp),
					       (unsigned long long)(t1 - stamp),
					       (unsigned long long)lag,
					       (unsigned long long)(cross - stamp));
			}
			held += t1 < cross;
			on += t0 >= cross;
			prev[c] = v;
		}
	} while (on < 2000 && t0 < cross + page.tsc_hz / 10);
	pvread_get_stats(&st1);
	printf("# %llu reads: %llu held before the line passed the coarse clocks, %llu on the line after, %ld wrong, %llu the kernel's\n",
	       (unsigned long long)n, (unsigned long long)held,
	       (unsigned long long)on, bad,
	       (unsigned long long)(st1.slow - st0.slow));
	return bad || held < 100 || on < 100 || st1.slow != st0.slow;
}

/*
 * Reads held at the coarse clocks, MONOTONIC and REALTIME, @n of each,
 * where the page was checked once: failures.
 */
static long held_at(int64_t sec, int64_t ns, long n)
{
	static const clockid_t clocks[] = { CLOCK_MONOTONIC, CLOCK_REALTIME };
	struct timespec ts;
	long bad = 0, i;
	int c;

	for (i = 0; i < n; i++)
		for (c = 0; c < 2; c++) {
			pvread_clock_gettime(clocks[c], &ts);
			if ((ts.tv_sec != sec || ts.tv_nsec != ns) &&
			    bad++ < 3)
				printf("# clock %d: %lld.%09ld, not held at %lld.%09lld\n",
				       (int)clocks[c], (long long)ts.tv_sec,
				       ts.tv_nsec, (long long)sec, (long long)ns);
		}
	return bad;
}

/*
 * The hold where the page was checked once, at the edges of its pass
 * point: a line whose anchor is ahead of every TSC read (each reads as
 * the anchor, 3 ms below the coarse clocks); a line more than 3 s below
 * them (their nanoseconds past its second no longer fit 32 bits, and
 * their low 32 bits would be below the line); one more than 2^32 ticks
 * below them (the pass point no longer fits the word).  Every read held
 * at the coarse value, none the kernel's; and where REALTIME's held value
 * would be past the kernel's last second, the kernel's answer.
 */
static int line_held_far_below_coarse(void)
{
	struct pvread_stats st0, st1;
	struct pvread_line *l;
	uint64_t far;
	long bad = 0;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	l = &page.hdr->line;
	pvread_get_stats(&st0);
	write_coarse(5000, 3000000);
	write_line(tsc_now() + page.tsc_hz / 5, page.tsc_hz, l->mul, l->shift,
		   l->raw_mul, l->raw_shift, 5000, 0);
	bad += held_at(5000, 3000000, 10000);
	/* 5.2 s past its second: beyond 2^32 ns, 0.905 s modulo 2^32 */
	write_coarse(5005, 200000000);
	write_line(tsc_now(), 2 * page.tsc_hz, l->mul, l->shift, l->raw_mul,
		   l->raw_shift, 5000, 999000000ULL << 32);
	bad += held_at(5005, 200000000, 10000);
	/* 1.25 * 2^32 ticks of ns, 5 s at most (the coarse clock 3 s on) */
	far = (uint64_t)((double)(5ULL << 30) * 1e9 / (double)page.tsc_hz);
	if (far < 3 * NSEC_PER_SEC) {
		write_coarse(5000 + far / NSEC_PER_SEC, far % NSEC_PER_SEC);
		write_line(tsc_now(), 3 * page.tsc_hz, l->mul, l->shift,
			   l->raw_mul, l->raw_shift, 5000, 0);
		bad += held_at(5000 + far / NSEC_PER_SEC,
			       far % NSEC_PER_SEC, 10000);
	} else {
		printf("# a TSC below 1.8 GHz: its 2^32 ticks are more than 3 s, not held by this path\n");
	}
	pvread_get_stats(&st1);
	printf("# %ld not held, %llu the kernel's\n", bad,
	       (unsigned long long)(st1.slow - st0.slow));
	bad += st1.slow != st0.slow;
	/*
	 * REALTIME's line at the kernel's last second, held where
	 * MONOTONIC is: a second past it, which no kernel counts.  The
	 * kernel's answer (invalid), MONOTONIC still held.
	 */
	write_coarse(5001, 0);
	write_line(tsc_now(), 2 * page.tsc_hz, l->mul, l->shift, l->raw_mul,
		   l->raw_shift, 5000, 0);	/* a second below, held */
	synthetic_write_begin(&page);
	l->base[CLOCK_REALTIME].sec = INT64_MAX / NSEC_PER_SEC;
	synthetic_write_end(&page);
	far = slow_for(PVREAD_SLOW_INVALID);
	for (int i = 0; i < 1000; i++) {
		struct timespec ts;
		int64_t before = sys_ns(CLOCK_REALTIME), after;

		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		bad += ts.tv_sec != 5001 || ts.tv_nsec != 0;
		pvread_clock_gettime(CLOCK_REALTIME, &ts);
		after = sys_ns(CLOCK_REALTIME);
		bad += ns_of(&ts) < before || ns_of(&ts) > after;
	}
	bad += reason_was(PVREAD_SLOW_INVALID, far, 1000);
	return bad != 0;
}

/*
 * REALTIME is held where MONOTONIC is because a module gives their bases
 * the same fraction of a nanosecond.  A page whose REALTIME fraction is
 * below MONOTONIC's is not taken as checked: REALTIME stays held until
 * its own line passes REALTIME_COARSE, never a nanosecond below it.  A
 * line of a nanosecond every 2^20 ticks makes that nanosecond 2^20 ticks
 * long.
 */
static int line_realtime_fraction(void)
{
	struct timespec ts;
	uint64_t stamp, t0, t1, n = 0, window = 0;
	long bad = 0;
	int64_t v;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	write_coarse(5000, 2);
	stamp = tsc_now();
	write_line(stamp, page.tsc_hz, 1, 12, 1, 12, 5000, UINT32_MAX);
	synthetic_write_begin(&page);
	page.hdr->line.base[CLOCK_REALTIME].snsec = 0;
	synthetic_write_end(&page);
	do {
		t0 = tsc_now();
		pvread_clock_gettime(CLOCK_REALTIME, &ts);
		t1 = tsc_now();
		v = ns_of(&ts) - 5000 * NSEC_PER_SEC;
		n++;
		if (v < 2 && bad++ < 3)
			printf("# REALTIME %lld ns past 5000 s, %llu ticks past the anchor: below REALTIME_COARSE's 2\n",
			       (long long)v, (unsigned long long)(t0 - stamp));
		/* MONOTONIC's line past its coarse clock, REALTIME's not */
		window += t0 - stamp > (1ULL << 20) + 1 &&
			  t1 - stamp < 1ULL << 21;
	} while (t1 - stamp < 5ULL << 19);
	printf("# %llu reads, %llu of them where MONOTONIC's line has passed MONOTONIC_COARSE and REALTIME's not REALTIME_COARSE, %ld below it\n",
	       (unsigned long long)n, (unsigned long long)window, bad);
	return bad || window < 100;
}

/*
 * The page is taken as checked (pvread_line_checked) after a good reading
 * of one clock only where every fine clock on it is one a module writes:
 * with MONOTONIC_RAW's shift beyond 32, or TAI's seconds beyond the
 * kernel's or below 0, MONOTONIC still reads fast, and those clocks are
 * the kernel's (invalid), every read.
 */
static int line_checked_whole_page(void)
{
	struct pvread_line *l;
	uint64_t before;
	uint8_t raw_shift;
	long bad = 0;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pause_ticker();
	l = &page.hdr->line;
	raw_shift = l->raw_shift;
	synthetic_write_begin(&page);
	l->raw_shift = 33;
	synthetic_write_end(&page);
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST);
	before = slow_for(PVREAD_SLOW_INVALID);
	bad += bracketed(CLOCK_MONOTONIC_RAW, 1000, SLOW);
	bad += reason_was(PVREAD_SLOW_INVALID, before, 1000);
	synthetic_write_begin(&page);
	l->raw_shift = raw_shift;
	l->base[CLOCK_TAI].sec = INT64_MAX / NSEC_PER_SEC + 1;
	synthetic_write_end(&page);
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST);
	bad += bracketed(CLOCK_MONOTONIC_RAW, 1000, FAST);
	before = slow_for(PVREAD_SLOW_INVALID);
	bad += bracketed(CLOCK_TAI, 1000, SLOW);
	bad += reason_was(PVREAD_SLOW_INVALID, before, 1000);
	/* and below 0, as unsigned as the read takes them */
	synthetic_write_begin(&page);
	l->base[CLOCK_TAI].sec = -1;
	synthetic_write_end(&page);
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST);
	before = slow_for(PVREAD_SLOW_INVALID);
	bad += bracketed(CLOCK_TAI, 1000, SLOW);
	bad += reason_was(PVREAD_SLOW_INVALID, before, 1000);
	return bad != 0;
}

/*
 * Past tsc_span (the module stopped re-anchoring), or with a shift that
 * would push the delta out of 64 bits, the kernel answers.
 */
static int line_beyond_span(void)
{
	struct pvread_line *l;
	uint64_t before;
	long bad = 0;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	l = &page.hdr->line;
	/* anchored 10 ms of ticks ago, readable for 1 ms */
	write_line(__rdtsc() - page.tsc_hz / 100, page.tsc_hz / 1000, l->mul,
		   l->shift, l->raw_mul, l->raw_shift, 0, 0);
	before = slow_for(PVREAD_SLOW_DELTA);
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW);
	bad += bracketed(CLOCK_MONOTONIC_RAW, 10000, SLOW);
	bad += reason_was(PVREAD_SLOW_DELTA, before, 20000);
	/* within the span, but 2^33 ticks << 32 does not fit in 64 bits */
	write_line(__rdtsc() - (1ULL << 33), UINT64_MAX, 1, 32, 1, 32, 0, 0);
	before = slow_for(PVREAD_SLOW_INVALID);
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW);
	bad += reason_was(PVREAD_SLOW_INVALID, before, 10000);
	/* no module writes a shift beyond 32 */
	write_line(__rdtsc(), UINT64_MAX, 1, 33, 1, 33, 0, 0);
	before = slow_for(PVREAD_SLOW_INVALID);
	bad += bracketed(CLOCK_MONOTONIC_RAW, 10000, SLOW);
	bad += reason_was(PVREAD_SLOW_INVALID, before, 10000);
	return bad != 0;
}

static int line_bound_above_tolerance(void)
{
	uint64_t before;
	long bad = 0;

	setenv("PVREAD_MAX_ERROR_NS", "500", 1);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	/* The page promises 1000 ns: more than the 500 ns asked for. */
	before = slow_for(PVREAD_SLOW_BOUND);
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW);
	bad += bracketed(CLOCK_REALTIME, 10000, SLOW);
	bad += reason_was(PVREAD_SLOW_BOUND, before, 20000);
	pause_ticker();
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 400;
	synthetic_write_end(&page);
	resume_ticker();
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST);
	bad += bracketed(CLOCK_REALTIME, 10000, FAST);
	return bad != 0;
}

/*
 * Line readings leave the floor alone: after a broken module steps the
 * line back, line readings are not held (no clamp), which they would be
 * had the earlier ones raised it.  Fallbacks (mode none) do raise it,
 * and line readings then respect it.
 */
static int line_no_shared_write(void)
{
	struct pvread_stats st0, st1;
	struct timespec ts;
	int64_t last = 0, v;
	long i, back = 0;
	unsigned int c;
	int bad = 0;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	for (i = 0; i < 100000; i++)
		pvread_clock_gettime(never_back_clocks[i % NR_NEVER_BACK], &ts);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	last = ns_of(&ts);
	synthetic_line_shift(&page, -10000000);	/* 10 ms back */
	pvread_get_stats(&st0);
	for (c = 0; c < NR_NEVER_BACK; c++)
		pvread_clock_gettime(never_back_clocks[c], &ts);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_get_stats(&st1);
	v = ns_of(&ts);
	printf("# line stepped 10 ms back: %lld ns from the last line reading, %llu raised to the floor\n",
	       (long long)(v - last),
	       (unsigned long long)(st1.clamped - st0.clamped));
	bad |= v >= last || st1.clamped != st0.clamped;

	/* The kernel's answers raise the floor. */
	set_mode(PVREAD_MODE_NONE);
	for (i = 0; i < 1000; i++)
		for (c = 0; c < NR_NEVER_BACK; c++)
			pvread_clock_gettime(never_back_clocks[c], &ts);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	last = ns_of(&ts);
	/* The line, now behind them, is held at the floor. */
	set_mode(PVREAD_MODE_LINE);
	pvread_get_stats(&st0);
	for (i = 0; i < 1000; i++) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		v = ns_of(&ts);
		back += v < last;
		last = v;
	}
	pvread_get_stats(&st1);
	printf("# after fallbacks: %llu of 1000 line readings raised to the floor, %ld back\n",
	       (unsigned long long)(st1.clamped - st0.clamped), back);
	bad |= back || st1.clamped - st0.clamped < 1000 ||
	       st1.slow != st0.slow;
	return bad;
}

/*
 * A fallback in a process that returned line readings is lifted to the
 * line: with the line 50 ms ahead of the kernel, leaving line mode must not
 * take the clocks back by 50 ms.
 */
static int line_fallback_not_behind(void)
{
	struct timespec line[NR_NEVER_BACK], slow;
	uint64_t before = slow_for(PVREAD_SLOW_MODE);
	unsigned int c;
	int64_t k;
	int bad = 0;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pause_ticker();
	synthetic_line_shift(&page, 50000000);
	resume_ticker();
	for (c = 0; c < NR_NEVER_BACK; c++)
		pvread_clock_gettime(never_back_clocks[c], &line[c]);
	pause_ticker();
	synthetic_line_leave(&page);
	resume_ticker();
	for (c = 0; c < NR_NEVER_BACK; c++) {
		pvread_clock_gettime(never_back_clocks[c], &slow);
		k = sys_ns(never_back_clocks[c]);
		printf("# clock %d: line %lld, then via libc %lld (kernel %lld)\n",
		       (int)never_back_clocks[c], (long long)ns_of(&line[c]),
		       (long long)ns_of(&slow), (long long)k);
		bad |= ns_of(&slow) < ns_of(&line[c]);
	}
	bad |= (int)reason_was(PVREAD_SLOW_MODE, before, NR_NEVER_BACK);
	return bad;
}

/*
 * PVREAD_MAX_ERROR_NS still limits the error after line readings: the
 * line runs 40 us ahead of the kernel and the bound, 80 us, crosses the
 * 10 us tolerance.  The first fallback is lifted to the line (this
 * process may have returned that much), and the floor holds it; after
 * that the answers are lifted by at most the tolerance, so once the
 * kernel has caught up with the hold, every answer is within 10 us of the
 * kernel's bracket -- not 40 us past it, following the line.
 */
static int line_tolerance_after_bound(void)
{
	struct pvread_stats st0, st1;
	int64_t before, after, v, first = 0, prev = 0;
	long beyond_late = 0, beyond_early = 0, back = 0, i;
	struct timespec ts;

	setenv("PVREAD_MAX_ERROR_NS", "10000", 1);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* from the line */
	pause_ticker();
	synthetic_line_shift(&page, 40000);
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 80000;
	synthetic_write_end(&page);
	pvread_get_stats_size(&st0, sizeof(st0));
	for (i = 0; i < 2000; i++) {
		before = sys_ns(CLOCK_MONOTONIC);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		after = sys_ns(CLOCK_MONOTONIC);
		v = ns_of(&ts);
		if (!i)
			first = after;
		back += v < prev;
		prev = v;
		if (v > after + 10000) {
			/* held at the first answer until the kernel passes it */
			if (after - first < 45000)
				beyond_early++;
			else
				beyond_late++;
		}
		if (v < before)
			beyond_late++;
	}
	resume_ticker();
	pvread_get_stats_size(&st1, sizeof(st1));
	printf("# line 40 us ahead, bound 80 us, tolerance 10 us: %ld answers beyond it while held at the first lift, %ld after, %ld back; %llu for \"bound\", %llu lifted, %llu of them to the line beyond the tolerance, %llu held at it\n",
	       beyond_early, beyond_late, back,
	       (unsigned long long)(st1.slow_by_reason[PVREAD_SLOW_BOUND] -
				    st0.slow_by_reason[PVREAD_SLOW_BOUND]),
	       (unsigned long long)(st1.lifted - st0.lifted),
	       (unsigned long long)(st1.lifted_beyond - st0.lifted_beyond),
	       (unsigned long long)(st1.lift_capped - st0.lift_capped));
	return beyond_late || back ||
	       st1.slow_by_reason[PVREAD_SLOW_BOUND] -
	       st0.slow_by_reason[PVREAD_SLOW_BOUND] != 2000 ||
	       st1.lifted_beyond - st0.lifted_beyond != 1 ||
	       st1.lift_capped == st0.lift_capped;
}

/*
 * The first fallback after line readings holds the floor at the line; if
 * it cannot read the line (an update in progress that never completes),
 * the next fallback must hold instead -- not lift within the tolerance
 * only, below the line readings already returned.
 */
static int line_hold_after_stuck_update(void)
{
	struct pvread_stats st0, st1;
	struct timespec line, ts;
	long below = 0, i;

	setenv("PVREAD_MAX_ERROR_NS", "10000", 1);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pause_ticker();
	/* the bound was wrong: more than a stuck update's wait, 1-2 s */
	synthetic_line_shift(&page, 5 * NSEC_PER_SEC);
	pvread_clock_gettime(CLOCK_MONOTONIC, &line);
	pvread_get_stats_size(&st0, sizeof(st0));
	synthetic_write_begin(&page);		/* an update that does not complete */
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	synthetic_write_end(&page);
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 1000000;	/* above the tolerance */
	synthetic_write_end(&page);
	for (i = 0; i < 1000; i++) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		below += ns_of(&ts) < ns_of(&line);
	}
	resume_ticker();
	pvread_get_stats_size(&st1, sizeof(st1));
	printf("# line 5 s ahead, an update stuck at the first fallback: %ld of 1000 later fallbacks below the line reading; %llu lifted to the line beyond the tolerance\n",
	       below, (unsigned long long)(st1.lifted_beyond - st0.lifted_beyond));
	return below != 0 || st1.lifted_beyond == st0.lifted_beyond;
}

/* ... and one that never read the line gets the kernel's own answer. */
static int line_fallback_kernel_exact(void)
{
	struct timespec ts;
	long i, off = 0;
	unsigned int c;
	int64_t a, b;

	setenv("PVREAD_MAX_ERROR_NS", "0", 1);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pause_ticker();
	synthetic_line_shift(&page, 50000000);
	resume_ticker();
	for (i = 0; i < 3000; i++) {
		c = (unsigned int)i % NR_NEVER_BACK;
		a = sys_ns(never_back_clocks[c]);
		pvread_clock_gettime(never_back_clocks[c], &ts);
		b = sys_ns(never_back_clocks[c]);
		off += ns_of(&ts) < a || ns_of(&ts) > b;
	}
	printf("# tolerance 0, the line 50 ms ahead: %ld of 3000 readings outside the kernel's bracket\n",
	       off);
	return off || (int)reason_was(PVREAD_SLOW_BOUND, 0, 3000);
}

/* This thread's counts after a mode-change scenario, on a "# " line. */
static void mode_change_stats(struct pvread_stats *st, long back)
{
	pvread_get_stats(st);
	printf("# %llu fast, %llu slow (%llu seed), %llu raised; %ld back\n",
	       (unsigned long long)st->fast, (unsigned long long)st->slow,
	       (unsigned long long)st->slow_by_reason[PVREAD_SLOW_SEED],
	       (unsigned long long)st->clamped, back);
}

/*
 * line -> none -> line: the line ahead of the kernel, the kernel's
 * answers (lifted to the line's end, then held by the floor until the
 * kernel passes it), a new line behind the kernel: no clock ever goes
 * back.
 */
static int line_none_line(void)
{
	int64_t last[NR_NEVER_BACK] = { 0 }, v, until;
	struct pvread_stats st;
	struct timespec ts;
	long back = 0, i;
	unsigned int c;
	int phase;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	for (phase = 0; phase < 3; phase++) {
		pause_ticker();
		if (phase == 0)
			synthetic_line_shift(&page, 5000000);
		else if (phase == 1)
			synthetic_line_leave(&page);
		else	/* ahead of the old line's end, behind the kernel */
			synthetic_line_enter(&page, -5000000);
		resume_ticker();
		/* past the 5 ms the line was ahead, and more */
		until = sys_ns(CLOCK_MONOTONIC) + 20000000;
		for (i = 0; sys_ns(CLOCK_MONOTONIC) < until || i < 20000; i++) {
			c = (unsigned int)i % NR_NEVER_BACK;
			pvread_clock_gettime(never_back_clocks[c], &ts);
			v = ns_of(&ts);
			back += v < last[c];
			last[c] = v;
		}
	}
	mode_change_stats(&st, back);
	return back != 0 || !st.clamped;
}

/*
 * The kernel's answer, in place of the library's kernel.c (this program
 * links libpvread.a, whose member of that name the linker then leaves
 * out): the system call, as bracketed() reads the kernel's clock.
 */
static int wp_uffd;
static struct uffdio_range wp_range;
static __thread bool wp_in_hook;
/* Called once, right after the next kernel's read (kernel_first_then_line()). */
static void (*after_kernel_read)(void);

int pvread_kernel_clock_gettime(clockid_t clock, struct timespec *ts)
{
	int ret = (int)syscall(SYS_clock_gettime, clock, ts);

	kernel_reads++;
	if (after_kernel_read) {
		void (*fn)(void) = after_kernel_read;

		after_kernel_read = NULL;
		fn();
	}

	/* seed_while_holding(): the TLS page write-protected from here */
	if (wp_in_hook) {
		struct uffdio_writeprotect wp = { .range = wp_range,
						  .mode = UFFDIO_WRITEPROTECT_MODE_WP };

		wp_in_hook = false;
		ioctl(wp_uffd, UFFDIO_WRITEPROTECT, &wp);
	}
	return ret;
}

int pvread_kernel_gettimeofday(struct timeval *tv, void *tz)
{
	return (int)syscall(SYS_gettimeofday, tv, tz);
}

int pvread_kernel_has_vdso(void)
{
	return 0;
}

/*
 * A line reading while another thread's fallback holds the clock at the
 * line (mode_seen HOLDING: it has not raised the floor yet) must be that
 * fallback's kind of answer, the kernel's lifted fully to the line
 * (PVREAD_SLOW_SEED): else the hold ends (NONE), the floor below the
 * reading, and the next fallback, lifted only within the tolerance, is
 * below it.  A hold lasts a few hundred ns; this one is stopped inside,
 * at its first write to its thread's counters (stats.lifted, in the
 * static TLS just below the thread pointer): the kernel's answer (the
 * hook above) write-protects that page through userfaultfd(2), and the
 * test lets the thread go once it has read.
 */
static void *holding_reader(void *arg)
{
	/* the stack frames from here on far below the TLS page */
	volatile char deep[32768];
	struct timespec *ts = arg;
	unsigned long fs;

	deep[0] = 0;
	deep[sizeof(deep) - 1] = deep[0];
	pvread_clock_gettime(CLOCK_MONOTONIC, ts);	/* a line reading */
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	wp_range.start = (fs - 512) & ~4095UL;
	wp_range.len = ((fs + 4095) & ~4095UL) - wp_range.start;
	sem_post(&held);
	sem_wait(&go_on);
	wp_in_hook = true;
	pvread_clock_gettime(CLOCK_MONOTONIC, ts);	/* a fallback: holds */
	return NULL;
}

static int seed_while_holding(void)
{
	struct uffdio_api api = { .api = UFFD_API,
				  .features = UFFD_FEATURE_PAGEFAULT_FLAG_WP };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_WP };
	struct uffdio_writeprotect unprotect = { .mode = 0 };
	struct timespec held_ts, line_ts, seed_ts, after;
	struct pollfd pfd;
	struct uffd_msg msg;
	uint64_t seeds;
	pthread_t a;
	int bad = 0;

	setenv("PVREAD_MAX_ERROR_NS", "10000", 1);
	/* user-mode faults only: no privilege needed (Linux 5.11) */
	wp_uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	if (wp_uffd < 0)
		wp_uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (wp_uffd < 0 || ioctl(wp_uffd, UFFDIO_API, &api))
		return skip("no userfaultfd(2) with write-protect faults here");
	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	sem_init(&held, 0, 0);
	sem_init(&go_on, 0, 0);
	synthetic_line_shift(&page, 5000000);		/* 5 ms ahead */
	pvread_clock_gettime(CLOCK_MONOTONIC, &line_ts);
	pthread_create(&a, NULL, holding_reader, &held_ts);
	if (!wait_held("the reader that holds"))
		return 1;
	reg.range = wp_range;
	if (ioctl(wp_uffd, UFFDIO_REGISTER, &reg)) {
		printf("# UFFDIO_REGISTER: %s\n", strerror(errno));
		return skip("userfaultfd(2) cannot register a thread's TLS page");
	}
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 1000000;	/* above the tolerance */
	synthetic_write_end(&page);
	sem_post(&go_on);
	pfd = (struct pollfd){ .fd = wp_uffd, .events = POLLIN };
	if (poll(&pfd, 1, 10000) != 1 ||
	    read(wp_uffd, &msg, sizeof(msg)) != sizeof(msg) ||
	    msg.event != UFFD_EVENT_PAGEFAULT ||
	    !(msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)) {
		printf("# the holding reader never stopped at its counters\n");
		return 1;
	}
	/* It holds; the bound back within the tolerance; a line reading. */
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 1000;
	synthetic_write_end(&page);
	usleep(100);
	seeds = slow_for(PVREAD_SLOW_SEED);
	pvread_clock_gettime(CLOCK_MONOTONIC, &seed_ts);
	seeds = slow_for(PVREAD_SLOW_SEED) - seeds;
	unprotect.range = wp_range;
	ioctl(wp_uffd, UFFDIO_WRITEPROTECT, &unprotect);
	pthread_join(a, NULL);
	/* A fallback after the hold, lifted only within the tolerance. */
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 1000000;
	synthetic_write_end(&page);
	pvread_clock_gettime(CLOCK_MONOTONIC, &after);
	printf("# line reading %lld; during the hold a reading %lld (%llu seed), the held fallback %lld; the fallback after %lld (%lld ns from the reading during the hold)\n",
	       (long long)ns_of(&line_ts), (long long)ns_of(&seed_ts),
	       (unsigned long long)seeds, (long long)ns_of(&held_ts),
	       (long long)ns_of(&after),
	       (long long)(ns_of(&after) - ns_of(&seed_ts)));
	bad += seeds != 1;
	bad += ns_of(&after) < ns_of(&seed_ts);
	bad += ns_of(&held_ts) < ns_of(&line_ts);
	return bad != 0;
}

/*
 * Line readings on some threads while others fall back: the bound flips
 * across the tolerance as fast as a writer can, the line 1 ms ahead of
 * the kernel, so that every flip starts holds at the line (the first
 * fallback of a clock after line readings) racing with line readings and
 * other fallbacks.  No reading below one another thread had returned
 * before it began, and none below the same thread's last.  (A line
 * reading inside another thread's hold, the seed, needs that thread
 * preempted within a few hundred ns: seldom met here, seed_while_holding()
 * stops a hold to meet it.)
 */
#define SEED_THREADS 4
#define SEED_MS 1000

static _Atomic int64_t seed_latest;
static _Atomic long seed_back, seed_back_own, seed_reads, seed_seeds;
static atomic_bool seed_stop;

static void *seed_reader(void *arg)
{
	struct pvread_stats st;
	struct timespec ts;
	int64_t seen, v, prev = 0;
	long i, back = 0, own = 0;

	(void)arg;
	for (i = 0; !atomic_load_explicit(&seed_stop, memory_order_relaxed);
	     i++) {
		seen = atomic_load(&seed_latest);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		v = ns_of(&ts);
		back += v < seen;
		own += v < prev;
		prev = v;
		while (v > seen &&
		       !atomic_compare_exchange_weak(&seed_latest, &seen, v))
			;
	}
	pvread_get_stats(&st);
	atomic_fetch_add(&seed_back, back);
	atomic_fetch_add(&seed_back_own, own);
	atomic_fetch_add(&seed_reads, i);
	atomic_fetch_add(&seed_seeds,
			 (long)st.slow_by_reason[PVREAD_SLOW_SEED]);
	return NULL;
}

static int holds_and_line_readings(void)
{
	pthread_t t[SEED_THREADS];
	struct timespec pause = { 0, 20000 };
	int64_t until;
	long flips = 0;
	int i;

	setenv("PVREAD_MAX_ERROR_NS", "10000", 1);
	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	synthetic_line_shift(&page, 1000000);
	for (i = 0; i < SEED_THREADS; i++)
		pthread_create(&t[i], NULL, seed_reader, NULL);
	until = sys_ns(CLOCK_MONOTONIC) + SEED_MS * 1000000LL;
	while (sys_ns(CLOCK_MONOTONIC) < until) {
		synthetic_write_begin(&page);
		page.hdr->error_bound_ns = flips & 1 ? 1000 : 1000000;
		synthetic_write_end(&page);
		if (!(++flips & 255)) {
			synthetic_tick(&page);
			synthetic_line_update(&page);
		}
		if (flips & 1)
			nanosleep(&pause, NULL);
	}
	atomic_store(&seed_stop, true);
	for (i = 0; i < SEED_THREADS; i++)
		pthread_join(t[i], NULL);
	printf("# %d threads, %ld bound flips in %d ms: %ld reads, %ld seeds, %ld behind a reading already returned (%ld behind the thread's own)\n",
	       SEED_THREADS, flips, SEED_MS, atomic_load(&seed_reads),
	       atomic_load(&seed_seeds), atomic_load(&seed_back),
	       atomic_load(&seed_back_own));
	return atomic_load(&seed_back) || atomic_load(&seed_back_own);
}

/*
 * Readers on many threads, the line re-anchored as fast as the ticker can:
 * no reading below one another thread had returned before it began.
 */
#define CT_THREADS 8
#define CT_MS 500

static _Atomic int64_t ct_latest[NR_NEVER_BACK];
static _Atomic long ct_back, ct_fast, ct_slow;

static void *cross_thread_reader(void *arg)
{
	struct pvread_stats st;
	struct timespec ts;
	long i, back = 0;
	unsigned int c;
	int64_t seen, v;

	int64_t until = sys_ns(CLOCK_MONOTONIC) + CT_MS * 1000000LL;

	(void)arg;
	for (i = 0; (i & 1023) || sys_ns(CLOCK_MONOTONIC) < until; i++) {
		c = (unsigned int)i % NR_NEVER_BACK;
		seen = atomic_load(&ct_latest[c]);
		pvread_clock_gettime(never_back_clocks[c], &ts);
		v = ns_of(&ts);
		if (v < seen)
			back++;
		while (v > seen &&
		       !atomic_compare_exchange_weak(&ct_latest[c], &seen, v))
			;
	}
	pvread_get_stats(&st);
	atomic_fetch_add(&ct_back, back);
	atomic_fetch_add(&ct_fast, i - (long)st.slow);
	atomic_fetch_add(&ct_slow, (long)st.slow);
	return NULL;
}

static int line_cross_thread(void)
{
	pthread_t t[CT_THREADS];
	uint64_t anchors;
	int i;

	if (adopt(PVREAD_MODE_LINE, 1))
		return 1;
	anchors = page.hdr->line.anchors;
	for (i = 0; i < CT_THREADS; i++)
		pthread_create(&t[i], NULL, cross_thread_reader, NULL);
	for (i = 0; i < CT_THREADS; i++)
		pthread_join(t[i], NULL);
	anchors = page.hdr->line.anchors - anchors;
	printf("# %d threads for %d ms, %llu re-anchorings: %ld fast, %ld slow, %ld behind a reading already returned\n",
	       CT_THREADS, CT_MS, (unsigned long long)anchors,
	       atomic_load(&ct_fast), atomic_load(&ct_slow),
	       atomic_load(&ct_back));
	return atomic_load(&ct_back) != 0 || anchors < 200 ||
	       atomic_load(&ct_slow) > atomic_load(&ct_fast) / 1000;
}

/*
 * pvread_get_info_size(): a caller compiled against a later, larger struct
 * gets the fields this library knows and zeros after them; an older,
 * smaller one only its own bytes; a size without the first field, EINVAL.
 */
static int info_sizes(void)
{
	struct {
		struct pvread_info info;
		unsigned char later[64];
	} big;
	union {
		struct pvread_info info;
		unsigned char bytes[sizeof(struct pvread_info)];
	} small;
	struct pvread_info info;
	unsigned int i;
	int bad = 0;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	memset(&big, 0xa5, sizeof(big));
	memset(&small, 0xa5, sizeof(small));
	bad += pvread_get_info_size(&big.info, sizeof(big)) != 0;
	for (i = 0; i < sizeof(big.later); i++)
		bad += big.later[i] != 0;
	bad += big.info.mapped != 1 || big.info.mode != PVREAD_MODE_LINE;
	bad += pvread_get_info_size(&small.info, 8) != 0;
	for (i = 8; i < sizeof(small.bytes); i++)
		bad += small.bytes[i] != 0xa5;
	bad += small.info.mapped != 1;
	errno = 0;
	bad += pvread_get_info_size(&info, 2) != -1 || errno != EINVAL;
	bad += pvread_get_info(&info) != 0 || !info.mapped ||
	       info.mode != PVREAD_MODE_LINE;
	printf("# %d wrong\n", bad);
	return bad != 0;
}

/*
 * header.disruptions (resumes since load), new in ABI version 3:
 * pvread_get_info_size() gives the page's count, as it stands at each
 * call; pvread_get_info(), which fills libpvread 0.2's struct, leaves it
 * alone.  stable_record is 0, whatever the page's pad holds.
 */
static int info_disruptions(void)
{
	union {
		struct pvread_info info;
		unsigned char bytes[sizeof(struct pvread_info)];
	} u;
	struct pvread_info info;
	unsigned int i, untouched = 0;
	int bad = 0;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	synthetic_write_begin(&page);
	page.hdr->disruptions = 3;
	/* ABI 2's stable record lived here; no ticker reads it meanwhile. */
	page.hdr->priv_tk_offset = 0xdeadbeef;
	synthetic_write_end(&page);
	bad += pvread_get_info_size(&info, sizeof(info)) != 0;
	printf("# the page's disruptions 3: pvread_get_info_size says %llu, stable_record %u\n",
	       (unsigned long long)info.disruptions, info.stable_record);
	bad += info.disruptions != 3 || info.stable_record != 0 ||
	       info.mode != PVREAD_MODE_LINE;
	synthetic_write_begin(&page);
	page.hdr->disruptions = 4;
	synthetic_write_end(&page);
	bad += pvread_get_info_size(&info, sizeof(info)) != 0 ||
	       info.disruptions != 4;
	memset(&u, 0xa5, sizeof(u));
	bad += pvread_get_info(&u.info) != 0 || u.info.mode != PVREAD_MODE_LINE;
	for (i = offsetof(struct pvread_info, disruptions); i < sizeof(u); i++)
		untouched += u.bytes[i] == 0xa5;
	printf("# then 4: pvread_get_info_size says %llu; pvread_get_info left %u of its %zu bytes alone\n",
	       (unsigned long long)info.disruptions, untouched,
	       sizeof(u) - offsetof(struct pvread_info, disruptions));
	bad += untouched != sizeof(u) - offsetof(struct pvread_info, disruptions);
	return bad != 0;
}

/*
 * Pages pvread_use_page() refuses (EINVAL), leaving the choice open: one
 * of ABI version 2 (per-CPU and stable modes, mode numbers apart) or any
 * other, a wrong magic, too short, misaligned records.  The page itself
 * then, and after it none (EBUSY); a read without a page chooses
 * /dev/pvread (or nothing), and after it none either.
 */
static int use_page_errors(void)
{
	static const uint32_t versions[] = { 0, 1, 2, 3, 5, UINT32_MAX };
	struct timespec ts;
	uint32_t nr, off;
	char junk[8192] = { 0 };
	unsigned int i;
	int status;
	pid_t pid;

	if (pvread_use_page(junk, sizeof(junk)) != -1 || errno != EINVAL)
		return 1;
	if (synthetic_init(&page, PVREAD_MODE_LINE))
		return 1;
	if (pvread_use_page(page.hdr, 100) != -1 || errno != EINVAL)
		return 1;
	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		page.hdr->abi_version = versions[i];
		errno = 0;
		if (pvread_use_page(page.hdr, page.size) != -1 ||
		    errno != EINVAL) {
			printf("# ABI version %u: not refused\n", versions[i]);
			return 1;
		}
	}
	page.hdr->abi_version = PVREAD_ABI_VERSION;
	page.hdr->magic ^= 1;
	if (pvread_use_page(page.hdr, page.size) != -1 || errno != EINVAL)
		return 1;
	page.hdr->magic ^= 1;
	/* Records the CPU would read misaligned (all within the page): refused. */
	nr = page.hdr->nr_records;
	off = page.hdr->record_offset;
	page.hdr->nr_records = 1;
	page.hdr->record_offset = off - 4;
	if (pvread_use_page(page.hdr, page.size) != -1 || errno != EINVAL)
		return 1;
	page.hdr->record_offset = off - 8;
	page.hdr->record_stride += 4;
	if (pvread_use_page(page.hdr, page.size) != -1 || errno != EINVAL)
		return 1;
	page.hdr->record_stride -= 4;
	page.hdr->record_offset = off;
	page.hdr->nr_records = nr;
	pid = fork();
	if (pid == 0) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts); /* chooses /dev/pvread */
		_exit(pvread_use_page(page.hdr, page.size) != -1 ||
		      errno != EBUSY);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	if (pvread_use_page(page.hdr, page.size))
		return 1;
	synthetic_tick(&page);
	return pvread_use_page(page.hdr, page.size) != -1 || errno != EBUSY ||
	       bracketed(CLOCK_MONOTONIC, 1000, FAST);
}

/* Clocks the page does not mirror, and bad ids, answer exactly like libc. */
static int passthrough(void)
{
	struct timespec a, b;
	int ra, rb, ea, eb;

	if (adopt(PVREAD_MODE_LINE, 1000))
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

/*
 * A call that succeeds leaves errno alone, as libc's does -- also the
 * first, which tries to open /dev/pvread (absent on most hosts: ENOENT)
 * and reads /proc/self/timens_offsets.
 */
static int errno_kept(void)
{
	struct timespec ts;
	int bad = 0;

	errno = EXDEV;
	bad += pvread_clock_gettime(CLOCK_MONOTONIC, &ts) != 0;
	printf("# first call: errno %s afterwards (EXDEV before)\n",
	       strerrorname_np(errno) ?: "?");
	bad += errno != EXDEV;
	errno = EXDEV;
	bad += pvread_clock_gettime(CLOCK_BOOTTIME, &ts) != 0;
	bad += errno != EXDEV;
	return bad != 0;
}

/* The library keeps working in a child forked after it chose its page. */
static int after_fork(void)
{
	pid_t pid;
	int status;

	if (adopt(PVREAD_MODE_LINE, 1000) ||
	    bracketed(CLOCK_MONOTONIC, 1000, FAST))
		return 1;
	pid = fork();
	if (pid == 0) {
		/* The ticker thread is gone here: tick by hand. */
		synthetic_tick(&page);
		_exit(bracketed(CLOCK_MONOTONIC, 1000, FAST) != 0);
	}
	waitpid(pid, &status, 0);
	return !WIFEXITED(status) || WEXITSTATUS(status);
}

/*
 * getenv, as the library calls it while it adopts a page: a thread that
 * sets hold_in_getenv stops there, mid-mapping, until the test lets it go.
 */
static __thread bool hold_in_getenv;
static __thread bool raise_in_getenv;	/* raise(SIGUSR1) there */

char *secure_getenv(const char *name)
{
	static char *(*libc)(const char *);

	if (!libc)
		*(void **)&libc = dlsym(RTLD_NEXT, "secure_getenv");
	if (raise_in_getenv && !strcmp(name, "PVREAD_MAX_ERROR_NS"))
		raise(SIGUSR1);
	if (hold_in_getenv && !strcmp(name, "PVREAD_MAX_ERROR_NS")) {
		hold_in_getenv = false;
		sem_post(&held);
		sem_wait(&go_on);
	}
	return libc(name);
}

static void *mapping_thread(void *arg)
{
	hold_in_getenv = true;
	*(int *)arg = pvread_use_page(page.hdr, page.size);
	return NULL;
}

/*
 * fork() while another thread is mapping: the child has no such thread,
 * so the library must map afresh there -- not wait for ever, answering
 * every read from libc.
 */
static int fork_while_mapping(void)
{
	pthread_t mapper;
	int status, mapped = -1;
	pid_t pid;

	if (synthetic_init(&page, PVREAD_MODE_LINE))
		return 1;
	sem_init(&held, 0, 0);
	sem_init(&go_on, 0, 0);
	pthread_create(&mapper, NULL, mapping_thread, &mapped);
	if (!wait_held("the mapping thread (getenv)"))
		return 1;
	pid = fork();
	if (pid == 0) {
		int r = pvread_use_page(page.hdr, page.size);

		printf("# in the child: pvread_use_page %d (%s)\n", r,
		       r ? strerror(errno) : "mapped");
		synthetic_tick(&page);
		_exit(r || bracketed(CLOCK_MONOTONIC, 1000, FAST));
	}
	waitpid(pid, &status, 0);
	sem_post(&go_on);
	pthread_join(mapper, NULL);
	synthetic_tick(&page);
	return mapped || !WIFEXITED(status) || WEXITSTATUS(status) ||
	       bracketed(CLOCK_MONOTONIC, 1000, FAST);
}

/*
 * A writer stalled mid-update (the seq stays odd): the first read waits
 * for it as the kernel would, then falls back ("busy"); later reads fall
 * back at once ("stuck") while the seq says the same; pvread_get_info()
 * gives up (EAGAIN) instead of looping.  Once the update completes, reads
 * are fast again.
 */
/*
 * A thread's CPU-time clock: its id is negative, and its low 5 bits are a
 * page clock's for one thread in four (a tid of 3 modulo 4 makes them
 * MONOTONIC_COARSE's).  Read through pvread_clock_gettime() and pvread_ns()
 * by threads in turn until their tids have taken every value modulo 4, in
 * line mode and in mode none: the kernel's answer, within the system calls
 * around it, every time.
 */
static unsigned int tids_seen;	/* a bit per tid modulo 4 */

static void *read_own_cpu_clock(void *arg)
{
	long *bad = arg;
	struct timespec ts;
	clockid_t c;
	int64_t lo, hi, v, w;

	tids_seen |= 1U << (syscall(SYS_gettid) & 3);
	pthread_getcpuclockid(pthread_self(), &c);
	lo = sys_ns(c);
	v = pvread_clock_gettime(c, &ts) ? -1 : ns_of(&ts);
	w = (int64_t)pvread_ns(c);
	hi = sys_ns(c);
	if (v < lo || v > hi || w < lo || w > hi) {
		printf("# clock %d (low bits %d): %lld and %lld not within [%lld, %lld]\n",
		       (int)c, (int)c & 31, (long long)v, (long long)w,
		       (long long)lo, (long long)hi);
		++*bad;
	}
	return NULL;
}

static int cpu_clocks_of_threads(void)
{
	long bad = 0;
	int mode, i;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	for (mode = 0; mode < 2; mode++) {
		struct timespec ts;

		if (mode)
			set_mode(PVREAD_MODE_NONE);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_ns(CLOCK_MONOTONIC);
		tids_seen = 0;
		for (i = 0; i < 1000 && tids_seen != 0xf; i++) {
			pthread_t t;

			if (pthread_create(&t, NULL, read_own_cpu_clock, &bad))
				return 1;
			pthread_join(t, NULL);
		}
		printf("# %s: %d threads' CPU clocks, their tids every value modulo 4: %s\n",
		       mode ? "mode none" : "line mode", i,
		       tids_seen == 0xf ? "yes" : "no");
		bad += tids_seen != 0xf;
	}
	printf("# %ld wrong\n", bad);
	return bad != 0;
}

/* @seq: the header's before the update, or -1 for the page's own. */
static int writer_stuck_from(int64_t seq)
{
	uint64_t busy, stuck;
	struct pvread_info info;
	struct timespec ts;
	int bad = 0, r;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	/*
	 * From @seq, the first read is the stuck update's: this copy has
	 * checked no seq yet (its word names none, not seq 1).
	 */
	if (seq >= 0)
		page.hdr->seq = (uint32_t)seq;
	else
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	busy = slow_for(PVREAD_SLOW_BUSY);
	stuck = slow_for(PVREAD_SLOW_STUCK);
	synthetic_write_begin(&page);	/* and no end for a while */
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	bad += reason_was(PVREAD_SLOW_BUSY, busy, 1);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_clock_gettime(CLOCK_BOOTTIME, &ts);
	bad += reason_was(PVREAD_SLOW_STUCK, stuck, 2);
	errno = 0;
	r = pvread_get_info(&info);
	printf("# pvread_get_info with the writer stuck: %d (%s), mapped %d, fast %d\n",
	       r, strerror(errno), info.mapped, info.fast);
	bad += r != -1 || errno != EAGAIN || !info.mapped || info.fast;
	synthetic_write_end(&page);
	synthetic_tick(&page);
	synthetic_line_update(&page);	/* the wait outlasted the line's span */
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST) != 0;
	bad += pvread_get_info(&info) != 0 || !info.fast;
	return bad != 0;
}

static int writer_stuck(void)
{
	return writer_stuck_from(-1);
}

/* The same from seq 0: the update is the first odd seq, 1. */
static int writer_stuck_at_1(void)
{
	return writer_stuck_from(0);
}

/*
 * Values no module writes, one at a time, into a line page: each read is
 * the kernel's ("invalid"), at once and within the syscalls -- never a
 * wrapped product, a shift the C language leaves undefined, or a loop.
 * And a record with a shift no Xen writes: pvread_sample_pvclock() has
 * no record to evaluate (ENODEV).
 */
static int hostile_page(void)
{
	static const struct {
		const char *what;
		clockid_t clock;
	} cases[] = {
		{ "line MONOTONIC base a second past its second", CLOCK_MONOTONIC },
		{ "line raw_shift 33", CLOCK_MONOTONIC_RAW },
		{ "MONOTONIC_COARSE base 2^63 ns", CLOCK_MONOTONIC_COARSE },
		{ "MONOTONIC_COARSE base 2^63 ns, at which MONOTONIC is held", CLOCK_MONOTONIC },
		{ "REALTIME_COARSE base a second past its second", CLOCK_REALTIME_COARSE },
		{ "line MONOTONIC base 2^62 s, beyond the kernel's s64 ns", CLOCK_MONOTONIC },
		{ "line BOOTTIME base -1 s", CLOCK_BOOTTIME },
	};
	struct pvread_header *h;
	struct pvread_record *r;
	struct pvread_header good;
	struct pvread_sample smp;
	uint64_t before;
	unsigned int i;
	long bad = 0;
	int ret;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	h = page.hdr;
	good = *h;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		synthetic_write_begin(&page);
		switch (i) {
		case 0:
			h->line.base[CLOCK_MONOTONIC].snsec =
				(uint64_t)NSEC_PER_SEC << 32;
			break;
		case 1:
			h->line.raw_shift = 33;
			break;
		case 2:
		case 3:
			h->tk.base[CLOCK_MONOTONIC_COARSE].snsec = 1ULL << 63;
			break;
		case 4:
			h->tk.base[CLOCK_REALTIME_COARSE].snsec = NSEC_PER_SEC;
			break;
		case 5:
			h->line.base[CLOCK_MONOTONIC].sec = 1LL << 62;
			break;
		case 6:
			h->line.base[CLOCK_BOOTTIME].sec = -1;
			break;
		}
		synthetic_write_end(&page);
		before = slow_for(PVREAD_SLOW_INVALID);
		printf("# %s:\n", cases[i].what);
		bad += bracketed(cases[i].clock, 1000, SLOW);
		bad += reason_was(PVREAD_SLOW_INVALID, before, 1000);
		synthetic_write_begin(&page);
		memcpy(&h->tk, &good.tk, sizeof(h->tk));
		memcpy(&h->line, &good.line, sizeof(h->line));
		synthetic_write_end(&page);
	}
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST);
	pin(0);
	r = synthetic_record(&page, 0);
	for (i = 0; i < 2; i++) {
		r->pvclock.version++;
		r->pvclock.tsc_shift = i ? -100 : 100;
		r->pvclock.version++;
		errno = 0;
		ret = pvread_sample_pvclock(&smp);
		printf("# record shift %d: pvread_sample_pvclock %d (%s)\n",
		       r->pvclock.tsc_shift, ret, strerror(errno));
		bad += ret != -1 || errno != ENODEV;
	}
	return bad != 0;
}

/* The tolerance PVREAD_MAX_ERROR_NS=@value gives a new process. */
static uint64_t tolerance_for(const char *value)
{
	struct pvread_info info;
	uint64_t *got = mmap(NULL, sizeof(*got), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t v;
	pid_t pid;

	if (got == MAP_FAILED)
		return 0;
	*got = 0;
	pid = fork();
	if (pid == 0) {
		setenv("PVREAD_MAX_ERROR_NS", value, 1);
		if (adopt(PVREAD_MODE_LINE, 0))
			_exit(1);
		pvread_get_info(&info);
		*got = info.tolerance_ns;
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	v = *got;
	munmap(got, sizeof(*got));
	return v;
}

/* Decimal digits only; anything else is the default, 10000 ns. */
static int tolerance_parsing(void)
{
	static const struct {
		const char *value;
		uint64_t want;
	} cases[] = {
		{ "250", 250 }, { "0", 0 }, { "0100000", 100000 },
		{ "18446744073709551615", UINT64_MAX },
		{ " -1", 10000 }, { "-1", 10000 }, { "+5", 10000 },
		{ "0x10", 10000 }, { "1e6", 10000 }, { "10 ", 10000 },
		{ "18446744073709551616", 10000 }, { "", 10000 },
	};
	unsigned int i;
	int bad = 0;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t got = tolerance_for(cases[i].value);

		printf("# PVREAD_MAX_ERROR_NS=\"%s\": tolerance %llu ns (want %llu)\n",
		       cases[i].value, (unsigned long long)got,
		       (unsigned long long)cases[i].want);
		bad += got != cases[i].want;
	}
	return bad != 0;
}

/* Is @v within a second of the kernel's @clock now? */
static bool near_kernel(clockid_t clock, const struct timespec *v)
{
	int64_t d = ns_of(v) - sys_ns(clock);

	return d > -NSEC_PER_SEC && d < NSEC_PER_SEC;
}

/*
 * A child made after unshare(CLONE_NEWTIME) lives in the new time
 * namespace: its CLOCK_MONOTONIC (and _RAW, _COARSE) and BOOTTIME are the
 * root's plus the offsets, as the vDSO and the system call say.  The
 * library adds them.  The floors the parent left (ahead of the child's
 * BOOTTIME by the negative offset) are not the child's: it starts afresh.
 */
static int time_namespace(void)
{
	static const clockid_t shifted[] = { CLOCK_MONOTONIC,
		CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_REALTIME };
	int64_t boot_off = -(sys_ns(CLOCK_BOOTTIME) / NSEC_PER_SEC / 2);
	struct timespec ts;
	char offsets[128];
	unsigned int i;
	int fd, status, len;
	pid_t pid;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		if (bracketed(shifted[i], 100, FAST))
			return 1;
	pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	/* Fallbacks raise the floors: the parent leaves them set. */
	set_mode(PVREAD_MODE_NONE);
	for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		pvread_clock_gettime(shifted[i], &ts);
	set_mode(PVREAD_MODE_LINE);
	if (unshare(CLONE_NEWTIME))
		return skip(errno == EPERM ? "unshare(CLONE_NEWTIME): not permitted (needs CAP_SYS_ADMIN)" :
			    "unshare(CLONE_NEWTIME): no time namespaces in this kernel");
	if (boot_off > -2)
		boot_off = 3600;
	len = snprintf(offsets, sizeof(offsets),
		       "monotonic 86400 0\nboottime %lld 0\n", (long long)boot_off);
	fd = open("/proc/self/timens_offsets", O_WRONLY);
	if (fd < 0 || write(fd, offsets, len) != len) {
		printf("# /proc/self/timens_offsets: %s\n", strerror(errno));
		return 1;
	}
	close(fd);
	printf("# offsets: monotonic +86400 s, boottime %+lld s\n",
	       (long long)boot_off);
	/*
	 * The page is the root namespace's clock, which the child cannot
	 * read to tick it: a fresh page, not torn by the ticker at the fork,
	 * serves it for the few ms it reads.
	 */
	pause_ticker();
	synthetic_tick(&page);
	pid = fork();
	if (pid == 0) {
		long bad = 0;

		for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
			bad += bracketed(shifted[i], 1000, FAST);
		pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
		printf("# MONOTONIC_COARSE %lld.%09ld, the kernel's %lld\n",
		       (long long)ts.tv_sec, ts.tv_nsec,
		       (long long)sys_ns(CLOCK_MONOTONIC_COARSE));
		bad += !near_kernel(CLOCK_MONOTONIC_COARSE, &ts);
		_exit(bad != 0);
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	/*
	 * Another child reads REALTIME first, which its namespace does not
	 * shift: the page checked then must not make MONOTONIC's line record
	 * (the parent's clock) before its offsets are known.
	 */
	pid = fork();
	if (pid == 0) {
		long bad = bracketed(CLOCK_REALTIME, 1000, FAST);

		for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
			bad += bracketed(shifted[i], 1000, FAST);
		_exit(bad != 0);
	}
	waitpid(pid, &status, 0);
	return !WIFEXITED(status) || WEXITSTATUS(status);
}

/*
 * A process that unshares its time namespace before its first read stays
 * in the old one, though /proc/self/timens_offsets already shows the new
 * one's: its clocks must be its own (the kernel's answer), not shifted by
 * its children's offsets.  A child made by _Fork(), which runs no fork
 * handlers, is in the new namespace: its clocks are shifted, by the
 * library too.
 */
static int own_time_namespace(void)
{
	static const clockid_t shifted[] = { CLOCK_MONOTONIC,
		CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME };
	static const char offsets[] = "monotonic 86400 0\nboottime 86400 0\n";
	unsigned int i;
	int fd, status;
	long bad = 0;
	pid_t pid;

	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    synthetic_start(&page, 1000))
		return 1;
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
	if (pvread_use_page(page.hdr, page.size))
		return 1;
	printf("# in the old namespace, the children's offsets +86400 s:\n");
	for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		bad += bracketed(shifted[i], 1000, ANY);
	bad += bracketed(CLOCK_REALTIME, 1000, FAST);
	pause_ticker();
	synthetic_tick(&page);
	pid = _Fork();
	if (pid == 0) {
		long b = 0;

		printf("# in a child of _Fork(), in the new namespace:\n");
		for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
			b += bracketed(shifted[i], 1000, FAST);
		_exit(b != 0);
	}
	waitpid(pid, &status, 0);
	return bad || !WIFEXITED(status) || WEXITSTATUS(status);
}

/* Cancel this thread at its next cancellation point, then call @fn. */
static void *cancelled_first_call(void *arg)
{
	int (*fn)(void) = arg;

	pthread_cancel(pthread_self());
	if (fn())
		return (void *)2;
	return (void *)1;	/* not cancelled inside: came back */
}

static int first_read(void)
{
	struct timespec ts;

	return pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
}

static int first_use_page(void)
{
	return pvread_use_page(page.hdr, page.size);
}

/*
 * The library's first call makes system calls (open, read, close): none
 * may be a cancellation point -- POSIX does not let clock_gettime() be
 * one, and a cancel in the middle would leave the mapping half made, the
 * library off for the process.  A thread with a cancel pending comes back
 * from its first read, and from pvread_use_page(), which took the page.
 */
static int first_call_cancelled(void)
{
	pthread_t t;
	void *got;
	int bad = 0;

	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    synthetic_start(&page, 1000))
		return 1;
	pthread_create(&t, NULL, cancelled_first_call, (void *)first_use_page);
	pthread_join(t, &got);
	printf("# pvread_use_page() with a cancel pending: %s\n",
	       got == PTHREAD_CANCELED ? "cancelled inside" :
	       got == (void *)1 ? "came back, page taken" : "came back, failed");
	bad += got != (void *)1;
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST) != 0;
	return bad != 0;
}

static int first_read_cancelled(void)
{
	pthread_t t;
	void *got;

	pthread_create(&t, NULL, cancelled_first_call, (void *)first_read);
	pthread_join(t, &got);
	printf("# the first read with a cancel pending: %s\n",
	       got == PTHREAD_CANCELED ? "cancelled inside" : "came back");
	return got != (void *)1;
}

/*
 * A signal whose handler siglongjmp()s out, raised while the first call
 * maps (in secure_getenv(), held below): the library blocks signals while
 * its state is half made, so the handler runs after, and the page is
 * taken and read.
 */
static sigjmp_buf jumped_out;

static void jump_out(int sig)
{
	(void)sig;
	siglongjmp(jumped_out, 1);
}

static int first_call_longjmp(void)
{
	struct sigaction sa = { .sa_handler = jump_out };
	volatile int r = -2;

	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    synthetic_start(&page, 1000))
		return 1;
	sigaction(SIGUSR1, &sa, NULL);
	if (!sigsetjmp(jumped_out, 1)) {
		raise_in_getenv = true;
		r = pvread_use_page(page.hdr, page.size);
	}
	raise_in_getenv = false;
	printf("# siglongjmp() out of the first call: pvread_use_page %s\n",
	       r == 0 ? "had returned 0" :
	       r == -2 ? "left midway" : "failed");
	return bracketed(CLOCK_MONOTONIC, 1000, FAST) != 0;
}

/*
 * A record whose update never completes (its version stays odd): the
 * first sample of it waits as the kernel would, then gives up (EAGAIN);
 * later ones, and pvread_get_record(), give up at once.  The clocks,
 * read from the line, stay fast meanwhile.
 */
static int record_stuck(void)
{
	struct pvread_sample smp;
	struct pvread_record *r, rec;
	int64_t t0, t1, t2;
	int bad = 0, r1, e1, r2, e2, r3, e3;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	pin(0);
	bad += pvread_sample_pvclock(&smp) != 0;
	r = synthetic_record(&page, 0);
	r->pvclock.version |= 1;	/* and no end */
	t0 = sys_ns(CLOCK_MONOTONIC);
	r1 = pvread_sample_pvclock(&smp);
	e1 = errno;
	t1 = sys_ns(CLOCK_MONOTONIC);
	r2 = pvread_sample_pvclock(&smp);
	e2 = errno;
	r3 = pvread_get_record(0, &rec);
	e3 = errno;
	t2 = sys_ns(CLOCK_MONOTONIC);
	printf("# record stuck odd: the first sample %d (%s) in %lld ms; the next %d (%s), pvread_get_record %d (%s), in %lld ms\n",
	       r1, strerror(e1), (long long)(t1 - t0) / 1000000,
	       r2, strerrorname_np(e2) ?: "?", r3, strerrorname_np(e3) ?: "?",
	       (long long)(t2 - t1) / 1000000);
	bad += r1 != -1 || e1 != EAGAIN || r2 != -1 || r3 != -1 ||
	       e3 != EAGAIN;
	bad += t2 - t1 > 100000000;	/* no wait: far below one */
	r->pvclock.version++;	/* synthetic_tick() reads record 0 */
	synthetic_tick(&page);
	synthetic_line_update(&page);	/* the wait outlasted the line's span */
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST) != 0;
	bad += pvread_sample_pvclock(&smp) != 0;
	return bad != 0;
}

/* pvread_get_record() writes every byte: no padding left as it was. */
static int record_copy_whole(void)
{
	struct pvread_record rec;
	unsigned char *b = (unsigned char *)&rec;
	unsigned int i, junk = 0;

	if (adopt(PVREAD_MODE_LINE, 0))
		return 1;
	synthetic_record(&page, 0)->registered_on = 0;
	memset(&rec, 0xa5, sizeof(rec));
	if (pvread_get_record(0, &rec))
		return 1;
	for (i = offsetof(struct pvread_record, pad); i < sizeof(rec); i++)
		junk += b[i] == 0xa5;
	printf("# registered_on %u, %u bytes of padding and reserved left 0xa5\n",
	       rec.registered_on, junk);
	return junk || rec.registered_on != 0;
}

/*
 * The first fallback after line readings is lifted to the line at the TSC
 * it reads, not ahead of it: the line 50 us ahead of the kernel, its bound
 * (20 us) above the tolerance (10 us), so that the line is still there to
 * lift to.  The answer is at most the line's value at a TSC read right
 * after it returned; a lift 4096 ticks ahead of its TSC (1.3-4 us) was
 * above it every time.  100 rounds, each back in LINE first.
 */
static int line_first_fallback_now(void)
{
	long ahead = 0, below = 0, rounds = 0, i;
	int64_t worst = INT64_MIN;
	struct timespec ts;
	uint64_t before, after;

	setenv("PVREAD_MAX_ERROR_NS", "10000", 1);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pause_ticker();
	synthetic_line_shift(&page, 50000);
	for (i = 0; i < 100; i++) {
		synthetic_write_begin(&page);
		page.hdr->error_bound_ns = 1000;
		synthetic_write_end(&page);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* LINE noted */
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		synthetic_write_begin(&page);
		page.hdr->error_bound_ns = 20000;
		synthetic_write_end(&page);
		before = __rdtsc();
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* "bound" */
		_mm_lfence();
		after = __rdtsc();
		_mm_lfence();
		rounds++;
		if (ns_of(&ts) > synthetic_line_ns(&page, CLOCK_MONOTONIC, after))
			ahead++;
		if (ns_of(&ts) < synthetic_line_ns(&page, CLOCK_MONOTONIC, before))
			below++;
		if (ns_of(&ts) - synthetic_line_ns(&page, CLOCK_MONOTONIC,
						   after) > worst)
			worst = ns_of(&ts) -
				synthetic_line_ns(&page, CLOCK_MONOTONIC, after);
	}
	resume_ticker();
	printf("# line 50 us ahead, bound above the tolerance: %ld of %ld first fallbacks ahead of the line at the TSC after them (worst %+lld ns), %ld below it at the TSC before\n",
	       ahead, rounds, (long long)worst, below);
	return ahead || below;
}

/*
 * A process that traps rdtsc (PR_SET_TSC, PR_TSC_SIGSEGV) and handles the
 * SIGSEGV, emulating rdtsc and rdtscp (as record-and-replay tools do), is
 * not killed at its first fallback after line readings: no signal is
 * blocked around a TSC read.  A fallback that blocked every signal there
 * had the kernel kill it.
 */
static volatile sig_atomic_t tsc_traps;
/* Called once, at the next trap, with the TSC enabled: may change it. */
static void (*volatile at_next_trap)(uint64_t *tsc);

/* The TSC the last trapped read returned. */
static uint64_t last_trapped_tsc;

static void emulate_rdtsc(int sig, siginfo_t *si, void *uc)
{
	int len = tsc_trap_len(uc);
	uint64_t tsc;

	(void)sig;
	(void)si;
	tsc_trap(false);
	tsc = __rdtsc();
	if (at_next_trap) {
		void (*hook)(uint64_t *) = at_next_trap;

		at_next_trap = NULL;
		hook(&tsc);
	}
	tsc_trap(true);
	tsc_trap_return(uc, len, tsc);
	last_trapped_tsc = tsc;
	tsc_traps++;
}

static int fallback_with_rdtsc_trapped(void)
{
	struct sigaction sa = { .sa_sigaction = emulate_rdtsc,
				.sa_flags = SA_SIGINFO };
	struct timespec line, ts;
	const char *no_trap = tsc_trap_missing();

	if (no_trap)
		return skip(no_trap);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pvread_clock_gettime(CLOCK_MONOTONIC, &line);
	pvread_clock_gettime(CLOCK_MONOTONIC, &line);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	pause_ticker();
	synthetic_line_leave(&page);		/* the next read falls back */
	prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
	printf("# rdtsc trapped: the first fallback after line readings came back, %d trap(s) handled, %s the line reading\n",
	       (int)tsc_traps, ns_of(&ts) >= ns_of(&line) ? "not below" : "BELOW");
	return !tsc_traps || ns_of(&ts) < ns_of(&line);
}

/*
 * The fast path reads the TSC first, before the state and the page (the
 * hint pvread_tsc_first, set by a line reading of the clock).  A TSC taken
 * before an update finds the page at a seq this copy has not checked
 * (pvread_line_checked): the read checks it, and reads again from the seq,
 * the TSC after it: the new line at that second TSC, exactly, with no
 * retry (the update was not met mid-read) and no fallback.  The update is
 * made from the trap of the read's own first TSC read (PR_SET_TSC).  The
 * next read, at the seq checked, reads the TSC once.  At a seq already
 * checked, a TSC before the anchor reads as the anchor
 * (line_before_anchor()).
 */
/* The clock the two tests below read: MONOTONIC's record, or the page. */
static clockid_t tf_clock = CLOCK_MONOTONIC;

static uint64_t trapped_tsc;

static void update_line(uint64_t *tsc)
{
	trapped_tsc = *tsc;
	synthetic_line_update(&page);
}

static int tsc_first_before_update(void)
{
	struct sigaction sa = { .sa_sigaction = emulate_rdtsc,
				.sa_flags = SA_SIGINFO };
	struct pvread_stats st0, st1;
	struct timespec before, ts;
	int64_t want;
	int bad = 0;
	const char *no_trap = tsc_trap_missing();

	if (no_trap)
		return skip(no_trap);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pvread_clock_gettime(tf_clock, &before);
	pause_ticker();
	pvread_clock_gettime(tf_clock, &before);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	pvread_get_stats(&st0);
	tsc_traps = 0;
	at_next_trap = update_line;
	prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
	pvread_clock_gettime(tf_clock, &ts);
	prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
	pvread_get_stats(&st1);
	want = synthetic_line_ns(&page, tf_clock, last_trapped_tsc);
	printf("# a TSC read before an update: %lld ns, the new line at the TSC read again %lld (%+lld), %llu retries, %llu slow, %d TSC reads trapped, %lld ns after the reading before\n",
	       (long long)ns_of(&ts), (long long)want,
	       (long long)(ns_of(&ts) - want),
	       (unsigned long long)(st1.retries - st0.retries),
	       (unsigned long long)(st1.slow - st0.slow), (int)tsc_traps,
	       (long long)(ns_of(&ts) - ns_of(&before)));
	bad |= at_next_trap || trapped_tsc >= page.hdr->line.tsc_timestamp;
	bad |= ns_of(&ts) != want || ns_of(&ts) < ns_of(&before);
	bad |= last_trapped_tsc < page.hdr->line.tsc_timestamp;
	bad |= st1.retries != st0.retries || st1.slow != st0.slow ||
	       tsc_traps != 2;
	/* the seq checked now: the next read takes the TSC once, first */
	tsc_traps = 0;
	prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
	pvread_clock_gettime(tf_clock, &ts);
	prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
	printf("# the next read, at the seq checked: %d TSC read(s) trapped\n",
	       (int)tsc_traps);
	bad |= tsc_traps != 1;
	return bad;
}

/*
 * A TSC read first, then a save and restore before the read's loads: the
 * TSC is the old host's, here 100 ms ahead of the new one's, and the page
 * has counted a resume (disruptions) and anchors a line on the new TSC.
 * The read must not use the old TSC with the new line (100 ms ahead of
 * the kernel, and the next read back by as much): it reads the TSC again
 * after the seq.  The save and restore made from the trap of the read's
 * first TSC read, as in tsc_first_before_update().
 */
static uint64_t old_host_ahead;

static void save_and_restore(uint64_t *tsc)
{
	struct timespec ts;

	*tsc += old_host_ahead;
	synthetic_line_leave(&page);
	synthetic_write_begin(&page);
	page.hdr->disruptions++;
	synthetic_write_end(&page);
	synthetic_line_enter(&page, 0);
	/*
	 * Another read (a handler's) checks the page at its new seq
	 * (pvread_line_checked): the interrupted one finds it checked, and
	 * only the count of resumes tells it its TSC is the old host's.
	 */
	pvread_clock_gettime(tf_clock, &ts);
}

static int tsc_first_before_restore(void)
{
	struct sigaction sa = { .sa_sigaction = emulate_rdtsc,
				.sa_flags = SA_SIGINFO };
	struct timespec ts, next;
	int64_t before, after;
	const char *no_trap = tsc_trap_missing();

	if (no_trap)
		return skip(no_trap);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pvread_clock_gettime(tf_clock, &ts);
	pause_ticker();
	pvread_clock_gettime(tf_clock, &ts);
	old_host_ahead = page.tsc_hz / 10;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	tsc_traps = 0;
	at_next_trap = save_and_restore;
	before = sys_ns(tf_clock);
	prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
	pvread_clock_gettime(tf_clock, &ts);
	prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
	after = sys_ns(tf_clock);
	pvread_clock_gettime(tf_clock, &next);
	printf("# a TSC read before a restore (the old host's, 100 ms ahead): %+lld ns from the kernel's clock after the read, the next read %+lld ns from it; %d TSC reads trapped\n",
	       (long long)(ns_of(&ts) - after),
	       (long long)(ns_of(&next) - ns_of(&ts)), (int)tsc_traps);
	return at_next_trap || ns_of(&ts) < before - SLACK_NS ||
	       ns_of(&ts) > after + SLACK_NS || ns_of(&next) < ns_of(&ts);
}

/* The same two, of CLOCK_REALTIME: the TSC first, then the page itself. */
static int tsc_first_before_update_realtime(void)
{
	tf_clock = CLOCK_REALTIME;
	return tsc_first_before_update();
}

static int tsc_first_before_restore_realtime(void)
{
	tf_clock = CLOCK_REALTIME;
	return tsc_first_before_restore();
}

/*
 * The kernel's answers in mode none, then line mode with the line 50 ms
 * behind the kernel: the first line reading is not below the last answer
 * returned, though no floor was kept while only the kernel answered (the
 * floor starts at the kernel's answer at the first page reading).
 */
static int kernel_answers_then_line(void)
{
	struct timespec k[NR_NEVER_BACK], ts;
	long back = 0;
	unsigned int c;

	if (adopt(PVREAD_MODE_NONE, 0))
		return 1;
	synthetic_start(&page, 1000);
	for (c = 0; c < NR_NEVER_BACK; c++)
		pvread_clock_gettime(never_back_clocks[c], &k[c]);
	pause_ticker();
	synthetic_line_enter(&page, 0);
	synthetic_line_shift(&page, -50000000);
	for (c = 0; c < NR_NEVER_BACK; c++) {
		pvread_clock_gettime(never_back_clocks[c], &ts);
		if (ns_of(&ts) < ns_of(&k[c])) {
			back++;
			printf("# clock %d: kernel %lld, then %lld\n",
			       (int)never_back_clocks[c],
			       (long long)ns_of(&k[c]), (long long)ns_of(&ts));
		}
	}
	resume_ticker();
	printf("# mode none, then a line 50 ms behind the kernel: %ld of %u clocks back at their first page reading\n",
	       back, (unsigned int)NR_NEVER_BACK);
	return back != 0;
}

/*
 * In mode none the kernel answers, and is asked first: the page is looked
 * at after its read, so that nothing the library loads waits before the
 * vDSO's counter.  A page that enters line mode during that read is read
 * at once, the kernel's answer not returned: the hook makes the read the
 * moment the line starts, 5 ms ahead of the kernel.
 */
static void enter_line_ahead(void)
{
	synthetic_line_enter(&page, 5000000);
}

static int kernel_first_then_line(void)
{
	struct timespec ts;
	int64_t before, after;
	uint64_t mode0, mode1;

	if (adopt(PVREAD_MODE_NONE, 0))
		return 1;
	/* Two reads in mode none: the second asks the kernel first. */
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	mode0 = slow_for(PVREAD_SLOW_MODE);
	after_kernel_read = enter_line_ahead;
	before = sys_ns(CLOCK_MONOTONIC);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	after = sys_ns(CLOCK_MONOTONIC);
	mode1 = slow_for(PVREAD_SLOW_MODE);
	printf("# mode none, the line entered 5 ms ahead during the kernel's read: %lld ns from the bracket's start (%lld ns wide), %llu more for \"mode\"\n",
	       (long long)(ns_of(&ts) - before), (long long)(after - before),
	       (unsigned long long)(mode1 - mode0));
	return ns_of(&ts) < before + 4000000 || mode1 != mode0 ||
	       after_kernel_read != NULL;
}

/*
 * REALTIME (and gettimeofday(), and TAI) after line readings, the line
 * 50 us ahead of the kernel: leaving line mode does not take them back,
 * though the kernel never stepped them.  Then the page's timekeeper says
 * the wall clock was stepped back an hour (a settimeofday() the kernel's
 * answer here does not show): the fallbacks follow the page's offset and
 * lift nothing, the kernel's answer as it is.
 */
static int wall_fallback_not_behind(void)
{
	static const clockid_t wall[] = { CLOCK_REALTIME, CLOCK_TAI };
	struct timespec line[2], ts;
	struct timeval tv_line, tv;
	int64_t before, after;
	long back = 0, off = 0;
	unsigned int c;

	setenv("PVREAD_MAX_ERROR_NS", "100000", 1);
	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	pause_ticker();
	synthetic_line_shift(&page, 50000);
	for (c = 0; c < 2; c++)
		pvread_clock_gettime(wall[c], &line[c]);
	pvread_gettimeofday(&tv_line, NULL);
	synthetic_line_leave(&page);
	for (c = 0; c < 2; c++) {
		pvread_clock_gettime(wall[c], &ts);
		printf("# clock %d: line %lld, then %lld (kernel %lld)\n",
		       (int)wall[c], (long long)ns_of(&line[c]),
		       (long long)ns_of(&ts), (long long)sys_ns(wall[c]));
		back += ns_of(&ts) < ns_of(&line[c]);
	}
	pvread_gettimeofday(&tv, NULL);
	back += tv.tv_sec * 1000000LL + tv.tv_usec <
		tv_line.tv_sec * 1000000LL + tv_line.tv_usec;
	/*
	 * A live line 50 us ahead again, its bound above the tolerance (the
	 * kernel answers, lifted to the line), and the clock stepped back an
	 * hour, as the page's timekeeper says.
	 */
	synthetic_line_enter(&page, 0);
	synthetic_line_shift(&page, 50000);
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 200000;
	page.hdr->tk.base[CLOCK_REALTIME].sec -= 3600;
	page.hdr->tk.base[CLOCK_TAI].sec -= 3600;
	synthetic_write_end(&page);
	for (c = 0; c < 2; c++) {
		before = sys_ns(wall[c]);
		pvread_clock_gettime(wall[c], &ts);
		after = sys_ns(wall[c]);
		off += ns_of(&ts) < before || ns_of(&ts) > after;
	}
	resume_ticker();
	printf("# line 50 us ahead, then mode none: %ld of 3 wall readings back; after a step back the kernel's answer, %ld of 2 outside its bracket\n",
	       back, off);
	return back || off;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_plan(61);
	skip_reason = mmap(NULL, SKIP_REASON_LEN, PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (skip_reason == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	scenario("none page: every clock the kernel's (mode), get_info says none", none_page);
	scenario("ABI v2's mode numbers 2, 3 and others: the kernel answers (mode), fast again in line mode", old_mode_numbers);
	scenario("record rewritten mid-sample: pvread_sample_pvclock retried, never torn", record_rewritten_mid_sample);
	scenario("pvread_sample_pvclock pinned to each CPU: that CPU's record, evaluated exactly", sample_pvclock_cpu);
	scenario("header rewritten mid-read: retried, never torn", header_rewritten_mid_read);
	scenario("record anchored after the TSC: never extended backwards (sample EAGAIN), the line fast", record_from_the_future);
	scenario("clocksource flip: line -> none (mode) -> line, fast again", clocksource_flip);
	scenario("no record registered: the line fast, pvread_sample_pvclock ENODEV", unregistered_record);
	scenario("the header page alone: every clock fast; get_record, sample_pvclock EPERM", header_page_only);
	scenario("MONOTONIC_COARSE via libc never behind the page", coarse_fallback_not_behind_page);
	scenario("MONOTONIC_COARSE via libc, writer stalled: never behind", coarse_fallback_writer_stalled);
	scenario("pvread_use_page: EINVAL (ABI v2 and other versions, magic, size, alignment), EBUSY", use_page_errors);
	scenario("pvread_get_info_size: larger and smaller structs, EINVAL", info_sizes);
	scenario("pvread_get_info_size: the page's disruptions; pvread_get_info leaves them alone", info_disruptions);
	scenario("other clocks and bad ids: exactly libc's answer", passthrough);
	scenario("correct in a child after fork()", after_fork);
	scenario("fork() while another thread maps: the child maps afresh", fork_while_mapping);
	scenario("a call that succeeds leaves errno alone, the first one too", errno_kept);
	scenario("writer stuck mid-update: one wait, then at once (stuck); get_info EAGAIN", writer_stuck);
	scenario("writer stuck mid-update at seq 1, the first odd one: one wait, then at once (stuck), as at any other", writer_stuck_at_1);
	scenario("a thread's CPU-time clock, whatever its id's low bits: the kernel's answer, line mode and none", cpu_clocks_of_threads);
	scenario("PVREAD_MAX_ERROR_NS: decimal digits only, else the default", tolerance_parsing);
	scenario("values no module writes: libc's answer (invalid), never garbage", hostile_page);
	scenario("time namespace: a child's clocks are its namespace's, the parent's floors not its own", time_namespace);
	scenario("line page: every clock fast and within the syscalls", line_all_clocks);
	scenario("pvread_ns: every fine clock bracketed, in order with pvread_clock_gettime; a bad id 0 and EINVAL", line_ns);
	scenario("pvread_ns: never below the floor the kernel's answers raised", ns_not_below_floor);
	scenario("pvread_ns in mode none: the kernel first, every clock bracketed, counted for mode; others the kernel's; then the line's", none_ns);
	scenario("line: MONOTONIC_RAW at raw_mul << raw_shift", line_raw_rate);
	scenario("line: a TSC before the anchor reads as the anchor, fast", line_before_anchor);
	scenario("line: never below the coarse clocks (MONOTONIC, REALTIME, gettimeofday against time)", line_below_coarse);
	scenario("line: held at the coarse clocks until the line passes them, to the tick, where the page was checked once", line_passes_coarse);
	scenario("line: held at the coarse clocks where the page was checked once: an anchor ahead of the TSC, a line more than 3 s or 2^32 ticks below them", line_held_far_below_coarse);
	scenario("line: a page taken as checked only where every fine clock on it is one a module writes", line_checked_whole_page);
	scenario("line: REALTIME with a fraction below MONOTONIC's held until its own line passes REALTIME_COARSE", line_realtime_fraction);
	scenario("line: beyond tsc_span (delta) or a shift out of range (invalid): falls back", line_beyond_span);
	scenario("line: error bound above PVREAD_MAX_ERROR_NS: falls back (bound)", line_bound_above_tolerance);
	scenario("line: readings do not raise the floor, only respect it", line_no_shared_write);
	scenario("line: a fallback after line readings is not behind them", line_fallback_not_behind);
	scenario("line: a process that never read the line gets the kernel's answer", line_fallback_kernel_exact);
	scenario("line: after the bound crosses the tolerance, answers within it once the first lift is passed", line_tolerance_after_bound);
	scenario("line: the hold at the line survives an update that does not complete", line_hold_after_stuck_update);
	scenario("line -> none -> line: never back", line_none_line);
	scenario("line: the first fallback after line readings is at the TSC it reads, not ahead of the line", line_first_fallback_now);
	scenario("rdtsc trapped (PR_SET_TSC) and handled: the first fallback after line readings is not killed", fallback_with_rdtsc_trapped);
	scenario("a TSC read first, before an update: the page checked, the new line at the TSC read again, no retry", tsc_first_before_update);
	scenario("a TSC read first, before a resume: never with the line after it", tsc_first_before_restore);
	scenario("REALTIME: a TSC read first, before an update: the page checked, the new line at the TSC read again, no retry", tsc_first_before_update_realtime);
	scenario("REALTIME: a TSC read first, before a resume: never with the line after it", tsc_first_before_restore_realtime);
	scenario("mode none, then a line behind the kernel: the first page reading not below the kernel's answers", kernel_answers_then_line);
	scenario("mode none, the kernel asked first: a page that enters line mode during its read is read at once", kernel_first_then_line);
	scenario("REALTIME, TAI, gettimeofday after line readings: not back at a fallback; a step of the page's wall clock followed", wall_fallback_not_behind);
	scenario("line: monotonic across threads while re-anchored", line_cross_thread);
	scenario("line readings on some threads while others hold at the line: never back", holds_and_line_readings);
	scenario("a line reading while another thread holds at the line: the seed, never back after", seed_while_holding);
	scenario("time namespace unshared before the first read: the process's own clocks; a _Fork() child's shifted", own_time_namespace);
	scenario("the first read with a cancel pending: no cancellation point inside", first_read_cancelled);
	scenario("pvread_use_page with a cancel pending: comes back, page taken", first_call_cancelled);
	scenario("siglongjmp out of a signal raised in the first call: the page taken and read", first_call_longjmp);
	scenario("record stuck mid-update: sampling waits once, then gives up at once; the line fast", record_stuck);
	scenario("pvread_get_record: every byte written", record_copy_whole);
	return tap_exit();
}
