// SPDX-License-Identifier: GPL-2.0
/*
 * The check that every vCPU's TSC tells the same time, which the line
 * depends on: every online CPU stopped at once, each comparing its TSC
 * with the one read last by any of them.  It asks nothing of Xen and
 * calls nothing in pvread_xen.c, which calls it (a resume's check): the
 * callers that may follow a change of host read Xen's CPUID leaf first
 * (pvread_read_xen_tsc()).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/sched/clock.h>
#include <linux/stop_machine.h>
#include <asm/msr.h>
#include <asm/tsc.h>

#include "pvread_internal.h"

#define PVREAD_WARP_LOOPS	5000
#define PVREAD_WARP_MAX_US	2000	/* every CPU stopped: keep it short */

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
 * TSC), when a CPU no check covered comes online, and on request.
 */
void pvread_tsc_check(void)
{
	struct pvread_warp w = {
		.skew = READ_ONCE(pvread_test_tsc_skew),
		.ticks = (u64)max(tsc_khz, 1U) * PVREAD_WARP_MAX_US / 1000,
	};
	unsigned long irqflags;
	cpumask_var_t covered;
	u64 resumes, t0;
	bool warn, again;
	int ret = 0;

	if (!zalloc_cpumask_var(&covered, GFP_KERNEL))
		return;
	/* On the stack: lockdep needs it initialised at run time. */
	raw_spin_lock_init(&w.lock);
	w.covered = covered;
	mutex_lock(&pvread.check_mutex);
	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	resumes = pvread.resumes;
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	/* Racing a hotplug only moves the skew to another CPU: tests hold still. */
	w.skew_cpu = cpumask_last(cpu_online_mask);
	t0 = local_clock();
	ret = stop_machine(pvread_warp_fn, &w, cpu_online_mask);
	if (ret)
		w.worst = U64_MAX;
	pvread.check_last_ns = local_clock() - t0;
	pvread.check_max_ns = max(pvread.check_max_ns, pvread.check_last_ns);

	pvread_test_check_hold();

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	/* A resume since: maybe another host; its own check will tell. */
	if (pvread.resumes != resumes) {
		raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
		goto out;
	}
	warn = w.worst && !pvread.tsc_warp;
	pvread.tsc_warp = w.worst;
	cpumask_copy(pvread.tsc_covered, covered);
	/*
	 * A CPU that came online since the stop is not covered by this
	 * check, and its online callback may not know: it compared itself
	 * with the previous check's tsc_covered, which may have seen it
	 * (then no check was queued), and if it did queue one, taking this
	 * result would still say checked until that one runs.  So the
	 * result counts only if every online CPU was covered; else another
	 * check.  A CPU is in cpu_online_mask before its online callback
	 * takes this lock: whichever of the two takes it second sees the
	 * CPU uncovered.  A stop_machine that failed covered nobody: its
	 * warp keeps the line off already, and asking again could go on
	 * for ever.
	 */
	again = !ret && !cpumask_subset(cpu_online_mask, covered);
	pvread.tsc_checked = !again;
	pvread_republish();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	if (again)
		schedule_work(&pvread.check_work);
	if (warn)
		pr_warn("the TSC went back across vCPUs (%lld ticks): no clock line\n",
			w.worst == U64_MAX ? -1LL : (s64)w.worst);
out:
	mutex_unlock(&pvread.check_mutex);
	free_cpumask_var(covered);
}

void pvread_check_work(struct work_struct *work)
{
	if (pvread_test_check_delay_ms)
		msleep(min(pvread_test_check_delay_ms, 1000U));
	pvread_tsc_check();
}
