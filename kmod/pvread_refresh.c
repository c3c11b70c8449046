// SPDX-License-Identifier: GPL-2.0
/*
 * The records kept current where Xen drops its writes of them: an HVM or
 * PVH guest under KPTI on a Xen that takes the areas by virtual address
 * (pvread_xen_drops_updates()).  Xen writes such an area through the
 * vCPU's page tables of the moment; a write that falls while the vCPU
 * runs user code finds no kernel mapping and is lost, and the record
 * stands on an older segment than the vCPU's primary one (the kernel's
 * clock there) until the next write that lands.
 *
 * Registering the same area again makes Xen write it at once
 * (force_update_vcpu_system_time(), in every Xen since the operation
 * exists), from the primary record's values and while this CPU's kernel
 * page tables are loaded.  So each CPU re-registers its own area from a
 * pinned, deferrable timer every jiffy (or less often where a refresh
 * costs more than 1 % of that: under an emulator): a record on a CPU
 * running user code lags at most one refresh period, and the lag is
 * measured.  A CPU
 * in idle needs no refresh: it blocked in kernel mode, and Xen's write
 * when it is scheduled again lands; a deferrable timer does not wake it.
 * A CPU without the tick (nohz_full) could run user code for ever
 * without one: the line is not served there.
 *
 * Each refresh measures, with interrupts off on its own CPU: the versions
 * Xen wrote that the record missed, and the lag, how far the old record's
 * conversion was from the fresh one's at one TSC read after it; and how
 * far the kernel's own clocksource read there (bracketed by the TSC) is
 * from the fresh record.  The worst of these since the last measurement
 * joins the error bound's window (pvread_refresh_take(), by the
 * measurement, under pvread.lock); the refresh itself takes the lock only
 * when its CPU's standing changes (a failure, or the first success after
 * one), so that the timekeeper never waits for a refresh.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/jiffies.h>
#include <linux/math64.h>
#include <linux/sched/clock.h>
#include <linux/tick.h>
#include <linux/timer.h>
#include <asm/cpufeature.h>
#include <asm/msr.h>
#include <asm/pvclock.h>
#include <xen/xen-ops.h>
#include <xen/xen.h>

#include "pvread_internal.h"

/*
 * A lag or kernel distance beyond this in the window takes the line away
 * (line state pti, refresh "lag"): the library's default tolerance, so
 * that a bound it would refuse anyway is not served.
 */
#define PVREAD_REFRESH_LAG_MAX_NS	10000

/* The worst since the measurement last took it; any CPU raises it. */
static atomic64_t pvread_refresh_pending = ATOMIC64_INIT(0);

/* Could Xen drop writes in this guest, now or after a migration? */
bool pvread_refresh_possible(void)
{
	return pvread_test_refresh ||
	       (!xen_pv_domain() && boot_cpu_has(X86_FEATURE_PTI));
}

/* Does Xen drop writes of the records now (or does a test say so)? */
static bool pvread_refresh_needed(void)
{
	return pvread_test_refresh || pvread_xen_drops_updates();
}

/* A consistent copy of @cpu's record; false if Xen kept rewriting it. */
static bool pvread_copy_pvti(unsigned int cpu,
			     struct pvclock_vcpu_time_info *out)
{
	const struct pvclock_vcpu_time_info *src = pvread_pvti(cpu);
	unsigned int tries, version;

	for (tries = 0; tries < 16; tries++) {
		version = pvclock_read_begin(src);
		*out = *src;
		if (!pvclock_read_retry(src, version))
			return true;
	}
	return false;
}

/* |@a - @b| */
static u64 pvread_dist(u64 a, u64 b)
{
	return a > b ? a - b : b - a;
}

static void pvread_refresh_raise(u64 worst)
{
	s64 old = atomic64_read(&pvread_refresh_pending);

	while ((u64)old < worst) {
		s64 seen = atomic64_cmpxchg(&pvread_refresh_pending, old, worst);

		if (seen == old)
			break;
		old = seen;
	}
}

/* What one refresh found; U64_MAX where it could not be told. */
struct pvread_refresh_look {
	u32 missed;		/* Xen's writes the record had missed */
	u64 lag;		/* the old record from the fresh one, ns */
	u64 kdist;		/* the kernel's clock from the fresh one, ns */
	u64 cost;		/* ns, from the first TSC read to the last */
};

/*
 * The refresh on @cpu itself, interrupts off: the registration paths
 * (hotplug, resume, reboot) run on this CPU with interrupts off too, so
 * the look at pvread.registered and the hypercall cannot straddle one of
 * them.  Returns the hypercall's result.  The kernel's clock is looked at
 * with @kernel only: where Xen emulates the TSC each read of it is an
 * exit to Xen, as costly as the hypercall.
 */
