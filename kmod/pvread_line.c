// SPDX-License-Identifier: GPL-2.0
/*
 * The line (PVREAD_MODE_LINE) in the page: anchored after each update from
 * the measurement of the records, ended when the mode leaves it, made flat
 * at its end across a suspend.  Its arithmetic on its own parameters is
 * pvread_line.h, which kmod/test_line.c also runs on the host.
 */
#include <linux/math64.h>
#include <asm/msr.h>

#include "pvread_internal.h"

/*
 * The line stops here: readers that fall back afterwards keep their
 * readings at or above its value at the TSC now (a little later, for a
 * reader whose rdtsc ran late), never above where it could still have been
 * read.  The next line starts above that.  pvread.lock held, header open.
 */
void pvread_line_end(struct pvread_header *h)
{
	u64 now, span;

	if (!pvread.ln.live)
		return;
	pvread.ln.live = false;
	/* As in pvread_line_anchor(): readers that saw seq even are done. */
	smp_mb();
	now = rdtsc_ordered();
	span = (s64)(now - pvread.ln.tsc) > 0 ? now - pvread.ln.tsc : 0;
	span += pvread.ln.guard;
	pvread.ln.span = min(max(span, 1ULL), pvread.ln.span);
	h->line.tsc_span = pvread.ln.span;
}

/* The kernel's CLOCK_MONOTONIC at clocksource value @c, as it would say. */
static s64 pvread_tk_mono_ns(const struct timekeeper *tk, u64 c)
{
	const struct tk_read_base *r = &tk->tkr_mono;
	s64 d = clamp_t(s64, c - r->cycle_last, -(s64)r->clock->max_cycles,
			(s64)r->clock->max_cycles);
	s64 ns = (tk->xtime_sec + tk->wall_to_monotonic.tv_sec) * NSEC_PER_SEC +
		 tk->wall_to_monotonic.tv_nsec;

	if (d >= 0)
		return ns + (s64)((r->xtime_nsec + (u64)d * r->mult) >> r->shift);
	return ns + (s64)(r->xtime_nsec >> r->shift) -
	       (s64)(((u64)-d * r->mult) >> r->shift);
}

/* The same for CLOCK_MONOTONIC_RAW. */
static s64 pvread_tk_raw_ns(const struct timekeeper *tk, u64 c)
{
	const struct tk_read_base *r = &tk->tkr_raw;
	s64 d = clamp_t(s64, c - r->cycle_last, -(s64)r->clock->max_cycles,
			(s64)r->clock->max_cycles);
	s64 ns = tk->raw_sec * NSEC_PER_SEC;

	if (d >= 0)
		return ns + (s64)((r->xtime_nsec + (u64)d * r->mult) >> r->shift);
	return ns + (s64)(r->xtime_nsec >> r->shift) -
	       (s64)(((u64)-d * r->mult) >> r->shift);
}

/* Ticks past the anchor a reader would use at @tsc. */
static u64 pvread_line_d(u64 tsc)
{
	s64 d = tsc - pvread.ln.tsc;

	return d > 0 ? min_t(u64, d, pvread.ln.span) : 0;
}

static s64 pvread_run_ns(const struct pvread_run *r, u64 tsc)
{
	s64 ns;
	u32 frac;

	pvread_run_at(r, pvread_line_d(tsc), &ns, &frac);
	return ns;
}

static u64 pvread_abs_diff(u64 a, u64 b)
{
	return a > b ? a - b : b - a;
}

/* How far @v (ns) is from the far end of [@lo, @hi]. */
static u64 pvread_dev(s64 v, s64 lo, s64 hi)
{
	return max(v > lo ? v - lo : lo - v, v > hi ? v - hi : hi - v);
}

static void pvread_set_line_base(struct pvread_clock_base *b, s64 ns,
				 u32 frac)
{
	s32 rem;

	b->sec = div_s64_rem(ns, NSEC_PER_SEC, &rem);
	if (rem < 0) {
		rem += NSEC_PER_SEC;
		b->sec--;
	}
	b->snsec = ((u64)rem << 32) | frac;
}

/*
 * An offset between clocks in ns, negative ones too.  Not
 * timespec64_to_ns(): Linux 5.10's (Debian 11's 5.10.0-32 too) takes
 * tv_sec as unsigned and gives KTIME_MAX for any negative one, such as
 * wall_to_monotonic's, where 6.1's clamps it as signed.  The timekeeper
 * keeps its offsets within s64 ns (settimeofday stops short of
 * KTIME_SEC_MAX).
 */
