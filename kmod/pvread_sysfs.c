// SPDX-License-Identifier: GPL-2.0
/*
 * What an operator and a debugger can read: the misc device's sysfs
 * attributes, and debugfs's timings of the work done with interrupts off.
 */
#include <linux/debugfs.h>
#include <linux/device.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/sysfs.h>
#include <linux/timekeeping.h>

#include "pvread_internal.h"

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
	[PVREAD_LINE_PTI] = "pti",
};

static ssize_t mode_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	u32 mode = READ_ONCE(pvread.hdr->mode);

	if (mode >= ARRAY_SIZE(pvread_mode_names))
		return sysfs_emit(buf, "%u\n", mode);
	return sysfs_emit(buf, "%s\n", pvread_mode_names[mode]);
}
static DEVICE_ATTR_RO(mode);

static ssize_t flags_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "0x%x\n", READ_ONCE(pvread.hdr->flags));
}
static DEVICE_ATTR_RO(flags);

static ssize_t tsc_stable_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", !!(READ_ONCE(pvread.hdr->flags) &
					   PVREAD_FLAG_TSC_STABLE));
}
static DEVICE_ATTR_RO(tsc_stable);

static ssize_t xen_clocksource_show(struct device *dev,
				    struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", !!(READ_ONCE(pvread.hdr->flags) &
					   PVREAD_FLAG_XEN_CLOCKSOURCE));
}
static DEVICE_ATTR_RO(xen_clocksource);

static ssize_t registered_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	unsigned long irqflags;
	cpumask_var_t snap;
	ssize_t len;

	/* Formatting under pvread.lock would make every reader of it wait. */
	if (!alloc_cpumask_var(&snap, GFP_KERNEL))
		return -ENOMEM;
	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	cpumask_copy(snap, pvread.registered);
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	len = sysfs_emit(buf, "%*pbl\n", cpumask_pr_args(snap));
	free_cpumask_var(snap);
	return len;
}
static DEVICE_ATTR_RO(registered);

static ssize_t updates_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pvread.hdr->updates));
}
static DEVICE_ATTR_RO(updates);

static ssize_t last_update_age_ms_show(struct device *dev,
				       struct device_attribute *attr,
				       char *buf)
{
	unsigned long irqflags;
	u64 last, now;

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	last = pvread.last_update_ns;
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
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
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pvread.hdr->spread_ns));
}
static DEVICE_ATTR_RO(spread_ns);

static ssize_t error_bound_ns_show(struct device *dev,
				   struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pvread.hdr->error_bound_ns));
}
static DEVICE_ATTR_RO(error_bound_ns);

static ssize_t resumes_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pvread.resumes));
}
static DEVICE_ATTR_RO(resumes);

static ssize_t line_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	u32 state = READ_ONCE(pvread.hdr->line_state);

	if (state >= ARRAY_SIZE(pvread_line_names))
		return sysfs_emit(buf, "%u\n", state);
	return sysfs_emit(buf, "%s\n", pvread_line_names[state]);
}
static DEVICE_ATTR_RO(line);

static ssize_t line_anchors_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pvread.hdr->line.anchors));
}
static DEVICE_ATTR_RO(line_anchors);

static ssize_t tsc_warp_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(pvread.hdr->tsc_warp));
}
static DEVICE_ATTR_RO(tsc_warp);

static ssize_t xen_tsc_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	unsigned long irqflags;
	u32 flags, mode, khz;

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	flags = pvread.xen_tsc_flags;
	mode = pvread.xen_tsc_mode;
	khz = pvread.xen_tsc_khz;
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	return sysfs_emit(buf, "emulated=%d reliable=%d mode=%u khz=%u\n",
			  !!(flags & PVREAD_FLAG_TSC_EMULATED),
			  !!(flags & PVREAD_FLAG_HOST_TSC_RELIABLE), mode, khz);
}
static DEVICE_ATTR_RO(xen_tsc);

static ssize_t area_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%s\n", READ_ONCE(pvread.phys_area) ? "phys" : "virt");
}
static DEVICE_ATTR_RO(area);

