package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout"
	"github.com/strata-dev/strata/test/testenv"
)

// fakeBootc is a stand-in bootc with its state in files of $FAKE_BOOTC:
// booted and staged pull specs, and a log of the commands that change
// something. The daemon's children inherit the variable, as bootc-sim's
// BOOTC_SIM_ROOT is inherited in the e2e. Its help lists no
// --download-only, as a bootc before 1.12 would: the daemon then stages
// with a plain switch.
const fakeBootc = `#!/bin/sh
d="$FAKE_BOOTC"
if [ "$2" = "--help" ]; then
	printf 'Usage: bootc %s [OPTIONS]\n\nOptions:\n      --transport <TRANSPORT>\n          The transport\n\n  -h, --help\n          Print help\n' "$1"
	exit 0
fi
entry() {
	if [ -z "$1" ]; then echo null; return; fi
	printf '{"image":{"image":{"image":"%s","transport":"registry"},"imageDigest":"%s","architecture":"amd64"},"incompatible":false,"pinned":false}' "$1" "${1#*@}"
}
case "$1" in
status)
	printf '{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","metadata":{"name":"host"},"spec":{"image":null},"status":{"booted":%s,"staged":%s,"rollback":null,"rollbackQueued":false}}\n' \
		"$(entry "$(cat "$d/booted")")" "$(entry "$(cat "$d/staged" 2>/dev/null)")" ;;
switch)
	# bootc switch --transport registry -- IMAGE
	[ "$4" = "--" ] || { echo "no -- before the image: $*" >&2; exit 2; }
	echo "switch $5" >> "$d/calls"
	echo "$5" > "$d/staged" ;;
*)
	echo "unexpected: $*" >&2; exit 1 ;;
esac
`

// TestDaemonBinary runs the built daemon against a real apiserver with a
// stand-in bootc and reboot command: its flags, its watch of its own
// Node, and an update across a kill and a "reboot".
func TestDaemonBinary(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "strata-daemon")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	hostRoot := filepath.Join(dir, "host")
	state := filepath.Join(dir, "bootc")
	for _, d := range []string{hostRoot, state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const (
		original = "127.0.0.1:5000/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
		desired  = "127.0.0.1:5000/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	must(t, os.WriteFile(filepath.Join(state, "booted"), []byte(original+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(state, "boot_id"), []byte("boot-1\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(state, "bootc"), []byte(fakeBootc), 0o755))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, env.Config.Host, env.Config.CAData, env.Config.CertData, env.Config.KeyData, kubeconfig)

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bin-node"}}
	must(t, env.Client.Create(ctx, node))
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), node); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete node %s: %v", node.Name, err)
		}
	})
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	must(t, env.Client.Status().Update(ctx, node))
	mustCreate(t, env.Client, &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "rendered-worker-1"},
		Spec:       v1alpha1.MachineConfigSpec{Config: raw(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/app/conf","contents":{"source":"data:,hello"}}]}}`)},
	})

	start := func() *exec.Cmd {
		cmd := exec.Command(bin,
			"--node-name", "bin-node",
			"--kubeconfig", kubeconfig,
			"--host-root", hostRoot,
			"--bootc-command", filepath.Join(state, "bootc"),
			"--reboot-command", "touch "+filepath.Join(state, "reboot-requested"),
			"--health-check-command", "true",
			"--boot-id-file", filepath.Join(state, "boot_id"),
			"--resync-period", "200ms",
		)
		cmd.Env = append(os.Environ(), "FAKE_BOOTC="+state, "NODE_NAME=", "KUBECONFIG=")
		log, err := os.OpenFile(filepath.Join(dir, "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		must(t, err)
		cmd.Stdout, cmd.Stderr = log, log
		must(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait(); log.Close() })
		return cmd
	}
	annotations := func() map[string]string {
		n := &corev1.Node{}
		must(t, env.Client.Get(ctx, types.NamespacedName{Name: "bin-node"}, n))
		return n.Annotations
	}
	patch := func(values map[string]string) {
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
		must(t, env.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bin-node"}}, client.RawPatch(types.MergePatchType, body)))
	}
	wait := func(what string, cond func(map[string]string) bool) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() error {
			if a := annotations(); !cond(a) {
				log, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
				return fmt.Errorf("annotations %v\ndaemon log:\n%s", a, tail(string(log)))
			}
			return nil
		})
	}

	daemon := start()
	wait("the original image", func(a map[string]string) bool {
		return a[v1alpha1.OriginalImageAnnotation] == original && a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDone
	})

	key := rollout.UpdateKey(desired, "rendered-worker-1")
	patch(map[string]string{v1alpha1.DesiredImageAnnotation: desired, v1alpha1.DesiredConfigAnnotation: "rendered-worker-1"})
	wait("the drain request", func(a map[string]string) bool {
		return a[v1alpha1.DesiredDrainAnnotation] == v1alpha1.DrainRequestPrefix+key
	})
	patch(map[string]string{v1alpha1.LastAppliedDrainAnnotation: v1alpha1.DrainRequestPrefix + key})
	testenv.Eventually(t, 30*time.Second, "the reboot request", func() error {
		_, err := os.Stat(filepath.Join(state, "reboot-requested"))
		return err
	})
	wait("Rebooting", func(a map[string]string) bool { return a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateRebooting })

	// The reboot: the daemon dies, the staged image boots, a new boot id.
	must(t, daemon.Process.Signal(syscall.SIGKILL))
	_, _ = daemon.Process.Wait()
	staged, err := os.ReadFile(filepath.Join(state, "staged"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(state, "booted"), staged, 0o644))
	must(t, os.Remove(filepath.Join(state, "staged")))
	must(t, os.Remove(filepath.Join(state, "reboot-requested")))
	must(t, os.WriteFile(filepath.Join(state, "boot_id"), []byte("boot-2\n"), 0o644))
	start()
	wait("Done", func(a map[string]string) bool {
		return a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDone &&
			a[v1alpha1.CurrentImageAnnotation] == desired &&
			a[v1alpha1.CurrentConfigAnnotation] == "rendered-worker-1" &&
			a[v1alpha1.DesiredDrainAnnotation] == v1alpha1.UncordonRequestPrefix+key
	})
	if b, err := os.ReadFile(filepath.Join(hostRoot, "var/lib/app/conf")); err != nil || string(b) != "hello" {
		t.Errorf("node item %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(hostRoot, "var/lib/strata", rollout.StateFile)); err != nil || !strings.Contains(string(b), "rendered-worker-1") {
		t.Errorf("state file in the default --state-dir: %q, %v", b, err)
	}
	if testing.Verbose() {
		log, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
		t.Logf("daemon log:\n%s", log)
	}
	calls, _ := os.ReadFile(filepath.Join(state, "calls"))
	if got := strings.TrimSpace(string(calls)); got != "switch "+desired {
		t.Errorf("bootc calls %q, want one switch", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	must(t, c.Create(context.Background(), obj))
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

func writeKubeconfig(t *testing.T, host string, ca, cert, key []byte, path string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	must(t, clientcmd.WriteToFile(*cfg, path))
}

func raw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }
