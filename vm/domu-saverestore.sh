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
# tsc_to_system_mul/tsc_shift than before. After each resume: the mode and
# line state come back (line/active, or none/off where PVREAD_KMOD_ARGS has
# line=0: the kernel answers every read) and, in
# line mode, a new line is anchored (line_anchors grows past what it was
# at the first look after the resume if the mode was not back yet, else
# before the save; line active) whose rate is the records' (so a line from
# before a TSC frequency change is not still in use). Afterwards: the module
# saw that many resumes, re-registered every online vCPU, and the reader saw
# no backward step, no read beyond the bound and no exactness violation.
# The module is loaded with PVREAD_KMOD_ARGS (see pvread_lib.sh). Prints
# KTAP (pvread_lib.sh): the reader, pvread_line_rate, pvread_registered and
# pvread_warp.sh as subtests.
stress=${1:-150}
wait_s=${2:-$((stress + 60))}
resumes=${3:-1}
new_scale=${4:-}
# vCPU 0's record's tsc_to_system_mul/tsc_shift, as the page has it
scale() {
	pvread_page |
		sed -n 's/^# record 0: state=1 .* mul=\([0-9]*\) shift=\(-*[0-9]*\)$/\1\/\2/p'
}
# shellcheck source=../selftests/pvread/pvread_lib.sh
. ./pvread_lib.sh
sys=/sys/class/misc/pvread
uptime_s() { cut -d. -f1 /proc/uptime; }
# The page's header.disruptions: resumes since load (pvread_page)
disruptions() {
	pvread_page | sed -n '1s/.* disruptions=\([0-9]*\).*/\1/p'
}

echo "# module parameters: \"$PVREAD_KMOD_ARGS\"; expecting mode $expect_mode, line $expect_line"
check "saverestore: insmod pvread.ko" pvread_insmod ./pvread.ko
pvread_wait_expected 30
r0=$(cat $sys/resumes)
d0=$(disruptions)
s0=$(scale)
echo "# before: registered $(cat $sys/registered), mode $(cat $sys/mode), resumes $r0"
pvread_state before
pvread_page | sed -n '1,2p'
echo "# records before:"; pvread-status | sed -n '/^cpu /,$p' | sed 's/^/#   /'
[ "$expect_mode" = line ] && pvread_line_rate | sed 's/^/# before the save: /'

# The reader runs across the save/restore; its own KTAP lines are the checks.
# In mode none each read is a system call: 10^6 of them, not 10^7; where
# Xen emulates rdtsc each read traps (pvread_line_reads): 2 * 10^6.
reads=$(pvread_line_reads 10000000)
[ "$expect_mode" = none ] && reads=1000000
pvread_stress --seconds "$stress" --reads "$reads" --module ./pvread.ko --suspends \
	>/tmp/stress.out 2>&1 &
reader=$!
# Look every second; at each resume, what came back.  a_prev is the line
# count at the last look, from before the domain was saved.
end=$(($(uptime_s) + wait_s))
seen=$r0
a_prev=$(cat $sys/line_anchors)
while [ "$seen" -lt $((r0 + resumes)) ] && [ "$(uptime_s)" -lt $end ]; do
	sleep 1
	r=$(cat $sys/resumes)
	if [ "$r" -gt "$seen" ]; then
		n=$((r - r0))
		m_now=$(cat $sys/mode)
		a_now=$(cat $sys/line_anchors)
		echo "# resume $n seen: resumes $seen -> $r; now mode $m_now, line $(cat $sys/line), line_anchors $a_prev -> $a_now"
		# Lines anchored since the mode came back: counted from now if
		# it is not back yet, else from the last look before the save.
		a_ref=$a_prev
		[ "$m_now" = "$expect_mode" ] || a_ref=$a_now
		seen=$r
		pvread_wait_expected 30
		pvread_state "after resume $n"
		pvread_page | sed -n '1,2p'
		check "saverestore: after each resume: the expected mode and line again" \
			[ "$(cat $sys/mode)/$(cat $sys/line)" = "$expect_mode/$expect_line" ]
		if [ "$expect_mode" = line ]; then
			echo "# saverestore: after resume $n: line_anchors $a_ref -> $(cat $sys/line_anchors), line $(cat $sys/line)"
			check "saverestore: after each resume: the line re-anchored" \
				[ "$(cat $sys/line_anchors)" -gt "$a_ref" -a "$(cat $sys/line)" = active ]
			pvread_sub "pvread_line_rate: resume" pvread_line_rate
		fi
	fi
	a_prev=$(cat $sys/line_anchors)
done
r1=$(cat $sys/resumes)
echo "# resumes $r0 -> $r1"
wait $reader
rc=$?
# The reader's KTAP as a subtest, whose result is its exit status.
sed 's/^/  /' /tmp/stress.out
echo "# saverestore: the reader (pvread_stress) across $resumes suspend/resume(s): exit $rc; resumes $r0 -> $r1"
check "saverestore: the reader across the suspends and resumes exits 0" [ $rc -eq 0 ]
check "saverestore: the module saw every resume" [ "$r1" -eq $((r0 + resumes)) ]
d1=$(disruptions)
echo "# saverestore: the page's disruptions $d0 -> $d1"
# shellcheck disable=SC2016  # expanded by the inner sh
check "saverestore: the page counts every resume (header.disruptions)" \
	sh -c '[ -n "$0" ] && [ -n "$1" ] && [ "$1" -eq $(($0 + $2)) ]' "$d0" "$d1" "$resumes"
pvread_wait_expected 30
echo "# after: registered $(cat $sys/registered), mode $(cat $sys/mode)"
pvread_state after
echo "# records after:"; pvread-status | sed -n '/^cpu /,$p' | sed 's/^/#   /'
check "saverestore: every online vCPU registered after restore" \
	[ "$(cat $sys/registered)" = "$(cat /sys/devices/system/cpu/online)" ]
# Every vCPU stays online across a Xen restore: each record must have been
# registered again from its own CPU, and Xen must write it again.
pvread_sub "pvread_registered: restore" pvread_registered -T kept_current_under_user_code
check "saverestore: the expected mode after restore" [ "$(cat $sys/mode)" = "$expect_mode" ]
echo "# saverestore: $((seen - r0)) of $resumes resumes checked"
check "saverestore: a resume check for each resume" \
	[ "$((seen - r0))" -eq "$resumes" ]
if [ "$new_scale" = new-scale ]; then
	s1=$(scale)
	differ() { [ -n "$1" ] && [ -n "$2" ] && [ "$1" != "$2" ]; }
	echo "# saverestore: records' mul/shift $s0 -> $s1"
	check "saverestore: the records describe the new TSC frequency" \
		differ "$s0" "$s1"
fi
check "saverestore: the expected line after restore" [ "$(cat $sys/line)" = "$expect_line" ]
if [ "$expect_mode" = line ]; then
	# The line across vCPUs, after the resumes: ordered across processes
	# and threads, and ended by a TSC warp.
	pvread_sub "saverestore: pvread_order after the resumes" \
		pvread_order --expect-mode line --reads "$reads"
	pvread_sub pvread_warp.sh sh ./pvread_warp.sh
fi
check "saverestore: rmmod pvread" rmmod pvread
check_dmesg
pvread_done
