// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: the read path.  See include/uapi/linux/pvread.h for the page
 * and the arithmetic; every step that cannot vouch for its answer returns
 * false and the caller asks the kernel instead (kernel.c, through
 * order.c's pvread_slow_clock_gettime()).  One attempt at the page
 * (try_read()), CLOCK_MONOTONIC's line record (check_line() makes it once
 * per update, lean_monotonic() reads it), the fast entries
 * pvread_clock_gettime() and pvread_ns() with everything they inline here,
 * and the slow path: the first call's mapping (mapping.c), the retries,
 * the floors and the hold at the line (order.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "arith.h"
#include "internal.h"

static inline bool is_mirrored(clockid_t clock)
{
	switch (clock) {
	case CLOCK_REALTIME:
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_BOOTTIME:
	case CLOCK_TAI:
	case CLOCK_REALTIME_COARSE:
	case CLOCK_MONOTONIC_COARSE:
		return true;
	default:
		return false;
	}
}

/*
 * A reading of the page: seconds, and nanoseconds past them (up to a few
 * seconds' worth until try_read() normalises them).  A sec of -1 is no
 * reading: beyond KTIME_SEC_MAX as unsigned, which try_read() refuses.
 */
struct reading {
	int64_t sec;
	uint64_t ns;
};

#define INVALID_READING ((struct reading){ -1, 0 })

/*
 * The kernel's fine clocks are never below its coarse ones: these are the
 * value at the last tick plus the time since.  The line may be behind the
 * kernel by up to the bound, so right after a tick it can be below the
 * coarse clocks the page publishes (and gettimeofday()'s second below
 * time()'s): hold it at MONOTONIC_COARSE until it passes it, REALTIME at
 * the same instant on the wall clock (the line's REALTIME base is its
 * MONOTONIC base less the kernel's wall_to_monotonic, with the same
 * fraction).  Not at REALTIME_COARSE: before Linux 6.15 that steps back
 * by a microsecond or so on an NTP frequency change, and the module holds
 * MONOTONIC_COARSE against it; so neither result ever steps back but for
 * a step of REALTIME itself, and REALTIME_COARSE, the held value less the
 * same offset or less, is never above it.
 */
static __attribute__((noinline)) struct reading
not_below_coarse(const struct pvread_header *h, const clockid_t clock,
		 struct reading r)
{
	const struct pvread_clock_base *c = &h->tk.base[CLOCK_MONOTONIC_COARSE];
	uint64_t csec = LOAD(c->sec), cns = LOAD(c->snsec);
	int64_t d;

	if (unlikely(cns >= NSEC_PER_SEC))
		return INVALID_READING;
	if (clock == CLOCK_REALTIME) {
		const struct pvread_clock_base *m = &h->line.base[CLOCK_MONOTONIC];
		const struct pvread_clock_base *r = &h->line.base[CLOCK_REALTIME];
		/* Each below 2^32 ns: a few turns at most. */
		int64_t frac = (int64_t)cns - (int64_t)(LOAD(m->snsec) >> 32) +
			       (int64_t)(LOAD(r->snsec) >> 32);

		/* Unsigned: a page no module wrote gives nonsense, not UB. */
		csec = csec - LOAD(m->sec) + LOAD(r->sec);
		for (; frac < 0; frac += NSEC_PER_SEC)
			csec--;
		for (; frac >= NSEC_PER_SEC; frac -= NSEC_PER_SEC)
			csec++;
		cns = (uint64_t)frac;
	}
	/*
	 * @r.ns may exceed a second (try_read() normalises), but from a line a
	 * module wrote, read within its span, by less than a second: the line
	 * is below the coarse value where it is seconds behind, and the
	 * nanoseconds decide within 4 s.
	 */
	d = (int64_t)((uint64_t)r.sec - csec);
	if (likely(d > 0) ||
	    (d >= -4 && (int64_t)((uint64_t)d * NSEC_PER_SEC + r.ns - cns) >= 0))
		return r;
	if (unlikely(csec > KTIME_SEC_MAX))
		return INVALID_READING;
	return (struct reading){ (int64_t)csec, cns };
}

/*
 * May the line reading @v of MONOTONIC or REALTIME need not_below_coarse()?
 * Where MONOTONIC's line is below MONOTONIC_COARSE: REALTIME's line is
 * MONOTONIC's less the kernel's offset, with the same fraction, so it is
 * held exactly where MONOTONIC's is, and MONOTONIC's reading is REALTIME's
 * moved by the difference of their bases.  Unsigned: a page no module
 * wrote, with seconds 292 years from the coarse clock's or a coarse base
 * a second or more past its second, gives a wrong answer here, never UB
 * (the slow path checks again where it says yes).
 */
static ALWAYS_INLINE bool may_be_below_coarse(const struct pvread_header *h,
					      const clockid_t clock,
					      struct reading v)
{
	const struct pvread_clock_base *c = &h->tk.base[CLOCK_MONOTONIC_COARSE];
	uint64_t below;

	if (clock == CLOCK_REALTIME) {
		const struct pvread_clock_base *m =
			&h->line.base[CLOCK_MONOTONIC];
		const struct pvread_clock_base *r =
			&h->line.base[CLOCK_REALTIME];

		v.sec = (int64_t)((uint64_t)v.sec - LOAD(r->sec) + LOAD(m->sec));
		v.ns += (LOAD(m->snsec) >> 32) - (LOAD(r->snsec) >> 32);
	}
	/*
	 * The coarse clock less the reading's seconds, from loads alone: the
	 * one step after the line's product is the compare.
	 */
	below = ((uint64_t)LOAD(c->sec) - (uint64_t)v.sec) * NSEC_PER_SEC +
		LOAD(c->snsec);
	HIDE(below);
	return (int64_t)(v.ns - below) < 0;
}

/* pvread_line_checked (internal.h), relaxed: its value is all it says. */
static ALWAYS_INLINE uint64_t line_checked(void)
{
	return atomic_load_explicit(&pvread_line_checked,
				    memory_order_relaxed);
}

/* No word left naming a seq for longer than it must: see internal.h. */
static void forget_line_check(void)
{
	if (line_checked() != LINE_UNCHECKED)
		atomic_store_explicit(&pvread_line_checked, LINE_UNCHECKED,
				      memory_order_relaxed);
}

/*
 * CLOCK_MONOTONIC's line at @seq, which check_line() found as a module
 * writes it, into the process's record (struct line_record, internal.h):
 * where this process may read it with no other check than the floor's.
 * @pass and @span as check_line() has them.  Its rules are the record's.
 */
static void make_line_record(struct process *p,
			     const struct pvread_header *h, uint32_t seq,
			     uint64_t pass, uint64_t span)
{
	struct line_record *r = &p->line;
	/* Acquire: map.ns is written before it (struct mapping). */
	const uint32_t fast = atomic_load_explicit(&p->fast_clocks,
						   memory_order_acquire);
	uint64_t key = atomic_load_explicit(&r->key, memory_order_relaxed);
	const struct pvread_line *l = &h->line;
	uint64_t stamp, snsec;
	uint32_t mul, resumes;
	uint8_t shift;
	int64_t sec;

	if (key == seq || key == RECORD_BUSY ||
	    !clock_in(fast, CLOCK_MONOTONIC) ||
	    LOAD(h->error_bound_ns) > p->map.tolerance_ns || pass > span)
		return;
	stamp = LOAD(l->tsc_timestamp);
	line_rate(l, CLOCK_MONOTONIC, &mul, &shift);
	snsec = LOAD(l->base[CLOCK_MONOTONIC].snsec);
	sec = LOAD(l->base[CLOCK_MONOTONIC].sec);
	resumes = (uint32_t)LOAD(h->disruptions);
	/*
	 * A time namespace's offset in the line itself: its seconds in the
	 * base's, its nanoseconds in the base's fraction, where the line
	 * still fits 64 bits at its span with them (within a second of what
	 * check_line() found it fits: else no record).
	 */
	if (timens_shifts(CLOCK_MONOTONIC) && p->map.ns.shifted) {
		sec += p->map.ns.sec[CLOCK_MONOTONIC];
		/* Below 2^64: both terms are under 10^9 << 32. */
		snsec += (uint64_t)p->map.ns.nsec[CLOCK_MONOTONIC] << 32;
		if (!pvread_line_fits(span, mul, shift, snsec))
			return;
	}
	RMB();
	if (LOAD(h->seq) != seq ||
	    !atomic_compare_exchange_strong(&r->key, &key, RECORD_BUSY))
		return;
	if (LOAD(h->seq) != seq) {
		/* Release: as the store that made @key, for its readers. */
		atomic_store_explicit(&r->key, key, memory_order_release);
		return;
	}
	/*
	 * The seq above before any field below, for a reader that sees a
	 * field and then loads the seq (internal.h; x86 keeps stores after
	 * loads anyway).
	 */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&r->hdr, h, memory_order_relaxed);
	atomic_store_explicit(&r->start, stamp + pass, memory_order_relaxed);
	atomic_store_explicit(&r->window, span - pass + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&r->rate, (uint64_t)mul << shift,
			      memory_order_relaxed);
	atomic_store_explicit(&r->offset,
			      pvread_line_offset(stamp, mul, shift, snsec),
			      memory_order_relaxed);
	atomic_store_explicit(&r->sec, sec, memory_order_relaxed);
	atomic_store_explicit(&r->resumes, resumes, memory_order_relaxed);
	atomic_store_explicit(&r->key, seq, memory_order_release);
}

