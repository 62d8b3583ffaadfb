package bootcsim

import (
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
)

// owner is a file's owner, root when the platform does not say.
func owner(info fs.FileInfo) (uid, gid int) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return 0, 0
}

// clearImmutable runs chattr -i on a directory that ostree made
// immutable.
func clearImmutable(dir string) error {
	out, err := exec.Command("chattr", "-i", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chattr -i %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}
