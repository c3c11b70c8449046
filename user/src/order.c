// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: what never goes back.  The per-process floors and the state
 * each clock was last answered in (mode_seen: the rules are internal.h's),
 * the hold at the line after line readings (not_below_line()), the kernel's
 * answer that every read falls back to (pvread_slow_clock_gettime()), and
 * the page readings that do not stand as they are (pvread_page_reading()).
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "arith.h"
#include "internal.h"

/*
 * How much later than a load of mode_seen a reader may read its TSC (or
 * the kernel's clock) out of order: what the CPU can keep in flight, far
 * fewer ticks than these (an interrupt or a VM exit in between is taken
 * at an instruction boundary, after the TSC read).
 */
#define HOLD_MARGIN_TSC 4096

static inline void set_ns(struct timespec *ts, int64_t v)
{
	ts->tv_sec = v / NSEC_PER_SEC;
	ts->tv_nsec = v % NSEC_PER_SEC;
}

/* @clock's floor at least @v; the floor as it was, if it was above. */
static int64_t raise_floor(struct process *p, clockid_t clock, int64_t v)
{
	_Atomic int64_t *f = &p->floors[clock].ns;
	int64_t cur = atomic_load_explicit(f, memory_order_relaxed);

	while (v > cur)
		if (atomic_compare_exchange_weak_explicit(f, &cur, v,
				memory_order_seq_cst, memory_order_relaxed))
			return v;
	return cur;
}

/* *@ts at least the floor, and the floor at least *@ts. */
static void apply_floor(struct process *p, clockid_t clock,
			struct timespec *ts)
{
	int64_t v = ns_of(ts), cur = raise_floor(p, clock, v);

	if (v < cur) {
		pvread_thread_stats.clamped++;
		set_ns(ts, cur);
	}
}

/*
 * A line reading *@ts at least the floor, which it does not raise: line
 * readings never decrease across every reader, and a write to the floor
 * on every read would make every reader write one shared cache line.
 */
static void apply_floor_below(struct process *p, clockid_t clock,
			      struct timespec *ts)
{
	int64_t cur = atomic_load_explicit(&p->floors[clock].ns,
					   memory_order_relaxed);

	if (ns_of(ts) < cur) {
		pvread_thread_stats.clamped++;
		set_ns(ts, cur);
	}
}

/* After a change of mode_seen that readers may have missed: see internal.h. */
static void wait_out_readers(void)
{
	uint64_t since = tsc_ordered();

	while (tsc_ordered() - since < HOLD_MARGIN_TSC)
		_mm_pause();
}

/*
 * A process that returned readings of the page's line must not return less
 * afterwards, and the kernel's clock may be behind the line by up to the
 * bound.  The module promises that the line's value, clamped to the line's
 * ends, never decreases, also after the mode has left PVREAD_MODE_LINE (the
 * last line stays, its span cut): so the kernel's answer @ts is lifted
 * towards the line's value at the TSC now.  Fully (@full) where this
 * process may have returned line readings of the clock that its floor
 * does not hold (SEEN_HOLDING); else at most the tolerance above the
 * kernel's answer: a line reading anyone returned was within its reader's
 * tolerance of the kernel's clock then (the bound it was read under, an
 * estimate), so the lift still orders the answer after every line reading
 * of a process whose tolerance is no larger, and the error stays within
 * this one's however far the line runs ahead once the bound has crossed
 * it.  Waits for an update as long as a read does (the kernel's own
 * clock_gettime() waits for the timekeeper the same way).  False if an
 * update did not complete within that: the answer is left to the floor.
 */
static bool not_below_line(struct process *p, clockid_t clock,
			   struct timespec *ts, bool full)
{
	const struct mapping *m = &p->map;
	const struct pvread_header *h = m->hdr;
	const struct pvread_line *l = &h->line;
	const bool wall = !never_back(clock);
	const struct pvread_clock_base *b =
		&l->base[wall ? CLOCK_MONOTONIC : clock];
	const struct pvread_clock_base *tw = &h->tk.base[clock];
	const struct pvread_clock_base *tm = &h->tk.base[CLOCK_MONOTONIC];
	uint64_t stamp, span, snsec, tsc, d, ns, since = 0, most;
	uint64_t tw_snsec = 0, tm_snsec = 0;
	int64_t sec, above, tw_sec = 0, tm_sec = 0, off = 0;
	uint32_t seq, mul, tk_shift = 0;
	uint8_t shift;
	struct timespec line;
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
		if (wall) {
			tw_sec = LOAD(tw->sec);
			tw_snsec = LOAD(tw->snsec);
			tm_sec = LOAD(tm->sec);
			tm_snsec = LOAD(tm->snsec);
			tk_shift = LOAD(h->tk.shift);
		}
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
	d = pvread_line_delta(tsc, stamp);
	if (d > span)
		d = span;
	/*
	 * Beyond 64 bits here: no module's line (a reader checks the product
	 * at its own delta, and may have read this one nearer its anchor).
	 */
	if (!pvread_line_ns(d, mul, shift, snsec, &ns))
		return true;
	if (wall) {
		/*
		 * The wall clock at the kernel's offset now, from its
		 * timekeeper's bases (the line's own offset is the one at its
		 * anchor): a step of the clock since moves the line with it,
		 * as it moves the kernel's answer.  The two bases differ by
		 * whole nanoseconds << shift.
		 */
		if (tk_shift > 32 || tw_snsec >= (uint64_t)NSEC_PER_SEC << tk_shift ||
		    tm_snsec >= (uint64_t)NSEC_PER_SEC << tk_shift ||
		    __builtin_sub_overflow(tw_sec, tm_sec, &off) ||
		    __builtin_mul_overflow(off, NSEC_PER_SEC, &off) ||
		    __builtin_add_overflow(off, ((int64_t)tw_snsec -
					   (int64_t)tm_snsec) >> tk_shift, &off) ||
		    __builtin_add_overflow(sec, off / NSEC_PER_SEC, &sec))
			return true;
		off %= NSEC_PER_SEC;
		if (off < 0) {
			off += NSEC_PER_SEC;
			sec--;
		}
		set_ts(&line, sec, ns + (uint64_t)off);
	} else {
		set_ts(&line, sec + m->ns.sec[clock],
		       ns + (uint64_t)m->ns.nsec[clock]);
	}
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
 * *@ts, the kernel's answer for the steady @clock, about to be returned:
 * as mode_seen says (internal.h).  Before any page reading, as it is
 * (noting KERNEL).  After, lifted towards the line and the floor raised
 * to it: fully where line readings may have been returned that the floor
 * does not hold (LINE: the first fallback holds, LINE -> HOLDING -> FLOOR;
 * HOLDING: another thread holds), else within the tolerance (FLOOR).
 */
static void settle(struct process *p, clockid_t clock, struct timespec *ts)
{
	_Atomic uint32_t *seen_p = &p->mode_seen[clock];
	uint32_t seen = atomic_load(seen_p);
	struct timespec k;
	bool held;

	for (;;) {
		switch (seen) {
		case SEEN_NEVER:
			if (!atomic_compare_exchange_strong(seen_p, &seen,
							    SEEN_KERNEL))
				continue;
			return;
		case SEEN_KERNEL:
			return;
		case SEEN_LINE:
			/* Lose the race, and the winner holds: lift fully. */
			if (!atomic_compare_exchange_strong(seen_p, &seen,
							    SEEN_HOLDING))
				continue;
			/*
			 * Won: the answer at the TSC after the readers that
			 * saw LINE are waited out, the kernel's then too.
			 */
			wait_out_readers();
			if (!pvread_kernel_clock_gettime(clock, &k) &&
			    ns_of(&k) > ns_of(ts))
				*ts = k;
			held = not_below_line(p, clock, ts, true);
			apply_floor(p, clock, ts);
			/* Not held: the next fallback holds instead. */
			seen = SEEN_HOLDING;
			atomic_compare_exchange_strong(seen_p, &seen, held ?
						       SEEN_FLOOR : SEEN_LINE);
			return;
		default:
			not_below_line(p, clock, ts, seen == SEEN_HOLDING);
			apply_floor(p, clock, ts);
			return;
		}
	}
}

/*
 * The kernel's MONOTONIC_COARSE answer *@ts, once the page's has been
 * returned: its floor holds it (the kernel's steps back on NTP frequency
 * changes before Linux 6.15, the page's is held), and MONOTONIC's too
 * where the page's has been: the kernel's tick can be newer than the
 * page's (its vDSO data is written before the module's notifier runs),
 * and a line reading held only at the page's MONOTONIC_COARSE could be
 * below this answer.  Where no page reading of MONOTONIC was returned,
 * KERNEL noted there does that: its first page reading starts the floor
 * at the kernel's MONOTONIC, above this.
 */
static void settle_coarse(struct process *p, struct timespec *ts)
{
	_Atomic uint32_t *seen_p;
	uint32_t seen = SEEN_NEVER;

	seen_p = &p->mode_seen[CLOCK_MONOTONIC_COARSE];
	if (!atomic_compare_exchange_strong(seen_p, &seen, SEEN_KERNEL) &&
	    seen != SEEN_KERNEL)
		apply_floor(p, CLOCK_MONOTONIC_COARSE, ts);
	seen_p = &p->mode_seen[CLOCK_MONOTONIC];
	seen = SEEN_NEVER;
	if (!atomic_compare_exchange_strong(seen_p, &seen, SEEN_KERNEL) &&
	    seen != SEEN_KERNEL)
		raise_floor(p, CLOCK_MONOTONIC, ns_of(ts));
}

/*
 * The kernel's answer *@ts of the wall clock @clock (REALTIME or TAI),
 * where this process has returned line readings of it: lifted towards the
 * line, at the kernel's offset now, within the tolerance.  The kernel
 * steps these clocks, so they keep no floor; but between steps they run
 * as MONOTONIC does, and a fallback must not take them back by the line's
 * lead over the kernel's clock (the bound, at most the tolerance: each
 * answer is then at or above every line reading before it, and answers
 * lifted so rise with the kernel's).
 */
static void lift_wall(struct process *p, clockid_t clock, struct timespec *ts)
{
	if (!p)
		p = atomic_load_explicit(&pvread_process, memory_order_acquire);
	if (p && atomic_load_explicit(&p->mode_seen[clock],
				      memory_order_relaxed) == SEEN_LINE)
		not_below_line(p, clock, ts, false);
}

/* The kernel's answer once the process has read the page: internal.h. */
__attribute__((noinline, cold))
void pvread_settle_answer(struct process *p, clockid_t clock,
			  struct timespec *ts)
{
	if (is_wall(clock))
		lift_wall(p, clock, ts);
	else if (clock == CLOCK_MONOTONIC_COARSE)
		settle_coarse(p, ts);
	else
		settle(p, clock, ts);
}

__attribute__((noinline))
int pvread_slow_clock_gettime(struct process *p, clockid_t clock,
			      struct timespec *ts, enum pvread_slow_reason why)
{
	return kernel_answer(p, clock, ts, why);
}

/*
 * The first page reading of @clock this process returns (mode_seen
 * @seen, NEVER or KERNEL): from now on the floor must hold the kernel's
 * answers, and after KERNEL those returned before (no floor kept them)
 * too: HOLDING while the readers that saw KERNEL are waited out and the
 * kernel's answer raises the floor (others meanwhile take the kernel's
 * answer, lifted fully), then FLOOR, by this thread alone.  False if
 * another thread changed mode_seen first.
 */
static bool start_floor(struct process *p, clockid_t clock, uint32_t seen)
{
	_Atomic uint32_t *seen_p = &p->mode_seen[clock];
	struct timespec k;

	if (seen == SEEN_NEVER)
		return atomic_compare_exchange_strong(seen_p, &seen,
						      SEEN_FLOOR);
	if (!atomic_compare_exchange_strong(seen_p, &seen, SEEN_HOLDING))
		return false;
	wait_out_readers();
	if (!pvread_kernel_clock_gettime(clock, &k))
		raise_floor(p, clock, ns_of(&k));
	seen = SEEN_HOLDING;
	atomic_compare_exchange_strong(seen_p, &seen, SEEN_FLOOR);
	return true;
}

/*
 * A line reading *@ts of the steady @clock that did not stand: outside
 * LINE, or below the floor.  LINE is noted (the next fallback holds at the
 * line), and the reading is raised to the floor if it is below.
 */
static int line_reading(struct process *p, clockid_t clock,
			struct timespec *ts)
{
	_Atomic uint32_t *seen_p = &p->mode_seen[clock];
	uint32_t seen = atomic_load(seen_p);

	for (;;) {
		switch (seen) {
		case SEEN_NEVER:
		case SEEN_KERNEL:
			if (!start_floor(p, clock, seen))
				seen = atomic_load(seen_p);
			else
				seen = SEEN_FLOOR;
			continue;
		case SEEN_HOLDING:
			/*
			 * The holder may not have raised the floor yet: a
			 * line reading returned now could be above it unseen.
			 * The kernel's, lifted fully, instead.
			 */
			return pvread_slow_clock_gettime(p, clock, ts,
							 PVREAD_SLOW_SEED);
		case SEEN_FLOOR:
			if (!atomic_compare_exchange_strong(seen_p, &seen,
							    SEEN_LINE))
				continue;
			break;
		default:
			break;
		}
		break;
	}
	apply_floor_below(p, clock, ts);
	return 0;
}

/*
 * A MONOTONIC_COARSE reading of the page past its floor (or the first):
 * the floor is raised to it, once a tick.  The first one starts the floor
 * after the kernel's answers (start_floor()); while another thread does
 * that, the kernel's answer.
 */
static int coarse_reading(struct process *p, struct timespec *ts)
{
	const clockid_t clock = CLOCK_MONOTONIC_COARSE;
	uint32_t seen = atomic_load(&p->mode_seen[clock]);

	if ((seen == SEEN_NEVER || seen == SEEN_KERNEL) &&
	    !start_floor(p, clock, seen))
		seen = atomic_load(&p->mode_seen[clock]);
	if (seen == SEEN_HOLDING)
		return pvread_slow_clock_gettime(p, clock, ts,
						 PVREAD_SLOW_SEED);
	apply_floor(p, clock, ts);
	return 0;
}

/*
 * A page reading *@ts that does not stand as it is (read.c's stands()):
 * of a steady clock outside LINE, or a MONOTONIC_COARSE past its floor.
 */
__attribute__((noinline, cold))
int pvread_page_reading(struct process *p, clockid_t clock,
			struct timespec *ts)
{
	if (fine_never_back(clock))
		return line_reading(p, clock, ts);
	if (clock == CLOCK_MONOTONIC_COARSE)
		return coarse_reading(p, ts);
	/* A wall clock's first: its fallbacks are lifted from now on. */
	if (is_wall(clock))
		atomic_store_explicit(&p->mode_seen[clock], SEEN_LINE,
				      memory_order_relaxed);
	return 0;
}
