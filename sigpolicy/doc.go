// Package sigpolicy renders what makes a node verify its pool's images
// (NodePolicy, MergeNodePolicy): the containers signature policy with
// sigstoreSigned for the pool's repository, the registries.d entry that
// makes containers/image read sigstore attachments, and the public keys.
// The daemon writes these files before it switches, so that even the
// first update is verified, and the configuration layer carries the same
// bytes with the same metadata, so that the node's /etc never holds a
// local modification of them (BOOTC.md, "Live changes").
//
// The repository is scoped as containers/image normalises image names
// (Scope: docker.io/library/<name> for <name> or docker.io/<name>), so
// that the scope matches the pool's images however the push spec is
// spelled. The policy is merged into the node's (or its base image's)
// own policy.json: the base's default and every scope of every
// transport stay, so its signedBy requirements still apply to podman
// and CRI-O; Strata adds its one scope and, on that scope alone,
// replaces the base's requirement. A base that is not a policy.json is
// an error, never replaced.
//
// It links only containers/image's reference parser (no transports and
// no signature code), so that the daemon links little; signing and
// verifying are package signing's.
package sigpolicy
