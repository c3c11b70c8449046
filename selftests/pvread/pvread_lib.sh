# SPDX-License-Identifier: GPL-2.0
# Shared by the guest scripts: "ok"/"not ok" lines and the dmesg check.
failed=0

# check DESCRIPTION COMMAND...
check() {
	desc=$1; shift
	if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; failed=1; fi
}

pvread_dir=$(cd "$(dirname "$0")" && pwd)

# The kernel log from here on is this script's: a marker goes in, and
# check_dmesg reads from it (from the start if it has left the ring).
pvread_mark="pvread selftests: $(basename "$0") starts (pid $$)"
echo "$pvread_mark" > /dev/kmsg 2>/dev/null || pvread_mark=

# dmesg_since_mark: the kernel log since this script's marker.
dmesg_since_mark() {
	dmesg | awk -v m="$pvread_mark" '
		{ line[NR] = $0 }
		m != "" && index($0, m) { from = NR + 1 }
		END { for (i = from ? from : 1; i <= NR; i++) print line[i] }'
}

check_dmesg() {
	bad=$(dmesg_since_mark | sh "$pvread_dir/pvread_badness.sh")
	[ -n "$bad" ] && echo "$bad" | sed 's/^/# dmesg: /'
	check "dmesg clean (no BUG, WARNING, Oops, Call Trace, refcount)" [ -z "$bad" ]
}

# run_kselftest_pvread pass|skip: the suite as a kernel tree installs it
# (the payload's kselftest/, from make -C tools/testing/selftests
# TARGETS=pvread install), run as a kernel developer would:
# run_kselftest.sh -c pvread.  Its output is shown on "# " lines; the
# verdict is its result line for pvread_test, which must be a pass (pass)
# or a skip that says why (skip).  Shorter reads than the runner's default
# (the runner's own KSELFTEST_<TEST>_ARGS), as the guest scripts have just
# run the full length: 9 s instead of 49 on 2 vCPUs under TCG.
run_kselftest_pvread() {
	KSELFTEST_PVREAD_TEST_ARGS=${KSELFTEST_PVREAD_TEST_ARGS-"--seconds 0.2 --reads 10000"}
	export KSELFTEST_PVREAD_TEST_ARGS
	ksft=$pvread_dir/kselftest/run_kselftest.sh
	name="kselftest: run_kselftest.sh -c pvread"
	if [ ! -x "$ksft" ]; then
		echo "not ok - $name: no $ksft in the payload"
		failed=1
		return
	fi
	out=$("$ksft" -c pvread 2>&1)
	echo "$out" | sed 's/^/# kselftest| /'
	res=$(echo "$out" | grep -E '^(not )?ok [0-9]+ selftests: pvread: pvread_test')
	case $1 in
	pass) check "$name passes" sh -c 'echo "$0" | grep -q "^ok " && ! echo "$0" | grep -q "# SKIP"' "$res" ;;
	skip) check "$name skips, saying why" sh -c 'echo "$0" | grep -q "^ok .*# SKIP" && echo "$1" | grep -q "^# 1\.\.0 # SKIP ."' "$res" "$out" ;;
	esac
}

# Module parameters for every insmod of the suite, in one place: the
# machine's (MACHINE_PARAMS in vm/machines/NAME, which vm/matrix.sh puts in the guest's command),
# e.g. "line=0" (per-CPU mode) or "tsc_reliable=1".  pvread_test --stress
# reloads with them too.
PVREAD_KMOD_ARGS=${PVREAD_KMOD_ARGS-}
export PVREAD_KMOD_ARGS
# The mode the module settles in and its sysfs "line", the reason: the
# machine's (MACHINE_EXPECT in vm/machines/NAME: PVREAD_EXPECT=MODE/LINE, e.g. percpu/rates
# where Xen runs the vCPUs' records at rates apart); without it percpu/off
# when loaded with line=0, else line/active.
expect_mode=line
expect_line=active
for _pvread_a in $PVREAD_KMOD_ARGS; do
	case $_pvread_a in
	line=0|line=[nN]*|line=off) expect_mode=percpu expect_line=off ;;
	line=*) expect_mode=line expect_line=active ;;
	esac
done
if [ -n "${PVREAD_EXPECT-}" ]; then
	expect_mode=${PVREAD_EXPECT%/*}
	expect_line=${PVREAD_EXPECT#*/}
fi

# pvread_insmod MODULE: insmod with the suite's parameters.
pvread_insmod() {
	# shellcheck disable=SC2086  # one word per parameter
	insmod "$1" $PVREAD_KMOD_ARGS
}

# pvread_state [WHEN]: the module's state on one "# " line.
pvread_state() {
	_s=/sys/class/misc/pvread
	_r() { cat "$_s/$1" 2>/dev/null || echo -; }
	echo "# pvread${1:+ $1}: mode $(_r mode), line $(_r line), xen_tsc \"$(_r xen_tsc)\", bound $(_r error_bound_ns) ns, spread $(_r spread_ns) ns, tsc_warp $(_r tsc_warp), line_anchors $(_r line_anchors), parameters \"$PVREAD_KMOD_ARGS\""
	if [ "$expect_mode" = line ] && [ "$(_r line)" = unvouched ]; then
		echo "# pvread: nobody vouches for one TSC across vCPUs here (xen_tsc \"$(_r xen_tsc)\"): line mode needs tsc_reliable=1 in this machine's parameters (vm/machines/)"
	fi
}
