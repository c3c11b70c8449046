// SPDX-License-Identifier: GPL-2.0
/*
 * Every clock the page serves is the kernel's within the published bound:
 * each library read lies between two clock_gettime system calls, widened
 * by the error bound the module published around it, on every vCPU in
 * turn; and the reads come from the page, not from libc.  In mode none
 * the kernel answers every read: the program is a skip that says so.
 *
 * The published bound is far wider than what is measured (hundreds of us
 * under the emulator, against records that agree to hundreds of ns): a
 * line off by less than the bound would pass that check.  So every read
 * is also judged against a tight limit, from what the run measured: the
 * records' largest spread (the page's spread_ns: the registered records
 * and the kernel's own clocksource read, at each update) and the read's
 * own bracket, the two system calls' readings.  A reading may be anywhere
 * in the bracket and as far beyond its far end as the spread: so it
 * passes while its distance outside the bracket is at most the largest
 * spread of the run plus TIGHT_SLACK_NS, i.e. its distance from the
 * bracket's far end at most spread + bracket width + TIGHT_SLACK_NS.
 *
 *   pvread_bounded [--offset NS] [harness options: -v VARIANT, -t ...]
 *
 * --offset NS adds NS to every reading before it is judged: a line that
 * far off, to see the tight limit fail where the published bound does
 * not (pvread_xen.sh's negative control).
 *
 * And the published bound itself against what the module measures
 * (window.bound_vs_measured, below): no more than its design makes it
 * from the spread, the line's distance from the records and the module's
 * own latency.  That takes the bound's 16 s window and a second: skipped
 * in a shortened run (PVREAD_TEST_SECONDS below 2).
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

#define BATCH 64

/*
 * What a correct line may add to the records' spread: the line's and the
 * kernel's conversions each round to the ns, and each anchor starts the
 * new line above the old for the 20 us guard, at most the 1000 ppm
 * steering limit over it (20 ns).  1 us, the term the module adds to its
 * own bound (PVREAD_BOUND_SLACK_NS), covers those many times over.  The
 * line's lead on the kernel, which the module steers away within a
 * second and does not publish, has that and the bracket's own slack: the
 * window test prints how far the line is from the records (L).
 */
#define TIGHT_SLACK_NS	1000

/* Reads beyond the tight limit printed with their figures. */
#define TIGHT_SHOWN	5

/*
 * Reads that may be beyond the tight limit (outside the bracket by more
 * than TIGHT_SLACK_NS) kept to be judged against the run's largest spread
 * at its end; past this many (a line that far off), judged at once
 * against the largest spread so far.
 */
#define TIGHT_KEPT	65536

static int64_t offset_ns;

FIXTURE(bounded) {
	struct pvst_cpus cpus;
};

FIXTURE_VARIANT(bounded) {
	clockid_t clock;
	const char *name;
	bool every_vcpu;		/* PVREAD_TEST_READS per vCPU, else a quarter */
};

/*
 * MONOTONIC and REALTIME are what programs read: the full count on every
 * vCPU.  The others share their read path: fewer.
 */
FIXTURE_VARIANT_ADD(bounded, monotonic) {
	.clock = CLOCK_MONOTONIC, .name = "CLOCK_MONOTONIC",
	.every_vcpu = true,
};
FIXTURE_VARIANT_ADD(bounded, realtime) {
	.clock = CLOCK_REALTIME, .name = "CLOCK_REALTIME", .every_vcpu = true,
};
FIXTURE_VARIANT_ADD(bounded, monotonic_raw) {
	.clock = CLOCK_MONOTONIC_RAW, .name = "CLOCK_MONOTONIC_RAW",
};
FIXTURE_VARIANT_ADD(bounded, boottime) {
	.clock = CLOCK_BOOTTIME, .name = "CLOCK_BOOTTIME",
};
FIXTURE_VARIANT_ADD(bounded, tai) {
	.clock = CLOCK_TAI, .name = "CLOCK_TAI",
};
FIXTURE_VARIANT_ADD(bounded, realtime_coarse) {
	.clock = CLOCK_REALTIME_COARSE, .name = "CLOCK_REALTIME_COARSE",
};
FIXTURE_VARIANT_ADD(bounded, monotonic_coarse) {
	.clock = CLOCK_MONOTONIC_COARSE, .name = "CLOCK_MONOTONIC_COARSE",
};

