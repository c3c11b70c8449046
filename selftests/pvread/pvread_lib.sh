# SPDX-License-Identifier: GPL-2.0
# Shared by the guest scripts: their KTAP results, through kselftest's
# ktap_helpers.sh, and the dmesg checks.  Each script is one KTAP test: a
# header, its checks as numbered results, the totals, exit 1 if any failed.
# A program or script it runs is a subtest (pvread_sub): its lines indented
# two spaces, then one result of its own.
failed=0
pvread_dir=$(cd "$(dirname "$0")" && pwd)

# ktap_helpers.sh is in ../kselftest in a kernel tree and in an installed
# suite, in kselftest/kselftest in the test machines' /opt/pvread.
for _pvread_k in "$pvread_dir/../kselftest" "$pvread_dir/kselftest/kselftest"; do
	[ -f "$_pvread_k/ktap_helpers.sh" ] && break
done
if [ ! -f "$_pvread_k/ktap_helpers.sh" ]; then
	echo "Bail out! $(basename "$0"): no kselftest/ktap_helpers.sh next to $pvread_dir"
	exit 1
fi
. "$_pvread_k/ktap_helpers.sh"
ktap_print_header

# ktap_helpers.sh prints a name unquoted: no globbing while it does.
_pvread_ktap() {
	set -f
	"$@"
	set +f
}

# check NAME COMMAND...: one result, which passes if COMMAND succeeds.
check() {
	_pvread_name=$1; shift
	if "$@"; then
		_pvread_ktap ktap_test_pass "$_pvread_name"
	else
		_pvread_ktap ktap_test_fail "$_pvread_name"
		failed=1
	fi
}

# skip NAME REASON: a check that cannot be made here, and why.
skip() {
	_pvread_ktap __ktap_test ok "$1" "SKIP $2"
	KTAP_CNT_SKIP=$((KTAP_CNT_SKIP + 1))
}

# pvread_done: the totals; exit 1 if any check failed.
pvread_done() {
	ktap_print_totals
	exit $failed
}

# pvread_mark WHAT: a marker in the kernel log, for dmesg_since_mark; at
# KERN_DEBUG (<7>), so that it stays off the console, which is the tests'.
pvread_mark() {
	_pvread_m="pvread selftests: $1 starts (pid $$, $(cut -d' ' -f1 /proc/uptime) s)"
	echo "<7>$_pvread_m" > /dev/kmsg 2>/dev/null || _pvread_m=
	echo "$_pvread_m"
}

# dmesg_since_mark MARKER: the kernel log since MARKER (all of it if it has
# left the ring, or there is no marker).
dmesg_since_mark() {
	dmesg | awk -v m="$1" '
		{ line[NR] = $0 }
		m != "" && index($0, m) { from = NR + 1 }
		END { for (i = from ? from : 1; i <= NR; i++) print line[i] }'
}

# dmesg_bad MARKER: the lines since MARKER that say the kernel went wrong.
dmesg_bad() {
	dmesg_since_mark "$1" | sh "$pvread_dir/pvread_badness.sh"
}

# The kernel log from here on is this script's, and so is any taint the
# kernel takes from here on.
pvread_script_mark=$(pvread_mark "$(basename "$0")")
pvread_taint0=$(cat /proc/sys/kernel/tainted 2>/dev/null || echo 0)

# pvread_new_taint: the taint flags the kernel took since the script
# started, less O and E (bits 12 and 13: an out-of-tree, unsigned module,
# which every load of the suite's modules is); 0 when none.  A WARN leaves
# W, an oops D, a bad page B, a soft lockup L: each, even one whose lines
# left the log, is a failure.
pvread_new_taint() {
	_t=$(cat /proc/sys/kernel/tainted 2>/dev/null || echo 0)
	echo $(( _t & ~pvread_taint0 & ~(4096 | 8192) ))
}

