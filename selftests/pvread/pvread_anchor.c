// SPDX-License-Identifier: GPL-2.0
/*
 * A TSC that steps back between the module's look at the records and the
 * anchor of a new line must not start the line ahead of the kernel: lines
 * never go back, and the library keeps readings at or above the line, so
 * one anchor far ahead would hold every process's clock in the future.
 * (The module's unsigned arithmetic put such a line about 195 years
 * ahead for a 500-tick step.)
 *
 * test_tsc_skew and tsc_check end the line (a TSC warp); then
 * test_anchor_tsc_back makes the anchor of the next line, once the check
 * comes back clean, read the TSC 500 ticks below the last one its
 * measurement read.  The module must refuse
 * that anchor (debugfs anchors_rejected) and anchor the one after; the
 * line then stays within the published bound of the kernel, and the
 * bound stays below a second.  Needs line mode and debugfs.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

#define SYS "/sys/class/misc/pvread/"
#define PARAMS "/sys/module/pvread/parameters/"
#define DEBUGFS "/sys/kernel/debug/pvread/"
#define STEP_BACK "500"
#define WARP_SKEW "100000000"

static bool wait_mode(uint32_t mode, bool want, double secs)
{
	int64_t t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	struct pvread_header h;

	do {
		pvst_snap(&h);
		if ((h.mode == mode) == want)
			return true;
		usleep(50000);
	} while (pvst_elapsed(t0) < secs);
	return false;
}

FIXTURE(anchor) {
	int unused;
};

FIXTURE_SETUP(anchor)
{
	struct pvread_header h;

	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
	pvst_snap(&h);
	if (h.mode != PVREAD_MODE_LINE && !wait_mode(PVREAD_MODE_LINE, true, 30))
		SKIP(return, "no line mode here (mode %s, line %s)",
		     pvst_mode_name(h.mode), pvst_line_name(h.line_state));
}

FIXTURE_TEARDOWN(anchor)
{
	pvst_write_file(PARAMS "test_anchor_tsc_back", "0");
	pvst_write_file(PARAMS "test_tsc_skew", "0");
	pvst_write_file(SYS "tsc_check", "1");
}

TEST_F_TIMEOUT(anchor, tsc_back, 120)
{
	long long r0, r1, a0, a1, taken;
	struct pvread_header h;
	struct pvst_bracket b;
	int64_t worst = 0, t0;
	long fast;
	int i;

	r0 = pvst_read_number(DEBUGFS "anchors_rejected");
	ASSERT_LE(0, r0) TH_LOG("no " DEBUGFS "anchors_rejected (debugfs mounted?)");
	ASSERT_EQ(0, pvst_write_file(PARAMS "test_tsc_skew", WARP_SKEW));
	ASSERT_EQ(0, pvst_write_file(SYS "tsc_check", "1"));
	ASSERT_TRUE(wait_mode(PVREAD_MODE_LINE, false, 10))
		TH_LOG("a TSC warp did not end the line");
	ASSERT_EQ(0, pvst_write_file(PARAMS "test_anchor_tsc_back", STEP_BACK));
	a0 = pvst_read_number(SYS "line_anchors");
	ASSERT_EQ(0, pvst_write_file(PARAMS "test_tsc_skew", "0"));
	ASSERT_EQ(0, pvst_write_file(SYS "tsc_check", "1"));
	ASSERT_TRUE(wait_mode(PVREAD_MODE_LINE, true, 30))
		TH_LOG("no line after a clean check");
	taken = pvst_read_number(PARAMS "test_anchor_tsc_back");
	r1 = pvst_read_number(DEBUGFS "anchors_rejected");
	a1 = pvst_read_number(SYS "line_anchors");
	ksft_print_msg("anchors %lld -> %lld, rejected %lld -> %lld, step back left %lld\n",
		       a0, a1, r0, r1, taken);
	EXPECT_EQ(0, taken) TH_LOG("no anchor took the step back");
	EXPECT_EQ(r0 + 1, r1) TH_LOG("the anchor whose TSC went back was not rejected");

	/* Every clock within the bound, and nothing a second off. */
	EXPECT_EQ(0, pvst_bounded("after the step back", 2, &fast));
	t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	for (i = 0; pvst_elapsed(t0) < 1; i++) {
		pvst_bracket(CLOCK_MONOTONIC, &b);
		worst = b.dev > worst ? b.dev : worst;
	}
	pvst_snap(&h);
	ksft_print_msg("CLOCK_MONOTONIC: %d reads, worst %lld ns outside the system calls; bound %llu ns, %ld of the reads above fast\n",
		       i, (long long)worst,
		       (unsigned long long)h.error_bound_ns, fast);
	EXPECT_LT(worst, 1000000000LL);
	EXPECT_LT(h.error_bound_ns, 1000000000ULL);
	EXPECT_LT(0, fast) TH_LOG("the line was never read");
}

PVREAD_XEN_HARNESS_MAIN