FIXTURE_SETUP(bounded)
{
	pvst_find_cpus(&self->cpus);
	pvst_map();	/* for the line's distance from the records */
}

FIXTURE_TEARDOWN(bounded)
{
}

static bool line_vs_records(const struct pvread_header *h, uint64_t tsc,
			    uint64_t *dist);

/* A read that may be beyond the tight limit, judged at the run's end. */
struct tight_read {
	int64_t dev, width;
	uint64_t spread;	/* around this read */
	bool ahead;
};

struct tight {
	struct tight_read *kept;
	long nr_kept, beyond_early;
	uint64_t spread;	/* the largest of the run so far */
	uint64_t lead;		/* the line's largest distance from the records */
	int64_t width;		/* the widest bracket */
};

/*
 * The line's distance from the records, sampled between reads: under the
 * emulator Xen steps a record by tens of us at a calibration, and the line,
 * which never steps, is steered after it (1000 ppm at most); the kernel's
 * clock is the records', so a correct reading may stand that far from
 * it.  Measured from the page at the TSC, no system call.
 */
static void tight_lead(struct tight *t)
{
	struct pvread_header h;
	uint64_t tsc, dist;

	if (!pvst_map())
		return;
	pvst_snap_tsc(&h, &tsc);
	if (line_vs_records(&h, tsc, &dist) && dist > t->lead)
		t->lead = dist;
}

static void tight_print(const char *name, const struct tight_read *r,
			uint64_t limit)
{
	ksft_print_msg("%s: beyond the tight limit: %lld ns %s the syscalls (bracket %lld ns, spread %llu ns around it), limit %llu ns outside the bracket\n",
		       name, (long long)r->dev,
		       r->ahead ? "ahead of" : "behind", (long long)r->width,
		       (unsigned long long)r->spread,
		       (unsigned long long)limit);
}

static void tight_add(struct tight *t, const char *name,
		      const struct pvst_bracket *b)
{
	struct tight_read r = {
		.dev = b->dev, .width = b->after - b->before,
		.spread = b->spread, .ahead = b->ahead,
	};

	/* Not measured (a failed measurement, a clocksource change): no limit. */
	if (b->spread == UINT64_MAX)
		return;
	if (b->spread > t->spread)
		t->spread = b->spread;
	if (r.width > t->width)
		t->width = r.width;
	if (r.dev <= TIGHT_SLACK_NS)
		return;
	if (t->nr_kept < TIGHT_KEPT) {
		t->kept[t->nr_kept++] = r;
		return;
	}
	if ((uint64_t)r.dev > t->spread + t->lead + TIGHT_SLACK_NS &&
	    t->beyond_early++ < TIGHT_SHOWN)
		tight_print(name, &r, t->spread + t->lead + TIGHT_SLACK_NS);
}

/* Reads beyond the run's tight limit, the first few printed. */
static long tight_beyond(const struct tight *t, const char *name)
{
	uint64_t limit = t->spread + t->lead + TIGHT_SLACK_NS;
	long i, beyond = 0;

	for (i = 0; i < t->nr_kept; i++)
		if ((uint64_t)t->kept[i].dev > limit &&
		    beyond++ < TIGHT_SHOWN)
			tight_print(name, &t->kept[i], limit);
	return beyond + t->beyond_early;
}

