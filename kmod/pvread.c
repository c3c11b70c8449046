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
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pvclock_gtod.h>
#include <linux/spinlock.h>
#include <linux/timekeeper_internal.h>
#include <linux/uaccess.h>
#include <linux/version.h>
#include <asm/msr.h>
#include <asm/pvclock.h>
#include <asm/xen/hypercall.h>
#include <xen/interface/vcpu.h>
#include <xen/xen.h>
#include <xen/xen-ops.h>

#include <linux/pvread.h>

static_assert(sizeof(struct pvread_pvclock) ==
	      sizeof(struct pvclock_vcpu_time_info));
static_assert(offsetof(struct pvread_pvclock, tsc_shift) ==
	      offsetof(struct pvclock_vcpu_time_info, tsc_shift));
static_assert(sizeof(struct pvread_header) <= PAGE_SIZE);

/*
 * The error bound is the records' largest disagreement over the last
 * PVREAD_WINDOW_SEC seconds, doubled: the disagreement wanders (by
 * milliseconds within seconds under emulation), and a reading is only ever
 * as far from the kernel as the records are from each other.
 */
#define PVREAD_WINDOW_SEC	16
#define PVREAD_WARMUP_SEC	2
#define PVREAD_BOUND_SLACK_NS	1000

struct pvread_cpu {
	u64 saved_tsc_aux;
	bool wrote_tsc_aux;
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

	raw_spinlock_t lock;		/* header writes, masks below */
	cpumask_var_t registered;
	cpumask_var_t tsc_aux_ok;
	cpumask_var_t prepared;		/* online callback has run */

	/* bound window, only touched by the notifier (timekeeper serialises) */
	u64 window[PVREAD_WINDOW_SEC];
	u64 window_sec[PVREAD_WINDOW_SEC];
	u64 first_sec;
	bool have_first;
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
	smp_wmb();
}

static void pvread_write_end(struct pvread_header *h)
{
	smp_wmb();
	WRITE_ONCE(h->seq, h->seq + 1);
}

/* Flags that hotplug can change; called with pv.lock held. */
static u32 pvread_cpu_flags(void)
{
	u32 flags = 0;

	if (cpumask_subset(pv.prepared, pv.tsc_aux_ok))
		flags |= PVREAD_FLAG_TSC_AUX;
	if (pv.cpu0_owned_by_kernel)
		flags |= PVREAD_FLAG_CPU0_OWNED_BY_KERNEL;
	return flags;
}

/* Mode from the state of everything; called with pv.lock held. */
static void pvread_set_mode(struct pvread_header *h, u32 flags, bool ready)
{
	h->flags = flags;
	h->nr_registered = cpumask_weight(pv.registered);
	h->mode = PVREAD_MODE_NONE;
	if (ready && (flags & PVREAD_FLAG_XEN_CLOCKSOURCE) &&
	    (flags & PVREAD_FLAG_TSC_AUX) && h->nr_registered)
		h->mode = PVREAD_MODE_PERCPU;
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

	if (cpu > PVREAD_TSC_AUX_CPU_MASK)
		return;
	if ((pvread_read_tsc_aux() & PVREAD_TSC_AUX_CPU_MASK) != cpu) {
		if (rdmsrl_safe(MSR_TSC_AUX, &pc->saved_tsc_aux) ||
		    wrmsrl_safe(MSR_TSC_AUX, want))
			return;
		pc->wrote_tsc_aux = true;
	}
	if ((pvread_read_tsc_aux() & PVREAD_TSC_AUX_CPU_MASK) == cpu)
		cpumask_set_cpu(cpu, pv.tsc_aux_ok);
}

static int pvread_register_area(unsigned int cpu, struct pvread_pvclock *p)
{
	struct vcpu_register_time_memory_area area = {
		.addr.v = (struct pvclock_vcpu_time_info *)p,
	};

	return HYPERVISOR_vcpu_op(VCPUOP_register_vcpu_time_memory_area,
				  xen_vcpu_nr(cpu), &area);
}

/* Linux's own vDSO reads this area when Xen's TSC is stable. */
static bool pvread_kernel_owns(unsigned int cpu)
{
	return pv.cpu0_owned_by_kernel && xen_vcpu_nr(cpu) == 0;
}

/* Runs on @cpu itself, before the scheduler lets user tasks there. */
static int pvread_cpu_online(unsigned int cpu)
{
	struct pvread_record *rec = pvread_record(cpu);
	struct pvread_cpu *pc = &pv.cpus[cpu];
	unsigned long irqflags;
	int ret = 0;

	pc->error = 0;
	rec->xen_vcpu_id = xen_vcpu_nr(cpu);
	if (!pvread_kernel_owns(cpu)) {
		ret = pvread_register_area(cpu, &rec->pvclock);
		if (ret) {
			pr_err("cpu%u: Xen refused a time area for vCPU %u: %d\n",
			       cpu, xen_vcpu_nr(cpu), ret);
			pc->error = ret;
		}
	}

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	pvread_setup_tsc_aux(cpu, pc);
	cpumask_set_cpu(cpu, pv.prepared);
	if (!ret && !pvread_kernel_owns(cpu)) {
		cpumask_set_cpu(cpu, pv.registered);
		WRITE_ONCE(rec->state, PVREAD_RECORD_REGISTERED);
	}
	pvread_write_begin(pv.hdr);
	pvread_set_mode(pv.hdr, pvread_cpu_flags() |
			(pv.hdr->flags & PVREAD_FLAG_XEN_CLOCKSOURCE),
			pv.hdr->mode != PVREAD_MODE_NONE);
	pvread_write_end(pv.hdr);
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);
	return 0;
}

