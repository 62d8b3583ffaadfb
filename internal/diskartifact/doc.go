// Package diskartifact publishes a boot disk (a raw disk image of an OS
// image, made by package bootdisk) beside its image as an OCI artifact,
// finds it again and downloads it.
//
// The artifact is an OCI 1.1 referrer of the image (internal/referrers):
// artifactType application/vnd.strata.bootdisk.raw.v1, the empty config,
// and one layer, the raw disk compressed with zstd
// (application/vnd.strata.bootdisk.raw.v1+zstd). Registries store it in
// the image's repository, scanners and `stratactl inspect` list it beside
// the SBOM, the provenance and the signatures, and deleting the image's
// referrers (garbage collection) deletes it too.
//
// The manifest's annotations carry the raw disk's size and sha256 digest
// (AnnotationSize, AnnotationRawDigest): the registry checks the
// compressed blob's digest, a download checks the decompressed bytes
// against these, so a disk is written only when it is the one that was
// published. Zero blocks are skipped when writing the disk, so it stays as
// sparse as it was made.
//
// A disk is gigabytes: nothing here holds it in memory; it is compressed
// to a file beside it and streamed from there, and streamed back.
package diskartifact
