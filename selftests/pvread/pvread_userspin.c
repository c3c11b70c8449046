// SPDX-License-Identifier: GPL-2.0
/*
 * The line stays within the published bound of the kernel's clock while a
 * vCPU runs nothing but user code for seconds.
 *
 * In an HVM or PVH guest under KPTI on a Xen before 4.18 (time areas by
 * virtual address) Xen drops the writes of a record that fall while its
 * vCPU runs user code: a vCPU that makes no system call leaves its record
 * standing on an old segment, and the module measures the records, the
 * bound and the line from it.  There the module re-registers each CPU's
 * own area every jiffy from a timer of that CPU (sysfs refresh active),
 * which makes Xen write the record afresh from kernel mode, and folds the
 * lag it finds into the bound (kmod/README.md).  This is the test of that
 * claim as a program sees it; elsewhere it holds as well, and passes.
 *
 * For each online vCPU i in turn:
 *  - a spinner, a process pinned to vCPU i, runs user code for
 *    PVREAD_TEST_SPIN_S seconds (default 15) with no system call in its
 *    loop: it reads the TSC and CLOCK_MONOTONIC through libpvread (no
 *    system call in line mode), and its readings must never go back; its
 *    end is a TSC deadline, the TSC's rate measured before;
 *  - meanwhile a comparer, pinned to vCPU (i + 1) % n (with one vCPU,
 *    unpinned: they take turns), reads CLOCK_MONOTONIC through libpvread
 *    between two clock_gettime system calls and counts the readings
 *    outside [before - bound, after + bound], the bound the page's header
 *    said before and after the read (the larger), the largest distance
 *    outside the bracket, and how many of its reads the page answered;
 *  - at its spin's end the spinner brackets its own reads the same way
 *    on vCPU i, the first right after the spin: the kernel's clock on the
 *    very vCPU whose record may have stood still, against the line.
 * Expected: no reading beyond the bound on either side, at least 90 % of
 * the comparer's and the spinner's reads from the page, no step back.  In
 * mode none (no line) the program is a skip that says why.  The module's
 * refresh figures (sysfs refresh, refreshes, refresh_missed,
 * refresh_lag_ns, refresh_lag_max_ns, refresh_cost_ns) are printed before
 * and after each vCPU's spin, "refresh: absent" on a module without them.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "pvread_harness.h"
#include "pvread_page.h"

#define SPIN_S		15	/* default; PVREAD_TEST_SPIN_S */
#define OWN_BRACKETS	200	/* the spinner's own, after its spin */
#define SHOWN		5	/* readings beyond the bound printed */
#define SYSFS		"/sys/class/misc/pvread/"

/* One bracketed side's figures: the comparer's, or the spinner's own. */
struct side {
	long reads, fast, beyond;
	int64_t worst;		/* largest distance outside the bracket */
	int64_t first;		/* the first read's distance (spinner's own) */
	uint64_t bound_min, bound_max;
	char shown[SHOWN][160];
};

struct shared {
	_Atomic int ready;	/* children set up (each adds 1) */
	_Atomic int go;
	_Atomic int spun;	/* the spinner's spin is over */
	struct {
		long reads, fast, back, failed;
		int64_t back_worst;
		int64_t min, max;	/* its readings, ns */
		double seconds;	/* its spin, by the TSC */
	} spin;
	struct side own;	/* the spinner's brackets after its spin */
	struct side cmp;	/* the comparer's */
};

/* The kernel's MONOTONIC, by the system call, for the brackets. */
static int64_t sys_mono(void)
{
	struct timespec ts;

	if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts))
		return -1;
	return pvst_ns(&ts);
}

/*
 * One library read of CLOCK_MONOTONIC between two system calls, judged
 * against the header's bound around it (the larger of before and after);
 * into @s.  The header read with the page helpers.
 */
