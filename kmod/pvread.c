// SPDX-License-Identifier: GPL-2.0
/*
 * pvread: Xen pvclock records and the timekeeper's conversion, mapped
 * read-only into user space, so that clock_gettime() needs no system call
 * on guests whose clocksource is "xen".
 *
 * Xen keeps a secondary copy of each vCPU's time record wherever the guest
 * asks (VCPUOP_register_vcpu_time_memory_area); this module asks for one per
 * CPU in pages it owns, mirrors the timekeeper at every update through the
 * pvclock_gtod notifier, and lets /dev/pvread map both.  The layout is in
 * include/uapi/linux/pvread.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpuhotplug.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/irq_work.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pvclock_gtod.h>
#include <linux/reboot.h>
#include <linux/sched/clock.h>
#include <linux/spinlock.h>
#include <linux/stop_machine.h>
#include <linux/syscore_ops.h>
#include <linux/sysfs.h>
#include <linux/timekeeper_internal.h>
#include <linux/workqueue.h>
#include <linux/uaccess.h>
#include <linux/utsname.h>
#include <asm/msr.h>
#include <asm/pvclock.h>
#include <asm/xen/hypercall.h>
#include <asm/xen/hypervisor.h>
#include <xen/interface/vcpu.h>
#include <xen/features.h>
#include <xen/xen.h>
#include <xen/xen-ops.h>
#include <asm/xen/page.h>

#include <linux/pvread.h>

#include "pvread_line.h"

#ifndef PVREAD_HAVE_MSRQ	/* see Kbuild */
#define rdmsrq_safe rdmsrl_safe
#define wrmsrq_safe wrmsrl_safe
#endif

static_assert(sizeof(struct pvread_pvclock) ==
	      sizeof(struct pvclock_vcpu_time_info));
static_assert(offsetof(struct pvread_pvclock, tsc_shift) ==
	      offsetof(struct pvclock_vcpu_time_info, tsc_shift));
static_assert(sizeof(struct pvread_header) <= PAGE_SIZE);

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
/* Measurements dropped in a row before one is made under the lock. */
#define PVREAD_MEASURE_MAX_DROPS	4

#define PVREAD_LINE_RATE_PPM	1	/* records at one rate: rounding only */
#define PVREAD_WARP_LOOPS	5000
#define PVREAD_WARP_MAX_US	2000	/* every CPU stopped: keep it short */

static bool pvread_line_enabled = true;
module_param_named(line, pvread_line_enabled, bool, 0444);
MODULE_PARM_DESC(line, "Publish one clock line for every vCPU when the TSC allows (default 1; 0: per-CPU records only)");

static bool tsc_reliable;
module_param(tsc_reliable, bool, 0444);
MODULE_PARM_DESC(tsc_reliable, "Take the TSC as one across vCPUs even where Xen does not say so; the warp check still runs (default 0)");

static uint test_mirror_skew;
module_param(test_mirror_skew, uint, 0444);
MODULE_PARM_DESC(test_mirror_skew, "For tests: the published CLOCK_BOOTTIME this many ns ahead, which the check at load must refuse");

static uint test_measure_hold_ms;
static int test_hold_not_cpu = -1;

/* The writer's CPU is never the one held: the test's updates come from it. */
static int pvread_hold_set(const char *val, const struct kernel_param *kp)
{
	WRITE_ONCE(test_hold_not_cpu, raw_smp_processor_id());
	return param_set_uint(val, kp);
}

static const struct kernel_param_ops pvread_hold_ops = {
	.set = pvread_hold_set,
	.get = param_get_uint,
};
module_param_cb(test_measure_hold_ms, &pvread_hold_ops, &test_measure_hold_ms, 0600);
MODULE_PARM_DESC(test_measure_hold_ms, "For tests: the next measurement of the records, on a CPU other than the writer's, starts this many ms late (at most 1000; once; reads 0 once taken)");

static uint test_anchor_tsc_back;
module_param(test_anchor_tsc_back, uint, 0600);
MODULE_PARM_DESC(test_anchor_tsc_back, "For tests: the next anchor of the line reads the TSC this many ticks below the measurement's (once; reads 0 once taken)");

static uint test_check_delay_ms;
module_param(test_check_delay_ms, uint, 0444);
MODULE_PARM_DESC(test_check_delay_ms, "For tests: a TSC check queued by a vCPU coming online starts this many ms late (at most 1000)");

static int test_tsc_skew;
module_param(test_tsc_skew, int, 0644);
MODULE_PARM_DESC(test_tsc_skew, "For tests: the TSC check sees the TSC of the last online CPU go back by this many ticks");

struct pvread_line_state {
	u64 tsc;		/* the anchor */
	u64 span;
	u64 guard;		/* PVREAD_LINE_GUARD_NS in ticks */
	struct pvread_run mono, raw;
	bool exists;		/* a line was published since load */
	bool live;		/* readers may use it now */
};

/* Written on the CPU itself, or with it offline. */
struct pvread_cpu {
	u64 saved_tsc_aux;
	bool wrote_tsc_aux;
	bool in_xen;		/* Xen may write the area: let go before freeing */
	bool stuck;		/* Xen refused to let go of the area */
	int error;
};

static struct {
	void *area;
	size_t size;
	struct pvread_header *hdr;
	struct pvread_cpu *cpus;
	enum cpuhp_state hp_state;
	bool cpu0_owned_by_kernel;
	bool has_rdtscp;		/* per-CPU mode needs it, line mode not */
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
	cpumask_var_t tsc_aux_ok;
	cpumask_var_t prepared;		/* online callback has run */
	cpumask_var_t to_register;	/* after a resume, by each CPU itself */
	cpumask_var_t tsc_covered;	/* CPUs the last TSC check ran on */
	bool xen_clocksource;		/* at the last timekeeper update */
	bool all_stable;		/* every record had Xen's stable bit */
	bool ready;			/* warmed up, records readable */
	bool suspended;			/* between syscore suspend and resume */
	bool shutting_down;		/* reboot, halt, poweroff or kexec */
	u64 last_update_ns;		/* ktime_get_mono_fast_ns() then */
	u64 resumes;
	struct work_struct resume_work;	/* checks TSC_AUX after a resume */
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
	unsigned int measure_drops;	/* ... in a row */
	u64 measure_locked;		/* made under pv.lock after that */
	u64 coarse_held_ns;		/* see pvread_mirror(), at the last update */
	unsigned int measuring;		/* measurements looking at the records */
	u64 updates_while_measuring;	/* notifier calls that did not wait */

	/* bound window, only touched under pv.lock by the measurement */
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
} pv;

static struct pvread_record *pvread_record(unsigned int cpu)
{
	return (struct pvread_record *)((u8 *)pv.area + PAGE_SIZE) + cpu;
}

static const struct pvclock_vcpu_time_info *pvread_pvti(unsigned int cpu)
{
	return (const struct pvclock_vcpu_time_info *)&pvread_record(cpu)->pvclock;
}

static void pvread_write_begin(struct pvread_header *h)
{
	WRITE_ONCE(h->seq, h->seq + 1);
	/* odd seq visible before any field changes; pairs with readers' rmb */
	smp_wmb();
}

static void pvread_write_end(struct pvread_header *h)
{
	/* every field written before seq turns even; pairs with readers' rmb */
	smp_wmb();
	WRITE_ONCE(h->seq, h->seq + 1);
}

/* Every registered record carries Xen's TSC-stable bit; pv.lock held. */
static bool pvread_all_stable(void)
{
	unsigned int cpu;

	if (cpumask_empty(pv.registered))
		return false;
	for_each_cpu(cpu, pv.registered)
		if (!(READ_ONCE(pvread_pvti(cpu)->flags) & PVCLOCK_TSC_STABLE_BIT))
			return false;
	return true;
}

/* Does Xen, or the administrator, vouch for one TSC across vCPUs? */
static bool pvread_tsc_vouched(void)
{
	return tsc_reliable ||
	       (pv.xen_tsc_flags & (PVREAD_FLAG_TSC_EMULATED |
				    PVREAD_FLAG_HOST_TSC_RELIABLE));
}

/* Why the line may not be used now, or PVREAD_LINE_ACTIVE; pv.lock held. */
static u32 pvread_line_reason(u32 flags)
{
	if (!pvread_line_enabled)
		return PVREAD_LINE_OFF;
	if ((flags & PVREAD_FLAG_TSC_STABLE) && pv.cpu0_owned_by_kernel)
		return PVREAD_LINE_STABLE;
	if (!pvread_tsc_vouched())
		return PVREAD_LINE_UNVOUCHED;
	if (!pv.tsc_checked)
		return PVREAD_LINE_UNCHECKED;
	if (pv.tsc_warp)
		return PVREAD_LINE_WARP;
	if (pv.rates_apart_until && pv.last_sec < pv.rates_apart_until)
		return PVREAD_LINE_RATES;
	if (!pv.ready || pv.suspended || !pv.xen_clocksource ||
	    !cpumask_weight(pv.registered))
		return PVREAD_LINE_WAITING;
	return PVREAD_LINE_ACTIVE;
}

/*
 * The line stops here: readers that fall back afterwards keep their
 * readings at or above its value at the TSC now (a little later, for a
 * reader whose rdtsc ran late), never above where it could still have been
 * read.  The next line starts above that.  pv.lock held, header open.
 */
static void pvread_line_end(struct pvread_header *h)
{
	u64 now, span;

	if (!pv.ln.live)
		return;
	pv.ln.live = false;
	/* As in pvread_line_anchor(): readers that saw seq even are done. */
	smp_mb();
	now = rdtsc_ordered();
	span = (s64)(now - pv.ln.tsc) > 0 ? now - pv.ln.tsc : 0;
	span += pv.ln.guard;
	pv.ln.span = min(max(span, 1ULL), pv.ln.span);
	h->line.tsc_span = pv.ln.span;
}

/*
 * Flags and mode from the state of everything; pv.lock held, header open.
 *
 * Stable mode: when Xen sets PVCLOCK_TSC_STABLE_BIT, Linux trusts it only if
 * it saw the bit at boot, and then it has registered vCPU 0's secondary area
 * for its own vDSO (pvclock_get_pvti_cpu0_va() is set) and reads pvclock
 * without the global last_value.  That area is the kernel's: this module
 * never registers vCPU 0 then (pvread_kernel_owns()), since Xen keeps one
 * secondary area per vCPU and a second registration would take it away.
 * Every record then tells the same time, so the page names one registered
 * record, the lowest-numbered CPU's, in stable_record, for every CPU; no
 * TSC_AUX is needed.  Without the kernel's trust in the bit (it appeared
 * after boot, or the vDSO could not register) the kernel still hides the
 * records' disagreement behind last_value, and the page is line or per-CPU.
 * With a single vCPU whose area the kernel owns nothing is registered and
 * the mode is none; the kernel's vDSO is fast there anyway.
 *
 * Line mode needs a line the last timekeeping update anchored (only the
 * notifier starts one); per-CPU mode is the fallback where the TSC cannot
 * be trusted across vCPUs, or line=0.
 */
