// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The conversion arithmetic at its edges, with values a real TSC would take
 * years to reach: each expected value is worked out by hand in the comment.
 */
#include <stdint.h>
#include <stdio.h>

#include "arith.h"
#include "tap.h"

#define P(tsc, ts, st, mul, shift) pvread_pvclock_ns(tsc, ts, st, mul, shift)

static void check(uint64_t got, uint64_t want, const char *what)
{
	/* The name stays the same whatever came out: the value goes above. */
	printf("# %s: %llu (want %llu)\n", what, (unsigned long long)got,
	       (unsigned long long)want);
	tap_result(got == want, "%s", what);
}

#define SWEEP 1000000

/* xorshift64: the same sequence on every run. */
static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * pvread_line_at_tsc() against pvread_line_at() for lines of any anchor,
 * rate and base, each read at a delta where it fits (the largest such
 * delta a quarter of the time, one within the anchor's high half another
 * quarter); where the TSC's high half is the anchor's, the same from the
 * two low halves, as try_read() reads it.  The first difference is
 * printed; *@low counts the low-half readings.
 */
static int line_at_tsc_sweep(int *low)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL, stamp, snsec, rate, d, max, want;
	uint32_t mul, left;
	uint8_t shift;
	int i;

	for (i = 0; i < SWEEP; i++) {
		stamp = next(&x);
		mul = (uint32_t)next(&x) | 1;
		shift = (uint8_t)(next(&x) % 33);
		snsec = next(&x) % (PVREAD_ARITH_NSEC_PER_SEC << 32);
		rate = (uint64_t)mul << shift;
		max = (UINT64_MAX - snsec) / rate;
		left = UINT32_MAX - (uint32_t)stamp;
		switch (next(&x) % 4) {
		case 0:
			d = max;
			break;
		case 1:
			d = next(&x) % ((max < left ? max : left) + 1ULL);
			break;
		default:
			d = next(&x) % (max + 1);
		}
		want = pvread_line_at(d, mul, shift, snsec);
		if (!pvread_line_ok(d, mul, shift, snsec) ||
		    pvread_line_at_tsc(stamp + d, mul, shift,
				       pvread_line_offset(stamp, mul, shift,
							  snsec)) != want ||
		    ((stamp + d) >> 32 == stamp >> 32 && ++*low &&
		     pvread_line_at_tsc((uint32_t)(stamp + d), mul, shift,
					pvread_line_offset((uint32_t)stamp,
							   mul, shift,
							   snsec)) != want)) {
			printf("# anchor %#llx, mul %#x, shift %u, snsec %#llx, delta %#llx\n",
			       (unsigned long long)stamp, mul, shift,
			       (unsigned long long)snsec, (unsigned long long)d);
			return 0;
		}
	}
	return 1;
}

/*
 * pvread_line_pass() against the line itself: for lines of any rate and
 * base, and a coarse value anywhere from below the base to a few seconds
 * past it, the line read at the pass point is at or above the value and
 * one tick before it below; where it says the line does not reach the
 * value within the span, the line at the span is below it.  *@held counts
 * the cases with a pass point past the anchor.
 */
static int line_pass_sweep(int *held)
{
	uint64_t x = 0x2545f4914f6cdd1dULL, snsec, rate, span, below, pass;
	uint32_t mul;
	uint8_t shift;
	int i;

	for (i = 0; i < SWEEP; i++) {
		mul = (uint32_t)next(&x) | 1;
		shift = (uint8_t)(next(&x) % 33);
		snsec = next(&x) % (PVREAD_ARITH_NSEC_PER_SEC << 32);
		rate = (uint64_t)mul << shift;
		span = next(&x) % ((UINT64_MAX - snsec) / rate + 1);
		below = (snsec >> 32) + next(&x) % 5000000000ULL -
			2000000000ULL;
		if ((int64_t)below < 0)
			below = 0;
		if (!pvread_line_ok(span, mul, shift, snsec))
			break;
		if (!pvread_line_pass(span, mul, shift, snsec, below, &pass)) {
			if (pvread_line_at(span, mul, shift, snsec) >> 32 <
			    below)
				continue;
		} else if (pass <= span &&
			   pvread_line_at(pass, mul, shift, snsec) >> 32 >=
			   below &&
			   (!pass || (++*held &&
				      pvread_line_at(pass - 1, mul, shift,
						     snsec) >> 32 < below))) {
			continue;
		}
		printf("# mul %#x, shift %u, snsec %#llx, span %#llx, below %llu\n",
		       mul, shift, (unsigned long long)snsec,
		       (unsigned long long)span, (unsigned long long)below);
		return 0;
	}
	return i == SWEEP;
}

