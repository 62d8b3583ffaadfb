package liveapply

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/strata-dev/strata/rollout/hostfs"
)

// Mismatch is a live path that differs from what it must be.
type Mismatch struct {
	Path string
	// Diffs say what differs, one phrase each ("mode 0644, want 0600").
	Diffs []string
	// Pins is true when ostree's /etc merge sees a difference (type,
	// content, link target, mode, owner): at the next boot the path
	// becomes a local modification that no later image changes. An
	// xattr-only mismatch does not pin (ostree ignores xattrs) but is
	// still wrong for the running system (an SELinux label).
	Pins bool
}

func (m Mismatch) String() string {
	return m.Path + ": " + strings.Join(m.Diffs, ", ")
}

// Verify compares each of paths in the live /etc with what Apply makes
// of it (the image's content, type, link target, mode and owner, the
// staged etc's xattrs, every one) and returns the paths that differ. An
// error means the comparison could not be made.
func Verify(host *hostfs.Root, deployment string, paths []string) ([]Mismatch, error) {
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			return nil, err
		}
	}
	t, err := open(host, deployment)
	if err != nil {
		return nil, err
	}
	defer t.close()
	var out []Mismatch
	for _, p := range paths {
		want, err := t.want(p)
		if err != nil {
			return nil, err
		}
		live, err := readIn(t.live, p)
		if errors.Is(err, unix.ELOOP) {
			out = append(out, Mismatch{Path: p, Diffs: []string{"a link is in place of a parent directory in the live /etc"}, Pins: true})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the live %s: %w", p, err)
		}
		if diffs, pins := differences(&live, &want); len(diffs) > 0 {
			out = append(out, Mismatch{Path: p, Diffs: diffs, Pins: pins})
		}
	}
	return out, nil
}

// LocalModifications lists which of paths the live /etc has otherwise
// than the image of deployment (its usr/etc) in what ostree's merge
// compares (type, content, link target, mode, owner; not xattrs): the
// node's local modifications, which ostree keeps over any image at the
// next boot. Apply overwrites such a path with the image's version; a
// caller that wants to keep the node's own change (as a reboot would)
// checks first. The deployment to compare with is the one whose image
// the live /etc follows: the booted one, unless another was applied live
// since the boot.
func LocalModifications(host *hostfs.Root, deployment string, paths []string) ([]Mismatch, error) {
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			return nil, err
		}
	}
	t, err := open(host, deployment)
	if err != nil {
		return nil, err
	}
	defer t.close()
	var out []Mismatch
	for _, p := range paths {
		image, err := readIn(t.pristine, p)
		if err != nil {
			return nil, fmt.Errorf("read %s in the image's usr/etc: %w", p, err)
		}
		live, err := readIn(t.live, p)
		if errors.Is(err, unix.ELOOP) {
			out = append(out, Mismatch{Path: p, Diffs: []string{"a link is in place of a parent directory in the live /etc"}, Pins: true})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the live %s: %w", p, err)
		}
		if diffs := ostreeDifferences(&live, &image); len(diffs) > 0 {
			out = append(out, Mismatch{Path: p, Diffs: diffs, Pins: true})
		}
	}
	return out, nil
}

// MismatchError is the error of a verification that found mismatches.
type MismatchError struct {
	Mismatches []Mismatch
}

func (e *MismatchError) Error() string {
	s := make([]string, len(e.Mismatches))
	for i, m := range e.Mismatches {
		s[i] = m.String()
	}
	return "the live /etc differs from the staged deployment: " + strings.Join(s, "; ")
}

// ApplyAndVerify applies paths and verifies them; mismatches after a
// successful write are a *MismatchError.
func ApplyAndVerify(host *hostfs.Root, deployment string, paths []string) ([]Change, error) {
	changes, err := Apply(host, deployment, paths)
	if err != nil {
		return changes, err
	}
	ms, err := Verify(host, deployment, paths)
	if err != nil {
		return changes, fmt.Errorf("verify the live /etc: %w", err)
	}
	if len(ms) > 0 {
		return changes, &MismatchError{Mismatches: ms}
	}
	return changes, nil
}
