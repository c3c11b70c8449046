// SPDX-License-Identifier: GPL-2.0
/*
 * The timekeeper, mirrored: at every update, inside its write section, the
 * conversion the vDSO would get goes into the page; and the kernel's own
 * clocks, for PVREAD_IOC_KERNEL_TIME and for the check at load that the
 * mirror gives the kernel's answer to the nanosecond.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/sched/clock.h>
#include <linux/string.h>
#include <linux/timekeeper_internal.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/utsname.h>

#include "pvread_internal.h"

static void pvread_set_base(struct pvread_clock_base *b, u64 sec, u64 snsec,
			    u64 one_sec)
{
	while (snsec >= one_sec) {
		snsec -= one_sec;
		sec++;
	}
	b->sec = sec;
	b->snsec = snsec;
}

/*
 * The conversion the vDSO would get from update_vsyscall().  Returns how
 * far MONOTONIC_COARSE is held ahead of the kernel's (below), in ns.
 */
static u64 pvread_mirror(struct pvread_timekeeper *m,
			 const struct timekeeper *tk)
{
	u32 shift = tk->tkr_mono.shift;
	u64 one_sec = (u64)NSEC_PER_SEC << shift;
	u64 xnsec = tk->tkr_mono.xtime_nsec;
	u64 mono_sec = tk->xtime_sec + tk->wall_to_monotonic.tv_sec;
	u64 mono_snsec = xnsec + ((u64)tk->wall_to_monotonic.tv_nsec << shift);
#ifdef PVREAD_HAVE_COARSE_NSEC	/* see Kbuild */
	u64 coarse_ns = tk->coarse_nsec;
#else
	u64 coarse_ns = xnsec >> shift;
#endif
	struct pvread_clock_base coarse, now;

	m->cycle_last = tk->tkr_mono.cycle_last;
	m->mask = tk->tkr_mono.mask;
	m->mult = tk->tkr_mono.mult;
	m->shift = shift;
	/*
	 * As far as the kernel itself would convert (the clocksource's
	 * max_cycles) and delta * mult + snsec cannot wrap.  Not less: a
	 * guest stalled by its host for a second must not send every reader
	 * to the kernel until the next tick.
	 */
	m->max_delta = min_t(u64, tk->tkr_mono.clock->max_cycles,
			     (U64_MAX >> 1) / max3(tk->tkr_mono.mult,
						   tk->tkr_raw.mult, 1U));
	m->raw_cycle_last = tk->tkr_raw.cycle_last;
	m->raw_mult = tk->tkr_raw.mult;
	m->raw_shift = tk->tkr_raw.shift;

	pvread_set_base(&m->base[CLOCK_REALTIME], tk->xtime_sec, xnsec, one_sec);
	pvread_set_base(&m->base[CLOCK_TAI], tk->xtime_sec + tk->tai_offset,
			xnsec, one_sec);
	pvread_set_base(&m->base[CLOCK_MONOTONIC], mono_sec, mono_snsec,
			one_sec);
	pvread_set_base(&m->base[CLOCK_BOOTTIME],
			mono_sec + tk->monotonic_to_boot.tv_sec,
			mono_snsec +
			((u64)tk->monotonic_to_boot.tv_nsec << shift), one_sec);
	if (pvread_test_mirror_skew)
		m->base[CLOCK_BOOTTIME].snsec += (u64)pvread_test_mirror_skew << shift;
	pvread_set_base(&m->base[CLOCK_MONOTONIC_RAW], tk->raw_sec,
			tk->tkr_raw.xtime_nsec,
			(u64)NSEC_PER_SEC << tk->tkr_raw.shift);
	pvread_set_base(&m->base[CLOCK_REALTIME_COARSE], tk->xtime_sec,
			coarse_ns, NSEC_PER_SEC);
	/*
	 * Before Linux 6.15 an NTP frequency change moves xtime_nsec back
	 * to keep the fine clocks continuous, and the coarse clocks step
	 * back with it (by a microsecond or so under adjtimex slews).  A
	 * monotonic clock must not: hold the last value until the kernel's
	 * catches up.  (Since 6.15 coarse_nsec only moves forward but for
	 * clock sets, and this never holds.)
	 */
	coarse = m->base[CLOCK_MONOTONIC_COARSE];
	pvread_set_base(&m->base[CLOCK_MONOTONIC_COARSE], mono_sec,
			coarse_ns + tk->wall_to_monotonic.tv_nsec,
			NSEC_PER_SEC);
	now = m->base[CLOCK_MONOTONIC_COARSE];
	if (coarse.sec < now.sec ||
	    (coarse.sec == now.sec && coarse.snsec <= now.snsec))
		return 0;
	m->base[CLOCK_MONOTONIC_COARSE] = coarse;
	return (coarse.sec - now.sec) * NSEC_PER_SEC + coarse.snsec - now.snsec;
}

/* The whole timekeeper, past the header page: privileged readers' only. */
static struct pvread_timekeeper *pvread_priv_tk(void)
{
	return (void *)((u8 *)pvread.area + pvread.hdr->priv_tk_offset);
}

