// SPDX-License-Identifier: GPL-2.0
/*
 * The page settles in the expected mode and line state (PVREAD_EXPECT_MODE
 * and PVREAD_EXPECT_LINE, e.g. none and rates, or line and active; either
 * by default) within 20 s of the module's load, and the library agrees:
 * in line mode it reads from the page, in mode none it sends every read to
 * the kernel.  The bound needs seconds of history, the line the
 * cross-vCPU TSC check; a mode none for the load's wait (line state
 * unchecked or waiting) is not settled.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

FIXTURE(mode) {
};

FIXTURE_SETUP(mode)
{
}

FIXTURE_TEARDOWN(mode)
{
}

TEST_F(mode, expected)
{
	int expect = pvst_expect_mode(), expect_line = pvst_expect_line();

	EXPECT_TRUE(pvst_wait_settled(expect, expect_line, 20))
		TH_LOG("not settled in mode %s, line %s, with the library agreeing, after 20 s",
		       pvst_expect_name(expect),
		       pvst_expect_line_name(expect_line));
}

#define PVCLOCK_TSC_STABLE_BIT 1

/*
 * The header's account of itself: line state active exactly in line mode;
 * the TSC_STABLE flag exactly when every registered record has Xen's bit;
 * vCPU 0's record not ours while the kernel's vDSO owns its area.
 */
TEST_F(mode, header_consistent)
{
	unsigned int i, registered = 0, stable = 0;
	const struct pvread_header *page;
	struct pvread_header h;
	bool cpu0_kernel;

	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
	pvst_wait_expected(20);
	pvst_snap(&h);
	page = (const void *)pvst_map();
	cpu0_kernel = h.flags & PVREAD_FLAG_CPU0_OWNED_BY_KERNEL;
	for (i = 0; i < h.nr_records; i++) {
		if (!(pvst_rec(i)->state & PVREAD_RECORD_REGISTERED))
			continue;
		registered++;
		if (pvst_rec(i)->pvclock.flags & PVCLOCK_TSC_STABLE_BIT)
			stable++;
	}
	ksft_print_msg("mode %s (%u), line %s (%u), flags %#x; %u records registered, %u with PVCLOCK_TSC_STABLE_BIT; vCPU 0's area %s; %llu disruptions\n",
		       pvst_mode_name(h.mode), h.mode,
		       pvst_line_name(h.line_state), h.line_state, h.flags,
		       registered, stable,
		       cpu0_kernel ? "owned by the kernel's vDSO" : "ours",
		       (unsigned long long)page->disruptions);
	EXPECT_TRUE(h.mode == PVREAD_MODE_NONE || h.mode == PVREAD_MODE_LINE)
		TH_LOG("mode %u: ABI 4 has none (0) and line (1) only", h.mode);
	EXPECT_EQ(h.mode == PVREAD_MODE_LINE,
		  h.line_state == PVREAD_LINE_ACTIVE)
		TH_LOG("line_state must be active exactly when the mode is line");
	EXPECT_EQ(registered && stable == registered,
		  !!(h.flags & PVREAD_FLAG_TSC_STABLE))
		TH_LOG("the TSC_STABLE flag must say whether every registered record has Xen's bit");
	EXPECT_FALSE(cpu0_kernel &&
		     (pvst_rec(0)->state & PVREAD_RECORD_REGISTERED))
		TH_LOG("vCPU 0's record is ours while the kernel owns its area");
}

PVREAD_XEN_HARNESS_MAIN
