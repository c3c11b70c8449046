/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pvread's state, which every file of the module shares, and the rules
 * for touching it: the locking is written where each lock is declared,
 * in struct pvread_state below.  pvread.lock is taken from
 *  - the timekeeper's notifier, inside its write section (pvread_tk.c);
 *  - the measurement after it, a hard-IRQ irq_work (pvread_measure.c);
 *  - the CPU hotplug callbacks, on the CPU itself; the syscore hooks, one
 *    CPU with interrupts off; the reboot notifier and its IPIs; a resume's
 *    IPIs (pvread_xen.c);
 *  - the TSC check (pvread_tsc.c), sysfs, and the check at load.
 */
#ifndef PVREAD_INTERNAL_H
#define PVREAD_INTERNAL_H

#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/irq_work.h>
#include <linux/math64.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/spinlock.h>
#include <linux/timekeeper_internal.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <asm/pvclock.h>

#include <linux/pvread.h>

#include "pvread_line.h"

/*
 * The error bound (an estimate: what it covers is in the UAPI header,
 * struct pvread_line) is twice the largest disagreement measured over the
 * last PVREAD_WINDOW_SEC seconds, plus PVREAD_BOUND_SLACK_NS.  Between two
 * updates the line, each record and the kernel's conversion are straight
 * lines in the TSC, so their disagreement peaks at an end, which the next
 * update measures; the factor 2 covers those readings while that
 * measurement is at most twice the window's worst (counted where not:
 * bound_overruns).
 */
#define PVREAD_WINDOW_SEC	16
#define PVREAD_WARMUP_SEC	2
#define PVREAD_BOUND_SLACK_NS	1000

/*
 * Xen 4.18 on takes the area by guest physical address too, and then keeps
 * it current whatever mode the vCPU runs in: the area registered by virtual
 * address is not written while a 64-bit PV vCPU runs in user mode (the
 * kernel's mappings are absent then).  ~0 lets go of it.  Not yet in
 * Linux's copies of Xen's headers: Xen's public vcpu.h and features.h.
 */
#define PVREAD_VCPUOP_TIME_PHYS_AREA	15
#define PVREAD_XENFEAT_TIME_PHYS_AREA	19

struct pvread_line_state {
	u64 tsc;		/* the anchor */
	u64 span;
	u64 guard;		/* PVREAD_LINE_GUARD_NS in ticks */
	struct pvread_run mono, raw;
	bool exists;		/* a line was published since load */
	bool live;		/* readers may use it now */
};

/*
 * Written on the CPU itself, or with it offline; the refresh's figures
 * (pvread_refresh.c) are read from any CPU by sysfs, with READ_ONCE().
 */
struct pvread_cpu {
	bool in_xen;		/* Xen may write the area: let go before freeing */
	bool by_phys;		/* registered by physical address: let go so */
	bool stuck;		/* Xen refused to let go of the area */
	int error;
	struct timer_list refresh_timer;
	bool refresh_init;	/* refresh_timer set up */
	bool refresh_on;	/* from online to offline */
	bool refresh_failed;	/* the last re-registration failed */
	u64 refreshes;
	u64 refresh_missed;	/* Xen's writes the record had missed */
	u64 refresh_untold;	/* refreshes whose lag could not be told */
	u64 refresh_cost_sum_ns, refresh_cost_max_ns, refresh_cost_avg_ns;
	u64 refresh_costed;	/* refreshes whose cost was told */
	unsigned long refresh_period_j;	/* to the next refresh, jiffies */
	u64 refresh_lag_max_ns;
	u64 refresh_lag_at;	/* jiffies_64 when it was seen */
};

/* pvread_refresh_state(): the sysfs attribute "refresh" names them. */
enum pvread_refresh_state {
	PVREAD_REFRESH_OFF,		/* Xen's writes all land */
	PVREAD_REFRESH_ACTIVE,
	PVREAD_REFRESH_FAILED,		/* a re-registration failed */
	PVREAD_REFRESH_NOHZ_FULL,	/* a CPU may run without the tick */
	PVREAD_REFRESH_LAG,		/* beyond what the line may carry */
};

/*
 * The fields above @lock are set at load, before anything that reads them
 * can run, and do not change after.
 */
struct pvread_state {
	void *area;
	size_t size;
	struct pvread_header *hdr;
	struct pvread_cpu *cpus;
	enum cpuhp_state hp_state;
	bool cpu0_owned_by_kernel;
	/* cleared if a restore lands on a Xen without it: READ_ONCE */
	bool phys_area;			/* areas by physical address */

