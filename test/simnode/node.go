package simnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-dev/strata/test/bootcsim"
)

// node is one simulated node.
type node struct {
	name        string
	root        string
	logs        *lineWriter
	reboots     atomic.Int64
	softReboots atomic.Int64

	// mu serialises starting and killing the daemon and whole reboots:
	// KillDaemon during a reboot waits for the reboot to end.
	mu     sync.Mutex
	daemon *daemonProc // nil: not running
	// bootCheck is the boot check of the running boot; nil: none.
	bootCheck *daemonProc
}

// daemonProc is one run of a node's strata-daemon.
type daemonProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
	// killed: the harness killed it; its exit is no error.
	killed atomic.Bool
}

// StartDaemon starts the node's strata-daemon, as the kubelet would start
// its pod after a crash. It does nothing when the daemon runs already.
func (c *Cluster) StartDaemon(name string) error {
	nd, err := c.node(name)
	if err != nil {
		return err
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return c.startDaemon(nd)
}

// KillDaemon kills the node's strata-daemon and every process it started
// (SIGKILL to its process group) and waits until it is gone, for tests of
// a daemon killed at any point. A reboot in progress ends first.
func (c *Cluster) KillDaemon(name string) error {
	nd, err := c.node(name)
	if err != nil {
		return err
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return c.killDaemon(nd)
}

// DaemonRunning says whether the node's daemon runs.
func (c *Cluster) DaemonRunning(name string) bool {
	nd, err := c.node(name)
	if err != nil {
		return false
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.daemon != nil && !exited(nd.daemon)
}

func exited(p *daemonProc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// daemonArgs are the contract's flags for a simulated node's daemon.
func (c *Cluster) daemonArgs(nd *node) []string {
	sim := c.cfg.BootcSim
	args := []string{
		"--node-name", nd.name,
		"--kubeconfig", c.cfg.Kubeconfig,
		"--namespace", c.cfg.Namespace,
		"--host-root", nd.root,
		"--bootc-command", sim,
		"--reboot-command", sim + " sim request-reboot",
		"--health-check-command", sim + " sim health",
		"--boot-id-file", filepath.Join(nd.root, bootIDFile),
	}
	// The simulated systemctl, for a live apply's actions; without it the
	// daemon's default (nsenter into PID 1) fails them, and a live apply
	// with actions falls back to a reboot.
	if systemctl, err := c.Systemctl(); err == nil {
		args = append(args, "--systemctl-command", systemctl)
	}
	for _, r := range c.cfg.InsecureRegistries {
		args = append(args, "--insecure-registry", r)
	}
	return append(args, c.cfg.DaemonArgs...)
}

// env is the environment of the node's processes: the harness's, with
// the node's own KUBECONFIG, NODE_NAME and BOOTC_SIM_ROOT.
func (c *Cluster) env(nd *node) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "KUBECONFIG" && k != "NODE_NAME" && k != "BOOTC_SIM_ROOT" {
			env = append(env, kv)
		}
	}
	return append(env, "KUBECONFIG="+c.cfg.Kubeconfig, "NODE_NAME="+nd.name, "BOOTC_SIM_ROOT="+nd.root)
}

// startDaemon starts nd's daemon; nd.mu is held.
func (c *Cluster) startDaemon(nd *node) error {
	if nd.daemon != nil && !exited(nd.daemon) {
		return nil
	}
	cmd := exec.Command(c.cfg.Daemon, c.daemonArgs(nd)...)
	cmd.Env = c.env(nd)
	cmd.Dir = nd.root
	// One writer for both: exec then shares one pipe, keeping the order.
	cmd.Stdout = nd.logs
	cmd.Stderr = nd.logs
	// Its own process group, so that a kill takes the bootc-sim it runs
	// with it (a reboot ends every process); killed with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// A process that escaped the group must not keep Wait from returning.
	cmd.WaitDelay = 5 * time.Second
	if err := c.spawner.start(cmd); err != nil {
		return fmt.Errorf("simnode: start the daemon of %s: %w", nd.name, err)
	}
	p := &daemonProc{cmd: cmd, done: make(chan struct{})}
	nd.daemon = p
	c.logf(nd, "daemon started (pid %d)", cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		close(p.done)
		if p.killed.Load() {
			return
		}
		if c.ctx.Err() == nil {
			c.record(fmt.Errorf("simnode: the daemon of %s exited by itself: %w", nd.name, err))
		}
		c.logf(nd, "daemon exited by itself: %v", err)
	}()
	return nil
}

// killDaemon SIGKILLs nd's daemon's process group and waits for it; nd.mu
// is held.
func (c *Cluster) killDaemon(nd *node) error {
	p := nd.daemon
	nd.daemon = nil
	return c.kill(nd, p, "daemon")
}

// killBootCheck ends the running boot's boot check, as a reboot does;
// nd.mu is held.
func (c *Cluster) killBootCheck(nd *node) error {
	p := nd.bootCheck
	nd.bootCheck = nil
	return c.kill(nd, p, "boot check")
}

// kill SIGKILLs p's process group and waits for it.
func (c *Cluster) kill(nd *node, p *daemonProc, what string) error {
	if p == nil || exited(p) {
		return nil
	}
	p.killed.Store(true)
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("simnode: kill the %s of %s: %w", what, nd.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(c.cfg.Timeout):
		return fmt.Errorf("simnode: the %s of %s (pid %d) did not exit after SIGKILL", what, nd.name, pid)
	}
	c.logf(nd, "%s killed (pid %d)", what, pid)
	return nil
}

// Sim runs bootc-sim with args for the node (BOOTC_SIM_ROOT is its root)
// and returns its standard output; for `sim fail-boot DIGEST`, `status
// --json` and the like.
func (c *Cluster) Sim(ctx context.Context, name string, args ...string) ([]byte, error) {
	nd, err := c.node(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.cfg.BootcSim, args...)
	cmd.Env = c.env(nd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("simnode: %s: bootc-sim %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// supervise performs nd's reboots when its daemon (or its bootc, or its
// systemctl) asks for one, until Stop. A failed reboot ends it (Err
// reports it): the node stays as it was left.
func (c *Cluster) supervise(nd *node) {
	request := filepath.Join(nd.root, rebootRequestFile)
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		data, err := os.ReadFile(request)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			c.record(fmt.Errorf("simnode: %s: %w", nd.name, err))
			return
		}
		how := bootRequested
		if bootcsim.RebootKind(strings.TrimSpace(string(data))) == bootcsim.RebootSoft {
			how = bootSoft
		}
		if err := c.reboot(c.ctx, nd, how); err != nil {
			if c.ctx.Err() != nil {
				return // Stop interrupted it
			}
			err = fmt.Errorf("simnode: %s of %s: %w", how, nd.name, err)
			c.logf(nd, "%v", err)
			c.record(err)
			return
		}
	}
}

// bootKind is how a simulated node goes down and comes back.
type bootKind int

const (
	// bootRequested: the reboot its daemon or bootc asked for.
	bootRequested bootKind = iota
	// bootSoft: systemd's soft-reboot, userspace only.
	bootSoft
	// bootUnplanned: a clean reboot nobody in Strata asked for (an
	// admin, another reboot manager): shutdown runs, so ostree
	// finalizes an unlocked staged deployment.
	bootUnplanned
	// bootCrash: power loss or panic: no shutdown, nothing finalized.
	bootCrash
)

func (k bootKind) String() string {
	return [...]string{"reboot", "soft reboot", "unplanned reboot", "crash"}[k]
}

// Crash reboots the node as a power loss would, without its daemon's
// request and without a shutdown: the daemon dies where it is, no staged
// deployment is finalized (the booted image boots again), the boot id
// changes. It returns when the node is back (Ready, daemon started).
func (c *Cluster) Crash(ctx context.Context, name string) error {
	return c.rebootNode(ctx, name, bootCrash)
}

// RebootUnplanned reboots the node cleanly without its daemon's request,
// as an admin or another reboot manager would: the shutdown finalizes an
// unlocked staged deployment, which then boots; a locked (download-only)
// one does not. It returns when the node is back.
func (c *Cluster) RebootUnplanned(ctx context.Context, name string) error {
	return c.rebootNode(ctx, name, bootUnplanned)
}

func (c *Cluster) rebootNode(ctx context.Context, name string, how bootKind) error {
	nd, err := c.node(name)
	if err != nil {
		return err
	}
	return c.reboot(ctx, nd, how)
}

// reboot is one simulated reboot of nd. A full one: everything of the
// running system ends, the cluster sees the Node NotReady, the next
// deployment boots with a new boot id, the Node is Ready again and the
// daemon starts. A soft one is the same for userspace (the daemon, the
// boot check, the kubelet's Ready) but the kernel stays, so the boot id
// does too, and only a prepared deployment changes.
func (c *Cluster) reboot(ctx context.Context, nd *node, how bootKind) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	start := time.Now()
	c.logf(nd, "%s", how)
	if err := c.killDaemon(nd); err != nil {
		return err
	}
	if err := c.killBootCheck(nd); err != nil {
		return err
	}
	// The machine is down from here; the cluster noticing it (the node
	// lifecycle controller's taint, up to its monitor period) happens
	// while it is, not before: the wait counts towards the time down.
	down := time.Now()
	if err := c.setReady(ctx, nd.name, false, ""); err != nil {
		return err
	}
	verb, downFor := "reboot", c.cfg.RebootDuration
	switch how {
	case bootSoft:
		verb, downFor = "soft-reboot", c.cfg.SoftRebootDuration
	case bootCrash:
		verb = "crash"
	}
	if _, err := c.Sim(ctx, nd.name, "sim", verb); err != nil {
		return err
	}
	// A request left before a crash died with the system that made it.
	if err := os.Remove(filepath.Join(nd.root, rebootRequestFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("simnode: %w", err)
	}
	// The simulated machine's own time down: not a wait for anything.
	// It never comes back before the cluster saw it go (kwok's stages
	// need NotReady first), so a wait longer than the time down ends it.
	if err := pause(ctx, downFor-time.Since(down)); err != nil {
		return err
	}
	bootID, err := readBootID(nd.root)
	if err != nil {
		return err
	}
	var n int64
	if how == bootSoft {
		n = nd.softReboots.Add(1)
	} else {
		n = nd.reboots.Add(1)
	}
	// systemd starts the boot check with the boot, whatever the kubelet
	// does.
	if err := c.startBootCheck(nd); err != nil {
		return err
	}
	if !kubeletWorks(nd.root) {
		// The node stays NotReady and no pod, the daemon's included,
		// starts; only a reboot (the boot check's) changes that.
		c.logf(nd, "%s %d done (boot id %s) in %s; the image broke the kubelet (%s): NotReady, no daemon", how, n, bootID, time.Since(start).Round(time.Millisecond), KubeletBrokenFile)
		return nil
	}
	// The kubelet starts the node's pods, the daemon's among them, as it
	// reports Ready; it does not wait for the control plane to lift the
	// not-ready taint. The daemon waits for Ready itself (its health
	// gate), on the Node's watch events.
	if err := c.startDaemon(nd); err != nil {
		return err
	}
	if err := c.setReady(ctx, nd.name, true, bootID); err != nil {
		return err
	}
	if err := c.restorePods(ctx, nd.name); err != nil {
		return err
	}
	c.logf(nd, "%s %d done (boot id %s) in %s", how, n, bootID, time.Since(start).Round(time.Millisecond))
	return nil
}

// pause waits d, or less when ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func readBootID(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, bootIDFile))
	if err != nil {
		return "", fmt.Errorf("simnode: boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("simnode: %s is empty", filepath.Join(root, bootIDFile))
	}
	return id, nil
}

// removeRoot removes a node's directory. ostree makes each deployment's
// directory immutable (chattr +i), which even root cannot remove.
func removeRoot(ctx context.Context, root string) error {
	if _, err := os.Lstat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	deployments, _ := filepath.Glob(filepath.Join(root, "sysroot/ostree/deploy/*/deploy/*"))
	var dirs []string
	for _, d := range deployments {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) > 0 {
		out, err := exec.CommandContext(ctx, "chattr", append([]string{"-i"}, dirs...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("simnode: chattr -i %s: %w: %s", strings.Join(dirs, " "), err, out)
		}
	}
	if err := os.RemoveAll(root); err != nil {
		return fmt.Errorf("simnode: remove %s: %w", root, err)
	}
	return nil
}
