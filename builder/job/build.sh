#!/bin/bash
# Strata's build script. The three containers of a build pod of the Job
# builder (builder/job) run it, one phase each, in this order:
#
#   build.sh pull   pulls the base image into the shared storage, with the
#                   base image pull secret; runs no user code
#   build.sh build  builds the Containerfile from that storage
#                   (--pull=never), with no credentials at all: the admin's
#                   RUN steps and package scriptlets run here
#   build.sh push   pushes the built image, with the push secret; runs no
#                   user code
#
# Environment (the Job sets it; paths, never credentials):
#   all phases:
#   STRATA_STORAGE              the storage the phases share, an emptyDir
#                               (required)
#   STRATA_SCRATCH              an empty, writable directory of this
#                               container's own (required)
#   STRATA_INSECURE_REGISTRIES  comma-separated host[:port] reached without
#                               TLS verification (optional)
#   STRATA_STORAGE_DRIVER       vfs (default) or overlay
#   STRATA_TERMINATION_LOG      where the report goes
#   STRATA_PLATFORM             os/arch to pull and build for (linux/amd64)
#                               (default /dev/termination-log)
#   pull:
#   STRATA_BASE_IMAGES          the images the Containerfile's FROMs name,
#                               one "LINE IMAGE" pair a line (required)
#   STRATA_BASE_AUTHFILE        authfile to pull them (optional)
#   build:
#   STRATA_CONTEXT_ARCHIVE      gzipped tar of the build context (required)
#   STRATA_STEPS                "stage step line" map of buildah's steps to
#                               Containerfile lines (optional)
#   STRATA_ANNOTATIONS          manifest annotations of the image, one
#                               "key=value" a line (optional)
#   push:
#   STRATA_PUSH_SPEC            registry/repository:tag to push to (required)
#   STRATA_PUSH_AUTHFILE        authfile to push (optional)
#
# Each phase keeps its configuration, log and temporary files in its
# scratch directory, so that the push phase reads nothing the build phase
# could have written but the storage's images and the built image's ID.
#
# Report: one JSON object in the termination log, under the kubelet's 4096
# bytes: the push phase writes {"digest":"sha256:..."} on success; a
# failing phase writes
# {"step":"Prepare|PullBase|Auth|Build|Push|Unknown","message":"...","logTail":"..."}.
# Exit codes: 0 success, 3 a failure retrying cannot fix (Prepare, Auth,
# Build), 1 any other failure.
#
# Never `set -x`: the log is a user's; keep it to buildah's output.
# errtrace: the ERR trap reports failures inside the phase functions too.
set -Eeuo pipefail
export LC_ALL=C

TERMLOG=${STRATA_TERMINATION_LOG:-/dev/termination-log}
STEP=Prepare
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
	fail "$STEP" "build script ($PHASE): command at line $line failed with exit status $rc: $cmd"
}
PHASE=${1:-}
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR

# error_of prints buildah's error: the last "Error: " (or "Error during
# ...: ") line of the log, or its last line.
error_of() {
	local e
	e=$(grep -E '^(Error|error)( during [^:]*)?: ' "$LOG" | tail -n 1 || true)
	[ -n "$e" ] || e=$(tail -n 1 "$LOG" || true)
	e=${e#Error: }
	e=${e#error: }
	printf '%s' "$e"
}

is_auth_error() {
	grep -qiE '401|unauthorized|authentication required|invalid username/password|denied: requested access' <<<"$1"
}

# authfile FILE: a mounted Secret's authfile must be readable.
authfile() {
	[ -z "$1" ] || [ -r "$1" ] || fail Prepare "registry credentials $1 are missing: check the Secret's .dockerconfigjson key"
}

case $PHASE in pull | build | push) ;; *) fail Prepare "build script: unknown phase \"$PHASE\", want pull, build or push" ;; esac
[ -n "${STRATA_STORAGE:-}" ] || fail Prepare "STRATA_STORAGE is not set"
[ -n "${STRATA_SCRATCH:-}" ] || fail Prepare "STRATA_SCRATCH is not set"
S=$STRATA_STORAGE
P=$STRATA_SCRATCH
export TMPDIR=$P/tmp
mkdir -p "$S/root" "$P/runroot" "$TMPDIR"
LOG=$P/$PHASE.log
: >"$LOG"
command -v buildah >/dev/null || fail Prepare "buildah is not installed in the builder image"

# Keep buildah's configuration to what this build asks for, in this
# container's own directory.
DRIVER=${STRATA_STORAGE_DRIVER:-vfs}
cat >"$P/storage.conf" <<EOF
[storage]
driver = "$DRIVER"
runroot = "$P/runroot"
graphroot = "$S/root"
EOF
export CONTAINERS_STORAGE_CONF=$P/storage.conf
{
	echo 'unqualified-search-registries = []'
	IFS=, read -ra insecure <<<"${STRATA_INSECURE_REGISTRIES:-}"
	for r in "${insecure[@]}"; do
		[ -n "$r" ] || continue
		printf '\n[[registry]]\nlocation = "%s"\ninsecure = true\n' "$r"
	done
} >"$P/registries.conf"
export CONTAINERS_REGISTRIES_CONF=$P/registries.conf
# The capabilities of RUN steps are buildah's defaults, said here since
# this file replaces the image's containers.conf; the lock files go to the
# scratch directory, since the container's own file system is read-only.
cat >"$P/containers.conf" <<EOF
[containers]
default_capabilities = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"]

