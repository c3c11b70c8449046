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
 *
 * This file loads and unloads the module and serves /dev/pvread; the
 * state and its locking are in pvread_internal.h, and kmod/README.md
 * lists the other files.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pvclock_gtod.h>
#include <linux/reboot.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/user_namespace.h>
#include <asm/msr.h>
#include <asm/pvclock.h>
#include <xen/features.h>
#include <xen/xen.h>

#include "pvread_internal.h"

struct pvread_state pvread;

static_assert(sizeof(struct pvread_pvclock) ==
	      sizeof(struct pvclock_vcpu_time_info));
static_assert(offsetof(struct pvread_pvclock, tsc_shift) ==
	      offsetof(struct pvclock_vcpu_time_info, tsc_shift));
static_assert(sizeof(struct pvread_header) <= PAGE_SIZE);

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
	if (vma->vm_pgoff >= pvread.size >> PAGE_SHIFT ||
	    len > pvread.size - (vma->vm_pgoff << PAGE_SHIFT))
		return -EINVAL;
	/*
	 * Past the header are Xen's system time and the moments Xen writes
	 * each record (see the UAPI header): for a privileged reader only.
	 * Decided by the credentials of whoever opened the file, as the
	 * device's mode is: a privileged process may hand its descriptor
	 * on, and a set-user-ID program that maps a descriptor an
	 * unprivileged user gave it maps no more than that user could.
	 * VM_DONTEXPAND keeps a header mapping from growing into the rest.
	 */
	if ((vma->vm_pgoff || len > PAGE_SIZE) &&
	    !file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN))
		return -EPERM;
	/* The layout is offsets from the header: it is mapped from 0. */
	if (vma->vm_pgoff)
		return -EINVAL;
#ifdef PVREAD_HAVE_VM_FLAGS_MOD	/* Linux 6.3 on, see Kbuild */
	vm_flags_mod(vma, VM_DONTEXPAND | VM_DONTDUMP, VM_MAYWRITE | VM_MAYEXEC);
#else
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
	vma->vm_flags &= ~(VM_MAYWRITE | VM_MAYEXEC);
#endif
	return remap_pfn_range(vma, vma->vm_start,
			       PFN_DOWN(virt_to_phys(pvread.area)), len,
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

static struct miscdevice pvread_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "pvread",
	.fops = &pvread_fops,
	.groups = pvread_groups,
	.mode = 0444,
};

static void pvread_free(void)
{
	free_cpumask_var(pvread.registered);
	free_cpumask_var(pvread.to_register);
	free_cpumask_var(pvread.tsc_covered);
	free_cpumask_var(pvread.unregistered);
	free_cpumask_var(pvread.refresh_failed);
	kfree(pvread.cpus);
	pvread.cpus = NULL;
}

static int __init pvread_init(void)
{
	struct pvread_header *h;
	unsigned int cpu;
	size_t records;
	int ret;

	if (!xen_domain()) {
		pr_err("not running on Xen: no pvclock to publish\n");
		return -ENODEV;
	}
	pvread.warmup_sec = PVREAD_WARMUP_SEC;
	pvread.stable_round = true;
	pvread.phys_area = xen_feature(PVREAD_XENFEAT_TIME_PHYS_AREA);
	pvread_refresh_init();

	records = nr_cpu_ids * sizeof(struct pvread_record);
	pvread.size = PAGE_SIZE +
		      PAGE_ALIGN(records + sizeof(struct pvread_timekeeper));
	if (nr_cpu_ids > PVREAD_MAX_RECORDS || pvread.size > U32_MAX) {
		pr_err("%u CPUs: more than the page layout can name\n",
		       nr_cpu_ids);
		return -E2BIG;
	}
	raw_spin_lock_init(&pvread.lock);
	/* Before any CPU comes online here and queues a TSC check. */
	pvread_read_xen_tsc();
	pvread.cpus = kcalloc(nr_cpu_ids, sizeof(*pvread.cpus), GFP_KERNEL);
	if (!pvread.cpus || !zalloc_cpumask_var(&pvread.registered, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pvread.to_register, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pvread.tsc_covered, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pvread.unregistered, GFP_KERNEL) ||
	    !zalloc_cpumask_var(&pvread.refresh_failed, GFP_KERNEL)) {
		ret = -ENOMEM;
		goto err_free;
	}
	pvread.area = alloc_pages_exact(pvread.size, GFP_KERNEL | __GFP_ZERO);
	if (!pvread.area) {
		ret = -ENOMEM;
		goto err_free;
	}

	h = pvread.area;
	pvread.hdr = h;
	h->magic = PVREAD_MAGIC;
	h->abi_version = PVREAD_ABI_VERSION;
	h->nr_records = nr_cpu_ids;
	h->record_offset = PAGE_SIZE;
	h->record_stride = sizeof(struct pvread_record);
	h->map_size = pvread.size;
	h->priv_tk_offset = PAGE_SIZE + records;
	h->error_bound_ns = U64_MAX;
	h->spread_ns = U64_MAX;
	pvread.cpu0_owned_by_kernel = !!pvclock_get_pvti_cpu0_va();
	INIT_WORK(&pvread.resume_work, pvread_resume_work);
	INIT_WORK(&pvread.check_work, pvread_check_work);
	mutex_init(&pvread.check_mutex);
#ifdef IRQ_WORK_INIT_HARD
	pvread.measure_work = IRQ_WORK_INIT_HARD(pvread_measure_work);
#else
	/* Before 5.11: hard IRQ unless PREEMPT_RT, where this flag says so. */
	init_irq_work(&pvread.measure_work, pvread_measure_work);
	atomic_set(&pvread.measure_work.flags, IRQ_WORK_HARD_IRQ);
#endif

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
	pvread.hp_state = ret;
	for_each_online_cpu(cpu) {
		if (pvread.cpus[cpu].error) {
			ret = pvread.cpus[cpu].error;
			goto err_areas;
		}
	}
	/* Once for every CPU, not once for each that came online. */
	cancel_work_sync(&pvread.check_work);
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
	pr_info("%u vCPU records registered by %s address%s%s; clocksource %s\n",
		cpumask_weight(pvread.registered),
		READ_ONCE(pvread.phys_area) ? "physical" : "virtual",
		pvread_xen_drops_updates() ?
		", which Xen skips under KPTI: refreshed each jiffy" : "",
		pvread.cpu0_owned_by_kernel ? " (vCPU 0's belongs to the vDSO)" : "",
		(h->flags & PVREAD_FLAG_XEN_CLOCKSOURCE) ? "xen" : "not xen");
	return 0;

err_syscore:
	pvread_unregister_syscore();
	cancel_work_sync(&pvread.resume_work);
err_notifier:
	pvclock_gtod_unregister_notifier(&pvread_gtod_nb);
	pvread_measure_sync();
err_areas:
	pvread_release_areas();
	pvread_free();
	return ret;
err_pages:
	free_pages_exact(pvread.area, pvread.size);
err_free:
	pvread_free();
	return ret;
}

static void __exit pvread_exit(void)
{
	debugfs_remove_recursive(pvread.debugfs);
	misc_deregister(&pvread_misc);
	pvread_unregister_syscore();
	cancel_work_sync(&pvread.resume_work);
	pvclock_gtod_unregister_notifier(&pvread_gtod_nb);
	pvread_measure_sync();
	pvread_release_areas();
	pvread_free();
}

module_init(pvread_init);
module_exit(pvread_exit);

MODULE_DESCRIPTION("Xen pvclock and timekeeper, mapped read-only for user space");
MODULE_LICENSE("GPL");
