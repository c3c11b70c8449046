// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The fast path's own checks, white-box (built on libpvread.a and its
 * internal header, so that it can set what only the slow path writes).
 *
 * Both TSC reads of the line: lfence; rdtsc, and rdtscp where the CPU
 * offers it.  The process takes rdtscp where CPUID offers it, as the vDSO
 * does (mapping.c's tsc_read_choice(), kept as FAST_RDTSCP in
 * fast_clocks); this program checks that, then forces each in turn, so
 * that a host's CPU leaves neither untested where it has both:
 * every fine clock from a synthetic line page, fast, within the system
 * calls around it and never back.  With FAST_RDTSCP set, the clock ids
 * from 12 up (31 is the bit's own) are the kernel's answer.
 *
 * The floor: a line reading of a clock that never goes back, below this
 * process's floor of it while mode_seen says LINE (a fallback of another
 * thread raised it), is raised to the floor, every time.
 *
 * Updates: the module writes mode none, then line, inside each update; a
 * read that met one mid-way retries, it does not fall back for "mode".
 *
 * The hint (pvread_tsc_first): a line reading names its clock, with the
 * page's count of resumes, and the fast path then reads the TSC first;
 * where that TSC is for nothing, the hint forgets it after one read: a
 * page in mode none, a forked child that has not checked its offsets, a
 * bound above the tolerance.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"
#include "synthetic.h"
#include "tap.h"
#include "tsc-trap.h"

#define READS 20000

static atomic_bool stop_writer;
#define SLACK_NS 200000LL	/* as test/read.c: the line is steered */

static const clockid_t fine[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
				  CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,
				  CLOCK_TAI };

static int64_t sys_ns(clockid_t clock)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clock, &ts);
	return ns_of(&ts);
}

static bool have_rdtscp(void)
{
	unsigned int eax, ebx, ecx, edx;

	return __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
	       (edx & (1U << 27));
}

/*
 * The page's ticker stopped and its line anchored now, before a test
 * writes the page itself: two writers would break its seqcount (a lost
 * increment leaves seq even inside updates, odd between them: seen, the
 * writer's mode none read as the page's).
 */
static void stop_ticker(struct synthetic *s)
{
	synthetic_stop(s);
	synthetic_line_update(s);
}

/* The page's error bound set to @ns, as an update writes it: the old one. */
static uint64_t set_bound(struct synthetic *s, uint64_t ns)
{
	uint64_t old = s->hdr->error_bound_ns;

	synthetic_write_begin(s);
	s->hdr->error_bound_ns = ns;
	synthetic_write_end(s);
	return old;
}

/* The page's mode, written as an update writes it. */
static void set_mode(struct synthetic *s, uint32_t mode)
{
	synthetic_write_begin(s);
	__atomic_store_n(&s->hdr->mode, mode, __ATOMIC_RELAXED);
	synthetic_write_end(s);
}

/*
 * This process's fast_clocks with FAST_RDTSCP as @rdtscp says; the hint,
 * which keeps the TSC read of the line reading that set it, forgotten.
 */
static void force(struct process *p, bool rdtscp)
{
	if (rdtscp)
		atomic_fetch_or(&p->fast_clocks, FAST_RDTSCP);
	else
		atomic_fetch_and(&p->fast_clocks, ~FAST_RDTSCP);
	atomic_store(&pvread_tsc_first, 0);
}

/*
 * @n reads of each fine clock: failures (outside the system calls around
 * it, or a steady clock back), and slow reads into *@slow.
 */
static long read_all(int n, unsigned long long *slow)
{
	struct pvread_stats st0, st1;
	long bad = 0;
	unsigned int c;
	int i;

	pvread_get_stats(&st0);
	for (c = 0; c < sizeof(fine) / sizeof(fine[0]); c++) {
		int64_t prev = 0;

		for (i = 0; i < n; i++) {
			int64_t before = sys_ns(fine[c]), after, v;
			struct timespec ts;

			pvread_clock_gettime(fine[c], &ts);
			after = sys_ns(fine[c]);
			v = ns_of(&ts);
			if (v < before - SLACK_NS || v > after + SLACK_NS ||
			    (never_back(fine[c]) && v < prev)) {
				if (bad++ < 3)
					printf("# clock %d: %lld not within [%lld, %lld] (previous %lld)\n",
					       (int)fine[c], (long long)v,
					       (long long)before,
					       (long long)after,
					       (long long)prev);
			}
			prev = v;
		}
	}
	pvread_get_stats(&st1);
	*slow = st1.slow - st0.slow;
	return bad;
}

