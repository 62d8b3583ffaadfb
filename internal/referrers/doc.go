// Package referrers attaches artifacts to an image as OCI 1.1 referrers,
// lists an image's referrers, reads them and deletes them, so that an
// image carries its SBOM and provenance where registries and scanners
// look for them.
//
// An artifact is an image manifest whose artifactType is the artifact's
// media type, with the empty config (application/vnd.oci.empty.v1+json,
// "{}"), one layer holding the artifact's bytes (with the artifact's media
// type) and the image as its subject. The manifest is JSON with a fixed
// field order and sorted annotations, and carries no time: the same
// artifact attached to the same image is the same manifest, so attaching
// it again changes nothing.
//
// Registries that serve the referrers API (/v2/<name>/referrers/<digest>)
// index referrers themselves. On the others (distribution up to v3.1,
// the test cluster's registry) go-containerregistry keeps the list in an
// image index tagged sha256-<hex of the image digest> (the referrers tag
// schema of the OCI distribution spec), updated as artifacts are pushed;
// DeleteAll deletes that index too.
package referrers
