/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the pvread test programs share: the kernel's answer around a
 * library read (the bracket), the library's pvclock against the kernel's
 * computation from the same record (exactness), the page's state, the
 * vCPUs, the settings the guest scripts pass in the environment, and the
 * what a program that needs pvread.ko on a Xen guest checks first.  The
 * harness and such a program's main() are in pvread_harness.h.
 *
 * Settings (environment; a kselftest runner passes none, and gets the
 * defaults):
 *   PVREAD_TEST_READS    reads per case, at least (default 100000)
 *   PVREAD_TEST_SECONDS  seconds per case, at least (default 2)
 *   PVREAD_EXPECT_MODE   line, none or any (default any): the mode the
 *                        page must settle in
 *   PVREAD_EXPECT_LINE   its line state (active, rates, off, ...; default
 *                        any): why the mode is, or is not, line
 *   PVREAD_KMOD_ARGS     the module's parameters, for a reload
 */
#ifndef PVREAD_SELFTEST_H
#define PVREAD_SELFTEST_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "kselftest.h"
#include "pvread.h"

/*
 * Under emulation the records disagree by milliseconds: the library is
 * let through and its reads are checked against the bound the module
 * publishes instead.
 */
#define PVREAD_TEST_TOLERANCE_NS "1000000000"

#define PVREAD_TEST_MAX_CPUS 1024

static inline int64_t pvst_ns(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

/* The kernel's answer, by the system call (never the vDSO). */
static inline int64_t pvst_sys_ns(clockid_t clock)
{
	struct timespec ts;

	if (syscall(SYS_clock_gettime, clock, &ts))
		ksft_exit_fail_msg("clock_gettime(%d): %s\n", clock,
				   strerror(errno));
	return pvst_ns(&ts);
}

static inline double pvst_elapsed(int64_t since)
{
	return (pvst_sys_ns(CLOCK_MONOTONIC) - since) / 1e9;
}

static inline long pvst_reads(void)
{
	const char *s = getenv("PVREAD_TEST_READS");

	return s && atol(s) > 0 ? atol(s) : 100000;
}

static inline double pvst_seconds(void)
{
	const char *s = getenv("PVREAD_TEST_SECONDS");

	return s && atof(s) >= 0 ? atof(s) : 2.0;
}

/* ---- the vCPUs this process may run on ---- */

struct pvst_cpus {
	int n;
	int id[PVREAD_TEST_MAX_CPUS];
};

static inline void pvst_find_cpus(struct pvst_cpus *c)
{
	cpu_set_t set;
	int i;

	c->n = 0;
	if (sched_getaffinity(0, sizeof(set), &set))
		ksft_exit_fail_msg("sched_getaffinity: %s\n", strerror(errno));
	for (i = 0; i < CPU_SETSIZE && c->n < PVREAD_TEST_MAX_CPUS; i++)
		if (CPU_ISSET(i, &set))
			c->id[c->n++] = i;
}

static inline bool pvst_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0;
}

