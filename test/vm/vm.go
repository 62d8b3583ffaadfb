package vm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/test/testenv"
)

// GuestHost is the address in the guest's user network behind which the
// host's loopback ports are (the base image's relays forward the guest's
// own 127.0.0.1:PORT there).
const GuestHost = "10.0.2.100"

// File is a file of the config drive.
type File struct {
	// Name is its path in the drive (mounted at /run/configdrive).
	Name string
	Data []byte
	Mode os.FileMode
}

// Config says what to run.
type Config struct {
	// Disk is the raw disk image to boot (bootdisk.Build); the VM writes
	// to a copy-on-write overlay of it, so it stays as it is.
	Disk string
	// Kernel is GRUB's -kernel image; empty: .infra/vm/grub.lnx (hack/vm/base.sh).
	Kernel string
	// MemoryMiB is the guest's memory; 0: 640.
	MemoryMiB int
	// Ports are the host's loopback ports the guest may reach: the host's
	// 127.0.0.1:Ports[p] at GuestHost:p (the base image relays the guest's
	// own 127.0.0.1:p there for the API server's and the registry's p).
	Ports map[int]int
	// ConfigDrive is the config drive's content (the second virtio disk,
	// /dev/vdb); empty: no drive.
	ConfigDrive []File
}

// VM is a running QEMU.
type VM struct {
	// Dir holds the VM's overlay, config drive, console.log and
	// markers.log; it is kept after the test.
	Dir string

	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error

	mu   sync.Mutex
	seen int // markers returned by WaitMarker
}

// Marker is one report of the guest on its second serial port.
type Marker struct {
	// Name is what happened ("multi-user").
	Name string
	// BootID is the guest's boot id: a new one after every reboot.
	BootID string
	// Deployment is the booted ostree deployment, "CHECKSUM.SERIAL".
	Deployment string
	// Probe is the config drive's probe's output, line by line.
	Probe []string
}