TEST_F_TIMEOUT(bounded, within_bound, 300)
{
	long want = variant->every_vcpu ? pvst_reads() * self->cpus.n :
					     pvst_reads() / 4;
	long reads = 0, beyond = 0, tight_n, fast;
	double min_seconds = pvst_seconds();
	struct pvread_stats st0, st1;
	struct tight t = { 0 };
	struct pvst_bracket b;
	uint64_t max_bound = 0, limit;
	int64_t t0, worst = 0;
	int i, c = 0;

	t.kept = calloc(TIGHT_KEPT, sizeof(*t.kept));
	ASSERT_NE(NULL, t.kept);
	if (offset_ns)
		ksft_print_msg("%s: every reading %+lld ns (--offset) before it is judged: expect reads beyond the tight limit\n",
			       variant->name, (long long)offset_ns);
	pvread_get_stats(&st0);
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	while (reads < want || pvst_elapsed(t0) < min_seconds) {
		/* Move between vCPUs so that every record is compared. */
		pvst_pin(self->cpus.id[c++ % self->cpus.n]);
		for (i = 0; i < BATCH * 16; i++, reads++) {
			if (i % BATCH == 0)
				tight_lead(&t);
			pvst_bracket(variant->clock, &b);
			if (offset_ns) {
				b.value += offset_ns;
				pvst_bracket_judge(&b);
			}
			if (b.bound > max_bound)
				max_bound = b.bound;
			if (b.dev > worst)
				worst = b.dev;
			if ((uint64_t)b.dev > b.bound && beyond++ < 5)
				ksft_print_msg("%s: %lld ns %s the syscalls, bound %llu ns\n",
					       variant->name, (long long)b.dev,
					       b.ahead ? "ahead of" : "behind",
					       (unsigned long long)b.bound);
			tight_add(&t, variant->name, &b);
		}
	}
	pvst_unpin(&self->cpus);
	pvread_get_stats(&st1);
	tight_n = tight_beyond(&t, variant->name);
	free(t.kept);
	/* Fast reads are not counted: the reads less the slow ones. */
	fast = reads - (long)(st1.slow - st0.slow);
	ksft_print_msg("%s: %ld reads (%ld fast), largest deviation %lld ns, published bound up to %llu ns, %ld beyond\n",
		       variant->name, reads, fast, (long long)worst,
		       (unsigned long long)max_bound, beyond);
	limit = t.spread + t.lead + TIGHT_SLACK_NS;
	ksft_print_msg("%s: tight limit %llu ns outside the bracket (largest spread %llu ns + the line's largest distance from the records %llu ns + %d ns; widest bracket %lld ns), %ld beyond the tight limit; the published bound is %.0f times the limit and the widest bracket together\n",
		       variant->name, (unsigned long long)limit,
		       (unsigned long long)t.spread,
		       (unsigned long long)t.lead, TIGHT_SLACK_NS,
		       (long long)t.width, tight_n,
		       (double)max_bound / (double)(limit + t.width));
	EXPECT_EQ(0, beyond);
	EXPECT_EQ(0, tight_n) TH_LOG("%s: reads beyond the tight limit",
				     variant->name);
	EXPECT_LE(reads * 9 / 10, fast) TH_LOG("%s: reads not from the page",
					       variant->name);
}

/*
 * The published bound against what the module measures, which its design
 * makes it: twice the worst D of the last 16 s, plus 1 us (the UAPI
 * header, struct pvread_line), D at each update being, from
 * kmod/pvread_measure.c and pvread_line.c:
 *  - the spread S (records and the kernel's clocksource read);
 *  - the old line at its end against them: at most the line's lead on the
 *    kernel plus 2 S (the records are read at both ends of the kernel's);
 *  - the new line against the records from the measurement's first TSC
 *    read to the anchor's: its lead, S, and that interval G itself, the
 *    module's own latency (the records are compared where they stood at
 *    its start and at its end);
 *  - plus how far the line's rate may take it over its half second: half
 *    the lead, which the rate is steered by over a 1 s horizon, and 1 ppm
 *    of records' rates over 0.5 s (0.5 us), added to the larger of those.
 * The lead is at most L + S, L the line's largest distance from any
 * record through the page's own conversion (measured here at the TSC,
 * no system call), S for the kernel's last_value over its record.  So
 *   bound <= 2 (1.5 L + 3.5 S + G + 520 ns) + 1 us,
 * 20 ns of the 520 for the 20 us guard's step at 1000 ppm.  G is not
 * published: debugfs measure_max_ns, which spans the whole measurement,
 * bounds it from above; it is reset at the start, and only bounds
 * published a whole window later (17 s: the window's slots are whole
 * seconds) are judged, so that every update behind them was seen.
 *
 * Under the emulator G is what makes the bound (xen417-1cpu: spread
 * 0.4-1.1 us, measurement 26 us last and 50 us largest in 2 quiet s,
 * bounds 43 us quiet to 580 us, with 1 ms measurements in the suite):
 * the bound is twice the module's latency, not its clocks' disagreement.
 * The relation checked here holds on a correct module whatever G is, and
 * fails on a bound above what the module measured (a wrong factor, a
 * window that keeps what it should have dropped, a carried bound that
 * does not expire); without G in D the same check would be tight.
 */