/* Root asks for the cross-vCPU TSC check now (tests, after a host change). */
static ssize_t tsc_check_store(struct device *dev,
			       struct device_attribute *attr,
			       const char *buf, size_t count)
{
	bool v;

	if (kstrtobool(buf, &v))
		return -EINVAL;
	if (v) {
		pvread_read_xen_tsc();
		pvread_tsc_check();
	}
	return count;
}
static DEVICE_ATTR_WO(tsc_check);

/*
 * The refresh of the records where Xen drops its writes of them
 * (pvread_refresh.c): its state, the gate of the line there, and its
 * figures summed over the CPUs.
 */
static const char * const pvread_refresh_names[] = {
	[PVREAD_REFRESH_OFF] = "off",
	[PVREAD_REFRESH_ACTIVE] = "active",
	[PVREAD_REFRESH_FAILED] = "failed",
	[PVREAD_REFRESH_NOHZ_FULL] = "nohz_full",
	[PVREAD_REFRESH_LAG] = "lag",
};

static ssize_t refresh_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	enum pvread_refresh_state state;
	unsigned long irqflags;

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	state = pvread_refresh_state();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	return sysfs_emit(buf, "%s\n", pvread_refresh_names[state]);
}
static DEVICE_ATTR_RO(refresh);

struct pvread_refresh_sum {
	u64 refreshes, missed, untold, cost_sum, costed, cost_max, lag_max, lag_at;
	unsigned long period;
};

static void pvread_refresh_sum(struct pvread_refresh_sum *r)
{
	unsigned int cpu;

	memset(r, 0, sizeof(*r));
	for_each_possible_cpu(cpu) {
		const struct pvread_cpu *pc = &pvread.cpus[cpu];
		u64 lag = READ_ONCE(pc->refresh_lag_max_ns);

		r->refreshes += READ_ONCE(pc->refreshes);
		r->missed += READ_ONCE(pc->refresh_missed);
		r->untold += READ_ONCE(pc->refresh_untold);
		r->cost_sum += READ_ONCE(pc->refresh_cost_sum_ns);
		r->costed += READ_ONCE(pc->refresh_costed);
		r->period = max(r->period, READ_ONCE(pc->refresh_period_j));
		r->cost_max = max(r->cost_max, READ_ONCE(pc->refresh_cost_max_ns));
		if (READ_ONCE(pc->refreshes) && lag >= r->lag_max) {
			r->lag_max = lag;
			r->lag_at = READ_ONCE(pc->refresh_lag_at);
		}
	}
}

/* One figure of the refresh's, summed over the CPUs. */
#define PVREAD_REFRESH_ATTR(name, expr)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	struct pvread_refresh_sum r;					\
									\
	pvread_refresh_sum(&r);						\
	return sysfs_emit(buf, "%llu\n", (u64)(expr));			\
}									\
static DEVICE_ATTR_RO(name)

PVREAD_REFRESH_ATTR(refreshes, r.refreshes);
PVREAD_REFRESH_ATTR(refresh_missed, r.missed);
PVREAD_REFRESH_ATTR(refresh_untold, r.untold);
PVREAD_REFRESH_ATTR(refresh_lag_max_ns, r.lag_max);
PVREAD_REFRESH_ATTR(refresh_cost_ns,
		    r.costed ? div64_u64(r.cost_sum, r.costed) : 0);
PVREAD_REFRESH_ATTR(refresh_cost_max_ns, r.cost_max);

static ssize_t refresh_lag_ns_show(struct device *dev,
				   struct device_attribute *attr, char *buf)
{
	unsigned long irqflags;
	u64 worst;

	raw_spin_lock_irqsave(&pvread.lock, irqflags);
	worst = pvread_refresh_window_worst();
	raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
	return sysfs_emit(buf, "%llu\n", worst);
}
static DEVICE_ATTR_RO(refresh_lag_ns);

