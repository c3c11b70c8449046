// SPDX-License-Identifier: GPL-2.0
/*
 * The clock set and slewed under the page: settimeofday and clock_settime
 * an hour away and back, the TAI offset, the frequency, an offset slew.
 * After each, the change is in the page by the time the call returns,
 * every clock reads within the published bound, and the page's conversion
 * is the kernel's to the nanosecond; CLOCK_MONOTONIC does not move with
 * the wall clock.  Each test puts back what it changed (the wall clock by
 * the opposite step, the TAI offset and the frequency as they were).
 */
#define _GNU_SOURCE
#include <sys/time.h>
#include <sys/timex.h>

#include "pvread_harness.h"
#include "pvread_page.h"

FIXTURE(settime) {
	struct timex saved;	/* the TAI offset and frequency found */
};

FIXTURE_SETUP(settime)
{
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
	memset(&self->saved, 0, sizeof(self->saved));
	ASSERT_LE(0, adjtimex(&self->saved)) TH_LOG("adjtimex: %s", strerror(errno));
}

/* The TAI offset and the frequency as found; false if either is not. */
static bool put_back(const struct timex *saved)
{
	struct timex tx = { .modes = ADJ_TAI, .constant = saved->tai };
	bool ok = adjtimex(&tx) >= 0;

	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_FREQUENCY;
	tx.freq = saved->freq;
	ok = adjtimex(&tx) >= 0 && ok;
	memset(&tx, 0, sizeof(tx));
	adjtimex(&tx);
	ksft_print_msg("TAI offset %d, frequency %ld; were %d, %ld\n", tx.tai,
		       (long)tx.freq, saved->tai, (long)saved->freq);
	return ok && tx.tai == saved->tai && tx.freq == saved->freq;
}

FIXTURE_TEARDOWN(settime)
{
	put_back(&self->saved);
}

/* Up to @timeout s for the page's mult to leave @from; *@to what it is. */
static bool wait_mult_change(uint32_t from, double timeout, uint32_t *to)
{
	int64_t t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	struct pvread_header h;

	do {
		pvst_snap(&h);
		if (h.tk.mult != from)
			break;
		pvst_sleep(0.05);
	} while (pvst_elapsed(t0) < timeout);
	*to = h.tk.mult;
	return h.tk.mult != from;
}

/*
 * CLOCK_REALTIME just after a step: within the bound, from the page in
 * line mode, from the kernel in mode none.
 */
static bool stepped_in_page(const char *what)
{
	bool line = pvst_page_mode() == PVREAD_MODE_LINE;
	struct pvst_bracket b;
	bool inside, fast;

	inside = pvst_bracket_fast(CLOCK_REALTIME, &b, &fast);
	ksft_print_msg("%s: %s in mode %s, %lld ns outside the syscalls' bracket, bound %llu\n",
		       what, fast ? "read from the page" : "read via libc",
		       line ? "line" : "none",
		       (long long)b.dev, (unsigned long long)b.bound);
	return inside && fast == line;
}

/*
 * Every clock for @secs within the bound: some from the page in line
 * mode, none in mode none (the kernel answers).
 */
static bool all_bounded(const char *what, double secs)
{
	bool line = pvst_page_mode() == PVREAD_MODE_LINE;
	long fast, beyond = pvst_bounded(what, secs, &fast);

	return !beyond && (line ? fast > 0 : fast == 0);
}

TEST_F_TIMEOUT(settime, steady, 60)
{
	EXPECT_TRUE(pvst_wait_expected(20));
	EXPECT_TRUE(all_bounded("steady", 1));
}

/* An hour forward by settimeofday, and back by clock_settime. */
TEST_F_TIMEOUT(settime, settimeofday_forward, 120)
{
	struct pvread_header h0, h;
	int64_t mono0, mono1;
	struct timespec lib, ts;
	struct timeval tv;

	pvst_snap(&h0);
	mono0 = pvst_sys_ns(CLOCK_MONOTONIC);
	gettimeofday(&tv, NULL);
	tv.tv_sec += 3600;
	ASSERT_EQ(0, settimeofday(&tv, NULL)) TH_LOG("%s", strerror(errno));
	pvst_snap(&h);
	EXPECT_LT(h0.updates, h.updates) TH_LOG("no timekeeper update in the page when settimeofday returned");
	EXPECT_TRUE(stepped_in_page("settimeofday +3600 s"));
	EXPECT_TRUE(all_bounded("after +3600 s", 0.5));
	EXPECT_TRUE(pvst_mirror_exact("after +3600 s", 1000));

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec -= 3600;
	EXPECT_EQ(0, clock_settime(CLOCK_REALTIME, &ts));
	mono1 = pvst_sys_ns(CLOCK_MONOTONIC);
	pvread_clock_gettime(CLOCK_MONOTONIC, &lib);
	ksft_print_msg("CLOCK_MONOTONIC moved %.3f s across the steps\n",
		       (pvst_ns(&lib) - mono0) / 1e9);
	EXPECT_TRUE(pvst_ns(&lib) >= mono0 &&
		    pvst_ns(&lib) - mono1 < 1000000000LL)
		TH_LOG("CLOCK_MONOTONIC jumped with the wall clock");
}

