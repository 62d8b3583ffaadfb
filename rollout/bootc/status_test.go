package bootc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		file                      string
		booted, staged, rollback  string
		rollbackQueued            bool
		bootedDigest, specImage   string
		stagedVersion, bootedArch string
		stagedSoft, stagedLocked  bool
	}{{
		file:          "status-v1.json",
		booted:        "quay.io/example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111",
		staged:        "127.0.0.1:5000/strata/os@sha256:2222222222222222222222222222222222222222222222222222222222222222",
		bootedDigest:  "sha256:1111111111111111111111111111111111111111111111111111111111111111",
		specImage:     "quay.io/example/os:42",
		stagedVersion: "42.20250101",
		bootedArch:    "amd64",
		// A soft-reboot capable deployment staged download-only.
		stagedSoft:   true,
		stagedLocked: true,
	}, {
		file:         "status-v1alpha1.json",
		booted:       "registry.example.com:5000/os@sha256:3333333333333333333333333333333333333333333333333333333333333333",
		rollback:     "registry.example.com:5000/os@sha256:4444444444444444444444444444444444444444444444444444444444444444",
		bootedDigest: "sha256:3333333333333333333333333333333333333333333333333333333333333333",
		specImage:    "registry.example.com:5000/os:latest",
	}} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			h, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			st := h.Status
			if got := st.Booted.PullSpec(); got != tc.booted {
				t.Errorf("booted %q, want %q", got, tc.booted)
			}
			if got := st.Staged.PullSpec(); got != tc.staged {
				t.Errorf("staged %q, want %q", got, tc.staged)
			}
			if got := st.Rollback.PullSpec(); got != tc.rollback {
				t.Errorf("rollback %q, want %q", got, tc.rollback)
			}
			if got := st.Booted.Digest(); got != tc.bootedDigest {
				t.Errorf("booted digest %q, want %q", got, tc.bootedDigest)
			}
			if h.Spec.Image == nil || h.Spec.Image.Image != tc.specImage {
				t.Errorf("spec image %+v, want %q", h.Spec.Image, tc.specImage)
			}
			if tc.stagedVersion != "" && st.Staged.Image.Version != tc.stagedVersion {
				t.Errorf("staged version %q, want %q", st.Staged.Image.Version, tc.stagedVersion)
			}
			if st.Staged != nil && (st.Staged.SoftRebootCapable != tc.stagedSoft || st.Staged.DownloadOnly != tc.stagedLocked) {
				t.Errorf("staged softRebootCapable %v downloadOnly %v, want %v %v", st.Staged.SoftRebootCapable, st.Staged.DownloadOnly, tc.stagedSoft, tc.stagedLocked)
			}
			if st.Booted.SoftRebootCapable || st.Booted.DownloadOnly {
				t.Errorf("booted softRebootCapable %v downloadOnly %v, want false false", st.Booted.SoftRebootCapable, st.Booted.DownloadOnly)
			}
			if st.Booted.Image.Architecture != tc.bootedArch {
				t.Errorf("booted architecture %q, want %q", st.Booted.Image.Architecture, tc.bootedArch)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"not JSON":       `apiVersion: org.containers.bootc/v1`,
		"other version":  `{"apiVersion":"org.containers.bootc/v2","kind":"BootcHost"}`,
		"no version":     `{"kind":"BootcHost"}`,
		"other kind":     `{"apiVersion":"org.containers.bootc/v1","kind":"Host"}`,
		"two documents":  `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost"} {}`,
		"booted a array": `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{"booted":[]}}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: parsed %s", name, doc)
		}
	}
}

func TestNotABootcHost(t *testing.T) {
	h, err := Parse([]byte(`{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","spec":{"image":null},"status":{"booted":null,"staged":null,"rollback":null}}`))
	if err != nil {
		t.Fatal(err)
	}
	if d, p := h.Status.Booted.Digest(), h.Status.Booted.PullSpec(); d != "" || p != "" {
		t.Errorf("no booted entry gave digest %q, pull spec %q", d, p)
	}
}

func TestRepositoryAndDigest(t *testing.T) {
	for ref, want := range map[string]string{
		"quay.io/x/os":                       "quay.io/x/os",
		"quay.io/x/os:42":                    "quay.io/x/os",
		"127.0.0.1:5000/os":                  "127.0.0.1:5000/os",
		"127.0.0.1:5000/os:v1":               "127.0.0.1:5000/os",
		"127.0.0.1:5000/os@sha256:ab":        "127.0.0.1:5000/os",
		"127.0.0.1:5000/os:v1@sha256:ab":     "127.0.0.1:5000/os",
		"localhost:5000/a/b/c:tag@sha256:cd": "localhost:5000/a/b/c",
		"os":                                 "os",
	} {
		if got := Repository(ref); got != want {
			t.Errorf("Repository(%q) = %q, want %q", ref, got, want)
		}
	}
	for spec, want := range map[string]string{
		"127.0.0.1:5000/os@sha256:ab": "sha256:ab",
		"127.0.0.1:5000/os:v1":        "",
		"":                            "",
	} {
		if got := DigestOf(spec); got != want {
			t.Errorf("DigestOf(%q) = %q, want %q", spec, got, want)
		}
	}
}

func TestTail(t *testing.T) {
	if got := Tail("  short\n", 10); got != "short" {
		t.Errorf("Tail kept %q", got)
	}
	last := strings.Repeat("z", 30)
	long := strings.Repeat("x", 100) + "\n" + last
	if got := Tail(long, 40); got != "..."+last {
		t.Errorf("Tail(long) = %q", got)
	}
	if got := Tail("é"+strings.Repeat("y", 9), 10); !strings.HasPrefix(got, "...") || !json.Valid([]byte(`"`+got+`"`)) {
		t.Errorf("Tail split a character: %q", got)
	}
}

// TestCommand runs a stand-in bootc: a shell script that records its
// arguments and prints a status.
func TestCommand(t *testing.T) {
	dir := t.TempDir()
	status, err := os.ReadFile(filepath.Join("testdata", "status-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status.json"), status, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
echo "$@" >> "` + dir + `/calls"
case "$2" in
status) cat "` + dir + `/status.json" ;;
rollback) echo "error: no rollback deployment" >&2; exit 1 ;;
esac
`
	bin := filepath.Join(dir, "fake-bootc")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := NewCommand("  " + bin + "  --global ")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status.Booted.Digest() == "" {
		t.Error("no booted digest")
	}
	if err := c.Switch(ctx, "127.0.0.1:5000/os@sha256:ab"); err != nil {
		t.Fatal(err)
	}
	err = c.Rollback(ctx)
	if err == nil || !strings.Contains(err.Error(), "no rollback deployment") {
		t.Errorf("rollback error %v, want the command's stderr", err)
	}
	calls, err := os.ReadFile(filepath.Join(dir, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--global status --format=json", "--global switch --transport registry -- 127.0.0.1:5000/os@sha256:ab", "--global rollback"}
	if got := strings.Split(strings.TrimSpace(string(calls)), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if _, err := NewCommand(" "); err == nil {
		t.Error("an empty command was accepted")
	}
}

// FuzzParse: any input either fails to parse or gives a host whose
// accessors work and whose JSON encoding parses back to the same
// encoding.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"status-v1.json", "status-v1alpha1.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{"booted":{"image":null}}}`))
	f.Add([]byte(`{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{"booted":{"image":{"image":{"image":"a:1@b"},"imageDigest":"x"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Parse(data)
		if err != nil {
			return
		}
		for _, e := range []*BootEntry{h.Status.Booted, h.Status.Staged, h.Status.Rollback} {
			spec := e.PullSpec()
			if spec != "" && !strings.Contains(e.Digest(), "@") && DigestOf(spec) != e.Digest() {
				t.Errorf("pull spec %q does not end in digest %q", spec, e.Digest())
			}
		}
		again, err := json.Marshal(h)
		if err != nil {
			t.Fatalf("marshal a parsed host: %v", err)
		}
		h2, err := Parse(again)
		if err != nil {
			t.Fatalf("reparse %s: %v", again, err)
		}
		// The signature is kept raw, so compare encodings: the first one
		// must be a fixed point.
		third, err := json.Marshal(h2)
		if err != nil {
			t.Fatalf("marshal a reparsed host: %v", err)
		}
		if string(again) != string(third) {
			t.Errorf("round trip changed the host:\n%s\n%s", again, third)
		}
	})
}
