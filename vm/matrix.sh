# shellcheck shell=bash disable=SC2034  # M_* and MATRIX_DEFAULT are for the callers
# The test-machine matrix, shared by vm/check and vm/soak. Sourced after
# lib.sh, from the top of the repository.
#
# A machine is a file of vm/machines/ (see vm/machines/README): how to boot
# it, the guest script that runs the suite in it, the payload it gets, the
# module parameters every load of pvread.ko in it takes, and the mode and
# sysfs line state the module must settle in. The guest gets the last two
# as PVREAD_KMOD_ARGS, which the guest scripts and pvread_stress --module
# use for every insmod, and PVREAD_EXPECT (selftests/pvread/pvread_lib.sh).
MACHINES_DIR=$VM_DIR/machines

# Every machine, by name.
matrix_names() {
    local f
    for f in "$MACHINES_DIR"/*; do
        f=${f##*/}
        [[ $f =~ ^[a-z0-9][a-z0-9-]*$ ]] && echo "$f"
    done
}

# The default run, in vm/machines/DEFAULT's order.
mapfile -t MATRIX_DEFAULT < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$MACHINES_DIR/DEFAULT")

# matrix_spec NAME: set M_RUN (array: the vm/run MACHINE and its options,
# or domu and vm/run-domu's), M_SCRIPT, M_KMOD (the payload), M_PARAMS
# (may be empty), M_EXPECT (MODE/LINE, may be empty) from NAME's file.
# False for a name that is no machine.
matrix_spec() {
    local f=$MACHINES_DIR/$1 opts
    [[ $1 =~ ^[a-z0-9][a-z0-9-]*$ && -f $f ]] || return 1
    local MACHINE_BOOT='' MACHINE_SMP='' MACHINE_CLOCKSOURCE='' MACHINE_OPTIONS=''
    local MACHINE_SUITE='' MACHINE_PAYLOAD='' MACHINE_PARAMS='' MACHINE_EXPECT=''
    # shellcheck disable=SC1090
    source "$f"
    [[ -n $MACHINE_BOOT && -n $MACHINE_SUITE && -n $MACHINE_PAYLOAD ]] ||
        die "$f must set MACHINE_BOOT, MACHINE_SUITE and MACHINE_PAYLOAD (see vm/machines/README)"
    M_RUN=("$MACHINE_BOOT")
    [[ -z $MACHINE_SMP ]] || M_RUN+=(--smp "$MACHINE_SMP")
    [[ -z $MACHINE_CLOCKSOURCE ]] || M_RUN+=(--clocksource "$MACHINE_CLOCKSOURCE")
    read -r -a opts <<<"$MACHINE_OPTIONS"
    M_RUN+=("${opts[@]}")
    M_SCRIPT=$MACHINE_SUITE M_KMOD=$MACHINE_PAYLOAD
    M_PARAMS=$MACHINE_PARAMS M_EXPECT=$MACHINE_EXPECT
    # The host CPUs the machine keeps busy: QEMU TCG runs a thread a
    # vCPU; a domU machine's are Xen's pCPUs (default 2).
    M_HOST_CPUS=${MACHINE_SMP:-2}
}

# matrix_check_names NAME...: die on an unknown machine name, or on
# parameters that could not travel in the guest's shell command.
matrix_check_names() {
    local n
    local -A seen=()
    for n in "$@"; do
        [[ -z ${seen[$n]:-} ]] || die "machine '$n' named twice"
        seen[$n]=1
        matrix_spec "$n" || die "unknown machine '$n' (known: $(matrix_names | tr '\n' ' '))"
        [[ ${M_RUN[0]} =~ ^(xen|plain|domu)$ || -f $VM_DIR/platforms/${M_RUN[0]} ]] ||
            die "machine '$n': MACHINE_BOOT '${M_RUN[0]}' is not xen, plain, domu or a platform ($(platform_names))"
        [[ $M_KMOD == 6.1 || $M_KMOD == 6.1+jvm || -f $VM_DIR/platforms/$M_KMOD ]] ||
            die "machine '$n': payload '$M_KMOD' is not 6.1, 6.1+jvm or a platform ($(platform_names))"
        [[ $M_PARAMS =~ ^[A-Za-z0-9_.,=\ -]*$ ]] ||
            die "machine '$n': module parameters '$M_PARAMS' may hold only letters, digits, _ . , = - and spaces"
        [[ -z $M_EXPECT || $M_EXPECT =~ ^(line|none)/[a-z]+$ ]] ||
            die "machine '$n': expected '$M_EXPECT' is not MODE/LINE, MODE line or none (e.g. none/rates)"
    done
}

# matrix_guest_cmd CMD: CMD with the machine's (matrix_spec's) module
# parameters in the guest's environment.
matrix_guest_cmd() {
    [[ -z $M_PARAMS ]] || printf "export PVREAD_KMOD_ARGS='%s'; " "$M_PARAMS"
    [[ -z $M_EXPECT ]] || printf "export PVREAD_EXPECT='%s'; " "$M_EXPECT"
    printf '%s' "$1"
}