static u32 pvread_flags(void)
{
	u32 flags = pv.xen_tsc_flags;

	if (cpumask_subset(pv.prepared, pv.tsc_aux_ok))
		flags |= PVREAD_FLAG_TSC_AUX;
	if (pv.cpu0_owned_by_kernel)
		flags |= PVREAD_FLAG_CPU0_OWNED_BY_KERNEL;
	if (pv.xen_clocksource)
		flags |= PVREAD_FLAG_XEN_CLOCKSOURCE;
	if (pv.xen_clocksource && pv.all_stable)
		flags |= PVREAD_FLAG_TSC_STABLE;
	return flags;
}

static void pvread_publish(struct pvread_header *h)
{
	u32 flags = pvread_flags();

	h->nr_registered = cpumask_weight(pv.registered);
	h->flags = flags;
	h->line_state = pvread_line_reason(flags);
	h->tsc_warp = pv.tsc_warp;
	h->mode = PVREAD_MODE_NONE;
	h->stable_record = 0;
	if (h->line_state != PVREAD_LINE_ACTIVE)
		pvread_line_end(h);
	if (!pv.ready || pv.suspended || !pv.xen_clocksource ||
	    !h->nr_registered)
		return;
	if ((flags & PVREAD_FLAG_TSC_STABLE) && pv.cpu0_owned_by_kernel) {
		h->stable_record = cpumask_first(pv.registered);
		h->mode = PVREAD_MODE_STABLE;
	} else if (h->line_state == PVREAD_LINE_ACTIVE && pv.ln.live) {
		h->mode = PVREAD_MODE_LINE;
	} else if (flags & PVREAD_FLAG_TSC_AUX) {
		h->mode = PVREAD_MODE_PERCPU;
	}
}

/* Republish after a change outside the timekeeper; pv.lock held. */
static void pvread_republish(void)
{
	pv.gen++;
	pv.all_stable = pvread_all_stable();
	pvread_write_begin(pv.hdr);
	pvread_publish(pv.hdr);
	pvread_write_end(pv.hdr);
}

static u32 pvread_read_tsc_aux(void)
{
	u32 lo, hi, aux;

	asm volatile("rdtscp" : "=a" (lo), "=d" (hi), "=c" (aux));
	return aux;
}

/*
 * rdtscp must name the CPU the TSC was read on.  Linux as a PV guest leaves
 * TSC_AUX at 0 on every vCPU, so program it the way Linux does elsewhere
 * ((node << 12) | cpu) and check that user-visible rdtscp now agrees.
 */
static void pvread_setup_tsc_aux(unsigned int cpu, struct pvread_cpu *pc)
{
	u64 want = ((u64)cpu_to_node(cpu) << 12) | cpu;

	cpumask_clear_cpu(cpu, pv.tsc_aux_ok);
	if (!pv.has_rdtscp || cpu > PVREAD_TSC_AUX_CPU_MASK)
		return;
	if ((pvread_read_tsc_aux() & PVREAD_TSC_AUX_CPU_MASK) != cpu) {
		/* Keep what was there before the module, for the offline. */
		if (!pc->wrote_tsc_aux &&
		    rdmsrq_safe(MSR_TSC_AUX, &pc->saved_tsc_aux))
			return;
		if (wrmsrq_safe(MSR_TSC_AUX, want))
			return;
		pc->wrote_tsc_aux = true;
	}
	if ((pvread_read_tsc_aux() & PVREAD_TSC_AUX_CPU_MASK) == cpu)
		cpumask_set_cpu(cpu, pv.tsc_aux_ok);
}

/*
 * Xen 4.18 on takes the area by guest physical address too, and then keeps
 * it current whatever mode the vCPU runs in: the area registered by virtual
 * address is not written while a 64-bit PV vCPU runs in user mode (the
 * kernel's mappings are absent then).  ~0 lets go of it.  Not yet in
 * Linux's copies of Xen's headers: Xen's public vcpu.h and features.h.
 */
#define PVREAD_VCPUOP_TIME_PHYS_AREA	15
#define PVREAD_XENFEAT_TIME_PHYS_AREA	19

static int pvread_register_area(unsigned int cpu, struct pvread_pvclock *p)
{
	struct vcpu_register_time_memory_area area = {
		.addr.v = (struct pvclock_vcpu_time_info *)p,
	};
	u64 addr;

	/* Only ever on @cpu itself: see pvread_unregister_self(). */
	if (WARN_ON_ONCE(cpu != raw_smp_processor_id()))
		return -EINVAL;
	if (pv.phys_area) {
		addr = p ? virt_to_machine(p).maddr : ~0ULL;
		return HYPERVISOR_vcpu_op(PVREAD_VCPUOP_TIME_PHYS_AREA,
					  xen_vcpu_nr(cpu), &addr);
	}
	return HYPERVISOR_vcpu_op(VCPUOP_register_vcpu_time_memory_area,
				  xen_vcpu_nr(cpu), &area);
}

/*
 * Tell Xen to stop writing @cpu's area, on @cpu itself: for an area
 * registered by virtual address Xen answers by rewriting the target
 * vCPU's records, its primary one (the kernel's clock) included, from the
 * *calling* pCPU's calibration and without pausing the target
 * (xen/arch/x86/domain.c), so from another CPU it would race Xen's own
 * writer of that vCPU's clock.  Xen may have half taken a registration it
 * refused, so this also follows a refusal; if Xen will not let go, the
 * pages must never be freed.  Not under pv.lock (a hypercall, a printk).
 */
static void pvread_unregister_self(unsigned int cpu)
{
	struct pvread_cpu *pc = &pv.cpus[cpu];
	int ret = pvread_register_area(cpu, NULL);

	if (ret) {
		pr_err("cpu%u: Xen kept vCPU %u's time area: %d\n",
		       cpu, xen_vcpu_nr(cpu), ret);
		pc->stuck = true;
		return;
	}
	pc->in_xen = false;
	pc->stuck = false;
	/*
	 * Odd: no reader takes it for current, and the registration that
	 * brings the vCPU back visibly rewrites it (Xen's physical-area
	 * registration copies the vCPU's record with version 0, which may
	 * equal what was there).
	 */
	WRITE_ONCE(pvread_record(cpu)->pvclock.version, 1);
}

/*
 * Register @cpu's record; on @cpu itself, since Xen fills the record, and
 * rewrites the vCPU's own primary record, from the calling pCPU's
 * calibration.  Not under pv.lock; @cpu not yet in pv.registered.
 */
static int pvread_register_self(unsigned int cpu)
{
	struct pvread_record *rec = pvread_record(cpu);
	int ret;

	pv.cpus[cpu].in_xen = true;
	ret = pvread_register_area(cpu, &rec->pvclock);
	if (ret) {
		pr_err("cpu%u: Xen refused a time area for vCPU %u: %d\n",
		       cpu, xen_vcpu_nr(cpu), ret);
		pvread_unregister_self(cpu);
		return ret;
	}
	WRITE_ONCE(rec->registered_on, smp_processor_id());
	return 0;
}

/*
 * Take @cpu's record off the page, so that no reader trusts it once Xen
 * stops writing it; @keep: register it again after a resume.
 * pv.lock held.
 */
static void pvread_retire(unsigned int cpu, struct cpumask *keep)
{
	if (cpumask_test_and_clear_cpu(cpu, pv.registered) && keep)
		cpumask_set_cpu(cpu, keep);
	WRITE_ONCE(pvread_record(cpu)->state, 0);
}

/* Linux's own vDSO reads this area when Xen's TSC is stable. */
static bool pvread_kernel_owns(unsigned int cpu)
{
	return pv.cpu0_owned_by_kernel && xen_vcpu_nr(cpu) == 0;
}

/*
 * Runs on @cpu itself (CPUHP_AP_ONLINE_DYN), before CPUHP_AP_ACTIVE lets the
 * scheduler put user tasks there: the record is registered, written by Xen
 * (it updates the calling vCPU's area at registration) and TSC_AUX names
 * the CPU before any user-space rdtscp can run on it.
 */
static int pvread_cpu_online(unsigned int cpu)
{
	struct pvread_record *rec = pvread_record(cpu);
	struct pvread_cpu *pc = &pv.cpus[cpu];
	bool check = false, reg = !pvread_kernel_owns(cpu);
	unsigned long irqflags;
	int ret = 0;

	pc->error = 0;
	rec->xen_vcpu_id = xen_vcpu_nr(cpu);
	/*
	 * The reboot notifier's IPI lets go of what is registered when it
	 * lands: not between the look at shutting_down and the registration.
	 */
	local_irq_save(irqflags);
	reg = reg && !READ_ONCE(pv.shutting_down);
	if (reg) {
		ret = pvread_register_self(cpu);
		pc->error = ret;
	}
	local_irq_restore(irqflags);

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	cpumask_clear_cpu(cpu, pv.to_register);
	pvread_setup_tsc_aux(cpu, pc);
	cpumask_set_cpu(cpu, pv.prepared);
	if (reg && !ret) {
		cpumask_set_cpu(cpu, pv.registered);
		WRITE_ONCE(rec->state, PVREAD_RECORD_REGISTERED);
	}
	/*
	 * A vCPU the last TSC check saw needs no other: Xen runs one TSC for
	 * the whole domain (emulated, or native with one offset), and
	 * stopping every CPU on each hotplug would cost more than it could
	 * find.  One it did not see (offline then, or back from S3 after the
	 * resume's check) gets one, and no line until it is done.
	 */
	if (!cpumask_test_cpu(cpu, pv.tsc_covered)) {
		pv.tsc_checked = false;
		check = true;
	}
	pvread_republish();
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
	if (check)
		schedule_work(&pv.check_work);
	return 0;
}

/*
 * Runs on @cpu itself, after CPUHP_AP_ACTIVE's teardown keeps user tasks
 * away: the record is marked unregistered in the page before Xen is told to
 * stop writing it, so no reader trusts a record that has gone stale.
 */
static int pvread_cpu_offline(unsigned int cpu)
{
	struct pvread_cpu *pc = &pv.cpus[cpu];
	unsigned long irqflags;

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	pvread_retire(cpu, NULL);
	cpumask_clear_cpu(cpu, pv.to_register);
	cpumask_clear_cpu(cpu, pv.prepared);
	cpumask_clear_cpu(cpu, pv.tsc_aux_ok);
	pvread_republish();
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);

	if (pc->wrote_tsc_aux) {
		wrmsrq_safe(MSR_TSC_AUX, pc->saved_tsc_aux);
		pc->wrote_tsc_aux = false;
	}
	/* Also one a Xen save left registered (see the suspend hook). */
	if (pc->in_xen)
		pvread_unregister_self(cpu);
	return 0;
}

