// SPDX-License-Identifier: GPL-2.0
/*
 * The module's line arithmetic (pvread_line.h, the code pvread_line.c runs) on
 * the host, against random and adversarial anchors.  Each round takes a
 * line, re-anchors it d ticks past its anchor at a new rate, as every
 * timekeeping update does, and checks what readers rely on:
 *  - within one line the value never decreases with the TSC;
 *  - a continued line starts at or above where the old one stands, and
 *    stays above the old one for the guard after the anchor (a reader may
 *    still be on the old line then);
 *  - a line started afresh (after the old one ended) starts at or above
 *    where the old one stood;
 *  - steering turns a line by at most the slew limit, towards the
 *    kernel's clock (selftests' pvread_line_rate allows no more), by
 *    exactly what 128-bit arithmetic says it should.
 * Rates from a 1 kHz to a 16 GHz TSC (Xen emulates any frequency it is
 * given), at random and at fixed frequencies, steered by leads from 1 ns
 * to 10 s either way or changed by up to a factor 2 (a restore onto
 * another host), anchors at 0, 1, the span's edges and at random, guards
 * from 1 tick to a whole span.
 * The figures go on "# " lines; exit 1 on any violation.
 *
 *   make -C kmod check [ROUNDS=N]
 */
#include <inttypes.h>
#include <linux/pvread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef int64_t s64;
typedef uint64_t u64;
typedef unsigned __int128 u128;
#define U32_MAX UINT32_MAX
#define U64_MAX UINT64_MAX
#define S64_MIN INT64_MIN
#define NSEC_PER_SEC 1000000000LL
#define clamp(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))

/* The kernel's mul_u64_u32_div(): a * mul / divisor, exact, truncated. */
static inline u64 mul_u64_u32_div(u64 a, u32 mul, u32 divisor)
{
	return (u64)((u128)a * mul / divisor);
}

#include "pvread_line.h"

typedef __int128 i128;

/* Values readers could not compute: pvread_line_value() refused them. */
static long unfit;

/* A run's value @d ticks past its anchor, in ns << 32, as readers get it. */
static i128 value(const struct pvread_run *r, u64 d)
{
	__u64 v;
	s64 ns;
	u32 frac;

	/* From the worst base a reader can hold: just below a second. */
	if (!pvread_line_fits(d, r->mul, r->shift,
			      ((u64)NSEC_PER_SEC << 32) - 1) &&
	    unfit++ < 3)
		printf("# %" PRIu64 " ticks past an anchor at mul %u shift %u: beyond readers' 64 bits\n",
		       d, r->mul, r->shift);
	(void)v;
	pvread_run_at(r, d, &ns, &frac);
	return (i128)ns * ((i128)1 << 32) + frac;
}

static u64 rng_state = 0x9e3779b97f4a7c15ULL;

