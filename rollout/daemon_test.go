package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/bootcheck"
	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/rollout/unitaction"
	"github.com/strata-dev/strata/test/testenv"
)

// These tests run the daemon's state machine against a real apiserver
// (the Node, the rendered MachineConfig, the pull Secret) with an
// in-process bootc host. Each test plays the rollout controller: it sets
// the desired annotations and acknowledges drain requests, and it plays
// the machine: it performs the reboots the daemon asks for and starts a
// new daemon on the same state, as a real reboot would.

const ns = "strata-system"

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.RunMain(m, func(e *testenv.Env) error {
		env = e
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
		return env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
}

const (
	repo     = "127.0.0.1:5000/strata/os"
	original = repo + "@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	newImage = repo + "@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	third    = repo + "@sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

var errKilled = errors.New("killed")

var nodeSeq atomic.Int32

// rig is one node: its Node object, host root, fake bootc host, clock
// and the daemon instance currently running.
type rig struct {
	t    *testing.T
	ctx  context.Context
	name string
	dir  string
	root *hostfs.Root
	host *fakeHost
	// sim, when set, is the node's bootc and machine instead of host:
	// the bootc simulator on a real ostree sysroot (sim_test.go).
	sim    *simHost
	client client.Client
	// inputs, when set, is every daemon's Inputs (viaConfigServer).
	inputs Inputs
	clock  time.Time
	d      *Daemon
	// images and units, when set, are every daemon's (disruption_test.go).
	images Images
	units  *unitaction.Systemd
	soft   SoftRebooter
	lock   StagingLock

	mu sync.Mutex
	// drainRequests are the drain requests the daemon patched in.
	drainRequests []string
	// crashAt names a step after which the daemon is killed, once.
	crashAt string
	crashed bool
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{
		t:     t,
		ctx:   logr.NewContext(context.Background(), ctrl.Log.WithName(t.Name())),
		name:  fmt.Sprintf("node-%d", nodeSeq.Add(1)),
		dir:   t.TempDir(),
		host:  newFakeHost(original),
		clock: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	writeFile(t, filepath.Join(r.dir, "etc/passwd"), "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000::/var/home/core:/bin/bash\n")
	writeFile(t, filepath.Join(r.dir, "etc/group"), "root:x:0:\ncore:x:1000:\n")
	if err := os.MkdirAll(filepath.Join(r.dir, "var/home/core"), 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r.root = root
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r.client = interceptor.NewClient(wc, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			r.countDrain(obj, patch)
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.name}}
	if err := env.Client.Create(r.ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	r.setReady(true)
	r.d = r.newDaemon()
	return r
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) countDrain(obj client.Object, patch client.Patch) {
	data, err := patch.Data(obj)
	if err != nil {
		return
	}
	var p struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &p) != nil {
		return
	}
	if v := p.Metadata.Annotations[v1alpha1.DesiredDrainAnnotation]; v != nil && strings.HasPrefix(*v, v1alpha1.DrainRequestPrefix) {
		r.mu.Lock()
		r.drainRequests = append(r.drainRequests, *v)
		r.mu.Unlock()
	}
}

func (r *rig) drains() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.drainRequests...)
}

// newDaemon starts a daemon instance on the node's state, as a restart
// or a reboot does.
func (r *rig) newDaemon() *Daemon {
	var host interface {
		Bootc
		Machine
	} = r.host
	if r.sim != nil {
		host = r.sim
	}
	return &Daemon{
		Client:    r.client,
		Reader:    r.client,
		Inputs:    r.inputs,
		NodeName:  r.name,
		Namespace: ns,
		Root:      r.root,
		StateDir:  filepath.Join(r.dir, "var/lib/strata"),
		Bootc:     host,
		Machine:   host,
		Images:    r.images,
		Units:     r.units,
		Soft:      r.soft,
		Lock:      r.lock,
		Now:       func() time.Time { return r.clock },
		checkpoint: func(step string) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if step == r.crashAt && !r.crashed {
				r.crashed = true
				return errKilled
			}
			return nil
		},
	}
}

func (r *rig) restart() {
	if r.d != nil {
		r.d.mirrored()
	}
	r.d = r.newDaemon()
}

// reboot performs the reboot the daemon asked for and starts a new
// daemon.
func (r *rig) reboot() {
	if r.sim != nil {
		r.sim.boot()
	} else {
		r.host.boot()
	}
	r.restart()
}

func (r *rig) sync() Result {
	r.t.Helper()
	res, err := r.syncOnce()
	if err != nil {
		r.t.Fatalf("sync: %v", err)
	}
	return res
}

// syncOnce runs one sync and waits for its MachineConfigNode writes,
// which Sync leaves running beside the next one.
func (r *rig) syncOnce() (Result, error) {
	res, err := r.d.Sync(r.ctx)
	r.d.mirrored()
	return res, err
}

func (r *rig) node() *corev1.Node {
	r.t.Helper()
	n := &corev1.Node{}
	if err := env.Client.Get(r.ctx, types.NamespacedName{Name: r.name}, n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r *rig) ann(key string) string {
	r.t.Helper()
	return r.node().Annotations[key]
}

// annotate merge-patches the node as the controller or a person would;
// nil removes an annotation.
func (r *rig) annotate(values map[string]*string) {
	r.t.Helper()
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
	if err := env.Client.Patch(r.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.name}}, client.RawPatch(types.MergePatchType, body)); err != nil {
		r.t.Fatal(err)
	}
}

