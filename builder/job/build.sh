#!/bin/bash
# Strata's build script: builds the rendered Containerfile with buildah and
# pushes the image, in a build pod of the Job builder (builder/job).
#
# Environment (the Job sets all of it; paths, never credentials):
#   STRATA_CONTEXT_ARCHIVE      gzipped tar of the build context (required)
#   STRATA_STEPS                "stage step line" map of buildah's steps to
#                               Containerfile lines (optional)
#   STRATA_WORKDIR              empty, writable directory for buildah's
#                               storage, the context and the log (required)
#   STRATA_PUSH_SPEC            registry/repository:tag to push to (required)
#   STRATA_BASE_AUTHFILE        authfile to pull the base image (optional)
#   STRATA_PUSH_AUTHFILE        authfile to push (optional)
#   STRATA_INSECURE_REGISTRIES  comma-separated host[:port] reached without
#                               TLS verification (optional)
#   STRATA_STORAGE_DRIVER       vfs (default) or overlay
#   STRATA_TERMINATION_LOG      where the report goes
#                               (default /dev/termination-log)
#   TMPDIR                      temporary files (default $STRATA_WORKDIR/tmp)
#
# Report: one JSON object in the termination log, under the kubelet's 4096
# bytes: {"digest":"sha256:..."} on success, else
# {"step":"Prepare|PullBase|Auth|Build|Push|Unknown","message":"...","logTail":"..."}.
# Exit codes: 0 success, 3 a failure retrying cannot fix (Prepare, Auth,
# Build), 1 any other failure.
#
# Never `set -x`: the log is a user's; keep it to buildah's output.
set -euo pipefail
export LC_ALL=C

TERMLOG=${STRATA_TERMINATION_LOG:-/dev/termination-log}
PHASE=Prepare
LOG=/dev/null
REPORTED=0

# json_escape prints $1 as the inside of a JSON string.
json_escape() {
	local s
	s=$(printf '%s' "$1" | tr -d '\000-\010\013-\037')
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\t'/\\t}
	printf '%s' "$s"
}

# fail STEP MESSAGE: reports a failure with the log's tail and exits.
fail() {
	local step=$1 msg code=1 tail json budget=3200
	msg=$(printf '%s' "$2" | head -c 1000)
	case $step in Prepare | Auth | Build) code=3 ;; esac
	while :; do
		tail=$(tail -n 40 "$LOG" 2>/dev/null | tail -c "$budget" || true)
		json="{\"step\":\"$step\",\"message\":\"$(json_escape "$msg")\",\"logTail\":\"$(json_escape "$tail")\"}"
		if [ "${#json}" -lt 4000 ] || [ "$budget" -le 0 ]; then
			break
		fi
		budget=$((budget - 400))
	done
	REPORTED=1
	printf '%s' "$json" >"$TERMLOG" || true
	echo "strata: $step failed: $msg" >&2
	exit "$code"
}

on_err() {
	local rc=$1 line=$2 cmd=$3
	[ "$REPORTED" = 1 ] && return
	fail "$PHASE" "build script: command at line $line failed with exit status $rc: $cmd"
}
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR

