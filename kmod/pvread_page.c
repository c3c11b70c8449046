// SPDX-License-Identifier: GPL-2.0
/*
 * What the page's header says: the flags, the mode readers use and why
 * the line is or is not one of them, decided from the module's state under
 * pvread.lock and published under the header's seqcount.  Every change of
 * state that could change the mode ends in pvread_publish().
 */
#include <linux/cpumask.h>
#include <linux/moduleparam.h>

#include "pvread_internal.h"

bool pvread_line_enabled = true;	/* pvread_refresh.c reads it too */
module_param_named(line, pvread_line_enabled, bool, 0444);
MODULE_PARM_DESC(line, "Publish one clock line for every vCPU when the TSC allows (default 1; 0: never, the kernel answers every read)");

static bool tsc_reliable;
module_param(tsc_reliable, bool, 0444);
MODULE_PARM_DESC(tsc_reliable, "Take the TSC as one across vCPUs even where Xen does not say so; the warp check still runs (default 0)");

/* Every registered record carries Xen's TSC-stable bit; pvread.lock held. */
bool pvread_all_stable(void)
{
	unsigned int cpu;

	if (cpumask_empty(pvread.registered))
		return false;
	for_each_cpu(cpu, pvread.registered)
		if (!(READ_ONCE(pvread_pvti(cpu)->flags) & PVCLOCK_TSC_STABLE_BIT))
			return false;
	return true;
}

/* Does Xen, or the administrator, vouch for one TSC across vCPUs? */
static bool pvread_tsc_vouched(void)
{
	return tsc_reliable ||
	       (pvread.xen_tsc_flags & (PVREAD_FLAG_TSC_EMULATED |
				    PVREAD_FLAG_HOST_TSC_RELIABLE));
}

/* Why the line may not be used now, or PVREAD_LINE_ACTIVE; pvread.lock held. */
u32 pvread_line_reason(u32 flags)
{
	enum pvread_refresh_state refresh;

	if (!pvread_line_enabled)
		return PVREAD_LINE_OFF;
	if ((flags & PVREAD_FLAG_TSC_STABLE) && pvread.cpu0_owned_by_kernel)
		return PVREAD_LINE_STABLE;
	if (!pvread_tsc_vouched())
		return PVREAD_LINE_UNVOUCHED;
	if (!pvread.tsc_checked)
		return PVREAD_LINE_UNCHECKED;
	if (pvread.tsc_warp)
		return PVREAD_LINE_WARP;
	if (pvread.rates_apart_until && pvread.last_sec < pvread.rates_apart_until)
		return PVREAD_LINE_RATES;
	/*
	 * Xen drops writes of the records: served while they are refreshed.
	 * After the rates: a refresh measures its lag against records that
	 * may run apart, and only the measurement can tell that.
	 */
	refresh = pvread_refresh_state();
	if (refresh != PVREAD_REFRESH_OFF && refresh != PVREAD_REFRESH_ACTIVE)
		return PVREAD_LINE_PTI;
	if (!pvread.ready || pvread.suspended || !pvread.xen_clocksource ||
	    cpumask_empty(pvread.registered) ||
	    !cpumask_empty(pvread.unregistered))
		return PVREAD_LINE_WAITING;
	return PVREAD_LINE_ACTIVE;
}

/*
 * Flags and mode from the state of everything; pvread.lock held, header open.
 *
 * The line, or none.  When Xen sets PVCLOCK_TSC_STABLE_BIT, Linux trusts
 * it only if it saw the bit at boot, and then it has registered vCPU 0's
 * secondary area for its own vDSO (pvclock_get_pvti_cpu0_va() is set) and
 * reads pvclock in user space without the global last_value: libc's
 * clock_gettime() is the fast answer there, and the page says none, line
 * state stable.  That area is the kernel's: this module never registers
 * vCPU 0 then (pvread_kernel_owns()), since Xen keeps one secondary area
 * per vCPU and a second registration would take it away.  Without the
 * kernel's trust in the bit (it appeared after boot, or the vDSO could not
 * register) the kernel still hides the records' disagreement behind
 * last_value, and the line is measured as anywhere else.
 *
 * Line mode needs a line the last timekeeping update anchored (only the
 * notifier starts one); everywhere else the kernel answers.
 */
u32 pvread_flags(void)
{
	u32 flags = pvread.xen_tsc_flags;

	if (pvread.cpu0_owned_by_kernel)
		flags |= PVREAD_FLAG_CPU0_OWNED_BY_KERNEL;
	if (pvread.xen_clocksource)
		flags |= PVREAD_FLAG_XEN_CLOCKSOURCE;
	if (pvread.xen_clocksource && pvread.all_stable)
		flags |= PVREAD_FLAG_TSC_STABLE;
	return flags;
}

void pvread_publish(struct pvread_header *h)
{
	u32 flags = pvread_flags();

	h->nr_registered = cpumask_weight(pvread.registered);
	h->flags = flags;
	h->line_state = pvread_line_reason(flags);
	h->tsc_warp = pvread.tsc_warp;
	h->disruptions = pvread.resumes;
	h->mode = PVREAD_MODE_NONE;
	/* Until the next update anchors one, there is no line to read. */
	if (h->line_state == PVREAD_LINE_ACTIVE && !pvread.ln.live)
		h->line_state = PVREAD_LINE_WAITING;
	if (h->line_state != PVREAD_LINE_ACTIVE)
		pvread_line_end(h);
	else
		h->mode = PVREAD_MODE_LINE;
}

/* Republish after a change outside the timekeeper; pvread.lock held. */
void pvread_republish(void)
{
	pvread.gen++;
	pvread.all_stable = pvread_all_stable();
	pvread_write_begin(pvread.hdr);
	pvread_publish(pvread.hdr);
	pvread_write_end(pvread.hdr);
}
