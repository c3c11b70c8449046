#!/bin/sh
# vm/domu.sh — dom0 side of the domU machine (busybox sh, in the Xen test
# machine, from the payload vm/domu-payload builds; cwd /opt/pvread).
#
#   sh domu.sh [--type pv|pvh|hvm] [--mem MB] [--vcpus N] [--timeout SEC]
#              [--save-restore SEC [--tsc-khz KHZ]] [--migrate SEC]
#              [--tsc-mode MODE] [--extra WORD]...
#
# Brings up Debian's toolstack in the initramfs dom0 (drivers, xenfs,
# xenstored, xen-init-dom0, xenconsoled logging the guest's console to a
# file), starts the domU with xl, follows its console, prints the domU
# command's output (the lines between the domU's own PVREAD_VM_BEGIN/EXIT
# markers) and exits with the domU command's status. With --save-restore SEC
# the domU is saved (xl save) SEC seconds after its command started and
# restored from the file at once -- with --tsc-khz KHZ, as if on a host whose
# TSC runs at KHZ (xl-tsc-khz edits the image); with --migrate SEC it is migrated live to
# this same host (xl migrate, the receiving xl started by a pipe instead of
# ssh) SEC seconds after its command started. --tsc-mode sets xl's tsc_mode (default:
# xl's own, "default", which under QEMU TCG means Xen emulates the TSC for
# the domU: no invariant TSC); --extra appends a word to the domU kernel's
# command line. After the domU, Xen's TSC report (debug key
# s: mode, frequency, emulated rdtsc count) is printed as comments.
# --type hvm: an HVM domU, its devices emulated by Debian's QEMU in dom0
# (the payload's tools-hvm/, vm/domu-payload --hvm), booted through
# hvmloader and SeaBIOS straight into the same kernel and initrd (xl's
# direct kernel boot); its kernel prints on the emulated serial port
# (ttyS0, which QEMU writes to a file here) and on the Xen console hvc0,
# which is /dev/console, as in the PV and PVH domUs. Save/restore and
# migration are not tried with it.
# Exit 125 when the domU machinery failed (toolstack, xl create, domU never
# finished): never a pass. Its console log and Xen's messages are shown then.
# Lines of its own start with "# domu.sh:" so they never count as results.
#
# No `set -e`: every step is checked by hand, so the failure names the step.

here=$(pwd)
FAIL=125
TYPE=pv MEM=256 VCPUS=2 TIMEOUT=1500 SAVE_AT='' MIGRATE_AT='' TSC_MODE='' TSC_KHZ='' EXTRA=''
while [ $# -gt 0 ]; do
	case $1 in
	--type) TYPE=$2; shift 2 ;;
	--mem) MEM=$2; shift 2 ;;
	--vcpus) VCPUS=$2; shift 2 ;;
	--timeout) TIMEOUT=$2; shift 2 ;;
	--save-restore) SAVE_AT=$2; shift 2 ;;
	--migrate) MIGRATE_AT=$2; shift 2 ;;
	--tsc-khz) TSC_KHZ=$2; shift 2 ;;
	--tsc-mode) TSC_MODE=$2; shift 2 ;;
	--extra) EXTRA="$EXTRA $2"; shift 2 ;;
	*) echo "domu.sh: unknown argument $1" >&2; exit $FAIL ;;
	esac
done
case $TYPE in
pv | pvh) DMESG_LINES=30 ;;
# hvmloader's and SeaBIOS's lines too (vm/machines/xen417-domu-hvm-pti
# gives Xen guest_loglvl=all for them)
hvm) DMESG_LINES=80 ;;
*) echo "domu.sh: --type $TYPE: not pv, pvh or hvm" >&2; exit $FAIL ;;
esac

NAME=pvread-domu
XENBIN=/usr/lib/xen-4.17/bin
CONLOG=/var/log/xen/console/guest-$NAME.log
CONLOGS=$CONLOG		# every log the domU's console went to
# An HVM domU's serial port (ttyS0), written by QEMU.
SERLOG=/var/log/xen/serial-$NAME.log
SAVEFILE=/tmp/$NAME.save
nonce=$(cat "$here/domu/nonce")