/* One read of CLOCK_MONOTONIC: 1 where outside the system calls around it. */
static int read_monotonic_bracketed(void)
{
	int64_t before = sys_ns(CLOCK_MONOTONIC), v;
	struct timespec ts;

	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	v = ns_of(&ts);
	return v < before - SLACK_NS || v > sys_ns(CLOCK_MONOTONIC) + SLACK_NS;
}

static void check_read(struct process *p, bool rdtscp, const char *name)
{
	unsigned long long slow;
	long bad;

	force(p, rdtscp);
	bad = read_all(READS, &slow);
	tap_result(!bad && !slow,
		   "%s: %d reads of each fine clock, fast (%llu slow), within the system calls, never back (%ld not)",
		   name, READS, slow, bad);
}

/*
 * A line anchored before the TSC's high half last turned: the read takes
 * the whole counter, not its low half against the anchor's.  The anchor
 * moved back from now to a millisecond before the turn, the same line
 * with the longest span its arithmetic fits (3.3 s or more): every clock
 * read fast, within the system calls, by both TSC reads.  The anchor at
 * most 2 s back leaves the reads a second or more; only a TSC slower than
 * 2.1 GHz, whose low half turns less often, may make this wait for it.
 */
#define HIGH_HALF_READS 2000

static void check_high_half(struct process *p, struct synthetic *s)
{
	const struct timespec pause = { 0, 1000000 };
	unsigned long long slow, slow2 = 0;
	uint64_t stamp;
	long bad, bad2 = 0;

	while ((uint32_t)__rdtsc() > 2 * s->tsc_hz)
		nanosleep(&pause, NULL);
	stop_ticker(s);
	stamp = s->hdr->line.tsc_timestamp;
	synthetic_line_move_anchor(s, (uint32_t)stamp + s->tsc_hz / 1000);
	force(p, false);
	bad = read_all(HIGH_HALF_READS, &slow);
	if (have_rdtscp()) {
		force(p, true);
		bad2 = read_all(HIGH_HALF_READS, &slow2);
	}
	printf("# anchor %#llx, now %#llx, span %#llx\n",
	       (unsigned long long)s->hdr->line.tsc_timestamp,
	       (unsigned long long)__rdtsc(),
	       (unsigned long long)s->hdr->line.tsc_span);
	tap_result(!bad && !bad2 && !slow && !slow2,
		   "a line anchored before the TSC's high half turned: %d reads of each fine clock, fast (%llu slow), within the system calls, never back (%ld not)",
		   HIGH_HALF_READS, slow + slow2, bad + bad2);
	if (synthetic_start(s, 4000))
		printf("Bail out! ticker: %s\n", strerror(errno));
}

/*
 * Clock ids from 12 (the first the page has no base for) to 63, and a
 * large one, as libc: test/read's passthrough checks the large one alone.
 */
static void check_ids(struct process *p)
{
	int ra, rb, ea, eb, bad = 0;
	struct timespec a, b;
	clockid_t id;

	/* Safe without rdtscp too: no read of these ids reaches the TSC. */
	force(p, true);
	for (id = 12; id <= 64; id++) {
		clockid_t c = id == 64 ? 12345 : id;

		errno = 0;
		ra = clock_gettime(c, &a);
		ea = errno;
		errno = 0;
		rb = pvread_clock_gettime(c, &b);
		eb = errno;
		if (ra != rb || ea != eb) {
			printf("# clock id %d: libc %d/%s, pvread %d/%s\n",
			       (int)c, ra, strerror(ea), rb, strerror(eb));
			bad++;
		}
	}
	tap_result(!bad, "FAST_RDTSCP set: clock ids 12-63 and 12345 get libc's answer (%d differ)",
		   bad);
}

/*
 * Each steady clock read from the line (mode_seen LINE), then its floor
 * set 1 s ahead, as a fallback's kernel answer ahead of the line would
 * raise it: the next 1000 reads each exactly the floor.
 */
