#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# pvread_badness.sh: of the kernel (and Xen) log lines on stdin, print those
# that say the kernel went wrong -- an oops, a BUG, a WARNING, a general
# protection fault, a call trace, a refcount_t saturation or underflow.
# The one pattern for every such check: the guest scripts' dmesg check
# (pvread_lib.sh), vm/run's scan of the console, domu.sh's of the domU's.
# "BUG" and "WARNING" only as the kernel prints them ("BUG: ...", "kernel
# BUG at ...", "WARNING: CPU: ..."), so that "DEBUG" is not one.
# Exits 0 whether or not it printed anything; 2 on a read error.
grep -aE 'Oops|(^|[^A-Za-z_])(BUG|WARNING)[: ]|general protection fault|Call Trace|refcount_t' ||
	[ $? -eq 1 ] || exit 2