[engine]
tmp_dir = "$P/libpod"
EOF
export CONTAINERS_CONF=$P/containers.conf
export BUILDAH_ISOLATION=chroot
policy=()
if [ ! -e /etc/containers/policy.json ]; then
	echo '{"default":[{"type":"insecureAcceptAnything"}]}' >"$P/policy.json"
	policy=(--signature-policy "$P/policy.json")
fi
global=(--root "$S/root" --runroot "$P/runroot" --storage-driver "$DRIVER")
IMAGE_ID_FILE=$S/image-id

# pull_base: pulls every base image with the base pull secret.
pull_base() {
	[ -n "${STRATA_BASE_IMAGES:-}" ] || fail Prepare "STRATA_BASE_IMAGES is not set"
	authfile "${STRATA_BASE_AUTHFILE:-}"
	STEP=PullBase
	local line image where err
	local pull=(pull --quiet --platform "${STRATA_PLATFORM:-linux/amd64}")
	[ -z "${STRATA_BASE_AUTHFILE:-}" ] || pull+=(--authfile "$STRATA_BASE_AUTHFILE")
	while read -r line image; do
		[ -n "$image" ] || continue
		where="Containerfile line $line: FROM $image"
		echo "strata: pulling $image"
		if ! buildah "${global[@]}" "${pull[@]}" "${policy[@]}" "$image" 2>&1 | tee -a "$LOG"; then
			err=$(error_of)
			is_auth_error "$err" && fail Auth "$where: the registry refused the base image pull credentials: $err"
			fail PullBase "$where: $err"
		fi
	done <<<"$STRATA_BASE_IMAGES"
}

# build: builds the Containerfile from the storage; nothing is pulled.
build() {
	[ -n "${STRATA_CONTEXT_ARCHIVE:-}" ] || fail Prepare "STRATA_CONTEXT_ARCHIVE is not set"
	[ -r "$STRATA_CONTEXT_ARCHIVE" ] || fail Prepare "build context $STRATA_CONTEXT_ARCHIVE is missing"
	mkdir -p "$P/context"
	tar -xzf "$STRATA_CONTEXT_ARCHIVE" -C "$P/context" 2>>"$LOG" || fail Prepare "build context $STRATA_CONTEXT_ARCHIVE could not be unpacked"
	[ -f "$P/context/Containerfile" ] || fail Prepare "the build context has no Containerfile"
	STEP=Build
	local bud=(bud --isolation chroot --pull=never --platform "${STRATA_PLATFORM:-linux/amd64}" --timestamp 0 --layers=false --iidfile "$P/iid" -f "$P/context/Containerfile")
	local annotation
	while IFS= read -r annotation; do
		[ -z "$annotation" ] || bud+=(--annotation "$annotation")
	done <<<"${STRATA_ANNOTATIONS:-}"
	local err stepline stage step instr detail line where
	if ! buildah "${global[@]}" "${bud[@]}" "${policy[@]}" "$P/context" 2>&1 | tee -a "$LOG"; then
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
			[[ ${instr^^} == FROM* ]] && fail PullBase "$where: $instr: the base image is not in the build's storage: $detail"
			fail Build "$where: $instr: $detail"
		fi
		# buildah fails before the first step when the base is missing.
		[[ $err == *"image not known"* ]] && fail PullBase "the base image is not in the build's storage: $err"
		fail Unknown "buildah failed before it ran a Containerfile step: $err"
	fi
	local iid
	iid=$(cat "$P/iid")
	printf '%s\n' "$iid" >"$IMAGE_ID_FILE.tmp"
	mv -f "$IMAGE_ID_FILE.tmp" "$IMAGE_ID_FILE"
}

# push: pushes the built image with the push secret.
push() {
	[ -n "${STRATA_PUSH_SPEC:-}" ] || fail Prepare "STRATA_PUSH_SPEC is not set"
	authfile "${STRATA_PUSH_AUTHFILE:-}"
	local iid err digest
	# The build phase wrote the ID; it goes to buildah as an argument, so
	# it must be one.
	iid=$(head -c 100 "$IMAGE_ID_FILE" 2>/dev/null | tr -d '\n' || true)
	[[ $iid =~ ^sha256:[a-f0-9]{64}$ ]] || fail Prepare "the build left no valid image ID in $IMAGE_ID_FILE (got \"$iid\")"
	STEP=Push
	local push=(push --digestfile "$P/digest")
	[ -z "${STRATA_PUSH_AUTHFILE:-}" ] || push+=(--authfile "$STRATA_PUSH_AUTHFILE")
	if ! buildah "${global[@]}" "${push[@]}" "${policy[@]}" "$iid" "docker://$STRATA_PUSH_SPEC" 2>&1 | tee -a "$LOG"; then
		err=$(error_of)
		is_auth_error "$err" && fail Auth "pushing to $STRATA_PUSH_SPEC: the registry refused the push credentials: $err"
		fail Push "pushing to $STRATA_PUSH_SPEC: $err"
	fi
	digest=$(cat "$P/digest")
	[[ $digest =~ ^sha256:[a-f0-9]{64}$ ]] || fail Push "buildah push wrote no valid digest (got \"$digest\")"
	REPORTED=1
	printf '{"digest":"%s"}' "$digest" >"$TERMLOG"
	echo "strata: pushed $STRATA_PUSH_SPEC@$digest"
}

case $PHASE in
pull) pull_base ;;
build) build ;;
push) push ;;
esac
