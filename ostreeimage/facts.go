package ostreeimage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Facts are what the Repo read or wrote of a commit's metadata and
// kargs.d, kept in Repo.FactsDir by commit checksum. A commit never
// changes, so nothing kept goes stale: each ostree run saved is one
// process start (about 20 ms of CPU for ostree's libraries alone), and
// importing an image ran seven of them where libostree's callers (bootc)
// run none.
//
// Each fact is a file <FactsDir>/<checksum>.<name>; a missing or
// unreadable one is read from the repository again.

// layerKargsFact names a layer commit's kargs.d files.
const layerKargsFact = "kargs.d"

// layerKargs is a layer commit's usr/lib/bootc/kargs.d: its regular
// files by name. Other is set when the directory holds anything else (a
// symlink, a directory): the image's kernel arguments are then read
// from its own tree.
type layerKargs struct {
	Files map[string]string `json:"files,omitempty"`
	Other bool              `json:"other,omitempty"`
}

func (r Repo) factPath(csum, name string) string {
	return filepath.Join(r.FactsDir, csum+"."+name)
}

// fact returns the kept fact, if any.
func (r Repo) fact(csum, name string) (string, bool) {
	if r.FactsDir == "" {
		return "", false
	}
	data, err := os.ReadFile(r.factPath(csum, name))
	if err != nil {
		return "", false
	}
	return string(data), true
}

// keep records a fact; failing to is no error (it is read again).
func (r Repo) keep(csum, name, value string) {
	if r.FactsDir == "" {
		return
	}
	if err := os.MkdirAll(r.FactsDir, 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(r.FactsDir, ".fact-")
	if err != nil {
		return
	}
	_, werr := f.WriteString(value)
	if cerr := f.Close(); werr != nil || cerr != nil {
		_ = os.Remove(f.Name())
		return
	}
	if os.Rename(f.Name(), r.factPath(csum, name)) != nil {
		_ = os.Remove(f.Name())
	}
}

// forget drops the facts of commits whose refs are gone.
func (r Repo) forget(csums []string) {
	if r.FactsDir == "" {
		return
	}
	for _, c := range csums {
		matches, _ := filepath.Glob(filepath.Join(r.FactsDir, c+".*"))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
}

// metadata is the value of a commit's metadata key: a string's content
// (unquoted), or ostree's text of any other value.
func (r Repo) metadata(ctx context.Context, csum, key string) (string, error) {
	if v, ok := r.fact(csum, key); ok {
		return v, nil
	}
	out, err := r.ostree(ctx, "show", "--print-metadata-key="+key, csum)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(out)
	if strings.HasPrefix(v, "'") || strings.HasPrefix(v, `"`) {
		if v, err = parseGVariantString(v); err != nil {
			return "", fmt.Errorf("commit %s: %s: %w", csum, key, err)
		}
	}
	r.keep(csum, key, v)
	return v, nil
}

// layerKargsOf reads a layer's kargs.d: from tree, the layer unpacked,
// when given; else kept, or checked out of the commit.
func (r Repo) layerKargsOf(ctx context.Context, csum, tree string) (layerKargs, error) {
	if tree == "" {
		if v, ok := r.fact(csum, layerKargsFact); ok {
			var k layerKargs
			if json.Unmarshal([]byte(v), &k) == nil {
				return k, nil
			}
		}
		if err := os.MkdirAll(r.tempDir(), 0o700); err != nil {
			return layerKargs{}, err
		}
		dir, err := os.MkdirTemp(r.tempDir(), "layer-kargs-")
		if err != nil {
			return layerKargs{}, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		tree = dir
		out := filepath.Join(dir, filepath.FromSlash(KargsDir))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return layerKargs{}, err
		}
		if _, err := r.ostree(ctx, "checkout", "--subpath=/"+KargsDir, csum, out); err != nil && !errors.Is(err, errNoSuchPath) {
			return layerKargs{}, err
		}
	}
	k := layerKargs{Files: map[string]string{}}
	dir := filepath.Join(tree, filepath.FromSlash(KargsDir))
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return layerKargs{}, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			k.Other = true
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return layerKargs{}, err
		}
		k.Files[e.Name()] = string(data)
	}
	if raw, err := json.Marshal(k); err == nil {
		r.keep(csum, layerKargsFact, string(raw))
	}
	return k, nil
}

// imageKargs is an imported image's kernel arguments: with facts, its
// layers' kargs.d merged as ostree merged their trees, when it is not
// flattened; else (or when a layer's kargs.d is not plain files) read
// from its tree.
func (r Repo) imageKargs(ctx context.Context, im *Image) ([]string, error) {
	// Without facts each layer's kargs.d would be checked out: one
	// checkout of the image's is fewer.
	if !im.Flattened && r.FactsDir != "" {
		kargs, ok, err := r.mergedKargs(ctx, im.Layers)
		if err != nil || ok {
			return kargs, err
		}
	}
	return r.kargs(ctx, im.Checksum)
}

// mergedKargs is the kernel arguments of an image merged from these
// layers' commits (base first), as its kargs.d merged by ostree holds
// them: a file of an upper layer replaces the lower layers' one of the
// same name. ok is false when a layer's kargs.d holds anything but
// regular files: read the image's own tree then.
func (r Repo) mergedKargs(ctx context.Context, layers []string) (kargs []string, ok bool, err error) {
	merged := map[string]string{}
	for _, c := range layers {
		if c == "" {
			return nil, false, nil
		}
		k, err := r.layerKargsOf(ctx, c, "")
		if err != nil {
			return nil, false, err
		}
		if k.Other {
			return nil, false, nil
		}
		for name, data := range k.Files {
			merged[name] = data
		}
	}
	var files []kargsDirFile
	for name, data := range merged {
		if strings.HasSuffix(name, ".toml") {
			files = append(files, kargsDirFile{name: path.Join(KargsDir, name), data: []byte(data)})
		}
	}
	kargs, err = kargsOf(files, r.arch())
	return kargs, err == nil, err
}
