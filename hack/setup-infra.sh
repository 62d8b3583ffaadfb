#!/usr/bin/env bash
# setup-infra.sh builds and caches, under .infra/ (git-ignored), every
# external binary Strata's tests run: Kubernetes components and etcd from
# source through the Go module proxy, the distribution registry, crane (and
# for the cluster kwok) with go install, and buildah, skopeo and ostree (and
# for the cluster containerd, runc and the CNI plugins) from Debian.
#
# Nothing is downloaded except Go modules and Debian packages. When a binary
# is already present and its stamp matches the pinned version it is left
# alone, so a warm run takes seconds.
#
# Usage: hack/setup-infra.sh [envtest|cluster|all]   (default: envtest)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
infra=${STRATA_INFRA:-$root/.infra}
bin=$infra/bin
mkdir -p "$bin"

KUBE_VERSION=v1.37.1
ETCD_VERSION=v3.6.16
REGISTRY_VERSION=v3.1.2
CRANE_VERSION=v0.22.1
KWOK_VERSION=v0.8.0

log() { printf 'setup-infra: %s\n' "$*" >&2; }

# The builds' own output (go: downloading ..., apt) goes to setup_log; the
# terminal gets one line per step, numbered, and one every 30 s while a
# step runs, so that a cold setup (half an hour) never looks stuck.
setup_log=$infra/setup-infra.log
step=0
total=0

# next_step sets n to the number of the build that starts, "(N of M)".
next_step() {
	step=$((step + 1))
	n="($step of $total)"
}

# quietly DESC COMMAND...: runs COMMAND with its output in setup_log,
# saying every 30 s that DESC still runs; on failure, the log's end.
quietly() {
	local desc=$1 start=$SECONDS next=30 pid rc=0
	shift
	"$@" >>"$setup_log" 2>&1 &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1 # a progress ticker, not a synchronisation: wait below
		if ((SECONDS - start >= next)); then
			log "still $desc ($((SECONDS - start)) s; its output in $setup_log)"
			next=$((next + 30))
		fi
	done
	wait "$pid" || rc=$?
	if ((rc)); then
		log "$desc failed (exit $rc); the end of $setup_log:"
		tail -n 30 "$setup_log" >&2
	fi
	return "$rc"
}

# fresh NAME VERSION: true when bin/NAME exists and was built at VERSION.
fresh() { [[ -x $bin/$1 && -f $bin/.$1.version && $(cat "$bin/.$1.version") == "$2" ]]; }
stamp() { printf '%s' "$2" >"$bin/.$1.version"; }

kube_ldflags() {
	local minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	local f=""
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
		f+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	printf '%s' "-s -w$f"
}

build_kube() {
	local name
	for name in "$@"; do
		next_step
		fresh "$name" "$KUBE_VERSION" && continue
		log "building $name $KUBE_VERSION from source $n (cold: minutes)"
		(cd "$root/hack/infra/kube" && quietly "building $name" env CGO_ENABLED=0 go build -trimpath \
			-ldflags "$(kube_ldflags)" -o "$bin/$name" "k8s.io/kubernetes/cmd/$name")
		stamp "$name" "$KUBE_VERSION"
	done
}

build_etcd() {
	next_step
	fresh etcd "$ETCD_VERSION" && return
	log "building etcd $ETCD_VERSION from source $n"
	(cd "$root/hack/infra/etcd" && quietly "building etcd" env CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .)
	stamp etcd "$ETCD_VERSION"
}

go_install() { # NAME PACKAGE VERSION
	next_step
	fresh "$1" "$3" && return
	log "building $1 $3 $n"
	quietly "building $1" env GOBIN="$bin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$2@$3"
	stamp "$1" "$3"
}

apt_ensure() { # COMMAND... then -- PACKAGE...
	local missing=0 cmds=() pkgs=()
	while [[ $1 != -- ]]; do cmds+=("$1"); shift; done
	shift
	pkgs=("$@")
	for c in "${cmds[@]}"; do
		[[ $c == /* ]] && { [[ -e $c ]] || missing=1; continue; }
		command -v "$c" >/dev/null || missing=1
	done
	((missing)) || return 0
	log "installing Debian packages: ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# apt-get update only once per run; the package lists may be absent or stale.
	if [[ -z ${STRATA_APT_UPDATED:-} ]]; then
		quietly "updating Debian's package lists" apt-get update -qq
		export STRATA_APT_UPDATED=1
	fi
	quietly "installing ${pkgs[*]}" apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
}

envtest() {
	# busybox-static: the base image of the renderer's and builder's real build tests.
	apt_ensure buildah skopeo /bin/busybox -- buildah skopeo busybox-static
	# The build Job's push step checks the build's OCI layout with jq
	# (builder/job/build.sh); its tests run that step here.
	apt_ensure jq -- jq
	# The bootc simulator (test/bootcsim) deploys into a real ostree
	# sysroot, and its cleanup needs chattr -i on the deployments.
	apt_ensure /usr/bin/ostree -- ostree
	apt_ensure chattr -- e2fsprogs
	# The renderer's disable test runs the real systemctl inside an image,
	# as a bootc base image has it (containerfile/systemd_test.go).
	apt_ensure systemctl -- systemd
	# The alerting rules (config/prometheus) are checked and unit-tested
	# with promtool (internal/metrics/rules_test.go); gate tests ask a real
	# Prometheus (test/testprometheus), and the test cluster runs one too
	# (hack/cluster/up.sh).
	apt_ensure prometheus promtool -- prometheus
	build_etcd
	build_kube kube-apiserver kubectl
	go_install registry github.com/distribution/distribution/v3/cmd/registry "$REGISTRY_VERSION"
	go_install crane github.com/google/go-containerregistry/cmd/crane "$CRANE_VERSION"
}

cluster() {
	envtest
	apt_ensure containerd runc /usr/lib/cni/bridge /bin/busybox debootstrap iptables openssl curl -- \
		containerd runc containernetworking-plugins busybox-static debootstrap iptables openssl curl
	build_kube kube-controller-manager kube-scheduler kubelet
	# kwok keeps the simulated nodes (test/simnode) Ready and runs their pods.
	go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
}

# The builds each mode numbers: etcd, kube-apiserver, kubectl, registry
# and crane; the cluster adds kube-controller-manager, kube-scheduler,
# kubelet and kwok.
case ${1:-envtest} in
envtest)
	total=5
	envtest
	;;
cluster | all)
	total=9
	cluster
	;;
*)
	echo "usage: $0 [envtest|cluster|all]" >&2
	exit 2
	;;
esac
log "ready in $bin"