say() { echo "# domu.sh: $*"; }
# elapsed: seconds since dom0 booted (busybox has no date +%N everywhere).
now() { cut -d. -f1 /proc/uptime; }

show_logs() {
	say "domU console ($CONLOG), last 60 lines:"
	tr -d '\r' <"$CONLOG" 2>/dev/null | tail -n 60 | sed 's/^/# domU console | /'
	if [ "$TYPE" = hvm ] && [ "$CONLOG" != "$SERLOG" ]; then
		say "domU serial console ($SERLOG), last 60 lines:"
		tr -d '\r' <"$SERLOG" 2>/dev/null | tail -n 60 | sed 's/^/# domU serial | /'
	fi
	# an HVM domU's firmware (hvmloader, SeaBIOS) prints to Xen's log
	say "xl dmesg, last $DMESG_LINES lines:"
	xl dmesg 2>&1 | tail -n "$DMESG_LINES" | sed 's/^/# xl dmesg | /'
	# a migrated domain's console and xl logs are under the names it
	# had meanwhile (NAME--incoming); the device model's log (HVM)
	for f in /var/log/xen/console/guest-"$NAME"--*.log \
		 /var/log/xen/xl-"$NAME"*.log /var/log/xen/qemu-dm-"$NAME"*.log \
		 /var/log/xen/xenstored.log; do
		[ -s "$f" ] || continue
		say "$f, last 20 lines:"
		tail -n 20 "$f" | sed 's/^/# | /'
	done
}
# domu_splats: every line of the domU's console, its whole life (boot,
# suite, shutdown) that pvread_badness.sh names, printed as "domU| LINE" so
# that vm/run's scan of dom0's console counts each of them as a splat of
# the machine's; how many, on a line of its own.
domu_splats() {
	# shellcheck disable=SC2086 # a list of paths without blanks
	bad=$(cat $CONLOGS 2>/dev/null | tr -d '\r' |
		grep -aE '^ *\[ *[0-9]+\.[0-9]+\]' |
		sh "$here/pvread_badness.sh")
	splats=$(printf '%s' "$bad" | grep -c '')
	[ "$splats" -eq 0 ] || printf '%s\n' "$bad" | sed 's/^/domU| /'
	say "the domU console shows $splats oops/BUG/WARNING/call trace lines"
}

fail() {
	say "FAIL: $*"
	show_logs
	domu_splats
	xl destroy $NAME >/dev/null 2>&1
	exit $FAIL
}

# ---- 1. the tools, where Debian's build expects them ----
# The tree uses the merged-/usr layout of the initramfs (/lib -> usr/lib).
cp -a "$here/tools/usr/." /usr/ || fail "cannot copy the tools into /usr"
if [ "$TYPE" = hvm ]; then
	# The device model and firmware, at the paths Debian's libxl looks
	# them up by; the payload's copy is dropped (dom0's memory).
	[ -d "$here/tools-hvm/usr" ] ||
		fail "no tools-hvm/ in the payload (vm/domu-payload --hvm; vm/setup-domu --hvm)"
	cp -a "$here/tools-hvm/usr/." /usr/ || fail "cannot copy the HVM tools into /usr"
	rm -rf "$here/tools-hvm"
fi
export PATH="$XENBIN:$PATH"
mkdir -p /etc/xen /var/lib/xen /var/lib/xenstored /var/run/xen /var/run/xenstored \
	/var/log/xen/console /var/lock /run/xen
# dom0 has no memory to give: vm/run set dom0_mem, the domU takes Xen's free
# memory. autoballoon off stops xl from trying to shrink dom0 first.
printf 'autoballoon="off"\n' >/etc/xen/xl.conf

# ---- 2. dom0 drivers: event channels, hypercalls, grants, xenfs ----
for m in xen-evtchn xen-privcmd xen-gntdev xen-gntalloc xenfs; do
	grep -q "^$(echo "$m" | tr - _) " /proc/modules && continue
	insmod /usr/lib/modules-domu/$m.ko || fail "insmod $m.ko"
