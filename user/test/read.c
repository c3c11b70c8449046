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

/*
 * The record-reading mode a scenario can use here: per-CPU where rdtscp
 * names the CPU, else stable mode's one record -- said on a "# " line, so
 * that a host without it does not pass the per-CPU path silently.
 */
static uint32_t record_mode(void)
{
	if (tsc_aux_names_cpu())
		return PVREAD_MODE_PERCPU;
	printf("# per-CPU reads cannot run here (rdtscp %s): stable mode's record instead\n",
	       cpu_has_rdtscp() ? "does not name the CPU" : "not offered");
	return PVREAD_MODE_STABLE;
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

/*
 * Xen rewrites the record all the time, on another CPU, between two
 * equal-valued lines: one anchored now, one anchored 10 ms in the future,
 * as a record rewritten after the reader's rdtsc is.  A read torn between
 * the two is off by 10 ms; one that takes the future record for a TSC
 * before it, by years.
 */
static atomic_bool stop_writer;

static void *flip_record(void *arg)
{
	struct pvread_pvclock *p = &synthetic_record(&page, 0)->pvclock;
	const uint64_t d = page.tsc_hz / 100;	/* within max_delta */
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

static int record_rewritten_mid_read(void)
{
	struct pvread_stats st;
	pthread_t writer;
	int writer_cpu = 1;
	long bad;

	bool percpu;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return skip("one CPU: the writer could never overlap the reader");
	/* Per-CPU where it can be, so the floor must hide every step. */
	percpu = record_mode() == PVREAD_MODE_PERCPU;
	if (adopt(percpu ? PVREAD_MODE_PERCPU : PVREAD_MODE_STABLE, 1000))
		return 1;
	/* Reader on the CPU whose record is rewritten, writer beside it. */
	pin(0);
	pthread_create(&writer, NULL, flip_record, &writer_cpu);
	bad = bracketed(CLOCK_MONOTONIC, 300000, ANY, percpu);
	/*
	 * And back to back, without system calls between, many more: a
	 * torn read is 10 ms off the line, so it is a step back (at it, or
	 * at the read after it) where the records' equal lines give none.
	 */
	{
		struct timespec ts;
		int64_t prev = 0, v;
		long i, back = 0;

		for (i = 0; i < 5000000; i++) {
			pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
			v = ns_of(&ts);
			back += v < prev;
			prev = v;
		}
		printf("# 5000000 reads back to back: %ld steps back\n", back);
		bad += back;
	}
	atomic_store(&stop_writer, true);
	pthread_join(writer, NULL);
	pvread_get_stats(&st);
	printf("# %llu retries, %llu slow\n",
	       (unsigned long long)st.retries, (unsigned long long)st.slow);
	/* Some reads give up (slow) after retries; none may be torn. */
	return bad || !st.retries;
}

/*
 * A record anchored after the TSC the reader reads (Xen rewrote it after
 * the reader's rdtsc): never used before its anchor -- the clocks fall
 * back, and pvread_sample_pvclock() gives up (EAGAIN) rather than return
 * the record's line extended backwards through a wrapped delta.
 */
static int record_from_the_future(void)
{
	struct pvread_pvclock *p;
	struct pvread_sample smp;
	uint64_t ahead;
	long bad;
	int r;

	if (adopt(PVREAD_MODE_STABLE, 0))
		return 1;
	p = &synthetic_record(&page, 0)->pvclock;
	ahead = page.tsc_hz * 60;
	synthetic_write_begin(&page);
	p->version++;
	p->system_time += pvread_pvclock_ns(p->tsc_timestamp + ahead,
					    p->tsc_timestamp, 0,
					    p->tsc_to_system_mul, p->tsc_shift);
	p->tsc_timestamp += ahead;
	p->version++;
	synthetic_write_end(&page);
	bad = bracketed(CLOCK_MONOTONIC, 1000, SLOW, STRICT);
	/* where rdtscp names the CPU, the sample is of the CPU's own record */
	pin(0);
	errno = 0;
	r = pvread_sample_pvclock(&smp);
	printf("# pvread_sample_pvclock: %d (%s), cycles %llu, the kernel's MONOTONIC_RAW %lld\n",
	       r, strerror(errno), r ? 0ULL : (unsigned long long)smp.cycles,
	       (long long)sys_ns(CLOCK_MONOTONIC_RAW));
	return bad || r != -1 || errno != EAGAIN;
}

static int header_rewritten_mid_read(void)
{
	struct pvread_stats st;
	long bad;

	bool percpu = record_mode() == PVREAD_MODE_PERCPU;

	/* The timekeeper updates as fast as it can. */
	if (adopt(percpu ? PVREAD_MODE_PERCPU : PVREAD_MODE_STABLE, 1))
		return 1;
	bad = bracketed(CLOCK_MONOTONIC, 300000, ANY, percpu);
	pvread_get_stats(&st);
	printf("# %llu retries, %llu fast, %llu slow, %llu updates\n",
	       (unsigned long long)st.retries,
	       (unsigned long long)(300000 - st.slow),
	       (unsigned long long)st.slow,
	       (unsigned long long)page.hdr->updates);
	return bad || st.slow >= 300000 || !st.retries;
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

static void set_mode(uint32_t mode)
{
	pause_ticker();
	synthetic_write_begin(&page);
	page.hdr->mode = mode;
	synthetic_write_end(&page);
	resume_ticker();
}

/*
 * pvread_sample_pvclock() in stable mode (every record registered, the
 * stable one the last): the calling CPU's own record where rdtscp names the
 * CPU, as the selftests' per-vCPU checks expect; else the stable record,
 * and sample.cpu says so.
 */
static int sample_pvclock_cpu(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	bool own = tsc_aux_names_cpu();
	struct pvread_sample smp;
	unsigned int i, last;
	int cpu, bad = 0;

	if (cpu_has_rdtscp() && !own)
		return skip("this host's TSC_AUX does not name the CPU");
	if (adopt(PVREAD_MODE_PERCPU, 1000))
		return 1;
	last = page.hdr->nr_records - 1;
	pause_ticker();
	synthetic_write_begin(&page);
	for (i = 0; i <= last; i++)
		synthetic_record(&page, i)->pvclock.flags = 1;
	page.hdr->stable_record = last;
	page.hdr->mode = PVREAD_MODE_STABLE;
	synthetic_write_end(&page);
	resume_ticker();
	for (cpu = 0; cpu < ncpu; cpu++) {
		pin(cpu);
		if (pvread_sample_pvclock(&smp)) {
			printf("# cpu%d: %s\n", cpu, strerror(errno));
			bad++;
			continue;
		}
		printf("# on cpu%d: the sample of record %u (want %u)\n", cpu,
		       smp.cpu, own ? (unsigned int)cpu : last);
		bad += smp.cpu != (own ? (unsigned int)cpu : last) || !smp.cycles;
	}
	return bad != 0;
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
	pause_ticker();
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 400;
	synthetic_write_end(&page);
	resume_ticker();
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST, STRICT);
	return bad != 0;
}

static int unregistered_record(void)
{
	uint64_t before;
	unsigned int i;
	long bad;

	/* Per-CPU where it can be; stable mode's one record otherwise. */
	if (adopt(record_mode(), 1000))
		return 1;
	for (i = 0; i < page.hdr->nr_records; i++)
		synthetic_record(&page, i)->state = 0;
	before = slow_for(PVREAD_SLOW_RECORD);
	bad = bracketed(CLOCK_MONOTONIC, 10000, SLOW, STRICT);
	bad += reason_was(PVREAD_SLOW_RECORD, before, 10000);
	return bad != 0;
}

/*
 * Xen took the stable bit back from the record (the page not yet
 * rewritten): as the kernel's vread_pvclock(), no fast read.
 */
static int stable_bit_cleared(void)
{
	uint64_t before;
	long bad;

	if (adopt(PVREAD_MODE_STABLE, 1000))
		return 1;
	synthetic_record(&page, page.hdr->stable_record)->pvclock.flags = 0;
	before = slow_for(PVREAD_SLOW_MODE);
	bad = bracketed(CLOCK_MONOTONIC, 10000, SLOW, STRICT);
	bad += reason_was(PVREAD_SLOW_MODE, before, 10000);
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
		bad += bracketed(clocks[i], 200000, FAST, STRICT);
	pvread_get_stats(&st);
	printf("# %llu line anchors, %llu retries, %llu raised to the floor\n",
	       (unsigned long long)page.hdr->line.anchors,
	       (unsigned long long)st.retries, (unsigned long long)st.clamped);
	return bad || page.hdr->line.anchors < 100;
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

/*
 * A record that lags the one the kernel read at its last update converts
 * to the base at cycle_last, and an NTP adjustment moves that base below
 * the coarse value the module holds: the record modes hold MONOTONIC and
 * REALTIME at MONOTONIC_COARSE as the line does (the per-CPU machines saw
 * CLOCK_MONOTONIC 156 ns below the CLOCK_MONOTONIC_COARSE read before it).
 */
static int records_below_coarse(void)
{
	const struct pvread_timekeeper *tk;
	struct pvread_stats st0, st1;
	struct timespec ts;
	int64_t csec, cns, want_rt;
	long bad = 0, i;

	if (adopt(record_mode(), 0))
		return 1;
	tk = &page.hdr->tk;
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	csec = ts.tv_sec + 10;
	cns = 250000000;
	write_coarse(csec, (uint64_t)cns);
	/* MONOTONIC_COARSE's instant on the wall clock, as the kernel's bases */
	want_rt = (csec - (tk->base[CLOCK_MONOTONIC].sec -
			   tk->base[CLOCK_REALTIME].sec)) * NSEC_PER_SEC + cns -
		  ((int64_t)(tk->base[CLOCK_MONOTONIC].snsec >> tk->shift) -
		   (int64_t)(tk->base[CLOCK_REALTIME].snsec >> tk->shift));
	pvread_get_stats(&st0);
	for (i = 0; i < 10000; i++) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		bad += ts.tv_sec != csec || ts.tv_nsec != cns;
		pvread_clock_gettime(CLOCK_REALTIME, &ts);
		bad += ns_of(&ts) != want_rt;
	}
	pvread_get_stats(&st1);
	printf("# records 10 s below the coarse clocks: %ld wrong of 20000, %llu slow; REALTIME %lld.%09ld\n",
	       bad, (unsigned long long)(st1.slow - st0.slow),
	       (long long)ts.tv_sec, ts.tv_nsec);
	return bad || st1.slow - st0.slow > 100;
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
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW, STRICT);
	bad += bracketed(CLOCK_MONOTONIC_RAW, 10000, SLOW, STRICT);
	bad += reason_was(PVREAD_SLOW_DELTA, before, 20000);
	/* within the span, but 2^33 ticks << 32 does not fit in 64 bits */
	write_line(__rdtsc() - (1ULL << 33), UINT64_MAX, 1, 32, 1, 32, 0, 0);
	before = slow_for(PVREAD_SLOW_INVALID);
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW, STRICT);
	bad += reason_was(PVREAD_SLOW_INVALID, before, 10000);
	/* no module writes a shift beyond 32 */
	write_line(__rdtsc(), UINT64_MAX, 1, 33, 1, 33, 0, 0);
	before = slow_for(PVREAD_SLOW_INVALID);
	bad += bracketed(CLOCK_MONOTONIC_RAW, 10000, SLOW, STRICT);
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
	bad += bracketed(CLOCK_MONOTONIC, 10000, SLOW, STRICT);
	bad += bracketed(CLOCK_REALTIME, 10000, SLOW, STRICT);
	bad += reason_was(PVREAD_SLOW_BOUND, before, 20000);
	pause_ticker();
	synthetic_write_begin(&page);
	page.hdr->error_bound_ns = 400;
	synthetic_write_end(&page);
	resume_ticker();
	bad += bracketed(CLOCK_MONOTONIC, 10000, FAST, STRICT);
	bad += bracketed(CLOCK_REALTIME, 10000, FAST, STRICT);
	return bad != 0;
}

