package containerfile

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testhost"
	"github.com/strata-dev/strata/test/testregistry"
)

// chronydUnit is the unit of mco-real/repro/d1-disable-unit-with-contents:
// the chronyd.service of cnf-features-deploy's disable-chronyd
// MachineConfig, with contents and enabled: false.
const chronydUnit = `[Unit]
Description=NTP client/server
Documentation=man:chronyd(8) man:chrony.conf(5)
After=ntpdate.service sntp.service ntpd.service
Conflicts=ntpd.service systemd-timesyncd.service
ConditionCapability=CAP_SYS_TIME

[Service]
Type=forking
PIDFile=/run/chrony/chronyd.pid
EnvironmentFile=-/etc/sysconfig/chronyd
ExecStart=/usr/sbin/chronyd $OPTIONS
ExecStartPost=/usr/libexec/chrony-helper update-daemon
PrivateTmp=yes
ProtectHome=yes
ProtectSystem=full

[Install]
WantedBy=multi-user.target
`

// unitsSpec is a spec whose Ignition config has only the given units.
func unitsSpec(t testing.TB, units ...map[string]any) *v1alpha1.MachineConfigSpec {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "3.2.0"},
		"systemd":  map[string]any{"units": units},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}}
}

// stepIndex is the line number of the first Containerfile line that
// contains s, or -1.
func stepIndex(cf []byte, s string) int {
	for i, l := range strings.Split(string(cf), "\n") {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

// TestDisableUnitWithContents is issue 12's point 1 at render time: a unit
// whose file the config writes and that is enabled: false is disabled in
// the image, as OpenShift's `systemctl disable` does, after the layer that
// writes it. Its own [Install] section makes no links.
func TestDisableUnitWithContents(t *testing.T) {
	res, err := Render(Input{
		ConfigName: "rendered-worker-cnf-d1", Pool: "worker-cnf", Arch: "amd64", BaseImage: testBase,
		Spec: unitsSpec(t, map[string]any{"name": "chronyd.service", "enabled": false, "contents": chronydUnit}),
	})
	if err != nil {
		t.Fatal(err)
	}
	add := stepIndex(res.Containerfile, "ADD "+RootfsName)
	disable := stepIndex(res.Containerfile, "systemctl disable 'chronyd.service'")
	if add < 0 || disable < add {
		t.Errorf("want a `systemctl disable 'chronyd.service'` step after the ADD of the unit file:\n%s", res.Containerfile)
	}
	if !res.NeedsRun {
		t.Error("NeedsRun is false for a build that must run systemctl disable")
	}
	tr := tar.NewReader(bytes.NewReader(contextFile(t, res, RootfsName)))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeSymlink && strings.Contains(h.Name, "chronyd") {
			t.Errorf("the layer links %s -> %s for a disabled unit", h.Name, h.Linkname)
		}
	}
}

func contextFile(t testing.TB, res *Result, name string) []byte {
	t.Helper()
	for _, f := range res.Context {
		if f.Name == name {
			return f.Data
		}
	}
	t.Fatalf("%s is not in the build context", name)
	return nil
}

// TestUnitStepsAfterPackages is issue 12's point 2: units are enabled and
// disabled after the kernel and extension packages are installed, so that
// a unit a package provides (usbguard.service from the usbguard extension,
// as in OpenShift's own extension test) can be enabled.
func TestUnitStepsAfterPackages(t *testing.T) {
	units := []map[string]any{
		{"name": "usbguard.service", "enabled": true},
		{"name": "chronyd.service", "enabled": false},
	}
	for name, mod := range map[string]func(*v1alpha1.MachineConfigSpec){
		"extension":   func(s *v1alpha1.MachineConfigSpec) { s.Extensions = []string{"usbguard"} },
		"kernel type": func(s *v1alpha1.MachineConfigSpec) { s.KernelType = v1alpha1.KernelTypeRealtime },
		"extension+kernel": func(s *v1alpha1.MachineConfigSpec) {
			s.Extensions, s.KernelType = []string{"usbguard"}, v1alpha1.KernelTypeRealtime
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := unitsSpec(t, units...)
			mod(s)
			res, err := Render(Input{ConfigName: "rendered-worker-d2", Pool: "worker", Arch: "amd64", BaseImage: testBase, Spec: s})
			if err != nil {
				t.Fatal(err)
			}
			enable := stepIndex(res.Containerfile, "systemctl enable 'usbguard.service'")
			disable := stepIndex(res.Containerfile, "systemctl disable 'chronyd.service'")
			last := -1
			for i, l := range strings.Split(string(res.Containerfile), "\n") {
				if strings.Contains(l, "dnf ") {
					last = i
				}
			}
			if enable < 0 || disable < 0 || last < 0 || enable < last || disable < last {
				t.Errorf("want the systemctl steps after every package step:\n%s", res.Containerfile)
			}
		})
	}
}

