// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: introspection.  pvread_get_info(), pvread_get_record(),
 * pvread_sample_pvclock() (a record evaluated at a TSC read, as the "xen"
 * clocksource would) and pvread_get_stats(), with the sizes of the structs
 * each version fills.  Not the read path: these take the page as
 * read.c's retries do, and may be slow.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "arith.h"
#include "internal.h"

/* Did record @cpu's update to @version (odd) not complete before? */
static inline bool record_stuck(struct process *p, uint32_t cpu,
				uint32_t version)
{
	return atomic_load_explicit(&p->stuck_record[cpu % NR_STUCK_RECORDS],
				    memory_order_relaxed) ==
	       ((uint64_t)cpu << 32 | version);
}

/*
 * A wait for record @cpu's update to @version (odd) ran out: later calls
 * give up on it at once while it says the same.  Only this record: the
 * header's wait remembers the header (internal.h's pvread_remember_stuck()),
 * and a record odd at that moment is in an update of its own.
 */
static void remember_stuck_record(struct process *p, uint32_t cpu,
				  uint32_t version)
{
	if (version & 1)
		atomic_store_explicit(&p->stuck_record[cpu % NR_STUCK_RECORDS],
				      (uint64_t)cpu << 32 | version,
				      memory_order_relaxed);
}

/*
 * Record @cpu evaluated at a TSC read after its version: the "xen"
 * clocksource's cycles, if @cpu is the CPU the TSC was read on.  The
 * version read goes to s->version whatever the outcome.
 */
static enum read_result sample_record(struct process *p, uint32_t cpu,
				      struct pvread_sample *s)
{
	const struct mapping *m = &p->map;
	const struct pvread_record *r;
	uint64_t tsc_timestamp, system_time;
	uint32_t version, mul;
	int8_t shift;

	if (cpu >= m->nr_records)
		return READ_NO_INVALID;
	r = (const struct pvread_record *)(m->records + (size_t)cpu * m->stride);
	if (!(LOAD(r->state) & PVREAD_RECORD_REGISTERED))
		return READ_NO_INVALID;
	/*
	 * The version before the TSC, as the kernel's pvclock reads do: Xen
	 * rewrites a vCPU's record whenever it runs it on a pCPU, so a TSC
	 * read after an unchanged version is from the pCPU the record
	 * describes.  (Read first, the TSC could be the old pCPU's and the
	 * record the new one's.)
	 */
	version = LOAD(r->pvclock.version);
	RMB();
	s->tsc = tsc_ordered();
	tsc_timestamp = LOAD(r->pvclock.tsc_timestamp);
	system_time = LOAD(r->pvclock.system_time);
	mul = LOAD(r->pvclock.tsc_to_system_mul);
	shift = LOAD(r->pvclock.tsc_shift);
	RMB();
	s->version = version;
	if (version & 1)
		return record_stuck(p, cpu, version) ? READ_NO_STUCK : READ_BUSY;
	if (LOAD(r->pvclock.version) != version)
		return READ_RETRY;
	if (unlikely(!pvread_pvclock_shift_ok(shift)))
		return READ_NO_INVALID;
	/* Xen rewrote the record after our TSC read: its line starts later. */
	if (s->tsc < tsc_timestamp)
		return READ_RETRY;
	s->cycles = pvread_pvclock_ns(s->tsc, tsc_timestamp, system_time, mul,
				      shift);
	s->cpu = cpu;
	s->version = version;
	return READ_OK;
}

/* The structs of libpvread 0.2, which the calls without a size fill. */
#define STATS_SIZE_0_2 offsetof(struct pvread_stats, lifted)
#define SAMPLE_SIZE_0_2 sizeof(struct pvread_sample)

/* The first @size bytes of @mine, @len long, into @out; zeros beyond. */
static void copy_sized(void *out, size_t size, const void *mine, size_t len)
{
	if (size > len) {
		memset((char *)out + len, 0, size - len);
		size = len;
	}
	memcpy(out, mine, size);
}

static int sample_pvclock(struct pvread_sample *sample);

int pvread_sample_pvclock(struct pvread_sample *sample)
{
	return pvread_sample_pvclock_size(sample, SAMPLE_SIZE_0_2);
}

int pvread_sample_pvclock_size(struct pvread_sample *out, size_t size)
{
	struct pvread_sample mine, *sample = &mine;
	int ret;

	if (size < offsetof(struct pvread_sample, cpu)) {
		errno = EINVAL;
		return -1;
	}
	ret = sample_pvclock(sample);
	if (!ret)
		copy_sized(out, size, sample, sizeof(*sample));
	return ret;
}

