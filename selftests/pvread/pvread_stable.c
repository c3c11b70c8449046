// SPDX-License-Identifier: GPL-2.0
/*
 * The stable-mode decision, as far as Xen shows it: stable mode (one
 * record for every vCPU) only when Xen sets PVCLOCK_TSC_STABLE_BIT in
 * every registered record and vCPU 0's area is the kernel's, whose vDSO
 * reads it; otherwise the expected mode (PVREAD_EXPECT_MODE).
 */
#define _GNU_SOURCE
#include "pvread_harness.h"
#include "pvread_page.h"

#define PVCLOCK_TSC_STABLE_BIT 1

FIXTURE(stable) {
	struct pvread_header h;
	unsigned int registered, stable;	/* records; with Xen's bit */
	bool cpu0_kernel;
};

FIXTURE_SETUP(stable)
{
	unsigned int i;

	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
	pvst_snap(&self->h);
	self->cpu0_kernel = self->h.flags & PVREAD_FLAG_CPU0_OWNED_BY_KERNEL;
	self->registered = self->stable = 0;
	for (i = 0; i < self->h.nr_records; i++) {
		if (!(pvst_rec(i)->state & PVREAD_RECORD_REGISTERED))
			continue;
		self->registered++;
		if (pvst_rec(i)->pvclock.flags & PVCLOCK_TSC_STABLE_BIT)
			self->stable++;
	}
	ksft_print_msg("%u records registered, %u with PVCLOCK_TSC_STABLE_BIT; vCPU 0's area %s\n",
		       self->registered, self->stable,
		       self->cpu0_kernel ? "owned by the kernel's vDSO" : "ours");
	ksft_print_msg("mode %s (%u), line %s (%u), stable_record %u; expected mode %s\n",
		       pvst_mode_name(self->h.mode), self->h.mode,
		       pvst_line_name(self->h.line_state), self->h.line_state,
		       self->h.stable_record,
		       pvst_expect_name(pvst_expect_mode()));
}

FIXTURE_TEARDOWN(stable)
{
}

TEST_F(stable, decision)
{
	const struct pvread_header *h = &self->h;
	bool flag = h->flags & PVREAD_FLAG_TSC_STABLE;

	EXPECT_EQ(self->registered && self->stable == self->registered, flag)
		TH_LOG("the TSC_STABLE flag must say whether every registered record has Xen's bit");
	EXPECT_FALSE(self->cpu0_kernel &&
		     (pvst_rec(0)->state & PVREAD_RECORD_REGISTERED))
		TH_LOG("vCPU 0's record is ours while the kernel owns its area");
	if (h->mode == PVREAD_MODE_STABLE) {
		EXPECT_TRUE(self->cpu0_kernel && flag &&
			    h->stable_record < h->nr_records &&
			    (pvst_rec(h->stable_record)->state &
			     PVREAD_RECORD_REGISTERED))
			TH_LOG("mode stable must name a registered record, with the flag and vCPU 0's area the kernel's");
	} else {
		EXPECT_TRUE(!(self->cpu0_kernel && flag) &&
			    pvst_mode_ok(pvst_expect_mode(), h->mode))
			TH_LOG("without the stable bit and a kernel-owned vCPU 0, the expected mode");
	}
	EXPECT_EQ(h->mode == PVREAD_MODE_LINE,
		  h->line_state == PVREAD_LINE_ACTIVE)
		TH_LOG("line_state must be active exactly when the mode is line");
}

/* Stable mode, where Xen allows it: published and read. */
TEST_F(stable, published_and_read)
{
	long fast, beyond;

	if (!self->stable)
		SKIP(return, "no record has PVCLOCK_TSC_STABLE_BIT (Xen sets it only with an invariant TSC, never under QEMU TCG)");
	if (self->h.mode != PVREAD_MODE_STABLE)
		SKIP(return, "%s", self->cpu0_kernel ?
		     "the bit is there, but vCPU 0's area is the kernel's" :
		     "the bit is there, but vCPU 0's area is not the kernel's (the kernel did not see the bit at boot)");
	beyond = pvst_bounded("stable mode", 1, &fast);
	EXPECT_EQ(0, beyond);
	EXPECT_LT(0, fast);
}

PVREAD_XEN_HARNESS_MAIN
