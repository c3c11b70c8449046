// SPDX-License-Identifier: GPL-2.0
/*
 * Every clock the page serves is the kernel's within the published bound:
 * each library read lies between two clock_gettime system calls, widened
 * by the error bound the module published around it, on every vCPU in
 * turn; and the reads come from the page, not from libc.  In mode none
 * the kernel answers every read: the program is a skip that says so.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"

#define BATCH 64

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

TEST_F_TIMEOUT(bounded, within_bound, 300)
{
	long want = variant->every_vcpu ? pvst_reads() * self->cpus.n :
					     pvst_reads() / 4;
	long reads = 0, beyond = 0, fast;
	double min_seconds = pvst_seconds();
	struct pvread_stats st0, st1;
	struct pvst_bracket b;
	uint64_t max_bound = 0;
	int64_t t0, worst = 0;
	int i, c = 0;

	pvread_get_stats(&st0);
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	while (reads < want || pvst_elapsed(t0) < min_seconds) {
		/* Move between vCPUs so that every record is compared. */
		pvst_pin(self->cpus.id[c++ % self->cpus.n]);
		for (i = 0; i < BATCH * 16; i++, reads++) {
			pvst_bracket(variant->clock, &b);
			if (b.bound > max_bound)
				max_bound = b.bound;
			if (b.dev > worst)
				worst = b.dev;
			if ((uint64_t)b.dev > b.bound && beyond++ < 5)
				ksft_print_msg("%s: %lld ns %s the syscalls, bound %llu ns\n",
					       variant->name, (long long)b.dev,
					       b.ahead ? "ahead of" : "behind",
					       (unsigned long long)b.bound);
		}
	}
	pvst_unpin(&self->cpus);
	pvread_get_stats(&st1);
	/* Fast reads are not counted: the reads less the slow ones. */
	fast = reads - (long)(st1.slow - st0.slow);
	ksft_print_msg("%s: %ld reads (%ld fast), largest deviation %lld ns, published bound up to %llu ns, %ld beyond\n",
		       variant->name, reads, fast, (long long)worst,
		       (unsigned long long)max_bound, beyond);
	EXPECT_EQ(0, beyond);
	EXPECT_LE(reads * 9 / 10, fast) TH_LOG("%s: reads not from the page",
					       variant->name);
}

PVREAD_XEN_LINE_HARNESS_MAIN("page reading to bound")
