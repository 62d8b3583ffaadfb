package bootcsim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Version is the bootc release a simulated node runs. The releases
// differ in what the daemon must detect: whether `bootc switch` can
// stage download-only.
type Version string

const (
	// Version116 is bootc 1.16.9: `bootc upgrade` has --download-only
	// and --from-downloaded, `bootc switch` refuses them as unknown
	// arguments; both have --apply and --soft-reboot.
	Version116 Version = "1.16.9"
	// VersionMain is bootc's main branch after PR 2342 (2026-07):
	// `bootc switch` also has --download-only and --from-downloaded. No
	// release is known to carry it yet, hence no version number.
	VersionMain Version = "main"
	// DefaultVersion is what a node runs unless told otherwise: the
	// release BOOTC.md describes.
	DefaultVersion = Version116
)

// ParseVersion accepts the versions the simulator models.
func ParseVersion(s string) (Version, error) {
	switch v := Version(s); v {
	case Version116, VersionMain:
		return v, nil
	}
	return "", fmt.Errorf("bootc version %q is not simulated: want %s or %s", s, Version116, VersionMain)
}

// SwitchDownloadOnly says whether `bootc switch` has --download-only and
// --from-downloaded.
func (v Version) SwitchDownloadOnly() bool { return v == VersionMain }

func (st *state) version() Version {
	if st.BootcVersion == "" {
		return DefaultVersion
	}
	return st.BootcVersion
}

// BootcVersion is the node's simulated bootc release; DefaultVersion
// for a node never initialized.
func (s *Sim) BootcVersion() (Version, error) {
	st, err := s.loadState()
	if errors.Is(err, ErrNotInitialized) {
		return DefaultVersion, nil
	}
	if err != nil {
		return "", err
	}
	return st.version(), nil
}

// SetBootcVersion makes the node run bootc release v from now on, as a
// node whose bootc was updated.
func (s *Sim) SetBootcVersion(v Version) error {
	if _, err := ParseVersion(string(v)); err != nil {
		return err
	}
	if _, err := os.Stat(s.simDir()); errors.Is(err, fs.ErrNotExist) {
		return ErrNotInitialized
	}
	unlock, err := s.lock(true)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := s.loadState()
	if err != nil {
		return err
	}
	st.BootcVersion = v
	return s.saveState(st)
}
