// SPDX-License-Identifier: GPL-2.0
/*
 * pvread_order: CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW and CLOCK_BOOTTIME
 * read through libpvread are ordered across readers on different vCPUs --
 * in separate processes and in threads of one process -- as the kernel's
 * own clocks are system-wide.
 *
 * Every reader is pinned to a vCPU (round robin over the allowed ones).
 * For each read of a clock it first loads (acquire) the latest reading
 * every reader, itself included, published for that clock in shared memory
 * (MAP_SHARED | MAP_ANONYMOUS), then reads the clock through
 * pvread_clock_gettime() and pvread_ns() in turn, and counts the read out
 * of order if it is below any value it loaded; then it publishes its
 * reading (release).  A reading published before another reader's load
 * happened before that reader's read, so a clock ordered system-wide can
 * never be below it.
 *
 * In line mode the reads must come from the page (by default at least 99%
 * fast, from pvread_get_stats()) and the page must be in line mode at as
 * large a share of its samples, so that the test cannot pass on fallbacks
 * to the kernel: a module that stops vouching for a moment (a vCPU of an
 * emulated guest held off for 140 ms) is doing its job, and the reads of
 * that moment fall back.  In mode none (no line: the page's line state
 * says why) every read must be the kernel's, for reason "mode", and every
 * sample mode none: the kernel's answers are ordered, and the library must
 * keep them so (its floors, its lifts towards a line).
 *
 *   pvread_order [--expect-mode line|none|any] [--reads N]
 *                [--seconds S] [--max-seconds S] [--procs N] [--threads N]
 *                [--only processes|threads] [--min-fast PCT]
 *                [--tolerance NS] [--wait S] [--skew NS] [--source pvread|libc]
 *
 * --expect-mode any: order whatever the mode, the reads judged by the
 * mode the page was in throughout (a skip of "in the expected mode").
 * --skew NS makes reader 0 (a process, or a thread) subtract NS from every
 * reading: a clock that is not ordered, to see the test fail.
 * --source libc reads through libc's clock_gettime instead: the kernel's
 * clock, which must pass (no device needed).
 *
 * SIGTERM or SIGINT ends the case that is running (and skips the rest)
 * with the reads made so far: for a reader in the background of something
 * else.  A reader's first read may be up to a few hundred ns late on its
 * way to another reader (the exchange's own latency, measured: 80 ns on a
 * KVM host, more under emulation): steps back smaller than that go unseen.
 *
 * KTAP; exit KSFT_SKIP, with the reason, where there is no Xen or no
 * /dev/pvread (with --source pvread).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "pvread_selftest.h"

#define MAX_READERS 64
#define NR_CLOCKS 3
#define CHECK_EVERY 256		/* reads between looks at the stop flag */

static const clockid_t clocks[NR_CLOCKS] = {
	CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,
};

/* One cache line per reader: its latest readings and its progress. */
struct slot {
	_Atomic int64_t v[NR_CLOCKS];
	_Atomic long reads;
} __attribute__((aligned(64)));

struct result {
	long reads;
	long out_of_order;
	long out_of_order_fast;	/* of those, with no fallback since a check */
	long against_self;	/* below its own previous reading */
	int64_t worst_ns;	/* largest step back against a loaded value */
	int cpu;
	int pinned;
	int done;
	uint64_t fast;		/* reads less st.slow: not counted */
	struct pvread_stats st;
};

struct shared {
	_Atomic int ready;
	_Atomic int go;
	_Atomic int stop;
	struct slot slot[MAX_READERS];
	struct result res[MAX_READERS];
};

enum { SRC_PVREAD, SRC_LIBC };
enum { EXPECT_ANY = -1 };

static struct shared *sh;
static volatile sig_atomic_t stop_signal;
static int nr_readers;
static int source = SRC_PVREAD;
static int64_t skew_ns;
static int cpus[1024];
static int nr_cpus;

static int64_t ts_ns(const struct timespec *ts)
{
	return ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_ns(&ts);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static bool pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0;
}

static void find_cpus(void)
{
	cpu_set_t set;
	int i;

	if (sched_getaffinity(0, sizeof(set), &set))
		ksft_exit_fail_msg("sched_getaffinity: %s\n", strerror(errno));
	for (i = 0; i < CPU_SETSIZE && nr_cpus < 1024; i++)
		if (CPU_ISSET(i, &set))
			cpus[nr_cpus++] = i;
}

