// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libpvread: the read path.  See include/uapi/linux/pvread.h for the page
 * and the arithmetic; every step that cannot vouch for its answer returns
 * false and the caller asks the kernel instead (kernel.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"
#include "arith.h"
#include "internal.h"

#define NSEC_PER_SEC 1000000000LL
#define KTIME_SEC_MAX (INT64_MAX / NSEC_PER_SEC)
/*
 * Correct Xen's vCPUs disagree by a few ns since its 4.8 fixes (by several
 * dozen us before them): 10 us leaves room for that and for a line steered
 * towards the kernel's clock, and refuses hosts that behave like pre-4.8.
 */
#define DEFAULT_TOLERANCE_NS 10000ULL
#define MAX_TRIES 8		/* reads spoilt by updates that completed */
#ifndef MAX_WAIT_TSC
#define MAX_WAIT_TSC (1ULL << 32)	/* for an update in progress: 1-2 s */
#endif

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
	bool unknown;		/* offsets unreadable: those clocks are the kernel's */
};

struct mapping {
	const struct pvread_header *hdr;
	const unsigned char *records;
	uint32_t nr_records;
	uint32_t stride;
	uint64_t tolerance_ns;
	struct timens ns;
};

enum { MAP_UNTRIED, MAP_BUSY, MAP_READY, MAP_ABSENT };

/*
 * Per-process floors of the clocks that must never go back, a cache line
 * each: a fallback of one clock writes its floor, and must not take the
 * line from readers of another.
 */
struct floor {
	_Atomic int64_t ns;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct floor) == 64, "one cache line per floor");

/*
 * How each clock was last answered in this process: PVREAD_MODE_LINE once
 * a line reading was returned since the floor last held every reading,
 * PVREAD_MODE_NONE while it does (no reading yet, or the kernel's answers,
 * which raise it), MODE_SEEN_HOLDING while a fallback lifts to the line
 * (see slow_clock_gettime()).  Written only when it changes, so it stays
 * in every CPU's cache; always by compare-and-swap, from the value the
 * writer acted on.
 */
#define MODE_SEEN_HOLDING 0x102
#define HOLD_MARGIN_TSC 4096	/* see not_below_line() */

/* Records whose update did not complete, remembered: a few suffice. */
#define NR_STUCK_RECORDS 16

/*
 * Everything this process knows, in a page the kernel zeroes in every
 * child it makes without sharing memory (MADV_WIPEONFORK): fork(),
 * _Fork(), clone() without CLONE_VM.  Such a child can be in another time
 * namespace (unshare(CLONE_NEWTIME) puts the children made after it
 * there), may have none of the threads that were mapping or holding, and
 * starts as a process that has read nothing: it maps again (the page it
 * inherited, without opening the device) and reads its own offsets.  A
 * child sharing memory (vfork(), CLONE_VM) is always in its parent's time
 * namespace: the kernel refuses to make it in another.
 */
struct process {
	_Atomic int map_state;
	/*
	 * The clocks the fast path may read from the page, as a set of clock
	 * ids (CLOCKS_*): 0 until the mapping is ready, so that one load tells
	 * the fast path both; the shifted clocks left out where this
	 * process's time namespace offsets are unknown.
	 */
	_Atomic uint32_t fast_clocks;
	/* Written by the thread that wins MAP_UNTRIED -> MAP_BUSY. */
	struct mapping map;
	/*
	 * This process has returned readings of the page's line: from then
	 * on a fallback answer is lifted towards the line (see
	 * not_below_line()).  Set once.
	 */
	_Atomic bool line_used;
	/*
	 * The seq of a header update that did not complete within
	 * MAX_WAIT_TSC: while the header still says it, reads fall back at
	 * once instead of waiting again.  0: none (a seq being written is
	 * odd).  The same for records: index << 32 | version, by index.
	 */
	_Atomic uint32_t stuck_seq;
	_Atomic uint64_t stuck_record[NR_STUCK_RECORDS];
	_Atomic uint32_t mode_seen[PVREAD_NR_CLOCK_BASES];
	struct floor floors[PVREAD_NR_CLOCK_BASES];
};

/* This process's page; made at the first call, then only read. */
static struct process *_Atomic the_process;

/*
 * The page this process adopted, which its children inherit mapped (the
 * device's mapping is shared, a page given to pvread_use_page() stays):
 * they adopt it again.
 */
static const void *_Atomic adopted_page;
static _Atomic size_t adopted_size;

/*
 * How reads were answered, per thread, written only on the slow path: the
 * default TLS model, which a library loaded by dlopen() may use (the
 * initial-exec one takes from a reserve glibc sizes at start).
 */
