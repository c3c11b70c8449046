// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: the read path.  See include/uapi/linux/pvread.h for the page
 * and the arithmetic; every step that cannot vouch for its answer returns
 * false and the caller asks libc instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cpuid.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "arith.h"

/*
 * The answer when the page cannot give one.  The preload shim interposes
 * the libc names themselves, so it routes these to the next definition.
 */
#ifdef PVREAD_PRELOAD
#include "preload.h"
#define libc_clock_gettime	pvread_next_clock_gettime
#define libc_gettimeofday	pvread_next_gettimeofday
#else
#define libc_clock_gettime	clock_gettime
#define libc_gettimeofday	gettimeofday
#endif

#define NSEC_PER_SEC 1000000000LL
#define DEFAULT_TOLERANCE_NS 100000ULL
#define MAX_TRIES 8		/* reads spoilt by updates that completed */
#define MAX_WAIT_TSC (1ULL << 32)	/* for an update in progress: 1-2 s */

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The page is written concurrently by Xen and the module. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define RMB() __atomic_thread_fence(__ATOMIC_ACQUIRE)

struct mapping {
	const struct pvread_header *hdr;
	const unsigned char *records;
	uint32_t nr_records;
	uint32_t stride;
	uint64_t tolerance_ns;
	bool rdtscp;		/* the CPU offers it: per-CPU mode possible */
};

enum { MAP_UNTRIED, MAP_BUSY, MAP_READY, MAP_ABSENT };

/* Written once by the thread that wins MAP_UNTRIED -> MAP_BUSY. */
static struct mapping the_map;
static _Atomic int map_state = MAP_UNTRIED;

/* Per-process floors of the clocks that must never go back. */
static _Atomic int64_t floor_ns[PVREAD_NR_CLOCK_BASES];

/*
 * The fast mode this process last read in: the floor depends on it.  No
 * reading yet is as good as a per-CPU one: nothing to raise the floor over.
 */
static _Atomic uint32_t mode_seen = PVREAD_MODE_PERCPU;

static __thread struct pvread_stats stats
	__attribute__((tls_model("initial-exec")));

static uint64_t tolerance_from_env(void)
{
	const char *s = getenv("PVREAD_MAX_ERROR_NS");
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return DEFAULT_TOLERANCE_NS;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || *s == '-')
		return DEFAULT_TOLERANCE_NS;
	return v;
}

/*
 * Per-CPU mode needs rdtscp, which names the CPU in the instruction that
 * reads the TSC.  Some hypervisors hide it from their guests (and may make
 * it fault); stable mode then reads the TSC as the kernel's vDSO would.
 */
static bool have_rdtscp(void)
{
	unsigned int eax, ebx, ecx, edx;

	return __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) &&
	       (edx & (1U << 27));	/* CPUID.80000001H:EDX.RDTSCP */
}

/* Is @p, @size bytes long, a page this library can read? */
static bool adopt_page(struct mapping *m, const void *p, size_t size)
{
	const struct pvread_header *h = p;

	if (size < sizeof(*h) || h->magic != PVREAD_MAGIC ||
	    h->abi_version != PVREAD_ABI_VERSION || h->map_size > size ||
	    h->record_stride < sizeof(struct pvread_record) ||
	    h->record_offset < sizeof(*h) || h->nr_records > PVREAD_MAX_RECORDS ||
	    (uint64_t)h->record_offset +
	    (uint64_t)h->nr_records * h->record_stride > h->map_size)
		return false;
	m->hdr = h;
	m->records = (const unsigned char *)p + h->record_offset;
	m->nr_records = h->nr_records;
	m->stride = h->record_stride;
	m->tolerance_ns = tolerance_from_env();
	m->rdtscp = have_rdtscp();
	return true;
}

