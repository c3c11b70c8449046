#!/bin/bash
# user/test/mutants.sh — break the read path one way at a time and show
# that the host tests catch every breakage.
#
#   user/test/mutants.sh [NAME...]     (from anywhere; default: every mutant)
#
# Each mutant is an exact edit of user/src/*.c or *.h (a perl substitution
# that must match once: a source change that moves the text makes the
# script fail, not pass). The tree is copied to a temporary directory, the
# edit applied there, the unit tests built and run, and the built
# libpvread.a's TSC reads checked (test/tsc-order.sh: no test that runs
# the code can see them out of order), one mutant per CPU at a time
# (PVREAD_MUTANT_JOBS to change it); a mutant is killed when some test
# says "not ok" or the tests exit non-zero, or time out (120 s).
# Prints one line per mutant and exits 0 only if every one was killed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)

# name | file under user/ | perl substitution (s{...}{...}s, must match)
#   [| ubsan: built from scratch with -fsanitize=undefined, trapping: a
#   breakage whose harm is undefined behaviour (a shift by a negative
#   clock id, a read out of bounds), which an unsanitized build survives
#   by chance -- it did in one CI run of three]
MUTANTS=(
    "record-version-not-rechecked|src/info.c|s{\tif \(LOAD\(r->pvclock.version\) != version\)\n\t\treturn READ_RETRY;\n}{}s"
    "tsc-before-record-accepted|src/info.c|s{\tif \(s->tsc < tsc_timestamp\)\n\t\treturn READ_RETRY;\n}{}s"
    "record-shift-not-checked|src/info.c|s{\tif \(unlikely\(!pvread_pvclock_shift_ok\(shift\)\)\)\n\t\treturn READ_NO_INVALID;\n}{}s"
    "unregistered-record-sampled|src/info.c|s{\tif \(!\(LOAD\(r->state\) & PVREAD_RECORD_REGISTERED\)\)\n\t\treturn READ_NO_INVALID;\n}{}s"
    "sample-of-cpu-0|src/info.c|s{\t\tswitch \(sample_record\(p, before, sample\)\) \{}{\t\tswitch (sample_record(p, 0, sample)) \{}s"
    "header-seq-not-rechecked|src/read.c|s{\tif \(unlikely\(LOAD\(h->seq\) != seq\)\)\n\t\treturn READ_RETRY;\n\t/\* The kernel}{\t/* The kernel}s"
    "abi-version-not-checked|src/mapping.c|s{ \|\|\n\t    h->abi_version != PVREAD_ABI_VERSION}{}s"
    "records-of-a-header-page|src/mapping.c|s{h->map_size <= size \?}{1 ?}s"
    "mode-not-checked|src/read.c|s{if \(unlikely\(LOAD\(h->mode\) != PVREAD_MODE_LINE\)\)}{if (0)}s"
    "old-mode-numbers-read-as-line|src/read.c|s{if \(unlikely\(LOAD\(h->mode\) != PVREAD_MODE_LINE\)\)}{if (unlikely(LOAD(h->mode) == PVREAD_MODE_NONE))}s"
    "line-monotonic-at-raw-rate|src/internal.h|s{\tif \(clock == CLOCK_MONOTONIC_RAW\) \{\n\t\t\*mul = LOAD\(l->raw_mul\);}{\tif \(1\) \{\n\t\t*mul = LOAD\(l->raw_mul\);}s"
    "errno-not-restored|src/mapping.c|s{\terrno = saved_errno;\n\treturn made;\n}{\treturn made;\n}s"
    "bound-not-checked|src/read.c|s{if \(unlikely\(LOAD\(h->error_bound_ns\) > tolerance\)\)}{if \(0\)}s"
    "line-span-not-checked|src/read.c|s{\t\t\tif \(\(int64_t\)d >= 0\)\n\t\t\t\treturn confirmed\(h, seq, READ_NO_DELTA\);\n\t\t\ttsc = stamp;}{\t\t\tif ((int64_t)d < 0)\n\t\t\t\ttsc = stamp;}s"
    "line-tsc-before-anchor-not-clamped|src/read.c|s{\t\t\ttsc = stamp;\n}{\t\t\treturn confirmed(h, seq, READ_NO_DELTA);\n}s"
    "line-tsc-before-anchor-read-back|src/read.c|s{\t\t\ttsc = stamp;\n}{\t\t\t;\n}s"
    "line-low-half-whatever-the-high-half|src/read.c|s{\t\tif \(likely\(t.hi == stamp >> 32\)\) \{}{\t\tif (1) \{}s"
    "checked-line-never-holds|src/read.c|s{\(seen \? unlikely\(d < LINE_CHECKED_PASS\(checked\)\) :}{(seen ? 0 :}s"
    "checked-line-whatever-the-seq|src/read.c|s{\t    likely\(seq == LINE_CHECKED_SEQ\(checked\)\)\)}{\t    likely(1))}s"
    "check-line-pass-without-coarse-ns|src/read.c|s{\(csec - msec\) \* NSEC_PER_SEC \+ cns, &pass\)}{(csec - msec) * NSEC_PER_SEC, &pass)}s"
    "check-line-two-clocks-for-all|src/read.c|s{for \(i = 0; i < sizeof\(fine\) / sizeof\(fine\[0\]\); i\+\+\) \{}{for (i = 0; i < 2; i++) \{}s"
    "check-line-any-realtime-fraction|src/read.c|s{\(uint32_t\)snsec != \(uint32_t\)msnsec\)}{0)}s"
    "line-pass-rounded-down|src/arith.h|s{ \+ \(\(target - snsec\) % rate != 0\);}{;}s"
    "checked-line-clamp-keeps-the-delta|src/read.c|s{\t\t\ttsc = stamp;\n\t\t\td = 0;}{\t\t\ttsc = stamp;}s"
    "check-line-coarse-seconds-unbounded|src/read.c|s{else if \(csec - msec > 3 \|\|}{else if (0 ||}s"
    "check-line-signed-seconds|src/read.c|s{\t\tif \(sec > KTIME_SEC_MAX \|\|}{\t\tif ((int64_t)sec > KTIME_SEC_MAX ||}s"
    "checked-line-held-past-the-kernel-seconds|src/read.c|s{\t\t\tif \(seen && unlikely\(\(uint64_t\)v.sec > KTIME_SEC_MAX\)\)\n}{\t\t\tif (0)\n}s"
    "line-pass-at-rate-0|src/arith.h|s{\tif \(!rate\)\n\t\treturn 0;\n}{}s"
    "line-unchecked-names-seq-1|src/internal.h|s{#define LINE_UNCHECKED \(\(uint64_t\)1 << 63\)}{#define LINE_UNCHECKED ((uint64_t)1 << 31)}s"
    "ns-kernel-first-any-clock-id|src/read.c|s{\t    likely\(\(unsigned int\)clock < PVREAD_NR_CLOCK_BASES\) &&\n\t    likely\(clock_in\(CLOCKS_FINE \| CLOCKS_COARSE, clock\)\)\)}{\t    likely(clock_in(CLOCKS_FINE | CLOCKS_COARSE, clock)))}s"
    "kernel-answer-any-clock-id|src/internal.h|s{\tif \(unlikely\(ret\) \|\| \(unsigned int\)clock >= PVREAD_NR_CLOCK_BASES \|\|}{\tif (unlikely(ret) ||}s|ubsan"
    "line-read-without-its-anchor|src/read.c|s{\t\toffset = pvread_line_offset\(stamp, mul, shift, snsec\);}{\t\toffset = snsec;}s"
    "line-record-seq-not-rechecked|src/read.c|s{\tif \(unlikely\(LOAD\(h->seq\) != seq\)\)\n\t\treturn false;\n\tif \(unlikely\(atomic_load_explicit\(&p->mode_seen\[CLOCK_MONOTONIC\]}{\tif (unlikely(atomic_load_explicit(&p->mode_seen[CLOCK_MONOTONIC]}s"
    "line-record-whatever-its-key|src/read.c|s{\tif \(unlikely\(key != seq\) \|\|\n}{\tif (}s"
    "line-record-across-a-resume|src/read.c|s{ \|\|\n\t    unlikely\(\(uint32_t\)\(hint >> 32\) !=\n\t\t     atomic_load_explicit\(&r->resumes, memory_order_relaxed\)\)\)}{)}s"
    "line-record-never-holds|src/read.c|s{&r->start, stamp \+ pass,}{\&r->start, stamp,}s"
    "line-record-past-its-span|src/read.c|s{\tif \(unlikely\(d >= atomic_load_explicit\(&r->window,\n\t\t\t\t\t       memory_order_relaxed\)\)\)}{\tif (unlikely((int64_t)d < 0))}s"
    "line-record-ignores-mode-seen|src/read.c|s{\tif \(unlikely\(atomic_load_explicit\(&p->mode_seen\[CLOCK_MONOTONIC\],\n\t\t\t\t\t  memory_order_acquire\) != SEEN_LINE\)\)\n\t\treturn false;\n}{}s"
    "line-record-ignores-floor|src/read.c|s{\tif \(unlikely\(\(int64_t\)v.ns < floor\)\)\n\t\treturn false;\n}{}s"
    "line-record-above-the-bound|src/read.c|s{ \|\|\n\t    LOAD\(h->error_bound_ns\) > p->map.tolerance_ns}{}s"
    "line-record-without-the-timens-offset|src/read.c|s{\tif \(timens_shifts\(CLOCK_MONOTONIC\) && p->map.ns.shifted\) \{}{\tif (0) \{}s"
    "line-record-not-made-again-in-a-child|src/mapping.c|s{\tatomic_store_explicit\(&pvread_line_checked, LINE_UNCHECKED,\n\t\t\t      memory_order_relaxed\);\n\}}{\}}s"
    "floor-not-raised|src/order.c|s{\twhile \(v > cur\)\n}{\twhile \(0\)\n}s"
    "floor-not-respected|src/order.c|s{\tif \(v < cur\) \{\n\t\tpvread_thread_stats.clamped\+\+;}{\tif (0) \{\n\t\tpvread_thread_stats.clamped++;}s"
    "no-seed-while-holding|src/order.c|s{\t\t\treturn pvread_slow_clock_gettime\(p, clock, ts,\n\t\t\t\t\t\t\t PVREAD_SLOW_SEED\);}{\t\t\treturn 0;}s"
    "one-mode-seen-for-every-clock|src/order.c|s{_Atomic uint32_t \*seen_p = &p->mode_seen\[clock\];}{_Atomic uint32_t *seen_p = &p->mode_seen[0];}s"
    "fallback-not-lifted-to-line|src/order.c|s{\t\t\tnot_below_line\(p, clock, ts, seen == SEEN_HOLDING\);}{\t\t\t;}s"
    "timens-offsets-not-added|src/read.c|s{\t\tv.sec \+= m->ns.sec\[clock\];\n\t\tv.ns \+= \(uint64_t\)m->ns.nsec\[clock\];}{\t\t;}s"
    "stuck-writer-not-remembered|src/internal.h|s{\tif \(seq & 1\)\n\t\tatomic_store_explicit\(&p->stuck_seq, seq, memory_order_relaxed\);}{\t\(void\)seq;}s"
    "tolerance-accepts-hex|src/mapping.c|s{\t\tif \(digit > 9 \|\| }{\t\tif \(\(digit > 9 && 0\) \|\| }s"
    "line-not-held-at-coarse|src/read.c|s{\t\t\tv = not_below_coarse\(h, clock, v\);}{\t\t\t;}s"
    "fast-path-never-holds|src/read.c|s{\t\t\t    unlikely\(may_be_below_coarse\(h, clock, v\)\)\)\) \{}{\t\t\t    0)) \{}s"
    "fast-path-realtime-against-its-own-line|src/read.c|s{\tif \(clock == CLOCK_REALTIME\) \{\n\t\tconst struct pvread_clock_base \*m =\n\t\t\t&h->line.base\[CLOCK_MONOTONIC\];}{\tif \(0\) \{\n\t\tconst struct pvread_clock_base *m =\n\t\t\t&h->line.base[CLOCK_MONOTONIC];}s"
    "realtime-held-at-monotonic-coarse|src/read.c|s{\tif \(clock == CLOCK_REALTIME\) \{\n\t\tconst struct pvread_clock_base \*m}{\tif \(0\) \{\n\t\tconst struct pvread_clock_base *m}s"
    "fast-path-ignores-floor|src/read.c|s{\t\t\t\t\t\t \(int64_t\)v.ns >= floor;}{\t\t\t\t\t\t true;}s"
    "fast-path-ignores-mode-seen|src/read.c|s{\t\tif \(unlikely\(atomic_load_explicit\(&p->mode_seen\[clock\],\n\t\t\t\t\t\t  memory_order_acquire\) !=\n\t\t\t     SEEN_LINE\)\)\n\t\t\treturn false;}{}s"
    "coarse-base-past-second-accepted|src/read.c|s{\t\tif \(unlikely\(v.ns >= NSEC_PER_SEC\)\)\n\t\t\tr = READ_NO_INVALID;}{}s"
    "tk-overflow-not-checked|src/arith.h|s{\tif \(__builtin_mul_overflow\(delta, mult, &p\) \|\|\n\t    __builtin_add_overflow\(p, snsec, out\)\)\n\t\treturn -1;}{\t*out = snsec + delta * mult;\n\t\(void\)p;}s"
    "line-base-past-second-accepted|src/arith.h|s{\treturn snsec < PVREAD_ARITH_NSEC_PER_SEC << 32 &&\n\t       pvread_line_fits}{\treturn pvread_line_fits}s"
    "line-product-overflow-not-checked|../include/uapi/linux/pvread.h|s{\t       !__builtin_mul_overflow\(d, \(__u64\)mul << shift, &p\) &&}{\t       \(p = d * \(\(__u64\)mul << shift\), 1\) &&}s"
    "childrens-timens-offsets-taken|src/mapping.c|s{\tns->childrens = !own_timens_is_childrens\(\);}{\tns->childrens = false;}s"
    "state-not-wiped-in-children|src/mapping.c|s{\tp->wipe_refused = madvise\(\(char \*\)p \+ WIPED_OFFSET, WIPED_SIZE,\n\t\t\t\t  MADV_WIPEONFORK\) != 0;}{\tp->wipe_refused = false;}s"
    "no-fork-handler|src/mapping.c|s{\tpthread_atfork\(NULL, NULL, in_child\);\n}{}s"
    "child-offsets-not-checked|src/internal.h|s{\t\t\t\tpvread_check_child\(p\);}{\t\t\t\t;}s"
    "child-trusts-inherited-monotonic-offset|src/mapping.c|s{\treturn kernel == page \+ offset_ns\(&p->map.ns, CLOCK_MONOTONIC\) \? 1 : -1;}{\treturn 1;}s"
    "child-trusts-inherited-boottime-offset|src/mapping.c|s{\t\t\treturn -1;\n\t\tif \(\(uint64_t\)w < best\)}{\t\t\t;\n\t\tif ((uint64_t)w < best)}s"
    "child-boottime-never-from-page|src/mapping.c|s{\tif \(agrees > 0\) \{\n\t\tSTORE}{\tif (agrees > 1) \{\n\t\tSTORE}s"
    "child-boottime-bracket-not-off-tolerance|src/mapping.c|s{p->map.tolerance_ns - width\)}{p->map.tolerance_ns + 0 * width)}s"
    "boottime-check-never-pending|src/mapping.c|s{\t\tatomic_store_explicit\(&p->boot_check, BOOT_PENDING,}{\t\tatomic_store_explicit(&p->boot_check, BOOT_NONE,}s"
    "boottime-tolerance-not-set-without-namespaces|src/mapping.c|s{\t\tSTORE\(p->boot_tolerance_ns, p->map.tolerance_ns\);\n\t\treturn CLOCKS_ALL;}{\t\treturn CLOCKS_ALL;}s"
    "ns-floor-not-respected|src/read.c|s{\t    unlikely\(!stands\(p, clock, v\)\)\)\n\t\treturn false;}{\t    0)\n\t\treturn false;}s"
    "boottime-tolerance-not-read|src/read.c|s{\t\ttolerance = LOAD\(p->boot_tolerance_ns\);}{\t\t;}s"
    "monotonic-check-on-coarse-bases|src/mapping.c|s{page_base_diff\(p->map.hdr, CLOCK_MONOTONIC, CLOCK_REALTIME,}{page_base_diff(p->map.hdr, CLOCK_MONOTONIC_COARSE, CLOCK_REALTIME_COARSE,}s"
    "boottime-check-offsets-ignored|src/mapping.c|s{\t\tlo = \(int64_t\)}{\t\twant = d;\n\t\tlo = (int64_t)}s"
    "boottime-check-offset-signs-swapped|src/mapping.c|s{\t\tlo = \(int64_t\)}{\t\twant = 2 * d - want;\n\t\tlo = (int64_t)}s"
    "boottime-check-monotonic-offset-ignored|src/mapping.c|s{\t\tlo = \(int64_t\)}{\t\twant += offset_ns(ns, CLOCK_MONOTONIC);\n\t\tlo = (int64_t)}s"
    "boottime-bracket-wide-above|src/mapping.c|s{\t\tw = hi - lo;}{\t\thi += 1000000;\n\t\tw = hi - lo - 1000000;}s"
    "boottime-bracket-wide-below|src/mapping.c|s{\t\tw = hi - lo;}{\t\tlo -= 1000000;\n\t\tw = hi - lo - 1000000;}s"
    "transient-open-error-final|src/mapping.c|s{\tif \(fd < 0\)\n\t\treturn transient\(errno\) \? -1 : 0;}{\tif \(fd < 0\)\n\t\treturn 0;}s"
    "transient-error-retried-at-once|src/mapping.c|s{\tif \(state == MAP_RETRY &&\n}{\tif \(0 &&\n}s"
    "absence-retried|src/mapping.c|s{\treturn err == EMFILE}{\treturn 1 || err == EMFILE}s"
    "header-wait-remembers-a-record|src/internal.h|s{\tif \(seq & 1\)\n\t\tatomic_store_explicit\(&p->stuck_seq, seq, memory_order_relaxed\);}{\tif \(seq & 1\)\n\t\tatomic_store_explicit(&p->stuck_seq, seq, memory_order_relaxed);\n\tif (p->map.records \&\& (LOAD(((const struct pvread_record *)p->map.records)->pvclock.version) & 1))\n\t\tatomic_store_explicit(&p->stuck_record[0], LOAD(((const struct pvread_record *)p->map.records)->pvclock.version), memory_order_relaxed);}s"
    "open-a-cancellation-point|src/mapping.c|s{return \(int\)syscall\(SYS_openat, AT_FDCWD, path, flags \| O_CLOEXEC\);}{return open(path, flags | O_CLOEXEC);}s"
    "signals-not-blocked-while-mapping|src/mapping.c|s{\tpthread_sigmask\(SIG_SETMASK, &all, &old\);\n\tif \(!atomic_compare_exchange_strong\(&p->map_state}{\tif (!atomic_compare_exchange_strong(&p->map_state}s"
    "lift-beyond-tolerance|src/order.c|s{\t\tif \(!full\) \{}{\t\tif (0) \{}s"
    "no-hold-at-the-line|src/order.c|s{\t\t\theld = not_below_line\(p, clock, ts, true\);}{\t\t\theld = not_below_line(p, clock, ts, false);}s"
    "stuck-record-forgotten|src/info.c|s{return record_stuck\(p, cpu, version\) \? READ_NO_STUCK : READ_BUSY;}{return READ_BUSY;}s"
    "record-copy-not-cleared|src/info.c|s{\tmemset\(rec, 0, sizeof\(\*rec\)\);\n}{}s"
    "misaligned-records-accepted|src/mapping.c|s{ \|\|\n\t    \(h->record_offset \| h->record_stride\) %\n\t    _Alignof\(struct pvread_record\)}{}s"
    "clock-ids-up-to-31-fast|src/read.c|s{unlikely\(\(unsigned int\)clock >= PVREAD_NR_CLOCK_BASES\)}{unlikely((unsigned int)clock >= 32)}s"
    "mode-read-mid-update-trusted|src/read.c|s{	return LOAD\(h->seq\) == seq \? r : READ_RETRY;}{	return r;}s"
    "page-seconds-unchecked|src/read.c|s{\tif \(!seen && unlikely\(\(uint64_t\)v.sec > KTIME_SEC_MAX\)\)\n\t\treturn READ_NO_INVALID;}{}s"
    "disruptions-not-read|src/info.c|s{\t\tinfo->disruptions = LOAD\(h->disruptions\);\n}{}s"
    "get-info-fills-0.4-fields|src/info.c|s{#define INFO_SIZE_0_2 offsetof\(struct pvread_info, disruptions\)}{#define INFO_SIZE_0_2 sizeof(struct pvread_info)}s"
    "vdso-not-used|src/kernel.c|s{vdso_sym\(base, \"__vdso_clock_gettime\"\)}{NULL}s"
    "hold-given-up-when-the-line-cannot-be-read|src/order.c|s{held \?\n\t\t\t\t\t\t       SEEN_FLOOR : SEEN_LINE\);}{SEEN_FLOOR);}s"
    "kernel-answers-not-seeded|src/order.c|s{\traise_floor\(p, clock, ns_of\(&k\)\);}{\t;}s"
    "lift-ahead-of-the-tsc|src/order.c|s{\td = pvread_line_delta\(tsc, stamp\);}{\td = pvread_line_delta(tsc + 4096, stamp);}s"
    "wall-fallback-not-lifted|src/order.c|s{\t\t\t\t      memory_order_relaxed\) == SEEN_LINE\)\n\t\tnot_below_line\(p, clock, ts, false\);}{\t\t\t\t      memory_order_relaxed) == SEEN_LINE)\n\t\t;}s"
    "wall-lift-without-step|src/order.c|s{\t\tset_ts\(&line, sec, ns \+ \(uint64_t\)off\);}{\t\tset_ts(\&line, LOAD(l->base[clock].sec), ns + (LOAD(l->base[clock].snsec) >> 32) - (snsec >> 32));}s"
    "tsc-read-without-lfence|src/internal.h|s{\"lfence\\\\n\\\\trdtsc\"}{\"rdtsc\"}s"
    "tsc-read-rdtsc-for-rdtscp|src/internal.h|s{__asm__ __volatile__\(\"rdtscp\"}{__asm__ __volatile__(\"rdtsc\"}s"
    "line-hold-tsc-unordered|src/order.c|s{\t\ttsc = tsc_ordered\(\);}{\t\ttsc = __rdtsc();}s"
    "pvclock-sample-tsc-unordered|src/info.c|s{\ts->tsc = tsc_ordered\(\);}{\ts->tsc = __rdtsc();}s"
    "tsc-first-hint-never-set|src/read.c|s{\tif \(clock_in\(CLOCKS_FINE, clock\)\)\n\t\thint_tsc_first\(p, clock, fast, true\);}{}s"
    "tsc-first-tsc-read-again|src/read.c|s{\t\tif \(!tsc_taken\)\n}{\t\tif (1)\n}s"
    "tsc-first-hint-kept-in-mode-none|src/read.c|s{\tif \(r == READ_NO_MODE\) \{\n\t\thint_kernel\(true\);\n}{\tif (r == READ_NO_MODE) \{\n}s"
    "tsc-first-hint-kept-for-a-clock-not-fast|src/read.c|s{\t\thint_tsc_first\(p, clock, fast, false\);\n\t\treturn gettime_slow}{\t\treturn gettime_slow}s"
    "tsc-first-hint-kept-at-a-fallback|src/read.c|s{(r >= READ_NO\) \{\n)\t\thint_tsc_first\(p, clock, fast, false\);}{\$1\t\t;}s"
    "kernel-first-mode-not-checked|src/read.c|s{\t\tif \(likely\(LOAD\(h->mode\) != PVREAD_MODE_LINE\)\) \{}{\t\tif (1) \{}s"
    "kernel-first-only-in-mode-none|src/read.c|s{\t\tif \(likely\(LOAD\(h->mode\) != PVREAD_MODE_LINE\)\) \{}{\t\tif (likely(LOAD(h->mode) == PVREAD_MODE_NONE)) \{}s"
    "kernel-first-for-every-clock|src/read.c|s{ \&\&\n\t    likely\(clock_in\(CLOCKS_FINE \| CLOCKS_COARSE, clock\)\)\)}{)}s"
    "kernel-first-answer-not-noted|src/read.c|s{\t\t\treturn kernel_answered\(p, clock, ts, ret\);}{\t\t\treturn ret;}s"
    "kernel-first-hint-never-set-by-the-page|src/read.c|s{\t\thint_kernel\(true\);\n\t\treturn kernel_answer}{\t\treturn kernel_answer}s"
    "ns-kernel-first-for-every-clock|src/read.c|s{ &&\n\t    likely\(clock_in\(CLOCKS_FINE \| CLOCKS_COARSE, clock\)\)\)\n\t\tret = clock}{)\n\t\tret = clock}s"
    "ns-kernel-first-always-monotonic|src/read.c|s{\t\t      read_clock_kernel_first\(p, clock, &ts\);}{\t\t      read_monotonic_kernel_first(p, &ts);}s"
    "no-page-child-not-remembered|src/read.c|s{\t\tremember_no_page\(\);\n}{}s"
    "tsc-first-across-a-resume|src/read.c|s{\t\telse if \(unlikely\(\(uint32_t\)LOAD\(h->disruptions\) != epoch\)\)\n\t\t\treturn READ_TSC_STALE;}{\t\telse if (0 \&\& epoch)\n\t\t\treturn READ_TSC_STALE;}s"
)