/*
 * The page checked whole at its seq, for this copy's later reads at that
 * seq (pvread_line_checked, internal.h): every fine clock's base and rate
 * as a module writes them (the product fits at the span, the seconds are
 * the kernel's), REALTIME's fraction MONOTONIC's (it is held where
 * MONOTONIC is), and the ticks past the anchor from which MONOTONIC's line
 * is not below MONOTONIC_COARSE, as may_be_below_coarse() tells it.  Not
 * noted: a page that fails any of it (every read of it checks it all), or
 * an update under way.
 */
static __attribute__((noinline, cold)) void
check_line(struct process *p, const struct pvread_header *h)
{
	static const clockid_t fine[] = { CLOCK_MONOTONIC, CLOCK_REALTIME,
		CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME, CLOCK_TAI };
	const struct pvread_clock_base *c = &h->tk.base[CLOCK_MONOTONIC_COARSE];
	const struct pvread_line *l = &h->line;
	uint64_t sec, snsec, msec = 0, msnsec = 0, csec, cns, pass, span;
	uint32_t mul, mmul = 0, seq;
	uint8_t shift, mshift = 0;
	unsigned int i;

	seq = LOAD(h->seq);
	RMB();
	/* No word naming a page in mode none for long (internal.h). */
	if ((seq & 1) || LOAD(h->mode) != PVREAD_MODE_LINE)
		goto unchecked;
	span = LOAD(l->tsc_span);
	for (i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		const struct pvread_clock_base *b = &l->base[fine[i]];

		/* Unsigned: seconds below 0 are no kernel's either. */
		sec = LOAD(b->sec);
		snsec = LOAD(b->snsec);
		line_rate(l, fine[i], &mul, &shift);
		if (sec > KTIME_SEC_MAX ||
		    !pvread_line_ok(span, mul, shift, snsec))
			goto unchecked;
		if (fine[i] == CLOCK_MONOTONIC) {
			msec = sec;
			msnsec = snsec;
			mmul = mul;
			mshift = shift;
		} else if (fine[i] == CLOCK_REALTIME &&
			   (uint32_t)snsec != (uint32_t)msnsec) {
			goto unchecked;
		}
	}
	csec = LOAD(c->sec);
	cns = LOAD(c->snsec);
	if (cns >= NSEC_PER_SEC)
		goto unchecked;
	/*
	 * The coarse clock at most 3 s past the line's second, so that its
	 * nanoseconds past it (below 4 * 10^9) fit 32 bits; further, only
	 * the whole read holds.  The pass point below the word's seq: more
	 * than 2^31 ticks below the coarse clock (0.46 s at a 4.7 GHz TSC)
	 * is no line a module keeps, and there too the whole read holds.
	 */
	if (csec < msec)
		pass = 0;
	else if (csec - msec > 3 ||
		 !pvread_line_pass(span, mmul, mshift, msnsec,
				   (csec - msec) * NSEC_PER_SEC + cns, &pass) ||
		 pass > INT32_MAX)
		goto unchecked;
	RMB();
	if (LOAD(h->seq) != seq)
		goto unchecked;
	atomic_store_explicit(&pvread_line_checked, LINE_CHECKED(seq, pass),
			      memory_order_relaxed);
	make_line_record(p, h, seq, pass, span);
	return;
unchecked:
	forget_line_check();
}