/* Record @cpu at @tsc; false if Xen kept rewriting it. */
static bool pvread_eval(unsigned int cpu, u64 tsc, u64 *cycles)
{
	const struct pvclock_vcpu_time_info *src = pvread_pvti(cpu);
	unsigned int tries, version;

	for (tries = 0; tries < 16; tries++) {
		version = pvclock_read_begin(src);
		if (tsc < src->tsc_timestamp)
			return false;
		*cycles = __pvclock_read_cycles(src, tsc);
		if (!pvclock_read_retry(src, version))
			return true;
	}
	return false;
}

/* One look at the records and the kernel's clocksource, between t0 and t1. */
struct pvread_meas {
	u64 t0, t1;		/* TSC before and after */
	u64 k;			/* the kernel's clocksource read in between */
	u64 lo, hi;		/* lowest and highest of k and every record */
	u64 rate;		/* this CPU's record: ns per tick << 32 */
	u64 rate_lo, rate_hi;	/* of all registered records */
	bool all_stable;	/* every one had Xen's TSC-stable bit */
};

static u64 pvread_pvti_rate(const struct pvclock_vcpu_time_info *p)
{
	u64 mul = READ_ONCE(p->tsc_to_system_mul);
	s8 shift = READ_ONCE(p->tsc_shift);

	return shift >= 0 ? mul << shift : mul >> -shift;
}

/*
 * How far apart are the registered records and the kernel's own clocksource
 * read, right now?  False when that cannot be told.  Without pv.lock:
 * pv.registered may change under the loop, and then pv.gen has moved and
 * the caller throws the result away.  The records themselves stay mapped
 * until unload, which waits for the measurement.
 */
static bool pvread_measure_once(struct clocksource *cs, struct pvread_meas *m)
{
	unsigned int cpu, self = smp_processor_id();
	u64 c, rate;

	m->t0 = rdtsc_ordered();
	m->k = cs->read(cs);
	m->t1 = rdtsc_ordered();
	if ((s64)(m->t1 - m->t0) < 0)	/* never trusted to be positive */
		return false;
	m->lo = m->k;
	m->hi = m->k;
	m->rate = 0;
	m->rate_lo = U64_MAX;
	m->rate_hi = 0;
	m->all_stable = true;
	for_each_cpu(cpu, pv.registered) {
		if (!(READ_ONCE(pvread_pvti(cpu)->flags) & PVCLOCK_TSC_STABLE_BIT))
			m->all_stable = false;
		if (!pvread_eval(cpu, m->t0, &c))
			return false;
		m->lo = min(m->lo, c);
		if (!pvread_eval(cpu, m->t1, &c))
			return false;
		m->hi = max(m->hi, c);
		rate = pvread_pvti_rate(pvread_pvti(cpu));
		m->rate_lo = min(m->rate_lo, rate);
		m->rate_hi = max(m->rate_hi, rate);
		if (cpu == self || !m->rate)
			m->rate = rate;
	}
	return m->rate != 0;
}

/*
 * Xen rewrites another vCPU's record whenever that vCPU is scheduled, so a
 * record can start after the TSC was read for it.  Measure again rather
 * than leave the page without a bound, every reader on the syscall, for a
 * whole tick.
 */
static bool pvread_measure(struct clocksource *cs, struct pvread_meas *m)
{
	unsigned int attempt;

	for (attempt = 0; attempt < 4; attempt++)
		if (pvread_measure_once(cs, m))
			return true;
	return false;
}

/* The kernel's CLOCK_MONOTONIC at clocksource value @c, as it would say. */
static s64 pvread_tk_mono_ns(const struct timekeeper *tk, u64 c)
{
	const struct tk_read_base *r = &tk->tkr_mono;
	s64 d = clamp_t(s64, c - r->cycle_last, -(s64)r->clock->max_cycles,
			(s64)r->clock->max_cycles);
	s64 ns = (tk->xtime_sec + tk->wall_to_monotonic.tv_sec) * NSEC_PER_SEC +
		 tk->wall_to_monotonic.tv_nsec;

	if (d >= 0)
		return ns + (s64)((r->xtime_nsec + (u64)d * r->mult) >> r->shift);
	return ns + (s64)(r->xtime_nsec >> r->shift) -
	       (s64)(((u64)-d * r->mult) >> r->shift);
}

/* The same for CLOCK_MONOTONIC_RAW. */
static s64 pvread_tk_raw_ns(const struct timekeeper *tk, u64 c)
{
	const struct tk_read_base *r = &tk->tkr_raw;
	s64 d = clamp_t(s64, c - r->cycle_last, -(s64)r->clock->max_cycles,
			(s64)r->clock->max_cycles);
	s64 ns = tk->raw_sec * NSEC_PER_SEC;

	if (d >= 0)
		return ns + (s64)((r->xtime_nsec + (u64)d * r->mult) >> r->shift);
	return ns + (s64)(r->xtime_nsec >> r->shift) -
	       (s64)(((u64)-d * r->mult) >> r->shift);
}

/* Ticks past the anchor a reader would use at @tsc. */
static u64 pvread_line_d(u64 tsc)
{
	s64 d = tsc - pv.ln.tsc;

	return d > 0 ? min_t(u64, d, pv.ln.span) : 0;
}

static s64 pvread_run_ns(const struct pvread_run *r, u64 tsc)
{
	s64 ns;
	u32 frac;

	pvread_run_at(r, pvread_line_d(tsc), &ns, &frac);
	return ns;
}

static u64 pvread_abs_diff(u64 a, u64 b)
{
	return a > b ? a - b : b - a;
}

/* How far @v (ns) is from the far end of [@lo, @hi]. */
static u64 pvread_dev(s64 v, s64 lo, s64 hi)
{
	return max(v > lo ? v - lo : lo - v, v > hi ? v - hi : hi - v);
}

static void pvread_set_line_base(struct pvread_clock_base *b, s64 ns,
				 u32 frac)
{
	s32 rem;

	b->sec = div_s64_rem(ns, NSEC_PER_SEC, &rem);
	if (rem < 0) {
		rem += NSEC_PER_SEC;
		b->sec--;
	}
	b->snsec = ((u64)rem << 32) | frac;
}

/*
 * The header's line bases from pv.ln and the kernel's offsets between
 * clocks: at an anchor, and at every update, which may have set the time.
 */
static void pvread_line_bases(struct pvread_line *hl,
			      const struct timekeeper *tk)
{
	const struct pvread_line_state *l = &pv.ln;
	s64 wtm = timespec64_to_ns(&tk->wall_to_monotonic);
	s64 boot = timespec64_to_ns(&tk->monotonic_to_boot);
	s64 tai = (s64)tk->tai_offset * NSEC_PER_SEC;

	pvread_set_line_base(&hl->base[CLOCK_MONOTONIC], l->mono.ns,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_BOOTTIME], l->mono.ns + boot,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_REALTIME], l->mono.ns - wtm,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_TAI], l->mono.ns - wtm + tai,
			     l->mono.frac);
	pvread_set_line_base(&hl->base[CLOCK_MONOTONIC_RAW], l->raw.ns,
			     l->raw.frac);
}

/* The header's line from pv.ln, just anchored. */
static void pvread_line_publish(struct pvread_line *hl,
				const struct timekeeper *tk)
{
	const struct pvread_line_state *l = &pv.ln;

	hl->tsc_timestamp = l->tsc;
	hl->tsc_span = l->span;
	hl->mul = l->mono.mul;
	hl->shift = l->mono.shift;
	hl->raw_mul = l->raw.mul;
	hl->raw_shift = l->raw.shift;
	hl->anchors++;
	pvread_line_bases(hl, tk);
}

/* Add @add (ns << 32) to @b, a base of the line. */
static void pvread_base_add(struct pvread_clock_base *b, unsigned __int128 add)
{
	unsigned __int128 v = (unsigned __int128)b->snsec + add;
	u64 rem;

	/* rem < NSEC_PER_SEC: snsec stays below one second << 32 */
	b->sec += div64_u64_rem((u64)(v >> 32), NSEC_PER_SEC, &rem);
	b->snsec = (rem << 32) | (u32)v;
}

/*
 * The ended line, flat at its end: after a restore the TSC may be another
 * host's, lower than the anchor, and a reader clamping it there would get
 * the line's start, below what it may have returned.  Where the line
 * stood at its end holds whatever the TSC, and is where the next line
 * starts.  pv.lock held, header open, the line ended.
 */
static void pvread_line_flatten(struct pvread_header *h)
{
	struct pvread_line_state *l = &pv.ln;
	struct pvread_line *hl = &h->line;
	unsigned __int128 mono, raw;
	unsigned int c;

	if (!l->exists || l->live)
		return;
	mono = (unsigned __int128)(l->span << l->mono.shift) * l->mono.mul;
	raw = (unsigned __int128)(l->span << l->raw.shift) * l->raw.mul;
	for (c = 0; c < PVREAD_NR_CLOCK_BASES; c++)
		if (c == CLOCK_MONOTONIC_RAW)
			pvread_base_add(&hl->base[c], raw);
		else if (hl->base[c].sec || hl->base[c].snsec)
			pvread_base_add(&hl->base[c], mono);
	pvread_run_at(&l->mono, l->span, &l->mono.ns, &l->mono.frac);
	pvread_run_at(&l->raw, l->span, &l->raw.ns, &l->raw.frac);
	l->mono.mul = 0;
	l->mono.shift = 0;
	l->raw.mul = 0;
	l->raw.shift = 0;
	l->tsc = 0;
	l->span = 1;
	hl->tsc_timestamp = 0;
	hl->tsc_span = 1;
	hl->mul = 0;
	hl->shift = 0;
	hl->raw_mul = 0;
	hl->raw_shift = 0;
}

/*
 * Anchor the next line at the TSC now: continue the live one, aimed at the
 * kernel's clock, or start one at the kernel's clock but never below where
 * the last one stood.  Runs after the timekeeper's update, pv.lock held,
 * the header open (readers of the old line are still finishing).  Sets
 * @dev to how far the lines, the kernel's clock and the records
 * disagreed, in ns, including how far the new line's rate could take it
 * from the records' over its span, and @end_out to how far the old line
 * was from them at its end (0 if it had ended).  False, and nothing
 * anchored, if the
 * TSC read now is below the measurement's: every difference below is
 * taken as unsigned, and one TSC step back of 500 ticks would start a
 * line about 195 years ahead, which no later line could undo.
 */
