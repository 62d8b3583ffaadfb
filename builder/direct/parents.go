package direct

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Completing the layer (see the package comment): a layer made outside a
// build has no copy-up to give it its parent directories as the base has
// them, and no unpacking into the base to send its entries through the
// base's symlinks; completeLayer gives it both.

// Kinds of path in a tree, besides tar.TypeDir and tar.TypeSymlink.
const (
	kindAbsent byte = 0
	kindOther  byte = 'o'
)

// maxLinks bounds the symlinks followed on one path, as the kernel's
// ELOOP does.
const maxLinks = 40

// treeEntry is what a tree has at a path: a directory (with its header,
// for its mode, owner and xattrs), a symlink (with its target), something
// else, or nothing.
type treeEntry struct {
	kind   byte
	dir    *tar.Header
	target string
}

// BaseCache keeps, for each base image by digest, what Build learnt of its
// file tree while completing layers: the directories, symlinks and absent
// paths on the way to the layers' entries. A digest names content, so
// nothing it keeps goes stale; it keeps the most recently used bases up to
// its size. With it, a base's layers are read once, by the first build on
// it whose layer has a parent directory not seen before. Safe for
// concurrent use; nil keeps nothing.
type BaseCache struct {
	mu    sync.Mutex
	size  int
	trees map[v1.Hash]map[string]treeEntry
	order []v1.Hash // least recently used first
}

// NewBaseCache keeps what Build learns of up to size bases.
func NewBaseCache(size int) *BaseCache {
	return &BaseCache{size: max(size, 1), trees: map[v1.Hash]map[string]treeEntry{}}
}