static void check_floor(struct process *p)
{
	static const clockid_t steady[] = { CLOCK_MONOTONIC,
					    CLOCK_MONOTONIC_RAW,
					    CLOCK_BOOTTIME };
	int bad = 0, notline = 0, i;
	unsigned int c;

	force(p, false);
	for (c = 0; c < sizeof(steady) / sizeof(steady[0]); c++) {
		clockid_t clock = steady[c];
		struct timespec ts;
		int64_t floor;

		pvread_clock_gettime(clock, &ts);
		pvread_clock_gettime(clock, &ts);
		if (atomic_load(&p->mode_seen[clock]) != SEEN_LINE) {
			notline++;
			continue;
		}
		floor = ns_of(&ts) + NSEC_PER_SEC;
		atomic_store(&p->floors[clock].ns, floor);
		for (i = 0; i < 1000; i++) {
			pvread_clock_gettime(clock, &ts);
			if (ns_of(&ts) != floor && bad++ < 3)
				printf("# clock %d: %lld, floor %lld\n",
				       (int)clock, (long long)ns_of(&ts),
				       (long long)floor);
		}
	}
	tap_result(!bad && !notline,
		   "a line reading below the floor (mode_seen LINE) is raised to it: MONOTONIC, _RAW, BOOTTIME, 1000 reads each (%d not; %d clocks not in LINE)",
		   bad, notline);
}

/*
 * CLOCK_MONOTONIC's line record (src/internal.h) names the page's seq: its
 * reads come from it.  A key naming no seq makes the next read make it
 * anew (a key above 32 bits, not RECORD_BUSY).
 */
static bool record_names_page(struct process *p)
{
	return atomic_load(&p->line.key) == p->map.hdr->seq;
}

/*
 * The line record's span: a line read from the record until past its span
 * with no update in between (the module stopped re-anchoring), then the
 * kernel's answers (delta), not the record's line further on.
 */
static void check_record_span(struct process *p, struct synthetic *s)
{
	const struct timespec past = { 0, 30000000 };
	struct pvread_stats st0, st1;
	bool named;
	long bad = 0;
	int i;

	force(p, true);
	stop_ticker(s);
	/* Readable for 10 ms from now. */
	synthetic_write_begin(s);
	s->hdr->line.tsc_span = s->tsc_hz / 100;
	synthetic_write_end(s);
	for (i = 0; i < 3; i++)
		bad += read_monotonic_bracketed();
	named = record_names_page(p);
	nanosleep(&past, NULL);
	pvread_get_stats(&st0);
	for (i = 0; i < 100; i++)
		bad += read_monotonic_bracketed();
	pvread_get_stats(&st1);
	synthetic_line_update(s);
	synthetic_start(s, 4000);
	printf("# a 10 ms span: the record %s the page; 30 ms later %llu of 100 reads the kernel's for \"delta\", %ld outside the system calls\n",
	       named ? "named" : "did not name",
	       (unsigned long long)(st1.slow_by_reason[PVREAD_SLOW_DELTA] -
				    st0.slow_by_reason[PVREAD_SLOW_DELTA]),
	       bad);
	tap_result(named && !bad &&
		   st1.slow_by_reason[PVREAD_SLOW_DELTA] -
		   st0.slow_by_reason[PVREAD_SLOW_DELTA] == 100,
		   "the line record: read within its line's span, the kernel's answer past it");
}

/*
 * No line record at a bound above the tolerance, where the page is checked
 * by a read that took the TSC first (REALTIME's, the hint naming it): the
 * next MONOTONIC read is the kernel's too, for "bound".
 */
static void check_record_bound(struct process *p, struct synthetic *s)
{
	struct pvread_stats st0, st1;
	struct timespec ts;
	uint64_t bound;
	bool named;

	force(p, true);
	stop_ticker(s);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	bound = set_bound(s, p->map.tolerance_ns + 1);
	pvread_get_stats(&st0);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	named = record_names_page(p);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_get_stats(&st1);
	set_bound(s, bound);
	synthetic_start(s, 4000);
	printf("# the bound above the tolerance: after a REALTIME read the record %s the page; REALTIME, MONOTONIC: %llu the kernel's for \"bound\"\n",
	       named ? "named" : "did not name",
	       (unsigned long long)(st1.slow_by_reason[PVREAD_SLOW_BOUND] -
				    st0.slow_by_reason[PVREAD_SLOW_BOUND]));
	tap_result(!named &&
		   st1.slow_by_reason[PVREAD_SLOW_BOUND] -
		   st0.slow_by_reason[PVREAD_SLOW_BOUND] == 2,
		   "the line record: none where the bound is above the tolerance, whichever read checked the page");
}

