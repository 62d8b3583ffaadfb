package direct

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/test/testhost"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestBuildahBuildsFromResult: buildah pulls the image Build pushed and
// finds the layer's files as the tar had them, over the base's.
func TestBuildahBuildsFromResult(t *testing.T) {
	if _, err := exec.LookPath("buildah"); err != nil {
		t.Fatalf("buildah is not installed: this test needs it (apt-get install -y buildah): %v", err)
	}
	busybox := testregistry.Busybox(t)
	testhost.UseBuildah(t)
	reg := testregistry.Start(t, regPass)
	base := reg.Push(t, "test/busybox:latest", busybox)
	req := request(base, reg.Host+"/test/direct:config", testLayer(t, "buildah"), reg)
	// A Docker v2 schema 2 manifest has no annotations field; buildah must
	// still accept one that carries them.
	req.Annotations = map[string]string{"org.opencontainers.image.description": "strata config"}
	res, err := Build(context.Background(), req)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}

	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	auth := file("auth.json", string(reg.DockerConfigJSON(regPass)))
	policy := file("policy.json", `{"default":[{"type":"insecureAcceptAnything"}]}`)
	regConf := file("registries.conf", "unqualified-search-registries = []\n\n[[registry]]\nlocation = \""+reg.Host+"\"\ninsecure = true\n")
	storageConf := file("storage.conf", "[storage]\ndriver = \"vfs\"\nrunroot = \""+dir+"/runroot\"\ngraphroot = \""+dir+"/root\"\n")
	// Each check names itself, so that a failure says which.
	checks := []string{
		`test "$(cat /etc/strata-test)" = "strata test buildah"`,
		`test "$(stat -c %Y /etc/strata-test)" = 0`,
		`test "$(readlink /etc/strata-link)" = strata-test`,
		`test "$(stat -c %i /etc/strata-hard)" = "$(stat -c %i /etc/strata-test)"`,
		`test "$(stat -c %u:%g:%a /var/home/core)" = 1000:1000:700`,
		`test "$(stat -c %u:%g:%a /var/home/core/.profile)" = 1000:1000:640`,
		`test "$(stat -c %u:%g:%a /etc/strata.d)" = 0:0:750`,
		`test "$(stat -c %a /etc/strata.d/secret.conf)" = 600`,
		`test "$(cat /etc/motd)" = "base motd"`,
		`test -x /bin/busybox`,
	}
	var cf strings.Builder
	cf.WriteString("FROM " + res.Image + "\n")
	for _, c := range checks {
		cf.WriteString("RUN " + c + " || { echo 'FAILED: " + strings.ReplaceAll(c, "'", "") + "'; exit 1; }\n")
	}
	cf.WriteString("RUN echo all-checks-passed\n")
	containerfile := file("context/Containerfile", cf.String())

	buildah := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		global := []string{"--root", dir + "/root", "--runroot", dir + "/runroot", "--storage-driver", "vfs"}
		cmd := exec.CommandContext(ctx, "buildah", append(global, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + filepath.Join(dir, "tmp"),
			"CONTAINERS_REGISTRIES_CONF=" + regConf, "CONTAINERS_STORAGE_CONF=" + storageConf, "BUILDAH_ISOLATION=chroot"}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	iid := filepath.Join(dir, "iid")
	out := buildah("bud", "--isolation", "chroot", "--signature-policy", policy, "--authfile", auth,
		"--iidfile", iid, "-f", containerfile, filepath.Join(dir, "context"))
	if !strings.Contains(out, "all-checks-passed") {
		t.Errorf("the build did not run its checks:\n%s", out)
	}
	id, err := os.ReadFile(iid)
	if err != nil {
		t.Fatal(err)
	}
	label := buildah("inspect", "--type", "image", "--format", `{{index .OCIv1.Config.Labels "strata.dev/config"}}`, strings.TrimSpace(string(id)))
	if strings.TrimSpace(label) != "rendered-worker-1" {
		t.Errorf("label strata.dev/config of the image built FROM the result = %q, want rendered-worker-1", label)
	}
}
