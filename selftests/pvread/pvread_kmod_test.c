// SPDX-License-Identifier: GPL-2.0
/*
 * pvread_kmod_test: the kernel side of pvread under what a guest does to it,
 * checked through the page user space maps (not through the module's own
 * word).  Run by pvread_kmod.sh in a Xen guest with pvread.ko loaded; each
 * subcommand but hdr and wait-mode prints KTAP (a result per check, figures
 * on "# " lines; no plan, as how many checks a subcommand makes depends on
 * the machine) and exits 1 if any check failed, 2 on bad usage or when the
 * page cannot be mapped.
 *
 *   pvread_kmod_test [--mode MODE] SUBCOMMAND...
 *
 *   hdr                 print the header, the line and the records (for the log)
 *   wait-mode MODE SEC  wait up to SEC seconds for header.mode == MODE
 *   stable              the stable-mode decision, as far as Xen shows it
 *   clocksource CS...   switch to each CS and back to xen
 *   hotplug CPU N       N offline/online cycles of CPU
 *   jumps               settimeofday, clock_settime, adjtimex, TAI (each
 *                       followed by the mirror check; the TAI offset and
 *                       the frequency are put back as they were)
 *   mirror [N]          N times: the page's conversion at one clocksource
 *                       value against the kernel's clocks there, to the ns
 *   registered [SEC [NAME]]  every online vCPU's record registered, by that
 *                       CPU itself, and rewritten by Xen within SEC
 *                       seconds (NAME: the tests' prefix, default registered)
 *   overtaken           a timekeeper update made while a measurement of the
 *                       records is held does not wait for it, and the
 *                       measurement is dropped (needs debugfs)
 *   line-rate [PPM]     the line's ns per TSC tick against every registered
 *                       record's, within PPM (default 10000, 1%)
 *
 * MODE is a number or a name: none, percpu, stable, line.  --mode is the
 * mode the module settles in when nothing disturbs it (default line; percpu
 * for a module loaded with line=0): what the subcommands wait for and check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "pvread_selftest.h"

#define CS_PATH "/sys/devices/system/clocksource/clocksource0/current_clocksource"
#define TOLERANCE "1000000000"

static const uint8_t *page;
static int failures;
static uint32_t expect_mode = PVREAD_MODE_LINE;

#define mode_name pvst_mode_name
#define line_name pvst_line_name

/* "line" or "3" -> 3; -1 if neither. */
static int parse_mode(const char *s)
{
	unsigned int i;
	char *end;
	long v;

	for (i = 0; i < PVST_NR_MODES; i++)
		if (!strcmp(s, pvst_mode_names[i]))
			return i;
	v = strtol(s, &end, 10);
	return *s && !*end && v >= 0 && v < 256 ? (int)v : -1;
}