/*
 * Why the kernel must answer, @r, read from a header at @seq: unless an
 * update began since, when what was read says nothing (the module writes
 * its fields in any order inside an update, mode none before line).
 */
static ALWAYS_INLINE enum read_result confirmed(const struct pvread_header *h,
						uint32_t seq,
						enum read_result r)
{
	RMB();
	return LOAD(h->seq) == seq ? r : READ_RETRY;
}

/*
 * The header's state, checked by every attempt after the seq it read:
 * READ_OK while the page is in line mode within this process's tolerance.
 */
static ALWAYS_INLINE enum read_result header_ok(const struct process *p,
						const struct pvread_header *h,
						uint32_t seq, clockid_t clock)
{
	uint64_t tolerance = p->map.tolerance_ns;

	/* A child's BOOTTIME offset, checked to within a bracket: less. */
	if (clock == CLOCK_BOOTTIME)
		tolerance = LOAD(p->boot_tolerance_ns);
	if (unlikely(LOAD(h->mode) != PVREAD_MODE_LINE))
		return confirmed(h, seq, READ_NO_MODE);
	if (unlikely(LOAD(h->error_bound_ns) > tolerance))
		return confirmed(h, seq, READ_NO_BOUND);
	return READ_OK;
}

/*
 * One attempt at the page's answer for @clock, as the vDSO's do_hres():
 * READ_OK, READ_BUSY while an update is being written, READ_RETRY when one
 * completed under us, READ_NO_* when the kernel must answer; READ_HOLD,
 * unless @hold, for a reading that may need the hold at the coarse clocks.
 * The reading goes to *@out, normalised: a local of the caller's, so that
 * it stays in registers until it is checked and stored.  @fast is the
 * process's fast_clocks: how to read the TSC.  @tsc_taken: the caller
 * read the TSC first, @t, before this read anything (the fast path's
 * hint, pvread_tsc_first, whose disruptions are @epoch); else the line's
 * reading reads it after the header's checks (@t NO_TSC).  @checked:
 * pvread_line_checked, and @seq the header's, loaded by try_read();
 * @seen, that they agree.
 */
#define NO_TSC ((struct tsc_halves){ 0, 0 })
static ALWAYS_INLINE enum read_result attempt(struct process *p,
					      const struct pvread_header *h,
					      const uint32_t fast,
					      const clockid_t clock,
					      struct reading *out,
					      const bool hold,
					      const bool tsc_taken,
					      struct tsc_halves t,
					      const uint32_t epoch,
					      const uint64_t checked,
					      const uint32_t seq,
					      const bool seen)
{
	const struct mapping *m = &p->map;
	const struct pvread_clock_base *b;
	enum read_result r = READ_OK;
	struct reading v;
	uint64_t snsec;

	if (!seen && unlikely(seq & 1))
		return seq == atomic_load_explicit(&p->stuck_seq,
						   memory_order_relaxed) ?
		       READ_NO_STUCK : READ_BUSY;
	if (clock_in(CLOCKS_COARSE, clock)) {
		/* The timekeeper's at its last update. */
		r = header_ok(p, h, seq, clock);
		if (unlikely(r != READ_OK))
			return r;
		b = &h->tk.base[clock];
		v.sec = LOAD(b->sec);
		v.ns = LOAD(b->snsec);
		if (unlikely(v.ns >= NSEC_PER_SEC))
			r = READ_NO_INVALID;
	} else {
		/*
		 * The line: beyond its span (the module stopped re-anchoring
		 * it: the kernel knows better), or with values no module
		 * writes, the kernel answers.
		 */
		const struct pvread_line *l = &h->line;
		uint64_t tsc, d, span, stamp, offset;
		uint32_t mul;
		uint8_t shift;

		/*
		 * The TSC, read after the seq and the header's checks, as the
		 * vDSO reads it after its clock mode's: those are loads of
		 * the seq's cache line, which the read waits for anyway, and
		 * a page in mode none costs no TSC read.  The line's loads
		 * run while it is read (rdtsc and rdtscp hold nothing back),
		 * and the seq read again at the end vouches for them.  A TSC
		 * read after the seq is not before the line it read; one read
		 * first (@tsc_taken) may be, and reads as the line's anchor,
		 * the module's TSC at the update: within the call.  But not
		 * across a resume, after which the TSC may be another host's:
		 * the page counts none since the hint's, or the TSC is read
		 * again after the seq.
		 */
		r = header_ok(p, h, seq, clock);
		if (unlikely(r != READ_OK))
			return r;
		if (!tsc_taken)
			t = tsc_read(fast);
		else if (unlikely((uint32_t)LOAD(h->disruptions) != epoch))
			return READ_TSC_STALE;
		b = &l->base[clock];
		/*
		 * pvread_line_delta(), with its test for a TSC before the
		 * anchor inside the span's, so that the product waits for no
		 * select: as unsigned, such a delta is beyond any span a
		 * module writes (a span of 2^63 ticks or more, which none
		 * does, takes it for a delta, read where the line fits that
		 * far).  The arithmetic is checked once, at the span, from
		 * loads alone, and the line read at the TSC itself
		 * (pvread_line_at_tsc()): what waits for the TSC is the
		 * product and a sum, the delta only a branch.
		 */
		span = LOAD(l->tsc_span);
		stamp = LOAD(l->tsc_timestamp);
		/*
		 * Where the TSC's high half is still the anchor's (it turns
		 * every 2^32 ticks, a second or more), their low halves give
		 * the same delta, and so the same line: the product then
		 * waits for the counter's low half alone, not for the halves
		 * joined first.
		 */
		if (likely(t.hi == stamp >> 32)) {
			tsc = t.lo;
			stamp = (uint32_t)stamp;
		} else {
			tsc = t.hi << 32 | t.lo;
		}
		d = tsc - stamp;
		if (unlikely(d > span)) {
			if ((int64_t)d >= 0)
				return confirmed(h, seq, READ_NO_DELTA);
			tsc = stamp;
			d = 0;
		}
		line_rate(l, clock, &mul, &shift);
		snsec = LOAD(b->snsec);
		/*
		 * At a seq check_line() noted, the arithmetic fits and the
		 * bases are the kernel's, and the line is not below the
		 * coarse clock from its pass point on: one compare on the
		 * delta, which waits for no product.
		 */
		if (!seen && unlikely(!pvread_line_ok(span, mul, shift, snsec)))
			return confirmed(h, seq, READ_NO_INVALID);
		offset = pvread_line_offset(stamp, mul, shift, snsec);
		HIDE(offset);
		v.ns = pvread_line_at_tsc(tsc, mul, shift, offset) >> 32;
		v.sec = LOAD(b->sec);
		if ((clock == CLOCK_MONOTONIC || clock == CLOCK_REALTIME) &&
		    (seen ? unlikely(d < LINE_CHECKED_PASS(checked)) :
			    unlikely(may_be_below_coarse(h, clock, v)))) {
			/* The hold is the slow path's: no call here. */
			if (!hold)
				return READ_HOLD;
			v = not_below_coarse(h, clock, v);
			/* Its no-reading, or seconds past the kernel's. */
			if (seen && unlikely((uint64_t)v.sec > KTIME_SEC_MAX))
				return confirmed(h, seq, READ_NO_INVALID);
		}
	}
	if (unlikely(r != READ_OK))
		return r;
	RMB();
	if (unlikely(LOAD(h->seq) != seq))
		return READ_RETRY;
	/* The kernel's clocks are s64 ns: beyond them, no module wrote it. */
	if (!seen && unlikely((uint64_t)v.sec > KTIME_SEC_MAX))
		return READ_NO_INVALID;
	/* The next reads at this seq need not check it all again. */
	if (!seen && clock_in(CLOCKS_FINE, clock))
		check_line(p, h);
	if (timens_shifts(clock) && unlikely(m->ns.shifted)) {
		v.sec += m->ns.sec[clock];
		v.ns += (uint64_t)m->ns.nsec[clock];
	}
	/* Once a second, or a broken page: never a loop. */
	if (unlikely(v.ns >= NSEC_PER_SEC)) {
		v.sec = (int64_t)((uint64_t)v.sec + v.ns / NSEC_PER_SEC);
		v.ns %= NSEC_PER_SEC;
	}
	*out = v;
	return READ_OK;
}

