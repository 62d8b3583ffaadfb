#!/usr/bin/env bash
# images.sh builds the test cluster's images locally (no public registry is
# reachable) and pushes them to the registry on 127.0.0.1:5000:
#
#   strata/pause     the pod sandbox image (images/pause, static Go)
#   strata/busybox   busybox-static rootfs, for small test pods
#   strata/os-base   test OS base for simulated nodes: busybox plus
#                    /usr/lib/os-release, /etc, /usr/lib/systemd/system,
#                    labelled containers.bootc=1
#   strata/debian    debootstrap --variant=minbase bookworm
#   strata/builder   images/builder/Containerfile (Debian + buildah), built
#                    with the host's buildah
#
# Each image is rebuilt only when the hash of its inputs changed or the
# registry no longer has it (stamps in .infra/images/NAME.stamp; the
# registry's storage is .infra/registry), so a warm run takes a second.
# When no registry runs, one is started for the duration of the script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${STRATA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$infra/images
mkdir -p "$work" "$logs"

# buildah run as root writes /var/lib/containers/cache whatever --root says,
# and /etc/cni; remove what did not exist before.
cleanup_paths=()
for p in "${BUILDAH_HOST_PATHS[@]}"; do
	[[ -e $p ]] || cleanup_paths+=("$p")