/* Runs on @cpu itself, after the scheduler moved user tasks away. */
static int pvread_cpu_offline(unsigned int cpu)
{
	struct pvread_record *rec = pvread_record(cpu);
	struct pvread_cpu *pc = &pv.cpus[cpu];
	bool was_registered;
	unsigned long irqflags;
	int ret;

	raw_spin_lock_irqsave(&pv.lock, irqflags);
	was_registered = cpumask_test_and_clear_cpu(cpu, pv.registered);
	WRITE_ONCE(rec->state, 0);
	cpumask_clear_cpu(cpu, pv.prepared);
	cpumask_clear_cpu(cpu, pv.tsc_aux_ok);
	pvread_write_begin(pv.hdr);
	pvread_set_mode(pv.hdr, pvread_cpu_flags() |
			(pv.hdr->flags & PVREAD_FLAG_XEN_CLOCKSOURCE),
			pv.hdr->mode != PVREAD_MODE_NONE);
	pvread_write_end(pv.hdr);
	raw_spin_unlock_irqrestore(&pv.lock, irqflags);

	if (pc->wrote_tsc_aux) {
		wrmsrl_safe(MSR_TSC_AUX, pc->saved_tsc_aux);
		pc->wrote_tsc_aux = false;
	}
	if (was_registered) {
		ret = pvread_register_area(cpu, NULL);
		if (ret) {
			/* Xen may still write there: the pages must live on. */
			pr_err("cpu%u: Xen kept vCPU %u's time area: %d\n",
			       cpu, xen_vcpu_nr(cpu), ret);
			pc->stuck = true;
		}
	}
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

/*
 * How far apart are the registered records and the kernel's own clocksource
 * read, right now?  U64_MAX when that cannot be told.
 */
static u64 pvread_spread(struct clocksource *cs, bool *stable)
{
	u64 t0, t1, kernel, c, lo, hi;
	unsigned int cpu;

	*stable = true;
	t0 = rdtsc_ordered();
	kernel = cs->read(cs);
	t1 = rdtsc_ordered();
	lo = kernel;
	hi = kernel;
	for_each_cpu(cpu, pv.registered) {
		if (!(READ_ONCE(pvread_pvti(cpu)->flags) & PVCLOCK_TSC_STABLE_BIT))
			*stable = false;
		if (!pvread_eval(cpu, t0, &c))
			return U64_MAX;
		lo = min(lo, c);
		if (!pvread_eval(cpu, t1, &c))
			return U64_MAX;
		hi = max(hi, c);
	}
	return hi - lo;
}

static u64 pvread_window_bound(u64 now_sec, u64 spread)
{
	unsigned int i = now_sec % PVREAD_WINDOW_SEC;
	u64 worst = 0;

	if (pv.window_sec[i] != now_sec) {
		pv.window_sec[i] = now_sec;
		pv.window[i] = 0;
	}
	pv.window[i] = max(pv.window[i], spread);
	for (i = 0; i < PVREAD_WINDOW_SEC; i++)
		if (pv.window_sec[i] + PVREAD_WINDOW_SEC > now_sec)
			worst = max(worst, pv.window[i]);
	if (worst > (U64_MAX - PVREAD_BOUND_SLACK_NS) / 2)
		return U64_MAX;
	return 2 * worst + PVREAD_BOUND_SLACK_NS;
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

/* The conversion the vDSO would get from update_vsyscall(). */
static void pvread_mirror(struct pvread_timekeeper *m,
			  const struct timekeeper *tk)
{
	u32 shift = tk->tkr_mono.shift;
	u64 one_sec = (u64)NSEC_PER_SEC << shift;
	u64 xnsec = tk->tkr_mono.xtime_nsec;
	u64 mono_sec = tk->xtime_sec + tk->wall_to_monotonic.tv_sec;
	u64 mono_snsec = xnsec + ((u64)tk->wall_to_monotonic.tv_nsec << shift);
	u64 coarse_ns = xnsec >> shift;

	m->cycle_last = tk->tkr_mono.cycle_last;
	m->mask = tk->tkr_mono.mask;
	m->mult = tk->tkr_mono.mult;
	m->shift = shift;
	/* delta * mult + snsec must not wrap; more than a second: ask */
	m->max_delta = min_t(u64, NSEC_PER_SEC,
			     (U64_MAX >> 1) / max(tk->tkr_mono.mult, 1U));
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
	pvread_set_base(&m->base[CLOCK_MONOTONIC_RAW], tk->raw_sec,
			tk->tkr_raw.xtime_nsec,
			(u64)NSEC_PER_SEC << tk->tkr_raw.shift);
	pvread_set_base(&m->base[CLOCK_REALTIME_COARSE], tk->xtime_sec,
			coarse_ns, NSEC_PER_SEC);
	pvread_set_base(&m->base[CLOCK_MONOTONIC_COARSE], mono_sec,
			coarse_ns + tk->wall_to_monotonic.tv_nsec,
			NSEC_PER_SEC);
}

/* Called by the timekeeper at every update, its lock held, irqs off. */
static int pvread_gtod_notify(struct notifier_block *nb, unsigned long was_set,
			      void *priv)
{
	struct timekeeper *tk = priv;
	struct clocksource *cs = tk->tkr_mono.clock;
	struct pvread_header *h = pv.hdr;
	u64 spread = U64_MAX, bound = U64_MAX, now_sec;
	bool xen, stable = false, ready = false;
	u32 flags;

	raw_spin_lock(&pv.lock);
	xen = !strcmp(cs->name, "xen") && tk->tkr_mono.mask == U64_MAX;
	if (xen) {
		spread = pvread_spread(cs, &stable);
		now_sec = tk->tkr_mono.cycle_last / NSEC_PER_SEC;
		if (!pv.have_first) {
			pv.first_sec = now_sec;
			pv.have_first = true;
		}
		if (spread != U64_MAX) {
			bound = pvread_window_bound(now_sec, spread);
			ready = now_sec >= pv.first_sec + PVREAD_WARMUP_SEC;
		}
	} else {
		pv.have_first = false;
		memset(pv.window_sec, 0, sizeof(pv.window_sec));
	}

	flags = pvread_cpu_flags();
	if (xen)
		flags |= PVREAD_FLAG_XEN_CLOCKSOURCE;
	if (xen && stable && !cpumask_empty(pv.registered))
		flags |= PVREAD_FLAG_TSC_STABLE;

	pvread_write_begin(h);
	pvread_mirror(&h->tk, tk);
	h->error_bound_ns = bound;
	h->spread_ns = spread;
	h->updates++;
	pvread_set_mode(h, flags, ready);
	pvread_write_end(h);
	raw_spin_unlock(&pv.lock);
	return NOTIFY_OK;
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
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
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

static long pvread_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	switch (cmd) {
	case PVREAD_IOC_REFERENCE:
		if (!capable(CAP_SYS_ADMIN))
			return -EPERM;
		return pvread_reference((struct pvread_reference __user *)arg);
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

static struct miscdevice pvread_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "pvread",
	.fops = &pvread_fops,
	.mode = 0444,
};

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
	kfree(pv.cpus);
	pv.cpus = NULL;
}

/* Unregister everywhere; only then may the pages go. */
static void pvread_release_areas(void)
{
	unsigned int cpu;
	bool leak = false;

	cpuhp_remove_state(pv.hp_state);
	for_each_possible_cpu(cpu)
		leak |= pv.cpus[cpu].stuck;
	if (leak) {
		pr_err("leaking %zu bytes that Xen may still write to\n",
		       pv.size);
		return;
	}
	free_pages_exact(pv.area, pv.size);
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
	if (!pvread_cpu_has_rdtscp()) {
		pr_err("CPU lacks RDTSCP: user space cannot tell its vCPU\n");
		return -ENODEV;
	}

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
	    !zalloc_cpumask_var(&pv.prepared, GFP_KERNEL)) {
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
	pv.cpu0_owned_by_kernel = pvclock_get_pvti_cpu0_va() != NULL;

	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "pvread:online",
				pvread_cpu_online, pvread_cpu_offline);
	if (ret < 0)
		goto err_pages;
	pv.hp_state = ret;
	for_each_online_cpu(cpu) {
		if (pv.cpus[cpu].error) {
			ret = pv.cpus[cpu].error;
			goto err_areas;
		}
	}

	ret = pvclock_gtod_register_notifier(&pvread_gtod_nb);
	if (ret)
		goto err_areas;
	ret = misc_register(&pvread_misc);
	if (ret)
		goto err_notifier;

	pr_info("%u vCPU records registered%s; clocksource %s\n",
		cpumask_weight(pv.registered),
		pv.cpu0_owned_by_kernel ? " (vCPU 0's belongs to the vDSO)" : "",
		(h->flags & PVREAD_FLAG_XEN_CLOCKSOURCE) ? "xen" : "not xen");
	return 0;

err_notifier:
	pvclock_gtod_unregister_notifier(&pvread_gtod_nb);
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
	misc_deregister(&pvread_misc);
	pvclock_gtod_unregister_notifier(&pvread_gtod_nb);
	pvread_release_areas();
	pvread_free();
}

module_init(pvread_init);
module_exit(pvread_exit);

MODULE_DESCRIPTION("Xen pvclock and timekeeper, mapped read-only for user space");
MODULE_LICENSE("GPL");
