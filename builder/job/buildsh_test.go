package job

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/internal/testhost"
	"github.com/strata-dev/strata/internal/testregistry"
)

// regPass is the test registry's password for user "strata".
const regPass = "s3cret-Passw0rd"

// TestBuildScript runs build.sh for real, as the build pod would: buildah
// against a real registry with authentication, the pod's files laid out
// from the objects Objects returns.
func TestBuildScript(t *testing.T) {
	for _, bin := range []string{"buildah", "bash", "tar", "gzip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: the build script test needs it (apt-get install -y buildah)", bin)
		}
	}
	busybox := testregistry.Busybox(t)
	testhost.UseBuildah(t)
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "test/busybox:latest", busybox)
	secrets := map[string][]byte{
		"base-pull": reg.DockerConfigJSON(regPass),
		"push":      reg.DockerConfigJSON(regPass),
		"bad-push":  reg.DockerConfigJSON("wrong-password"),
	}
	cfg := Config{
		Namespace:          "strata-system",
		BuilderImage:       "strata-builder:test",
		BackoffLimit:       1,
		InsecureRegistries: []string{reg.Host},
	}

	t.Run("Succeeds", func(t *testing.T) {
		res := render(t, base, "RUN test -f /etc/motd && echo built > /etc/strata-built\n")
		pushSpec := reg.Host + "/test/built:ok"
		tm, out := runBuild(t, cfg, Request{Build: build("worker-ok"), Result: res,
			BaseImagePullSecret: "base-pull", PushSecret: "push", PushSpec: pushSpec}, secrets)
		if tm.Digest == "" {
			t.Fatalf("no digest reported: %+v\n%s", tm, out)
		}
		ref, err := name.ParseReference(pushSpec)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref, remote.WithAuth(reg.Auth()))
		if err != nil {
			t.Fatalf("pushed image: %v", err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d.String() != tm.Digest {
			t.Errorf("reported digest %s, registry has %s", tm.Digest, d)
		}
		files := imageFiles(t, img)
		if got := files["etc/motd"]; got != "Welcome to Strata\n" {
			t.Errorf("etc/motd in the image = %q, want the rendered file", got)
		}
		if got := files["etc/strata-built"]; got != "built\n" {
			t.Errorf("etc/strata-built in the image = %q, want the RUN step's output", got)
		}
		for _, s := range secrets {
			if strings.Contains(out, string(s)) || strings.Contains(out, regPass) {
				t.Errorf("the build log shows registry credentials:\n%s", out)
			}
		}
	})

	t.Run("SameInputsSameDigest", func(t *testing.T) {
		res := render(t, base, "")
		var digests []string
		for _, tag := range []string{"a", "b"} {
			tm, out := runBuild(t, cfg, Request{Build: build("worker-same-" + tag), Result: res,
				BaseImagePullSecret: "base-pull", PushSecret: "push", PushSpec: reg.Host + "/test/same:" + tag}, secrets)
			if tm.Digest == "" {
				t.Fatalf("no digest: %+v\n%s", tm, out)
			}
			digests = append(digests, tm.Digest)
		}
		if digests[0] != digests[1] {
			t.Errorf("two builds of the same inputs gave %s and %s", digests[0], digests[1])
		}
	})

	t.Run("LongOutputStaysUnderTheLimit", func(t *testing.T) {
		noisy := `RUN i=0; while [ $i -lt 200 ]; do i=$((i+1)); printf 'line %d "quoted" \\back\ttab \033[1mbold\033[0m %0300d\n' $i 0; done; exit 7` + "\n"
		res := render(t, base, noisy)
		line := lineOf(t, res.Containerfile, strings.TrimSuffix(noisy, "\n"))
		tm, out := runBuild(t, cfg, Request{Build: build("worker-noisy"), Result: res,
			BaseImagePullSecret: "base-pull", PushSecret: "push", PushSpec: reg.Host + "/test/built:noisy"}, secrets)
		if tm.Step != v1alpha1.BuildStepBuild || !strings.Contains(tm.Message, fmt.Sprintf("line %d: RUN", line)) ||
			!strings.Contains(tm.Message, "exit status 7") {
			t.Fatalf("report = %+v\n%s", tm, out)
		}
		if !strings.Contains(tm.LogTail, `line 200 "quoted" \back`) {
			t.Errorf("log tail lacks the last output line: %q", tm.LogTail)
		}
	})

	t.Run("UnlistedRegistryIsVerified", func(t *testing.T) {
		strict := cfg
		strict.InsecureRegistries = nil
		res := render(t, base, "")
		tm, out := runBuild(t, strict, Request{Build: build("worker-strict"), Result: res,
			BaseImagePullSecret: "base-pull", PushSecret: "push", PushSpec: reg.Host + "/test/built:strict"}, secrets)
		if tm.Step != v1alpha1.BuildStepPullBase || !strings.Contains(tm.Message, "HTTP response to HTTPS client") {
			t.Fatalf("report = %+v, want PullBase refusing plain HTTP\n%s", tm, out)
		}
	})

	t.Run("FailingRunReportsItsLine", func(t *testing.T) {
		res := render(t, base, "RUN echo before\nRUN false\n")
		line := lineOf(t, res.Containerfile, "RUN false")
		tm, out := runBuild(t, cfg, Request{Build: build("worker-run-false"), Result: res,
			BaseImagePullSecret: "base-pull", PushSecret: "push", PushSpec: reg.Host + "/test/built:fail"}, secrets)
		if tm.Step != v1alpha1.BuildStepBuild {
			t.Fatalf("step = %q, want Build: %+v\n%s", tm.Step, tm, out)
		}
		want := fmt.Sprintf("Containerfile line %d: RUN false: ", line)
		if !strings.HasPrefix(tm.Message, want) || !strings.Contains(tm.Message, "exit status 1") {
			t.Errorf("message = %q, want it to start with %q and name the exit status", tm.Message, want)
		}
		if !strings.Contains(tm.LogTail, "STEP") {
			t.Errorf("log tail does not show buildah's steps: %q", tm.LogTail)
		}
	})

	t.Run("WrongPushCredentialsIsAuth", func(t *testing.T) {
		res := render(t, base, "")
		tm, out := runBuild(t, cfg, Request{Build: build("worker-bad-push"), Result: res,
			BaseImagePullSecret: "base-pull", PushSecret: "bad-push", PushSpec: reg.Host + "/test/built:auth"}, secrets)
		if tm.Step != v1alpha1.BuildStepAuth || !strings.Contains(tm.Message, "push") {
			t.Fatalf("report = %+v, want step Auth naming the push\n%s", tm, out)
		}
	})

	t.Run("AnonymousPullOfProtectedBaseIsAuth", func(t *testing.T) {
		res := render(t, base, "")
		tm, out := runBuild(t, cfg, Request{Build: build("worker-anon"), Result: res,
			PushSecret: "push", PushSpec: reg.Host + "/test/built:anon"}, secrets)
		if tm.Step != v1alpha1.BuildStepAuth {
			t.Fatalf("report = %+v, want step Auth\n%s", tm, out)
		}
	})

	t.Run("MissingBaseIsPullBase", func(t *testing.T) {
		missing := reg.Host + "/test/nonexistent@sha256:" + strings.Repeat("ab", 32)
		res := render(t, missing, "")
		tm, out := runBuild(t, cfg, Request{Build: build("worker-no-base"), Result: res,
			BaseImagePullSecret: "base-pull", PushSecret: "push", PushSpec: reg.Host + "/test/built:nobase"}, secrets)
		if tm.Step != v1alpha1.BuildStepPullBase || !strings.Contains(tm.Message, "test/nonexistent") {
			t.Fatalf("report = %+v, want step PullBase naming the image\n%s", tm, out)
		}
	})
}