# error_of prints buildah's error: the last "Error: " line of the log, or
# its last line.
error_of() {
	local e
	e=$(grep -E '^(Error|error): ' "$LOG" | tail -n 1 || true)
	[ -n "$e" ] || e=$(tail -n 1 "$LOG" || true)
	e=${e#Error: }
	e=${e#error: }
	printf '%s' "$e"
}

is_auth_error() {
	grep -qiE '401|unauthorized|authentication required|invalid username/password|denied: requested access' <<<"$1"
}

[ -n "${STRATA_WORKDIR:-}" ] || fail Prepare "STRATA_WORKDIR is not set"
[ -n "${STRATA_CONTEXT_ARCHIVE:-}" ] || fail Prepare "STRATA_CONTEXT_ARCHIVE is not set"
[ -n "${STRATA_PUSH_SPEC:-}" ] || fail Prepare "STRATA_PUSH_SPEC is not set"
W=$STRATA_WORKDIR
export TMPDIR=${TMPDIR:-$W/tmp}
mkdir -p "$W/root" "$W/runroot" "$W/context" "$TMPDIR"
LOG=$W/build.log
: >"$LOG"

command -v buildah >/dev/null || fail Prepare "buildah is not installed in the builder image"
[ -r "$STRATA_CONTEXT_ARCHIVE" ] || fail Prepare "build context $STRATA_CONTEXT_ARCHIVE is missing"
tar -xzf "$STRATA_CONTEXT_ARCHIVE" -C "$W/context" 2>>"$LOG" || fail Prepare "build context $STRATA_CONTEXT_ARCHIVE could not be unpacked"
[ -f "$W/context/Containerfile" ] || fail Prepare "the build context has no Containerfile"
for f in "${STRATA_BASE_AUTHFILE:-}" "${STRATA_PUSH_AUTHFILE:-}"; do
	[ -z "$f" ] || [ -r "$f" ] || fail Prepare "registry credentials $f are missing: check the Secret's .dockerconfigjson key"
done

# Keep buildah's configuration to what this build asks for.
DRIVER=${STRATA_STORAGE_DRIVER:-vfs}
cat >"$W/storage.conf" <<EOF
[storage]
driver = "$DRIVER"
runroot = "$W/runroot"
graphroot = "$W/root"
EOF
export CONTAINERS_STORAGE_CONF=$W/storage.conf
{
	echo 'unqualified-search-registries = []'
	IFS=, read -ra insecure <<<"${STRATA_INSECURE_REGISTRIES:-}"
	for r in "${insecure[@]}"; do
		[ -n "$r" ] || continue
		printf '\n[[registry]]\nlocation = "%s"\ninsecure = true\n' "$r"
	done
} >"$W/registries.conf"
export CONTAINERS_REGISTRIES_CONF=$W/registries.conf
export BUILDAH_ISOLATION=chroot
policy=()
if [ ! -e /etc/containers/policy.json ]; then
	echo '{"default":[{"type":"insecureAcceptAnything"}]}' >"$W/policy.json"
	policy=(--signature-policy "$W/policy.json")
fi
global=(--root "$W/root" --runroot "$W/runroot" --storage-driver "$DRIVER")

# Build. The base image is pulled here, with the base pull secret.
PHASE=Build
bud=(bud --isolation chroot --timestamp 0 --layers=false --iidfile "$W/iid" -f "$W/context/Containerfile")
[ -z "${STRATA_BASE_AUTHFILE:-}" ] || bud+=(--authfile "$STRATA_BASE_AUTHFILE")
if ! buildah "${global[@]}" "${bud[@]}" "${policy[@]}" "$W/context" 2>&1 | tee -a "$LOG"; then
	err=$(error_of)
	stepline=$(grep -E '^(\[[0-9]+/[0-9]+\] )?STEP [0-9]+/[0-9]+: ' "$LOG" | tail -n 1 || true)
	if [[ $err == *"building at STEP"* && $stepline =~ ^(\[([0-9]+)/[0-9]+\]\ )?STEP\ ([0-9]+)/[0-9]+:\ (.*)$ ]]; then
		stage=${BASH_REMATCH[2]:-1}
		step=${BASH_REMATCH[3]}
		instr=${BASH_REMATCH[4]}
		detail=${err#*building at STEP \""$instr"\": }
		line=""
		if [ -r "${STRATA_STEPS:-}" ]; then
			line=$(awk -v s="$stage" -v k="$step" '$1 == s && $2 == k { print $3; exit }' "$STRATA_STEPS")
		fi
		where="Containerfile step $step"
		[ "$stage" = 1 ] || where="Containerfile stage $stage step $step"
		[ -z "$line" ] || where="Containerfile line $line"
		if [[ ${instr^^} == FROM* ]]; then
			is_auth_error "$err" && fail Auth "$where: $instr: the registry refused the base image pull credentials: $detail"
			fail PullBase "$where: $instr: $detail"
		fi
		fail Build "$where: $instr: $detail"
	fi
	if is_auth_error "$err"; then
		fail Auth "pulling the base image: the registry refused the credentials: $err"
	fi
	fail PullBase "pulling the base image: $err"
fi

# Push, with the push secret.
PHASE=Push
push=(push --digestfile "$W/digest")
[ -z "${STRATA_PUSH_AUTHFILE:-}" ] || push+=(--authfile "$STRATA_PUSH_AUTHFILE")
if ! buildah "${global[@]}" "${push[@]}" "${policy[@]}" "$(cat "$W/iid")" "docker://$STRATA_PUSH_SPEC" 2>&1 | tee -a "$LOG"; then
	err=$(error_of)
	if is_auth_error "$err"; then
		fail Auth "pushing to $STRATA_PUSH_SPEC: the registry refused the push credentials: $err"
	fi
	fail Push "pushing to $STRATA_PUSH_SPEC: $err"
fi

digest=$(cat "$W/digest")
[[ $digest =~ ^sha256:[a-f0-9]{64}$ ]] || fail Push "buildah push wrote no valid digest (got \"$digest\")"
REPORTED=1
printf '{"digest":"%s"}' "$digest" >"$TERMLOG"
echo "strata: pushed $STRATA_PUSH_SPEC@$digest"