static inline void pvst_unpin(const struct pvst_cpus *c)
{
	cpu_set_t set;
	int i;

	CPU_ZERO(&set);
	for (i = 0; i < c->n; i++)
		CPU_SET(c->id[i], &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* ---- the page's header: mode and line state ---- */

static const char *const pvst_mode_names[] = {
	[PVREAD_MODE_NONE] = "none", [PVREAD_MODE_LINE] = "line",
};
static const char *const pvst_line_names[] = {
	"active", "off", "unvouched", "warp", "unchecked", "stable", "waiting",
	"rates", "pti",
};
#define PVST_NR_MODES (int)(sizeof(pvst_mode_names) / sizeof(pvst_mode_names[0]))
#define PVST_NR_LINES (int)(sizeof(pvst_line_names) / sizeof(pvst_line_names[0]))
#define PVST_EXPECT_ANY (-1)

static inline const char *pvst_mode_name(uint32_t m)
{
	return m < PVST_NR_MODES ? pvst_mode_names[m] : "?";
}

static inline const char *pvst_line_name(uint32_t s)
{
	return s < PVST_NR_LINES ? pvst_line_names[s] : "?";
}

/* PVREAD_EXPECT_MODE as a PVREAD_MODE_*, or PVST_EXPECT_ANY. */
static inline int pvst_expect_mode(void)
{
	const char *s = getenv("PVREAD_EXPECT_MODE");
	int m;

	if (!s || !*s || !strcmp(s, "any"))
		return PVST_EXPECT_ANY;
	for (m = 0; m < PVST_NR_MODES; m++)
		if (!strcmp(s, pvst_mode_names[m]))
			return m;
	ksft_exit_fail_msg("PVREAD_EXPECT_MODE=%s: not line, none or any\n", s);
	return PVST_EXPECT_ANY;
}

/* PVREAD_EXPECT_LINE as a PVREAD_LINE_*, or PVST_EXPECT_ANY. */
static inline int pvst_expect_line(void)
{
	const char *s = getenv("PVREAD_EXPECT_LINE");
	int l;

	if (!s || !*s || !strcmp(s, "any"))
		return PVST_EXPECT_ANY;
	for (l = 0; l < PVST_NR_LINES; l++)
		if (!strcmp(s, pvst_line_names[l]))
			return l;
	ksft_exit_fail_msg("PVREAD_EXPECT_LINE=%s: not a line state (active, off, unvouched, warp, unchecked, stable, waiting, rates, pti) or any\n",
			   s);
	return PVST_EXPECT_ANY;
}

static inline const char *pvst_expect_name(int expect)
{
	return expect == PVST_EXPECT_ANY ? "any" : pvst_mode_name(expect);
}

static inline const char *pvst_expect_line_name(int expect)
{
	return expect == PVST_EXPECT_ANY ? "any" : pvst_line_name(expect);
}

/* @mode is what @expect (a PVREAD_MODE_* or PVST_EXPECT_ANY) accepts. */
static inline bool pvst_mode_ok(int expect, uint32_t mode)
{
	return expect == PVST_EXPECT_ANY || mode == (uint32_t)expect;
}

/*
 * "line x120, none x3": the nonzero of @n[0..@nr] by @name (@n[@nr]
 * counts the unknown ones); "not sampled" when all are zero.
 */
static inline void pvst_counts(char *buf, size_t len, const long *n, int nr,
			       const char *(*name)(uint32_t))
{
	size_t used = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i <= nr && used < len; i++)
		if (n[i])
			used += snprintf(buf + used, len - used, "%s%s x%ld",
					 used ? ", " : "", i < nr ? name(i) : "?",
					 n[i]);
	if (!used)
		snprintf(buf, len, "not sampled");
}

struct pvst_page {
	uint32_t mode, line_state;
	uint64_t bound, tsc_warp, anchors;
};

/*
 * A consistent copy of the header fields the tests report; false when
 * the device cannot be mapped.  The mapping is the process's own, made
 * once (a test program is one process per test).
 */
static inline bool pvst_page_sample(struct pvst_page *s)
{
	static const volatile struct pvread_header *h;
	uint32_t seq;

	if (!h) {
		int fd = open(PVREAD_DEVICE, O_RDONLY | O_CLOEXEC);
		void *p = MAP_FAILED;

		if (fd >= 0) {
			p = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ,
				 MAP_SHARED, fd, 0);
			close(fd);
		}
		if (p == MAP_FAILED)
			return false;
		h = p;
	}
	for (;;) {
		seq = h->seq;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq & 1) {
			sched_yield();
			continue;
		}
		s->mode = h->mode;
		s->line_state = h->line_state;
		s->bound = h->error_bound_ns;
		s->tsc_warp = h->tsc_warp;
		s->anchors = h->line.anchors;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (h->seq == seq)
			return true;
	}
}

/*
 * The page has settled as expected, and the library agrees with it: line
 * mode (line state active) with the library on its fast path, or mode
 * none for a lasting reason (not the load's or a resume's wait: line
 * state unchecked or waiting) with the library sending every read to the
 * kernel.  @expect and @expect_line: PVREAD_MODE_* and PVREAD_LINE_*, or
 * PVST_EXPECT_ANY.
 */