# payload_from_packages PAYLOAD KDIR: what is tested is what is shipped.
# The Debian packages are built (vm/packages --build-only build/debs) and
# extracted; the module is built from pvread-dkms's source as DKMS builds it
# (make -C kmod KDIR=...), and pvread-status, pvread-bench and the shim are
# the packaged ones, replacing the tree's in PAYLOAD.  The selftests stay
# the tree's (they ship in no package).
payload_from_packages() {
    local payload=$1 kdir=$2 x src ma
    vm/packages --build-only build/debs || die "vm/packages --build-only failed"
    x=$(mktemp -d /tmp/pvread-debs.XXXXXX)
    for d in build/debs/*.deb; do
        dpkg -x "$d" "$x" || die "dpkg -x $d failed"
    done
    src=$(echo "$x"/usr/src/pvread-*)
    ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
    [[ -f $src/dkms.conf && -f $src/kmod/Kbuild ]] || die "pvread-dkms has no module source"
    # The platforms' modules (vm/build-kmod-platform) are built from the tree's kmod/.
    [[ $(cd "$src" && echo kmod/pvread_*.[ch]) == "$(echo kmod/pvread_*.[ch])" ]] ||
        die "pvread-dkms's module sources are not kmod/pvread_*.[ch]"
    for f in kmod/Kbuild kmod/pvread_*.[ch]; do
        cmp -s "$src/$f" "$f" || die "pvread-dkms's $f is not the tree's"
    done
    make -C "$src/kmod" KDIR="$kdir" >"$x/kmod.log" 2>&1 ||
        { cat "$x/kmod.log"; die "pvread-dkms's source does not build against $kdir"; }
    cp "$src/kmod/pvread.ko" "$payload/pvread.ko"
    cp "$x/usr/bin/pvread-status" "$x/usr/bin/pvread-bench" "$payload/bin/"
    cp "$x/usr/lib/$ma/pvread/libpvread-preload.so" "$payload/lib/"
    msg "payload: pvread.ko (pvread-dkms's source), pvread-status, pvread-bench (pvread-tools), libpvread-preload.so (libpvread-preload) from build/debs"
    rm -rf "$x"
}

# payload_jvm FROM TO: FROM plus jvm/ -- TimeLoop.class, a runtime of
# java.base made by jlink from Debian's openjdk-17-jdk-headless (installed
# here if missing), and the libraries it needs that the base initramfs has
# not (syslib/).
payload_jvm() {
    local from=$1 to=$2 jdk=/usr/lib/jvm/java-17-openjdk-amd64 l
    if [[ $(dpkg-query -W -f='${Status}' openjdk-17-jdk-headless 2>/dev/null) != "install ok installed" ]]; then
        apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=120 \
            openjdk-17-jdk-headless >&2 || die "apt-get install openjdk-17-jdk-headless failed"
    fi
    rm -rf "$to" && cp -a "$from" "$to" && mkdir -p "$to/jvm/syslib"
    "$jdk/bin/javac" --release 17 -d "$to/jvm" selftests/pvread/jvm/TimeLoop.java ||
        die "javac TimeLoop.java failed"
    "$jdk/bin/jlink" --add-modules java.base --strip-debug --no-man-pages \
        --no-header-files --compress=2 --output "$to/jvm/jre" >/dev/null ||
        die "jlink failed"
    for l in $(ldd "$to/jvm/jre/lib/server/libjvm.so" "$to/jvm/jre/lib/libzip.so" |
               awk '$2 == "=>" && $3 ~ /(libz|libstdc\+\+)\.so/ { print $3 }' | sort -u); do
        cp -L "$l" "$to/jvm/syslib/"
    done
    [[ -e $to/jvm/syslib/libz.so.1 && -e $to/jvm/syslib/libstdc++.so.6 ]] ||
        die "payload_jvm: libz or libstdc++ not found by ldd"
    msg "payload: $to, with a $(du -sm "$to/jvm" | cut -f1) MB JVM"
}

# matrix_prepare NAME...: setup, build the payloads the machines need.
# Sets PAYLOAD_61 and PAYLOAD_JVM (empty when not needed), and for each
# platform P a machine needs PAYLOAD[P] (build/payload-P) or, if that could
# not be made, PLATFORM_ERROR[P] (why). Root.
declare -A PAYLOAD=() PLATFORM_ERROR=()
matrix_prepare() {
    local n need61=no needdomu=no needhvm=no needjvm=no kver kv p ko
    local -A platforms=()
    for n in "$@"; do
        matrix_spec "$n"
        # A platform's payload reuses the 6.1 one's static user programs.
        need61=yes
        case $M_KMOD in
            6.1) ;;
            6.1+jvm) needjvm=yes ;;
            *) platforms[$M_KMOD]=1 ;;
        esac
        [[ ${M_RUN[0]} == domu ]] && needdomu=yes
        # An HVM domU's device model: only for the machines that boot one.
        [[ ${M_RUN[0]} == domu && " ${M_RUN[*]} " == *" --type hvm "* ]] && needhvm=yes
    done
    PAYLOAD_61='' PAYLOAD_JVM='' PAYLOAD=() PLATFORM_ERROR=()
    [[ $need61 == yes ]] || return 0
    # The module must be built for the kernel the machines boot, which need
    # not be the host's own.
    kver=$(vm/setup)
    if [[ $needhvm == yes ]]; then
        vm/setup-domu --hvm >/dev/null || die "vm/setup-domu --hvm failed"
    elif [[ $needdomu == yes ]]; then
        vm/setup-domu >/dev/null || die "vm/setup-domu failed"
    fi
    make payload KDIR="/usr/src/linux-headers-$kver" || die "make payload KDIR=/usr/src/linux-headers-$kver failed"
    payload_from_packages build/payload "/usr/src/linux-headers-$kver"
    PAYLOAD_61=build/payload
    if [[ $needjvm == yes ]]; then
        payload_jvm build/payload build/payload-jvm
        PAYLOAD_JVM=build/payload-jvm
    fi
    # The platforms' build roots are made side by side: from an empty cache
    # each is mostly one CPU's dpkg and the network: xen420 and sid took
    # 235 s one after the other here, 187 s side by side. Their messages
    # follow, a platform at a time.
    # A failure here fails that platform's machines, not the whole run.
    local tmp
    local -A pid=()
    tmp=$(mktemp -d)
    for p in "${!platforms[@]}"; do
        vm/setup-platform "$p" >"$tmp/$p.kver" 2>"$tmp/$p.log" &
        pid[$p]=$!
    done
    for p in "${!platforms[@]}"; do
        wait "${pid[$p]}" || PLATFORM_ERROR[$p]="vm/setup-platform $p failed (see above)"
        cat "$tmp/$p.log" >&2
    done
    for p in "${!platforms[@]}"; do
        [[ -z ${PLATFORM_ERROR[$p]:-} ]] || continue
        kv=$(cat "$tmp/$p.kver")
        # Same user programs and scripts; every .ko rebuilt (a stale 6.1
        # module left behind would fail to load, not silently pass).
        rm -rf "build/payload-$p" && cp -a build/payload "build/payload-$p"
        rm -f "build/payload-$p"/*.ko
        if ! vm/build-kmod-platform "$p" "build/payload-$p"; then
            PLATFORM_ERROR[$p]="the modules do not build against Linux $kv (see above)"
            continue
        fi
        for ko in build/payload/*.ko; do
            [[ -e $ko ]] || continue
            [[ -s build/payload-$p/${ko##*/} ]] ||
                PLATFORM_ERROR[$p]="build/payload has ${ko##*/}, which vm/build-kmod-platform does not build for $p"
        done
        [[ -n ${PLATFORM_ERROR[$p]:-} ]] || PAYLOAD[$p]=build/payload-$p
    done
    rm -rf "$tmp"
}

