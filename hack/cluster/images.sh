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
# and Strata's own, from the working tree (static binaries, CGO_ENABLED=0
# -trimpath, version from git describe as in the Makefile):
#
#   strata/strata-controller   the controller on an empty base: the binary,
#                    /etc/passwd with the nonroot user 65532 it runs as,
#                    and the host's CA bundle for the registries it talks to
#   strata/strata-daemon       the daemon on strata/busybox (by digest),
#                    whose nsenter runs bootc and the reboot on the host
#   strata/daemon-sim-base     images/daemon-sim/Containerfile: Debian with
#                    ostree and chattr, for the bootc simulator
#   strata/strata-daemon-sim   the daemon and bootc-sim on daemon-sim-base
#                    (by digest): the test cluster's real node is no bootc
#                    host (config/testcluster)
#   strata/bootdisk-base       images/bootdisk/Containerfile: Debian with
#                    ostree and e2fsprogs
#   strata/strata-bootdisk     strata-bootdisk on bootdisk-base (by digest):
#                    the boot disk Jobs' image (builder/diskjob)
#
# Usage: images.sh [all|test]; "test" builds only the test cluster's own
# images (up.sh), "all" (the default, make images) Strata's too.
#
# Each image is rebuilt only when the hash of its inputs changed or the
# registry no longer has it (stamps in .infra/images/NAME.stamp; the
# registry's storage is .infra/registry), so a warm run takes a second.
# When no registry runs, one is started for the duration of the script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

what=${1:-all}
[[ $what == all || $what == test ]] || die "usage: images.sh [all|test]"

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
	local name=$1 dir=$2
	shift 2
	push_layer "$name" "" "$dir" "$@"
}

# push_layer NAME BASE DIR [crane mutate flags]: DIR as a layer on BASE
# (a reference by digest; empty: no base).
push_layer() {
	local name=$1 base=$2 dir=$3 ref=$REGISTRY/strata/$1:latest
	shift 3
	local from=(--oci-empty-base)
	[[ -n $base ]] && from=(--base "$base")
	tar -C "$dir" --numeric-owner --sort=name --mtime=@0 -cf "$work/tmp/$name.tar" .
	crane append "${from[@]}" -f "$work/tmp/$name.tar" -t "$ref" >>"$logs/images.log" 2>&1
	crane mutate "$ref" --set-platform linux/amd64 "$@" -t "$ref" >>"$logs/images.log" 2>&1
	rm -f "$work/tmp/$name.tar"
}

# digest_ref NAME: strata/NAME:latest in the registry, by digest.
digest_ref() { printf '%s/strata/%s@%s' "$REGISTRY" "$1" "$(crane digest "$REGISTRY/strata/$1:latest")"; }