static __thread struct pvread_stats stats;

/*
 * PVREAD_MAX_ERROR_NS: decimal digits only, at most 2^64 - 1.  Anything
 * else (a sign, a space, hex, an overflow) is a mistake: the default
 * (pvread_get_info() says which tolerance is in force; a library prints
 * nothing unasked).  Not in a set-user-ID program: secure_getenv().
 */
static uint64_t tolerance_from_env(void)
{
	const char *s = secure_getenv("PVREAD_MAX_ERROR_NS");
	const char *c;
	uint64_t v = 0;

	if (!s || !*s)
		return DEFAULT_TOLERANCE_NS;
	for (c = s; *c; c++) {
		unsigned int digit = (unsigned int)(*c - '0');

		if (digit > 9 || v > (UINT64_MAX - digit) / 10)
			return DEFAULT_TOLERANCE_NS;
		v = v * 10 + digit;
	}
	return v;
}

/* Does a time namespace shift @clock, and by which of its offsets? */
/* Sets of clock ids, tested as the vDSO tests VDSO_HRES and VDSO_COARSE. */
#define BIT_OF(clock) (1U << (clock))
#define CLOCKS_FINE (BIT_OF(CLOCK_REALTIME) | BIT_OF(CLOCK_MONOTONIC) | \
		     BIT_OF(CLOCK_MONOTONIC_RAW) | BIT_OF(CLOCK_BOOTTIME) | \
		     BIT_OF(CLOCK_TAI))
#define CLOCKS_COARSE (BIT_OF(CLOCK_REALTIME_COARSE) | \
		       BIT_OF(CLOCK_MONOTONIC_COARSE))
/* The ones a time namespace shifts; its offsets are 0 for the others. */
#define CLOCKS_TIMENS (BIT_OF(CLOCK_MONOTONIC) | BIT_OF(CLOCK_MONOTONIC_RAW) | \
		       BIT_OF(CLOCK_MONOTONIC_COARSE) | BIT_OF(CLOCK_BOOTTIME))
/* The fine clocks that never go back: floors and the hold at the line. */
#define CLOCKS_STEADY (BIT_OF(CLOCK_MONOTONIC) | BIT_OF(CLOCK_MONOTONIC_RAW) | \
		       BIT_OF(CLOCK_BOOTTIME))

/* @clock below 32: the caller checked it against CLOCKS_FINE | _COARSE. */
static inline bool clock_in(uint32_t set, clockid_t clock)
{
	return (set >> clock) & 1;
}

static inline bool timens_shifts(clockid_t clock)
{
	return clock_in(CLOCKS_TIMENS, clock);
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
 * The library's own system calls: syscall(2), which is no cancellation
 * point, where libc's open(), read() and close() are (POSIX does not let
 * clock_gettime() be one, and a cancel in the middle would leave the
 * mapping half made).
 */
static int sys_open(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC);
}

static ssize_t sys_read(int fd, void *buf, size_t len)
{
	return syscall(SYS_read, fd, buf, len);
}

static void sys_close(int fd)
{
	syscall(SYS_close, fd);
}

/*
 * Is this process in the time namespace its children are made in?  Then
 * /proc/self/timens_offsets, which shows the children's, shows its own.
 * After unshare(CLONE_NEWTIME) it is not, until it exits: its own offsets
 * are then shown nowhere.  A kernel without time namespaces has neither
 * link (1); any other failure: not known (0).
 */
static int own_timens_is_childrens(void)
{
	char own[64], children[64];
	ssize_t a, b;

	int a_errno;

	a = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/ns/time", own,
		    sizeof(own));
	a_errno = errno;
	b = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/ns/time_for_children",
		    children, sizeof(children));
	if (a < 0 && b < 0 && a_errno == ENOENT && errno == ENOENT)
		return 1;
	return a > 0 && a == b && a < (ssize_t)sizeof(own) &&
	       !memcmp(own, children, (size_t)a);
}

/*
 * This process's time namespace offsets, from /proc/self/timens_offsets.
 * A kernel without time namespaces has no such file in a mounted /proc: no
 * offsets.  Any other failure (no /proc here), and a process whose
 * children go to another namespace, leave them unknown, and the clocks
 * they shift to the kernel.  The offsets first, the namespaces after:
 * unshare(CLONE_NEWTIME) cannot be undone, so namespaces that agree after
 * the read agreed during it.
 */
