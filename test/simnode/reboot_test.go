package simnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/strata-dev/strata/test/testenv"
)

// rebootSim stands in for bootc-sim: boot ids, the kinds of reboot and a
// journal of what it was asked, in the node's root.
const rebootSim = `#!/bin/bash
set -eu
root=${BOOTC_SIM_ROOT:?}
echo "$*" >>"$root/sim.log"
case "$1 ${2:-}" in
"sim reboot"|"sim crash") cat /proc/sys/kernel/random/uuid >"$root/.bootc-sim/boot_id" ;;
"sim soft-reboot") ;;
"sim systemctl")
	case "$3" in
	reboot) echo reboot >"$root/.bootc-sim/reboot-requested" ;;
	soft-reboot) echo soft-reboot >"$root/.bootc-sim/reboot-requested" ;;
	*) exit 1 ;;
	esac ;;
*) exit 2 ;;
esac
`

// kwok plays kwok and the node lifecycle controller for the harness's
// waits: a Node with the rebooting annotation gets Ready=False and the
// not-ready taint, any other Ready=True and no taint.
func kwok(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	for ctx.Err() == nil {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range nodes.Items {
				n := &nodes.Items[i]
				_, down := n.Annotations[RebootingAnnotation]
				want := corev1.ConditionTrue
				if down {
					want = corev1.ConditionFalse
				}
				if readyStatus(n) != want {
					n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: want, LastTransitionTime: metav1.Now()}}
					if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
						continue
					}
				}
				if hasTaint(n, corev1.TaintNodeNotReady) != down {
					n, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
					if err != nil {
						continue
					}
					var taints []corev1.Taint
					for _, tn := range n.Spec.Taints {
						if tn.Key != corev1.TaintNodeNotReady {
							taints = append(taints, tn)
						}
					}
					if down {
						taints = append(taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute})
					}
					n.Spec.Taints = taints
					_, _ = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
				}
			}
		} else if ctx.Err() == nil {
			t.Logf("kwok stand-in: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRebootKinds (issue 21 points 4 and 5), on a real apiserver: a soft
// reboot asked through the nodes' systemctl restarts the daemon and
// makes the Node NotReady then Ready, keeps the boot id, is counted as
// soft and takes SoftRebootDuration; a crash needs no request, changes
// the boot id and restarts the daemon; an unplanned reboot runs the
// simulator's clean reboot.
func TestRebootKinds(t *testing.T) {
	env := testenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kwokDone := make(chan struct{})
	go func() { defer close(kwokDone); kwok(ctx, t, cs) }()
	defer func() { cancel(); <-kwokDone }()

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	sim, daemon := filepath.Join(bin, "bootc-sim"), filepath.Join(bin, "daemon")
	if err := os.WriteFile(sim, []byte(rebootSim), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(daemon, []byte("#!/bin/sh\necho started\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const soft = 400 * time.Millisecond
	c := &Cluster{
		cfg: Config{Daemon: daemon, BootcSim: sim, Dir: filepath.Join(dir, "nodes"), Timeout: 30 * time.Second,
			PollInterval: 20 * time.Millisecond, SoftRebootDuration: soft},
		client:  cs,
		log:     &syncWriter{w: &bytes.Buffer{}},
		spawner: newSpawner(),
		nodes:   map[string]*node{},
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	defer c.spawner.close()
	defer c.cancel()

	name := "sim-reboots-0"
	nd := &node{name: name, root: filepath.Join(c.cfg.Dir, name), logs: &lineWriter{out: &bytes.Buffer{}}}
	c.nodes[name], c.order = nd, []string{name}
	if err := os.MkdirAll(filepath.Join(nd.root, ".bootc-sim"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nd.root, bootIDFile), []byte("boot-0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.registerNode(ctx, name, map[string]string{SimulatedLabel: "true"}, "boot-0"); err != nil {
		t.Fatal(err)
	}
	if err := c.StartDaemon(name); err != nil {
		t.Fatal(err)
	}
	c.wg.Go(func() { c.supervise(nd) })
	defer func() {
		c.cancel()
		c.wg.Wait()
		nd.mu.Lock()
		_ = c.killDaemon(nd)
		nd.mu.Unlock()
	}()
	daemonPid := func() int {
		nd.mu.Lock()
		defer nd.mu.Unlock()
		if nd.daemon == nil || exited(nd.daemon) {
			return 0
		}
		return nd.daemon.cmd.Process.Pid
	}
	first := daemonPid()

	// A soft reboot through the node's systemctl, as bootc --apply
	// --soft-reboot would ask for it.
	systemctl, err := c.Systemctl()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(systemctl, "soft-reboot")
	cmd.Env = c.env(nd)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemctl soft-reboot: %v: %s", err, out)
	}
	testenv.Eventually(t, 30*time.Second, "the soft reboot", func() error {
		if c.SoftReboots(name) != 1 || !c.DaemonRunning(name) {
			return fmt.Errorf("soft reboots %d, daemon running %v", c.SoftReboots(name), c.DaemonRunning(name))
		}
		return nil
	})
	if took := time.Since(start); took < soft {
		t.Errorf("the soft reboot took %s, less than SoftRebootDuration %s", took, soft)
	}
	if c.Reboots(name) != 0 || daemonPid() == first {
		t.Errorf("reboots %d, daemon pid %d (was %d): want no full reboot and a new daemon", c.Reboots(name), daemonPid(), first)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := readBootID(nd.root); id != "boot-0" || n.Annotations[BootIDAnnotation] != "boot-0" || !readyAndUntainted(n) {
		t.Errorf("after the soft reboot: boot id %q, node boot id %q, ready %v", id, n.Annotations[BootIDAnnotation], readyAndUntainted(n))
	}

	// A crash: no request, a new boot, a new daemon.
	second := daemonPid()
	if err := c.Crash(ctx, name); err != nil {
		t.Fatal(err)
	}
	id, err := readBootID(nd.root)
	if err != nil || id == "boot-0" {
		t.Fatalf("boot id %q after a crash: %v", id, err)
	}
	if c.Reboots(name) != 1 || c.SoftReboots(name) != 1 || !c.DaemonRunning(name) || daemonPid() == second {
		t.Errorf("after the crash: reboots %d soft %d daemon running %v", c.Reboots(name), c.SoftReboots(name), c.DaemonRunning(name))
	}
	if err := c.RebootUnplanned(ctx, name); err != nil {
		t.Fatal(err)
	}
	if c.Reboots(name) != 2 {
		t.Errorf("reboots %d after an unplanned reboot, want 2", c.Reboots(name))
	}
	journal, err := os.ReadFile(filepath.Join(nd.root, "sim.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := "sim systemctl soft-reboot\nsim soft-reboot\nsim crash\nsim reboot\n"
	if string(journal) != want {
		t.Errorf("bootc-sim was asked\n%s\nwant\n%s", journal, want)
	}
	if err := c.Err(); err != nil {
		t.Errorf("harness errors: %v", err)
	}
	if err := c.deleteNode(ctx, name); err != nil {
		t.Error(err)
	}
}