/*
 * attempt() from the header's seq: at a seq check_line() noted (even: no
 * update in progress), the copy that leaves out the checks it made; at
 * another, the whole attempt, or, where @only_seen (the reads that took
 * the TSC first), READ_UNSEEN: their caller checks the page and reads
 * again from the seq, once an update, so that they inline no more than
 * the first copy.
 */
static ALWAYS_INLINE enum read_result try_read(struct process *p,
					       const uint32_t fast,
					       const clockid_t clock,
					       struct reading *out,
					       const bool hold,
					       const bool tsc_taken,
					       struct tsc_halves t,
					       const uint32_t epoch,
					       const uint64_t checked,
					       const bool only_seen)
{
	const struct pvread_header *h = p->map.hdr;
	const uint32_t seq = LOAD(h->seq);

	RMB();
	if (clock_in(CLOCKS_FINE, clock) &&
	    likely(seq == LINE_CHECKED_SEQ(checked)))
		return attempt(p, h, fast, clock, out, hold, tsc_taken, t,
			       epoch, checked, seq, true);
	if (only_seen)
		return READ_UNSEEN;
	return attempt(p, h, fast, clock, out, hold, tsc_taken, t, epoch,
		       checked, seq, false);
}

/*
 * After attempt result @r: true to try again (an update in progress, waited
 * for as the kernel would; one that completed, a few times), false with the
 * reason in *@why when the kernel must answer.
 */
__attribute__((noinline, cold))
bool pvread_try_again(struct process *p, enum read_result r,
		      struct attempts *a, enum pvread_slow_reason *why)
{
	switch (r) {
	case READ_BUSY:
		if (wait_for_writer(&a->since))
			return true;
		/* Not the kernel's timekeeper: later reads need not wait. */
		pvread_remember_stuck(p);
		*why = PVREAD_SLOW_BUSY;
		return false;
	case READ_RETRY:
		pvread_thread_stats.retries++;
		if (++a->tries < MAX_TRIES)
			return true;
		*why = PVREAD_SLOW_RETRIES;
		return false;
	default:
		*why = (enum pvread_slow_reason)(r - READ_NO);
		return false;
	}
}

/*
 * The page's answer for @clock; false when the kernel must answer, for the
 * reason in *@why.  One loop, as the vDSO's.
 */
static ALWAYS_INLINE bool read_fast(struct process *p, const clockid_t clock,
				    struct timespec *ts,
				    enum pvread_slow_reason *why)
{
	/* Relaxed: the caller saw MAP_READY, stored after it, with acquire. */
	const uint32_t fast = atomic_load_explicit(&p->fast_clocks,
						   memory_order_relaxed);
	struct attempts a = { 0, 0 };
	enum read_result r = READ_NO_TIMENS;
	struct reading v;

	/* The fast path leaves these out (fast_clocks): say why here. */
	if (timens_shifts(clock) && unlikely(timens_unknown(p, clock))) {
		/* A child's first BOOTTIME read checks its offset. */
		if (clock == CLOCK_BOOTTIME &&
		    atomic_load_explicit(&p->boot_check,
					 memory_order_acquire) == BOOT_PENDING)
			pvread_check_boottime(p);
		if (timens_unknown(p, clock))
			return pvread_try_again(p, r, &a, why);
	}
	while (unlikely((r = try_read(p, fast, clock, &v, true, false, NO_TSC,
				      0, line_checked(), false)) != READ_OK))
		if (!pvread_try_again(p, r, &a, why))
			return false;
	ts->tv_sec = v.sec;
	ts->tv_nsec = (long)v.ns;
	return true;
}

