package sigpolicy_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-dev/strata/sigpolicy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func readKey(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// render joins the files as "== path\ncontent" for one golden file.
func render(files []sigpolicy.File) []byte {
	var b bytes.Buffer
	for _, f := range files {
		b.WriteString("== " + f.Path + "\n")
		b.Write(f.Data)
	}
	return b.Bytes()
}

// The files a node gets during a rotation (two keys), pinned; the key
// order does not matter.
func TestNodePolicyGolden(t *testing.T) {
	oldKey, newKey := readKey(t, "old.pub"), readKey(t, "new.pub")
	files, err := sigpolicy.NodePolicy("registry.example.com/os/worker", [][]byte{oldKey, newKey})
	if err != nil {
		t.Fatal(err)
	}
	got := render(files)
	golden := filepath.Join("testdata", "rotation.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("NodePolicy differs from %s (run with -update and review the diff):\n%s", golden, got)
	}
	swapped, err := sigpolicy.NodePolicy("registry.example.com/os/worker", [][]byte{newKey, oldKey})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(render(swapped), got) {
		t.Fatal("the key order changes the files")
	}
}

func TestNodePolicyRefusesBadInput(t *testing.T) {
	key := readKey(t, "old.pub")
	for _, tc := range []struct {
		name, repo string
		keys       [][]byte
		want       string
	}{
		{"no keys", "r.example/os", nil, "no public key"},
		{"not PEM", "r.example/os", [][]byte{[]byte("ssh-ed25519 AAAA")}, "[0]: not a PEM public key"},
		{"private key", "r.example/os", [][]byte{[]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")}, `PEM block "PRIVATE KEY"`},
		{"two in one", "r.example/os", [][]byte{append(append([]byte{}, key...), key...)}, "more than one PEM block"},
		{"digest", "r.example/os@sha256:00", [][]byte{key}, "without tag or digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sigpolicy.NodePolicy(tc.repo, tc.keys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
