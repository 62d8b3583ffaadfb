// Package sigpolicy renders what makes a node verify its pool's images
// (NodePolicy): the containers signature policy with sigstoreSigned for
// the pool's repository, the registries.d entry that makes
// containers/image read sigstore attachments, and the public keys. The
// daemon writes these files before it switches, so that even the first
// update is verified, and the configuration layer carries the same bytes
// with the same metadata, so that the node's /etc never holds a local
// modification of them (BOOTC.md, "Live changes").
//
// It is pure (no containers/image), so that the daemon links only this;
// signing and verifying are package signing's.
package sigpolicy