/* read_fast(), for info.c's pvread_get_info(). */
bool pvread_read_fast(struct process *p, const clockid_t clock,
		      struct timespec *ts, enum pvread_slow_reason *why)
{
	return read_fast(p, clock, ts, why);
}

/*
 * Not line mode, or no page: every clock the kernel's first (HINT_KERNEL), or
 * no longer.  No clock's TSC read first, until a line reading again.
 */
static __attribute__((noinline, cold)) void hint_kernel(bool kernel)
{
	if (kernel)
		forget_line_check();
	/* Release: the reads it sends to read_kernel_first() load map.hdr. */
	atomic_store_explicit(&pvread_tsc_first, kernel ? HINT_KERNEL : 0,
			      memory_order_release);
}

/*
 * No page, for good (MAP_ABSENT): in a child, whose fast_clocks the fork
 * wiped, FAST_KERNEL again (the value its parent stored, which any thread
 * may store), and the hint HINT_KERNEL, so that its next reads ask the
 * kernel first, as its parent's do, not this slow path every time.
 */
static __attribute__((noinline, cold)) void remember_no_page(void)
{
	struct process *p = atomic_load_explicit(&pvread_process,
						 memory_order_acquire);

	if (!p || atomic_load_explicit(&p->map_state, memory_order_acquire) !=
		  MAP_ABSENT)
		return;
	atomic_store_explicit(&p->fast_clocks, FAST_KERNEL,
			      memory_order_release);
	hint_kernel(true);
}

/*
 * Everything but the fast path's one attempt: the first call's mapping,
 * the retries, the kernel's answer.  A read that gets here reads the page
 * again from the start.
 */
static __attribute__((noinline, cold))
int gettime_slow(clockid_t clock, struct timespec *ts)
{
	enum pvread_slow_reason why = PVREAD_SLOW_OTHER;
	struct process *p = NULL;

	/* A bad clock or pointer gets the kernel's answer: EINVAL, EFAULT. */
	if (!is_mirrored(clock) || !ts)
		goto slow;
	p = get_process();
	if (unlikely(!p)) {
		why = PVREAD_SLOW_NO_PAGE;
		remember_no_page();
		goto slow;
	}
	if (unlikely(!read_fast(p, clock, ts, &why)))
		goto slow;
	return pvread_page_reading(p, clock, ts);
slow:
	return pvread_slow_clock_gettime(p, clock, ts, why);
}

/*
 * Does the page's reading @v stand as it is?  For the steady clocks, while
 * this process's floor holds every reading returned (mode_seen LINE since
 * the last fallback) and is not above it; for MONOTONIC_COARSE, while its
 * floor is not below it either (the slow path raises it, once a tick); for
 * REALTIME and TAI, once one was noted (their fallbacks are lifted from
 * then on).  Loads only: every write is the slow path's.
 */
static ALWAYS_INLINE bool stands(const struct process *p, clockid_t clock,
				 struct reading v)
{
	/*
	 * The reading's nanoseconds against the floor less its seconds, which
	 * do not wait for the line's product: one comparison after it.
	 * Unsigned: a page no module wrote may make it wrap, never UB.
	 */
	uint64_t sec_ns = (uint64_t)v.sec * NSEC_PER_SEC;
	int64_t floor;

	if (clock_in(CLOCKS_NOTED, clock)) {
		if (unlikely(atomic_load_explicit(&p->mode_seen[clock],
						  memory_order_acquire) !=
			     SEEN_LINE))
			return false;
		if (!clock_in(CLOCKS_STEADY, clock))
			return true;
	} else if (clock != CLOCK_MONOTONIC_COARSE) {
		return true;
	}
	floor = atomic_load_explicit(&p->floors[clock].ns,
				     memory_order_relaxed);
	floor = (int64_t)((uint64_t)floor - sec_ns);
	return clock == CLOCK_MONOTONIC_COARSE ? (int64_t)v.ns == floor :
						 (int64_t)v.ns >= floor;
}

/*
 * The fast path's attempt gave @r: the retries, or the kernel's answer,
 * from where it stopped (a page in mode none is read once).
 */
static __attribute__((noinline, cold))
int gettime_again(struct process *p, clockid_t clock, struct timespec *ts,
		  enum read_result r)
{
	const uint32_t fast = atomic_load_explicit(&p->fast_clocks,
						   memory_order_relaxed);
	enum pvread_slow_reason why;
	struct attempts a = { 0, 0 };
	struct reading v;

	for (;;) {
		/* The hold at the coarse clocks: the same reading, held. */
		if (r != READ_HOLD && !pvread_try_again(p, r, &a, &why))
			return pvread_slow_clock_gettime(p, clock, ts, why);
		r = try_read(p, fast, clock, &v, true, false, NO_TSC, 0,
			     line_checked(), false);
		if (r == READ_OK)
			break;
	}
	ts->tv_sec = v.sec;
	ts->tv_nsec = (long)v.ns;
	return stands(p, clock, v) ? 0 : pvread_page_reading(p, clock, ts);
}

/*
 * The fast path's hint (pvread_tsc_first) after a read of @clock that
 * @fast said the page could answer: from the line (@line), the clock
 * named, with the page's disruptions now; else not.  Cold: a line reading
 * without the hint sets it once, a read that took the TSC for nothing or
 * before a resume changes it.
 */
static __attribute__((noinline, cold)) void hint_tsc_first(struct process *p,
							  clockid_t clock,
							  uint32_t fast,
							  bool line)
{
	const uint64_t old = atomic_load_explicit(&pvread_tsc_first,
						  memory_order_relaxed);
	uint64_t hint = old;

	if (line)
		hint = (uint64_t)(uint32_t)LOAD(p->map.hdr->disruptions) << 32 |
		       ((uint32_t)hint & ~(FAST_RDTSCP | HINT_KERNEL)) |
		       BIT_OF(clock) | (fast & FAST_RDTSCP);
	else
		hint &= ~(uint64_t)BIT_OF(clock);
	/* Only where it changes: every reader loads its cache line. */
	if (hint != old)
		atomic_store_explicit(&pvread_tsc_first, hint,
				      memory_order_relaxed);
}