	/*
	 * Header writes and everything below.  The timekeeper's notifier
	 * takes it inside its write section (tk_core.seq held, interrupts
	 * off), and the measurement from hard-IRQ context, so:
	 *  - always with interrupts off (raw_spin_lock_irqsave() outside
	 *    those two): an interrupt's update spinning on a lock its own CPU
	 *    holds would stop every ktime_get() for good;
	 *  - nothing under it may wait on, or take a lock of, anything that
	 *    reads the time: no wake-up, no queued work (the workqueue's pool
	 *    lock is held around ktime_get(); KVM's "Prevent deadlock against
	 *    tk_core.seq"), no printk (its console drivers do both), no
	 *    sleeping; irq_work_queue() is lock-free and allowed;
	 *  - no hypercall that can take long or fail (registering an area):
	 *    every CPU's tick may be waiting behind it.
	 * Decide under the lock, act after it.
	 */
	raw_spinlock_t lock;
	/*
	 * Moves on with every change a measurement depends on: an update of
	 * the timekeeper, and a republish (records registered or let go,
	 * suspend and resume).  A measurement made outside the lock is
	 * published only if it did not move meanwhile.
	 */
	u64 gen;
	cpumask_var_t registered;
	cpumask_var_t to_register;	/* after a resume, by each CPU itself */
	cpumask_var_t tsc_covered;	/* CPUs the last TSC check ran on */
	/*
	 * Online CPUs without a record (Xen refused it, or vCPU 0's is the
	 * kernel's): the kernel's clock there is measured by nobody.
	 */
	cpumask_var_t unregistered;
	cpumask_var_t refresh_failed;	/* see pvread_refresh.c */
	bool nohz_full;			/* a CPU may run without the tick */
	u64 refresh_lag_until;		/* now_sec: a lag beyond the limit */
	u64 refresh_window[PVREAD_WINDOW_SEC];	/* as window[] */
	u64 refresh_window_sec[PVREAD_WINDOW_SEC];
	bool xen_clocksource;		/* at the last timekeeper update */
	bool all_stable;		/* every record had Xen's stable bit */
	bool ready;			/* warmed up, records readable */
	bool suspended;			/* between syscore suspend and resume */
	bool shutting_down;		/* reboot, halt, poweroff or kexec */
	u64 last_update_ns;		/* ktime_get_mono_fast_ns() then */
	u64 resumes;			/* header.disruptions */
	struct work_struct resume_work;	/* registers the records again */
	struct work_struct check_work;	/* TSC check for a CPU not yet in one */
	struct mutex check_mutex;	/* one TSC check at a time */

	/*
	 * The timekeeper as of its last update.  The notifier, inside the
	 * timekeeper's write section, only copies it and republishes what
	 * follows from it alone; looking at every vCPU's record, the bound
	 * and the line's anchor are left to @measure_work, which runs as
	 * soon as the CPU takes interrupts again, outside that section.
	 */
	struct timekeeper tk;
	struct irq_work measure_work;
	struct dentry *debugfs;
	u64 notify_max_ns, notify_last_ns, measure_max_ns, measure_last_ns;
	u64 check_max_ns, check_last_ns;	/* the TSC check's stop_machine */
	u64 measure_stale;		/* measurements an update overtook */
	u64 anchors_rejected;		/* the TSC went back before an anchor */
	u64 bound_overruns;		/* a measurement beyond the bound out */
	u64 anchor_dev_max_ns;		/* old line from the records, worst */
	unsigned int measure_drops;	/* ... in a row */
	u64 measure_locked;		/* made under pvread.lock after that */
	u64 coarse_held_ns;		/* see pvread_mirror(), at the last update */
	unsigned int measure_cursor;	/* the next record to look at */
	bool stable_round;		/* every look since the round began */
	unsigned int measuring;		/* measurements looking at the records */
	u64 updates_while_measuring;	/* notifier calls that did not wait */

	/* bound window, only touched under pvread.lock by the measurement */
	u64 window[PVREAD_WINDOW_SEC];
	u64 window_sec[PVREAD_WINDOW_SEC];
	u64 first_sec;
	bool have_first;
	u64 warmup_sec;			/* of history before a fast mode */

	/*
	 * Readers' per-process floors, and the line's end that fallbacks are
	 * lifted to, may be as far ahead of the kernel as the bound allowed
	 * before a suspend, and CLOCK_MONOTONIC stands still while the guest
	 * is away; and the window starts afresh at a resume (the suspend's
	 * own updates see records seconds apart), with too little history to
	 * know how far the line and records wander.  So the bound published
	 * after a resume stays at least @carry_ns for a whole window, or until
	 * CLOCK_MONOTONIC has moved @carry_ns past the resume if that is
	 * later (@carry_until; 0 until the first update after the resume,
	 * which is the timekeeper's own).  Measured once in the save/restore
	 * machine without the window rule: a read 8.7 ms off, 0.47 ms bound.
	 */
	u64 carry_ns;
	u64 carry_until;
	u64 carry_at_suspend;		/* the bound readers last had */
	u64 last_sec;			/* now_sec of the last update */

