package simnode

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-dev/strata/rollout/unitaction"
)

func TestLineWriterPrefixesWholeLines(t *testing.T) {
	var out bytes.Buffer
	w := &lineWriter{prefix: "n1: ", out: &out}
	for _, s := range []string{"one\ntw", "o\n", "thr", "ee\nfour"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := out.String(), "n1: one\nn1: two\nn1: three\n"; got != want {
		t.Errorf("copied %q, want %q", got, want)
	}
	if got, want := w.String(), "one\ntwo\nthree\nfour"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
}

func TestRemoveRootClearsImmutableDeployments(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("no chattr")
	}
	root := filepath.Join(t.TempDir(), "node")
	dep := filepath.Join(root, "sysroot/ostree/deploy/strata/deploy/abc.0")
	if err := os.MkdirAll(filepath.Join(dep, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dep+".origin", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", dep).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	if err := removeRoot(context.Background(), root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(root); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", root, err)
	}
	if err := removeRoot(context.Background(), root); err != nil {
		t.Fatalf("second time: %v", err)
	}
}

// A killed daemon takes the processes it started with it, as a reboot
// would, and the kill is not reported as the daemon's failure.
func TestKillDaemonKillsItsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	daemon := filepath.Join(dir, "daemon")
	script := "#!/bin/sh\nsleep 1000 &\necho $! >\"$0.child\"\nwait\n"
	if err := os.WriteFile(daemon, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &Cluster{
		cfg:     Config{Daemon: daemon, BootcSim: "/bin/true", Dir: dir, Timeout: 10 * time.Second, PollInterval: 10 * time.Millisecond},
		log:     &syncWriter{w: &bytes.Buffer{}},
		spawner: newSpawner(),
		ctx:     ctx,
		cancel:  cancel,
	}
	defer c.spawner.close()
	nd := &node{name: "n", root: dir, logs: &lineWriter{out: &bytes.Buffer{}}}
	if err := c.startDaemon(nd); err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(daemon + ".child")
		if err == nil && strings.HasSuffix(string(b), "\n") {
			if child, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not start its child")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.killDaemon(nd); err != nil {
		t.Fatal(err)
	}
	for syscall.Kill(child, 0) == nil {
		// Killed but maybe not yet reaped by init.
		if st, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d survived the daemon's kill", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Err(); err != nil {
		t.Errorf("a kill by the harness reported as an error: %v", err)
	}
}

// TestSystemctlShimRecordsActions: the simulated systemctl records the
// actions unitaction runs after a live apply in the node's SystemctlLog
// (the daemon's environment names the node), and fails what it does not
// simulate.
func TestSystemctlShimRecordsActions(t *testing.T) {
	c := &Cluster{cfg: Config{Dir: t.TempDir(), BootcSim: "/bin/false"}}
	bin, err := c.shims()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	t.Setenv("BOOTC_SIM_ROOT", root)
	s := &unitaction.Systemd{Systemctl: []string{filepath.Join(bin, "systemctl")}}
	if err := s.Run(context.Background(), []unitaction.Action{
		{Kind: unitaction.DaemonReload},
		{Kind: unitaction.Reload, Unit: "crio.service"},
		{Kind: unitaction.Restart, Unit: "chronyd.service"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(filepath.Join(bin, "systemctl"), "stop", "kubelet.service").Run(); err == nil {
		t.Error("systemctl stop succeeded; it is not simulated")
	}
	data, err := os.ReadFile(filepath.Join(root, SystemctlLog))
	if err != nil {
		t.Fatal(err)
	}
	if want := "daemon-reload\nreload crio.service\nrestart chronyd.service\n"; string(data) != want {
		t.Errorf("log %q, want %q", data, want)
	}
}

// TestDaemonArgsNameInsecureRegistries: without --insecure-registry a
// daemon cannot read the test registry's manifests, and every update
// reboots fully.
func TestDaemonArgsNameInsecureRegistries(t *testing.T) {
	c := &Cluster{cfg: Config{
		Kubeconfig: "/k", BootcSim: "/b", Dir: t.TempDir(),
		InsecureRegistries: []string{"127.0.0.1:5000", "reg.test:80"},
		DaemonArgs:         []string{"--v=2"},
	}}
	got := strings.Join(c.daemonArgs(&node{name: "n", root: "/r"}), " ")
	if want := "--insecure-registry 127.0.0.1:5000 --insecure-registry reg.test:80 --v=2"; !strings.HasSuffix(got, want) {
		t.Errorf("daemon args %q, want them to end in %q", got, want)
	}
}