/*
 * The line record where this process's floor holds every reading it
 * returned (mode_seen FLOOR, as a fallback leaves it): the next reading
 * of the line is the slow path's, which notes it (LINE), so that a
 * fallback after it holds at it.  The line 50 us ahead of the kernel: a
 * fallback not held there goes back by as much.
 */
static void check_record_mode_seen(struct process *p, struct synthetic *s)
{
	struct timespec ts;
	int64_t line, fell_back;
	uint64_t bound;
	uint32_t seen;
	bool named;

	int i;

	force(p, true);
	stop_ticker(s);
	synthetic_line_shift(s, 50000);
	named = true;
	seen = SEEN_LINE;
	/* Five times: each must note the reading, not one may skip it. */
	for (i = 0; i < 5; i++) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		named &= record_names_page(p);
		/* A fallback's state: the floor at the last reading, FLOOR. */
		atomic_store(&p->floors[CLOCK_MONOTONIC].ns, ns_of(&ts));
		atomic_store(&p->mode_seen[CLOCK_MONOTONIC], SEEN_FLOOR);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		line = ns_of(&ts);
		if (atomic_load(&p->mode_seen[CLOCK_MONOTONIC]) != SEEN_LINE)
			seen = atomic_load(&p->mode_seen[CLOCK_MONOTONIC]);
	}
	bound = set_bound(s, p->map.tolerance_ns + 1);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	fell_back = ns_of(&ts);
	set_bound(s, bound);
	synthetic_start(s, 4000);
	printf("# the line 50 us ahead: the record %s the page; with FLOOR, a line reading leaves mode_seen %u; a fallback after it %+lld ns from it\n",
	       named ? "named" : "did not name", seen,
	       (long long)(fell_back - line));
	tap_result(named && seen == SEEN_LINE && fell_back >= line,
		   "the line record: not read where the floor holds every reading (FLOOR): the slow path notes the line reading, and a fallback after it holds at it");
}

/* The module's update, as pvread_publish() writes it, over and over. */
static void *writer(void *arg)
{
	struct synthetic *s = arg;
	int i;

	while (!atomic_load(&stop_writer)) {
		synthetic_write_begin(s);
		__atomic_store_n(&s->hdr->mode, PVREAD_MODE_NONE,
				 __ATOMIC_RELAXED);
		for (i = 0; i < 16; i++)
			_mm_pause();
		__atomic_store_n(&s->hdr->mode, PVREAD_MODE_LINE,
				 __ATOMIC_RELAXED);
		synthetic_write_end(s);
		for (i = 0; i < 16; i++)
			_mm_pause();
	}
	return NULL;
}

/*
 * CLOCK_MONOTONIC reads while a thread writes mode none then line in
 * update after update (the ticker stopped: one writer), until 50 reads met
 * an update (retries) or 3 s passed: none falls back for "mode".  A host
 * where no read met one (no second CPU free) skips, saying so.
 */
