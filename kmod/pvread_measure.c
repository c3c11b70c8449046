// SPDX-License-Identifier: GPL-2.0
/*
 * After each timekeeping update, once its CPU takes interrupts again: how
 * far the registered records and the kernel's clock disagree, the error
 * bound over a window of that, and the line anchored anew from the same
 * look.  The look is made without pvread.lock and thrown away if the
 * state moved meanwhile (pvread.gen), so that no update waits for it.
 */
#include <linux/irq_work.h>
#include <linux/math64.h>
#include <linux/rcupdate.h>
#include <linux/sched/clock.h>
#include <asm/msr.h>
#include <asm/pvclock.h>

#include "pvread_internal.h"

/* Measurements dropped in a row before one is made under the lock. */
#define PVREAD_MEASURE_MAX_DROPS	4

#define PVREAD_LINE_RATE_PPM	1	/* records at one rate: rounding only */

/* Records looked at after each update besides this CPU's own. */
#define PVREAD_MEASURE_BATCH	16

/* Record @cpu at @tsc; false if Xen kept rewriting it. */
static bool pvread_eval(unsigned int cpu, u64 tsc, u64 *cycles)
{
	const struct pvclock_vcpu_time_info *src = pvread_pvti(cpu);
	unsigned int tries, version;

	for (tries = 0; tries < 16; tries++) {
		version = pvclock_read_begin(src);
		if (tsc < src->tsc_timestamp)
			return false;
		*cycles = __pvclock_read_cycles(src, tsc);
		if (!pvclock_read_retry(src, version))
			return true;
	}
	return false;
}

static u64 pvread_pvti_rate(const struct pvclock_vcpu_time_info *p)
{
	u64 mul = READ_ONCE(p->tsc_to_system_mul);
	s8 shift = READ_ONCE(p->tsc_shift);

	return shift >= 0 ? mul << shift : mul >> -shift;
}

/* One record into @m at both ends of its bracket; false if unreadable. */
static bool pvread_look(unsigned int cpu, unsigned int self,
			struct pvread_meas *m)
{
	u64 c, rate;

	if (!(READ_ONCE(pvread_pvti(cpu)->flags) & PVCLOCK_TSC_STABLE_BIT))
		m->all_stable = false;
	if (!pvread_eval(cpu, m->t0, &c))
		return false;
	m->lo = min(m->lo, c);
	if (!pvread_eval(cpu, m->t1, &c))
		return false;
	m->hi = max(m->hi, c);
	rate = pvread_pvti_rate(pvread_pvti(cpu));
	m->rate_lo = min(m->rate_lo, rate);
	m->rate_hi = max(m->rate_hi, rate);
	if (cpu == self || !m->rate)
		m->rate = rate;
	return true;
}

/*
 * How far apart are the registered records and the kernel's own clocksource
 * read, right now?  False when that cannot be told.  Without pvread.lock:
 * pvread.registered may change under the loop, and then pvread.gen has moved and
 * the caller throws the result away.  The records themselves stay mapped
 * until unload, which waits for the measurement.
 *
 * This CPU's record (the line's rate is its), then at most
 * PVREAD_MEASURE_BATCH others from where the last look stopped: the look
 * runs in hard-IRQ context, interrupts off, after every tick, and must not
 * grow with the vCPUs.  Every record is looked at within
 * nr_registered / PVREAD_MEASURE_BATCH ticks, well inside the bound's
 * window (PVREAD_WINDOW_SEC), which keeps the worst it saw.
 */
static bool pvread_measure_once(struct clocksource *cs, struct pvread_meas *m)
{
	unsigned int self = smp_processor_id(), n = 0;
	int cpu;

	m->t0 = rdtsc_ordered();
	m->k = cs->read(cs);
	m->t1 = rdtsc_ordered();
	if ((s64)(m->t1 - m->t0) < 0)	/* never trusted to be positive */
		return false;
	m->lo = m->k;
	m->hi = m->k;
	m->rate = 0;
	m->rate_lo = U64_MAX;
	m->rate_hi = 0;
	m->all_stable = true;
	m->wrapped = true;
	m->next = 0;
	if (cpumask_test_cpu(self, pvread.registered) &&
	    !pvread_look(self, self, m))
		return false;
	for (cpu = cpumask_next((int)READ_ONCE(pvread.measure_cursor) - 1,
				pvread.registered);
	     cpu < nr_cpu_ids; cpu = cpumask_next(cpu, pvread.registered)) {
		if (cpu == self)
			continue;
		if (n++ == PVREAD_MEASURE_BATCH) {
			m->wrapped = false;
			m->next = cpu;
			break;
		}
		if (!pvread_look(cpu, self, m))
			return false;
	}
	return m->rate != 0;
}

