#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# In a Xen guest with pvread.ko loaded in line mode: a TSC that goes back
# across vCPUs ends line mode, and a clean check brings it back.
# test_tsc_skew makes the module's cross-vCPU check add ticks on the last
# online CPU, so that the check sees the TSC go back; cleared and checked
# again, the line comes back.  A reader (threads of one process) runs
# across both changes of mode (line -> none, the kernel answering, ->
# line) and must never see a clock go back.
# KTAP (pvread_lib.sh): a skip where there is no line mode, or one vCPU;
# exits 1 when any check failed.
. "$(dirname "$0")/pvread_lib.sh"
sys=/sys/class/misc/pvread
params=/sys/module/pvread/parameters

# hdr_field NAME: one field from "pvread_page"
hdr_field() {
	pvread_page | sed -n "1s/.* $1=\([^ ]*\).*/\1/p"
}

wait_mode() {
	pvread_page wait-mode "$1" "$2"
}

warp_skew=100000000
if [ "$expect_mode" != line ]; then
	echo "# line: expected $expect_mode/$expect_line, parameters \"$PVREAD_KMOD_ARGS\""
	skip "line: a TSC warp ends line mode" "no line mode here"
elif [ "$(grep -c ^processor /proc/cpuinfo)" -lt 2 ]; then
	skip "line: a TSC warp ends line mode" "one vCPU: the cross-vCPU TSC check has no second vCPU"
elif [ ! -w $params/test_tsc_skew ] || [ ! -e $sys/tsc_check ]; then
	check "line: test_tsc_skew and tsc_check present" false
else
	# Reads until it is stopped (SIGTERM), at most 120 s; two threads, so
	# that the check's stop_machine is not starved on the 4-vCPU machine
	# (TCG on a 2-CPU host).
	pvread_order --only threads --threads 2 --expect-mode any --min-fast 0 --reads 0 \
		--seconds 120 --max-seconds 120 --wait 0 \
		> /tmp/pvread-order-warp.out 2>&1 &
	reader=$!
	sleep 2
	pvread_state "before the warp"
	a0=$(cat $sys/line_anchors)
	echo $warp_skew > $params/test_tsc_skew
	echo 1 > $sys/tsc_check
	rc=$?
	wait_mode none/warp 5
	pvread_state "after test_tsc_skew=$warp_skew and a check"
	pvread_page | sed -n '1,2p'
	check "line: tsc_check runs (write returns 0)" [ $rc -eq 0 ]
	check "line: a TSC warp ends line mode (mode none, line warp)" \
		[ "$(cat $sys/mode)/$(cat $sys/line)" = none/warp ]
	check "line: the page says so too (mode 0, line_state 3)" \
		[ "$(hdr_field mode)/$(hdr_field line_state)" = 0/3 ]
	echo "# line: tsc_warp $(cat $sys/tsc_warp) ticks, skew $warp_skew"
	check "line: tsc_warp shows the step back" \
		[ "$(cat $sys/tsc_warp)" -gt $((warp_skew / 2)) ]
	sleep 2
	echo 0 > $params/test_tsc_skew
	echo 1 > $sys/tsc_check
	wait_mode line/active 30
	pvread_state "after test_tsc_skew=0 and a check"
	check "line: the skew cleared and checked again, line mode is back (mode line, line active)" \
		[ "$(cat $sys/mode)/$(cat $sys/line)" = line/active ]
	check "line: a new line anchored" [ "$(cat $sys/line_anchors)" -gt "$a0" ]
	sleep 2
	kill -TERM $reader
	wait $reader
	rc=$?
	sed 's/^/# warp reader: /' /tmp/pvread-order-warp.out | grep -v '^# warp reader: # threads: reader'
	echo "# line: warp reader (pvread_order) exit $rc"
	check "line: threads reading across line -> none -> line never saw a clock go back" \
		[ $rc -eq 0 ]
fi
pvread_done