static void check_updates(struct synthetic *s)
{
	struct pvread_stats st0, st1;
	struct timespec ts;
	pthread_t t;
	int64_t until;
	long n = 0;

	force(atomic_load(&pvread_process), false);
	stop_ticker(s);
	pvread_get_stats(&st0);
	if (pthread_create(&t, NULL, writer, s)) {
		tap_result(0, "updates: no writer thread");
		return;
	}
	until = sys_ns(CLOCK_MONOTONIC) + 3000000000LL;
	do {
		for (int i = 0; i < 1000; i++, n++)
			pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_get_stats(&st1);
	} while (st1.retries - st0.retries < 50 &&
		 sys_ns(CLOCK_MONOTONIC) < until);
	atomic_store(&stop_writer, true);
	pthread_join(t, NULL);
	pvread_get_stats(&st1);
	if (st1.retries == st0.retries &&
	    st1.slow_by_reason[PVREAD_SLOW_MODE] ==
	    st0.slow_by_reason[PVREAD_SLOW_MODE]) {
		tap_result(1, "an update writing mode none then line # SKIP no read of %ld met an update in 3 s",
			   n);
		return;
	}
	/* The figures on a "# " line: the result's name is the same every run. */
	printf("# an update writing mode none then line: %ld reads, %llu retried, %llu fell back for mode\n",
	       n, (unsigned long long)(st1.retries - st0.retries),
	       (unsigned long long)(st1.slow_by_reason[PVREAD_SLOW_MODE] -
				    st0.slow_by_reason[PVREAD_SLOW_MODE]));
	tap_result(st1.slow_by_reason[PVREAD_SLOW_MODE] ==
		   st0.slow_by_reason[PVREAD_SLOW_MODE],
		   "an update writing mode none then line: no read fell back for mode");
}

/*
 * rdtscp trapped (PR_SET_TSC) and emulated: the ones at this program's own
 * code (libpvread.a's fast path: its one rdtscp is tsc_read()'s; the
 * slow path's reads are lfence; rdtsc) counted, not the vDSO's.
 */
extern const char __executable_start[], etext[];
static volatile sig_atomic_t own_rdtscp;

static void count_rdtscp(int sig, siginfo_t *si, void *uc)
{
	const ucontext_t *u = uc;
	const char *insn = (const char *)u->uc_mcontext.gregs[REG_RIP];
	int len = tsc_trap_len(u);
	uint64_t tsc;

	(void)sig;
	(void)si;
	tsc_trap(false);
	tsc = __rdtsc();
	tsc_trap(true);
	if (len == 3 && insn >= __executable_start && insn < etext)
		own_rdtscp++;
	tsc_trap_return(uc, len, tsc);
}

/* @n reads of @clock, rdtscp trapped: the fast path's in *@traps. */
static int trapped_reads(clockid_t clock, int n, int *traps)
{
	struct timespec ts;
	int i;

	own_rdtscp = 0;
	if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0))
		return -1;
	for (i = 0; i < n; i++)
		pvread_clock_gettime(clock, &ts);
	tsc_trap(false);
	*traps = own_rdtscp;
	return 0;
}

/*
 * The hint's own state, where nothing need trap (the hint test below
 * counts the TSC reads it saves, which needs rdtscp and the trap), for
 * CLOCK_REALTIME, which reads the TSC first where the hint names it
 * (CLOCK_MONOTONIC reads its line record, the TSC after the seq, where
 * the hint names it, the page otherwise): a line reading names its clock, with the page's resumes; after a resume the
 * next read, its TSC taken first and stale, names the new count; a clock
 * the process may no longer read from the page (fast_clocks without it)
 * is forgotten at its next read, and named again at the one after it is
 * back; a read the kernel answers (the bound above the tolerance) forgets
 * it too.
 */
