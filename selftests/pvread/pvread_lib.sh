# SPDX-License-Identifier: GPL-2.0
# Shared by the guest scripts: "ok"/"not ok" lines and the dmesg check.
failed=0

# check DESCRIPTION COMMAND...
check() {
	desc=$1; shift
	if "$@"; then echo "ok - $desc"; else echo "not ok - $desc"; failed=1; fi
}

check_dmesg() {
	bad=$(dmesg | grep -E 'BUG|WARNING|Oops|Call Trace|refcount')
	[ -n "$bad" ] && echo "$bad" | sed 's/^/# dmesg: /'
	check "dmesg clean (no BUG, WARNING, Oops, Call Trace, refcount)" [ -z "$bad" ]
}
