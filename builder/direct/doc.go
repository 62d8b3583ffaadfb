// Package direct is the direct builder: it makes an image from a base
// image (the admin stage, or the base itself) and one configuration layer
// without running a build, by writing the registry objects itself.
//
// Build appends the layer to the base with go-containerregistry and pushes
// only what is new: the compressed layer, the image config and the
// manifest. The base's layers are referenced by digest, never downloaded:
// a target in the base's repository already has them; a target in another
// repository of the same registry gets them by a cross-repository mount; a
// target in another registry gets each missing layer once, streamed from
// the base's registry to the target's without being held in memory or
// written to disk. Only the base's manifest and config are read.
//
// The same Request gives the same image digest: the layer is gzipped at a
// fixed level with an empty gzip header, and the config's created time and
// the new history entry's are the Unix epoch, as buildah's --timestamp 0
// makes them. The layer's tar bytes are used as given.
//
// The package talks to registries only; it knows nothing of Kubernetes.
// Its errors are *StageError values naming the stage that failed (Base,
// Layer or Push), and never carry credentials.
package direct