static void check_hint_state(struct process *p, struct synthetic *s)
{
	const uint32_t mono = BIT_OF(CLOCK_REALTIME);
	uint64_t named, resumed, dropped, back, modeless, relined, fell_back;
	uint64_t want, bound;
	struct timespec ts;

	force(p, false);
	stop_ticker(s);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	named = atomic_load(&pvread_tsc_first);
	synthetic_write_begin(s);
	s->hdr->disruptions++;
	synthetic_write_end(s);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	resumed = atomic_load(&pvread_tsc_first);
	want = (uint32_t)s->hdr->disruptions;
	atomic_fetch_and(&p->fast_clocks, ~mono);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	dropped = atomic_load(&pvread_tsc_first);
	atomic_fetch_or(&p->fast_clocks, mono);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	back = atomic_load(&pvread_tsc_first);
	set_mode(s, PVREAD_MODE_NONE);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	modeless = atomic_load(&pvread_tsc_first);
	set_mode(s, PVREAD_MODE_LINE);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	relined = atomic_load(&pvread_tsc_first);
	bound = set_bound(s, p->map.tolerance_ns + 1);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	fell_back = atomic_load(&pvread_tsc_first);
	set_bound(s, bound);
	printf("# the hint: %#llx after line readings, %#llx after a resume (the page's count %llu), %#llx after a read without the clock in fast_clocks, %#llx with it again, %#llx after a read in mode none, %#llx after line readings again, %#llx after a fallback (the bound above the tolerance)\n",
	       (unsigned long long)named, (unsigned long long)resumed,
	       (unsigned long long)want, (unsigned long long)dropped,
	       (unsigned long long)back, (unsigned long long)modeless,
	       (unsigned long long)relined, (unsigned long long)fell_back);
	tap_result(clock_in((uint32_t)named, CLOCK_REALTIME) &&
		   named >> 32 == want - 1 &&
		   clock_in((uint32_t)resumed, CLOCK_REALTIME) &&
		   resumed >> 32 == want &&
		   !clock_in((uint32_t)dropped, CLOCK_REALTIME) &&
		   clock_in((uint32_t)back, CLOCK_REALTIME) &&
		   (uint32_t)modeless == HINT_KERNEL &&
		   clock_in((uint32_t)relined, CLOCK_REALTIME) &&
		   !((uint32_t)relined & HINT_KERNEL) &&
		   !clock_in((uint32_t)fell_back, CLOCK_REALTIME),
		   "the hint: a line reading names its clock and the page's resumes; a resume renews it; a clock not fast, or a fallback, is forgotten; mode none makes it the kernel's");
}

#define NO_PAGE_TEST "no page: a forked child's reads are the kernel's, first, as its parent's"
#define HINT_TEST "the hint: a line reading names its clock; in mode none (a child that has not checked its offsets, its parent) and with the bound above the tolerance, the TSC read once for nothing, then not (REALTIME from the page, MONOTONIC from its record)"

static void check_hint(struct process *p, struct synthetic *s)
{
	struct sigaction sa = { .sa_sigaction = count_rdtscp,
				.sa_flags = SA_SIGINFO };
	int none = -1, child = -1, above = -1, status;
	int mnone = -1, mchild = -1, mabove = -1;
	uint64_t hint, left, relined, bound;
	struct timespec ts;
	pid_t pid;
	const char *no_trap;

	if (!have_rdtscp()) {
		tap_result(1, "%s # SKIP rdtscp not offered (the count is of rdtscp)",
			   HINT_TEST);
		return;
	}
	no_trap = tsc_trap_missing();
	if (no_trap) {
		tap_result(1, "%s # SKIP %s", HINT_TEST, no_trap);
		return;
	}
	force(p, true);
	stop_ticker(s);
	/* Resumes past 2^32: the hint keeps the count's low 32 bits. */
	synthetic_write_begin(s);
	s->hdr->disruptions = (1ULL << 32) + 5;
	synthetic_write_end(s);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	hint = atomic_load(&pvread_tsc_first);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	set_mode(s, PVREAD_MODE_NONE);
	/* A child, its offsets unchecked, and the hint its parent's. */
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int traps, mtraps;

		if (trapped_reads(CLOCK_REALTIME, 1000, &traps))
			_exit(255);
		atomic_store(&pvread_tsc_first, hint);
		if (trapped_reads(CLOCK_MONOTONIC, 1000, &mtraps))
			_exit(255);
		_exit((mtraps > 9 ? 9 : mtraps) * 10 + (traps > 9 ? 9 : traps));
	}
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) != 255) {
		mchild = WEXITSTATUS(status) / 10;
		child = WEXITSTATUS(status) % 10;
	}
	if (trapped_reads(CLOCK_REALTIME, 1000, &none))
		none = -1;
	left = atomic_load(&pvread_tsc_first);
	/* Each clock's reads from the hint that names them both. */
	atomic_store(&pvread_tsc_first, hint);
	if (trapped_reads(CLOCK_MONOTONIC, 1000, &mnone))
		mnone = -1;
	/* Line mode again, a line reading, then the bound above the tolerance. */
	set_mode(s, PVREAD_MODE_LINE);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	relined = atomic_load(&pvread_tsc_first);
	bound = set_bound(s, p->map.tolerance_ns + 1);
	if (trapped_reads(CLOCK_REALTIME, 1000, &above))
		above = -1;
	atomic_store(&pvread_tsc_first, relined);
	if (trapped_reads(CLOCK_MONOTONIC, 1000, &mabove))
		mabove = -1;
	set_bound(s, bound);
	signal(SIGSEGV, SIG_DFL);
	printf("# the hint: %#llx after line readings of MONOTONIC and REALTIME (fast_clocks %#x); rdtscp on the fast path in 1000 reads of REALTIME, MONOTONIC in mode none: %d, %d in a child that has not checked its offsets, %d, %d in its parent (the hint %#llx after them); the hint %#llx after line readings again, and with the bound above the tolerance %d, %d in 1000 reads\n",
	       (unsigned long long)hint, atomic_load(&p->fast_clocks), child,
	       mchild, none, mnone, (unsigned long long)left,
	       (unsigned long long)relined, above, mabove);
	tap_result(clock_in((uint32_t)hint, CLOCK_REALTIME) &&
		   clock_in((uint32_t)hint, CLOCK_MONOTONIC) &&
		   (hint & FAST_RDTSCP) &&
		   hint >> 32 == 5 &&
		   child == 1 && none == 1 && left == HINT_KERNEL &&
		   mchild == 1 && mnone == 1 && mabove == 1 &&
		   clock_in((uint32_t)relined, CLOCK_REALTIME) && above == 1,
		   "%s", HINT_TEST);
}

