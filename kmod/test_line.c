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
 *    kernel's clock (selftests' pvread_line_rate allows no more).
 * Rates from a 4 MHz to a 16 GHz TSC, steered by up to the slew limit or
 * changed by any amount (a restore onto another host), anchors at 0, 1,
 * the span's edges and at random, guards from 1 tick to a whole span.
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
typedef int32_t s32;
typedef int64_t s64;
typedef uint64_t u64;
#define U32_MAX UINT32_MAX
#define U64_MAX UINT64_MAX
#define S64_MIN INT64_MIN
#define NSEC_PER_SEC 1000000000LL
#define clamp(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))

/* The kernel's div_s64(): truncates towards zero, as C does. */
static inline s64 div_s64(s64 dividend, s32 divisor)
{
	return dividend / divisor;
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

/* A rate (ns per tick << 32) for a TSC of 4 MHz to 16 GHz. */
static u64 rnd_rate(void)
{
	static const u64 edges[] = {
		(1ULL << 32) - 1, 1ULL << 32, (1ULL << 32) + 1,	/* 1 GHz: shift 0 -> 1 */
		(1ULL << 33) - 1, 1ULL << 33,
		1ULL << 28, (u64)250 << 32,
	};

	if (rnd_below(4) == 0)
		return edges[rnd_below(sizeof(edges) / sizeof(edges[0]))];
	return (1ULL << 28) + rnd_below((u64)250 << 32);
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
 * pvread_steer() turns a line by at most PVREAD_LINE_MAX_SLEW_PPM of its
 * rate, towards the kernel's clock: what pvread_line_rate's limit rests
 * on.  Leads at the clamp's edges and far beyond it, at random rates.
 * The widest turn, in ppm, goes to *@widest.
 */
static long steer_within(long rounds, double *widest)
{
	static const s64 edges[] = {
		0, 1, -1, 999999, 1000000, 1000001, -999999, -1000000,
		-1000001, (s64)1 << 40, -((s64)1 << 40), INT64_MAX, INT64_MIN,
	};
	const unsigned int nr = sizeof(edges) / sizeof(edges[0]);
	long i, bad = 0;
	u64 rate, turned;
	i128 turn, size;
	s64 lead;

	*widest = 0;
	for (i = 0; i < rounds; i++) {
		rate = rnd_rate();
		lead = i < (long)nr ? edges[i] :
		       (s64)rnd_below(40000001) - 20000000;
		turned = pvread_steer(rate, lead);
		turn = (i128)turned - rate;
		size = turn < 0 ? -turn : turn;
		if ((double)size * 1e6 / rate > *widest)
			*widest = (double)size * 1e6 / rate;
		if (size * 1000000 <= (i128)rate * PVREAD_LINE_MAX_SLEW_PPM &&
		    (lead <= 0 || turn <= 0) && (lead >= 0 || turn >= 0))
			continue;
		if (bad++ < 3)
			printf("# steer: rate %" PRIu64 ", lead %" PRId64 " ns: turned to %" PRIu64 "\n",
			       rate, lead, turned);
	}
	return bad;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 2000000, i;
	struct tally t = { .worst_guard = (i128)INT64_MAX << 32 };
	struct pvread_run r = { 0 }, old;
	u64 rate = rnd_rate(), span, guard, d, x, nrate;
	long steered;
	double widest;
	i128 margin;
	bool ok;

	pvread_run_set_rate(&r, rate);
	r.ns = 1000 * NSEC_PER_SEC;
	for (i = 0; i < rounds; i++) {
		t.rounds++;
		rate = pvread_run_rate(&r);
		span = ticks(PVREAD_LINE_SPAN_NS, rate);
		if (span > pvread_run_fits(rate))
			span = pvread_run_fits(rate);
		switch (rnd_below(4)) {
		case 0: guard = 1; break;
		case 1: guard = span; break;
		default: guard = ticks(PVREAD_LINE_GUARD_NS, rate) + 1;
		}
		check_within(&r, span, &t);
		d = pick_d(span);
		old = r;
		if (rnd_below(8)) {
			/* continued: steered by up to the slew limit, or more */
			nrate = rnd_below(8) ?
				pvread_steer(rate, (s64)rnd_below(40000001) - 20000000) :
				rnd_rate();
			if (nrate > rate * 2 || nrate < rate / 2)
				nrate = pvread_steer(rate, 0);
			pvread_run_continue(&r, d, nrate, guard);
			ok = value(&r, 0) >= value(&old, d);
			if (!ok && t.at_anchor++ < 3)
				printf("# continued at %" PRIu64 ": starts below the old line by %lld/2^32 ns (rate %" PRIu64 " -> %" PRIu64 ")\n",
				       d, (long long)(value(&old, d) - value(&r, 0)),
				       rate, nrate);
			for (x = 0; x <= guard; x += guard > 4 ? guard / 4 : 1) {
				u64 od = d + x > span ? span : d + x;

				margin = value(&r, x) - value(&old, od);
				if (margin < t.worst_guard)
					t.worst_guard = margin;
				if (margin < 0 && t.guard++ < 3)
					printf("# continued at %" PRIu64 ": %" PRIu64 " ticks later below the old line by %lld/2^32 ns (rate %" PRIu64 " -> %" PRIu64 ", guard %" PRIu64 ")\n",
					       d, x, (long long)-margin, rate,
					       nrate, guard);
			}
		} else {
			/* started afresh, at the kernel's clock or below it */
			s64 k = old.ns + (s64)rnd_below(2000000) - 1000000;

			pvread_run_start(&r, d, rnd_rate(), k, true);
			ok = value(&r, 0) >= value(&old, d);
			if (!ok && t.start++ < 3)
				printf("# started at %" PRIu64 ": below where the old line stood\n", d);
		}
		/* keep the values away from s64's ends */
		if (r.ns > (s64)1 << 62 || r.ns < 0)
			r.ns = 1000 * NSEC_PER_SEC;
	}
	printf("# %ld anchors: %ld lines decreasing, %ld continued below the old line, %ld below it within the guard (smallest margin %lld/2^32 ns), %ld started below it, %ld values beyond readers' 64 bits\n",
	       t.rounds, t.within, t.at_anchor, t.guard,
	       (long long)t.worst_guard, t.start, unfit);
	unfit += fits_edges();
	ok = !t.within && !t.at_anchor && !t.guard && !t.start && !unfit;
	printf("%s - the module's line never decreases, never starts below the old one within the guard, and readers' 64 bits hold it\n",
	       ok ? "ok 1" : "not ok 1");
	steered = steer_within(rounds, &widest);
	printf("# steer: %ld leads, %ld turned too far or the wrong way; widest turn %.3f ppm (limit %d)\n",
	       rounds, steered, widest, PVREAD_LINE_MAX_SLEW_PPM);
	printf("%s - the module turns a line by at most PVREAD_LINE_MAX_SLEW_PPM, towards the kernel's clock\n",
	       steered ? "not ok 2" : "ok 2");
	return !ok || steered;
}