check_dmesg() {
	bad=$(dmesg_bad "$pvread_script_mark")
	[ -n "$bad" ] && echo "$bad" | sed 's/^/# dmesg: /'
	check "dmesg clean (no BUG, WARNING, Oops, Call Trace, refcount)" [ -z "$bad" ]
	_nt=$(pvread_new_taint)
	echo "# kernel taint: $pvread_taint0 at the start, $(cat /proc/sys/kernel/tainted 2>/dev/null) now; new beyond O and E: $_nt"
	check "kernel not tainted by the run (beyond O and E)" [ "$_nt" -eq 0 ]
}

# pvread_since T0: seconds of uptime since T0 (from /proc/uptime).
pvread_since() {
	awk -v t0="$1" '{ printf "%.1f", $1 - t0 }' /proc/uptime
}

# pvread_sub NAME COMMAND...: COMMAND (a test program or script, printing
# KTAP) as a subtest: its lines, stdout and stderr, indented as they come;
# then the result NAME, which fails if it exits non-zero or if the kernel
# logged something bad while it ran (from a marker of its own), and is a
# skip, with the first reason, if it ran nothing but skips (a plan of
# 1..0, or totals with skips and no pass: the kernel's harness exits 0
# when every test skipped).
pvread_sub() {
	_pvread_name=$1; shift
	_pvread_m=$(pvread_mark "$_pvread_name")
	_pvread_t0=$(cut -d' ' -f1 /proc/uptime)
	{ "$@" 2>&1; echo $? > /tmp/pvread_sub.$$; } |
		tee /tmp/pvread_sub_out.$$ | awk '{ print "  " $0; fflush() }'
	_pvread_rc=$(cat /tmp/pvread_sub.$$)
	_pvread_bad=$(dmesg_bad "$_pvread_m")
	echo "# $_pvread_name: exit $_pvread_rc after $(pvread_since "$_pvread_t0") s"
	[ -n "$_pvread_bad" ] && echo "$_pvread_bad" | sed 's/^/# dmesg: /'
	_pvread_why=
	if { [ "$_pvread_rc" -eq 0 ] || [ "$_pvread_rc" -eq 4 ]; } && [ -z "$_pvread_bad" ] &&
	   grep -qE '^(1\.\.0 # SKIP|# Totals: pass:0 fail:0 xfail:0 xpass:0 skip:[1-9][0-9]* error:0$)' \
		/tmp/pvread_sub_out.$$; then
		_pvread_why=$(sed -n 's/^\(1\.\.0\|ok [0-9]* .*\) # SKIP \(.*\)/\2/p' \
			/tmp/pvread_sub_out.$$ | head -n 1)
	fi
	rm -f /tmp/pvread_sub_out.$$
	if [ -n "$_pvread_why" ]; then
		skip "$_pvread_name" "$_pvread_why"
	else
		check "$_pvread_name" [ "$_pvread_rc" -eq 0 -a -z "$_pvread_bad" ]
	fi
}

# pvread_control NAME PATTERN COMMAND...: a negative control: COMMAND, a
# test program made to see a clock that is wrong by a known amount, must
# fail the check that looks for it.  NAME passes when COMMAND exits 1 (a
# test failed) and its output has a line matching PATTERN (grep -E), that
# check's own words: a crash, a skip or a failure that left no such line
# does not count.  Its output goes on "# " lines, where its own results
# ("not ok ...") are figures of NAME, not results of this run.
pvread_control() {
	_pvread_name=$1 _pvread_pat=$2
	shift 2
	_pvread_out=$("$@" 2>&1)
	_pvread_rc=$?
	printf '%s\n' "$_pvread_out" | sed 's/^/# control| /'
	echo "# $_pvread_name: exit $_pvread_rc"
	check "$_pvread_name" sh -c \
		'[ "$0" -eq 1 ] && printf "%s\n" "$1" | grep -qE "$2"' \
		"$_pvread_rc" "$_pvread_out" "$_pvread_pat"
}

# pvread_run PROG [ARGS...]: a test program, as the subtest PROG.
pvread_run() {
	pvread_sub "${1##*/}" "$@"
}

# The programs the kselftest runner runs (the Makefile's TEST_GEN_PROGS,
# as the payload's kselftest/ lists them), one per property; all but
# pvread_fallback test the device.
pvread_progs() {
	sed -n 's/^pvread://p' "$pvread_dir/kselftest/kselftest-list.txt" 2>/dev/null
}
pvread_device_progs() {
	pvread_progs | grep -v '^pvread_fallback$'
}