/*
 * The kernel first (the hint HINT_KERNEL, mode none) only for the clocks
 * the page serves: a CPU-time clock, and an id no clock has, are the slow
 * path's, counted "other" as pvread(3) says, the id's EINVAL the kernel's.
 */
static void check_kernel_first_others(void)
{
	struct pvread_stats a, b;
	struct timespec ts;
	int cpu, bad_id, bad_errno;

	pvread_get_stats(&a);
	cpu = pvread_clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	errno = 0;
	bad_id = pvread_clock_gettime(12, &ts);
	bad_errno = errno;
	pvread_get_stats(&b);
	printf("# the kernel first (hint %#llx): CLOCK_PROCESS_CPUTIME_ID %d, id 12 %d (%s); %llu more \"other\", %llu more \"mode\"\n",
	       (unsigned long long)atomic_load(&pvread_tsc_first), cpu, bad_id,
	       strerror(bad_errno),
	       (unsigned long long)(b.slow_by_reason[PVREAD_SLOW_OTHER] -
				    a.slow_by_reason[PVREAD_SLOW_OTHER]),
	       (unsigned long long)(b.slow_by_reason[PVREAD_SLOW_MODE] -
				    a.slow_by_reason[PVREAD_SLOW_MODE]));
	tap_result(atomic_load(&pvread_tsc_first) == HINT_KERNEL && !cpu &&
		   bad_id == -1 && bad_errno == EINVAL &&
		   b.slow_by_reason[PVREAD_SLOW_OTHER] -
		   a.slow_by_reason[PVREAD_SLOW_OTHER] == 2 &&
		   b.slow_by_reason[PVREAD_SLOW_MODE] ==
		   a.slow_by_reason[PVREAD_SLOW_MODE],
		   "the kernel first in mode none: only for the clocks the page serves (a CPU-time clock, id 12: \"other\", EINVAL)");
}

/*
 * A child forked while the kernel answers first (the hint HINT_KERNEL,
 * mode none): its state's second half wiped, its first read the kernel's
 * answer, first, and noted as the only kind it returned (mode_seen
 * KERNEL: a later page reading starts its floor there); then, the page
 * in line mode again, a reading within the system calls.
 */
