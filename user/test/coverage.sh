#!/bin/bash
# user/test/coverage.sh — which programs the preload shim reaches, checked
# on this host (no /dev/pvread needed: a call the shim answers is counted by
# its pvread_get_stats(), fast or not).  One line per kind of program:
#   ok - shim coverage: KIND: reached|not reached (how it was seen)
# A kind whose toolchain is not installed says so with "# SKIP".  Fails if
# a kind said to be reached is not, or the reverse.
#   user/test/coverage.sh [BUILD]   (BUILD: user/build, with the shim)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
shim=$(cd "$build" && pwd)/libpvread-preload.so
tmp=$(mktemp -d /tmp/pvread-coverage.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
[[ -f $shim ]] || { echo "not ok - shim coverage: no $shim (make -C user first)"; exit 1; }

# row KIND WANT(reached|not) HOW N: N calls the shim answered (or bindings)
row() {
    local kind=$1 want=$2 how=$3 n=$4 got=reached
    [[ $n =~ ^[0-9]+$ && $n -gt 0 ]] || got="not reached"
    # The figures on a "# " line before the result: the result's name is
    # the same in every run (vm/manifest/host lists it).
    echo "# shim coverage: $kind: $how; the shim answered ${n:-0} calls"
    if [[ $got == "$want" || ($want == not && $got == "not reached") ]]; then
        echo "ok - shim coverage: $kind: $got"
    else
        echo "not ok - shim coverage: $kind: $got, expected $want"
        failed=1
    fi
}
skip() { echo "ok - shim coverage: $1 # SKIP $2"; }

# The shim's count, written at exit by a second preloaded object the
# program does not know of, which asks the shim (dlsym).  The counts are
# per thread: these programs ask the time on the thread that exits.
cat >"$tmp/count.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static void __attribute__((destructor)) report(void)
{
	uint64_t st[4 + 16] = { 0 };
	void (*get)(uint64_t *) = (void (*)(uint64_t *))dlsym(RTLD_DEFAULT, "pvread_get_stats");
	const char *out = getenv("PVREAD_COVERAGE_OUT");
	FILE *f;

	if (!get || !out || !(f = fopen(out, "w")))
		return;
	get(st);
	fprintf(f, "%llu\n", (unsigned long long)(st[0] + st[1]));
	fclose(f);
}
C
cc -shared -fPIC -o "$tmp/count.so" "$tmp/count.c" -ldl || exit 1

# answered CMD...: calls the shim answered while CMD ran (main thread)
answered() {
    rm -f "$tmp/n"
    PVREAD_COVERAGE_OUT=$tmp/n LD_PRELOAD="$shim $tmp/count.so" "$@" >/dev/null 2>&1
    cat "$tmp/n" 2>/dev/null || echo 0
}

# Every libc entry point that reads the clock (nm -D libc.so.6), one
# program each: 1000 calls, and libc's own.
declare -A call=(
    [clock_gettime]='struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);'
    [gettimeofday]='struct timeval v; gettimeofday(&v, 0);'
    [__gettimeofday]='struct timeval v; extern int __gettimeofday(struct timeval *, void *); __gettimeofday(&v, 0);'
    [time]='time(0);'
    [timespec_get]='struct timespec t; timespec_get(&t, TIME_UTC);'
    [ftime]='struct timeb b; ftime(&b);'
)
for sym in clock_gettime gettimeofday __gettimeofday time timespec_get ftime; do
    printf '#define _GNU_SOURCE\n#include <time.h>\n#include <sys/time.h>\n#include <sys/timeb.h>\nint main(void){for(int i=0;i<1000;i++){%s}return 0;}\n' \
        "${call[$sym]}" >"$tmp/$sym.c"
    if cc -O2 -Wno-deprecated-declarations -o "$tmp/$sym" "$tmp/$sym.c"; then
        n=$(answered "$tmp/$sym")
        # The shim must answer every one of the program's 1000 calls.
        ((n >= 1000)) || n=0
        row "C, dynamically linked: $sym()" reached "1000 calls, all answered" "$n"
    else
        echo "not ok - shim coverage: C: $sym(): does not build"; failed=1
    fi
done
# A program linked with libpvread.so.2 and run with the shim preloaded:
# its pvread_*() bind to the shim (same symbol versions), one library state.
printf '#include <pvread.h>\nint main(void){struct timespec t;return pvread_clock_gettime(CLOCK_MONOTONIC,&t);}\n' >"$tmp/linked.c"
ln -sf "$build/libpvread.so" "$tmp/libpvread.so.2"
if cc -O2 -I"$here/../include" -I"$here/../../include/uapi" -o "$tmp/linked" "$tmp/linked.c" \
        "$build/libpvread.so" -Wl,-rpath,"$tmp"; then
    LD_BIND_NOW=1 LD_DEBUG=bindings LD_PRELOAD=$shim "$tmp/linked" >"$tmp/linked.bindings" 2>&1
    n=$(grep -c "binding file $tmp/linked .* to $shim .*symbol \`pvread_clock_gettime' \[LIBPVREAD_0.2\]" "$tmp/linked.bindings")
    row "a program linked with libpvread.so.2, shim preloaded" reached \
        "its pvread_clock_gettime binds to the shim at LIBPVREAD_0.2" "$n"
else
    echo "not ok - shim coverage: a program linked with libpvread.so.2: does not build"; failed=1
fi
if cc -O2 -static -o "$tmp/c-static" "$tmp/clock_gettime.c" 2>/dev/null; then
    row "C, statically linked" not "LD_PRELOAD does not apply" "$(answered "$tmp/c-static")"
else
    skip "C, statically linked" "no static libc here"
fi
if command -v g++ >/dev/null; then
    printf '#include <chrono>\nint main(){long s=0;for(int i=0;i<1000;i++){s+=std::chrono::steady_clock::now().time_since_epoch().count();s+=std::chrono::system_clock::now().time_since_epoch().count();}return s==42;}\n' >"$tmp/cxx.cc"
    g++ -O2 -o "$tmp/cxx" "$tmp/cxx.cc" &&
        row "C++ std::chrono (libstdc++)" reached "steady_clock, system_clock" "$(answered "$tmp/cxx")"
else
    skip "C++ std::chrono (libstdc++)" "no g++ here"
fi
if command -v python3 >/dev/null; then
    row "Python 3 (time module)" reached "time.time, time.monotonic" \
        "$(answered python3 -c 'import time
for _ in range(1000): time.time(); time.monotonic()')"
else
    skip "Python 3 (time module)" "no python3 here"
fi
jdk=/usr/lib/jvm/java-17-openjdk-amd64
if [[ -x $jdk/bin/javac ]]; then
    # The JVM reads the clock on threads of its own: see where libjvm.so's
    # clock_gettime binds (all bound at load: LD_BIND_NOW).
    LD_BIND_NOW=1 LD_DEBUG=bindings LD_PRELOAD=$shim "$jdk/bin/java" -version \
        >"$tmp/jvm.bindings" 2>&1
    if grep -q "libjvm.so .* to $shim .*symbol \`clock_gettime'" "$tmp/jvm.bindings"; then
        echo "ok - shim coverage: JVM (OpenJDK 17): reached (libjvm.so's clock_gettime binds to the shim, LD_DEBUG=bindings; figures from the Xen guest: vm/check xen417-jvm)"
    else
        echo "not ok - shim coverage: JVM (OpenJDK 17): libjvm.so's clock_gettime does not bind to the shim"
        failed=1
    fi
else
    skip "JVM (OpenJDK 17)" "no openjdk-17-jdk-headless here"
fi
if command -v go >/dev/null; then
    # Dynamically linked through cgo, so that LD_PRELOAD applies; its exit
    # skips libc's destructors, so look at the bindings instead: the Go
    # runtime finds the vDSO's clock_gettime itself, and binds no libc one.
    printf 'package main\n// int one(void) { return 1; }\nimport "C"\nimport "time"\nfunc main(){ for i:=0;i<1000;i++ { _ = time.Now() }; _ = C.one() }\n' >"$tmp/g.go"
    if (cd "$tmp" && go mod init g >/dev/null 2>&1; CGO_ENABLED=1 go build -o g g.go) >"$tmp/go.log" 2>&1 &&
            ldd "$tmp/g" >/dev/null 2>&1; then
        LD_BIND_NOW=1 LD_DEBUG=bindings LD_PRELOAD=$shim "$tmp/g" >"$tmp/go.bindings" 2>&1
        n=$(grep -c "binding file $tmp/g .* to $shim .*symbol \`\(clock_gettime\|gettimeofday\|time\)'" "$tmp/go.bindings")
        row "Go (cgo, dynamically linked)" not \
            "$(go version | cut -d' ' -f3): the runtime calls the vDSO itself: bindings of the program to the shim" "$n"
    else
        cat "$tmp/go.log"
        skip "Go" "the cgo build failed"
    fi
else
    skip "Go" "no go here"
fi
exit $failed
