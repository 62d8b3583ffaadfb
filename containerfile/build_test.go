package containerfile

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/testhost"
)

// TestBuildahBuild builds a rendered context for real: a local
// distribution registry, a busybox base image made from Debian's
// busybox-static, and buildah with chroot isolation and --timestamp 0. It
// checks that the image holds what the configuration says, with modes and
// owners, and that two builds give one digest.
func TestBuildahBuild(t *testing.T) {
	registryBin := findBinary(t, "registry", "hack/setup-infra.sh envtest")
	buildah := findBinary(t, "buildah", "hack/setup-infra.sh envtest (Debian package buildah)")
	const busybox = "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		t.Fatalf("%s is missing: apt-get install busybox-static (%v)", busybox, err)
	}
	testhost.UseBuildah(t)

	host := startRegistry(t, registryBin)
	base := pushBusybox(t, host, busybox)

	cfg := `{"ignition":{"version":"3.5.0"},
	"storage":{
	  "files":[
	    {"path":"/etc/strata/secret","mode":384,"user":{"id":1000},"group":{"id":1000},"contents":{"source":"data:,s3cret"}},
	    {"path":"/usr/libexec/strata-tool","mode":2541,"contents":{"source":"data:,%23!%2Fbin%2Fsh%0A"}},
	    {"path":"/etc/strata/by-name","user":{"name":"core"},"contents":{"source":"data:,n"}},
	    {"path":"/etc/motd","append":[{"source":"data:,appended%0A"}]},
	    {"path":"/var/lib/strata/not-in-image","contents":{"source":"data:,v"}}],
	  "directories":[{"path":"/etc/strata","mode":488,"group":{"id":1000}}],
	  "links":[
	    {"path":"/etc/strata/link","target":"secret"},
	    {"path":"/usr/libexec/strata-tool-hard","target":"/usr/libexec/strata-tool","hard":true}]},
	"systemd":{"units":[
	  {"name":"strata.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
	  {"name":"masked.service","mask":true}]},
	"kernelArguments":{"shouldExist":["quiet"]}}`
	in := Input{
		ConfigName: "rendered-worker-build", Pool: "worker", Arch: "amd64", BaseImage: base,
		Spec:           &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(cfg)}, KernelArguments: []string{"nosmt"}},
		Containerfiles: []v1alpha1.MachineOSContainerfile{{Content: "RUN echo admin > /etc/strata/admin\n"}},
	}
	res, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if !res.NeedsRun {
		t.Fatal("NeedsRun is false for a build with RUN steps")
	}

	target := host + "/strata/test:1"
	first := buildAndPush(t, buildah, res, target)
	second := buildAndPush(t, buildah, res, target)
	if first != second {
		t.Errorf("two builds of one input gave %s and %s", first, second)
	}

	img := pull(t, host+"/strata/test@"+first)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range res.Labels {
		if got := cf.Config.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	files := flatten(t, img)
	type want struct {
		typ      byte
		mode     int64
		uid, gid int
		data     string
		link     string
	}
	for path, w := range map[string]want{
		"etc/strata":              {typ: tar.TypeDir, mode: 0o750, gid: 1000},
		"etc/strata/secret":       {typ: tar.TypeReg, mode: 0o600, uid: 1000, gid: 1000, data: "s3cret"},
		"etc/strata/by-name":      {typ: tar.TypeReg, mode: 0o644, uid: 1000, data: "n"},
		"etc/strata/link":         {typ: tar.TypeSymlink, mode: 0o777, link: "secret"},
		"etc/strata/admin":        {typ: tar.TypeReg, mode: 0o644, data: "admin\n"},
		"etc/motd":                {typ: tar.TypeReg, mode: 0o644, data: "base motd\nappended\n"},
		"usr/libexec/strata-tool": {typ: tar.TypeReg, mode: 0o4755, data: "#!/bin/sh\n"},
		"usr/lib/bootc/kargs.d/10-strata.toml": {typ: tar.TypeReg, mode: 0o644,
			data: "# Kernel arguments from the pool's MachineConfigs, written by Strata.\nkargs = [\"nosmt\", \"quiet\"]\n"},
		"etc/systemd/system/strata.service":                         {typ: tar.TypeReg, mode: 0o644, data: "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
		"etc/systemd/system/multi-user.target.wants/strata.service": {typ: tar.TypeSymlink, mode: 0o777, link: "/etc/systemd/system/strata.service"},
		"etc/systemd/system/masked.service":                         {typ: tar.TypeSymlink, mode: 0o777, link: "/dev/null"},
	} {
		f, ok := files[path]
		if !ok {
			t.Errorf("%s is not in the image", path)
			continue
		}
		h := f.hdr
		if h.Typeflag != w.typ || h.Mode&0o7777 != w.mode || h.Uid != w.uid || h.Gid != w.gid || f.data != w.data || h.Linkname != w.link {
			t.Errorf("%s: type %c mode %04o owner %d:%d link %q data %q; want type %c mode %04o owner %d:%d link %q data %q",
				path, h.Typeflag, h.Mode&0o7777, h.Uid, h.Gid, h.Linkname, f.data, w.typ, w.mode, w.uid, w.gid, w.link, w.data)
		}
	}
	// The hard link may be exported either way round; both names must be
	// the same content.
	if a, b := files["usr/libexec/strata-tool"], files["usr/libexec/strata-tool-hard"]; b.hdr == nil ||
		(b.hdr.Typeflag == tar.TypeLink && b.hdr.Linkname != "usr/libexec/strata-tool") ||
		(b.hdr.Typeflag == tar.TypeReg && b.data != a.data) {
		t.Errorf("hard link: %+v", b.hdr)
	}
	for path := range files {
		if strings.HasPrefix(path, "var/lib/strata") || strings.HasPrefix(path, "run/strata-append") {
			t.Errorf("%s is in the image", path)
		}
	}
}

// findBinary finds name on PATH, then in the repository's .infra/bin.
// A missing tool fails the test: a skip would hide that nothing was
// tested.
func findBinary(t *testing.T, name, how string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", ".infra", "bin", name))
	if err == nil {
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("%s not found on PATH or in .infra/bin; install it with %s", name, how)
	return ""
}

// cleanEnv is the environment without variables that would configure the
// registry or buildah behind the test's back.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "REGISTRY_") || strings.HasPrefix(e, "TMPDIR=") || strings.HasPrefix(e, "CONTAINERS_") || strings.HasPrefix(e, "BUILDAH_") {
			continue
		}
		env = append(env, e)
	}
	return append(env, extra...)
}