func str(s string) *string { return &s }

func (r *rig) setReady(ready bool) {
	r.t.Helper()
	n := r.node()
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if !ready {
		n.Status.Conditions[0].Reason, n.Status.Conditions[0].Message = "KubeletNotReady", "container runtime is down"
	}
	if err := env.Client.Status().Update(r.ctx, n); err != nil {
		r.t.Fatal(err)
	}
}

// desire sets the desired image and config, as the rollout controller
// does.
func (r *rig) desire(image, config string) string {
	r.t.Helper()
	r.annotate(map[string]*string{
		v1alpha1.DesiredImageAnnotation:       str(image),
		v1alpha1.DesiredConfigAnnotation:      str(config),
		v1alpha1.HealthCheckTimeoutAnnotation: str("1m0s"),
	})
	return UpdateKey(image, config)
}

// applyDrain carries out a pending drain or uncordon request, as the
// rollout controller does; it says whether there was one.
func (r *rig) applyDrain() bool {
	r.t.Helper()
	n := r.node()
	want := n.Annotations[v1alpha1.DesiredDrainAnnotation]
	if want == "" || want == n.Annotations[v1alpha1.LastAppliedDrainAnnotation] {
		return false
	}
	r.annotate(map[string]*string{v1alpha1.LastAppliedDrainAnnotation: str(want)})
	return true
}

// converge runs the node until its update is over: syncs, drains,
// reboots, and a restart after a crash.
func (r *rig) converge() {
	r.t.Helper()
	for range 30 {
		res, err := r.syncOnce()
		switch {
		case errors.Is(err, errKilled):
			r.restart()
			continue
		case err != nil:
			r.t.Fatalf("sync: %v", err)
		case res.Rebooting:
			r.reboot()
			continue
		}
		if r.applyDrain() {
			continue
		}
		if st := r.ann(v1alpha1.StateAnnotation); st == v1alpha1.NodeStateDone || st == v1alpha1.NodeStateDegraded {
			return
		}
	}
	r.t.Fatalf("the update did not converge: %v", r.node().Annotations)
}

// renderedConfig creates a rendered MachineConfig whose node items are a
// file with marker, an appended line and an SSH key.
func (r *rig) renderedConfig(marker string) string {
	r.t.Helper()
	ign := map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []any{
			map[string]any{"path": "/var/lib/strata-test/marker", "mode": 0o640, "overwrite": true, "contents": map[string]any{"source": "data:," + marker}},
			map[string]any{"path": "/var/lib/strata-test/appended", "append": []any{map[string]any{"source": "data:,line%0A"}}},
		}},
		"passwd": map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": []any{"ssh-ed25519 AAAA " + marker}}}},
	}
	raw, err := json.Marshal(ign)
	if err != nil {
		r.t.Fatal(err)
	}
	name := fmt.Sprintf("rendered-%s-%s", r.name, marker)
	mc := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}}}
	if err := env.Client.Create(r.ctx, mc); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mc) })
	return name
}

// marker is the marker file's content, or "" when it is missing.
func (r *rig) marker() string {
	b, err := os.ReadFile(filepath.Join(r.dir, "var/lib/strata-test/marker"))
	if err != nil {
		return ""
	}
	return string(b)
}

func (r *rig) record() *Record {
	r.t.Helper()
	rec, err := LoadRecord(filepath.Join(r.dir, "var/lib/strata"))
	if err != nil {
		r.t.Fatal(err)
	}
	return rec
}

// expectAnnotations checks the daemon's annotations on the node.
func (r *rig) expectAnnotations(want map[string]string) {
	r.t.Helper()
	got := r.node().Annotations
	for k, v := range want {
		if got[k] != v {
			r.t.Errorf("annotation %s = %q, want %q", strings.TrimPrefix(k, v1alpha1.Prefix), got[k], v)
		}
	}
}

func (r *rig) expectCounts(want counts) {
	r.t.Helper()
	if got := r.host.counts(); got != want {
		r.t.Errorf("bootc and reboot calls %+v, want %+v", got, want)
	}
}

