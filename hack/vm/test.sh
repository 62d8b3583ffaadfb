#!/usr/bin/env bash
# test.sh is `make test-vm`, the VM tier (issue 22): real boots of an
# ostree-based Debian 12 under QEMU (software emulation). It starts the test
# cluster (unless it is up), installs Strata on it (deploy.sh), builds the
# bootable base (base.sh: cached, a warm run takes seconds), runs the
# packages with the `vm` build tag, and always tears the cluster down again.
# STRATA_VM_RUN=regexp runs only the tests it matches. VM logs (console,
# markers, QEMU's arguments) are kept under .infra/vm/logs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../cluster/lib.sh
source "$here/../cluster/lib.sh"
cd "$root"

teardown() {
	local rc=$?
	trap - EXIT INT TERM
	"$root/hack/cluster/down.sh" || rc=1
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$SECONDS
"$root/hack/cluster/up.sh"
"$root/hack/cluster/deploy.sh"
"$here/base.sh"
log "cluster and base ready in $((SECONDS - start)) s; running the VM tier"
run=()
[[ -n ${STRATA_VM_RUN:-} ]] && run=(-run "$STRATA_VM_RUN")
KUBECONFIG=$state/kubeconfig go test -tags "vm,$(cat "$root/hack/go-tags")" -count=1 -timeout 40m -v "${run[@]}" ./test/vm/...
log "VM tier passed in $((SECONDS - start)) s"