// systemctlLayer is a layer that puts the host's systemctl, with the
// shared libraries it loads, into an image, so that a build can run the
// real `systemctl enable/disable` offline, as it does in a bootc base image.
// A missing systemctl fails the test: a skip would hide that nothing was
// tested.
func systemctlLayer(t testing.TB) map[string][]byte {
	t.Helper()
	bin, err := exec.LookPath("systemctl")
	if err != nil {
		t.Fatalf("systemctl is not installed: the test runs it inside the image (apt-get install systemd): %v", err)
	}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bin, err)
	}
	files := map[string][]byte{}
	read := func(dst, src string) {
		data, err := os.ReadFile(src) // follows links: the image gets plain files
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimPrefix(dst, "/")] = data
	}
	read("/usr/bin/systemctl", bin)
	for _, l := range strings.Split(string(out), "\n") {
		// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" or
		// "/lib64/ld-linux-x86-64.so.2 (0x…)"; the vDSO has no file.
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			read(f[2], f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			read(f[0], f[0])
		}
	}
	return files
}

// appendLayer adds one layer to img: regular files (mode 0755 for
// usr/bin, else 0644) and symlinks, with every parent directory.
func appendLayer(t testing.TB, img v1.Image, files map[string][]byte, links map[string]string) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	write := func(h *tar.Header, data []byte) {
		h.ModTime = time.Unix(0, 0).UTC()
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[string]bool{}
	var mkdirs func(string)
	mkdirs = func(d string) {
		if d == "." || dirs[d] {
			return
		}
		mkdirs(filepath.Dir(d))
		dirs[d] = true
		write(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}, nil)
	}
	for _, name := range sortedKeys(files) {
		mkdirs(filepath.Dir(name))
		mode := int64(0o644)
		if strings.HasPrefix(name, "usr/bin/") || strings.HasPrefix(name, "lib64/") {
			mode = 0o755
		}
		write(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode}, files[name])
	}
	for _, name := range sortedKeys(links) {
		mkdirs(filepath.Dir(name))
		write(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: links[name], Mode: 0o777}, nil)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestBuildahDisableUnitWithContents proves issue 12's point 1 with a
// real build: the base image ships chronyd.service enabled, as a bootc
// image whose presets enabled it does (links under /etc/systemd/system to
// the unit in /usr/lib/systemd/system, here both a wants and a requires
// link), and the host's real systemctl. The rendered d1 configuration
// (chronyd.service with contents, enabled: false) must leave no link to
// chronyd.service in the built image, and must leave another unit's link
// alone.
func TestBuildahDisableUnitWithContents(t *testing.T) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		t.Fatalf("buildah is not installed: apt-get install buildah (%v)", err)
	}
	files := systemctlLayer(t)
	files["usr/lib/systemd/system/chronyd.service"] = []byte("[Unit]\nDescription=NTP client/server\n[Service]\nExecStart=/usr/sbin/chronyd\n[Install]\nWantedBy=multi-user.target\nRequiredBy=time-sync.target\n")
	files["usr/lib/systemd/system/sshd.service"] = []byte("[Unit]\nDescription=OpenSSH server daemon\n[Service]\nExecStart=/usr/sbin/sshd -D\n[Install]\nWantedBy=multi-user.target\n")
	const (
		wantsLink    = "etc/systemd/system/multi-user.target.wants/chronyd.service"
		requiresLink = "etc/systemd/system/time-sync.target.requires/chronyd.service"
		sshdLink     = "etc/systemd/system/multi-user.target.wants/sshd.service"
	)
	baseImg := appendLayer(t, testregistry.Busybox(t), files, map[string]string{
		wantsLink:    "/usr/lib/systemd/system/chronyd.service",
		requiresLink: "/usr/lib/systemd/system/chronyd.service",
		sshdLink:     "/usr/lib/systemd/system/sshd.service",
	})
	testhost.UseBuildah(t)

	reg := testregistry.Start(t, "")
	base := reg.Push(t, "strata/busybox-systemd:latest", baseImg)
	before := flatten(t, pull(t, base))
	for _, l := range []string{wantsLink, requiresLink, sshdLink} {
		if _, ok := before[l]; !ok {
			t.Fatalf("the base image has no %s: the test would prove nothing", l)
		}
	}

	res, err := Render(Input{
		ConfigName: "rendered-worker-cnf-d1", Pool: "worker-cnf", Arch: "amd64", BaseImage: base,
		Spec: unitsSpec(t, map[string]any{"name": "chronyd.service", "enabled": false, "contents": chronydUnit}),
	})
	if err != nil {
		t.Fatal(err)
	}
	target := reg.Host + "/strata/disable:1"
	digest := buildAndPush(t, buildah, res, target)
	after := flatten(t, pull(t, reg.Host+"/strata/disable@"+digest))

	if f, ok := after["etc/systemd/system/chronyd.service"]; !ok || f.data != chronydUnit {
		t.Errorf("etc/systemd/system/chronyd.service is not the config's unit: %+v", f.hdr)
	}
	for path, f := range after {
		if f.hdr.Typeflag == tar.TypeSymlink && strings.HasPrefix(path, "etc/systemd/") && filepath.Base(f.hdr.Linkname) == "chronyd.service" {
			t.Errorf("the image still enables chronyd.service: %s -> %s\nContainerfile:\n%s", path, f.hdr.Linkname, res.Containerfile)
		}
	}
	if f, ok := after[sshdLink]; !ok || f.hdr.Linkname != "/usr/lib/systemd/system/sshd.service" {
		t.Errorf("disabling chronyd.service changed %s: %+v", sshdLink, f.hdr)
	}
}