func TestFirstStart(t *testing.T) {
	r := newRig(t)
	auth := `{"auths":{"127.0.0.1:5000":{"auth":"c2VjcmV0"}}}`
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull-" + r.name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(auth)},
	}
	if err := env.Client.Create(r.ctx, secret); err != nil {
		t.Fatal(err)
	}
	r.annotate(map[string]*string{v1alpha1.ImagePullSecretAnnotation: str(secret.Name)})
	r.sync()

	authPath := filepath.Join(r.dir, "run/ostree/auth.json")
	fi, err := os.Stat(authPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("auth.json mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(authPath); string(b) != auth {
		t.Errorf("auth.json %q", b)
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.OriginalImageAnnotation: original,
		v1alpha1.CurrentImageAnnotation:  original,
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
	})
	if _, ok := r.node().Annotations[v1alpha1.CurrentConfigAnnotation]; ok {
		t.Error("currentConfig reported before any config was applied")
	}
	if got := r.record().OriginalImage; got != original {
		t.Errorf("state file original image %q", got)
	}
	r.expectCounts(counts{})

	// The original image is recorded once: a daemon that starts on a
	// node now running another image, with the annotation gone, reports
	// the recorded one. Without a pull secret named, auth.json goes.
	r.host.booted = third
	r.annotate(map[string]*string{v1alpha1.OriginalImageAnnotation: nil, v1alpha1.ImagePullSecretAnnotation: nil})
	r.restart()
	r.sync()
	r.expectAnnotations(map[string]string{
		v1alpha1.OriginalImageAnnotation: original,
		v1alpha1.CurrentImageAnnotation:  third,
	})
	if _, err := os.Stat(authPath); !os.IsNotExist(err) {
		t.Errorf("auth.json without a pull secret: %v", err)
	}
}

func TestUpdateStepByStep(t *testing.T) {
	r := newRig(t)
	r.sync()
	config := r.renderedConfig("one")
	key := r.desire(newImage, config)
	drain := v1alpha1.DrainRequestPrefix + key

	// The switch comes first, while workloads still run: no drain has
	// been asked for when it starts.
	var atSwitch map[string]string
	r.host.onSwitch = func(string) { atSwitch = r.node().Annotations }
	r.sync()
	if atSwitch == nil {
		t.Fatal("no switch")
	}
	if atSwitch[v1alpha1.DesiredDrainAnnotation] != "" {
		t.Errorf("desiredDrain %q when the switch started", atSwitch[v1alpha1.DesiredDrainAnnotation])
	}
	if atSwitch[v1alpha1.StateAnnotation] != v1alpha1.NodeStateWorking {
		t.Errorf("state %q when the switch started, want Working", atSwitch[v1alpha1.StateAnnotation])
	}
	if r.host.staged != newImage {
		t.Errorf("staged %q", r.host.staged)
	}
	r.expectAnnotations(map[string]string{v1alpha1.DesiredDrainAnnotation: drain, v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking})
	r.expectCounts(counts{switches: 1})

	// Until the drain is applied nothing more happens.
	for range 3 {
		if res := r.sync(); res.Rebooting {
			t.Fatal("rebooting before the drain")
		}
	}
	if r.marker() != "" {
		t.Error("items written before the drain")
	}
	r.expectCounts(counts{switches: 1})

	// Drained: items, the record, Rebooting, the reboot, and then nothing.
	bootID := r.host.bootID
	r.applyDrain()
	if res := r.sync(); !res.Rebooting {
		t.Fatal("no reboot after the drain")
	}
	if got := r.marker(); got != "one" {
		t.Errorf("marker %q before the reboot", got)
	}
	if u := r.record().Update; u == nil || u.Phase != PhaseRebooting || u.Key != key || u.BootID != bootID {
		t.Errorf("state file update %+v, want rebooting from %s", u, bootID)
	}
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateRebooting})
	r.expectCounts(counts{switches: 1, reboots: 1})
	for range 3 {
		if res := r.sync(); !res.Rebooting {
			t.Error("a sync after the reboot command did not wait for the reboot")
		}
	}
	r.expectCounts(counts{switches: 1, reboots: 1})

	// After the boot: verified, Done, uncordon asked.
	r.reboot()
	r.sync()
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.ReasonAnnotation:        "",
		v1alpha1.CurrentImageAnnotation:  newImage,
		v1alpha1.CurrentConfigAnnotation: config,
		v1alpha1.OriginalImageAnnotation: original,
		v1alpha1.DesiredDrainAnnotation:  v1alpha1.UncordonRequestPrefix + key,
	})
	rec := r.record()
	if rec.CurrentConfig != config || rec.CurrentImage != newImage || rec.Update != nil {
		t.Errorf("state file %+v", rec)
	}
	r.applyDrain()
	for range 3 {
		r.sync()
	}
	r.expectCounts(counts{switches: 1, reboots: 1})
	if d := r.drains(); len(d) != 1 || d[0] != drain {
		t.Errorf("drain requests %q, want one %s", d, drain)
	}
	// The SSH key went to the user's authorized_keys.d.
	keys, err := os.ReadFile(filepath.Join(r.dir, "var/home/core/.ssh/authorized_keys.d/strata"))
	if err != nil || string(keys) != "ssh-ed25519 AAAA one\n" {
		t.Errorf("SSH keys %q, %v", keys, err)
	}
}