/* The CPU this thread runs on, from the kernel (no TSC_AUX in PV guests). */
static int this_cpu(uint32_t *cpu)
{
	unsigned int c;

	if (syscall(SYS_getcpu, &c, NULL, NULL))
		return -1;
	*cpu = c;
	return 0;
}

static int sample_pvclock(struct pvread_sample *sample)
{
	struct process *p = get_process();
	uint32_t before, after;
	uint64_t since = 0;
	int tries;

	if (!p) {
		errno = ENODEV;
		return -1;
	}
	if (!p->map.records) {	/* the module's for a privileged opener */
		errno = EPERM;
		return -1;
	}
	/*
	 * The record of the CPU the kernel says this thread is on before and
	 * after the TSC read: a thread that moves and comes back in between
	 * is sampled on another CPU's TSC, so callers that compare pin it.
	 */
	for (tries = 0; tries < MAX_TRIES;) {
		if (this_cpu(&before)) {
			errno = ENODEV;
			return -1;
		}
		switch (sample_record(p, before, sample)) {
		case READ_OK:
			if (!this_cpu(&after) && after == before)
				return 0;
			tries++;
			break;
		case READ_BUSY:
			if (!wait_for_writer(&since)) {
				remember_stuck_record(p, before,
						      sample->version);
				tries = MAX_TRIES;
			}
			break;
		case READ_RETRY:
			tries++;
			break;
		case READ_NO_STUCK:
			/* An update that did not finish before still has not. */
			tries = MAX_TRIES;
			break;
		default:
			errno = ENODEV;
			return -1;
		}
	}
	errno = EAGAIN;
	return -1;
}

static int get_info(struct pvread_info *info)
{
	struct process *p = get_process();
	const struct mapping *m = p ? &p->map : NULL;
	struct attempts a = { 0, 0 };
	enum pvread_slow_reason why;
	const struct pvread_header *h;
	struct timespec ts;
	uint32_t seq, shift;

	*info = (struct pvread_info){ 0 };
	if (!m)
		return 0;
	h = m->hdr;
	info->mapped = 1;
	info->tolerance_ns = m->tolerance_ns;
	info->nr_records = m->nr_records;
	for (;;) {
		seq = LOAD(h->seq);
		RMB();
		info->mode = LOAD(h->mode);
		info->flags = LOAD(h->flags);
		info->nr_registered = LOAD(h->nr_registered);
		info->error_bound_ns = LOAD(h->error_bound_ns);
		info->spread_ns = LOAD(h->spread_ns);
		info->updates = LOAD(h->updates);
		info->disruptions = LOAD(h->disruptions);
		info->line_state = LOAD(h->line_state);
		info->tsc_warp = LOAD(h->tsc_warp);
		info->line_anchors = LOAD(h->line.anchors);
		/* Unsigned, and any shift: a page no module wrote is no UB. */
		shift = LOAD(h->tk.shift);
		info->last_update_ns = (int64_t)
			((uint64_t)LOAD(h->tk.base[CLOCK_MONOTONIC].sec) *
			 NSEC_PER_SEC +
			 (shift < 64 ?
			  LOAD(h->tk.base[CLOCK_MONOTONIC].snsec) >> shift : 0));
		RMB();
		if (!(seq & 1) && LOAD(h->seq) == seq)
			break;
		/* As a read would: wait for an update, not for ever. */
		if (!pvread_try_again(p, seq & 1 ? READ_BUSY : READ_RETRY,
				      &a, &why) ||
		    seq == atomic_load_explicit(&p->stuck_seq,
						memory_order_relaxed)) {
			errno = EAGAIN;
			return -1;
		}
	}
	info->fast = pvread_read_fast(p, CLOCK_MONOTONIC, &ts, &why);
	return 0;
}

/*
 * The struct of libpvread 0.2, which pvread_get_info() fills for ever; a
 * later version appends fields, and its callers say how many they know.
 */
#define INFO_SIZE_0_2 offsetof(struct pvread_info, disruptions)
_Static_assert(sizeof(struct pvread_info) ==
	       offsetof(struct pvread_info, disruptions) + sizeof(uint64_t),
	       "a field was added: the size pvread_get_info() fills stays");

