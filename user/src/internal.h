/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the library's files share and do not export: the per-process state,
 * the rules of each of its fields (who writes it, when, with which memory
 * order), and the helpers more than one file inlines.  Read in this order:
 *
 *   mapping.c  the process state and the rendezvous of the library's
 *              copies, the first call's mapping of the device (the shim's
 *              constructor's), pvread_use_page(), the tolerance, the time
 *              namespace offsets and a child's check of them
 *   read.c     the read path: one attempt at the page (try_read()), the fast
 *              entry pvread_clock_gettime() and its slow path; it calls
 *              order.c where a reading does not stand or the kernel must
 *              answer, and order.c calls nothing of it
 *   order.c    what never goes back: floors, the hold at the line, the
 *              kernel's answer (pvread_slow_clock_gettime())
 *   info.c     introspection: pvread_get_info(), _record(), _stats(),
 *              pvread_sample_pvclock()
 *   kernel.c   the kernel's answer, through the vDSO or the system call
 *   preload.c  the LD_PRELOAD shim (libpvread-preload.so)
 *
 * Every name here that is not static has the pvread_ prefix and hidden
 * visibility: nothing is exported but what src/libpvread.map lists, and a
 * program linking libpvread.a meets no name of its own.
 */
#ifndef PVREAD_INTERNAL_H
#define PVREAD_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>
#include <x86intrin.h>

#include <linux/pvread.h>

#include "pvread.h"

#define PVREAD_HIDDEN __attribute__((visibility("hidden")))

/* kernel.c: the kernel's answer, through the vDSO or the system call. */
PVREAD_HIDDEN int pvread_kernel_clock_gettime(clockid_t clock,
					      struct timespec *ts);
PVREAD_HIDDEN int pvread_kernel_gettimeofday(struct timeval *tv, void *tz);
PVREAD_HIDDEN int pvread_kernel_has_vdso(void);
/*
 * The vDSO's clock_gettime(), kernel.c's constructor finds it, or NULL.
 * Defined in read.c, which calls it where the kernel answers first: a test
 * that has its own pvread_kernel_clock_gettime() (without kernel.c) keeps
 * it NULL, and every kernel's read goes through its hook.
 */
typedef int (*pvread_clock_gettime_fn)(clockid_t, struct timespec *);
PVREAD_HIDDEN extern _Atomic(pvread_clock_gettime_fn) pvread_vdso_clock_gettime;
/* The vDSO's -errno as -1 with errno set. */
PVREAD_HIDDEN __attribute__((cold)) int pvread_vdso_error(int ret);

/* @vdso's answer, as clock_gettime(2)'s: 0, or -1 with errno set. */
static inline int pvread_vdso_answer(pvread_clock_gettime_fn vdso,
				     clockid_t clock, struct timespec *ts)
{
	int ret = vdso(clock, ts);

	return ret >= 0 ? ret : pvread_vdso_error(ret);
}

#define NSEC_PER_SEC 1000000000LL
#define KTIME_SEC_MAX (INT64_MAX / NSEC_PER_SEC)
#define MAX_TRIES 8		/* reads spoilt by updates that completed */
#ifndef MAX_WAIT_TSC
#define MAX_WAIT_TSC (1ULL << 32)	/* for an update in progress: 1-2 s */
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ALWAYS_INLINE inline __attribute__((always_inline))

/*
 * @x as the compiler cannot see through (the kernel's OPTIMIZER_HIDE_VAR):
 * a value made from loads alone stays one operand, so that what is done
 * with it after the TSC read is one step, not the sum the compiler would
 * fold it back into.
 */
#define HIDE(x) __asm__("" : "+r"(x))

/* The page is written concurrently by Xen and the module. */
#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define RMB() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/*
 * A time namespace's offsets (time_namespaces(7)), added as the kernel's
 * vDSO adds them: to CLOCK_MONOTONIC, _RAW and _COARSE the "monotonic"
 * one, to CLOCK_BOOTTIME the "boottime" one.  The page is the root
 * namespace's clock.  What they are worth is process's ns_known (below):
 * these are what was read, and where.
 */
struct timens {
	int64_t sec[PVREAD_NR_CLOCK_BASES];
	int64_t nsec[PVREAD_NR_CLOCK_BASES];	/* [0, NSEC_PER_SEC) */
	bool shifted;		/* an offset not 0: not the root namespace's clocks */
	bool none;		/* a kernel without time namespaces: all 0, always */
	bool unread;		/* no /proc/self/timens_offsets to read */
	bool childrens;		/* read, but the children's namespace's, not ours */
};

/*
 * The page this process reads, and what it read once with it.  Plain
 * fields: written only by the thread that wins map_state's MAP_UNTRIED ->
 * MAP_BUSY (mapping.c's make_mapping()), before its release stores of
 * fast_clocks and map_state; read-only once MAP_READY (or MAP_ABSENT), by
 * any thread that saw it or a fast_clocks not 0 with an acquire load, or
 * the hint HINT_KERNEL (a release store after such a load) with one.
 */
struct mapping {
	const struct pvread_header *hdr;
	const unsigned char *records;	/* NULL: only the header is mapped */
	uint32_t nr_records;
	uint32_t stride;
	uint64_t tolerance_ns;
	uint32_t tsc_read;	/* FAST_RDTSCP or 0: tsc_read_choice() */
	size_t device_size;	/* bytes of /dev/pvread mapped here, else 0 */
	struct timens ns;
};

