// Package unitaction runs the systemd actions that follow a live apply of
// /etc (rollout/liveapply): daemon-reload so that systemd reads changed
// unit files, then the reloads and restarts of the services whose
// configuration changed, in the order given, each through an injectable
// command runner with its own timeout. The daemon runs them on the host
// (systemctl through nsenter on a real node, a fake on a simulated one).
//
// The first action that fails stops the run: a restart that follows a
// failed daemon-reload would start the old unit, and the caller then
// takes the default disruption (a reboot into the staged deployment,
// which has the same /etc), so running the rest would disrupt twice.
package unitaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Kind is what an action does; the names are the disruption policy's
// (OpenShift's nodeDisruptionPolicy action types).
type Kind string

const (
	// DaemonReload is `systemctl daemon-reload`.
	DaemonReload Kind = "DaemonReload"
	// Reload is `systemctl reload UNIT`.
	Reload Kind = "Reload"
	// Restart is `systemctl restart UNIT`.
	Restart Kind = "Restart"
)

// Action is one systemd action.
type Action struct {
	Kind Kind
	// Unit is the unit Reload and Restart act on ("chronyd.service");
	// empty for DaemonReload.
	Unit string
}

func (a Action) String() string {
	if a.Unit == "" {
		return string(a.Kind)
	}
	return string(a.Kind) + " " + a.Unit
}

// unitName is what systemd accepts in a unit name (unit_name_is_valid's
// characters), without a leading "-" so that no name reads as an option.
var unitName = regexp.MustCompile(`^[A-Za-z0-9:_.\\@][A-Za-z0-9:_.\\@-]*$`)

// maxUnitName is systemd's UNIT_NAME_MAX.
const maxUnitName = 255

// Args are systemctl's arguments for the action, or an error for an
// action that is not well formed.
func (a Action) Args() ([]string, error) {
	switch a.Kind {
	case DaemonReload:
		if a.Unit != "" {
			return nil, fmt.Errorf("%s takes no unit (got %q)", a.Kind, a.Unit)
		}
		return []string{"daemon-reload"}, nil
	case Reload, Restart:
		if len(a.Unit) > maxUnitName || !unitName.MatchString(a.Unit) {
			return nil, fmt.Errorf("%s: %q is not a systemd unit name", a.Kind, a.Unit)
		}
		verb := "reload"
		if a.Kind == Restart {
			verb = "restart"
		}
		return []string{verb, a.Unit}, nil
	}
	return nil, fmt.Errorf("unknown action %q (want %s, %s or %s)", a.Kind, DaemonReload, Reload, Restart)
}

// Runner runs one command and returns its combined output.
type Runner interface {
	Run(ctx context.Context, argv []string) ([]byte, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, argv []string) ([]byte, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, argv []string) ([]byte, error) { return f(ctx, argv) }

// Exec runs commands as processes; the context's end kills them.
type Exec struct{}

// Run runs argv. A child that keeps the output open after the command
// is killed does not hold Run past WaitDelay.
func (Exec) Run(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.Bytes(), err
}

// DefaultTimeout bounds one action when Systemd.Timeout is 0: systemd's
// own default start timeout is 90 s, and a restart stops first.
const DefaultTimeout = 3 * time.Minute

// outputTail is how much of a failed command's output an error keeps.
const outputTail = 512

// Systemd runs actions through systemctl.
type Systemd struct {
	// Systemctl is the command prefix; nil means ["systemctl"]. A
	// daemon in a pod sets e.g. nsenter --target 1 --mount --pid --
	// systemctl.
	Systemctl []string
	// Runner runs the commands; nil means Exec.
	Runner Runner
	// Timeout bounds each action; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Error is the action of a run that failed; the actions after it did not
// run.
type Error struct {
	Action Action
	// Index is the action's place in the run (0 first) and Total the
	// number of actions.
	Index, Total int
	// Output is the end of the command's output.
	Output string
	Err    error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("action %d of %d (%s): %v", e.Index+1, e.Total, e.Action, e.Err)
	if e.Output != "" {
		msg += ": " + e.Output
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ErrTimeout is the Err of an action that ran out of time.
var ErrTimeout = errors.New("timed out")

// Run checks every action and then runs them in order, stopping at the
// first that fails (an *Error naming it). A malformed action fails the
// run before any action runs.
func (s *Systemd) Run(ctx context.Context, actions []Action) error {
	argvs := make([][]string, len(actions))
	prefix := s.Systemctl
	if len(prefix) == 0 {
		prefix = []string{"systemctl"}
	}
	for i, a := range actions {
		args, err := a.Args()
		if err != nil {
			return &Error{Action: a, Index: i, Total: len(actions), Err: err}
		}
		argvs[i] = append(append([]string(nil), prefix...), args...)
	}
	runner := s.Runner
	if runner == nil {
		runner = Exec{}
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	for i, a := range actions {
		if err := ctx.Err(); err != nil {
			return &Error{Action: a, Index: i, Total: len(actions), Err: err}
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		out, err := runner.Run(actx, argvs[i])
		// The action's own deadline, not the caller's: the caller's
		// cancellation is reported as such.
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if err == nil && !timedOut {
			continue
		}
		e := &Error{Action: a, Index: i, Total: len(actions), Output: tail(out)}
		switch {
		case timedOut:
			e.Err = fmt.Errorf("%s after %s: %w", strings.Join(argvs[i], " "), timeout, ErrTimeout)
		case ctx.Err() != nil:
			e.Err = fmt.Errorf("%s: %w", strings.Join(argvs[i], " "), ctx.Err())
		default:
			e.Err = fmt.Errorf("%s: %w", strings.Join(argvs[i], " "), err)
		}
		return e
	}
	return nil
}

// tail is the end of a command's output, trimmed.
func tail(out []byte) string {
	out = bytes.TrimSpace(out)
	if len(out) > outputTail {
		out = append([]byte("..."), out[len(out)-outputTail:]...)
	}
	return string(out)
}