/* ---- the page's header, as the module publishes it ---- */

static const volatile struct pvread_header *hdr;

static void map_header(void)
{
	int fd = open(PVREAD_DEVICE, O_RDONLY);
	void *p;

	if (fd < 0)
		ksft_exit_fail_msg("open %s: %s\n", PVREAD_DEVICE, strerror(errno));
	p = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		ksft_exit_fail_msg("mmap %s: %s\n", PVREAD_DEVICE, strerror(errno));
	hdr = p;
	if (hdr->magic != PVREAD_MAGIC || hdr->abi_version != PVREAD_ABI_VERSION)
		ksft_exit_fail_msg("%s: magic %#x ABI %u; this test reads ABI %u\n",
				   PVREAD_DEVICE, hdr->magic, hdr->abi_version,
				   PVREAD_ABI_VERSION);
}

struct page_watch {
	long samples;
	long by_mode[PVST_NR_MODES + 1];
	long by_line[PVST_NR_LINES + 1];
	uint64_t bound_min, bound_max, anchors0, anchors1, warp_max;
};

static void watch(struct page_watch *w)
{
	struct pvst_page s;

	if (!hdr || !pvst_page_sample(&s))
		return;
	if (!w->samples++) {
		w->bound_min = s.bound;
		w->anchors0 = s.anchors;
	}
	w->by_mode[s.mode < PVST_NR_MODES ? s.mode : PVST_NR_MODES]++;
	w->by_line[s.line_state < PVST_NR_LINES ? s.line_state : PVST_NR_LINES]++;
	if (s.bound < w->bound_min)
		w->bound_min = s.bound;
	if (s.bound > w->bound_max)
		w->bound_max = s.bound;
	if (s.tsc_warp > w->warp_max)
		w->warp_max = s.tsc_warp;
	w->anchors1 = s.anchors;
}

/* ---- the readers ---- */

/*
 * Through libpvread, every other read by pvread_ns() (one count of ns,
 * the benchmark's form), so that its readings and pvread_clock_gettime()'s
 * are held to one order, within each reader and across them.
 */
static int read_clock(clockid_t clock, struct timespec *ts)
{
	static __thread unsigned int turn;
	uint64_t ns;

	if (source == SRC_LIBC)
		return clock_gettime(clock, ts);
	if (!(turn++ & 1))
		return pvread_clock_gettime(clock, ts);
	ns = pvread_ns(clock);
	if (!ns)
		return -1;
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
	return 0;
}

static void reader(int me)
{
	struct result *r = &sh->res[me];
	struct pvread_stats st0, st;
	uint64_t slow_at_check;
	int64_t seen, v, x, skew = me == 0 ? skew_ns : 0;
	struct timespec ts;
	long reads = 0;
	int j, k, from;

	r->cpu = cpus[me % nr_cpus];
	r->pinned = pin(r->cpu);
	pvread_get_stats(&st0);
	slow_at_check = st0.slow;
	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load_explicit(&sh->go, memory_order_acquire))
		__builtin_ia32_pause();

	for (;;) {
		if (reads % CHECK_EVERY == 0) {
			if (atomic_load_explicit(&sh->stop, memory_order_relaxed))
				break;
			atomic_store_explicit(&sh->slot[me].reads, reads,
					      memory_order_relaxed);
			pvread_get_stats(&st);
			slow_at_check = st.slow;
		}
		k = reads % NR_CLOCKS;
		seen = INT64_MIN;
		from = -1;
		for (j = 0; j < nr_readers; j++) {
			x = atomic_load_explicit(&sh->slot[j].v[k],
						 memory_order_acquire);
			if (x > seen) {
				seen = x;
				from = j;
			}
		}
		if (read_clock(clocks[k], &ts))
			ksft_exit_fail_msg("reader %d: clock %d: %s\n", me,
					   clocks[k], strerror(errno));
		v = ts_ns(&ts) - skew;
		if (v < seen) {
			r->out_of_order++;
			if (seen - v > r->worst_ns)
				r->worst_ns = seen - v;
			r->against_self += from == me;
			/* No fallback since the last check: from the page. */
			pvread_get_stats(&st);
			r->out_of_order_fast += st.slow == slow_at_check;
			slow_at_check = st.slow;
		}
		atomic_store_explicit(&sh->slot[me].v[k], v, memory_order_release);
		reads++;
	}
	pvread_get_stats(&st);
	st.slow -= st0.slow;
	st.retries -= st0.retries;
	st.clamped -= st0.clamped;
	for (j = 0; j < PVREAD_SLOW_NR_REASONS; j++)
		st.slow_by_reason[j] -= st0.slow_by_reason[j];
	r->st = st;
	/* Fast reads are not counted: this reader's pvread reads less slow. */
	r->fast = source == SRC_PVREAD && (uint64_t)reads > st.slow ?
		  (uint64_t)reads - st.slow : 0;
	r->reads = reads;
	r->done = 1;
}