/*
 * map_state: MAP_UNTRIED (0, a fresh state) -> MAP_BUSY by
 * compare-and-swap (seq_cst), with every signal blocked, by the one thread
 * that maps; then, by that thread alone, a release store of MAP_READY, or
 * of MAP_ABSENT (no page: the device is not there or not one this library
 * reads, and the kernel answers for good), or of MAP_RETRY (a transient
 * error, EMFILE, ENOMEM, EINTR...: retry_tsc says when a call may try
 * again, MAP_RETRY -> MAP_BUSY as from MAP_UNTRIED), or of MAP_UNTRIED
 * again (pvread_use_page() refused its page).  Read with acquire
 * (get_process(), MAP_READY: the mapping is readable), relaxed only to see
 * whether to try mapping.  A child of fork() made while another thread
 * was mapping (MAP_BUSY, and no such thread in the child) is put back to
 * MAP_UNTRIED by the fork handler (mapping.c's in_child()); one of _Fork()
 * keeps MAP_BUSY: the kernel answers it.
 */
enum { MAP_UNTRIED, MAP_BUSY, MAP_READY, MAP_ABSENT, MAP_RETRY };

/* MAP_RETRY: the next try no sooner than this many TSC ticks (0.3-1 s). */
#define RETRY_TSC (1ULL << 30)

/*
 * ns_check: NS_UNCHECKED (0) in a child that inherited a mapping (its
 * offsets not yet its own: see struct process), -> NS_CHECKING by
 * compare-and-swap by the one thread that checks (mapping.c's
 * pvread_check_child(), from get_process()), -> NS_CHECKED, or back to
 * NS_UNCHECKED when the check could not tell (the next slow call checks
 * again).  The thread that maps stores NS_CHECKED before MAP_READY.
 */
enum { NS_UNCHECKED, NS_CHECKING, NS_CHECKED };

/*
 * A child's check of its boottime offset: brackets of clock calls taken
 * at one check, and checks that could not tell before CLOCK_BOOTTIME is
 * left to the kernel for good.
 */
#define BOOT_BRACKETS 4
#define BOOT_CHECKS 16

/*
 * boot_check: BOOT_NONE (0) -> BOOT_PENDING by the thread whose check
 * found a child's monotonic offset its own (release, after fast_clocks),
 * -> BOOT_CHECKING by compare-and-swap by the one thread that checks the
 * boottime offset at a read of CLOCK_BOOTTIME (mapping.c's
 * pvread_check_boottime()), -> BOOT_NONE, or back to BOOT_PENDING when it
 * could not tell.
 */
enum { BOOT_NONE, BOOT_PENDING, BOOT_CHECKING };

/*
 * Per-process floors of the clocks that must never go back, a cache line
 * each: a fallback of one clock writes its floor, and must not take the
 * line from readers of another.  Raised only, by order.c's raise_floor()
 * (a relaxed compare-and-swap loop), on the slow path: the kernel's
 * answers of those clocks once the process has returned page readings of
 * them, and the page's MONOTONIC_COARSE; read relaxed (the fast path's
 * stands(), order.c's apply_floor_below()).  Line readings only respect
 * it: they never decrease across every reader, and raising it on every
 * read would make every reader write one shared cache line.
 */
struct floor {
	_Atomic int64_t ns;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct floor) == 64, "one cache line per floor");

/*
 * CLOCK_MONOTONIC's line as the page gives it at one seq, made ready to
 * read (read.c's check_line(), once per update): what a read at that seq
 * does after the counter is the product, the shift, the seconds, one
 * compare for the span and the hold at MONOTONIC_COARSE, the seq again
 * and the floor -- about 30 instructions where the page's own fields take
 * 70, and on Intel's rdtscp and rdtsc, which hold back what follows them,
 * each one counts (lean_monotonic(), read.c).
 *
 * key: the page's seq the record was made at (32 bits, even), which a
 * read loads first (acquire: every field after it), compares with the
 * header's seq, and that seq again after its other loads; else
 * RECORD_BUSY (above 32 bits) while one thread writes the rest.  A
 * zeroed record (a process's until its first check, a child's) names no
 * header: never read.
 *
 * The rest are the page's, at that seq: the header (the process's one
 * page: pvread_use_page() refuses another), the rate (mul << shift) and
 * the offset that reads the line at the TSC itself (arith.h's
 * pvread_line_offset()), the base's seconds, and the TSC from which the
 * line is at or above MONOTONIC_COARSE (start: the anchor plus check_line()'s
 * pass point) with the ticks from there to the end of its span (window):
 * a TSC outside them, the hold or a line past its span, is the full
 * read's.  A time namespace's offset is in the seconds and the offset
 * (where the line still fits 64 bits with it).  resumes: the low 32 bits
 * of the page's disruptions, for a read that took its TSC before any of
 * this (the hint's, pvread_tsc_first).  Made only in line mode, with the bound within
 * map.tolerance_ns, every check of check_line() passed, and MONOTONIC in
 * fast_clocks (its offset known): everything else about the process that
 * a read checks is the floor, which it still checks.
 *
 * Written by any thread whose read found the page at a seq this copy had
 * not checked: it loads the key, checks the page, compares-and-swaps the
 * key it loaded, unless RECORD_BUSY, for RECORD_BUSY (a loser, or one
 * that found it busy, leaves it: another thread writes), makes sure the
 * page is still at its seq (else puts the key back, release, and leaves),
 * then a release fence, the rest relaxed, and the key, release.  A reader
 * that loaded a key naming seq S and then any field another writer stored
 * reads the page's seq after it: that writer saw the page at its own seq
 * after taking the key from S's, so no older than S, and (the fence) the
 * reader's seq is no older than that; it finds S only where the writer's
 * seq is S, whose fields it wrote alike.  A writer that never finishes (a
 * signal handler's longjmp() out of a read, a _Fork() child of one)
 * leaves RECORD_BUSY: no record after it, every MONOTONIC read the full
 * one.  A wrap of the 32-bit seq (2^30 updates with no record made in
 * between: pvread_line_checked's risk below) finds a record whose own
 * anchor is days behind the TSC, past any span: never read.
 */