static void report(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * One KTAP result.  Its name is the same in every run (what was seen goes
 * on "# " lines before it): vm/check's table is machine x name.
 */
static void report(bool ok, const char *fmt, ...)
{
	char name[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	ksft_test_result(ok, "%s\n", name);
	fflush(stdout);
	if (!ok)
		failures++;
}

static int64_t ts_ns(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static int64_t sys_ns(clockid_t clock)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, clock, &ts);
	return ts_ns(&ts);
}

static void map_page(void)
{
	const struct pvread_header *h;
	uint32_t size;
	int fd;

	fd = open(PVREAD_DEVICE, O_RDONLY);
	if (fd < 0) {
		perror(PVREAD_DEVICE);
		exit(2);
	}
	h = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	size = h->map_size;
	munmap((void *)h, 4096);
	page = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	close(fd);
}

/* A consistent copy of the header. */
static void snap(struct pvread_header *out)
{
	const volatile struct pvread_header *h = (const void *)page;
	uint32_t seq;

	for (;;) {
		seq = h->seq;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq & 1)
			continue;
		memcpy(out, (const void *)h, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (h->seq == seq)
			return;
	}
}

static const volatile struct pvread_record *rec(unsigned int cpu)
{
	const struct pvread_header *h = (const void *)page;

	return (const void *)(page + h->record_offset + cpu * h->record_stride);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	n = n < 0 ? -errno : 0;
	close(fd);
	return n;
}

static uint32_t rdtscp_aux(uint64_t *tsc)
{
	uint32_t lo, hi, aux;

	asm volatile("rdtscp" : "=a" (lo), "=d" (hi), "=c" (aux));
	if (tsc)
		*tsc = (uint64_t)hi << 32 | lo;
	return aux;
}

/* Seconds until header.mode == mode, or -1 after timeout. */
static double wait_mode(uint32_t mode, double timeout)
{
	int64_t t0 = sys_ns(CLOCK_MONOTONIC);
	struct pvread_header h;
	double t;

	for (;;) {
		snap(&h);
		t = (sys_ns(CLOCK_MONOTONIC) - t0) / 1e9;
		if (h.mode == mode)
			return t;
		if (t > timeout)
			return -1;
		sleep_s(0.02);
	}
}

static void print_hdr(void)
{
	struct pvread_header h;
	bool first = true;
	unsigned int i;

	snap(&h);
	printf("# mode=%u flags=%#x records=%u registered=%u stable_record=%u updates=%llu spread_ns=%llu bound_ns=%llu mult=%u shift=%u line_state=%u tsc_warp=%llu\n",
	       h.mode, h.flags, h.nr_records, h.nr_registered,
	       h.stable_record, (unsigned long long)h.updates,
	       (unsigned long long)h.spread_ns,
	       (unsigned long long)h.error_bound_ns, h.tk.mult, h.tk.shift,
	       h.line_state, (unsigned long long)h.tsc_warp);
	printf("# line: mode %s, line %s, anchors=%llu tsc_timestamp=%llu tsc_span=%llu mul=%u shift=%u raw_mul=%u raw_shift=%u\n",
	       mode_name(h.mode), line_name(h.line_state),
	       (unsigned long long)h.line.anchors,
	       (unsigned long long)h.line.tsc_timestamp,
	       (unsigned long long)h.line.tsc_span, h.line.mul, h.line.shift,
	       h.line.raw_mul, h.line.raw_shift);
	printf("# registered_list=");
	for (i = 0; i < h.nr_records; i++) {
		unsigned int j = i;

		if (!(rec(i)->state & PVREAD_RECORD_REGISTERED))
			continue;
		while (j + 1 < h.nr_records &&
		       (rec(j + 1)->state & PVREAD_RECORD_REGISTERED))
			j++;
		printf("%s%u", first ? "" : ",", i);
		if (j > i)
			printf("-%u", j);
		first = false;
		i = j;
	}
	printf("\n");
	for (i = 0; i < h.nr_records; i++)
		printf("# record %u: state=%u vcpu=%u version=%u flags=%#x tsc_timestamp=%llu mul=%u shift=%d\n",
		       i, rec(i)->state, rec(i)->xen_vcpu_id,
		       rec(i)->pvclock.version, rec(i)->pvclock.flags,
		       (unsigned long long)rec(i)->pvclock.tsc_timestamp,
		       rec(i)->pvclock.tsc_to_system_mul,
		       rec(i)->pvclock.tsc_shift);
}

static long bounded(const char *what, double seconds, long *fast_out);

/* ---- stable mode: what the emulated Xen lets us see ---- */

static void test_stable(void)
{
	struct pvread_header h;
	unsigned int i, stable = 0, registered = 0;
	bool cpu0_kernel;

	snap(&h);
	cpu0_kernel = h.flags & PVREAD_FLAG_CPU0_OWNED_BY_KERNEL;
	for (i = 0; i < h.nr_records; i++) {
		if (!(rec(i)->state & PVREAD_RECORD_REGISTERED))
			continue;
		registered++;
		if (rec(i)->pvclock.flags & 1)	/* PVCLOCK_TSC_STABLE_BIT */
			stable++;
	}
	printf("# %u records registered, %u with PVCLOCK_TSC_STABLE_BIT; vCPU 0's area %s\n",
	       registered, stable,
	       cpu0_kernel ? "owned by the kernel's vDSO" : "ours");
	printf("# stable: mode %s (%u), line %s (%u), stable_record %u; expected mode %s\n",
	       mode_name(h.mode), h.mode, line_name(h.line_state), h.line_state,
	       h.stable_record, mode_name(expect_mode));
	report(!!(h.flags & PVREAD_FLAG_TSC_STABLE) ==
	       (registered && stable == registered),
	       "stable: TSC_STABLE flag says whether every registered record has Xen's bit");
	report(!cpu0_kernel || !(rec(0)->state & PVREAD_RECORD_REGISTERED),
	       "stable: vCPU 0's record is not ours when the kernel owns its area");
	if (h.mode == PVREAD_MODE_STABLE)
		report(cpu0_kernel && (h.flags & PVREAD_FLAG_TSC_STABLE) &&
		       h.stable_record < h.nr_records &&
		       (rec(h.stable_record)->state & PVREAD_RECORD_REGISTERED),
		       "stable: mode stable names a registered record");
	else
		report(!(cpu0_kernel && (h.flags & PVREAD_FLAG_TSC_STABLE)) &&
		       h.mode == expect_mode,
		       "stable: without stable bit and kernel-owned vCPU 0, the expected mode");
	report((h.mode == PVREAD_MODE_LINE) == (h.line_state == PVREAD_LINE_ACTIVE),
	       "stable: line_state is active exactly when the mode is line");
	if (!stable) {
		pvst_skip("stable: mode stable published and read",
			  "Xen never sets PVCLOCK_TSC_STABLE_BIT under QEMU TCG (no invariant TSC)");
	} else if (h.mode == PVREAD_MODE_STABLE) {
		long fast, beyond = bounded("stable mode", 1, &fast);

		report(!beyond && fast,
		       "stable: mode stable published and read: every clock within the bound, fast");
	} else {
		pvst_skip("stable: mode stable published and read",
			  cpu0_kernel ? "the bit is there, but vCPU 0's area is the kernel's" :
			  "the bit is there, but vCPU 0's area is not the kernel's (the kernel did not see the bit at boot)");
	}
}

/* ---- clocksource switched away and back ---- */

static void test_clocksource(int argc, char **argv)
{
	struct pvread_header h0, h;
	struct pvread_info info;
	struct timespec ts;
	struct pvread_stats st0, st1;
	double t;
	int i, ret;

	if (!argc) {
		pvst_skip("clocksource: switch away from xen",
			  "no other clocksource available");
		return;
	}
	for (i = 0; i < argc; i++) {
		const char *cs = argv[i];

		t = wait_mode(expect_mode, 20);
		/* the library's first per-CPU read in a process is a syscall */
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		report(t >= 0, "clocksource: the expected mode before switching to %s",
		       cs);
		snap(&h0);
		ret = write_file(CS_PATH, cs);
		snap(&h);
		printf("# clocksource: %s: %s, mode %u, flags %#x, %llu update(s)\n",
		       cs, ret ? strerror(-ret) : "switched", h.mode, h.flags,
		       (unsigned long long)(h.updates - h0.updates));
		report(!ret && h.mode == PVREAD_MODE_NONE &&
		       !(h.flags & PVREAD_FLAG_XEN_CLOCKSOURCE) &&
		       h.updates > h0.updates,
		       "clocksource: %s: mode none when the switch returns", cs);
		sleep_s(1.5);
		h0 = h;
		snap(&h);
		pvread_get_info(&info);
		pvread_get_stats(&st0);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_get_stats(&st1);
		printf("# clocksource: %s: %llu updates in 1.5 s\n", cs,
		       (unsigned long long)(h.updates - h0.updates));
		report(h.mode == PVREAD_MODE_NONE && h.updates > h0.updates &&
		       !info.fast && st1.slow == st0.slow + 1,
		       "clocksource: %s: stays none over updates, library takes the syscall",
		       cs);
		ret = write_file(CS_PATH, "xen");
		snap(&h);
		printf("# clocksource: back to xen: mode %u\n", h.mode);
		report(!ret && (h.flags & PVREAD_FLAG_XEN_CLOCKSOURCE) &&
		       h.mode == PVREAD_MODE_NONE,
		       "clocksource: back to xen: xen flag at once, mode none during warmup");
		t = wait_mode(expect_mode, 20);
		pvread_get_info(&info);
		pvread_get_stats(&st0);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_get_stats(&st1);
		printf("# back on xen: mode %u, bound %llu ns, spread %llu ns, fast %d, read %s\n",
		       info.mode, (unsigned long long)info.error_bound_ns,
		       (unsigned long long)info.spread_ns, info.fast,
		       st1.fast > st0.fast ? "fast" : "slow");
		printf("# clocksource: back to xen: mode %s after %.2f s\n",
		       mode_name(expect_mode), t);
		report(t >= 0 && info.fast && st1.fast == st0.fast + 1,
		       "clocksource: back to xen: the expected mode, library fast again");
	}
}

/* ---- vCPU hotplug ---- */

static volatile bool stop_reader;
static long reader_reads, reader_back, reader_fast;

static void *reader(void *arg)
{
	struct timespec ts;
	struct pvread_stats st;
	int64_t last = 0, now;

	(void)arg;
	while (!stop_reader) {
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		now = ts_ns(&ts);
		if (now < last)
			reader_back++;
		last = now;
		reader_reads++;
	}
	pvread_get_stats(&st);
	reader_fast = st.fast;
	return NULL;
}

/*
 * pvclock's arithmetic, written out: @p at @tsc, as Xen defines it (the
 * kernel's __pvclock_read_cycles()).
 */
static uint64_t pvclock_at(const volatile struct pvread_pvclock *p,
			   uint64_t tsc)
{
	uint64_t d = tsc - p->tsc_timestamp;

	d = p->tsc_shift >= 0 ? d << p->tsc_shift : d >> -p->tsc_shift;
	return p->system_time +
	       (uint64_t)(((unsigned __int128)d * p->tsc_to_system_mul) >> 32);
}

/*
 * PVREAD_IOC_REFERENCE on @cpu (the caller runs there) until the record
 * did not change under it: the kernel's evaluation of cpu's record must be
 * the page's record evaluated at the same TSC, to the nanosecond.  0, or
 * -1 with the reason printed.
 */
static int reference_matches(int fd, int cpu, struct pvread_reference *ref)
{
	const volatile struct pvread_record *r = rec(cpu);
	int tries;

	for (tries = 0; tries < 100; tries++) {
		uint32_t v = r->pvclock.version;
		uint64_t mine;

		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (ioctl(fd, PVREAD_IOC_REFERENCE, ref)) {
			printf("# PVREAD_IOC_REFERENCE: %s\n", strerror(errno));
			return -1;
		}
		mine = pvclock_at(&r->pvclock, ref->tsc);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if ((v & 1) || r->pvclock.version != v || ref->version != v)
			continue;
		if (ref->cpu != (uint32_t)cpu || mine != ref->cycles) {
			printf("# cpu%d: the kernel read %llu on cpu%u, the page's record says %llu\n",
			       cpu, (unsigned long long)ref->cycles, ref->cpu,
			       (unsigned long long)mine);
			return -1;
		}
		return 0;
	}
	printf("# cpu%d: the record kept changing under 100 reads\n", cpu);
	return -1;
}

struct watch {
	int cpu;
	volatile bool give_up;
	bool ran;
	uint32_t aux, state, version;
	uint64_t tsc_timestamp, tsc;
	long tries;
};

/*
 * Get onto @cpu the moment the scheduler allows it, and look at once: is
 * the record registered and fresh, does rdtscp name the CPU?
 */
static void *watcher(void *arg)
{
	struct watch *w = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	while (!w->give_up) {
		w->tries++;
		if (sched_setaffinity(0, sizeof(set), &set)) {
			sched_yield();
			continue;
		}
		w->aux = rdtscp_aux(&w->tsc);
		w->state = rec(w->cpu)->state;
		w->version = rec(w->cpu)->pvclock.version;
		w->tsc_timestamp = rec(w->cpu)->pvclock.tsc_timestamp;
		{
			unsigned int on = ~0U;

			w->ran = syscall(SYS_getcpu, &on, NULL, NULL) == 0 &&
				 on == (unsigned int)w->cpu;
		}
		break;
	}
	return NULL;
}

static void test_hotplug(int cpu, int cycles)
{
	char path[128];
	struct pvread_header h0, h;
	int bad_off = 0, bad_hdr = 0, bad_first = 0, bad_aux = 0,
	    bad_after = 0, bad_write = 0, i, ret;
	struct pvread_reference ref;
	pthread_t rd, wt;
	uint32_t v_off;
	cpu_set_t set;
	int fd;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	snap(&h0);
	printf("# hotplug cpu%d: %d cycles; before: %u registered, flags %#x, mode %u\n",
	       cpu, cycles, h0.nr_registered, h0.flags, h0.mode);
	stop_reader = false;
	pthread_create(&rd, NULL, reader, NULL);
	for (i = 0; i < cycles; i++) {
		struct watch w = { .cpu = cpu };

		ret = write_file(path, "0");
		if (ret) {
			printf("# offline cpu%d: %s\n", cpu, strerror(-ret));
			bad_write++;
			break;
		}
		snap(&h);
		if (rec(cpu)->state & PVREAD_RECORD_REGISTERED)
			bad_off++;
		if (h.nr_registered != h0.nr_registered - 1 ||
		    !(h.flags & PVREAD_FLAG_TSC_AUX))
			bad_hdr++;
		v_off = rec(cpu)->pvclock.version;
		sleep_s(0.05);

		pthread_create(&wt, NULL, watcher, &w);
		ret = write_file(path, "1");
		if (ret) {
			printf("# online cpu%d: %s\n", cpu, strerror(-ret));
			bad_write++;
			w.give_up = true;
			pthread_join(wt, NULL);
			break;
		}
		sleep_s(0.2);
		w.give_up = true;
		pthread_join(wt, NULL);
		if (!w.ran || !(w.state & PVREAD_RECORD_REGISTERED) ||
		    (w.version & 1) || w.version == v_off ||
		    w.tsc_timestamp > w.tsc) {
			printf("# cycle %d: first look on cpu%d: ran %d state %u version %u (offline %u) tsc_timestamp %llu (now %llu)\n",
			       i, cpu, w.ran, w.state, w.version, v_off,
			       (unsigned long long)w.tsc_timestamp,
			       (unsigned long long)w.tsc);
			bad_first++;
		}
		if ((w.aux & PVREAD_TSC_AUX_CPU_MASK) != (uint32_t)cpu) {
			printf("# cycle %d: first rdtscp on cpu%d: aux %#x\n",
			       i, cpu, w.aux);
			bad_aux++;
		}
		snap(&h);
		if (!(rec(cpu)->state & PVREAD_RECORD_REGISTERED) ||
		    h.nr_registered != h0.nr_registered ||
		    !(h.flags & PVREAD_FLAG_TSC_AUX))
			bad_after++;
	}
	stop_reader = true;
	pthread_join(rd, NULL);

	printf("# hotplug: %d offline/online cycles of cpu%d; bad: %d writes, %d offline records, %d offline headers, %d first moments, %d first rdtscps, %d online headers\n",
	       i, cpu, bad_write, bad_off, bad_hdr, bad_first, bad_aux,
	       bad_after);
	report(!bad_write && i, "hotplug: offline/online cycles of cpu%d", cpu);
	report(!bad_off && i, "hotplug: record unregistered while cpu%d is offline",
	       cpu);
	report(!bad_hdr && i, "hotplug: offline: nr_registered one less, TSC_AUX flag kept");
	report(!bad_first && i, "hotplug: record registered and fresh at user space's first moment on cpu%d",
	       cpu);
	report(!bad_aux && i, "hotplug: first user rdtscp on cpu%d names it", cpu);
	report(!bad_after && i, "hotplug: online: nr_registered and flags back");
	printf("# reader: %ld reads (%ld fast), %ld backward steps\n",
	       reader_reads, reader_fast, reader_back);
	report(!reader_back && reader_reads,
	       "hotplug: CLOCK_MONOTONIC reader never went back across the cycles");

	/* The kernel reads the re-registered record like any other. */
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	fd = open(PVREAD_DEVICE, O_RDONLY);
	ret = fd < 0 ? -1 : reference_matches(fd, cpu, &ref);
	report(!ret && ref.cpu == (uint32_t)cpu,
	       "hotplug: kernel reads cpu%d's record after the cycles, as the page holds it", cpu);
	if (fd >= 0)
		close(fd);
	CPU_ZERO(&set);
	for (i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* ---- time jumps and slews ---- */

struct clk {
	clockid_t id;
	const char *name;
};

static const struct clk clks[] = {
	{ CLOCK_REALTIME, "REALTIME" },
	{ CLOCK_MONOTONIC, "MONOTONIC" },
	{ CLOCK_BOOTTIME, "BOOTTIME" },
	{ CLOCK_TAI, "TAI" },
	{ CLOCK_MONOTONIC_RAW, "MONOTONIC_RAW" },
};

/*
 * Library reads of every clock for @secs, each between two kernel reads
 * widened by the published bound.  Returns the number outside; counts fast.
 */
/* "bound 12, delta 3": the fallbacks between two pvread_get_stats(). */
static void slow_reasons(char *buf, size_t len, const struct pvread_stats *st0,
			 const struct pvread_stats *st1)
{
	size_t used = 0;
	unsigned int j;

	buf[0] = '\0';
	for (j = 0; j < PVREAD_SLOW_NR_REASONS && used < len; j++)
		if (st1->slow_by_reason[j] != st0->slow_by_reason[j])
			used += snprintf(buf + used, len - used, "%s%s %llu",
					 used ? ", " : "",
					 pvread_slow_reason_name(j),
					 (unsigned long long)(st1->slow_by_reason[j] -
							      st0->slow_by_reason[j]));
	if (!used)
		snprintf(buf, len, "none");
}

/* The page's mode, bound, and how old its line is against its span. */
static void print_page_state(const char *what)
{
	struct pvread_header h;
	uint64_t tsc;

	snap(&h);
	rdtscp_aux(&tsc);
	printf("# %s: page mode %s, line %s, bound %llu ns, line anchored %lld ticks ago (span %llu), %llu lines, %llu updates\n",
	       what, mode_name(h.mode), line_name(h.line_state),
	       (unsigned long long)h.error_bound_ns,
	       (long long)(tsc - h.line.tsc_timestamp),
	       (unsigned long long)h.line.tsc_span,
	       (unsigned long long)h.line.anchors,
	       (unsigned long long)h.updates);
}

static long bounded(const char *what, double secs, long *fast_out)
{
	int64_t end = sys_ns(CLOCK_MONOTONIC) + (int64_t)(secs * 1e9);
	struct pvread_stats st0, st1;
	long beyond = 0, reads = 0;
	struct pvread_info info;
	struct timespec ts;
	int64_t k0, k1, v, b;
	unsigned int i;
	char why[200];

	print_page_state(what);
	pvread_get_stats(&st0);
	do {
		for (i = 0; i < sizeof(clks) / sizeof(clks[0]); i++) {
			pvread_get_info(&info);
			b = info.error_bound_ns > (uint64_t)INT64_MAX / 4 ?
				INT64_MAX / 4 : (int64_t)info.error_bound_ns;
			k0 = sys_ns(clks[i].id);
			pvread_clock_gettime(clks[i].id, &ts);
			k1 = sys_ns(clks[i].id);
			v = ts_ns(&ts);
			reads++;
			if (v < k0 - b || v > k1 + b) {
				if (beyond++ < 5)
					printf("# %s: %s %lld not in [%lld, %lld] +- %lld\n",
					       what, clks[i].name, (long long)v,
					       (long long)k0, (long long)k1,
					       (long long)b);
			}
		}
	} while (sys_ns(CLOCK_MONOTONIC) < end);
	pvread_get_stats(&st1);
	*fast_out = st1.fast - st0.fast;
	slow_reasons(why, sizeof(why), &st0, &st1);
	printf("# %s: %ld reads, %ld fast, %ld beyond the bound; fallbacks: %s\n",
	       what, reads, *fast_out, beyond, why);
	if (*fast_out < reads / 2)
		print_page_state(what);
	return beyond;
}

/*
 * One library read of @clock between two kernel reads: within the published
 * bound of them?  *@dev is how far outside the bracket it fell (0 inside),
 * *@fast whether the page answered rather than libc.
 */
static bool bracketed_once(clockid_t clock, int64_t *dev, bool *fast)
{
	struct pvread_stats st0, st1;
	struct pvread_info info;
	struct timespec ts;
	int64_t k0, k1, v, b;

	pvread_get_info(&info);
	pvread_get_stats(&st0);
	b = info.error_bound_ns > (uint64_t)INT64_MAX / 4 ?
		INT64_MAX / 4 : (int64_t)info.error_bound_ns;
	k0 = sys_ns(clock);
	pvread_clock_gettime(clock, &ts);
	k1 = sys_ns(clock);
	pvread_get_stats(&st1);
	*fast = st1.fast != st0.fast;
	if (!*fast) {
		char why[100];

		slow_reasons(why, sizeof(why), &st0, &st1);
		printf("# clock %d read via libc: %s\n", clock, why);
		print_page_state("at that read");
	}
	v = ts_ns(&ts);
	*dev = v < k0 ? v - k0 : (v > k1 ? v - k1 : 0);
	return v >= k0 - b && v <= k1 + b;
}

static bool wait_mult_change(uint32_t from, double timeout, uint32_t *to)
{
	int64_t t0 = sys_ns(CLOCK_MONOTONIC);
	struct pvread_header h;

	do {
		snap(&h);
		if (h.tk.mult != from) {
			*to = h.tk.mult;
			return true;
		}
		sleep_s(0.05);
	} while ((sys_ns(CLOCK_MONOTONIC) - t0) / 1e9 < timeout);
	*to = h.tk.mult;
	return false;
}

/* ---- the page's conversion against the kernel's own clocks ---- */

static const struct {
	clockid_t id;
	const char *name;
} mirror_clocks[] = {
	{ CLOCK_REALTIME, "REALTIME" },
	{ CLOCK_MONOTONIC, "MONOTONIC" },
	{ CLOCK_BOOTTIME, "BOOTTIME" },
	{ CLOCK_TAI, "TAI" },
	{ CLOCK_MONOTONIC_RAW, "MONOTONIC_RAW" },
	{ CLOCK_REALTIME_COARSE, "REALTIME_COARSE" },
	{ CLOCK_MONOTONIC_COARSE, "MONOTONIC_COARSE" },
};
#define NR_MIRROR_CLOCKS (sizeof(mirror_clocks) / sizeof(mirror_clocks[0]))

/*
 * Clock @id at clocksource value @c by the page's conversion, as the vDSO
 * computes it from its data: the base plus (delta * mult + base's shifted
 * ns) >> shift; a coarse clock is its base.
 */
static int64_t mirror_ns(const struct pvread_timekeeper *tk, clockid_t id,
			 uint64_t c)
{
	const struct pvread_clock_base *b = &tk->base[id];
	uint64_t last = tk->cycle_last, d;
	uint32_t mult = tk->mult, shift = tk->shift;

	if (id == CLOCK_REALTIME_COARSE || id == CLOCK_MONOTONIC_COARSE)
		return b->sec * 1000000000LL + (int64_t)b->snsec;
	if (id == CLOCK_MONOTONIC_RAW) {
		last = tk->raw_cycle_last;
		mult = tk->raw_mult;
		shift = tk->raw_shift;
	}
	d = (c - last) & tk->mask;
	if (d & ~(tk->mask >> 1))	/* behind cycle_last: the kernel says 0 */
		d = 0;
	return b->sec * 1000000000LL +
	       (int64_t)(((unsigned __int128)d * mult + b->snsec) >> shift);
}

/*
 * @n times: the kernel's clocks at one clocksource value and the page's
 * conversion from the same timekeeper update (PVREAD_IOC_KERNEL_TIME) must
 * agree to the nanosecond: the page holds what update_vsyscall() gives the
 * vDSO, and the kernel's ktime arithmetic gives the same integer.  One
 * exception: MONOTONIC_COARSE, which the module holds where the kernel's
 * steps back (before Linux 6.15, by about a microsecond when NTP changes
 * the rate): there the page may be ahead by up to PVREAD_COARSE_HOLD_NS.
 * Returns false on any difference, after printing the first few.
 */
#define PVREAD_COARSE_HOLD_NS 10000
static bool mirror_exact(const char *what, int n)
{
	int64_t worst[NR_MIRROR_CLOCKS] = { 0 };
	long compared = 0, off = 0, held = 0, retries = 0;
	struct pvread_kernel_time kt;
	struct pvread_header h;
	unsigned int c;
	int fd, i;

	fd = open(PVREAD_DEVICE, O_RDONLY);
	if (fd < 0) {
		printf("# %s: open %s: %s\n", what, PVREAD_DEVICE, strerror(errno));
		return false;
	}
	for (i = 0; i < n; i++) {
		if (ioctl(fd, PVREAD_IOC_KERNEL_TIME, &kt)) {
			printf("# %s: PVREAD_IOC_KERNEL_TIME: %s\n", what,
			       strerror(errno));
			close(fd);
			return false;
		}
		snap(&h);
		if (h.updates != kt.updates) {
			/* an update came between: try again */
			if (++retries > 100L * n)
				break;
			i--;
			continue;
		}
		compared++;
		for (c = 0; c < NR_MIRROR_CLOCKS; c++) {
			clockid_t id = mirror_clocks[c].id;
			int64_t d = mirror_ns(&h.tk, id, kt.cycles) - kt.ns[id];

			if (id == CLOCK_MONOTONIC_COARSE && d > 0 &&
			    d <= PVREAD_COARSE_HOLD_NS) {
				held++;
			} else if (d) {
				if (off++ < 5)
					printf("# %s: %s: page %lld, kernel %lld (%+lld ns) at cycles %llu, update %llu\n",
					       what, mirror_clocks[c].name,
					       (long long)mirror_ns(&h.tk, id, kt.cycles),
					       (long long)kt.ns[id], (long long)d,
					       (unsigned long long)kt.cycles,
					       (unsigned long long)kt.updates);
			}
			if (llabs(d) > llabs(worst[c]))
				worst[c] = d;
		}
	}
	close(fd);
	printf("# %s: %ld conversions compared (%ld retried for an update between), %ld differences, MONOTONIC_COARSE held %ld times; largest differences:",
	       what, compared, retries, off, held);
	for (c = 0; c < NR_MIRROR_CLOCKS; c++)
		printf(" %s %+lld", mirror_clocks[c].name, (long long)worst[c]);
	printf("\n");
	return compared == n && !off;
}

static void test_mirror(int n)
{
	struct pvread_header h;

	snap(&h);
	report(mirror_exact("mirror", n),
	       "mirror: the page's conversion is the kernel's, to the nanosecond, for every clock");
	printf("# mirror: kernel %s, mode %s\n", h.flags & PVREAD_FLAG_XEN_CLOCKSOURCE ?
	       "on xen" : "not on xen", mode_name(h.mode));
}

/* ---- the timekeeper's update never waits for a measurement ---- */

#define DEBUGFS "/sys/kernel/debug/pvread/"
#define HOLD_PARAM "/sys/module/pvread/parameters/test_measure_hold_ms"

/* A number from a one-line file; -1 if unreadable. */
static long long read_number(const char *path)
{
	FILE *f = fopen(path, "r");
	long long v = -1;

	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static bool write_string(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = fputs(s, f) >= 0;
	return fclose(f) == 0 && ok;
}

static int set_tai(int tai)
{
	struct timex tx = { .modes = ADJ_TAI, .constant = tai };

	return adjtimex(&tx);
}

/*
 * After each timekeeper update the module looks at every vCPU's record;
 * the update itself (the notifier, inside the timekeeper's write section,
 * which every ktime_get() on every CPU waits for) must not wait for that
 * look, which grows with the vCPUs.  So: one measurement is held 200 ms in
 * its look (test_measure_hold_ms) while this process, on another CPU, makes
 * two updates (the TAI offset there and back).  The module counts the
 * updates that came while a measurement was looking, and the measurements
 * it dropped because an update overtook them: with the look under the
 * module's lock both stay 0.  The module never holds the CPU that wrote the
 * parameter; the measurements run on the CPU that made the update, the
 * tick's, so each attempt writes from another of this process's CPUs.
 */
static void test_overtaken(void)
{
	long long w0, w1 = -1, s0, s1 = -1;
	struct timex tx = { 0 };
	int attempt, attempts = 0, tai, tai_set, i, cpu = -1;
	bool taken = false;
	cpu_set_t allowed, set;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) ||
	    CPU_COUNT(&allowed) < 2) {
		pvst_skip("measure: an update does not wait for the records' measurement",
			  "one vCPU: the held measurement would hold the only CPU");
		return;
	}
	adjtimex(&tx);
	tai = tx.tai;
	tai_set = tai == 37 ? 36 : 37;
	w0 = read_number(DEBUGFS "updates_while_measuring");
	s0 = read_number(DEBUGFS "measure_stale");
	if (w0 < 0 || s0 < 0 || read_number(HOLD_PARAM) < 0) {
		printf("# measure: no %s or %s\n",
		       DEBUGFS "updates_while_measuring", HOLD_PARAM);
		report(false, "measure: an update does not wait for the records' measurement");
		return;
	}
	for (attempt = 1; attempt <= 6; attempt++) {
		attempts = attempt;
		do
			cpu = (cpu + 1) % CPU_SETSIZE;
		while (!CPU_ISSET(cpu, &allowed));
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			break;
		if (!write_string(HOLD_PARAM, "200"))
			break;
		/* Taken by the measurement after the next tick's update. */
		for (i = 0; i < 2000 && read_number(HOLD_PARAM) != 0; i++)
			usleep(1000);
		taken = read_number(HOLD_PARAM) == 0;
		if (set_tai(tai_set) < 0 || set_tai(tai) < 0)
			break;
		usleep(300000);
		w1 = read_number(DEBUGFS "updates_while_measuring");
		s1 = read_number(DEBUGFS "measure_stale");
		if (w1 > w0)
			break;
	}
	write_string(HOLD_PARAM, "0");
	sched_setaffinity(0, sizeof(allowed), &allowed);
	printf("# measure: updates while a measurement looked %lld -> %lld, measurements dropped %lld -> %lld, %d attempt(s), the last from cpu%d\n",
	       w0, w1, s0, s1, attempts, cpu);
	report(taken && w1 > w0,
	       "measure: an update does not wait for the records' measurement");
	report(s1 > s0, "measure: a measurement an update overtook is dropped");
	report(mirror_exact("measure", 100),
	       "measure: after the held measurement: the page's conversion is the kernel's");
	memset(&tx, 0, sizeof(tx));
	adjtimex(&tx);
	printf("# measure: TAI offset %d, was %d\n", tx.tai, tai);
	report(tx.tai == tai, "measure: TAI offset put back");
}

/* ---- registration: every online vCPU, by itself, kept current ---- */

/* The CPUs in sysfs list @path ("0-1,3"), as a mask; -1 if unreadable. */
static int cpu_list(const char *path, uint64_t *mask)
{
	char buf[256], *p = buf, *end;
	FILE *f = fopen(path, "r");
	long a, b;

	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	*mask = 0;
	while (*p && *p != '\n') {
		a = strtol(p, &end, 10);
		if (end == p || a < 0 || a > 63)
			return -1;
		b = a;
		p = end;
		if (*p == '-') {
			b = strtol(p + 1, &end, 10);
			if (end == p + 1 || b < a || b > 63)
				return -1;
			p = end;
		}
		for (; a <= b; a++)
			*mask |= 1ULL << a;
		if (*p == ',')
			p++;
	}
	return 0;
}

/*
 * Every online vCPU's record registered (vCPU 0's not when it is the
 * kernel's), by that CPU itself (Xen fills a record from the calling
 * vCPU's calibration), no other; and each written by Xen within @sec
 * seconds: an area Xen let go of (the module leaves its version odd) or
 * one registered only in the module's word would stand still.
 */
static void test_registered(double sec, const char *what)
{
	uint64_t online, want, have = 0, moved = 0, seen, odd = 0;
	uint64_t ts0[64] = { 0 }, self = 0;
	struct pvread_header h;
	int64_t end;
	unsigned int i;

	snap(&h);
	if (cpu_list("/sys/devices/system/cpu/online", &online) ||
	    h.nr_records > 64) {
		printf("# %s: cannot read the online CPUs\n", what);
		report(false, "%s: every online vCPU's record, no other", what);
		return;
	}
	want = online;
	if (h.flags & PVREAD_FLAG_CPU0_OWNED_BY_KERNEL)
		want &= ~1ULL;
	if (!want) {
		char name[128];

		snprintf(name, sizeof(name), "%s: every online vCPU's record, no other",
			 what);
		pvst_skip(name, "the one vCPU's area is the kernel's: nothing to register");
		return;
	}
	/* A resume registers in a work item: give it until @sec. */
	end = sys_ns(CLOCK_MONOTONIC) + (int64_t)(sec * 1e9);
	do {
		have = 0;
		self = 0;
		for (i = 0; i < h.nr_records; i++) {
			if (!(rec(i)->state & PVREAD_RECORD_REGISTERED))
				continue;
			have |= 1ULL << i;
			if (rec(i)->registered_on == i)
				self |= 1ULL << i;
			ts0[i] = rec(i)->pvclock.tsc_timestamp;
		}
		if (have == want && self == have)
			break;
		sleep_s(0.01);
	} while (sys_ns(CLOCK_MONOTONIC) < end);
	printf("# %s: online %#llx, expected %#llx, in the page %#llx, by themselves %#llx\n",
	       what, (unsigned long long)online, (unsigned long long)want,
	       (unsigned long long)have, (unsigned long long)self);
	report(have == want, "%s: every online vCPU's record, no other", what);
	report(self == have && have, "%s: each record by its own CPU", what);

	/* An idle vCPU still wakes for its timers, and Xen updates its
	 * records whenever it schedules it. */
	end = sys_ns(CLOCK_MONOTONIC) + (int64_t)(sec * 1e9);
	do {
		seen = 0;
		for (i = 0; i < h.nr_records; i++) {
			uint32_t v;

			if (!(have & (1ULL << i)))
				continue;
			v = rec(i)->pvclock.version;
			if (v & 1)
				odd |= 1ULL << i;
			else if (rec(i)->pvclock.tsc_timestamp != ts0[i])
				moved |= 1ULL << i;
			seen |= 1ULL << i;
		}
		if ((moved & have) == have)
			break;
		sleep_s(0.01);
	} while (sys_ns(CLOCK_MONOTONIC) < end);
	printf("# %s: rewritten by Xen within %.1f s: %#llx of %#llx (seen odd: %#llx)\n",
	       what, sec, (unsigned long long)moved, (unsigned long long)have,
	       (unsigned long long)odd);
	report((moved & have) == have && have,
	       "%s: Xen keeps every registered record current", what);
}

static void test_jumps(void)
{
	struct pvread_header h0, h;
	struct timespec ts, lib;
	struct timeval tv;
	struct timex tx, saved = { 0 };
	int tai_set;
	long fast, beyond;
	int64_t mono0, mono1, dev;
	bool inside, from_page;
	uint32_t mult;
	bool changed;
	int ret;

	report(wait_mode(expect_mode, 20) >= 0,
	       "jumps: the expected mode to start with");
	adjtimex(&saved);
	beyond = bounded("steady", 1, &fast);
	report(!beyond && fast, "jumps: steady: every clock within the bound, fast");

	/* settimeofday: an hour forward */
	snap(&h0);
	mono0 = sys_ns(CLOCK_MONOTONIC);
	gettimeofday(&tv, NULL);
	tv.tv_sec += 3600;
	ret = settimeofday(&tv, NULL);
	snap(&h);
	inside = bracketed_once(CLOCK_REALTIME, &dev, &from_page);
	printf("# jumps: settimeofday +3600 s: %s, %lld ns outside the syscalls' bracket\n",
	       from_page ? "read from the page" : "read via libc", (long long)dev);
	report(!ret && h.updates > h0.updates && inside && from_page,
	       "jumps: settimeofday +3600 s: in the page when it returns");
	beyond = bounded("after +3600 s", 0.5, &fast);
	report(!beyond && fast, "jumps: after settimeofday +3600 s: every clock within the bound");
	report(mirror_exact("after +3600 s", 1000),
	       "jumps: after settimeofday +3600 s: the page's conversion is the kernel's");

	/* clock_settime: back again, and an hour more */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec -= 7200;
	ret = clock_settime(CLOCK_REALTIME, &ts);
	inside = bracketed_once(CLOCK_REALTIME, &dev, &from_page);
	printf("# jumps: clock_settime -7200 s: %s, %lld ns outside the syscalls' bracket\n",
	       from_page ? "read from the page" : "read via libc", (long long)dev);
	report(!ret && inside && from_page,
	       "jumps: clock_settime -7200 s: in the page when it returns");
	beyond = bounded("after -7200 s", 0.5, &fast);
	report(!beyond && fast, "jumps: after clock_settime -7200 s: every clock within the bound");
	report(mirror_exact("after -7200 s", 1000),
	       "jumps: after clock_settime -7200 s: the page's conversion is the kernel's");
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 3600;
	clock_settime(CLOCK_REALTIME, &ts);
	mono1 = sys_ns(CLOCK_MONOTONIC);
	pvread_clock_gettime(CLOCK_MONOTONIC, &lib);
	report(ts_ns(&lib) >= mono0 && ts_ns(&lib) - mono1 < 1000000000LL,
	       "jumps: CLOCK_MONOTONIC did not jump with the wall clock");

	/* TAI offset */
	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_TAI;
	tai_set = saved.tai == 37 ? 36 : 37;
	tx.constant = tai_set;
	ret = adjtimex(&tx);
	report(mirror_exact("TAI offset", 1000),
	       "jumps: after adjtimex ADJ_TAI: the page's conversion is the kernel's");
	{
		struct timespec r, t;

		pvread_clock_gettime(CLOCK_REALTIME, &r);
		pvread_clock_gettime(CLOCK_TAI, &t);
		printf("# jumps: adjtimex ADJ_TAI: library CLOCK_TAI - CLOCK_REALTIME = %.3f s (set %d)\n",
		       (ts_ns(&t) - ts_ns(&r)) / 1e9, tai_set);
		report(ret >= 0 && llabs(ts_ns(&t) - ts_ns(&r) - tai_set * 1000000000LL) < 100000000LL,
		       "jumps: adjtimex ADJ_TAI: library CLOCK_TAI - CLOCK_REALTIME is the offset");
	}

	/* frequency: +500 ppm, then back */
	snap(&h0);
	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_FREQUENCY;
	tx.freq = 500 << 16;
	ret = adjtimex(&tx);
	/*
	 * At once, before the next tick: an update that changed the rate
	 * without accumulating moves xtime_nsec back, and since Linux 6.15
	 * not the coarse clocks (coarse_nsec).
	 */
	report(mirror_exact("right after adjtimex +500 ppm", 20),
	       "jumps: right after adjtimex +500 ppm: the page's conversion is the kernel's");
	changed = wait_mult_change(h0.tk.mult, 3, &mult);
	printf("# jumps: adjtimex +500 ppm: mult %u -> %u in the page\n",
	       h0.tk.mult, mult);
	report(ret >= 0 && changed, "jumps: adjtimex +500 ppm: mult changes in the page");
	beyond = bounded("slewing +500 ppm", 1.5, &fast);
	snap(&h);
	printf("# +500 ppm: line mul %u -> %u (shift %u -> %u), %llu lines anchored meanwhile\n",
	       h0.line.mul, h.line.mul, h0.line.shift, h.line.shift,
	       (unsigned long long)(h.line.anchors - h0.line.anchors));
	report(!beyond && fast, "jumps: while +500 ppm: every clock within the bound");
	report(mirror_exact("slewing +500 ppm", 1000),
	       "jumps: while +500 ppm: the page's conversion is the kernel's");
	snap(&h0);
	tx.modes = ADJ_FREQUENCY;
	tx.freq = 0;
	adjtimex(&tx);
	changed = wait_mult_change(h0.tk.mult, 3, &mult);
	printf("# jumps: adjtimex frequency 0: mult %u -> %u\n", h0.tk.mult, mult);
	report(changed, "jumps: adjtimex frequency 0: mult changes back");

	/* offset slew (adjtime-style): +0.2 s at 500 ppm */
	snap(&h0);
	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_OFFSET_SINGLESHOT;
	tx.offset = 200000;	/* us */
	ret = adjtimex(&tx);
	changed = wait_mult_change(h0.tk.mult, 3, &mult);
	printf("# jumps: adjtimex offset slew +0.2 s: mult %u -> %u in the page\n",
	       h0.tk.mult, mult);
	report(ret >= 0 && changed,
	       "jumps: adjtimex offset slew +0.2 s: mult changes in the page");
	beyond = bounded("offset slew", 1.5, &fast);
	report(!beyond && fast, "jumps: during the offset slew: every clock within the bound");
	report(mirror_exact("offset slew", 1000),
	       "jumps: during the offset slew: the page's conversion is the kernel's");
	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_OFFSET_SINGLESHOT;
	tx.offset = 0;
	adjtimex(&tx);

	/* What this test changed, as it was: the TAI offset, the frequency. */
	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_TAI;
	tx.constant = saved.tai;
	ret = adjtimex(&tx);
	memset(&tx, 0, sizeof(tx));
	tx.modes = ADJ_FREQUENCY;
	tx.freq = saved.freq;
	ret = ret < 0 ? ret : adjtimex(&tx);
	memset(&tx, 0, sizeof(tx));
	adjtimex(&tx);
	printf("# jumps: TAI %d, freq %ld; were %d, %ld\n", tx.tai, (long)tx.freq,
	       saved.tai, (long)saved.freq);
	report(ret >= 0 && tx.tai == saved.tai && tx.freq == saved.freq,
	       "jumps: TAI offset and frequency put back");
}

/* ---- the line's rate against the records' ---- */

static void test_line_rate(long limit_ppm)
{
	struct pvread_header h;
	double line_ns, rec_ns, worst = 0;
	unsigned int i, n = 0, worst_cpu = 0;

	snap(&h);
	if (h.mode != PVREAD_MODE_LINE) {
		printf("# line: mode %s, line %s\n", mode_name(h.mode),
		       line_name(h.line_state));
		pvst_skip("line: its rate is the records'", "no line in use");
		return;
	}
	/* ns = (d << shift) * mul >> 32; Xen's: (d <<|>> tsc_shift) * mul >> 32 */
	line_ns = h.line.mul * (double)(1ULL << h.line.shift) / 4294967296.0;
	for (i = 0; i < h.nr_records; i++) {
		const volatile struct pvread_pvclock *p = &rec(i)->pvclock;
		double dev;

		if (!(rec(i)->state & PVREAD_RECORD_REGISTERED))
			continue;
		rec_ns = p->tsc_to_system_mul / 4294967296.0;
		rec_ns = p->tsc_shift >= 0 ? rec_ns * (1ULL << p->tsc_shift) :
					     rec_ns / (1ULL << -p->tsc_shift);
		dev = (line_ns - rec_ns) / rec_ns * 1e6;
		printf("# line: %.6f ns per TSC tick; record %u: %.6f (mul %u shift %d): %+.0f ppm\n",
		       line_ns, i, rec_ns, p->tsc_to_system_mul, p->tsc_shift, dev);
		if (fabs(dev) >= fabs(worst)) {
			worst = dev;
			worst_cpu = i;
		}
		n++;
	}
	printf("# line: %u records, worst %+.0f ppm on record %u, limit %ld\n",
	       n, worst, worst_cpu, limit_ppm);
	report(n && fabs(worst) <= limit_ppm, "line: its rate is the records'");
}

static void usage(void)
{
	fprintf(stderr, "usage: pvread_kmod_test [--mode MODE] hdr | wait-mode MODE SEC | stable | clocksource CS... |\n"
		"                        hotplug CPU N | jumps | line-rate [PPM] | mirror [N] |\n"
		"                        registered [SEC [NAME]] | overtaken\n"
		"  MODE: none, percpu, stable, line or a number; --mode: the mode to expect (default line)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	setenv("PVREAD_MAX_ERROR_NS", TOLERANCE, 1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && !strcmp(argv[1], "--mode")) {
		int m = parse_mode(argv[2]);

		if (m < 0)
			usage();
		expect_mode = m;
		argc -= 2;
		argv += 2;
	}
	if (argc < 2)
		usage();
	map_page();
	if (strcmp(argv[1], "hdr") && strcmp(argv[1], "wait-mode"))
		ksft_print_header();
	if (!strcmp(argv[1], "hdr")) {
		print_hdr();
	} else if (!strcmp(argv[1], "wait-mode") && argc == 4) {
		int m = parse_mode(argv[2]);
		double t;

		if (m < 0)
			usage();
		t = wait_mode(m, atof(argv[3]));
		printf("# mode %s %s after %.2f s\n", mode_name(m),
		       t < 0 ? "not reached" : "reached", t);
		return t < 0;
	} else if (!strcmp(argv[1], "line-rate") && argc <= 3) {
		test_line_rate(argc == 3 ? atol(argv[2]) : 10000);
	} else if (!strcmp(argv[1], "stable")) {
		test_stable();
	} else if (!strcmp(argv[1], "clocksource")) {
		test_clocksource(argc - 2, argv + 2);
	} else if (!strcmp(argv[1], "hotplug") && argc == 4) {
		test_hotplug(atoi(argv[2]), atoi(argv[3]));
	} else if (!strcmp(argv[1], "jumps")) {
		test_jumps();
	} else if (!strcmp(argv[1], "mirror") && argc <= 3) {
		test_mirror(argc == 3 ? atoi(argv[2]) : 10000);
	} else if (!strcmp(argv[1], "overtaken") && argc == 2) {
		test_overtaken();
	} else if (!strcmp(argv[1], "registered") && argc <= 4) {
		test_registered(argc >= 3 ? atof(argv[2]) : 5,
				argc == 4 ? argv[3] : "registered");
	} else {
		usage();
	}
	return failures ? 1 : 0;
}