static inline bool pvst_settled(int expect, int expect_line,
				const struct pvst_page *pg,
				const struct pvread_info *info)
{
	if (!pvst_mode_ok(expect, pg->mode) ||
	    (expect_line != PVST_EXPECT_ANY &&
	     pg->line_state != (uint32_t)expect_line))
		return false;
	if (pg->mode == PVREAD_MODE_LINE)
		return pg->line_state == PVREAD_LINE_ACTIVE && info->fast;
	return pg->mode == PVREAD_MODE_NONE && !info->fast &&
	       pg->line_state != PVREAD_LINE_ACTIVE &&
	       pg->line_state != PVREAD_LINE_UNCHECKED &&
	       pg->line_state != PVREAD_LINE_WAITING;
}

/*
 * Waits up to @seconds for the page to settle in the expected mode and
 * line state (pvst_settled(): the module needs seconds of history before
 * it vouches, and its cross-vCPU TSC check before it draws a line); prints
 * the state on a "# " line.  True when it got there.
 */
static inline bool pvst_wait_settled(int expect, int expect_line,
				     double seconds)
{
	struct pvst_page pg = { 0 };
	struct pvread_info info;
	int64_t t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	bool have, ok;

	for (;;) {
		pvread_get_info(&info);
		have = pvst_page_sample(&pg);
		ok = have && pvst_settled(expect, expect_line, &pg, &info);
		if (ok || pvst_elapsed(t0) >= seconds)
			break;
		usleep(100000);
	}
	ksft_print_msg("page: mode %s, line %s, bound %llu ns, spread %llu ns, tsc_warp %llu, line anchors %llu, %u records registered, library %s, after %.1f s; expected mode %s, line %s; module parameters \"%s\"\n",
		       have ? pvst_mode_name(pg.mode) : "(no page)",
		       pvst_line_name(pg.line_state),
		       (unsigned long long)info.error_bound_ns,
		       (unsigned long long)info.spread_ns,
		       (unsigned long long)pg.tsc_warp,
		       (unsigned long long)pg.anchors, info.nr_registered,
		       info.fast ? "fast" : "slow", pvst_elapsed(t0),
		       pvst_expect_name(expect),
		       pvst_expect_line_name(expect_line),
		       getenv("PVREAD_KMOD_ARGS") ?: "");
	return ok;
}

/* The same, for the expectation of the environment (PVREAD_EXPECT_*). */
static inline bool pvst_wait_expected(double seconds)
{
	return pvst_wait_settled(pvst_expect_mode(), pvst_expect_line(),
				 seconds);
}

/* The page's mode now (PVREAD_MODE_NONE when it cannot be mapped). */
static inline uint32_t pvst_page_mode(void)
{
	struct pvst_page pg = { 0 };

	return pvst_page_sample(&pg) ? pg.mode : PVREAD_MODE_NONE;
}

/* ---- the bracket: a library read between two system calls ---- */

struct pvst_bracket {
	int64_t value;		/* the library's reading */
	int64_t before, after;	/* the kernel's, by the system calls */
	int64_t dev;		/* how far outside [before, after]; 0 inside */
	bool ahead;		/* outside, after the second call */
	uint64_t bound;		/* the bound published around the read */
	uint64_t spread;	/* the records' spread published around it */
};

/* @b's deviation and side, from its reading and the kernel's two. */
static inline void pvst_bracket_judge(struct pvst_bracket *b)
{
	b->ahead = b->value > b->after;
	b->dev = b->value < b->before ? b->before - b->value :
		 (b->value > b->after ? b->value - b->after : 0);
}

/*
 * One read of @clock through the library, between two system calls:
 * beyond the bound when b->dev > b->bound.  The bound and the spread are
 * the larger of what the page said before and after: an update may fall
 * in between.
 */
static inline void pvst_bracket(clockid_t clock, struct pvst_bracket *b)
{
	struct pvread_info i0, i1;
	struct timespec ts;

	pvread_get_info(&i0);
	b->before = pvst_sys_ns(clock);
	pvread_clock_gettime(clock, &ts);
	b->after = pvst_sys_ns(clock);
	pvread_get_info(&i1);
	b->bound = i0.error_bound_ns > i1.error_bound_ns ? i0.error_bound_ns :
							   i1.error_bound_ns;
	b->spread = i0.spread_ns > i1.spread_ns ? i0.spread_ns : i1.spread_ns;
	b->value = pvst_ns(&ts);
	pvst_bracket_judge(b);
}

/* ---- exactness: the library's pvclock is the kernel's ---- */

