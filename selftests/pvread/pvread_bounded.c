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
 */
#define _GNU_SOURCE
#include "pvread_harness.h"

#define BATCH 64

/*
 * What a correct line may add to the records' spread: the line's and the
 * kernel's conversions each round to the ns, and each anchor starts the
 * new line above the old for the 20 us guard, at most the 1000 ppm
 * steering limit over it (20 ns).  1 us, the term the module adds to its
 * own bound (PVREAD_BOUND_SLACK_NS), covers those many times over; the
 * line's lead on the kernel, which the module steers away within a
 * second and does not publish, must stay within it too.
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
}

FIXTURE_TEARDOWN(bounded)
{
}

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
	int64_t width;		/* the widest bracket */
};

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
	if ((uint64_t)r.dev > t->spread + TIGHT_SLACK_NS &&
	    t->beyond_early++ < TIGHT_SHOWN)
		tight_print(name, &r, t->spread + TIGHT_SLACK_NS);
}

/* Reads beyond the run's tight limit, the first few printed. */
static long tight_beyond(const struct tight *t, const char *name)
{
	uint64_t limit = t->spread + TIGHT_SLACK_NS;
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
	limit = t.spread + TIGHT_SLACK_NS;
	ksft_print_msg("%s: tight limit %llu ns outside the bracket (largest spread %llu ns + %d ns; widest bracket %lld ns), %ld beyond the tight limit; the published bound is %.0f times the limit plus the widest bracket\n",
		       variant->name, (unsigned long long)limit,
		       (unsigned long long)t.spread, TIGHT_SLACK_NS,
		       (long long)t.width, tight_n,
		       (double)max_bound / (double)(limit + t.width));
	EXPECT_EQ(0, beyond);
	EXPECT_EQ(0, tight_n) TH_LOG("%s: reads beyond the tight limit",
				     variant->name);
	EXPECT_LE(reads * 9 / 10, fast) TH_LOG("%s: reads not from the page",
					       variant->name);
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
		offset_ns = strtoll(v, &end, 0);
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