/*
 * The header's copy for every reader, without the clocksource values:
 * under the xen clocksource those are Xen's system time, the host's
 * uptime where Xen does not emulate the TSC (see the UAPI header).
 */
static void pvread_publish_tk(struct pvread_header *h)
{
	h->tk = *pvread_priv_tk();
	h->tk.cycle_last = 0;
	h->tk.raw_cycle_last = 0;
}

/*
 * Called by the timekeeper at every update (ticks, settimeofday and
 * clock_settime, adjtimex, a clocksource change), inside its write section
 * with interrupts off: every ktime_get() caller spins until it returns.
 * So it does a constant amount of work, whatever the number of vCPUs:
 * whatever the update changed is on the page before the update is over
 * (the conversion, the line's offsets between clocks, no fast mode on
 * another clocksource), and the look at every record that the bound and
 * the line's next anchor need is queued for pvread_measure_work().
 */
static int pvread_gtod_notify(struct notifier_block *nb, unsigned long was_set,
			      void *priv)
{
	struct timekeeper *tk = priv;
	struct clocksource *cs = tk->tkr_mono.clock;
	struct pvread_header *h = pvread.hdr;
	u64 t0 = local_clock();
	bool xen;

#ifdef PVREAD_HAVE_TK_ID	/* see Kbuild */
	/* Only the core timekeeper is CLOCK_REALTIME and the rest. */
	if (tk->id != TIMEKEEPER_CORE)
		return NOTIFY_DONE;
#endif
	raw_spin_lock(&pvread.lock);
	xen = !strcmp(cs->name, "xen") && tk->tkr_mono.mask == U64_MAX;
	if (!xen) {
		pvread_restart_window();
		pvread.warmup_sec = PVREAD_WARMUP_SEC;
		pvread.ready = false;
	}
	pvread.xen_clocksource = xen;
	pvread.tk = *tk;
	pvread.gen++;
	if (pvread.measuring)
		pvread.updates_while_measuring++;
	pvread.last_update_ns = ktime_get_mono_fast_ns();

	pvread_write_begin(h);
	pvread.coarse_held_ns = pvread_mirror(pvread_priv_tk(), tk);
	pvread_publish_tk(h);
	if (pvread.ln.live)
		pvread_line_bases(&h->line, tk);
	if (!xen) {
		h->error_bound_ns = U64_MAX;
		h->spread_ns = U64_MAX;
	}
	WRITE_ONCE(h->updates, h->updates + 1);
	pvread_publish(h);
	pvread_write_end(h);
	/*
	 * Not while suspended: the updates of a Xen save come inside
	 * stop_machine with interrupts off, and a self-IPI raised then is
	 * lost across the restore, which would leave the work pending for
	 * good.  The first update after the resume queues it again.
	 */
	if (xen && !pvread.suspended)
		irq_work_queue(&pvread.measure_work);
	raw_spin_unlock(&pvread.lock);
	pvread.notify_last_ns = local_clock() - t0;
	pvread.notify_max_ns = max(pvread.notify_max_ns, pvread.notify_last_ns);
	return NOTIFY_OK;
}

struct notifier_block pvread_gtod_nb = {
	.notifier_call = pvread_gtod_notify,
};

/*
 * The kernel's clocks, all at one read of its clocksource, and its coarse
 * clocks, from one timekeeper state: header.updates did not move while
 * they were read (the notifier moves it inside the timekeeper's write
 * section, before any reader can see the new state).  Never under pvread.lock:
 * the timekeeper's readers wait for a notifier that waits for that lock.
 */
static int pvread_kernel_time_get(struct pvread_kernel_time *kt)
{
	struct system_time_snapshot snap = {};
	struct timespec64 ts;
	ktime_t mono, off[TK_OFFS_MAX];
	unsigned int tries = 0;
	u64 updates;

	memset(kt, 0, sizeof(*kt));
	do {
		if (++tries > 100)
			return -EAGAIN;
		updates = READ_ONCE(pvread.hdr->updates);
		/* updates before the clocks; pairs with tk_core's seqcount */
		smp_rmb();
#ifdef PVREAD_HAVE_SNAPSHOT_ID	/* see Kbuild */
		ktime_get_snapshot_id(CLOCK_MONOTONIC, &snap);
		if (!snap.valid)	/* timekeeping suspended */
			return -EAGAIN;
		mono = snap.systime;
		kt->ns[CLOCK_MONOTONIC_RAW] = ktime_to_ns(snap.monoraw);
#else
		ktime_get_snapshot(&snap);
		mono = ktime_sub(snap.real, ktime_mono_to_any(0, TK_OFFS_REAL));
		kt->ns[CLOCK_MONOTONIC_RAW] = ktime_to_ns(snap.raw);
#endif
		/*
		 * After the snapshot, not before: since 7.x these read the
		 * live timekeeper without its seqcount, and it takes a new
		 * update's offsets only after the notifier (updates) ran.
		 */
		off[TK_OFFS_REAL] = ktime_mono_to_any(0, TK_OFFS_REAL);
		off[TK_OFFS_BOOT] = ktime_mono_to_any(0, TK_OFFS_BOOT);
		off[TK_OFFS_TAI] = ktime_mono_to_any(0, TK_OFFS_TAI);
		ktime_get_coarse_real_ts64(&ts);
		kt->ns[CLOCK_REALTIME_COARSE] = timespec64_to_ns(&ts);
		ktime_get_coarse_ts64(&ts);
		kt->ns[CLOCK_MONOTONIC_COARSE] = timespec64_to_ns(&ts);
		/* the clocks before updates again: no update came between */
		smp_rmb();
	} while (READ_ONCE(pvread.hdr->updates) != updates);
	kt->updates = updates;
	kt->cycles = snap.cycles;
	kt->ns[CLOCK_MONOTONIC] = ktime_to_ns(mono);
	kt->ns[CLOCK_REALTIME] = ktime_to_ns(ktime_add(mono, off[TK_OFFS_REAL]));
	kt->ns[CLOCK_BOOTTIME] = ktime_to_ns(ktime_add(mono, off[TK_OFFS_BOOT]));
	kt->ns[CLOCK_TAI] = ktime_to_ns(ktime_add(mono, off[TK_OFFS_TAI]));
	return 0;
}

