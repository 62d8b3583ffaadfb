package bootcsim

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Files in a node's root.
const (
	simDirName        = ".bootc-sim"
	stateFileName     = "state.json"
	lockFileName      = "lock"
	bootIDFileName    = "boot_id"
	rebootRequestName = "reboot-requested"
	// nextRootName, under the node's run/, is where a prepared soft
	// reboot's target is recorded, as ostree prepares /run/nextroot for
	// systemd's soft-reboot.
	nextRootName = "nextroot"
)

// ErrNotInitialized is returned for a node directory `sim init` has not
// set up.
var ErrNotInitialized = errors.New("not a bootc host: the simulator has not been initialized (bootc-sim sim init IMAGE)")

// state is what the simulator records beside the ostree sysroot.
type state struct {
	// Booted is the deployment (<checksum>.<serial>) the last simulated
	// boot booted.
	Booted string `json:"booted"`
	// Images is the metadata of the pulled images, by ostree commit.
	Images map[string]imageInfo `json:"images"`
	// FailingDigests are the image digests whose health check fails.
	FailingDigests []string `json:"failingDigests,omitempty"`
	// BootcVersion is the simulated bootc release; "" is DefaultVersion.
	BootcVersion Version `json:"bootcVersion,omitempty"`
	// SoftReboots is systemd's SoftRebootsCount: soft reboots since the
	// last (full) boot of the kernel.
	SoftReboots int `json:"softReboots"`
}

// imageInfo is what status reports about an image, kept from the pull.
type imageInfo struct {
	Digest       string `json:"digest"`
	Architecture string `json:"architecture"`
	Version      string `json:"version,omitempty"`
	// Created is the image's creation time, RFC 3339 in UTC.
	Created string `json:"created,omitempty"`
	// Kargs are the image's usr/lib/bootc/kargs.d arguments for the
	// host's architecture.
	Kargs []string `json:"kargs,omitempty"`
}

func (s *Sim) simDir() string { return filepath.Join(s.Root, simDirName) }

func (s *Sim) loadState() (*state, error) {
	data, err := os.ReadFile(filepath.Join(s.simDir(), stateFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotInitialized
	}
	if err != nil {
		return nil, err
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("read simulator state: %w", err)
	}
	if st.Images == nil {
		st.Images = map[string]imageInfo{}
	}
	return st, nil
}

func (s *Sim) saveState(st *state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.simDir(), stateFileName), append(data, '\n'), 0o644)
}

// lock serializes the simulator's commands on one node, as bootc holds
// the sysroot lock: exclusive for changes, shared for reads. The lock
// goes with the process, so a killed command leaves none behind.
func (s *Sim) lock(exclusive bool) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(s.simDir(), lockFileName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { _ = f.Close() }, nil
}

// writeFileAtomic replaces path with data through a rename, so readers
// and a kill midway see the old or the new content, never a part.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// replaceSymlink points path at target, replacing what path was.
func replaceSymlink(target, path string) error {
	tmp := path + ".tmp-link"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// newBootID is a random version 4 UUID, as the kernel's boot_id.
func newBootID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