int pvread_get_info_size(struct pvread_info *info, size_t size)
{
	struct pvread_info mine;
	int ret, saved_errno;

	if (size < offsetof(struct pvread_info, mode)) {
		errno = EINVAL;
		return -1;
	}
	ret = get_info(&mine);
	saved_errno = errno;
	copy_sized(info, size, &mine, sizeof(mine));
	errno = saved_errno;
	return ret;
}

int pvread_get_info(struct pvread_info *info)
{
	return pvread_get_info_size(info, INFO_SIZE_0_2);
}

int pvread_get_record(unsigned int cpu, struct pvread_record *rec)
{
	struct process *p = get_process();
	const struct mapping *m = p ? &p->map : NULL;
	const struct pvread_record *r;
	uint64_t since = 0;
	int tries;

	if (!p) {
		errno = ENODEV;
		return -1;
	}
	if (cpu >= m->nr_records) {
		errno = ERANGE;
		return -1;
	}
	if (!m->records) {	/* the module's for a privileged opener */
		errno = EPERM;
		return -1;
	}
	r = (const struct pvread_record *)(m->records + (size_t)cpu * m->stride);
	/* Every byte written: padding and fields this version does not copy. */
	memset(rec, 0, sizeof(*rec));
	for (tries = 0; tries < MAX_TRIES;) {
		uint32_t version = LOAD(r->pvclock.version);

		if ((version & 1) && record_stuck(p, cpu, version))
			break;
		RMB();
		rec->pvclock.version = version;
		rec->pvclock.tsc_timestamp = LOAD(r->pvclock.tsc_timestamp);
		rec->pvclock.system_time = LOAD(r->pvclock.system_time);
		rec->pvclock.tsc_to_system_mul = LOAD(r->pvclock.tsc_to_system_mul);
		rec->pvclock.tsc_shift = LOAD(r->pvclock.tsc_shift);
		rec->pvclock.flags = LOAD(r->pvclock.flags);
		rec->state = LOAD(r->state);
		rec->xen_vcpu_id = LOAD(r->xen_vcpu_id);
		rec->registered_on = LOAD(r->registered_on);
		RMB();
		if (version & 1) {
			if (!wait_for_writer(&since)) {
				remember_stuck_record(p, cpu, version);
				break;
			}
		} else if (LOAD(r->pvclock.version) == version) {
			return 0;
		} else {
			tries++;
		}
	}
	errno = EAGAIN;
	return -1;
}

/*
 * The thread's counts, with their sum, slow: each kernel's answer counts
 * once, by its reason alone, one write less on the paths where the kernel
 * answers every read.
 */
static struct pvread_stats thread_stats(void)
{
	struct pvread_stats st = pvread_thread_stats;
	unsigned int i;

	st.slow = 0;
	for (i = 0; i < PVREAD_SLOW_NR_REASONS; i++)
		st.slow += st.slow_by_reason[i];
	return st;
}

int pvread_get_stats_size(struct pvread_stats *out, size_t size)
{
	struct pvread_stats st;

	if (size < offsetof(struct pvread_stats, retries)) {
		errno = EINVAL;
		return -1;
	}
	st = thread_stats();
	copy_sized(out, size, &st, sizeof(st));
	return 0;
}

void pvread_get_stats(struct pvread_stats *out)
{
	struct pvread_stats st = thread_stats();

	copy_sized(out, STATS_SIZE_0_2, &st, sizeof(st));
}

const char *pvread_slow_reason_name(unsigned int reason)
{
	static const char *const names[PVREAD_SLOW_NR_REASONS] = {
		[PVREAD_SLOW_OTHER] = "other",
		[PVREAD_SLOW_NO_PAGE] = "no-page",
		[PVREAD_SLOW_MODE] = "mode",
		[PVREAD_SLOW_BOUND] = "bound",
		[PVREAD_SLOW_RECORD] = "record",
		[PVREAD_SLOW_DELTA] = "delta",
		[PVREAD_SLOW_BUSY] = "busy",
		[PVREAD_SLOW_RETRIES] = "retries",
		[PVREAD_SLOW_SEED] = "seed",
		[PVREAD_SLOW_RDTSCP] = "no-rdtscp",
		[PVREAD_SLOW_TIMENS] = "timens",
		[PVREAD_SLOW_STUCK] = "stuck",
		[PVREAD_SLOW_INVALID] = "invalid",
	};

	return reason < PVREAD_SLOW_NR_REASONS && names[reason] ?
	       names[reason] : "?";
}
