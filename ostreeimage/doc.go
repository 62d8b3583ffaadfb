// Package ostreeimage imports OCI container images into an ostree
// repository the way bootc's ostree-ext does, so that `ostree admin
// deploy` can deploy them, and reads what bootc reads from such an image:
// its kernel arguments (usr/lib/bootc/kargs.d) and the origin file bootc
// writes beside a deployment.
//
// Each layer becomes one ostree commit under the ref
// strata/layer/<diffid hex>. A layer whose commit is already in the
// repository is neither downloaded nor committed again, so importing an
// image derived from an imported base commits only its new layers. The
// image commit, ref strata/image/<manifest digest hex>, merges the layer
// commits (`ostree commit --tree=ref=<layer> ...`, base first): ostree
// merges trees by reference to their stored directory objects, so a
// derived image costs about as much as its new layers, not its whole tree.
//
// Each layer is transformed as bootc transforms it: /etc is stored as
// /usr/etc (where ostree keeps the image's /etc for its three-way merge),
// device nodes, fifos and sockets are dropped (ostree commits none), and
// every entry stays inside the root. Whiteouts (".wh.<name>" and the
// opaque-directory marker ".wh..wh..opq") are kept in the layer commit as
// empty files, as ostree-ext keeps them. A merge of trees cannot delete,
// and a layer's directory replaces the lower layers' one: so an image
// whose layers above the base delete something, hard-link to a file of a
// lower layer or have entries under a directory they have no entry for
// (or whose merge ostree refuses: a file replacing a directory) is
// committed as one flattened tree instead, its filesystem as unpacking
// all its layers in order gives it (read from the registry again; the
// layer commits are made all the same, for the next image). The image
// commit carries the metadata ostree-ext gives it
// (ostree.manifest-digest, ostree.manifest, ostree.container.image-config)
// and a fixed timestamp (the image's creation time), so the same image
// gives the same commit checksum in every repository.
package ostreeimage