static bool map_device(struct mapping *m)
{
	uint32_t size;
	void *p;
	int fd;

	fd = open(PVREAD_DEVICE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	/* The header says how much there is to map. */
	p = mmap(NULL, sizeof(struct pvread_header), PROT_READ, MAP_SHARED,
		 fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	size = ((const struct pvread_header *)p)->map_size;
	munmap(p, sizeof(struct pvread_header));
	p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	if (!adopt_page(m, p, size)) {
		munmap(p, size);
		goto fail;
	}
	close(fd);
	return true;
fail:
	close(fd);
	return false;
}

/* The first call: map the device, unless another thread is doing it. */
static __attribute__((noinline, cold)) const struct mapping *first_map(void)
{
	int state = MAP_UNTRIED;
	int saved_errno;

	if (!atomic_compare_exchange_strong(&map_state, &state, MAP_BUSY))
		return state == MAP_READY ? &the_map : NULL;
	saved_errno = errno;
	state = map_device(&the_map) ? MAP_READY : MAP_ABSENT;
	errno = saved_errno;
	atomic_store_explicit(&map_state, state, memory_order_release);
	return state == MAP_READY ? &the_map : NULL;
}

/* The mapping, or NULL while it is absent or being made by someone else. */
static ALWAYS_INLINE const struct mapping *get_map(void)
{
	int state = atomic_load_explicit(&map_state, memory_order_acquire);

	if (likely(state == MAP_READY))
		return &the_map;
	if (state != MAP_UNTRIED)
		return NULL;
	return first_map();
}

int pvread_use_page(const void *page, size_t size)
{
	int state = MAP_UNTRIED;

	if (!atomic_compare_exchange_strong(&map_state, &state, MAP_BUSY)) {
		errno = EBUSY;
		return -1;
	}
	if (!page || !adopt_page(&the_map, page, size)) {
		atomic_store_explicit(&map_state, MAP_UNTRIED,
				      memory_order_release);
		errno = EINVAL;
		return -1;
	}
	atomic_store_explicit(&map_state, MAP_READY, memory_order_release);
	return 0;
}

/* One attempt's outcome; the READ_NO_* name the reason libc must answer. */
enum read_result {
	READ_OK,
	READ_BUSY,		/* an update is being written */
	READ_RETRY,		/* an update completed under us */
	READ_NO,		/* + the reason */
	READ_NO_MODE = READ_NO + PVREAD_SLOW_MODE,
	READ_NO_BOUND = READ_NO + PVREAD_SLOW_BOUND,
	READ_NO_RECORD = READ_NO + PVREAD_SLOW_RECORD,
	READ_NO_DELTA = READ_NO + PVREAD_SLOW_DELTA,
	READ_NO_RDTSCP = READ_NO + PVREAD_SLOW_RDTSCP,
};

/*
 * An update is being written: by the kernel's timekeeper, interrupts off,
 * which a system call would wait for too, or by Xen.  It takes a moment,
 * unless the writer's vCPU is stalled by its host, so wait as the kernel
 * would; the limit, in TSC ticks since *@since, is only there so that a
 * broken page cannot hold a reader for ever.
 */
static inline bool wait_for_writer(uint64_t *since)
{
	uint64_t now = __rdtsc();

	if (!*since)
		*since = now;
	else if (now - *since > MAX_WAIT_TSC)
		return false;
	_mm_pause();
	return true;
}

/*
 * The "xen" clocksource's cycles now, from the record that describes this
 * CPU's TSC: in per-CPU mode rdtscp names the CPU in the same instruction
 * that reads the TSC.
 */
static ALWAYS_INLINE enum read_result read_cycles(const struct mapping *m,
					   uint32_t mode,
					   struct pvread_sample *s)
{
	const struct pvread_record *r;
	uint64_t tsc_timestamp, system_time;
	uint32_t version, mul, aux, cpu;
	int8_t shift;

	if (mode == PVREAD_MODE_STABLE) {
		/* One record describes every CPU's TSC. */
		if (likely(m->rdtscp)) {
			s->tsc = __rdtscp(&aux);
		} else {
			/* rdtsc_ordered(), as the vDSO does without rdtscp */
			_mm_lfence();
			s->tsc = __rdtsc();
		}
		cpu = LOAD(m->hdr->stable_record);
	} else {
		if (unlikely(!m->rdtscp))
			return READ_NO_RDTSCP;
		s->tsc = __rdtscp(&aux);
		cpu = aux & PVREAD_TSC_AUX_CPU_MASK;
	}
	if (cpu >= m->nr_records)
		return READ_NO_RECORD;
	r = (const struct pvread_record *)(m->records + (size_t)cpu * m->stride);
	if (!(LOAD(r->state) & PVREAD_RECORD_REGISTERED))
		return READ_NO_RECORD;
	version = LOAD(r->pvclock.version);
	RMB();
	tsc_timestamp = LOAD(r->pvclock.tsc_timestamp);
	system_time = LOAD(r->pvclock.system_time);
	mul = LOAD(r->pvclock.tsc_to_system_mul);
	shift = LOAD(r->pvclock.tsc_shift);
	RMB();
	if (version & 1)
		return READ_BUSY;
	if (LOAD(r->pvclock.version) != version)
		return READ_RETRY;
	/* Xen rewrote the record after our TSC read: its line starts later. */
	if (s->tsc < tsc_timestamp)
		return READ_RETRY;
	s->cycles = pvread_pvclock_ns(s->tsc, tsc_timestamp, system_time, mul,
				      shift);
	s->cpu = cpu;
	s->version = version;
	return READ_OK;
}

static inline bool is_coarse(clockid_t clock)
{
	return clock == CLOCK_REALTIME_COARSE || clock == CLOCK_MONOTONIC_COARSE;
}

static inline bool is_mirrored(clockid_t clock)
{
	switch (clock) {
	case CLOCK_REALTIME:
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_BOOTTIME:
	case CLOCK_TAI:
	case CLOCK_REALTIME_COARSE:
	case CLOCK_MONOTONIC_COARSE:
		return true;
	default:
		return false;
	}
}

static inline bool never_back(clockid_t clock)
{
	return clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_RAW ||
	       clock == CLOCK_BOOTTIME || clock == CLOCK_MONOTONIC_COARSE;
}

/*
 * One attempt at the page's answer for @clock: READ_OK with the mode that
 * gave it in *@mode, READ_BUSY while an update is being written, READ_RETRY
 * when one completed under us, READ_NO_* when libc must answer.
 */
static ALWAYS_INLINE enum read_result try_read(const struct mapping *m,
					       const clockid_t clock,
					       struct timespec *ts,
					       uint32_t *mode)
{
	const struct pvread_header *h = m->hdr;
	const struct pvread_timekeeper *tk = &h->tk;
	const struct pvread_clock_base *b = &tk->base[clock];
	uint64_t cycle_last, snsec, ns;
	uint32_t seq, mult, shift;
	struct pvread_sample s;
	enum read_result r;
	int64_t sec;

	seq = LOAD(h->seq);
	RMB();
	if (unlikely(seq & 1))
		return READ_BUSY;
	*mode = LOAD(h->mode);
	if (*mode != PVREAD_MODE_STABLE) {
		if (*mode != PVREAD_MODE_PERCPU)
			return READ_NO_MODE;
		if (LOAD(h->error_bound_ns) > m->tolerance_ns)
			return READ_NO_BOUND;
	}
	sec = LOAD(b->sec);
	snsec = LOAD(b->snsec);
	if (is_coarse(clock)) {
		ns = snsec;
	} else {
		r = read_cycles(m, *mode, &s);
		if (unlikely(r != READ_OK))
			return r;
		if (clock == CLOCK_MONOTONIC_RAW) {
			cycle_last = LOAD(tk->raw_cycle_last);
			mult = LOAD(tk->raw_mult);
			shift = LOAD(tk->raw_shift);
		} else {
			cycle_last = LOAD(tk->cycle_last);
			mult = LOAD(tk->mult);
			shift = LOAD(tk->shift);
		}
		if (unlikely(!pvread_tk_shifted_ns(s.cycles, cycle_last,
						   LOAD(tk->mask),
						   LOAD(tk->max_delta), mult,
						   snsec, &ns)))
			return READ_NO_DELTA;
		ns >>= shift;
	}
	RMB();
	if (unlikely(LOAD(h->seq) != seq))
		return READ_RETRY;
	while (ns >= NSEC_PER_SEC) {
		ns -= NSEC_PER_SEC;
		sec++;
	}
	ts->tv_sec = sec;
	ts->tv_nsec = (long)ns;
	return READ_OK;
}

/* After a first attempt failed: wait out writers, retry a few times. */
static __attribute__((noinline, cold))
uint32_t read_again(const struct mapping *m, const clockid_t clock,
		    struct timespec *ts, enum read_result r,
		    enum pvread_slow_reason *why)
{
	uint32_t mode = PVREAD_MODE_NONE;
	uint64_t since = 0;
	int tries = 0;

	for (;;) {
		switch (r) {
		case READ_OK:
			return mode;
		case READ_BUSY:
			if (!wait_for_writer(&since)) {
				*why = PVREAD_SLOW_BUSY;
				return PVREAD_MODE_NONE;
			}
			break;
		case READ_RETRY:
			stats.retries++;
			if (++tries >= MAX_TRIES) {
				*why = PVREAD_SLOW_RETRIES;
				return PVREAD_MODE_NONE;
			}
			break;
		default:
			*why = (enum pvread_slow_reason)(r - READ_NO);
			return PVREAD_MODE_NONE;
		}
		r = try_read(m, clock, ts, &mode);
	}
}

/*
 * The page's answer for @clock, and the mode that gave it; PVREAD_MODE_NONE
 * when libc must answer, for the reason in *@why.
 */
static ALWAYS_INLINE uint32_t read_fast(const struct mapping *m,
					const clockid_t clock,
					struct timespec *ts,
					enum pvread_slow_reason *why)
{
	enum read_result r;
	uint32_t mode;

	r = try_read(m, clock, ts, &mode);
	if (likely(r == READ_OK))
		return mode;
	return read_again(m, clock, ts, r, why);
}

/* Never below what this process returned before, on any thread. */
static inline void apply_floor(clockid_t clock, struct timespec *ts)
{
	_Atomic int64_t *f = &floor_ns[clock];
	int64_t v = ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
	int64_t cur = atomic_load_explicit(f, memory_order_relaxed);

	while (v > cur)
		if (atomic_compare_exchange_weak_explicit(f, &cur, v,
				memory_order_relaxed, memory_order_relaxed))
			return;
	if (v < cur) {
		stats.clamped++;
		ts->tv_sec = cur / NSEC_PER_SEC;
		ts->tv_nsec = cur % NSEC_PER_SEC;
	}
}

/*
 * Stable readings are the kernel's own, so they need not raise the floor
 * (that would make every reader write one shared cache line); they only
 * respect it, in case earlier per-CPU readings ran ahead of the kernel.
 */
static inline void respect_floor(clockid_t clock, struct timespec *ts)
{
	int64_t v = ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
	int64_t cur = atomic_load_explicit(&floor_ns[clock],
					   memory_order_relaxed);

	if (v < cur) {
		stats.clamped++;
		ts->tv_sec = cur / NSEC_PER_SEC;
		ts->tv_nsec = cur % NSEC_PER_SEC;
	}
}

static __attribute__((noinline, cold))
int slow_clock_gettime(clockid_t clock, struct timespec *ts,
		       enum pvread_slow_reason why)
{
	int ret;

	stats.slow++;
	stats.slow_by_reason[why]++;
	ret = libc_clock_gettime(clock, ts);
	if (!ret && never_back(clock))
		apply_floor(clock, ts);
	return ret;
}

/* The read for one clock; inlined with @clock a constant, once per clock. */
static ALWAYS_INLINE int gettime(const clockid_t clock, struct timespec *ts)
{
	enum pvread_slow_reason why;
	const struct mapping *m;
	uint32_t mode;

	/* A bad clock or pointer gets libc's own answer: EINVAL, EFAULT. */
	if (!is_mirrored(clock) || !ts)
		return slow_clock_gettime(clock, ts, PVREAD_SLOW_OTHER);
	m = get_map();
	if (unlikely(!m))
		return slow_clock_gettime(clock, ts, PVREAD_SLOW_NO_PAGE);
	mode = read_fast(m, clock, ts, &why);
	if (mode == PVREAD_MODE_NONE)
		return slow_clock_gettime(clock, ts, why);
	if (!never_back(clock)) {
		stats.fast++;
		return 0;
	}
	/*
	 * The kernel's own MONOTONIC_COARSE steps back on NTP frequency
	 * changes before Linux 6.15; the page's is held, but a fallback
	 * reads the kernel's.  Its floor moves once a tick, so raising it
	 * on every read costs no shared writes to speak of.
	 */
	if (clock == CLOCK_MONOTONIC_COARSE) {
		apply_floor(clock, ts);
		stats.fast++;
		return 0;
	}
	if (mode == PVREAD_MODE_STABLE) {
		if (atomic_load_explicit(&mode_seen, memory_order_relaxed) !=
		    PVREAD_MODE_STABLE)
			atomic_store_explicit(&mode_seen, PVREAD_MODE_STABLE,
					      memory_order_relaxed);
		respect_floor(clock, ts);
		stats.fast++;
		return 0;
	}
	/*
	 * Entering per-CPU mode: stable readings did not raise the floor, so
	 * raise it to the kernel's clock now, which is past all of them.
	 */
	if (atomic_load_explicit(&mode_seen, memory_order_acquire) !=
	    PVREAD_MODE_PERCPU) {
		slow_clock_gettime(clock, ts, PVREAD_SLOW_SEED);
		atomic_store_explicit(&mode_seen, PVREAD_MODE_PERCPU,
				      memory_order_release);
		return 0;
	}
	apply_floor(clock, ts);
	stats.fast++;
	return 0;
}

/* One function per clock, so that each has only the registers it needs. */
#define GETTIME_FN(name, clock)						\
static __attribute__((noinline)) int name(struct timespec *ts)		\
{									\
	return gettime(clock, ts);					\
}
GETTIME_FN(gettime_monotonic, CLOCK_MONOTONIC)
GETTIME_FN(gettime_realtime, CLOCK_REALTIME)
GETTIME_FN(gettime_monotonic_raw, CLOCK_MONOTONIC_RAW)
GETTIME_FN(gettime_boottime, CLOCK_BOOTTIME)
GETTIME_FN(gettime_tai, CLOCK_TAI)
GETTIME_FN(gettime_monotonic_coarse, CLOCK_MONOTONIC_COARSE)
GETTIME_FN(gettime_realtime_coarse, CLOCK_REALTIME_COARSE)

int pvread_clock_gettime(clockid_t clock, struct timespec *ts)
{
	switch (clock) {
	case CLOCK_MONOTONIC:
		return gettime_monotonic(ts);
	case CLOCK_REALTIME:
		return gettime_realtime(ts);
	case CLOCK_MONOTONIC_RAW:
		return gettime_monotonic_raw(ts);
	case CLOCK_BOOTTIME:
		return gettime_boottime(ts);
	case CLOCK_TAI:
		return gettime_tai(ts);
	case CLOCK_MONOTONIC_COARSE:
		return gettime_monotonic_coarse(ts);
	case CLOCK_REALTIME_COARSE:
		return gettime_realtime_coarse(ts);
	default:
		return slow_clock_gettime(clock, ts, PVREAD_SLOW_OTHER);
	}
}

int pvread_gettimeofday(struct timeval *tv, void *tz)
{
	struct timespec ts;

	if (tz || !tv)
		return libc_gettimeofday(tv, tz);
	pvread_clock_gettime(CLOCK_REALTIME, &ts);
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t pvread_time(time_t *t)
{
	struct timespec ts;

	/* time() is the kernel's coarse seconds, not a rounded fine clock. */
	pvread_clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}

int pvread_sample_pvclock(struct pvread_sample *sample)
{
	const struct mapping *m = get_map();
	uint64_t since = 0;
	uint32_t mode;
	int tries;

	if (!m || !(LOAD(m->hdr->flags) & PVREAD_FLAG_TSC_AUX)) {
		errno = ENODEV;
		return -1;
	}
	/* Only the per-CPU reading says which CPU the sample belongs to. */
	mode = LOAD(m->hdr->mode) == PVREAD_MODE_STABLE ? PVREAD_MODE_STABLE :
	       PVREAD_MODE_PERCPU;
	for (tries = 0; tries < MAX_TRIES;) {
		switch (read_cycles(m, mode, sample)) {
		case READ_OK:
			return 0;
		case READ_BUSY:
			if (!wait_for_writer(&since))
				tries = MAX_TRIES;
			break;
		case READ_RETRY:
			tries++;
			break;
		default:
			errno = ENODEV;
			return -1;
		}
	}
	errno = EAGAIN;
	return -1;
}

int pvread_get_info(struct pvread_info *info)
{
	const struct mapping *m = get_map();
	enum pvread_slow_reason why;
	const struct pvread_header *h;
	struct timespec ts;
	uint32_t seq;

	*info = (struct pvread_info){ 0 };
	if (!m)
		return 0;
	h = m->hdr;
	info->mapped = 1;
	info->tolerance_ns = m->tolerance_ns;
	info->nr_records = m->nr_records;
	do {
		seq = LOAD(h->seq);
		RMB();
		info->mode = LOAD(h->mode);
		info->flags = LOAD(h->flags);
		info->nr_registered = LOAD(h->nr_registered);
		info->error_bound_ns = LOAD(h->error_bound_ns);
		info->spread_ns = LOAD(h->spread_ns);
		info->updates = LOAD(h->updates);
		info->stable_record = LOAD(h->stable_record);
		info->last_update_ns =
			LOAD(h->tk.base[CLOCK_MONOTONIC].sec) * NSEC_PER_SEC +
			(int64_t)(LOAD(h->tk.base[CLOCK_MONOTONIC].snsec) >>
				  LOAD(h->tk.shift));
		RMB();
	} while ((seq & 1) || LOAD(h->seq) != seq);
	info->fast = read_fast(m, CLOCK_MONOTONIC, &ts, &why) !=
		     PVREAD_MODE_NONE;
	return 0;
}

int pvread_get_record(unsigned int cpu, struct pvread_record *rec)
{
	const struct mapping *m = get_map();
	const struct pvread_record *r;
	uint64_t since = 0;
	int tries;

	if (!m) {
		errno = ENODEV;
		return -1;
	}
	if (cpu >= m->nr_records) {
		errno = ERANGE;
		return -1;
	}
	r = (const struct pvread_record *)(m->records + (size_t)cpu * m->stride);
	for (tries = 0; tries < MAX_TRIES;) {
		uint32_t version = LOAD(r->pvclock.version);

		RMB();
		rec->pvclock.version = version;
		rec->pvclock.tsc_timestamp = LOAD(r->pvclock.tsc_timestamp);
		rec->pvclock.system_time = LOAD(r->pvclock.system_time);
		rec->pvclock.tsc_to_system_mul = LOAD(r->pvclock.tsc_to_system_mul);
		rec->pvclock.tsc_shift = LOAD(r->pvclock.tsc_shift);
		rec->pvclock.flags = LOAD(r->pvclock.flags);
		rec->state = LOAD(r->state);
		rec->xen_vcpu_id = LOAD(r->xen_vcpu_id);
		RMB();
		if (version & 1) {
			if (!wait_for_writer(&since))
				break;
		} else if (LOAD(r->pvclock.version) == version) {
			return 0;
		} else {
			tries++;
		}
	}
	errno = EAGAIN;
	return -1;
}

void pvread_get_stats(struct pvread_stats *out)
{
	*out = stats;
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
	};

	return reason < PVREAD_SLOW_NR_REASONS && names[reason] ?
	       names[reason] : "?";
}