struct line_record {
	_Atomic uint64_t key;
	_Atomic(const struct pvread_header *) hdr;
	_Atomic uint64_t start;
	_Atomic uint64_t window;
	_Atomic uint64_t rate;
	_Atomic uint64_t offset;
	_Atomic int64_t sec;
	_Atomic uint32_t resumes;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct line_record) == 64, "one cache line");
#define RECORD_BUSY ((uint64_t)1 << 63)

/*
 * mode_seen[clock], for the clocks that never go back: what this process
 * has returned of the clock, and so what its floor must hold.
 *
 *   SEEN_NEVER    (0, the zeroed page) nothing returned yet.
 *   SEEN_KERNEL   only the kernel's answers returned, as they are, with no
 *                 floor kept: a process without the page, or in mode none
 *                 from its start, costs what libc costs.  The first page
 *                 reading after them starts the floor at the kernel's
 *                 answer (after NEVER, at nothing).
 *   SEEN_FLOOR    the floor holds every reading returned.
 *   SEEN_LINE     line readings may have been returned since the floor
 *                 last held them all: the next fallback holds at the line.
 *   SEEN_HOLDING  one thread is making the floor hold what it does not:
 *                 the line readings returned (after LINE), or the kernel's
 *                 answers returned (after KERNEL).  Meanwhile line readings
 *                 and fallbacks take the kernel's answer lifted fully to
 *                 the line, and raise the floor to it.
 *
 * Every change by compare-and-swap (seq_cst), from the value the writer
 * acted on:
 *   NEVER -> KERNEL    a kernel's answer returned as it is; the load that
 *                      decides so comes after the kernel's read
 *   NEVER -> FLOOR     the first page reading, no kernel's answer before
 *   FLOOR -> LINE      a line reading, at or above the floor or raised to
 *                      it (order.c's line_reading())
 *   LINE -> HOLDING    a fallback (order.c's settle()): it waits
 *                      HOLD_MARGIN_TSC ticks, reads the kernel and the TSC
 *                      then, lifts fully to the line, raises the floor,
 *                      and notes FLOOR, or LINE again if it could not read
 *                      the line (an update that does not complete: the
 *                      next fallback holds instead)
 *   KERNEL -> HOLDING  the first page reading after the kernel's answers
 *                      (start_floor()): it waits as long, then raises the
 *                      floor to the kernel's answer, and notes FLOOR
 * Only the thread that made HOLDING ends it.  The wait: a reader that saw
 * the word before it changed may have read its TSC (or the kernel's clock)
 * that much later, out of order; never more (an interrupt or a VM exit in
 * between is taken at an instruction boundary).  A line reading stands on
 * the fast path only in LINE and at or above the floor (read.c's
 * stands()), so a floor raised by another thread's fallback is respected
 * at once, whatever the TSC the reading was taken at.
 *
 * mode_seen[CLOCK_MONOTONIC_COARSE]: NEVER, KERNEL, HOLDING while its
 * first page reading starts the floor, then FLOOR; its readings stand
 * only equal to the floor.  mode_seen[CLOCK_REALTIME] and [CLOCK_TAI],
 * clocks the kernel steps and that keep no floor: LINE once a line reading
 * of them has been returned (stands() returns the next ones with one
 * load); from then on their fallbacks are lifted towards the line
 * (order.c's lift_wall()).
 *
 * No signal is blocked anywhere in this: a handler that reads the clock,
 * or one that never returns, finds a state every rule above covers (a
 * HOLDING whose thread is gone leaves its clock to the kernel, lifted).
 * Written only when it changes, so it stays in every CPU's cache.
 */
enum { SEEN_NEVER, SEEN_KERNEL, SEEN_FLOOR, SEEN_LINE, SEEN_HOLDING };

/* Records whose update did not complete, remembered: a few suffice. */
#define NR_STUCK_RECORDS 16

/*
 * The layout of struct process and of everything in it, and their rules:
 * copies of the library in one process share one state only if they
 * agree on this number (the rendezvous, mapping.c).  Bump it with ANY
 * change to struct process, struct mapping, struct timens, struct floor,
 * struct line_record,
 * the MAP_, NS_, MODE_SEEN_ values or the rules written here.  (Not
 * bumped for a child's store of FAST_KERNEL where map_state is
 * MAP_ABSENT, libpvread 0.5: the value every copy of layout 2 stores and
 * reads there; a bump would part copies that agree.)
 */
