// SPDX-License-Identifier: GPL-2.0
/*
 * vCPU hotplug: CYCLES offline/online cycles of cpu1 under a reader of
 * CLOCK_MONOTONIC.  Offline, cpu1's record is unregistered, one fewer in
 * the header; the moment user space first runs on cpu1 again, its record
 * is registered and fresh; the reader never steps back (from the line, or
 * from the kernel in mode none); and the kernel then reads cpu1's record
 * as the page holds it.  Leaves cpu1 online.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "pvread_harness.h"
#include "pvread_page.h"

#define CPU 1
#define CYCLES 10
#define ONLINE "/sys/devices/system/cpu/cpu1/online"

struct reader {
	bool stop;
	long reads, back, fast;
};

static void *reader(void *arg)
{
	struct reader *r = arg;
	struct pvread_stats st;
	struct timespec ts;
	int64_t last = 0, now;

	while (!__atomic_load_n(&r->stop, __ATOMIC_RELAXED)) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		now = pvst_ns(&ts);
		if (now < last)
			r->back++;
		last = now;
		r->reads++;
	}
	pvread_get_stats(&st);
	/* Fast reads are not counted: this thread's reads less the slow. */
	r->fast = r->reads - (long)st.slow;
	return NULL;
}

/* What a thread saw the moment the scheduler let it onto CPU. */
struct first_look {
	bool give_up;
	bool ran;			/* it did run there */
	uint32_t state, version;	/* the record's */
	uint64_t tsc_timestamp, tsc;
};

static void *first_look(void *arg)
{
	struct first_look *w = arg;
	unsigned int on = ~0U;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(CPU, &set);
	while (!__atomic_load_n(&w->give_up, __ATOMIC_RELAXED)) {
		if (sched_setaffinity(0, sizeof(set), &set)) {
			sched_yield();
			continue;
		}
		w->tsc = pvst_rdtsc();
		w->state = pvst_rec(CPU)->state;
		w->version = pvst_rec(CPU)->pvclock.version;
		w->tsc_timestamp = pvst_rec(CPU)->pvclock.tsc_timestamp;
		w->ran = syscall(SYS_getcpu, &on, NULL, NULL) == 0 && on == CPU;
		break;
	}
	return NULL;
}

FIXTURE(hotplug) {
};

FIXTURE_SETUP(hotplug)
{
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
}

FIXTURE_TEARDOWN(hotplug)
{
	pvst_write_file(ONLINE, "1");
}