// TestKilledAtEachStep kills the daemon after every step of an update
// and starts a new one on the same state: the update completes with one
// switch, one drain request, one reboot, and the items written once.
func TestKilledAtEachStep(t *testing.T) {
	for _, step := range []string{stepWorking, stepSwitched, stepDrainRequested, stepItemsWritten, stepRecorded, stepRebootingReported} {
		t.Run(step, func(t *testing.T) {
			r := newRig(t)
			r.crashAt = step
			config := r.renderedConfig("one")
			key := r.desire(newImage, config)
			r.converge()
			if !r.crashed {
				t.Fatalf("never reached step %s", step)
			}
			r.expectAnnotations(map[string]string{
				v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
				v1alpha1.CurrentImageAnnotation:  newImage,
				v1alpha1.CurrentConfigAnnotation: config,
				v1alpha1.DesiredDrainAnnotation:  v1alpha1.UncordonRequestPrefix + key,
			})
			r.expectCounts(counts{switches: 1, reboots: 1})
			if d := r.drains(); len(d) != 1 {
				t.Errorf("drain requests %q, want one", d)
			}
			if b, _ := os.ReadFile(filepath.Join(r.dir, "var/lib/strata-test/appended")); string(b) != "line\n" {
				t.Errorf("appended file %q: the append ran more than once", b)
			}
		})
	}
}

func TestRebootDidNotHappen(t *testing.T) {
	r := newRig(t)
	config := r.renderedConfig("one")
	key := r.desire(newImage, config)
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	// The daemon is killed but the host does not reboot: same boot id.
	r.restart()
	if !r.sync().Rebooting {
		t.Fatal("the daemon did not ask for the reboot again")
	}
	r.expectCounts(counts{switches: 1, reboots: 2})
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateRebooting})
	r.reboot()
	r.sync()
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
		v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key,
	})
	for range 3 {
		r.restart()
		r.sync()
	}
	r.expectCounts(counts{switches: 1, reboots: 2})
	if d := r.drains(); len(d) != 1 {
		t.Errorf("drain requests %q, want one", d)
	}
}

// TestFailedHealthRollsBackOnce: a node that is not healthy within the
// health check timeout after its reboot is rolled back once and reported
// Degraded with a reason naming the image, the failure and the image it
// runs again; nothing more happens for that update, even across
// restarts.
func TestFailedHealthRollsBackOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		crashAt string
		// unhealthy makes the node unhealthy after its boot.
		unhealthy func(r *rig)
		why       string
	}{{
		name:      "health check fails",
		unhealthy: func(r *rig) { r.host.failing[newImage[len(repo)+1:]] = "unit strata-test.service failed" },
		why:       "unit strata-test.service failed",
	}, {
		name:      "node not Ready",
		unhealthy: func(r *rig) { r.setReady(false) },
		why:       "not Ready",
	}, {
		name:      "killed after recording the rollback",
		crashAt:   stepRollbackRecorded,
		unhealthy: func(r *rig) { r.host.failing[newImage[len(repo)+1:]] = "boom" },
		why:       "boom",
	}, {
		name:      "killed after the rollback",
		crashAt:   stepRolledBack,
		unhealthy: func(r *rig) { r.host.failing[newImage[len(repo)+1:]] = "boom" },
		why:       "boom",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.crashAt = tc.crashAt
			config := r.renderedConfig("one")
			key := r.desire(newImage, config)
			r.sync()
			r.applyDrain()
			if !r.sync().Rebooting {
				t.Fatal("no reboot")
			}
			r.reboot()
			tc.unhealthy(r)

			// Within the timeout the daemon waits.
			for range 3 {
				if res := r.sync(); res.Rebooting || res.RequeueAfter == 0 {
					t.Fatalf("sync within the timeout: %+v", res)
				}
				r.clock = r.clock.Add(15 * time.Second)
			}
			r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking})
			r.expectCounts(counts{switches: 1, reboots: 1})

			// Past it: one rollback and a reboot.
			r.clock = r.clock.Add(time.Minute)
			r.converge()
			r.expectCounts(counts{switches: 1, rollbacks: 1, reboots: 2})
			if r.host.booted != original {
				t.Errorf("booted %q after the rollback, want %q", r.host.booted, original)
			}
			reason := r.ann(v1alpha1.ReasonAnnotation)
			for _, want := range []string{newImage, tc.why, "rolled back to " + original} {
				if !strings.Contains(reason, want) {
					t.Errorf("reason %q does not say %q", reason, want)
				}
			}
			r.expectAnnotations(map[string]string{
				v1alpha1.StateAnnotation:        v1alpha1.NodeStateDegraded,
				v1alpha1.CurrentImageAnnotation: original,
				v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key,
			})
			if _, ok := r.node().Annotations[v1alpha1.CurrentConfigAnnotation]; ok {
				t.Error("currentConfig reported for a failed update")
			}
			if u := r.record().Update; u == nil || u.Phase != PhaseFailed || u.Key != key {
				t.Errorf("state file update %+v, want failed", u)
			}

			// Never again for this update.
			r.applyDrain()
			r.setReady(true)
			for range 4 {
				r.clock = r.clock.Add(time.Hour)
				r.restart()
				if res := r.sync(); res.Rebooting {
					t.Fatal("rebooting again")
				}
			}
			r.expectCounts(counts{switches: 1, rollbacks: 1, reboots: 2})
			r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation: reason})
			if d := r.drains(); len(d) != 1 {
				t.Errorf("drain requests %q, want one", d)
			}

			// A new desired pair starts over.
			r.host.failing = map[string]string{}
			key = r.desire(third, config)
			r.converge()
			r.expectAnnotations(map[string]string{
				v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
				v1alpha1.ReasonAnnotation:       "",
				v1alpha1.CurrentImageAnnotation: third,
				v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key,
			})
			r.expectCounts(counts{switches: 2, rollbacks: 1, reboots: 3})
		})
	}
}

