package nodeconfig

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// rejectedPrefixes are never written: kernel or runtime filesystems
// (/proc, /sys, /dev, /run, /tmp), the boot and deployment machinery bootc
// owns (/boot, /sysroot, /ostree), or /usr/etc, which `bootc container
// lint` refuses because ostree uses it for the pristine /etc.
var rejectedPrefixes = []string{"/proc", "/sys", "/dev", "/run", "/tmp", "/boot", "/sysroot", "/ostree", "/usr/etc"}

// rejectedVarPrefixes are under /var but not the node's configuration:
// /var/run is a link to /run on these systems (the daemon would write
// through it into the runtime filesystem), and /var/lib/strata is the
// daemon's own state, which a MachineConfig could otherwise forge or
// replace.
var rejectedVarPrefixes = []struct{ prefix, why string }{
	{"/var/run", "it is a link to /run, which is not part of the image or of the node's persistent state"},
	{"/var/lib/strata", "it is the Strata daemon's own state on the node"},
}

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
	for _, r := range rejectedVarPrefixes {
		if _, bad := underAny(p, []string{r.prefix}); bad {
			return "must not be under " + r.prefix + ": " + r.why
		}
	}
	return ""
}

// CheckNodePath says what is wrong with the path of a node item, or ""
// when a MachineConfig may write it: the validator's own rule, which the
// daemon applies again to every item before it writes, so that a plan
// that did not come through validation still cannot reach /run or the
// daemon's state.
func CheckNodePath(p string) string {
	return checkPath(p)
}

// varBound reports whether content at p belongs to the node's /var rather
// than to the image.
func varBound(p string) bool {
	_, ok := underAny(p, varPrefixes)
	return ok
}

// checkArg says what is wrong with a kernel argument, or "" when it is one
// argument that can be written into a kargs.d TOML string and leaves the
// node's boot alone (refusedArg). Double quotes
// may hold spaces (dyndbg="file x.c +p"), as on the kernel command line;
// an unclosed quote would swallow the arguments after it there.
func checkArg(a string) string {
	switch {
	case a == "":
		return "must not be empty"
	case len(a) > 4096:
		return "must be at most 4096 bytes"
	case !utf8.ValidString(a):
		return "must be valid UTF-8"
	case strings.IndexFunc(a, unicode.IsControl) >= 0:
		return "must not contain control characters"
	case strings.Count(a, `"`)%2 != 0:
		return "must close its double quote: an open quote runs to the end of the kernel command line"
	}
	quoted := false
	for _, r := range a {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == ' ':
			return "must be one argument: spaces outside double quotes separate arguments"
		case unicode.IsSpace(r):
			return "must not contain whitespace other than spaces outside double quotes"
		}
	}
	return refusedArg(a)
}

// splitKernelArguments splits one spec.kernelArguments entry into
// arguments the way OpenShift's daemon does (splitKernelArguments in the
// Machine Config Daemon, after the kernel's next_arg()): at spaces outside
// double quotes, with the quotes kept in the argument. Other whitespace
// is not a separator here: it is a control character, which checkArg
// refuses instead of silently reading a tab or newline as a space.
func splitKernelArguments(entry string) []string {
	var args []string
	start, quoted := -1, false
	for i := 0; i < len(entry); i++ {
		c := entry[i]
		if c == ' ' && !quoted {
			if start >= 0 {
				args = append(args, entry[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
		if c == '"' {
			quoted = !quoted
		}
	}
	if start >= 0 {
		args = append(args, entry[start:])
	}
	return args
}