static void read_timens(struct timens *ns)
{
	char buf[256], *p = buf;
	ssize_t n = -1;
	int fd;

	*ns = (struct timens){ .unknown = true };
	fd = sys_open("/proc/self/timens_offsets", O_RDONLY);
	if (fd < 0) {
		ns->unknown = errno != ENOENT ||
			      access("/proc/self/stat", F_OK) != 0;
		return;
	}
	n = sys_read(fd, buf, sizeof(buf) - 1);
	sys_close(fd);
	if (n <= 0 || n == sizeof(buf) - 1)
		return;
	buf[n] = 0;
	while (*p)
		if (!timens_line(&p, ns)) {
			*ns = (struct timens){ .unknown = true };
			return;
		}
	ns->unknown = !own_timens_is_childrens();
}

/* Is @p, @size bytes long, a page this library can read? */
static bool adopt_page(struct mapping *m, const void *p, size_t size)
{
	const struct pvread_header *h = p;

	if ((uintptr_t)p % _Alignof(struct pvread_header) ||
	    size < sizeof(*h) || h->magic != PVREAD_MAGIC ||
	    h->abi_version != PVREAD_ABI_VERSION || h->map_size > size ||
	    h->record_stride < sizeof(struct pvread_record) ||
	    h->record_offset < sizeof(*h) || h->nr_records > PVREAD_MAX_RECORDS ||
	    (h->record_offset | h->record_stride) %
	    _Alignof(struct pvread_record) ||
	    (uint64_t)h->record_offset +
	    (uint64_t)h->nr_records * h->record_stride > h->map_size)
		return false;
	m->hdr = h;
	m->records = (const unsigned char *)p + h->record_offset;
	m->nr_records = h->nr_records;
	m->stride = h->record_stride;
	m->tolerance_ns = tolerance_from_env();
	read_timens(&m->ns);
	atomic_store(&adopted_size, size);
	atomic_store(&adopted_page, p);
	return true;
}

static bool map_device(struct mapping *m)
{
	uint32_t size;
	void *p;
	int fd;

	fd = sys_open(PVREAD_DEVICE, O_RDONLY);
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
	sys_close(fd);
	return true;
fail:
	sys_close(fd);
	return false;
}

/*
 * This process's page, made at its first call (of any thread: the loser
 * of a race gives its page back).  NULL if there is no memory for it.  On
 * a kernel without MADV_WIPEONFORK (before 4.14, which has no time
 * namespaces) children inherit their parent's state, in their parent's
 * namespace: correct, and slow for good only where a thread of the parent
 * was mapping or holding at the fork.
 */
static __attribute__((noinline, cold)) struct process *make_process(void)
{
	struct process *p, *none = NULL;
	size_t size = (sizeof(*p) + 4095) & ~(size_t)4095;
	int saved_errno = errno;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		errno = saved_errno;
		return NULL;
	}
	madvise(p, size, MADV_WIPEONFORK);
	if (!atomic_compare_exchange_strong(&the_process, &none, p)) {
		munmap(p, size);
		p = none;
	}
	errno = saved_errno;
	return p;
}

/*
 * Take this process's mapping from MAP_UNTRIED to MAP_BUSY, then to
 * MAP_READY if @make made it, else to @failed; with every signal blocked,
 * so that no handler can siglongjmp() out of the middle, and with system
 * calls that are no cancellation points.  False if another thread did it
 * first.
 */
static bool make_mapping(struct process *p,
			 bool (*make)(struct mapping *, const void *, size_t),
			 const void *page, size_t size, int failed, bool *made)
{
	int state = MAP_UNTRIED, saved_errno = errno;
	sigset_t all, old;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!atomic_compare_exchange_strong(&p->map_state, &state, MAP_BUSY)) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return false;
	}
	*made = make(&p->map, page, size);
	if (*made)
		atomic_store_explicit(&p->fast_clocks, p->map.ns.unknown ?
				      (CLOCKS_FINE | CLOCKS_COARSE) &
				      ~CLOCKS_TIMENS :
				      CLOCKS_FINE | CLOCKS_COARSE,
				      memory_order_release);
	atomic_store_explicit(&p->map_state, *made ? MAP_READY : failed,
			      memory_order_release);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved_errno;
	return true;
}

/* The page this process's parent adopted, else the device's. */
static bool map_inherited_or_device(struct mapping *m, const void *page,
				    size_t size)
{
	(void)page;
	(void)size;
	page = atomic_load(&adopted_page);
	if (page && adopt_page(m, page, atomic_load(&adopted_size)))
		return true;
	return map_device(m);
}