/*
 * Xen rewrites another vCPU's record whenever that vCPU is scheduled, so a
 * record can start after the TSC was read for it.  Measure again rather
 * than leave the page without a bound, every reader on the syscall, for a
 * whole tick.
 */
static bool pvread_measure(struct clocksource *cs, struct pvread_meas *m)
{
	unsigned int attempt;

	for (attempt = 0; attempt < 4; attempt++)
		if (pvread_measure_once(cs, m))
			return true;
	return false;
}

/* The bound the window gives at @now_sec. */
u64 pvread_window_worst_bound(u64 now_sec)
{
	unsigned int i;
	u64 worst = 0;

	for (i = 0; i < PVREAD_WINDOW_SEC; i++)
		if (pvread.window_sec[i] + PVREAD_WINDOW_SEC > now_sec)
			worst = max(worst, pvread.window[i]);
	if (worst > (U64_MAX - PVREAD_BOUND_SLACK_NS) / 2)
		return U64_MAX;
	return 2 * worst + PVREAD_BOUND_SLACK_NS;
}

static u64 pvread_window_bound(u64 now_sec, u64 spread)
{
	unsigned int i = now_sec % PVREAD_WINDOW_SEC;

	if (pvread.window_sec[i] != now_sec) {
		pvread.window_sec[i] = now_sec;
		pvread.window[i] = 0;
	}
	pvread.window[i] = max(pvread.window[i], spread);
	return pvread_window_worst_bound(now_sec);
}

/* @bound, raised to what a resume carried over while that lasts. */
static u64 pvread_carried_bound(const struct timekeeper *tk, u64 bound)
{
	u64 mono;

	if (!pvread.carry_ns)
		return bound;
	mono = (u64)(tk->xtime_sec + tk->wall_to_monotonic.tv_sec) *
	       NSEC_PER_SEC + (tk->tkr_mono.xtime_nsec >> tk->tkr_mono.shift) +
	       tk->wall_to_monotonic.tv_nsec;
	if (!pvread.carry_until)
		pvread.carry_until = mono + max_t(u64, pvread.carry_ns,
					      PVREAD_WINDOW_SEC * NSEC_PER_SEC);
	if (mono >= pvread.carry_until) {
		pvread.carry_ns = 0;
		pvread.carry_until = 0;
		return bound;
	}
	return max(bound, pvread.carry_ns);
}

/* Forget the bound's history: a new clocksource or a resume. */
void pvread_restart_window(void)
{
	pvread.have_first = false;
	pvread.rates_apart_until = 0;
	memset(pvread.window_sec, 0, sizeof(pvread.window_sec));
}

/*
 * States in which no line can be served whatever the records say: no look
 * at them then.  The others need the look: rates and waiting end on what
 * it finds, and so may pti (a refresh's lag measured against records at
 * rates apart).  Where Xen's stable bit makes libc fast only the bits are
 * looked at.  pvread.lock held.
 */
static bool pvread_measure_pointless(void)
{
	switch (pvread_line_reason(pvread_flags())) {
	case PVREAD_LINE_OFF:
	case PVREAD_LINE_UNVOUCHED:
	case PVREAD_LINE_WARP:
	case PVREAD_LINE_UNCHECKED:
	case PVREAD_LINE_STABLE:
		return true;
	default:
		return false;
	}
}

/*
 * After each update, once interrupts are on again on the CPU that made it:
 * every record against the kernel's clock (the spread, the bound over the
 * window, whether the records run at one rate), then the line anchored
 * anew.  Against the timekeeper as it was at the last update, which is
 * what the page's conversion holds.  The look at every record is made
 * without pvread.lock, so that an update on another CPU, which takes it inside
 * the timekeeper's write section, never waits for it; if anything changed
 * meanwhile the result is dropped: an update has queued this again, and a
 * change of records is measured at the next update.
 */
