package job

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/test/testhost"
	"github.com/strata-dev/strata/test/testregistry"
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
		// The manifest carries the rendered annotations: the base by
		// digest and Strata's labels.
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Annotations) == 0 {
			t.Fatal("the render has no annotations")
		}
		for k, v := range res.Annotations {
			if m.Annotations[k] != v {
				t.Errorf("manifest annotation %s = %q, want %q (all: %v)", k, m.Annotations[k], v, m.Annotations)
			}
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

// TestRunStepFindsNoCredentials runs, as a RUN step, what a hostile
// Containerfile would do to find the registry credentials: leakfinder
// (testdata/leakfinder) searches the image, every process's environment,
// command line and mounts, escapes buildah's chroot and searches what the
// container around it holds. It looks for the registry password and the
// base64 auth string of the pull and push secrets, given only their
// SHA-256, so that neither the Containerfile nor the build log carries
// them. The build container must give it nothing to find.
func TestRunStepFindsNoCredentials(t *testing.T) {
	for _, bin := range []string{"buildah", "bash", "tar", "gzip", "go"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: the test needs it", bin)
		}
	}
	finder := leakfinder(t)
	busybox := testregistry.Busybox(t)
	testhost.UseBuildah(t)
	secret := make([]byte, 13)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	password := "leak-canary-" + hex.EncodeToString(secret)
	reg := testregistry.Start(t, password)
	auth := strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(reg.User+":"+password)), "=")
	creds := reg.DockerConfigJSON(password)
	if !strings.Contains(string(creds), auth) {
		t.Fatalf("the Secret %s does not hold the auth string the search looks for", creds)
	}
	secrets := map[string][]byte{"base-pull": creds, "push": creds}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	search := fmt.Sprintf("RUN /usr/local/bin/leakfinder password=%s:%d auth=%s:%d\n", sum(password), len(password), sum(auth), len(auth))
	cfg := Config{Namespace: "strata-system", BuilderImage: "strata-builder:test", InsecureRegistries: []string{reg.Host}}
	try := func(t *testing.T, name string, files map[string]string) (TerminationMessage, string) {
		t.Helper()
		files["usr/local/bin/leakfinder"] = finder
		img, err := mutate.AppendLayers(busybox, executables(t, files))
		if err != nil {
			t.Fatal(err)
		}
		res := render(t, reg.Push(t, "test/"+name+":latest", img), search)
		for _, s := range []string{password, auth} {
			if bytes.Contains(res.Containerfile, []byte(s)) {
				t.Fatalf("the Containerfile holds a credential:\n%s", res.Containerfile)
			}
		}
		return runBuild(t, cfg, Request{Build: build(name), Result: res,
			BaseImagePullSecret: "base-pull", PushSecret: "push", PushSpec: reg.Host + "/test/" + name + ":built"}, secrets)
	}

	// The search finds a credential where a RUN step can read it.
	t.Run("FindsAPlantedCredential", func(t *testing.T) {
		tm, out := try(t, "planted", map[string]string{"etc/planted.json": string(creds)})
		if tm.Step != v1alpha1.BuildStepBuild || !strings.Contains(out, "leakfinder: LEAK auth in /etc/planted.json") {
			t.Fatalf("report %+v, want the RUN step to fail on the planted credential\n%s", tm, out)
		}
	})

	t.Run("FindsNone", func(t *testing.T) {
		tm, out := try(t, "clean", map[string]string{})
		if strings.Contains(out, "LEAK") || tm.Digest == "" {
			t.Fatalf("a RUN step found registry credentials (report %+v):\n%s", tm, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "leakfinder: ") {
				t.Log(l)
			}
		}
		// The search reached past the chroot, into what the build
		// container holds.
		m := regexp.MustCompile(`leakfinder: searched around the chroot: (\d+) files`).FindStringSubmatch(out)
		if !strings.Contains(out, "leakfinder: escaped the chroot: yes") || m == nil || m[1] == "0" {
			t.Errorf("the search did not get out of buildah's chroot, so it did not cover the build container:\n%s", out)
		}
	})
}