static void *reader_thread(void *arg)
{
	reader((int)(intptr_t)arg);
	return NULL;
}

/* ---- one case: N readers, as processes or as threads ---- */

struct options {
	int expect;		/* PVREAD_MODE_* or EXPECT_ANY */
	long min_reads;
	double min_seconds, max_seconds;
	double min_fast_pct;
};

/*
 * The share of the page's samples that must be in the expected mode: in
 * mode none every one (a line there is the module's bug), in line mode
 * the share of reads that must be fast.
 */
static double mode_share(const struct options *o)
{
	return o->expect == PVREAD_MODE_NONE ? 100 : o->min_fast_pct;
}

static void mode_check_name(char *buf, size_t size, const char *name,
			    const struct options *o)
{
	if (mode_share(o) >= 100)
		snprintf(buf, size, "%s: page in the expected mode, every sample",
			 name);
	else
		snprintf(buf, size,
			 "%s: page in the expected mode, at least %.3g%% of the samples",
			 name, mode_share(o));
}

static void run_case(const char *name, bool processes, int n,
		     const struct options *o)
{
	uint64_t fast = 0, slow = 0, retries = 0, clamped = 0;
	uint64_t by_reason[PVREAD_SLOW_NR_REASONS] = { 0 };
	long reads = 0, ooo = 0, ooo_fast = 0, self = 0, total;
	int64_t worst = 0, t0, t1, deadline;
	struct page_watch w = { 0 };
	pthread_t tid[MAX_READERS];
	pid_t pid[MAX_READERS];
	char modes[160], lines[200], reasons[300] = "", what[160], what2[160];
	int i, j, pinned = 0, done = 0, died = 0, status;
	size_t used = 0;
	bool none, ok;
	double secs, pct;

	memset(sh, 0, sizeof(*sh));
	for (i = 0; i < n; i++)
		for (j = 0; j < NR_CLOCKS; j++)
			atomic_init(&sh->slot[i].v[j], INT64_MIN);
	nr_readers = n;
	fflush(NULL);
	for (i = 0; i < n; i++) {
		if (processes) {
			pid[i] = fork();
			if (pid[i] < 0)
				ksft_exit_fail_msg("fork: %s\n", strerror(errno));
			if (!pid[i]) {
				reader(i);
				_exit(0);
			}
		} else if (pthread_create(&tid[i], NULL, reader_thread,
					  (void *)(intptr_t)i)) {
			ksft_exit_fail_msg("pthread_create\n");
		}
	}
	deadline = mono_ns() + 30000000000LL;
	while (atomic_load(&sh->ready) < n && mono_ns() < deadline)
		sleep_ms(10);
	watch(&w);
	t0 = mono_ns();
	atomic_store_explicit(&sh->go, 1, memory_order_release);
	for (;;) {
		sleep_ms(50);
		watch(&w);
		for (total = 0, i = 0; i < n; i++)
			total += atomic_load_explicit(&sh->slot[i].reads,
						      memory_order_relaxed);
		secs = (mono_ns() - t0) / 1e9;
		if ((total >= o->min_reads && secs >= o->min_seconds) ||
		    secs >= o->max_seconds || stop_signal)
			break;
	}
	atomic_store(&sh->stop, 1);
	for (i = 0; i < n; i++) {
		if (!processes) {
			pthread_join(tid[i], NULL);
			continue;
		}
		if (waitpid(pid[i], &status, 0) != pid[i] ||
		    !WIFEXITED(status) || WEXITSTATUS(status)) {
			ksft_print_msg("%s: reader %d (pid %d) ended with status %#x\n",
				       name, i, pid[i], status);
			died++;
		}
	}
	t1 = mono_ns();
	watch(&w);
	secs = (t1 - t0) / 1e9;

	for (i = 0; i < n; i++) {
		struct result *r = &sh->res[i];

		pinned += r->pinned;
		done += r->done;
		reads += r->reads;
		ooo += r->out_of_order;
		ooo_fast += r->out_of_order_fast;
		self += r->against_self;
		if (r->worst_ns > worst)
			worst = r->worst_ns;
		fast += r->fast;
		slow += r->st.slow;
		retries += r->st.retries;
		clamped += r->st.clamped;
		for (j = 0; j < PVREAD_SLOW_NR_REASONS; j++)
			by_reason[j] += r->st.slow_by_reason[j];
		ksft_print_msg("%s: reader %d on cpu%d%s%s: %ld reads, %llu fast, %llu slow, %ld out of order (largest %lld ns)\n",
			       name, i, r->cpu, r->pinned ? "" : " (not pinned)",
			       i == 0 && skew_ns ? " (skewed)" : "", r->reads,
			       (unsigned long long)r->fast,
			       (unsigned long long)r->st.slow, r->out_of_order,
			       (long long)r->worst_ns);
	}
	for (j = 0; j < PVREAD_SLOW_NR_REASONS && used < sizeof(reasons); j++)
		if (by_reason[j])
			used += snprintf(reasons + used, sizeof(reasons) - used,
					 "%s%s %llu", used ? ", " : ": ",
					 pvread_slow_reason_name(j),
					 (unsigned long long)by_reason[j]);
	pvst_counts(modes, sizeof(modes), w.by_mode, PVST_NR_MODES, pvst_mode_name);
	pvst_counts(lines, sizeof(lines), w.by_line, PVST_NR_LINES, pvst_line_name);
	pct = fast + slow ? 100.0 * fast / (fast + slow) : 0;

	ksft_print_msg("order: %s: %d readers on %d vCPUs, %ld reads in %.1f s (%.0f per reader, %.2f M/s in all) of CLOCK_MONOTONIC, _RAW, BOOTTIME%s\n",
		       name, n, nr_cpus < n ? nr_cpus : n, reads, secs,
		       n ? (double)reads / n : 0, secs > 0 ? reads / secs / 1e6 : 0,
		       source == SRC_LIBC ? " via libc" :
		       ", in turn by pvread_clock_gettime() and pvread_ns()");
	ksft_print_msg("order: %s: %llu fast (%.3f%%), %llu slow%s, %llu retries, %llu raised to the floor\n",
		       name, (unsigned long long)fast, pct,
		       (unsigned long long)slow, reasons,
		       (unsigned long long)retries, (unsigned long long)clamped);
	ksft_print_msg("order: %s: %ld out of order (%ld with no fallback since the reader's last check, %ld below its own previous reading), largest backwards %lld ns\n",
		       name, ooo, ooo_fast, self, (long long)worst);
	if (hdr)
		ksft_print_msg("order: %s: page: mode %s; line %s; bound %llu..%llu ns; tsc_warp up to %llu; line anchors %llu -> %llu\n",
			       name, modes, lines,
			       (unsigned long long)w.bound_min,
			       (unsigned long long)w.bound_max,
			       (unsigned long long)w.warp_max,
			       (unsigned long long)w.anchors0,
			       (unsigned long long)w.anchors1);

	if (stop_signal)
		ksft_print_msg("order: %s: stopped by a signal after %.1f s\n",
			       name, secs);
	ksft_print_msg("order: %s: %ld reads by %d pinned readers (%d pinned, %d finished, at least %ld reads)\n",
		       name, reads, n, pinned, done,
		       stop_signal ? 1 : o->min_reads);
	ksft_test_result(reads >= (stop_signal ? 1 : o->min_reads) &&
			 pinned == n && done == n && !died,
			 "%s: every pinned reader read\n", name);
	/* Mode none throughout: the kernel answers every read. */
	none = o->expect == PVREAD_MODE_NONE ||
	       (o->expect == EXPECT_ANY && w.samples &&
		w.by_mode[PVREAD_MODE_NONE] == w.samples);
	snprintf(what, sizeof(what), "%s: reads answered %s", name,
		 none ? "by the kernel, for reason \"mode\" (mode none)" :
			"from the page");
	mode_check_name(what2, sizeof(what2), name, o);
	if (source == SRC_LIBC) {
		pvst_skip(what, "--source libc");
		pvst_skip(what2, "--source libc");
	} else {
		char want[40] = "want 0 (mode none)";

		if (!none)
			snprintf(want, sizeof(want), "limit %.3g%%",
				 o->min_fast_pct);
		ksft_print_msg("order: %s: %.3f%% fast, %s; %ld page samples: %s; line %s; expected mode %s\n",
			       name, pct, want, w.samples, modes,
			       lines, o->expect == EXPECT_ANY ? "any" :
			       pvst_mode_name(o->expect));
		if (none)
			ksft_test_result(!fast && slow &&
					 by_reason[PVREAD_SLOW_MODE] == slow,
					 "%s\n", what);
		else
			ksft_test_result(fast && pct >= o->min_fast_pct, "%s\n",
					 what);
		if (o->expect == EXPECT_ANY)
			pvst_skip(what2, "any mode accepted");
		else
			ksft_test_result(w.samples &&
					 100.0 * w.by_mode[o->expect] >=
					 mode_share(o) * w.samples,
					 "%s\n", what2);
	}
	ok = !ooo && reads;
	ksft_print_msg("order: %s: %ld of %ld out of order, largest %lld ns\n",
		       name, ooo, reads, (long long)worst);
	snprintf(what, sizeof(what),
		 "%s: CLOCK_MONOTONIC, _RAW and BOOTTIME ordered across %s",
		 name, processes ? "processes" : "threads");
	ksft_test_result(ok, "%s\n", what);
}

