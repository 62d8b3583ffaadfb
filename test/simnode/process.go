package simnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Build compiles strata-daemon and bootc-sim from the Strata module at
// moduleRoot into dir and returns their paths. bootc-sim-sigpolicy, which
// bootc-sim runs to verify signatures, goes beside bootc-sim.
func Build(ctx context.Context, moduleRoot, dir string) (daemon, bootcSim string, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	daemon = filepath.Join(dir, "strata-daemon")
	bootcSim = filepath.Join(dir, "bootc-sim")
	// One after the other: test machines have few cores.
	for _, b := range []struct{ out, pkg string }{
		{daemon, "./cmd/strata-daemon"},
		{bootcSim, "./test/bootcsim/bootc-sim"},
		{filepath.Join(dir, "bootc-sim-sigpolicy"), "./test/bootcsim/bootc-sim-sigpolicy"},
	} {
		// The module's build tags (hack/go-tags): bootc-sim-sigpolicy
		// verifies signatures with containers/image, which needs them.
		tags, err := os.ReadFile(filepath.Join(moduleRoot, "hack", "go-tags"))
		if err != nil {
			return "", "", err
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", strings.TrimSpace(string(tags)), "-o", b.out, b.pkg)
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("simnode: go build %s: %w\n%s", b.pkg, err, out)
		}
	}
	return daemon, bootcSim, nil
}

// spawner starts the daemons from one OS thread that lives as long as the
// Cluster. A child's Pdeathsig fires when the thread that forked it ends,
// not the process; Go may end any other thread at any time.
type spawner struct {
	mu     sync.Mutex
	closed bool
	reqs   chan spawnRequest
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnRequest)}
	go func() {
		// Never unlocked: when this goroutine returns (close) its thread
		// ends, and so would any daemon still running.
		runtime.LockOSThread()
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("stopped")
	}
	done := make(chan error, 1)
	s.reqs <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
}

// syncWriter serialises writes from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// lineWriter keeps everything written to it and copies it, one whole line
// at a time and each prefixed, to out.
type lineWriter struct {
	prefix string
	out    io.Writer

	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(l.prefix), l.partial[:i+1]...)
		l.partial = l.partial[i+1:]
		// The test's log failing must not kill the daemon (EPIPE).
		_, _ = l.out.Write(line)
	}
	return len(p), nil
}

func (l *lineWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all.String()
}
