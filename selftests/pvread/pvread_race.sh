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
check_dmesg
pvread_done