/*
 * The page's reading @v of @clock: stored, and 0, or the rest of the read
 * where it does not stand as it is.
 */
static ALWAYS_INLINE int store_reading(struct process *p, clockid_t clock,
				       struct timespec *ts, struct reading v)
{
	ts->tv_sec = v.sec;
	ts->tv_nsec = (long)v.ns;
	return likely(stands(p, clock, v)) ? 0 :
	       pvread_page_reading(p, clock, ts);
}

/*
 * read_tsc_first()'s attempt gave @r: the hint renewed or forgotten, the
 * page checked where it was at a seq not noted, and the rest of the read.
 * A tail call, which reloads fast_clocks, so that the fast path keeps
 * nothing across a call (on Intel, every register it saves is an
 * instruction the counter read holds back).
 */
static __attribute__((noinline, cold)) int tsc_first_again(struct process *p,
							   clockid_t clock,
							   struct timespec *ts,
							   enum read_result r)
{
	const uint32_t fast = atomic_load_explicit(&p->fast_clocks,
						   memory_order_acquire);

	if (r == READ_NOT_FAST) {
		hint_tsc_first(p, clock, fast, false);
		return gettime_slow(clock, ts);
	}
	if (r == READ_UNSEEN) {
		/*
		 * The page checked for the next reads, and this one whole,
		 * its TSC after the seq: none read for nothing in mode none
		 * or above the tolerance, and none before a resume, after
		 * which the hint is renewed here.
		 */
		const uint64_t hint = atomic_load_explicit(&pvread_tsc_first,
							   memory_order_relaxed);
		struct reading v;

		check_line(p, p->map.hdr);
		r = try_read(p, fast, clock, &v, false, false, NO_TSC, 0,
			     line_checked(), false);
		if (r == READ_OK) {
			if ((uint32_t)LOAD(p->map.hdr->disruptions) !=
			    (uint32_t)(hint >> 32))
				hint_tsc_first(p, clock, fast, true);
			return store_reading(p, clock, ts, v);
		}
	}
	if (r == READ_NO_MODE) {
		hint_kernel(true);
		return kernel_answer(p, clock, ts, PVREAD_SLOW_MODE);
	}
	if (r == READ_TSC_STALE) {
		hint_tsc_first(p, clock, fast, true);
		r = READ_RETRY;
	} else if (r >= READ_NO) {
		hint_tsc_first(p, clock, fast, false);
	}
	return gettime_again(p, clock, ts, r);
}

/*
 * The read where the hint names @clock: the TSC first, then the state and
 * the page, whose loads all run while the TSC is read.  Where the page
 * cannot answer with it, the hint forgets the clock (mode none: every
 * clock), or is renewed (a resume since it was set), and the read goes on
 * with a TSC after the seq.
 */
static ALWAYS_INLINE int read_tsc_first(struct process *p, uint64_t hint,
					const clockid_t clock,
					struct timespec *ts)
{
	const struct tsc_halves tsc = tsc_read((uint32_t)hint);
	const uint32_t fast = atomic_load_explicit(&p->fast_clocks,
						   memory_order_acquire);
	enum read_result r;
	struct reading v;

	if (unlikely(!clock_in(fast, clock)))
		return tsc_first_again(p, clock, ts, READ_NOT_FAST);
	r = try_read(p, fast, clock, &v, false, true, tsc,
		     (uint32_t)(hint >> 32), line_checked(), true);
	if (unlikely(r != READ_OK))
		return tsc_first_again(p, clock, ts, r);
	return store_reading(p, clock, ts, v);
}

/* read_tsc_first() of a clock other than CLOCK_MONOTONIC. */
static __attribute__((noinline)) int read_clock_tsc_first(struct process *p,
							  uint64_t hint,
							  clockid_t clock,
							  struct timespec *ts)
{
	return read_tsc_first(p, hint, clock, ts);
}

/*
 * The read without a hint: one attempt at the page, its TSC after the
 * seq, and one exit to everything else.  A line reading of a fine clock
 * sets the hint, mode none or no page the kernel's.
 */
static __attribute__((noinline)) int read_page(struct process *p,
					       clockid_t clock,
					       struct timespec *ts)
{
	const uint32_t fast = atomic_load_explicit(&p->fast_clocks,
						   memory_order_acquire);
	enum read_result r;
	struct reading v;

	if (unlikely(!clock_in(fast, clock))) {
		if (unlikely(!(fast & FAST_KERNEL)))
			return gettime_slow(clock, ts);
		/*
		 * No page, for good: no reading of it can come, so nothing
		 * to hold; the kernel's answer, counted, by a tail call.
		 */
		hint_kernel(true);
		pvread_thread_stats.slow_by_reason[PVREAD_SLOW_NO_PAGE]++;
		return pvread_kernel_clock_gettime(clock, ts);
	}
	r = try_read(p, fast, clock, &v, false, false, NO_TSC, 0,
		     line_checked(), false);
	if (unlikely(r != READ_OK)) {
		if (r == READ_NO_MODE) {
			hint_kernel(true);
			return kernel_answer(p, clock, ts, PVREAD_SLOW_MODE);
		}
		/* No TSC first for a clock the kernel answers: a TSC for nothing. */
		if (r >= READ_NO)
			hint_tsc_first(p, clock, fast, false);
		return gettime_again(p, clock, ts, r);
	}
	if (clock_in(CLOCKS_FINE, clock))
		hint_tsc_first(p, clock, fast, true);
	return store_reading(p, clock, ts, v);
}

_Atomic(pvread_clock_gettime_fn) pvread_vdso_clock_gettime;

/* The vDSO returns the system call's -errno: as libc, -1 with errno. */
int pvread_vdso_error(int ret)
{
	errno = -ret;
	return -1;
}

/*
 * The read where the hint says the kernel answered the last: the kernel's
 * answer first, then the loads that say whether it is one to return,
 * which its counter's latency hides.  A page still in mode none: the
 * answer as kernel_answered() returns it, for every clock (the kernel
 * knows a child's offsets, checked or not), in a child too (its state's
 * second half wiped: its clocks NEVER seen).  No page: for good
 * (fast_clocks), as read_page() answers.  Else a page that left mode
 * none, or a child's first read without a page: the hint forgets, and
 * the read starts again, this answer unreturned.
 */