static s64 pvread_offset_ns(const struct timespec64 *ts)
{
	return ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

/*
 * The header's line bases from pvread.ln and the kernel's offsets between
 * clocks: at an anchor, and at every update, which may have set the time.
 */
void pvread_line_bases(struct pvread_line *hl, const struct timekeeper *tk)
{
	const struct pvread_line_state *l = &pvread.ln;
	s64 wtm = pvread_offset_ns(&tk->wall_to_monotonic);
	s64 boot = pvread_offset_ns(&tk->monotonic_to_boot);
	s64 tai = (s64)tk->tai_offset * NSEC_PER_SEC;

	pvread_set_line_base(&hl->base[CLOCK_MONOTONIC], l->mono.ns,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_BOOTTIME], l->mono.ns + boot,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_REALTIME], l->mono.ns - wtm,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_TAI], l->mono.ns - wtm + tai,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_MONOTONIC_RAW], l->raw.ns,
			     l->raw.frac);
}

/* The header's line from pvread.ln, just anchored. */
static void pvread_line_publish(struct pvread_line *hl,
				const struct timekeeper *tk)
{
	const struct pvread_line_state *l = &pvread.ln;

	hl->tsc_timestamp = l->tsc;
	hl->tsc_span = l->span;
	hl->mul = l->mono.mul;
	hl->shift = l->mono.shift;
	hl->raw_mul = l->raw.mul;
	hl->raw_shift = l->raw.shift;
	hl->anchors++;
	pvread_line_bases(hl, tk);
}

/*
 * Move @b, a base of the line, to the line's value @span ticks on at
 * @mul, @shift: the value readers got there.
 */
static void pvread_base_add(struct pvread_clock_base *b, u64 span, u32 mul,
			    u8 shift)
{
	__u64 v = b->snsec;
	u64 rem;

	pvread_line_value(span, mul, shift, b->snsec, &v);
	/* rem < NSEC_PER_SEC: snsec stays below one second << 32 */
	b->sec += div64_u64_rem(v >> 32, NSEC_PER_SEC, &rem);
	b->snsec = (rem << 32) | (u32)v;
}

/*
 * The ended line, flat at its end: after a restore the TSC may be another
 * host's, lower than the anchor, and a reader clamping it there would get
 * the line's start, below what it may have returned.  Where the line
 * stood at its end holds whatever the TSC, and is where the next line
 * starts.  pvread.lock held, header open, the line ended.
 */
void pvread_line_flatten(struct pvread_header *h)
{
	struct pvread_line_state *l = &pvread.ln;
	struct pvread_line *hl = &h->line;
	unsigned int c;

	if (!l->exists || l->live)
		return;
	for (c = 0; c < PVREAD_NR_CLOCK_BASES; c++)
		if (c == CLOCK_MONOTONIC_RAW)
			pvread_base_add(&hl->base[c], l->span, l->raw.mul,
					l->raw.shift);
		else if (hl->base[c].sec || hl->base[c].snsec)
			pvread_base_add(&hl->base[c], l->span, l->mono.mul,
					l->mono.shift);
	pvread_run_at(&l->mono, l->span, &l->mono.ns, &l->mono.frac);
	pvread_run_at(&l->raw, l->span, &l->raw.ns, &l->raw.frac);
	l->mono.mul = 0;
	l->mono.shift = 0;
	l->raw.mul = 0;
	l->raw.shift = 0;
	l->tsc = 0;
	l->span = 1;
	hl->tsc_timestamp = 0;
	hl->tsc_span = 1;
	hl->mul = 0;
	hl->shift = 0;
	hl->raw_mul = 0;
	hl->raw_shift = 0;
}

/*
 * Anchor the next line at the TSC now: continue the live one, aimed at the
 * kernel's clock, or start one at the kernel's clock but never below where
 * the last one stood.  Runs after the timekeeper's update, pvread.lock held,
 * the header open (readers of the old line are still finishing).  Sets
 * @dev to how far the lines, the kernel's clock and the records
 * disagreed, in ns, including how far the new line's rate could take it
 * from the records' over its span, and @end_out to how far the old line
 * was from them at its end (0 if it had ended).  False, and nothing
 * anchored, if the
 * TSC read now is below the measurement's: every difference below is
 * taken as unsigned, and one TSC step back of 500 ticks would start a
 * line about 195 years ahead, which no later line could undo.
 */
