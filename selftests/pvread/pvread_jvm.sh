#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The program from the field, in the Xen guest: a JVM (Debian's OpenJDK 17,
# its java.base as jlink makes a runtime of it) calling
# System.currentTimeMillis() and System.nanoTime() in a loop (jvm/TimeLoop),
# without and with the preload shim.  Checks what can be checked without a
# clock: no value backwards, and the clock system calls strace counts (with
# the shim, almost none; without, one per call).  The calls per second and
# their ratio are figures on "# " lines, not tests.  PVREAD_MAX_ERROR_NS is
# raised, as in pvread_shim.sh.
# Usage: pvread_jvm.sh [MODULE] [N]   (payload 6.1+jvm: vm/machines/xen417-jvm)
mod=${1:-./pvread.ko}
n=${2:-1000000}
. "$(dirname "$0")/pvread_lib.sh"
dir=$(cd "$(dirname "$0")" && pwd)
jvm=$dir/jvm
shim=$dir/lib/libpvread-preload.so
# libzip's libz and libjvm's libstdc++, which the machine's base has not
export LD_LIBRARY_PATH=$jvm/syslib
java_loop() {
	"$jvm/jre/bin/java" -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-cp "$jvm" TimeLoop "$1"
}

echo "# clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource); vCPUs online: $(grep -c ^processor /proc/cpuinfo)"
check "insmod pvread.ko" pvread_insmod "$mod"
pvread_wait_expected 30
pvread_state "after load"
"$jvm/jre/bin/java" -version 2>&1 | sed 's/^/# /'

# As pvread_shim.sh: under emulation the published bound is milliseconds,
# above the default tolerance (10 us), so the tolerance is raised.
export PVREAD_MAX_ERROR_NS=1000000000
pvread-status -w 10 | sed 's/^/# /'
for how in libc shim; do
	pre=
	[ $how = shim ] && pre=$shim
	out=$(LD_PRELOAD=$pre java_loop "$n" 2>&1)
	rc=$?
	echo "$out" | sed "s/^/# $how: /"
	echo "# jvm ($how): $n currentTimeMillis and $n nanoTime calls, exit $rc"
	check "jvm ($how): currentTimeMillis and nanoTime never backwards" \
		[ $rc -eq 0 ]
	eval "ms_$how=\$(echo \"\$out\" | sed -n 's/.*(\\([0-9]*\\) per s, [0-9]* backwards); .*/\\1/p')"
	eval "ns_$how=\$(echo \"\$out\" | sed -n 's/.*nanoTime calls in .* (\\([0-9]*\\) per s.*/\\1/p')"
	# The clock system calls of a whole run (the JVM's own start and
	# threads included), with a tenth of the calls: strace stops each one.
	LD_PRELOAD=$pre strace -f -c --seccomp-bpf -o /tmp/pvread-jvm.strace \
		-e trace=clock_gettime,gettimeofday \
		"$jvm/jre/bin/java" -Xmx64m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-cp "$jvm" TimeLoop $((n / 10)) >/dev/null 2>&1
	st=$?
	sed 's/^/# strace -c: /' /tmp/pvread-jvm.strace
	calls=$(awk '$NF == "clock_gettime" || $NF == "gettimeofday" { s += $4 } END { print s + 0 }' /tmp/pvread-jvm.strace)
	echo "# jvm ($how): $calls clock system calls for $((n / 10)) + $((n / 10)) calls"
	if [ $how = libc ]; then
		check "jvm (libc): a clock system call per call (the problem pvread solves)" \
			[ $st -eq 0 -a "$calls" -ge $((n / 5)) ]
	else
		check "jvm (shim): clock system calls for at most 1 % of the calls" \
			[ $st -eq 0 -a "$calls" -le $((n / 500)) ]
	fi
done
if [ -n "$ms_libc" ] && [ -n "$ms_shim" ] && [ -n "$ns_libc" ] && [ -n "$ns_shim" ]; then
	echo "# jvm: currentTimeMillis $ms_libc -> $ms_shim per s ($(awk "BEGIN { printf \"%.1f\", $ms_shim / $ms_libc }")x), nanoTime $ns_libc -> $ns_shim per s ($(awk "BEGIN { printf \"%.1f\", $ns_shim / $ns_libc }")x)"
fi
check "rmmod" rmmod pvread
check_dmesg
pvread_done
