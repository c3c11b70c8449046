/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The page itself, for the tests of the module under what a guest does to
 * it (pvread_hotplug, pvread_settime, pvread_registered, ...): the whole
 * mapping (the header and every record), a consistent copy of the header,
 * the kernel's clocks against the page's conversion to the nanosecond,
 * every clock read for a while within the published bound.
 */
#ifndef PVREAD_PAGE_H
#define PVREAD_PAGE_H

#include "pvread_selftest.h"

/*
 * The mapping, header, records and the whole timekeeper (header.map_size);
 * NULL when the device cannot be mapped, as for anyone without
 * CAP_SYS_ADMIN: the tests run as root.  Made once per process: call it
 * first in a test's setup, before any thread.
 */
static inline const uint8_t *pvst_map(void)
{
	static const uint8_t *page;
	const struct pvread_header *h;
	uint32_t size;
	void *p;
	int fd;

	if (page)
		return page;
	fd = open(PVREAD_DEVICE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	h = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		close(fd);
		return NULL;
	}
	size = h->map_size;
	munmap((void *)h, sysconf(_SC_PAGESIZE));
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	page = p;
	return page;
}

static inline uint64_t pvst_rdtsc(void);

/*
 * A consistent copy of the header (pvst_map() succeeded), its tk the
 * whole timekeeper from header.priv_tk_offset (the header's own has no
 * cycle_last), and with @tsc the TSC read inside its seq loop: the header
 * that TSC belongs to.
 */
static inline void pvst_snap_tsc(struct pvread_header *out, uint64_t *tsc)
{
	const volatile struct pvread_header *h = (const void *)pvst_map();
	uint32_t seq;

	for (;;) {
		seq = h->seq;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (seq & 1) {
			sched_yield();
			continue;
		}
		memcpy(out, (const void *)h, sizeof(*out));
		memcpy(&out->tk, (const uint8_t *)h + h->priv_tk_offset,
		       sizeof(out->tk));
		if (tsc)
			*tsc = pvst_rdtsc();
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (h->seq == seq)
			return;
	}
}

static inline void pvst_snap(struct pvread_header *out)
{
	pvst_snap_tsc(out, NULL);
}

/* vCPU @cpu's record, as Xen and the module write it. */
static inline const volatile struct pvread_record *pvst_rec(unsigned int cpu)
{
	const uint8_t *page = pvst_map();
	const struct pvread_header *h = (const void *)page;

	return (const void *)(page + h->record_offset + cpu * h->record_stride);
}

static inline void pvst_sleep(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

/* @val into the sysfs or debugfs file @path: 0 or -errno. */
static inline int pvst_write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	n = n < 0 ? -errno : 0;
	close(fd);
	return n;
}

/* A number from a one-line file; -1 if unreadable. */
/*
 * The module's refresh of the records (sysfs refresh: "active", "off",
 * ...) into @buf; "absent" on a module without it.
 */
