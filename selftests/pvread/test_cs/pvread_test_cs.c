// SPDX-License-Identifier: GPL-2.0
/*
 * pvread_test_cs: a second clocksource, "pvread-test", for the tests that
 * switch a Xen guest's clocksource away from "xen" and back.  A Linux PV
 * dom0 with more than one vCPU has no other: Linux marks the TSC unstable
 * and Xen keeps the HPET.  Rating 1, so it is only ever chosen by hand.
 *
 * It counts the TSC, made monotonic across CPUs by never returning less than
 * the largest value returned so far: good enough for the seconds a test
 * runs on it, not for real use.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/clocksource.h>
#include <linux/module.h>
#include <asm/msr.h>
#include <asm/tsc.h>

static atomic64_t pvread_test_cs_last;

static u64 pvread_test_cs_read(struct clocksource *cs)
{
	s64 now = rdtsc_ordered();
	s64 last = atomic64_read(&pvread_test_cs_last);

	do {
		if (now <= last)
			return last;
	} while (!atomic64_try_cmpxchg(&pvread_test_cs_last, &last, now));
	return now;
}

static struct clocksource pvread_test_cs = {
	.name = "pvread-test",
	.rating = 1,
	.read = pvread_test_cs_read,
	.mask = CLOCKSOURCE_MASK(63),
	.flags = CLOCK_SOURCE_IS_CONTINUOUS | CLOCK_SOURCE_VALID_FOR_HRES,
	.owner = THIS_MODULE,
};

static int __init pvread_test_cs_init(void)
{
	if (!tsc_khz)
		return -ENODEV;
	atomic64_set(&pvread_test_cs_last, rdtsc_ordered());
	return clocksource_register_khz(&pvread_test_cs, tsc_khz);
}

static void __exit pvread_test_cs_exit(void)
{
	clocksource_unregister(&pvread_test_cs);
}

module_init(pvread_test_cs_init);
module_exit(pvread_test_cs_exit);

MODULE_DESCRIPTION("TSC clocksource for pvread's clocksource-switch tests");
MODULE_LICENSE("GPL");