/* The first call: map, unless another thread is doing it. */
static __attribute__((noinline, cold)) struct process *first_map(void)
{
	struct process *p = atomic_load(&the_process);
	bool made;

	if (!p)
		p = make_process();
	if (!p)
		return NULL;
	if (!make_mapping(p, map_inherited_or_device, NULL, 0, MAP_ABSENT,
			  &made))
		made = atomic_load_explicit(&p->map_state,
					    memory_order_acquire) == MAP_READY;
	return made ? p : NULL;
}

/*
 * This process and its mapping, or NULL while the mapping is absent or
 * being made by another thread.
 */
static ALWAYS_INLINE struct process *get_process(void)
{
	struct process *p = atomic_load_explicit(&the_process,
						 memory_order_acquire);

	if (likely(p) && likely(atomic_load_explicit(&p->map_state,
						     memory_order_acquire) ==
				MAP_READY))
		return p;
	if (p && atomic_load_explicit(&p->map_state, memory_order_relaxed) !=
		 MAP_UNTRIED)
		return NULL;
	return first_map();
}

static bool adopt_given_page(struct mapping *m, const void *page, size_t size)
{
	return page && adopt_page(m, page, size);
}

int pvread_use_page(const void *page, size_t size)
{
	struct process *p = atomic_load(&the_process);
	bool made;

	if (!p)
		p = make_process();
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	/* Refused: nothing chosen, a later call may give a page or map. */
	if (!make_mapping(p, adopt_given_page, page, size, MAP_UNTRIED,
			  &made)) {
		errno = EBUSY;
		return -1;
	}
	if (!made) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* One attempt's outcome; the READ_NO_* name the reason the kernel must answer. */
enum read_result {
	READ_OK,
	READ_BUSY,		/* an update is being written */
	READ_RETRY,		/* an update completed under us */
	READ_HOLD,		/* maybe below the coarse clocks: see try_read() */
	READ_NO,		/* + the reason */
	READ_NO_MODE = READ_NO + PVREAD_SLOW_MODE,
	READ_NO_BOUND = READ_NO + PVREAD_SLOW_BOUND,
	READ_NO_DELTA = READ_NO + PVREAD_SLOW_DELTA,
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
 * A TSC read not taken before the loads that precede it: lfence; rdtsc,
 * even where rdtscp is offered.  The line names no CPU, and on an AMD
 * EPYC (KVM guest) it is the faster, 18.6 ns a read in a loop against
 * 21.1, 23.3 ns a line read against 26.3.
 */
static ALWAYS_INLINE uint64_t tsc_ordered(void)
{
	_mm_lfence();
	return __rdtsc();
}

/* Did record @cpu's update to @version (odd) not complete before? */
static inline bool record_stuck(struct process *p, uint32_t cpu,
				uint32_t version)
{
	return atomic_load_explicit(&p->stuck_record[cpu % NR_STUCK_RECORDS],
				    memory_order_relaxed) ==
	       ((uint64_t)cpu << 32 | version);
}

/*
 * An update did not complete within MAX_WAIT_TSC: remember the header's
 * seq if it is odd, and every record that is, so that later reads fall
 * back at once while they stay so.
 */
static __attribute__((cold)) void remember_stuck(struct process *p)
{
	const struct mapping *m = &p->map;
	uint32_t seq = LOAD(m->hdr->seq), cpu, version;

	if (seq & 1)
		atomic_store_explicit(&p->stuck_seq, seq, memory_order_relaxed);
	for (cpu = 0; cpu < m->nr_records; cpu++) {
		const struct pvread_record *r = (const void *)
			(m->records + (size_t)cpu * m->stride);

		version = LOAD(r->pvclock.version);
		if (version & 1)
			atomic_store_explicit(
				&p->stuck_record[cpu % NR_STUCK_RECORDS],
				(uint64_t)cpu << 32 | version,
				memory_order_relaxed);
	}
}

/*
 * Record @cpu evaluated at a TSC read after its version: the "xen"
 * clocksource's cycles, if @cpu is the CPU the TSC was read on.
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
static __attribute__((noinline)) enum read_result
not_below_coarse(const struct pvread_header *h, const clockid_t clock,
		 int64_t *sec, uint64_t *ns)
{
	const struct pvread_clock_base *c = &h->tk.base[CLOCK_MONOTONIC_COARSE];
	uint64_t csec = LOAD(c->sec), cns = LOAD(c->snsec);
	int64_t d;

	if (unlikely(cns >= NSEC_PER_SEC))
		return READ_NO_INVALID;
	if (clock == CLOCK_REALTIME) {
		const struct pvread_clock_base *m = &h->line.base[CLOCK_MONOTONIC];
		const struct pvread_clock_base *r = &h->line.base[CLOCK_REALTIME];
		/* Each below 2^32 ns: a few turns at most. */
		int64_t frac = (int64_t)cns - (int64_t)(LOAD(m->snsec) >> 32) +
			       (int64_t)(LOAD(r->snsec) >> 32);

		/* Unsigned: a page no module wrote gives nonsense, not UB. */
		csec = csec - LOAD(m->sec) + LOAD(r->sec);
		for (; frac < 0; frac += NSEC_PER_SEC)
			csec--;
		for (; frac >= NSEC_PER_SEC; frac -= NSEC_PER_SEC)
			csec++;
		cns = (uint64_t)frac;
	}
	/*
	 * *@ns may exceed a second (set_ts() normalises), but from a line a
	 * module wrote, read within its span, by less than a second: the line
	 * is below the coarse value where it is seconds behind, and the
	 * nanoseconds decide within 4 s.
	 */
	d = (int64_t)((uint64_t)*sec - csec);
	if (likely(d > 0) ||
	    (d >= -4 && (int64_t)((uint64_t)d * NSEC_PER_SEC + *ns - cns) >= 0))
		return READ_OK;
	if (unlikely(csec > KTIME_SEC_MAX))
		return READ_NO_INVALID;
	*sec = (int64_t)csec;
	*ns = cns;
	return READ_OK;
}

