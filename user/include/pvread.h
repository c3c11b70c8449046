/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libpvread: clock_gettime() without a system call on Xen guests whose
 * clocksource is "xen", from the line pvread.ko publishes in /dev/pvread
 * for every CPU.
 *
 * Every call answers like its libc namesake.  When the fast path cannot
 * vouch for its answer -- no module, no line (the page's mode is none: why
 * is in its line_state), a published error bound above the caller's
 * tolerance --
 * the kernel answers (its vDSO, else the system call; never a
 * clock_gettime() another library or the program defines): for the clocks
 * that never go back held at or above what the process returned before
 * (below).
 *
 * The tolerance is PVREAD_MAX_ERROR_NS from the environment, read once at
 * the first call: the largest deviation from the kernel's clock, in ns, the
 * caller accepts (default 10000, 10 us; 0 accepts no line reading).
 * Anything but decimal digits is the default; set-user-ID programs ignore
 * it (secure_getenv()).
 *
 * CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME and
 * CLOCK_MONOTONIC_COARSE never go back within a process, on any thread and
 * any CPU, across fast and slow paths and changes of mode (the kernel's own
 * MONOTONIC_COARSE can, before Linux 6.15, on NTP frequency changes) -- but
 * for one case: a fallback after line readings while the page's header
 * cannot be read (an update that never completes, pvread(3)), which the
 * floor alone holds.
 *
 * Readings of CLOCK_MONOTONIC, _RAW and BOOTTIME taken from the line are
 * also ordered across every CPU, thread and process that reads the page's
 * line, and write no shared memory.  The
 * kernel's clock may be behind the line by up to the bound, so once a
 * process has returned a line reading, the kernel's answer to those clocks
 * (a fallback) is lifted towards the line's value at the TSC now, clamped
 * to the line's ends: the first fallback after line readings to the line
 * (the floor then holds it), later ones by at most the tolerance above the
 * kernel's answer, so that the error decays to the tolerance when the line
 * runs ahead.  A fallback is never below a line reading returned before it
 * began in this process, nor, once this process has returned line
 * readings itself, in another whose tolerance is no larger.  A process
 * that never returned one (a child that does not share its parent's
 * memory starts so), or whose tolerance is 0, gets the kernel's exact
 * answer.  A fallback is not ordered against line readings that begin
 * after it in another process (it may be ahead by up to the bound), nor
 * are REALTIME and TAI, which the kernel steps.
 *
 * All functions are thread-safe.  The first call maps the device
 * (secure_getenv, open, mmap, close, /proc/self/timens_offsets and the
 * ns/time links; open, read, close and readlink through syscall(2), so no
 * cancellation point; every signal that can be blocked blocked while its
 * state is half made; nothing printed); a signal handler or thread that
 * races with it is answered by the kernel meanwhile.  After it the clock
 * functions take no lock, allocate nothing and make no system call unless
 * they fall back, and are async-signal-safe; a line reading writes no
 * memory unless it meets an update or a floor.  A read waits for an update
 * in progress, for 1-2 s at most, once per update that never completes.  The library may be
 * dlopen()ed, in any number of copies; there, glibc allocates a thread's
 * counters (pvread_get_stats()) when the thread first writes one, so make
 * one read that falls back on a thread before its signal handlers read the
 * clock.
 *
 * In a time namespace the namespace's offsets are added, as the vDSO does.
 * They are read at the first call, in this process and again in every
 * child that does not share its memory (fork(), _Fork(), clone(): the
 * library's state is in a page the kernel zeroes there).  A process whose
 * children go to another time namespace than its own (after
 * unshare(CLONE_NEWTIME)) cannot read its own offsets: the clocks they
 * shift are the kernel's there.  setns(2) after the first read is not
 * noticed: pvread(3).
 */
#ifndef PVREAD_H
#define PVREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include <linux/pvread.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PVREAD_API __attribute__((visibility("default")))

PVREAD_API int pvread_clock_gettime(clockid_t clock, struct timespec *ts);
PVREAD_API int pvread_gettimeofday(struct timeval *tv, void *tz);
PVREAD_API time_t pvread_time(time_t *t);
/*
 * libpvread 0.5: @clock as one count of nanoseconds, tv_sec * 10^9 +
 * tv_nsec of what pvread_clock_gettime() would return, with its promises;
 * 0 with errno set where that fails (EINVAL: a clock the kernel refuses).
 */
PVREAD_API uint64_t pvread_ns(clockid_t clock);

/*
 * Read from @page, @size bytes laid out as <linux/pvread.h> describes,
 * instead of mapping /dev/pvread: for tests of the arithmetic and for
 * benchmarks on machines without the module.  The page must stay valid for
 * the life of the process, and of its children that read the clock (they
 * adopt it again).  Call it before any read: -1 with errno EBUSY
 * once the library has chosen its page, EINVAL if @page is not one it can
 * read (wrong magic or ABI version -- this library reads version 3 only --,
 * not 8-byte aligned, records outside @size or misaligned), ENOMEM without
 * memory for the process's state.
 */
PVREAD_API int pvread_use_page(const void *page, size_t size);

/*
 * What the fast path sees; for status tools and tests.  A later version of
 * the library adds fields only at the end.  pvread_get_info() fills this
 * struct as libpvread 0.2 defines it, in every later version too;
 * pvread_get_info_size() fills the first @size bytes (sizeof(*info) as the
 * caller was compiled), zeroing fields the library does not know: -1 with
 * errno EINVAL if @size does not hold the first field.  Both return 0, or
 * -1 with errno EAGAIN when the header kept changing (an update in
 * progress that did not finish); *info is filled either way.
 */
struct pvread_info {
	int mapped;		/* 1 when /dev/pvread is mapped */
	uint32_t mode;		/* PVREAD_MODE_* of <linux/pvread.h> */
	uint32_t flags;		/* PVREAD_FLAG_* */
	uint32_t nr_records;
	uint32_t nr_registered;
	uint64_t error_bound_ns;	/* the module's estimate: pvread(3) */
	uint64_t spread_ns;	/* records' disagreement at the last update */
	uint64_t updates;	/* timekeeper updates mirrored */
	uint64_t tolerance_ns;	/* PVREAD_MAX_ERROR_NS in force: pvread(3) */
	int64_t last_update_ns;	/* CLOCK_MONOTONIC of the last update mirrored */
	uint32_t stable_record;	/* 0: the page has had no stable mode since
				 * its ABI version 3 (libpvread 0.4) */
	int fast;		/* 1 when a read now would take the fast path */
	uint32_t line_state;	/* PVREAD_LINE_*: why the mode is, or is not, line */
	uint64_t tsc_warp;	/* worst TSC step back across vCPUs, ticks */
	uint64_t line_anchors;	/* lines started since the module was loaded */
	/* libpvread 0.4: pvread_get_info_size() */
	uint64_t disruptions;	/* resumes since load: suspend, restore,
				 * migration (the TSC may have changed rate) */
};
PVREAD_API int pvread_get_info(struct pvread_info *info);
PVREAD_API int pvread_get_info_size(struct pvread_info *info, size_t size);

/*
 * A consistent copy of record @cpu (Xen's pvclock part and the module's
 * state).  0, or -1 with errno ENODEV (no mapping), ERANGE (no such
 * record) or EAGAIN (it kept changing).
 */
PVREAD_API int pvread_get_record(unsigned int cpu, struct pvread_record *rec);

/*
 * One raw pvclock reading on the calling CPU, without the timekeeper
 * conversion, the error bound or the monotonic guard, for tools and tests
 * (the clock functions never read records): the record of the CPU
 * getcpu(2) names before and after an ordered TSC read, evaluated at that
 * TSC, in every mode of the page.  A thread that moves away and back
 * between the two is sampled on another CPU's TSC: pin it where the pair
 * must match.  Makes two system calls.  0, or -1 with errno ENODEV (no
 * mapping, or no registered record for the CPU) or EAGAIN (the record kept
 * changing, or the thread kept moving).
 */
struct pvread_sample {
	uint64_t tsc;
	uint64_t cycles;	/* pvclock ns, the "xen" clocksource's cycles */
	uint32_t cpu;
	uint32_t version;	/* of the record that was read */
};
PVREAD_API int pvread_sample_pvclock(struct pvread_sample *sample);
/* The same into the first @size bytes, as pvread_get_stats_size(). */
PVREAD_API int pvread_sample_pvclock_size(struct pvread_sample *sample,
					  size_t size);

/* Why a read was answered by the kernel (its vDSO or the system call). */
enum pvread_slow_reason {
	PVREAD_SLOW_OTHER,	/* a clock the page does not serve, a bad argument */
	PVREAD_SLOW_NO_PAGE,	/* no /dev/pvread, or a page this library cannot read */
	PVREAD_SLOW_MODE,	/* the page's mode is none */
	PVREAD_SLOW_BOUND,	/* the error bound is above PVREAD_MAX_ERROR_NS */
	PVREAD_SLOW_RECORD,	/* not since libpvread 0.4 (per-CPU mode) */
	PVREAD_SLOW_DELTA,	/* too long since the last update to convert */
	PVREAD_SLOW_BUSY,	/* an update in progress did not finish in time */
	PVREAD_SLOW_RETRIES,	/* updates that completed spoilt every attempt */
	PVREAD_SLOW_SEED,	/* a line reading while another thread's
				 * fallback holds the clock at the line */
	PVREAD_SLOW_RDTSCP,	/* not since libpvread 0.4 (per-CPU mode) */
	PVREAD_SLOW_TIMENS,	/* a time namespace whose offsets could not be read */
	PVREAD_SLOW_STUCK,	/* an update that did not finish before still has not */
	PVREAD_SLOW_INVALID,	/* the page holds values no module writes */
	PVREAD_SLOW_NR_REASONS = 16
};

/*
 * Per-thread counters of how reads were answered, written only when a read
 * falls back, retries or is raised to a floor: reads answered from the
 * page are not counted (a count would cost every read a thread-local
 * write), so the reads of a thread that the kernel did not answer are its
 * reads less "slow".
 * pvread_get_stats() fills the struct as libpvread 0.2 defined it;
 * pvread_get_stats_size() the first @size bytes (sizeof(*stats) as the
 * caller was compiled), zeroing fields the library does not know: 0, or -1
 * with errno EINVAL if @size does not hold "slow".
 */
struct pvread_stats {
	uint64_t fast;		/* 0 since libpvread 0.3: see above */
	uint64_t slow;		/* answered by the kernel (vDSO or system call) */
	uint64_t retries;	/* the header changed during a read */
	uint64_t clamped;	/* raised to a value already returned */
	uint64_t slow_by_reason[PVREAD_SLOW_NR_REASONS];	/* sum: slow */
	/* libpvread 0.3 */
	uint64_t lifted;	/* fallbacks raised towards the line (pvread(3)) */
	uint64_t lifted_beyond;	/* of those, to the line, more than the
				 * tolerance above the kernel's answer: the
				 * line this process may have returned */
	uint64_t lift_capped;	/* of those, held at the kernel's answer plus
				 * the tolerance, below the line */
};
PVREAD_API void pvread_get_stats(struct pvread_stats *stats);
PVREAD_API int pvread_get_stats_size(struct pvread_stats *stats, size_t size);

/* A short name for @reason ("bound", "busy", ...); "?" for an unknown one. */
PVREAD_API const char *pvread_slow_reason_name(unsigned int reason);

#ifdef __cplusplus
}
#endif

#endif /* PVREAD_H */