static int pvread_refresh_area(unsigned int cpu, bool kernel,
			       struct pvread_refresh_look *r)
{
	struct pvclock_vcpu_time_info old, new;
	struct clocksource *cs = READ_ONCE(pvread.tk.tkr_mono.clock);
	u64 t0, t, t1, k;
	bool have_old;
	int ret;

	r->missed = 0;
	r->lag = U64_MAX;
	r->kdist = U64_MAX;
	r->cost = U64_MAX;
	t0 = rdtsc_ordered();
	have_old = pvread_copy_pvti(cpu, &old);
	ret = pvread_reregister_self(cpu);
	if (ret)
		return ret;
	t = rdtsc_ordered();
	if (!pvread_copy_pvti(cpu, &new))
		return 0;
	r->cost = pvclock_scale_delta(t - t0, new.tsc_to_system_mul,
				      new.tsc_shift);
	/* A version is its primary's, 2 a write: more is a write missed. */
	if (have_old && !(old.version & 1) && (s32)(new.version - old.version) > 2)
		r->missed = (new.version - old.version) / 2 - 1;
	if (have_old && t >= old.tsc_timestamp && t >= new.tsc_timestamp)
		r->lag = pvread_dist(__pvclock_read_cycles(&old, t),
				     __pvclock_read_cycles(&new, t));
	if (!kernel || !cs || !READ_ONCE(pvread.xen_clocksource))
		return 0;
	/*
	 * The kernel's answer on this CPU: its primary record, raised to the
	 * global last_value that any CPU's read left; against the fresh
	 * record over the bracket.
	 */
	k = cs->read(cs);
	t1 = rdtsc_ordered();
	if (t1 >= t && t >= new.tsc_timestamp) {
		u64 lo = __pvclock_read_cycles(&new, t);
		u64 hi = __pvclock_read_cycles(&new, t1);

		r->kdist = k < lo ? lo - k : k > hi ? k - hi : 0;
	}
	return 0;
}

/*
 * @cpu's refresh failed, or succeeded again after failing: the gate
 * changes, so publish at once rather than at the next update.
 */
static void pvread_refresh_standing(unsigned int cpu, bool failed)
{
	unsigned long irqflags;

	WRITE_ONCE(pvread.cpus[cpu].refresh_failed, failed);
	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	if (failed)
		cpumask_set_cpu(cpu, pvread.refresh_failed);
	else
		cpumask_clear_cpu(cpu, pvread.refresh_failed);
	pvread_republish();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
}

/*
 * The next refresh in jiffies: every tick, unless a refresh costs more
 * than 1/PVREAD_REFRESH_SHARE of that (a few us expected on hardware;
 * 0.45-0.52 ms measured under the emulator's nested SVM, where every exit
 * to Xen is emulated); then as much later as keeps it at that share.
 * The lag is measured whatever the period.
 */
#define PVREAD_REFRESH_SHARE	100

static unsigned long pvread_refresh_period(const struct pvread_cpu *pc)
{
	u64 j = div64_u64(pc->refresh_cost_avg_ns * PVREAD_REFRESH_SHARE,
			  jiffies_to_nsecs(1));

	return clamp_t(u64, j, 1, HZ);
}

/* Every this many refreshes, the kernel's clock against the record. */
#define PVREAD_REFRESH_KERNEL_EVERY	16

static void pvread_refresh_fn(struct timer_list *timer)
{
	unsigned int cpu = smp_processor_id();
	struct pvread_cpu *pc = &pvread.cpus[cpu];
	struct pvread_refresh_look r;
	unsigned long irqflags;
	bool done = false;
	int ret = 0;

	/* A dying CPU's timer migrates: this is not @cpu's to refresh. */
	if (timer != &pc->refresh_timer || !READ_ONCE(pc->refresh_on))
		return;
	if (pvread_refresh_needed() && pvread_line_enabled) {
		local_irq_save(irqflags);
		if (cpumask_test_cpu(cpu, pvread.registered) &&
		    !READ_ONCE(pvread.shutting_down)) {
			ret = pvread_refresh_area(cpu, !(pc->refreshes %
					PVREAD_REFRESH_KERNEL_EVERY), &r);
			done = true;
		}
		local_irq_restore(irqflags);
	}
	if (done && ret) {
		if (!READ_ONCE(pc->refresh_failed))
			pr_warn_ratelimited("cpu%u: Xen refused to rewrite vCPU %u's time area: %d\n",
					    cpu, xen_vcpu_nr(cpu), ret);
		pvread_refresh_standing(cpu, true);
	} else if (done) {
		if (READ_ONCE(pc->refresh_failed))
			pvread_refresh_standing(cpu, false);
		WRITE_ONCE(pc->refreshes, pc->refreshes + 1);
		WRITE_ONCE(pc->refresh_missed, pc->refresh_missed + r.missed);
		if (r.cost != U64_MAX) {
			WRITE_ONCE(pc->refresh_cost_sum_ns,
				   pc->refresh_cost_sum_ns + r.cost);
			WRITE_ONCE(pc->refresh_costed, pc->refresh_costed + 1);
			if (r.cost > pc->refresh_cost_max_ns)
				WRITE_ONCE(pc->refresh_cost_max_ns, r.cost);
			pc->refresh_cost_avg_ns = pc->refresh_costed == 1 ? r.cost :
				(7 * pc->refresh_cost_avg_ns + r.cost) / 8;
		}
		if (r.lag == U64_MAX)
			WRITE_ONCE(pc->refresh_untold, pc->refresh_untold + 1);
		r.lag = r.lag == U64_MAX ? 0 : r.lag;
		r.kdist = r.kdist == U64_MAX ? 0 : r.kdist;
		if (r.lag >= pc->refresh_lag_max_ns) {
			WRITE_ONCE(pc->refresh_lag_max_ns, r.lag);
			WRITE_ONCE(pc->refresh_lag_at, get_jiffies_64());
		}
		pvread_refresh_raise(max(r.lag, r.kdist));
	}
	WRITE_ONCE(pc->refresh_period_j, pvread_refresh_period(pc));
	mod_timer(timer, jiffies + pc->refresh_period_j);
}

