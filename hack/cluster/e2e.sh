#!/usr/bin/env bash
# e2e.sh is `make test-e2e`: it starts the test cluster (unless it is up),
# installs Strata on it from config/default through config/testcluster
# (deploy.sh), runs the e2e suite against it and always tears it down
# again, also when a spec fails or the run is interrupted. STRATA_E2E_KEEP_CLUSTER=1 keeps
# the cluster up afterwards for debugging (make cluster-down stops it);
# STRATA_E2E_FOCUS=regexp runs only the e2e specs it matches.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
cd "$root"

compile_log=$(mktemp "$infra/e2e-compile.XXXXXX")
compile=""
teardown() {
	local rc=$?
	trap - EXIT INT TERM
	[[ -n $compile ]] && kill "$compile" 2>/dev/null
	rm -f "$compile_log"
	if [[ -n ${STRATA_E2E_KEEP_CLUSTER:-} ]]; then
		log "keeping the cluster up (STRATA_E2E_KEEP_CLUSTER); make cluster-down stops it"
	else
		"$here/down.sh" || rc=1
	fi
	exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Compile the suite while the cluster starts; the real run reuses the cache.
go test -tags "e2e,$(cat "$root/hack/go-tags")" -count=1 -run '^$' ./test/e2e/... ./test/simnode/... >"$compile_log" 2>&1 &
compile=$!
"$here/up.sh"
if ! wait "$compile"; then
	compile=""
	cat "$compile_log" >&2
	die "the e2e suite does not compile"
fi
compile=""
"$here/deploy.sh"

log "running the e2e suite"
flags=(-ginkgo.v)
[[ -n ${CI:-} ]] && flags+=(-ginkgo.no-color)
pkgs=(./test/e2e/... ./test/simnode/...)
# STRATA_E2E_FOCUS runs only the e2e specs it matches (a Ginkgo focus
# regexp), so one feature's specs run without the whole suite.
if [[ -n ${STRATA_E2E_FOCUS:-} ]]; then
	pkgs=(./test/e2e/...)
	flags+=("-ginkgo.focus=$STRATA_E2E_FOCUS")
fi
KUBECONFIG=$state/kubeconfig go test -tags "e2e,$(cat "$root/hack/go-tags")" -count=1 -timeout 30m -v "${pkgs[@]}" "${flags[@]}"