// known returns a copy of what is known of base d's tree.
func (c *BaseCache) known(d v1.Hash) map[string]treeEntry {
	if c == nil {
		return map[string]treeEntry{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touch(d)
	if c.trees[d] == nil {
		return map[string]treeEntry{}
	}
	return maps.Clone(c.trees[d])
}

// learn adds what a build learnt of base d's tree.
func (c *BaseCache) learn(d v1.Hash, tree map[string]treeEntry) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trees[d] == nil {
		c.trees[d] = map[string]treeEntry{}
	}
	maps.Copy(c.trees[d], tree)
	c.touch(d)
	for len(c.order) > c.size {
		delete(c.trees, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *BaseCache) touch(d v1.Hash) {
	if i := slices.Index(c.order, d); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
	if c.trees[d] != nil {
		c.order = append(c.order, d)
	}
}

// layerEntry is one entry of the given layer. Its body stays in the
// layer: holding the bodies would be another copy of the configuration's
// content, which may be megabytes.
type layerEntry struct {
	hdr *tar.Header
}

// completed is the layer Build appends: the given layer's bytes as they
// are (out is nil), or its entries as out lists them, each body streamed
// from the given layer as the tar is written.
type completed struct {
	data []byte
	out  []outEntry
}

// outEntry is one entry of a completed layer: a header, and the index of
// the given layer's entry whose body follows it, or -1 for a parent
// directory completion added.
type outEntry struct {
	hdr *tar.Header
	src int
}

// writeTo writes the completed layer's tar to w. Its errors are
// *StageError.
func (c *completed) writeTo(w io.Writer) error {
	if c.out == nil {
		if _, err := w.Write(c.data); err != nil {
			return &StageError{Stage: StageLayer, Err: err}
		}
		return nil
	}
	tr := tar.NewReader(bytes.NewReader(c.data))
	at := -1 // the given entry tr is at
	tw := tar.NewWriter(w)
	for _, e := range c.out {
		if err := tw.WriteHeader(e.hdr); err != nil {
			return &StageError{Stage: StageLayer, Err: fmt.Errorf("write the layer's entry %s: %w", e.hdr.Name, err)}
		}
		if e.src < 0 {
			continue
		}
		// The given entries come out in their order, each once.
		for at < e.src {
			if _, err := tr.Next(); err != nil {
				return &StageError{Stage: StageLayer, Err: fmt.Errorf("read the layer's entry %s: %w", e.hdr.Name, err)}
			}
			at++
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return &StageError{Stage: StageLayer, Err: fmt.Errorf("write the layer's entry %s: %w", e.hdr.Name, err)}
		}
	}
	if err := tw.Close(); err != nil {
		return &StageError{Stage: StageLayer, Err: err}
	}
	return nil
}

// errUnknown: resolving a path needs a base path not read yet.
var errUnknown = errors.New("unknown base path")

// completeLayer returns data with every entry moved to where unpacking
// it into the base would put it, and a directory entry, as the base has
// it or else 0755 and root's, before the first entry under each parent
// directory the layer does not have. A layer that needs neither is
// returned as given. read fills in what the base has at the paths it is
// asked for. Its errors are *StageError. What it returns holds no copy
// of data: the layer is written as it is compressed (completed.writeTo).
func completeLayer(data []byte, base map[string]treeEntry, read func(need map[string]bool) error) (*completed, error) {
	if len(data) == 0 {
		return &completed{data: data}, nil
	}
	if err := checkTar(data); err != nil {
		return nil, &StageError{Stage: StageLayer, Err: err}
	}
	entries, err := readEntries(data)
	if err != nil {
		return nil, &StageError{Stage: StageLayer, Err: err}
	}

	// Each pass unpacks what it can and asks for the base paths it missed;
	// the first asks for every parent the layer does not have, the next
	// for where the base's symlinks lead.
	var need map[string]bool
	for range maxLinks + 1 {
		if len(need) > 0 {
			if err := read(need); err != nil {
				return nil, err
			}
		}
		out, unknown, err := complete(entries, base)
		if err != nil {
			return nil, err
		}
		if len(unknown) == 0 {
			return &completed{data: data, out: out}, nil
		}
		for p := range unknown {
			if _, ok := base[p]; ok {
				delete(unknown, p) // asked for as the rest of a path
			}
		}
		need = unknown
	}
	return nil, stageErr(StageLayer, "the layer's paths go through more than %d symlinks of the base image", maxLinks)
}

func readEntries(data []byte) ([]layerEntry, error) {
	var entries []layerEntry
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		if escapes(h.Name) || (h.Typeflag == tar.TypeLink && escapes(h.Linkname)) {
			return nil, fmt.Errorf("the layer's entry %q leaves the image's root", h.Name)
		}
		entries = append(entries, layerEntry{hdr: h})
	}
}

// resolver unpacks a layer's entries in order into a view of the base: it
// knows what the base has (base), what the layer has put so far (layer),
// and which directories' base contents the layer hides (opaque).
type resolver struct {
	base    map[string]treeEntry
	layer   map[string]treeEntry
	opaque  map[string]bool
	unknown map[string]bool
	links   int
}

func (r *resolver) lookup(p string) (treeEntry, error) {
	if e, ok := r.layer[p]; ok {
		return e, nil
	}
	for d := parentOf(p); d != ""; d = parentOf(d) {
		if r.opaque[d] {
			return treeEntry{}, nil
		}
	}
	e, ok := r.base[p]
	if !ok {
		r.unknown[p] = true
		return treeEntry{}, errUnknown
	}
	return e, nil
}

// realDir is where directory p is, its symlinks followed within the root
// as a chroot follows them. Missing directories are made by unpacking,
// but a symlink to nothing or a file in the way fails, as it fails a
// build.
func (r *resolver) realDir(p string) (string, error) {
	cur := ""
	parts := strings.Split(p, "/")
	for i, c := range parts {
		if c == "" {
			continue
		}
		next := path.Join(cur, c)
		e, err := r.lookup(next)
		if err != nil {
			// Ask for the rest of the path too, so that one read of the
			// base answers it unless next is a symlink.
			for _, rest := range parts[i+1:] {
				next = path.Join(next, rest)
				r.unknown[next] = true
			}
			return "", err
		}
		switch e.kind {
		case tar.TypeDir, kindAbsent:
			cur = next
		case tar.TypeSymlink:
			if r.links++; r.links > maxLinks {
				return "", stageErr(StageLayer, "%s: more than %d symlinks of the base image on the way", p, maxLinks)
			}
			target := e.target
			if !strings.HasPrefix(target, "/") {
				target = cur + "/" + target
			}
			real, err := r.realDir(clean(path.Clean("/" + target)))
			if err != nil {
				return "", err
			}
			if real != "" {
				t, err := r.lookup(real)
				if err != nil {
					return "", err
				}
				if t.kind != tar.TypeDir {
					return "", stageErr(StageLayer, "the layer has entries under /%s, a symlink to /%s, which is not a directory in the base image", next, real)
				}
			}
			cur = real
		default:
			return "", stageErr(StageLayer, "the layer has entries under /%s, which is not a directory in the base image", next)
		}
	}
	return cur, nil
}

// complete unpacks the entries into the base's view and lists the
// completed layer's entries; it returns nil when the layer would be the
// given one, and the base paths it needs to know first, if any.
func complete(entries []layerEntry, base map[string]treeEntry) ([]outEntry, map[string]bool, error) {
	r := &resolver{base: base, layer: map[string]treeEntry{}, opaque: map[string]bool{}, unknown: map[string]bool{}}
	// A directory the layer has keeps the layer's metadata, even when it
	// comes after its contents.
	declared := map[string]bool{}
	for _, e := range entries {
		if e.hdr.Typeflag == tar.TypeDir {
			declared[clean(e.hdr.Name)] = true
		}
	}
	var out []outEntry
	changed := false
entries:
	for i, e := range entries {
		r.links = 0
		name := clean(e.hdr.Name)
		if name == "" {
			out = append(out, outEntry{hdr: e.hdr, src: i})
			continue
		}
		dir, err := r.realDir(parentOf(name))
		if errors.Is(err, errUnknown) {
			continue // the next pass knows more
		}
		if err != nil {
			return nil, nil, err
		}
		// The parents, outermost first.
		for _, d := range ancestors(dir) {
			if e, ok := r.layer[d]; (ok && e.kind == tar.TypeDir) || declared[d] {
				continue
			}
			got, err := r.lookup(d)
			if errors.Is(err, errUnknown) {
				continue entries
			}
			h := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch.Time}
			if got.kind == tar.TypeDir {
				h = parentHeader(d, got.dir)
			}
			out = append(out, outEntry{hdr: h, src: -1})
			r.layer[d] = treeEntry{kind: tar.TypeDir}
			changed = true
		}
		h := *e.hdr // a copy: the given headers serve every pass
		if moved := path.Join(dir, path.Base(name)); moved != name {
			h.Name = moved
			if e.hdr.Typeflag == tar.TypeDir {
				h.Name += "/"
			}
			h.Format = tar.FormatUnknown // the writer picks one that fits the new name
			changed = true
			name = moved
		}
		if h.Typeflag == tar.TypeLink {
			target := clean(h.Linkname)
			tdir, err := r.realDir(parentOf(target))
			if errors.Is(err, errUnknown) {
				continue entries
			}
			if err != nil {
				return nil, nil, err
			}
			if moved := path.Join(tdir, path.Base(target)); moved != target {
				h.Linkname = moved
				h.Format = tar.FormatUnknown
				changed = true
			}
		}
		r.unpack(name, &h)
		out = append(out, outEntry{hdr: &h, src: i})
	}
	if len(r.unknown) > 0 {
		return nil, r.unknown, nil
	}
	if !changed {
		return nil, nil, nil
	}
	return out, nil, nil
}

// unpack records what entry h at name leaves in the tree; a whiteout
// hides the base's path, an opaque whiteout its directory's contents.
func (r *resolver) unpack(name string, h *tar.Header) {
	base := path.Base(name)
	switch {
	case base == ".wh..wh..opq":
		r.opaque[parentOf(name)] = true
	case strings.HasPrefix(base, ".wh."):
		r.layer[path.Join(parentOf(name), strings.TrimPrefix(base, ".wh."))] = treeEntry{kind: kindAbsent}
	case h.Typeflag == tar.TypeDir:
		r.layer[name] = treeEntry{kind: tar.TypeDir}
	case h.Typeflag == tar.TypeSymlink:
		r.layer[name] = treeEntry{kind: tar.TypeSymlink, target: h.Linkname}
	default:
		r.layer[name] = treeEntry{kind: kindOther}
	}
}

// parentHeader is the entry of parent directory d as the base has it:
// its mode, numeric owner and xattrs, at the epoch.
func parentHeader(d string, base *tar.Header) *tar.Header {
	h := &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: base.Mode & 0o7777, Uid: base.Uid, Gid: base.Gid, ModTime: epoch.Time}
	for k, v := range base.PAXRecords {
		if strings.HasPrefix(k, "SCHILY.xattr.") {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords[k] = v
		}
	}
	if h.PAXRecords != nil {
		h.Format = tar.FormatPAX
	}
	return h
}

