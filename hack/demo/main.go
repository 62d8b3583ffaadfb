// Command demo is `make demo`: on the test cluster, with Strata installed
// (hack/cluster/deploy.sh), it registers three simulated worker nodes with
// their daemons, applies config/samples and shows the build and the
// rollout as they happen, until every node runs the built image.
//
//	demo up     start the nodes, apply the samples, follow until done
//	demo check  (after up; make test-demo) edit the sample MachineConfig
//	            and follow its rollout, as the closing words invite
//	demo serve  (run by up, detached) keep the nodes and their daemons
//	            running, and perform their reboots, until SIGTERM
//
// The simulated nodes must outlive `make demo`, so that a user can edit
// the MachineConfig afterwards and watch it roll out: up starts serve in
// its own session with its pid file and log in the state directory
// (.infra/cluster/demo), and hack/cluster/down.sh (make demo-down, make
// cluster-down) stops it while the API server still answers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-dev/strata/test/simnode"
)

const (
	nodeCount  = 3
	pool       = "worker"
	registry   = "127.0.0.1:5000"
	startLimit = 3 * time.Minute
	// rolloutLimit bounds the build and the rollout of three nodes: a cold
	// build pod pulls the builder image first.
	rolloutLimit = 15 * time.Minute
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: demo up|check|serve")
		os.Exit(2)
	}
	root, err := repoRoot()
	if err == nil {
		p := paths(root)
		switch os.Args[1] {
		case "up":
			err = up(p)
		case "check":
			err = check(p)
		case "serve":
			err = serve(p)
		default:
			err = fmt.Errorf("unknown command %q: usage: demo up|check|serve", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// statePaths are the files the demo keeps, all under the test cluster's
// state directory, which hack/cluster/down.sh removes.
type statePaths struct {
	root, kubeconfig, dir, pid, log, ready string
}

func paths(root string) statePaths {
	dir := filepath.Join(root, ".infra", "cluster", "demo")
	return statePaths{
		root:       root,
		kubeconfig: filepath.Join(root, ".infra", "cluster", "kubeconfig"),
		dir:        dir,
		pid:        filepath.Join(dir, "demo.pid"),
		log:        filepath.Join(dir, "demo.log"),
		ready:      filepath.Join(dir, "nodes"),
	}
}

// repoRoot is the module root: the demo runs from the Makefile there.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(wd, "go.mod")); err != nil {
		return "", fmt.Errorf("run the demo from the repository's root (make demo), not %s", wd)
	}
	return wd, nil
}

// serve runs the simulated nodes until SIGTERM or SIGINT.
func serve(p statePaths) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	bin := filepath.Join(p.dir, "bin")
	logf("building strata-daemon and bootc-sim")
	daemon, bootcSim, err := simnode.Build(ctx, p.root, bin)
	if err != nil {
		return err
	}
	digest, err := run(ctx, "crane", "digest", registry+"/strata/os-base:latest")
	if err != nil {
		return err
	}
	sims, err := simnode.New(ctx, simnode.Config{
		Kubeconfig:    p.kubeconfig,
		Daemon:        daemon,
		BootcSim:      bootcSim,
		OriginalImage: registry + "/strata/os-base@" + digest,
		NamePrefix:    "demo",
		Log:           os.Stdout,
		// The local registry speaks plain HTTP; without this the daemons
		// cannot read the images and reboot fully for every change.
		InsecureRegistries: []string{registry},
	})
	if err != nil {
		return err
	}
	defer func() {
		// A fresh context: ctx is done when serve is asked to stop.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := sims.Stop(sctx); err != nil {
			logf("stopping the simulated nodes: %v", err)
		}
		logf("stopped")
	}()
	nodes, err := sims.AddNodes(ctx, nodeCount, nil)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.ready, []byte(strings.Join(nodes, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	logf("simulated nodes ready: %s", strings.Join(nodes, " "))
	<-ctx.Done()
	logf("asked to stop")
	return sims.Err()
}

// up starts serve detached, waits for its nodes, applies the samples and
// follows the build and the rollout.
func up(p statePaths) error {
	started := time.Now()
	if pid, ok := running(p); ok {
		return fmt.Errorf("the demo already runs (pid %d); make demo-down stops it", pid)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(p.ready)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.Create(p.log)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(self, "serve")
	cmd.Dir = p.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+p.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own session: the terminal's ^C and make's end do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	// The start time with the pid, as hack/cluster/lib.sh journals its
	// processes: down.sh signals the pid only if it is still this process.
	pidLine := strconv.Itoa(cmd.Process.Pid) + " " + startTime(cmd.Process.Pid) + "\n"
	if err := os.WriteFile(p.pid, []byte(pidLine), 0o644); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	say(started, "registering %d simulated worker nodes, each with its own strata-daemon (log: %s)", nodeCount, rel(p, p.log))
	deadline := time.After(startLimit)
	for !exists(p.ready) {
		select {
		case err := <-exited:
			return fmt.Errorf("the simulated nodes did not start (%w); the end of %s:\n%s", err, p.log, fileTail(p.log, 20))
		case <-deadline:
			return fmt.Errorf("the simulated nodes were not ready within %s; the end of %s:\n%s", startLimit, p.log, fileTail(p.log, 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
	raw, err := os.ReadFile(p.ready)
	if err != nil {
		return err
	}
	nodes := strings.Fields(string(raw))
	say(started, "nodes %s are Ready", strings.Join(nodes, ", "))

	say(started, "applying the samples: kubectl apply -k config/samples")
	out, err := run(context.Background(), "kubectl", "--kubeconfig", p.kubeconfig, "apply", "--server-side", "-k", "config/samples")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		say(started, "  %s", l)
	}

	ctx, cancel := context.WithTimeout(context.Background(), rolloutLimit)
	defer cancel()
	w, err := newWatcher(p.kubeconfig, nodes, started)
	if err != nil {
		return err
	}
	image, err := w.follow(ctx, exited)
	if err != nil {
		return fmt.Errorf("%w\nthe simulated nodes' log: %s; make demo-down stops everything", err, p.log)
	}
	say(started, "every node runs %s", image)
	secrets, err := checkNodeSecrets(ctx, w.c)
	if err != nil {
		return err
	}
	say(started, "%s", secrets)
	fmt.Printf(`
Strata built the worker pool's image and rolled it out to %d nodes in %s.
The simulated nodes and their daemons keep running; edit the MachineConfig
and watch the new image roll out.

`, len(nodes), time.Since(started).Round(time.Second))
	for _, h := range closingHints(p.kubeconfig, image) {
		fmt.Printf("  %s\n", h)
	}
	fmt.Printf("\nStop it all: make demo-down\n")
	return nil
}

// closingHints are the commands the demo invites a user to type when it
// is done; demo check runs them (docCommands), so each works as printed.
func closingHints(kubeconfig, image string) []string {
	return []string{
		fmt.Sprintf("export KUBECONFIG=%s PATH=$PWD/.infra/bin:$PATH", kubeconfig),
		"go run ./cmd/stratactl status --watch          # pools, builds, images, nodes",
		"kubectl get mcp,mc,mosc,mosb",
		"kubectl get nodes -L node-role.kubernetes.io/worker",
		"kubectl -n strata-system logs deploy/strata-controller",
		"kubectl -n strata-nodes get secrets            # the node pull secret: all a node may read",
		"crane manifest " + image,
		"kubectl edit mc 50-worker-chrony                # a change: a new image in seconds, then the rollout",
		"kubectl delete mosc worker                      # roll the pool back to the original image",
	}
}

// running is the detached serve's pid, if that process still runs: the
// pid file's pid with the start time it recorded.
func running(p statePaths) (int, bool) {
	raw, err := os.ReadFile(p.pid)
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return 0, false
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 1 {
		return 0, false
	}
	return pid, startTime(pid) == fields[1]
}

// alive says whether pid still runs (a zombie counts as gone).
func alive(pid int) bool { return startTime(pid) != "" }

// startTime is the process's start time in clock ticks since boot (field
// 22 of /proc/PID/stat), which tells it from a later process given the same
// pid; "" when it is gone or a zombie.
func startTime(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name, in parentheses, may hold spaces: count after it.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return ""
	}
	return fields[19]
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func say(started time.Time, format string, args ...any) {
	fmt.Printf("[%4ds] %s\n", int(time.Since(started).Seconds()), fmt.Sprintf(format, args...))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func rel(p statePaths, path string) string {
	if r, err := filepath.Rel(p.root, path); err == nil {
		return r
	}
	return path
}

// fileTail is the last n lines of the file at path.
func fileTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(raw, n)
}
