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

# vm_initrd BASE OUT COMMAND CLOCKSOURCE [SRC...]: a test machine's initrd:
# the cached base archive (vm/mkinitramfs) followed by a small one holding,
# at /opt/pvread, each SRC (a directory's contents, or a file), COMMAND in
# .cmd, CLOCKSOURCE (if not empty) in .clocksource and a fresh nonce in
# .nonce, which vm/init prints with its markers; the nonce is left in
# VM_NONCE. The kernel unpacks concatenated cpio archives in order, and Xen
# hands the single file on as one module. COMMAND travels in a file, not
# on the kernel command line: it keeps its quotes, pipes and spaces.
vm_initrd() {
    local base=$1 out=$2 cmd=$3 cs=$4 stage src
    shift 4
    stage=$(mktemp -d "${TMPDIR:-/tmp}/pvread-initrd.XXXXXX")
    mkdir -p "$stage/opt/pvread/bin"
    for src in "$@"; do
        if [[ -d $src ]]; then
            cp -a "$src/." "$stage/opt/pvread/"
        else
            install -m 0755 "$src" "$stage/opt/pvread/"
        fi
    done
    VM_NONCE=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
    printf '%s\n' "$cmd" >"$stage/opt/pvread/.cmd"
    echo "$VM_NONCE" >"$stage/opt/pvread/.nonce"
    [[ -z $cs ]] || echo "$cs" >"$stage/opt/pvread/.clocksource"
    (cd "$stage" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
        cpio -o -H newc --owner=0:0 --quiet | gzip -1) >"$out.payload"
    cat "$base" "$out.payload" >"$out"
    rm -rf "$stage" "$out.payload"
}
