// SPDX-License-Identifier: GPL-2.0
/*
 * In line mode, the line's ns per TSC tick is a record's times the
 * kernel's own rate (CLOCK_MONOTONIC's against _RAW's, which NTP moves;
 * _RAW's line at the record's rate itself), turned by at most the
 * module's slew limit: each line is aimed at the kernel's clock one
 * horizon later and turns no faster than PVREAD_LINE_MAX_SLEW_PPM
 * (kmod/pvread_line.h), as NTP's slew is limited.  A rate off by more is
 * a line drawn from the wrong rate or steered harder than the module
 * says, which the checks of the time alone let through for as long as
 * the bound they allow.
 *
 * The limit is that slew plus what this test cannot tell apart from it,
 * each measured here and printed on "# " lines: the kernel's rate, from
 * two brackets RATE_SECONDS apart (each reading is uncertain by half its
 * bracket); how far the records' rates range over the look (the module
 * took one of them at each anchor); how far the timekeeper's mult moved
 * (each line takes its own update's, the brackets the average); and the
 * truncation of the published multipliers.  Every line anchored during
 * the look is judged against every registered record.  In mode none
 * there is no line: the program is a skip that says so (a failure where
 * the machine expects line mode).
 */
#define _GNU_SOURCE
#include <math.h>

#include "pvread_harness.h"
#include "pvread_page.h"

/* kmod/pvread_line.h: PVREAD_LINE_MAX_SLEW_PPM (that header needs the kernel's types) */
#define LINE_MAX_SLEW_PPM	1000
/*
 * Long enough that syscall brackets of tens of microseconds (emulated
 * machines) cost tens of ppm at most; each look at the page shows the
 * line of one update or so later.
 */
#define RATE_SECONDS		2.0
#define LOOK_EVERY_S		0.005
#define MAX_LOOKS		1024
#define BRACKET_TRIES		16
#define LOOK_MAX_CPUS		64	/* records judged: vCPUs 0..63 */

/* Without libm, which the static programs do not link. */
static double dmin(double a, double b)
{
	return a < b ? a : b;
}

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

/* CLOCK_MONOTONIC between two reads of _RAW: their midpoint, and width. */
struct rate_bracket {
	double raw, mono, width;
};

/* The narrowest of a few: a preemption widens one, not all of them. */
static void bracket_mono(struct rate_bracket *b)
{
	int64_t r0, m, r1;
	int i;

	b->width = INFINITY;
	for (i = 0; i < BRACKET_TRIES; i++) {
		r0 = pvst_sys_ns(CLOCK_MONOTONIC_RAW);
		m = pvst_sys_ns(CLOCK_MONOTONIC);
		r1 = pvst_sys_ns(CLOCK_MONOTONIC_RAW);
		if (r1 - r0 < b->width) {
			b->width = r1 - r0;
			b->raw = r0 + (r1 - r0) / 2.0;
			b->mono = m;
		}
	}
}

/* ns per TSC tick of a pvclock record, read whole between Xen's writes. */
static bool record_rate(const volatile struct pvread_pvclock *p, double *ns,
			uint32_t *mul)
{
	uint32_t v;
	int8_t shift;
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		v = p->version;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		*mul = p->tsc_to_system_mul;
		shift = p->tsc_shift;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(v & 1) && p->version == v) {
			*ns = *mul / 4294967296.0;
			*ns = shift >= 0 ? *ns * (1ULL << shift) :
					   *ns / (1ULL << -shift);
			return true;
		}
	}
	return false;
}

/* One look at the page: its line and timekeeper, every registered record. */
struct look {
	struct pvread_header h;
	unsigned int nr;		/* records looked at */
	double rec[LOOK_MAX_CPUS];
	uint32_t mul[LOOK_MAX_CPUS];
	bool have[LOOK_MAX_CPUS];
};

static void take_look(struct look *l)
{
	unsigned int i;

	pvst_snap(&l->h);
	l->nr = l->h.nr_records < LOOK_MAX_CPUS ? l->h.nr_records :
						    LOOK_MAX_CPUS;
	for (i = 0; i < l->nr; i++)
		l->have[i] = (pvst_rec(i)->state & PVREAD_RECORD_REGISTERED) &&
			     record_rate(&pvst_rec(i)->pvclock, &l->rec[i],
					 &l->mul[i]);
}

/* ns per TSC tick of a line, whose readers take (d << shift) * mul >> 32. */
static double line_ns(uint32_t mul, uint8_t shift)
{
	return mul * (double)(1ULL << shift) / 4294967296.0;
}

FIXTURE(line) {
};

FIXTURE_SETUP(line)
{
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
}

FIXTURE_TEARDOWN(line)
{
}