TEST_F_TIMEOUT(hotplug, cycles, 300)
{
	int bad_off = 0, bad_hdr = 0, bad_first = 0, bad_after = 0,
	    bad_write = 0, i, ret;
	struct reader r = { 0 };
	struct pvread_header h0, h;
	pthread_t rd, wt;
	uint32_t v_off;

	if (access(ONLINE, F_OK))
		SKIP(return, "no cpu1 to take offline (one vCPU)");
	pvst_snap(&h0);
	ksft_print_msg("cpu%d: %d cycles; before: %u registered, flags %#x, mode %s\n",
		       CPU, CYCLES, h0.nr_registered, h0.flags,
		       pvst_mode_name(h0.mode));
	ASSERT_EQ(0, pthread_create(&rd, NULL, reader, &r));
	for (i = 0; i < CYCLES; i++) {
		struct first_look w = { 0 };

		ret = pvst_write_file(ONLINE, "0");
		if (ret) {
			ksft_print_msg("offline cpu%d: %s\n", CPU, strerror(-ret));
			bad_write++;
			break;
		}
		pvst_snap(&h);
		if (pvst_rec(CPU)->state & PVREAD_RECORD_REGISTERED)
			bad_off++;
		if (h.nr_registered != h0.nr_registered - 1)
			bad_hdr++;
		v_off = pvst_rec(CPU)->pvclock.version;
		pvst_sleep(0.05);

		ASSERT_EQ(0, pthread_create(&wt, NULL, first_look, &w));
		ret = pvst_write_file(ONLINE, "1");
		if (ret) {
			ksft_print_msg("online cpu%d: %s\n", CPU, strerror(-ret));
			bad_write++;
			__atomic_store_n(&w.give_up, true, __ATOMIC_RELAXED);
			pthread_join(wt, NULL);
			break;
		}
		pvst_sleep(0.2);
		__atomic_store_n(&w.give_up, true, __ATOMIC_RELAXED);
		pthread_join(wt, NULL);
		if (!w.ran || !(w.state & PVREAD_RECORD_REGISTERED) ||
		    (w.version & 1) || w.version == v_off ||
		    w.tsc_timestamp > w.tsc) {
			ksft_print_msg("cycle %d: first look on cpu%d: ran %d state %u version %u (offline %u) tsc_timestamp %llu (now %llu)\n",
				       i, CPU, w.ran, w.state, w.version, v_off,
				       (unsigned long long)w.tsc_timestamp,
				       (unsigned long long)w.tsc);
			bad_first++;
		}
		pvst_snap(&h);
		if (!(pvst_rec(CPU)->state & PVREAD_RECORD_REGISTERED) ||
		    h.nr_registered != h0.nr_registered)
			bad_after++;
	}
	__atomic_store_n(&r.stop, true, __ATOMIC_RELAXED);
	pthread_join(rd, NULL);

	ksft_print_msg("%d offline/online cycles of cpu%d; bad: %d writes, %d offline records, %d offline headers, %d first moments, %d online headers\n",
		       i, CPU, bad_write, bad_off, bad_hdr, bad_first,
		       bad_after);
	ksft_print_msg("reader: %ld reads (%ld fast), %ld backward steps\n",
		       r.reads, r.fast, r.back);
	EXPECT_EQ(CYCLES, i);
	EXPECT_EQ(0, bad_write);
	EXPECT_EQ(0, bad_off) TH_LOG("cpu%d's record registered while it was offline", CPU);
	EXPECT_EQ(0, bad_hdr) TH_LOG("offline: nr_registered not one less");
	EXPECT_EQ(0, bad_first) TH_LOG("record not registered and fresh at user space's first moment on cpu%d", CPU);
	EXPECT_EQ(0, bad_after) TH_LOG("online: nr_registered not back");
	EXPECT_LT(0, r.reads);
	EXPECT_EQ(0, r.back) TH_LOG("CLOCK_MONOTONIC stepped back across the cycles");
}

/*
 * The kernel's evaluation of cpu1's record (PVREAD_IOC_REFERENCE, on cpu1)
 * is the page's record evaluated at the same TSC, to the nanosecond: run
 * after the cycles, it shows the record registered again is the one the
 * kernel reads.
 */
TEST_F(hotplug, kernel_reads_record)
{
	const volatile struct pvread_record *rec = pvst_rec(CPU);
	struct pvread_reference ref;
	int fd, tries;
	cpu_set_t set;

	if (access(ONLINE, F_OK))
		SKIP(return, "no cpu1 (one vCPU)");
	CPU_ZERO(&set);
	CPU_SET(CPU, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));
	fd = open(PVREAD_DEVICE, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	for (tries = 0; tries < 100; tries++) {
		uint32_t v = rec->pvclock.version;
		uint64_t mine;

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		ASSERT_TRUE(pvst_reference(fd, &ref))
			TH_LOG("PVREAD_IOC_REFERENCE: %s", strerror(errno));
		mine = pvst_pvclock_at(&rec->pvclock, ref.tsc);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if ((v & 1) || rec->pvclock.version != v || ref.version != v)
			continue;
		ksft_print_msg("cpu%d: the kernel read %llu on cpu%u, the page's record says %llu\n",
			       CPU, (unsigned long long)ref.cycles, ref.cpu,
			       (unsigned long long)mine);
		EXPECT_EQ((uint32_t)CPU, ref.cpu);
		EXPECT_EQ(mine, ref.cycles);
		break;
	}
	close(fd);
	EXPECT_GT(100, tries) TH_LOG("the record kept changing under 100 reads");
}

PVREAD_XEN_HARNESS_MAIN
