#!/usr/bin/env bash
# deploy.sh installs Strata on the running test cluster the way a user
# installs it on theirs: config/default, through the test cluster's
# overlay config/testcluster, with kubectl apply --server-side.
#
# Precondition: the cluster is up (up.sh, make cluster-up). Then it
#   1. builds what is stale of the images (images.sh: the test images and
#      strata/strata-controller, strata/strata-daemon-sim from the working
#      tree) into the registry on 127.0.0.1:5000;
#   2. applies config/testcluster with those images pinned by digest, the
#      real node's simulated root in .infra/cluster/realnode (down.sh
#      removes it) and the original image it is installed with by digest
#      (a kustomization generated in a temporary directory);
#   3. waits until the CRDs are Established, the controller Deployment has
#      rolled out and is Available and the daemon DaemonSet has rolled out.
#
# Running it again changes nothing unless an image or config/ changed, in
# which case the pods roll. Logs go to stderr; the exit status says whether
# Strata is installed and running. make deploy runs it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

kubeconfig=$state/kubeconfig
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }

[[ -f $journal && -f $kubeconfig ]] || die "the test cluster is not up: run hack/cluster/up.sh (make cluster-up) first"
k get node "$NODE_NAME" >/dev/null 2>&1 || die "the test cluster does not answer (kubeconfig $kubeconfig): run hack/cluster/up.sh (make cluster-up)"

started=$SECONDS
"$here/images.sh" all

digest() { crane digest "$REGISTRY/strata/$1:latest"; }
controller=$(digest strata-controller)
daemon=$(digest strata-daemon-sim)
original=$REGISTRY/strata/os-base@$(digest os-base)

# The real node's root for the bootc simulator: under $state, which down.sh
# removes (clearing ostree's immutable flags first).
realnode=$state/realnode
mkdir -p "$realnode"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# kustomize takes no absolute path of a base.
cat >"$tmp/kustomization.yaml" <<EOF
resources:
- $(realpath --relative-to="$tmp" "$root/config/testcluster")
patches:
- path: realnode.yaml
images:
- name: $REGISTRY/strata/strata-controller
  digest: $controller
- name: $REGISTRY/strata/strata-daemon-sim
  digest: $daemon
EOF
cat >"$tmp/realnode.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: strata-daemon
  namespace: strata-system
spec:
  template:
    spec:
      initContainers:
      - name: install
        command: [bootc-sim, sim, init, "$original"]
      volumes:
      - name: host-root
        hostPath:
          path: "$realnode"
          type: Directory
EOF
k kustomize "$tmp" >"$tmp/strata.yaml"
log "installing Strata (controller $controller, daemon $daemon)"
k apply --server-side --force-conflicts --field-manager strata-deploy -f "$tmp/strata.yaml" >"$tmp/apply.log" 2>&1 ||
	{
		cat "$tmp/apply.log" >&2
		die "kubectl apply failed"
	}

log "waiting for the CRDs, the controller and the daemon"
k wait --for=condition=Established --timeout=60s -f "$root/config/crd/bases" >/dev/null
ns=strata-system
diagnose() {
	k -n "$ns" get pods -o wide >&2 || true
	k -n "$ns" get events --sort-by=.lastTimestamp 2>/dev/null | tail -20 >&2 || true
}
if ! k -n "$ns" rollout status deployment/strata-controller --timeout=180s >/dev/null ||
	! k -n "$ns" wait --for=condition=Available --timeout=60s deployment/strata-controller >/dev/null; then
	diagnose
	k -n "$ns" logs deployment/strata-controller --tail=30 >&2 || true
	die "the controller did not become available"
fi
if ! k -n "$ns" rollout status daemonset/strata-daemon --timeout=180s >/dev/null; then
	diagnose
	k -n "$ns" logs daemonset/strata-daemon --all-containers --tail=30 >&2 || true
	die "the daemon did not roll out"
fi
log "Strata is installed in $((SECONDS - started))s (namespace $ns)"