/*
 * Line readings leave the floor alone: after a broken module steps the
 * line back, line readings are not held (no clamp), which they would be
 * had the earlier ones raised it.  Per-CPU readings (or their fallbacks)
 * do raise it, and line readings then respect it.
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

	/* Per-CPU readings raise the floor, fast or not. */
	set_mode(PVREAD_MODE_PERCPU);
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
	printf("# after per-CPU readings: %llu of 1000 line readings raised to the floor, %ld back\n",
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
	synthetic_line_leave(&page, PVREAD_MODE_NONE);
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
 * line -> per-CPU -> line: the line ahead of the kernel, per-CPU readings
 * (or their fallbacks) up to the kernel's clock, a new line behind it: no
 * clock ever goes back.
 */
static int line_percpu_line(void)
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
			synthetic_line_leave(&page, PVREAD_MODE_PERCPU);
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
 * stable -> line -> stable: stable readings are the kernel's, a line may be
 * behind them or ahead by up to its bound, and neither raises the floor;
 * each way, the first reading of each clock in the new mode takes the
 * kernel's (lifted to the line) as the floor, and nothing goes back.
 */
static int stable_line_stable(void)
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
		if (phase == 0) {
			synthetic_line_leave(&page, PVREAD_MODE_STABLE);
		} else if (phase == 1) {
			/* 5 ms behind the kernel, past the old line's end */
			synthetic_line_enter(&page, -5000000);
		} else {
			/* 5 ms ahead of it, then stable again */
			synthetic_line_shift(&page, 10000000);
			for (i = 0; i < 3000; i++) {
				c = (unsigned int)i % NR_NEVER_BACK;
				pvread_clock_gettime(never_back_clocks[c], &ts);
				last[c] = ns_of(&ts);
			}
			synthetic_line_leave(&page, PVREAD_MODE_STABLE);
		}
		resume_ticker();
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
	return back != 0 ||
	       st.slow_by_reason[PVREAD_SLOW_SEED] != 2 * NR_NEVER_BACK;
}

