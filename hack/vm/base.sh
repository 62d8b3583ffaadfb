#!/usr/bin/env bash
# base.sh builds the bootable Debian 12 base of the VM tier (issue 22) and
# pushes it to the test registry:
#
#   strata/vm-os:bookworm    the slow part, cached: mmdebstrap of Debian 12
#                            (kernel, systemd, ostree, ostree-boot, dracut)
#                            with a slim dracut initramfs holding ostree's
#                            module, in bootc's layout, one layer
#   strata/vm-base:bookworm  vm-os plus a small top layer rebuilt from the
#                            working tree on every run: the guest's bootc
#                            (test/vmbootc/bootc), the relays to the host's
#                            API server and registry, the config drive's
#                            mount, strata-daemon.service, the test markers
#
# and the bootloader the harness boots every disk with:
#
#   .infra/vm/grub.lnx       GRUB built as a QEMU -kernel image: it reads
#                            ostree's /boot/loader/syslinux.cfg from the
#                            disk on every reset (REAL-BOOT.md)
#
# bootc's layout as a bootc image has it: kernel and initramfs under
# /usr/lib/modules/<version>/ (vmlinuz, initramfs.img), an empty /boot,
# /home, /root, /opt, /srv, /mnt and /usr/local as links into /var (created
# by tmpfiles at boot), /ostree -> sysroot/ostree, an empty /var, labels
# containers.bootc=1 and ostree.bootable=true. The image keeps its
# configuration in /etc, as bootc images do (bootc container lint rejects a
# /usr/etc): moving it to /usr/etc is the import's job (ostreeimage), as it
# is ostree-ext's.
#
# Slim, so that commits, disks and artifacts stay small: no recommends, no
# documentation, man pages or locales, only the kernel modules a virtio
# QEMU guest needs (and what they depend on), an initramfs with only the
# dracut modules the boot needs.
#
# The slow part (hack/vm/os.sh; 2-3 minutes cold) is rebuilt only when its
# inputs change (os.sh, the suite, the mirror) or the registry no longer has
# it: stamps in .infra/vm/NAME.stamp, as hack/cluster/images.sh does. A warm
# run builds and pushes only the top layer (seconds). When no registry runs,
# one is started for the duration of the script.
#
# Usage: base.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../cluster/lib.sh
source "$here/../cluster/lib.sh"