/* ---- main ---- */

static void on_stop(int sig)
{
	(void)sig;
	stop_signal = 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pvread_order [--expect-mode line|none|any] [--reads N]\n"
		"                    [--seconds S] [--max-seconds S] [--procs N] [--threads N]\n"
		"                    [--only processes|threads] [--min-fast PCT] [--tolerance NS]\n"
		"                    [--wait S] [--skew NS] [--source pvread|libc]\n"
		"  --reads N        at least N reads in all per case (default 10000000)\n"
		"  --seconds S      and at least S seconds (default 0)\n"
		"  --max-seconds S  stop a case after S seconds however many reads (default 300)\n"
		"  --procs N        readers in the processes case (default: vCPUs, at least 2)\n"
		"  --threads N      readers in the threads case (default: vCPUs, at least 2)\n"
		"  --min-fast PCT   reads answered from the page in line mode, at least\n"
		"                   (default 99; in mode none: every read the kernel's)\n"
		"  --tolerance NS   PVREAD_MAX_ERROR_NS for the library (default: the\n"
		"                   environment's, else 1000000000: emulation's ms bounds)\n"
		"  --wait S         wait up to S s for the page to settle in the expected\n"
		"                   mode first (default 30)\n"
		"  --skew NS        reader 0 subtracts NS from its readings (to see a failure)\n"
		"  --source libc    read with libc's clock_gettime (the kernel's clock)\n");
	exit(KSFT_FAIL);
}

