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
#include <stdint.h>

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
};

/* Shift of the synthetic timekeeper: cycles are ns, mult = 1 << shift. */
#define SYNTHETIC_TK_SHIFT 24

/*
 * A page in @mode (PVREAD_MODE_PERCPU: one record per possible CPU, found
 * through TSC_AUX; PVREAD_MODE_STABLE: record 0 for every CPU), calibrated
 * so that readings follow the host's clocks.  0 or -1 with errno.
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

/* A thread calling synthetic_tick() every @period_us. */
int synthetic_start(struct synthetic *s, long period_us);
void synthetic_stop(struct synthetic *s);

#endif /* PVREAD_SYNTHETIC_H */