#define WINDOW_S	17
#define DEBUGFS		"/sys/kernel/debug/pvread/"
#define RATE_TERM_NS	520
#define BOUND_SLACK_NS	1000

FIXTURE(window) {
	struct pvst_cpus cpus;
};

FIXTURE_SETUP(window)
{
	pvst_find_cpus(&self->cpus);
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
}

FIXTURE_TEARDOWN(window)
{
}

/* The line's MONOTONIC (or _RAW) at @tsc, as a reader computes it. */
static bool line_ns(const struct pvread_header *h, uint64_t tsc, bool raw,
		    int64_t *ns)
{
	const struct pvread_clock_base *b =
		&h->line.base[raw ? CLOCK_MONOTONIC_RAW : CLOCK_MONOTONIC];
	int64_t d = (int64_t)(tsc - h->line.tsc_timestamp);
	__u64 v;

	if (d < 0)
		d = 0;
	if ((uint64_t)d > h->line.tsc_span ||
	    !pvread_line_value(d, raw ? h->line.raw_mul : h->line.mul,
			       raw ? h->line.raw_shift : h->line.shift,
			       b->snsec, &v))
		return false;
	*ns = b->sec * 1000000000LL + (int64_t)(v >> 32);
	return true;
}

/*
 * The line's largest distance, MONOTONIC and _RAW, from every registered
 * record at @tsc through the page's conversion; false when there is no
 * line to compare.
 */
static bool line_vs_records(const struct pvread_header *h, uint64_t tsc,
			    uint64_t *dist)
{
	struct pvread_record rec;
	int64_t line[2], k;
	unsigned int cpu;
	bool any = false;
	int raw;

	if (h->mode != PVREAD_MODE_LINE || !line_ns(h, tsc, false, &line[0]) ||
	    !line_ns(h, tsc, true, &line[1]))
		return false;
	*dist = 0;
	for (cpu = 0; cpu < h->nr_records; cpu++) {
		if (pvread_get_record(cpu, &rec) ||
		    !(rec.state & PVREAD_RECORD_REGISTERED) ||
		    tsc < rec.pvclock.tsc_timestamp)
			continue;
		for (raw = 0; raw < 2; raw++) {
			k = pvst_mirror_ns(&h->tk, raw ? CLOCK_MONOTONIC_RAW :
							 CLOCK_MONOTONIC,
					   pvst_pvclock_at(&rec.pvclock, tsc));
			k = llabs(line[raw] - k);
			if ((uint64_t)k > *dist)
				*dist = k;
		}
		any = true;
	}
	return any;
}