# run_kselftest_pvread xen|plain: the suite as a kernel tree installs it
# (the payload's kselftest/, from make -C tools/testing/selftests
# TARGETS=pvread install), run as a kernel developer would:
# run_kselftest.sh -c pvread.  Its output is shown on "# " lines; the
# verdicts are its result lines, one per program: on Xen every program
# passes but pvread_fallback, which skips, and in mode none (no line to
# read: the kernel answers every read) pvread_bounded and pvread_line_rate,
# which skip too; without Xen pvread_fallback passes and the others skip,
# saying why.  Shorter reads than the
# default, as the guest scripts have just run the full length.
run_kselftest_pvread() {
	ksft=$pvread_dir/kselftest/run_kselftest.sh
	if [ ! -x "$ksft" ] || [ -z "$(pvread_progs)" ]; then
		check "kselftest: run_kselftest.sh and its list in the payload" false
		return
	fi
	_pvread_kt0=$(cut -d" " -f1 /proc/uptime)
	out=$(PVREAD_TEST_SECONDS=0.2 PVREAD_TEST_READS=10000 "$ksft" -c pvread 2>&1)
	echo "$out" | sed 's/^/# kselftest| /'
	echo "# run_kselftest.sh -c pvread: $(pvread_since "$_pvread_kt0") s"
	skips=0
	for p in $(pvread_progs); do
		res=$(echo "$out" | grep -E "^(not )?ok [0-9]+ selftests: pvread: $p( |\$)")
		want=pass
		case $1/$expect_mode/$p in
		xen/*/pvread_fallback) want=skip ;;
		xen/none/pvread_bounded|xen/none/pvread_line_rate) want=skip ;;
		plain/*/pvread_fallback) ;;
		plain/*) want=skip ;;
		esac
		if [ $want = pass ]; then
			check "kselftest: $p passes" sh -c 'echo "$0" | grep -q "^ok " && ! echo "$0" | grep -q "# SKIP"' "$res"
		else
			check "kselftest: $p skips" sh -c 'echo "$0" | grep -q "^ok .*# SKIP"' "$res"
			skips=$((skips + 1))
		fi
	done
	# A skipped program's plan line says why: "1..0 # SKIP reason".
	check "kselftest: every skip says why" \
		[ "$(echo "$out" | grep -c '^# *1\.\.0 # SKIP .')" -eq "$skips" ]
}

# Module parameters for every insmod of the suite, in one place: the
# machine's (MACHINE_PARAMS in vm/machines/NAME, which vm/matrix.sh puts in the guest's command),
# e.g. "line=0" (no line: mode none) or "tsc_reliable=1".  pvread_stress
# --module reloads with them too.
PVREAD_KMOD_ARGS=${PVREAD_KMOD_ARGS-}
export PVREAD_KMOD_ARGS
# The mode the module settles in and its sysfs "line", the reason: the
# machine's (MACHINE_EXPECT in vm/machines/NAME: PVREAD_EXPECT=MODE/LINE,
# e.g. none/rates where Xen runs the vCPUs' records at rates apart);
# without it none/off when loaded with line=0, else line/active.  Mode
# none: the kernel answers every read.
expect_mode=line
expect_line=active
for _pvread_a in $PVREAD_KMOD_ARGS; do
	case $_pvread_a in
	line=0|line=[nN]*|line=off) expect_mode=none expect_line=off ;;
	line=*) expect_mode=line expect_line=active ;;
	esac
done
if [ -n "${PVREAD_EXPECT-}" ]; then
	expect_mode=${PVREAD_EXPECT%/*}
	expect_line=${PVREAD_EXPECT#*/}
fi
case $expect_mode in
line|none) ;;
*)	echo "Bail out! PVREAD_EXPECT=$expect_mode/$expect_line: the mode is line or none"
	exit 1 ;;
esac
# The test programs' expectation (pvread_selftest.h).
PVREAD_EXPECT_MODE=$expect_mode
PVREAD_EXPECT_LINE=$expect_line
export PVREAD_EXPECT_MODE PVREAD_EXPECT_LINE

