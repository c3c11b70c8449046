#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In a guest without Xen: pvread.ko must refuse to load with ENODEV and one
# clear line, and the library must answer through libc, correctly.
# Usage: pvread_plain.sh [MODULE]
mod=${1:-./pvread.ko}
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

pvread_run pvread_fallback
pvread_sub pvread_shim.sh sh "$pvread_dir/pvread_shim.sh" plain

# The programs that need the device must say so, as a skip with the reason
# (before they set the clock, unplug a vCPU or suspend).
for p in $(pvread_device_progs) pvread_stress pvread_settime \
	 pvread_clocksource pvread_hotplug pvread_suspend pvread_measure \
	 "pvread_order --expect-mode $expect_mode"; do
	out=$($p 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	name=${p%% *}
	echo "# $name: exit $rc"
	check "$name skips without Xen, saying why" \
		sh -c '[ "$0" -eq 4 ] && echo "$1" | grep -q "^1\.\.0 # SKIP ."' "$rc" "$out"
done
# The kselftest runner's run here: pvread_fallback passes, the others skip.
run_kselftest_pvread plain
# The ordering checker itself, on the kernel's clock: no false alarm.
pvread_order --source libc --reads 2000000 --only processes > /tmp/order-libc.out 2>&1
rc=$?
grep '^# order:' /tmp/order-libc.out
echo "# pvread_order --source libc: exit $rc"
check "pvread_order --source libc: the kernel's clock is ordered across processes" [ $rc -eq 0 ]

check_dmesg
pvread_done