static ALWAYS_INLINE int read_kernel_first(struct process *p,
					    const clockid_t clock,
					    struct timespec *ts)
{
	const pvread_clock_gettime_fn vdso =
		atomic_load_explicit(&pvread_vdso_clock_gettime,
				     memory_order_relaxed);
	const struct pvread_header *h;
	int ret;

	/* pvread_kernel_clock_gettime(), one call less. */
	ret = likely(vdso) ? pvread_vdso_answer(vdso, clock, ts) :
			     pvread_kernel_clock_gettime(clock, ts);
	/* The state's first half, which a fork keeps. */
	h = p->map.hdr;
	if (likely(h)) {
		/* Not line mode, whatever its number: the kernel answers. */
		if (likely(LOAD(h->mode) != PVREAD_MODE_LINE)) {
			/* Counted after the read: no load before its counter. */
			pvread_thread_stats.slow_by_reason[PVREAD_SLOW_MODE]++;
			return kernel_answered(p, clock, ts, ret);
		}
	} else if (likely(atomic_load_explicit(&p->fast_clocks,
					       memory_order_relaxed) &
			  FAST_KERNEL)) {
		/* No page, for good: nothing to hold (as read_page()). */
		pvread_thread_stats.slow_by_reason[PVREAD_SLOW_NO_PAGE]++;
		return ret;
	}
	hint_kernel(false);
	return read_page(p, clock, ts);
}

/* read_kernel_first() of CLOCK_MONOTONIC, its id a constant; of others. */
static __attribute__((noinline)) int read_monotonic_kernel_first(struct process *p,
								 struct timespec *ts)
{
	return read_kernel_first(p, CLOCK_MONOTONIC, ts);
}

static __attribute__((noinline)) int read_clock_kernel_first(struct process *p,
							     clockid_t clock,
							     struct timespec *ts)
{
	return read_kernel_first(p, clock, ts);
}

/*
 * CLOCK_MONOTONIC from the process's line record (struct line_record,
 * internal.h) where it names the page's seq: the TSC first, as @hint says
 * to read it (its loads then run while the counter is read), the record,
 * the seq, the line, the seq again; then this process's floor, as
 * stands() tests it.  A TSC read before the seq is a time within the call,
 * but may be before the record's start (an update since: the full read)
 * or another host's, before a resume: the record names the page's count
 * of them, and @hint the one before its TSC (pvread_tsc_first).  True
 * with the reading in *@out, its nanoseconds perhaps a second or more
 * (the caller normalises a timespec); false, with nothing read that
 * counts, where anything else may apply: the full read follows.  The
 * header is the record's own (a zeroed record, a process's until its first
 * check or a child's, names none): its key, loaded with acquire, vouches
 * for every field.
 */
static ALWAYS_INLINE bool lean_monotonic(struct process *p,
					 const uint64_t hint,
					 struct reading *out)
{
	const struct tsc_halves th = tsc_read((uint32_t)hint);
	const struct line_record *r = &p->line;
	const uint64_t key = atomic_load_explicit(&r->key,
						  memory_order_acquire);
	const struct pvread_header *h =
		atomic_load_explicit(&r->hdr, memory_order_relaxed);
	uint64_t t, d;
	struct reading v;
	int64_t floor;
	uint32_t seq;

	if (unlikely(!h))
		return false;
	seq = LOAD(h->seq);
	if (unlikely(key != seq) ||
	    unlikely((uint32_t)(hint >> 32) !=
		     atomic_load_explicit(&r->resumes, memory_order_relaxed)))
		return false;
	t = th.hi << 32 | th.lo;
	/* Unsigned: a TSC below the start (the hold, an update) wraps too. */
	d = t - atomic_load_explicit(&r->start, memory_order_relaxed);
	if (unlikely(d >= atomic_load_explicit(&r->window,
					       memory_order_relaxed)))
		return false;
	v.ns = (t * atomic_load_explicit(&r->rate, memory_order_relaxed) +
		atomic_load_explicit(&r->offset, memory_order_relaxed)) >> 32;
	v.sec = atomic_load_explicit(&r->sec, memory_order_relaxed);
	RMB();
	if (unlikely(LOAD(h->seq) != seq))
		return false;
	if (unlikely(atomic_load_explicit(&p->mode_seen[CLOCK_MONOTONIC],
					  memory_order_acquire) != SEEN_LINE))
		return false;
	floor = atomic_load_explicit(&p->floors[CLOCK_MONOTONIC].ns,
				     memory_order_relaxed);
	floor = (int64_t)((uint64_t)floor - (uint64_t)v.sec * NSEC_PER_SEC);
	if (unlikely((int64_t)v.ns < floor))
		return false;
	*out = v;
	return true;
}

/*
 * The read, shaped as the vDSO's do_hres(): one attempt at the page, and
 * one exit to everything else.  No write but *@ts unless the reading does
 * not stand as it is.  The hint says which attempt, where the line
 * answered this clock last, the TSC first: CLOCK_MONOTONIC (the one
 * benchmarks and runtimes read most) from its line record, inline, the
 * others from the page;
 * the kernel first where it answered the last read; else the page's.
 * Each a tail call, so that none waits for another's prologue.
 */
int pvread_clock_gettime(clockid_t clock, struct timespec *ts)
{
	struct process *p = atomic_load_explicit(&pvread_process,
						 memory_order_acquire);
	const uint64_t hint = atomic_load_explicit(&pvread_tsc_first,
						   memory_order_acquire);

	if (unlikely(!p) ||
	    unlikely((unsigned int)clock >= PVREAD_NR_CLOCK_BASES) ||
	    unlikely(!ts))
		return gettime_slow(clock, ts);
	if (likely(clock_in((uint32_t)hint, clock))) {
		struct reading v;

		if (clock != CLOCK_MONOTONIC)
			return read_clock_tsc_first(p, hint, clock, ts);
		if (unlikely(!lean_monotonic(p, hint, &v)))
			return read_page(p, clock, ts);
		/* Once a second: never a loop. */
		if (unlikely(v.ns >= NSEC_PER_SEC)) {
			v.sec += (int64_t)(v.ns / NSEC_PER_SEC);
			v.ns %= NSEC_PER_SEC;
		}
		ts->tv_sec = v.sec;
		ts->tv_nsec = (long)v.ns;
		return 0;
	}
	/* The clocks the page serves; others are the slow path's. */
	if (((uint32_t)hint & HINT_KERNEL) &&
	    likely(clock_in(CLOCKS_FINE | CLOCKS_COARSE, clock)))
		return clock == CLOCK_MONOTONIC ?
		       read_monotonic_kernel_first(p, ts) :
		       read_clock_kernel_first(p, clock, ts);
	return read_page(p, clock, ts);
}