// runBuild lays out what the build pod of Objects(cfg, req) sees, runs
// build.sh with the container's environment (its paths moved into a
// temporary directory) and returns the termination message and output.
func runBuild(t *testing.T, cfg Config, req Request, secrets map[string][]byte) (TerminationMessage, string) {
	t.Helper()
	cm, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatalf("Objects: %v", err)
	}
	root := t.TempDir()
	moved := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	spec := job.Spec.Template.Spec
	c := spec.Containers[0]
	for _, m := range c.VolumeMounts {
		dir := moved(m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.ConfigMap != nil:
				for k, s := range cm.Data {
					writeFile(t, filepath.Join(dir, k), []byte(s))
				}
				for k, b := range cm.BinaryData {
					writeFile(t, filepath.Join(dir, k), b)
				}
			case v.Secret != nil:
				data, ok := secrets[v.Secret.SecretName]
				if !ok {
					t.Fatalf("no test Secret %q", v.Secret.SecretName)
				}
				for _, it := range v.Secret.Items {
					if it.Key != corev1.DockerConfigJsonKey {
						t.Fatalf("Secret item %q, want %q", it.Key, corev1.DockerConfigJsonKey)
					}
					writeFile(t, filepath.Join(dir, it.Path), data)
				}
			}
		}
	}
	termLog := filepath.Join(root, "termination-log")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	for _, e := range c.Env {
		v := e.Value
		if strings.HasPrefix(v, "/") {
			v = moved(v)
		}
		if e.Name == "STRATA_TERMINATION_LOG" {
			v = termLog
		}
		env = append(env, e.Name+"="+v)
	}
	args := append([]string(nil), c.Command[1:]...)
	args[0] = moved(args[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Command[0], args...)
	cmd.Env = env
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	msg, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatalf("build.sh wrote no termination message (%v): %v\n%s", runErr, err, out.String())
	}
	if len(msg) >= 4096 {
		t.Errorf("termination message is %d bytes, over the kubelet's 4096", len(msg))
	}
	var tm TerminationMessage
	if err := json.Unmarshal(msg, &tm); err != nil {
		t.Fatalf("termination message is not JSON: %v: %q", err, msg)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(runErr, &ee) {
		code = ee.ExitCode()
	} else if runErr != nil {
		t.Fatalf("run build.sh: %v", runErr)
	}
	switch {
	case tm.Digest != "" && code != 0:
		t.Errorf("reported a digest but exited %d", code)
	case tm.Digest == "" && code == 0:
		t.Errorf("exited 0 without a digest: %s", msg)
	}
	t.Logf("report: %s", msg)
	// The status as the controller would see it.
	st := Interpret(job, []corev1.Pod{terminatedPod(code, string(msg))})
	if (st.Phase == PhaseSucceeded) != (tm.Digest != "") {
		t.Errorf("Interpret of the pod = %+v, report %+v", st, tm)
	}
	return tm, out.String()
}

