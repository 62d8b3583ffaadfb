package containerfile

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testhost"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestBuildahBuild builds a rendered context for real: a local
// distribution registry, a busybox base image made from Debian's
// busybox-static, and buildah with chroot isolation and --timestamp 0. It
// checks that the image holds what the configuration says, with modes and
// owners, and that two builds give one digest.
func TestBuildahBuild(t *testing.T) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		t.Fatalf("buildah is not installed: apt-get install buildah (%v)", err)
	}
	busybox := testregistry.Busybox(t)
	testhost.UseBuildah(t)

	reg := testregistry.Start(t, "")
	host := reg.Host
	base := reg.Push(t, "strata/busybox:latest", busybox)

	cfg := `{"ignition":{"version":"3.5.0"},
	"storage":{
	  "files":[
	    {"path":"/etc/strata/secret","mode":384,"user":{"id":1000},"group":{"id":1000},"contents":{"source":"data:,s3cret"}},
	    {"path":"/usr/libexec/strata-tool","mode":2541,"contents":{"source":"data:,%23!%2Fbin%2Fsh%0A"}},
	    {"path":"/etc/strata/by-name","user":{"name":"core"},"contents":{"source":"data:,n"}},
	    {"path":"/etc/motd","append":[{"source":"data:,appended%0A"}]},
	    {"path":"/var/lib/strata-test/not-in-image","contents":{"source":"data:,v"}}],
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

// cleanEnv is the environment without variables that would configure
// buildah behind the test's back.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "TMPDIR=") || strings.HasPrefix(e, "CONTAINERS_") || strings.HasPrefix(e, "BUILDAH_") {
			continue
		}
		env = append(env, e)
	}
	return append(env, extra...)
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