/* An hour back by clock_settime, and forward again. */
TEST_F_TIMEOUT(settime, clock_settime_back, 120)
{
	int64_t mono0, mono1;
	struct timespec lib, ts;

	mono0 = pvst_sys_ns(CLOCK_MONOTONIC);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec -= 3600;
	ASSERT_EQ(0, clock_settime(CLOCK_REALTIME, &ts)) TH_LOG("%s", strerror(errno));
	EXPECT_TRUE(stepped_in_page("clock_settime -3600 s"));
	EXPECT_TRUE(all_bounded("after -3600 s", 0.5));
	EXPECT_TRUE(pvst_mirror_exact("after -3600 s", 1000));

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3600;
	EXPECT_EQ(0, clock_settime(CLOCK_REALTIME, &ts));
	mono1 = pvst_sys_ns(CLOCK_MONOTONIC);
	pvread_clock_gettime(CLOCK_MONOTONIC, &lib);
	ksft_print_msg("CLOCK_MONOTONIC moved %.3f s across the steps\n",
		       (pvst_ns(&lib) - mono0) / 1e9);
	EXPECT_TRUE(pvst_ns(&lib) >= mono0 &&
		    pvst_ns(&lib) - mono1 < 1000000000LL)
		TH_LOG("CLOCK_MONOTONIC jumped with the wall clock");
}

/* adjtimex ADJ_TAI: the page's TAI is the kernel's, the offset applied. */
TEST_F_TIMEOUT(settime, tai_offset, 60)
{
	int tai = self->saved.tai == 37 ? 36 : 37;
	struct timex tx = { .modes = ADJ_TAI, .constant = tai };
	struct timespec r, t;
	int64_t diff;

	ASSERT_LE(0, adjtimex(&tx)) TH_LOG("%s", strerror(errno));
	EXPECT_TRUE(pvst_mirror_exact("TAI offset", 1000));
	pvread_clock_gettime(CLOCK_REALTIME, &r);
	pvread_clock_gettime(CLOCK_TAI, &t);
	diff = pvst_ns(&t) - pvst_ns(&r);
	ksft_print_msg("library CLOCK_TAI - CLOCK_REALTIME = %.3f s (set %d)\n",
		       diff / 1e9, tai);
	EXPECT_GT(100000000LL, llabs(diff - tai * 1000000000LL));
	EXPECT_TRUE(put_back(&self->saved));
}

/* The frequency +500 ppm, then back: the page's mult follows each. */
TEST_F_TIMEOUT(settime, frequency, 120)
{
	struct timex tx = { .modes = ADJ_FREQUENCY, .freq = 500 << 16 };
	struct pvread_header h0, h;
	uint32_t mult;

	pvst_snap(&h0);
	ASSERT_LE(0, adjtimex(&tx)) TH_LOG("%s", strerror(errno));
	/*
	 * At once, before the next tick: an update that changed the rate
	 * without accumulating moves xtime_nsec back, and since Linux 6.15
	 * not the coarse clocks (coarse_nsec).
	 */
	EXPECT_TRUE(pvst_mirror_exact("right after adjtimex +500 ppm", 20));
	EXPECT_TRUE(wait_mult_change(h0.tk.mult, 3, &mult));
	ksft_print_msg("adjtimex +500 ppm: mult %u -> %u in the page\n",
		       h0.tk.mult, mult);
	EXPECT_TRUE(all_bounded("slewing +500 ppm", 1.5));
	pvst_snap(&h);
	ksft_print_msg("+500 ppm: line mul %u -> %u (shift %u -> %u), %llu lines anchored meanwhile\n",
		       h0.line.mul, h.line.mul, h0.line.shift, h.line.shift,
		       (unsigned long long)(h.line.anchors - h0.line.anchors));
	EXPECT_TRUE(pvst_mirror_exact("slewing +500 ppm", 1000));

	pvst_snap(&h0);
	EXPECT_TRUE(put_back(&self->saved));
	EXPECT_TRUE(wait_mult_change(h0.tk.mult, 3, &mult));
	ksft_print_msg("frequency back: mult %u -> %u\n", h0.tk.mult, mult);
}

/* An adjtime-style slew of +0.2 s (at 500 ppm), then cancelled. */
TEST_F_TIMEOUT(settime, offset_slew, 120)
{
	struct timex tx = { .modes = ADJ_OFFSET_SINGLESHOT, .offset = 200000 };
	struct pvread_header h0;
	uint32_t mult;

	pvst_snap(&h0);
	ASSERT_LE(0, adjtimex(&tx)) TH_LOG("%s", strerror(errno));
	EXPECT_TRUE(wait_mult_change(h0.tk.mult, 3, &mult));
	ksft_print_msg("adjtimex offset slew +0.2 s: mult %u -> %u in the page\n",
		       h0.tk.mult, mult);
	EXPECT_TRUE(all_bounded("offset slew", 1.5));
	EXPECT_TRUE(pvst_mirror_exact("offset slew", 1000));
	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_OFFSET_SINGLESHOT;
	EXPECT_LE(0, adjtimex(&tx));
	EXPECT_TRUE(put_back(&self->saved));
}

PVREAD_XEN_HARNESS_MAIN