static u64 rnd(void)
{
	/* xorshift64*: reproducible across hosts */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

static u64 rnd_below(u64 n)
{
	return n ? rnd() % n : 0;
}

/* The rate (ns per tick << 32) of a TSC of @hz. */
#define RATE_OF(hz)	((u64)(((u128)NSEC_PER_SEC << 32) / (hz)))
#define RATE_MIN	RATE_OF(16000000000ULL)
#define RATE_MAX	RATE_OF(1000)

/* The TSCs every test runs at, besides random ones: 10 GHz to 1 kHz. */
static const u64 fixed_hz[] = {
	10000000000ULL, 4000000000ULL, 1000000000, 100000000, 4000000,
	1000000, 466000, 465000, 100000, 10000, 1000,
};

#define NR(a)	(sizeof(a) / sizeof((a)[0]))

/* A rate in [@lo, @hi], each power of two in it about as likely. */
static u64 rnd_rate_in(u64 lo, u64 hi)
{
	int a = 63 - __builtin_clzll(lo), b = 63 - __builtin_clzll(hi), e;
	u64 r;

	do {
		e = a + (int)rnd_below(b - a + 1);
		r = (1ULL << e) + rnd_below(1ULL << e);
	} while (r < lo || r > hi);
	return r;
}

/* A rate in [@lo, @hi], an edge of the arithmetic one time in four. */
static u64 rnd_rate(u64 lo, u64 hi)
{
	static const u64 edges[] = {
		(1ULL << 32) - 1, 1ULL << 32, (1ULL << 32) + 1,	/* 1 GHz: shift 0 -> 1 */
		(1ULL << 33) - 1, 1ULL << 33,
		RATE_MIN, (u64)250 << 32, RATE_MAX, RATE_MAX - 1,
		/* (s64)rate * 10^6 leaves s64 above it (a TSC below 466 kHz) */
		INT64_MAX / 1000000, INT64_MAX / 1000000 + 1,
		(1ULL << 51) - 1, 1ULL << 51,			/* shift 19 -> 20 */
	};
	u64 r;

	if (rnd_below(4) == 0) {
		r = edges[rnd_below(NR(edges))];
		if (r >= lo && r <= hi)
			return r;
	}
	return rnd_rate_in(lo, hi);
}

/* A lead of 0 or from 1 ns to 10 s either way, each decade as likely. */
static s64 rnd_lead(void)
{
	u64 m = 1, k = rnd_below(11);
	s64 v;

	if (k == 10)
		return 0;
	while (k--)
		m *= 10;
	v = (s64)(m + rnd_below(9 * m));
	return rnd_below(2) ? v : -v;
}

/* The ticks a span of @ns lasts at @rate, as the module computes it. */
static u64 ticks(u64 ns, u64 rate)
{
	return (u64)(((unsigned __int128)ns << 32) / rate);
}

static u64 pick_d(u64 span)
{
	switch (rnd_below(6)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return span ? span - 1 : 0;
	case 3: return span;
	default: return rnd_below(span + 1);
	}
}

struct tally {
	long rounds, within, at_anchor, guard, start;
	i128 worst_guard;	/* smallest margin over the old line, ns << 32 */
};

static bool check_within(const struct pvread_run *r, u64 span, struct tally *t)
{
	u64 a = rnd_below(span + 1), b = a + rnd_below(span - a + 1);

	if (value(r, b) >= value(r, a) && value(r, span) >= value(r, 0))
		return true;
	if (t->within++ < 3)
		printf("# within a line: value at %" PRIu64 " below the value at %" PRIu64 " (mul %u shift %u)\n",
		       b, a, r->mul, r->shift);
	return false;
}

/*
 * pvread_run_fits() is the largest span whose values fit readers' 64 bits
 * from the worst base, within a tick: at it they fit, two ticks more they
 * do not (it is one tick short where the edge is exact).
 */
static long fits_edges(void)
{
	static const u64 rates[] = {
		1, 2, 1ULL << 28, (1ULL << 32) - 1, 1ULL << 32, (1ULL << 32) + 1,
		(u64)250 << 32, U64_MAX >> 1, U64_MAX,
	};
	const u64 worst = ((u64)NSEC_PER_SEC << 32) - 1;
	struct pvread_run r;
	long bad = 0;
	unsigned int i;
	u64 m;

	for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		pvread_run_set_rate(&r, rates[i]);
		m = pvread_run_fits(pvread_run_rate(&r));
		if (!pvread_line_fits(m, r.mul, r.shift, worst) ||
		    (m < U64_MAX - 1 && r.mul &&
		     pvread_line_fits(m + 2, r.mul, r.shift, worst))) {
			printf("# rate %" PRIu64 ": pvread_run_fits() %" PRIu64 " is not within a tick of the edge of readers' 64 bits\n",
			       rates[i], m);
			bad++;
		}
	}
	return bad;
}

/*
 * What pvread_steer() is to give, by exact arithmetic: a line @lead ns
 * ahead slower by lead / horizon of its rate (faster if behind), the lead
 * clamped to the slew limit, the turn truncated towards zero.
 */
