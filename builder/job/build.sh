#!/bin/bash
# Strata's build script. The three containers of a build pod of the Job
# builder (builder/job) run it, one phase each, in this order:
#
#   build.sh pull   pulls the base image into the shared storage, with the
#                   base image pull secret; runs no user code
#   build.sh build  builds the Containerfile from that storage
#                   (--pull=never), with no credentials at all: the admin's
#                   RUN steps and package scriptlets run here; then writes
#                   the built image as an OCI layout
#   build.sh push   checks that OCI layout and pushes it with skopeo and
#                   the push secret; runs no user code, and has no buildah
#                   storage: it reads nothing the build wrote but the layout
#
# Environment (the Job sets it; paths, never credentials):
#   all phases:
#   STRATA_SCRATCH              an empty, writable directory of this
#                               container's own (required)
#   STRATA_INSECURE_REGISTRIES  comma-separated host[:port] reached without
#                               TLS verification (optional)
#   STRATA_TERMINATION_LOG      where the report goes
#                               (default /dev/termination-log)
#   pull and build:
#   STRATA_STORAGE              the buildah storage they share, an emptyDir
#                               (required)
#   STRATA_STORAGE_DRIVER       vfs (default) or overlay
#   STRATA_PLATFORM             os/arch to pull and build for (linux/amd64)
#   pull:
#   STRATA_BASE_IMAGES          the images the Containerfile's FROMs name,
#                               one "LINE IMAGE" pair a line (required)
#   STRATA_BASE_AUTHFILE        authfile to pull them (optional)
#   build and push:
#   STRATA_LAYOUT               the OCI layout the build writes and the push
#                               reads, an emptyDir (required)
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
# scratch directory. The push phase reads nothing the build phase could
# have written but the OCI layout, and checks it before skopeo reads it:
# only regular files and directories, an index.json that parses and names
# one image manifest, every blob's content matching its digest, every blob
# the manifest names there with its size. A RUN step that escaped
# buildah's chroot can change the build container's files in any way:
# buildah's storage is not made to be read safely after that (its
# metadata and links could send a credentialed buildah anywhere), a
# layout so checked is plain data.
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

