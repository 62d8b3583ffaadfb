package bootc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// recorder is a stand-in bootc that appends its arguments, one call a
// line, to a file, and the file.
func recorder(t *testing.T) (*Command, string) {
	t.Helper()
	calls := filepath.Join(t.TempDir(), "calls")
	c, err := NewCommand(script(t, `echo "$@" >>`+calls+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return c, calls
}

func readCalls(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestNewCallsArgv: each new call runs the bootc command line bootc
// documents, options before "--" and the image after it.
func TestNewCallsArgv(t *testing.T) {
	const img = "r/os@sha256:0"
	for _, tc := range []struct {
		name string
		call func(context.Context, *Command) error
		want string
	}{{
		"switch locked",
		func(ctx context.Context, c *Command) error {
			return c.SwitchWith(ctx, img, SwitchOptions{DownloadOnly: true})
		},
		"switch --download-only --transport registry -- " + img,
	}, {
		"switch locked and verified",
		func(ctx context.Context, c *Command) error {
			return c.SwitchWith(ctx, img, SwitchOptions{DownloadOnly: true, EnforceSigPolicy: true})
		},
		"switch --download-only --enforce-container-sigpolicy --transport registry -- " + img,
	}, {
		"switch applied with a soft reboot",
		func(ctx context.Context, c *Command) error {
			return c.SwitchWith(ctx, img, SwitchOptions{Apply: Apply{Reboot: true, SoftReboot: SoftRebootAuto}})
		},
		"switch --apply --soft-reboot=auto --transport registry -- " + img,
	}, {
		"switch preparing a required soft reboot",
		func(ctx context.Context, c *Command) error {
			return c.SwitchWith(ctx, img, SwitchOptions{Apply: Apply{SoftReboot: SoftRebootRequired}})
		},
		"switch --soft-reboot=required --transport registry -- " + img,
	}, {
		"plain switch",
		func(ctx context.Context, c *Command) error { return c.Switch(ctx, img) },
		"switch --transport registry -- " + img,
	}, {
		"lock the staged deployment",
		func(ctx context.Context, c *Command) error { return c.LockStaged(ctx) },
		"upgrade --download-only",
	}, {
		"unlock only",
		func(ctx context.Context, c *Command) error { return c.ApplyDownloaded(ctx, Apply{}) },
		"upgrade --from-downloaded",
	}, {
		"apply downloaded with a required soft reboot",
		func(ctx context.Context, c *Command) error {
			return c.ApplyDownloaded(ctx, Apply{Reboot: true, SoftReboot: SoftRebootRequired})
		},
		"upgrade --from-downloaded --apply --soft-reboot=required",
	}, {
		"apply downloaded with a full reboot",
		func(ctx context.Context, c *Command) error { return c.ApplyDownloaded(ctx, Apply{Reboot: true}) },
		"upgrade --from-downloaded --apply",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, calls := recorder(t)
			if err := tc.call(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			if got := readCalls(t, calls); !reflect.DeepEqual(got, []string{tc.want}) {
				t.Errorf("calls %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInvalidOptionsRunNothing: options bootc would refuse, or that make
// no sense for a locked stage, fail before bootc runs.
func TestInvalidOptionsRunNothing(t *testing.T) {
	c, calls := recorder(t)
	ctx := context.Background()
	for name, err := range map[string]error{
		"download-only with apply":       c.SwitchWith(ctx, "r/os@sha256:0", SwitchOptions{DownloadOnly: true, Apply: Apply{Reboot: true}}),
		"download-only with soft reboot": c.SwitchWith(ctx, "r/os@sha256:0", SwitchOptions{DownloadOnly: true, Apply: Apply{SoftReboot: SoftRebootAuto}}),
		"unknown soft reboot mode":       c.ApplyDownloaded(ctx, Apply{Reboot: true, SoftReboot: "always"}),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if got := readCalls(t, calls); got != nil {
		t.Errorf("bootc ran: %q", got)
	}
}

func TestNewCallsTimeOut(t *testing.T) {
	c := &Command{Argv: []string{script(t, "exec sleep 60\n")}, Timeouts: Timeouts{Status: 300 * time.Millisecond, Switch: 300 * time.Millisecond, Apply: 300 * time.Millisecond}}
	for verb, call := range map[string]func(context.Context) error{
		"switch": func(ctx context.Context) error {
			return c.SwitchWith(ctx, "r/os@sha256:0", SwitchOptions{DownloadOnly: true})
		},
		"upgrade": func(ctx context.Context) error { return c.ApplyDownloaded(ctx, Apply{Reboot: true}) },
	} {
		err := call(context.Background())
		if err == nil || !strings.Contains(err.Error(), "bootc "+verb+": timed out after 300ms") {
			t.Errorf("%s: error %v, want a timeout", verb, err)
		}
	}
	if DefaultTimeouts.Apply <= 0 {
		t.Errorf("no default bound for apply: %+v", DefaultTimeouts)
	}
}

func readHelp(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "help", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCapabilities: bootc 1.16's switch has no --download-only, its
// upgrade has it; the newer switch has it. A description naming an
// option does not count as the option.
func TestCapabilities(t *testing.T) {
	up := readHelp(t, "upgrade-1.16.txt")
	old := ParseCapabilities(readHelp(t, "switch-1.16.txt"), up)
	if want := (Capabilities{UpgradeDownloadOnly: true, SoftReboot: true, EnforceSigPolicy: true}); old != want {
		t.Errorf("1.16: %+v, want %+v", old, want)
	}
	if old.LockedStaging() {
		t.Error("1.16 can stage locked with switch")
	}
	newer := ParseCapabilities(readHelp(t, "switch-main.txt"), up)
	if want := (Capabilities{SwitchDownloadOnly: true, UpgradeDownloadOnly: true, SoftReboot: true, EnforceSigPolicy: true}); newer != want {
		t.Errorf("main: %+v, want %+v", newer, want)
	}
	if !newer.LockedStaging() {
		t.Error("main cannot stage locked with switch")
	}
	prose := "Options:\n      --from-downloaded\n          Apply what was downloaded with --download-only.\n"
	if hasOption(prose, "download-only") || !hasOption(prose, "from-downloaded") {
		t.Error("an option named in a description was taken for one")
	}
	if !hasOption("  -q, --quiet\n", "quiet") || hasOption("      --quieter\n", "quiet") {
		t.Error("short forms or longer names misread")
	}
	if got := ParseCapabilities("", ""); got != (Capabilities{}) {
		t.Errorf("empty help: %+v", got)
	}
}

func TestCapabilitiesRunsHelp(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"switch-main.txt", "upgrade-1.16.txt"} {
		if err := os.WriteFile(filepath.Join(dir, strings.Split(f, "-")[0]), []byte(readHelp(t, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewCommand(script(t, `[ "$2" = --help ] || exit 2; cat "`+dir+`/$1"`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !got.SwitchDownloadOnly || !got.UpgradeDownloadOnly || !got.SoftReboot {
		t.Errorf("capabilities %+v", got)
	}
}

func TestSoftRebootCount(t *testing.T) {
	for out, want := range map[string]int{"SoftRebootsCount=0\n": 0, "SoftRebootsCount=3": 3} {
		if got, err := ParseSoftRebootsCount(out); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", out, got, err, want)
		}
	}
	if _, err := ParseSoftRebootsCount("\n"); !errors.Is(err, ErrNoSoftRebootCount) {
		t.Errorf("empty output: %v, want ErrNoSoftRebootCount", err)
	}
	for _, bad := range []string{"NRestarts=0", "SoftRebootsCount=x", "SoftRebootsCount=-1", "SoftRebootsCount=1\nSoftRebootsCount=2"} {
		if n, err := ParseSoftRebootsCount(bad); err == nil {
			t.Errorf("%q parsed as %d", bad, n)
		}
	}

	args := filepath.Join(t.TempDir(), "args")
	s, err := NewSystemctl(script(t, `echo "$@" >`+args+"\necho SoftRebootsCount=2\n") + " --no-pager")
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.SoftRebootCount(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("count %d, %v", n, err)
	}
	if got := strings.TrimSpace(readFileT(t, args)); got != "--no-pager show -p SoftRebootsCount" {
		t.Errorf("argv %q", got)
	}
	failing := &Systemctl{Argv: []string{script(t, "echo 'Failed to connect to bus' >&2; exit 1\n")}}
	if _, err := failing.SoftRebootCount(context.Background()); err == nil || !strings.Contains(err.Error(), "systemctl show") || !strings.Contains(err.Error(), "Failed to connect to bus") {
		t.Errorf("error %v, want systemctl's message", err)
	}
	if _, err := NewSystemctl(" "); err == nil {
		t.Error("an empty systemctl command was accepted")
	}
}

func readFileT(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