TEST_F_TIMEOUT(window, bound_vs_measured, 120)
{
	uint64_t l = 0, s = 0, bound = 0, dist, tsc, g, without_g, limit;
	long samples = 0, compared = 0, judged = 0, unmeasured = 0;
	int64_t t0, now, last = 0, step = 0;
	struct pvread_info info;
	struct pvread_header h;
	long long measured;
	int c = 0;

	if (pvst_seconds() < 2)
		SKIP(return, "the bound's window needs %d s: PVREAD_TEST_SECONDS %.1f is a shortened run",
		     WINDOW_S + 1, pvst_seconds());
	if (pvst_write_file(DEBUGFS "measure_max_ns", "0"))
		SKIP(return, "no %smeasure_max_ns to reset (root, debugfs mounted): the module's latency is not published",
		     DEBUGFS);
	pvread_get_info(&info);		/* the library's mapping, for records */
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	do {
		if (samples % 256 == 0)
			pvst_pin(self->cpus.id[c++ % self->cpus.n]);
		pvst_snap_tsc(&h, &tsc);
		samples++;
		now = pvst_sys_ns(CLOCK_MONOTONIC);
		if (last && now - last > step)
			step = now - last;
		last = now;
		if (h.spread_ns == UINT64_MAX || h.error_bound_ns == UINT64_MAX) {
			unmeasured++;
			continue;
		}
		if (h.spread_ns > s)
			s = h.spread_ns;
		if (line_vs_records(&h, tsc, &dist)) {
			compared++;
			if (dist > l)
				l = dist;
		}
		if (h.mode == PVREAD_MODE_LINE &&
		    now - t0 >= WINDOW_S * 1000000000LL) {
			judged++;
			if (h.error_bound_ns > bound)
				bound = h.error_bound_ns;
		}
	} while (now - t0 < (WINDOW_S + 1) * 1000000000LL);
	pvst_unpin(&self->cpus);
	measured = pvst_read_number(DEBUGFS "measure_max_ns");
	ASSERT_LE(0, measured) TH_LOG("no %smeasure_max_ns", DEBUGFS);
	ASSERT_LT(0, compared) TH_LOG("no sample of the line against the records");
	ASSERT_LT(0, judged) TH_LOG("no bound published in line mode after %d s",
				    WINDOW_S);
	/*
	 * Between two samples the lead may move unseen by the steering
	 * (1000 ppm) and NTP's rate (500 ppm); the module's G, in TSC ticks
	 * at the steered rate, by 1000 ppm.
	 */
	l += step * 3 / 2000;
	g = measured + measured / 1000;
	without_g = 2 * (l * 3 / 2 + s * 7 / 2 + RATE_TERM_NS) + BOUND_SLACK_NS;
	limit = without_g + 2 * g;
	ksft_print_msg("window: %ld samples (%ld of the line against the records, %ld without a measurement), %ld judged after %d s: published bound up to %llu ns\n",
		       samples, compared, unmeasured, judged, WINDOW_S,
		       (unsigned long long)bound);
	ksft_print_msg("window: measured: line to records L up to %llu ns (%lld ns at most between samples), spread S up to %llu ns, the module's measurement G up to %lld ns (debugfs measure_max_ns)\n",
		       (unsigned long long)l, (long long)step,
		       (unsigned long long)s, measured);
	ksft_print_msg("window: limit 2 (1.5 L + 3.5 S + G + %d) + %d = %llu ns; without G %llu ns, which the bound is %.1f times\n",
		       RATE_TERM_NS, BOUND_SLACK_NS, (unsigned long long)limit,
		       (unsigned long long)without_g,
		       (double)bound / (double)without_g);
	EXPECT_LE(bound, limit) TH_LOG("the bound is above what the module measured");
}

/*
 * --offset NS (or --offset=NS), taken out of @argv; the rest is the
 * harness's.  The new argc.
 */
static int bounded_options(int argc, char **argv)
{
	const char *v;
	char *end;
	int i, n = 1;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--offset") && i + 1 < argc)
			v = argv[++i];
		else if (!strncmp(argv[i], "--offset=", 9))
			v = argv[i] + 9;
		else {
			argv[n++] = argv[i];
			continue;
		}
		errno = 0;
		offset_ns = strtoll(v, &end, 10);
		if (errno || end == v || *end) {
			fprintf(stderr, "pvread_bounded: --offset %s: not a number of ns\n",
				v);
			exit(KSFT_FAIL);
		}
	}
	argv[n] = NULL;
	return n;
}

int main(int argc, char **argv)
{
	argc = bounded_options(argc, argv);
	return pvst_xen_line_main(argc, argv, "page reading to bound");
}