static inline void pvst_refresh_state(char *buf, size_t len)
{
	FILE *f = fopen("/sys/class/misc/pvread/refresh", "r");

	if (!f || !fgets(buf, len, f))
		snprintf(buf, len, "absent");
	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static inline long long pvst_read_number(const char *path)
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

/*
 * pvclock's arithmetic, written out: @p at @tsc, as Xen defines it (the
 * kernel's __pvclock_read_cycles()); @tsc not before @p's stamp.
 */
static inline uint64_t pvst_pvclock_at(const volatile struct pvread_pvclock *p,
				       uint64_t tsc)
{
	uint64_t d = tsc - p->tsc_timestamp;

	d = p->tsc_shift >= 0 ? d << p->tsc_shift : d >> -p->tsc_shift;
	return p->system_time +
	       (uint64_t)(((unsigned __int128)d * p->tsc_to_system_mul) >> 32);
}

/* The TSC, by an ordered rdtsc (lfence; rdtsc), on any CPU. */
static inline uint64_t pvst_rdtsc(void)
{
	uint32_t lo, hi;

	asm volatile("lfence; rdtsc" : "=a" (lo), "=d" (hi) : : "memory");
	return (uint64_t)hi << 32 | lo;
}

/* The page's mode, bound, and how old its line is against its span. */
static inline void pvst_print_page(const char *what)
{
	struct pvread_header h;
	uint64_t tsc;

	pvst_snap(&h);
	tsc = pvst_rdtsc();
	ksft_print_msg("%s: page mode %s, line %s, bound %llu ns, line anchored %lld ticks ago (span %llu), %llu lines, %llu updates\n",
		       what, pvst_mode_name(h.mode),
		       pvst_line_name(h.line_state),
		       (unsigned long long)h.error_bound_ns,
		       (long long)(tsc - h.line.tsc_timestamp),
		       (unsigned long long)h.line.tsc_span,
		       (unsigned long long)h.line.anchors,
		       (unsigned long long)h.updates);
}

/* "bound 12, delta 3": the fallbacks between two pvread_get_stats(). */
static inline void pvst_slow_reasons(char *buf, size_t len,
				     const struct pvread_stats *st0,
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

/*
 * One bracketed read of @clock (pvst_bracket); *@fast whether the page
 * answered rather than libc (why not, and the page, on "# " lines).
 * True when within the bound.
 */
static inline bool pvst_bracket_fast(clockid_t clock, struct pvst_bracket *b,
				     bool *fast)
{
	struct pvread_stats st0, st1;
	char why[100];

	pvread_get_stats(&st0);
	pvst_bracket(clock, b);
	pvread_get_stats(&st1);
	*fast = st1.slow == st0.slow;	/* fast reads are not counted */
	if (!*fast) {
		pvst_slow_reasons(why, sizeof(why), &st0, &st1);
		ksft_print_msg("clock %d read via libc: %s\n", clock, why);
		pvst_print_page("at that read");
	}
	return b->dev <= (int64_t)(b->bound > INT64_MAX ? INT64_MAX : b->bound);
}

/*
 * Every clock read through the library for @secs, each between two system
 * calls: how many fell beyond the published bound (the first few on "# "
 * lines); *@fast_out how many the page answered.
 */
static inline long pvst_bounded(const char *what, double secs, long *fast_out)
{
	int64_t t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	struct pvread_stats st0, st1;
	long beyond = 0, reads = 0;
	struct pvst_bracket b;
	char why[200];
	int i;

	pvst_print_page(what);
	pvread_get_stats(&st0);
	do {
		for (i = 0; i < PVST_NR_CLOCKS; i++) {
			pvst_bracket(pvst_clocks[i].id, &b);
			reads++;
			if ((uint64_t)b.dev > b.bound && beyond++ < 5)
				ksft_print_msg("%s: %s %lld, %lld ns outside the syscalls, bound %llu\n",
					       what, pvst_clocks[i].name,
					       (long long)b.value,
					       (long long)b.dev,
					       (unsigned long long)b.bound);
		}
	} while (pvst_elapsed(t0) < secs);
	pvread_get_stats(&st1);
	/* Fast reads are not counted: the reads less the slow ones. */
	*fast_out = reads - (long)(st1.slow - st0.slow);
	pvst_slow_reasons(why, sizeof(why), &st0, &st1);
	ksft_print_msg("%s: %ld reads, %ld fast, %ld beyond the bound; fallbacks: %s\n",
		       what, reads, *fast_out, beyond, why);
	if (*fast_out < reads / 2)
		pvst_print_page(what);
	return beyond;
}

/* ---- the page's conversion against the kernel's own clocks ---- */

/*
 * Clock @id at clocksource value @c by the page's conversion, as the vDSO
 * computes it from its data: the base plus (delta * mult + base's shifted
 * ns) >> shift; a coarse clock is its base.
 */
static inline int64_t pvst_mirror_ns(const struct pvread_timekeeper *tk,
				     clockid_t id, uint64_t c)
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
 * the rate): there the page may be ahead by up to PVST_COARSE_HOLD_NS.
 * False on any difference, after printing the first few.
 */
#define PVST_COARSE_HOLD_NS 10000
static inline bool pvst_mirror_exact(const char *what, int n)
{
	long compared = 0, off = 0, held = 0, retries = 0;
	int64_t worst[PVST_NR_CLOCKS] = { 0 };
	struct pvread_kernel_time kt;
	struct pvread_header h;
	char line[400];
	size_t used;
	int fd, i, c;

	fd = open(PVREAD_DEVICE, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ksft_print_msg("%s: open %s: %s\n", what, PVREAD_DEVICE,
			       strerror(errno));
		return false;
	}
	for (i = 0; i < n; i++) {
		if (ioctl(fd, PVREAD_IOC_KERNEL_TIME, &kt)) {
			ksft_print_msg("%s: PVREAD_IOC_KERNEL_TIME: %s\n", what,
				       strerror(errno));
			close(fd);
			return false;
		}
		pvst_snap(&h);
		if (h.updates != kt.updates) {
			/* an update came between: try again */
			if (++retries > 100L * n)
				break;
			i--;
			continue;
		}
		compared++;
		for (c = 0; c < PVST_NR_CLOCKS; c++) {
			clockid_t id = pvst_clocks[c].id;
			int64_t mine = pvst_mirror_ns(&h.tk, id, kt.cycles);
			int64_t d = mine - kt.ns[id];

			if (id == CLOCK_MONOTONIC_COARSE && d > 0 &&
			    d <= PVST_COARSE_HOLD_NS) {
				held++;
			} else if (d && off++ < 5) {
				ksft_print_msg("%s: %s: page %lld, kernel %lld (%+lld ns) at cycles %llu, update %llu\n",
					       what, pvst_clocks[c].name,
					       (long long)mine,
					       (long long)kt.ns[id], (long long)d,
					       (unsigned long long)kt.cycles,
					       (unsigned long long)kt.updates);
			}
			if (llabs(d) > llabs(worst[c]))
				worst[c] = d;
		}
	}
	close(fd);
	used = 0;
	for (c = 0; c < PVST_NR_CLOCKS && used < sizeof(line); c++)
		used += snprintf(line + used, sizeof(line) - used, " %s %+lld",
				 pvst_clocks[c].name, (long long)worst[c]);
	ksft_print_msg("%s: %ld conversions compared (%ld retried for an update between), %ld differences, MONOTONIC_COARSE held %ld times; largest differences:%s\n",
		       what, compared, retries, off, held, line);
	return compared == n && !off;
}

#endif /* PVREAD_PAGE_H */
