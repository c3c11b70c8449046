// SPDX-License-Identifier: GPL-2.0
/*
 * The clocksource switched away from xen and back, to every other one the
 * kernel offers (pvread_test_cs.ko adds one where there is none): the page
 * says mode none the moment the switch returns and stays so over updates,
 * the library takes the system call; back on xen, the xen flag at once,
 * the expected mode after the warm-up, the library fast again in line
 * mode (in mode none still the system call, for reason "mode").  Leaves
 * the clocksource on xen.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

#define CS_DIR "/sys/devices/system/clocksource/clocksource0/"

FIXTURE(clocksource) {
	char others[256];	/* the clocksources but xen, space-separated */
};

FIXTURE_SETUP(clocksource)
{
	char all[256] = "", *tok, *save;
	size_t used = 0;
	FILE *f;

	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
	f = fopen(CS_DIR "available_clocksource", "r");
	ASSERT_NE(NULL, f);
	if (!fgets(all, sizeof(all), f))
		all[0] = '\0';
	fclose(f);
	self->others[0] = '\0';
	for (tok = strtok_r(all, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save))
		if (strcmp(tok, "xen"))
			used += snprintf(self->others + used,
					 sizeof(self->others) - used, "%s%s",
					 used ? " " : "", tok);
	ksft_print_msg("switching to: %s\n", self->others);
}

FIXTURE_TEARDOWN(clocksource)
{
	pvst_write_file(CS_DIR "current_clocksource", "xen");
}

TEST_F_TIMEOUT(clocksource, away_and_back, 300)
{
	int expect = pvst_expect_mode(), expect_line = pvst_expect_line();
	struct pvread_header h0, h;
	struct pvread_stats st0, st1;
	struct pvread_info info;
	struct timespec ts;
	char *cs, *save;
	int ret;

	if (!self->others[0])
		SKIP(return, "no other clocksource available");
	for (cs = strtok_r(self->others, " ", &save); cs;
	     cs = strtok_r(NULL, " ", &save)) {
		EXPECT_TRUE(pvst_wait_settled(expect, expect_line, 20))
			TH_LOG("%s: not in the expected mode before the switch", cs);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);

		pvst_snap(&h0);
		ret = pvst_write_file(CS_DIR "current_clocksource", cs);
		pvst_snap(&h);
		ksft_print_msg("%s: %s, mode %s, flags %#x, %llu update(s)\n",
			       cs, ret ? strerror(-ret) : "switched",
			       pvst_mode_name(h.mode), h.flags,
			       (unsigned long long)(h.updates - h0.updates));
		EXPECT_EQ(0, ret);
		EXPECT_TRUE(h.mode == PVREAD_MODE_NONE &&
			    !(h.flags & PVREAD_FLAG_XEN_CLOCKSOURCE) &&
			    h.updates > h0.updates)
			TH_LOG("%s: not mode none when the switch returned", cs);

		pvst_sleep(1.5);
		h0 = h;
		pvst_snap(&h);
		pvread_get_info(&info);
		pvread_get_stats(&st0);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_get_stats(&st1);
		ksft_print_msg("%s: %llu updates in 1.5 s, mode %s\n", cs,
			       (unsigned long long)(h.updates - h0.updates),
			       pvst_mode_name(h.mode));
		EXPECT_TRUE(h.mode == PVREAD_MODE_NONE && h.updates > h0.updates &&
			    !info.fast && st1.slow == st0.slow + 1)
			TH_LOG("%s: must stay none over updates, the library taking the syscall",
			       cs);

		ret = pvst_write_file(CS_DIR "current_clocksource", "xen");
		pvst_snap(&h);
		ksft_print_msg("back to xen: mode %s\n", pvst_mode_name(h.mode));
		EXPECT_EQ(0, ret);
		EXPECT_TRUE((h.flags & PVREAD_FLAG_XEN_CLOCKSOURCE) &&
			    h.mode == PVREAD_MODE_NONE)
			TH_LOG("back to xen from %s: the xen flag at once, mode none during the warm-up",
			       cs);

		EXPECT_TRUE(pvst_wait_settled(expect, expect_line, 20))
			TH_LOG("back to xen from %s: not the expected mode", cs);
		pvst_snap(&h);
		pvread_get_stats(&st0);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_get_stats(&st1);
		/* Fast reads are not counted: fast if "slow" stayed. */
		if (h.mode == PVREAD_MODE_LINE) {
			EXPECT_EQ(st0.slow, st1.slow)
				TH_LOG("back to xen from %s: the library not fast again", cs);
		} else {
			EXPECT_TRUE(st1.slow == st0.slow + 1 &&
				    st1.slow_by_reason[PVREAD_SLOW_MODE] ==
				    st0.slow_by_reason[PVREAD_SLOW_MODE] + 1)
				TH_LOG("back to xen from %s, mode %s: the read not the kernel's for reason \"mode\"",
				       cs, pvst_mode_name(h.mode));
		}
	}
}

PVREAD_XEN_HARNESS_MAIN
