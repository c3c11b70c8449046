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
#include <sys/ioctl.h>

#include "pvread_harness.h"
#include "pvread_page.h"

#define WAIT_S 5
#define USER_SPIN_S 2		/* default; Xen calibrates every second */
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

/* A consistent copy of record @cpu's pvclock; false if it kept changing. */
static bool pvclock_copy(unsigned int cpu, struct pvread_pvclock *out)
{
	const volatile struct pvread_pvclock *src = &pvst_rec(cpu)->pvclock;
	unsigned int tries;
	uint32_t v;

	for (tries = 0; tries < 1000; tries++) {
		v = src->version;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		memcpy(out, (const void *)src, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (!(v & 1) && src->version == v)
			return true;
	}
	return false;
}

/* Is this a PV guest (/sys/hypervisor/guest_type)? */
static bool pv_guest(void)
{
	char type[16] = "";
	FILE *f = fopen("/sys/hypervisor/guest_type", "r");

	if (f) {
		if (!fgets(type, sizeof(type), f))
			type[0] = 0;
		fclose(f);
	}
	return !strcmp(type, "PV\n");
}

/*
 * The kernel's clock on this vCPU (the xen clocksource: the vCPU's primary
 * record, or the global last value above it) against record @cpu, in us,
 * for the record: false when that cannot be told.
 */
static bool kernel_minus_record(int fd, unsigned int cpu, double *us,
				double *within)
{
	struct pvread_pvclock a, b;
	struct pvread_kernel_time kt;
	uint64_t t0, t1, k0, k1;

	if (!pvclock_copy(cpu, &a))
		return false;
	t0 = pvst_rdtsc();
	if (ioctl(fd, PVREAD_IOC_KERNEL_TIME, &kt))
		return false;
	t1 = pvst_rdtsc();
	if (!pvclock_copy(cpu, &b) || a.version != b.version)
		return false;
	k0 = pvst_pvclock_at(&a, t0);
	k1 = pvst_pvclock_at(&a, t1);
	*us = kt.cycles < k0 ? -(double)(k0 - kt.cycles) / 1e3 :
	      kt.cycles > k1 ? (double)(kt.cycles - k1) / 1e3 : 0.0;
	*within = (double)(k1 - k0) / 1e3;
	return true;
}

/* A record may stand still this long under the refresh (below). */
#define REFRESH_STILL_MAX_NS	100000000ULL
/*
 * A gap this long between two turns of the watching loop is time its
 * vCPU did not run (no interrupt, the refresh's included, takes a tenth
 * of it, even under TCG): nobody needed its record then.
 */
#define AWAY_MIN_NS		20000000ULL

/*
 * Xen rewrites a running vCPU's record at every calibration (each second),
 * and each time it schedules the vCPU, whatever the vCPU runs.  Before Xen
 * 4.18 an HVM or PVH guest's area is a virtual address that Xen writes
 * through the vCPU's page tables of the moment; under KPTI those of user
 * code lack it, and Xen drops the write (it keeps one back for PV guests
 * only): the record stands on an older segment than the vCPU's primary
 * record, which the kernel's clock reads, until a write lands.
 * A record's version is its primary's, 2 a write: a step of more is a
 * write the area missed.  Two writes can fall within one interruption of
 * the watching loop (0 to 12 % of them, seen in a PVH domU without KPTI
 * under TCG); under KPTI on Xen 4.17, 39 to 85 % are missed.  In a PV
 * guest a step of more is no loss: Xen keeps the last write back while
 * user code runs and makes it when the vCPU enters its kernel (16 of 58
 * seen so in a PV domU).  Each vCPU runs USER_SPIN_S s (or
 * $PVREAD_TEST_SPIN_S) of user code that makes no system call, watching
 * its own record (how long it stood still, the writes seen and missed);
 * then the kernel's clock on that vCPU is compared with the record.
 *
 * Where the module keeps the records current itself (sysfs refresh
 * active: each CPU re-registers its own area every jiffy from a timer,
 * and Xen's registration writes the record from kernel mode), Xen's own
 * writes are still missed between two refreshes, but no record stands
 * still for longer than about a refresh period (4 ms at HZ=250): each
 * record must have moved at least every REFRESH_STILL_MAX_NS of the time
 * its vCPU ran (TCG's jitter included; a stretch the vCPU was away, by
 * Xen's scheduler or the host's, not counted: one of 101 ms in a CI run),
 * and the kernel's clock on its vCPU must be within the page's error
 * bound of it.  Otherwise, where
 * a quarter or more are missed outside a PV guest, or none lands in
 * USER_SPIN_S s (Xen calibrated meanwhile), the page must not serve a
 * line, and must say why: line state pti (unless it says off or stable,
 * which come first).
 */
TEST_F_TIMEOUT(registered, kept_current_under_user_code, 180)
{
	uint64_t lossy = 0, t, t0, changed, longest, gap, spin_ns, stamp, ts;
	uint64_t prev, away, away_all, away_longest;
	uint64_t still_long = 0, off_bound = 0, uncompared = 0;
	bool pv = pv_guest(), compared;
	const char *spin = getenv("PVREAD_TEST_SPIN_S");
	unsigned int i, k, writes, missed;
	struct pvread_pvclock start;
	struct pvread_header h;
	struct pvst_cpus cpus;
	uint32_t v, version;
	double us = 0, within = 0;
	char vs[96], refresh0[32], refresh[32];
	int fd;

	if (!self->want)
		SKIP(return, NOTHING_TO_REGISTER);
	fd = open(PVREAD_DEVICE, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd) TH_LOG("open %s: %s", PVREAD_DEVICE, strerror(errno));
	spin_ns = (spin ? strtoull(spin, NULL, 10) : USER_SPIN_S) * 1000000000ULL;
	ASSERT_LE(2000000000ULL, spin_ns)
		TH_LOG("PVREAD_TEST_SPIN_S=%s: 2 s or more, Xen calibrates each second", spin);
	pvst_find_cpus(&cpus);
	pvst_refresh_state(refresh0, sizeof(refresh0));
	for (i = 0; i < MAX_RECORDS; i++) {
		if (!(self->have & (1ULL << i)))
			continue;
		ASSERT_TRUE(pvst_pin(i)) TH_LOG("pin to cpu%u: %s", i,
						strerror(errno));
		ASSERT_TRUE(pvclock_copy(i, &start));
		t0 = pvst_rdtsc();
		changed = t0;
		prev = t0;
		version = start.version;
		stamp = start.tsc_timestamp;
		writes = 0;
		missed = 0;
		longest = 0;
		away = 0;
		away_all = 0;
		away_longest = 0;
		do {
			t = pvst_rdtsc();
			gap = pvst_pvclock_at(&start, t) - pvst_pvclock_at(&start, prev);
			prev = t;
			if (gap >= AWAY_MIN_NS) {
				away += gap;
				away_all += gap;
				away_longest = gap > away_longest ? gap : away_longest;
			}
			v = pvst_rec(i)->pvclock.version;
			ts = pvst_rec(i)->pvclock.tsc_timestamp;
			if ((v == version && ts == stamp) || (v & 1))
				continue;
			/* Registered again (version 0 or 1): not a write. */
			if ((int32_t)(v - version) > 0) {
				writes++;
				missed += (v - version) / 2 - 1;
			}
			version = v;
			stamp = ts;
			gap = pvst_pvclock_at(&start, t) - pvst_pvclock_at(&start, changed) - away;
			longest = gap > longest ? gap : longest;
			changed = t;
			away = 0;
		} while (pvst_pvclock_at(&start, t) - pvst_pvclock_at(&start, t0) < spin_ns);
		gap = pvst_pvclock_at(&start, t) - pvst_pvclock_at(&start, changed) - away;
		longest = gap > longest ? gap : longest;
		/*
		 * Rewritten every jiffy under the refresh, a record may move
		 * between the two copies around the kernel's answer: again,
		 * a few times.
		 */
		for (k = 0, compared = false; k < 20 && !compared; k++)
			compared = kernel_minus_record(fd, i, &us, &within);
		pvst_snap(&h);
		if (compared)
			snprintf(vs, sizeof(vs), "%+.0f us from the record (within %.0f us; bound %.0f us)",
				 us, within, (double)h.error_bound_ns / 1e3);
		else
			snprintf(vs, sizeof(vs), "not compared");
		ksft_print_msg("cpu%u: %u writes seen, %u %s in %.0f s of user code, longest still %.3f s while it ran (away %.3f s, the longest %.3f s); the kernel's clock there %s\n",
			       i, writes, missed,
			       pv ? "kept back (PV)" : "missed",
			       (double)spin_ns / 1e9,
			       (double)longest / 1e9, (double)away_all / 1e9,
			       (double)away_longest / 1e9, vs);
		if (!writes ||
		    (!pv && missed >= 5 && missed * 4 >= writes + missed))
			lossy |= 1ULL << i;
		if (longest > REFRESH_STILL_MAX_NS)
			still_long |= 1ULL << i;
		if (!compared)
			uncompared |= 1ULL << i;
		else if ((us < 0 ? -us : us) * 1e3 > (double)h.error_bound_ns)
			off_bound |= 1ULL << i;
	}
	close(fd);
	pvst_unpin(&cpus);
	pvst_snap(&h);
	pvst_refresh_state(refresh, sizeof(refresh));
	ksft_print_msg("records that missed a quarter of Xen's writes or more, or all: %#llx; still over %llu ms: %#llx; the kernel's clock beyond the bound from the record: %#llx (not compared: %#llx); mode %s, line %s, refresh %s (%s at the start)\n",
		       (unsigned long long)lossy,
		       REFRESH_STILL_MAX_NS / 1000000,
		       (unsigned long long)still_long,
		       (unsigned long long)off_bound,
		       (unsigned long long)uncompared,
		       pvst_mode_name(h.mode), pvst_line_name(h.line_state),
		       refresh, refresh0);
	if (!strcmp(refresh, "active")) {
		EXPECT_EQ(0ULL, still_long)
			TH_LOG("the refresh is active and records stood still for over %llu ms while their vCPU ran user code",
			       REFRESH_STILL_MAX_NS / 1000000);
		EXPECT_EQ(0ULL, uncompared)
			TH_LOG("the kernel's clock could not be compared with these records");
		EXPECT_EQ(0ULL, off_bound)
			TH_LOG("the refresh is active and the kernel's clock stood beyond the error bound from these records");
	} else if (lossy) {
		EXPECT_EQ((uint32_t)PVREAD_MODE_NONE, h.mode);
		if (h.line_state != PVREAD_LINE_OFF &&
		    h.line_state != PVREAD_LINE_STABLE)
			EXPECT_EQ((uint32_t)PVREAD_LINE_PTI, h.line_state)
				TH_LOG("records missed Xen's writes and the page does not say why");
	}
}

PVREAD_XEN_HARNESS_MAIN