// readBaseTree reads what base has at the paths in need into tree: the
// file system its layers make, as mutate.Extract makes it (the topmost
// entry of each path; a whiteout, or a non-directory, hides the path and
// what is under it in the layers below), read from the top layer down and
// only as far as it takes to find every path. A path not found is absent;
// so is a relative symlink that climbs above the root, which
// mutate.Extract drops (a build would clamp it at the root).
//
// mutate.Extract remembers every path it has passed, which for a base of
// millions of entries is hundreds of MiB; only the paths asked for and
// their parents can hide or be what is asked for, so only they are
// remembered. At most MaxBaseEntries entries are read.
func readBaseTree(base v1.Image, need map[string]bool, tree map[string]treeEntry) error {
	relevant := map[string]bool{}
	for p := range need {
		for d := p; d != "" && !relevant[d]; d = parentOf(d) {
			relevant[d] = true
		}
	}
	layers, err := base.Layers()
	if err != nil {
		return err
	}
	r := &treeReader{relevant: relevant, left: maps.Clone(need), hides: map[string]bool{}, opaque: map[string]bool{}, tree: tree}
	for i := len(layers) - 1; i >= 0 && len(r.left) > 0; i-- {
		if err := r.layer(layers[i]); err != nil {
			return err
		}
	}
	for p := range r.left {
		tree[p] = treeEntry{kind: kindAbsent}
	}
	return nil
}