static bool pvread_line_anchor(struct pvread_header *h,
			       const struct timekeeper *tk,
			       const struct pvread_meas *m, u64 *dev_out,
			       u64 *end_out)
{
	struct pvread_line_state *l = &pv.ln;
	u64 rm = mul_u64_u32_shr(m->rate, tk->tkr_mono.mult, tk->tkr_mono.shift);
	u64 rr = mul_u64_u32_shr(m->rate, tk->tkr_raw.mult, tk->tkr_raw.shift);
	u64 tmid = m->t0 + (m->t1 - m->t0) / 2, ta, d, gap, dev = 0, far, lo, hi;
	s64 km = pvread_tk_mono_ns(tk, m->k), kr = pvread_tk_raw_ns(tk, m->k);
	s64 mlo = pvread_tk_mono_ns(tk, m->lo), mhi = pvread_tk_mono_ns(tk, m->hi);
	s64 rlo = pvread_tk_raw_ns(tk, m->lo), rhi = pvread_tk_raw_ns(tk, m->hi);
	u64 guard = div64_u64((u64)PVREAD_LINE_GUARD_NS << 32, m->rate);
	bool cont;

	/* Readers that saw the seq even have read the TSC before this. */
	smp_mb();
	ta = rdtsc_ordered();
	if (unlikely(READ_ONCE(test_anchor_tsc_back)))
		ta = m->t1 - xchg(&test_anchor_tsc_back, 0);
	if ((s64)(ta - m->t1) < 0) {
		pv.anchors_rejected++;
		return false;
	}
	d = (s64)(ta - l->tsc) > 0 ? ta - l->tsc : 0;
	cont = l->live && d <= l->span;
	if (cont) {
		/* The old line at the end of its life. */
		dev = max3(dev, pvread_dev(pvread_run_ns(&l->mono, m->t0), mlo, mhi),
			   pvread_dev(pvread_run_ns(&l->mono, m->t1), mlo, mhi));
		dev = max3(dev, pvread_dev(pvread_run_ns(&l->raw, m->t0), rlo, rhi),
			   pvread_dev(pvread_run_ns(&l->raw, m->t1), rlo, rhi));
		*end_out = dev;		/* what readers of the old line saw */
		rm = pvread_steer(rm, pvread_run_ns(&l->mono, tmid) - km);
		rr = pvread_steer(rr, pvread_run_ns(&l->raw, tmid) - kr);
		pvread_run_continue(&l->mono, d, rm, guard);
		pvread_run_continue(&l->raw, d, rr, guard);
	} else {
		gap = mul_u64_u64_shr(ta - tmid, rm, 32);
		d = l->exists ? pvread_line_d(ta) : 0;
		pvread_run_start(&l->mono, d, rm, km + gap, l->exists);
		gap = mul_u64_u64_shr(ta - tmid, rr, 32);
		pvread_run_start(&l->raw, d, rr, kr + gap, l->exists);
	}
	l->tsc = ta;
	l->guard = guard;
	l->span = div64_u64((u64)PVREAD_LINE_SPAN_NS << 32, m->rate);
	l->exists = true;
	l->live = true;

	/* The new line against the kernel and records, which moved on. */
	gap = mul_u64_u64_shr(ta - m->t0, rm, 32);
	dev = max(dev, pvread_dev(l->mono.ns, mlo, mhi + gap));
	dev = max(dev, pvread_dev(l->raw.ns, rlo, rhi + gap));
	/* Unsteered for a whole span, at most this far from any record. */
	rm = pvread_run_rate(&l->mono);
	lo = mul_u64_u32_shr(m->rate_lo, tk->tkr_mono.mult, tk->tkr_mono.shift);
	hi = mul_u64_u32_shr(m->rate_hi, tk->tkr_mono.mult, tk->tkr_mono.shift);
	far = max(pvread_abs_diff(rm, lo), pvread_abs_diff(rm, hi));
	rr = pvread_run_rate(&l->raw);
	lo = mul_u64_u32_shr(m->rate_lo, tk->tkr_raw.mult, tk->tkr_raw.shift);
	hi = mul_u64_u32_shr(m->rate_hi, tk->tkr_raw.mult, tk->tkr_raw.shift);
	far = max3(far, pvread_abs_diff(rr, lo), pvread_abs_diff(rr, hi));
	pvread_line_publish(&h->line, tk);
	*dev_out = dev + mul_u64_u64_shr(far, l->span, 32);
	return true;
}

/* The bound the window gives at @now_sec. */
static u64 pvread_window_worst_bound(u64 now_sec)
{
	unsigned int i;
	u64 worst = 0;

	for (i = 0; i < PVREAD_WINDOW_SEC; i++)
		if (pv.window_sec[i] + PVREAD_WINDOW_SEC > now_sec)
			worst = max(worst, pv.window[i]);
	if (worst > (U64_MAX - PVREAD_BOUND_SLACK_NS) / 2)
		return U64_MAX;
	return 2 * worst + PVREAD_BOUND_SLACK_NS;
}

static u64 pvread_window_bound(u64 now_sec, u64 spread)
{
	unsigned int i = now_sec % PVREAD_WINDOW_SEC;

	if (pv.window_sec[i] != now_sec) {
		pv.window_sec[i] = now_sec;
		pv.window[i] = 0;
	}
	pv.window[i] = max(pv.window[i], spread);
	return pvread_window_worst_bound(now_sec);
}

/* @bound, raised to what a resume carried over while that lasts. */
static u64 pvread_carried_bound(const struct timekeeper *tk, u64 bound)
{
	u64 mono;

	if (!pv.carry_ns)
		return bound;
	mono = (u64)(tk->xtime_sec + tk->wall_to_monotonic.tv_sec) *
	       NSEC_PER_SEC + (tk->tkr_mono.xtime_nsec >> tk->tkr_mono.shift) +
	       tk->wall_to_monotonic.tv_nsec;
	if (!pv.carry_until)
		pv.carry_until = mono + max_t(u64, pv.carry_ns,
					      PVREAD_WINDOW_SEC * NSEC_PER_SEC);
	if (mono >= pv.carry_until) {
		pv.carry_ns = 0;
		pv.carry_until = 0;
		return bound;
	}
	return max(bound, pv.carry_ns);
}

static void pvread_set_base(struct pvread_clock_base *b, u64 sec, u64 snsec,
			    u64 one_sec)
{
	while (snsec >= one_sec) {
		snsec -= one_sec;
		sec++;
	}
	b->sec = sec;
	b->snsec = snsec;
}

/*
 * The conversion the vDSO would get from update_vsyscall().  Returns how
 * far MONOTONIC_COARSE is held ahead of the kernel's (below), in ns.
 */
static u64 pvread_mirror(struct pvread_timekeeper *m,
			 const struct timekeeper *tk)
{
	u32 shift = tk->tkr_mono.shift;
	u64 one_sec = (u64)NSEC_PER_SEC << shift;
	u64 xnsec = tk->tkr_mono.xtime_nsec;
	u64 mono_sec = tk->xtime_sec + tk->wall_to_monotonic.tv_sec;
	u64 mono_snsec = xnsec + ((u64)tk->wall_to_monotonic.tv_nsec << shift);
#ifdef PVREAD_HAVE_COARSE_NSEC	/* see Kbuild */
	u64 coarse_ns = tk->coarse_nsec;
#else
	u64 coarse_ns = xnsec >> shift;
#endif
	struct pvread_clock_base coarse, now;

	m->cycle_last = tk->tkr_mono.cycle_last;
	m->mask = tk->tkr_mono.mask;
	m->mult = tk->tkr_mono.mult;
	m->shift = shift;
	/*
	 * As far as the kernel itself would convert (the clocksource's
	 * max_cycles) and delta * mult + snsec cannot wrap.  Not less: a
	 * guest stalled by its host for a second must not send every reader
	 * to the kernel until the next tick.
	 */
	m->max_delta = min_t(u64, tk->tkr_mono.clock->max_cycles,
			     (U64_MAX >> 1) / max3(tk->tkr_mono.mult,
						   tk->tkr_raw.mult, 1U));
	m->raw_cycle_last = tk->tkr_raw.cycle_last;
	m->raw_mult = tk->tkr_raw.mult;
	m->raw_shift = tk->tkr_raw.shift;

	pvread_set_base(&m->base[CLOCK_REALTIME], tk->xtime_sec, xnsec, one_sec);
	pvread_set_base(&m->base[CLOCK_TAI], tk->xtime_sec + tk->tai_offset,
			xnsec, one_sec);
	pvread_set_base(&m->base[CLOCK_MONOTONIC], mono_sec, mono_snsec,
			one_sec);
	pvread_set_base(&m->base[CLOCK_BOOTTIME],
			mono_sec + tk->monotonic_to_boot.tv_sec,
			mono_snsec +
			((u64)tk->monotonic_to_boot.tv_nsec << shift), one_sec);
	if (test_mirror_skew)
		m->base[CLOCK_BOOTTIME].snsec += (u64)test_mirror_skew << shift;
	pvread_set_base(&m->base[CLOCK_MONOTONIC_RAW], tk->raw_sec,
			tk->tkr_raw.xtime_nsec,
			(u64)NSEC_PER_SEC << tk->tkr_raw.shift);
	pvread_set_base(&m->base[CLOCK_REALTIME_COARSE], tk->xtime_sec,
			coarse_ns, NSEC_PER_SEC);
	/*
	 * Before Linux 6.15 an NTP frequency change moves xtime_nsec back
	 * to keep the fine clocks continuous, and the coarse clocks step
	 * back with it (by a microsecond or so under adjtimex slews).  A
	 * monotonic clock must not: hold the last value until the kernel's
	 * catches up.  (Since 6.15 coarse_nsec only moves forward but for
	 * clock sets, and this never holds.)
	 */
	coarse = m->base[CLOCK_MONOTONIC_COARSE];
	pvread_set_base(&m->base[CLOCK_MONOTONIC_COARSE], mono_sec,
			coarse_ns + tk->wall_to_monotonic.tv_nsec,
			NSEC_PER_SEC);
	now = m->base[CLOCK_MONOTONIC_COARSE];
	if (coarse.sec < now.sec ||
	    (coarse.sec == now.sec && coarse.snsec <= now.snsec))
		return 0;
	m->base[CLOCK_MONOTONIC_COARSE] = coarse;
	return (coarse.sec - now.sec) * NSEC_PER_SEC + coarse.snsec - now.snsec;
}

/* Forget the bound's history: a new clocksource or a resume. */
static void pvread_restart_window(void)
{
	pv.have_first = false;
	pv.rates_apart_until = 0;
	memset(pv.window_sec, 0, sizeof(pv.window_sec));
}

/*
 * Called by the timekeeper at every update (ticks, settimeofday and
 * clock_settime, adjtimex, a clocksource change), inside its write section
 * with interrupts off: every ktime_get() caller spins until it returns.
 * So it does a constant amount of work, whatever the number of vCPUs:
 * whatever the update changed is on the page before the update is over
 * (the conversion, the line's offsets between clocks, no fast mode on
 * another clocksource), and the look at every record that the bound and
 * the line's next anchor need is queued for pvread_measure_work().
 */