static inline bool pvst_reference(int fd, struct pvread_reference *ref)
{
	return ioctl(fd, PVREAD_IOC_REFERENCE, ref) == 0;
}

enum pvst_exact {
	PVST_EXACT_UNCHECKED = -1,	/* moved vCPU, or the record rewritten */
	PVST_EXACT_OK = 0,
	PVST_EXACT_VIOLATION = 1,
};

/*
 * @s, a library sample of the pvclock, against the kernel's computation
 * from the same record just before (@before) and after (@after) it: the
 * same vCPU and record version, and in between.
 */
static inline enum pvst_exact
pvst_exact_judge(const struct pvread_reference *before,
		 const struct pvread_sample *s,
		 const struct pvread_reference *after)
{
	if (s->cpu != before->cpu || s->cpu != after->cpu ||
	    before->version != after->version || s->version != before->version)
		return PVST_EXACT_UNCHECKED;
	return s->cycles < before->cycles || s->cycles > after->cycles ?
		PVST_EXACT_VIOLATION : PVST_EXACT_OK;
}

/* One sample of the library's pvclock, judged against the device @fd. */
static inline enum pvst_exact pvst_exact_once(int fd)
{
	struct pvread_reference before, after;
	struct pvread_sample s;

	if (!pvst_reference(fd, &before) || pvread_sample_pvclock(&s) ||
	    !pvst_reference(fd, &after))
		return PVST_EXACT_UNCHECKED;
	return pvst_exact_judge(&before, &s, &after);
}

/* ---- the clocks the page serves ---- */

struct pvst_clock {
	clockid_t id;
	const char *name;
	bool steady;		/* never steps back (no settime moves it) */
};

static const struct pvst_clock pvst_clocks[] = {
	{ CLOCK_MONOTONIC, "CLOCK_MONOTONIC", true },
	{ CLOCK_REALTIME, "CLOCK_REALTIME", false },
	{ CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW", true },
	{ CLOCK_BOOTTIME, "CLOCK_BOOTTIME", true },
	{ CLOCK_TAI, "CLOCK_TAI", false },
	{ CLOCK_MONOTONIC_COARSE, "CLOCK_MONOTONIC_COARSE", true },
	{ CLOCK_REALTIME_COARSE, "CLOCK_REALTIME_COARSE", false },
};
#define PVST_NR_CLOCKS (int)(sizeof(pvst_clocks) / sizeof(pvst_clocks[0]))

/* ---- where the tests that need pvread.ko can run ---- */

static inline bool pvst_xen_guest(void)
{
	char type[16] = { 0 };
	FILE *f = fopen("/sys/hypervisor/type", "r");

	if (!f)
		return false;
	if (!fgets(type, sizeof(type), f))
		type[0] = '\0';
	fclose(f);
	return !strcmp(type, "xen\n");
}

/* Why the tests of the device cannot run here; NULL when they can. */
static inline const char *pvst_why_not_xen(void)
{
	static char why[160];
	char cs[32] = "";
	FILE *f;

	if (!pvst_xen_guest())
		return "not a Xen guest (/sys/hypervisor/type is not \"xen\"): no pvread.ko, no /dev/pvread";
	if (access(PVREAD_DEVICE, F_OK))
		return "no /dev/pvread: pvread.ko is not loaded (modprobe pvread, or insmod pvread.ko)";
	f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	if (f) {
		if (!fgets(cs, sizeof(cs), f))
			cs[0] = '\0';
		fclose(f);
	}
	cs[strcspn(cs, "\n")] = '\0';
	if (strcmp(cs, "xen")) {
		snprintf(why, sizeof(why),
			 "clocksource is %s, not xen: the kernel's vDSO reads the clock, pvread has nothing to publish",
			 cs[0] ? cs : "unknown");
		return why;
	}
	return NULL;
}

/*
 * A KTAP skip that keeps its test's name ("ok N NAME # SKIP REASON"), as
 * vm/check's table needs: this kselftest.h's ksft_test_result_skip()
 * prints the reason alone.
 */
static inline void pvst_skip(const char *name, const char *reason)
{
	ksft_inc_xskip_cnt();
	printf("ok %u %s # SKIP %s\n", ksft_test_num(), name, reason);
}

#endif /* PVREAD_SELFTEST_H */
