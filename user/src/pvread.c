// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: the read path.  See include/uapi/linux/pvread.h for the page
 * and the arithmetic; every step that cannot vouch for its answer returns
 * false and the caller asks libc instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cpuid.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "arith.h"
#include "internal.h"

#define NSEC_PER_SEC 1000000000LL
#define PVREAD_PVCLOCK_TSC_STABLE 0x01	/* Xen's PVCLOCK_TSC_STABLE_BIT */
/*
 * Correct Xen's vCPUs disagree by a few ns since its 4.8 fixes (by several
 * dozen us before them): 10 us leaves room for that and for a line steered
 * towards the kernel's clock, and refuses hosts that behave like pre-4.8.
 */
#define DEFAULT_TOLERANCE_NS 10000ULL
#define MAX_TRIES 8		/* reads spoilt by updates that completed */
#define MAX_WAIT_TSC (1ULL << 32)	/* for an update in progress: 1-2 s */

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The page is written concurrently by Xen and the module. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define RMB() __atomic_thread_fence(__ATOMIC_ACQUIRE)

/*
 * A time namespace's offsets (time_namespaces(7)), added as the kernel's
 * vDSO adds them: to CLOCK_MONOTONIC, _RAW and _COARSE the "monotonic"
 * one, to CLOCK_BOOTTIME the "boottime" one.  The page is the root
 * namespace's clock.
 */
struct timens {
	int64_t sec[PVREAD_NR_CLOCK_BASES];
	int64_t nsec[PVREAD_NR_CLOCK_BASES];	/* [0, NSEC_PER_SEC) */
	bool unknown;		/* offsets unreadable: those clocks are libc's */
};

struct mapping {
	const struct pvread_header *hdr;
	const unsigned char *records;
	uint32_t nr_records;
	uint32_t stride;
	uint64_t tolerance_ns;
	bool rdtscp;		/* the CPU offers it: per-CPU mode possible */
	struct timens ns;
};

enum { MAP_UNTRIED, MAP_BUSY, MAP_READY, MAP_ABSENT };

/* Written once by the thread that wins MAP_UNTRIED -> MAP_BUSY. */
static struct mapping the_map;
static _Atomic int map_state = MAP_UNTRIED;

/*
 * Per-process floors of the clocks that must never go back, a cache line
 * each: a per-CPU or fallback read of one clock writes its floor, and
 * must not take the line from readers of another.
 */
static struct floor {
	_Atomic int64_t ns;
} __attribute__((aligned(64))) floors[PVREAD_NR_CLOCK_BASES];
_Static_assert(sizeof(struct floor) == 64, "one cache line per floor");

/*
 * The fast mode each clock was last read in by this process (none yet:
 * PVREAD_MODE_NONE): whether the floor holds what it returned depends on it.
 * Written only when the mode changes, so it stays in every CPU's cache;
 * always by compare-and-swap, from the value the writer acted on.
 *
 * MODE_SEEN_SEEDING: a thread is taking the kernel's answer as the floor
 * (enter_mode()); until it notes the new mode, every read of the clock is
 * libc's, which raises the floor, so that no stable or line reading can be
 * returned after that answer and stay above the floor.
 * MODE_SEEN_UNKNOWN: the next fast reading seeds, whatever its mode (a
 * child of fork() whose parent was seeding).
 */
#define MODE_SEEN_SEEDING 0x100
#define MODE_SEEN_UNKNOWN 0x101
static _Atomic uint32_t mode_seen[PVREAD_NR_CLOCK_BASES];

/*
 * This process has returned readings of the page's line: from then on a
 * fallback answer is lifted to the line (see not_below_line()).  Set once.
 */
static _Atomic bool line_used;

/*
 * The seq of a header update that did not complete within MAX_WAIT_TSC:
 * while the header still says it, reads fall back at once instead of
 * waiting again.  0: none (a seq being written is odd).
 */
static _Atomic uint32_t stuck_seq;

static __thread struct pvread_stats stats
	__attribute__((tls_model("initial-exec")));

/*
 * PVREAD_MAX_ERROR_NS: decimal digits only, at most 2^64 - 1.  Anything
 * else (a sign, a space, hex, an overflow) is a mistake: the default, and
 * one line on stderr -- the first call maps the page once per process.
 */
