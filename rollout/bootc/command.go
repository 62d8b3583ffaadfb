package bootc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// outputTail is how much of a failed command's output an error carries:
// enough for the last lines of a pull error, small enough for an
// annotation.
const outputTail = 512

// Command runs bootc as Argv, a prefix such as ["bootc"] or ["nsenter",
// "--target", "1", "--mount", "--pid", "--", "bootc"]. Children inherit
// the daemon's environment.
type Command struct {
	Argv []string
}

// NewCommand splits a command line at whitespace into a Command.
func NewCommand(line string) (*Command, error) {
	argv := strings.Fields(line)
	if len(argv) == 0 {
		return nil, errors.New("empty bootc command")
	}
	return &Command{Argv: argv}, nil
}

// Status runs `bootc status --format=json`.
func (c *Command) Status(ctx context.Context) (*Host, error) {
	out, err := c.run(ctx, "status", "--format=json")
	if err != nil {
		return nil, err
	}
	return Parse(out)
}

// Switch stages image as the next boot without rebooting. Switching to
// the image already in use succeeds and changes nothing.
func (c *Command) Switch(ctx context.Context, image string) error {
	_, err := c.run(ctx, "switch", "--transport", "registry", image)
	return err
}

// Rollback makes the rollback deployment the next boot.
func (c *Command) Rollback(ctx context.Context) error {
	_, err := c.run(ctx, "rollback")
	return err
}

func (c *Command) run(ctx context.Context, args ...string) ([]byte, error) {
	argv := append(append([]string(nil), c.Argv...), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := Tail(stderr.String(), outputTail)
		if msg == "" {
			msg = Tail(stdout.String(), outputTail)
		}
		if msg == "" {
			return nil, fmt.Errorf("bootc %s: %w", args[0], err)
		}
		return nil, fmt.Errorf("bootc %s: %w: %s", args[0], err, msg)
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