static int pvread_gtod_notify(struct notifier_block *nb, unsigned long was_set,
			      void *priv)
{
	struct timekeeper *tk = priv;
	struct clocksource *cs = tk->tkr_mono.clock;
	struct pvread_header *h = pv.hdr;
	u64 t0 = local_clock();
	bool xen;

#ifdef PVREAD_HAVE_TK_ID	/* see Kbuild */
	/* Only the core timekeeper is CLOCK_REALTIME and the rest. */
	if (tk->id != TIMEKEEPER_CORE)
		return NOTIFY_DONE;
#endif
	raw_spin_lock(&pv.lock);
	xen = !strcmp(cs->name, "xen") && tk->tkr_mono.mask == U64_MAX;
	if (!xen) {
		pvread_restart_window();
		pv.warmup_sec = PVREAD_WARMUP_SEC;
		pv.ready = false;
	}
	pv.xen_clocksource = xen;
	pv.tk = *tk;
	pv.gen++;
	if (pv.measuring)
		pv.updates_while_measuring++;
	pv.last_update_ns = ktime_get_mono_fast_ns();

	pvread_write_begin(h);
	pv.coarse_held_ns = pvread_mirror(&h->tk, tk);
	if (pv.ln.live)
		pvread_line_bases(&h->line, tk);
	if (!xen) {
		h->error_bound_ns = U64_MAX;
		h->spread_ns = U64_MAX;
	}
	WRITE_ONCE(h->updates, h->updates + 1);
	pvread_publish(h);
	pvread_write_end(h);
	/*
	 * Not while suspended: the updates of a Xen save come inside
	 * stop_machine with interrupts off, and a self-IPI raised then is
	 * lost across the restore, which would leave the work pending for
	 * good.  The first update after the resume queues it again.
	 */
	if (xen && !pv.suspended)
		irq_work_queue(&pv.measure_work);
	raw_spin_unlock(&pv.lock);
	pv.notify_last_ns = local_clock() - t0;
	pv.notify_max_ns = max(pv.notify_max_ns, pv.notify_last_ns);
	return NOTIFY_OK;
}

/* test_measure_hold_ms: a measurement held before it looks, for a test. */
static void pvread_test_hold(void)
{
	unsigned int ms;

	if (likely(!READ_ONCE(test_measure_hold_ms)) ||
	    smp_processor_id() == READ_ONCE(test_hold_not_cpu))
		return;
	ms = xchg(&test_measure_hold_ms, 0);
	if (ms)
		mdelay(min(ms, 1000U));
}

/*
 * After each update, once interrupts are on again on the CPU that made it:
 * every record against the kernel's clock (the spread, the bound over the
 * window, whether the records run at one rate), then the line anchored
 * anew.  Against the timekeeper as it was at the last update, which is
 * what the page's conversion holds.  The look at every record is made
 * without pv.lock, so that an update on another CPU, which takes it inside
 * the timekeeper's write section, never waits for it; if anything changed
 * meanwhile the result is dropped: an update has queued this again, and a
 * change of records is measured at the next update.
 */
static void pvread_measure_work(struct irq_work *work)
{
	struct timekeeper *tk = &pv.tk;
	struct pvread_header *h = pv.hdr;
	u64 spread = U64_MAX, bound = U64_MAX, now_sec, dev, end = 0, gen, seen;
	u64 t0 = local_clock();
	struct clocksource *cs;
	bool ready = false, measured;
	struct pvread_meas m;

	raw_spin_lock(&pv.lock);
	if (!pv.xen_clocksource || pv.suspended) {
		raw_spin_unlock(&pv.lock);
		return;
	}
	cs = tk->tkr_mono.clock;
	if (pv.measure_drops < PVREAD_MEASURE_MAX_DROPS) {
		gen = pv.gen;
		pv.measuring++;
		raw_spin_unlock(&pv.lock);

		pvread_test_hold();
		measured = pvread_measure(cs, &m);

		raw_spin_lock(&pv.lock);
		pv.measuring--;
		if (pv.gen != gen) {
			pv.measure_stale++;
			pv.measure_drops++;
			raw_spin_unlock(&pv.lock);
			return;
		}
	} else {
		/*
		 * Updates came faster than the look at the records, this
		 * many times in a row: this once under the lock, so that the
		 * bound and the line are never older than that.  The updates
		 * wait for it, as every one did before.
		 */
		pv.measure_locked++;
		measured = pvread_measure(cs, &m);
	}
	pv.measure_drops = 0;
	if (measured)
		spread = m.hi - m.lo;
	seen = spread;
	now_sec = tk->tkr_mono.cycle_last / NSEC_PER_SEC;
	pv.last_sec = now_sec;
	if (!pv.have_first) {
		pv.first_sec = now_sec;
		pv.have_first = true;
	}
	if (spread != U64_MAX) {
		if (m.rate_hi - m.rate_lo >
		    div_u64(m.rate_lo, 1000000 / PVREAD_LINE_RATE_PPM))
			pv.rates_apart_until = now_sec + PVREAD_WINDOW_SEC;
		bound = pvread_window_bound(now_sec, spread);
		ready = now_sec >= pv.first_sec + pv.warmup_sec;
	}
	/* Rarely not measured: then a look at the bits alone, locked. */
	pv.all_stable = measured ? m.all_stable : pvread_all_stable();
	if (bound != U64_MAX)
		bound = pvread_carried_bound(tk, bound);
	pv.ready = ready;

	pvread_write_begin(h);
	if (ready && pvread_line_reason(pvread_flags()) == PVREAD_LINE_ACTIVE &&
	    pvread_line_anchor(h, tk, &m, &dev, &end)) {
		bound = pvread_carried_bound(tk, pvread_window_bound(now_sec,
								     dev));
		seen = max(seen, end);
	}
	/*
	 * The bound readers had since the last update against what this
	 * update measured at that interval's end, the records' spread and
	 * the old line's distance from them: where the bound's premise
	 * failed (see PVREAD_WINDOW_SEC).  Not seen: an interval whose
	 * anchor was rejected or whose line ended.
	 */
	if (h->mode != PVREAD_MODE_NONE && seen != U64_MAX &&
	    seen > h->error_bound_ns)
		pv.bound_overruns++;
	h->error_bound_ns = bound;
	h->spread_ns = spread;
	pvread_publish(h);
	pvread_write_end(h);
	pv.measure_last_ns = local_clock() - t0;
	pv.measure_max_ns = max(pv.measure_max_ns, pv.measure_last_ns);
	raw_spin_unlock(&pv.lock);
}

static struct notifier_block pvread_gtod_nb = {
	.notifier_call = pvread_gtod_notify,
};

static int pvread_open(struct inode *inode, struct file *file)
{
	/* Nothing in here is for writing, ever. */
	if (file->f_mode & FMODE_WRITE)
		return -EPERM;
	return nonseekable_open(inode, file);
}

static int pvread_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;

	if (vma->vm_flags & VM_WRITE)
		return -EACCES;
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	if (vma->vm_pgoff || len > pv.size)
		return -EINVAL;
#ifdef PVREAD_HAVE_VM_FLAGS_MOD	/* Linux 6.3 on, see Kbuild */
	vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, VM_MAYWRITE | VM_MAYEXEC);
#else
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
	vma->vm_flags &= ~(VM_MAYWRITE | VM_MAYEXEC);
#endif
	return remap_pfn_range(vma, vma->vm_start,
			       PFN_DOWN(virt_to_phys(pv.area)), len,
			       vma->vm_page_prot);
}

static long pvread_reference(struct pvread_reference __user *uref)
{
	const struct pvclock_vcpu_time_info *src;
	struct pvread_reference ref = {};
	unsigned int version;

	preempt_disable();
	ref.cpu = smp_processor_id();
	if (!(READ_ONCE(pvread_record(ref.cpu)->state) &
	      PVREAD_RECORD_REGISTERED)) {
		preempt_enable();
		return -ENODATA;
	}
	src = pvread_pvti(ref.cpu);
	do {
		version = pvclock_read_begin(src);
		ref.tsc = rdtsc_ordered();
		ref.cycles = __pvclock_read_cycles(src, ref.tsc);
	} while (pvclock_read_retry(src, version));
	ref.version = version;
	preempt_enable();

	return copy_to_user(uref, &ref, sizeof(ref)) ? -EFAULT : 0;
}

/*
 * The kernel's clocks, all at one read of its clocksource, and its coarse
 * clocks, from one timekeeper state: header.updates did not move while
 * they were read (the notifier moves it inside the timekeeper's write
 * section, before any reader can see the new state).  Never under pv.lock:
 * the timekeeper's readers wait for a notifier that waits for that lock.
 */
static int pvread_kernel_time_get(struct pvread_kernel_time *kt)
{
	struct system_time_snapshot snap = {};
	struct timespec64 ts;
	ktime_t mono, off[TK_OFFS_MAX];
	unsigned int tries = 0;
	u64 updates;

	memset(kt, 0, sizeof(*kt));
	do {
		if (++tries > 100)
			return -EAGAIN;
		updates = READ_ONCE(pv.hdr->updates);
		/* updates before the clocks; pairs with tk_core's seqcount */
		smp_rmb();
#ifdef PVREAD_HAVE_SNAPSHOT_ID	/* see Kbuild */
		ktime_get_snapshot_id(CLOCK_MONOTONIC, &snap);
		if (!snap.valid)	/* timekeeping suspended */
			return -EAGAIN;
		mono = snap.systime;
		kt->ns[CLOCK_MONOTONIC_RAW] = ktime_to_ns(snap.monoraw);
#else
		ktime_get_snapshot(&snap);
		mono = ktime_sub(snap.real, ktime_mono_to_any(0, TK_OFFS_REAL));
		kt->ns[CLOCK_MONOTONIC_RAW] = ktime_to_ns(snap.raw);
#endif
		/*
		 * After the snapshot, not before: since 7.x these read the
		 * live timekeeper without its seqcount, and it takes a new
		 * update's offsets only after the notifier (updates) ran.
		 */
		off[TK_OFFS_REAL] = ktime_mono_to_any(0, TK_OFFS_REAL);
		off[TK_OFFS_BOOT] = ktime_mono_to_any(0, TK_OFFS_BOOT);
		off[TK_OFFS_TAI] = ktime_mono_to_any(0, TK_OFFS_TAI);
		ktime_get_coarse_real_ts64(&ts);
		kt->ns[CLOCK_REALTIME_COARSE] = timespec64_to_ns(&ts);
		ktime_get_coarse_ts64(&ts);
		kt->ns[CLOCK_MONOTONIC_COARSE] = timespec64_to_ns(&ts);
		/* the clocks before updates again: no update came between */
		smp_rmb();
	} while (READ_ONCE(pv.hdr->updates) != updates);
	kt->updates = updates;
	kt->cycles = snap.cycles;
	kt->ns[CLOCK_MONOTONIC] = ktime_to_ns(mono);
	kt->ns[CLOCK_REALTIME] = ktime_to_ns(ktime_add(mono, off[TK_OFFS_REAL]));
	kt->ns[CLOCK_BOOTTIME] = ktime_to_ns(ktime_add(mono, off[TK_OFFS_BOOT]));
	kt->ns[CLOCK_TAI] = ktime_to_ns(ktime_add(mono, off[TK_OFFS_TAI]));
	return 0;
}