static int parse_mode(const char *s)
{
	int i;

	if (!strcmp(s, "any"))
		return EXPECT_ANY;
	for (i = 0; i < PVST_NR_MODES; i++)
		if (!strcmp(s, pvst_mode_names[i]))
			return i;
	fprintf(stderr, "pvread_order: unknown mode '%s'\n", s);
	usage();
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "expect-mode", required_argument, NULL, 'e' },
		{ "reads", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "max-seconds", required_argument, NULL, 'M' },
		{ "procs", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 't' },
		{ "only", required_argument, NULL, 'o' },
		{ "min-fast", required_argument, NULL, 'f' },
		{ "tolerance", required_argument, NULL, 'T' },
		{ "wait", required_argument, NULL, 'w' },
		{ "skew", required_argument, NULL, 'k' },
		{ "source", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ }
	};
	struct options o = {
		.expect = PVREAD_MODE_LINE, .min_reads = 10000000,
		.min_seconds = 0, .max_seconds = 300, .min_fast_pct = 99,
	};
	int opt, procs = 0, threads = 0, cases = 3, i;
	const char *tolerance = NULL;
	double wait_s = 30;
	struct pvread_info info = { 0 };
	struct pvst_page s = { 0 };
	int expect_line;
	struct stat sb;

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 'e':
			o.expect = parse_mode(optarg);
			break;
		case 'n':
			o.min_reads = atol(optarg);
			break;
		case 's':
			o.min_seconds = atof(optarg);
			break;
		case 'M':
			o.max_seconds = atof(optarg);
			break;
		case 'p':
			procs = atoi(optarg);
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 'o':
			if (!strcmp(optarg, "processes"))
				cases = 1;
			else if (!strcmp(optarg, "threads"))
				cases = 2;
			else
				usage();
			break;
		case 'f':
			o.min_fast_pct = atof(optarg);
			break;
		case 'T':
			tolerance = optarg;
			break;
		case 'w':
			wait_s = atof(optarg);
			break;
		case 'k':
			skew_ns = atoll(optarg);
			break;
		case 'S':
			if (!strcmp(optarg, "pvread"))
				source = SRC_PVREAD;
			else if (!strcmp(optarg, "libc"))
				source = SRC_LIBC;
			else
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind < argc)
		usage();
	/* The machine's line state (PVREAD_EXPECT_LINE) with its mode only. */
	expect_line = o.expect == EXPECT_ANY ? PVST_EXPECT_ANY :
					       pvst_expect_line();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	find_cpus();
	if (!procs)
		procs = nr_cpus < 2 ? 2 : nr_cpus;
	if (!threads)
		threads = nr_cpus < 2 ? 2 : nr_cpus;
	if (procs < 1 || procs > MAX_READERS || threads < 1 ||
	    threads > MAX_READERS) {
		fprintf(stderr, "pvread_order: 1 to %d readers\n", MAX_READERS);
		usage();
	}
	/* Emulation's records disagree by milliseconds: the tests let the
	 * reads through and judge the page, not the tolerance. */
	if (tolerance)
		setenv("PVREAD_MAX_ERROR_NS", tolerance, 1);
	else
		setenv("PVREAD_MAX_ERROR_NS", "1000000000", 0);

	ksft_print_header();
	if (source == SRC_PVREAD) {
		if (!pvst_xen_guest())
			ksft_exit_skip("not a Xen guest (/sys/hypervisor/type is not \"xen\"): no pvread.ko, no %s\n",
				       PVREAD_DEVICE);
		if (stat(PVREAD_DEVICE, &sb))
			ksft_exit_skip("no %s (%s): pvread.ko is not loaded\n",
				       PVREAD_DEVICE, strerror(errno));
		map_header();
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		ksft_exit_fail_msg("mmap shared: %s\n", strerror(errno));
	ksft_set_plan(4 * ((cases & 1) + !!(cases & 2)));

	/* The module needs a few seconds after a load before it vouches;
	 * the library maps the page here; the forked readers adopt the
	 * page they inherit again (their library state starts afresh). */
	for (i = 0; i <= wait_s * 10; i++) {
		pvread_get_info(&info);
		if (!hdr || !pvst_page_sample(&s))
			break;
		if (stop_signal ||
		    pvst_settled(o.expect, expect_line, &s, &info))
			break;
		sleep_ms(100);
	}
	if (hdr)
		ksft_print_msg("order: %d vCPUs; page: mode %s, line %s, bound %llu ns, tsc_warp %llu, line anchors %llu; library: mapped %d, fast %d, tolerance %llu ns; expecting mode %s (after %.1f s)\n",
			       nr_cpus, pvst_mode_name(s.mode), pvst_line_name(s.line_state),
			       (unsigned long long)s.bound,
			       (unsigned long long)s.tsc_warp,
			       (unsigned long long)s.anchors, info.mapped,
			       info.fast, (unsigned long long)info.tolerance_ns,
			       o.expect == EXPECT_ANY ? "any" : pvst_mode_name(o.expect),
			       i / 10.0);
	else
		ksft_print_msg("order: %d vCPUs; source libc (the kernel's clock)\n",
			       nr_cpus);
	if (skew_ns)
		ksft_print_msg("order: reader 0 subtracts %lld ns from its readings (--skew): expect failures\n",
			       (long long)skew_ns);

	if (cases & 1)
		run_case("processes", true, procs, &o);
	if (cases & 2) {
		char mode_check[160];
		const char *const names[] = {
			"threads: every pinned reader read",
			/* run_case()'s, where the mode is known beforehand */
			o.expect == PVREAD_MODE_NONE ?
			"threads: reads answered by the kernel, for reason \"mode\" (mode none)" :
			"threads: reads answered from the page",
			mode_check,
			"threads: CLOCK_MONOTONIC, _RAW and BOOTTIME ordered across threads",
		};

		mode_check_name(mode_check, sizeof(mode_check), "threads", &o);
		if (stop_signal)
			for (i = 0; i < 4; i++)
				pvst_skip(names[i],
					  "stopped by a signal before this case");
		else
			run_case("threads", false, threads, &o);
	}
	ksft_finished();
}