done
own_registry=0
cleanup() {
	local p
	umount_under "$work" 2>/dev/null || true
	rm -rf "$work/tmp" "$work/rootfs" "$work/buildah"
	for p in "${cleanup_paths[@]}"; do rm -rf "$p"; done
	if ((own_registry)); then "$here/down.sh" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! registry_up; then
	[[ -f $journal ]] || own_registry=1
	start_registry
fi

hash() { sha256sum | cut -c1-16; }

# fresh NAME HASH: the registry holds NAME built from inputs HASH.
fresh() {
	local stamp=$work/$1.stamp h d
	[[ -f $stamp ]] || return 1
	read -r h d <"$stamp"
	[[ $h == "$2" && $(crane digest "$REGISTRY/strata/$1:latest" 2>/dev/null) == "$d" ]]
}
stamp() { printf '%s %s\n' "$2" "$(crane digest "$REGISTRY/strata/$1:latest")" >"$work/$1.stamp"; }

# push_rootfs NAME DIR [crane mutate flags]: DIR as a one-layer image.
push_rootfs() {
	local name=$1 dir=$2 ref=$REGISTRY/strata/$1:latest
	shift 2
	tar -C "$dir" --numeric-owner --sort=name --mtime=@0 -cf "$work/tmp/$name.tar" .
	crane append --oci-empty-base -f "$work/tmp/$name.tar" -t "$ref" >>"$logs/images.log" 2>&1
	crane mutate "$ref" --set-platform linux/amd64 "$@" -t "$ref" >>"$logs/images.log" 2>&1
	rm -f "$work/tmp/$name.tar"
}

# busybox_rootfs DIR: a merged-/usr busybox system.
busybox_rootfs() {
	local d=$1 a
	ldd /bin/busybox >/dev/null 2>&1 && die "/bin/busybox is not static; install busybox-static"
	mkdir -p "$d/usr/bin" "$d/etc" "$d/tmp" "$d/root" "$d/proc" "$d/sys" "$d/dev" "$d/run" "$d/var"
	chmod 1777 "$d/tmp"
	ln -s usr/bin "$d/bin"
	ln -s usr/bin "$d/sbin"
	cp /bin/busybox "$d/usr/bin/busybox"
	for a in $(/bin/busybox --list); do
		[[ $a == busybox ]] || ln -sf busybox "$d/usr/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$d/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
}

rm -rf "$work/tmp" "$work/rootfs"
mkdir -p "$work/tmp" "$work/rootfs"
export TMPDIR=$work/tmp

# --- pause
h=$( (cat "$root/images/pause/main.go" && go version) | hash)
if ! fresh pause "$h"; then
	log "building image strata/pause"
	mkdir -p "$work/rootfs/pause"
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/rootfs/pause/pause" ./images/pause)
	push_rootfs pause "$work/rootfs/pause" --entrypoint /pause
	stamp pause "$h"
fi

# --- busybox and the test OS base
bb=$( (sha256sum /bin/busybox && echo busybox-v1) | hash)
if ! fresh busybox "$bb"; then
	log "building image strata/busybox"
	busybox_rootfs "$work/rootfs/busybox"
	push_rootfs busybox "$work/rootfs/busybox" --cmd /bin/sh
	stamp busybox "$bb"
fi
h=$( (echo "$bb" && cat "$root/images/os-base/os-release" && echo os-base-v2) | hash)
if ! fresh os-base "$h"; then
	log "building image strata/os-base"
	d=$work/rootfs/os-base
	busybox_rootfs "$d"
	# The directories of an image-mode OS that configuration lands in.
	mkdir -p "$d/usr/lib/systemd/system" "$d/etc/systemd/system" "$d/usr/lib/bootc/kargs.d" \
		"$d/usr/share" "$d/usr/local/bin" "$d/usr/libexec" "$d/var/lib" "$d/var/log" "$d/var/tmp"
	chmod 1777 "$d/var/tmp"
	cp "$root/images/os-base/os-release" "$d/usr/lib/os-release"
	ln -s ../usr/lib/os-release "$d/etc/os-release"
	echo strata-test >"$d/etc/hostname"
	push_rootfs os-base "$d" --cmd /bin/sh --label containers.bootc=1 --label ostree.bootable=true
	stamp os-base "$h"
fi

# --- Debian
h=$(echo "$DEBIAN_SUITE minbase $DEBIAN_MIRROR debian-v1" | hash)
if ! fresh debian "$h"; then
	log "building image strata/debian ($DEBIAN_SUITE minbase, debootstrap)"
	d=$work/rootfs/debian
	if ! debootstrap --variant=minbase "$DEBIAN_SUITE" "$d" "$DEBIAN_MIRROR" >"$work/tmp/debootstrap.log" 2>&1; then
		tail -20 "$work/tmp/debootstrap.log" >&2
		die "debootstrap failed"
	fi
	umount_under "$d"
	rm -rf "$d"/var/cache/apt/archives/*.deb "$d"/var/lib/apt/lists/* "$d"/var/log/* "$d"/tmp/*
	push_rootfs debian "$d" --cmd /bin/bash
	rm -rf "$d"
	stamp debian "$h"
fi
# crane tags it as strata/debian:latest; the Containerfile names the suite.
crane tag "$REGISTRY/strata/debian:latest" "$DEBIAN_SUITE" >>"$logs/images.log" 2>&1

# --- builder
base=$REGISTRY/strata/debian@$(crane digest "$REGISTRY/strata/debian:latest")
h=$( (cat "$root/images/builder/Containerfile" && echo "$base builder-v1") | hash)
if ! fresh builder "$h"; then
	log "building image strata/builder (buildah, from $base)"
	ba=(buildah --root "$work/buildah/root" --runroot "$work/buildah/runroot" --storage-driver vfs)
	if ! "${ba[@]}" bud --isolation chroot --network host --tls-verify=false --timestamp 0 --build-arg "BASE=$base" \
		-f "$root/images/builder/Containerfile" -t "$REGISTRY/strata/builder:latest" \
		"$root/images/builder" >"$work/tmp/builder.log" 2>&1; then
		tail -30 "$work/tmp/builder.log" >&2
		die "building strata/builder failed"
	fi
	"${ba[@]}" push --tls-verify=false "$REGISTRY/strata/builder:latest" >/dev/null 2>&1
	stamp builder "$h"
fi
log "images ready in $REGISTRY: pause busybox os-base debian builder"