static long pvread_kernel_time(struct pvread_kernel_time __user *ukt)
{
	struct pvread_kernel_time kt;
	int ret = pvread_kernel_time_get(&kt);

	if (ret)
		return ret;
	return copy_to_user(ukt, &kt, sizeof(kt)) ? -EFAULT : 0;
}

/* Clock @c at clocksource value @cycles by @m, as the vDSO computes it. */
static s64 pvread_mirror_ns(const struct pvread_timekeeper *m, unsigned int c,
			    u64 cycles)
{
	const struct pvread_clock_base *b = &m->base[c];
	u64 last = m->cycle_last, d;
	u32 mult = m->mult, shift = m->shift;

	if (c == CLOCK_REALTIME_COARSE || c == CLOCK_MONOTONIC_COARSE)
		return b->sec * NSEC_PER_SEC + (s64)b->snsec;
	if (c == CLOCK_MONOTONIC_RAW) {
		last = m->raw_cycle_last;
		mult = m->raw_mult;
		shift = m->raw_shift;
	}
	d = (cycles - last) & m->mask;
	if (d & ~(m->mask >> 1))	/* behind cycle_last: the kernel says 0 */
		d = 0;
	return b->sec * NSEC_PER_SEC +
	       (s64)(((unsigned __int128)d * mult + b->snsec) >> shift);
}

/*
 * The timekeeper is the kernel's own business and changes between versions
 * (the coarse clocks, for one, come from coarse_nsec since 6.15).  So at
 * load, the conversion the page publishes must give the kernel's own
 * answer for every clock at one clocksource value, to the nanosecond; on a
 * kernel whose timekeeper this module does not mirror, it refuses to load
 * rather than serve a wrong time.  MONOTONIC_COARSE may be ahead by
 * exactly what the module held it by where the kernel's stepped back.
 */
static int pvread_check_mirror(void)
{
	static const char * const names[PVREAD_NR_CLOCK_BASES] = {
		[CLOCK_REALTIME] = "CLOCK_REALTIME",
		[CLOCK_MONOTONIC] = "CLOCK_MONOTONIC",
		[CLOCK_BOOTTIME] = "CLOCK_BOOTTIME",
		[CLOCK_TAI] = "CLOCK_TAI",
		[CLOCK_MONOTONIC_RAW] = "CLOCK_MONOTONIC_RAW",
		[CLOCK_REALTIME_COARSE] = "CLOCK_REALTIME_COARSE",
		[CLOCK_MONOTONIC_COARSE] = "CLOCK_MONOTONIC_COARSE",
	};
	struct pvread_timekeeper m;
	struct pvread_kernel_time kt;
	unsigned long irqflags;
	unsigned int i, c, done = 0;
	u64 updates, held;
	s64 d;

	for (i = 0; i < 50 && !READ_ONCE(pv.hdr->updates); i++)
		msleep(20);
	for (i = 0; i < 100 && done < 3; i++) {
		if (pvread_kernel_time_get(&kt))
			continue;
		raw_spin_lock_irqsave(&pv.lock, irqflags);
		m = pv.hdr->tk;
		updates = pv.hdr->updates;
		held = pv.coarse_held_ns;
		raw_spin_unlock_irqrestore(&pv.lock, irqflags);
		if (!updates || updates != kt.updates)
			continue;
		for (c = 0; c < PVREAD_NR_CLOCK_BASES; c++) {
			if (!names[c])
				continue;
			d = pvread_mirror_ns(&m, c, kt.cycles) - kt.ns[c];
			if (!d || (c == CLOCK_MONOTONIC_COARSE && (u64)d == held))
				continue;
			pr_err("Linux %s: %s by the mirrored timekeeper is %lld ns off the kernel's: not a timekeeper this module mirrors, not loading\n",
			       init_utsname()->release, names[c], d);
			return -EOPNOTSUPP;
		}
		done++;
	}
	if (done < 3) {
		pr_err("no timekeeper update to check the mirror against (%u of 3 looks)\n",
		       done);
		return -EAGAIN;
	}
	return 0;
}

static long pvread_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	switch (cmd) {
	case PVREAD_IOC_REFERENCE:
		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		return pvread_reference((struct pvread_reference __user *)arg);
	case PVREAD_IOC_KERNEL_TIME:
		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		return pvread_kernel_time((struct pvread_kernel_time __user *)arg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations pvread_fops = {
	.owner = THIS_MODULE,
	.open = pvread_open,
	.mmap = pvread_mmap,
	.unlocked_ioctl = pvread_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

/*
 * What an operator can read without a debugger, one value per file in
 * /sys/class/misc/pvread/ (the device's own directory, so it comes and goes
 * with /dev/pvread).  sysfs rather than debugfs: debugfs is often not
 * mounted on production guests, is root-only, and is switched off by
 * kernel lockdown; these figures are for monitoring, not for debugging.
 * They are described in kmod/README.md.
 */
static const char * const pvread_mode_names[] = {
	[PVREAD_MODE_NONE] = "none",
	[PVREAD_MODE_PERCPU] = "percpu",
	[PVREAD_MODE_STABLE] = "stable",
	[PVREAD_MODE_LINE] = "line",
};

static const char * const pvread_line_names[] = {
	[PVREAD_LINE_ACTIVE] = "active",
	[PVREAD_LINE_OFF] = "off",
	[PVREAD_LINE_UNVOUCHED] = "unvouched",
	[PVREAD_LINE_WARP] = "warp",
	[PVREAD_LINE_UNCHECKED] = "unchecked",
	[PVREAD_LINE_STABLE] = "stable",
	[PVREAD_LINE_WAITING] = "waiting",
	[PVREAD_LINE_RATES] = "rates",
};

static ssize_t mode_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	u32 mode = READ_ONCE(pv.hdr->mode);

	if (mode >= ARRAY_SIZE(pvread_mode_names))
		return sysfs_emit(buf, "%u\n", mode);
	return sysfs_emit(buf, "%s\n", pvread_mode_names[mode]);
}
static DEVICE_ATTR_RO(mode);

static ssize_t flags_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "0x%x\n", READ_ONCE(pv.hdr->flags));
}
static DEVICE_ATTR_RO(flags);

static ssize_t tsc_stable_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", !!(READ_ONCE(pv.hdr->flags) &
					   PVREAD_FLAG_TSC_STABLE));
}
static DEVICE_ATTR_RO(tsc_stable);

static ssize_t xen_clocksource_show(struct device *dev,
				    struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", !!(READ_ONCE(pv.hdr->flags) &
					   PVREAD_FLAG_XEN_CLOCKSOURCE));
}
static DEVICE_ATTR_RO(xen_clocksource);

static ssize_t registered_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	unsigned long irqflags;
	cpumask_var_t snap;
	ssize_t len;

	/* Formatting under pv.lock would make every reader of it wait. */
	if (!alloc_cpumask_var(&snap, GFP_KERNEL))
		return -ENOMEM;
	raw_spin_lock_irqsave(&pv.lock, irqflags);
	cpumask_copy(snap, pv.registered);
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
	len = sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(snap));
	free_cpumask_var(snap);
	return len;
}
static DEVICE_ATTR_RO(registered);

static ssize_t stable_record_show(struct device *dev,
				  struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(pv.hdr->stable_record));
}
static DEVICE_ATTR_RO(stable_record);

static ssize_t updates_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pv.hdr->updates));
}
static DEVICE_ATTR_RO(updates);

static ssize_t last_update_age_ms_show(struct device *dev,
				       struct device_attribute *attr,
				       char *buf)
{
	unsigned long irqflags;
	u64 last, now;

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	last = pv.last_update_ns;
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
	if (!last)
		return sysfs_emit(buf, "-1\n");
	now = ktime_get_mono_fast_ns();
	return sysfs_emit(buf, "%llu\n",
			  now > last ? div_u64(now - last, NSEC_PER_MSEC) : 0);
}
static DEVICE_ATTR_RO(last_update_age_ms);

static ssize_t spread_ns_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pv.hdr->spread_ns));
}
static DEVICE_ATTR_RO(spread_ns);

static ssize_t error_bound_ns_show(struct device *dev,
				   struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pv.hdr->error_bound_ns));
}
static DEVICE_ATTR_RO(error_bound_ns);

static ssize_t resumes_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pv.resumes));
}
static DEVICE_ATTR_RO(resumes);

static ssize_t line_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	u32 state = READ_ONCE(pv.hdr->line_state);

	if (state >= ARRAY_SIZE(pvread_line_names))
		return sysfs_emit(buf, "%u\n", state);
	return sysfs_emit(buf, "%s\n", pvread_line_names[state]);
}
static DEVICE_ATTR_RO(line);

static ssize_t line_anchors_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pv.hdr->line.anchors));
}
static DEVICE_ATTR_RO(line_anchors);

static ssize_t tsc_warp_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pv.hdr->tsc_warp));
}
static DEVICE_ATTR_RO(tsc_warp);

static ssize_t xen_tsc_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	unsigned long irqflags;
	u32 flags, mode, khz;

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	flags = pv.xen_tsc_flags;
	mode = pv.xen_tsc_mode;
	khz = pv.xen_tsc_khz;
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
	return sysfs_emit(buf, "emulated=%d reliable=%d mode=%u khz=%u\n",
			  !!(flags & PVREAD_FLAG_TSC_EMULATED),
			  !!(flags & PVREAD_FLAG_HOST_TSC_RELIABLE), mode, khz);
}
static DEVICE_ATTR_RO(xen_tsc);

static ssize_t area_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%s\n", pv.phys_area ? "phys" : "virt");
}
static DEVICE_ATTR_RO(area);

static void pvread_tsc_check(void);

/* Root asks for the cross-vCPU TSC check now (tests, after a host change). */
static ssize_t tsc_check_store(struct device *dev,
			       struct device_attribute *attr,
			       const char *buf, size_t count)
{
	bool v;

	if (kstrtobool(buf, &v))
		return -EINVAL;
	if (v)
		pvread_tsc_check();
	return count;
}
static DEVICE_ATTR_WO(tsc_check);

static struct attribute *pvread_attrs[] = {
	&dev_attr_line.attr,
	&dev_attr_line_anchors.attr,
	&dev_attr_tsc_warp.attr,
	&dev_attr_xen_tsc.attr,
	&dev_attr_area.attr,
	&dev_attr_tsc_check.attr,
	&dev_attr_mode.attr,
	&dev_attr_flags.attr,
	&dev_attr_tsc_stable.attr,
	&dev_attr_xen_clocksource.attr,
	&dev_attr_registered.attr,
	&dev_attr_stable_record.attr,
	&dev_attr_updates.attr,
	&dev_attr_last_update_age_ms.attr,
	&dev_attr_spread_ns.attr,
	&dev_attr_error_bound_ns.attr,
	&dev_attr_resumes.attr,
	NULL,
};
ATTRIBUTE_GROUPS(pvread);

