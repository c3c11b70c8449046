// SPDX-License-Identifier: GPL-2.0
/*
 * The page settles in the expected mode (PVREAD_EXPECT_MODE; any fast
 * mode by default) and the library reads from it, within 20 s of the
 * module's load: the bound needs seconds of history, the line the
 * cross-vCPU TSC check.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"

FIXTURE(mode) {
};

FIXTURE_SETUP(mode)
{
}

FIXTURE_TEARDOWN(mode)
{
}

TEST_F(mode, expected_and_fast)
{
	int expect = pvst_expect_mode();

	EXPECT_TRUE(pvst_wait_fast(expect, 20))
		TH_LOG("not in mode %s with the library fast after 20 s",
		       pvst_expect_name(expect));
}

PVREAD_XEN_HARNESS_MAIN
