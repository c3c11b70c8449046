#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The debug-kernel machines' suite (lockdep, page and slab poisoning,
# debug objects: see vm/debug/kernel.config): the module's own tests
# (pvread_kmod.sh), its
# load and unload racing a vCPU coming online (pvread_race.sh), then the
# module loaded and in use for the machine's end, which vm/init makes a
# reboot; with --poweroff the race alone, then a poweroff.  Both let go of
# every area from the reboot notifier.  Any report of the instruments,
# during the tests or the shutdown, is on the console, where vm/run's
# badness scan fails the machine.
# KTAP (pvread_lib.sh); exits 1 when any check failed.
# Usage: pvread_debug.sh [--poweroff] [MODULE]
end=reboot
[ "$1" = --poweroff ] && { end=poweroff; shift; }
mod=${1:-./pvread.ko}
. "$(dirname "$0")/pvread_lib.sh"

sys=/sys/class/misc/pvread
echo "# kernel $(uname -r); vCPUs online: $(grep -c ^processor /proc/cpuinfo); the machine ends with a $end, pvread.ko loaded"
# The instruments, as this kernel reports them (vm/debug/kernel.config).
check "lockdep is on (/proc/lockdep)" [ -r /proc/lockdep ]
check "freed pages unmapped (debug_pagealloc=on)" grep -qw debug_pagealloc=on /proc/cmdline
check "freed pages poisoned (page_poison=1)" grep -qw page_poison=1 /proc/cmdline
check "slab objects poisoned (SLUB_DEBUG_ON)" \
	sh -c '[ "$(cat /sys/kernel/slab/kmalloc-64/poison 2>/dev/null)" = 1 ]'
[ $end = reboot ] && pvread_sub pvread_kmod.sh sh "$pvread_dir/pvread_kmod.sh" "$mod"
pvread_sub pvread_race.sh sh "$pvread_dir/pvread_race.sh" "$mod"

pvread_leave_loaded "$mod"
pvread_wait_expected 30
pvread_state "before the $end"
# lockdep turns itself off at its first report, or at a lock it cannot
# track (seen: an on-stack lock with a static initialiser).
grep -E 'debug_locks|lock-classes|direct dependencies' /proc/lockdep_stats | sed 's/^ */# lockdep: /'
check "lockdep still on after the tests (debug_locks 1)" \
	grep -qE '^ *debug_locks: *1$' /proc/lockdep_stats
check_dmesg
[ "$end" = poweroff ] && : > /opt/pvread/.poweroff
pvread_done
