#!/usr/bin/env bash
# up.sh starts a real one-node Kubernetes cluster on this machine for the
# e2e suite: the local registry (127.0.0.1:5000), etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd + runc and the kubelet,
# and kwok for the simulated nodes (test/simnode), with every file under
# .infra/cluster. It builds the test images first (images.sh test;
# Strata's own are deploy.sh's), writes .infra/cluster/kubeconfig and
# returns once the node is Ready and the default service account exists.
#
# Host changes are journaled before they happen (see lib.sh) and undone by
# down.sh, which also runs here when starting fails or is interrupted.
# Running up.sh on a healthy cluster returns at once; on the remains of a
# crashed run it cleans those up first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

components=(registry etcd kube-apiserver kube-controller-manager kube-scheduler kwok containerd kubelet prometheus)

healthy() {
	local c
	for c in "${components[@]}"; do
		[[ $c == registry ]] && { registry_up || return 1; continue; }
		running "$c" || return 1
	done
	kubectl --kubeconfig "$state/kubeconfig" get node "$NODE_NAME" \
		-o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True
}

if [[ -f $journal ]]; then
	if healthy; then
		log "cluster already up (kubeconfig: $state/kubeconfig)"
		exit 0
	fi
	log "found the remains of an earlier run; cleaning them up first"
	"$here/down.sh"
fi

# Another cluster (say, from another checkout) would answer our health
# checks and make this one look up; refuse instead.
ports=("$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT" "$SCHEDULER_PORT" "$KUBELET_PORT" "$KUBELET_HEALTHZ_PORT" "$PROMETHEUS_PORT")
filter=$(printf 'sport = :%s or ' "${ports[@]}")
busy=$(ss -Hltn "( ${filter% or } )" 2>/dev/null || true)
[[ -z $busy ]] || die "the test cluster's ports are in use (another test cluster? make cluster-down in its checkout): $(echo $busy)"

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl registry crane kwok; do
	[[ -x $bin/$b ]] || die "$bin/$b missing; run hack/setup-infra.sh cluster (make cluster-up does)"
done
for b in containerd containerd-shim-runc-v2 runc iptables openssl curl /usr/lib/cni/bridge prometheus promtool; do
	command -v "$b" >/dev/null || die "$b missing; run hack/setup-infra.sh cluster"
done

started=$SECONDS
on_exit() {
	local rc=$?
	trap - EXIT INT TERM
	if ((rc != 0)); then
		log "cluster-up failed (exit $rc); logs in $logs; tearing down"
		"$here/down.sh" || true
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$logs"
mkdir -p "$state" "$run" "$logs" "$pki"
"$here/hostcheck.sh" snapshot "$logs/host.before"

# --- the undo journal: record the host's state before anything changes it.
journal "# strata test cluster started $(date -u +%FT%TZ) by pid $$"
for s in "${HOST_SYSCTLS[@]}"; do
	v=$(sysctl -n "$s" 2>/dev/null) && journal sysctl "$s" "$v"
done
for p in "${HOST_PATHS[@]}"; do
	[[ -e $p || -L $p ]] || journal absent "$p"
done
ip link show "$CNI_BRIDGE" >/dev/null 2>&1 || journal nolink "$CNI_BRIDGE"
if [[ -z $(find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -name kubepods 2>/dev/null) ]]; then
	journal nocgroup kubepods
else
	log "warning: kubepods cgroups exist already (another kubelet?); they will not be removed"
fi
for tool in "${IPTABLES_TOOLS[@]}"; do
	command -v "$tool" >/dev/null || continue
	for t in "${IPTABLES_TABLES[@]}"; do
		"$tool" -w -t "$t" -S 2>/dev/null | awk -v p="$tool $t" '$1 == "-N" {print p, $2}'
	done
done >"$state/iptables.before"
journal iptables "$state/iptables.before"

# --- registry and images
start_registry
"$here/images.sh" test

# --- certificates and kubeconfigs (a throwaway CA per run)
log "writing certificates"
ossl() { openssl "$@" 2>>"$logs/openssl.log"; }
ossl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -days 3650 \
	-subj /CN=strata-test-ca -keyout "$pki/ca.key" -out "$pki/ca.crt"
cert() { # NAME SUBJECT EXTENDED-USAGE [SANS]
	ossl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -subj "$2" \
		-keyout "$pki/$1.key" -out "$pki/$1.csr"
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$3"
		[[ -n ${4:-} ]] && echo "subjectAltName=$4"
	} >"$pki/$1.ext"
	ossl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
		-days 3650 -extfile "$pki/$1.ext" -out "$pki/$1.crt"
}
cert apiserver /CN=kube-apiserver serverAuth \
	"IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:$NODE_NAME,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=strata-admin" clientAuth