done
grep -q ' /proc/xen ' /proc/mounts || mount -t xenfs xenfs /proc/xen ||
	fail "mount xenfs on /proc/xen"

# ---- 3. xenstored, dom0's entries, xenconsoled ----
t0=$(now)
xenstored --pid-file=/var/run/xenstored.pid >/var/log/xen/xenstored.log 2>&1 ||
	fail "xenstored did not start"
# xen-init-dom0 needs a running xenstored: retry while it comes up.
i=0
until xen-init-dom0 >/var/log/xen/xen-init-dom0.log 2>&1; do
	i=$((i + 1))
	[ $i -lt 30 ] || { cat /var/log/xen/xen-init-dom0.log; fail "xen-init-dom0 failed 30 times"; }
	sleep 1
done
# --log=guest: every guest's console goes to guest-NAME.log, which is how
# the domU's output reaches us.
xenconsoled --pid-file=/var/run/xenconsoled.pid --log=guest \
	--log-dir=/var/log/xen/console || fail "xenconsoled did not start"
say "toolstack up in $(($(now) - t0)) s; Xen: $(xl info 2>/dev/null | sed -n 's/^xen_version *: //p'), free memory $(xl info 2>/dev/null | sed -n 's/^free_memory *: //p') MB"

# ---- 4. the domU ----
# Same kernel command line as vm/run gives its machines; on_reboot destroy:
# vm/init ends with reboot -f, which must end the domain.
CONSOLE=console=hvc0
if [ "$TYPE" = hvm ]; then
	# The kernel's messages on the serial port as well, from its first
	# (earlyprintk) on: a boot that never reaches hvc0 shows there. The
	# last console= is /dev/console: hvc0, xenconsoled's log, as for PV
	# and PVH. nokaslr: the decompressor that the BIOS boot runs would
	# randomise the text, which PV and PVH boots never do, and the
	# emulator-fault check (vm/matrix.sh) reads the domU's instructions
	# at the image's own addresses.
	CONSOLE="earlyprintk=ttyS0 console=ttyS0 console=hvc0 nokaslr"
fi
cat >/etc/xen/$NAME.cfg <<EOF
name = "$NAME"
type = "$TYPE"
kernel = "$here/domu/vmlinuz"
ramdisk = "$here/domu/initrd.img"
extra = "$CONSOLE panic=-1 loglevel=5 rdinit=/init$EXTRA"
memory = $MEM
vcpus = $VCPUS
on_poweroff = "destroy"
on_reboot = "destroy"
on_crash = "destroy"
EOF
[ -z "$TSC_MODE" ] || echo "tsc_mode = \"$TSC_MODE\"" >>/etc/xen/$NAME.cfg
if [ "$TYPE" = hvm ]; then
	# xl's direct kernel boot of an HVM guest (xl.cfg(5), qemu-xen only):
	# libxl gives QEMU -kernel, -initrd and -append (extra), QEMU hands
	# them over fw_cfg with its linuxboot option ROM, which SeaBIOS runs.
	# hvmloader and SeaBIOS are libxl's defaults: firmware "bios" (not
	# set) is /usr/lib/xen-4.17/boot/hvmloader with
	# /usr/share/seabios/bios-256k.bin. The serial port goes to a file
	# (a pty, xl's usual, needs a reader: xenconsoled serves hvc0 only).
	# No display: VNC would listen on 127.0.0.1, which this dom0 has not
	# configured. No disk, no network, no keyboard.
	cat >>/etc/xen/$NAME.cfg <<EOF
device_model_version = "qemu-xen"
device_model_override = "/usr/libexec/xen-qemu-system-i386"
serial = "file:$SERLOG"
vnc = 0
sdl = 0
vga = "none"
vkb_device = 0
EOF
fi
say "xl create ($TYPE, $MEM MB, $VCPUS vCPUs, tsc_mode ${TSC_MODE:-default}, extra${EXTRA:- none}); domU runs: $(cat "$here/domu/command")"
t0=$(now)
xl -v create /etc/xen/$NAME.cfg >/var/log/xen/xl-$NAME.log 2>&1 ||
	fail "xl create failed: $(grep -iE 'error|fail' /var/log/xen/xl-$NAME.log | tail -n 3 | tr '\n' ' ')"
say "domain $(xl domid $NAME 2>/dev/null) created in $(($(now) - t0)) s"

# ---- 5. follow its console until the exit marker ----
# Only complete lines are printed (wc -l counts newlines), each once; the
# lines between the markers are the command's output.
shown=0 begin="" exit_line="" saved=no migrated=no

# Print $CONLOG's lines after the first $shown; true at the exit marker.
drain() {
	lines=$(wc -l <"$CONLOG" 2>/dev/null || echo 0)
	[ "$lines" -gt "$shown" ] || return 1
	tr -d '\r' <"$CONLOG" | sed -n "$((shown + 1)),${lines}p" >/tmp/domu-new
	if grep -q "PVREAD_VM_EXIT=[0-9]* $nonce" /tmp/domu-new; then
		# the command's last line may lack a newline: keep what precedes
		sed -n "/PVREAD_VM_EXIT=[0-9]* $nonce/q;p" /tmp/domu-new
		exit_line=$(grep -o "PVREAD_VM_EXIT=[0-9]* $nonce" /tmp/domu-new | head -n1)
		pre=$(grep "PVREAD_VM_EXIT=[0-9]* $nonce" /tmp/domu-new | head -n1 | sed 's/PVREAD_VM_EXIT=.*//')
		[ -z "$pre" ] || echo "$pre"
		return 0
	fi
	cat /tmp/domu-new
	shown=$lines
	return 1
}

