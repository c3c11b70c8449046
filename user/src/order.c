// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: what never goes back.  The per-process floors, the hold at
 * the line after line readings (not_below_line()), and the kernel's answer
 * that every read falls back to (pvread_slow_clock_gettime()), with the
 * state each clock was last answered in (mode_seen: internal.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "arith.h"
#include "internal.h"

#define HOLD_MARGIN_TSC 4096	/* see not_below_line() */

static inline void set_ns(struct timespec *ts, int64_t v)
{
	ts->tv_sec = v / NSEC_PER_SEC;
	ts->tv_nsec = v % NSEC_PER_SEC;
}

/* Never below what this process returned before, on any thread. */
/* @clock's floor at least @v; the floor as it was, if it was above. */
static int64_t raise_floor(struct process *p, clockid_t clock, int64_t v)
{
	_Atomic int64_t *f = &p->floors[clock].ns;
	int64_t cur = atomic_load_explicit(f, memory_order_relaxed);

	while (v > cur)
		if (atomic_compare_exchange_weak_explicit(f, &cur, v,
				memory_order_relaxed, memory_order_relaxed))
			return v;
	return cur;
}

void pvread_apply_floor(struct process *p, clockid_t clock,
			struct timespec *ts)
{
	int64_t v = ns_of(ts), cur = raise_floor(p, clock, v);

	if (v < cur) {
		pvread_thread_stats.clamped++;
		set_ns(ts, cur);
	}
}

/*
 * Line readings need not raise the floor (that would make every reader
 * write one shared cache line): they never decrease across every reader of
 * the page.  They only respect it, for what fallbacks put there: the line
 * may be behind the kernel's clock by up to the bound.
 */
void pvread_respect_floor(struct process *p, clockid_t clock,
			  struct timespec *ts)
{
	int64_t cur = atomic_load_explicit(&p->floors[clock].ns,
					   memory_order_relaxed);

	if (unlikely(ns_of(ts) < cur)) {
		pvread_thread_stats.clamped++;
		set_ns(ts, cur);
	}
}

/*
 * A process that returned readings of the page's line must not return less
 * afterwards, and the kernel's clock may be behind the line by up to the
 * bound.  The module promises that the line's value, clamped to the line's
 * ends, never decreases, also after the mode has left PVREAD_MODE_LINE (the
 * last line stays, its span cut): so the kernel's answer @ts is lifted
 * towards the line's value now.  Fully (@full) where this process may
 * have returned line readings of the clock since its floor last held them
 * all (see pvread_slow_clock_gettime()); else at most the tolerance above
 * the kernel's answer: a line reading anyone returned was within its reader's
 * tolerance of the kernel's clock then (the bound it was read under, an
 * estimate), so the lift still orders the answer after every line reading
 * of a process whose tolerance is no larger, and the error stays within
 * this one's however far the line runs ahead once the bound has crossed
 * it.  Waits for an update as long as a read does (the kernel's own
 * clock_gettime() waits for the timekeeper the same way).  An update that
 * does not complete within that, or a page that never had a line, leaves
 * the answer to the floor.
 */
static __attribute__((noinline, cold))
bool not_below_line(struct process *p, clockid_t clock, struct timespec *ts,
		    bool full)
{
	const struct mapping *m = &p->map;
	const struct pvread_header *h = m->hdr;
	const struct pvread_line *l = &h->line;
	const struct pvread_clock_base *b = &l->base[clock];
	uint64_t stamp, span, snsec, tsc, d, ns, since = 0, most;
	uint32_t seq, mul;
	uint8_t shift;
	struct timespec line;
	int64_t sec, above;
	int tries;

	/* Shifted clocks are never read from the page then: nothing to hold. */
	if (timens_unknown(p, clock))
		return true;
	for (tries = 0; tries < MAX_TRIES;) {
		seq = LOAD(h->seq);
		RMB();
		if (seq & 1) {
			uint64_t now = tsc_ordered();

			if (seq == atomic_load_explicit(&p->stuck_seq,
							memory_order_relaxed))
				return false;
			if (!since) {
				since = now;
			} else if (now - since > MAX_WAIT_TSC) {
				pvread_remember_stuck(p);
				return false;
			}
			_mm_pause();
			continue;
		}
		stamp = LOAD(l->tsc_timestamp);
		span = LOAD(l->tsc_span);
		line_rate(l, clock, &mul, &shift);
		sec = LOAD(b->sec);
		snsec = LOAD(b->snsec);
		tsc = tsc_ordered();
		RMB();
		if (LOAD(h->seq) == seq)
			break;
		tries++;
	}
	if (tries == MAX_TRIES)
		return false;
	/* No line, or none a module writes: nothing anyone read from it. */
	if (!span || (uint64_t)sec > KTIME_SEC_MAX)
		return true;
	/*
	 * Lifting to the line: a little past this TSC.  A line reading that
	 * saw the clock's mode_seen still LINE may have read the TSC after
	 * this, the rdtsc running late past that load; not by more than the
	 * CPU can keep in flight, far fewer ticks than these.
	 */
	if (full)
		tsc += HOLD_MARGIN_TSC;
	d = pvread_line_delta(tsc, stamp);
	if (d > span)
		d = span;
	/*
	 * Beyond 64 bits here: no module's line (a reader checks the product
	 * at its own delta, and may have read this one nearer its anchor).
	 */
	if (!pvread_line_ns(d, mul, shift, snsec, &ns))
		return true;
	set_ts(&line, sec + m->ns.sec[clock], ns + (uint64_t)m->ns.nsec[clock]);
	/* A line near the end of s64 ns (no module's) wraps: no lift. */
	if (__builtin_sub_overflow(ns_of(&line), ns_of(ts), &above) ||
	    above <= 0)
		return true;
	pvread_thread_stats.lifted++;
	most = m->tolerance_ns;
	if ((uint64_t)above > most) {
		if (!full) {
			/* ts is the kernel's: a year's ns cannot overflow it */
			pvread_thread_stats.lift_capped++;
			if (most > (uint64_t)NSEC_PER_SEC << 25)
				most = (uint64_t)NSEC_PER_SEC << 25;
			set_ts(&line, ts->tv_sec, (uint64_t)ts->tv_nsec + most);
		} else {
			pvread_thread_stats.lifted_beyond++;
		}
	}
	*ts = line;
	return true;
}

/*
 * The kernel's answer: the one fallback of every read.  For the clocks
 * that never go back, lifted towards the line if this process has read
 * it, then to the floor, which it raises.  @p: NULL without a mapping (yet).
 *
 * Line readings do not raise the floor (that would be a shared write on
 * every read), so while a clock's mode_seen is PVREAD_MODE_LINE the floor
 * does not hold them: the first fallback then notes MODE_SEEN_HOLDING,
 * lifts fully to the line and raises the floor there, then notes
 * PVREAD_MODE_NONE (the floor holds every reading returned) -- or LINE
 * again if the line could not be read (an update that did not complete),
 * so that the next fallback holds instead.  A fallback that sees HOLDING,
 * or a seed after line readings, lifts fully too; any other only within
 * the tolerance, held by the floor meanwhile: its error decays to the
 * tolerance as the kernel's clock catches up, instead of following a line
 * that runs ahead.  A line reading that sees NONE notes LINE again; one
 * that sees HOLDING falls back (pvread_enter_line()).  Signals are blocked
 * while HOLDING, as while mapping.
 */
__attribute__((noinline, cold))
int pvread_slow_clock_gettime(struct process *p, clockid_t clock,
			      struct timespec *ts, enum pvread_slow_reason why)
{
	_Atomic uint32_t *seen_p;
	uint32_t seen;
	sigset_t all, old;
	bool won, held;
	int ret;

	pvread_thread_stats.slow++;
	pvread_thread_stats.slow_by_reason[why]++;
	ret = pvread_kernel_clock_gettime(clock, ts);
	if (ret || !never_back(clock))
		return ret;
	/* Mapping in progress in another thread: the floors hold all the same. */
	if (!p)
		p = atomic_load_explicit(&pvread_process, memory_order_acquire);
	if (!p)
		return ret;
	if (clock == CLOCK_MONOTONIC_COARSE) {
		pvread_apply_floor(p, clock, ts);
		/*
		 * The kernel's tick can be newer than the page's (its vDSO
		 * data is written before the module's notifier runs): a line
		 * reading held only at the page's MONOTONIC_COARSE could be
		 * below this answer.  MONOTONIC's floor holds it there.
		 */
		raise_floor(p, CLOCK_MONOTONIC, ns_of(ts));
		return ret;
	}
	if (!atomic_load_explicit(&p->line_used, memory_order_relaxed)) {
		pvread_apply_floor(p, clock, ts);
		return ret;
	}
	seen_p = &p->mode_seen[clock];
	seen = atomic_load_explicit(seen_p, memory_order_acquire);
	if (seen != PVREAD_MODE_LINE) {
		not_below_line(p, clock, ts, seen == MODE_SEEN_HOLDING);
		pvread_apply_floor(p, clock, ts);
		return ret;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* Lose the race, and the winner holds: lift fully all the same. */
	won = atomic_compare_exchange_strong(seen_p, &seen, MODE_SEEN_HOLDING);
	held = not_below_line(p, clock, ts, true);
	pvread_apply_floor(p, clock, ts);
	if (won) {
		seen = MODE_SEEN_HOLDING;
		atomic_compare_exchange_strong(seen_p, &seen, held ?
					       PVREAD_MODE_NONE :
					       PVREAD_MODE_LINE);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/*
 * The first line reading of @clock since the floor held every reading
 * returned (mode_seen NONE): note LINE, so that the next fallback holds at
 * the line.  While another thread's fallback holds (HOLDING), that
 * fallback may not have raised the floor yet, so a line reading returned
 * now could be above it unseen: the kernel's answer, lifted fully, instead
 * (PVREAD_SLOW_SEED).  Returns true when *@ts is that answer.
 */
__attribute__((noinline, cold))
bool pvread_enter_line(struct process *p, clockid_t clock, struct timespec *ts)
{
	_Atomic uint32_t *seen_p = &p->mode_seen[clock];
	uint32_t seen = PVREAD_MODE_NONE;

	if (!atomic_load_explicit(&p->line_used, memory_order_relaxed))
		atomic_store_explicit(&p->line_used, true, memory_order_relaxed);
	if (atomic_compare_exchange_strong_explicit(seen_p, &seen,
			PVREAD_MODE_LINE, memory_order_acq_rel,
			memory_order_acquire) || seen == PVREAD_MODE_LINE)
		return false;
	pvread_slow_clock_gettime(p, clock, ts, PVREAD_SLOW_SEED);
	return true;
}
