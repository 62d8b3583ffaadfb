package simnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/strata-dev/strata/rollout/bootcheck"
)

// KubeletBrokenFile, in the booted deployment's /etc, stands for an image
// that breaks the node's kubelet: the simulated node then stays NotReady
// after its boot and its daemon, a pod, never starts. An e2e puts it
// into an image with a MachineConfig, as a bad configuration would break
// a real kubelet.
const KubeletBrokenFile = "/etc/strata-sim/kubelet-broken"

// What a real node's systemd does at boot, for what a simulated node
// needs of it: the units of the booted image that Strata relies on (the
// boot check, when the image enables it) and the kubelet.

// kubeletWorks says whether the booted image leaves the kubelet working.
func kubeletWorks(root string) bool {
	_, err := os.Lstat(filepath.Join(root, KubeletBrokenFile))
	return errors.Is(err, os.ErrNotExist)
}

// bootCheckEnabled says whether the booted image enables the boot check,
// as systemd would find it: the wants link and the script.
func bootCheckEnabled(root string) bool {
	if _, err := os.Lstat(filepath.Join(root, bootcheck.WantsPath)); err != nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(root, bootcheck.ScriptPath))
	return err == nil && fi.Mode()&0o111 != 0
}

// SystemctlLog, under a node's root, records the daemon-reload, reload
// and restart calls of the simulated systemctl, one line each, for the
// current boot (the simulated boot empties /run).
const SystemctlLog = "/run/strata-sim/systemctl.log"

// shims writes, once, the bootc and systemctl that the node's processes
// find on PATH (or, for the daemon, get as commands): bootc is bootc-sim
// on the node's root (the environment names it); systemctl is bootc-sim's
// systemctl, whose reboot and soft-reboot ask the harness for them, as
// the daemon's reboot command does, and whose show answers
// SoftRebootsCount; daemon-reload, reload and restart succeed and are
// recorded in SystemctlLog, for the tests of a live apply's actions.
// Anything else it is asked fails: the simulator does not have it.
func (c *Cluster) shims() (string, error) {
	c.shimOnce.Do(func() {
		dir := filepath.Join(c.cfg.Dir, ".systemd-bin")
		c.shimErr = os.MkdirAll(dir, 0o755)
		q := "'" + strings.ReplaceAll(c.cfg.BootcSim, "'", `'\''`) + "'"
		for name, body := range map[string]string{
			"bootc": "exec " + q + " \"$@\"\n",
			"systemctl": "case \"$*\" in\n" +
				"daemon-reload|'reload '*|'restart '*)\n\tlog=\"${BOOTC_SIM_ROOT:?}" + SystemctlLog + "\"\n\tmkdir -p \"${log%/*}\" && echo \"$*\" >>\"$log\"\n\texit ;;\n" +
				"esac\nexec " + q + " sim systemctl \"$@\"\n",
		} {
			if c.shimErr == nil {
				c.shimErr = os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755)
			}
		}
		c.shimDir = dir
	})
	return c.shimDir, c.shimErr
}

// Systemctl is the path of the nodes' systemctl (see shims), for a
// daemon's systemctl command: it acts on the node whose root
// BOOTC_SIM_ROOT names, which every node process has in its environment.
func (c *Cluster) Systemctl() (string, error) {
	dir, err := c.shims()
	if err != nil {
		return "", fmt.Errorf("simnode: %w", err)
	}
	return filepath.Join(dir, "systemctl"), nil
}

// startBootCheck runs the booted image's boot check, as its unit would,
// when the image enables it; nd.mu is held. It runs the image's own
// script, with the node's state directory and a 1 s poll.
func (c *Cluster) startBootCheck(nd *node) error {
	if !bootCheckEnabled(nd.root) {
		return nil
	}
	bin, err := c.shims()
	if err != nil {
		return fmt.Errorf("simnode: %w", err)
	}
	cmd := exec.Command(filepath.Join(nd.root, bootcheck.ScriptPath))
	cmd.Env = append(c.env(nd),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		bootcheck.DirEnv+"="+bootcheck.Dir(filepath.Join(nd.root, "var", "lib", "strata")),
		bootcheck.PollEnv+"=1")
	cmd.Dir = nd.root
	cmd.Stdout, cmd.Stderr = nd.logs, nd.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	if err := c.spawner.start(cmd); err != nil {
		return fmt.Errorf("simnode: start the boot check of %s: %w", nd.name, err)
	}
	p := &daemonProc{cmd: cmd, done: make(chan struct{})}
	nd.bootCheck = p
	c.logf(nd, "boot check started (pid %d)", cmd.Process.Pid)
	go func() {
		err := cmd.Wait()
		close(p.done)
		if !p.killed.Load() {
			c.logf(nd, "boot check exited: %v", err)
		}
	}()
	return nil
}