static u64 steer_ref(u64 rate, s64 lead)
{
	const i128 lim = (i128)PVREAD_LINE_HORIZON_NS *
			 PVREAD_LINE_MAX_SLEW_PPM / 1000000;
	i128 c = clamp((i128)lead, -lim, lim);
	u128 turn = (u128)rate * (u128)(c < 0 ? -c : c) /
		    PVREAD_LINE_HORIZON_NS;

	return (u64)(c < 0 ? rate + turn : rate - turn);
}

struct steer_tally {
	long leads, bad;
	double widest;		/* the widest turn, ppm */
};

/*
 * pvread_steer() turns a line by at most PVREAD_LINE_MAX_SLEW_PPM of its
 * rate, towards the kernel's clock (what pvread_line_rate's limit rests
 * on), by exactly steer_ref().
 */
static void steer_one(u64 rate, s64 lead, struct steer_tally *t)
{
	u64 turned = pvread_steer(rate, lead), ref = steer_ref(rate, lead);
	i128 turn = (i128)turned - rate, size = turn < 0 ? -turn : turn;

	t->leads++;
	if ((double)size * 1e6 / rate > t->widest)
		t->widest = (double)size * 1e6 / rate;
	if (size * 1000000 <= (i128)rate * PVREAD_LINE_MAX_SLEW_PPM &&
	    (lead <= 0 || turn <= 0) && (lead >= 0 || turn >= 0) &&
	    turned == ref)
		return;
	if (t->bad++ < 3)
		printf("# steer: rate %" PRIu64 " (a %.0f Hz TSC), lead %" PRId64 " ns: turned to %" PRIu64 ", not %" PRIu64 " (%+.3f ppm)\n",
		       rate, 1e9 * 4294967296.0 / rate, lead, turned, ref,
		       ((double)turned - rate) * 1e6 / rate);
}

/*
 * Every fixed TSC and the edges of the arithmetic, at leads of 0, ±1 ns
 * to ±10 s by decades, at the clamp's edges and at s64's; then random
 * rates and leads.
 */
static void steer_within(long rounds, struct steer_tally *t)
{
	static const s64 edges[] = {
		999999, 1000000, 1000001, (s64)1 << 40, INT64_MAX, INT64_MIN,
		-999999, -1000000, -1000001, -((s64)1 << 40),
	};
	static const u64 rates[] = {
		RATE_MIN, RATE_MAX, INT64_MAX / 1000000,
		INT64_MAX / 1000000 + 1, (1ULL << 51) - 1, 1ULL << 51,
	};
	unsigned int i, j;
	long n;
	s64 m;

	for (i = 0; i < NR(fixed_hz) + NR(rates); i++) {
		u64 rate = i < NR(fixed_hz) ? RATE_OF(fixed_hz[i]) :
			   rates[i - NR(fixed_hz)];

		steer_one(rate, 0, t);
		for (m = 1; m <= 10 * NSEC_PER_SEC; m *= 10) {
			steer_one(rate, m, t);
			steer_one(rate, -m, t);
		}
		for (j = 0; j < NR(edges); j++)
			steer_one(rate, edges[j], t);
	}
	for (n = 0; n < rounds; n++)
		steer_one(rnd_rate(RATE_MIN, RATE_MAX), rnd_lead(), t);
}

/*
 * @rounds anchors of a line of rates in [@lo, @hi]: steered, changed by up
 * to a factor 2 or started afresh.
 */