cert controller-manager /CN=system:kube-controller-manager clientAuth
cert scheduler /CN=system:kube-scheduler clientAuth
# kwok posts the simulated nodes' status, leases and pods' status; admin, but
# under its own name in audit and managedFields.
cert kwok "/O=system:masters/CN=kwok" clientAuth
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
ossl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$pki/sa.key"
ossl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub"

kubeconfig() { # FILE CERT-NAME
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: strata-test
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: strata-test
  context: {cluster: strata-test, user: $2}
current-context: strata-test
EOF
}
kubeconfig "$state/kubeconfig" admin
kubeconfig "$state/controller-manager.kubeconfig" controller-manager
kubeconfig "$state/scheduler.kubeconfig" scheduler
kubeconfig "$state/kubelet.kubeconfig" kubelet
kubeconfig "$state/kwok.kubeconfig" kwok
k() { kubectl --kubeconfig "$state/kubeconfig" "$@"; }

# --- control plane
log "starting etcd"
start_proc etcd "$bin/etcd" --name strata --data-dir "$state/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "strata=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" \
	--unsafe-no-fsync --log-level warn
wait_for etcd 60 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

log "starting kube-apiserver"
start_proc kube-apiserver "$bin/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
	--bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" --cert-dir "$state/apiserver" \
	--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
	--client-ca-file "$pki/ca.crt" \
	--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-cluster-ip-range "$SERVICE_CIDR" \
	--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
	--kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
	--kubelet-client-key "$pki/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types Hostname,InternalIP \
	--endpoint-reconciler-type none --allow-privileged --profiling=false --v 1
wait_for kube-apiserver 120 curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
	"https://127.0.0.1:$APISERVER_PORT/readyz"

# --node-monitor-period 1s (default 5s): the node lifecycle controller then
# lifts a simulated node's not-ready NoExecute taint within a second of its
# reboot; the e2e harness waits for that.
log "starting kube-controller-manager and kube-scheduler"
start_proc kube-controller-manager "$bin/kube-controller-manager" \
	--kubeconfig "$state/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$state/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$state/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
	--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
	--use-service-account-credentials --service-cluster-ip-range "$SERVICE_CIDR" \
	--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
	--node-monitor-period 1s --profiling=false --v 1
start_proc kube-scheduler "$bin/kube-scheduler" \
	--kubeconfig "$state/scheduler.kubeconfig" \
	--authentication-kubeconfig "$state/scheduler.kubeconfig" \
	--authorization-kubeconfig "$state/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false \
	--profiling=false --v 1

# --- kwok: keeps the Nodes labelled strata.dev/simulated=true Ready with
# fresh Leases and runs and deletes the pods bound to them, through the
# stages in kwok-stages.yaml (which also simulate a reboot: see there).
# KWOK_WORKDIR keeps it from reading a ~/.kwok/kwok.yaml of the machine's.
# No --server-address: it opens no port.
log "starting kwok"
mkdir -p "$state/kwok"
KWOK_WORKDIR=$state/kwok start_proc kwok "$bin/kwok" \
	--kubeconfig "$state/kwok.kubeconfig" --config "$here/kwok-stages.yaml" \
	--manage-nodes-with-label-selector strata.dev/simulated=true \
	--node-lease-duration-seconds 40 --cidr 10.245.0.0/16