	/* the line, and whether the TSC allows it */
	struct pvread_line_state ln;
	bool tsc_checked;		/* the warp check has run since load/resume */
	u64 rates_apart_until;		/* now_sec: records' rates disagreed */
	u64 tsc_warp;			/* what it saw, ticks */
	u32 xen_tsc_flags, xen_tsc_mode, xen_tsc_khz;
};

extern struct pvread_state pvread;

static inline struct pvread_record *pvread_record(unsigned int cpu)
{
	return (struct pvread_record *)((u8 *)pvread.area + PAGE_SIZE) + cpu;
}

static inline const struct pvclock_vcpu_time_info *pvread_pvti(unsigned int cpu)
{
	return (const struct pvclock_vcpu_time_info *)&pvread_record(cpu)->pvclock;
}

static inline void pvread_write_begin(struct pvread_header *h)
{
	WRITE_ONCE(h->seq, h->seq + 1);
	/* odd seq visible before any field changes; pairs with readers' rmb */
	smp_wmb();
}

static inline void pvread_write_end(struct pvread_header *h)
{
	/* every field written before seq turns even; pairs with readers' rmb */
	smp_wmb();
	WRITE_ONCE(h->seq, h->seq + 1);
}

/* One look at the records and the kernel's clocksource, between t0 and t1. */
struct pvread_meas {
	u64 t0, t1;		/* TSC before and after */
	u64 k;			/* the kernel's clocksource read in between */
	u64 lo, hi;		/* lowest and highest of k and every record */
	u64 rate;		/* this CPU's record: ns per tick << 32 */
	u64 rate_lo, rate_hi;	/* of all registered records */
	bool all_stable;	/* every one had Xen's TSC-stable bit */
	bool wrapped;		/* the last registered record was looked at */
	unsigned int next;	/* where the next look starts */
};

struct attribute_group;

/* pvread_page.c: what the header says */
extern bool pvread_line_enabled;
bool pvread_all_stable(void);
u32 pvread_line_reason(u32 flags);
u32 pvread_flags(void);
void pvread_publish(struct pvread_header *h);
void pvread_republish(void);

/* pvread_xen.c: the areas, suspend, resume and shutdown */
int pvread_cpu_online(unsigned int cpu);
int pvread_cpu_offline(unsigned int cpu);
extern struct notifier_block pvread_reboot_nb;
void pvread_register_syscore(void);
void pvread_unregister_syscore(void);
void pvread_resume_work(struct work_struct *work);
void pvread_read_xen_tsc(void);
bool pvread_xen_drops_updates(void);
void pvread_release_areas(void);
int pvread_reregister_self(unsigned int cpu);

/* pvread_refresh.c: the records kept current where Xen drops writes */
bool pvread_refresh_possible(void);
void pvread_refresh_init(void);
void pvread_refresh_start(unsigned int cpu);
void pvread_refresh_stop(unsigned int cpu);
u64 pvread_refresh_take(u64 now_sec);
u64 pvread_refresh_window_worst(void);
enum pvread_refresh_state pvread_refresh_state(void);

/* pvread_tk.c: the timekeeper mirrored */
extern struct notifier_block pvread_gtod_nb;
long pvread_kernel_time(struct pvread_kernel_time __user *ukt);
int pvread_check_mirror(void);

/* pvread_measure.c: the records' disagreement and the error bound */
u64 pvread_window_worst_bound(u64 now_sec);
void pvread_restart_window(void);
void pvread_measure_work(struct irq_work *work);
void pvread_measure_sync(void);

/* pvread_line.c: the line anchored, ended and flattened */
void pvread_line_end(struct pvread_header *h);
void pvread_line_bases(struct pvread_line *hl, const struct timekeeper *tk);
void pvread_line_flatten(struct pvread_header *h);
bool pvread_line_anchor(struct pvread_header *h, const struct timekeeper *tk,
			const struct pvread_meas *m, u64 *dev_out,
			u64 *end_out);

/* pvread_tsc.c: one TSC across vCPUs; calls nothing in pvread_xen.c */
void pvread_tsc_check(void);
void pvread_check_work(struct work_struct *work);

/* pvread_sysfs.c: for operators and debuggers */
extern const struct attribute_group *pvread_groups[];
void pvread_debugfs_init(void);

/* pvread_test.c: for the selftests only */
extern uint pvread_test_mirror_skew;
extern uint pvread_test_anchor_tsc_back;
extern uint pvread_test_check_delay_ms;
extern int pvread_test_tsc_skew;
extern bool pvread_test_refresh;
void pvread_test_hold(void);
void pvread_test_check_hold(void);

#endif /* PVREAD_INTERNAL_H */
