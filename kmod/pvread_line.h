/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The line's arithmetic on its own parameters, nothing else: the module
 * includes it (pvread_internal.h), and so does kmod/test_line.c, which runs
 * it on the host against random and adversarial anchors.  The includer
 * provides u8, u32, s64, u64, U32_MAX, U64_MAX, S64_MIN, NSEC_PER_SEC,
 * clamp(), mul_u64_u32_div() and the UAPI header (linux/pvread.h) with the
 * kernel's meaning.
 */
#ifndef PVREAD_LINE_H
#define PVREAD_LINE_H

/*
 * The line (PVREAD_MODE_LINE).  Each timekeeping update re-anchors it where
 * the previous one stands and aims it at the kernel's clock one horizon
 * later, its rate kept within MAX_SLEW of the records' (as NTP's slew is
 * limited), so it never steps and follows the kernel smoothly.  A reader
 * may still be on the old line for a moment after the anchor (its rdtsc
 * may run late, its TSC may be a little ahead of ours): the new line starts
 * high enough to stay above the old one for GUARD_NS.  SPAN_NS: how long a
 * line may be read without an update (ticks stop on idle CPUs; a CPU
 * running a reader ticks).
 */
#define PVREAD_LINE_HORIZON_NS	NSEC_PER_SEC
#define PVREAD_LINE_MAX_SLEW_PPM	1000
#define PVREAD_LINE_GUARD_NS	20000
#define PVREAD_LINE_SPAN_NS	(NSEC_PER_SEC / 2)

/* One rate of the line: MONOTONIC's, or MONOTONIC_RAW's. */
struct pvread_run {
	u32 mul;		/* as published: ns per tick << (32 - shift) */
	u8 shift;
	s64 ns;			/* the value at the anchor: ns + frac / 2^32 */
	u32 frac;
};

/* @rate (ns per tick << 32) as readers take it: mul, shift. */
static inline void pvread_run_set_rate(struct pvread_run *r, u64 rate)
{
	u8 shift = 0;

	while ((rate >> shift) > U32_MAX)
		shift++;
	r->shift = shift;
	r->mul = rate >> shift;
}

static inline u64 pvread_run_rate(const struct pvread_run *r)
{
	return (u64)r->mul << r->shift;
}

/*
 * The most ticks past an anchor that a line of @rate may be read: where its
 * value from a base just below a second still fits readers' 64 bits
 * (pvread_line_value()).  Half a second of any real TSC is far below it.
 */
static inline u64 pvread_run_fits(u64 rate)
{
	return (U64_MAX - ((u64)NSEC_PER_SEC << 32)) / (rate ? rate : 1);
}

/*
 * @r's value @d ticks past its anchor, by readers' own arithmetic (the
 * UAPI header's pvread_line_value()); @d at most pvread_run_fits() of its
 * rate, as every line's span is, or this is the anchor's value.
 */
static inline void pvread_run_at(const struct pvread_run *r, u64 d, s64 *ns,
				 u32 *frac)
{
	__u64 v = r->frac;

	pvread_line_value(d, r->mul, r->shift, r->frac, &v);
	*ns = r->ns + (s64)(v >> 32);
	*frac = (u32)v;
}

/*
 * Rate that brings a line @lead_ns ahead of the kernel (behind, if
 * negative) back to it over the horizon, within the slew limit, the turn
 * truncated towards zero.  Xen emulates a TSC of any frequency, and rate
 * grows as the frequency falls (4.3e15 at 1 kHz): rate * lead leaves s64
 * below 466 kHz, so the product is taken unsigned, in mul_u64_u32_div()'s
 * 96 bits.  The turn is at most rate / 1000, so rate + turn fits.
 */
static inline u64 pvread_steer(u64 rate, s64 lead_ns)
{
	const s64 lim = PVREAD_LINE_HORIZON_NS / 1000000 *
			PVREAD_LINE_MAX_SLEW_PPM;
	u64 turn;

	lead_ns = clamp(lead_ns, -lim, lim);
	turn = mul_u64_u32_div(rate, lead_ns < 0 ? -lead_ns : lead_ns,
			       PVREAD_LINE_HORIZON_NS);
	return lead_ns < 0 ? rate + turn : rate - turn;
}

/*
 * Replace run @r, whose old line readers may still be on for @guard ticks
 * after @d ticks past its anchor, by one of @rate anchored there: where the
 * old one stands, plus what keeps it above the old one until the guard is
 * over.  Exact in readers' arithmetic.
 */
static inline void pvread_run_continue(struct pvread_run *r, u64 d,
				       u64 rate, u64 guard)
{
	u64 old = pvread_run_rate(r), step, f;

	pvread_run_at(r, d, &r->ns, &r->frac);
	pvread_run_set_rate(r, rate);
	rate = pvread_run_rate(r);
	if (old > rate) {
		step = (old - rate) * guard + 1;
		f = (u64)r->frac + (u32)step;
		r->ns += (s64)(step >> 32) + (s64)(f >> 32);
		r->frac = (u32)f;
	}
}

/* Start run @r of @rate at @ns, but not below where it last stood. */
static inline void pvread_run_start(struct pvread_run *r, u64 d, u64 rate,
				    s64 ns, bool had_line)
{
	s64 last_ns = S64_MIN;
	u32 last_frac = 0;

	if (had_line)
		pvread_run_at(r, d, &last_ns, &last_frac);
	pvread_run_set_rate(r, rate);
	if (ns > last_ns) {
		r->ns = ns;
		r->frac = 0;
	} else {
		r->ns = last_ns;
		r->frac = last_frac;
	}
}

#endif /* PVREAD_LINE_H */