static void bracket(struct side *s)
{
	struct pvread_header h0, h1;
	struct pvread_stats st0, st1;
	int64_t before, after, value, dev;
	struct timespec ts;
	uint64_t bound;

	pvread_get_stats(&st0);
	pvst_snap(&h0);
	before = sys_mono();
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	after = sys_mono();
	pvst_snap(&h1);
	pvread_get_stats(&st1);
	value = pvst_ns(&ts);
	bound = h0.error_bound_ns > h1.error_bound_ns ? h0.error_bound_ns :
							  h1.error_bound_ns;
	dev = value < before ? before - value : value > after ? value - after : 0;
	if (!s->reads++) {
		s->first = dev;
		s->bound_min = s->bound_max = bound;
	}
	if (st1.slow == st0.slow)	/* fast reads are not counted */
		s->fast++;
	if (bound < s->bound_min)
		s->bound_min = bound;
	if (bound > s->bound_max)
		s->bound_max = bound;
	if (dev > s->worst)
		s->worst = dev;
	if ((uint64_t)dev > bound) {
		if (s->beyond < SHOWN)
			snprintf(s->shown[s->beyond], sizeof(s->shown[0]),
				 "%lld ns %s the syscalls, bound %llu ns, mode %s",
				 (long long)dev,
				 value > after ? "ahead of" : "behind",
				 (unsigned long long)bound,
				 pvst_mode_name(h1.mode));
		s->beyond++;
	}
}

/* The TSC's ticks per ns, measured against the kernel's clock. */
static double tsc_per_ns(void)
{
	int64_t t0, t1;
	uint64_t c0, c1;

	t0 = sys_mono();
	c0 = pvst_rdtsc();
	pvst_sleep(0.1);
	c1 = pvst_rdtsc();
	t1 = sys_mono();
	return t1 > t0 ? (double)(c1 - c0) / (double)(t1 - t0) : 0;
}

/* The test process, whose children end with it. */
static pid_t test_pid;

static void die_with_parent(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != test_pid)
		_exit(1);
}

/*
 * The spinner: pinned to @cpu, @spin_ns of user code with no system call
 * (the TSC and the library's line), then its own brackets.
 */
static void spinner(struct shared *sh, int cpu, uint64_t spin_ns,
		    double rate)
{
	struct pvread_stats st0, st1;
	uint64_t tsc, t0, end;
	struct timespec ts;
	int64_t v, prev;
	long n = 0;
	int i;

	die_with_parent();
	if (!pvst_pin(cpu))
		_exit(2);
	/* The library's first call maps the page: not in the loop. */
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	prev = pvst_ns(&ts);
	sh->spin.min = sh->spin.max = prev;
	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load(&sh->go))
		;
	pvread_get_stats(&st0);
	t0 = pvst_rdtsc();
	end = t0 + (uint64_t)((double)spin_ns * rate);
	do {
		tsc = pvst_rdtsc();
		if (pvread_clock_gettime(CLOCK_MONOTONIC, &ts)) {
			sh->spin.failed++;
			continue;
		}
		v = pvst_ns(&ts);
		n++;
		if (v < prev) {
			sh->spin.back++;
			if (prev - v > sh->spin.back_worst)
				sh->spin.back_worst = prev - v;
		}
		if (v < sh->spin.min)
			sh->spin.min = v;
		if (v > sh->spin.max)
			sh->spin.max = v;
		prev = v;
	} while (tsc < end);
	pvread_get_stats(&st1);
	sh->spin.reads = n + sh->spin.failed;
	sh->spin.fast = sh->spin.reads - (long)(st1.slow - st0.slow);
	sh->spin.seconds = (double)(tsc - t0) / rate / 1e9;
	/* The kernel's clock on this vCPU, first thing after the spin. */
	for (i = 0; i < OWN_BRACKETS; i++)
		bracket(&sh->own);
	atomic_store(&sh->spun, 1);
	_exit(0);
}

