// SPDX-License-Identifier: LGPL-2.1-or-later
/* pvread-status: what libpvread sees, and how it compares with the kernel. */
#define _GNU_SOURCE
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "pvread.h"

static const char *mode_name(uint32_t mode)
{
	switch (mode) {
	case PVREAD_MODE_NONE:
		return "none (every read is a syscall)";
	case PVREAD_MODE_LINE:
		return "line (one line serves every CPU)";
	default:
		return "unknown";
	}
}

/*
 * header.line_state, as the module's sysfs attribute "line" names it, and
 * why there is no line.
 */
static const struct {
	const char *name, *why;
} line_states[] = {
	[PVREAD_LINE_ACTIVE] = { "active", "one line serves every CPU" },
	[PVREAD_LINE_OFF] = { "off", "module parameter line=0" },
	[PVREAD_LINE_UNVOUCHED] = { "unvouched",
		"nobody vouches for one TSC across vCPUs (Xen's CPUID time leaf does not; module parameter tsc_reliable=1 would)" },
	[PVREAD_LINE_WARP] = { "warp",
		"the module saw the TSC go back across vCPUs" },
	[PVREAD_LINE_UNCHECKED] = { "unchecked",
		"the TSC check across vCPUs has not run yet (load, resume)" },
	[PVREAD_LINE_STABLE] = { "stable",
		"Xen set the stable bit: the kernel's vDSO reads pvclock without a system call here, so libc is the fast answer" },
	[PVREAD_LINE_WAITING] = { "waiting",
		"no measured history yet (after a load, a resume or a switch to the xen clocksource)" },
	[PVREAD_LINE_RATES] = { "rates",
		"the vCPUs' records convert at rates apart (Xen calibrates each pCPU on its own), which no line can follow" },
	[PVREAD_LINE_PTI] = { "pti",
		"under KPTI this Xen (before 4.18) skips updates of the module's copies of the vCPUs' records while user code runs, and the module's refresh of them is not active (see refresh below)" },
};

static const char *line_state_name(uint32_t state)
{
	return state < sizeof(line_states) / sizeof(line_states[0]) &&
	       line_states[state].name ? line_states[state].name : "unknown";
}

static const char *line_state_why(uint32_t state)
{
	return state < sizeof(line_states) / sizeof(line_states[0]) &&
	       line_states[state].why ? line_states[state].why : "?";
}

/* The library did not map the device: say why, as far as can be seen. */
static void why_unmapped(void)
{
	const struct pvread_header *h;
	int fd = open(PVREAD_DEVICE, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		printf("pvread: %s: %s (is pvread.ko loaded?): every read is libc's clock_gettime\n",
		       PVREAD_DEVICE, strerror(errno));
		return;
	}
	h = mmap(NULL, sizeof(*h), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED) {
		printf("pvread: %s cannot be mapped: %s: every read is libc's clock_gettime\n",
		       PVREAD_DEVICE, strerror(errno));
		return;
	}
	if (h->magic != PVREAD_MAGIC)
		printf("pvread: %s is not a pvread page (magic %#x): every read is libc's clock_gettime\n",
		       PVREAD_DEVICE, h->magic);
	else if (h->abi_version != PVREAD_ABI_VERSION)
		printf("pvread: %s has ABI version %u, this library reads %u: every read is libc's clock_gettime (install a module and a library of one release)\n",
		       PVREAD_DEVICE, h->abi_version, PVREAD_ABI_VERSION);
	else
		printf("pvread: %s not mapped (the page's layout was refused): every read is libc's clock_gettime\n",
		       PVREAD_DEVICE);
	munmap((void *)h, sizeof(*h));
}

#ifndef PVREAD_SYSFS
#define PVREAD_SYSFS "/sys/class/misc/pvread/"
#endif

/* The module's sysfs attribute @name, its first line, in @buf; 0 if absent. */
static int sysfs_read(const char *name, char *buf, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), PVREAD_SYSFS "%s", name);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 1;
}