#define PROCESS_LAYOUT 3

/*
 * Everything this process knows, in two pages of its own (mapping.c's
 * new_process()), one per process however many copies of the library it
 * loaded (the shim, libpvread.so.2 by dlopen(), libpvread.a in the
 * program...): each copy's constructor finds the state another copy made,
 * or makes it (mapping.c's rendezvous), and keeps it in its own
 * pvread_process.
 *
 * The first page is inherited by every child: the mapping (the device's is
 * shared, a page given to pvread_use_page() stays mapped), the hints, the
 * copies' count.  The second (from fast_clocks on) is zeroed in every
 * child the kernel makes without sharing memory -- fork(), _Fork(),
 * clone() without CLONE_VM -- by MADV_WIPEONFORK, and again, for fork(),
 * by the fork handler (in_child(): also where the kernel refused the
 * madvise()): a child starts with no reading returned, no floor, no hold,
 * and fast_clocks 0, so that its first call takes the slow path, where
 * get_process() checks that the offsets it inherited are its own
 * (pvread_check_child()), without a system call:
 *
 *   - A child can be in another time namespace than its parent only if
 *     the parent called unshare(CLONE_NEWTIME) (or made it with clone3()
 *     and CLONE_NEWTIME), perhaps after it read its offsets.  The kernel's
 *     CLOCK_MONOTONIC_COARSE less its REALTIME_COARSE (the vDSO's, no
 *     system call; namespaced, and no namespace shifts REALTIME), at one
 *     tick, is compared with the page's fine MONOTONIC less its REALTIME
 *     (wall_to_monotonic, exactly; not its coarse bases, which the module
 *     may hold), at one update, plus the inherited monotonic offset:
 *     equal, however old the page, the offset is the child's, and
 *     CLOCK_MONOTONIC, _RAW and _COARSE are read from the page again.  Not
 *     at one tick (the kernel's REALTIME_COARSE changed across the reads)
 *     or a page update in progress: the kernel answers, and the next slow
 *     call checks again.
 *   - CLOCK_BOOTTIME's offset cannot be checked so (there is no coarse
 *     BOOTTIME).  Once the monotonic one agrees, at the child's first
 *     read of BOOTTIME (boot_check), the kernel's BOOTTIME is read
 *     between two of its MONOTONIC (clock calls: system calls with
 *     the xen clocksource, which a filter that lets the program read the
 *     clock allows): their difference is the page's monotonic_to_boot
 *     plus the child's boottime offset less its monotonic one, within the
 *     bracket.  The inherited offsets outside a bracket are not the
 *     child's: BOOTTIME is the kernel's.  Inside each of BOOT_BRACKETS,
 *     the child's offset is the parent's to within the narrowest bracket
 *     (a namespace made to shift BOOTTIME by less than that more than its
 *     parent's, and MONOTONIC by exactly as much, is not told apart), and
 *     that width comes off BOOTTIME's tolerance (boot_tolerance_ns): no
 *     reading strays further from the kernel's answer than
 *     PVREAD_MAX_ERROR_NS.  A width above half the tolerance, a
 *     page update, a clock call that failed: the kernel answers BOOTTIME
 *     and a later call checks again, BOOT_CHECKS times at most; a re-check
 *     takes the boottime brackets alone (other threads read map.ns once
 *     MONOTONIC is known: nothing rewrites it then).
 *   - Where the check finds another namespace, or the parent's offsets
 *     were its children's already (it had unshared before it read them),
 *     the process uses time namespaces itself: the child reads its offsets
 *     from /proc, as a first mapping does (system calls).  So does one
 *     whose wall clock was stepped (clock_settime()) between the page's
 *     last update and the check: with the module, a few microseconds.
 *
 * A child sharing memory (vfork(), CLONE_VM) is always in its parent's
 * time namespace (the kernel refuses to make it in another) and shares
 * its state.  Where MADV_WIPEONFORK is refused (EPERM from a seccomp
 * filter, EINVAL before Linux 4.14, which has no time namespaces either),
 * a child of _Fork() or clone() runs no fork handler and keeps its
 * parent's state, offsets included (wipe_refused).
 */
struct process {
	/* MAP_*, above. */
	_Atomic int map_state;
	_Atomic uint64_t retry_tsc;	/* MAP_RETRY: the TSC of the next try */
	/* Written by the thread that wins MAP_UNTRIED -> MAP_BUSY. */
	struct mapping map;
	/*
	 * The page this process adopted (the device's, or pvread_use_page()'s),
	 * which a child put back to MAP_UNTRIED adopts again.  Stored (seq_cst,
	 * the size first) by the thread that maps; loaded (the page first) by
	 * the one that maps again.
	 */
	const void *_Atomic adopted_page;
	_Atomic size_t adopted_size;
	/*
	 * The seq of a header update that did not complete within
	 * MAX_WAIT_TSC: while the header still says it, reads fall back at
	 * once instead of waiting again.  0: none (a seq being written is
	 * odd).  The same for records: index << 32 | version, by index, each
	 * remembered only by a wait for that record that ran out.  Hints,
	 * relaxed both ways: written by pvread_remember_stuck() after a wait
	 * for the header that ran out (read.c, order.c, info.c), and by
	 * info.c's remember_stuck_record(); read by try_read(),
	 * not_below_line(), get_info() and record_stuck().
	 */
	_Atomic uint32_t stuck_seq;
	_Atomic uint64_t stuck_record[NR_STUCK_RECORDS];
	/*
	 * The copies of the library that use this state (the rendezvous):
	 * one each, taken by a copy's constructor (or the first call of a
	 * copy whose constructor found no memory), given back by the
	 * destructor of a copy dlclose() unloads; the last gives the pages
	 * back (mapping.c's leave()).  Relaxed: constructors and destructors
	 * run under the dynamic linker's lock.
	 */
	_Atomic int copies;
	bool wipe_refused;	/* madvise(MADV_WIPEONFORK) failed */
	/*
	 * 1 while a child's check rewrites map.ns from /proc (seq_cst, by the
	 * thread that checks): a child forked meanwhile, which may hold half
	 * of them, reads its own.
	 */
	_Atomic int ns_rewriting;