# error_of prints buildah's or skopeo's error: the last "Error: " (or
# "Error during ...: ") line of the log, or skopeo's last fatal message,
# or the log's last line.
error_of() {
	local e
	e=$(grep -E '^(Error|error)( during [^:]*)?: |level=fatal msg=' "$LOG" | tail -n 1 || true)
	[ -n "$e" ] || e=$(tail -n 1 "$LOG" || true)
	if [[ $e == *'level=fatal msg="'* ]]; then
		e=${e#*level=fatal msg=\"}
		e=${e%\"}
	fi
	e=${e#Error: }
	e=${e#error: }
	printf '%s' "$e"
}

# is_auth_error MESSAGE: whether a registry refused credentials. The status
# code 401 counts only as a number of its own: the message also carries the
# registry's address and digests, where 401 can be part of a port or of hex.
is_auth_error() {
	grep -qiE '(^|[^[:alnum:]:.])401([^[:alnum:]]|$)|unauthorized|authentication required|invalid username/password|denied: requested access' <<<"$1"
}

# authfile FILE: a mounted Secret's authfile must be readable.
authfile() {
	[ -z "$1" ] || [ -r "$1" ] || fail Prepare "registry credentials $1 are missing: check the Secret's .dockerconfigjson key"
}

case $PHASE in pull | build | push) ;; *) fail Prepare "build script: unknown phase \"$PHASE\", want pull, build or push" ;; esac
[ -n "${STRATA_SCRATCH:-}" ] || fail Prepare "STRATA_SCRATCH is not set"
P=$STRATA_SCRATCH
export TMPDIR=$P/tmp
mkdir -p "$P/runroot" "$TMPDIR"
LOG=$P/$PHASE.log
: >"$LOG"
if [ "$PHASE" = push ]; then
	[ -n "${STRATA_LAYOUT:-}" ] || fail Prepare "STRATA_LAYOUT is not set"
	for tool in skopeo jq sha256sum; do
		command -v $tool >/dev/null || fail Prepare "$tool is not installed in the builder image"
	done
	# The push has no buildah storage: an empty one of its own keeps
	# skopeo's configuration here too.
	S=$P/no-storage
else
	[ -n "${STRATA_STORAGE:-}" ] || fail Prepare "STRATA_STORAGE is not set"
	[ "$PHASE" = pull ] || [ -n "${STRATA_LAYOUT:-}" ] || fail Prepare "STRATA_LAYOUT is not set"
	S=$STRATA_STORAGE
	command -v buildah >/dev/null || fail Prepare "buildah is not installed in the builder image"
fi
mkdir -p "$S/root"

# Keep buildah's and skopeo's configuration to what this build asks for,
# in this container's own directory.
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
	# The image leaves the storage as an OCI layout, the one thing the
	# push reads. A RUN step may have filled the container's disk or
	# broken what buildah needs: not the push's business, so no Push step.
	local iid
	iid=$(cat "$P/iid")
	if ! buildah "${global[@]}" push --quiet "${policy[@]}" "$iid" "oci:$STRATA_LAYOUT" 2>&1 | tee -a "$LOG"; then
		fail Unknown "writing the built image as an OCI layout to $STRATA_LAYOUT: $(error_of)"
	fi
}

# sha256 prints a file's SHA-256 digest, "sha256:<hex>".
sha256() {
	local sum
	sum=$(sha256sum "$1") || return 1
	printf 'sha256:%s' "${sum%% *}"
}

# check_layout checks the OCI layout the build wrote, and sets LAYOUT_DIGEST
# to the digest of its one image manifest. A layout that is not what a
# build writes fails the Push step: the push container holds the push
# secret, and reads no file of the build container it has not checked.
check_layout() {
	local L=$STRATA_LAYOUT odd manifest mdigest msize f d size
	[ -d "$L" ] || fail Push "the build left no OCI layout at $L"
	# Only what a layout is made of: a symlink or a device could point
	# the push at the push secret, or anything else of this container.
	odd=$(find "$L" -mindepth 1 \( \( -type d \( -path "$L/blobs" -o -path "$L/blobs/sha256" \) \) \
		-o \( -type f \( -path "$L/oci-layout" -o -path "$L/index.json" -o -path "$L/blobs/sha256/*" \) \) \) \
		-o -print -quit)
	[ -z "$odd" ] || fail Push "the build's OCI layout holds ${odd#"$L"/}, which is not part of a layout of regular files"
	jq -e '.imageLayoutVersion == "1.0.0"' "$L/oci-layout" >/dev/null 2>&1 ||
		fail Push "the build's OCI layout has no valid oci-layout file"
	jq -e . "$L/index.json" >/dev/null 2>&1 || fail Push "the build's OCI layout has an index.json that does not parse"
	jq -e '(.manifests | length) == 1 and .manifests[0].mediaType == "application/vnd.oci.image.manifest.v1+json"
		and (.manifests[0].digest | test("^sha256:[a-f0-9]{64}$")) and (.manifests[0].size | type) == "number"' \
		"$L/index.json" >/dev/null 2>&1 ||
		fail Push "the build's OCI layout must name one OCI image manifest by digest in index.json: $(head -c 300 "$L/index.json" | tr -d '\n')"
	mdigest=$(jq -r '.manifests[0].digest' "$L/index.json")
	msize=$(jq -r '.manifests[0].size' "$L/index.json")
	for f in "$L"/blobs/sha256/*; do
		[ -e "$f" ] || continue
		[[ ${f##*/} =~ ^[a-f0-9]{64}$ ]] || fail Push "the build's OCI layout holds ${f#"$L"/}, which is not a blob's name"
		d=$(sha256 "$f") || fail Push "cannot read ${f#"$L"/} of the build's OCI layout"
		[ "$d" = "sha256:${f##*/}" ] || fail Push "blob ${f#"$L"/} of the build's OCI layout has the digest $d"
	done
	manifest=$L/blobs/sha256/${mdigest#sha256:}
	[ -f "$manifest" ] || fail Push "the build's OCI layout lacks its manifest $mdigest"
	[ "$(stat -c %s "$manifest")" = "$msize" ] || fail Push "the build's OCI layout's manifest $mdigest is not of the size index.json says"
	jq -e '.schemaVersion == 2 and (.config.digest | type) == "string" and (.layers | type) == "array"' "$manifest" >/dev/null 2>&1 ||
		fail Push "the build's OCI layout's manifest $mdigest is not an image manifest"
	while read -r d size; do
		[[ $d =~ ^sha256:[a-f0-9]{64}$ ]] || fail Push "the manifest $mdigest names the blob \"$d\", not a sha256 digest"
		f=$L/blobs/sha256/${d#sha256:}
		[ -f "$f" ] || fail Push "the build's OCI layout lacks the blob $d its manifest names"
		[ "$(stat -c %s "$f")" = "$size" ] || fail Push "blob $d of the build's OCI layout is not of the size its manifest says"
	done < <(jq -r '(.config, .layers[]) | "\(.digest) \(.size)"' "$manifest")
	LAYOUT_DIGEST=$mdigest
}

# push: checks the build's OCI layout and pushes it with the push secret.
push() {
	[ -n "${STRATA_PUSH_SPEC:-}" ] || fail Prepare "STRATA_PUSH_SPEC is not set"
	authfile "${STRATA_PUSH_AUTHFILE:-}"
	local err digest
	check_layout
	STEP=Push
	# skopeo copies the manifest and blobs as they are: the pushed digest
	# is the one checked.
	local copy=(copy --quiet --preserve-digests --digestfile "$P/digest")
	[ -z "${STRATA_PUSH_AUTHFILE:-}" ] || copy+=(--dest-authfile "$STRATA_PUSH_AUTHFILE")
	local global=(--registries-conf "$P/registries.conf")
	[ ${#policy[@]} -eq 0 ] || global+=(--policy "$P/policy.json")
	if ! skopeo "${global[@]}" "${copy[@]}" "oci:$STRATA_LAYOUT" "docker://$STRATA_PUSH_SPEC" 2>&1 | tee -a "$LOG"; then
		err=$(error_of)
		is_auth_error "$err" && fail Auth "pushing to $STRATA_PUSH_SPEC: the registry refused the push credentials: $err"
		fail Push "pushing to $STRATA_PUSH_SPEC: $err"
	fi
	digest=$(cat "$P/digest")
	[[ $digest =~ ^sha256:[a-f0-9]{64}$ ]] || fail Push "skopeo wrote no valid digest (got \"$digest\")"
	[ "$digest" = "$LAYOUT_DIGEST" ] || fail Push "the registry has $digest, not the checked manifest $LAYOUT_DIGEST"
	REPORTED=1
	printf '{"digest":"%s"}' "$digest" >"$TERMLOG"
	echo "strata: pushed $STRATA_PUSH_SPEC@$digest"
}

case $PHASE in
pull) pull_base ;;
build) build ;;
push) push ;;
esac
