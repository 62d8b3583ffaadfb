package unitaction_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-dev/strata/rollout/unitaction"
)

// recorder is a fake systemctl: it records each command and answers
// from fail (by argument string) or blocks until its context ends.
type recorder struct {
	calls []string
	fail  map[string]error
	block map[string]bool
	// onCall runs at each call, before the answer.
	onCall func()
}

func (r *recorder) Run(ctx context.Context, argv []string) ([]byte, error) {
	s := strings.Join(argv, " ")
	r.calls = append(r.calls, s)
	if r.onCall != nil {
		r.onCall()
	}
	if r.block[s] {
		<-ctx.Done()
		return []byte("still stopping"), ctx.Err()
	}
	if err := r.fail[s]; err != nil {
		return []byte("Job for x failed.\nSee journalctl -xeu x.\n"), err
	}
	return nil, nil
}

var all = []unitaction.Action{
	{Kind: unitaction.DaemonReload},
	{Kind: unitaction.Reload, Unit: "crio.service"},
	{Kind: unitaction.Restart, Unit: "chronyd.service"},
}

func TestRunsInOrder(t *testing.T) {
	r := &recorder{}
	s := &unitaction.Systemd{Runner: r, Systemctl: []string{"nsenter", "--target", "1", "--", "systemctl"}}
	if err := s.Run(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"nsenter --target 1 -- systemctl daemon-reload",
		"nsenter --target 1 -- systemctl reload crio.service",
		"nsenter --target 1 -- systemctl restart chronyd.service",
	}
	if !slices.Equal(r.calls, want) {
		t.Errorf("calls %q, want %q", r.calls, want)
	}
}

func TestFailureNamesTheActionAndStops(t *testing.T) {
	r := &recorder{fail: map[string]error{"systemctl reload crio.service": errors.New("exit status 1")}}
	err := (&unitaction.Systemd{Runner: r}).Run(context.Background(), all)
	var e *unitaction.Error
	if !errors.As(err, &e) || e.Index != 1 || e.Action != all[1] {
		t.Fatalf("err = %v, want the Reload's *Error", err)
	}
	want := "action 2 of 3 (Reload crio.service): systemctl reload crio.service: exit status 1: Job for x failed.\nSee journalctl -xeu x."
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if len(r.calls) != 2 {
		t.Errorf("calls %q: the restart ran after the failed reload", r.calls)
	}
}

func TestTimeoutPerAction(t *testing.T) {
	r := &recorder{block: map[string]bool{"systemctl restart chronyd.service": true}}
	s := &unitaction.Systemd{Runner: r, Timeout: 20 * time.Millisecond}
	err := s.Run(context.Background(), all)
	var e *unitaction.Error
	if !errors.As(err, &e) || e.Index != 2 || !errors.Is(err, unitaction.ErrTimeout) {
		t.Fatalf("err = %v, want the Restart's timeout", err)
	}
	if want := "action 3 of 3 (Restart chronyd.service): systemctl restart chronyd.service after 20ms: timed out: still stopping"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// The caller's cancellation is not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	r = &recorder{block: map[string]bool{"systemctl daemon-reload": true}, onCall: cancel}
	err = (&unitaction.Systemd{Runner: r}).Run(ctx, all)
	if !errors.Is(err, context.Canceled) || errors.Is(err, unitaction.ErrTimeout) || len(r.calls) != 1 {
		t.Errorf("cancelled: %v after %q", err, r.calls)
	}
}

func TestMalformedActionsRunNothing(t *testing.T) {
	for _, a := range []unitaction.Action{
		{Kind: unitaction.Restart},
		{Kind: unitaction.Restart, Unit: "--force"},
		{Kind: unitaction.Reload, Unit: "a b.service"},
		{Kind: unitaction.Reload, Unit: "../x.service"},
		{Kind: unitaction.Reload, Unit: strings.Repeat("a", 256)},
		{Kind: unitaction.DaemonReload, Unit: "x.service"},
		{Kind: "Reboot"},
	} {
		r := &recorder{}
		err := (&unitaction.Systemd{Runner: r}).Run(context.Background(), append(slices.Clone(all), a))
		var e *unitaction.Error
		if !errors.As(err, &e) || e.Index != 3 {
			t.Errorf("%v: err %v, want an *Error for it", a, err)
		}
		if len(r.calls) != 0 {
			t.Errorf("%v: ran %q", a, r.calls)
		}
	}
}

// TestExec runs real processes: output is kept, the timeout kills.
func TestExec(t *testing.T) {
	s := &unitaction.Systemd{Systemctl: []string{"/bin/sh", "-c", `echo "systemctl $*"; [ "$1" = daemon-reload ]`, "sh"}}
	err := s.Run(context.Background(), all)
	if want := "action 2 of 3 (Reload crio.service): /bin/sh -c"; err == nil || !strings.HasPrefix(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), "exit status 1: systemctl reload crio.service") {
		t.Errorf("err = %v", err)
	}
	s = &unitaction.Systemd{Systemctl: []string{"/bin/sh", "-c", "exec tail -f /dev/null", "sh"}, Timeout: 50 * time.Millisecond}
	start := time.Now()
	if err := s.Run(context.Background(), all[:1]); !errors.Is(err, unitaction.ErrTimeout) {
		t.Errorf("err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}
