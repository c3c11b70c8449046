#!/bin/sh
# vm/domu-saverestore.sh — domU side of the save/restore test (busybox sh,
# in the domU, cwd /opt/pvread; vm/domu-payload puts it there).
#
#   sh domu-saverestore.sh [STRESS_SECONDS] [WAIT_SECONDS] [RESUMES] [new-scale]
#
# Loads pvread.ko and runs the stress reader (every clock on every vCPU,
# order and bound checked, exactness per vCPU) for STRESS_SECONDS (default
# 150: the domain is paused for seconds, and the reader still has to make
# its 10^7 reads) while dom0 saves and restores this domain (domu.sh
# --save-restore) or migrates it (--migrate): RESUMES of them (default 1).
# With "new-scale" the domain comes back on a TSC of another frequency
# (domu.sh --tsc-khz): vCPU 0's record must then have another
# tsc_to_system_mul/tsc_shift than before. Afterwards: the module saw that many resumes, re-registered every online vCPU, went
# back to per-CPU mode, and the reader saw no backward step, no read beyond
# the bound and no exactness violation. Prints ok/not ok lines.
stress=${1:-150}
wait_s=${2:-$((stress + 60))}
resumes=${3:-1}
new_scale=${4:-}
# vCPU 0's record's tsc_to_system_mul/tsc_shift, from pvread-status
scale() { pvread-status | awk '$1 == "0" && $3 == "registered" { print $7 "/" $8 }'; }
# shellcheck source=../selftests/pvread/pvread_lib.sh
. ./pvread_lib.sh
sys=/sys/class/misc/pvread

check "saverestore: insmod pvread.ko" insmod ./pvread.ko
pvread_kmod_test wait-mode 1 10 | sed 's/^/# /'
r0=$(cat $sys/resumes)
s0=$(scale)
echo "# before: registered $(cat $sys/registered), mode $(cat $sys/mode), resumes $r0"
echo "# records before:"; pvread-status | sed -n '/^cpu /,$p' | sed 's/^/#   /'

# The reader runs across the save/restore; its own KTAP lines are the checks.
pvread_test --stress "$stress" --module ./pvread.ko --suspends >/tmp/stress.out 2>&1 &
reader=$!
i=0
while [ "$(cat $sys/resumes)" -lt $((r0 + resumes)) ] && [ $i -lt "$wait_s" ]; do
	sleep 1
	i=$((i + 1))
done
r1=$(cat $sys/resumes)
echo "# resumes $r0 -> $r1 after ~$i s"
wait $reader
rc=$?
# KTAP as it came (its ok/not ok lines count as results), then ours.
cat /tmp/stress.out
check "saverestore: reader across $resumes suspend/resume(s) (pvread_test --stress exit $rc)" [ $rc -eq 0 ]
check "saverestore: the module saw $resumes resume(s) (resumes $r0 -> $r1)" [ "$r1" -eq $((r0 + resumes)) ]
pvread_kmod_test wait-mode 1 10 | sed 's/^/# /'
echo "# after: registered $(cat $sys/registered), mode $(cat $sys/mode)"
echo "# records after:"; pvread-status | sed -n '/^cpu /,$p' | sed 's/^/#   /'
check "saverestore: every online vCPU registered after restore" \
	[ "$(cat $sys/registered)" = "$(cat /sys/devices/system/cpu/online)" ]
check "saverestore: per-cpu mode after restore" [ "$(cat $sys/mode)" = percpu ]
if [ "$new_scale" = new-scale ]; then
	s1=$(scale)
	differ() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" != "$2" ]; }
	check "saverestore: the records describe the new TSC frequency (mul/shift $s0 -> $s1)" \
		differ "$s0" "$s1"
fi
check "saverestore: rmmod pvread" rmmod pvread
check_dmesg
exit "$failed"
