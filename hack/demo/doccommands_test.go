package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDocCommandsRunAsPrinted reads the commands the README, docs/ and
// the demo's closing words print, as demo check does, and fails on one
// that demo check would run with an example value it has no demo value
// for, or with a tool a fresh machine does not have: such a command
// would fail for a user too, or go untested.
func TestDocCommandsRunAsPrinted(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := docCommands(root, closingHints("/k", "127.0.0.1:5000/strata/os/worker@sha256:abc"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) < 10 {
		t.Fatalf("found %d commands; the README's sh blocks were not read", len(cmds))
	}
	v := demoValues{image: "127.0.0.1:5000/strata/os/worker@sha256:abc", build: "worker-abc", node: "demo-0"}
	placeholder := regexp.MustCompile(`example\.(com|org)|<[a-z-]+>|\.\.\.`)
	// The commands a fresh machine has once make demo ran: Go, bash's
	// builtins, and what make puts in .infra/bin.
	tools := map[string]bool{"go": true, "kubectl": true, "crane": true, "export": true, "for": true, "if": true, "make": true}
	run := 0
	for _, c := range cmds {
		// Also a command the check does not run must be one a user can type.
		if tool := strings.Fields(c.line)[0]; !tools[strings.TrimPrefix(tool, ".infra/bin/")] && !strings.Contains(tool, "=") {
			t.Errorf("%s: %q runs %s, which a fresh machine does not have (print go run ./cmd/%s, or add it to make demo)", c.where, c.line, tool, tool)
		}
		if ruledOut(c.line) != "" {
			continue
		}
		run++
		line := v.placeholders(c.line)
		if m := placeholder.FindString(strings.SplitN(line, " #", 2)[0]); m != "" {
			t.Errorf("%s: %q keeps the example %q: give demoValues its demo value or a notRun rule", c.where, line, m)
		}
	}
	if run == 0 {
		t.Fatal("every printed command is ruled out")
	}
}

func TestShellLines(t *testing.T) {
	md := "text\n```sh\n# a comment\nkubectl get mcp   # pools\nkubectl get \\\n  nodes\nfor i in a b; do\n  echo $i\ndone\n```\n```yaml\nkind: X\n```\n"
	got := shellLines("f.md", []byte(md))
	want := []string{"kubectl get mcp   # pools", "kubectl get   nodes", "for i in a b; do\necho $i\ndone"}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %q", got, want)
	}
	for i := range want {
		if got[i].line != want[i] {
			t.Errorf("line %d = %q, want %q", i, got[i].line, want[i])
		}
	}
	if got[0].where != "f.md:4" {
		t.Errorf("where = %q, want f.md:4", got[0].where)
	}
}

// TestRunCommandEndsItsChildren: a command whose child outlives it (go
// run's binary, a watch) ends at its limit with its children, instead of
// holding the check until the child ends: demo check once waited ten
// minutes on `go run ./cmd/stratactl status --watch`.
func TestRunCommandEndsItsChildren(t *testing.T) {
	started := time.Now()
	out, timedOut, err := runCommand(context.Background(), "sleep 300 & echo watching; wait", t.TempDir(), nil, time.Second)
	if took := time.Since(started); took > 20*time.Second {
		t.Fatalf("took %s: the child kept the command's output open", took)
	}
	if !timedOut || err == nil || !strings.Contains(string(out), "watching") {
		t.Fatalf("timedOut %v, err %v, output %q; want the limit, an error and the output so far", timedOut, err, out)
	}
}
