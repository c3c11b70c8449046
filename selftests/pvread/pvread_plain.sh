#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In a guest without Xen: pvread.ko must refuse to load with ENODEV and one
# clear line, and the library must answer through libc, correctly.
# Usage: pvread_plain.sh [MODULE] [pvread_test options...]
mod=${1:-./pvread.ko}
[ $# -gt 0 ] && shift
. "$(dirname "$0")/pvread_lib.sh"

cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
echo "# clocksource: $cs"
check "clocksource is not xen" [ "$cs" != xen ]
# shellcheck disable=SC2086  # the suite's parameters, one word each
out=$(insmod "$mod" $PVREAD_KMOD_ARGS 2>&1)
rc=$?
echo "# insmod: $out"
check "insmod fails" [ $rc -ne 0 ]
case $out in *"No such device"*) enodev=1 ;; *) enodev=0 ;; esac
check "insmod error is ENODEV" [ $enodev -eq 1 ]
# busybox insmod retries init_module(2) after finit_module(2) fails, so the
# line appears once per attempt: twice.
dmesg | grep 'pvread:' | sed 's/^/# dmesg: /'
check "dmesg says why" sh -c 'dmesg | grep -q "pvread: not running on Xen"'
check "module not loaded" sh -c '! grep -q "^pvread " /proc/modules'

pvread_test --plain "$@"
rc=$?
check "pvread_test --plain (exit $rc)" [ $rc -eq 0 ]
sh "$(dirname "$0")/pvread_shim.sh" plain || failed=1

# The tests that need Xen must say so, as a skip with the reason.
for args in "pvread_test --xen" "pvread_test --stress 1" \
	    "pvread_order --expect-mode $expect_mode"; do
	out=$($args 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	why=$(echo "$out" | sed -n 's/^1\.\.0 # SKIP //p')
	name=$(echo "$args" | cut -d' ' -f1-2)
	[ "${name#pvread_order}" = "$name" ] || name=pvread_order
	if [ $rc -eq 4 ] && [ -n "$why" ]; then
		echo "ok - $name # SKIP $why"
	else
		echo "not ok - $name: exit $rc, want a skip (4) that says why"
		failed=1
	fi
done
# The kselftest runner's run here: a skip, with the reason.
run_kselftest_pvread skip
# The ordering checker itself, on the kernel's clock: no false alarm.
pvread_order --source libc --reads 2000000 --only processes > /tmp/order-libc.out 2>&1
rc=$?
grep '^# order:' /tmp/order-libc.out
check "pvread_order --source libc: the kernel's clock is ordered across processes (exit $rc)" [ $rc -eq 0 ]

check_dmesg
exit $failed