	/* Zeroed in every child (above), from here on. */
	/*
	 * The clocks the fast path may read from the page, as a set of clock
	 * ids (CLOCKS_*), and how it reads the TSC (FAST_RDTSCP, above the
	 * ids): 0 until the mapping is ready, so that one load tells the fast
	 * path all three; the shifted clocks left out where this process's
	 * time namespace offsets are unknown (ns_known); FAST_KERNEL alone
	 * where there is no page for good.  Stored with release by the thread
	 * that maps, after map and ns_known and before map_state's MAP_READY
	 * (or MAP_ABSENT); in a child by the thread that checks
	 * (NS_CHECKING), after ns_known, or, where map_state is MAP_ABSENT,
	 * by any thread on the slow path (FAST_KERNEL, as its parent stored).
	 * Read with acquire by the fast path.
	 */
	_Atomic uint32_t fast_clocks __attribute__((aligned(4096)));
	/*
	 * The clocks whose offsets map.ns holds for this process (every one a
	 * namespace does not shift, once mapped): the others are the
	 * kernel's (PVREAD_SLOW_TIMENS).  Stored with release by the thread
	 * that maps or checks, after it wrote map.ns; read with acquire
	 * (timens_unknown()).
	 */
	_Atomic uint32_t ns_known;
	/* NS_*, above. */
	_Atomic int ns_check;
	/* BOOT_*, above. */
	_Atomic int boot_check;
	/* Checks of the boottime offset that could not tell (BOOT_CHECKING's). */
	int boot_checks;
	/*
	 * CLOCK_BOOTTIME's tolerance: map.tolerance_ns where the offsets were
	 * read from /proc, less a child's check's width where it checked them
	 * (mapping.c's boottime_offset_agrees()).  Stored relaxed before the
	 * release store of ns_known that makes BOOTTIME known; loaded relaxed
	 * (by a reader that loaded fast_clocks with acquire).
	 */
	uint64_t boot_tolerance_ns;
	/* SEEN_*, above. */
	_Atomic uint32_t mode_seen[PVREAD_NR_CLOCK_BASES];
	/* struct floor, above. */
	struct floor floors[PVREAD_NR_CLOCK_BASES];
	/* struct line_record, above. */
	struct line_record line;
};
_Static_assert(offsetof(struct process, fast_clocks) == 4096,
	       "the part children inherit is the first page");

/* Where the part zeroed in children begins, and its length. */
#define WIPED_OFFSET offsetof(struct process, fast_clocks)
#define WIPED_SIZE (sizeof(struct process) - WIPED_OFFSET)

/*
 * This process's state; found or made by this copy's constructor (else at
 * its first call), then only read.  Set once by mapping.c, by
 * compare-and-swap from NULL (the loser of a race gives its pages back);
 * read with acquire by the fast path and the fallback, seq_cst by the
 * callers that may make it.  Hidden: the fast path loads it PC-relative.
 */
PVREAD_HIDDEN extern struct process *_Atomic pvread_process;

/*
 * The fast path's hint.  Its low half: the fine clocks whose last read
 * from this copy came from the line, and how to read the TSC
 * (FAST_RDTSCP), as fast_clocks said then; its high half: the page's
 * disruptions (the count of resumes), low 32 bits, loaded when it was
 * set.  Where it names the clock, the fast path reads the TSC first,
 * before any load of the state or the page, so that the counter's latency
 * hides them all (the vDSO's read waits for one load before its counter;
 * this one's state is three loads deep).  Every check follows the TSC
 * read as it does otherwise; a TSC read before the line's anchor reads as
 * the anchor (the module anchors at its TSC at the update, which is then
 * within the call); and a TSC read before a resume, perhaps another
 * host's, is never used with a line after it: the hint, loaded before the
 * TSC, names the disruptions before the TSC, and a page that counts
 * others (inside the seq's window) sends the read to the TSC after the
 * seq (READ_TSC_STALE, the hint renewed).  Written relaxed, only where it
 * changes: set by a line reading that did without it, renewed after a
 * disruption, a clock's bit cleared where the TSC was read for nothing (a
 * clock the process may not read from the page, a fallback), all of them
 * in mode none.  Per copy, and inherited by children: a stale hint costs
 * one TSC read.
 */