# --- container runtime and network
log "starting containerd"
mkdir -p "$state/containerd" "$state/cni/net.d" "$state/cni/ipam" "$state/cni/cache"
cat >"$state/cni/net.d/10-strata.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "strata-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$state/cni/ipam",
        "ranges": [[{"subnet": "$CNI_SUBNET"}]]
      }
    }
  ]
}
EOF
cat >"$state/containerd/config.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = ""
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$state/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."$REGISTRY"]
    endpoint = ["http://$REGISTRY"]
EOF
start_proc containerd containerd --config "$state/containerd/config.toml" --log-level warn
wait_for containerd 60 ctr --address "$CONTAINERD_SOCK" version

# --- kubelet
log "starting kubelet (node $NODE_NAME)"
mkdir -p "$state/kubelet" "$state/pod-logs"
cat >"$state/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: true}   # test only: the apiserver's logs/exec calls
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
podLogsDir: $state/pod-logs
clusterDomain: cluster.local
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 10Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
EOF
start_proc kubelet "$bin/kubelet" --config "$state/kubelet-config.yaml" \
	--kubeconfig "$state/kubelet.kubeconfig" --root-dir "$state/kubelet" \
	--cert-dir "$state/kubelet/pki" --v 1

wait_for "the kubelet's healthz" 60 curl -fsS "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"
wait_for "node $NODE_NAME to register" 60 k get node "$NODE_NAME"
k wait --for=condition=Ready "node/$NODE_NAME" --timeout=120s >/dev/null
wait_for "the default service account" 60 k -n default get serviceaccount default

# --- Prometheus (Debian's package, not its systemd unit): scrapes
# strata-controller's metrics on the host's 8443 (config/testcluster) as a
# user's Prometheus would, with the token of a ServiceAccount bound to
# strata-metrics-reader (deploy.sh installs the role; a binding may come
# first). Its rules are the files under $state/prometheus/rules, which e2e
# specs write and load with POST /-/reload.
log "starting prometheus on 127.0.0.1:$PROMETHEUS_PORT"
mkdir -p "$state/prometheus/rules" "$state/prometheus/data"
k -n kube-system create serviceaccount prometheus >/dev/null
k create clusterrolebinding strata-test-prometheus --clusterrole strata-metrics-reader \
	--serviceaccount kube-system:prometheus >/dev/null
k -n kube-system create token prometheus --duration 48h >"$state/prometheus/token"
# The controller's metrics certificate is self-signed (the kubebuilder
# scaffold's default), hence insecure_skip_verify: test cluster only.
cat >"$state/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files: ["$state/prometheus/rules/*.yaml"]
scrape_configs:
- job_name: strata-controller
  scheme: https
  tls_config: {insecure_skip_verify: true}
  authorization: {credentials_file: "$state/prometheus/token"}
  static_configs: [{targets: ["127.0.0.1:8443"]}]
EOF
promtool check config "$state/prometheus/prometheus.yml" >>"$logs/prometheus.log" 2>&1 ||
	die "promtool refuses the Prometheus configuration; see $logs/prometheus.log"
start_proc prometheus prometheus --config.file "$state/prometheus/prometheus.yml" \
	--storage.tsdb.path "$state/prometheus/data" --web.listen-address "127.0.0.1:$PROMETHEUS_PORT" \
	--web.enable-lifecycle --log.level warn
wait_for prometheus 60 curl -fsS "http://127.0.0.1:$PROMETHEUS_PORT/-/ready"

# A canary simulated node proves kwok runs and its stages load: Ready, then
# gone (its Lease goes with it: kwok makes the Node its owner).
canary=kwok-canary
k delete node "$canary" --ignore-not-found >/dev/null
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $canary
  labels: {strata.dev/simulated: "true"}
spec:
  taints: [{key: strata.dev/simulated, value: "true", effect: NoSchedule}]
EOF
k wait --for=condition=Ready "node/$canary" --timeout=60s >/dev/null ||
	die "kwok did not make node $canary Ready; see $logs/kwok.log"
k delete node "$canary" --wait=false >/dev/null

for c in "${components[@]}"; do
	[[ $c == registry ]] && continue
	running "$c" || die "$c exited; see $logs/$c.log"
done
trap - EXIT INT TERM
log "cluster up in $((SECONDS - started))s; export KUBECONFIG=$state/kubeconfig"