static void anchor_rounds(long rounds, u64 lo, u64 hi, struct tally *t)
{
	struct pvread_run r = { 0 }, old;
	u64 rate, span, guard, d, x, nrate;
	i128 margin;
	long i;
	bool ok;

	pvread_run_set_rate(&r, rnd_rate(lo, hi));
	r.ns = 1000 * NSEC_PER_SEC;
	for (i = 0; i < rounds; i++) {
		t->rounds++;
		rate = pvread_run_rate(&r);
		span = ticks(PVREAD_LINE_SPAN_NS, rate);
		if (span > pvread_run_fits(rate))
			span = pvread_run_fits(rate);
		switch (rnd_below(4)) {
		case 0: guard = 1; break;
		case 1: guard = span; break;
		default: guard = ticks(PVREAD_LINE_GUARD_NS, rate) + 1;
		}
		check_within(&r, span, t);
		d = pick_d(span);
		old = r;
		if (rnd_below(8)) {
			/* continued: steered, or its rate changed */
			nrate = rnd_below(8) ? pvread_steer(rate, rnd_lead()) :
					       rnd_rate(lo, hi);
			if (nrate > rate * 2 || nrate < rate / 2)
				nrate = pvread_steer(rate, 0);
			pvread_run_continue(&r, d, nrate, guard);
			ok = value(&r, 0) >= value(&old, d);
			if (!ok && t->at_anchor++ < 3)
				printf("# continued at %" PRIu64 ": starts below the old line by %lld/2^32 ns (rate %" PRIu64 " -> %" PRIu64 ")\n",
				       d, (long long)(value(&old, d) - value(&r, 0)),
				       rate, nrate);
			for (x = 0; x <= guard; x += guard > 4 ? guard / 4 : 1) {
				u64 od = d + x > span ? span : d + x;

				margin = value(&r, x) - value(&old, od);
				if (margin < t->worst_guard)
					t->worst_guard = margin;
				if (margin < 0 && t->guard++ < 3)
					printf("# continued at %" PRIu64 ": %" PRIu64 " ticks later below the old line by %lld/2^32 ns (rate %" PRIu64 " -> %" PRIu64 ", guard %" PRIu64 ")\n",
					       d, x, (long long)-margin, rate,
					       nrate, guard);
			}
		} else {
			/* started afresh, at the kernel's clock or below it */
			s64 k = old.ns + (s64)rnd_below(2000000) - 1000000;

			pvread_run_start(&r, d, rnd_rate(lo, hi), k, true);
			ok = value(&r, 0) >= value(&old, d);
			if (!ok && t->start++ < 3)
				printf("# started at %" PRIu64 ": below where the old line stood\n", d);
		}
		/* keep the values away from s64's ends */
		if (r.ns > (s64)1 << 62 || r.ns < 0)
			r.ns = 1000 * NSEC_PER_SEC;
	}
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 2000000;
	struct tally t = { .worst_guard = (i128)INT64_MAX << 32 };
	struct steer_tally st = { 0 };
	unsigned int i;
	u64 rate;
	bool ok;

	anchor_rounds(rounds, RATE_MIN, RATE_MAX, &t);
	/* each fixed TSC, its rate within 1/16 (and 1 kHz at most) */
	for (i = 0; i < NR(fixed_hz); i++) {
		rate = RATE_OF(fixed_hz[i]);
		anchor_rounds(rounds / 16 + 1, rate - rate / 16,
			      rate + rate / 16 < RATE_MAX ? rate + rate / 16 : RATE_MAX,
			      &t);
	}
	printf("# %ld anchors: %ld lines decreasing, %ld continued below the old line, %ld below it within the guard (smallest margin %lld/2^32 ns), %ld started below it, %ld values beyond readers' 64 bits\n",
	       t.rounds, t.within, t.at_anchor, t.guard,
	       (long long)t.worst_guard, t.start, unfit);
	unfit += fits_edges();
	ok = !t.within && !t.at_anchor && !t.guard && !t.start && !unfit;
	printf("%s - the module's line never decreases, never starts below the old one within the guard, and readers' 64 bits hold it\n",
	       ok ? "ok 1" : "not ok 1");
	steer_within(rounds, &st);
	printf("# steer: %ld leads, %ld turned too far, the wrong way or not as exact arithmetic says; widest turn %.3f ppm (limit %d)\n",
	       st.leads, st.bad, st.widest, PVREAD_LINE_MAX_SLEW_PPM);
	printf("%s - the module turns a line by exactly lead / horizon, at most PVREAD_LINE_MAX_SLEW_PPM, towards the kernel's clock, at every TSC from 1 kHz to 16 GHz\n",
	       st.bad ? "not ok 2" : "ok 2");
	return !ok || st.bad;
}
