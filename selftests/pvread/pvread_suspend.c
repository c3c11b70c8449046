// SPDX-License-Identifier: GPL-2.0
/*
 * Suspend and resume, as far as the machine goes: pm_test "core" runs the
 * whole S3 path -- freezing, devices, the other vCPUs offline, syscore
 * suspend -- and resumes instead of sleeping.  The module's syscore resume
 * hook runs (sysfs resumes), the page comes back to the expected mode and,
 * in line mode, a new line is anchored.  Whether Xen writes the records
 * again is pvread_registered's to say, run after this.  A skip where
 * "mem" is not S3: a Xen domU offers only s2idle, where pm_test is refused
 * and the syscore hooks never run.
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

#define SYS "/sys/class/misc/pvread/"
#define POWER "/sys/power/"

/* Whether the one-line file @path holds @word ("[deep]" holds "deep"). */
static bool has_word(const char *path, const char *word)
{
	char buf[256], *tok, *save;
	FILE *f = fopen(path, "r");
	bool found = false;

	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f))
		for (tok = strtok_r(buf, " []\n", &save); tok && !found;
		     tok = strtok_r(NULL, " []\n", &save))
			found = !strcmp(tok, word);
	fclose(f);
	return found;
}

FIXTURE(suspend) {
};

FIXTURE_SETUP(suspend)
{
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
}

FIXTURE_TEARDOWN(suspend)
{
	pvst_write_file(POWER "pm_test", "none");
}

TEST_F_TIMEOUT(suspend, pm_test_core, 120)
{
	long long r0, r1, a0, a1;
	struct pvread_header h;
	int ret;

	if (!has_word(POWER "state", "mem") || !has_word(POWER "pm_test", "core"))
		SKIP(return, "no S3 test cycle here (/sys/power/state without mem or pm_test without core)");
	if (!access(POWER "mem_sleep", F_OK) && !has_word(POWER "mem_sleep", "deep"))
		SKIP(return, "mem is not S3 here (no deep in /sys/power/mem_sleep: s2idle only, as in a Xen domU)");
	r0 = pvst_read_number(SYS "resumes");
	a0 = pvst_read_number(SYS "line_anchors");
	ASSERT_EQ(0, pvst_write_file(POWER "pm_test", "core"));
	ret = pvst_write_file(POWER "state", "mem");
	pvst_write_file(POWER "pm_test", "none");
	r1 = pvst_read_number(SYS "resumes");
	ksft_print_msg("pm_test core: %s, resumes %lld -> %lld\n",
		       ret ? strerror(-ret) : "resumed", r0, r1);
	EXPECT_EQ(0, ret) TH_LOG("the S3 test cycle did not complete");
	EXPECT_LT(r0, r1) TH_LOG("the module's syscore resume hook did not run");

	EXPECT_TRUE(pvst_wait_expected(30))
		TH_LOG("not back in the expected mode and line state after the resume");
	pvst_snap(&h);
	if (h.mode == PVREAD_MODE_LINE) {
		a1 = pvst_read_number(SYS "line_anchors");
		ksft_print_msg("line_anchors %lld -> %lld\n", a0, a1);
		EXPECT_LT(a0, a1) TH_LOG("line mode, with no line anchored since the resume");
	}
}

PVREAD_XEN_HARNESS_MAIN