static uint64_t tolerance_from_env(void)
{
	const char *s = getenv("PVREAD_MAX_ERROR_NS");
	const char *c;
	uint64_t v = 0;

	if (!s || !*s)
		return DEFAULT_TOLERANCE_NS;
	for (c = s; *c; c++) {
		unsigned int digit = (unsigned int)(*c - '0');

		if (digit > 9 || v > (UINT64_MAX - digit) / 10) {
			fprintf(stderr,
				"libpvread: PVREAD_MAX_ERROR_NS=\"%s\" is not a number of ns (decimal digits): using %llu\n",
				s, (unsigned long long)DEFAULT_TOLERANCE_NS);
			return DEFAULT_TOLERANCE_NS;
		}
		v = v * 10 + digit;
	}
	return v;
}

/* Does a time namespace shift @clock, and by which of its offsets? */
static inline bool timens_shifts(clockid_t clock)
{
	return clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_RAW ||
	       clock == CLOCK_MONOTONIC_COARSE || clock == CLOCK_BOOTTIME;
}

/* One "NAME SEC NSEC" line of timens_offsets; false if it is not one. */
static bool timens_line(char **p, struct timens *ns)
{
	static const clockid_t mono[] = { CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW,
					  CLOCK_MONOTONIC_COARSE };
	bool boot = !strncmp(*p, "boottime ", 9);
	long long sec, nsec;
	unsigned int i;
	char *end;

	if (!boot && strncmp(*p, "monotonic ", 10))
		return false;
	errno = 0;
	sec = strtoll(*p + (boot ? 9 : 10), &end, 10);
	nsec = strtoll(end, &end, 10);
	if (errno || *end != '\n' || nsec < 0 || nsec >= NSEC_PER_SEC)
		return false;
	*p = end + 1;
	if (boot) {
		ns->sec[CLOCK_BOOTTIME] = sec;
		ns->nsec[CLOCK_BOOTTIME] = nsec;
		return true;
	}
	for (i = 0; i < sizeof(mono) / sizeof(mono[0]); i++) {
		ns->sec[mono[i]] = sec;
		ns->nsec[mono[i]] = nsec;
	}
	return true;
}

/*
 * This process's time namespace offsets, from /proc/self/timens_offsets.
 * A kernel without time namespaces has no such file in a mounted /proc: no
 * offsets.  Any other failure (no /proc here) leaves them unknown, and the
 * clocks they shift to libc.
 */