want=("$@")
tmp=$(mktemp -d /tmp/pvread-mutants.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# build DIR [FILE [CFLAGS]]: the unit tests the mutants run, in DIR/user,
# FILE (under user/) taken for changed whatever its time says.  Without
# -Werror: a mutant may leave a variable or function unused.  The wait
# for a stuck writer (MAX_WAIT_TSC) 2^30 ticks, 0.2-0.5 s at a 2-5 GHz
# TSC, not 2^32 (1-2 s): five scenarios of test/read wait it out, 11 s of
# every mutant's run at the library's own value, and no mutant changes
# the wait (test/process's writer that completes 50 ms into it still
# completes within it; the unmutated tree, so built, must pass, below).
# No -g: no one reads a mutant's debug information, and without it an
# edit of read.c rebuilds in 2 s, not 4-12, one of internal.h in 10, not
# 35-110 (measured with the CPUs shared).
build() {
    make -s -C "$1/user" ${2:+-W "$2"} \
        CFLAGS="-O2 -std=gnu11 -fvisibility=hidden -w -DMAX_WAIT_TSC=0x40000000ULL ${3:-}" \
        build/test/read build/test/arith build/test/fast-path \
        build/test/mid-update build/test/fallback-static build/test/process
}

# run NAME PROGRAM ARGS...: a unit test, NAME on a line before its output.
run() {
    echo "# mutant-run $1"
    shift
    timeout 120 "$@" 2>&1
}

# try_mutant N NAME FILE SUBST HOW: one mutant in its own copy of the tree;
# its line goes to $tmp/N.res, its verdict (killed|survived|broken) to
# $tmp/N.verdict.
try_mutant() {
    local n=$1 name=$2 file=$3 subst=$4 how=$5 t=$tmp/$1 caught start=$SECONDS
    local extra=""
    # The tree built once, its times kept: make rebuilds what the edit
    # touches (one object and the links, or everything for a header).
    cp -a "$tmp/base" "$t"
    if ! MUTANT_SUBST=$subst perl -0 -i -pe '
            BEGIN { $n = 0 } $n += eval "$ENV{MUTANT_SUBST}";
            END { exit($n == 1 ? 0 : 1) }' "$t/user/$file"; then
        echo "not ok - $name: the edit does not match $file once (the source moved: update the mutant)" >"$tmp/$n.res"
        echo broken >"$tmp/$n.verdict"
        return
    fi
    if [[ $how == ubsan ]]; then
        extra="-fsanitize=undefined -fsanitize-undefined-trap-on-error"
        rm -rf "$t/user/build"
    fi
    if ! build "$t" "$file" "$extra" >"$t/build.log" 2>&1; then
        { echo "not ok - $name: the mutant does not build"
          sed 's/^/#   /' "$t/build.log" | tail -5; } >"$tmp/$n.res"
        echo broken >"$tmp/$n.verdict"
        return
    fi
    # The first "not ok" is enough: stop the tests there (grep -m1 closes
    # the pipe; the next line they print ends them).  The TSC order first,
    # a second's work; libpvread.a only, the objects the tests link: the
    # shared ones come from the same source, and building them would
    # double each mutant's compile.
    # Each program named before its output: the verdict says which one.
    caught=$(cd "$t/user" &&
             { run tsc-order ./test/tsc-order.sh build/libpvread.a &&
               run arith ./build/test/arith &&
               run fast-path ./build/test/fast-path &&
               run mid-update ./build/test/mid-update &&
               run fallback-static ./build/test/fallback-static &&
               run read ./build/test/read &&
               run process ./build/test/process none ||
               echo "not ok - the tests exit $? (timeout: 124)"; } 2>&1 |
             awk '/^# mutant-run /{ prog = $3 }
                  /^not ok/{ sub(/^not ok ([0-9]+ )?- /, "");
                             print prog ": " $0; exit }')
    if [[ -n $caught ]]; then
        echo "ok - $name: killed in $((SECONDS - start)) s by $caught" >"$tmp/$n.res"
        echo killed >"$tmp/$n.verdict"
    else
        echo "not ok - $name: survived, every test passed" >"$tmp/$n.res"
        echo survived >"$tmp/$n.verdict"
    fi
    rm -rf "$t"
}

mkdir -p "$tmp/base"
cp -r "$top/user" "$top/include" "$tmp/base/"
rm -rf "$tmp/base/user/build"
if ! build "$tmp/base" >"$tmp/base.log" 2>&1; then
    echo "not ok - the unmutated tree does not build"
    sed 's/^/#   /' "$tmp/base.log" | tail -5
    exit 1
fi
# A kill is a test's failure on the mutant, not on how the mutants are
# built (MAX_WAIT_TSC above): the unmutated tree so built passes them.
if ! (cd "$tmp/base/user" &&
      for t in arith fast-path mid-update fallback-static read; do
          "./build/test/$t" || exit 1
      done && ./build/test/process none) >"$tmp/base-tests.log" 2>&1; then
    echo "not ok - the unmutated tree, built as the mutants are, fails its tests"
    grep -E '^not ok' "$tmp/base-tests.log" | sed 's/^/#   /' | head -5
    exit 1
fi

# One mutant per CPU at a time (each builds and runs single-threaded
# most of the while); PVREAD_MUTANT_JOBS=1 runs them one after another.
njobs=${PVREAD_MUTANT_JOBS:-$(nproc)}
[[ $njobs =~ ^[1-9][0-9]*$ ]] || { echo "PVREAD_MUTANT_JOBS=$njobs: want a number of jobs" >&2; exit 2; }
ran=()
for i in "${!MUTANTS[@]}"; do
    IFS='|' read -r name file subst <<<"${MUTANTS[i]}"
    how=''
    # The substitution may hold "|" itself: a mark is its entry's end.
    if [[ $subst == *'|ubsan' ]]; then
        how=ubsan subst=${subst%|ubsan}
    fi
    if ((${#want[@]})) && ! printf '%s\n' "${want[@]}" | grep -qx "$name"; then
        continue
    fi
    while (($(jobs -rp | wc -l) >= njobs)); do
        wait -n || true
    done
    try_mutant "$i" "$name" "$file" "$subst" "$how" &
    ran+=("$i")
done
wait
killed=0 survived=0 broken=0
for i in "${ran[@]}"; do
    cat "$tmp/$i.res"
    case $(cat "$tmp/$i.verdict" 2>/dev/null) in
        killed) killed=$((killed + 1)) ;;
        survived) survived=$((survived + 1)) ;;
        *) broken=$((broken + 1)) ;;
    esac
done
echo "# mutants: $killed killed, $survived survived, $broken broken"
((survived == 0 && broken == 0))