// leakfinder builds testdata/leakfinder, static, and returns the binary.
func leakfinder(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leakfinder")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./testdata/leakfinder")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build leakfinder: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// executables is a layer of root's files, mode 0755, in the image's
// layer media type.
func executables(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	return testregistry.TarLayer(t, func(tw *tar.Writer) error {
		for _, n := range slices.Sorted(maps.Keys(files)) {
			if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(files[n])), ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, files[n]); err != nil {
				return err
			}
		}
		return nil
	})
}

// runBuild plays the build pod of Objects(cfg, req): it runs build.sh for
// each of the pod's containers in order, as the kubelet would, until one
// fails, with the container's environment and mounts (its paths moved into
// a temporary directory). Each volume is a directory there; a Secret
// volume exists only while a container that mounts it runs, since a
// container cannot see the volumes it does not mount. It returns the
// report of the container that failed, or the push container's, and the
// output of them all.
func runBuild(t *testing.T, cfg Config, req Request, secrets map[string][]byte) (TerminationMessage, string) {
	t.Helper()
	inputs, job, err := Objects(cfg, req)
	if err != nil {
		t.Fatalf("Objects: %v", err)
	}
	root := t.TempDir()
	spec := job.Spec.Template.Spec
	volume := func(name string) corev1.Volume {
		for _, v := range spec.Volumes {
			if v.Name == name {
				return v
			}
		}
		t.Fatalf("no volume %s", name)
		return corev1.Volume{}
	}
	var out bytes.Buffer
	var report TerminationMessage
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "build-pod"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	for i, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		init := i < len(spec.InitContainers)
		mounts := map[string]string{} // mount path → directory
		var secretDirs []string
		for _, m := range c.VolumeMounts {
			dir := filepath.Join(root, "volumes", m.Name)
			mounts[m.MountPath] = dir
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			v := volume(m.Name)
			if v.Secret == nil {
				continue
			}
			secretDirs = append(secretDirs, dir)
			data := map[string][]byte{}
			if v.Secret.SecretName == inputs.Name {
				data = inputs.Data
			} else if auth, ok := secrets[v.Secret.SecretName]; ok {
				data[corev1.DockerConfigJsonKey] = auth
			} else {
				t.Fatalf("no test Secret %q", v.Secret.SecretName)
			}
			if len(v.Secret.Items) == 0 {
				for k, b := range data {
					writeFile(t, filepath.Join(dir, k), b)
				}
			}
			for _, it := range v.Secret.Items {
				b, ok := data[it.Key]
				if !ok {
					t.Fatalf("Secret %s has no key %s", v.Secret.SecretName, it.Key)
				}
				writeFile(t, filepath.Join(dir, it.Path), b)
			}
		}
		// moved is where a path of the container is in the test: under
		// the directory of the longest mount path that holds it.
		moved := func(p string) string {
			best := ""
			for mp := range mounts {
				if (p == mp || strings.HasPrefix(p, mp+"/")) && len(mp) > len(best) {
					best = mp
				}
			}
			if best == "" {
				t.Fatalf("container %s: %s is on no volume", c.Name, p)
			}
			return mounts[best] + strings.TrimPrefix(p, best)
		}
		termLog := filepath.Join(root, c.Name+"-termination-log")
		home := filepath.Join(root, "home-"+c.Name)
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
		for _, e := range c.Env {
			v := e.Value
			switch {
			case e.Name == "STRATA_TERMINATION_LOG":
				v = termLog
			case strings.HasPrefix(v, "/"):
				v = moved(v)
			}
			env = append(env, e.Name+"="+v)
		}
		args := append([]string(nil), c.Command[1:]...)
		args[0] = moved(args[0])
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, c.Command[0], args...)
		cmd.Env = env
		cmd.Dir = home
		cmd.Stdout, cmd.Stderr = &out, &out
		runErr := cmd.Run()
		cancel()
		for _, d := range secretDirs {
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(runErr, &ee) {
			code = ee.ExitCode()
		} else if runErr != nil {
			t.Fatalf("run %s container: %v", c.Name, runErr)
		}
		msg, err := os.ReadFile(termLog)
		if err != nil && (code != 0 || !init) {
			t.Fatalf("%s container exited %d and wrote no termination message: %v\n%s", c.Name, code, err, out.String())
		}
		if len(msg) >= 4096 {
			t.Errorf("%s container's termination message is %d bytes, over the kubelet's 4096", c.Name, len(msg))
		}
		status := corev1.ContainerStatus{Name: c.Name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(code), Message: string(msg)}}}
		if init {
			pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, status)
		} else {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, status)
		}
		if code == 0 && init {
			if len(msg) > 0 {
				t.Errorf("%s container succeeded with a report: %s", c.Name, msg)
			}
			continue
		}
		if err := json.Unmarshal(msg, &report); err != nil {
			t.Fatalf("%s container's termination message is not JSON: %v: %q", c.Name, err, msg)
		}
		switch {
		case report.Digest != "" && (code != 0 || c.Name != ContainerPush):
			t.Errorf("%s container reported a digest and exited %d", c.Name, code)
		case report.Digest == "" && code == 0:
			t.Errorf("%s container exited 0 without a digest: %s", c.Name, msg)
		}
		t.Logf("report of the %s container: %s", c.Name, msg)
		if code != 0 {
			pod.Status.Phase = corev1.PodFailed
			break
		}
	}
	// The status as the controller would see it.
	if pod.Status.Phase == corev1.PodFailed {
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy}}
	}
	st := Interpret(job, []corev1.Pod{pod})
	switch {
	case (st.Phase == PhaseSucceeded) != (report.Digest != ""):
		t.Errorf("Interpret of the pod = %+v, report %+v", st, report)
	case st.Phase == PhaseFailed && (st.Failure.Step != report.Step || st.Failure.Message != report.Message):
		t.Errorf("Interpret of the pod gives failure %+v, the failed container reported %+v", st.Failure, report)
	}
	return report, out.String()
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
	for _, bin := range []string{"bash", "buildah"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not installed: %v", bin, err)
		}
	}
	cases := []struct {
		name    string
		phase   string
		env     func(dir string) []string
		message string
	}{
		{"unknown phase", "bogus", func(string) []string { return nil }, `unknown phase "bogus"`},
		{"no storage", "build", func(string) []string { return nil }, "STRATA_STORAGE is not set"},
		{"no base images", "pull", func(string) []string { return nil }, "STRATA_BASE_IMAGES is not set"},
		{"corrupt context", "build", func(dir string) []string {
			writeFile(t, filepath.Join(dir, "ctx.tar.gz"), []byte("not gzip"))
			return []string{"STRATA_CONTEXT_ARCHIVE=" + filepath.Join(dir, "ctx.tar.gz")}
		}, "could not be unpacked"},
		{"missing pull authfile", "pull", func(dir string) []string {
			return []string{"STRATA_BASE_IMAGES=2 r.example/x@sha256:" + strings.Repeat("0", 64), "STRATA_BASE_AUTHFILE=" + filepath.Join(dir, "nope", "auth.json")}
		}, "registry credentials"},
		{"missing push authfile", "push", func(dir string) []string {
			return []string{"STRATA_PUSH_SPEC=r.example/x:y", "STRATA_PUSH_AUTHFILE=" + filepath.Join(dir, "nope", "auth.json")}
		}, "registry credentials"},
		{"no layout to build into", "build", func(dir string) []string {
			return []string{"STRATA_CONTEXT_ARCHIVE=" + filepath.Join(dir, "ctx.tar.gz")}
		}, "STRATA_LAYOUT is not set"},
		{"no layout to push", "push", func(string) []string { return []string{"STRATA_PUSH_SPEC=r.example/x:y"} }, "STRATA_LAYOUT is not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "build.sh")
			writeFile(t, script, []byte(BuildScript()))
			termLog := filepath.Join(dir, "termination-log")
			cmd := exec.Command("bash", script, c.phase)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "STRATA_TERMINATION_LOG=" + termLog}
			cmd.Env = append(cmd.Env, "STRATA_SCRATCH="+filepath.Join(dir, "scratch"))
			if c.name != "no storage" {
				cmd.Env = append(cmd.Env, "STRATA_STORAGE="+filepath.Join(dir, "storage"))
			}
			if !strings.HasPrefix(c.name, "no layout") {
				cmd.Env = append(cmd.Env, "STRATA_LAYOUT="+filepath.Join(dir, "layout"))
			}
			cmd.Env = append(cmd.Env, c.env(dir)...)
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