PVREAD_HIDDEN extern _Atomic uint64_t pvread_tsc_first;
/*
 * The page as this copy last checked it whole (read.c's check_line()): its
 * seq from bit 31 up (LINE_CHECKED_SEQ(), a seq the check saw even); below
 * it, the ticks past the line's anchor from which MONOTONIC's line is at or
 * above MONOTONIC_COARSE (REALTIME's, with the same fraction, is held where
 * MONOTONIC's is), under 2^31.  A line read that
 * finds the page at that seq knows it even (no update in progress), every
 * fine clock's product fitting at the span and its seconds the kernel's,
 * and whether the hold may apply from the delta alone: it skips those
 * checks, a dozen instructions, which count where the counter read holds
 * back what follows it (Intel's rdtscp and rdtsc).  Still checked on every
 * read: the mode, the bound against the tolerance, the disruptions, the
 * span, the seq again after the loads, the floors.  (CLOCK_MONOTONIC's
 * line record, struct line_record above, made by the same check, leaves
 * out all but the span, the seq and the floor.)
 *
 * The seq is 32 bits, and the module writes the header twice per
 * timekeeping update: a word can meet the page at its seq again 2^30
 * updates later (12.4 days at HZ=1000) if no check replaced it meanwhile,
 * and then every read of that update skips the checks above for a page
 * that may differ.  A module's page passes them anyway; the pass point
 * may be another line's, so a reading may be below MONOTONIC_COARSE by up
 * to the line's lag behind the kernel, which the published bound covers,
 * never below a floor (a pvread_use_page() page no module wrote could
 * read as garbage).  To make that window shorter, a check that fails
 * forgets the word (a check of a page in mode none fails), and so does a
 * TSC-first read that finds the page in mode none.
 *
 * LINE_UNCHECKED (2^32 from bit 31: no seq at all) until a check, and
 * again whenever this copy adopts a page (once per process, before any
 * read of it: only a test adopts another).  Stored relaxed by a thread
 * whose read found the page at a seq this word did not name (once per
 * update; any value stored is a check's, whichever thread stores last),
 * loaded relaxed: its value is all it says, and the read's own loads of
 * the page follow the seq.  A cache line of its own: its store once an
 * update does not take the hint's from every reader.
 */
PVREAD_HIDDEN extern _Atomic uint64_t pvread_line_checked;
#define LINE_UNCHECKED ((uint64_t)1 << 63)
#define LINE_CHECKED(seq, pass) ((uint64_t)(seq) << 31 | (pass))
#define LINE_CHECKED_SEQ(word) ((word) >> 31)
/* Bit 31 is the seq's lowest: 0, as a check's seq is even. */
#define LINE_CHECKED_PASS(word) ((uint32_t)(word))
/*
 * pvread_tsc_first, alone: the kernel answered the last read as it
 * answers every clock (the page not in line mode, or no page), so the
 * next read of a clock the page serves asks it first, with no load of the
 * state or the page before the vDSO's counter, and checks them after
 * (read.c's read_kernel_first()).  Set with a release store, loaded with
 * acquire: such a read loads map.hdr with no other acquire before it.
 */
#define HINT_KERNEL FAST_KERNEL

/*
 * How reads were answered, per thread, written only on the slow path (its
 * retries in read.c, the kernel's answers, floors and lifts in order.c),
 * read by the same thread's pvread_get_stats() (info.c): the default TLS
 * model, which a library loaded by dlopen() may use (the initial-exec one
 * takes from a reserve glibc sizes at start).  Defined in mapping.c, with the
 * rest of the state; TLS descriptors in the shared objects.
 */
PVREAD_HIDDEN extern __thread struct pvread_stats pvread_thread_stats;

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
/* The fine clocks whose page readings stand only after mode_seen LINE. */
#define CLOCKS_NOTED (CLOCKS_STEADY | BIT_OF(CLOCK_REALTIME) | \
		      BIT_OF(CLOCK_TAI))

/* fast_clocks: the TSC read is rdtscp (tsc_read()). */
#define FAST_RDTSCP (1U << 31)
/* fast_clocks: no page (MAP_ABSENT), every clock is the kernel's. */
#define FAST_KERNEL (1U << 30)
_Static_assert(PVREAD_NR_CLOCK_BASES <= 30, "clock ids below FAST_KERNEL");

/*
 * @clock below PVREAD_NR_CLOCK_BASES: the caller checked it, or checked it
 * against CLOCKS_FINE | _COARSE.
 */
static inline bool clock_in(uint32_t set, clockid_t clock)
{
	return (set >> clock) & 1;
}

/* Does a time namespace shift @clock, and by which of its offsets? */
static inline bool timens_shifts(clockid_t clock)
{
	return clock_in(CLOCKS_TIMENS, clock);
}

static inline bool never_back(clockid_t clock)
{
	return clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_RAW ||
	       clock == CLOCK_BOOTTIME || clock == CLOCK_MONOTONIC_COARSE;
}

/* The fine clocks the kernel steps: REALTIME, TAI. */
static inline bool is_wall(clockid_t clock)
{
	return clock == CLOCK_REALTIME || clock == CLOCK_TAI;
}

/*
 * The fine clocks that never go back: the line orders them across
 * processes, and whether a reading raises their floor depends on the mode.
 */
static inline bool fine_never_back(clockid_t clock)
{
	return never_back(clock) && clock != CLOCK_MONOTONIC_COARSE;
}

