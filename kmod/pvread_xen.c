// SPDX-License-Identifier: GPL-2.0
/*
 * Everything that asks Xen for something, and the CPU state that goes with
 * it: each vCPU's secondary time area, registered and let go of by that
 * CPU itself as it comes online and goes offline, at suspend and resume
 * (Xen save/restore and migration included) and before a reboot or kexec;
 * and Xen's CPUID time leaf, which says whether one TSC serves every vCPU.
 * No CPU state the kernel owns is written (TSC_AUX included: the line
 * names no CPU).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/gfp.h>
#include <linux/reboot.h>
#include <linux/smp.h>
#include <linux/syscore_ops.h>
#include <linux/topology.h>
#include <asm/cpufeature.h>
#include <asm/xen/hypercall.h>
#include <asm/xen/hypervisor.h>
#include <xen/interface/vcpu.h>
#include <xen/xen.h>
#include <xen/xen-ops.h>
#include <asm/xen/page.h>

#include "pvread_internal.h"

/*
 * Xen's answer to an operation it does not have: ENOSYS in its public
 * errno.h, 38 as on Linux/x86, passed on by the hypercall as it is.
 */
#define PVREAD_XEN_NO_OP	38

static int pvread_area_op(unsigned int cpu, struct pvread_pvclock *p,
			  bool phys)
{
	struct vcpu_register_time_memory_area area = {
		.addr.v = (struct pvclock_vcpu_time_info *)p,
	};
	u64 addr;

	if (phys) {
		addr = p ? virt_to_machine(p).maddr : ~0ULL;
		return HYPERVISOR_vcpu_op(PVREAD_VCPUOP_TIME_PHYS_AREA,
					  xen_vcpu_nr(cpu), &addr);
	}
	return HYPERVISOR_vcpu_op(VCPUOP_register_vcpu_time_memory_area,
				  xen_vcpu_nr(cpu), &area);
}

/*
 * Register @p as @cpu's area, or let go of it (@p NULL).  The operation
 * chosen at load may be gone: a restore or migration can land on a Xen
 * without the physical-area one, which then answers -ENOSYS to every
 * registration and every letting go, and the pages would leak at unload.
 * The virtual-address one is there on every Xen: fall back to it, for
 * good (pvread.phys_area, which other CPUs, sysfs and
 * pvread_xen_drops_updates() read).  Xen keeps the two kinds of area
 * apart, so an area is let go of by the operation that registered it
 * (pc->by_phys); a Xen without the physical one cannot hold an area by
 * it: the restore that brought the guest there dropped every area.
 */
static int pvread_register_area(unsigned int cpu, struct pvread_pvclock *p)
{
	struct pvread_cpu *pc = &pvread.cpus[cpu];
	int ret;

	/* Only ever on @cpu itself: see pvread_unregister_self(). */
	if (WARN_ON_ONCE(cpu != raw_smp_processor_id()))
		return -EINVAL;
	if (!p) {
		ret = pvread_area_op(cpu, NULL, pc->by_phys);
		if (!(pc->by_phys && ret == -PVREAD_XEN_NO_OP))
			return ret;
		WRITE_ONCE(pvread.phys_area, false);
		return 0;
	}
	pc->by_phys = READ_ONCE(pvread.phys_area);
	if (pc->by_phys) {
		ret = pvread_area_op(cpu, p, true);
		if (ret != -PVREAD_XEN_NO_OP)
			return ret;
		if (READ_ONCE(pvread.phys_area)) {
			WRITE_ONCE(pvread.phys_area, false);
			pr_warn("cpu%u: Xen no longer takes time areas by physical address: by virtual address from now on\n",
				cpu);
		}
		pc->by_phys = false;
	}
	return pvread_area_op(cpu, p, false);
}

/*
 * Tell Xen to stop writing @cpu's area, on @cpu itself: for an area
 * registered by virtual address Xen answers by rewriting the target
 * vCPU's records, its primary one (the kernel's clock) included, from the
 * *calling* pCPU's calibration and without pausing the target
 * (xen/arch/x86/domain.c), so from another CPU it would race Xen's own
 * writer of that vCPU's clock.  Xen may have half taken a registration it
 * refused, so this also follows a refusal; if Xen will not let go, the
 * pages must never be freed.  Not under pvread.lock (a hypercall, a printk).
 */
