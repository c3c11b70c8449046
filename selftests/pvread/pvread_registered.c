// SPDX-License-Identifier: GPL-2.0
/*
 * Every online vCPU's record is registered (vCPU 0's not when its area is
 * the kernel's), no other; each by that vCPU itself, as Xen fills a record
 * from the calling vCPU's calibration; and Xen keeps writing each: an area
 * Xen let go of (the module leaves its version odd) or one registered only
 * in the module's word would stand still.  A resume or a vCPU coming
 * online registers in a work item: each test gives it WAIT_S seconds.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

#define WAIT_S 5
#define MAX_RECORDS 64
#define NOTHING_TO_REGISTER \
	"the one vCPU's area is the kernel's: nothing to register"

/* The CPUs in sysfs list @path ("0-1,3"), as a mask; false if unreadable. */
static bool cpu_list(const char *path, uint64_t *mask)
{
	char buf[256], *p = buf, *end;
	FILE *f = fopen(path, "r");
	long a, b;

	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return false;
	}
	fclose(f);
	*mask = 0;
	while (*p && *p != '\n') {
		a = strtol(p, &end, 10);
		if (end == p || a < 0 || a >= MAX_RECORDS)
			return false;
		b = a;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b >= MAX_RECORDS)
				return false;
			p = end;
		}
		for (; a <= b; a++)
			*mask |= 1ULL << a;
		if (*p == ',')
			p++;
	}
	return true;
}

FIXTURE(registered) {
	uint64_t want;		/* the records that should be registered */
	uint64_t have;		/* those that are */
	uint64_t own;		/* those by their own vCPU */
};

/* The registered records, once they are what is wanted or WAIT_S passed. */
FIXTURE_SETUP(registered)
{
	struct pvread_header h;
	uint64_t online;
	unsigned int i;
	int64_t t0;

	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
	pvst_snap(&h);
	ASSERT_TRUE(cpu_list("/sys/devices/system/cpu/online", &online))
		TH_LOG("cannot read /sys/devices/system/cpu/online (vCPUs 0-%d)",
		       MAX_RECORDS - 1);
	ASSERT_GE(MAX_RECORDS, (int)h.nr_records);
	self->want = online;
	if (h.flags & PVREAD_FLAG_CPU0_OWNED_BY_KERNEL)
		self->want &= ~1ULL;
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	do {
		self->have = self->own = 0;
		for (i = 0; i < h.nr_records; i++) {
			if (!(pvst_rec(i)->state & PVREAD_RECORD_REGISTERED))
				continue;
			self->have |= 1ULL << i;
			if (pvst_rec(i)->registered_on == i)
				self->own |= 1ULL << i;
		}
		if (self->have == self->want && self->own == self->have)
			break;
		pvst_sleep(0.01);
	} while (pvst_elapsed(t0) < WAIT_S);
	ksft_print_msg("online %#llx, expected %#llx, in the page %#llx, by themselves %#llx\n",
		       (unsigned long long)online,
		       (unsigned long long)self->want,
		       (unsigned long long)self->have,
		       (unsigned long long)self->own);
}

FIXTURE_TEARDOWN(registered)
{
}

TEST_F(registered, every_online_vcpu)
{
	if (!self->want)
		SKIP(return, NOTHING_TO_REGISTER);
	EXPECT_EQ(self->want, self->have);
}

TEST_F(registered, by_own_vcpu)
{
	if (!self->want)
		SKIP(return, NOTHING_TO_REGISTER);
	EXPECT_NE(0ULL, self->have);
	EXPECT_EQ(self->have, self->own);
}

/*
 * An idle vCPU still wakes for its timers, and Xen updates its record
 * whenever it schedules it.
 */
TEST_F(registered, kept_current)
{
	uint64_t ts0[MAX_RECORDS] = { 0 }, moved = 0, odd = 0;
	unsigned int i;
	int64_t t0;

	if (!self->want)
		SKIP(return, NOTHING_TO_REGISTER);
	for (i = 0; i < MAX_RECORDS; i++)
		if (self->have & (1ULL << i))
			ts0[i] = pvst_rec(i)->pvclock.tsc_timestamp;
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	do {
		for (i = 0; i < MAX_RECORDS; i++) {
			if (!(self->have & (1ULL << i)))
				continue;
			if (pvst_rec(i)->pvclock.version & 1)
				odd |= 1ULL << i;
			else if (pvst_rec(i)->pvclock.tsc_timestamp != ts0[i])
				moved |= 1ULL << i;
		}
		if (moved == self->have)
			break;
		pvst_sleep(0.01);
	} while (pvst_elapsed(t0) < WAIT_S);
	ksft_print_msg("rewritten by Xen within %d s: %#llx of %#llx (seen odd: %#llx)\n",
		       WAIT_S, (unsigned long long)moved,
		       (unsigned long long)self->have,
		       (unsigned long long)odd);
	EXPECT_NE(0ULL, self->have);
	EXPECT_EQ(self->have, moved);
}

PVREAD_XEN_HARNESS_MAIN
