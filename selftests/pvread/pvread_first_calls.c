// SPDX-License-Identifier: GPL-2.0
/*
 * Threads started before the library's first call all make it at once:
 * one maps the device, the others answer through libc meanwhile.  Every
 * answer lies between two system calls (widened by the published bound),
 * none goes back, and the device is mapped exactly once.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "pvread_harness.h"

#define RACERS 4
#define RACE_READS 2000

struct racer {
	pthread_t tid;
	pthread_barrier_t *go;
	int64_t first, last;
	long back, failed;
};

static void *race_first_reads(void *arg)
{
	struct racer *r = arg;
	struct timespec ts;
	int64_t v, prev = 0;
	int i;

	pthread_barrier_wait(r->go);
	for (i = 0; i < RACE_READS; i++) {
		if (pvread_clock_gettime(CLOCK_MONOTONIC, &ts)) {
			r->failed++;
			continue;
		}
		v = pvst_ns(&ts);
		if (!i)
			r->first = v;
		if (v < prev)
			r->back++;
		prev = v;
	}
	r->last = prev;
	return NULL;
}

static int count_mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, PVREAD_DEVICE) != NULL;
	fclose(f);
	return n;
}

FIXTURE(first_calls) {
};

FIXTURE_SETUP(first_calls)
{
}

FIXTURE_TEARDOWN(first_calls)
{
}

/* Each test is a fresh process: these are its library's first calls. */
TEST_F(first_calls, race)
{
	struct racer r[RACERS] = { 0 };
	long back = 0, failed = 0, outside = 0;
	struct pvread_info info;
	pthread_barrier_t go;
	int64_t k0, k1, b;
	int i, maps;

	pthread_barrier_init(&go, NULL, RACERS);
	k0 = pvst_sys_ns(CLOCK_MONOTONIC);
	for (i = 0; i < RACERS; i++) {
		r[i].go = &go;
		ASSERT_EQ(0, pthread_create(&r[i].tid, NULL,
					    race_first_reads, &r[i]));
	}
	for (i = 0; i < RACERS; i++)
		pthread_join(r[i].tid, NULL);
	k1 = pvst_sys_ns(CLOCK_MONOTONIC);
	pthread_barrier_destroy(&go);
	pvread_get_info(&info);
	b = info.error_bound_ns > (uint64_t)INT64_MAX / 4 ?
		INT64_MAX / 4 : (int64_t)info.error_bound_ns;
	for (i = 0; i < RACERS; i++) {
		back += r[i].back;
		failed += r[i].failed;
		outside += r[i].first < k0 - b || r[i].last > k1 + b;
	}
	maps = count_mappings();
	ksft_print_msg("first calls: %d threads x %d reads, %ld back, %ld failed, %ld outside the syscalls +- %lld ns, %d mapping(s) of %s\n",
		       RACERS, RACE_READS, back, failed, outside, (long long)b,
		       maps, PVREAD_DEVICE);
	EXPECT_EQ(0, back);
	EXPECT_EQ(0, failed);
	EXPECT_EQ(0, outside);
	EXPECT_EQ(1, maps);
	EXPECT_TRUE(info.mapped);
}

PVREAD_XEN_HARNESS_MAIN