static struct miscdevice pvread_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "pvread",
	.fops = &pvread_fops,
	.groups = pvread_groups,
	.mode = 0444,
};

/*
 * Suspend and resume.  Three ways a guest sleeps:
 *  - s2idle: nothing is lost, and neither hook below runs.
 *  - S3 or hibernation: the other CPUs go offline first (their records
 *    leave through the hotplug callbacks and come back with them); the
 *    syscore hooks run on the boot CPU alone.
 *  - Xen save/restore and live migration (drivers/xen/manage.c): the
 *    syscore hooks run on CPU 0 inside stop_machine with every other CPU
 *    still online, and after a restore Xen has forgotten every secondary
 *    area and the TSC may run at another rate.
 * So: at suspend publish mode none, end the line, take every record off
 * the page and have Xen let go of this CPU's area (as Linux does with its
 * own, xen_save_time_memory_area()); at resume start the
 * bound's history afresh but carry its worst over until readers' floors
 * cannot be ahead by more (see carry_ns), and have a work item register
 * each record again from its own CPU (Xen fills it, and rewrites that
 * vCPU's primary record, from the calling pCPU's calibration), check
 * TSC_AUX there, and check the TSC across vCPUs before the page says
 * per-CPU or line again.  Before a reboot or kexec every CPU lets go of
 * its own area (pvread_reboot_notify()).  The syscore hooks rather than
 * a PM notifier, since Xen's own suspend path calls no PM notifier.
 */
static int pvread_syscore_suspend_hook(void)
{
	unsigned int cpu, self = smp_processor_id();
	u64 bound;

	raw_spin_lock(&pv.lock);
	/*
	 * What readers' floors may be ahead by: the bound over the window
	 * as it is now.  Not later: the updates of the suspend itself see
	 * records half rewritten (seconds apart), and nobody reads fast
	 * then.
	 */
	bound = pv.have_first ? pvread_window_worst_bound(pv.last_sec) : 0;
	pv.carry_at_suspend = bound == U64_MAX ? 0 : bound;
	pv.suspended = true;
	pvread_write_begin(pv.hdr);
	pvread_publish(pv.hdr);
	pvread_line_flatten(pv.hdr);
	pvread_write_end(pv.hdr);
	for_each_cpu(cpu, pv.registered)
		pvread_retire(cpu, pv.to_register);
	pvread_republish();
	raw_spin_unlock(&pv.lock);
	/*
	 * This CPU's own area only.  In S3 and hibernation the other CPUs
	 * went offline before, and let go of theirs.  In a Xen save they
	 * are held in stop_machine: a restore drops every area, and if the
	 * save is cancelled theirs stay registered (in_xen) until each CPU
	 * registers again over it at the resume, or lets go of it when it
	 * goes offline or at unload.
	 */
	if (pv.cpus[self].in_xen)
		pvread_unregister_self(self);
	return 0;
}

/* Before a reboot, halt, poweroff or kexec: on each CPU, its own area. */
static void pvread_shutdown_cpu(void *unused)
{
	unsigned int cpu = smp_processor_id();

	raw_spin_lock(&pv.lock);	/* an IPI: interrupts are off */
	pvread_retire(cpu, NULL);
	pvread_republish();
	raw_spin_unlock(&pv.lock);
	if (pv.cpus[cpu].in_xen)
		pvread_unregister_self(cpu);
}

/*
 * The next kernel (kexec) or firmware gets these pages, and Xen, which
 * outlives a guest's kexec, would go on writing into them.  A reboot
 * notifier, not the syscore shutdown hook: kernel_kexec() runs the
 * reboot notifiers (kernel_restart_prepare()) but, in Linux 6.1, no
 * syscore_shutdown(); and the notifier runs in process context with
 * every CPU online, so that each can let go of its own area.
 */
static int pvread_reboot_notify(struct notifier_block *nb,
				unsigned long action, void *data)
{
	unsigned long irqflags;

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	WRITE_ONCE(pv.shutting_down, true);	/* no CPU registers again */
	cpumask_clear(pv.to_register);		/* nor does a resume's work */
	pv.suspended = true;
	pvread_republish();
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);

	cpus_read_lock();
	on_each_cpu(pvread_shutdown_cpu, NULL, 1);
	cpus_read_unlock();
	return NOTIFY_DONE;
}

static struct notifier_block pvread_reboot_nb = {
	.notifier_call = pvread_reboot_notify,
};

static void pvread_syscore_resume_hook(void)
{
	unsigned int self = smp_processor_id();

	raw_spin_lock(&pv.lock);
	cpumask_and(pv.tsc_aux_ok, pv.tsc_aux_ok, cpumask_of(self));
	/* Maybe another host, another TSC: no line until checked again. */
	pv.tsc_checked = false;
	cpumask_clear(pv.tsc_covered);
	pv.carry_ns = max(pv.carry_ns, pv.carry_at_suspend);
	pv.carry_until = 0;
	pvread_restart_window();
	/*
	 * After a restore the records and the kernel's clock can wander far
	 * more than they did before (measured in a PV domU under TCG: a line
	 * 4.5 ms off the kernel while the bound, from 1 s of fresh history,
	 * said 1 ms; later 108 ms): no fast mode until the bound has a whole
	 * window of history again.
	 */
	pv.warmup_sec = PVREAD_WINDOW_SEC;
	pv.ready = false;
	pv.suspended = pv.shutting_down;
	pv.resumes++;
	pvread_republish();
	raw_spin_unlock(&pv.lock);
	if (!READ_ONCE(pv.shutting_down))
		schedule_work(&pv.resume_work);
}

#ifdef PVREAD_HAVE_SYSCORE	/* see Kbuild */
static int pvread_syscore_suspend(void *data)
{
	return pvread_syscore_suspend_hook();
}

static void pvread_syscore_resume(void *data)
{
	pvread_syscore_resume_hook();
}

static const struct syscore_ops pvread_syscore_ops = {
	.suspend = pvread_syscore_suspend,
	.resume = pvread_syscore_resume,
};

static struct syscore pvread_syscore = {
	.ops = &pvread_syscore_ops,
};

static void pvread_register_syscore(void)
{
	register_syscore(&pvread_syscore);
}

static void pvread_unregister_syscore(void)
{
	unregister_syscore(&pvread_syscore);
}
#else
static struct syscore_ops pvread_syscore_ops = {
	.suspend = pvread_syscore_suspend_hook,
	.resume = pvread_syscore_resume_hook,
};

static void pvread_register_syscore(void)
{
	register_syscore_ops(&pvread_syscore_ops);
}

static void pvread_unregister_syscore(void)
{
	unregister_syscore_ops(&pvread_syscore_ops);
}
#endif

/* After a resume, on each CPU: its record again, TSC_AUX checked. */
static void pvread_resume_cpu(void *unused)
{
	unsigned int cpu = smp_processor_id();
	bool again;

	raw_spin_lock(&pv.lock);
	again = cpumask_test_and_clear_cpu(cpu, pv.to_register) &&
		!pv.shutting_down;
	raw_spin_unlock(&pv.lock);
	/* A hypercall, maybe long: not under the lock every CPU takes. */
	again = again && !pvread_register_self(cpu);

	raw_spin_lock(&pv.lock);
	if (again) {
		cpumask_set_cpu(cpu, pv.registered);
		WRITE_ONCE(pvread_record(cpu)->state, PVREAD_RECORD_REGISTERED);
	}
	if (cpumask_test_cpu(cpu, pv.prepared))
		pvread_setup_tsc_aux(cpu, &pv.cpus[cpu]);
	pvread_republish();
	raw_spin_unlock(&pv.lock);
}

static void pvread_resume_work(struct work_struct *work)
{
	unsigned int cpu;

	cpus_read_lock();
	on_each_cpu(pvread_resume_cpu, NULL, 1);
	for_each_cpu(cpu, pv.prepared)
		if (pv.has_rdtscp && !cpumask_test_cpu(cpu, pv.tsc_aux_ok))
			pr_warn("cpu%u: TSC_AUX wrong after resume\n", cpu);
	cpus_read_unlock();
	pvread_tsc_check();
}

/*
 * What Xen says of the guest's TSC (CPUID leaf 0x40000x03, subleaf 0):
 * EAX bit 0 rdtsc is emulated, bit 1 the host's TSC is reliable; EBX the
 * tsc_mode, ECX the guest's TSC kHz.  Either bit means one TSC across
 * vCPUs: emulated, Xen derives it from its own system time; native in
 * tsc_mode default, Xen found the TSC safe across pCPUs.  It can change
 * on a restore or migration, so it is read again after each resume.
 */
static void pvread_read_xen_tsc(void)
{
	u32 base = xen_cpuid_base(), eax = 0, ebx = 0, ecx = 0, edx = 0;
	u32 flags = 0;
	unsigned long irqflags;

	if (base && cpuid_eax(base) >= base + 3)
		cpuid_count(base + 3, 0, &eax, &ebx, &ecx, &edx);
	if (eax & BIT(0))
		flags |= PVREAD_FLAG_TSC_EMULATED;
	if (eax & BIT(1))
		flags |= PVREAD_FLAG_HOST_TSC_RELIABLE;
	raw_spin_lock_irqsave(&pv.lock, irqflags);
	pv.xen_tsc_flags = flags;
	pv.xen_tsc_mode = ebx;
	pv.xen_tsc_khz = ecx;
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
}

struct pvread_warp {
	raw_spinlock_t lock;
	u64 last;		/* the TSC last read, by any CPU */
	u64 worst;		/* largest step back seen */
	u64 ticks;		/* how long each CPU keeps at it */
	unsigned int skew_cpu;
	s64 skew;
	struct cpumask *covered;	/* the CPUs that ran it */
};

/*
 * On every online CPU at once (stop_machine, interrupts off): each takes
 * the lock, reads the TSC and compares it with the one read last, by
 * whichever CPU, under the same lock; that one was read earlier in real
 * time, so a smaller value is the TSC going back across CPUs.
 */
static int pvread_warp_fn(void *data)
{
	struct pvread_warp *w = data;
	s64 skew = smp_processor_id() == w->skew_cpu ? w->skew : 0;
	u64 now, start = rdtsc_ordered();
	unsigned int i;

	/* Every CPU is here, the online mask cannot change. */
	if (smp_processor_id() == cpumask_first(cpu_online_mask))
		cpumask_copy(w->covered, cpu_online_mask);

	/*
	 * Lock hand-offs among vCPUs that their host deschedules can take
	 * long (under emulation, seconds for 5000 rounds on 4 vCPUs): the
	 * timekeeper waits meanwhile, so stop after a while too.
	 */
	for (i = 0; i < PVREAD_WARP_LOOPS &&
	     (i < 2 || rdtsc_ordered() - start < w->ticks); i++) {
		raw_spin_lock(&w->lock);
		/*
		 * test_tsc_skew: every other read on one CPU that far ahead,
		 * so that the check sees it go back however the CPUs
		 * interleave.
		 */
		now = rdtsc_ordered() + (i & 1 ? 0 : skew);
		if (w->last && (s64)(w->last - now) > 0)
			w->worst = max(w->worst, w->last - now);
		w->last = now;
		raw_spin_unlock(&w->lock);
	}
	return 0;
}

