// SPDX-License-Identifier: GPL-2.0
/*
 * In line mode, the line's ns per TSC tick is every registered record's,
 * within 5 %: a line at another rate would drift from the kernel's time
 * at once.  5 % catches a wrong scale (a shift off by one is 100 %)
 * without judging how far the records' own rates spread, which the "# "
 * lines show.  In mode none there is no line: the program is a skip that
 * says so (a failure where the machine expects line mode).
 */
#define _GNU_SOURCE
#include <math.h>

#include "pvread_harness.h"
#include "pvread_page.h"

#define LIMIT_PPM 50000

FIXTURE(line) {
};

FIXTURE_SETUP(line)
{
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
}

FIXTURE_TEARDOWN(line)
{
}

TEST_F(line, rate)
{
	double line_ns, rec_ns, dev, worst = 0;
	unsigned int i, n = 0, worst_cpu = 0;
	struct pvread_header h;

	pvst_snap(&h);
	ASSERT_EQ((uint32_t)PVREAD_MODE_LINE, h.mode)
		TH_LOG("no line in use: mode %s, line %s",
		       pvst_mode_name(h.mode), pvst_line_name(h.line_state));
	/* ns = (d << shift) * mul >> 32; Xen's: (d <<|>> tsc_shift) * mul >> 32 */
	line_ns = h.line.mul * (double)(1ULL << h.line.shift) / 4294967296.0;
	for (i = 0; i < h.nr_records; i++) {
		const volatile struct pvread_pvclock *p = &pvst_rec(i)->pvclock;

		if (!(pvst_rec(i)->state & PVREAD_RECORD_REGISTERED))
			continue;
		rec_ns = p->tsc_to_system_mul / 4294967296.0;
		rec_ns = p->tsc_shift >= 0 ? rec_ns * (1ULL << p->tsc_shift) :
					     rec_ns / (1ULL << -p->tsc_shift);
		dev = (line_ns - rec_ns) / rec_ns * 1e6;
		ksft_print_msg("line: %.6f ns per TSC tick; record %u: %.6f (mul %u shift %d): %+.0f ppm\n",
			       line_ns, i, rec_ns, p->tsc_to_system_mul,
			       p->tsc_shift, dev);
		if (fabs(dev) >= fabs(worst)) {
			worst = dev;
			worst_cpu = i;
		}
		n++;
	}
	ksft_print_msg("line: %u records, worst %+.0f ppm on record %u, limit %d\n",
		       n, worst, worst_cpu, LIMIT_PPM);
	EXPECT_LT(0U, n);
	EXPECT_TRUE(fabs(worst) <= LIMIT_PPM);
}

PVREAD_XEN_LINE_HARNESS_MAIN("line to compare with the records")
