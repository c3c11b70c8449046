// SPDX-License-Identifier: GPL-2.0
/*
 * The conversion the page publishes is the kernel's, to the nanosecond:
 * 10000 times, every clock at one clocksource value by the page's
 * timekeeper against the kernel's own clocks there
 * (PVREAD_IOC_KERNEL_TIME), from the same update.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

FIXTURE(mirror) {
};

FIXTURE_SETUP(mirror)
{
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
}

FIXTURE_TEARDOWN(mirror)
{
}

TEST_F_TIMEOUT(mirror, every_clock, 120)
{
	struct pvread_header h;

	pvst_snap(&h);
	ksft_print_msg("kernel %s, mode %s\n",
		       h.flags & PVREAD_FLAG_XEN_CLOCKSOURCE ? "on xen" : "not on xen",
		       pvst_mode_name(h.mode));
	EXPECT_TRUE(pvst_mirror_exact("mirror", 10000));
}

PVREAD_XEN_HARNESS_MAIN
