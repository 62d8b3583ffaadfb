#!/usr/bin/env bash
# stratactl is what the README and the demo tell a user to run with
# `go run ./cmd/stratactl`: it must build with plain Go, no build tags and
# no cgo. containers/image's signature package (package signing) links
# gpgme unless built with hack/go-tags, so stratactl reads signatures with
# package signing/attached instead. Fails, naming the importers, if
# anything drags gpgme or cgo back in.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! out=$(env -u GOFLAGS CGO_ENABLED=0 go build -o /dev/null ./cmd/stratactl 2>&1); then
	echo "cmd/stratactl must build with plain 'go build' (no tags, CGO_ENABLED=0), but:" >&2
	echo "$out" >&2
	echo "find the importer with: GOFLAGS= go list -deps -f '{{.ImportPath}}: {{join .Imports \" \"}}' ./cmd/stratactl | grep -E 'image/v5/signature\"|gpgme'" >&2
	exit 1
fi
