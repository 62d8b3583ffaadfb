// Package memlimit gives the Go runtime a soft memory limit below the
// container's. Without one the collector lets the heap grow to twice
// what is live before it runs, so a process whose live heap is half its
// container's limit is killed for memory it no longer uses. GOMEMLIMIT
// sets such a limit, but a manifest would have to repeat the container's
// limit in it and keep the two in step; Set reads the limit from the
// process's cgroup instead, and leaves an explicit GOMEMLIMIT alone.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Fraction is the share of the container's limit given to the runtime:
// the rest is for what the runtime does not count (the binary's mapped
// pages, buffers of the kernel charged to the container) and for the
// collector to catch up.
const Fraction = 0.8

// CgroupRoot is where a container sees its own cgroup.
const CgroupRoot = "/sys/fs/cgroup"

// noLimit is what cgroup v1 reports for no limit (the largest page
// multiple of an int64); anything this large is no limit.
const noLimit = 1 << 62

// FromCgroup is the memory limit of the cgroup mounted at root, in
// bytes: cgroup v2's memory.max, else v1's memory/memory.limit_in_bytes.
// It is 0 when there is no limit or no such file.
func FromCgroup(root string) (int64, error) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		raw, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		v := strings.TrimSpace(string(raw))
		if v == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s: %q is not a memory limit", filepath.Join(root, name), v)
		}
		if n >= noLimit {
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}

// Set gives the runtime a soft memory limit of Fraction of the limit of
// the cgroup at root, unless GOMEMLIMIT is set or there is no limit. It
// returns the limit it set, 0 when it set none.
func Set(root string) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := FromCgroup(root)
	if err != nil || limit == 0 {
		return 0, err
	}
	soft := int64(float64(limit) * Fraction)
	debug.SetMemoryLimit(soft)
	return soft, nil
}
