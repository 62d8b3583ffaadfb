package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/testregistry"
)

// The status document as ../../../shared/docs/BOOTC.md describes it,
// decoded strictly: a field the simulator adds or renames fails.
type strictHost struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Image     *strictImageRef `json:"image"`
		BootOrder string          `json:"bootOrder"`
	} `json:"spec"`
	Status struct {
		Staged         *strictEntry `json:"staged"`
		Booted         *strictEntry `json:"booted"`
		Rollback       *strictEntry `json:"rollback"`
		RollbackQueued bool         `json:"rollbackQueued"`
		Type           *string      `json:"type"`
	} `json:"status"`
}

type strictImageRef struct {
	Image     string          `json:"image"`
	Transport string          `json:"transport"`
	Signature json.RawMessage `json:"signature"`
}

type strictImageStatus struct {
	Image        strictImageRef `json:"image"`
	ImageDigest  string         `json:"imageDigest"`
	Architecture string         `json:"architecture"`
	Version      *string        `json:"version"`
	Timestamp    *string        `json:"timestamp"`
}

type strictEntry struct {
	Image             *strictImageStatus `json:"image"`
	CachedUpdate      *strictImageStatus `json:"cachedUpdate"`
	Incompatible      bool               `json:"incompatible"`
	Pinned            bool               `json:"pinned"`
	DownloadOnly      bool               `json:"downloadOnly"`
	SoftRebootCapable bool               `json:"softRebootCapable"`
	Store             *string            `json:"store"`
	Ostree            *struct {
		Checksum     string `json:"checksum"`
		DeploySerial int    `json:"deploySerial"`
		Stateroot    string `json:"stateroot"`
	} `json:"ostree"`
}

// decodeStrict decodes a status document and checks that the keys bootc
// always writes (null or not) are there. It is also the contract between
// the simulator and the daemon: the same bytes go through the daemon's
// parser (rollout/bootc), which must read what the strict decoding read.
func decodeStrict(t *testing.T, data []byte) *strictHost {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var h strictHost
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("strict decode: %v\n%s", err, data)
	}
	var raw struct {
		Spec   map[string]json.RawMessage `json:"spec"`
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"image", "bootOrder"} {
		if _, ok := raw.Spec[k]; !ok {
			t.Errorf("spec.%s missing:\n%s", k, data)
		}
	}
	for _, k := range []string{"staged", "booted", "rollback", "rollbackQueued", "type"} {
		if _, ok := raw.Status[k]; !ok {
			t.Errorf("status.%s missing:\n%s", k, data)
		}
	}
	if h.APIVersion != "org.containers.bootc/v1" || h.Kind != "BootcHost" || h.Metadata.Name != "host" {
		t.Fatalf("header %s %s %s", h.APIVersion, h.Kind, h.Metadata.Name)
	}
	for _, slot := range []string{"staged", "booted", "rollback"} {
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(raw.Status[slot], &entry); err != nil {
			t.Fatal(err)
		}
		if entry == nil {
			continue
		}
		for _, k := range []string{"image", "cachedUpdate", "incompatible", "pinned", "downloadOnly", "softRebootCapable", "store", "ostree"} {
			if _, ok := entry[k]; !ok {
				t.Errorf("status.%s.%s missing:\n%s", slot, k, data)
			}
		}
		var img map[string]json.RawMessage
		if err := json.Unmarshal(entry["image"], &img); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"image", "version", "timestamp", "imageDigest", "architecture"} {
			if _, ok := img[k]; img != nil && !ok {
				t.Errorf("status.%s.image.%s missing:\n%s", slot, k, data)
			}
		}
	}
	expectDaemonReads(t, data, &h)
	return &h
}