/*
 * pvread_ns()'s attempt where the hint names @clock: the reading that
 * stands as it is, in *@ns, or false.
 */
static ALWAYS_INLINE bool ns_tsc_first(struct process *p, uint64_t hint,
				       const clockid_t clock, uint64_t *ns)
{
	const struct tsc_halves tsc = tsc_read((uint32_t)hint);
	const uint32_t fast = atomic_load_explicit(&p->fast_clocks,
						   memory_order_acquire);
	struct reading v;

	if (unlikely(!clock_in(fast, clock)) ||
	    unlikely(try_read(p, fast, clock, &v, false, true, tsc,
			      (uint32_t)(hint >> 32), line_checked(),
			      true) != READ_OK) ||
	    unlikely(!stands(p, clock, v)))
		return false;
	*ns = (uint64_t)v.sec * NSEC_PER_SEC + v.ns;
	return true;
}

/*
 * pvread_ns() where the hint does not name @clock, or its attempt did not
 * stand: where the hint says the kernel answered the last read, the kernel
 * first, as pvread_clock_gettime() would ask it, one call less; anything
 * else through pvread_clock_gettime() (a later reading: the attempt's was
 * never returned), which keeps the hint.
 */
static __attribute__((noinline)) uint64_t ns_by_timespec(clockid_t clock)
{
	struct process *p = atomic_load_explicit(&pvread_process,
						 memory_order_acquire);
	const uint64_t hint = atomic_load_explicit(&pvread_tsc_first,
						   memory_order_acquire);
	struct timespec ts;
	int ret;

	if (likely(p) && ((uint32_t)hint & HINT_KERNEL) &&
	    likely((unsigned int)clock < PVREAD_NR_CLOCK_BASES) &&
	    likely(clock_in(CLOCKS_FINE | CLOCKS_COARSE, clock)))
		ret = clock == CLOCK_MONOTONIC ?
		      read_monotonic_kernel_first(p, &ts) :
		      read_clock_kernel_first(p, clock, &ts);
	else
		ret = pvread_clock_gettime(clock, &ts);
	if (ret)
		return 0;
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* ns_tsc_first() of a clock other than CLOCK_MONOTONIC. */
static __attribute__((noinline)) uint64_t ns_clock_tsc_first(struct process *p,
							     uint64_t hint,
							     clockid_t clock)
{
	uint64_t ns;

	if (likely(ns_tsc_first(p, hint, clock, &ns)))
		return ns;
	return ns_by_timespec(clock);
}

/* pvread_ns() of CLOCK_MONOTONIC where its line record did not answer. */
static __attribute__((noinline)) uint64_t ns_monotonic_page(struct process *p)
{
	struct timespec ts;

	if (read_page(p, CLOCK_MONOTONIC, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/*
 * pvread_ns() but for CLOCK_MONOTONIC's line record: where the hint names
 * @clock, its attempt at the page, TSC first; else, or where that does not
 * stand, ns_by_timespec().
 */
static __attribute__((noinline)) uint64_t ns_by_hint(struct process *p,
						     uint64_t hint,
						     clockid_t clock)
{
	if (unlikely(!p) ||
	    unlikely((unsigned int)clock >= PVREAD_NR_CLOCK_BASES) ||
	    unlikely(!clock_in((uint32_t)hint, clock)))
		return ns_by_timespec(clock);
	return ns_clock_tsc_first(p, hint, clock);
}

/*
 * The reading pvread_clock_gettime() would store, as one count of ns: the
 * same attempt where the hint names the clock (CLOCK_MONOTONIC's line
 * record inline, and no normalising: the sum is the same), the sum
 * instead of the two stores; anything else by a tail call, so that the
 * read keeps nothing across a call.  0, errno set, where that fails.
 */
uint64_t pvread_ns(clockid_t clock)
{
	struct process *p = atomic_load_explicit(&pvread_process,
						 memory_order_acquire);
	const uint64_t hint = atomic_load_explicit(&pvread_tsc_first,
						   memory_order_acquire);
	struct reading v;

	if (likely(clock == CLOCK_MONOTONIC) && likely(p) &&
	    likely(clock_in((uint32_t)hint, CLOCK_MONOTONIC))) {
		if (likely(lean_monotonic(p, hint, &v)))
			return (uint64_t)v.sec * NSEC_PER_SEC + v.ns;
		return ns_monotonic_page(p);
	}
	return ns_by_hint(p, hint, clock);
}

/*
 * As gettimeofday(2): a time zone asked for is the kernel's (it keeps
 * one), and so is the reading that comes with it.  Neither asked for:
 * nothing to read, 0, as glibc's (the vDSO's) answers without a system
 * call.  A reading that fails leaves *@tv as it was: -1 with the kernel's
 * errno.
 */
int pvread_gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;

	if (tz)
		return pvread_kernel_gettimeofday(tv, tz);
	if (!tv)
		return 0;
	if (pvread_clock_gettime(CLOCK_REALTIME, &ts))
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

/*
 * time() is the kernel's coarse seconds, not a rounded fine clock.  C and
 * POSIX store the return value in *@t, (time_t)-1 too when the time is
 * not available, as glibc's time() does where its clock can fail; errno
 * is the kernel's.
 */
time_t pvread_time(time_t *t)
{
	struct timespec ts;
	time_t sec = (time_t)-1;

	if (!pvread_clock_gettime(CLOCK_REALTIME_COARSE, &ts))
		sec = ts.tv_sec;
	if (t)
		*t = sec;
	return sec;
}