// TestConfigOnly: the same image with another config writes the items
// without a drain or a reboot.
func TestConfigOnly(t *testing.T) {
	r := newRig(t)
	for _, marker := range []string{"one", "two"} {
		config := r.renderedConfig(marker)
		r.desire(original, config)
		if res := r.sync(); res.Rebooting {
			t.Fatal("rebooting for a config change")
		}
		if got := r.marker(); got != marker {
			t.Errorf("marker %q, want %q", got, marker)
		}
		r.expectAnnotations(map[string]string{
			v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
			v1alpha1.CurrentConfigAnnotation: config,
			v1alpha1.CurrentImageAnnotation:  original,
			v1alpha1.DesiredDrainAnnotation:  "",
		})
	}
	r.expectCounts(counts{})
	if d := r.drains(); len(d) != 0 {
		t.Errorf("drain requests %q", d)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "var/lib/strata-test/appended")); string(b) != "line\n" {
		t.Errorf("appended file %q", b)
	}
}

// TestOverwriteFalseInReason: an item left alone is named in the reason
// of a node that is Done.
func TestOverwriteFalseInReason(t *testing.T) {
	r := newRig(t)
	writeFile(t, filepath.Join(r.dir, "var/lib/strata-test/appended"), "x")
	if err := os.Remove(filepath.Join(r.dir, "var/lib/strata-test/appended")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(r.dir, "var/lib/strata-test/marker"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.desire(original, r.renderedConfig("one"))
	r.sync()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone})
	if reason := r.ann(v1alpha1.ReasonAnnotation); !strings.Contains(reason, "/var/lib/strata-test/marker") {
		t.Errorf("reason %q does not name the item left alone", reason)
	}
}

// TestDrainFailedIsReportedDegraded: the controller's verdict on the
// drain the daemon asked for (drainFailure) is reported by the daemon,
// the one writer of state and reason, as Degraded with the verdict's
// reason, also when killed between its record and its report; nothing
// more happens for that update until a person removes the verdict, when
// the daemon reports Working, waits for the drain again, and completes
// the update with one drain request, one switch and one reboot.
func TestDrainFailedIsReportedDegraded(t *testing.T) {
	r := newRig(t)
	r.crashAt = string(actDrainFailed)
	key := r.desire(newImage, r.renderedConfig("one"))
	r.sync()
	drain := v1alpha1.DrainRequestPrefix + key
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking, v1alpha1.DesiredDrainAnnotation: drain})
	const why = "Drain timed out after 10m0s (drainTimeout); the node is left cordoned: pod default/web blocked by budget web"
	r.annotate(map[string]*string{v1alpha1.DrainFailureAnnotation: str(v1alpha1.DrainFailure(drain, why))})
	if _, err := r.syncOnce(); !errors.Is(err, errKilled) {
		t.Fatalf("sync after the verdict: %v, want killed after %s", err, actDrainFailed)
	}
	if got := r.record().DrainFailed; got != drain {
		t.Errorf("the state file records the report of %q, want %q before the report", got, drain)
	}
	for range 3 {
		r.restart()
		if res := r.sync(); res.Rebooting {
			t.Fatal("rebooting after a failed drain")
		}
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDegraded,
		v1alpha1.ReasonAnnotation:       why,
		v1alpha1.DesiredDrainAnnotation: drain,
	})
	r.expectCounts(counts{switches: 1})
	if r.marker() != "" {
		t.Error("items written after a failed drain")
	}

	// A person removes the verdict: the drain is tried again.
	r.annotate(map[string]*string{v1alpha1.DrainFailureAnnotation: nil})
	r.sync()
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateWorking,
		v1alpha1.ReasonAnnotation:       "",
		v1alpha1.DesiredDrainAnnotation: drain,
	})
	if !r.applyDrain() {
		t.Fatal("no drain request to carry out")
	}
	r.converge()
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation: newImage,
		v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key,
	})
	r.expectCounts(counts{switches: 1, reboots: 1})
	if d := r.drains(); len(d) != 1 {
		t.Errorf("drain requests %q, want one", d)
	}
}

// TestDrainTimedOutByAnOlderController: a node an older controller
// reported Degraded itself for its drain (no drainFailure) stays so, and
// the daemon does nothing more for the update, across restarts; removing
// the state has the drain tried again, as it did.
func TestDrainTimedOutByAnOlderController(t *testing.T) {
	r := newRig(t)
	key := r.desire(newImage, r.renderedConfig("one"))
	r.sync()
	const why = "Drain timed out after 10m0s (drainTimeout); the node is left cordoned: pod default/web blocked by budget web"
	r.annotate(map[string]*string{v1alpha1.StateAnnotation: str(v1alpha1.NodeStateDegraded), v1alpha1.ReasonAnnotation: str(why)})
	for range 3 {
		r.restart()
		if res := r.sync(); res.Rebooting {
			t.Fatal("rebooting after a failed drain")
		}
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDegraded,
		v1alpha1.ReasonAnnotation:       why,
		v1alpha1.DesiredDrainAnnotation: v1alpha1.DrainRequestPrefix + key,
	})
	r.expectCounts(counts{switches: 1})
	if r.marker() != "" {
		t.Error("items written after a failed drain")
	}
	r.annotate(map[string]*string{v1alpha1.StateAnnotation: nil})
	r.sync()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking, v1alpha1.ReasonAnnotation: ""})
	r.applyDrain()
	r.converge()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: newImage})
	r.expectCounts(counts{switches: 1, reboots: 1})
}