static void check_kernel_first_child(struct process *p, struct synthetic *s)
{
	struct timespec ts;
	int64_t before, after;
	int status, code = -1;
	uint64_t hint;
	pid_t pid;

	stop_ticker(s);
	set_mode(s, PVREAD_MODE_NONE);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	hint = atomic_load(&pvread_tsc_first);
	check_kernel_first_others();
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (atomic_load(&p->fast_clocks) ||
		    atomic_load(&p->mode_seen[CLOCK_MONOTONIC]) != SEEN_NEVER)
			_exit(3);
		before = sys_ns(CLOCK_MONOTONIC);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		after = sys_ns(CLOCK_MONOTONIC);
		if (ns_of(&ts) < before || ns_of(&ts) > after)
			_exit(1);
		if (atomic_load(&p->mode_seen[CLOCK_MONOTONIC]) != SEEN_KERNEL)
			_exit(2);
		set_mode(s, PVREAD_MODE_LINE);
		before = sys_ns(CLOCK_MONOTONIC);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		after = sys_ns(CLOCK_MONOTONIC);
		_exit(ns_of(&ts) < before - SLACK_NS ||
		      ns_of(&ts) > after + SLACK_NS ? 4 : 0);
	}
	if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
		code = WEXITSTATUS(status);
	set_mode(s, PVREAD_MODE_LINE);
	printf("# the kernel first: the hint %#llx in mode none; a child forked then exits %d (0: its first read the kernel's, within the system calls, noted KERNEL; then the page's within them; 1: not within; 2: not noted; 3: its state not wiped; 4: the page's not within)\n",
	       (unsigned long long)hint, code);
	tap_result(hint == HINT_KERNEL && code == 0,
		   "the kernel first in mode none: a child forked then reads the kernel's answer, noted as such, then the page's");
}

/*
 * No page (no /dev/pvread): the process's reads are the kernel's, first
 * (the hint HINT_KERNEL, fast_clocks FAST_KERNEL), and so are those of a
 * child it forks, whose fork wiped both: after the child's first read, not
 * the slow path at every read.  Run before this program takes its page.
 */
static void check_no_page_child(void)
{
	struct timespec ts;
	int status = -1;
	pid_t pid;

	if (!access(PVREAD_DEVICE, F_OK)) {
		tap_result(1, "%s # SKIP " PVREAD_DEVICE " is here", NO_PAGE_TEST);
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			struct process *p = atomic_load(&pvread_process);
			uint64_t hint;
			int i, bad = 0;

			for (i = 0; i < 3; i++) {
				int64_t before = sys_ns(CLOCK_MONOTONIC), v;

				pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
				v = ns_of(&ts);
				bad += v < before ||
				       v > sys_ns(CLOCK_MONOTONIC);
			}
			hint = atomic_load(&pvread_tsc_first);
			printf("# no page: a forked child's hint %#llx, fast_clocks %#x after its reads (%d outside the system calls)\n",
			       (unsigned long long)hint,
			       p ? atomic_load(&p->fast_clocks) : 0, bad);
			fflush(stdout);
			_exit(!p || hint != HINT_KERNEL ||
			      atomic_load(&p->fast_clocks) != FAST_KERNEL ||
			      bad);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid)
			_exit(2);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 3);
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	tap_result(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		   "%s", NO_PAGE_TEST);
}

int main(void)
{
	static struct synthetic page;
	struct timespec ts;
	struct process *p;
	uint32_t chose;

	tap_plan(15);
	check_no_page_child();
	if (synthetic_init(&page, PVREAD_MODE_LINE) ||
	    pvread_use_page(page.hdr, page.size) ||
	    synthetic_start(&page, 4000)) {
		printf("Bail out! synthetic page: %s\n", strerror(errno));
		return 1;
	}
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	p = atomic_load(&pvread_process);
	if (!p || !atomic_load(&p->fast_clocks)) {
		printf("Bail out! the page was not taken\n");
		return 1;
	}
	chose = atomic_load(&p->fast_clocks) & FAST_RDTSCP;
	printf("# rdtscp offered: %s; taken: %s\n", have_rdtscp() ? "yes" : "no",
	       chose ? "rdtscp" : "lfence; rdtsc");
	tap_result(!chose == !have_rdtscp(),
		   "the TSC read: rdtscp exactly where CPUID offers it");
	check_read(p, false, "lfence; rdtsc");
	if (have_rdtscp())
		check_read(p, true, "rdtscp");
	else
		tap_result(1, "rdtscp: %d reads of each fine clock, fast (0 slow), within the system calls, never back (0 not) # SKIP not offered by this CPU",
			   READS);
	check_high_half(p, &page);
	check_ids(p);
	check_record_span(p, &page);
	check_record_bound(p, &page);
	check_record_mode_seen(p, &page);
	check_floor(p);
	check_hint_state(p, &page);
	check_hint(p, &page);
	check_kernel_first_child(p, &page);
	check_updates(&page);
	synthetic_stop(&page);
	return tap_exit();
}