SUITE=bookworm
MIRROR=${STRATA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$infra/vm
mkdir -p "$work" "$logs"

# What this script needs on the host; CI starts on a fresh machine.
need=()
for p in mmdebstrap:mmdebstrap grub-mkimage:grub-common /usr/lib/grub/i386-pc/lnxboot.img:grub-pc-bin \
	qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils ostree:ostree mkfs.ext4:e2fsprogs debugfs:e2fsprogs; do
	c=${p%%:*}
	if [[ $c == /* ]]; then [[ -e $c ]] && continue; else command -v "$c" >/dev/null && continue; fi
	need+=("${p#*:}")
done
if ((${#need[@]})); then
	log "installing ${need[*]}"
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" ||
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"; }; } \
		>"$logs/vm-apt.log" 2>&1 || { tail -20 "$logs/vm-apt.log" >&2; die "apt-get install ${need[*]} failed"; }
fi

own_registry=0
cleanup() {
	rm -rf "$work/tmp"
	if ((own_registry)); then "$here/../cluster/down.sh" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if ! registry_up; then
	[[ -f $journal ]] || own_registry=1
	start_registry
fi

hash() { sha256sum | cut -c1-16; }
# fresh NAME HASH: the registry holds strata/NAME:bookworm built from HASH.
fresh() {
	local stamp=$work/$1.stamp h d
	[[ -f $stamp ]] || return 1
	read -r h d <"$stamp"
	[[ $h == "$2" && $(crane digest "$REGISTRY/strata/$1:$SUITE" 2>/dev/null) == "$d" ]]
}
stamp() { printf '%s %s\n' "$2" "$(crane digest "$REGISTRY/strata/$1:$SUITE")" >"$work/$1.stamp"; }

rm -rf "$work/tmp"
mkdir -p "$work/tmp"
export TMPDIR=$work/tmp


# --- GRUB as a -kernel image. Normal mode on the serial console, the whole
# disk as an unpartitioned ext4 (hd0), ostree's syslinux.cfg translated by
# syslinux_source; it defines no default action, so boot its first entry
# (ostree writes the default deployment first).
grubcfg='serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
set timeout=0
set root=(hd0)
syslinux_source /boot/loader/syslinux.cfg
boot
'
grubmods="memdisk tar biosdisk ext2 linux16 linux normal serial terminal echo test true configfile syslinuxcfg"
h=$( (printf '%s' "$grubcfg" && echo "$grubmods" && dpkg-query -W grub-pc-bin && echo grub-v1) | hash)
if [[ ! -f $work/grub.lnx || $(cat "$work/grub.stamp" 2>/dev/null) != "$h" ]]; then
	log "building the GRUB -kernel image"
	g=$work/tmp/grub
	mkdir -p "$g/memdisk/boot/grub"
	printf '%s' "$grubcfg" >"$g/memdisk/boot/grub/grub.cfg"
	tar -C "$g/memdisk" -cf "$g/memdisk.tar" boot
	# shellcheck disable=SC2086
	grub-mkimage -O i386-pc -o "$g/core.img" -m "$g/memdisk.tar" -p '(memdisk)/boot/grub' $grubmods
	cat /usr/lib/grub/i386-pc/lnxboot.img "$g/core.img" >"$work/grub.lnx.new"
	mv "$work/grub.lnx.new" "$work/grub.lnx"
	echo "$h" >"$work/grub.stamp"
fi

# --- the slow part: strata/vm-os
h=$( (cat "$here/os.sh" && echo "$SUITE $MIRROR vm-os-v1") | hash)
if ! fresh vm-os "$h"; then
	log "building image strata/vm-os:$SUITE (mmdebstrap, a few minutes)"
	start=$(date +%s)
	r=$work/tmp/rootfs
	"$here/os.sh" "$r" "$SUITE" "$MIRROR" >"$logs/vm-mmdebstrap.log" 2>&1 ||
		{ tail -30 "$logs/vm-mmdebstrap.log" >&2; die "building the root failed; see $logs/vm-mmdebstrap.log"; }
	log "root built in $(($(date +%s) - start)) s"

	tar -C "$r" --numeric-owner --xattrs --sort=name --mtime=@0 -cf "$work/tmp/vm-os.tar" .
	kver=$(ls "$r/usr/lib/modules")
	log "root: $(du -sh --apparent-size "$r" | cut -f1), kernel $kver, initramfs $(du -h "$r/usr/lib/modules/$kver/initramfs.img" | cut -f1)"
	rm -rf "$r"
	ref=$REGISTRY/strata/vm-os:$SUITE
	crane append --oci-empty-base -f "$work/tmp/vm-os.tar" -t "$ref" >>"$logs/vm-images.log" 2>&1
	crane mutate "$ref" --set-platform linux/amd64 --label containers.bootc=1 --label ostree.bootable=true \
		--label "ostree.linux=$kver" --cmd /bin/bash -t "$ref" >>"$logs/vm-images.log" 2>&1
	rm -f "$work/tmp/vm-os.tar"
	stamp vm-os "$h"
	log "strata/vm-os:$SUITE built in $(($(date +%s) - start)) s"
fi

# --- the top layer from the working tree: strata/vm-base
t=$work/tmp/top
sd=$t/usr/lib/systemd/system
mkdir -p "$sd/sockets.target.wants" "$sd/multi-user.target.wants" "$sd/run-configdrive.mount.wants" "$t/usr/libexec/strata" "$t/usr/bin"

# The guest's bootc: a small program of ours (test/vmbootc/bootc, issue 22)
# doing what bootc does with Debian's ostree, built from the working tree.
(cd "$root" && CGO_ENABLED=0 go build -trimpath -tags "$(cat "$root/hack/go-tags")" -ldflags "-s -w" \
	-o "$t/usr/bin/bootc" ./test/vmbootc/bootc)

# Relays: the guest reaches the API server and the registry at the very
# addresses the host uses (the node's kubeconfig and the image references
# name 127.0.0.1), through the guestfwd address of QEMU's user network,
# behind which the harness's relay reaches the host's loopback.
relay() {
	local name=$1 port=$2
	cat >"$sd/strata-relay-$name.socket" <<EOF
[Unit]
Description=127.0.0.1:$port relayed to the host's $name

[Socket]
ListenStream=127.0.0.1:$port

[Install]
WantedBy=sockets.target
EOF
	cat >"$sd/strata-relay-$name.service" <<EOF
[Unit]
Description=127.0.0.1:$port relayed to the host's $name (10.0.2.100:$port)
Requires=strata-relay-$name.socket
After=strata-relay-$name.socket network.target

[Service]
ExecStart=/lib/systemd/systemd-socket-proxyd 10.0.2.100:$port
EOF
	ln -s ../strata-relay-$name.socket "$sd/sockets.target.wants/"
}
relay apiserver "$APISERVER_PORT"
relay registry "${REGISTRY##*:}"

# The config drive (the second virtio disk, written by test/vm): the node's
# name (strata.env), its kubeconfig, the strata-daemon binary of the working
# tree, and an optional probe the marker runs. It is mounted when the disk
# appears and the daemon started when it is mounted: a VM without a drive
# boots without waiting for one.
cat >"$sd/run-configdrive.mount" <<'EOF'
[Unit]
Description=The test harness's config drive

[Mount]
What=/dev/vdb
Where=/run/configdrive
Type=ext4
Options=ro,noload
EOF
# udev pulls the mount in when the disk appears (a .wants directory of a
# device unit is not read).
mkdir -p "$t/usr/lib/udev/rules.d"
cat >"$t/usr/lib/udev/rules.d/90-strata-configdrive.rules" <<'EOF'
KERNEL=="vdb", SUBSYSTEM=="block", TAG+="systemd", ENV{SYSTEMD_WANTS}+="run-configdrive.mount"
EOF

cat >"$sd/strata-daemon.service" <<EOF
[Unit]
Description=Strata's node daemon (from the config drive)
Requires=run-configdrive.mount
After=run-configdrive.mount network.target strata-relay-apiserver.socket strata-relay-registry.socket

[Service]
EnvironmentFile=/run/configdrive/strata.env
Environment=KUBECONFIG=/run/configdrive/kubeconfig
ExecStart=/run/configdrive/strata-daemon --bootc-command bootc --reboot-command "systemctl reboot" --systemctl-command systemctl --insecure-registry $REGISTRY
Restart=always
RestartSec=2
# Also on the console, which the harness keeps: the tests cannot log in.
StandardOutput=journal+console
StandardError=journal+console
EOF
ln -s ../strata-daemon.service "$sd/run-configdrive.mount.wants/"

# The marker: one line on the second serial port (the first is the
# console, whose getty would swallow it) when multi-user is reached, then
# the config drive's probe, if any, each of its lines prefixed.
cat >"$t/usr/libexec/strata/vm-marker" <<'EOF'
#!/bin/sh
# vm-marker NAME: report NAME to the test harness on /dev/ttyS1.
dep=$(ostree admin status 2>/dev/null | sed -n 's/^\* [^ ]* \([0-9a-f]*\.[0-9]*\).*/\1/p')
probe=no
[ -x /run/configdrive/probe ] && probe=yes
{
	printf 'STRATA-MARKER %s boot_id=%s deployment=%s probe=%s\n' "$1" "$(cat /proc/sys/kernel/random/boot_id)" "$dep" "$probe"
	if [ $probe = yes ]; then
		/run/configdrive/probe 2>&1 | sed 's/^/STRATA-PROBE /'
		echo "STRATA-PROBE-END $(cat /proc/sys/kernel/random/boot_id)"
	fi
} >/dev/ttyS1
EOF
chmod 755 "$t/usr/libexec/strata/vm-marker"
cat >"$sd/strata-marker.service" <<'EOF'
[Unit]
Description=Tell the test harness that multi-user is reached
After=multi-user.target run-configdrive.mount

[Service]
Type=oneshot
ExecStart=/usr/libexec/strata/vm-marker multi-user

[Install]
WantedBy=multi-user.target
EOF
ln -s ../strata-marker.service "$sd/multi-user.target.wants/"

base=$REGISTRY/strata/vm-os@$(crane digest "$REGISTRY/strata/vm-os:$SUITE")
ref=$REGISTRY/strata/vm-base:$SUITE
tar -C "$t" --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -cf "$work/tmp/top.tar" .
crane append --base "$base" -f "$work/tmp/top.tar" -t "$ref" >>"$logs/vm-images.log" 2>&1
crane mutate "$ref" --set-platform linux/amd64 -t "$ref" >>"$logs/vm-images.log" 2>&1
log "image ready: $ref@$(crane digest "$ref")"