int main(void)
{
	uint64_t out = 0;
	int ok, low = 0, held = 0;

	tap_plan(34);
	/* mul 2^31 is one half; shift +1 doubles first: ns = delta. */
	check(P(1012345, 1000000, 7, 1U << 31, 1), 12345 + 7, "identity scale");
	/* shift -1 halves, mul one half: ns = delta / 4. */
	check(P(1000, 0, 0, 1U << 31, -1), 250, "negative shift");
	/* 2^60 << 3 = 2^63; * (2^32 - 1) >> 32 = 2^63 - 2^31: needs 128 bits. */
	check(P(1ULL << 60, 0, 0, UINT32_MAX, 3), (1ULL << 63) - (1ULL << 31),
	      "maximal mul, 128-bit product");
	/* The TSC wrapped: 2^64 - 1000 to 500 is 1500 ticks. */
	check(P(500, UINT64_MAX - 999, 1000000, 1U << 31, 1), 1000000 + 1500,
	      "TSC delta across the 2^64 wrap");
	/* shift -31 leaves 2 of 2^32 ticks; mul 2^32 - 1 keeps 1. */
	check(P(1ULL << 32, 0, 0, UINT32_MAX, -31), 1, "shift -31");
	/* A TSC of 3 GHz as Xen scales it: shift -1, mul 2^33 / 3. */
	check(P(3000000000ULL, 0, 0, (uint32_t)((1ULL << 33) / 3), -1),
	      999999999, "3 GHz, one second (truncates like Xen)");

	/* Timekeeper: 1000 cycles at mult 2^24, shift 24 → 1000 ns. */
	ok = pvread_tk_shifted_ns(5000, 4000, UINT64_MAX, 1000000, 1U << 24,
				  7ULL << 24, &out);
	check(ok ? out >> 24 : 0, 1007, "timekeeper delta");
	/* Behind cycle_last (another vCPU's record): no time, no wrap. */
	ok = pvread_tk_shifted_ns(3999, 4000, UINT64_MAX, 1000000, 1U << 24,
				  7ULL << 24, &out);
	check(ok ? out >> 24 : 0, 7, "cycles behind cycle_last count as none");
	/* Beyond max_delta: the kernel must answer. */
	ok = pvread_tk_shifted_ns(4000 + 1000001, 4000, UINT64_MAX, 1000000,
				  1U << 24, 0, &out);
	tap_result(!ok, "delta beyond max_delta refused");
	/* Exactly max_delta is still ours. */
	ok = pvread_tk_shifted_ns(4000 + 1000000, 4000, UINT64_MAX, 1000000,
				  1U << 24, 0, &out);
	check(ok ? out >> 24 : 0, 1000000, "delta of exactly max_delta");
	/* The mask keeps the clocksource's width (here 32 bits). */
	ok = pvread_tk_shifted_ns(0x100000010ULL, 0x10, 0xffffffffULL,
				  UINT64_MAX, 1, 0, &out);
	check(ok ? out : 1, 0, "mask applied to the delta");

	/* Line: a TSC 100 ticks before the anchor is the anchor. */
	check(pvread_line_delta(100, 200), 0, "line: before the anchor, no delta");
	/* 2^64 - 5 to 5 is 10 ticks, not a TSC before the anchor. */
	check(pvread_line_delta(5, UINT64_MAX - 4), 10,
	      "line: delta across the 2^64 wrap");
	/* mul 2^31 << shift 1: one ns a tick, from 7 ns. */
	ok = pvread_line_ns(1000, 1U << 31, 1, 7ULL << 32, &out);
	check(ok ? out : 0, 1007, "line: one ns a tick");
	/* half a ns from snsec, half from one tick at mul 2^31: exactly 6. */
	ok = pvread_line_ns(1, 1U << 31, 0, (5ULL << 32) | (1U << 31), &out);
	check(ok ? out : 0, 6, "line: the fractions of base and product add");
	/*
	 * 64 bits, as the page says: (2^32 + 1) * (2^32 - 1) = 2^64 - 1 is
	 * the largest product; one tick more, or anything added to it, and
	 * the kernel answers (the module's lines stay far below: ~2^61).
	 */
	ok = pvread_line_ns((1ULL << 32) + 1, UINT32_MAX, 0, 0, &out);
	check(ok ? out : 0, UINT32_MAX, "line: largest 64-bit product");
	ok = pvread_line_ns((1ULL << 32) + 2, UINT32_MAX, 0, 0, &out);
	tap_result(!ok, "line: product beyond 64 bits refused");
	ok = pvread_line_ns((1ULL << 32) + 1, UINT32_MAX, 0, 1, &out);
	tap_result(!ok, "line: base + product beyond 64 bits refused");
	/* (2^32 - 1) << 32 fits; * 1 >> 32 gives it back. */
	ok = pvread_line_ns(UINT32_MAX, 1, 32, 0, &out);
	check(ok ? out : 0, UINT32_MAX, "line: shift 32, largest delta that fits");
	ok = pvread_line_ns(1ULL << 32, 1, 32, 0, &out);
	tap_result(!ok, "line: delta << shift beyond 64 bits refused");
	ok = pvread_line_ns(0, 1, 33, 0, &out);
	tap_result(!ok, "line: shift beyond 32 refused");
	ok = pvread_line_ns(0, 1, 0, 1000000000ULL << 32, &out);
	tap_result(!ok, "line: a base a whole second past its second refused");
	/*
	 * The line at the TSC itself: 2^64 - 5 to 5 is 10 ticks at one ns
	 * each, from 7 ns, though the TSC times the rate wraps and the
	 * offset (7 ns less the anchor times the rate) too.
	 */
	check(pvread_line_at_tsc(5, 1U << 31, 1,
				 pvread_line_offset(UINT64_MAX - 4, 1U << 31,
						    1, 7ULL << 32)) >> 32,
	      17, "line at the TSC: a delta across the 2^64 wrap");
	/* The largest product, 2^64 - 1, as above: every bit of the sum. */
	check(pvread_line_at_tsc(1000 + (1ULL << 32) + 1, UINT32_MAX, 0,
				 pvread_line_offset(1000, UINT32_MAX, 0, 0)),
	      UINT64_MAX, "line at the TSC: the largest 64-bit value");
	ok = line_at_tsc_sweep(&low);
	printf("# %d of them within the anchor's high half\n", low);
	tap_result(ok && low > SWEEP / 8,
		   "line at the TSC: the value at its delta, %d lines and TSCs, from the low halves where the high halves agree",
		   SWEEP);
	ok = line_pass_sweep(&held);
	printf("# %d of them past the anchor\n", held);
	tap_result(ok && held > SWEEP / 8,
		   "line's pass point: at or above the coarse value there, below it a tick before, %d lines and values",
		   SWEEP);
	/* A line 1.5 ticks below: two ticks on, at 1 ns a tick. */
	ok = pvread_line_pass(10, 1U << 31, 1, (1ULL << 32) >> 1, 2, &out);
	check(ok ? out : 99, 2, "line's pass point: the first tick at or above");
	/* A line that stands still: there from the start, or never. */
	ok = pvread_line_pass(10, 0, 0, 3ULL << 32, 3, &out);
	check(ok ? out : 99, 0, "line's pass point: a still line at the value");
	ok = pvread_line_pass(10, 0, 0, 3ULL << 32, 4, &out);
	tap_result(!ok, "line's pass point: a still line below the value never");
	/* 2^39 cycles at mult 2^24 is 2^63: fits; 2^40 at 2^32 - 1 does not. */
	ok = pvread_tk_shifted_ns(1ULL << 39, 0, UINT64_MAX, UINT64_MAX,
				  1U << 24, 0, &out);
	check(ok ? out : 0, 1ULL << 63, "timekeeper: product of 2^63 fits");
	ok = pvread_tk_shifted_ns(1ULL << 40, 0, UINT64_MAX, UINT64_MAX,
				  UINT32_MAX, 0, &out);
	tap_result(ok == -1, "timekeeper: delta * mult beyond 64 bits refused");
	ok = pvread_tk_shifted_ns(1, 0, UINT64_MAX, UINT64_MAX, 1, UINT64_MAX,
				  &out);
	tap_result(ok == -1, "timekeeper: snsec + product beyond 64 bits refused");
	tap_result(pvread_tk_base_ok((999999999ULL << 24) | 0xffffff, 24) &&
		   !pvread_tk_base_ok(1000000000ULL << 24, 24) &&
		   !pvread_tk_base_ok(0, 33),
		   "timekeeper: base under a second, shift at most 32");
	tap_result(pvread_pvclock_shift_ok(-32) && pvread_pvclock_shift_ok(32) &&
		   !pvread_pvclock_shift_ok(-33) && !pvread_pvclock_shift_ok(33),
		   "pvclock: shift within [-32, 32]");
	return tap_exit();
}
