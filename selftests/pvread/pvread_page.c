// SPDX-License-Identifier: GPL-2.0
/*
 * pvread_page: the page as the guest scripts need it, not a test.
 *
 *   pvread_page                   the header, the line and every record,
 *                                 on "# " lines (for the log)
 *   pvread_page wait-mode MODE[/LINE] SEC
 *                                 wait up to SEC seconds for the page's
 *                                 mode to be MODE (none or line) and, with
 *                                 /LINE, its line state LINE (active,
 *                                 rates, off, ...); exit 0 when it is, 1
 *                                 if not.  Mode none with line state
 *                                 unchecked or waiting (a load's or a
 *                                 resume's wait) is none/unchecked or
 *                                 none/waiting, never none/rates.
 *
 * Exit 2 on bad usage or when /dev/pvread cannot be mapped.
 */
#define _GNU_SOURCE
#include "pvread_page.h"

static void print_page(void)
{
	struct pvread_header h;
	bool first = true;
	unsigned int i, j;

	pvst_snap(&h);
	printf("# mode=%u flags=%#x records=%u registered=%u updates=%llu spread_ns=%llu bound_ns=%llu mult=%u shift=%u line_state=%u tsc_warp=%llu disruptions=%llu\n",
	       h.mode, h.flags, h.nr_records, h.nr_registered,
	       (unsigned long long)h.updates,
	       (unsigned long long)h.spread_ns,
	       (unsigned long long)h.error_bound_ns, h.tk.mult, h.tk.shift,
	       h.line_state, (unsigned long long)h.tsc_warp,
	       (unsigned long long)h.disruptions);
	printf("# line: mode %s, line %s, anchors=%llu tsc_timestamp=%llu tsc_span=%llu mul=%u shift=%u raw_mul=%u raw_shift=%u\n",
	       pvst_mode_name(h.mode), pvst_line_name(h.line_state),
	       (unsigned long long)h.line.anchors,
	       (unsigned long long)h.line.tsc_timestamp,
	       (unsigned long long)h.line.tsc_span, h.line.mul, h.line.shift,
	       h.line.raw_mul, h.line.raw_shift);
	printf("# registered_list=");
	for (i = 0; i < h.nr_records; i++) {
		if (!(pvst_rec(i)->state & PVREAD_RECORD_REGISTERED))
			continue;
		for (j = i; j + 1 < h.nr_records &&
		     (pvst_rec(j + 1)->state & PVREAD_RECORD_REGISTERED); j++)
			;
		printf("%s%u", first ? "" : ",", i);
		if (j > i)
			printf("-%u", j);
		first = false;
		i = j;
	}
	printf("\n");
	for (i = 0; i < h.nr_records; i++)
		printf("# record %u: state=%u vcpu=%u version=%u flags=%#x tsc_timestamp=%llu mul=%u shift=%d\n",
		       i, pvst_rec(i)->state, pvst_rec(i)->xen_vcpu_id,
		       pvst_rec(i)->pvclock.version, pvst_rec(i)->pvclock.flags,
		       (unsigned long long)pvst_rec(i)->pvclock.tsc_timestamp,
		       pvst_rec(i)->pvclock.tsc_to_system_mul,
		       pvst_rec(i)->pvclock.tsc_shift);
}

/*
 * Seconds until the page's mode is @mode and (@line >= 0) its line state
 * @line, or -1 after @timeout.
 */
static double wait_mode(uint32_t mode, int line, double timeout)
{
	int64_t t0 = pvst_sys_ns(CLOCK_MONOTONIC);
	struct pvread_header h;

	for (;;) {
		pvst_snap(&h);
		if (h.mode == mode &&
		    (line < 0 || h.line_state == (uint32_t)line))
			return pvst_elapsed(t0);
		if (pvst_elapsed(t0) > timeout)
			return -1;
		pvst_sleep(0.02);
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: pvread_page [wait-mode MODE[/LINE] SEC]\n"
		"  MODE: none or line; LINE: active, off, unvouched, warp, unchecked,\n"
		"  stable, waiting, rates or pti\n");
	return 2;
}

int main(int argc, char **argv)
{
	int m = PVST_NR_MODES, l = -1;
	char mode[32], *slash;
	double t;

	if (argc != 1 && (argc != 4 || strcmp(argv[1], "wait-mode")))
		return usage();
	if (argc == 4) {
		snprintf(mode, sizeof(mode), "%s", argv[2]);
		slash = strchr(mode, '/');
		if (slash) {
			*slash++ = '\0';
			for (l = 0; l < PVST_NR_LINES; l++)
				if (!strcmp(slash, pvst_line_names[l]))
					break;
			if (l == PVST_NR_LINES)
				return usage();
		}
		for (m = 0; m < PVST_NR_MODES; m++)
			if (!strcmp(mode, pvst_mode_names[m]))
				break;
		if (m == PVST_NR_MODES)
			return usage();
	}
	if (!pvst_map()) {
		fprintf(stderr, "pvread_page: map %s: %s\n", PVREAD_DEVICE,
			strerror(errno));
		return 2;
	}
	if (argc == 1) {
		print_page();
		return 0;
	}
	t = wait_mode(m, l, atof(argv[3]));
	printf("# mode %s %s after %.2f s\n", argv[2],
	       t < 0 ? "not reached" : "reached", t);
	return t < 0;
}
