// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A read that meets an update between its loads, every time: a hardware
 * watchpoint on the header's seq stops the reading thread just after each
 * load of it, and this program's parent writes the page then, as the
 * module's update would, between the reader's loads.  A race test would
 * meet that moment once in many thousand updates, or never on a loaded
 * host: here it is met on the first read.
 *
 *   - After the reader's first load of seq (even), the update begins: seq
 *     odd, mode none.  The reader loads mode: none.  Only the seq read
 *     again says that mode was read mid-update (a retry); trusted as it
 *     is, the read falls back for "mode" on a page that never left line
 *     mode.
 *   - After its second load, the update ends: seq even again, mode line.
 * The read is of CLOCK_REALTIME, which loads the header as every clock
 * but MONOTONIC does.
 *
 * Then CLOCK_MONOTONIC, read from the process's line record (struct
 * line_record, src/internal.h), whose only load of the header is its seq,
 * before the counter and again after it: after the first, an update
 * completes (seq + 2) and moves the line a second ahead.  Only the seq
 * read again says the record is the old line's: trusted, the read
 * returns a time a second behind the kernel's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/pvread.h>

#include "internal.h"
#include "pvread.h"
#include "synthetic.h"
#include "tap.h"

#define TEST "a read meeting an update between its loads of the header: retried, not a fallback for mode"
#define TEST_RECORD "a MONOTONIC read from the line record meeting an update between its loads of the seq: the new line's"

/* What the reader's stats say, in memory shared with its parent. */
struct outcome {
	uint64_t mode_fallbacks;
	uint64_t retries;
	int record;		/* the record named the page's seq before */
	int64_t ns;		/* the MONOTONIC read's */
};

/* Which read the reader makes while watched. */
enum { READ_MODE, READ_RECORD };
static int kind;

static struct synthetic page;
/* Loaded once by the reader, watched first: do watchpoints fire here? */
static volatile uint32_t canary;

/* The reader: stopped until its parent armed the watchpoint. */
static int reader(struct outcome *o)
{
	struct pvread_stats a, b;
	struct timespec ts;

	int i;

	/*
	 * A child checks its offsets at its first read: before the watch.
	 * A tick between the check's coarse reads cannot tell (MONOTONIC the
	 * kernel's, checked again at the next read, whose loads of seq the
	 * watch would then stop): read until the page answers.
	 */
	for (i = 0; i < 1000; i++) {
		pvread_get_stats(&a);
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		pvread_get_stats(&b);
		if (b.slow_by_reason[PVREAD_SLOW_TIMENS] ==
		    a.slow_by_reason[PVREAD_SLOW_TIMENS])
			break;
	}
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
		return 2;
	raise(SIGSTOP);
	/* The watchpoint's own check: one load of the canary it watches. */
	i = (int)canary;
	if (kind == READ_RECORD) {
		/* Its first read made the record; this one reads it. */
		struct process *p = atomic_load(&pvread_process);

		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
		o->record = p && p->map.hdr &&
			    atomic_load(&p->line.key) == p->map.hdr->seq;
	}
	raise(SIGSTOP);
	pvread_get_stats(&a);
	pvread_clock_gettime(kind == READ_RECORD ? CLOCK_MONOTONIC :
			     CLOCK_REALTIME, &ts);
	pvread_get_stats(&b);
	o->ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	o->mode_fallbacks = b.slow_by_reason[PVREAD_SLOW_MODE] -
			    a.slow_by_reason[PVREAD_SLOW_MODE];
	o->retries = b.retries - a.retries;
	return 0;
}

static long poke_u32(pid_t pid, void *addr, uint32_t v)
{
	/* A word of 8 bytes: keep the other half as it is. */
	uintptr_t base = (uintptr_t)addr & ~(uintptr_t)7;
	unsigned int shift = ((uintptr_t)addr & 7) * 8;
	long word;

	errno = 0;
	word = ptrace(PTRACE_PEEKDATA, pid, (void *)base, NULL);
	if (errno)
		return -1;
	word = (long)(((unsigned long)word & ~(0xffffffffUL << shift)) |
		      ((unsigned long)v << shift));
	return ptrace(PTRACE_POKEDATA, pid, (void *)base, (void *)word);
}