/* The comparer: pinned to @cpu (-1: not pinned), until the spin is over. */
static void comparer(struct shared *sh, int cpu)
{
	struct timespec ts;

	die_with_parent();
	if (cpu >= 0 && !pvst_pin(cpu))
		_exit(2);
	pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load(&sh->go))
		sched_yield();
	do
		bracket(&sh->cmp);
	while (!atomic_load(&sh->spun));
	_exit(0);
}

/* The sysfs file SYSFS@name, its one line into @buf; false if absent. */
static bool sysfs_read(const char *name, char *buf, size_t len)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), SYSFS "%s", name);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(buf, len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

/* The module's refresh figures on one "# " line; *@refreshes their count. */
static void print_refresh(int cpu, const char *when, long long *refreshes)
{
	static const char *const names[] = {
		"refreshes", "refresh_missed", "refresh_lag_ns",
		"refresh_lag_max_ns", "refresh_cost_ns",
	};
	char line[400], v[64];
	size_t used;
	unsigned int i;

	*refreshes = -1;
	if (!sysfs_read("refresh", v, sizeof(v))) {
		ksft_print_msg("cpu%d: %s: refresh: absent\n", cpu, when);
		return;
	}
	used = snprintf(line, sizeof(line), "refresh %s", v);
	for (i = 0; i < sizeof(names) / sizeof(names[0]) &&
		    used < sizeof(line); i++) {
		if (!sysfs_read(names[i], v, sizeof(v)))
			snprintf(v, sizeof(v), "-");
		used += snprintf(line + used, sizeof(line) - used, ", %s %s",
				 names[i], v);
		if (i == 0 && strcmp(v, "-"))
			*refreshes = atoll(v);
	}
	ksft_print_msg("cpu%d: %s: %s\n", cpu, when, line);
}

static void print_side(int cpu, const char *who, const struct side *s)
{
	int i;

	for (i = 0; i < s->beyond && i < SHOWN; i++)
		ksft_print_msg("cpu%d: %s: beyond the bound: %s\n", cpu, who,
			       s->shown[i]);
	ksft_print_msg("cpu%d: %s: %ld reads, %ld fast, %ld beyond the bound, worst %lld ns outside the bracket (the first %lld ns), bound %llu..%llu ns\n",
		       cpu, who, s->reads, s->fast, s->beyond,
		       (long long)s->worst, (long long)s->first,
		       (unsigned long long)s->bound_min,
		       (unsigned long long)s->bound_max);
}

FIXTURE(userspin) {
	struct pvst_cpus cpus;
};

FIXTURE_SETUP(userspin)
{
	pvst_find_cpus(&self->cpus);
	/* Mapped before the fork: every child reads the header with it. */
	ASSERT_NE(NULL, pvst_map()) TH_LOG("map %s: %s", PVREAD_DEVICE,
					  strerror(errno));
}

FIXTURE_TEARDOWN(userspin)
{
}

TEST_F_TIMEOUT(userspin, within_bound, 1200)
{
	const char *env = getenv("PVREAD_TEST_SPIN_S");
	double spin_s = env ? atof(env) : SPIN_S, rate;
	long beyond = 0, back = 0, slow_cmp = 0, slow_spin = 0;
	long long r0, r1;
	struct pvread_header h;
	struct shared *sh;
	int i, n = self->cpus.n, cpu, other, status;
	pid_t spin_pid, cmp_pid;
	char state[32];
	int64_t t0;

	ASSERT_LT(0, spin_s) TH_LOG("PVREAD_TEST_SPIN_S=%s: seconds, more than 0", env);
	pvst_snap(&h);
	if (h.mode != PVREAD_MODE_LINE) {
		if (!sysfs_read("refresh", state, sizeof(state)))
			snprintf(state, sizeof(state), "absent");
		SKIP(return, "mode %s (line %s, refresh %s): no line, the kernel answers every read",
		     pvst_mode_name(h.mode), pvst_line_name(h.line_state), state);
	}
	rate = tsc_per_ns();
	ASSERT_LT(0, rate) TH_LOG("the TSC's rate against CLOCK_MONOTONIC");
	ksft_print_msg("%d vCPUs, %.0f s of user code each; TSC %.3f ticks/ns; page mode %s, line %s, bound %llu ns\n",
		       n, spin_s, rate, pvst_mode_name(h.mode),
		       pvst_line_name(h.line_state),
		       (unsigned long long)h.error_bound_ns);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, sh);
	for (i = 0; i < n; i++) {
		cpu = self->cpus.id[i];
		other = n > 1 ? self->cpus.id[(i + 1) % n] : -1;
		memset(sh, 0, sizeof(*sh));
		test_pid = getpid();
		spin_pid = fork();
		ASSERT_LE(0, spin_pid);
		if (!spin_pid)
			spinner(sh, cpu, (uint64_t)(spin_s * 1e9), rate);
		cmp_pid = fork();
		if (cmp_pid < 0)
			kill(spin_pid, SIGKILL);
		ASSERT_LE(0, cmp_pid);
		if (!cmp_pid)
			comparer(sh, other);
		/* Both set up (pinned, the page mapped), within 30 s. */
		for (t0 = pvst_sys_ns(CLOCK_MONOTONIC);
		     atomic_load(&sh->ready) < 2 && pvst_elapsed(t0) < 30;)
			pvst_sleep(0.01);
		if (atomic_load(&sh->ready) < 2) {
			kill(spin_pid, SIGKILL);
			kill(cmp_pid, SIGKILL);
		}
		print_refresh(cpu, "before the spin", &r0);
		atomic_store(&sh->go, 1);
		ASSERT_EQ(spin_pid, waitpid(spin_pid, &status, 0));
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			kill(cmp_pid, SIGKILL);
		ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
			TH_LOG("cpu%d: the spinner failed (status %#x): not pinned, or not set up in 30 s",
			       cpu, status);
		ASSERT_EQ(cmp_pid, waitpid(cmp_pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
			TH_LOG("cpu%d: the comparer failed (status %#x): not pinned, or not set up in 30 s",
			       cpu, status);
		print_refresh(cpu, "after the spin", &r1);
		if (r0 >= 0 && r1 >= 0)
			ksft_print_msg("cpu%d: %lld refreshes during the spin\n",
				       cpu, r1 - r0);
		ksft_print_msg("cpu%d: spinner: %ld reads in %.1f s of user code, %ld fast, %ld failed, %ld back (worst %lld ns), readings %.3f..%.3f s\n",
			       cpu, sh->spin.reads, sh->spin.seconds,
			       sh->spin.fast, sh->spin.failed, sh->spin.back,
			       (long long)sh->spin.back_worst,
			       sh->spin.min / 1e9, sh->spin.max / 1e9);
		print_side(cpu, "spinner's own brackets after the spin", &sh->own);
		if (other >= 0)
			print_side(cpu, "comparer", &sh->cmp);
		else
			print_side(cpu, "comparer (unpinned, one vCPU)", &sh->cmp);
		beyond += sh->own.beyond + sh->cmp.beyond;
		back += sh->spin.back + sh->spin.failed;
		if (sh->cmp.fast < sh->cmp.reads * 9 / 10 || !sh->cmp.reads)
			slow_cmp++;
		if (sh->spin.fast < sh->spin.reads * 9 / 10 || !sh->spin.reads)
			slow_spin++;
	}
	munmap(sh, sizeof(*sh));
	pvst_print_page("at the end");
	EXPECT_EQ(0, beyond) TH_LOG("readings beyond the published bound");
	EXPECT_EQ(0, back) TH_LOG("the spinner's readings went back (or failed)");
	EXPECT_EQ(0, slow_cmp) TH_LOG("vCPUs whose comparer had under 90 %% of its reads from the page");
	EXPECT_EQ(0, slow_spin) TH_LOG("vCPUs whose spinner had under 90 %% of its reads from the page: not user code alone");
}

PVREAD_XEN_LINE_HARNESS_MAIN("line to compare while a vCPU spins in user code")
