// SPDX-License-Identifier: GPL-2.0
/*
 * Knobs for selftests/pvread only: each makes a rare event happen on
 * demand.  The code they steer reads them as pvread_test_*, so that a
 * test hook is never taken for the logic around it.
 */
#include <linux/delay.h>
#include <linux/moduleparam.h>
#include <linux/smp.h>

#include "pvread_internal.h"

uint pvread_test_mirror_skew;
module_param_named(test_mirror_skew, pvread_test_mirror_skew, uint, 0444);
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

uint pvread_test_anchor_tsc_back;
module_param_named(test_anchor_tsc_back, pvread_test_anchor_tsc_back, uint, 0600);
MODULE_PARM_DESC(test_anchor_tsc_back, "For tests: the next anchor of the line reads the TSC this many ticks below the measurement's (once; reads 0 once taken)");

uint pvread_test_check_delay_ms;
module_param_named(test_check_delay_ms, pvread_test_check_delay_ms, uint, 0444);
MODULE_PARM_DESC(test_check_delay_ms, "For tests: a TSC check queued by a vCPU coming online starts this many ms late (at most 1000)");

static uint test_check_hold_ms;
module_param(test_check_hold_ms, uint, 0600);
MODULE_PARM_DESC(test_check_hold_ms, "For tests: the next TSC check waits this many ms between stopping the CPUs and taking its result (at most 5000; once; reads 0 once taken)");

/*
 * The refresh where Xen's writes all land (a PV guest, no KPTI): the one
 * configuration that needs it, an HVM or PVH guest under KPTI with the
 * TSC emulated, loses its vCPUs to the emulator's nested SVM within
 * minutes (vm/README.md), so its timers, its lag, its gate, hotplug,
 * resume, unload and reboot under it are tested in a PV guest.
 */
bool pvread_test_refresh;
module_param_named(test_refresh, pvread_test_refresh, bool, 0444);
MODULE_PARM_DESC(test_refresh, "For tests: refresh the records every jiffy, and gate the line on it, as where Xen drops writes of them under KPTI");

int pvread_test_tsc_skew;
module_param_named(test_tsc_skew, pvread_test_tsc_skew, int, 0644);
MODULE_PARM_DESC(test_tsc_skew, "For tests: the TSC check sees the TSC of the last online CPU go back by this many ticks");

/* test_measure_hold_ms: a measurement held before it looks, for a test. */
void pvread_test_hold(void)
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
 * test_check_hold_ms: a TSC check held after its stop_machine, so that a
 * test can bring a vCPU online before the result is taken.
 */
void pvread_test_check_hold(void)
{
	unsigned int ms;

	if (likely(!READ_ONCE(test_check_hold_ms)))
		return;
	ms = xchg(&test_check_hold_ms, 0);
	if (ms)
		msleep(min(ms, 5000U));
}
