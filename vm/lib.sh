# shellcheck shell=bash
# Shared helpers for the vm/ scripts. Sourced, never executed.

# One cache for everything downloaded or built (kernel, Xen, base initramfs),
# so CI can keep it between runs and a second run repeats nothing.
PVREAD_CACHE=${PVREAD_CACHE:-/var/cache/pvread}
# Console logs of every boot; kept after the run for post-mortems.
PVREAD_LOGDIR=${PVREAD_LOGDIR:-/tmp/pvread-logs}
# Directory holding these scripts (and the guest's init), wherever we are called from.
# shellcheck disable=SC2034  # used by the scripts that source this
VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Exit code for "the VM machinery failed" (setup, boot, panic, hang). Same as
# timeout(1)/env(1) use for their own failures, so it is distinct from the
# usual command failures (1, 2, 127...).
VM_FAIL=125

SELF=${SELF:-vm/$(basename "$0")}

msg() { printf '%s: %s\n' "$SELF" "$*" >&2; }
die() { msg "error: $*"; exit "$VM_FAIL"; }

# Any unexpected failure (set -e) gets a message and VM_FAIL, never an exit
# status that vm/run's caller could take for the guest command's own.
# -E: the trap also covers functions and subshells.
set -E
# Status VM_FAIL means die() already explained (in a $(...) subshell).
on_err() {
    local rc=$1 line=$2 cmd=$3
    if [[ $rc -ne $VM_FAIL ]]; then
        msg "error: unexpected failure (status $rc) at line $line: $cmd"
    fi
    exit "$VM_FAIL"
}
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR

# The kernel ABI version we boot, recorded by vm/setup (so vm/run needs
# neither dpkg nor root to find it).
vm_kver() {
    local f=$PVREAD_CACHE/kver
    [[ -s $f ]] || die "no $f: run vm/setup (as root) first"
    cat "$f"
}
