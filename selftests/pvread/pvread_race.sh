#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In a Xen guest with two vCPUs or more, pvread.ko not loaded: unload and
# load race a vCPU coming online.  A vCPU that no TSC check has seen
# queues one when it comes online; if that happens while the module is
# being unloaded, after the work was cancelled and before the hotplug
# state is gone, the check runs on freed pages and module text (an oops,
# or a poisoned page in the debug kernel).  And a load racing it must
# register the vCPU.  Each round: the last vCPU offline, the module
# loaded, then the vCPU brought online while rmmod (or insmod) runs.  The
# module's test_check_delay_ms holds the check that the vCPU queues for
# 300 ms, so that one queued too late runs after the module is gone every
# time, rather than once in a while.
# KTAP (pvread_lib.sh); exits 1 when any check failed.
# Usage: pvread_race.sh [MODULE] [ROUNDS]
mod=${1:-./pvread.ko}
rounds=${2:-40}
. "$(dirname "$0")/pvread_lib.sh"

last=$(($(grep -c ^processor /proc/cpuinfo) - 1))
online=/sys/devices/system/cpu/cpu$last/online
if [ "$last" -lt 1 ] || [ ! -w "$online" ]; then
	skip "race: unload and load against a vCPU coming online" "no vCPU that can go offline (cpu$last)"
	pvread_done
	exit 0
fi
if grep -q '^pvread ' /proc/modules; then
	check "race: pvread.ko not loaded at the start" false
	pvread_done
	exit 1
fi

loads=0 unloads=0 onl=0 bad=0 i=0
t0=$(cut -d' ' -f1 /proc/uptime)
while [ $i -lt "$rounds" ]; do
	i=$((i + 1))
	echo 0 > "$online" || bad=$((bad + 1))
	if [ $((i % 2)) -eq 0 ]; then
		# the vCPU online while the module unloads
		# shellcheck disable=SC2086  # one word per parameter
		insmod "$mod" $PVREAD_KMOD_ARGS test_check_delay_ms=300 &&
			loads=$((loads + 1))
		echo 1 > "$online" &
		rmmod pvread && unloads=$((unloads + 1))
		wait $! && onl=$((onl + 1))
	else
		# ... and while it loads: then it must be registered
		echo 1 > "$online" &
		pvread_insmod "$mod" && loads=$((loads + 1))
		wait $! && onl=$((onl + 1))
		reg=$(cat /sys/class/misc/pvread/registered 2>/dev/null)
		case ",$reg," in
		*"-$last,"*|*",$last,"*) ;;
		*) bad=$((bad + 1)); echo "# race: round $i: cpu$last online, registered \"$reg\"" ;;
		esac
		rmmod pvread && unloads=$((unloads + 1))
	fi
	grep -q '^pvread ' /proc/modules && { bad=$((bad + 1)); rmmod pvread; }
done
echo 1 > "$online" 2>/dev/null
echo "# race: $rounds rounds in $(pvread_since "$t0") s: $loads loads, $unloads unloads, $onl onlinings of cpu$last, $bad rounds wrong"
check "race: every load and unload succeeded" \
	[ "$loads" -eq "$rounds" -a "$unloads" -eq "$rounds" ]
check "race: cpu$last came online every round, registered when the load raced it" \
	[ "$onl" -eq "$rounds" -a "$bad" -eq 0 ]

# The TSC check racing a vCPU coming online.  A check covers the CPUs
# online at its stop_machine; one that comes online after the stop and
# before the check takes its result is not covered, so that result must
# not say checked: the module asks for another check, and the line waits
# for it (line "unchecked").  Here cpu$last was online at load, so the
# load's check covered it and its online callback queues no check of its
# own: before that rule the held check's result said checked, the line
# read what it did before, and cpu$last was left in no check at all.
# test_check_hold_ms holds a check between its stop and its result (5 s; the
# parameter reads 0 once the hold has begun), and test_check_delay_ms the
# check asked for after it, so that "unchecked" is there to be seen.
sys=/sys/class/misc/pvread
params=/sys/module/pvread/parameters
line_wait() {
	_n=0
	while [ "$(cat $sys/line)" = unchecked ] && [ $_n -lt 100 ]; do
		sleep 0.1
		_n=$((_n + 1))
	done
	cat $sys/line
}
# shellcheck disable=SC2086  # one word per parameter
if ! insmod "$mod" $PVREAD_KMOD_ARGS test_check_delay_ms=1000; then
	check "race: TSC check: insmod with test_check_delay_ms=1000" false
else
	pvread_wait_expected 30
	echo 0 > "$online"
	l0=$(line_wait)
	case $l0 in
	off|stable|pti|unvouched|unchecked)
		skip "race: a vCPU online during the TSC check leaves the line unchecked" "line $l0 says nothing of the check"
		;;
	*)
		echo 5000 > $params/test_check_hold_ms
		echo 1 > $sys/tsc_check &
		chk=$!
		n=0
		while [ "$(cat $params/test_check_hold_ms)" != 0 ] && [ $n -lt 200 ]; do
			sleep 0.05
			n=$((n + 1))
		done
		echo 1 > "$online"
		raced=no
		kill -0 $chk 2>/dev/null && raced=yes
		wait $chk
		l1=$(cat $sys/line)
		l2=$(line_wait)
		echo "# race: TSC check held, cpu$last online meanwhile (before the check ended: $raced): line $l0 before, $l1 when the check returned, $l2 after"
		if [ $raced = no ]; then
			skip "race: a vCPU online during the TSC check leaves the line unchecked" "cpu$last came online after the held check ended"
		else
			check "race: a vCPU online during the TSC check leaves the line unchecked" \
				[ "$l1" = unchecked ]
			check "race: ... until a check covers it, then the expected mode and line" \
				pvread_wait_expected 30
		fi
		;;
	esac
	echo 1 > "$online" 2>/dev/null
	rmmod pvread || check "race: TSC check: rmmod pvread" false
fi
check_dmesg
pvread_done