// Dirs under .infra/vm: the base's build puts grub.lnx there, the harness
// its logs and its relay.
func infraVM(t testing.TB) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, ".infra", "vm")
}

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// goBuild builds the working tree's package pkg (./cmd/...) as a static
// binary under .infra/vm/bin, once per test binary, and returns its path.
func goBuild(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tags, err := os.ReadFile(filepath.Join(root, "hack", "go-tags"))
	if err != nil {
		t.Fatal(err)
	}
	// .infra may be shared by several checkouts (worktrees): one
	// directory of binaries per checkout.
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(root, ".infra", "vm", "bin", hex.EncodeToString(sum[:4]), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-tags", strings.TrimSpace(string(tags)), "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v: %s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// Start boots a VM and kills it when the test ends.
func Start(t testing.TB, c Config) *VM {
	t.Helper()
	kernel := c.Kernel
	if kernel == "" {
		kernel = filepath.Join(infraVM(t), "grub.lnx")
	}
	if _, err := os.Stat(kernel); err != nil {
		t.Fatalf("GRUB -kernel image: %v (make vm-base builds it)", err)
	}
	mem := c.MemoryMiB
	if mem == 0 {
		mem = 640
	}
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	dir := filepath.Join(infraVM(t), "logs", name+"-"+time.Now().UTC().Format("20060102T150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The disks are big and worthless afterwards; the logs stay.
		_ = os.Remove(filepath.Join(dir, "disk.qcow2"))
		_ = os.Remove(filepath.Join(dir, "config.img"))
	})

	disk, err := filepath.Abs(c.Disk)
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", disk, overlay).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}

	netdev := "user,id=n0,restrict=on"
	for _, g := range slices.Sorted(maps.Keys(c.Ports)) {
		netdev += fmt.Sprintf(",guestfwd=tcp:%s:%d-cmd:%s %d", GuestHost, g, goBuild(t, "./test/vm/vmrelay"), c.Ports[g])
	}
	args := []string{
		"-accel", "tcg,tb-size=128", "-m", strconv.Itoa(mem), "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none",
		"-kernel", kernel,
		"-drive", "file=" + overlay + ",if=virtio,format=qcow2,cache=unsafe",
		"-netdev", netdev, "-device", "virtio-net-pci,netdev=n0",
		"-device", "virtio-rng-pci",
		"-serial", "file:" + filepath.Join(dir, "console.log"),
		"-serial", "file:" + filepath.Join(dir, "markers.log"),
	}
	if len(c.ConfigDrive) > 0 {
		img := configDrive(t, dir, c.ConfigDrive)
		args = append(args, "-drive", "file="+img+",if=virtio,format=raw,readonly=on")
	}

	v := &VM{Dir: dir, exited: make(chan struct{})}
	v.cmd = exec.Command("qemu-system-x86_64", args...)
	var stderr bytes.Buffer
	v.cmd.Stdout, v.cmd.Stderr = &stderr, &stderr
	// The VM dies with the test process, whatever kills it.
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := os.WriteFile(filepath.Join(dir, "qemu.args"), []byte(strings.Join(args, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	go func() {
		v.waitErr = v.cmd.Wait()
		_ = os.WriteFile(filepath.Join(dir, "qemu.log"), stderr.Bytes(), 0o644)
		close(v.exited)
	}()
	t.Cleanup(func() {
		_ = v.cmd.Process.Kill()
		<-v.exited
		if t.Failed() {
			t.Logf("VM logs in %s; console's end:\n%s", dir, tail(filepath.Join(dir, "console.log"), 40))
		}
	})
	t.Logf("VM started (pid %d), logs in %s", v.cmd.Process.Pid, dir)
	return v
}

// configDrive writes the files into an ext4 image (no mount needed).
func configDrive(t testing.TB, dir string, files []File) string {
	t.Helper()
	src := filepath.Join(dir, "configdrive")
	for _, f := range files {
		p := filepath.Join(src, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(p, f.Data, mode); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "config.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", "strata-config", "-E", "root_owner=0:0", "-d", src, img, "128M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 config drive: %v: %s", err, out)
	}
	// The drive holds the node's credentials: only the image keeps them.
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	return img
}

// WaitMarker waits up to timeout for the next marker named name that no
// earlier WaitMarker returned, and fails the test when the VM exits or
// time runs out. Markers are returned in the order the guest wrote them.
func (v *VM) WaitMarker(t testing.TB, name string, timeout time.Duration) Marker {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ms := v.Markers()
		v.mu.Lock()
		for i := v.seen; i < len(ms); i++ {
			if ms[i].Name == name {
				v.seen = i + 1
				v.mu.Unlock()
				return ms[i]
			}
		}
		v.mu.Unlock()
		select {
		case <-v.exited:
			t.Fatalf("the VM exited (%v) before marker %q; console's end:\n%s", v.waitErr, name, tail(filepath.Join(v.Dir, "console.log"), 40))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no marker %q from the VM in %s; markers so far: %v; console's end:\n%s", name, timeout, ms, tail(filepath.Join(v.Dir, "console.log"), 40))
		}
	}
}

// Markers are the guest's complete reports so far (a marker with a probe
// counts once the probe's end line is there).
func (v *VM) Markers() []Marker {
	data, _ := os.ReadFile(filepath.Join(v.Dir, "markers.log"))
	return parseMarkers(data)
}

// parseMarkers reads base.sh's vm-marker lines:
//
//	STRATA-MARKER NAME boot_id=ID deployment=CHECKSUM.SERIAL probe=yes|no
//	STRATA-PROBE LINE      (probe=yes: the config drive's probe's output)
//	STRATA-PROBE-END ID
//
// A marker with a probe counts once its end line is there.
func parseMarkers(data []byte) []Marker {
	var ms []Marker
	var open *Marker // a marker waiting for its probe's end
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		// Text before the keyword is noise a reset can leave on the port.
		if i := strings.LastIndex(line, "STRATA-MARKER "); i > 0 {
			line = line[i:]
		} else if i := strings.Index(line, "STRATA-"); i > 0 {
			line = line[i:]
		}
		switch {
		case strings.HasPrefix(line, "STRATA-MARKER "):
			// A marker whose probe never ended (the guest reset) is lost.
			open = nil
			f := strings.Fields(line)
			m := Marker{}
			if len(f) > 1 {
				m.Name = f[1]
			}
			probe := false
			for _, kv := range f[min(2, len(f)):] {
				k, val, _ := strings.Cut(kv, "=")
				switch k {
				case "boot_id":
					m.BootID = val
				case "deployment":
					m.Deployment = val
				case "probe":
					probe = val == "yes"
				}
			}
			if probe {
				open = &m
			} else {
				ms = append(ms, m)
			}
		case strings.HasPrefix(line, "STRATA-PROBE-END"):
			if open != nil {
				ms = append(ms, *open)
			}
			open = nil
		case strings.HasPrefix(line, "STRATA-PROBE "):
			if open != nil {
				open.Probe = append(open.Probe, strings.TrimPrefix(line, "STRATA-PROBE "))
			}
		}
	}
	return ms
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
