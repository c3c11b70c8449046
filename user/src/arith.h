/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The conversions of the read path, as pure functions so that the unit
 * tests can drive them with values no real TSC would give.
 */
#ifndef PVREAD_ARITH_H
#define PVREAD_ARITH_H

#include <stdint.h>

#include <linux/pvread.h>

#define PVREAD_ARITH_NSEC_PER_SEC 1000000000ULL

/*
 * Xen scales the TSC so that mul is in [2^31, 2^32): a shift of a few bits
 * either way for any TSC from MHz to THz.  Beyond 32 the shift itself is
 * undefined in C; such a record is no one's.
 */
static inline int pvread_pvclock_shift_ok(int8_t shift)
{
	return shift >= -32 && shift <= 32;
}

/*
 * pvclock: nanoseconds at @tsc from a record.  Xen's scaling: shift the TSC
 * delta first, then multiply by a 32.32 fixed-point factor (128-bit
 * product).  Unsigned arithmetic, so a TSC that wrapped past 2^64 since
 * @tsc_timestamp still gives the right delta.
 */
static inline uint64_t pvread_pvclock_ns(uint64_t tsc, uint64_t tsc_timestamp,
					 uint64_t system_time, uint32_t mul,
					 int8_t shift)
{
	uint64_t delta = tsc - tsc_timestamp;

	delta = shift < 0 ? delta >> -shift : delta << shift;
	return system_time + (uint64_t)(((unsigned __int128)delta * mul) >> 32);
}

/*
 * The timekeeper: shifted nanoseconds of @cycles past @cycle_last, added to
 * a base, as the vDSO does.  A reading behind @cycle_last (another CPU's
 * record, a little behind the one the kernel last read) counts as no time
 * at all rather than wrapping.  Returns 1, or 0 when the delta is beyond
 * @max_delta (too long since the last update), or -1 when the product or
 * sum would not fit (a page no kernel writes): then the kernel must answer.
 */
static inline int pvread_tk_shifted_ns(uint64_t cycles, uint64_t cycle_last,
				       uint64_t mask, uint64_t max_delta,
				       uint32_t mult, uint64_t snsec,
				       uint64_t *out)
{
	uint64_t delta = (int64_t)(cycles - cycle_last) > 0 ?
			 (cycles - cycle_last) & mask : 0;
	uint64_t p;

	if (delta > max_delta)
		return 0;
	if (__builtin_mul_overflow(delta, mult, &p) ||
	    __builtin_add_overflow(p, snsec, out))
		return -1;
	return 1;
}

/*
 * A base the kernel wrote: its shifted nanoseconds under a second, as
 * timekeeping keeps them, with a clocksource shift of at most 32.
 */
static inline int pvread_tk_base_ok(uint64_t snsec, uint32_t shift)
{
	return shift <= 32 && snsec >> shift < PVREAD_ARITH_NSEC_PER_SEC;
}

/*
 * PVREAD_MODE_LINE: TSC ticks past the line's anchor at @tsc.  A TSC read
 * before the anchor (the module's TSC at the update: a reader that read
 * its own first, or on another CPU a little behind) holds the anchor's
 * value instead of going back along the line.  The read path inlines it
 * into its test of the span (read.c's try_read()).
 */
static inline uint64_t pvread_line_delta(uint64_t tsc, uint64_t tsc_timestamp)
{
	uint64_t d = tsc - tsc_timestamp;

	return (int64_t)d < 0 ? 0 : d;
}

/*
 * May the line be read, by the page's own arithmetic (pvread_line_at()),
 * at every delta up to @d ticks past its anchor?  Not where its value
 * leaves 64 bits within them, nor from a base a second or more past its
 * second, which no module writes: a broken page gives a fallback rather
 * than a wrapped product.  The read path asks it once, at the line's span,
 * so that nothing but the product waits for the TSC.
 */
static inline int pvread_line_ok(uint64_t d, uint32_t mul, uint8_t shift,
				 uint64_t snsec)
{
	return snsec < PVREAD_ARITH_NSEC_PER_SEC << 32 &&
	       pvread_line_fits(d, mul, shift, snsec);
}

/*
 * pvread_line_at() of the delta @tsc - @stamp, as @tsc * rate + the
 * offset pvread_line_offset() makes of the anchor @stamp: the same sum
 * modulo 2^64, and so the same value wherever pvread_line_ok() holds at
 * that delta.  The offset is made of loads alone, so that what waits for
 * the TSC is the product and one sum, not a difference first.  A caller
 * hides the offset from the compiler, which would fold it back.
 */
static inline uint64_t pvread_line_offset(uint64_t stamp, uint32_t mul,
					  uint8_t shift, uint64_t snsec)
{
	return snsec - stamp * ((uint64_t)mul << shift);
}

static inline uint64_t pvread_line_at_tsc(uint64_t tsc, uint32_t mul,
					  uint8_t shift, uint64_t offset)
{
	return tsc * ((uint64_t)mul << shift) + offset;
}

/*
 * The ticks past the anchor from which the line is at or above @below_ns
 * nanoseconds past its base's second: the least d with
 * pvread_line_at(d) >> 32 >= @below_ns, into *@pass, where the line
 * reaches it within @span (0 where it starts there); else false.  For a
 * line pvread_line_ok() at @span, and @below_ns under 2^32.
 */
static inline int pvread_line_pass(uint64_t span, uint32_t mul, uint8_t shift,
				   uint64_t snsec, uint64_t below_ns,
				   uint64_t *pass)
{
	uint64_t target = below_ns << 32, rate = (uint64_t)mul << shift, d;

	if (target <= snsec) {
		*pass = 0;
		return 1;
	}
	if (!rate)
		return 0;
	d = (target - snsec) / rate + ((target - snsec) % rate != 0);
	if (d > span)
		return 0;
	*pass = d;
	return 1;
}

/*
 * The line @d ticks past its anchor, in nanoseconds past the base's second,
 * where pvread_line_ok() at @d; else false.
 */
static inline int pvread_line_ns(uint64_t d, uint32_t mul, uint8_t shift,
				 uint64_t snsec, uint64_t *ns)
{
	if (!pvread_line_ok(d, mul, shift, snsec))
		return 0;
	*ns = pvread_line_at(d, mul, shift, snsec) >> 32;
	return 1;
}

#endif /* PVREAD_ARITH_H */