static void read_timens(struct timens *ns)
{
	char buf[256], *p = buf;
	ssize_t n = -1;
	int fd, saved_errno = errno;

	*ns = (struct timens){ .unknown = true };
	fd = open("/proc/self/timens_offsets", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ns->unknown = errno != ENOENT ||
			      access("/proc/self/stat", F_OK) != 0;
		errno = saved_errno;
		return;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	errno = saved_errno;
	if (n <= 0 || n == sizeof(buf) - 1)
		return;
	buf[n] = 0;
	while (*p)
		if (!timens_line(&p, ns)) {
			*ns = (struct timens){ .unknown = true };
			errno = saved_errno;
			return;
		}
	errno = saved_errno;
	ns->unknown = false;
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
	read_timens(&m->ns);
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

/*
 * In a child of fork(): only the forking thread is here.  A mapping another
 * thread was making never completes: make it again.  The child may be in
 * another time namespace (unshare(CLONE_NEWTIME) places the children made
 * after it there): take its offsets, and move the floors, which hold
 * readings in the parent's namespace, by the difference -- or clear them
 * where either side's offsets are unknown (libc answers there).
 */
static void pvread_atfork_child(void)
{
	int state = MAP_BUSY;
	struct timens was = the_map.ns;
	clockid_t c;

	atomic_compare_exchange_strong(&map_state, &state, MAP_UNTRIED);
	for (c = 0; c < PVREAD_NR_CLOCK_BASES; c++) {
		/* A seeding thread of the parent's is not here to finish. */
		uint32_t seeding = MODE_SEEN_SEEDING;

		atomic_compare_exchange_strong(&mode_seen[c], &seeding,
					       MODE_SEEN_UNKNOWN);
	}
	if (state == MAP_READY)
		read_timens(&the_map.ns);
	else
		was.unknown = true;	/* the floors hold libc's answers */
	for (c = 0; c < PVREAD_NR_CLOCK_BASES; c++) {
		int64_t f = atomic_load(&floors[c].ns);

		if (!timens_shifts(c) || !f)
			continue;
		if (was.unknown || the_map.ns.unknown)
			f = 0;
		else
			f += (the_map.ns.sec[c] - was.sec[c]) * NSEC_PER_SEC +
			     the_map.ns.nsec[c] - was.nsec[c];
		atomic_store(&floors[c].ns, f);
	}
}

__attribute__((constructor)) static void pvread_init(void)
{
	pthread_atfork(NULL, NULL, pvread_atfork_child);
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
	READ_NO_TIMENS = READ_NO + PVREAD_SLOW_TIMENS,
	READ_NO_STUCK = READ_NO + PVREAD_SLOW_STUCK,
	READ_NO_INVALID = READ_NO + PVREAD_SLOW_INVALID,
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
 * A TSC read not taken before the loads that precede it, rdtsc_ordered() as
 * the kernel does it: rdtscp where the CPU offers it, else lfence; rdtsc.
 */
static ALWAYS_INLINE uint64_t tsc_ordered(const struct mapping *m)
{
	unsigned int aux;

	if (likely(m->rdtscp))
		return __rdtscp(&aux);
	_mm_lfence();
	return __rdtsc();
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
	uint8_t flags;
	int8_t shift;

	if (mode == PVREAD_MODE_STABLE) {
		/* One record describes every CPU's TSC. */
		cpu = LOAD(m->hdr->stable_record);
	} else {
		/* The record of the vCPU this thread is on now... */
		if (unlikely(!m->rdtscp))
			return READ_NO_RDTSCP;
		__rdtscp(&aux);
		cpu = aux & PVREAD_TSC_AUX_CPU_MASK;
	}
	if (cpu >= m->nr_records)
		return READ_NO_RECORD;
	r = (const struct pvread_record *)(m->records + (size_t)cpu * m->stride);
	if (!(LOAD(r->state) & PVREAD_RECORD_REGISTERED))
		return READ_NO_RECORD;
	/*
	 * The version before the TSC, as the kernel's pvclock reads do: Xen
	 * rewrites a vCPU's record whenever it runs it on a pCPU, so a TSC
	 * read after an unchanged version is from the pCPU the record
	 * describes.  (Read first, the TSC could be the old pCPU's and the
	 * record the new one's.)
	 */
	version = LOAD(r->pvclock.version);
	RMB();
	if (mode == PVREAD_MODE_STABLE) {
		s->tsc = tsc_ordered(m);
	} else {
		/* ...and still that vCPU when the TSC is read. */
		s->tsc = __rdtscp(&aux);
		if (unlikely((aux & PVREAD_TSC_AUX_CPU_MASK) != cpu))
			return READ_RETRY;
	}
	tsc_timestamp = LOAD(r->pvclock.tsc_timestamp);
	system_time = LOAD(r->pvclock.system_time);
	mul = LOAD(r->pvclock.tsc_to_system_mul);
	shift = LOAD(r->pvclock.tsc_shift);
	flags = LOAD(r->pvclock.flags);
	RMB();
	if (version & 1)
		return READ_BUSY;
	if (LOAD(r->pvclock.version) != version)
		return READ_RETRY;
	if (unlikely(!pvread_pvclock_shift_ok(shift)))
		return READ_NO_INVALID;
	/*
	 * Xen can take the stable bit back (a migration to a host it does
	 * not trust): the kernel's vread_pvclock() checks it on every read.
	 */
	if (mode == PVREAD_MODE_STABLE && !(flags & PVREAD_PVCLOCK_TSC_STABLE))
		return READ_NO_MODE;
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
 * The fine clocks that never go back: the line orders them across
 * processes, and whether a reading raises their floor depends on the mode.
 */
static inline bool fine_never_back(clockid_t clock)
{
	return never_back(clock) && clock != CLOCK_MONOTONIC_COARSE;
}

/* @sec and @ns past it, ns possibly beyond a second, into *@ts. */
static ALWAYS_INLINE void set_ts(struct timespec *ts, int64_t sec, uint64_t ns)
{
	/* Once a second, or a broken page: never a loop. */
	if (unlikely(ns >= NSEC_PER_SEC)) {
		sec = (int64_t)((uint64_t)sec + ns / NSEC_PER_SEC);
		ns %= NSEC_PER_SEC;
	}
	ts->tv_sec = sec;
	ts->tv_nsec = (long)ns;
}

/*
 * The line's nanoseconds past base's second for @clock at @tsc, or
 * READ_NO_DELTA beyond the line's span (the module stopped re-anchoring it:
 * the kernel knows better) or with a shift no module writes.
 */
static ALWAYS_INLINE enum read_result read_line(const struct pvread_line *l,
						const clockid_t clock,
						uint64_t tsc, uint64_t snsec,
						uint64_t *ns)
{
	uint64_t d = pvread_line_delta(tsc, LOAD(l->tsc_timestamp));
	uint32_t mul, shift;

	if (clock == CLOCK_MONOTONIC_RAW) {
		mul = LOAD(l->raw_mul);
		shift = LOAD(l->raw_shift);
	} else {
		mul = LOAD(l->mul);
		shift = LOAD(l->shift);
	}
	if (unlikely(d > LOAD(l->tsc_span)))
		return READ_NO_DELTA;
	if (unlikely(!pvread_line_ns(d, mul, shift, snsec, ns)))
		return READ_NO_INVALID;
	return READ_OK;
}

/* The record's cycles through the timekeeper's conversion. */
static ALWAYS_INLINE enum read_result read_records(const struct mapping *m,
						   uint32_t mode,
						   const clockid_t clock,
						   uint64_t snsec,
						   uint64_t *ns)
{
	const struct pvread_timekeeper *tk = &m->hdr->tk;
	uint32_t mult, shift;
	struct pvread_sample s;
	uint64_t cycle_last;
	enum read_result r;
	int ok;

	r = read_cycles(m, mode, &s);
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
	if (unlikely(!pvread_tk_base_ok(snsec, shift)))
		return READ_NO_INVALID;
	ok = pvread_tk_shifted_ns(s.cycles, cycle_last, LOAD(tk->mask),
				  LOAD(tk->max_delta), mult, snsec, ns);
	if (unlikely(ok != 1))
		return ok ? READ_NO_INVALID : READ_NO_DELTA;
	*ns >>= shift;
	return READ_OK;
}

/*
 * The kernel's fine clocks are never below its coarse ones: these are the
 * value at the last tick plus the time since.  The line may be behind the
 * kernel by up to the bound, so right after a tick it can be below the
 * coarse clocks the page publishes (and gettimeofday()'s second below
 * time()'s): hold it at MONOTONIC_COARSE until it passes it, REALTIME at
 * the same instant on the wall clock (the line's REALTIME base is its
 * MONOTONIC base less the kernel's wall_to_monotonic, with the same
 * fraction).  Not at REALTIME_COARSE: before Linux 6.15 that steps back
 * by a microsecond or so on an NTP frequency change, and the module holds
 * MONOTONIC_COARSE against it; so neither result ever steps back but for
 * a step of REALTIME itself, and REALTIME_COARSE, the held value less the
 * same offset or less, is never above it.
 */
static ALWAYS_INLINE enum read_result
not_below_coarse(const struct pvread_header *h, const clockid_t clock,
		 int64_t *sec, uint64_t *ns)
{
	const struct pvread_clock_base *c = &h->tk.base[CLOCK_MONOTONIC_COARSE];
	const struct pvread_clock_base *m, *r;
	int64_t csec = LOAD(c->sec), cns = (int64_t)LOAD(c->snsec);

	if (unlikely((uint64_t)cns >= NSEC_PER_SEC))
		return READ_NO_INVALID;
	if (clock == CLOCK_REALTIME) {
		m = &h->line.base[CLOCK_MONOTONIC];
		r = &h->line.base[CLOCK_REALTIME];
		csec -= LOAD(m->sec) - LOAD(r->sec);
		cns -= (int64_t)(LOAD(m->snsec) >> 32) -
		       (int64_t)(LOAD(r->snsec) >> 32);
	}
	/* ns may exceed a second (set_ts() normalises); cns within +-2 s */
	if ((*sec - csec) * NSEC_PER_SEC + (int64_t)*ns - cns < 0) {
		while (cns < 0) {
			cns += NSEC_PER_SEC;
			csec--;
		}
		*sec = csec;
		*ns = (uint64_t)cns;
	}
	return READ_OK;
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
	const struct pvread_clock_base *b;
	enum read_result r = READ_OK;
	uint64_t snsec, ns, tsc;
	uint32_t seq;
	int64_t sec;

	if (timens_shifts(clock) && unlikely(m->ns.unknown))
		return READ_NO_TIMENS;
	seq = LOAD(h->seq);
	RMB();
	if (unlikely(seq & 1))
		return seq == atomic_load_explicit(&stuck_seq,
						   memory_order_relaxed) ?
		       READ_NO_STUCK : READ_BUSY;
	*mode = LOAD(h->mode);
	if (likely(*mode == PVREAD_MODE_LINE) || *mode == PVREAD_MODE_PERCPU) {
		if (unlikely(LOAD(h->error_bound_ns) > m->tolerance_ns))
			return READ_NO_BOUND;
	} else if (*mode != PVREAD_MODE_STABLE) {
		return READ_NO_MODE;
	}
	if (is_coarse(clock)) {
		/* Every mode's: the timekeeper's at its last update. */
		b = &h->tk.base[clock];
		sec = LOAD(b->sec);
		ns = LOAD(b->snsec);
		if (unlikely(ns >= NSEC_PER_SEC))
			r = READ_NO_INVALID;
	} else if (likely(*mode == PVREAD_MODE_LINE)) {
		/*
		 * lfence; rdtsc even where rdtscp is offered: the line names
		 * no CPU, and on an AMD EPYC (KVM guest) it is the faster,
		 * 18.6 ns a read in a loop against 21.1, 23.3 ns a line read
		 * against 26.3.
		 */
		_mm_lfence();
		tsc = __rdtsc();
		b = &h->line.base[clock];
		sec = LOAD(b->sec);
		snsec = LOAD(b->snsec);
		r = read_line(&h->line, clock, tsc, snsec, &ns);
		if ((clock == CLOCK_MONOTONIC || clock == CLOCK_REALTIME) &&
		    likely(r == READ_OK))
			r = not_below_coarse(h, clock, &sec, &ns);
	} else {
		b = &h->tk.base[clock];
		sec = LOAD(b->sec);
		snsec = LOAD(b->snsec);
		r = read_records(m, *mode, clock, snsec, &ns);
	}
	if (unlikely(r != READ_OK))
		return r;
	RMB();
	if (unlikely(LOAD(h->seq) != seq))
		return READ_RETRY;
	if (timens_shifts(clock)) {
		sec += m->ns.sec[clock];
		ns += (uint64_t)m->ns.nsec[clock];
	}
	set_ts(ts, sec, ns);
	return READ_OK;
}

/* How long a read has tried, for the limits of its one retry loop. */
struct attempts {
	uint64_t since;		/* TSC when it first met an update in progress */
	int tries;		/* attempts spoilt by updates that completed */
};

/*
 * After attempt result @r: true to try again (an update in progress, waited
 * for as the kernel would; one that completed, a few times), false with the
 * reason in *@why when libc must answer.
 */
static __attribute__((noinline, cold))
bool try_again(const struct mapping *m, enum read_result r,
	       struct attempts *a, enum pvread_slow_reason *why)
{
	uint32_t seq;

	switch (r) {
	case READ_BUSY:
		if (wait_for_writer(&a->since))
			return true;
		/* Not the kernel's timekeeper: later reads need not wait. */
		seq = LOAD(m->hdr->seq);
		if (seq & 1)
			atomic_store_explicit(&stuck_seq, seq,
					      memory_order_relaxed);
		*why = PVREAD_SLOW_BUSY;
		return false;
	case READ_RETRY:
		stats.retries++;
		if (++a->tries < MAX_TRIES)
			return true;
		*why = PVREAD_SLOW_RETRIES;
		return false;
	default:
		*why = (enum pvread_slow_reason)(r - READ_NO);
		return false;
	}
}

/*
 * The page's answer for @clock, and the mode that gave it; PVREAD_MODE_NONE
 * when libc must answer, for the reason in *@why.  One loop, as the vDSO's.
 */
static ALWAYS_INLINE uint32_t read_fast(const struct mapping *m,
					const clockid_t clock,
					struct timespec *ts,
					enum pvread_slow_reason *why)
{
	struct attempts a = { 0, 0 };
	enum read_result r;
	uint32_t mode;

	while (unlikely((r = try_read(m, clock, ts, &mode)) != READ_OK))
		if (!try_again(m, r, &a, why))
			return PVREAD_MODE_NONE;
	return mode;
}

static inline int64_t ns_of(const struct timespec *ts)
{
	return ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static inline void set_ns(struct timespec *ts, int64_t v)
{
	ts->tv_sec = v / NSEC_PER_SEC;
	ts->tv_nsec = v % NSEC_PER_SEC;
}

/* Never below what this process returned before, on any thread. */
static inline void apply_floor(clockid_t clock, struct timespec *ts)
{
	_Atomic int64_t *f = &floors[clock].ns;
	int64_t v = ns_of(ts);
	int64_t cur = atomic_load_explicit(f, memory_order_relaxed);

	while (v > cur)
		if (atomic_compare_exchange_weak_explicit(f, &cur, v,
				memory_order_relaxed, memory_order_relaxed))
			return;
	if (v < cur) {
		stats.clamped++;
		set_ns(ts, cur);
	}
}

/*
 * Stable and line readings need not raise the floor (that would make every
 * reader write one shared cache line): stable ones are the kernel's own,
 * line ones never decrease across every reader of the page.  They only
 * respect it, for what per-CPU readings and fallbacks put there.
 */
static inline void respect_floor(clockid_t clock, struct timespec *ts)
{
	int64_t cur = atomic_load_explicit(&floors[clock].ns,
					   memory_order_relaxed);

	if (unlikely(ns_of(ts) < cur)) {
		stats.clamped++;
		set_ns(ts, cur);
	}
}

/*
 * A process that returned readings of the page's line must not return less
 * afterwards, and the kernel's clock may be behind the line by up to the
 * bound.  The module promises that the line's value, clamped to the line's
 * ends, never decreases, also after the mode has left PVREAD_MODE_LINE (the
 * last line stays, its span cut): so lift the kernel's answer to the line's
 * value now, waiting for an update as long as a read does (the kernel's
 * own clock_gettime() waits for the timekeeper the same way).  An update
 * that does not complete within that, or a page that never had a line,
 * leaves the answer to the floor.
 */
static __attribute__((noinline, cold))
void not_below_line(const struct mapping *m, clockid_t clock,
		    struct timespec *ts)
{
	const struct pvread_header *h = m->hdr;
	const struct pvread_line *l = &h->line;
	const struct pvread_clock_base *b = &l->base[clock];
	uint64_t stamp, span, snsec, tsc, d, ns, since = 0;
	uint32_t seq, mul, shift;
	struct timespec line;
	int64_t sec;
	int tries;

	for (tries = 0; tries < MAX_TRIES;) {
		seq = LOAD(h->seq);
		RMB();
		if (seq & 1) {
			uint64_t now = __rdtsc();

			if (seq == atomic_load_explicit(&stuck_seq,
							memory_order_relaxed))
				return;
			if (!since)
				since = now;
			else if (now - since > MAX_WAIT_TSC)
				return;
			_mm_pause();
			continue;
		}
		stamp = LOAD(l->tsc_timestamp);
		span = LOAD(l->tsc_span);
		if (clock == CLOCK_MONOTONIC_RAW) {
			mul = LOAD(l->raw_mul);
			shift = LOAD(l->raw_shift);
		} else {
			mul = LOAD(l->mul);
			shift = LOAD(l->shift);
		}
		sec = LOAD(b->sec);
		snsec = LOAD(b->snsec);
		tsc = tsc_ordered(m);
		RMB();
		if (LOAD(h->seq) == seq)
			break;
		tries++;
	}
	if (tries == MAX_TRIES || !span)
		return;
	d = pvread_line_delta(tsc, stamp);
	if (d > span)
		d = span;
	if (!pvread_line_ns(d, mul, shift, snsec, &ns))
		return;
	if (m->ns.unknown)
		return;
	set_ts(&line, sec + m->ns.sec[clock], ns + (uint64_t)m->ns.nsec[clock]);
	if (line.tv_sec > ts->tv_sec ||
	    (line.tv_sec == ts->tv_sec && line.tv_nsec > ts->tv_nsec)) {
		stats.clamped++;
		*ts = line;
	}
}

/*
 * libc's answer: the one fallback of every read.  For the clocks that never
 * go back, lifted to the line if this process has read it, then to the
 * floor, which it raises.
 */
static __attribute__((noinline, cold))
int slow_clock_gettime(clockid_t clock, struct timespec *ts,
		       enum pvread_slow_reason why)
{
	int ret;

	stats.slow++;
	stats.slow_by_reason[why]++;
	ret = pvread_kernel_clock_gettime(clock, ts);
	if (ret || !never_back(clock))
		return ret;
	if (clock != CLOCK_MONOTONIC_COARSE &&
	    atomic_load_explicit(&line_used, memory_order_relaxed) &&
	    atomic_load_explicit(&map_state, memory_order_acquire) == MAP_READY)
		not_below_line(&the_map, clock, ts);
	apply_floor(clock, ts);
	return ret;
}

/*
 * The first fast reading of @clock in @mode after readings in another one.
 * Per-CPU readings raise the floor; stable and line readings do not, and
 * one mode's can lie on either side of another's (the line ahead of the
 * kernel, a per-CPU record behind it, by up to the bound).  So after stable
 * or line readings ask the kernel once: its answer, lifted to the line, is
 * at or above all of them, and becomes the floor.  The page may flip back
 * and forth while that answer is taken (the thread preempted): readings of
 * the clock fall back until the new mode is noted (MODE_SEEN_SEEDING), so
 * none returned meanwhile stays above the floor.  Returns true when *@ts
 * is libc's answer instead of the fast reading.
 */
static __attribute__((noinline, cold))
bool enter_mode(clockid_t clock, uint32_t mode, struct timespec *ts)
{
	_Atomic uint32_t *seen_p = &mode_seen[clock];
	uint32_t seen = atomic_load_explicit(seen_p, memory_order_acquire);

	if (mode == PVREAD_MODE_LINE &&
	    !atomic_load_explicit(&line_used, memory_order_relaxed))
		atomic_store_explicit(&line_used, true, memory_order_relaxed);
	if (seen == PVREAD_MODE_NONE || seen == PVREAD_MODE_PERCPU) {
		/* The floor holds every reading returned so far. */
		if (atomic_compare_exchange_strong_explicit(seen_p, &seen, mode,
				memory_order_acq_rel, memory_order_acquire))
			return false;
	} else if (seen != MODE_SEEN_SEEDING &&
		   atomic_compare_exchange_strong_explicit(seen_p, &seen,
				MODE_SEEN_SEEDING, memory_order_acq_rel,
				memory_order_acquire)) {
		slow_clock_gettime(clock, ts, PVREAD_SLOW_SEED);
		atomic_store_explicit(seen_p, mode, memory_order_release);
		return true;
	}
	/* Another thread is seeding, or noted a mode first: libc answers. */
	slow_clock_gettime(clock, ts, PVREAD_SLOW_SEED);
	return true;
}

/* The read for one clock; inlined with @clock a constant, once per clock. */
static ALWAYS_INLINE int gettime(const clockid_t clock, struct timespec *ts)
{
	enum pvread_slow_reason why = PVREAD_SLOW_OTHER;
	const struct mapping *m;
	uint32_t mode;

	/* A bad clock or pointer gets libc's own answer: EINVAL, EFAULT. */
	if (!is_mirrored(clock) || !ts)
		goto slow;
	m = get_map();
	if (unlikely(!m)) {
		why = PVREAD_SLOW_NO_PAGE;
		goto slow;
	}
	mode = read_fast(m, clock, ts, &why);
	if (unlikely(mode == PVREAD_MODE_NONE))
		goto slow;
	if (fine_never_back(clock)) {
		/*
		 * Acquire: a mode seen here comes with the floor its first
		 * reader raised before noting it (a plain load on x86).
		 */
		if (unlikely(atomic_load_explicit(&mode_seen[clock],
						  memory_order_acquire) != mode) &&
		    enter_mode(clock, mode, ts))
			return 0;
		if (mode == PVREAD_MODE_PERCPU)
			apply_floor(clock, ts);
		else
			respect_floor(clock, ts);
	} else if (clock == CLOCK_MONOTONIC_COARSE) {
		/*
		 * The kernel's own MONOTONIC_COARSE steps back on NTP
		 * frequency changes before Linux 6.15; the page's is held,
		 * but a fallback reads the kernel's.  Its floor moves once a
		 * tick, so raising it on every read costs no shared writes
		 * to speak of.
		 */
		apply_floor(clock, ts);
	}
	stats.fast++;
	return 0;
slow:
	return slow_clock_gettime(clock, ts, why);
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
		return pvread_kernel_gettimeofday(tv, tz);
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

	if (!m) {
		errno = ENODEV;
		return -1;
	}
	/*
	 * The calling CPU's own record, whatever the page's mode, where
	 * rdtscp names the CPU; else, in stable mode, the record that
	 * serves every CPU (sample->cpu says which).
	 */
	if (m->rdtscp && (LOAD(m->hdr->flags) & PVREAD_FLAG_TSC_AUX)) {
		mode = PVREAD_MODE_PERCPU;
	} else if (LOAD(m->hdr->mode) == PVREAD_MODE_STABLE) {
		mode = PVREAD_MODE_STABLE;
	} else {
		errno = ENODEV;
		return -1;
	}
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

static int get_info(struct pvread_info *info)
{
	const struct mapping *m = get_map();
	struct attempts a = { 0, 0 };
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
	for (;;) {
		seq = LOAD(h->seq);
		RMB();
		info->mode = LOAD(h->mode);
		info->flags = LOAD(h->flags);
		info->nr_registered = LOAD(h->nr_registered);
		info->error_bound_ns = LOAD(h->error_bound_ns);
		info->spread_ns = LOAD(h->spread_ns);
		info->updates = LOAD(h->updates);
		info->stable_record = LOAD(h->stable_record);
		info->line_state = LOAD(h->line_state);
		info->tsc_warp = LOAD(h->tsc_warp);
		info->line_anchors = LOAD(h->line.anchors);
		info->last_update_ns =
			LOAD(h->tk.base[CLOCK_MONOTONIC].sec) * NSEC_PER_SEC +
			(int64_t)(LOAD(h->tk.base[CLOCK_MONOTONIC].snsec) >>
				  LOAD(h->tk.shift));
		RMB();
		if (!(seq & 1) && LOAD(h->seq) == seq)
			break;
		/* As a read would: wait for an update, not for ever. */
		if (!try_again(m, seq & 1 ? READ_BUSY : READ_RETRY, &a, &why) ||
		    seq == atomic_load_explicit(&stuck_seq,
						memory_order_relaxed)) {
			errno = EAGAIN;
			return -1;
		}
	}
	info->fast = read_fast(m, CLOCK_MONOTONIC, &ts, &why) !=
		     PVREAD_MODE_NONE;
	return 0;
}

/*
 * The struct of libpvread 0.2, which pvread_get_info() fills for ever; a
 * later version appends fields, and its callers say how many they know.
 */
#define INFO_SIZE_0_2 (offsetof(struct pvread_info, line_anchors) + \
		       sizeof(uint64_t))
_Static_assert(sizeof(struct pvread_info) == INFO_SIZE_0_2,
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
	if (size > sizeof(mine)) {
		memset((char *)info + sizeof(mine), 0, size - sizeof(mine));
		size = sizeof(mine);
	}
	memcpy(info, &mine, size);
	errno = saved_errno;
	return ret;
}

int pvread_get_info(struct pvread_info *info)
{
	return pvread_get_info_size(info, INFO_SIZE_0_2);
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
		[PVREAD_SLOW_TIMENS] = "timens",
		[PVREAD_SLOW_STUCK] = "stuck",
		[PVREAD_SLOW_INVALID] = "invalid",
	};

	return reason < PVREAD_SLOW_NR_REASONS && names[reason] ?
	       names[reason] : "?";
}
