/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * pvread: the page layout /dev/pvread maps read-only into user space.
 *
 * This header is the whole contract between pvread.ko and libpvread.
 *
 *   offset 0                     struct pvread_header (one page)
 *   offset header.record_offset  header.nr_records x struct pvread_record,
 *                                header.record_stride bytes apart,
 *                                indexed by Linux CPU number
 *   offset header.priv_tk_offset struct pvread_timekeeper: header.tk whole
 *
 * The mapping is header.map_size bytes long, from offset 0.  Xen writes the
 * pvclock part of every record (its secondary copy of the vCPU's time
 * record, see VCPUOP_register_vcpu_time_memory_area); the module writes
 * everything else.
 *
 * Who may map what.  Anyone may open the device (mode 0444) and map its
 * first page, the header: all that reading the time needs.  A mapping of
 * anything past it fails with EPERM unless the opener of the file had
 * CAP_SYS_ADMIN in the initial user namespace.  The records and the
 * timekeeper's cycle_last are Xen's system time, which on a host without
 * TSC emulation is the host's uptime, and a record's version steps each
 * time Xen writes it, which shows when Xen schedules the vCPU (and, under
 * KPTI, whether it ran user or kernel code then): across guests on one
 * host, a signal of co-residency.  So header.tk has cycle_last and
 * raw_cycle_last 0 (as Linux's vDSO data publishes no cycle_last where
 * its clock mode is none), and the copy with them is at
 * header.priv_tk_offset, written under the same header.seq.  The line
 * holds no Xen system time: it converts the TSC to the clocks.  Up to ABI
 * version 3 the header's tk had both cycle values, and every opener could
 * map the whole layout.
 *
 * Reading the time, in user space:
 *  1. s = header.seq; odd means an update is in progress: retry.
 *     Copy the fields needed, read header.seq again after a read barrier;
 *     a different value means retry.
 *  2. header.mode is PVREAD_MODE_LINE, or the kernel must answer
 *     (PVREAD_MODE_NONE; header.line_state says why).  A reader whose
 *     tolerance is below header.error_bound_ns asks the kernel too.
 *  3. The fine clocks from the line, read as described under struct
 *     pvread_line, with an ordered TSC read (lfence; rdtsc, or rdtscp
 *     where offered) on any CPU; the _COARSE clocks from tk.base[], the
 *     timekeeper's at its last update.
 *
 * The records and the timekeeper are there to be checked, not read from:
 * the module measures the line against them at every update, and a
 * privileged tool or test can evaluate a record the way the kernel's "xen"
 * clocksource does, with the timekeeper at header.priv_tk_offset (its
 * record.pvclock: the vCPU's own record; not ordered across vCPUs):
 *     cycles = system_time + ((tsc - tsc_timestamp) << tsc_shift, or >> if
 *     negative) * tsc_to_system_mul >> 32, with a 128-bit product;
 *     delta = cycles - cycle_last (0 if negative), and if delta is below
 *     max_delta, ns = (base[clock].snsec + delta * mult) >> shift,
 *     time = base[clock].sec + ns (normalised): the kernel's own
 *     conversion of those cycles, as its vDSO would make it.
 */
#ifndef _UAPI_LINUX_PVREAD_H
#define _UAPI_LINUX_PVREAD_H

#include <linux/const.h>
#include <linux/types.h>
#include <linux/ioctl.h>

#define PVREAD_DEVICE		"/dev/pvread"
#define PVREAD_MAGIC		0x44525650	/* "PVRD" little-endian */
#define PVREAD_ABI_VERSION	4	/* 4: the records and cycle_last privileged */

/* The most records a page holds (indexed by Linux CPU number). */
#define PVREAD_MAX_RECORDS	4096

/*
 * header.mode.  ABI version 2 also had per-CPU and stable modes; where the
 * kernel trusts Xen's stable bit its own vDSO reads pvclock without a
 * system call, and records at rates apart keep the error bound beyond any
 * useful tolerance, so neither had a user.
 */
#define PVREAD_MODE_NONE	0	/* no fast path now: the kernel answers */
#define PVREAD_MODE_LINE	1	/* header.line serves every CPU */

/* header.flags */
#define PVREAD_FLAG_XEN_CLOCKSOURCE	_BITUL(0) /* timekeeper runs on "xen" */
/* bit 1: TSC_AUX named the CPU, in ABI version 2; never set since */
#define PVREAD_FLAG_TSC_STABLE		_BITUL(2) /* Xen set PVCLOCK_TSC_STABLE_BIT */
#define PVREAD_FLAG_CPU0_OWNED_BY_KERNEL _BITUL(3) /* Linux's vDSO owns vCPU 0's area */
#define PVREAD_FLAG_TSC_EMULATED	_BITUL(4) /* Xen emulates rdtsc (CPUID time leaf) */
#define PVREAD_FLAG_HOST_TSC_RELIABLE	_BITUL(5) /* Xen trusts the host's TSC */

/*
 * header.line_state: why header.mode is, or is not, PVREAD_MODE_LINE.
 * The line needs one TSC for every vCPU: Xen vouches for it when it
 * emulates rdtsc or trusts the host's TSC (CPUID leaf 0x40000x03), or the
 * module is told to (parameter tsc_reliable=1); and the module's own
 * cross-vCPU check, at load and after every resume, saw it never go back.
 * It also needs every record to convert at one rate (within 1 ppm), as Xen
 * keeps them on a constant-rate TSC: where Xen calibrates each pCPU on its
 * own, the records run at rates apart and step at each calibration, the
 * kernel's clock follows them, and no line can.  A disagreement keeps the
 * line off for PVREAD_WINDOW_SEC (16 s) after it was last seen.  And it
 * needs the records current: an HVM or PVH guest under KPTI, on a Xen
 * without time areas by physical address (before 4.18), has Xen drop the
 * writes that fall while user code runs, so there each CPU has Xen
 * rewrite its record every jiffy, or less often where that would cost
 * over 1 % of a CPU (sysfs "refresh"): a record on a CPU running user
 * code lags at most one refresh period, and the lag is measured.
 * PVREAD_LINE_PTI where that refresh fails, a CPU may run without the
 * tick (nohz_full), or the lag measured in the last 16 s passed 10 us.
 */
#define PVREAD_LINE_ACTIVE	0	/* header.mode is PVREAD_MODE_LINE */
#define PVREAD_LINE_OFF		1	/* module parameter line=0 */
#define PVREAD_LINE_UNVOUCHED	2	/* nobody vouches for one TSC across vCPUs */
#define PVREAD_LINE_WARP	3	/* the TSC went back across vCPUs */
#define PVREAD_LINE_UNCHECKED	4	/* check not done yet (load, resume) */
#define PVREAD_LINE_STABLE	5	/* stable bit: the kernel's vDSO is fast */
#define PVREAD_LINE_WAITING	6	/* no line until the page may be read */
#define PVREAD_LINE_RATES	7	/* the records' rates disagree */
#define PVREAD_LINE_PTI		8	/* under KPTI, records not kept current */

/* record.state */
#define PVREAD_RECORD_REGISTERED	_BITUL(0) /* Xen keeps this record current */

/* Xen's struct vcpu_time_info (Linux: struct pvclock_vcpu_time_info). */
struct pvread_pvclock {
	__u32 version;
	__u32 pad0;
	__u64 tsc_timestamp;
	__u64 system_time;
	__u32 tsc_to_system_mul;
	__s8 tsc_shift;
	__u8 flags;
	__u8 pad[2];
};

struct pvread_record {
	struct pvread_pvclock pvclock;	/* written by Xen */
	__u32 state;			/* PVREAD_RECORD_* */
	__u32 xen_vcpu_id;
	__u32 registered_on;		/* CPU that asked Xen for it (itself) */
	__u32 pad;
	__u64 reserved[2];
};

/* One clock's base, as in the kernel's vDSO data. */
struct pvread_clock_base {
	__s64 sec;
	__u64 snsec;	/* nanoseconds << shift; plain ns for the _COARSE clocks */
};

/* Indexed by clockid_t: REALTIME 0 ... TAI 11. */
#define PVREAD_NR_CLOCK_BASES	16

/*
 * The timekeeper's conversion, as update_vsyscall() gives the vDSO.  In
 * header.tk, cycle_last and raw_cycle_last are 0 (see the top): the
 * _COARSE bases and the rate are there for every reader.
 */
struct pvread_timekeeper {
	__u64 cycle_last;
	__u64 mask;
	__u64 max_delta;	/* cycles past cycle_last beyond which: syscall */
	__u32 mult;
	__u32 shift;
	__u64 raw_cycle_last;
	__u32 raw_mult;
	__u32 raw_shift;
	__u64 reserved[3];
	struct pvread_clock_base base[PVREAD_NR_CLOCK_BASES];
};

/*
 * PVREAD_MODE_LINE: one line from the TSC to every fine clock, written by
 * the module for every CPU (Xen's records disagree with each other and
 * with the kernel's clock, which hides that behind a global last_value).
 * Reading it, inside the header's seq loop:
 *
 *   d    = tsc - tsc_timestamp, as signed; a negative d counts as 0
 *   if d > tsc_span: ask the kernel
 *   ns   = (base[clock].snsec + (d << shift) * mul) >> 32, in 64 bits:
 *          pvread_line_at() below, with raw_mul and raw_shift for
 *          CLOCK_MONOTONIC_RAW, where pvread_line_fits() at tsc_span
 *   time = base[clock].sec + ns (normalised)
 *
 * tsc from an ordered rdtsc (lfence; rdtsc) or rdtscp on any CPU, the
 * base's snsec nanoseconds << 32, below 10^9 << 32.  REALTIME, TAI and
 * BOOTTIME share MONOTONIC's rate: their bases differ from its by the
 * kernel's own offsets.  The _COARSE clocks come from tk.
 *
 * What the module promises:
 *  - For every fine clock but REALTIME and TAI, which the kernel steps,
 *    the line's value never decreases: not within one line, and not when
 *    the module replaces a line with the next (each starts at or above
 *    where its predecessor stood at its anchor, and above it for 20 us
 *    after, while a reader that read its TSC late could still be on the
 *    old one), so readings from the line are ordered across every CPU,
 *    thread and process.  The kernel's own answer is not ordered
 *    against them: it may be behind the line by up to the bound.
 *  - While header.mode is PVREAD_MODE_LINE, header.error_bound_ns is an
 *    estimate, measured and not proven, of how far a reading can be from
 *    the kernel's clock_gettime() at the same instant on any CPU.  At
 *    each timekeeping update the module measures D: the widest
 *    disagreement among the line (where the old one ends and where the
 *    new one starts), the kernel's own clocksource read and every
 *    registered vCPU record, plus how far the line's rate could take it
 *    from the records' over tsc_span.  Between two updates the line, each
 *    record and the kernel's conversion are straight lines in the TSC, so
 *    their disagreement is largest at an end of the interval, and the
 *    update at its end measures it.  The bound is twice the largest D of
 *    the last 16 s, plus 1 us: it covers every reading for as long as the
 *    disagreement at the next update is at most twice the worst of the
 *    last 16 s.  That is all the factor 2 is; an update where it failed
 *    is counted (debugfs pvread/bound_overruns).  Not covered: a record
 *    that Xen rewrites between two updates with a step (its line breaks
 *    there); a record registered since the last update (not yet
 *    measured); a secondary record that lags the vCPU's primary one (Xen
 *    did not write it) -- except under KPTI on Xen before 4.18, where Xen
 *    drops such writes and the module has each CPU's record rewritten
 *    every jiffy (at most 1 % of a CPU): there a record on a CPU running
 *    user code lags at most one refresh period, and the lag is measured
 *    (what a rewrite found a record missed, and the kernel's clock on
 *    that CPU apart from the fresh record, join D); the kernel's clock stepped (settimeofday) for
 *    REALTIME and TAI.  For 2 s after a load or a switch to the xen
 *    clocksource, and 16 s after a resume, there is no history and the
 *    mode is PVREAD_MODE_NONE: the kernel answers.
 *  - After the mode leaves PVREAD_MODE_LINE the last line stays, with
 *    tsc_span cut to the moment it ended (plus the 20 us), so that a
 *    library can keep its readings at or above the line's value, clamped
 *    to the line's ends, without ever going back; at a suspend it is made
 *    flat at its end (mul and raw_mul 0, tsc_timestamp 0, tsc_span 1),
 *    since after a restore the TSC may be lower than its anchor.
 *    tsc_span 0 means there has been no line.
 */
struct pvread_line {
	__u64 tsc_timestamp;	/* the TSC at which base[] holds */
	__u64 tsc_span;		/* TSC ticks past tsc_timestamp it may be read */
	__u32 mul;		/* ns per TSC tick, << (32 - shift) */
	__u32 raw_mul;		/* the same, for CLOCK_MONOTONIC_RAW */
	__u8 shift;		/* tsc_span << shift fits in 64 bits */
	__u8 raw_shift;
	__u8 pad[6];
	__u64 anchors;		/* lines started since load */
	__u64 reserved;
	struct pvread_clock_base base[PVREAD_NR_CLOCK_BASES];
};

/*
 * The line's arithmetic, the one copy of it: the module anchors and checks
 * its lines with it, and readers read them with it.  The value @d ticks
 * past the anchor at rate @mul, @shift, added to @snsec, nanoseconds << 32:
 * (d << shift) * mul + snsec, computed as d * (mul << shift) + snsec, so
 * that no bit of d is lost.  Exact where pvread_line_fits() holds for @d
 * or any larger delta: a reader checks it at its delta, or once at
 * tsc_span.
 */
static __inline__ __u64 pvread_line_at(__u64 d, __u32 mul, __u8 shift,
				       __u64 snsec)
{
	return d * ((__u64)mul << shift) + snsec;
}

/*
 * Does the line's value fit in 64 bits up to @d ticks past its anchor?  No
 * line the module publishes leaves them within its tsc_span from a base
 * below a second (it cuts tsc_span short of that): where it would, a
 * reader asks the kernel.
 */
static __inline__ int pvread_line_fits(__u64 d, __u32 mul, __u8 shift,
				       __u64 snsec)
{
	__u64 p;

	return shift <= 32 &&
	       !__builtin_mul_overflow(d, (__u64)mul << shift, &p) &&
	       !__builtin_add_overflow(p, snsec, &p);
}

/* Both: the value in *@v where it fits, else 0. */
static __inline__ int pvread_line_value(__u64 d, __u32 mul, __u8 shift,
					__u64 snsec, __u64 *v)
{
	if (!pvread_line_fits(d, mul, shift, snsec))
		return 0;
	*v = pvread_line_at(d, mul, shift, snsec);
	return 1;
}

struct pvread_header {
	__u32 magic;
	__u32 abi_version;
	__u32 seq;		/* odd while the module updates the header */
	__u32 mode;		/* PVREAD_MODE_* */
	__u32 flags;		/* PVREAD_FLAG_* */
	__u32 nr_records;
	__u32 record_offset;
	__u32 record_stride;
	__u32 map_size;
	__u32 nr_registered;
	__u64 error_bound_ns;	/* estimated |reading - kernel's|, see above */
	__u64 updates;		/* timekeeper updates mirrored since load */
	__u64 spread_ns;	/* records' disagreement at the last update */
	__u32 priv_tk_offset;	/* the whole timekeeper, past the header page */
	__u32 line_state;	/* PVREAD_LINE_* */
	__u64 tsc_warp;		/* worst TSC step back across vCPUs, ticks */
	struct pvread_timekeeper tk;
	struct pvread_line line;
	/*
	 * Resumes since load: after a suspend, a save and restore or a
	 * migration, where the TSC may run at another rate and time may have
	 * passed unseen, as vmclock's disruption_marker: a program holding
	 * time-based leases can notice one by a change of this count.
	 */
	__u64 disruptions;
};

/*
 * PVREAD_IOC_REFERENCE (CAP_SYS_ADMIN): the kernel reads the calling CPU's
 * record with its own pvclock code, for tests of the library's arithmetic.
 */
struct pvread_reference {
	__u32 cpu;
	__u32 version;	/* of the record, at the read */
	__u64 tsc;
	__u64 cycles;	/* the record evaluated at tsc */
};

/*
 * PVREAD_IOC_KERNEL_TIME (CAP_SYS_ADMIN): the kernel's own clocks at one
 * value of its clocksource, all from the timekeeper state the page held
 * when header.updates was @updates, so that a test can check the page's
 * conversion (header.tk) against them to the nanosecond.  ns[] is indexed
 * by clock id: CLOCK_REALTIME, _MONOTONIC, _BOOTTIME and _TAI at @cycles,
 * CLOCK_MONOTONIC_RAW at @cycles too, and the coarse clocks as the kernel
 * answers them.
 */
struct pvread_kernel_time {
	__u64 updates;
	__u64 cycles;
	__s64 ns[PVREAD_NR_CLOCK_BASES];
};

#define PVREAD_IOC_MAGIC	0xB9
#define PVREAD_IOC_REFERENCE	_IOR(PVREAD_IOC_MAGIC, 1, struct pvread_reference)
#define PVREAD_IOC_KERNEL_TIME	_IOR(PVREAD_IOC_MAGIC, 2, struct pvread_kernel_time)

/*
 * The layout is ABI: any change here must fail the build, not a reader.
 * C11's _Static_assert; a C99 or C++ program including this header first
 * builds without the checks (the kernel and libpvread make them).
 */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && \
	__STDC_VERSION__ >= 201112L
#define __PVREAD_ASSERT_OFFSET(type, member, off) \
	_Static_assert(__builtin_offsetof(type, member) == (off), \
		       #type "." #member " moved")
__PVREAD_ASSERT_OFFSET(struct pvread_pvclock, tsc_timestamp, 8);
__PVREAD_ASSERT_OFFSET(struct pvread_pvclock, system_time, 16);
__PVREAD_ASSERT_OFFSET(struct pvread_pvclock, tsc_to_system_mul, 24);
__PVREAD_ASSERT_OFFSET(struct pvread_pvclock, tsc_shift, 28);
__PVREAD_ASSERT_OFFSET(struct pvread_pvclock, flags, 29);
_Static_assert(sizeof(struct pvread_pvclock) == 32, "pvread_pvclock size");
__PVREAD_ASSERT_OFFSET(struct pvread_record, state, 32);
__PVREAD_ASSERT_OFFSET(struct pvread_record, registered_on, 40);
_Static_assert(sizeof(struct pvread_record) == 64, "pvread_record size");
_Static_assert(sizeof(struct pvread_clock_base) == 16, "clock_base size");
__PVREAD_ASSERT_OFFSET(struct pvread_timekeeper, mult, 24);
__PVREAD_ASSERT_OFFSET(struct pvread_timekeeper, raw_cycle_last, 32);
__PVREAD_ASSERT_OFFSET(struct pvread_timekeeper, base, 72);
_Static_assert(sizeof(struct pvread_timekeeper) == 328, "timekeeper size");
__PVREAD_ASSERT_OFFSET(struct pvread_header, seq, 8);
__PVREAD_ASSERT_OFFSET(struct pvread_header, error_bound_ns, 40);
__PVREAD_ASSERT_OFFSET(struct pvread_line, mul, 16);
__PVREAD_ASSERT_OFFSET(struct pvread_line, shift, 24);
__PVREAD_ASSERT_OFFSET(struct pvread_line, base, 48);
_Static_assert(sizeof(struct pvread_line) == 304, "line size");
__PVREAD_ASSERT_OFFSET(struct pvread_header, priv_tk_offset, 64);
__PVREAD_ASSERT_OFFSET(struct pvread_header, line_state, 68);
__PVREAD_ASSERT_OFFSET(struct pvread_header, tk, 80);
__PVREAD_ASSERT_OFFSET(struct pvread_header, line, 408);
__PVREAD_ASSERT_OFFSET(struct pvread_header, disruptions, 712);
_Static_assert(sizeof(struct pvread_header) == 720, "header size");
_Static_assert(sizeof(struct pvread_reference) == 24, "reference size");
_Static_assert(sizeof(struct pvread_kernel_time) == 144, "kernel_time size");
#endif /* C11 */

#endif /* _UAPI_LINUX_PVREAD_H */