/*
 * The kernel's answer, in place of the library's kernel.c (this program
 * links libpvread.a, whose member of that name the linker then leaves
 * out): a thread that sets hold_after_libc stops right after the kernel
 * answered, as if preempted there, until the test lets it go.
 */
static __thread bool hold_after_libc;

int pvread_kernel_clock_gettime(clockid_t clock, struct timespec *ts)
{
	int ret = (int)syscall(SYS_clock_gettime, clock, ts);

	if (hold_after_libc) {
		hold_after_libc = false;
		sem_post(&held);
		sem_wait(&go_on);
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

static void *seeding_reader(void *arg)
{
	struct timespec *ts = arg;

	hold_after_libc = true;
	pvread_clock_gettime(CLOCK_MONOTONIC, ts);
	return NULL;
}

#define SEED_LAG_NS 20000000LL

/*
 * A thread enters line mode after stable readings and takes the kernel's
 * answer as its floor; preempted there, the page flips to stable, another
 * thread returns a stable reading S (the kernel's, now), and the page flips
 * back to a line 20 ms behind the kernel.  Readings after the first thread
 * finishes must not be below S: the floor must cover S, though the seed was
 * taken before it.
 */
static int seed_preempted(void)
{
	struct timespec ts, seeded;
	pthread_t seeder;
	long below = 0, i;
	int64_t s, v, worst = 0;

	if (adopt(PVREAD_MODE_LINE, 1000))
		return 1;
	sem_init(&held, 0, 0);
	sem_init(&go_on, 0, 0);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* line */
	pause_ticker();
	synthetic_line_leave(&page, PVREAD_MODE_STABLE);
	resume_ticker();
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);	/* stable: seeds */
	/* past the old line's end, so that the next line is 20 ms behind */
	usleep(2 * SEED_LAG_NS / 1000);
	pause_ticker();
	synthetic_line_enter(&page, -SEED_LAG_NS);
	resume_ticker();

	pthread_create(&seeder, NULL, seeding_reader, &seeded);
	if (!wait_held("the reader that enters line mode (its libc call)"))
		return 1;
	pause_ticker();
	synthetic_line_leave(&page, PVREAD_MODE_STABLE);
	resume_ticker();
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	s = ns_of(&ts);
	pause_ticker();
	synthetic_line_enter(&page, -SEED_LAG_NS);
	resume_ticker();
	sem_post(&go_on);
	pthread_join(seeder, NULL);

	for (i = 0; i < 100000; i++) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		v = ns_of(&ts);
		below += v < s;
		if (s - v > worst)
			worst = s - v;
	}
	printf("# seeder's answer %lld ns before the stable reading S; of 100000 line readings after, %ld below S, by up to %lld ns\n",
	       (long long)(s - ns_of(&seeded)), below, (long long)worst);
	return below != 0;
}