/* The module's refresh states (sysfs "refresh"), and what each means. */
static const struct {
	const char *name, *why;
} refresh_states[] = {
	{ "off", "not needed here (a PV guest, areas by physical address, or no KPTI)" },
	{ "active", "each CPU re-registers its own time area every jiffy: Xen drops writes of the records while user code runs" },
	{ "waiting", "an online CPU has not refreshed its record since it registered: no line yet" },
	{ "failed", "Xen refused a re-registration: no line (line state pti)" },
	{ "nohz_full", "a CPU may run without the tick, unrefreshed: no line (line state pti)" },
	{ "lag", "a refresh found a record, or the kernel's clock, more than 10 us off in the last 16 s: no line (line state pti)" },
};

/*
 * Where the module keeps the records current itself (HVM or PVH under
 * KPTI on a Xen before 4.18), its refresh's state and figures; nothing
 * from a module without them.
 */
static void print_refresh(void)
{
	char state[32], n[8][32];
	static const char *const names[] = {
		"refreshes", "refresh_missed", "refresh_lag_ns",
		"refresh_lag_max_ns", "refresh_lag_age_ms", "refresh_cost_ns",
		"refresh_cost_max_ns", "refresh_period_us",
	};
	const char *why = "?";
	unsigned int i;

	if (!sysfs_read("refresh", state, sizeof(state)))
		return;
	for (i = 0; i < sizeof(refresh_states) / sizeof(refresh_states[0]); i++)
		if (!strcmp(state, refresh_states[i].name))
			why = refresh_states[i].why;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!sysfs_read(names[i], n[i], sizeof(n[i])))
			snprintf(n[i], sizeof(n[i]), "?");
	printf("refresh:         %s: %s\n", state, why);
	printf("refreshes:       %s (each CPU every %s us); Xen's writes the records had missed: %s\n",
	       n[0], n[7], n[1]);
	printf("refresh lag:     %s ns worst in the bound's window (16 s), %s ns since load (%s%s)\n",
	       n[2], n[3], strcmp(n[4], "-1") ? n[4] : "none yet",
	       strcmp(n[4], "-1") ? " ms ago" : "");
	printf("refresh cost:    %s ns mean, %s ns largest\n", n[5], n[6]);
}

