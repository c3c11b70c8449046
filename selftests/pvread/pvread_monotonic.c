// SPDX-License-Identifier: GPL-2.0
/*
 * CLOCK_MONOTONIC, _RAW and BOOTTIME never go back, on two threads moving
 * across the vCPUs -- where the raw pvclock of one vCPU's record may be
 * behind another's (the figures say how far).
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "pvread_harness.h"

struct reader {
	pthread_t tid;
	const struct pvst_cpus *cpus;
	int index;
	long min_reads;
	double min_seconds;
	long reads, backwards, switches;
	int64_t worst_warp;	/* largest raw pvclock step back at a switch */
};

static void *reader(void *arg)
{
	static const clockid_t clocks[] = {
		CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME
	};
	struct reader *t = arg;
	struct pvread_sample before, after;
	int64_t prev[3] = { 0 }, v, t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	struct timespec ts;
	int c = t->index, k;

	while (t->reads < t->min_reads || pvst_elapsed(t0) < t->min_seconds) {
		if (t->reads % 1000 == 0) {
			bool have = !pvread_sample_pvclock(&before);

			pvst_pin(t->cpus->id[c++ % t->cpus->n]);
			if (have && !pvread_sample_pvclock(&after) &&
			    after.cpu != before.cpu) {
				t->switches++;
				if ((int64_t)(before.cycles - after.cycles) >
				    t->worst_warp)
					t->worst_warp = before.cycles -
							after.cycles;
			}
		}
		k = t->reads % 3;
		pvread_clock_gettime(clocks[k], &ts);
		v = pvst_ns(&ts);
		if (v < prev[k] && t->backwards++ < 5)
			ksft_print_msg("reader %d: clock %d stepped back %lld ns\n",
				       t->index, clocks[k],
				       (long long)(prev[k] - v));
		prev[k] = v;
		t->reads++;
	}
	return NULL;
}

FIXTURE(monotonic) {
};

FIXTURE_SETUP(monotonic)
{
}

FIXTURE_TEARDOWN(monotonic)
{
}

TEST_F_TIMEOUT(monotonic, never_back, 300)
{
	struct pvst_cpus cpus;
	struct reader t[2];
	long backwards = 0, reads = 0, switches = 0;
	int64_t warp = 0;
	int i;

	pvst_find_cpus(&cpus);
	for (i = 0; i < 2; i++) {
		t[i] = (struct reader){ .cpus = &cpus, .index = i,
					.min_reads = pvst_reads() * 2,
					.min_seconds = pvst_seconds() };
		ASSERT_EQ(0, pthread_create(&t[i].tid, NULL, reader, &t[i]));
	}
	for (i = 0; i < 2; i++) {
		pthread_join(t[i].tid, NULL);
		reads += t[i].reads;
		backwards += t[i].backwards;
		switches += t[i].switches;
		if (t[i].worst_warp > warp)
			warp = t[i].worst_warp;
	}
	ksft_print_msg("CLOCK_MONOTONIC, _RAW, BOOTTIME: %ld reads on 2 threads, %ld vCPU switches, %ld backward steps; largest raw pvclock step back across a vCPU switch %lld ns%s\n",
		       reads, switches, backwards, (long long)warp,
		       cpus.n < 2 ? " (one vCPU: no switch)" : "");
	EXPECT_EQ(0, backwards);
	/* One vCPU has no switch to survive. */
	if (cpus.n > 1)
		EXPECT_LT(0, switches);
}

PVREAD_XEN_HARNESS_MAIN
