# shellcheck shell=bash
# lib.sh: shared settings and helpers of the one-node test cluster harness
# (up.sh, down.sh, images.sh, e2e.sh). Sourced, never run.
#
# Every change to the host is recorded in an undo journal
# ($state/journal) *before* it is made, so down.sh can undo exactly what
# this run did, also after a crash or a kill -9 of up.sh. Entries:
#
#   proc NAME PID STARTTIME   a process we started (killed by PID, checked
#                             against its start time so a reused PID is
#                             never hit)
#   sysctl KEY VALUE          the value KEY had before; restored
#   absent PATH               PATH did not exist before; removed
#   nolink NAME               network link NAME did not exist; deleted
#   nocgroup NAME             cgroup NAME did not exist in any hierarchy;
#                             its processes are killed and it is removed
#   iptables FILE             chains that existed before (per tool/table);
#                             KUBE-* and CNI-* chains not listed are removed

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# By its real path: the kernel lists mounts (umount_under) and the kubelet
# mounts hostPaths by it, also where .infra is a symlink (a git worktree
# sharing another checkout's).
infra=$(realpath -m "${STRATA_INFRA:-$root/.infra}")
bin=$infra/bin
state=$infra/cluster   # everything of one cluster run; removed by down.sh
logs=$infra/cluster-logs # kept after down.sh for post-mortems; cleared by up.sh
run=$state/run
pki=$state/pki
journal=$state/journal
export PATH=$bin:/usr/sbin:/sbin:$PATH

REGISTRY=127.0.0.1:5000
ETCD_PORT=12379
ETCD_PEER_PORT=12380
APISERVER_PORT=6443
KCM_PORT=10257
SCHEDULER_PORT=10259
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
# Prometheus (up.sh): scrapes strata-controller, evaluates the rules the e2e
# specs write under $state/prometheus/rules (POST /-/reload after a change).
PROMETHEUS_PORT=19090
CNI_BRIDGE=strata0
CNI_SUBNET=10.244.77.0/24
SERVICE_CIDR=10.96.0.0/24
NODE_NAME=$(hostname)
CONTAINERD_SOCK=$state/containerd/containerd.sock

# The sandbox (pause) image every pod starts with, and the other local images.
PAUSE_IMAGE=$REGISTRY/strata/pause:latest

# What the kubelet, containerd, CNI and buildah may change on the host and
# down.sh must put back. Sysctls: the kubelet's kernel tunables, and IP
# forwarding, which the CNI bridge plugin turns on for its gateway.
HOST_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Paths written outside $state despite every directory option being set:
# the device-plugin dir is hard-coded in the kubelet, containerd puts shim
# sockets under /run/containerd, libcni caches results in /var/lib/cni,
# buildah as root always writes /var/lib/containers/cache (and /etc/cni
# for its network backend), util-linux's mount keeps /run/mount/utab.
BUILDAH_HOST_PATHS=(/var/lib/containers/cache /var/lib/containers /etc/cni /run/containers)
HOST_PATHS=(/var/lib/kubelet/device-plugins /var/lib/kubelet /var/lib/cni /var/log/pods
	/var/log/containers /run/containerd /opt/containerd /var/lib/containerd /run/netns
	/etc/kubernetes /run/kubernetes /run/mount "${BUILDAH_HOST_PATHS[@]}")
IPTABLES_TOOLS=(iptables ip6tables)
IPTABLES_TABLES=(filter nat mangle)

log() { printf '%s cluster: %s\n' "$(date +%T)" "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

journal() { mkdir -p "$state" && printf '%s\n' "$*" >>"$journal"; }

# starttime PID: the process's start time in clock ticks since boot, or
# empty when it is gone or a zombie.
starttime() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	[[ $1 == Z || $1 == X ]] && return 0
	printf '%s' "${20}"
}

# alive PID START: PID runs and is the process that was recorded.
alive() { [[ -n $1 && $(starttime "$1") == "$2" ]]; }

# start_proc NAME CMD...: start CMD in its own session (so a ^C to make does
# not kill it before down.sh runs), logging to $logs/NAME.log.
start_proc() {
	local name=$1
	shift
	mkdir -p "$run" "$logs"
	setsid "$@" </dev/null >>"$logs/$name.log" 2>&1 &
	local pid=$! st=""
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		st=$(starttime "$pid")
		[[ -n $st ]] && break
		sleep 0.05
	done
	[[ -n $st ]] || die "$name exited at once; see $logs/$name.log"
	journal proc "$name" "$pid" "$st"
	printf '%s %s\n' "$pid" "$st" >"$run/$name.pid"
}

# running NAME: the recorded process NAME is alive.
running() {
	local pid st
	[[ -f $run/$1.pid ]] || return 1
	read -r pid st <"$run/$1.pid"
	alive "$pid" "$st"
}

# stop_pid PID START [NAME]: TERM, then KILL after 10 s.
stop_pid() {
	local pid=$1 st=$2 name=${3:-$1}
	alive "$pid" "$st" || return 0
	log "stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 100); do
		alive "$pid" "$st" || return 0
		sleep 0.1
	done
	log "$name did not stop in 10 s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
	for _ in $(seq 50); do
		alive "$pid" "$st" || return 0
		sleep 0.1
	done
	log "warning: $name (pid $pid) survived SIGKILL"
}

# wait_for WHAT SECONDS CMD...: poll CMD until it succeeds or time runs out.
wait_for() {
	local what=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) || die "timed out after ${secs}s waiting for $what"
		sleep 0.2
	done
}

registry_up() { curl -fsS -o /dev/null "http://$REGISTRY/v2/" 2>/dev/null; }

# start_registry: the distribution registry on 127.0.0.1:5000, storage under
# .infra/registry so pushed images outlive the cluster.
start_registry() {
	if registry_up; then
		running registry || log "a registry already answers on $REGISTRY; using it"
		return 0
	fi
	mkdir -p "$infra/registry" "$state"
	cat >"$state/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $infra/registry
  delete:
    enabled: true
http:
  addr: $REGISTRY
EOF
	log "starting registry on $REGISTRY"
	OTEL_TRACES_EXPORTER=none OTEL_SDK_DISABLED=true \
		start_proc registry "$bin/registry" serve "$state/registry.yml"
	wait_for "the registry" 30 registry_up
}

# unimmutable_deployments DIR: clear the immutable flag ostree sets on each
# deployment directory (sysroot/ostree/deploy/OS/deploy/CHECKSUM.N) in the
# simulated nodes' roots that test/simnode keeps in DIR/simnodes-*, and in
# the real node's simulated root, DIR/realnode (deploy.sh), so that rm -rf
# can remove them.
unimmutable_deployments() {
	local d
	for d in "$1"/simnodes-* "$1"/realnode; do
		[[ -d $d ]] || continue
		find "$d" -maxdepth 7 -type d -path '*/sysroot/ostree/deploy/*/deploy/*' -prune \
			-exec chattr -i {} + 2>/dev/null
	done
	return 0
}

# umount_under DIR: unmount everything mounted at or below DIR, deepest
# first, repeating for stacked mounts; lazily when a mount is busy.
umount_under() {
	local dir=$1 mp n
	for _ in $(seq 20); do
		n=0
		while read -r mp; do
			n=$((n + 1))
			umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
		done < <(awk -v d="$dir" '$5 == d || index($5, d "/") == 1 {print length($5), $5}' /proc/self/mountinfo | sort -rn | cut -d' ' -f2-)
		((n)) || return 0
	done
	log "warning: mounts left under $dir"
}