// expectDaemonReads parses data with the daemon's parser and checks that
// it reads what the strict decoding h read.
func expectDaemonReads(t *testing.T, data []byte, h *strictHost) {
	t.Helper()
	d, err := bootc.Parse(data)
	if err != nil {
		t.Fatalf("the daemon cannot parse the simulator's status: %v\n%s", err, data)
	}
	digest := func(e *strictEntry) string {
		if e == nil || e.Image == nil {
			return ""
		}
		return e.Image.ImageDigest
	}
	for _, c := range []struct {
		slot   string
		daemon *bootc.BootEntry
		strict *strictEntry
	}{{"staged", d.Status.Staged, h.Status.Staged}, {"booted", d.Status.Booted, h.Status.Booted}, {"rollback", d.Status.Rollback, h.Status.Rollback}} {
		if got, want := c.daemon.Digest(), digest(c.strict); got != want {
			t.Errorf("the daemon reads %s digest %q, the document says %q", c.slot, got, want)
		}
		if want := digest(c.strict); want != "" {
			if got := c.daemon.PullSpec(); got != bootc.Repository(c.strict.Image.Image.Image)+"@"+want {
				t.Errorf("the daemon reads %s pull spec %q from %q", c.slot, got, c.strict.Image.Image.Image)
			}
		}
	}
	if d.Status.RollbackQueued != h.Status.RollbackQueued || d.Spec.BootOrder != h.Spec.BootOrder {
		t.Errorf("the daemon reads rollbackQueued %v, bootOrder %q; the document says %v, %q",
			d.Status.RollbackQueued, d.Spec.BootOrder, h.Status.RollbackQueued, h.Spec.BootOrder)
	}
	// What the daemon would write back is what the simulator wrote: one
	// type, one encoding.
	again, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, bytes.TrimSpace(data)) {
		t.Errorf("the daemon's encoding differs from the simulator's:\n%s\n%s", again, data)
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func cli(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, args...)
	if r.code != 0 {
		t.Fatalf("bootc-sim %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func pushImage(t *testing.T, reg *testregistry.Registry, repoTag string, files map[string]string) (ref, digest string) {
	t.Helper()
	layer := testregistry.FilesLayer(t, files)
	img, err := mutate.AppendLayers(testregistry.Busybox(t), layer)
	if err != nil {
		t.Fatal(err)
	}
	ref = reg.Push(t, repoTag, img)
	_, digest, _ = strings.Cut(ref, "@")
	return ref, digest
}

func TestCommandLine(t *testing.T) {
	reg := testregistry.Start(t, "")
	ref1, digest1 := pushImage(t, reg, "strata/cli:1", map[string]string{
		"etc/cli.conf": "1\n", "usr/lib/bootc/kargs.d/cli.toml": "kargs = [\"strata.cli=1\"]\n"})
	ref2, digest2 := pushImage(t, reg, "strata/cli:2", map[string]string{
		"etc/cli.conf": "2\n", "usr/lib/bootc/kargs.d/cli.toml": "kargs = [\"strata.cli=2\"]\n"})
	root := filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(root); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	sr := "--sim-root=" + root

	// Not installed yet: a host bootc does not manage.
	h := decodeStrict(t, []byte(mustCLI(t, sr, "status", "--format=json")))
	if h.Status.Booted != nil || h.Status.Type != nil || h.Spec.Image != nil {
		t.Fatalf("status before init: %+v", h)
	}

	mustCLI(t, sr, "sim", "init", ref1)
	// The three spellings of JSON output print the same document.
	js := mustCLI(t, sr, "status", "--format=json")
	for _, args := range [][]string{{"status", "--json"}, {"status", "--format", "json"}} {
		if got := mustCLI(t, append([]string{sr}, args...)...); got != js {
			t.Fatalf("%v printed\n%s\nwant\n%s", args, got, js)
		}
	}
	h = decodeStrict(t, []byte(js))
	if b := h.Status.Booted; b == nil || b.Image == nil || b.Image.Image.Image != ref1 || b.Image.ImageDigest != digest1 ||
		b.Image.Image.Transport != "registry" || *h.Status.Type != "bootcHost" || h.Spec.Image.Image != ref1 {
		t.Fatalf("status after init:\n%s", js)
	}
	if y := mustCLI(t, sr, "status"); !strings.Contains(y, "apiVersion: org.containers.bootc/v1") {
		t.Fatalf("default (YAML) status:\n%s", y)
	}
	bootID, err := os.ReadFile(filepath.Join(root, ".bootc-sim", "boot_id"))
	if err != nil {
		t.Fatal(err)
	}

	// The node directory can come from the environment, as the daemon's
	// children inherit it.
	t.Setenv("BOOTC_SIM_ROOT", root)
	if out := mustCLI(t, "switch", "--transport", "registry", "--retain", ref2); !strings.Contains(out, "Queued for next boot: "+ref2) {
		t.Fatalf("switch printed %q", out)
	}
	// The daemon ends the options with "--", as clap (bootc's parser)
	// and cobra both take it.
	if out := mustCLI(t, "switch", "--transport", "registry", "--", ref2); strings.TrimSpace(out) != "Image specification is unchanged." {
		t.Fatalf("second switch printed %q", out)
	}
	h = decodeStrict(t, []byte(mustCLI(t, "status", "--format=json")))
	if h.Status.Staged == nil || h.Status.Staged.Image.ImageDigest != digest2 || h.Spec.Image.Image != ref2 {
		t.Fatalf("staged after switch: %+v", h.Status.Staged)
	}

	mustCLI(t, "sim", "request-reboot")
	if _, err := os.Stat(filepath.Join(root, ".bootc-sim", "reboot-requested")); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "sim", "reboot")
	if _, err := os.Stat(filepath.Join(root, ".bootc-sim", "reboot-requested")); err == nil {
		t.Fatal("reboot request still there after the reboot")
	}
	if again, _ := os.ReadFile(filepath.Join(root, ".bootc-sim", "boot_id")); bytes.Equal(again, bootID) {
		t.Fatal("boot id unchanged by the reboot")
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc", "cli.conf")); string(got) != "2\n" {
		t.Fatalf("/etc/cli.conf after the reboot = %q", got)
	}
	if out := mustCLI(t, "sim", "kargs"); out != "strata.cli=2\n" {
		t.Fatalf("sim kargs = %q", out)
	}
	mustCLI(t, "sim", "health")
	mustCLI(t, "sim", "fail-boot", digest2)
	if r := cli(t, "sim", "health"); r.code != 1 || !strings.Contains(r.stderr, digest2) {
		t.Fatalf("sim health of a failing image: %+v", r)
	}

	if out := mustCLI(t, "rollback"); !strings.Contains(out, "Next boot: rollback deployment") {
		t.Fatalf("rollback printed %q", out)
	}
	h = decodeStrict(t, []byte(mustCLI(t, "status", "--format=json")))
	if !h.Status.RollbackQueued || h.Spec.BootOrder != "rollback" {
		t.Fatalf("after rollback: queued %v, bootOrder %q", h.Status.RollbackQueued, h.Spec.BootOrder)
	}
	mustCLI(t, "sim", "reboot")
	mustCLI(t, "sim", "health")
	h = decodeStrict(t, []byte(mustCLI(t, "status", "--format=json")))
	if h.Status.Booted.Image.ImageDigest != digest1 || h.Status.Rollback.Image.ImageDigest != digest2 || h.Status.RollbackQueued {
		t.Fatalf("after the rollback's reboot: booted %s rollback %s", h.Status.Booted.Image.ImageDigest, h.Status.Rollback.Image.ImageDigest)
	}

	// clap, bootc's parser, exits 2 on a command line it refuses.
	if r := cli(t, "switch"); r.code != 2 || !strings.HasPrefix(r.stderr, "error: ") {
		t.Fatalf("switch without an image: %+v", r)
	}
	if r := cli(t, "status", "--format=toml"); r.code != 1 {
		t.Fatalf("status --format=toml: %+v", r)
	}
}