TEST_F_TIMEOUT(line, rate, 60)
{
	double k, k_err, rec_lo = INFINITY, rec_hi = 0, mult_lo = INFINITY;
	double mult_hi = 0, quant = 0, raw_ns, worst_m = 0, worst_r = 0, d;
	double rec_ppm, mult_ppm, limit, limit_raw, lm, lr;
	double rec_mul_lo = INFINITY;
	unsigned int i, j, n, judged = 0, worst_m_rec = 0, worst_r_rec = 0;
	struct rate_bracket b0, b1;
	struct look *look;
	int64_t t0;

	look = calloc(MAX_LOOKS, sizeof(*look));
	ASSERT_NE(NULL, look);
	take_look(&look[0]);
	ASSERT_EQ((uint32_t)PVREAD_MODE_LINE, look[0].h.mode)
		TH_LOG("no line in use: mode %s, line %s",
		       pvst_mode_name(look[0].h.mode),
		       pvst_line_name(look[0].h.line_state));
	lm = line_ns(look[0].h.line.mul, look[0].h.line.shift);
	for (i = 0; i < look[0].nr; i++)
		if (look[0].have[i])
			ksft_print_msg("line: %.9f ns per TSC tick (mul %u shift %u); record %u: %.9f (mul %u): %+.3f ppm\n",
				       lm, look[0].h.line.mul,
				       look[0].h.line.shift, i, look[0].rec[i],
				       look[0].mul[i],
				       (lm / look[0].rec[i] - 1) * 1e6);

	bracket_mono(&b0);
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	for (n = 1; n < MAX_LOOKS && pvst_elapsed(t0) < RATE_SECONDS; n++) {
		pvst_sleep(LOOK_EVERY_S);
		take_look(&look[n]);
	}
	bracket_mono(&b1);

	/* What the looks saw move: the records' rates and the mult. */
	for (j = 0; j < n; j++) {
		for (i = 0; i < look[j].nr; i++) {
			if (!look[j].have[i])
				continue;
			rec_lo = dmin(rec_lo, look[j].rec[i]);
			rec_hi = dmax(rec_hi, look[j].rec[i]);
			rec_mul_lo = dmin(rec_mul_lo, look[j].mul[i]);
		}
		mult_lo = dmin(mult_lo, look[j].h.tk.mult);
		mult_hi = dmax(mult_hi, look[j].h.tk.mult);
	}
	k = (b1.mono - b0.mono) / (b1.raw - b0.raw);
	k_err = (b0.width + b1.width) / 2 / (b1.raw - b0.raw) * 1e6;
	rec_ppm = (rec_hi / rec_lo - 1) * 1e6;
	/* +1: an update between two looks may have had a mult none saw. */
	mult_ppm = (mult_hi - mult_lo + 1) / mult_lo * 1e6;

	/*
	 * Lines anchored after the first look: each was drawn from a record
	 * read by the module no earlier than one measurement before that
	 * look, so the range above covers it unless Xen changed the rate
	 * within that moment.
	 */
	for (j = 1; j < n; j++) {
		const struct pvread_header *h = &look[j].h;

		if (h->mode != PVREAD_MODE_LINE || !h->line.mul ||
		    !h->line.raw_mul ||
		    h->line.anchors <= look[0].h.line.anchors)
			continue;
		raw_ns = h->tk.raw_mult / (double)(1ULL << h->tk.raw_shift);
		lm = line_ns(h->line.mul, h->line.shift);
		lr = line_ns(h->line.raw_mul, h->line.raw_shift);
		quant = dmax(quant, 1e6 / h->line.mul + 1e6 / h->line.raw_mul);
		for (i = 0; i < look[j].nr; i++) {
			if (!look[j].have[i])
				continue;
			d = (lm / (look[j].rec[i] * raw_ns * k) - 1) * 1e6;
			if (fabs(d) > fabs(worst_m)) {
				worst_m = d;
				worst_m_rec = i;
			}
			d = (lr / (look[j].rec[i] * raw_ns) - 1) * 1e6;
			if (fabs(d) > fabs(worst_r)) {
				worst_r = d;
				worst_r_rec = i;
			}
			judged++;
		}
	}
	/* The multipliers are truncated: each is off by less than one unit. */
	quant += 1e6 / rec_mul_lo;
	/*
	 * They compound: a line at the slew limit is off by the slew times
	 * (1 + each).  _RAW's line has no NTP in it: neither the kernel's
	 * rate nor the mult.
	 */
	limit_raw = ((1 + LINE_MAX_SLEW_PPM / 1e6) * (1 + rec_ppm / 1e6) *
		     (1 + quant / 1e6) - 1) * 1e6;
	limit = ((1 + limit_raw / 1e6) * (1 + k_err / 1e6) *
		 (1 + mult_ppm / 1e6) - 1) * 1e6;

	ksft_print_msg("line: %u looks over %.3f s, line anchors %llu -> %llu, %u line/record pairs judged\n",
		       n, (b1.raw - b0.raw) / 1e9,
		       (unsigned long long)look[0].h.line.anchors,
		       (unsigned long long)look[n - 1].h.line.anchors, judged);
	ksft_print_msg("line: the kernel's MONOTONIC per _RAW %+.3f ppm (NTP), +-%.3f ppm: brackets %.0f and %.0f ns wide, %.0f ns apart\n",
		       (k - 1) * 1e6, k_err, b0.width, b1.width,
		       b1.raw - b0.raw);
	ksft_print_msg("line: records' rates %.9f..%.9f ns per tick (%.3f ppm apart); timekeeper mult %.0f..%.0f (%.3f ppm, one unseen step included)\n",
		       rec_lo, rec_hi, rec_ppm, mult_lo, mult_hi, mult_ppm);
	ksft_print_msg("line: worst MONOTONIC line %+.3f ppm (record %u), limit %.3f ppm: slew %d, kernel's rate %.3f, records' range %.3f, mult %.3f, truncation %.4f, compounded\n",
		       worst_m, worst_m_rec, limit, LINE_MAX_SLEW_PPM, k_err,
		       rec_ppm, mult_ppm, quant);
	ksft_print_msg("line: worst MONOTONIC_RAW line %+.3f ppm (record %u), limit %.3f ppm: slew %d, records' range %.3f, truncation %.4f, compounded\n",
		       worst_r, worst_r_rec, limit_raw, LINE_MAX_SLEW_PPM,
		       rec_ppm, quant);
	free(look);
	EXPECT_LT(0U, judged) TH_LOG("no line anchored in %.1f s of line mode",
				     RATE_SECONDS);
	EXPECT_TRUE(fabs(worst_m) <= limit);
	EXPECT_TRUE(fabs(worst_r) <= limit_raw);
}

PVREAD_XEN_LINE_HARNESS_MAIN("line to compare with the records")