// TestDrainFailureOfAReplacedUpdateIsIgnored: a verdict on the drain of
// an update since replaced (the controller removes it only when it
// carries out the next request) is not the new update's: the daemon
// reports Working and asks for the new update's drain.
func TestDrainFailureOfAReplacedUpdateIsIgnored(t *testing.T) {
	r := newRig(t)
	old := r.desire(newImage, r.renderedConfig("one"))
	r.sync()
	oldDrain := v1alpha1.DrainRequestPrefix + old
	r.annotate(map[string]*string{v1alpha1.DrainFailureAnnotation: str(v1alpha1.DrainFailure(oldDrain, "Drain timed out"))})
	r.sync()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation: "Drain timed out"})
	key := r.desire(third, r.renderedConfig("two"))
	r.sync()
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateWorking,
		v1alpha1.ReasonAnnotation:       "",
		v1alpha1.DesiredDrainAnnotation: v1alpha1.DrainRequestPrefix + key,
	})
	r.converge()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: third})
}

// TestDesiredImageDidNotBoot: a node that comes back on another image
// than the staged one is reported Degraded without a rollback, which
// would now select the image that failed.
func TestDesiredImageDidNotBoot(t *testing.T) {
	r := newRig(t)
	key := r.desire(newImage, r.renderedConfig("one"))
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	r.host.staged = "" // the new deployment is lost
	r.reboot()
	r.sync()
	reason := r.ann(v1alpha1.ReasonAnnotation)
	if !strings.Contains(reason, newImage) || !strings.Contains(reason, original) {
		t.Errorf("reason %q", reason)
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDegraded,
		v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key,
	})
	r.expectCounts(counts{switches: 1, reboots: 1})
}

// TestManagerWatchesOwnNode runs the Reconciler in a manager whose cache
// holds only the daemon's Node: an update goes through by watch and
// resync alone, a reboot that does not come is asked for again after
// RebootWait, and another node is never touched.
func TestManagerWatchesOwnNode(t *testing.T) {
	r := newRig(t)
	other := newRig(t)
	config := r.renderedConfig("one")
	key := r.desire(newImage, config)
	other.desire(newImage, config)
	var d *Daemon
	env.StartManager(t, ctrl.Options{Cache: CacheOptions(r.name)}, func(mgr ctrl.Manager) error {
		d = r.newDaemon()
		d.Client, d.Reader, d.Now = mgr.GetClient(), mgr.GetAPIReader(), nil
		return (&Reconciler{Daemon: d, Resync: 100 * time.Millisecond, RebootWait: time.Second}).SetupWithManager(mgr)
	})
	testenv.Eventually(t, 20*time.Second, "drain request", func() error {
		if got := r.ann(v1alpha1.DesiredDrainAnnotation); got != v1alpha1.DrainRequestPrefix+key {
			return fmt.Errorf("desiredDrain %q", got)
		}
		return nil
	})
	r.applyDrain()
	testenv.Eventually(t, 20*time.Second, "a second reboot request", func() error {
		if c := r.host.counts(); c.reboots < 2 {
			return fmt.Errorf("%d reboots", c.reboots)
		}
		return nil
	})
	r.host.boot()
	testenv.Eventually(t, 20*time.Second, "Done", func() error {
		if got := r.ann(v1alpha1.StateAnnotation); got != v1alpha1.NodeStateDone {
			return fmt.Errorf("state %q", got)
		}
		return nil
	})
	r.expectAnnotations(map[string]string{v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key, v1alpha1.CurrentImageAnnotation: newImage})
	if c := r.host.counts(); c.switches != 1 {
		t.Errorf("%d switches", c.switches)
	}
	for k := range other.node().Annotations {
		switch k {
		case v1alpha1.DesiredImageAnnotation, v1alpha1.DesiredConfigAnnotation, v1alpha1.HealthCheckTimeoutAnnotation:
		default:
			t.Errorf("the other node got annotation %s", k)
		}
	}
}

// TestMissingPullSecret: a pull secret that does not exist yet blocks
// only the switch, and the reason says why; once it exists the update
// goes on.
func TestMissingPullSecret(t *testing.T) {
	r := newRig(t)
	secretName := "late-" + r.name
	r.annotate(map[string]*string{v1alpha1.ImagePullSecretAnnotation: str(secretName)})
	r.sync()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.OriginalImageAnnotation: original})

	r.desire(newImage, r.renderedConfig("one"))
	if _, err := r.syncOnce(); err == nil {
		t.Fatal("a switch without its pull secret succeeded")
	}
	r.expectCounts(counts{})
	if reason := r.ann(v1alpha1.ReasonAnnotation); !strings.Contains(reason, secretName) {
		t.Errorf("reason %q does not name the missing secret", reason)
	}
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking, v1alpha1.DesiredDrainAnnotation: ""})

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secretName},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}
	if err := env.Client.Create(r.ctx, secret); err != nil {
		t.Fatal(err)
	}
	r.sync()
	r.expectCounts(counts{switches: 1})
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking, v1alpha1.ReasonAnnotation: ""})
	if b, err := os.ReadFile(filepath.Join(r.dir, "run/ostree/auth.json")); err != nil || string(b) != `{"auths":{}}` {
		t.Errorf("auth.json %q, %v", b, err)
	}
}

