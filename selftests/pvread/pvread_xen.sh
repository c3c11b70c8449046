#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In a Xen guest (dom0 or domU): load pvread.ko, run pvread_test, unload,
# and check that the kernel complained about nothing.  Prints "ok"/"not ok"
# lines for each check; exits non-zero when any failed.
# Usage: pvread_xen.sh [MODULE] [pvread_test options...]
mod=${1:-./pvread.ko}
[ $# -gt 0 ] && shift
. "$(dirname "$0")/pvread_lib.sh"

cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
echo "# clocksource: $cs; vCPUs online: $(grep -c ^processor /proc/cpuinfo)"
check "clocksource is xen" [ "$cs" = xen ]
check "insmod pvread.ko" insmod "$mod"
check "module listed" grep -q '^pvread ' /proc/modules
check "/dev/pvread is a read-only char device" \
	sh -c 'ls -l /dev/pvread | grep -q "^cr--r--r--"'
dmesg | grep 'pvread:' | sed 's/^/# /'
pvread-status | sed 's/^/# /'

pvread_test --xen "$@"
rc=$?
check "pvread_test --xen (exit $rc)" [ $rc -eq 0 ]

# Every clock on every vCPU, >= 10^7 reads, while the vCPUs are switched,
# the clock is stepped and slewed, a vCPU is unplugged and the module is
# unloaded and reloaded (both must be refused).
pvread_test --stress 10 --module "$mod"
rc=$?
check "pvread_test --stress (exit $rc)" [ $rc -eq 0 ]

# Unmodified programs through the preload shim: no clock system call.
sh "$(dirname "$0")/pvread_shim.sh" xen || failed=1

# Refused while the device is open (a process holding it mapped).
pvread-bench -l 2000000000 -v pvread >/dev/null 2>&1 &
holder=$!
sleep 1
check "rmmod refused while mapped" sh -c '! rmmod pvread 2>/dev/null'
kill $holder; wait $holder 2>/dev/null
check "rmmod after the last user" rmmod pvread
check "module gone" sh -c '! grep -q "^pvread " /proc/modules'

# The kernel side under hotplug, clocksource switches, time jumps, suspend,
# and load/unload cycles.
sh "$(dirname "$0")/pvread_kmod.sh" "$mod" || failed=1

check_dmesg
exit $failed