func startRegistry(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	conf := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
`, filepath.Join(dir, "data"), addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", conf)
	cmd.Env = cleanEnv("OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The exit status of a killed registry says nothing; only wait for it.
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("registry log:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		select {
		case <-exited:
			t.Fatalf("registry exited early (%v)\n%s", cmd.ProcessState, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry on %s not ready after 30s: %v\n%s", addr, err, logs.String())
		}
	}
}

// pushBusybox pushes a one-layer busybox image and returns it by digest.
func pushBusybox(t *testing.T, host, busybox string) string {
	t.Helper()
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, data string) {
		h.ModTime = epoch
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, data); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin/", "etc/", "usr/", "usr/lib/", "var/"} {
		add(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}, "")
	}
	add(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}, "")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755}, string(bb))
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777}, "")
		}
	}
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644}, "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000:core:/var/home/core:/bin/sh\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644}, "root:x:0:\ncore:x:1000:\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/motd", Mode: 0o644}, "base motd\n")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{Architecture: "amd64", OS: "linux",
		RootFS: v1.RootFS{Type: "layers"}, Config: v1.Config{Cmd: []string{"/bin/sh"}}})
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host+"/strata/busybox:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return host + "/strata/busybox@" + d.String()
}

// buildAndPush builds the rendered context with buildah in fresh storage
// and pushes it; it returns the pushed digest.
func buildAndPush(t *testing.T, buildah string, res *Result, target string) string {
	t.Helper()
	work := t.TempDir()
	ctxDir := filepath.Join(work, "context")
	if err := res.WriteDir(ctxDir); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(work, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	global := []string{"--root", filepath.Join(work, "root"), "--runroot", filepath.Join(work, "runroot"), "--storage-driver", "vfs"}
	run := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, buildah, append(global, args...)...)
		cmd.Env = cleanEnv("TMPDIR=" + tmp)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Remove what buildah mounted or stored even when the test fails.
	t.Cleanup(func() {
		cmd := exec.Command(buildah, append(global, "rm", "--all")...)
		cmd.Env = cleanEnv("TMPDIR=" + tmp)
		_ = cmd.Run()
		cmd = exec.Command(buildah, append(global, "rmi", "--all", "--force")...)
		cmd.Env = cleanEnv("TMPDIR=" + tmp)
		_ = cmd.Run()
	})
	run("bud", "--isolation", "chroot", "--timestamp", "0", "--tls-verify=false", "--pull-always",
		"-f", filepath.Join(ctxDir, ContainerfileName), "-t", target, ctxDir)
	digestFile := filepath.Join(work, "digest")
	run("push", "--tls-verify=false", "--digestfile", digestFile, target, "docker://"+target)
	d, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(d))
}

func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type imageFile struct {
	hdr  *tar.Header
	data string
}

func flatten(t *testing.T, img v1.Image) map[string]imageFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]imageFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = imageFile{hdr: h, data: string(data)}
	}
}
