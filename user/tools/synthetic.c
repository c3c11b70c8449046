// SPDX-License-Identifier: LGPL-2.1-or-later
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "arith.h"
#include "synthetic.h"

#define NSEC_PER_SEC 1000000000ULL
#define WMB() __atomic_thread_fence(__ATOMIC_RELEASE)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

static uint64_t now_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static void calibrate(struct synthetic *s)
{
	uint64_t t0, t1, c0, c1, scaled;
	struct timespec pause = { 0, 50 * 1000 * 1000 };

	t0 = now_ns(CLOCK_MONOTONIC_RAW);
	c0 = __rdtsc();
	nanosleep(&pause, NULL);
	t1 = now_ns(CLOCK_MONOTONIC_RAW);
	c1 = __rdtsc();
	s->tsc_hz = (c1 - c0) * NSEC_PER_SEC / (t1 - t0);
	s->rate_tsc0 = c0;
	s->rate_raw0 = t0;

	/* Xen's form: mul in [2^31, 2^32) after shifting the frequency. */
	s->shift = 0;
	scaled = s->tsc_hz;
	while (scaled > 2 * NSEC_PER_SEC) {
		scaled >>= 1;
		s->shift--;
	}
	while (scaled <= NSEC_PER_SEC) {
		scaled <<= 1;
		s->shift++;
	}
	s->mul = (uint32_t)((NSEC_PER_SEC << 32) / scaled);
}

struct pvread_record *synthetic_record(struct synthetic *s, unsigned int i)
{
	return (struct pvread_record *)((char *)s->hdr + s->hdr->record_offset +
					(size_t)i * s->hdr->record_stride);
}

void synthetic_write_begin(struct synthetic *s)
{
	STORE(s->hdr->seq, s->hdr->seq + 1);
	WMB();
}

void synthetic_write_end(struct synthetic *s)
{
	WMB();
	STORE(s->hdr->seq, s->hdr->seq + 1);
}

/*
 * The page's pvclock now, from record 0, which a test may be rewriting
 * (also to a line anchored after @tsc: then back along it).
 */
