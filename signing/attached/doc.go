// Package attached reads the sigstore signatures attached to an image
// (the `sha256-<digest>.sig` tag containers/image reads when
// registries.d sets use-sigstore-attachments), bounded before anything is
// read, and verifies them with public keys, in pure Go.
//
// It exists so that tools which only look at signatures (stratactl
// inspect) build with a plain `go build`: containers/image's signature
// package links gpgme through cgo unless built with the tags in
// hack/go-tags. The verification follows containers/image's
// sigstoreSigned requirement with a signedIdentity of matchRepository,
// which is what a node's policy (package sigpolicy) asks; package
// signing, which verifies with containers/image itself, has a test that
// holds the two to the same answers. Nodes and the controller verify with
// containers/image, never with this package.
package attached
