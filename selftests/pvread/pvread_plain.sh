#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In a guest without Xen: pvread.ko must refuse to load with ENODEV and one
# clear line, and the library must answer through libc, correctly.
# Usage: pvread_plain.sh [MODULE] [pvread_test options...]
mod=${1:-./pvread.ko}
[ $# -gt 0 ] && shift
failed=0
check() {
	desc=$1; shift
	if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; failed=1; fi
}

cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
echo "# clocksource: $cs"
check "clocksource is not xen" [ "$cs" != xen ]
out=$(insmod "$mod" 2>&1)
rc=$?
echo "# insmod: $out"
check "insmod fails" [ $rc -ne 0 ]
check "insmod error is ENODEV" sh -c "echo '$out' | grep -q 'No such device'"
check "dmesg says why" sh -c "dmesg | grep -q 'pvread: not running on Xen'"
check "module not loaded" sh -c '! grep -q "^pvread " /proc/modules'

pvread_test --plain "$@"
rc=$?
check "pvread_test --plain (exit $rc)" [ $rc -eq 0 ]

bad=$(dmesg | grep -E 'BUG|WARNING|Oops|Call Trace|refcount')
[ -n "$bad" ] && echo "$bad" | sed 's/^/# dmesg: /'
check "dmesg free of BUG/WARNING/Oops/Call Trace" [ -z "$bad" ]
exit $failed
