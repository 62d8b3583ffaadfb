package containerfile

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteDir writes the build context into dir, which is created if needed.
func (r *Result) WriteDir(dir string) error {
	for _, f := range r.Context {
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteTar writes the build context as a tar stream, as a builder pod
// receives it: sorted, fixed times, root-owned.
func (r *Result) WriteTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range r.Context {
		if d := filepath.ToSlash(filepath.Dir(f.Name)); d != "." && !dirs[d] {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: 0o644, Size: int64(len(f.Data)), ModTime: epoch}); err != nil {
			return fmt.Errorf("tar header for %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}
