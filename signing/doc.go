// Package signing signs the images Strata publishes and verifies images
// against public keys, with containers/image, the library bootc and
// podman verify with: sigstore signatures (a key pair, no Fulcio or
// Rekor) stored as the `sha256-<digest>.sig` attachments that
// containers/image reads when registries.d sets use-sigstore-attachments.
// cosign 3's default, OCI bundle referrers, is not used: containers/image
// does not see them.
//
// containers/image reads every layer of an attachment into memory, so
// an attachment is checked first, on its manifest and its layers' sizes
// (MaxAttachmentLayers, MaxAttachmentBytes, MaxAttachmentManifestBytes),
// and one over a bound is refused by name, unread (*AttachmentError).
//
// The files that make a node verify are package sigpolicy's, which needs
// no containers/image: the daemon links that one only.
//
// Code that imports this package must be built with the tags in
// hack/go-tags (containers_image_openpgp): without them containers/image
// links gpgme through cgo. Tools a user builds with plain `go build`
// (stratactl) read and verify signatures with package signing/attached,
// which a test here holds to containers/image's answers.
package signing