bool pvread_line_anchor(struct pvread_header *h, const struct timekeeper *tk,
			const struct pvread_meas *m, u64 *dev_out,
			u64 *end_out)
{
	struct pvread_line_state *l = &pvread.ln;
	u64 rm = mul_u64_u32_shr(m->rate, tk->tkr_mono.mult, tk->tkr_mono.shift);
	u64 rr = mul_u64_u32_shr(m->rate, tk->tkr_raw.mult, tk->tkr_raw.shift);
	u64 tmid = m->t0 + (m->t1 - m->t0) / 2, ta, d, gap, dev = 0, far, lo, hi;
	s64 km = pvread_tk_mono_ns(tk, m->k), kr = pvread_tk_raw_ns(tk, m->k);
	s64 mlo = pvread_tk_mono_ns(tk, m->lo), mhi = pvread_tk_mono_ns(tk, m->hi);
	s64 rlo = pvread_tk_raw_ns(tk, m->lo), rhi = pvread_tk_raw_ns(tk, m->hi);
	u64 guard = div64_u64((u64)PVREAD_LINE_GUARD_NS << 32, m->rate);
	bool cont;

	/* Readers that saw the seq even have read the TSC before this. */
	smp_mb();
	ta = rdtsc_ordered();
	if (unlikely(READ_ONCE(pvread_test_anchor_tsc_back)))
		ta = m->t1 - xchg(&pvread_test_anchor_tsc_back, 0);
	if ((s64)(ta - m->t1) < 0) {
		pvread.anchors_rejected++;
		return false;
	}
	d = (s64)(ta - l->tsc) > 0 ? ta - l->tsc : 0;
	cont = l->live && d <= l->span;
	if (cont) {
		/* The old line at the end of its life. */
		dev = max3(dev, pvread_dev(pvread_run_ns(&l->mono, m->t0), mlo, mhi),
			   pvread_dev(pvread_run_ns(&l->mono, m->t1), mlo, mhi));
		dev = max3(dev, pvread_dev(pvread_run_ns(&l->raw, m->t0), rlo, rhi),
			   pvread_dev(pvread_run_ns(&l->raw, m->t1), rlo, rhi));
		*end_out = dev;		/* what readers of the old line saw */
		rm = pvread_steer(rm, pvread_run_ns(&l->mono, tmid) - km);
		rr = pvread_steer(rr, pvread_run_ns(&l->raw, tmid) - kr);
		pvread_run_continue(&l->mono, d, rm, guard);
		pvread_run_continue(&l->raw, d, rr, guard);
	} else {
		gap = mul_u64_u64_shr(ta - tmid, rm, 32);
		d = l->exists ? pvread_line_d(ta) : 0;
		pvread_run_start(&l->mono, d, rm, km + gap, l->exists);
		gap = mul_u64_u64_shr(ta - tmid, rr, 32);
		pvread_run_start(&l->raw, d, rr, kr + gap, l->exists);
	}
	l->tsc = ta;
	l->guard = guard;
	l->span = min3(div64_u64((u64)PVREAD_LINE_SPAN_NS << 32, m->rate),
		       pvread_run_fits(pvread_run_rate(&l->mono)),
		       pvread_run_fits(pvread_run_rate(&l->raw)));
	l->exists = true;
	l->live = true;

	/* The new line against the kernel and records, which moved on. */
	gap = mul_u64_u64_shr(ta - m->t0, rm, 32);
	dev = max(dev, pvread_dev(l->mono.ns, mlo, mhi + gap));
	dev = max(dev, pvread_dev(l->raw.ns, rlo, rhi + gap));
	/* Unsteered for a whole span, at most this far from any record. */
	rm = pvread_run_rate(&l->mono);
	lo = mul_u64_u32_shr(m->rate_lo, tk->tkr_mono.mult, tk->tkr_mono.shift);
	hi = mul_u64_u32_shr(m->rate_hi, tk->tkr_mono.mult, tk->tkr_mono.shift);
	far = max(pvread_abs_diff(rm, lo), pvread_abs_diff(rm, hi));
	rr = pvread_run_rate(&l->raw);
	lo = mul_u64_u32_shr(m->rate_lo, tk->tkr_raw.mult, tk->tkr_raw.shift);
	hi = mul_u64_u32_shr(m->rate_hi, tk->tkr_raw.mult, tk->tkr_raw.shift);
	far = max3(far, pvread_abs_diff(rr, lo), pvread_abs_diff(rr, hi));
	pvread_line_publish(&h->line, tk);
	*dev_out = dev + mul_u64_u64_shr(far, l->span, 32);
	return true;
}