# buildah_bud NAME BASE: images/NAME/Containerfile built FROM BASE with the
# host's buildah (its state under $work, chroot isolation), pushed as
# strata/IMAGE:latest.
buildah_bud() {
	local name=$1 base=$2 image=${3:-$1}
	local ba=(buildah --root "$work/buildah/root" --runroot "$work/buildah/runroot" --storage-driver vfs)
	if ! "${ba[@]}" bud --isolation chroot --network host --tls-verify=false --timestamp 0 --build-arg "BASE=$base" \
		-f "$root/images/$name/Containerfile" -t "$REGISTRY/strata/$image:latest" \
		"$root/images/$name" >"$work/tmp/$image.log" 2>&1; then
		tail -30 "$work/tmp/$image.log" >&2
		die "building strata/$image failed"
	fi
	"${ba[@]}" push --tls-verify=false "$REGISTRY/strata/$image:latest" >/dev/null 2>&1
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
base=$(digest_ref debian)
h=$( (cat "$root/images/builder/Containerfile" && echo "$base builder-v1") | hash)
if ! fresh builder "$h"; then
	log "building image strata/builder (buildah, from $base)"
	buildah_bud builder "$base"
	stamp builder "$h"
fi
if [[ $what == test ]]; then
	log "images ready in $REGISTRY: pause busybox os-base debian builder"
	exit 0
fi

# --- Strata's images, from the working tree
# The inputs of the binaries: every Go file that is not a test's (tracked
# or not, unless ignored) outside test/e2e/ and hack/, go.mod, go.sum, the Go
# toolchain and the version the binaries carry.
version=$(cd "$root" && git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
src=$( (cd "$root" && go version && echo "$version" && sha256sum go.mod go.sum &&
	git ls-files -z -co --exclude-standard -- '*.go' ':!:*_test.go' ':!:test/e2e/' ':!:hack/' |
	sort -z | xargs -0 sha256sum) | hash)
# gobuild DIR PACKAGE...: static binaries of the packages into DIR.
gobuild() {
	local dir=$1
	shift
	mkdir -p "$dir"
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -tags "$(cat "$root/hack/go-tags")" \
		-ldflags "-s -w -X github.com/strata-dev/strata/internal/version.Version=$version" -o "$dir/" "$@")
}

h=$( (echo "$src" && sha256sum /etc/ssl/certs/ca-certificates.crt && echo strata-controller-v1) | hash)
if ! fresh strata-controller "$h"; then
	log "building image strata/strata-controller ($version)"
	d=$work/rootfs/strata-controller
	gobuild "$d/usr/local/bin" ./cmd/strata-controller
	mkdir -p "$d/etc/ssl/certs" "$d/tmp"
	chmod 1777 "$d/tmp"
	printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$d/etc/passwd"
	printf 'root:x:0:\nnonroot:x:65532:\n' >"$d/etc/group"
	cp /etc/ssl/certs/ca-certificates.crt "$d/etc/ssl/certs/"
	push_rootfs strata-controller "$d" --entrypoint /usr/local/bin/strata-controller --user 65532:65532
	stamp strata-controller "$h"
fi

base=$(digest_ref busybox)
h=$( (echo "$src $base" && echo strata-daemon-v1) | hash)
if ! fresh strata-daemon "$h"; then
	log "building image strata/strata-daemon ($version, on $base)"
	/bin/busybox --list | grep -qx nsenter || die "/bin/busybox has no nsenter applet; the daemon runs bootc and the reboot through it"
	d=$work/rootfs/strata-daemon
	gobuild "$d/usr/local/bin" ./cmd/strata-daemon
	push_layer strata-daemon "$base" "$d" --entrypoint /usr/local/bin/strata-daemon --cmd ''
	stamp strata-daemon "$h"
fi

base=$(digest_ref debian)
h=$( (cat "$root/images/daemon-sim/Containerfile" && echo "$base daemon-sim-base-v1") | hash)
if ! fresh daemon-sim-base "$h"; then
	log "building image strata/daemon-sim-base (buildah, from $base)"
	buildah_bud daemon-sim "$base" daemon-sim-base
	stamp daemon-sim-base "$h"
fi
base=$(digest_ref daemon-sim-base)
h=$( (echo "$src $base" && echo strata-daemon-sim-v1) | hash)
if ! fresh strata-daemon-sim "$h"; then
	log "building image strata/strata-daemon-sim ($version, on $base)"
	d=$work/rootfs/strata-daemon-sim
	gobuild "$d/usr/local/bin" ./cmd/strata-daemon ./test/bootcsim/bootc-sim ./test/bootcsim/bootc-sim-sigpolicy
	push_layer strata-daemon-sim "$base" "$d" --entrypoint /usr/local/bin/strata-daemon --cmd ''
	stamp strata-daemon-sim "$h"
fi

base=$(digest_ref debian)
h=$( (cat "$root/images/bootdisk/Containerfile" && echo "$base bootdisk-base-v1") | hash)
if ! fresh bootdisk-base "$h"; then
	log "building image strata/bootdisk-base (buildah, from $base)"
	buildah_bud bootdisk "$base" bootdisk-base
	stamp bootdisk-base "$h"
fi
base=$(digest_ref bootdisk-base)
h=$( (echo "$src $base" && echo strata-bootdisk-v1) | hash)
if ! fresh strata-bootdisk "$h"; then
	log "building image strata/strata-bootdisk ($version, on $base)"
	d=$work/rootfs/strata-bootdisk
	gobuild "$d/usr/local/bin" ./cmd/strata-bootdisk
	push_layer strata-bootdisk "$base" "$d" --entrypoint /usr/local/bin/strata-bootdisk --cmd ''
	stamp strata-bootdisk "$h"
fi
log "images ready in $REGISTRY: pause busybox os-base debian builder strata-controller strata-daemon daemon-sim-base strata-daemon-sim bootdisk-base strata-bootdisk"