/*
 * The line serves every CPU, so every CPU's TSC must tell the same time:
 * measure it at load, after every resume (another host, maybe another
 * TSC), and on request.
 */
static void pvread_tsc_check(void)
{
	struct pvread_warp w = {
		.skew = READ_ONCE(test_tsc_skew),
		.ticks = (u64)max(tsc_khz, 1U) * PVREAD_WARP_MAX_US / 1000,
	};
	unsigned long irqflags;
	cpumask_var_t covered;
	u64 resumes, t0;
	bool warn;
	int ret = 0;

	if (!zalloc_cpumask_var(&covered, GFP_KERNEL))
		return;
	/* On the stack: lockdep needs it initialised at run time. */
	raw_spin_lock_init(&w.lock);
	w.covered = covered;
	mutex_lock(&pv.check_mutex);
	pvread_read_xen_tsc();
	raw_spin_lock_irqsave(&pv.lock, irqflags);
	resumes = pv.resumes;
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
	/* Racing a hotplug only moves the skew to another CPU: tests hold still. */
	w.skew_cpu = cpumask_last(cpu_online_mask);
	t0 = local_clock();
	ret = stop_machine(pvread_warp_fn, &w, cpu_online_mask);
	if (ret)
		w.worst = U64_MAX;
	pv.check_last_ns = local_clock() - t0;
	pv.check_max_ns = max(pv.check_max_ns, pv.check_last_ns);

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	/* A resume since: maybe another host; its own check will tell. */
	if (pv.resumes != resumes) {
		raw_spin_unlock_irqrestore(&pv.lock, irqflags);
		goto out;
	}
	warn = w.worst && !pv.tsc_warp;
	pv.tsc_warp = w.worst;
	cpumask_copy(pv.tsc_covered, covered);
	pv.tsc_checked = true;
	pvread_republish();
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
	if (warn)
		pr_warn("the TSC went back across vCPUs (%lld ticks): no clock line\n",
			w.worst == U64_MAX ? -1LL : (s64)w.worst);
out:
	mutex_unlock(&pv.check_mutex);
	free_cpumask_var(covered);
}

static void pvread_check_work(struct work_struct *work)
{
	if (test_check_delay_ms)
		msleep(min(test_check_delay_ms, 1000U));
	pvread_tsc_check();
}

static bool pvread_cpu_has_rdtscp(void)
{
	return boot_cpu_has(X86_FEATURE_RDTSCP) ||
	       (cpuid_edx(0x80000001) & BIT(27));
}

static void pvread_free(void)
{
	free_cpumask_var(pv.registered);
	free_cpumask_var(pv.tsc_aux_ok);
	free_cpumask_var(pv.prepared);
	free_cpumask_var(pv.to_register);
	free_cpumask_var(pv.tsc_covered);
	kfree(pv.cpus);
	pv.cpus = NULL;
}

/*
 * Every CPU lets go of its own area (the hotplug state's teardown runs on
 * each); only then may the pages go.  The TSC check's work is cancelled
 * after, not before: until the state is gone a CPU coming online queues
 * it again, and it would run with the module gone.
 */
static void pvread_release_areas(void)
{
	unsigned int cpu;
	bool leak = false;

	cpuhp_remove_state(pv.hp_state);
	cancel_work_sync(&pv.check_work);
	/* Held as long as any area was: a kexec meanwhile lets go of them. */
	unregister_reboot_notifier(&pvread_reboot_nb);
	for_each_possible_cpu(cpu)
		leak |= pv.cpus[cpu].in_xen;
	if (leak) {
		pr_err("leaking %zu bytes that Xen may still write to\n",
		       pv.size);
		return;
	}
	free_pages_exact(pv.area, pv.size);
}

/*
 * The work this module does with interrupts off, in ns, the last and the
 * largest since load (write 0 to start again): the notifier, which the
 * timekeeper waits for under its lock (constant work); the measurement
 * after it, hard-IRQ, one look at every registered record (grows with the
 * vCPUs); the TSC check, every CPU stopped (PVREAD_WARP_MAX_US each, and
 * the lock's hand-offs).  Also measurements an update overtook, those
 * made under the lock after that, and anchors the TSC rejected.
 * Debugging aids: nothing depends on them, so a failure is not fatal.
 */
static void pvread_debugfs_init(void)
{
	pv.debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_u64("notifier_max_ns", 0600, pv.debugfs,
			   &pv.notify_max_ns);
	debugfs_create_u64("notifier_last_ns", 0400, pv.debugfs,
			   &pv.notify_last_ns);
	debugfs_create_u64("measure_max_ns", 0600, pv.debugfs,
			   &pv.measure_max_ns);
	debugfs_create_u64("measure_last_ns", 0400, pv.debugfs,
			   &pv.measure_last_ns);
	debugfs_create_u64("check_max_ns", 0600, pv.debugfs,
			   &pv.check_max_ns);
	debugfs_create_u64("check_last_ns", 0400, pv.debugfs,
			   &pv.check_last_ns);
	debugfs_create_u64("measure_stale", 0400, pv.debugfs,
			   &pv.measure_stale);
	debugfs_create_u64("measure_locked", 0400, pv.debugfs,
			   &pv.measure_locked);
	debugfs_create_u64("updates_while_measuring", 0400, pv.debugfs,
			   &pv.updates_while_measuring);
	debugfs_create_u64("anchors_rejected", 0400, pv.debugfs,
			   &pv.anchors_rejected);
	debugfs_create_u64("bound_overruns", 0400, pv.debugfs,
			   &pv.bound_overruns);
}

/*
 * No measurement running, before the pages go.  irq_work_sync() is not
 * enough alone: a run queued while another still looks at the records can
 * start on another CPU, finish first and clear the work's busy flag.  Both
 * run with interrupts off, which an RCU grace period waits for.
 */
static void pvread_measure_sync(void)
{
	irq_work_sync(&pv.measure_work);
	synchronize_rcu();
}

static int __init pvread_init(void)
{
	struct pvread_header *h;
	unsigned int cpu;
	int ret;

	if (!xen_domain()) {
		pr_err("not running on Xen: no pvclock to publish\n");
		return -ENODEV;
	}
	pv.has_rdtscp = pvread_cpu_has_rdtscp();
	pv.warmup_sec = PVREAD_WARMUP_SEC;
	pv.phys_area = xen_feature(PVREAD_XENFEAT_TIME_PHYS_AREA);

	pv.size = PAGE_SIZE + PAGE_ALIGN(nr_cpu_ids * sizeof(struct pvread_record));
	if (nr_cpu_ids > PVREAD_MAX_RECORDS || pv.size > U32_MAX) {
		pr_err("%u CPUs: more than the page layout can name\n",
		       nr_cpu_ids);
		return -E2BIG;
	}
	raw_spin_lock_init(&pv.lock);
	pv.cpus = kcalloc(nr_cpu_ids, sizeof(*pv.cpus), GFP_KERNEL);
	if (!pv.cpus || !zalloc_cpumask_var(&pv.registered, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pv.tsc_aux_ok, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pv.prepared, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pv.to_register, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pv.tsc_covered, GFP_KERNEL)) {
		ret = -ENOMEM;
		goto err_free;
	}
	pv.area = alloc_pages_exact(pv.size, GFP_KERNEL | __GFP_ZERO);
	if (!pv.area) {
		ret = -ENOMEM;
		goto err_free;
	}

	h = pv.area;
	pv.hdr = h;
	h->magic = PVREAD_MAGIC;
	h->abi_version = PVREAD_ABI_VERSION;
	h->nr_records = nr_cpu_ids;
	h->record_offset = PAGE_SIZE;
	h->record_stride = sizeof(struct pvread_record);
	h->map_size = pv.size;
	h->error_bound_ns = U64_MAX;
	h->spread_ns = U64_MAX;
	pv.cpu0_owned_by_kernel = !!pvclock_get_pvti_cpu0_va();
	INIT_WORK(&pv.resume_work, pvread_resume_work);
	INIT_WORK(&pv.check_work, pvread_check_work);
	mutex_init(&pv.check_mutex);
	pv.measure_work = IRQ_WORK_INIT_HARD(pvread_measure_work);

	/* Before any area is registered, and until the last is let go of. */
	ret = register_reboot_notifier(&pvread_reboot_nb);
	if (ret)
		goto err_pages;
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "pvread:online",
				pvread_cpu_online, pvread_cpu_offline);
	if (ret < 0) {
		unregister_reboot_notifier(&pvread_reboot_nb);
		goto err_pages;
	}
	pv.hp_state = ret;
	for_each_online_cpu(cpu) {
		if (pv.cpus[cpu].error) {
			ret = pv.cpus[cpu].error;
			goto err_areas;
		}
	}
	/* Once for every CPU, not once for each that came online. */
	cancel_work_sync(&pv.check_work);
	pvread_tsc_check();

	ret = pvclock_gtod_register_notifier(&pvread_gtod_nb);
	if (ret)
		goto err_areas;
	ret = pvread_check_mirror();
	if (ret)
		goto err_notifier;
	pvread_register_syscore();
	ret = misc_register(&pvread_misc);
	if (ret)
		goto err_syscore;

	pvread_debugfs_init();
	pr_info("%u vCPU records registered by %s address%s; clocksource %s\n",
		cpumask_weight(pv.registered),
		pv.phys_area ? "physical" : "virtual",
		pv.cpu0_owned_by_kernel ? " (vCPU 0's belongs to the vDSO)" : "",
		(h->flags & PVREAD_FLAG_XEN_CLOCKSOURCE) ? "xen" : "not xen");
	return 0;

err_syscore:
	pvread_unregister_syscore();
	cancel_work_sync(&pv.resume_work);
err_notifier:
	pvclock_gtod_unregister_notifier(&pvread_gtod_nb);
	pvread_measure_sync();
err_areas:
	pvread_release_areas();
	pvread_free();
	return ret;
err_pages:
	free_pages_exact(pv.area, pv.size);
err_free:
	pvread_free();
	return ret;
}

static void __exit pvread_exit(void)
{
	debugfs_remove_recursive(pv.debugfs);
	misc_deregister(&pvread_misc);
	pvread_unregister_syscore();
	cancel_work_sync(&pv.resume_work);
	pvclock_gtod_unregister_notifier(&pvread_gtod_nb);
	pvread_measure_sync();
	pvread_release_areas();
	pvread_free();
}

module_init(pvread_init);
module_exit(pvread_exit);

MODULE_DESCRIPTION("Xen pvclock and timekeeper, mapped read-only for user space");
MODULE_LICENSE("GPL");
