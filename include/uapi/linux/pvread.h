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
 *
 * The mapping is header.map_size bytes long.  Xen writes the pvclock part of
 * every record (its secondary copy of the vCPU's time record, see
 * VCPUOP_register_vcpu_time_memory_area); the module writes everything else.
 *
 * Reading the time, in user space:
 *  1. s = header.seq; odd means an update is in progress: retry.
 *     Copy the fields needed, read header.seq again after a read barrier;
 *     a different value means retry.
 *  2. header.mode tells how (or whether) to read, see PVREAD_MODE_*.
 *  3. In PVREAD_MODE_PERCPU, rdtscp returns the TSC and, in the low 12 bits
 *     of TSC_AUX, the CPU whose record describes that TSC value.  In
 *     PVREAD_MODE_STABLE (Xen set PVCLOCK_TSC_STABLE_BIT: every vCPU's
 *     record gives the same time) record header.stable_record describes the
 *     TSC of every CPU, and an ordered rdtsc (lfence; rdtsc) will do.
 *     The record must have PVREAD_RECORD_REGISTERED in its state, an even
 *     pvclock version equal before and after the fields are read, and a
 *     tsc_timestamp not later than the TSC value.
 *  4. cycles = system_time + ((tsc - tsc_timestamp) << tsc_shift, or >> if
 *     negative) * tsc_to_system_mul >> 32, with a 128-bit product.  These
 *     are the cycles of the kernel's "xen" clocksource.
 *  5. The kernel's CLOCK_* conversion of those cycles, mirrored in
 *     struct pvread_timekeeper, exactly as the vDSO does it:
 *     delta = cycles - cycle_last (0 if negative), and if delta is below
 *     max_delta, ns = (base[clock].snsec + delta * mult) >> shift,
 *     time = base[clock].sec + ns (normalised).
 *  6. In PVREAD_MODE_PERCPU, header.error_bound_ns bounds how far such a
 *     reading can be from the kernel's own answer for the same instant;
 *     callers with a smaller tolerance must ask the kernel instead.  In
 *     PVREAD_MODE_STABLE the reading is the kernel's answer (its "xen"
 *     clocksource then reads one record the same way, with no global
 *     last_value to hide disagreement behind).
 */
#ifndef _UAPI_LINUX_PVREAD_H
#define _UAPI_LINUX_PVREAD_H

#include <linux/const.h>
#include <linux/types.h>
#include <linux/ioctl.h>

#define PVREAD_DEVICE		"/dev/pvread"
#define PVREAD_MAGIC		0x44525650	/* "PVRD" little-endian */
#define PVREAD_ABI_VERSION	1

/* rdtscp leaves (node << 12 | cpu) in TSC_AUX, the encoding Linux uses. */
#define PVREAD_TSC_AUX_CPU_MASK	0xfffU
#define PVREAD_MAX_RECORDS	(PVREAD_TSC_AUX_CPU_MASK + 1)

/* header.mode */
#define PVREAD_MODE_NONE	0	/* no fast path now: use the syscall */
#define PVREAD_MODE_PERCPU	1	/* record of the CPU named by TSC_AUX */
#define PVREAD_MODE_STABLE	2	/* header.stable_record serves every CPU */

/* header.flags */
#define PVREAD_FLAG_XEN_CLOCKSOURCE	_BITUL(0) /* timekeeper runs on "xen" */
#define PVREAD_FLAG_TSC_AUX		_BITUL(1) /* every online CPU's TSC_AUX names it */
#define PVREAD_FLAG_TSC_STABLE		_BITUL(2) /* Xen set PVCLOCK_TSC_STABLE_BIT */
#define PVREAD_FLAG_CPU0_OWNED_BY_KERNEL _BITUL(3) /* Linux's vDSO owns vCPU 0's area */

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
	__u64 reserved[3];
};

/* One clock's base, as in the kernel's vDSO data. */
struct pvread_clock_base {
	__s64 sec;
	__u64 snsec;	/* nanoseconds << shift; plain ns for the _COARSE clocks */
};

/* Indexed by clockid_t: REALTIME 0 ... TAI 11. */
#define PVREAD_NR_CLOCK_BASES	16

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
	__u64 error_bound_ns;	/* max |reading - kernel's answer|, see above */
	__u64 updates;		/* timekeeper updates mirrored since load */
	__u64 spread_ns;	/* records' disagreement at the last update */
	__u32 stable_record;	/* in PVREAD_MODE_STABLE: the record to use */
	__u32 reserved0;
	__u64 reserved1;
	struct pvread_timekeeper tk;
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

#define PVREAD_IOC_MAGIC	0xB9
#define PVREAD_IOC_REFERENCE	_IOR(PVREAD_IOC_MAGIC, 1, struct pvread_reference)

/* The layout is ABI: any change here must fail the build, not a reader. */
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
_Static_assert(sizeof(struct pvread_record) == 64, "pvread_record size");
_Static_assert(sizeof(struct pvread_clock_base) == 16, "clock_base size");
__PVREAD_ASSERT_OFFSET(struct pvread_timekeeper, mult, 24);
__PVREAD_ASSERT_OFFSET(struct pvread_timekeeper, raw_cycle_last, 32);
__PVREAD_ASSERT_OFFSET(struct pvread_timekeeper, base, 72);
_Static_assert(sizeof(struct pvread_timekeeper) == 328, "timekeeper size");
__PVREAD_ASSERT_OFFSET(struct pvread_header, seq, 8);
__PVREAD_ASSERT_OFFSET(struct pvread_header, error_bound_ns, 40);
__PVREAD_ASSERT_OFFSET(struct pvread_header, stable_record, 64);
__PVREAD_ASSERT_OFFSET(struct pvread_header, tk, 80);
_Static_assert(sizeof(struct pvread_header) == 408, "header size");
_Static_assert(sizeof(struct pvread_reference) == 24, "reference size");

#endif /* _UAPI_LINUX_PVREAD_H */
