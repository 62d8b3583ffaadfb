// Command leakfinder is what a hostile RUN step would do to find registry
// credentials: it looks everywhere a build step can read for two secrets
// it is given only as SHA-256 hashes and lengths, so that neither the
// Containerfile nor its own command line carries them.
//
// It searches its environment; every process's environ, cmdline and
// mountinfo under /proc; every file of the image it runs in; then it
// escapes buildah's chroot (chroot(2) into a subdirectory, chdir("..")
// past the old root, chroot(".")), which a RUN step can do with the
// CAP_SYS_CHROOT buildah gives it, and reads what the container around the
// build holds: the files and directories that any process's command line
// or environment names, every tmpfs mount (Secret volumes are tmpfs), and
// /run, /etc and /tmp. Files over 1 MiB are skipped: credentials are
// small.
//
// A secret is found when a token of its length (a maximal run of base64
// characters, or of password characters) hashes to it. It prints one
// "LEAK" line per finding and exits 1 if there was any.
//
// Usage: leakfinder NAME=SHA256HEX:LEN...
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

type needle struct {
	name string
	sum  [32]byte
	n    int
}

const (
	maxFiles = 100000
	maxBytes = 512 << 20
	// maxFileSize skips larger files: credentials are small, and
	// binaries would spend the budget.
	maxFileSize = 1 << 20
)

type finder struct {
	needles       []needle
	leaks         []string
	files, nbytes int
	seen          map[string]bool
}

func main() {
	f := &finder{seen: map[string]bool{}}
	for _, a := range os.Args[1:] {
		name, rest, ok1 := strings.Cut(a, "=")
		h, l, ok2 := strings.Cut(rest, ":")
		sum, err := hex.DecodeString(h)
		n, err2 := strconv.Atoi(l)
		if !ok1 || !ok2 || err != nil || err2 != nil || len(sum) != 32 || n <= 0 {
			fmt.Fprintf(os.Stderr, "leakfinder: bad argument %q, want NAME=SHA256HEX:LEN\n", a)
			os.Exit(2)
		}
		nd := needle{name: name, n: n}
		copy(nd.sum[:], sum)
		f.needles = append(f.needles, nd)
	}

	f.scan("the environment", []byte(strings.Join(os.Environ(), "\x00")))
	paths := f.scanProc()
	f.walk("/", 64, "/proc", "/sys", "/dev")
	fmt.Printf("leakfinder: searched the image: %d files, %d bytes\n", f.files, f.nbytes)

	if err := escape(); err != nil {
		fmt.Printf("leakfinder: escaped the chroot: no (%v)\n", err)
	} else {
		fmt.Println("leakfinder: escaped the chroot: yes")
		before := f.files
		paths = append(paths, f.scanProc()...)
		// The likeliest places first, as the budget may run out: files
		// that processes name, tmpfs mounts, the usual places, then
		// directories that processes name.
		var files, dirs []string
		for _, p := range paths {
			if info, err := os.Stat(p); err == nil && info.IsDir() {
				dirs = append(dirs, p)
			} else if err == nil {
				files = append(files, p)
			}
		}
		sort.Strings(files)
		sort.Strings(dirs)
		for _, group := range [][]string{files, tmpfsMounts(), {"/run", "/var/run", "/etc", "/tmp", "/var/tmp"}, dirs} {
			for _, p := range group {
				f.walk(p, 6, "/proc", "/sys", "/dev")
			}
		}
		fmt.Printf("leakfinder: searched around the chroot: %d files\n", f.files-before)
	}
	fmt.Printf("leakfinder: searched %d files, %d bytes in all\n", f.files, f.nbytes)
	if f.files >= maxFiles || f.nbytes >= maxBytes {
		fmt.Println("leakfinder: the budget ran out before the search ended")
	}
	for _, l := range f.leaks {
		fmt.Println("leakfinder: LEAK", l)
	}
	if len(f.leaks) > 0 {
		os.Exit(1)
	}
}

// scanProc searches every process's environ, cmdline and mountinfo and
// returns the absolute paths they name.
func (f *finder) scanProc() []string {
	ents, _ := os.ReadDir("/proc")
	var paths []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		for _, k := range []string{"environ", "cmdline", "mountinfo"} {
			p := "/proc/" + e.Name() + "/" + k
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			f.scan(p, b)
			if k == "mountinfo" {
				continue
			}
			for _, field := range bytes.FieldsFunc(b, func(r rune) bool { return r == 0 || r == '=' || r == ',' || r == ':' }) {
				if len(field) > 1 && field[0] == '/' {
					paths = append(paths, string(field))
				}
			}
		}
	}
	return paths
}

// escape leaves a chroot that did not pivot the root away.
func escape() error {
	dir, err := os.MkdirTemp("/", ".leakfinder-")
	if err != nil {
		return err
	}
	if err := syscall.Chroot(dir); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	for i := 0; i < 256; i++ {
		if err := syscall.Chdir(".."); err != nil {
			return fmt.Errorf("chdir: %w", err)
		}
	}
	return syscall.Chroot(".")
}

// tmpfsMounts are the tmpfs mount points this process sees.
func tmpfsMounts() []string {
	fh, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		for i, fl := range fields {
			if fl == "-" && i+1 < len(fields) && fields[i+1] == "tmpfs" && len(fields) > 4 {
				out = append(out, fields[4])
			}
		}
	}
	return out
}

// walk scans the regular files under root, to depth levels, skipping the
// trees in skip and never following symbolic links but for root itself.
func (f *finder) walk(root string, depth int, skip ...string) {
	info, err := os.Stat(root)
	if err != nil {
		return
	}
	if !info.IsDir() {
		f.file(root)
		return
	}
	base := strings.Count(filepath.Clean(root), "/")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			for _, s := range skip {
				if p == s && root != s {
					return fs.SkipDir
				}
			}
			if strings.Count(p, "/")-base >= depth {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			f.file(p)
		}
		return nil
	})
}

func (f *finder) file(p string) {
	if f.seen[p] || f.files >= maxFiles || f.nbytes >= maxBytes {
		return
	}
	f.seen[p] = true
	fh, err := os.Open(p)
	if err != nil {
		return
	}
	defer fh.Close()
	if info, err := fh.Stat(); err != nil || info.Size() > maxFileSize {
		return
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxFileSize))
	if err != nil {
		return
	}
	f.files++
	f.nbytes += len(b)
	f.scan(p, b)
}

// scan hashes every token of b whose length is a needle's.
func (f *finder) scan(where string, b []byte) {
	for _, alphabet := range []func(byte) bool{isBase64, isPassword} {
		start := -1
		for i := 0; i <= len(b); i++ {
			if i < len(b) && alphabet(b[i]) {
				if start < 0 {
					start = i
				}
				continue
			}
			if start >= 0 {
				f.token(where, b[start:i])
				start = -1
			}
		}
	}
}

func (f *finder) token(where string, tok []byte) {
	for _, n := range f.needles {
		if len(tok) == n.n && sha256.Sum256(tok) == n.sum {
			leak := n.name + " in " + where
			if !slices.Contains(f.leaks, leak) {
				f.leaks = append(f.leaks, leak)
			}
		}
	}
}

func isBase64(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}

func isPassword(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