/* One attempt's outcome; the READ_NO_* name the reason the kernel must answer. */
enum read_result {
	READ_OK,
	READ_BUSY,		/* an update is being written */
	READ_RETRY,		/* an update completed under us */
	READ_HOLD,		/* the fast path's: the hold is the slow path's */
	READ_TSC_STALE,		/* a TSC read first, before a disruption */
	READ_UNSEEN,		/* the fast path's: a seq check_line() did not note */
	READ_NOT_FAST,		/* the fast path's: not a clock fast_clocks names */
	READ_NO,		/* + the reason */
	READ_NO_MODE = READ_NO + PVREAD_SLOW_MODE,
	READ_NO_BOUND = READ_NO + PVREAD_SLOW_BOUND,
	READ_NO_DELTA = READ_NO + PVREAD_SLOW_DELTA,
	READ_NO_TIMENS = READ_NO + PVREAD_SLOW_TIMENS,
	READ_NO_STUCK = READ_NO + PVREAD_SLOW_STUCK,
	READ_NO_INVALID = READ_NO + PVREAD_SLOW_INVALID,
};

/* How long a read has tried, for the limits of its one retry loop. */
struct attempts {
	uint64_t since;		/* TSC when it first met an update in progress */
	int tries;		/* attempts spoilt by updates that completed */
};

/*
 * A TSC reading as the instruction leaves it, in two halves: the line's
 * read multiplies the low half alone while the high half is its anchor's
 * (read.c's try_read()), so that nothing joins them first.
 */
struct tsc_halves {
	uint64_t lo;	/* rdtsc and rdtscp zero the upper halves: none to */
	uint64_t hi;	/* zero-extend */
};

/*
 * A TSC read not taken before the loads that precede it: lfence; rdtsc,
 * which every x86-64 CPU has.  The read path takes tsc_read() instead.
 * One asm statement, so that no compiler puts anything between the two
 * (gcc -O0 put a nop there for the debugger); a compiler barrier, as
 * _mm_lfence() is: no load of the page moves across it.
 *
 * Every rdtsc in the library is this one, even where nothing needs the
 * order (the waits' limits, below): so that test/tsc-order.sh can require
 * lfence right before each rdtsc in the built code, with no list of
 * exceptions to go stale.  A wait pauses anyway; the lfence costs it
 * nothing that matters.
 */
static ALWAYS_INLINE struct tsc_halves tsc_ordered_halves(void)
{
	struct tsc_halves t;

	/* 64 bits: rdtsc zeroes the upper halves, no zero-extension needed. */
	__asm__ __volatile__("lfence\n\trdtsc" : "=a"(t.lo), "=d"(t.hi) : :
			     "memory");
	return t;
}

static ALWAYS_INLINE uint64_t tsc_ordered(void)
{
	struct tsc_halves t = tsc_ordered_halves();

	return t.hi << 32 | t.lo;
}

/*
 * An update is being written: by the kernel's timekeeper, interrupts off,
 * which a system call would wait for too, or by Xen.  It takes a moment,
 * unless the writer's vCPU is stalled by its host, so wait as the kernel
 * would; the limit, in TSC ticks since *@since, is only there so that a
 * broken page cannot hold a reader for ever.
 */
static inline bool wait_for_writer(uint64_t *since)
{
	uint64_t now = tsc_ordered();

	if (!*since)
		*since = now;
	else if (now - *since > MAX_WAIT_TSC)
		return false;
	_mm_pause();
	return true;
}

/*
 * The read path's TSC read, as @fast (fast_clocks) says: rdtscp, which
 * waits for the loads before it as lfence does, where the CPU offers it,
 * as the vDSO reads it (mapping.c's tsc_read_choice()), else
 * tsc_ordered_halves().  The line names no CPU: either will do.  The
 * clobbers keep the compiler from moving a load of the page across it.
 */
static ALWAYS_INLINE struct tsc_halves tsc_read(uint32_t fast)
{
	struct tsc_halves t;
	uint32_t aux;

	if (!(fast & FAST_RDTSCP))
		return tsc_ordered_halves();
	__asm__ __volatile__("rdtscp" : "=a"(t.lo), "=d"(t.hi), "=c"(aux) : :
			     "memory");
	(void)aux;
	return t;
}

/* The line's rate for @clock: MONOTONIC_RAW's, or MONOTONIC's for the rest. */
static ALWAYS_INLINE void line_rate(const struct pvread_line *l,
				    clockid_t clock, uint32_t *mul,
				    uint8_t *shift)
{
	if (clock == CLOCK_MONOTONIC_RAW) {
		*mul = LOAD(l->raw_mul);
		*shift = LOAD(l->raw_shift);
	} else {
		*mul = LOAD(l->mul);
		*shift = LOAD(l->shift);
	}
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

/* Unsigned: a page no module wrote may make it wrap, never UB. */
static inline int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)((uint64_t)ts->tv_sec * NSEC_PER_SEC +
			 (uint64_t)ts->tv_nsec);
}

/* mapping.c: the first call's mapping; a child's check of its offsets. */
PVREAD_HIDDEN __attribute__((noinline, cold))
struct process *pvread_first_map(void);
PVREAD_HIDDEN __attribute__((noinline, cold))
void pvread_check_child(struct process *p);
PVREAD_HIDDEN __attribute__((noinline, cold))
void pvread_check_boottime(struct process *p);
/* The shim's constructor: the first call's mapping, before main(). */
PVREAD_HIDDEN void pvread_map_now(void);