static void pvread_unregister_self(unsigned int cpu)
{
	struct pvread_cpu *pc = &pvread.cpus[cpu];
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
 * calibration.  Not under pvread.lock; @cpu not yet in pvread.registered.
 */
static int pvread_register_self(unsigned int cpu)
{
	struct pvread_record *rec = pvread_record(cpu);
	int ret;

	pvread.cpus[cpu].in_xen = true;
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
 * Have Xen write @cpu's record again now (it forces an update of the
 * vCPU's records at every registration): pvread_refresh.c.  On @cpu,
 * interrupts off, the area registered.
 */
int pvread_reregister_self(unsigned int cpu)
{
	return pvread_register_area(cpu, &pvread_record(cpu)->pvclock);
}

/*
 * Take @cpu's record off the page, so that no reader trusts it once Xen
 * stops writing it; @keep: register it again after a resume.
 * pvread.lock held.
 */
static void pvread_retire(unsigned int cpu, struct cpumask *keep)
{
	if (cpumask_test_and_clear_cpu(cpu, pvread.registered) && keep)
		cpumask_set_cpu(cpu, keep);
	WRITE_ONCE(pvread_record(cpu)->state, 0);
}

/*
 * An area registered by virtual address is written by Xen through the
 * vCPU's page tables of the moment.  An HVM or PVH guest under KPTI runs
 * user code on page tables without the kernel's mappings, and Xen drops
 * the update then: it keeps one back for 64-bit PV guests only
 * (xen/arch/x86/time.c, __update_vcpu_system_time()), and rewrites the
 * area only when the vCPU's primary record changes again.  So a record
 * can stand apart from the vCPU's own clock, unseen from any other CPU;
 * kmod/README.md has what machine xen417-domu-pvh-pti measured.  Xen
 * 4.18's areas by physical address have no such gap.
 */
bool pvread_xen_drops_updates(void)
{
	return !xen_pv_domain() && !READ_ONCE(pvread.phys_area) &&
	       boot_cpu_has(X86_FEATURE_PTI);
}

/* Linux's own vDSO reads this area when Xen's TSC is stable. */
static bool pvread_kernel_owns(unsigned int cpu)
{
	return pvread.cpu0_owned_by_kernel && xen_vcpu_nr(cpu) == 0;
}

/*
 * Runs on @cpu itself (CPUHP_AP_ONLINE_DYN), before CPUHP_AP_ACTIVE lets the
 * scheduler put user tasks there: the record is registered, written by Xen
 * (it updates the calling vCPU's area at registration) before any user task
 * can run on it.
 */
int pvread_cpu_online(unsigned int cpu)
{
	struct pvread_record *rec = pvread_record(cpu);
	struct pvread_cpu *pc = &pvread.cpus[cpu];
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
	reg = reg && !READ_ONCE(pvread.shutting_down);
	if (reg) {
		ret = pvread_register_self(cpu);
		pc->error = ret;
	}
	local_irq_restore(irqflags);

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	cpumask_clear_cpu(cpu, pvread.to_register);
	if (reg && !ret) {
		cpumask_set_cpu(cpu, pvread.registered);
		WRITE_ONCE(rec->state, PVREAD_RECORD_REGISTERED);
	} else {
		cpumask_set_cpu(cpu, pvread.unregistered);
	}
	/*
	 * A vCPU the last TSC check saw needs no other: Xen runs one TSC for
	 * the whole domain (emulated, or native with one offset), and
	 * stopping every CPU on each hotplug would cost more than it could
	 * find.  One it did not see (offline then, or back from S3 after the
	 * resume's check) gets one, and no line until it is done.
	 */
	if (!cpumask_test_cpu(cpu, pvread.tsc_covered)) {
		pvread.tsc_checked = false;
		check = true;
	}
	pvread_republish();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	if (check)
		schedule_work(&pvread.check_work);
	pvread_refresh_start(cpu);
	return 0;
}

/*
 * Runs on @cpu itself, after CPUHP_AP_ACTIVE's teardown keeps user tasks
 * away: the record is marked unregistered in the page before Xen is told to
 * stop writing it, so no reader trusts a record that has gone stale.
 */
int pvread_cpu_offline(unsigned int cpu)
{
	struct pvread_cpu *pc = &pvread.cpus[cpu];
	unsigned long irqflags;

	pvread_refresh_stop(cpu);
	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	pvread_retire(cpu, NULL);
	cpumask_clear_cpu(cpu, pvread.to_register);
	cpumask_clear_cpu(cpu, pvread.unregistered);
	cpumask_clear_cpu(cpu, pvread.refresh_failed);
	pc->refresh_failed = false;
	pvread_republish();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);

	/* Also one a Xen save left registered (see the suspend hook). */
	if (pc->in_xen)
		pvread_unregister_self(cpu);
	return 0;
}

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
 * own, xen_save_time_memory_area()); at resume start the bound's history
 * afresh but carry its worst over until readers' lifted fallbacks cannot
 * be ahead by more (see carry_ns), and have a work item register each
 * record again from its own CPU (Xen fills it, and rewrites that vCPU's
 * primary record, from the calling pCPU's calibration), and check the TSC
 * across vCPUs before the page says line again.  Each resume counts as a
 * disruption in the page (header.disruptions).  Before a reboot or kexec
 * every CPU lets go of its own area (pvread_reboot_notify()).  The syscore
 * hooks rather than a PM notifier, since Xen's own suspend path calls no
 * PM notifier.
 */
static int pvread_syscore_suspend_hook(void)
{
	unsigned int cpu, self = smp_processor_id();
	u64 bound;

	raw_spin_lock(&pvread.lock);
	/*
	 * What readers' floors may be ahead by: the bound over the window
	 * as it is now.  Not later: the updates of the suspend itself see
	 * records half rewritten (seconds apart), and nobody reads fast
	 * then.
	 */
	bound = pvread.have_first ? pvread_window_worst_bound(pvread.last_sec) : 0;
	pvread.carry_at_suspend = bound == U64_MAX ? 0 : bound;
	pvread.suspended = true;
	pvread_write_begin(pvread.hdr);
	pvread_publish(pvread.hdr);
	pvread_line_flatten(pvread.hdr);
	pvread_write_end(pvread.hdr);
	for_each_cpu(cpu, pvread.registered)
		pvread_retire(cpu, pvread.to_register);
	pvread_republish();
	raw_spin_unlock(&pvread.lock);
	/*
	 * This CPU's own area only.  In S3 and hibernation the other CPUs
	 * went offline before, and let go of theirs.  In a Xen save they
	 * are held in stop_machine: a restore drops every area, and if the
	 * save is cancelled theirs stay registered (in_xen) until each CPU
	 * registers again over it at the resume, or lets go of it when it
	 * goes offline or at unload.
	 */
	if (pvread.cpus[self].in_xen)
		pvread_unregister_self(self);
	return 0;
}

/*
 * Before a reboot, halt, poweroff or kexec: on each CPU, its own area.
 * Every CPU runs this at once and the timekeeper may be waiting for the
 * lock, so nothing under it reads another CPU's record; the one full
 * republish (every record's stable bit) follows on_each_cpu() in
 * pvread_reboot_notify().
 * Before Xen stops writing the record, nobody may be left trusting it:
 *  - a reader of records trusts one by its own state word, not by the
 *    header: it is cleared here, before the hypercall;
 *  - a reader of the line reads no record, and the page said mode none
 *    (suspended) before the first of these IPIs;
 *  - the header's count of registered records goes down under its seq
 *    here too, so that it never counts a record Xen no longer writes;
 *  - pvread.gen moves, so that a measurement that looked at this record
 *    while it went stale is dropped.
 */
static void pvread_shutdown_cpu(void *unused)
{
	unsigned int cpu = smp_processor_id();

	raw_spin_lock(&pvread.lock);	/* an IPI: interrupts are off */
	pvread_retire(cpu, NULL);
	pvread.gen++;
	pvread_write_begin(pvread.hdr);
	pvread.hdr->nr_registered = cpumask_weight(pvread.registered);
	pvread_write_end(pvread.hdr);
	raw_spin_unlock(&pvread.lock);
	if (pvread.cpus[cpu].in_xen)
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

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	WRITE_ONCE(pvread.shutting_down, true);	/* no CPU registers again */
	cpumask_clear(pvread.to_register);		/* nor does a resume's work */
	pvread.suspended = true;
	pvread_republish();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);

	cpus_read_lock();
	on_each_cpu(pvread_shutdown_cpu, NULL, 1);
	cpus_read_unlock();

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	pvread_republish();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	return NOTIFY_DONE;
}