static ssize_t refresh_lag_age_ms_show(struct device *dev,
				       struct device_attribute *attr, char *buf)
{
	struct pvread_refresh_sum r;

	pvread_refresh_sum(&r);
	if (!r.refreshes)
		return sysfs_emit(buf, "-1\n");
	return sysfs_emit(buf, "%u\n",
			  jiffies_to_msecs(get_jiffies_64() - r.lag_at));
}
static DEVICE_ATTR_RO(refresh_lag_age_ms);

/* The longest period any CPU runs at now (a jiffy, or longer: see there). */
static ssize_t refresh_period_us_show(struct device *dev,
				      struct device_attribute *attr, char *buf)
{
	struct pvread_refresh_sum r;

	pvread_refresh_sum(&r);
	return sysfs_emit(buf, "%u\n", jiffies_to_usecs(max(r.period, 1UL)));
}
static DEVICE_ATTR_RO(refresh_period_us);

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
	&dev_attr_updates.attr,
	&dev_attr_last_update_age_ms.attr,
	&dev_attr_spread_ns.attr,
	&dev_attr_error_bound_ns.attr,
	&dev_attr_resumes.attr,
	&dev_attr_refresh.attr,
	&dev_attr_refreshes.attr,
	&dev_attr_refresh_missed.attr,
	&dev_attr_refresh_untold.attr,
	&dev_attr_refresh_lag_ns.attr,
	&dev_attr_refresh_lag_max_ns.attr,
	&dev_attr_refresh_lag_age_ms.attr,
	&dev_attr_refresh_cost_ns.attr,
	&dev_attr_refresh_cost_max_ns.attr,
	&dev_attr_refresh_period_us.attr,
	NULL,
};

static const struct attribute_group pvread_group = {
	.attrs = pvread_attrs,
};

const struct attribute_group *pvread_groups[] = {
	&pvread_group,
	NULL,
};

/*
 * The work this module does with interrupts off, in ns, the last and the
 * largest since load (write 0 to start again): the notifier, which the
 * timekeeper waits for under its lock (constant work); the measurement
 * after it, hard-IRQ, one look at this CPU's record and at most 16 others
 * (PVREAD_MEASURE_BATCH); the TSC check, every CPU stopped (PVREAD_WARP_MAX_US each, and
 * the lock's hand-offs).  Also measurements an update overtook, those
 * made under the lock after that, anchors the TSC rejected, and the
 * worst distance of a line at its end from the records and the kernel.
 * Debugging aids: nothing depends on them, so a failure is not fatal.
 */
void pvread_debugfs_init(void)
{
	pvread.debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_u64("notifier_max_ns", 0600, pvread.debugfs,
			   &pvread.notify_max_ns);
	debugfs_create_u64("notifier_last_ns", 0400, pvread.debugfs,
			   &pvread.notify_last_ns);
	debugfs_create_u64("measure_max_ns", 0600, pvread.debugfs,
			   &pvread.measure_max_ns);
	debugfs_create_u64("measure_last_ns", 0400, pvread.debugfs,
			   &pvread.measure_last_ns);
	debugfs_create_u64("check_max_ns", 0600, pvread.debugfs,
			   &pvread.check_max_ns);
	debugfs_create_u64("check_last_ns", 0400, pvread.debugfs,
			   &pvread.check_last_ns);
	debugfs_create_u64("measure_stale", 0400, pvread.debugfs,
			   &pvread.measure_stale);
	debugfs_create_u64("measure_locked", 0400, pvread.debugfs,
			   &pvread.measure_locked);
	debugfs_create_u64("updates_while_measuring", 0400, pvread.debugfs,
			   &pvread.updates_while_measuring);
	debugfs_create_u64("anchors_rejected", 0400, pvread.debugfs,
			   &pvread.anchors_rejected);
	debugfs_create_u64("bound_overruns", 0400, pvread.debugfs,
			   &pvread.bound_overruns);
	debugfs_create_u64("anchor_dev_max_ns", 0600, pvread.debugfs,
			   &pvread.anchor_dev_max_ns);
}