deadline=$(($(now) + TIMEOUT))
while :; do
	if [ -z "$begin" ]; then
		# An HVM domU whose hvc0 never came up has /dev/console on its
		# serial port: its command's output is followed there then.
		if [ "$TYPE" = hvm ] && [ "$CONLOG" != "$SERLOG" ] &&
		   ! grep -q "PVREAD_VM_BEGIN $nonce" "$CONLOG" 2>/dev/null &&
		   grep -q "PVREAD_VM_BEGIN $nonce" "$SERLOG" 2>/dev/null; then
			say "the domU's /dev/console is its serial port, not hvc0: following $SERLOG"
			CONLOG=$SERLOG CONLOGS=$SERLOG
		fi
		begin=$(tr -d '\r' <"$CONLOG" 2>/dev/null | grep -n "PVREAD_VM_BEGIN $nonce" | head -n1 | cut -d: -f1)
		if [ -n "$begin" ]; then
			say "domU booted in $(($(now) - t0)) s: $(tr -d '\r' <"$CONLOG" | grep -a -m1 PVREAD_VM_INFO | sed 's/.*PVREAD_VM_INFO //')"
			shown=$begin
			cmd_t0=$(now)
			# How Xen gives the domU its TSC (native or emulated):
			# the key to reading the domU's figures. Asked now, while
			# the domain surely exists.
			xl debug-keys s >/dev/null 2>&1 &&
				xl dmesg | tr -d '\r' | grep -E 'TSC|dom[1-9][0-9]*(\(hvm\))?:' |
				tail -n 4 | sed 's/^/# domu.sh: xen: /'
		fi
	fi
	[ -n "$begin" ] && drain && break
	if [ -n "$SAVE_AT" ] && [ -n "$begin" ] && [ $saved = no ] &&
	   [ $(($(now) - cmd_t0)) -ge "$SAVE_AT" ]; then
		saved=yes
		# the domain's TSC as Xen has it: mode, khz
		domid=$(xl domid $NAME)
		xl debug-keys s >/dev/null 2>&1
		tscinfo=$(xl dmesg | tr -d '\r' |
			grep -oE "dom${domid}(\(hvm\))?: mode=[0-9]+,ofs=[^,]*,khz=[0-9]+" | tail -n 1)
		say "xl save $NAME $SAVEFILE (xen: ${tscinfo:-no TSC report})"
		t1=$(now)
		xl save $NAME $SAVEFILE >/var/log/xen/xl-save.log 2>&1 ||
			{ cat /var/log/xen/xl-save.log; fail "xl save failed"; }
		say "saved in $(($(now) - t1)) s ($(du -k $SAVEFILE | cut -f1) KiB); xl restore"
		if [ -n "$TSC_KHZ" ]; then
			[ -n "$tscinfo" ] ||
				fail "no TSC frequency from xl debug-keys s for domain $domid"
			"$here/xl-tsc-khz" $SAVEFILE "${tscinfo##*khz=}" "$TSC_KHZ" \
				>/tmp/xl-tsc-khz.out 2>&1
			rc=$?
			sed 's/^/# domu.sh: /' /tmp/xl-tsc-khz.out
			[ $rc -eq 0 ] || fail "xl-tsc-khz could not set $TSC_KHZ kHz"
		fi
		t1=$(now)
		xl restore $SAVEFILE >/var/log/xen/xl-restore.log 2>&1 ||
			{ cat /var/log/xen/xl-restore.log; fail "xl restore failed"; }
		domid=$(xl domid $NAME 2>/dev/null)
		say "restored in $(($(now) - t1)) s as domain $domid"
		xl debug-keys s >/dev/null 2>&1 &&
			xl dmesg | tr -d '\r' | grep -oE "dom${domid}(\(hvm\))?: mode=.*" | tail -n 1 |
			sed 's/^/# domu.sh: xen: /'
		rm -f $SAVEFILE
	fi
	if [ -n "$MIGRATE_AT" ] && [ -n "$begin" ] && [ $migrated = no ] &&
	   [ $(($(now) - cmd_t0)) -ge "$MIGRATE_AT" ]; then
		migrated=yes
		# -s "": xl runs the "host" string itself in place of
		# "ssh host xl migrate-receive"; that receiver stays in the
		# background to see the domain's end, as xl create's does.
		say "xl migrate $NAME to this host (domain $(xl domid $NAME 2>/dev/null))"
		t1=$(now)
		xl migrate -s "" $NAME "xl migrate-receive" \
			>/var/log/xen/xl-migrate.log 2>&1 ||
			{ cat /var/log/xen/xl-migrate.log; fail "xl migrate failed"; }
		say "migrated in $(($(now) - t1)) s, now domain $(xl domid $NAME 2>/dev/null)"
		# xenconsoled names the log after the domain's name at its
		# creation: the receiving end was NAME--incoming then.  What
		# the domain printed before it left comes first.
		drain && break
		CONLOG=/var/log/xen/console/guest-$NAME--incoming.log
		CONLOGS="$CONLOGS $CONLOG"
		shown=0
		grep -iE 'migration|transfer|error' /var/log/xen/xl-migrate.log |
			tail -n 4 | sed 's/^/# domu.sh: xl: /'
	fi
	if ! xl domid $NAME >/dev/null 2>&1; then
		# gone: one more look at the log in case the marker came last
		sleep 1
		tr -d '\r' <"$CONLOG" | grep -q "PVREAD_VM_EXIT=[0-9]* $nonce" && continue
		if [ -n "$begin" ]; then
			fail "the domU died before its command finished"
		else
			fail "the domU died before its command started (boot failure)"
		fi
	fi
	if [ "$(now)" -ge $deadline ]; then
		if [ -n "$begin" ]; then
			fail "timeout after $TIMEOUT s: the domU's command did not finish"
		else
			fail "timeout after $TIMEOUT s: the domU did not finish booting"
		fi
	fi
	sleep 2
done
rc=${exit_line#PVREAD_VM_EXIT=}
rc=${rc%% *}
say "domU command finished: exit $rc after $(($(now) - cmd_t0)) s"

# ---- 6. the domain must go away by itself (vm/init reboots it) ----
i=0
while xl domid $NAME >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -ge 30 ]; then
		say "FAIL: the domU did not shut down within 30 s of its command's end"
		show_logs
		domu_splats
		xl destroy $NAME
		exit $FAIL
	fi
	sleep 1
done
# Kernel splats in the domU, its shutdown included: vm/run counts them.
domu_splats
say "domU gone; exit $rc"
exit "$rc"
