// Package attest makes what is attached to a built image, its SBOM and
// its provenance statement, and attaches them as OCI referrers
// (internal/referrers); it also deletes an image's referrers before the
// image goes. Same inputs give the same bytes, so attaching again (after
// a restart, or a rebuild of the same inputs) adds nothing to the
// registry. It runs in the controller, after a builder pushed the image.
package attest