func terminatedPod(code int, msg string) corev1.Pod {
	phase := corev1.PodSucceeded
	if code != 0 {
		phase = corev1.PodFailed
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "build-pod"},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  ContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Message: msg}},
		}}},
	}
}

func build(n string) *v1alpha1.MachineOSBuild {
	return &v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: n, UID: types.UID("uid-" + n)}}
}

func render(t *testing.T, base, admin string) *containerfile.Result {
	t.Helper()
	ign := `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,Welcome%20to%20Strata%0A"}}]}}`
	in := containerfile.Input{
		ConfigName: "rendered-worker-1",
		Pool:       "worker",
		Spec:       &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}},
		BaseImage:  base,
		Arch:       "amd64",
	}
	if admin != "" {
		in.Containerfiles = []v1alpha1.MachineOSContainerfile{{ContainerfileArch: v1alpha1.ContainerfileArchNoArch, Content: admin}}
	}
	res, err := containerfile.Render(in)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return res
}

func lineOf(t *testing.T, cf []byte, instr string) int {
	t.Helper()
	for i, l := range strings.Split(string(cf), "\n") {
		if l == instr {
			return i + 1
		}
	}
	t.Fatalf("%q is not a line of the Containerfile:\n%s", instr, cf)
	return 0
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// imageFiles returns the regular files of an image's flattened file
// system.
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size < 1<<20 && !strings.HasPrefix(h.Name, "bin/") {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	}
	return files
}

// TestBuildScriptPrepare checks the reports of undeliverable inputs, which
// fail before buildah runs.
func TestBuildScriptPrepare(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is not installed: %v", err)
	}
	cases := []struct {
		name    string
		env     func(dir string) []string
		message string
	}{
		{"no work dir", func(string) []string { return nil }, "STRATA_WORKDIR is not set"},
		{"corrupt context", func(dir string) []string {
			writeFile(t, filepath.Join(dir, "ctx.tar.gz"), []byte("not gzip"))
			return []string{"STRATA_WORKDIR=" + filepath.Join(dir, "work"), "STRATA_CONTEXT_ARCHIVE=" + filepath.Join(dir, "ctx.tar.gz"), "STRATA_PUSH_SPEC=r.example/x:y"}
		}, "could not be unpacked"},
		{"missing authfile", func(dir string) []string {
			_, req := testRequest()
			cm, _, err := Objects(Config{Namespace: "n", BuilderImage: "i"}, req)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "ctx.tar.gz"), cm.BinaryData[KeyContext])
			return []string{"STRATA_WORKDIR=" + filepath.Join(dir, "work"), "STRATA_CONTEXT_ARCHIVE=" + filepath.Join(dir, "ctx.tar.gz"), "STRATA_PUSH_SPEC=r.example/x:y",
				"STRATA_PUSH_AUTHFILE=" + filepath.Join(dir, "nope", "auth.json")}
		}, "registry credentials"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "build.sh")
			writeFile(t, script, []byte(BuildScript()))
			termLog := filepath.Join(dir, "termination-log")
			cmd := exec.Command("bash", script)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "STRATA_TERMINATION_LOG=" + termLog}, c.env(dir)...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != ExitCodePermanent {
				t.Errorf("exit: %v, want status %d\n%s", err, ExitCodePermanent, out)
			}
			msg, err := os.ReadFile(termLog)
			if err != nil {
				t.Fatalf("no report: %v\n%s", err, out)
			}
			var tm TerminationMessage
			if err := json.Unmarshal(msg, &tm); err != nil || tm.Step != v1alpha1.BuildStepPrepare || !strings.Contains(tm.Message, c.message) {
				t.Errorf("report %s (%v), want step Prepare with %q", msg, err, c.message)
			}
		})
	}
}