enum { WATCH_FIRED, WATCH_UNSET, WATCH_SILENT, WATCH_LOST };

/*
 * The stopped reader let go to its next stop: the signal that stopped it,
 * or 0 where it did not stop (then it is gone: killed if it was not).
 */
static int next_stop(pid_t pid)
{
	int status;

	if (ptrace(PTRACE_CONT, pid, NULL, NULL) ||
	    waitpid(pid, &status, 0) != pid) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return 0;
	}
	if (!WIFSTOPPED(status))
		return 0;
	if (WSTOPSIG(status) != SIGSTOP && WSTOPSIG(status) != SIGTRAP) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return 0;
	}
	return WSTOPSIG(status);
}

/*
 * The stopped reader's DR0 on the 4 bytes at @addr; it goes on to its next
 * stop.  WATCH_FIRED where a SIGTRAP came first, WATCH_SILENT where its
 * own SIGSTOP did (the reader killed), WATCH_UNSET where ptrace refused
 * (killed too), WATCH_LOST where the reader stopped otherwise (gone).
 */
static int watch(pid_t pid, volatile void *addr)
{
	int status, stop;

	if (ptrace(PTRACE_POKEUSER, pid,
		   (void *)offsetof(struct user, u_debugreg[0]), (void *)addr) ||
	    ptrace(PTRACE_POKEUSER, pid,
		   (void *)offsetof(struct user, u_debugreg[7]),
		   (void *)(1UL | 3UL << 16 | 3UL << 18))) {
		printf("# PTRACE_POKEUSER of the debug registers: %s\n",
		       strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return WATCH_UNSET;
	}
	if (addr != &canary)
		return WATCH_FIRED;
	stop = next_stop(pid);
	if (stop == SIGSTOP) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return WATCH_SILENT;
	}
	/* Then its SIGSTOP after the canary: it stands before its read. */
	if (stop == SIGTRAP) {
		stop = next_stop(pid);
		if (stop == SIGSTOP)
			return WATCH_FIRED;
	}
	if (stop) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	return WATCH_LOST;
}

/*
 * One watched read of @which: the reader forked, its loads of seq
 * stopped, and the update of @which made between them.  0 where the
 * reader ran to its end (its outcome in *@o, its loads of seq in *@hits,
 * its wait status in *@status); else the TAP line is written (a SKIP, or
 * a setup that failed): 1 for a skip, -1 for a failure.
 */
