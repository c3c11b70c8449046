/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The conversions of the read path, as pure functions so that the unit
 * tests can drive them with values no real TSC would give.
 */
#ifndef PVREAD_ARITH_H
#define PVREAD_ARITH_H

#include <stdint.h>

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
 * at all rather than wrapping.  Returns false when the delta is too large
 * to multiply without overflow: then the kernel must answer.
 */
static inline int pvread_tk_shifted_ns(uint64_t cycles, uint64_t cycle_last,
				       uint64_t mask, uint64_t max_delta,
				       uint32_t mult, uint64_t snsec,
				       uint64_t *out)
{
	uint64_t delta = (int64_t)(cycles - cycle_last) > 0 ?
			 (cycles - cycle_last) & mask : 0;

	if (delta > max_delta)
		return 0;
	*out = snsec + delta * mult;
	return 1;
}

/*
 * PVREAD_MODE_LINE: TSC ticks past the line's anchor at @tsc.  A TSC read
 * before the anchor (the module anchors each line a little ahead, so that
 * a reader still on the old one never gets past it) holds the anchor's
 * value instead of going back along the line.
 */
static inline uint64_t pvread_line_delta(uint64_t tsc, uint64_t tsc_timestamp)
{
	uint64_t d = tsc - tsc_timestamp;

	return (int64_t)d < 0 ? 0 : d;
}

/*
 * The line @d ticks past its anchor: (@snsec + (@d << @shift) * @mul) >> 32
 * with a 128-bit product, nanoseconds past the base's second.  Returns
 * false for what the module never writes, a shift beyond 32 or one that
 * pushes @d out of 64 bits, so that a broken page gives a fallback rather
 * than a wrapped product.
 */
static inline int pvread_line_ns(uint64_t d, uint32_t mul, unsigned int shift,
				 uint64_t snsec, uint64_t *ns)
{
	if (shift > 32 || d > UINT64_MAX >> shift)
		return 0;
	*ns = (uint64_t)(((unsigned __int128)(d << shift) * mul + snsec) >> 32);
	return 1;
}

#endif /* PVREAD_ARITH_H */