/* On @cpu itself as it comes online, after its registration. */
void pvread_refresh_start(unsigned int cpu)
{
	struct pvread_cpu *pc = &pvread.cpus[cpu];

	if (!pvread_refresh_possible())
		return;
	if (!pc->refresh_init) {
		timer_setup(&pc->refresh_timer, pvread_refresh_fn,
			    TIMER_PINNED | TIMER_DEFERRABLE);
		pc->refresh_init = true;
	}
	WRITE_ONCE(pc->refresh_on, true);
	pc->refresh_timer.expires = jiffies + 1;
	add_timer_on(&pc->refresh_timer, cpu);
}

/* On @cpu itself as it goes offline, and at unload through that. */
void pvread_refresh_stop(unsigned int cpu)
{
	struct pvread_cpu *pc = &pvread.cpus[cpu];

	if (!pc->refresh_init)
		return;
	WRITE_ONCE(pc->refresh_on, false);
	timer_delete_sync(&pc->refresh_timer);
}

/*
 * The worst lag or kernel distance the refreshes saw since the last call,
 * and whether it is beyond what the line may carry; by the measurement,
 * pvread.lock held.
 */
u64 pvread_refresh_take(u64 now_sec)
{
	u64 worst = atomic64_xchg(&pvread_refresh_pending, 0);

	if (worst > PVREAD_REFRESH_LAG_MAX_NS)
		pvread.refresh_lag_until = now_sec + PVREAD_WINDOW_SEC;
	if (pvread.refresh_window_sec[now_sec % PVREAD_WINDOW_SEC] != now_sec) {
		pvread.refresh_window_sec[now_sec % PVREAD_WINDOW_SEC] = now_sec;
		pvread.refresh_window[now_sec % PVREAD_WINDOW_SEC] = 0;
	}
	pvread.refresh_window[now_sec % PVREAD_WINDOW_SEC] =
		max(pvread.refresh_window[now_sec % PVREAD_WINDOW_SEC], worst);
	return worst;
}

/* The worst lag or kernel distance in the window; pvread.lock held. */
u64 pvread_refresh_window_worst(void)
{
	unsigned int i;
	u64 worst = 0;

	for (i = 0; i < PVREAD_WINDOW_SEC; i++)
		if (pvread.refresh_window_sec[i] + PVREAD_WINDOW_SEC >
		    pvread.last_sec)
			worst = max(worst, pvread.refresh_window[i]);
	return worst;
}

/* Where the refresh stands, for the line's gate; pvread.lock held. */
enum pvread_refresh_state pvread_refresh_state(void)
{
	if (!pvread_refresh_needed())
		return PVREAD_REFRESH_OFF;
	if (pvread.nohz_full)
		return PVREAD_REFRESH_NOHZ_FULL;
	if (!pvread_refresh_possible())
		return PVREAD_REFRESH_FAILED;	/* not armed: cannot happen */
	if (!cpumask_empty(pvread.refresh_failed))
		return PVREAD_REFRESH_FAILED;
	if (pvread.refresh_lag_until && pvread.last_sec < pvread.refresh_lag_until)
		return PVREAD_REFRESH_LAG;
	return PVREAD_REFRESH_ACTIVE;
}

/* At load: a CPU without the tick cannot be kept current. */
void pvread_refresh_init(void)
{
#ifdef CONFIG_NO_HZ_FULL
	pvread.nohz_full = tick_nohz_full_enabled() &&
			   !cpumask_empty(tick_nohz_full_mask);
#endif
}