static uint64_t pvclock_now(struct synthetic *s, uint64_t tsc)
{
	const struct pvread_pvclock *p = &synthetic_record(s, 0)->pvclock;
	uint64_t ns, ts;
	uint32_t v;

	do {
		v = __atomic_load_n(&p->version, __ATOMIC_ACQUIRE);
		ts = p->tsc_timestamp;
		if (tsc >= ts)
			ns = pvread_pvclock_ns(tsc, ts, p->system_time,
					       p->tsc_to_system_mul,
					       p->tsc_shift);
		else
			ns = p->system_time -
			     pvread_pvclock_ns(ts, tsc, 0,
					       p->tsc_to_system_mul,
					       p->tsc_shift);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((v & 1) || __atomic_load_n(&p->version, __ATOMIC_RELAXED) != v);
	return ns;
}

void synthetic_update_record(struct synthetic *s, unsigned int i)
{
	struct pvread_pvclock *p = &synthetic_record(s, i)->pvclock;
	uint64_t tsc = __rdtsc();
	/* The new line continues the old one: pvclock never steps. */
	uint64_t ns = pvclock_now(s, tsc);

	STORE(p->version, p->version + 1);
	WMB();
	STORE(p->tsc_timestamp, tsc);
	STORE(p->system_time, ns);
	STORE(p->tsc_to_system_mul, s->mul);
	STORE(p->tsc_shift, s->shift);
	WMB();
	STORE(p->version, p->version + 1);
}

static void set_base(struct pvread_clock_base *b, uint64_t ns, unsigned int shift)
{
	STORE(b->sec, (int64_t)(ns / NSEC_PER_SEC));
	STORE(b->snsec, (ns % NSEC_PER_SEC) << shift);
}

static uint64_t base_ns(const struct pvread_clock_base *b, unsigned int shift)
{
	return b->sec * NSEC_PER_SEC + (b->snsec >> shift);
}

/*
 * The next mult: the one that brings @ours towards @host over the next few
 * periods, as NTP steers the kernel's, by at most 15 ppm: a reader that
 * read the TSC just before an update and one just after then still agree
 * to well under a nanosecond.
 */
static uint32_t steer(uint64_t ours, uint64_t host, long period_us)
{
	int64_t err = (int64_t)(host - ours);
	int64_t one = 1LL << SYNTHETIC_TK_SHIFT;
	int64_t adj = err * one / (4 * period_us * 1000 + 1);

	if (adj > one >> 16)
		adj = one >> 16;
	if (adj < -(one >> 16))
		adj = -(one >> 16);
	return (uint32_t)(one + adj);
}

/*
 * The host's offset between two clocks, measured by two system calls, is
 * noisy by their cost: keep the one we have unless the host's clock really
 * jumped (clock_settime, a suspend).
 */
static int64_t offset(struct synthetic *s, int i, int64_t measured)
{
	int64_t d = measured - s->offset[i];

	if (!s->hdr->updates || d > 1000000 || d < -1000000)
		s->offset[i] = measured;
	return s->offset[i];
}

/*
 * The kernel's CLOCK_BOOTTIME less its CLOCK_MONOTONIC (monotonic_to_boot),
 * which the module publishes exactly: here the middle of the tightest of
 * many brackets (BOOTTIME between two MONOTONIC), so that a child's check
 * of its boottime offset (mapping.c), which wants the page's difference
 * inside its own bracket, finds it there as it would the module's.
 */
static int64_t boot_offset_estimate(void)
{
	int64_t lo = INT64_MIN, hi = INT64_MAX;
	int i;

	for (i = 0; i < 256; i++) {
		int64_t m1 = (int64_t)now_ns(CLOCK_MONOTONIC);
		int64_t b = (int64_t)now_ns(CLOCK_BOOTTIME);
		int64_t m2 = (int64_t)now_ns(CLOCK_MONOTONIC);

		if (b - m2 > lo)
			lo = b - m2;
		if (b - m1 < hi)
			hi = b - m1;
	}
	return lo + (hi - lo) / 2;
}

/* The whole timekeeper, past the records, as the module writes it. */
static struct pvread_timekeeper *priv_tk(struct synthetic *s)
{
	return (struct pvread_timekeeper *)((char *)s->hdr +
					    s->hdr->priv_tk_offset);
}

void synthetic_tick(struct synthetic *s)
{
	struct pvread_timekeeper *tk = &s->hdr->tk, *ptk = priv_tk(s);
	const unsigned int sh = SYNTHETIC_TK_SHIFT;
	uint64_t cycles, mono, boot, tai, raw, mono_coarse, real_coarse;
	uint64_t ours, ours_raw;

	/* Read the host's clocks first: the write section must stay short. */
	mono = now_ns(CLOCK_MONOTONIC);
	boot = now_ns(CLOCK_BOOTTIME);
	tai = now_ns(CLOCK_TAI);
	raw = now_ns(CLOCK_MONOTONIC_RAW);
	/*
	 * The two coarse clocks at one tick, as the kernel's timekeeper has
	 * them: their difference is wall_to_monotonic, exactly, which the
	 * module's fine REALTIME and MONOTONIC differ by too (a child's check
	 * of its monotonic offset compares them).
	 */
	do {
		real_coarse = now_ns(CLOCK_REALTIME_COARSE);
		mono_coarse = now_ns(CLOCK_MONOTONIC_COARSE);
	} while (now_ns(CLOCK_REALTIME_COARSE) != real_coarse);
	/* Before the write section: the estimate takes a few microseconds. */
	if (!s->hdr->updates || (int64_t)(boot - mono) - s->offset[1] > 1000000 ||
	    (int64_t)(boot - mono) - s->offset[1] < -1000000)
		s->offset[1] = boot_offset_estimate();
	cycles = pvclock_now(s, __rdtsc());

	/* Only this thread writes the cycles: the header's copy has none. */
	if (ptk->cycle_last) {
		/* Carry on from where the last update's line has got to. */
		ours = base_ns(&tk->base[CLOCK_MONOTONIC], sh) +
		       (((cycles - ptk->cycle_last) * tk->mult) >> sh);
		ours_raw = base_ns(&tk->base[CLOCK_MONOTONIC_RAW], sh) +
			   (((cycles - ptk->raw_cycle_last) * tk->raw_mult) >> sh);
	} else {
		ours = mono;
		ours_raw = raw;
	}
	synthetic_write_begin(s);
	STORE(tk->mult, steer(ours, mono, s->period_us ? s->period_us : 1000));
	STORE(tk->raw_mult, steer(ours_raw, raw,
				  s->period_us ? s->period_us : 1000));
	/* The other clocks are offsets from ours, like the kernel's. */
	set_base(&tk->base[CLOCK_MONOTONIC], ours, sh);
	set_base(&tk->base[CLOCK_REALTIME],
		 ours + offset(s, 0, (int64_t)(real_coarse - mono_coarse)),
		 sh);
	set_base(&tk->base[CLOCK_BOOTTIME], ours + s->offset[1], sh);
	set_base(&tk->base[CLOCK_TAI],
		 ours + offset(s, 2, (int64_t)(tai - mono)), sh);
	set_base(&tk->base[CLOCK_MONOTONIC_RAW], ours_raw, sh);
	set_base(&tk->base[CLOCK_MONOTONIC_COARSE], mono_coarse, 0);
	set_base(&tk->base[CLOCK_REALTIME_COARSE], real_coarse, 0);
	/* No library reads this copy: plain stores. */
	memcpy(ptk, tk, sizeof(*ptk));
	ptk->cycle_last = cycles;
	ptk->raw_cycle_last = cycles;
	STORE(s->hdr->updates, s->hdr->updates + 1);
	synthetic_write_end(s);
}

/* Nanoseconds << 32 in a second: the unit of the line's bases. */
#define SEC_SHIFTED ((__int128)NSEC_PER_SEC << 32)

static bool is_fine(clockid_t clock)
{
	return clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC ||
	       clock == CLOCK_MONOTONIC_RAW || clock == CLOCK_BOOTTIME ||
	       clock == CLOCK_TAI;
}

/* A base of the line as one number, nanoseconds << 32, and back. */
static __int128 line_base(const struct pvread_clock_base *b)
{
	return (__int128)b->sec * SEC_SHIFTED + b->snsec;
}

static void set_line_base(struct pvread_clock_base *b, __int128 v)
{
	__int128 sec = v / SEC_SHIFTED, rem = v % SEC_SHIFTED;

	if (rem < 0) {
		rem += SEC_SHIFTED;
		sec--;
	}
	STORE(b->sec, (int64_t)sec);
	STORE(b->snsec, (uint64_t)rem);
}

/*
 * The line's @clock at @tsc, clamped to its ends, ns << 32: by the page's
 * own arithmetic (pvread_line_value(), as the module and readers), which
 * the spans written here never take beyond 64 bits.
 */
static __int128 line_at(const struct pvread_line *l, clockid_t clock,
			uint64_t tsc)
{
	bool raw = clock == CLOCK_MONOTONIC_RAW;
	uint64_t d = pvread_line_delta(tsc, l->tsc_timestamp);
	__u64 v = 0;

	if (d > l->tsc_span)
		d = l->tsc_span;
	if (!pvread_line_value(d, raw ? l->raw_mul : l->mul,
			       raw ? l->raw_shift : l->shift, 0, &v))
		abort();
	return line_base(&l->base[clock]) + (__int128)v;
}

int64_t synthetic_line_ns(struct synthetic *s, clockid_t clock, uint64_t tsc)
{
	const struct pvread_line *l = &s->hdr->line;

	if (!l->tsc_span || !is_fine(clock))
		return 0;
	return (int64_t)(line_at(l, clock, tsc) >> 32);
}

/*
 * ns per tick << (32 - shift): the TSC's frequency against
 * CLOCK_MONOTONIC_RAW since calibration began, steered to make up @err ns
 * over the next eight periods, by at most 100 ppm (NTP's limit is 500).
 */
static uint32_t line_mul(struct synthetic *s, uint64_t tsc, uint64_t raw,
			 unsigned int shift, int64_t err)
{
	int64_t horizon = 8 * (s->period_us ? s->period_us : 1000) * 1000;
	int64_t m = (int64_t)(((unsigned __int128)(raw - s->rate_raw0) <<
			       (32 - shift)) / (tsc - s->rate_tsc0));

	if (err > horizon / 10000)
		err = horizon / 10000;
	if (err < -horizon / 10000)
		err = -horizon / 10000;
	return (uint32_t)(m + m * err / horizon);
}

/*
 * A new line, as the module starts one: anchored @margin ticks ahead of the
 * TSC read after the header's seq is made odd and visible, so that a reader
 * still on the old line read its TSC before the anchor, and the new one
 * starts exactly where the old one stands at the anchor.  Behind the host
 * (plus the offset) by more than @jump ns, it starts there instead: a step
 * forward, never back.  The header must be open for writing.
 */
static void anchor_line(struct synthetic *s, uint64_t mono, uint64_t tsc_mono,
			uint64_t raw, uint64_t tsc_raw, int64_t jump)
{
	struct pvread_line *l = &s->hdr->line;
	bool first = !l->tsc_span;
	__int128 v, v_raw, host, host_raw;
	uint32_t mul, raw_mul;
	uint64_t tsc, anchor;
	int i;

	mul = line_mul(s, tsc_mono, raw, l->shift, first ? 0 :
		       (int64_t)(mono + s->line_offset) -
		       (int64_t)(line_at(l, CLOCK_MONOTONIC, tsc_mono) >> 32));
	raw_mul = line_mul(s, tsc_raw, raw, l->raw_shift, first ? 0 :
			   (int64_t)(raw + s->line_offset) -
			   (int64_t)(line_at(l, CLOCK_MONOTONIC_RAW,
					     tsc_raw) >> 32));
	__atomic_thread_fence(__ATOMIC_SEQ_CST);	/* the odd seq is out */
	tsc = __rdtsc();
	anchor = tsc + s->line_margin;
	host = ((__int128)(mono + s->line_offset) << 32) +
	       (__int128)(anchor - tsc_mono) * mul;
	host_raw = ((__int128)(raw + s->line_offset) << 32) +
		   (__int128)(anchor - tsc_raw) * raw_mul;
	if (first) {
		v = host;
		v_raw = host_raw;
	} else {
		v = line_at(l, CLOCK_MONOTONIC, anchor);
		v_raw = line_at(l, CLOCK_MONOTONIC_RAW, anchor);
		if (host - v > ((__int128)jump << 32))
			v = host;
		if (host_raw - v_raw > ((__int128)jump << 32))
			v_raw = host_raw;
	}
	STORE(l->tsc_timestamp, anchor);
	STORE(l->tsc_span, s->tsc_hz);	/* a second without ticks: syscall */
	STORE(l->mul, mul);
	STORE(l->raw_mul, raw_mul);
	set_line_base(&l->base[CLOCK_MONOTONIC], v);
	for (i = 0; i < 3; i++)
		set_line_base(&l->base[i == 0 ? CLOCK_REALTIME :
				       i == 1 ? CLOCK_BOOTTIME : CLOCK_TAI],
			      v + (__int128)s->offset[i] * ((__int128)1 << 32));
	set_line_base(&l->base[CLOCK_MONOTONIC_RAW], v_raw);
	STORE(l->anchors, l->anchors + 1);
	s->line_update_tsc = tsc;
}

/* The host's CLOCK_MONOTONIC and _RAW, each with the TSC just after. */
static void host_pairs(uint64_t *mono, uint64_t *tsc_mono, uint64_t *raw,
		       uint64_t *tsc_raw)
{
	*mono = now_ns(CLOCK_MONOTONIC);
	*tsc_mono = __rdtsc();
	*raw = now_ns(CLOCK_MONOTONIC_RAW);
	*tsc_raw = __rdtsc();
}

void synthetic_line_update(struct synthetic *s)
{
	uint64_t mono, tsc_mono, raw, tsc_raw;

	if (!s->line_live)
		return;
	host_pairs(&mono, &tsc_mono, &raw, &tsc_raw);
	synthetic_write_begin(s);
	/* A line a millisecond behind (a stalled ticker) jumps to the host. */
	anchor_line(s, mono, tsc_mono, raw, tsc_raw, 1000000);
	synthetic_write_end(s);
}

void synthetic_line_shift(struct synthetic *s, int64_t ns)
{
	struct pvread_line *l = &s->hdr->line;
	int i;

	synthetic_write_begin(s);
	s->line_offset += ns;
	for (i = 0; i < PVREAD_NR_CLOCK_BASES; i++)
		if (is_fine(i))
			set_line_base(&l->base[i], line_base(&l->base[i]) +
				      (__int128)ns * ((__int128)1 << 32));
	STORE(l->anchors, l->anchors + 1);
	synthetic_write_end(s);
}

/* The line's rate for @clock, ns << 32 per tick (as the reader's). */
static uint64_t line_rate(const struct pvread_line *l, int clock)
{
	bool raw = clock == CLOCK_MONOTONIC_RAW;

	return (uint64_t)(raw ? l->raw_mul : l->mul)
	       << (raw ? l->raw_shift : l->shift);
}

void synthetic_line_move_anchor(struct synthetic *s, uint64_t ticks)
{
	struct pvread_line *l = &s->hdr->line;
	uint64_t span = UINT64_MAX, fits;
	int i;

	synthetic_write_begin(s);
	STORE(l->tsc_timestamp, l->tsc_timestamp - ticks);
	/* As long as every clock's line fits 64 bits (pvread_line_ok()). */
	for (i = 0; i < PVREAD_NR_CLOCK_BASES; i++) {
		if (!is_fine(i))
			continue;
		set_line_base(&l->base[i], line_base(&l->base[i]) -
			      (__int128)ticks * line_rate(l, i));
		fits = (UINT64_MAX - l->base[i].snsec) / line_rate(l, i);
		if (fits < span)
			span = fits;
	}
	STORE(l->tsc_span, span);
	STORE(l->anchors, l->anchors + 1);
	synthetic_write_end(s);
}

void synthetic_line_leave(struct synthetic *s)
{
	struct pvread_line *l = &s->hdr->line;
	uint64_t d;

	s->line_live = false;
	synthetic_write_begin(s);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	d = pvread_line_delta(__rdtsc(), l->tsc_timestamp);
	/* span 0 would say there never was a line */
	if (d < l->tsc_span)
		STORE(l->tsc_span, d ? d : 1);
	STORE(s->hdr->mode, PVREAD_MODE_NONE);
	STORE(s->hdr->line_state, PVREAD_LINE_OFF);
	synthetic_write_end(s);
}

void synthetic_line_enter(struct synthetic *s, int64_t ns)
{
	uint64_t mono, tsc_mono, raw, tsc_raw;

	host_pairs(&mono, &tsc_mono, &raw, &tsc_raw);
	synthetic_write_begin(s);
	s->line_offset = ns;
	/* from the old line's end, or the host's clock if that is later */
	anchor_line(s, mono, tsc_mono, raw, tsc_raw, 0);
	STORE(s->hdr->mode, PVREAD_MODE_LINE);
	STORE(s->hdr->line_state, PVREAD_LINE_ACTIVE);
	synthetic_write_end(s);
	s->line_live = true;
}

int synthetic_init(struct synthetic *s, uint32_t mode)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	struct pvread_header *h;
	uint64_t tsc, ns;
	unsigned int i, nr;

	memset(s, 0, sizeof(*s));
	if (ncpu < 1 || ncpu > PVREAD_MAX_RECORDS) {
		errno = ERANGE;
		return -1;
	}
	nr = (unsigned int)ncpu;
	if (mode != PVREAD_MODE_LINE && mode != PVREAD_MODE_NONE) {
		errno = EINVAL;
		return -1;
	}
	s->size = 4096 + (size_t)nr * sizeof(struct pvread_record) +
		  sizeof(struct pvread_timekeeper);
	h = mmap(NULL, s->size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED)
		return -1;
	s->hdr = h;
	calibrate(s);

	h->magic = PVREAD_MAGIC;
	h->abi_version = PVREAD_ABI_VERSION;
	h->mode = PVREAD_MODE_NONE;	/* synthetic_line_enter() below */
	h->flags = PVREAD_FLAG_XEN_CLOCKSOURCE;
	h->line_state = PVREAD_LINE_UNVOUCHED;
	h->nr_records = nr;
	h->nr_registered = nr;
	h->record_offset = 4096;
	h->record_stride = sizeof(struct pvread_record);
	h->map_size = s->size;
	h->priv_tk_offset = 4096 + nr * sizeof(struct pvread_record);
	h->disruptions = 0;
	h->error_bound_ns = 1000;	/* what the library is told to trust */
	h->spread_ns = 0;
	h->tk.mask = UINT64_MAX;
	h->tk.mult = 1U << SYNTHETIC_TK_SHIFT;
	h->tk.shift = SYNTHETIC_TK_SHIFT;
	h->tk.raw_mult = 1U << SYNTHETIC_TK_SHIFT;
	h->tk.raw_shift = SYNTHETIC_TK_SHIFT;
	h->tk.max_delta = NSEC_PER_SEC;

	/* Every record on one line: they agree, as Xen's do since 4.8. */
	tsc = __rdtsc();
	ns = now_ns(CLOCK_MONOTONIC_RAW);
	for (i = 0; i < nr; i++) {
		struct pvread_record *r = synthetic_record(s, i);

		r->pvclock.version = 2;
		r->pvclock.tsc_timestamp = tsc;
		r->pvclock.system_time = ns;
		r->pvclock.tsc_to_system_mul = s->mul;
		r->pvclock.tsc_shift = s->shift;
		r->pvclock.flags = 0;
		r->state = PVREAD_RECORD_REGISTERED;
		r->xen_vcpu_id = i;
	}
	/*
	 * The line: shift 0 for a TSC above 1 GHz, room for the steering's
	 * 100 ppm in mul; anchors a microsecond ahead of their update.
	 */
	while (((NSEC_PER_SEC << (32 - h->line.shift)) / s->tsc_hz) >=
	       (1ULL << 32) - (1ULL << 22))
		h->line.shift++;
	h->line.raw_shift = h->line.shift;
	s->line_margin = s->tsc_hz / 1000000;
	synthetic_tick(s);
	if (mode == PVREAD_MODE_LINE) {
		h->line_state = PVREAD_LINE_ACTIVE;
		h->flags |= PVREAD_FLAG_HOST_TSC_RELIABLE;
		synthetic_line_enter(s, 0);
	}
	return 0;
}

void synthetic_free(struct synthetic *s)
{
	synthetic_stop(s);
	munmap(s->hdr, s->size);
	s->hdr = NULL;
}

static void *ticker(void *arg)
{
	struct synthetic *s = arg;
	struct timespec pause = { 0, s->period_us * 1000 };

	while (!atomic_load(&s->stop)) {
		nanosleep(&pause, NULL);
		synthetic_tick(s);
		synthetic_line_update(s);
	}
	return NULL;
}

int synthetic_start(struct synthetic *s, long period_us)
{
	int err;

	s->period_us = period_us;
	atomic_store(&s->stop, false);
	err = pthread_create(&s->ticker, NULL, ticker, s);
	if (err) {
		errno = err;
		return -1;
	}
	s->ticking = 1;
	return 0;
}

void synthetic_stop(struct synthetic *s)
{
	if (!s->ticking)
		return;
	atomic_store(&s->stop, true);
	pthread_join(s->ticker, NULL);
	s->ticking = 0;
}