static int64_t ns_of(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

/* Why the one slow read between @st0 and @st went to the kernel. */
static const char *slow_reason(const struct pvread_stats *st0,
			       const struct pvread_stats *st)
{
	unsigned int i;

	for (i = 0; i < PVREAD_SLOW_NR_REASONS; i++)
		if (st->slow_by_reason[i] != st0->slow_by_reason[i])
			return pvread_slow_reason_name(i);
	return "?";
}

int main(int argc, char **argv)
{
	struct timespec k0, lib, k1;
	struct pvread_info info;
	struct pvread_stats st0, st;
	unsigned int cpu;
	int fast;
	double wait = 0;
	int opt, ret;

	while ((opt = getopt(argc, argv, "w:")) != -1) {
		if (opt != 'w') {
			fprintf(stderr, "usage: pvread-status [-w SECONDS]\n"
				"  -w  first wait up to SECONDS for the fast path\n");
			return 2;
		}
		wait = atof(optarg);
	}
	/* A freshly loaded module needs a few updates of history first. */
	for (ret = pvread_get_info_size(&info, sizeof(info)); !ret && !info.fast && wait > 0;
	     wait -= 0.1) {
		usleep(100000);
		ret = pvread_get_info_size(&info, sizeof(info));
	}
	if (!info.mapped) {
		why_unmapped();
		return 1;
	}
	if (ret) {
		printf("pvread: the page's header is being written and did not settle (%s): every read is libc's clock_gettime meanwhile\n",
		       strerror(errno));
		return 1;
	}
	printf("mode:            %s\n", mode_name(info.mode));
	printf("line:            %s (%u): %s\n", line_state_name(info.line_state),
	       info.line_state, line_state_why(info.line_state));
	printf("line anchors:    %llu\n", (unsigned long long)info.line_anchors);
	printf("tsc warp:        %llu ticks\n", (unsigned long long)info.tsc_warp);
	printf("disruptions:     %llu (resumes since load: suspend, restore, migration)\n",
	       (unsigned long long)info.disruptions);
	printf("flags:          %s%s%s%s%s\n",
	       info.flags & PVREAD_FLAG_XEN_CLOCKSOURCE ? " xen-clocksource" : "",
	       info.flags & PVREAD_FLAG_TSC_STABLE ? " tsc-stable" : "",
	       info.flags & PVREAD_FLAG_CPU0_OWNED_BY_KERNEL ? " cpu0-vdso" : "",
	       info.flags & PVREAD_FLAG_TSC_EMULATED ? " tsc-emulated" : "",
	       info.flags & PVREAD_FLAG_HOST_TSC_RELIABLE ?
	       " host-tsc-reliable" : "");
	printf("records:         %u registered of %u\n", info.nr_registered,
	       info.nr_records);
	printf("updates:         %llu\n", (unsigned long long)info.updates);
	printf("spread:          %llu ns\n", (unsigned long long)info.spread_ns);
	printf("error bound:     %llu ns (an estimate, measured and not proven: pvread(3))\n",
	       (unsigned long long)info.error_bound_ns);
	print_refresh();
	printf("tolerance:       %llu ns (PVREAD_MAX_ERROR_NS)\n",
	       (unsigned long long)info.tolerance_ns);
	printf("fast path:       %s\n", info.fast ? "yes" : "no");
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &k0);
	printf("last update:     %.3f ms ago\n",
	       (ns_of(&k0) - info.last_update_ns) / 1e6);
	printf("%-4s %-5s %-10s %-10s %-20s %-20s %-10s %-5s %s\n", "cpu",
	       "vcpu", "state", "version", "tsc_timestamp", "system_time",
	       "mul", "shift", "flags");
	for (cpu = 0; cpu < info.nr_records; cpu++) {
		struct pvread_record rec;

		if (pvread_get_record(cpu, &rec)) {
			if (errno == EPERM) {
				printf("(the records need root: /dev/pvread maps them only for CAP_SYS_ADMIN)\n");
				break;
			}
			printf("%-4u (%s)\n", cpu, strerror(errno));
			continue;
		}
		if (!(rec.state & PVREAD_RECORD_REGISTERED)) {
			printf("%-4u -     unregistered\n", cpu);
			continue;
		}
		printf("%-4u %-5u %-10s %-10u %-20llu %-20llu %-10u %-5d %#x%s\n",
		       cpu, rec.xen_vcpu_id, "registered", rec.pvclock.version,
		       (unsigned long long)rec.pvclock.tsc_timestamp,
		       (unsigned long long)rec.pvclock.system_time,
		       rec.pvclock.tsc_to_system_mul, rec.pvclock.tsc_shift,
		       rec.pvclock.flags,
		       rec.pvclock.flags & 1 ? " (tsc-stable)" : "");
	}

	pvread_get_stats(&st0);
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &k0);
	pvread_clock_gettime(CLOCK_MONOTONIC, &lib);
	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &k1);
	pvread_get_stats(&st);
	/* Fast reads are not counted: the read was fast if "slow" stayed. */
	fast = st.slow == st0.slow;
	printf("CLOCK_MONOTONIC: kernel %lld.%09ld, pvread %lld.%09ld (%s%s), kernel %lld.%09ld\n",
	       (long long)k0.tv_sec, k0.tv_nsec, (long long)lib.tv_sec,
	       lib.tv_nsec, fast ? "fast" : "syscall: ",
	       fast ? "" : slow_reason(&st0, &st),
	       (long long)k1.tv_sec, k1.tv_nsec);
	printf("                 pvread - kernel before: %lld ns, kernel after - pvread: %lld ns\n",
	       (long long)(ns_of(&lib) - ns_of(&k0)),
	       (long long)(ns_of(&k1) - ns_of(&lib)));
	return 0;
}