static int watched_read(int which, const char *test, struct outcome *o,
			int *hits, int *status)
{
	const uint32_t seq = page.hdr->seq;
	const struct pvread_clock_base *mono =
		&page.hdr->line.base[CLOCK_MONOTONIC];
	pid_t pid;

	memset(o, 0, sizeof(*o));
	*hits = 0;
	kind = which;
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(reader(o));
	if (pid > 0 && waitpid(pid, status, 0) == pid && WIFEXITED(*status) &&
	    WEXITSTATUS(*status) == 2) {
		tap_result(1, "%s # SKIP ptrace(PTRACE_TRACEME) not permitted here",
			   test);
		return 1;
	}
	if (pid < 0 || !WIFSTOPPED(*status)) {
		tap_result(0, "setup: the reader did not stop");
		return -1;
	}
	/*
	 * DR0: the canary's 4 bytes, then the seq's, on reads and writes (RW
	 * 11, LEN 11).  A hypervisor may ignore the guest's debug registers:
	 * the canary's load, which comes first, tells.
	 */
	switch (watch(pid, &canary)) {
	case WATCH_UNSET:
		tap_result(1, "%s # SKIP no hardware watchpoint here", test);
		return 1;
	case WATCH_SILENT:
		tap_result(1, "%s # SKIP a hardware watchpoint set here does not fire",
			   test);
		return 1;
	case WATCH_LOST:
		tap_result(0, "setup: the reader did not stop after the canary");
		return -1;
	}
	if (watch(pid, &page.hdr->seq) == WATCH_UNSET) {
		tap_result(0, "setup: the watchpoint could not be moved to the seq");
		return -1;
	}
	for (;;) {
		if (ptrace(PTRACE_CONT, pid, NULL, NULL) ||
		    waitpid(pid, status, 0) != pid)
			break;
		if (!WIFSTOPPED(*status))
			break;
		if (WSTOPSIG(*status) != SIGTRAP)
			continue;
		/* Where each load was, if this test ever fails somewhere. */
		if (getenv("MID_UPDATE_DEBUG")) {
			struct user_regs_struct r;

			ptrace(PTRACE_GETREGS, pid, NULL, &r);
			errno = 0;
			printf("# trap %d at %llx, dr6 %lx, word %lx\n", *hits + 1,
			       (unsigned long long)r.rip,
			       ptrace(PTRACE_PEEKUSER, pid, (void *)offsetof(struct user, u_debugreg[6]), NULL),
			       ptrace(PTRACE_PEEKDATA, pid, (void *)&page.hdr->seq, NULL));
		}
		++*hits;
		if (which == READ_RECORD) {
			/* After its first load: a whole update, the line 1 s on. */
			if (*hits == 1) {
				poke_u32(pid, (void *)&mono->sec,
					 (uint32_t)mono->sec + 1);
				poke_u32(pid, (void *)&page.hdr->seq, seq + 2);
			}
		} else if (*hits == 1) {
			/* The reader loaded seq: the update begins, then ends. */
			poke_u32(pid, (void *)&page.hdr->seq, seq + 1);
			poke_u32(pid, (void *)&page.hdr->mode, PVREAD_MODE_NONE);
		} else if (*hits == 2) {
			poke_u32(pid, (void *)&page.hdr->mode, PVREAD_MODE_LINE);
			poke_u32(pid, (void *)&page.hdr->seq, seq + 2);
		}
	}
	return 0;
}

int main(void)
{
	const struct pvread_clock_base *mono;
	struct outcome *o;
	int status, hits, ret;
	int64_t moved;

	setvbuf(stdout, NULL, _IOLBF, 0);
	tap_plan(2);
	o = mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (o == MAP_FAILED || synthetic_init(&page, PVREAD_MODE_LINE) ||
	    pvread_use_page(page.hdr, page.size)) {
		tap_result(0, "setup: %s", strerror(errno));
		return tap_exit();
	}
	synthetic_tick(&page);
	synthetic_line_update(&page);
	synthetic_stop(&page);
	{
		struct timespec ts;

		/* The first read, and its floor: before the watchpoint. */
		pvread_clock_gettime(CLOCK_MONOTONIC, &ts);
	}
	ret = watched_read(READ_MODE, TEST, o, &hits, &status);
	if (ret < 0)
		return tap_exit();
	if (ret == 0) {
		printf("# the reader: %d loads of seq, %llu retries, %llu fallbacks for \"mode\" (exit %d)\n",
		       hits, (unsigned long long)o->retries,
		       (unsigned long long)o->mode_fallbacks,
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		tap_result(WIFEXITED(status) && !WEXITSTATUS(status) &&
			   hits >= 2 && o->retries >= 1 && !o->mode_fallbacks,
			   "%s", TEST);
	}
	ret = watched_read(READ_RECORD, TEST_RECORD, o, &hits, &status);
	if (ret < 0)
		return tap_exit();
	if (ret == 0) {
		/* The moved line's base, which any reading of it is past. */
		mono = &page.hdr->line.base[CLOCK_MONOTONIC];
		moved = (mono->sec + 1) * 1000000000 +
			(int64_t)(mono->snsec >> 32);
		printf("# the reader: the record %s the page's seq before; %d loads of seq; its reading %lld ns, the moved line's base %lld (%+lld) (exit %d)\n",
		       o->record ? "named" : "did not name", hits,
		       (long long)o->ns, (long long)moved,
		       (long long)(o->ns - moved),
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		tap_result(WIFEXITED(status) && !WEXITSTATUS(status) &&
			   o->record && hits >= 2 && o->ns >= moved,
			   "%s", TEST_RECORD);
	}
	return tap_exit();
}