// TestPullSecretReadAgainForStage: the stage of an update uses the pull
// secret the daemon read less than authMaxAge before, and reads it again
// (a rotation) once it is older.
func TestPullSecretReadAgainForStage(t *testing.T) {
	r := newRig(t)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rotating-" + r.name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"one":{}}}`)},
	}
	if err := env.Client.Create(r.ctx, secret); err != nil {
		t.Fatal(err)
	}
	auth := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(r.dir, "run/ostree/auth.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r.annotate(map[string]*string{v1alpha1.ImagePullSecretAnnotation: str(secret.Name)})
	r.sync()
	secret.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"two":{}}}`)
	if err := env.Client.Update(r.ctx, secret); err != nil {
		t.Fatal(err)
	}

	config := r.renderedConfig("one")
	r.desire(newImage, config)
	r.sync()
	r.expectCounts(counts{switches: 1})
	if got := auth(); got != `{"auths":{"one":{}}}` {
		t.Errorf("staged with auth.json %s; want the secret as read a moment before", got)
	}

	r.clock = r.clock.Add(authMaxAge)
	r.desire(third, config)
	r.sync()
	r.expectCounts(counts{switches: 2})
	if got := auth(); got != `{"auths":{"two":{}}}` {
		t.Errorf("staged with auth.json %s; want the secret read again, rotated", got)
	}
}

// TestReplacedUpdateUncordons: an update replaced, after its drain and
// its verification, by a config-only change of the image now booted does
// not leave the node cordoned. The change that arrives while the node is
// verified waits for the verdict (issue 20 point 5): the node, not
// Ready, is not reported Done meanwhile.
func TestReplacedUpdateUncordons(t *testing.T) {
	r := newRig(t)
	first := r.renderedConfig("one")
	firstKey := r.desire(newImage, first)
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	r.reboot()
	r.setReady(false)
	r.sync() // waiting for health
	config := r.renderedConfig("two")
	r.desire(newImage, config)
	r.sync()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateWorking})
	if u := r.record().Update; u == nil || u.Key != firstKey || u.Phase != PhaseVerifying {
		t.Fatalf("the verification was dropped for the new desired pair: state file update %+v", u)
	}
	r.setReady(true)
	r.converge()
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentConfigAnnotation: config,
		v1alpha1.DesiredDrainAnnotation:  v1alpha1.UncordonRequestPrefix + firstKey,
	})
	if got := r.marker(); got != "two" {
		t.Errorf("marker %q", got)
	}
	if rec := r.record(); rec.Update != nil || rec.CurrentConfig != config || rec.CurrentImage != newImage {
		t.Errorf("state file %+v, want config %s on %s", rec, config, newImage)
	}
	r.expectCounts(counts{switches: 1, reboots: 1})
}

// TestRevertMidRollout (issue 20 point 5): desired set back to the booted
// image while the new one is staged leaves nothing else staged before
// the node is reported Done, so that the next reboot, for whatever
// reason, boots the booted image and no image without a drain.
func TestRevertMidRollout(t *testing.T) {
	for _, tc := range []struct {
		name string
		// upTo takes the update to newImage as far as the revert finds it.
		upTo func(r *rig)
	}{{
		name: "staged, drain asked",
		upTo: func(r *rig) { r.sync() },
	}, {
		name: "drained, reboot asked, not come",
		upTo: func(r *rig) {
			r.sync()
			r.applyDrain()
			if !r.sync().Rebooting {
				r.t.Fatal("no reboot")
			}
			r.restart() // the reboot did not come; the daemon restarts
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			config := r.renderedConfig("one")
			r.desire(newImage, config)
			tc.upTo(r)
			if r.host.staged != newImage {
				t.Fatalf("staged %q before the revert", r.host.staged)
			}
			key := r.desire(original, config)
			r.converge()
			r.expectAnnotations(map[string]string{
				v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
				v1alpha1.CurrentConfigAnnotation: config,
				v1alpha1.DesiredDrainAnnotation:  v1alpha1.UncordonRequestPrefix + key,
			})
			if staged := r.host.staged; staged != "" && staged != original {
				t.Fatalf("reported Done with %q staged, desired %q", staged, original)
			}
			if u := r.record().Update; u != nil {
				t.Errorf("state file keeps the replaced update %+v", u)
			}
			// An unrelated reboot boots the desired image, and the
			// daemon takes it for no update.
			r.reboot()
			r.sync()
			if r.host.booted != original {
				t.Errorf("an unrelated reboot booted %q, want %q", r.host.booted, original)
			}
			r.expectAnnotations(map[string]string{
				v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
				v1alpha1.CurrentImageAnnotation: original,
				v1alpha1.ReasonAnnotation:       "",
			})
		})
	}
}

// TestChangedWhileVerifying (issue 20 point 5): an unhealthy node whose
// desired pair changes while it is verified is still rolled back once;
// the new desired pair is acted on after the verdict.
func TestChangedWhileVerifying(t *testing.T) {
	r := newRig(t)
	config := r.renderedConfig("one")
	key := r.desire(newImage, config)
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	r.reboot()
	r.host.failing[newImage[len(repo)+1:]] = "unit kubelet.service failed"
	r.sync() // waiting for health
	// The controller sets the node back to its original image.
	r.desire(original, config)
	r.sync()
	if u := r.record().Update; u == nil || u.Key != key || u.Phase != PhaseVerifying {
		t.Fatalf("the verification was dropped for the new desired pair: state file update %+v", u)
	}
	r.clock = r.clock.Add(2 * time.Minute)
	r.converge()
	r.expectCounts(counts{switches: 1, rollbacks: 1, reboots: 2})
	if r.host.booted != original {
		t.Errorf("booted %q, want %q", r.host.booted, original)
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation:  original,
		v1alpha1.CurrentConfigAnnotation: config,
	})
}

// TestInvalidDesired: a desired image that is not pinned by digest, or a
// rendered config the node cannot apply, is reported Degraded without a
// switch, a drain or a reboot.
func TestInvalidDesired(t *testing.T) {
	r := newRig(t)
	r.desire(repo+":latest", r.renderedConfig("one"))
	r.sync()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDegraded})
	if reason := r.ann(v1alpha1.ReasonAnnotation); !strings.Contains(reason, repo+":latest") || !strings.Contains(reason, "digest") {
		t.Errorf("reason %q", reason)
	}

	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "rendered-" + r.name + "-remote"},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
			`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/var/lib/x","contents":{"source":"https://example.com/x"}}]}}`)}},
	}
	if err := env.Client.Create(r.ctx, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mc) })
	r.desire(newImage, mc.Name)
	for range 3 {
		r.sync()
	}
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDegraded})
	if reason := r.ann(v1alpha1.ReasonAnnotation); !strings.Contains(reason, mc.Name) {
		t.Errorf("reason %q does not name the config", reason)
	}
	r.expectCounts(counts{})
	if d := r.drains(); len(d) != 0 {
		t.Errorf("drain requests %q", d)
	}
}

