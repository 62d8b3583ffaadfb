package bootc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// outputTail is how much of a failed command's output an error carries:
// enough for the last lines of a pull error, small enough for an
// annotation.
const outputTail = 512

// Timeouts bound each bootc verb. A bootc that hangs (a registry that
// never answers, a sysroot lock never released) must not hold the node
// in its update forever: the call fails, the reason says so, and the next
// sync tries again.
type Timeouts struct {
	// Status bounds `bootc status`: local and quick.
	Status time.Duration
	// Switch bounds `bootc switch`, which pulls the whole image.
	Switch time.Duration
	// Rollback bounds `bootc rollback`: local, a boot loader update.
	Rollback time.Duration
	// Apply bounds `bootc upgrade --from-downloaded`: local, it unlocks
	// the staged deployment (and prepares a soft reboot).
	Apply time.Duration
}

// DefaultTimeouts are generous for a node's bootc: a switch may pull
// gigabytes over a slow link. Staging locked pulls as a switch does, so
// it takes Switch's bound; asking bootc which options it has is local
// and takes Status's.
var DefaultTimeouts = Timeouts{Status: 2 * time.Minute, Switch: time.Hour, Rollback: 5 * time.Minute, Apply: 5 * time.Minute}

// waitDelay is how long a killed bootc's output pipes are waited for: a
// child of an nsenter prefix may outlive the kill and hold them.
const waitDelay = 10 * time.Second

// Command runs bootc as Argv, a prefix such as ["bootc"] or ["nsenter",
// "--target", "1", "--mount", "--pid", "--", "bootc"]. Children inherit
// the daemon's environment.
type Command struct {
	Argv []string
	// Timeouts bound each verb; a zero field takes DefaultTimeouts'.
	Timeouts Timeouts
}

// NewCommand splits a command line at whitespace into a Command with the
// default timeouts.
func NewCommand(line string) (*Command, error) {
	argv := strings.Fields(line)
	if len(argv) == 0 {
		return nil, errors.New("empty bootc command")
	}
	return &Command{Argv: argv, Timeouts: DefaultTimeouts}, nil
}

func pick(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Status runs `bootc status --format=json`.
func (c *Command) Status(ctx context.Context) (*Host, error) {
	out, err := c.run(ctx, pick(c.Timeouts.Status, DefaultTimeouts.Status), "status", "--format=json")
	if err != nil {
		return nil, err
	}
	return Parse(out)
}

// Switch stages image as the next boot without rebooting. Switching to
// the image already in use succeeds and changes nothing. The image comes
// after "--", so that no reference can be taken for an option.
func (c *Command) Switch(ctx context.Context, image string) error {
	return c.SwitchWith(ctx, image, SwitchOptions{})
}

// SwitchWith is `bootc switch` with options: staged locked, or applied
// at once with or without a soft reboot.
func (c *Command) SwitchWith(ctx context.Context, image string, o SwitchOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	args := []string{"switch"}
	if o.DownloadOnly {
		args = append(args, "--download-only")
	}
	args = append(args, o.Apply.args()...)
	if o.EnforceSigPolicy {
		args = append(args, "--enforce-container-sigpolicy")
	}
	args = append(args, "--transport", TransportRegistry, "--", image)
	_, err := c.run(ctx, pick(c.Timeouts.Switch, DefaultTimeouts.Switch), args...)
	return err
}

// LockStaged is `bootc upgrade --download-only`: it makes the staged
// deployment one that no reboot applies. bootc's upgrade fetches the
// spec's image, which after a switch is the staged image by digest:
// already present, nothing is downloaded, and bootc then only locks the
// staged deployment. It is how a bootc whose switch has no
// --download-only (1.16) gets a locked deployment: switch, then lock,
// which leaves a short unlocked window the daemon must still expect.
func (c *Command) LockStaged(ctx context.Context) error {
	_, err := c.run(ctx, pick(c.Timeouts.Switch, DefaultTimeouts.Switch), "upgrade", "--download-only")
	return err
}

// ApplyDownloaded is `bootc upgrade --from-downloaded`: it unlocks the
// staged deployment so that the next boot (or, with a.Reboot, the
// reboot bootc starts now) applies it. It does not fetch anything.
// upgrade's --from-downloaded is used whichever verb staged the
// deployment: bootc keeps no record of that (bootc PR 2342's review), and
// upgrade has the option from 1.12 on, switch only after 1.16.
func (c *Command) ApplyDownloaded(ctx context.Context, a Apply) error {
	if err := a.validate(); err != nil {
		return err
	}
	args := append([]string{"upgrade", "--from-downloaded"}, a.args()...)
	_, err := c.run(ctx, pick(c.Timeouts.Apply, DefaultTimeouts.Apply), args...)
	return err
}

// Rollback makes the rollback deployment the next boot.
func (c *Command) Rollback(ctx context.Context) error {
	_, err := c.run(ctx, pick(c.Timeouts.Rollback, DefaultTimeouts.Rollback), "rollback")
	return err
}

func (c *Command) run(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	return run(ctx, "bootc", c.Argv, timeout, args...)
}

// run runs prefix+args, bounded by timeout; its errors name the command
// as what and the verb (args[0]) and carry the end of its output.
func run(ctx context.Context, what string, prefix []string, timeout time.Duration, args ...string) ([]byte, error) {
	argv := append(append([]string(nil), prefix...), args...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = waitDelay
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s %s: timed out after %s", what, args[0], timeout)
		}
		msg := Tail(stderr.String(), outputTail)
		if msg == "" {
			msg = Tail(stdout.String(), outputTail)
		}
		if msg == "" {
			return nil, fmt.Errorf("%s %s: %w", what, args[0], err)
		}
		return nil, fmt.Errorf("%s %s: %w: %s", what, args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// Tail is the last n bytes of s without surrounding white space, cut at
// a line start when one is near, so that a message starts cleanly.
func Tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < n/2 {
		s = s[i+1:]
	}
	// The cut may split a multi-byte character.
	return "..." + strings.TrimSpace(strings.ToValidUTF8(s, ""))
}
