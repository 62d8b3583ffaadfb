package containerfile

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rejectedPrefixes are never written: they are kernel or runtime
// filesystems (/proc, /sys, /dev, /run, /tmp), the boot and deployment
// machinery bootc owns (/boot, /sysroot, /ostree), or /usr/etc, which
// `bootc container lint` refuses because ostree uses it for the pristine
// /etc.
var rejectedPrefixes = []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/boot", "/sysroot", "/ostree", "/usr/etc"}

// varPrefixes are state that a switch to a new image never changes: /var
// itself and the directories that are links into /var on image-mode
// systems. Content for them is written on the node by the daemon.
var varPrefixes = []string{"/var", "/home", "/root", "/srv", "/opt", "/mnt", "/media", "/usr/local"}

func underAny(p string, prefixes []string) (string, bool) {
	for _, pre := range prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return pre, true
		}
	}
	return "", false
}

// checkPath says what is wrong with a node path, or "" when it is usable.
// Paths must be absolute and clean so that two spellings of one path cannot
// slip past the duplicate checks, and the tar entry names are unambiguous.
func checkPath(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "must be an absolute path"
	case !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "must be valid UTF-8 without control characters"
	case p == "/..", strings.HasPrefix(p, "/../"), strings.Contains(p, "/../"), strings.HasSuffix(p, "/.."):
		return "must not contain '..'"
	case p == "/":
		return "must not be the root directory"
	case path.Clean(p) != p:
		return "must be a clean path (no '.' elements, '//' or trailing '/')"
	}
	if pre, bad := underAny(p, rejectedPrefixes); bad {
		return "must not be under " + pre + ": it is not part of the image or of the node's persistent state"
	}
	return ""
}

// varBound reports whether content at p belongs to the node's /var rather
// than to the image.
func varBound(p string) bool {
	_, ok := underAny(p, varPrefixes)
	return ok
}

// checkArg says what is wrong with a kernel argument, or "" when it is one
// argument that can be written into a kargs.d TOML string.
func checkArg(a string) string {
	switch {
	case a == "":
		return "must not be empty"
	case len(a) > 4096:
		return "must be at most 4096 bytes"
	case !utf8.ValidString(a):
		return "must be valid UTF-8"
	case strings.IndexFunc(a, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return "must be a single argument without whitespace or control characters"
	}
	return ""
}