// treeReader is one readBaseTree: the paths that matter, those still to
// find, and for each path that matters already seen in a higher layer,
// whether it hides what is under it in lower layers (mutate.Extract's
// fileMap), and the directories whose lower layers' contents are hidden
// (opaque; "" is the root).
type treeReader struct {
	relevant, left, hides, opaque map[string]bool
	tree                          map[string]treeEntry
	entries                       int
}

// layer reads one layer's entries, until every path is found, with
// mutate.Extract's rules.
func (r *treeReader) layer(l v1.Layer) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	// Opaque markers hide only lower layers' entries.
	opaque := map[string]bool{}
	tr := tar.NewReader(rc)
	for len(r.left) > 0 {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if r.entries++; r.entries > maxBaseEntries {
			return tooManyEntries()
		}
		name := path.Clean(h.Name)
		if escapes(name) {
			return fmt.Errorf("unsafe tar path %q", h.Name)
		}
		if (h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink) && !path.IsAbs(h.Linkname) &&
			escapes(path.Join(path.Dir(name), h.Linkname)) {
			continue // mutate.Extract drops it
		}
		base := path.Base(name)
		if base == ".wh..wh..opq" {
			if d := clean(path.Dir(name)); d == "" || r.relevant[d] {
				opaque[d] = true
			}
			continue
		}
		// The path an entry is about: a whiteout's is the path it removes.
		tombstone := strings.HasPrefix(base, ".wh.")
		if tombstone {
			name = path.Join(path.Dir(name), strings.TrimPrefix(base, ".wh."))
		}
		p := clean(name)
		if !r.relevant[p] {
			continue
		}
		if _, ok := r.hides[p]; (ok && !tombstone) || r.hidden(p) {
			continue
		}
		r.hides[p] = tombstone || h.Typeflag != tar.TypeDir
		if !r.left[p] {
			continue
		}
		delete(r.left, p)
		switch {
		case tombstone:
			r.tree[p] = treeEntry{kind: kindAbsent}
		case h.Typeflag == tar.TypeDir:
			r.tree[p] = treeEntry{kind: tar.TypeDir, dir: h}
		case h.Typeflag == tar.TypeSymlink:
			r.tree[p] = treeEntry{kind: tar.TypeSymlink, target: h.Linkname}
		default:
			r.tree[p] = treeEntry{kind: kindOther}
		}
	}
	maps.Copy(r.opaque, opaque)
	if len(r.left) > 0 {
		// Read to the end, so that the layer's digest is verified.
		if _, err := io.Copy(io.Discard, rc); err != nil {
			return err
		}
	}
	return nil
}

// hidden says whether a higher layer hid a parent of p, by a whiteout, a
// non-directory or an opaque marker.
func (r *treeReader) hidden(p string) bool {
	if r.opaque[""] {
		return true
	}
	for d := parentOf(p); d != ""; d = parentOf(d) {
		if r.hides[d] || r.opaque[d] {
			return true
		}
	}
	return false
}

// escapes says whether a tar name goes above the root, which no runtime
// unpacks.
func escapes(name string) bool {
	p := path.Clean(strings.TrimPrefix(name, "/"))
	return p == ".." || strings.HasPrefix(p, "../")
}

// clean is a tar name as a path relative to the root, without "./", a
// leading or a trailing slash; "" is the root.
func clean(name string) string {
	p := path.Clean("/" + name)
	return strings.TrimPrefix(p, "/")
}

// parentOf is p's directory, "" for the root.
func parentOf(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}

// ancestors are p and its parents, outermost first, without the root.
func ancestors(p string) []string {
	var out []string
	for d := p; d != ""; d = parentOf(d) {
		out = append(out, d)
	}
	slices.Reverse(out)
	return out
}
