#!/usr/bin/env bash
# os.sh builds the root of the VM tier's bootable Debian base (the slow,
# cached part of hack/vm/base.sh, which hashes this file): mmdebstrap of
# the suite with the kernel, systemd, ostree, ostree-boot and dracut, cut
# down to what a virtio QEMU guest needs, in bootc's layout (see base.sh).
#
# Usage: os.sh ROOT SUITE MIRROR    (os.sh --customize ROOT is its own
#                                    mmdebstrap customize hook)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf '%s vm-os: %s\n' "$(date +%T)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# Kernel modules kept (with what they depend on): the virtio devices QEMU
# gives the guest (disk, network, entropy), ext4, and autofs4, which systemd
# loads at start.
KEEP_MODULES="virtio_pci virtio_blk virtio_net virtio_rng ext4 crc32c_generic crc32c_intel autofs4"
# The initramfs: what mounting an ext4 /dev/vda and ostree-prepare-root need.
DRACUT_MODULES="base systemd systemd-initrd dracut-systemd ostree rootfs-block kernel-modules udev-rules fs-lib shutdown"
DRACUT_DRIVERS="virtio_pci virtio_blk ext4 crc32c_generic"
PACKAGES="systemd,systemd-sysv,udev,dbus,linux-image-amd64,dracut,ostree,ostree-boot"

# customize ROOT: the root as bootc's layout and a small guest want it; run
# by mmdebstrap as its customize hook (os.sh --customize ROOT), so that the
# chroot has /proc, /sys and /dev for depmod and dracut.
customize() {
	r=$1
	kver=$(ls "$r/usr/lib/modules")
	[[ $(wc -w <<<"$kver") == 1 ]] || die "expected one kernel in the root, found: $kver"
	m=$r/usr/lib/modules/$kver

	# Only the kept modules and their dependencies (modules.dep is
	# "path: dep dep ..."), then the module indexes again.
	keep=$(mktemp)
	: >"$keep"
	want=""
	for n in $KEEP_MODULES; do
		p=$(awk -F: -v n="$n" '{ b=$1; sub(/.*\//, "", b); sub(/\.ko.*/, "", b); gsub(/-/, "_", b) } b==n { print $1 }' "$m/modules.dep")
		if [[ -z $p ]]; then
			grep -q "/$n.ko" "$m/modules.builtin" || die "kernel module $n is neither a module nor built in"
			continue
		fi
		want+=" $p"
	done
	while [[ -n ${want// /} ]]; do
		next=""
		for p in $want; do
			grep -qxF "$p" "$keep" && continue
			echo "$p" >>"$keep"
			next+=" $(awk -F': *' -v p="$p" '$1==p { print $2 }' "$m/modules.dep")"
		done
		want=$next
	done
	(cd "$m" && find kernel -name '*.ko*' | grep -vxF -f "$keep" | xargs -r rm -f && find kernel -type d -empty -delete)
	rm -f "$keep"
	chroot "$r" depmod "$kver"

	# The initramfs again, from the pruned modules, where bootc wants it;
	# the kernel beside it.
	chroot "$r" dracut --force --no-hostonly --kver "$kver" "/usr/lib/modules/$kver/initramfs.img" ||
		die "dracut failed"
	mv "$r/boot/vmlinuz-$kver" "$m/vmlinuz"
	rm -rf "${r:?}/boot" && mkdir "$r/boot"

	# The system: DHCP on the one network card (systemd-networkd), no
	# timers that would fetch from the network, an empty machine-id (a new
	# one per boot: every VM is a new machine).
	mkdir -p "$r/etc/systemd/network"
	printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n' >"$r/etc/systemd/network/20-wired.network"
	chroot "$r" systemctl enable systemd-networkd.service >/dev/null 2>&1
	for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
		chroot "$r" systemctl mask "$u" >/dev/null 2>&1 || true
	done
	: >"$r/etc/machine-id"
	echo strata-vm >"$r/etc/hostname"

	# bootc's layout: the writable places are links into /var, created at
	# boot; /var itself starts empty in every deployment's stateroot.
	for d in home opt srv mnt; do rm -rf "${r:?}/$d" && ln -s "var/$d" "$r/$d"; done
	rm -rf "${r:?}/root" && ln -s var/roothome "$r/root"
	rm -rf "${r:?}/usr/local" && ln -s ../var/usrlocal "$r/usr/local"
	mkdir -p "$r/sysroot" && ln -s sysroot/ostree "$r/ostree"
	cat >"$r/usr/lib/tmpfiles.d/strata-ostree.conf" <<-'EOF'
	# The targets of the links bootc's layout makes into /var (image-mode
	# systems start with an empty /var).
	d /var/home 0755 root root -
	d /var/roothome 0700 root root -
	d /var/opt 0755 root root -
	d /var/srv 0755 root root -
	d /var/mnt 0755 root root -
	d /var/usrlocal 0755 root root -
	d /var/usrlocal/bin 0755 root root -
	d /var/usrlocal/sbin 0755 root root -
	EOF
}

if [[ ${1:-} == --customize ]]; then
	customize "$2"
	exit 0
fi

[[ $# == 3 ]] || die "usage: os.sh ROOT SUITE MIRROR"
r=$1 suite=$2 mirror=$3
excl=()
for d in man doc info locale i18n lintian linda bug-reports; do
	excl+=(--dpkgopt="path-exclude=/usr/share/$d/*")
done
# The dracut configuration is in place before the kernel's package runs
# dracut, so that run is already the slim one.
dracutconf="hostonly=\"no\"
dracutmodules=\"$DRACUT_MODULES\"
drivers=\"$DRACUT_DRIVERS\"
"
mmdebstrap --variant=minbase --include="$PACKAGES" \
	--aptopt='APT::Install-Recommends "false"' "${excl[@]}" \
	--essential-hook="mkdir -p \"\$1/etc/dracut.conf.d\" && printf '%s' '$dracutconf' >\"\$1/etc/dracut.conf.d/10-strata-vm.conf\"" \
	--customize-hook="\"$here/os.sh\" --customize \"\$1\"" \
	"$suite" "$r" "$mirror"
rm -rf "${r:?}"/var/* "${r:?}"/tmp/* "$r/dev"/* "$r/proc"/* "$r/sys"/* "$r/run"/*
