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
    [[ -n $PLATFORM_SUITE && -n $PLATFORM_IMAGE_PKG && -n $PLATFORM_IMAGE_PATH &&
       -n $PLATFORM_XEN_PKG && -n $PLATFORM_XEN_ELF ]] ||
        die "$f must set PLATFORM_SUITE, _IMAGE_PKG, _IMAGE_PATH, _XEN_PKG and _XEN_ELF"
    [[ -z $PLATFORM_KSERIES || $PLATFORM_KSERIES =~ ^[0-9]+\.[0-9]+$ ]] ||
        die "$f: PLATFORM_KSERIES, when set, is a series such as 5.10 (got '$PLATFORM_KSERIES')"
}

# The loaded platform's debootstrap'd build root.
platform_root() { printf '%s\n' "$PVREAD_CACHE/$PLATFORM_SUITE-root"; }

# The file vm/setup-platform leaves in a build root it finished, and which
# vm/build-kmod-platform requires; it holds the headers package and version
# the root was made for. One name, bumped when what a root must hold
# changes (3: sparse; 4: the record of its kernel), so that an older root
# is set up again.
platform_root_complete() { printf '%s\n' "$(platform_root)/.pvread-complete-4"; }

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

# --- What a platform's suite ships now ------------------------------------------
# A suite moves (sid with every upload, trixie with each point release), so
# a platform's kernel and Xen are read from its archive at setup time, not
# written into vm/platforms/. The reading is done by an apt of the
# platform's own on the host, in $PVREAD_CACHE/apt-SUITE: it sees that
# suite alone, as the build root does, and keeps its lists, so that a
# second run fetches only what changed. Its own config (APT_CONFIG, read
# before anything else) keeps out the host's sources, pins, dpkg status and
# apt.conf.d, whose hooks (a cleaner of the host's caches, appstream) are
# not for this; a proxy of the host's is carried over.
platform_apt_dir() { printf '%s\n' "$PVREAD_CACHE/apt-$PLATFORM_SUITE"; }

# platform_apt_init MIRROR: the loaded platform's apt, reading MIRROR.
platform_apt_init() {
    local dir
    dir=$(platform_apt_dir)
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/empty"
    : >>"$dir/status"
    printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
        "$1" "$PLATFORM_SUITE" >"$dir/sources.list"
    {
        printf 'Dir::Etc::main "/dev/null";\nDir::Etc::parts "%s";\n' "$dir/empty"
        printf 'Dir::Etc::sourcelist "%s";\nDir::Etc::sourceparts "%s";\n' "$dir/sources.list" "$dir/empty"
        printf 'Dir::Etc::preferences "/dev/null";\nDir::Etc::preferencesparts "%s";\n' "$dir/empty"
        printf 'Dir::State "%s";\nDir::State::lists "%s";\nDir::State::status "%s";\n' \
            "$dir" "$dir/lists" "$dir/status"
        printf 'Dir::Cache "%s";\n' "$dir/cache"
        printf 'APT::Architecture "amd64";\nAPT::Architectures { "amd64"; };\n'
        # Lists kept compressed: a suite's Packages is about 60 MB unpacked.
        printf 'Acquire::Languages "none";\nAcquire::GzipIndexes "true";\n'
        # An archive whose Release is past its Valid-Until (a snapshot kept
        # for a while) is still the one the packages come from; signatures
        # are still checked. Root writes into root's cache: no _apt.
        printf 'Acquire::Check-Valid-Until "false";\nAPT::Sandbox::User "root";\n'
        env -u APT_CONFIG apt-config dump 2>/dev/null |
            grep -E '^Acquire::(http|https|ftp)::Proxy' || true
    } >"$dir/apt.conf"
}

platform_apt() { APT_CONFIG=$(platform_apt_dir)/apt.conf apt-get -q "$@"; }
platform_apt_cache() { APT_CONFIG=$(platform_apt_dir)/apt.conf apt-cache "$@"; }

# platform_apt_update: the suite's lists as the archive has them now; on
# failure they stay as they were, the output is in update.log beside them.
platform_apt_update() {
    local dir
    dir=$(platform_apt_dir)
    platform_apt update --error-on=any >"$dir/update.log" 2>&1
}

# platform_apt_date: the Date of the suite's Release in the lists (empty
# if there are none yet).
platform_apt_date() {
    local f
    for f in "$(platform_apt_dir)"/lists/*_dists_"$PLATFORM_SUITE"_*Release; do
        [[ -s $f ]] && sed -n 's/^Date: //p' "$f" | head -n1 && return 0
    done
    return 0
}

# platform_candidate PKG: the version of PKG in the suite's lists (empty if
# it has none).
platform_candidate() {
    platform_apt_cache show --no-all-versions "$1" 2>/dev/null |
        sed -n 's/^Version: //p' | head -n1
}

# platform_resolve: from the suite's lists, the kernel and Xen the loaded
# platform takes now:
#   PLATFORM_KVER           the ABI the suite's linux-headers-amd64 depends
#                           on (within PLATFORM_KSERIES, if the platform
#                           pins a series), e.g. 7.2.13+deb14-amd64
#   PLATFORM_HEADERS_VER    the version of linux-headers-$PLATFORM_KVER
#   PLATFORM_IMAGE          PLATFORM_IMAGE_PKG for it, and
#   PLATFORM_IMAGE_VER      its version
#   PLATFORM_XEN_VER        the version of PLATFORM_XEN_PKG
platform_resolve() {
    local deps dep
    PLATFORM_KVER='' PLATFORM_HEADERS_VER='' PLATFORM_IMAGE='' PLATFORM_IMAGE_VER='' PLATFORM_XEN_VER=''
    deps=$(platform_apt_cache show --no-all-versions linux-headers-amd64 2>/dev/null |
           sed -n 's/^Depends: //p' | head -n1)
    [[ -n $deps ]] || die "$PLATFORM_SUITE has no linux-headers-amd64 (lists: $(platform_apt_dir)/lists)"
    while read -r dep; do
        [[ $dep =~ ^linux-headers-([0-9][^ ]*-amd64)( |$) ]] || continue
        [[ -z $PLATFORM_KSERIES || ${BASH_REMATCH[1]} == "$PLATFORM_KSERIES".* ]] || continue
        PLATFORM_KVER=${BASH_REMATCH[1]}
        break
    done < <(tr ',' '\n' <<<"$deps" | sed 's/^ *//')
    [[ -n $PLATFORM_KVER ]] ||
        die "$PLATFORM_SUITE's linux-headers-amd64 names no ${PLATFORM_KSERIES:+Linux $PLATFORM_KSERIES (the series vm/platforms/$PLATFORM pins) }kernel: it depends on $deps"
    PLATFORM_HEADERS_VER=$(platform_candidate "linux-headers-$PLATFORM_KVER")
    [[ -n $PLATFORM_HEADERS_VER ]] || die "$PLATFORM_SUITE has no linux-headers-$PLATFORM_KVER"
    PLATFORM_IMAGE=${PLATFORM_IMAGE_PKG//@KVER@/$PLATFORM_KVER}
    PLATFORM_IMAGE_VER=$(platform_candidate "$PLATFORM_IMAGE")
    [[ -n $PLATFORM_IMAGE_VER ]] || die "$PLATFORM_SUITE has no $PLATFORM_IMAGE"
    PLATFORM_XEN_VER=$(platform_candidate "$PLATFORM_XEN_PKG")
    [[ -n $PLATFORM_XEN_VER ]] || die "$PLATFORM_SUITE has no $PLATFORM_XEN_PKG"
}