void pvread_measure_work(struct irq_work *work)
{
	struct timekeeper *tk = &pvread.tk;
	struct pvread_header *h = pvread.hdr;
	u64 spread = U64_MAX, bound = U64_MAX, now_sec, dev, end = 0, gen, seen;
	u64 refreshed;
	u64 t0 = local_clock();
	struct clocksource *cs;
	bool ready = false, measured;
	struct pvread_meas m;

	raw_spin_lock(&pvread.lock);
	if (!pvread.xen_clocksource || pvread.suspended) {
		raw_spin_unlock(&pvread.lock);
		return;
	}
	now_sec = tk->tkr_mono.cycle_last / NSEC_PER_SEC;
	pvread.last_sec = now_sec;
	refreshed = pvread_refresh_take(now_sec);
	if (pvread_measure_pointless()) {
		pvread.all_stable = pvread_all_stable();
		pvread.have_first = false;	/* a warm-up when it ends */
		pvread.ready = false;
		pvread_write_begin(h);
		h->error_bound_ns = U64_MAX;
		h->spread_ns = U64_MAX;
		pvread_publish(h);
		pvread_write_end(h);
		raw_spin_unlock(&pvread.lock);
		return;
	}
	cs = tk->tkr_mono.clock;
	if (pvread.measure_drops < PVREAD_MEASURE_MAX_DROPS) {
		gen = pvread.gen;
		pvread.measuring++;
		raw_spin_unlock(&pvread.lock);

		pvread_test_hold();
		measured = pvread_measure(cs, &m);

		raw_spin_lock(&pvread.lock);
		pvread.measuring--;
		if (pvread.gen != gen) {
			pvread.measure_stale++;
			pvread.measure_drops++;
			raw_spin_unlock(&pvread.lock);
			return;
		}
	} else {
		/*
		 * Updates came faster than the look at the records, this
		 * many times in a row: this once under the lock, so that the
		 * bound and the line are never older than that.  The updates
		 * wait for it, as every one did before.
		 */
		pvread.measure_locked++;
		measured = pvread_measure(cs, &m);
	}
	pvread.measure_drops = 0;
	if (measured)
		spread = m.hi - m.lo;
	/*
	 * What a refresh found a record missed, or the kernel's clock on its
	 * CPU apart from it, is a disagreement this look could not see.
	 */
	if (spread != U64_MAX)
		spread = refreshed > U64_MAX - 1 - spread ? U64_MAX - 1 :
			 spread + refreshed;
	seen = spread;
	if (!pvread.have_first) {
		pvread.first_sec = now_sec;
		pvread.have_first = true;
	}
	if (spread != U64_MAX) {
		if (m.rate_hi - m.rate_lo >
		    div_u64(m.rate_lo, 1000000 / PVREAD_LINE_RATE_PPM))
			pvread.rates_apart_until = now_sec + PVREAD_WINDOW_SEC;
		bound = pvread_window_bound(now_sec, spread);
		ready = now_sec >= pvread.first_sec + pvread.warmup_sec;
	}
	/*
	 * Every record carries the stable bit if every look of a whole
	 * round of them saw it; one without it is news at once.  Rarely not
	 * measured: then a look at the bits alone, locked.
	 */
	if (measured) {
		pvread.stable_round &= m.all_stable;
		if (!m.all_stable)
			pvread.all_stable = false;
		if (m.wrapped) {
			pvread.all_stable = pvread.stable_round;
			pvread.stable_round = true;
		}
		pvread.measure_cursor = m.next;
	} else {
		pvread.all_stable = pvread_all_stable();
	}
	if (bound != U64_MAX)
		bound = pvread_carried_bound(tk, bound);
	pvread.ready = ready;

	pvread_write_begin(h);
	if (ready && pvread_line_reason(pvread_flags()) == PVREAD_LINE_ACTIVE &&
	    pvread_line_anchor(h, tk, &m, &dev, &end)) {
		bound = pvread_carried_bound(tk, pvread_window_bound(now_sec,
								     dev));
		pvread.anchor_dev_max_ns = max(pvread.anchor_dev_max_ns, dev);
		seen = max(seen, end);
	}
	/*
	 * The bound readers had since the last update against what this
	 * update measured at that interval's end, the records' spread and
	 * the old line's distance from them: where the bound's premise
	 * failed (see PVREAD_WINDOW_SEC).  Not seen: an interval whose
	 * anchor was rejected or whose line ended.
	 */
	if (h->mode != PVREAD_MODE_NONE && seen != U64_MAX &&
	    seen > h->error_bound_ns)
		pvread.bound_overruns++;
	h->error_bound_ns = bound;
	h->spread_ns = spread;
	pvread_publish(h);
	pvread_write_end(h);
	pvread.measure_last_ns = local_clock() - t0;
	pvread.measure_max_ns = max(pvread.measure_max_ns, pvread.measure_last_ns);
	raw_spin_unlock(&pvread.lock);
}

/*
 * No measurement running, before the pages go.  irq_work_sync() is not
 * enough alone: a run queued while another still looks at the records can
 * start on another CPU, finish first and clear the work's busy flag.  Both
 * run with interrupts off, which an RCU grace period waits for.
 */
void pvread_measure_sync(void)
{
	irq_work_sync(&pvread.measure_work);
	synchronize_rcu();
}
