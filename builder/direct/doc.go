// Package direct is the direct builder: it makes an image from a base
// image (the admin stage, or the base itself) and one configuration layer
// without running a build, by writing the registry objects itself.
//
// Build appends the layer to the base with go-containerregistry and pushes
// only what is new: the compressed layer, the image config and the
// manifest. The base's layers are referenced by digest, not copied: a
// target in the base's repository already has them; a target in another
// repository of the same registry gets them by a cross-repository mount; a
// target in another registry gets each missing layer once, streamed from
// the base's registry to the target's without being held in memory or
// written to disk.
//
// # The same image as a build
//
// Build first completes the layer as unpacking it into the base in a
// build (buildah's ADD) would: an entry under a symlinked directory of the
// base (/etc/ssl/certs -> ../pki/tls/certs, /lib -> usr/lib) moves to
// where the link points, and each parent directory the layer does not
// have is added before the entries under it, with the base's mode, numeric
// owner and xattrs, or 0755 and root's where the base has none; times are
// the epoch. Parents as the base has them keep a 0700 directory 0700 in
// the image: an entry of its own would replace the base's directory for
// container runtimes, and a path through a link would replace the link.
// And ostree, importing a layer, makes a missing parent with the owner of
// the entry under it. The layer's own entries keep their metadata; a
// layer that needs nothing added or moved is used as given. A symlink to
// nothing or a file on an entry's path fails the build, as it fails
// buildah.
//
// Knowing the base's tree on those paths takes reading its layers, from
// the top down and only until every path is found (a path it lacks takes
// them all), with mutate.Extract's rules for whiteouts. Request.Cache keeps what a build learnt, by base digest, so
// that the next build on that base, a configuration change, reads none of
// them; a layer with all its parents reads none either. Otherwise only the
// base's manifest and config are read.
//
// The same Request gives the same image digest: the layer is gzipped at a
// fixed level with an empty gzip header, and the config's created time and
// the new history entry's are the Unix epoch, as buildah's --timestamp 0
// makes them.
//
// # Memory
//
// The controller runs several builds at once under a memory limit, on
// inputs a MachineConfig's author or a base image's registry chooses, so
// Build's memory is bounded whatever they are (limits.go). The layer is
// written, hashed and gzipped in one pass, each body streamed from the
// given tar, and only the compressed layer is held. Reading a base's tree
// remembers only the paths on the way to the layer's entries, and reads
// at most MaxBaseEntries entries; a base's config larger than
// MaxBaseConfigSize is refused before it is downloaded, and a manifest
// larger than MaxManifestSize as it is read. At most
// MaxConcurrentBuilds Builds of a process read their bases and make their
// layers at once; the others wait, within their contexts.
//
// The package talks to registries only; it knows nothing of Kubernetes.
// Its errors are *StageError values naming the stage that failed (Base,
// Layer or Push), and never carry credentials.
package direct