long pvread_kernel_time(struct pvread_kernel_time __user *ukt)
{
	struct pvread_kernel_time kt;
	int ret = pvread_kernel_time_get(&kt);

	if (ret)
		return ret;
	return copy_to_user(ukt, &kt, sizeof(kt)) ? -EFAULT : 0;
}

/* Clock @c at clocksource value @cycles by @m, as the vDSO computes it. */
static s64 pvread_mirror_ns(const struct pvread_timekeeper *m, unsigned int c,
			    u64 cycles)
{
	const struct pvread_clock_base *b = &m->base[c];
	u64 last = m->cycle_last, d;
	u32 mult = m->mult, shift = m->shift;

	if (c == CLOCK_REALTIME_COARSE || c == CLOCK_MONOTONIC_COARSE)
		return b->sec * NSEC_PER_SEC + (s64)b->snsec;
	if (c == CLOCK_MONOTONIC_RAW) {
		last = m->raw_cycle_last;
		mult = m->raw_mult;
		shift = m->raw_shift;
	}
	d = (cycles - last) & m->mask;
	if (d & ~(m->mask >> 1))	/* behind cycle_last: the kernel says 0 */
		d = 0;
	return b->sec * NSEC_PER_SEC +
	       (s64)(((__uint128_t)d * mult + b->snsec) >> shift);
}

/*
 * The timekeeper is the kernel's own business and changes between versions
 * (the coarse clocks, for one, come from coarse_nsec since 6.15).  So at
 * load, the conversion the page publishes must give the kernel's own
 * answer for every clock at one clocksource value, to the nanosecond; on a
 * kernel whose timekeeper this module does not mirror, it refuses to load
 * rather than serve a wrong time.  MONOTONIC_COARSE may be ahead by
 * exactly what the module held it by where the kernel's stepped back.
 */
int pvread_check_mirror(void)
{
	static const char * const names[PVREAD_NR_CLOCK_BASES] = {
		[CLOCK_REALTIME] = "CLOCK_REALTIME",
		[CLOCK_MONOTONIC] = "CLOCK_MONOTONIC",
		[CLOCK_BOOTTIME] = "CLOCK_BOOTTIME",
		[CLOCK_TAI] = "CLOCK_TAI",
		[CLOCK_MONOTONIC_RAW] = "CLOCK_MONOTONIC_RAW",
		[CLOCK_REALTIME_COARSE] = "CLOCK_REALTIME_COARSE",
		[CLOCK_MONOTONIC_COARSE] = "CLOCK_MONOTONIC_COARSE",
	};
	struct pvread_timekeeper m;
	struct pvread_kernel_time kt;
	unsigned long irqflags;
	unsigned int i, c, done = 0;
	u64 updates, held;
	s64 d;

	for (i = 0; i < 50 && !READ_ONCE(pvread.hdr->updates); i++)
		msleep(20);
	for (i = 0; i < 100 && done < 3; i++) {
		if (pvread_kernel_time_get(&kt))
			continue;
		raw_spin_lock_irqsave(&pvread.lock, irqflags);
		m = *pvread_priv_tk();
		updates = pvread.hdr->updates;
		held = pvread.coarse_held_ns;
		raw_spin_unlock_irqrestore(&pvread.lock, irqflags);
		if (!updates || updates != kt.updates)
			continue;
		for (c = 0; c < PVREAD_NR_CLOCK_BASES; c++) {
			if (!names[c])
				continue;
			d = pvread_mirror_ns(&m, c, kt.cycles) - kt.ns[c];
			if (!d || (c == CLOCK_MONOTONIC_COARSE && (u64)d == held))
				continue;
			pr_err("Linux %s: %s by the mirrored timekeeper is %lld ns off the kernel's: not a timekeeper this module mirrors, not loading\n",
			       init_utsname()->release, names[c], d);
			return -EOPNOTSUPP;
		}
		done++;
	}
	if (done < 3) {
		pr_err("no timekeeper update to check the mirror against (%u of 3 looks)\n",
		       done);
		return -EAGAIN;
	}
	return 0;
}