/*
 * This process and its mapping, or NULL while the mapping is absent or
 * being made by another thread.  In a child that has not checked its
 * offsets yet, checks them (no system call unless the process uses time
 * namespaces itself: see struct process).
 */
static ALWAYS_INLINE struct process *get_process(void)
{
	struct process *p = atomic_load_explicit(&pvread_process,
						 memory_order_acquire);
	int state;

	if (likely(p)) {
		state = atomic_load_explicit(&p->map_state,
					     memory_order_acquire);
		if (likely(state == MAP_READY)) {
			if (unlikely(atomic_load_explicit(&p->ns_check,
					memory_order_acquire) != NS_CHECKED))
				pvread_check_child(p);
			return p;
		}
		if (state != MAP_UNTRIED && state != MAP_RETRY)
			return NULL;
	}
	return pvread_first_map();
}

/*
 * Are @clock's time namespace offsets unknown here (the kernel answers
 * it)?  Acquire: the offsets map.ns holds for it were written before.
 */
static inline bool timens_unknown(const struct process *p, clockid_t clock)
{
	return !clock_in(atomic_load_explicit(&p->ns_known,
					      memory_order_acquire), clock);
}

/*
 * The header's update did not complete within MAX_WAIT_TSC: remember its
 * seq if it is odd, so that later reads fall back at once while it stays
 * so.  Not the records: one odd now is in an update of its own, which no
 * wait for it ran out on (info.c remembers a record its own wait gave up
 * on).
 */
static inline __attribute__((cold)) void pvread_remember_stuck(struct process *p)
{
	uint32_t seq = LOAD(p->map.hdr->seq);

	if (seq & 1)
		atomic_store_explicit(&p->stuck_seq, seq, memory_order_relaxed);
}

/* read.c: the retries, and the page's answer for the slow path. */
PVREAD_HIDDEN __attribute__((noinline, cold))
bool pvread_try_again(struct process *p, enum read_result r,
		      struct attempts *a, enum pvread_slow_reason *why);
PVREAD_HIDDEN bool pvread_read_fast(struct process *p, const clockid_t clock,
				    struct timespec *ts,
				    enum pvread_slow_reason *why);

/* order.c: floors, the hold at the line, the kernel's answer. */
PVREAD_HIDDEN __attribute__((noinline))
int pvread_slow_clock_gettime(struct process *p, clockid_t clock,
			      struct timespec *ts, enum pvread_slow_reason why);
PVREAD_HIDDEN __attribute__((noinline, cold))
void pvread_settle_answer(struct process *p, clockid_t clock,
			  struct timespec *ts);

/*
 * The kernel's answer, @ret of its read into *@ts: the one fallback of
 * every read (pvread_slow_clock_gettime()), and inline where the page is
 * in mode none, so that such a read costs little more than libc's.  For
 * the clocks that never go back, once this process has returned page readings of
 * them, lifted towards the line and held by the floor (order.c's
 * pvread_settle_answer()); before that, the kernel's answer as it is
 * (KERNEL, noted once): the load of mode_seen after the kernel's read is
 * what lets a thread that starts reading the page wait these answers out
 * (SEEN_*, above).  @p: NULL without a mapping (yet).
 */
static ALWAYS_INLINE int kernel_answered(struct process *p, clockid_t clock,
					 struct timespec *ts, int ret)
{
	uint32_t seen;

	/* Any id: a CPU-time clock's may be negative or beyond the set. */
	if (unlikely(ret) || (unsigned int)clock >= PVREAD_NR_CLOCK_BASES ||
	    !clock_in(CLOCKS_NOTED | BIT_OF(CLOCK_MONOTONIC_COARSE), clock))
		return ret;
	/* Mapping in progress in another thread: its mode_seen is NEVER. */
	if (unlikely(!p))
		p = atomic_load_explicit(&pvread_process, memory_order_acquire);
	if (unlikely(!p))
		return ret;
	/*
	 * The kernel's answers only, so far: as they are (a wall clock's
	 * NEVER too: it keeps no floor).
	 */
	seen = atomic_load(&p->mode_seen[clock]);
	if (likely(seen == SEEN_KERNEL || (seen == SEEN_NEVER && is_wall(clock))) &&
	    (clock != CLOCK_MONOTONIC_COARSE ||
	     likely(atomic_load(&p->mode_seen[CLOCK_MONOTONIC]) ==
		    SEEN_KERNEL)))
		return ret;
	pvread_settle_answer(p, clock, ts);
	return ret;
}

/* The kernel's read, counted for @why, and kernel_answered(). */
static ALWAYS_INLINE int kernel_answer(struct process *p, clockid_t clock,
				       struct timespec *ts,
				       enum pvread_slow_reason why)
{
	pvread_thread_stats.slow_by_reason[why]++;
	return kernel_answered(p, clock, ts,
			       pvread_kernel_clock_gettime(clock, ts));
}
PVREAD_HIDDEN __attribute__((noinline, cold))
int pvread_page_reading(struct process *p, clockid_t clock,
			struct timespec *ts);

#endif /* PVREAD_INTERNAL_H */
