#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# pvread_badness.sh: of the kernel (and Xen) log lines on stdin, print those
# that say the kernel or the hypervisor went wrong.  The one pattern for
# every such check: the guest scripts' dmesg check (pvread_lib.sh), vm/run's
# scan of the console, domu.sh's of the domU's, vm/check's of a lost boot.
#   Linux: an oops, "BUG: ..." or "kernel BUG at", "WARNING: CPU: ...", a
#     general protection fault, a call trace (in any case), a refcount_t
#     saturation or underflow, an RCU stall (with or without a trace), a
#     hung task, a UBSAN report, a panic.
#   Xen: "Xen WARN at", "Xen BUG at", "Xen call trace", a fatal trap, a
#     panic ("Panic on CPU"), a failed assertion.
# "BUG" and "WARNING" only as the kernels print them, so that "DEBUG" is not
# one; Xen's lowercase boot notes ("Warning: ...") are not either.
# Exits 0 whether or not it printed anything; 2 on a read error.
grep -aE 'Oops|(^|[^A-Za-z_])(BUG|WARNING)[: ]|general protection fault|[Cc][Aa][Ll][Ll] [Tt][Rr][Aa][Cc][Ee]|refcount_t|detected stalls? on CPUs|self-detected stall|rcu_.* kthread starved|blocked for more than [0-9]+ seconds|UBSAN:|Kernel panic|Xen (WARN|BUG) at|FATAL TRAP|Panic on CPU|Assertion .* failed' ||
	[ $? -eq 1 ] || exit 2