// TestBootCheckHandshake (issue 20 point 9): before the reboot the daemon
// tells the node's boot check what to expect and for how long; it says
// when it verifies the boot and when the node is healthy.
func TestBootCheckHandshake(t *testing.T) {
	r := newRig(t)
	r.desire(newImage, r.renderedConfig("one"))
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	dir := bootcheck.Dir(filepath.Join(r.dir, "var/lib/strata"))
	digest := bootc.DigestOf(newImage)
	if b, err := os.ReadFile(filepath.Join(dir, "expect")); err != nil || string(b) != "digest="+digest+"\ntimeout=60\n" {
		t.Fatalf("boot check expect %q, %v", b, err)
	}
	r.reboot()
	r.setReady(false)
	r.sync()
	if b, err := os.ReadFile(filepath.Join(dir, "verifying")); err != nil || strings.TrimSpace(string(b)) != digest {
		t.Errorf("boot check verifying %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "healthy")); err == nil {
		t.Error("marked healthy while not Ready")
	}
	r.setReady(true)
	r.converge()
	if b, err := os.ReadFile(filepath.Join(dir, "healthy")); err != nil || strings.TrimSpace(string(b)) != digest {
		t.Errorf("boot check healthy %q, %v", b, err)
	}
}

// TestBootCheckRolledBack (issue 20 point 9): an image whose daemon never
// ran is rolled back by the node's boot check; the daemon, back on the
// previous image, reports the node Degraded with the check's verdict.
func TestBootCheckRolledBack(t *testing.T) {
	r := newRig(t)
	key := r.desire(newImage, r.renderedConfig("one"))
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	r.host.boot()
	// No daemon runs on this boot. The boot check, past its timeout,
	// leaves its verdict, rolls back and reboots (rollout/bootcheck).
	dir := bootcheck.Dir(filepath.Join(r.dir, "var/lib/strata"))
	const why = "boot check: image was not reported healthy by strata-daemon within 60s of its boot (the daemon never started verifying it); rolled back by the node's boot check"
	writeFile(t, filepath.Join(dir, "verdict"), bootc.DigestOf(newImage)+" "+why+"\n")
	if err := r.host.Rollback(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.reboot()
	r.sync()
	if r.host.booted != original {
		t.Fatalf("booted %q", r.host.booted)
	}
	reason := r.ann(v1alpha1.ReasonAnnotation)
	for _, want := range []string{newImage, why, original} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say %q", reason, want)
		}
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDegraded,
		v1alpha1.CurrentImageAnnotation: original,
		v1alpha1.DesiredDrainAnnotation: v1alpha1.UncordonRequestPrefix + key,
	})
	// The daemon's own rollback does not run on top of the check's.
	r.expectCounts(counts{switches: 1, rollbacks: 1, reboots: 1})
}
