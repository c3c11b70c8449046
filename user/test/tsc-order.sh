#!/bin/bash
# user/test/tsc-order.sh — the built library reads the TSC in order.
#
#   user/test/tsc-order.sh LIB...   (libpvread.so, libpvread.a, the shim)
#
# A TSC read taken before the page's loads that precede it gives a time
# from before the line it is computed with.  Neither the host tests nor a
# guest under TCG or with an emulated TSC can show that reordering, so
# this looks at the code the compiler made instead (objdump -d, or
# $OBJDUMP: GNU's or LLVM's), with the vDSO's rule (the kernel's rdtsc_ordered()): a TSC
# read is rdtscp, or rdtsc with lfence right before it.  For each LIB:
#   - every rdtsc in it has lfence as the instruction right before it, in
#     the same function, and no direct jump or call lands on the rdtsc
#     (which would skip the lfence);
#   - each function of the fast path that reads the TSC (src/read.c: the
#     page's attempt, the TSC-first one, and the two entries, into which
#     CLOCK_MONOTONIC's line record read is inlined) holds both reads the
#     read path chooses from at run time (src/internal.h's tsc_read()):
#     rdtscp, and lfence; rdtsc.
# One "ok"/"not ok" line per LIB (a finding on it, more below it as
# comments), then "# all passed" or "# FAILED".
set -euo pipefail

# The functions that must hold both ordered reads: the fast path's
# (static: a compiler's clone, "read_page.isra.0", counts as its own).
fast_path="read_page read_clock_tsc_first pvread_clock_gettime pvread_ns"
objdump=${OBJDUMP:-objdump}
failed=0

# Diagnostics as TAP comments.
comment() { sed 's/^/#   /'; }

(($#)) || { echo "usage: $0 LIB..." >&2; exit 2; }
if ! command -v "$objdump" >/dev/null; then
    # Not a SKIP: without it nothing here is checked, and binutils comes
    # with every toolchain that builds the library.
    echo "not ok - tsc order: no $objdump to disassemble the library with"
    echo "# FAILED"
    exit 1
fi

for lib in "$@"; do
    if [[ ! -f $lib ]]; then
        echo "not ok - tsc order: no $lib (build it first)"
        failed=1
        continue
    fi
    # Addresses are compared as objdump prints them (hex, no padding),
    # within one member and section: an archive's members, and each
    # object's .text and .text.unlikely, all start at 0.
    if ! dis=$(LC_ALL=C "$objdump" -d --no-show-raw-insn "$lib" 2>&1); then
        echo "not ok - tsc order: $objdump -d $lib fails"
        tail -5 <<<"$dis" | comment
        failed=1
        continue
    fi
    if ! verdict=$(awk -v fast="$fast_path" -v lib="$lib" '
        BEGIN { nf = split(fast, F, " "); for (j = 1; j <= nf; j++) isfast[F[j]] = 1 }
        function base(f) { sub(/\..*/, "", f); return f }
        function where(i) {
            return (member[i] == lib ? "" : member[i] " ") \
                sect[i] " 0x" addr[i] " in " fn[i] "()"
        }
        /[ \t]file format / { m = $1; sub(/:$/, "", m); prev = ""; next }
        /^Disassembly of section / {
            s = $4; sub(/:$/, "", s); prev = ""; next
        }
        /^[0-9a-f]+ <.*>:$/ {
            f = $2; gsub(/^<|>:$/, "", f); prev = ""; next
        }
        # "addr:<tab>insn operands" (GNU), "addr: <tab>insn<tab>0xaddr"
        # (llvm-objdump).
        /^ *[0-9a-f]+:[ \t]*\t/ {
            a = $1; sub(/:$/, "", a)
            insn = $0
            sub(/^ *[0-9a-f]+:[ \t]*/, "", insn)
            gsub(/\t/, " ", insn)
            # Prefixes objdump prints as words before a jump.
            while (insn ~ /^(bnd|notrack|rex\.?[a-zA-Z]*|cs|ds) /)
                sub(/^[^ ]+ /, "", insn)
            n = split(insn, w, / +/)
            mn = w[1]
            t = w[2]
            sub(/^0x/, "", t)
            if (mn ~ /^(j[a-z]+|call[a-z]*|loop[a-z]*|xbegin)$/ &&
                n >= 2 && t ~ /^[0-9a-f]+$/)
                target[m SUBSEP s SUBSEP t] = 1
            if (mn == "rdtsc" || mn == "rdtscp") {
                k++
                member[k] = m; sect[k] = s; fn[k] = f; addr[k] = a
                kind[k] = mn; before[k] = prev
            }
            prev = mn
            next
        }
        END {
            bad = 0; plain = 0
            for (i = 1; i <= k; i++) {
                if (kind[i] == "rdtscp") {
                    if (base(fn[i]) in isfast)
                        rdtscp_in[base(fn[i])]++
                    continue
                }
                plain++
                if (before[i] != "lfence") {
                    print "rdtsc at " where(i) " after " \
                        (before[i] == "" ? "the start of the function" : before[i]) \
                        ", not lfence"
                    bad = 1
                } else if ((member[i] SUBSEP sect[i] SUBSEP addr[i]) in target) {
                    print "rdtsc at " where(i) " is a jump target: a path skips its lfence"
                    bad = 1
                } else if (base(fn[i]) in isfast) {
                    fenced_in[base(fn[i])]++
                }
            }
            counts = ""
            for (j = 1; j <= nf; j++) {
                if (!rdtscp_in[F[j]]) {
                    print F[j] "() has no rdtscp"
                    bad = 1
                }
                if (!fenced_in[F[j]]) {
                    print F[j] "() has no lfence; rdtsc"
                    bad = 1
                }
                counts = counts sprintf("; %s() rdtscp %d, lfence; rdtsc %d",
                                        F[j], rdtscp_in[F[j]], fenced_in[F[j]])
            }
            # The counts, which depend on the compiler, on a comment: the
            # result name is the same for every build.
            if (!bad)
                printf "# %d rdtsc, each right after lfence%s\n", plain, counts
            exit bad
        }' <<<"$dis"); then
        # The first finding on the result line (mutants.sh quotes it),
        # the others below it.
        echo "not ok - tsc order: $lib: ${verdict%%$'\n'*}"
        [[ $verdict != *$'\n'* ]] || comment <<<"${verdict#*$'\n'}"
        failed=1
    else
        echo "$verdict"
        echo "ok - tsc order: $lib: every rdtsc right after lfence; the fast path reads both rdtscp and lfence; rdtsc"
    fi
done

if ((failed)); then
    echo "# FAILED"
    exit 1
fi
echo "# all passed"