/*
 * stable -> per-CPU: CPU 0's record 5 ms behind the stable one (as a
 * per-CPU record may lag the kernel's clock by its bound), readings of
 * MONOTONIC,
 * then of each clock in turn, on CPU 0.  Each clock's first per-CPU
 * reading must take the kernel's answer as its floor, not only the clock
 * read first: none goes back.  The ticker stands still meanwhile (it
 * would align the records).
 */
static int stable_percpu(void)
{
	int64_t last[NR_NEVER_BACK] = { 0 }, v;
	struct pvread_record *r;
	struct pvread_stats st;
	struct timespec ts;
	long back = 0, i;
	unsigned int c;

	if (!tsc_aux_names_cpu())
		return skip(cpu_has_rdtscp() ? "this host's TSC_AUX does not name the CPU" :
			    "this CPU offers no rdtscp: no per-CPU reads");
	if (sysconf(_SC_NPROCESSORS_CONF) < 2)
		return skip("one CPU: no record apart from the stable one");
	if (adopt(PVREAD_MODE_PERCPU, 1000))
		return 1;
	pin(0);
	pause_ticker();
	synthetic_tick(&page);
	r = synthetic_record(&page, 0);
	synthetic_write_begin(&page);
	r->pvclock.version++;
	r->pvclock.system_time -= 5000000;
	r->pvclock.version++;
	r = synthetic_record(&page, page.hdr->nr_records - 1);
	r->pvclock.flags = 1;
	page.hdr->stable_record = page.hdr->nr_records - 1;
	page.hdr->mode = PVREAD_MODE_STABLE;
	synthetic_write_end(&page);
	for (i = 0; i < 300; i++) {
		c = (unsigned int)i % NR_NEVER_BACK;
		pvread_clock_gettime(never_back_clocks[c], &ts);
		last[c] = ns_of(&ts);
	}
	set_mode(PVREAD_MODE_PERCPU);
	for (i = 0; i < 3000; i++) {
		/* MONOTONIC a hundred times first */
		c = i < 100 ? 0 : (unsigned int)i % NR_NEVER_BACK;
		pvread_clock_gettime(never_back_clocks[c], &ts);
		v = ns_of(&ts);
		back += v < last[c];
		last[c] = v;
	}
	mode_change_stats(&st, back);
	return back != 0 || st.slow_by_reason[PVREAD_SLOW_SEED] != NR_NEVER_BACK;
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

	if (adopt(PVREAD_MODE_STABLE, 1000))
		return 1;
	memset(&big, 0xa5, sizeof(big));
	memset(&small, 0xa5, sizeof(small));
	bad += pvread_get_info_size(&big.info, sizeof(big)) != 0;
	for (i = 0; i < sizeof(big.later); i++)
		bad += big.later[i] != 0;
	bad += big.info.mapped != 1 || big.info.mode != PVREAD_MODE_STABLE;
	bad += pvread_get_info_size(&small.info, 8) != 0;
	for (i = 8; i < sizeof(small.bytes); i++)
		bad += small.bytes[i] != 0xa5;
	bad += small.info.mapped != 1;
	errno = 0;
	bad += pvread_get_info_size(&info, 2) != -1 || errno != EINVAL;
	bad += pvread_get_info(&info) != 0 || !info.mapped ||
	       info.mode != PVREAD_MODE_STABLE;
	printf("# %d wrong\n", bad);
	return bad != 0;
}

