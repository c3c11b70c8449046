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

# as_root "$@": the README's commands run as written by root, and by a
# user who has sudo: not root, start this script again through sudo.
as_root() {
    [[ $(id -u) -ne 0 ]] || return 0
    command -v sudo >/dev/null ||
        die "must run as root (it installs packages and boots machines), and there is no sudo here"
    exec sudo -- "$0" "$@"
}

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

# Platforms built from a newer Debian suite: one file each in vm/platforms/
# (vm/setup-platform NAME prepares one). The first generation, Xen 4.17 +
# Linux 6.1 from the host's own Debian 12, is vm/setup's and has no file.
platform_names() {
    local f
    for f in "$VM_DIR"/platforms/*; do [[ -f $f ]] && printf '%s ' "${f##*/}"; done
}

# platform_load NAME: set PLATFORM and the PLATFORM_* variables of its file.
platform_load() {
    local f=$VM_DIR/platforms/$1
    [[ $1 =~ ^[a-z0-9][a-z0-9-]*$ && -f $f ]] ||
        die "unknown platform '$1' (known: $(platform_names))"
    PLATFORM=$1
    PLATFORM_SUITE='' PLATFORM_KSERIES='' PLATFORM_IMAGE_PKG='' PLATFORM_IMAGE_PATH=''
    PLATFORM_XEN_PKG='' PLATFORM_XEN_ELF='' PLATFORM_BUILD='' PLATFORM_LINUX_ARGS=''
    # shellcheck disable=SC1090
    source "$f"
    # A platform vm/ builds itself: the script that does, and its Xen.
    if [[ -n $PLATFORM_BUILD ]]; then
        [[ -x $VM_DIR/$PLATFORM_BUILD && -n $PLATFORM_XEN_ELF ]] ||
            die "$f: PLATFORM_BUILD must name a script in vm/, and PLATFORM_XEN_ELF a Xen"
        return 0
    fi
    [[ -n $PLATFORM_SUITE && -n $PLATFORM_KSERIES && -n $PLATFORM_IMAGE_PKG &&
       -n $PLATFORM_IMAGE_PATH && -n $PLATFORM_XEN_PKG && -n $PLATFORM_XEN_ELF ]] ||
        die "$f must set PLATFORM_SUITE, _KSERIES, _IMAGE_PKG, _IMAGE_PATH, _XEN_PKG and _XEN_ELF"
}

# The loaded platform's debootstrap'd build root.
platform_root() { printf '%s\n' "$PVREAD_CACHE/$PLATFORM_SUITE-root"; }

# The file vm/setup-platform leaves in a build root it finished, and which
# vm/build-kmod-platform requires: one name, bumped when what a root must
# hold changes (3: sparse), so that an older root is set up again.
platform_root_complete() { printf '%s\n' "$(platform_root)/.pvread-complete-3"; }

# The loaded platform's kernel version, recorded by vm/setup-platform.
platform_kver() {
    local f=$PVREAD_CACHE/kver-$PLATFORM
    [[ -s $f ]] || die "no $f: run vm/setup-platform $PLATFORM (as root) first"
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
    # VM_INITRD_RAW_HEAD=1 (a domU's): an uncompressed first archive (the
    # directory opt), so that Xen's domain builder loads the image as it
    # is. An image that starts gzipped it may inflate itself, and then only
    # its first member reaches the kernel: the base without the suite.
    : >"$out.head"
    if [[ ${VM_INITRD_RAW_HEAD:-0} == 1 ]]; then
        (cd "$stage" && echo opt | cpio -o -H newc --owner=0:0 --quiet) >"$out.head"
    fi
    cat "$out.head" "$base" "$out.payload" >"$out"
    rm -rf "$stage" "$out.payload" "$out.head"
}

# host_apt_mirror: the Debian archive this host's apt takes its packages
# from (the first "deb" source of a suite that is not a -security one, in
# /etc/apt/sources.list, sources.list.d/*.list or deb822 *.sources), so
# that the platforms' roots come from the same place; no host is named in
# the tree.  PVREAD_DEBIAN_MIRROR overrides it.
host_apt_mirror() {
    local f uri
    if [[ -n ${PVREAD_DEBIAN_MIRROR:-} ]]; then
        echo "$PVREAD_DEBIAN_MIRROR"
        return
    fi
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f $f ]] || continue
        uri=$(awk '$1 == "deb" {
                   i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                   if ($(i + 1) !~ /-security$/) { print $i; exit } }' "$f")
        [[ -n $uri ]] && { echo "${uri%/}"; return; }
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] || continue
        uri=$(awk 'BEGIN { RS = ""; FS = "\n" }
                   { deb = 0; sec = 0; u = ""
                     for (i = 1; i <= NF; i++) {
                         if ($i ~ /^Types:.*(^|[ \t])deb([ \t]|$)/) deb = 1
                         if ($i ~ /^Suites:.*-security/) sec = 1
                         if ($i ~ /^URIs:/) { split($i, w, /[ \t]+/); u = w[2] }
                     }
                     if (deb && !sec && u != "") { print u; exit } }' "$f")
        [[ -n $uri ]] && { echo "${uri%/}"; return; }
    done
    die "no Debian archive in this host's apt sources: set PVREAD_DEBIAN_MIRROR"
}

# What the debug-kernel machine vouches for: the module's sources (and the
# ABI header they compile) by content, and the file that records the
# digest of the last sources xen417-debug passed on.  vm/check runs that
# machine in the default run whenever the two differ.
KMOD_DEBUG_STAMP=$VM_DIR/debug/kmod-passed
kmod_digest() {
    local top
    top=$(cd "$VM_DIR/.." && pwd)
    (cd "$top" && LC_ALL=C ls kmod/Kbuild kmod/Makefile kmod/pvread_*.[ch] include/uapi/linux/pvread.h |
        while read -r f; do printf '%s\n' "$f"; cat "$f"; done) | sha256sum | cut -d' ' -f1
}
kmod_stamp() { sed -n 's/^sha256 //p' "$KMOD_DEBUG_STAMP" 2>/dev/null | head -n1; }