/*
 * One attempt at the page's answer for @clock, as the vDSO's do_hres():
 * READ_OK, READ_BUSY while an update is being written, READ_RETRY when one
 * completed under us, READ_NO_* when the kernel must answer.
 */
static ALWAYS_INLINE enum read_result try_read(const struct process *p,
					       const clockid_t clock,
					       struct timespec *ts,
					       const bool fast)
{
	const struct mapping *m = &p->map;
	const struct pvread_header *h = m->hdr;
	const struct pvread_clock_base *b;
	enum read_result r = READ_OK;
	uint64_t snsec, ns;
	uint32_t seq;
	int64_t sec;

	seq = LOAD(h->seq);
	RMB();
	if (unlikely(seq & 1))
		return seq == atomic_load_explicit(&p->stuck_seq,
						   memory_order_relaxed) ?
		       READ_NO_STUCK : READ_BUSY;
	if (unlikely(LOAD(h->mode) != PVREAD_MODE_LINE))
		return READ_NO_MODE;
	if (unlikely(LOAD(h->error_bound_ns) > m->tolerance_ns))
		return READ_NO_BOUND;
	if (clock_in(CLOCKS_COARSE, clock)) {
		/* The timekeeper's at its last update. */
		b = &h->tk.base[clock];
		sec = LOAD(b->sec);
		ns = LOAD(b->snsec);
		if (unlikely(ns >= NSEC_PER_SEC))
			r = READ_NO_INVALID;
	} else {
		uint64_t tsc = tsc_ordered();

		b = &h->line.base[clock];
		sec = LOAD(b->sec);
		snsec = LOAD(b->snsec);
		r = read_line(&h->line, clock, tsc, snsec, &ns);
		/*
		 * MONOTONIC past MONOTONIC_COARSE's second, or within it and
		 * past its nanoseconds, needs no more (ns unnormalised only
		 * makes it later); the rest, and REALTIME, are worked out.
		 */
		if (likely(r == READ_OK) &&
		    (clock == CLOCK_REALTIME ||
		     (clock == CLOCK_MONOTONIC &&
		      (LOAD(h->tk.base[CLOCK_MONOTONIC_COARSE].sec) > sec ||
		       (LOAD(h->tk.base[CLOCK_MONOTONIC_COARSE].sec) == sec &&
			LOAD(h->tk.base[CLOCK_MONOTONIC_COARSE].snsec) > ns)))))
			r = fast && clock == CLOCK_MONOTONIC ? READ_HOLD :
			    not_below_coarse(h, clock, &sec, &ns);
	}
	if (unlikely(r != READ_OK))
		return r;
	RMB();
	if (unlikely(LOAD(h->seq) != seq))
		return READ_RETRY;
	/* The kernel's clocks are s64 ns: beyond them, no module wrote it. */
	if (unlikely((uint64_t)sec > KTIME_SEC_MAX))
		return READ_NO_INVALID;
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
 * reason in *@why when the kernel must answer.
 */
static __attribute__((noinline, cold))
bool try_again(struct process *p, enum read_result r,
	       struct attempts *a, enum pvread_slow_reason *why)
{
	switch (r) {
	case READ_BUSY:
		if (wait_for_writer(&a->since))
			return true;
		/* Not the kernel's timekeeper: later reads need not wait. */
		remember_stuck(p);
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
 * The page's answer for @clock; false when the kernel must answer, for the
 * reason in *@why.  One loop, as the vDSO's.
 */
static ALWAYS_INLINE bool read_fast(struct process *p, const clockid_t clock,
				    struct timespec *ts,
				    enum pvread_slow_reason *why)
{
	struct attempts a = { 0, 0 };
	enum read_result r = READ_NO_TIMENS;

	/* The fast path leaves these out (fast_clocks): say why here. */
	if (timens_shifts(clock) && unlikely(p->map.ns.unknown))
		return try_again(p, r, &a, why);
	while (unlikely((r = try_read(p, clock, ts, false)) != READ_OK))
		if (!try_again(p, r, &a, why))
			return false;
	return true;
}

/* Unsigned: a page no module wrote may make it wrap, never UB. */
static inline int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)((uint64_t)ts->tv_sec * NSEC_PER_SEC +
			 (uint64_t)ts->tv_nsec);
}

static inline void set_ns(struct timespec *ts, int64_t v)
{
	ts->tv_sec = v / NSEC_PER_SEC;
	ts->tv_nsec = v % NSEC_PER_SEC;
}

/* Never below what this process returned before, on any thread. */
static inline void apply_floor(struct process *p, clockid_t clock,
			       struct timespec *ts)
{
	_Atomic int64_t *f = &p->floors[clock].ns;
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
 * Line readings need not raise the floor (that would make every reader
 * write one shared cache line): they never decrease across every reader of
 * the page.  They only respect it, for what fallbacks put there: the line
 * may be behind the kernel's clock by up to the bound.
 */
static inline void respect_floor(struct process *p, clockid_t clock,
				 struct timespec *ts)
{
	int64_t cur = atomic_load_explicit(&p->floors[clock].ns,
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
 * last line stays, its span cut): so the kernel's answer @ts is lifted
 * towards the line's value now.  Fully (@full) where this process may
 * have returned line readings of the clock since its floor last held them
 * all (see slow_clock_gettime()); else at most the tolerance above the
 * kernel's answer: a line reading anyone returned was within its reader's
 * tolerance of the kernel's clock then (the bound it was read under, an
 * estimate), so the lift still orders the answer after every line reading
 * of a process whose tolerance is no larger, and the error stays within
 * this one's however far the line runs ahead once the bound has crossed
 * it.  Waits for an update as long as a read does (the kernel's own
 * clock_gettime() waits for the timekeeper the same way).  An update that
 * does not complete within that, or a page that never had a line, leaves
 * the answer to the floor.
 */
static __attribute__((noinline, cold))
bool not_below_line(struct process *p, clockid_t clock, struct timespec *ts,
		    bool full)
{
	const struct mapping *m = &p->map;
	const struct pvread_header *h = m->hdr;
	const struct pvread_line *l = &h->line;
	const struct pvread_clock_base *b = &l->base[clock];
	uint64_t stamp, span, snsec, tsc, d, ns, since = 0, most;
	uint32_t seq, mul, shift;
	struct timespec line;
	int64_t sec, above;
	int tries;

	/* Shifted clocks are never read from the page then: nothing to hold. */
	if (m->ns.unknown)
		return true;
	for (tries = 0; tries < MAX_TRIES;) {
		seq = LOAD(h->seq);
		RMB();
		if (seq & 1) {
			uint64_t now = __rdtsc();

			if (seq == atomic_load_explicit(&p->stuck_seq,
							memory_order_relaxed))
				return false;
			if (!since) {
				since = now;
			} else if (now - since > MAX_WAIT_TSC) {
				remember_stuck(p);
				return false;
			}
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
		tsc = tsc_ordered();
		RMB();
		if (LOAD(h->seq) == seq)
			break;
		tries++;
	}
	if (tries == MAX_TRIES)
		return false;
	/* No line, or none a module writes: nothing anyone read from it. */
	if (!span || (uint64_t)sec > KTIME_SEC_MAX)
		return true;
	/*
	 * Lifting to the line: a little past this TSC.  A line reading that
	 * saw the clock's mode_seen still LINE may have read the TSC after
	 * this, the rdtsc running late past that load; not by more than the
	 * CPU can keep in flight, far fewer ticks than these.
	 */
	if (full)
		tsc += HOLD_MARGIN_TSC;
	d = pvread_line_delta(tsc, stamp);
	if (d > span)
		d = span;
	if (!pvread_line_ns(d, mul, shift, snsec, &ns))
		return true;
	set_ts(&line, sec + m->ns.sec[clock], ns + (uint64_t)m->ns.nsec[clock]);
	above = ns_of(&line) - ns_of(ts);
	if (above <= 0)
		return true;
	stats.lifted++;
	most = m->tolerance_ns;
	if ((uint64_t)above > most) {
		if (!full) {
			/* ts is the kernel's: a year's ns cannot overflow it */
			stats.lift_capped++;
			if (most > (uint64_t)NSEC_PER_SEC << 25)
				most = (uint64_t)NSEC_PER_SEC << 25;
			set_ts(&line, ts->tv_sec, (uint64_t)ts->tv_nsec + most);
		} else {
			stats.lifted_beyond++;
		}
	}
	*ts = line;
	return true;
}

/*
 * The kernel's answer: the one fallback of every read.  For the clocks
 * that never go back, lifted towards the line if this process has read
 * it, then to the floor, which it raises.  @p: NULL without a mapping (yet).
 *
 * Line readings do not raise the floor (that would be a shared write on
 * every read), so while a clock's mode_seen is PVREAD_MODE_LINE the floor
 * does not hold them: the first fallback then notes MODE_SEEN_HOLDING,
 * lifts fully to the line and raises the floor there, then notes
 * PVREAD_MODE_NONE (the floor holds every reading returned) -- or LINE
 * again if the line could not be read (an update that did not complete),
 * so that the next fallback holds instead.  A fallback that sees HOLDING,
 * or a seed after line readings, lifts fully too; any other only within
 * the tolerance, held by the floor meanwhile: its error decays to the
 * tolerance as the kernel's clock catches up, instead of following a line
 * that runs ahead.  A line reading that sees NONE notes LINE again; one
 * that sees HOLDING falls back (enter_line()).  Signals are blocked while
 * HOLDING, as while mapping.
 */
static __attribute__((noinline, cold))
int slow_clock_gettime(struct process *p, clockid_t clock, struct timespec *ts,
		       enum pvread_slow_reason why)
{
	_Atomic uint32_t *seen_p;
	uint32_t seen;
	sigset_t all, old;
	bool won, held;
	int ret;

	stats.slow++;
	stats.slow_by_reason[why]++;
	ret = pvread_kernel_clock_gettime(clock, ts);
	if (ret || !never_back(clock))
		return ret;
	/* Mapping in progress in another thread: the floors hold all the same. */
	if (!p)
		p = atomic_load_explicit(&the_process, memory_order_acquire);
	if (!p)
		return ret;
	if (clock == CLOCK_MONOTONIC_COARSE ||
	    !atomic_load_explicit(&p->line_used, memory_order_relaxed)) {
		apply_floor(p, clock, ts);
		return ret;
	}
	seen_p = &p->mode_seen[clock];
	seen = atomic_load_explicit(seen_p, memory_order_acquire);
	if (seen != PVREAD_MODE_LINE) {
		not_below_line(p, clock, ts, seen == MODE_SEEN_HOLDING);
		apply_floor(p, clock, ts);
		return ret;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* Lose the race, and the winner holds: lift fully all the same. */
	won = atomic_compare_exchange_strong(seen_p, &seen, MODE_SEEN_HOLDING);
	held = not_below_line(p, clock, ts, true);
	apply_floor(p, clock, ts);
	if (won) {
		seen = MODE_SEEN_HOLDING;
		atomic_compare_exchange_strong(seen_p, &seen, held ?
					       PVREAD_MODE_NONE :
					       PVREAD_MODE_LINE);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/*
 * The first line reading of @clock since the floor held every reading
 * returned (mode_seen NONE): note LINE, so that the next fallback holds at
 * the line.  While another thread's fallback holds (HOLDING), that
 * fallback may not have raised the floor yet, so a line reading returned
 * now could be above it unseen: the kernel's answer, lifted fully, instead
 * (PVREAD_SLOW_SEED).  Returns true when *@ts is that answer.
 */
static __attribute__((noinline, cold))
bool enter_line(struct process *p, clockid_t clock, struct timespec *ts)
{
	_Atomic uint32_t *seen_p = &p->mode_seen[clock];
	uint32_t seen = PVREAD_MODE_NONE;

	if (!atomic_load_explicit(&p->line_used, memory_order_relaxed))
		atomic_store_explicit(&p->line_used, true, memory_order_relaxed);
	if (atomic_compare_exchange_strong_explicit(seen_p, &seen,
			PVREAD_MODE_LINE, memory_order_acq_rel,
			memory_order_acquire) || seen == PVREAD_MODE_LINE)
		return false;
	slow_clock_gettime(p, clock, ts, PVREAD_SLOW_SEED);
	return true;
}

/*
 * Everything but the fast path's one attempt: the first call's mapping,
 * the retries, the kernel's answer, the hold at the line, the floors'
 * writes.  A read that gets here reads the page again from the start.
 */
static __attribute__((noinline, cold))
int gettime_slow(clockid_t clock, struct timespec *ts)
{
	enum pvread_slow_reason why = PVREAD_SLOW_OTHER;
	struct process *p = NULL;

	/* A bad clock or pointer gets the kernel's answer: EINVAL, EFAULT. */
	if (!is_mirrored(clock) || !ts)
		goto slow;
	p = get_process();
	if (unlikely(!p)) {
		why = PVREAD_SLOW_NO_PAGE;
		goto slow;
	}
	if (unlikely(!read_fast(p, clock, ts, &why)))
		goto slow;
	if (fine_never_back(clock)) {
		/*
		 * Acquire: LINE seen here comes with the floor the fallback
		 * before it raised (a plain load on x86).
		 */
		if (atomic_load_explicit(&p->mode_seen[clock],
					 memory_order_acquire) != PVREAD_MODE_LINE &&
		    enter_line(p, clock, ts))
			return 0;
		respect_floor(p, clock, ts);
	} else if (clock == CLOCK_MONOTONIC_COARSE) {
		/*
		 * The kernel's own MONOTONIC_COARSE steps back on NTP
		 * frequency changes before Linux 6.15; the page's is held,
		 * but a fallback reads the kernel's.  Its floor moves once a
		 * tick: the fast path leaves the raise to this path.
		 */
		apply_floor(p, clock, ts);
	}
	return 0;
slow:
	return slow_clock_gettime(p, clock, ts, why);
}

/*
 * Does the page's reading in *@ts stand as it is?  For the steady clocks,
 * while this process's floor holds every reading returned (mode_seen LINE
 * since the last fallback) and is not above it; for MONOTONIC_COARSE, while
 * its floor is not below it either (the slow path raises it, once a tick).
 * Loads only: every write is the slow path's.
 */
static ALWAYS_INLINE bool stands(const struct process *p, clockid_t clock,
				 const struct timespec *ts)
{
	int64_t floor;

	if (clock_in(CLOCKS_STEADY, clock)) {
		if (unlikely(atomic_load_explicit(&p->mode_seen[clock],
						  memory_order_acquire) !=
			     PVREAD_MODE_LINE))
			return false;
	} else if (clock != CLOCK_MONOTONIC_COARSE) {
		return true;
	}
	floor = atomic_load_explicit(&p->floors[clock].ns,
				     memory_order_relaxed);
	return clock == CLOCK_MONOTONIC_COARSE ? ns_of(ts) == floor :
						 ns_of(ts) >= floor;
}

/*
 * The read, shaped as the vDSO's do_hres(): one attempt at the page, and
 * one exit to everything else.  No write but *@ts.
 */
int pvread_clock_gettime(clockid_t clock, struct timespec *ts)
{
	const struct process *p = atomic_load_explicit(&the_process,
						       memory_order_acquire);

	if (likely(p) && likely((unsigned int)clock < 32) &&
	    likely(clock_in(atomic_load_explicit(&p->fast_clocks,
						 memory_order_acquire), clock)) &&
	    likely(ts) && likely(try_read(p, clock, ts, true) == READ_OK) &&
	    likely(stands(p, clock, ts)))
		return 0;
	return gettime_slow(clock, ts);
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
				remember_stuck(p);
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
		if (!try_again(p, seq & 1 ? READ_BUSY : READ_RETRY, &a, &why) ||
		    seq == atomic_load_explicit(&p->stuck_seq,
						memory_order_relaxed)) {
			errno = EAGAIN;
			return -1;
		}
	}
	info->fast = read_fast(p, CLOCK_MONOTONIC, &ts, &why);
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
				remember_stuck(p);
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

int pvread_get_stats_size(struct pvread_stats *out, size_t size)
{
	if (size < offsetof(struct pvread_stats, retries)) {
		errno = EINVAL;
		return -1;
	}
	copy_sized(out, size, &stats, sizeof(stats));
	return 0;
}

void pvread_get_stats(struct pvread_stats *out)
{
	copy_sized(out, STATS_SIZE_0_2, &stats, sizeof(stats));
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
