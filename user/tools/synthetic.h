/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A page laid out like /dev/pvread's, built in user memory and kept current
 * by a thread standing in for Xen and the timekeeper: tests of the read path
 * and benchmarks on machines without the module.
 */
#ifndef PVREAD_SYNTHETIC_H
#define PVREAD_SYNTHETIC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <linux/pvread.h>

struct synthetic {
	struct pvread_header *hdr;
	size_t size;
	uint64_t tsc_hz;	/* measured against CLOCK_MONOTONIC_RAW */
	uint32_t mul;		/* the records' scaling of that TSC */
	int8_t shift;
	pthread_t ticker;
	atomic_bool stop;
	int ticking;
	long period_us;
	int64_t offset[3];	/* REALTIME, BOOTTIME, TAI minus MONOTONIC */
	/* PVREAD_MODE_LINE */
	bool line_live;		/* the ticker re-anchors the line */
	int64_t line_offset;	/* where the line is steered: host + this, ns */
	uint64_t line_margin;	/* ticks each anchor lies ahead of its update */
	uint64_t rate_tsc0;	/* the TSC and CLOCK_MONOTONIC_RAW at init: */
	uint64_t rate_raw0;	/* the line's rate from the longest baseline */
	uint64_t line_update_tsc;	/* the TSC of the last re-anchoring */
};

/* Shift of the synthetic timekeeper: cycles are ns, mult = 1 << shift. */
#define SYNTHETIC_TK_SHIFT 24

/*
 * A page of ABI version 4 (the header, the records, the whole timekeeper
 * past them; the header's without cycle_last) in @mode: PVREAD_MODE_LINE (a record for every
 * possible CPU, all on one pvclock line, and the page's line, which every
 * tick re-anchors) or PVREAD_MODE_NONE (the same records and timekeeper,
 * no line yet: line_state PVREAD_LINE_UNVOUCHED), calibrated so that
 * readings follow the host's clocks.  0, or -1 with errno (EINVAL for
 * another mode).
 */
int synthetic_init(struct synthetic *s, uint32_t mode);
void synthetic_free(struct synthetic *s);

struct pvread_record *synthetic_record(struct synthetic *s, unsigned int i);

/* The header's seqcount, as the module writes it. */
void synthetic_write_begin(struct synthetic *s);
void synthetic_write_end(struct synthetic *s);

/* Rewrite record @i from the TSC now, as Xen does (version odd, then even). */
void synthetic_update_record(struct synthetic *s, unsigned int i);
/* Mirror the host's clocks into the timekeeper, as the module does. */
void synthetic_tick(struct synthetic *s);

/*
 * The line, as the module keeps it: every tick re-anchors it a little ahead
 * of the TSC, at exactly the old line's value there (nanoseconds << 32), at
 * a rate from the TSC's measured frequency steered towards the host's
 * CLOCK_MONOTONIC (CLOCK_MONOTONIC_RAW for raw_mul) plus s->line_offset.
 * It never steps back, except by synthetic_line_shift() with @ns < 0.
 */
void synthetic_line_update(struct synthetic *s);

/*
 * The same line anchored @ticks earlier, its span the longest every
 * clock's line fits in 64 bits: the readings do not change.  Stop the
 * ticker first (it re-anchors).
 */
void synthetic_line_move_anchor(struct synthetic *s, uint64_t ticks);

/*
 * Place the line @ns ahead of (negative: behind) where it is now, and keep
 * it there: a step forward is what a module may do, a step back is what a
 * module must never do, for tests of what the library trusts.
 */
void synthetic_line_shift(struct synthetic *s, int64_t ns);

/*
 * Leave line mode for PVREAD_MODE_NONE as the module does: the line stays,
 * its span cut to the TSC now, and is no longer re-anchored.
 */
void synthetic_line_leave(struct synthetic *s);

/*
 * Enter line mode again: a new line @ns from the host's clock, but never
 * below where the last one ended (the module's promise), re-anchored every
 * tick from then on.
 */
void synthetic_line_enter(struct synthetic *s, int64_t ns);

/* The line's @clock at @tsc, clamped to its ends, in ns; 0 without a line. */
int64_t synthetic_line_ns(struct synthetic *s, clockid_t clock, uint64_t tsc);

/* A thread calling synthetic_tick() every @period_us. */
int synthetic_start(struct synthetic *s, long period_us);
void synthetic_stop(struct synthetic *s);

#endif /* PVREAD_SYNTHETIC_H */
