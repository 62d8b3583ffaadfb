package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func write(t *testing.T, root, name, content string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSet: the runtime's soft limit is 80% of the container's 512 Mi,
// read from cgroup v2 or v1; no limit and an explicit GOMEMLIMIT leave the
// runtime alone; a file that is not a limit is an error naming it.
func TestSet(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const limit = 512 << 20
	for _, c := range []struct {
		name, file, content, env string
		want                     int64
		wantErr                  bool
	}{
		{name: "v2", file: "memory.max", content: "536870912\n", want: limit * 8 / 10},
		{name: "v1", file: "memory/memory.limit_in_bytes", content: "536870912\n", want: limit * 8 / 10},
		{name: "v2, no limit", file: "memory.max", content: "max\n"},
		{name: "v1, no limit", file: "memory/memory.limit_in_bytes", content: "9223372036854771712\n"},
		{name: "no cgroup", file: "unrelated", content: "1"},
		{name: "GOMEMLIMIT set", file: "memory.max", content: "536870912\n", env: "300MiB"},
		{name: "not a limit", file: "memory.max", content: "lots\n", wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOMEMLIMIT", c.env)
			root := t.TempDir()
			write(t, root, c.file, c.content)
			got, err := Set(root)
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), filepath.Join(root, c.file)) {
					t.Fatalf("Set = %d, %v; want an error naming %s", got, err, c.file)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Set = %d, want %d", got, c.want)
			}
			runtime := debug.SetMemoryLimit(-1)
			if c.want != 0 && runtime != c.want {
				t.Errorf("the runtime's limit is %d, want %d", runtime, c.want)
			}
			if c.want == 0 && runtime != math.MaxInt64 {
				t.Errorf("the runtime's limit is %d, want it left alone", runtime)
			}
		})
	}
}