static int use_page_errors(void)
{
	struct timespec ts;
	uint32_t nr, off;
	char junk[8192] = { 0 };

	if (pvread_use_page(junk, sizeof(junk)) != -1 || errno != EINVAL)
		return 1;
	if (synthetic_init(&page, PVREAD_MODE_STABLE))
		return 1;
	if (pvread_use_page(page.hdr, 100) != -1 || errno != EINVAL)
		return 1;
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

	if (synthetic_init(&page, PVREAD_MODE_STABLE))
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
		_exit(r || bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK));
	}
	waitpid(pid, &status, 0);
	sem_post(&go_on);
	pthread_join(mapper, NULL);
	synthetic_tick(&page);
	return mapped || !WIFEXITED(status) || WEXITSTATUS(status) ||
	       bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK);
}

/*
 * A writer stalled mid-update (the seq stays odd): the first read waits
 * for it as the kernel would, then falls back ("busy"); later reads fall
 * back at once ("stuck") while the seq says the same; pvread_get_info()
 * gives up (EAGAIN) instead of looping.  Once the update completes, reads
 * are fast again.
 */
static int writer_stuck(void)
{
	uint64_t busy, stuck;
	struct pvread_info info;
	struct timespec ts;
	int bad = 0, r;

	if (adopt(PVREAD_MODE_STABLE, 0))
		return 1;
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
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK) != 0;
	bad += pvread_get_info(&info) != 0 || !info.fast;
	return bad != 0;
}

