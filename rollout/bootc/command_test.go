package bootc

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script standing in for bootc.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bootc")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCommandTimesOut: a bootc that hangs fails its call within the
// verb's timeout, and the error says so (issue 20 point 9).
func TestCommandTimesOut(t *testing.T) {
	c := &Command{Argv: []string{script(t, "exec sleep 60\n")}, Timeouts: Timeouts{Status: 300 * time.Millisecond, Switch: 300 * time.Millisecond, Rollback: 300 * time.Millisecond}}
	for verb, call := range map[string]func(context.Context) error{
		"status":   func(ctx context.Context) error { _, err := c.Status(ctx); return err },
		"switch":   func(ctx context.Context) error { return c.Switch(ctx, "r/os@sha256:0") },
		"rollback": c.Rollback,
	} {
		start := time.Now()
		err := call(context.Background())
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("%s returned after %s", verb, took)
		}
		if err == nil || !strings.Contains(err.Error(), "bootc "+verb+": timed out after 300ms") {
			t.Errorf("%s: error %v, want a timeout", verb, err)
		}
	}
}

// TestDefaultTimeouts: every verb has a bound, the switch a long one.
func TestDefaultTimeouts(t *testing.T) {
	c, err := NewCommand("bootc")
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeouts.Status <= 0 || c.Timeouts.Rollback <= 0 || c.Timeouts.Switch < 30*time.Minute {
		t.Errorf("timeouts %+v", c.Timeouts)
	}
}

// TestSwitchEndsOptions: the image follows "--", so that bootc's clap
// parser takes a reference starting with "-" as the image (issue 20
// point 10).
func TestSwitchEndsOptions(t *testing.T) {
	args := filepath.Join(t.TempDir(), "args")
	c, err := NewCommand(script(t, `printf '%s\n' "$@" >`+args+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Switch(context.Background(), "r/os@sha256:0"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(b)), []string{"switch", "--transport", "registry", "--", "r/os@sha256:0"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("argv %q, want %q", got, want)
	}
}
