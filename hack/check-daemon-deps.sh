#!/usr/bin/env bash
# The node daemon links the configuration model (nodeconfig), never the
# Containerfile renderer: buildkit's Dockerfile parser has no business on
# every node, nor containers/image (the daemon only writes the signature
# policy, package sigpolicy; bootc verifies). Fails, naming the packages, if anything drags it back in.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=$(go list -deps ./cmd/strata-daemon)
# Two small pure-Go packages of containers/image are allowed: docker/reference,
# with which package sigpolicy scopes the pool's repository exactly as
# containers/image (so bootc) normalises names, and the regexp helper it
# uses. The rest (transports, signature verification, storage) stays out.
allowed='^go\.podman\.io/(image/v5/docker/reference|storage/pkg/regexp)$'
if bad=$(grep -E 'github\.com/moby/buildkit|github\.com/strata-dev/strata/containerfile|go\.podman\.io/' <<<"$deps" | grep -Ev "$allowed"); then
	echo "cmd/strata-daemon must not depend on buildkit, containerfile or containers/image, but links:" >&2
	echo "$bad" >&2
	echo "find the importer with: go list -deps -f '{{.ImportPath}}: {{join .Imports \" \"}}' ./cmd/strata-daemon | grep -E 'buildkit|/containerfile'" >&2
	exit 1
fi