# Results of a run: one line per test outcome, "machine<TAB>result<TAB>test",
# result pass|fail|skip, and for a skip "<TAB>reason", in $RESULTS; each test's "# " lines,
# "machine<TAB>test<TAB>line", in $FIGURES; one vm/run status file per boot.
matrix_init_results() {
    RUNDIR=$1
    mkdir -p "$RUNDIR"
    RESULTS=$RUNDIR/results.tsv
    : >"$RESULTS"
    MACHINE_ROWS=$RUNDIR/machines.tsv
    : >"$MACHINE_ROWS"
    FIGURES=$RUNDIR/figures.tsv
    : >"$FIGURES"
}

# matrix_record MACHINE RESULT TEST [REASON]
matrix_record() {
    if (($# > 3)); then
        printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"
    else
        printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RESULTS"
    fi
}

# matrix_parse MACHINE OUTFILE: the KTAP results of the guest's output, as
# the tests name them ("ok 3 bounded.monotonic.within_bound", "ok 12 sysfs:
# updates advance"), at every level: a subtest's lines (indented) are
# results as well, and so is the subtest itself (the program or script
# that printed them, "ok 7 pvread_exact").  A name is the same on every
# machine and in every run, what was seen goes on "# " lines.  "# SKIP"
# makes a result a skip; a skip without a name (kselftest.h's
# ksft_test_result_skip prints "ok N # SKIP reason") takes the name of the
# test the harness said it runs ("#  RUN NAME ..."), else its reason.  The
# "# " lines before a result, back to the one before, are that test's
# figures: into $FIGURES as machine, test, line.
matrix_parse() {
    awk -v m="$1" -v figures="$FIGURES" '
    { sub(/^[ \t]+/, "") }
    /^# +RUN +[^ ]/ { run = $3; nd = 0; next }
    /^# +(OK|FAIL|SKIP) +[^ ]/ || /^# (PASSED|FAILED|Starting|Totals|Planned)/ { next }
    /^#/ { d[++nd] = $0; next }
    /^(not )?ok([ \t]|$)/ {
        line = $0; res = "pass"
        if (line ~ /^not ok/) { res = "fail"; sub(/^not ok[ \t]*/, "", line) }
        else sub(/^ok[ \t]*/, "", line)
        sub(/^[0-9]+[ \t]*/, "", line); sub(/^- */, "", line)
        reason = ""
        if (match(line, /(^|[ \t])#[ \t]*[Ss][Kk][Ii][Pp]/)) {
            reason = substr(line, RSTART + RLENGTH); sub(/^[ \t]*/, "", reason)
            sub(/[ \t]+$/, "", reason)
            if (res == "pass") res = "skip"
            line = substr(line, 1, RSTART - 1)
            if (line ~ /^[ \t]*$/) line = run != "" ? run : reason
        } else if (match(line, /[ \t]#[ \t]*(TODO|XFAIL)/)) {
            line = substr(line, 1, RSTART - 1)
        }
        sub(/[ \t]+$/, "", line)
        if (line == "") line = run != "" ? run : "(no description)"
        print m "\t" res "\t" line (res == "skip" ? "\t" reason : "")
        for (i = 1; i <= nd; i++) {
            f = d[i]; sub(/^# ?/, "", f)
            print m "\t" line "\t" f >> figures
        }
        nd = 0; run = ""
    }' "$2" >>"$RESULTS"
}

# matrix_lost_failures MACHINE OUTFILE BOOT: the failures of a boot the
# emulator lost, as "BOOT: TEST" results of MACHINE.
matrix_lost_failures() {
    local saved=$RESULTS saved_figures=$FIGURES
    RESULTS=$RUNDIR/lost.tsv FIGURES=/dev/null
    : >"$RESULTS"
    matrix_parse "$1" "$2"
    RESULTS=$saved FIGURES=$saved_figures
    awk -F'\t' -v OFS='\t' -v boot="$3" '$2 == "fail" { $3 = boot ": " $3; print }' \
        "$RUNDIR/lost.tsv" >>"$RESULTS"
    rm -f "$RUNDIR/lost.tsv"
}

# matrix_lost_splats MACHINE CONSOLE BOOT: a boot the emulator lost still
# answers for what its kernels and Xen said before the fault: the splats of
# CONSOLE: Xen's up to its "Triple fault" line (what follows is its dump
# of the dead vCPU), dom0's kernel's, and every domU line domu.sh passed
# on ("domU| ").  A
# result "BOOT: kernel console clean before the emulator's fault".
matrix_lost_splats() {
    local n
    if [[ ! -s $2 ]]; then
        echo "=== $1: $3, lost to the emulator, left no console log ($2)"
        matrix_record "$1" fail "$3: kernel console clean before the emulator's fault"
        return 0
    fi
    n=$(tr -d '\r' <"$2" |
        awk '/Triple fault - invoking HVM shutdown/ { t = 1 }
             /^domU\| / || /^ *\[ *[0-9]+\.[0-9]+\]/ || (!t && /^ *\(XEN\)/)' |
        sh selftests/pvread/pvread_badness.sh | grep -c '' || true)
    if ((n == 0)); then
        matrix_record "$1" pass "$3: kernel console clean before the emulator's fault"
    else
        echo "=== $1: $3, lost to the emulator, shows $n splat lines before the fault (see $2)"
        matrix_record "$1" fail "$3: kernel console clean before the emulator's fault"
    fi
}

# matrix_exit_before RIP: the name of the instruction that ends at RIP (a
# few nops of an alternative before it skipped) in the domU's kernel, if
# it is one that leaves a PVH guest for Xen: rdtsc and rdtscp (the TSC is
# emulated), vmmcall (a hypercall), rdmsr, wrmsr, cpuid, hlt, in and out
# through dx; nothing otherwise.  The domU boots the dom0's kernel, whose
# text PVH does not randomise: its bytes are read from the image in the
# cache (decompressed once, next to it).
matrix_exit_before() {
    local rip=$1 img vmlinux text off hex
    img=$PVREAD_CACHE/vmlinuz-$(vm_kver)
    vmlinux=$PVREAD_CACHE/vmlinux-$(vm_kver)
    [[ -s $img ]] || return 0
    if [[ ! -s $vmlinux ]]; then
        off=$(grep -abo $'\xfd7zXZ' "$img" | head -n1 | cut -d: -f1)
        [[ -n $off ]] || return 0
        tail -c +$((off + 1)) "$img" | xz -dc >"$vmlinux.tmp" 2>/dev/null || true
        [[ -s $vmlinux.tmp ]] || { rm -f "$vmlinux.tmp"; return 0; }
        mv "$vmlinux.tmp" "$vmlinux"
    fi
    # .text's address and file offset: the bytes before RIP.
    text=$(LC_ALL=C readelf -SW "$vmlinux" | awk '{ sub(/^ *\[ *[0-9]+\] */, "") }
        $1 == ".text" { print $3, $4; exit }')
    [[ -n $text ]] || return 0
    set -- $text
    (( 0x$rip >= 0x$1 )) || return 0
    off=$(( 0x$2 + 0x$rip - 0x$1 - 8 ))
    hex=$(od -An -tx1 -v -j "$off" -N 8 "$vmlinux" | tr -d ' \n')
    while [[ $hex == *90 ]] && (( ${#hex} > 10 )); do hex=${hex%90}; done
    case $hex in
    *0f01f9) echo rdtscp ;; *0f01d9) echo vmmcall ;; *0f31) echo rdtsc ;;
    *0f32) echo rdmsr ;; *0f30) echo wrmsr ;; *0fa2) echo cpuid ;;
    *f4) echo hlt ;; *ec | *ed | *ee | *ef) echo "in/out" ;;
    esac
}

# matrix_emulator_fault RC OUTFILE: what QEMU TCG's nested SVM did, when a
# domU died of it; nothing else.  About one PVH boot in ten loses a vCPU to
# a triple fault (vm/README.md, "PVH under TCG's nested SVM").  Three forms
# are the emulator's beyond doubt: a vCPU whose saved state is Xen's own
# (code segment e008, RIP in Xen's text just after its VMRUN); a fault
# while the domU boots, before the suite loads anything; and a vCPU that
# died in its kernel right after an instruction Xen intercepts (the exit
# and the VMRUN back are what QEMU emulates; a guest's own fault there
# would be taken by its own handlers, not end in a triple fault).  Any
# other triple fault at a guest kernel address after the suite started
# is not taken for the emulator's: it fails the machine, as any other
# failure does.
matrix_emulator_fault() {
    local rc=$1 out=$2 rip insn
    [[ $rc -eq $VM_FAIL ]] || return 0
    # The first RIP Xen dumped after its first "Triple fault": that vCPU's.
    rip=$(awk '/Triple fault - invoking HVM shutdown/ { t = 1 }
               t && match($0, /RIP: +[0-9a-f]+:\[<[0-9a-f]+>\]/) {
                   r = substr($0, RSTART, RLENGTH); sub(/RIP: +/, "", r)
                   print r; exit }' "$out")
    [[ -n $rip ]] || return 0
    if [[ $rip == e008:\[\<ffff82d0* ]]; then
        echo "a vCPU triple-faulted holding Xen's own code segment and RIP ($rip)"
    elif grep -q 'the domU died before its command started' "$out"; then
        echo "a vCPU triple-faulted while the domU booted ($rip)"
    elif [[ $rip =~ ^0010:\[\<(ffffffff8[0-9a-f]+)\>\]$ ]]; then
        insn=$(matrix_exit_before "${BASH_REMATCH[1]}")
        [[ -z $insn ]] ||
            echo "a vCPU triple-faulted in its kernel right after $insn, which Xen intercepts ($rip)"
    fi
    return 0
}

# matrix_boot NAME TAG TIMEOUT COMMAND: boot machine NAME once with the
# suite command COMMAND, stream its output, and record the results.
# Files: $RUNDIR/TAG.{out,err,console,status}. Returns 0.
matrix_boot() {
    local name=$1 tag=$2 timeout=$3 cmd=$4 payload rc st reason splats
    matrix_spec "$name"
    local out=$RUNDIR/$tag.out err=$RUNDIR/$tag.err status=$RUNDIR/$tag.status
    payload=$PAYLOAD_61
    [[ $M_KMOD == 6.1+jvm ]] && payload=$PAYLOAD_JVM
    if [[ $M_KMOD != 6.1 && $M_KMOD != 6.1+jvm ]]; then
        payload=${PAYLOAD[$M_KMOD]:-}
        if [[ -z $payload ]]; then
            local why=${PLATFORM_ERROR[$M_KMOD]:-platform $M_KMOD not prepared}
            echo "=== $name: not booted: $why"
            matrix_record "$name" fail "machine prepared (setup, module build)"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "-" "-" "-" "-" \
                "${M_PARAMS:--}" "-" "$why" >>"$MACHINE_ROWS"
            return 0
        fi
        matrix_record "$name" pass "machine prepared (setup, module build)"
    fi
    # A domU machine: vm/run-domu, the payload as the domU's suite.
    local runner=(vm/run --payload "$payload")
    if [[ ${M_RUN[0]} == domu ]]; then
        runner=(vm/run-domu --suite "$payload")
        M_RUN=("${M_RUN[@]:1}")
    fi
    cmd=$(matrix_guest_cmd "$cmd")
    local attempt lost f
    for attempt in 1 2 3; do
        echo "=== $name: ${runner[0]} ${M_RUN[*]} -- $cmd"
        rm -f "$status"
        # "|| rc=": a failing machine is a result, not an error (lib.sh's ERR
        # trap fires on any failing pipeline, set -e or not).
        rc=0
        "${runner[@]}" --timeout "$timeout" --log "$RUNDIR/$tag.console" \
            --status-file "$status" "${M_RUN[@]}" -- "$cmd" \
            2> >(tee "$err" >&2) | tee "$out" || rc=${PIPESTATUS[0]}
        lost=$(matrix_emulator_fault "$rc" "$out")
        [[ -n $lost && $attempt -lt 3 ]] || break
        # A lost boot's failures stand (a fault mid-suite must not hide
        # one before it); its passes and the boot itself are not counted.
        echo "=== $name: booted once more: $lost"
        matrix_record "$name" skip "boot $attempt lost to the emulator" "$lost"
        for f in out err console status; do
            [[ ! -e $RUNDIR/$tag.$f ]] || mv "$RUNDIR/$tag.$f" "$RUNDIR/$tag.lost$attempt.$f"
        done
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name (boot $attempt, lost)" "$rc" \
            "-" "-" "-" "${M_PARAMS:--}" "-" "$lost" >>"$MACHINE_ROWS"
        matrix_lost_failures "$name" "$RUNDIR/$tag.lost$attempt.out" "boot $attempt"
        matrix_lost_splats "$name" "$RUNDIR/$tag.lost$attempt.console" "boot $attempt"
    done
    matrix_parse "$name" "$out"
    reason='' splats=''
    if [[ -s $status ]]; then
        st=$(grep -m1 '^reason=' "$status" | cut -d= -f2-)
        reason=$st
        splats=$(grep -m1 '^splats=' "$status" | cut -d= -f2-)
    else
        reason="vm/run wrote no status (exit $rc)"
    fi
    if [[ -z $reason && $rc -ne $VM_FAIL ]]; then
        matrix_record "$name" pass "machine booted and finished (vm/run)"
    else
        matrix_record "$name" fail "machine booted and finished (vm/run)"
    fi
    if [[ -n $splats && $splats -eq 0 ]]; then
        matrix_record "$name" pass "kernel console clean (vm/run scan)"
    else
        matrix_record "$name" fail "kernel console clean (vm/run scan)"
        [[ -z $splats ]] || reason="${reason:+$reason; }$splats oops/BUG/WARNING/refcount lines on the console"
        # The lines themselves, as vm/run's one badness filter found them.
        [[ -z $splats ]] || { echo "$name: the console's first splat lines ($RUNDIR/$tag.console):"
          tr -d '\r' <"$RUNDIR/$tag.console" 2>/dev/null |
              grep -aE '^ *(\[ *[0-9]+\.[0-9]+\]|\(XEN\)|domU\| )' |
              "$VM_DIR/../selftests/pvread/pvread_badness.sh" | head -n 6 | sed 's/^/    /'
        } >>"$RUNDIR/why" || true
    fi
    if [[ $rc -eq 0 ]]; then
        matrix_record "$name" pass "guest suite exit status 0"
    else
        matrix_record "$name" fail "guest suite exit status 0"
    fi
    # machine, exit, boot s, total s, guest clocksource, module parameters,
    # splats, reason
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" \
        "$(grep -m1 '^boot_s=' "$status" 2>/dev/null | cut -d= -f2- || true)" \
        "$(grep -m1 '^total_s=' "$status" 2>/dev/null | cut -d= -f2- || true)" \
        "$(grep -m1 '^guest=' "$status" 2>/dev/null | sed 's/.*clocksource=//' || true)" \
        "${M_PARAMS:--}" "${splats:--}" "$reason" >>"$MACHINE_ROWS"
    return 0
}

# The tests whose figures the summary shows, by name, "|"-separated: the
# page's state, exactness, the bound per clock, order, stress, leaks.
MATRIX_FIGURE_TESTS="mode.expected|exact.per_vcpu|bounded.monotonic.within_bound|bounded.realtime.within_bound|monotonic.never_back|processes: CLOCK_MONOTONIC, _RAW and BOOTTIME ordered across processes|threads: CLOCK_MONOTONIC, _RAW and BOOTTIME ordered across threads|stress.everything_moves|lifecycle: load/read/unload cycles without a failure"

# matrix_summary MACHINE...: print the machine x test table, the per-machine
# counts and the figures; return 1 if anything failed.
matrix_summary() {
    local machines=("$@")
    echo
    echo "=== summary: machine x test (logs in $RUNDIR)"
    awk -F'\t' -v order="${machines[*]}" '
    # Rows in the order the tests ran: a test first seen on some machine
    # goes right after the test that machine ran before it (a linked list
    # from the head ""), so "exact on cpu3" follows "exact on cpu2".
    BEGIN { nm = split(order, M, " "); nxt[""] = "\001" }
    {
        if (!($3 in seen)) {
            seen[$3] = 1
            prev = ($1 in last) ? last[$1] : ""
            nxt[$3] = nxt[prev]; nxt[prev] = $3
        }
        last[$1] = $3
        c[$1, $3, $2]++; tot[$1, $2]++; all[$2]++
    }
    function cell(m, t,   p, f, s, n) {
        p = c[m, t, "pass"] + 0; f = c[m, t, "fail"] + 0; s = c[m, t, "skip"] + 0
        n = p + f + s
        if (n == 0) return "-"
        if (f) return n == 1 ? "FAIL" : "FAIL " f "/" n
        if (p && s) return "ok " p "+skip " s
        if (p) return n == 1 ? "ok" : "ok x" n
        return n == 1 ? "skip" : "skip x" n
    }
    END {
        for (t = nxt[""]; t != "\001"; t = nxt[t]) T[++nt] = t
        w = 4
        for (i = 1; i <= nt; i++) if (length(T[i]) > w) w = length(T[i])
        if (w > 80) w = 80
        cw = 11
        for (j = 1; j <= nm; j++) if (length(M[j]) + 1 > cw) cw = length(M[j]) + 1
        printf "%-" w "s", "test"
        for (j = 1; j <= nm; j++) printf " %" cw "s", M[j]
        printf "\n"
        for (i = 1; i <= nt; i++) {
            printf "%-" w "s", substr(T[i], 1, w)
            for (j = 1; j <= nm; j++) printf " %" cw "s", cell(M[j], T[i])
            printf "\n"
        }
        printf "%-" w "s", "-- pass/fail/skip"
        for (j = 1; j <= nm; j++)
            printf " %" cw "s", (tot[M[j], "pass"] + 0) "/" (tot[M[j], "fail"] + 0) "/" (tot[M[j], "skip"] + 0)
        printf "\n"
        printf "total: %d passed, %d failed, %d skipped\n", all["pass"], all["fail"], all["skip"]
    }' "$RESULTS"
    echo
    echo "=== machines (one row per boot)"
    awk -F'\t' '
    BEGIN { printf "%-19s %5s %7s %8s %-18s %-15s %6s  %s\n", "machine", "exit", "boot s", "total s", "clocksource", "parameters", "splats", "failure" }
    { printf "%-19s %5s %7s %8s %-18s %-15s %6s  %s\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$MACHINE_ROWS"
    if [[ ${MATRIX_FIGURES:-1} == 1 ]]; then
        echo
        echo "=== figures (the \"# \" lines of the tests named in MATRIX_FIGURE_TESTS)"
        awk -F'\t' -v order="${machines[*]}" -v want="$MATRIX_FIGURE_TESTS" '
        BEGIN {
            nm = split(order, M, " ")
            nw = split(want, W, "|")
            for (i = 1; i <= nw; i++) rank[W[i]] = i
        }
        ($2 in rank) { f[$1, rank[$2], ++n[$1, rank[$2]]] = $3 }
        END {
            for (j = 1; j <= nm; j++)
                for (i = 1; i <= nw; i++)
                    for (k = 1; k <= n[M[j], i]; k++)
                        print M[j] ": " W[i] ": " f[M[j], i, k]
        }' "$FIGURES"
    fi
    # vm/check prints its own lines after these, then the failures.
    [[ ${MATRIX_FAILURES:-1} == 0 ]] || matrix_failures "$@"
    ! grep -q $'\tfail\t' "$RESULTS"
}

# matrix_failures MACHINE...: what failed, last of all, so that a log cut
# to its tail (a CI excerpt) still names it: what the run's own checks
# wrote to $RUNDIR/why (a manifest's differences, a host step's last
# lines, splat lines), each boot that failed with its reason, and each
# failed result with the "# " lines its test printed before it (the last
# few).
matrix_failures() {
    local nf
    nf=$(grep -c $'\tfail\t' "$RESULTS" || true)
    ((nf > 0)) || [[ -s $RUNDIR/why ]] || return 0
    echo
    echo "=== what failed: $nf result(s)"
    # The run's own findings first: the failed results, the earliest
    # first, stay in a tail of some 80 lines even when there are many.
    [[ ! -s $RUNDIR/why ]] || head -n 15 "$RUNDIR/why"
    # Lost boots are skips, not failures.
    awk -F'\t' '$8 != "" && $8 != "-" && $1 !~ / \(boot [0-9]+, lost\)$/ {
        print "boot " $1 ": exit " $2 ", " $8 }' "$MACHINE_ROWS"
    # A test run more than once on a machine: its lines may be another
    # run's, so the log's.
    awk -F'\t' -v figures="$FIGURES" '
    BEGIN { while ((getline l < figures) > 0) { split(l, a, "\t"); k = a[1] SUBSEP a[2]; f[k, ++n[k]] = a[3] } }
    FNR == NR { runs[$1, $3]++; next }
    $2 == "fail" && !(($1, $3) in shown) {
        shown[$1, $3] = 1
        print "FAIL " $1 ": " $3 ($4 != "" ? " (" $4 ")" : "")
        k = $1 SUBSEP $3
        if (runs[k] > 1) {
            print "    (" runs[k] " runs of it here: its # lines in the machine'"'"'s log)"
            next
        }
        for (i = (n[k] > 4 ? n[k] - 3 : 1); i <= n[k]; i++) print "    " f[k, i]
    }' "$RESULTS" "$RESULTS" | head -n 45 || true
}

# ---- the manifest: what each machine's run must show ----
# vm/manifest/NAME lists the results machine NAME (or "host", the host's
# steps) showed in a passing run, one a line, in the order they ran:
# "pass<TAB>TEST" or "skip<TAB>TEST<TAB>REASON".  A run is held to it, so
# that a test cannot stop running unnoticed: a listed test that does not
# show, a pass that became a skip, a skip for another reason (digits aside:
# reasons carry figures) or without one, or a result the manifest does not
# list, fails the machine.  A listed skip that now passes is only reported.
# Not listed: a boot the emulator lost ("boot N ..."), which comes and
# goes, and the check itself.  vm/check --update-manifest rewrites the
# files from a run without failures.
# A test that needs what only some hosts give (rdtscp, a trapped rdtsc, a
# hardware watchpoint: a hypervisor may hide or ignore each) is
# "pass<TAB>TEST<TAB>REASON[<TAB>REASON...]": it passes, or skips for
# exactly one of those reasons (digits aside) and no other.  Written by
# hand, once per such test; the rewrite keeps the line whichever its run
# showed.
MANIFEST_DIR=$VM_DIR/manifest
MANIFEST_TEST="results as vm/manifest lists them"

# matrix_manifest_results MACHINE: MACHINE's results of this run in the
# manifest's form, first appearance first, each once.
matrix_manifest_results() {
    awk -F'\t' -v m="$1" -v self="$MANIFEST_TEST" '
    $1 == m && ($2 == "pass" || $2 == "skip") && $3 != self && $3 !~ /^boot [0-9]+[: ]/ {
        k = $2 "\t" $3
        if (k in seen) next
        seen[k] = 1
        print ($2 == "skip" ? k "\t" $4 : k)
    }' "$RESULTS"
}

# matrix_manifest_check MACHINE...: each MACHINE's results against its
# manifest; a result "results as vm/manifest lists them" on each.  A
# machine of the default run without a manifest fails; another skips.
matrix_manifest_check() {
    local m f out
    for m in "$@"; do
        f=$MANIFEST_DIR/$m
        if [[ ! -s $f ]]; then
            if [[ " ${MATRIX_DEFAULT[*]} host " == *" $m "* ]]; then
                echo "=== manifest: $m is in the default run and has no $f"
                matrix_record "$m" fail "$MANIFEST_TEST"
            else
                matrix_record "$m" skip "$MANIFEST_TEST" "no vm/manifest/$m: vm/check --update-manifest $m writes it"
            fi
            continue
        fi
        out=$(matrix_manifest_results "$m" | awk -F'\t' -v m="$m" '
            function norm(r) { gsub(/[0-9]+/, "N", r); return r }
            FNR == NR {
                if ($0 ~ /^#/ || $0 ~ /^[ \t]*$/) next
                # A name may both skip and pass (a test run twice, with
                # and without a page): reasons are those of skips alone.
                want[$1, $2] = 1; order[++n] = $1 "\t" $2
                if ($1 == "skip") why[$2] = $3
                # A pass that may skip for one of the reasons listed with
                # it: what only some hosts give.
                if ($1 == "pass") for (i = 3; i <= NF; i++) unless[$2, norm($i)] = 1
                next
            }
            { got[$1, $2] = 1; seen[++k] = $1 "\t" $2; if ($1 == "skip") gotwhy[$2] = $3 }
            END {
                bad = 0
                for (i = 1; i <= n; i++) {
                    split(order[i], a, "\t")
                    if ((a[1], a[2]) in got) {
                        if (a[1] == "skip" && norm(why[a[2]]) != norm(gotwhy[a[2]])) {
                            printf "%s: skips for another reason: \"%s\", was \"%s\"\n", a[2], gotwhy[a[2]], why[a[2]]; bad = 1
                        }
                        continue
                    }
                    if (a[1] == "pass" && ("skip", a[2]) in got &&
                        (a[2], norm(gotwhy[a[2]])) in unless) {
                        continue
                    } else if (a[1] == "pass" && ("skip", a[2]) in got) {
                        printf "%s: passed, now skips: %s\n", a[2], gotwhy[a[2]]; bad = 1
                    } else if (a[1] == "skip" && ("pass", a[2]) in got) {
                        printf "%s: skipped, now passes (note only: update the manifest)\n", a[2]
                    } else {
                        printf "%s: listed as %s, did not show\n", a[2], a[1]; bad = 1
                    }
                }
                for (i = 1; i <= k; i++) {
                    split(seen[i], a, "\t")
                    if (a[1] == "skip" && gotwhy[a[2]] == "") {
                        printf "%s: a skip without its reason\n", a[2]; bad = 1
                    }
                    if ((a[1], a[2]) in want) continue
                    if (a[1] == "pass" && ("skip", a[2]) in want) continue
                    if (a[1] == "skip" && ("pass", a[2]) in want) continue
                    printf "%s: %s, not in the manifest\n", a[2], a[1]; bad = 1
                }
                exit bad
            }' "$f" -) && rc=0 || rc=$?
        if ((rc == 0)); then
            matrix_record "$m" pass "$MANIFEST_TEST"
            [[ -z $out ]] || sed "s|^|=== manifest: $m: |" <<<"$out"
        else
            sed "s|^|=== manifest: $m: |" <<<"$out" | tee -a "$RUNDIR/why"
            matrix_record "$m" fail "$MANIFEST_TEST"
        fi
    done
}

# matrix_manifest_write MACHINE...: each MACHINE's manifest from this run.
matrix_manifest_write() {
    local m f
    mkdir -p "$MANIFEST_DIR"
    for m in "$@"; do
        f=$MANIFEST_DIR/$m
        {
            echo "# vm/manifest/$m: the results a run of $m must show (vm/matrix.sh),"
            echo "# written by vm/check --update-manifest from a run without failures."
            # A test that passes or skips for the reason listed with it
            # (what only some hosts give) keeps its line.
            matrix_manifest_results "$m" |
                awk -F'\t' -v OFS='\t' -v old="$f" '
                    function norm(r) { gsub(/[0-9]+/, "N", r); return r }
                    BEGIN {
                        while ((getline line < old) > 0) {
                            n = split(line, a, "\t")
                            if (a[1] != "pass" || n < 3) continue
                            reasons[a[2]] = substr(line, length(a[1] a[2]) + 3)
                            for (i = 3; i <= n; i++) unless[a[2], norm(a[i])] = 1
                        }
                    }
                    ($2 in reasons) && ($1 == "pass" || ($2, norm($3)) in unless) {
                        print "pass", $2, reasons[$2]; next
                    }
                    { print }'
        } >"$f.new"
        mv "$f.new" "$f"
        echo "=== manifest: wrote $f ($(grep -vc '^#' "$f" || true) results)"
    done
}