struct notifier_block pvread_reboot_nb = {
	.notifier_call = pvread_reboot_notify,
};

static void pvread_syscore_resume_hook(void)
{
	raw_spin_lock(&pvread.lock);
	/* Maybe another host, another TSC: no line until checked again. */
	pvread.tsc_checked = false;
	cpumask_clear(pvread.tsc_covered);
	pvread.carry_ns = max(pvread.carry_ns, pvread.carry_at_suspend);
	pvread.carry_until = 0;
	pvread_restart_window();
	/*
	 * After a restore the records and the kernel's clock can wander far
	 * more than they did before (measured in a PV domU under TCG: a line
	 * 4.5 ms off the kernel while the bound, from 1 s of fresh history,
	 * said 1 ms; later 108 ms): no fast mode until the bound has a whole
	 * window of history again.
	 */
	pvread.warmup_sec = PVREAD_WINDOW_SEC;
	pvread.ready = false;
	pvread.suspended = pvread.shutting_down;
	pvread.resumes++;
	pvread_republish();
	raw_spin_unlock(&pvread.lock);
	if (!READ_ONCE(pvread.shutting_down))
		schedule_work(&pvread.resume_work);
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

void pvread_register_syscore(void)
{
	register_syscore(&pvread_syscore);
}

void pvread_unregister_syscore(void)
{
	unregister_syscore(&pvread_syscore);
}
#else
static struct syscore_ops pvread_syscore_ops = {
	.suspend = pvread_syscore_suspend_hook,
	.resume = pvread_syscore_resume_hook,
};

void pvread_register_syscore(void)
{
	register_syscore_ops(&pvread_syscore_ops);
}

void pvread_unregister_syscore(void)
{
	unregister_syscore_ops(&pvread_syscore_ops);
}
#endif

/*
 * After a resume, on each CPU: its record again.  Every CPU runs this at
 * once: nothing under the lock reads another CPU's record, and the one
 * full republish follows on_each_cpu() in pvread_resume_work().  A
 * record Xen writes may be trusted as soon as its state says so; the
 * header's count and stable flag catch up then, and no line is read
 * meanwhile (the resume left the TSC unchecked and the module warming
 * up).
 */
static void pvread_resume_cpu(void *unused)
{
	unsigned int cpu = smp_processor_id();
	bool again, done;

	raw_spin_lock(&pvread.lock);
	again = cpumask_test_and_clear_cpu(cpu, pvread.to_register) &&
		!pvread.shutting_down;
	raw_spin_unlock(&pvread.lock);
	/* A hypercall, maybe long: not under the lock every CPU takes. */
	done = again && !pvread_register_self(cpu);
	if (!again)
		return;

	raw_spin_lock(&pvread.lock);
	if (done) {
		cpumask_set_cpu(cpu, pvread.registered);
		WRITE_ONCE(pvread_record(cpu)->state, PVREAD_RECORD_REGISTERED);
	} else {
		cpumask_set_cpu(cpu, pvread.unregistered);
	}
	pvread.gen++;	/* a measurement looking meanwhile missed it */
	raw_spin_unlock(&pvread.lock);
}

void pvread_resume_work(struct work_struct *work)
{
	unsigned long irqflags;

	cpus_read_lock();
	on_each_cpu(pvread_resume_cpu, NULL, 1);
	cpus_read_unlock();

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	pvread_republish();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	/* Maybe another host: what Xen says of its TSC, then the TSC. */
	pvread_read_xen_tsc();
	pvread_tsc_check();
}

/*
 * What Xen says of the guest's TSC (CPUID leaf 0x40000x03, subleaf 0):
 * EAX bit 0 rdtsc is emulated, bit 1 the host's TSC is reliable; EBX the
 * tsc_mode, ECX the guest's TSC kHz.  Either bit means one TSC across
 * vCPUs: emulated, Xen derives it from its own system time; native in
 * tsc_mode default, Xen found the TSC safe across pCPUs.  It can change
 * on a restore or migration, so it is read at load, after each resume
 * and on a tsc_check write, each time before the TSC check (which calls
 * nothing here); a vCPU coming online does not move the guest to
 * another host.
 */
void pvread_read_xen_tsc(void)
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
	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	pvread.xen_tsc_flags = flags;
	pvread.xen_tsc_mode = ebx;
	pvread.xen_tsc_khz = ecx;
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
}

/*
 * Every CPU lets go of its own area (the hotplug state's teardown runs on
 * each); only then may the pages go.  The TSC check's work is cancelled
 * after, not before: until the state is gone a CPU coming online queues
 * it again, and it would run with the module gone.
 */
void pvread_release_areas(void)
{
	unsigned int cpu;
	bool leak = false;

	cpuhp_remove_state(pvread.hp_state);
	cancel_work_sync(&pvread.check_work);
	/* Held as long as any area was: a kexec meanwhile lets go of them. */
	unregister_reboot_notifier(&pvread_reboot_nb);
	for_each_possible_cpu(cpu)
		leak |= pvread.cpus[cpu].in_xen;
	if (leak) {
		pr_err("leaking %zu bytes that Xen may still write to\n",
		       pvread.size);
		return;
	}
	free_pages_exact(pvread.area, pvread.size);
}