/*
 * Values no module writes, one at a time, into a stable page: each read
 * is libc's ("invalid"), at once and within the syscalls -- never a
 * wrapped product, a shift the C language leaves undefined, or a loop.
 */
static int hostile_page(void)
{
	struct pvread_header *h;
	struct pvread_record *r;
	struct pvread_header good;
	struct pvread_record good_r;
	uint64_t before;
	long bad = 0;
	int i;

	if (adopt(PVREAD_MODE_STABLE, 0))
		return 1;
	h = page.hdr;
	r = synthetic_record(&page, 0);
	good = *h;
	good_r = *r;
	for (i = 0; i < 7; i++) {
		const char *what = "";

		synthetic_tick(&page);
		synthetic_write_begin(&page);
		switch (i) {
		case 0:
			what = "timekeeper shift 70";
			h->tk.shift = 70;
			break;
		case 1:
			what = "MONOTONIC base 3 s past its second";
			h->tk.base[CLOCK_MONOTONIC].snsec =
				(3ULL * NSEC_PER_SEC) << h->tk.shift;
			break;
		case 2:
			what = "max_delta and mult that overflow";
			h->tk.max_delta = UINT64_MAX;
			h->tk.mult = UINT32_MAX;
			h->tk.cycle_last = 0;
			break;
		case 3:
			what = "record shift 100";
			r->pvclock.version += 2;
			r->pvclock.tsc_shift = 100;
			break;
		case 4:
			what = "record shift -100";
			r->pvclock.version += 2;
			r->pvclock.tsc_shift = -100;
			break;
		case 5:
			what = "MONOTONIC_COARSE base 2^63 ns";
			h->tk.base[CLOCK_MONOTONIC_COARSE].snsec = 1ULL << 63;
			break;
		case 6:
			what = "MONOTONIC base 2^62 s, beyond the kernel's s64 ns";
			h->tk.base[CLOCK_MONOTONIC].sec = 1LL << 62;
			break;
		}
		synthetic_write_end(&page);
		before = slow_for(PVREAD_SLOW_INVALID);
		printf("# %s:\n", what);
		bad += bracketed(i == 5 ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC,
				 1000, SLOW, STRICT);
		bad += reason_was(PVREAD_SLOW_INVALID, before, 1000);
		synthetic_write_begin(&page);
		memcpy(&h->tk, &good.tk, sizeof(h->tk));
		r->pvclock.tsc_shift = good_r.pvclock.tsc_shift;
		r->pvclock.version += 2;
		synthetic_write_end(&page);
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
		if (adopt(PVREAD_MODE_STABLE, 0))
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

	if (adopt(PVREAD_MODE_STABLE, 1000))
		return 1;
	for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		if (bracketed(shifted[i], 100, FAST, MIXED_OK))
			return 1;
	pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	/* Fallbacks raise the floors: the parent leaves them set. */
	set_mode(PVREAD_MODE_NONE);
	for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
		pvread_clock_gettime(shifted[i], &ts);
	set_mode(PVREAD_MODE_STABLE);
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
			bad += bracketed(shifted[i], 1000, FAST, MIXED_OK);
		pvread_clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
		printf("# MONOTONIC_COARSE %lld.%09ld, the kernel's %lld\n",
		       (long long)ts.tv_sec, ts.tv_nsec,
		       (long long)sys_ns(CLOCK_MONOTONIC_COARSE));
		bad += !near_kernel(CLOCK_MONOTONIC_COARSE, &ts);
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

	if (synthetic_init(&page, PVREAD_MODE_STABLE) ||
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
		bad += bracketed(shifted[i], 1000, ANY, MIXED_OK);
	bad += bracketed(CLOCK_REALTIME, 1000, FAST, MIXED_OK);
	pause_ticker();
	synthetic_tick(&page);
	pid = _Fork();
	if (pid == 0) {
		long b = 0;

		printf("# in a child of _Fork(), in the new namespace:\n");
		for (i = 0; i < sizeof(shifted) / sizeof(shifted[0]); i++)
			b += bracketed(shifted[i], 1000, FAST, MIXED_OK);
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

	if (synthetic_init(&page, PVREAD_MODE_STABLE) ||
	    synthetic_start(&page, 1000))
		return 1;
	pthread_create(&t, NULL, cancelled_first_call, (void *)first_use_page);
	pthread_join(t, &got);
	printf("# pvread_use_page() with a cancel pending: %s\n",
	       got == PTHREAD_CANCELED ? "cancelled inside" :
	       got == (void *)1 ? "came back, page taken" : "came back, failed");
	bad += got != (void *)1;
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK) != 0;
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

	if (synthetic_init(&page, PVREAD_MODE_STABLE) ||
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
	return bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK) != 0;
}

/*
 * A record whose update never completes (its version stays odd): the
 * first read waits for it as the kernel would, then falls back (busy);
 * later reads fall back at once (stuck), as for the header.
 */
static int record_stuck(void)
{
	struct pvread_record *r;
	struct timespec ts;
	uint64_t busy, stuck;
	int64_t t0, t1, t2;
	int bad = 0;

	if (adopt(PVREAD_MODE_STABLE, 0))
		return 1;
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	r = synthetic_record(&page, page.hdr->stable_record);
	busy = slow_for(PVREAD_SLOW_BUSY);
	stuck = slow_for(PVREAD_SLOW_STUCK);
	r->pvclock.version |= 1;	/* and no end */
	t0 = sys_ns(CLOCK_MONOTONIC);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	t1 = sys_ns(CLOCK_MONOTONIC);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_clock_gettime(CLOCK_BOOTTIME, &ts);
	t2 = sys_ns(CLOCK_MONOTONIC);
	printf("# record stuck odd: the first read %lld ms, the next two %lld ms\n",
	       (long long)(t1 - t0) / 1000000, (long long)(t2 - t1) / 1000000);
	bad += reason_was(PVREAD_SLOW_BUSY, busy, 1);
	bad += reason_was(PVREAD_SLOW_STUCK, stuck, 2);
	bad += t2 - t1 > 100000000;	/* no wait: far below one */
	r->pvclock.version++;
	synthetic_tick(&page);
	bad += bracketed(CLOCK_MONOTONIC, 1000, FAST, MIXED_OK) != 0;
	return bad != 0;
}

/* pvread_get_record() writes every byte: no padding left as it was. */
static int record_copy_whole(void)
{
	struct pvread_record rec;
	unsigned char *b = (unsigned char *)&rec;
	unsigned int i, junk = 0;

	if (adopt(PVREAD_MODE_STABLE, 0))
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

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_plan(45);
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
	scenario("pvread_sample_pvclock in stable mode: the calling CPU's record", sample_pvclock_cpu);
	scenario("header rewritten mid-read: retried, never torn", header_rewritten_mid_read);
	scenario("record anchored after the TSC: never extended backwards", record_from_the_future);
	scenario("clocksource flip: falls back, then fast again", clocksource_flip);
	scenario("error bound above PVREAD_MAX_ERROR_NS: falls back", bound_above_tolerance);
	scenario("unregistered record: falls back", unregistered_record);
	scenario("stable record without the stable bit: falls back (mode)", stable_bit_cleared);
	scenario("MONOTONIC_COARSE via libc never behind the page", coarse_fallback_not_behind_page);
	scenario("MONOTONIC_COARSE via libc, writer stalled: never behind", coarse_fallback_writer_stalled);
	scenario("pvread_use_page: EINVAL, EBUSY", use_page_errors);
	scenario("pvread_get_info_size: larger and smaller structs, EINVAL", info_sizes);
	scenario("other clocks and bad ids: exactly libc's answer", passthrough);
	scenario("correct in a child after fork()", after_fork);
	scenario("fork() while another thread maps: the child maps afresh", fork_while_mapping);
	scenario("a call that succeeds leaves errno alone, the first one too", errno_kept);
	scenario("writer stuck mid-update: one wait, then at once (stuck); get_info EAGAIN", writer_stuck);
	scenario("PVREAD_MAX_ERROR_NS: decimal digits only, else the default", tolerance_parsing);
	scenario("values no module writes: libc's answer (invalid), never garbage", hostile_page);
	scenario("time namespace: a child's clocks are its namespace's, the parent's floors not its own", time_namespace);
	scenario("line page: every clock fast and within the syscalls", line_all_clocks);
	scenario("line: MONOTONIC_RAW at raw_mul << raw_shift", line_raw_rate);
	scenario("line: a TSC before the anchor reads as the anchor, fast", line_before_anchor);
	scenario("line: never below the coarse clocks (MONOTONIC, REALTIME, gettimeofday against time)", line_below_coarse);
	scenario("per-CPU and stable: never below the coarse clocks (MONOTONIC, REALTIME)", records_below_coarse);
	scenario("line: beyond tsc_span (delta) or a shift out of range (invalid): falls back", line_beyond_span);
	scenario("line: error bound above PVREAD_MAX_ERROR_NS: falls back (bound)", line_bound_above_tolerance);
	scenario("line: readings do not raise the floor, only respect it", line_no_shared_write);
	scenario("line: a fallback after line readings is not behind them", line_fallback_not_behind);
	scenario("line: a process that never read the line gets the kernel's answer", line_fallback_kernel_exact);
	scenario("line: after the bound crosses the tolerance, answers within it once the first lift is passed", line_tolerance_after_bound);
	scenario("line: the hold at the line survives an update that does not complete", line_hold_after_stuck_update);
	scenario("line -> per-CPU -> line: never back", line_percpu_line);
	scenario("stable -> line -> stable: never back", stable_line_stable);
	scenario("stable -> per-CPU: every clock seeds its floor, never back", stable_percpu);
	scenario("line: monotonic across threads while re-anchored", line_cross_thread);
	scenario("mode flips while a thread seeds its floor: never back", seed_preempted);
	scenario("time namespace unshared before the first read: the process's own clocks; a _Fork() child's shifted", own_time_namespace);
	scenario("the first read with a cancel pending: no cancellation point inside", first_read_cancelled);
	scenario("pvread_use_page with a cancel pending: comes back, page taken", first_call_cancelled);
	scenario("siglongjmp out of a signal raised in the first call: the page taken and read", first_call_longjmp);
	scenario("record stuck mid-update: one wait, then at once (stuck)", record_stuck);
	scenario("pvread_get_record: every byte written", record_copy_whole);
	return tap_exit();
}