# pvread_wait_expected [SEC]: wait (default 30 s) for the page's expected
# mode and line state (pvread_page wait-mode; prints the outcome).
pvread_wait_expected() {
	pvread_page wait-mode "$expect_mode/$expect_line" "${1:-30}"
}

# pvread_insmod MODULE: insmod with the suite's parameters.
pvread_insmod() {
	# shellcheck disable=SC2086  # one word per parameter
	insmod "$1" $PVREAD_KMOD_ARGS
}

# pvread_leave_loaded MODULE: load MODULE for the machine's end and keep a
# reader mapping the page: the reboot or poweroff that follows lets go of
# every area with both in place (vm/run fails a machine whose shutdown
# hangs or makes the kernel complain).
pvread_leave_loaded() {
	check "insmod pvread.ko, left loaded and mapped for the shutdown" \
		pvread_insmod "$1"
	pvread-bench -l 2000000000 -v pvread >/dev/null 2>&1 &
}

# pvread_state [WHEN]: the module's state on one "# " line (and its
# refresh's on another, where the module has one).
pvread_state() {
	_s=/sys/class/misc/pvread
	_r() { cat "$_s/$1" 2>/dev/null || echo -; }
	echo "# pvread${1:+ $1}: mode $(_r mode), line $(_r line), xen_tsc \"$(_r xen_tsc)\", bound $(_r error_bound_ns) ns, spread $(_r spread_ns) ns, tsc_warp $(_r tsc_warp), line_anchors $(_r line_anchors), parameters \"$PVREAD_KMOD_ARGS\""
	if [ "$expect_mode" = line ] && [ "$(_r line)" = unvouched ]; then
		echo "# pvread: nobody vouches for one TSC across vCPUs here (xen_tsc \"$(_r xen_tsc)\"): line mode needs tsc_reliable=1 in this machine's parameters (vm/machines/)"
	fi
	[ ! -r /sys/kernel/debug/pvread/anchor_dev_max_ns ] ||
		echo "# pvread${1:+ $1}: a line at its end from the records and the kernel: worst $(cat /sys/kernel/debug/pvread/anchor_dev_max_ns) ns; bound overruns $(cat /sys/kernel/debug/pvread/bound_overruns)"
	[ ! -e "$_s/refresh" ] || pvread_refresh_state "$@"
}

# pvread_tsc_traps: Xen emulates rdtsc here (the module loaded says so),
# as in a domU under the default tsc_mode: each read traps into Xen.
pvread_tsc_traps() {
	grep -q 'emulated=1' /sys/class/misc/pvread/xen_tsc 2>/dev/null
}

# pvread_line_reads N: how many reads of the line a count test makes
# where it wants N: N, or N / 5 where rdtsc traps (9-30 us a read under
# the emulator, 0.03-0.13 M reads/s across 2 vCPUs as the host's load
# varies, against 2 M/s and more on the native TSC: 10^7 reads took
# 75-300 s a case).
pvread_line_reads() {
	if pvread_tsc_traps; then
		echo $(($1 / 5))
	else
		echo "$1"
	fi
}

# pvread_refresh: the module's refresh state (sysfs refresh: off, active,
# waiting, failed, nohz_full, lag), "absent" on a module without one.
pvread_refresh() {
	cat /sys/class/misc/pvread/refresh 2>/dev/null || echo absent
}

# pvread_refresh_state [WHEN]: the refresh's figures on one "# " line: its
# state, refreshes, then every refresh_* attribute the module has
# (refresh_missed, refresh_lag_ns, refresh_lag_max_ns, refresh_lag_age_ms,
# refresh_cost_ns, refresh_cost_max_ns, refresh_period_us, ...).
pvread_refresh_state() {
	_s=/sys/class/misc/pvread
	_l="# pvread refresh${1:+ $1}: $(pvread_refresh)"
	for _f in "$_s/refreshes" "$_s"/refresh_*; do
		[ -r "$_f" ] && _l="$_l, ${_f##*/} $(cat "$_f" 2>/dev/null)"
	done
	echo "$_l"
}
