package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

const (
	imgNew  = "registry.example.com/strata/os@sha256:aaaaaaaaaaaabbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	imgOld  = "registry.example.com/strata/os@sha256:111111111111222222222222222222222222222222222222222222222222222f"
	imgBase = "quay.io/fedora/fedora-bootc@sha256:cccccccccccc000000000000000000000000000000000000000000000000000d"
)

func cond(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func node(name, pool string, labels map[string]string, state, current, desired, reason string) corev1.Node {
	a := map[string]string{}
	for k, v := range map[string]string{
		v1alpha1.NodePoolAnnotation:     pool,
		v1alpha1.StateAnnotation:        state,
		v1alpha1.CurrentImageAnnotation: current,
		v1alpha1.DesiredImageAnnotation: desired,
		v1alpha1.ReasonAnnotation:       reason,
	} {
		if v != "" {
			a[k] = v
		}
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: a}}
}

// statusFixture is a layered worker pool half way through a rollout and an
// infra pool whose build failed, with one node degraded.
func statusFixture() statusSnapshot {
	worker := v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: "worker", Annotations: map[string]string{v1alpha1.LayeredByAnnotation: "worker-os"}},
		Spec: v1alpha1.MachineConfigPoolSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/worker": ""}},
			MaintenanceWindows: []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{v1alpha1.Thursday}, Start: "22:00",
				Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "Europe/Berlin"}},
		},
		Status: v1alpha1.MachineConfigPoolStatus{
			Configuration:       v1alpha1.MachineConfigPoolStatusConfiguration{Name: "rendered-worker-5f3c"},
			MachineCount:        2,
			UpdatedMachineCount: 1,
			MaintenanceWindow: &v1alpha1.MaintenanceWindowStatus{Open: true,
				ClosesAt:    &metav1.Time{Time: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)},
				NextOpensAt: &metav1.Time{Time: time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)}},
			Conditions: []metav1.Condition{
				cond(v1alpha1.PoolUpdated, metav1.ConditionFalse, v1alpha1.ReasonRollingOut, "1 of 2 nodes run rendered-worker-5f3c ("+imgNew+")"),
				cond(v1alpha1.PoolUpdating, metav1.ConditionTrue, v1alpha1.ReasonRollingOut, "Updating"),
				cond(v1alpha1.PoolDegraded, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, "No part of the pool is degraded"),
			},
		},
	}
	infra := v1alpha1.MachineConfigPool{
		ObjectMeta: metav1.ObjectMeta{Name: "infra"},
		Spec: v1alpha1.MachineConfigPoolSpec{Paused: true, MaintenanceWindows: []v1alpha1.MaintenanceWindow{
			{Days: []v1alpha1.Weekday{v1alpha1.Saturday}, Start: "01:00", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}}},
		Status: v1alpha1.MachineConfigPoolStatus{
			Configuration: v1alpha1.MachineConfigPoolStatusConfiguration{Name: "rendered-infra-9e1d"},
			MaintenanceWindow: &v1alpha1.MaintenanceWindowStatus{
				NextOpensAt: &metav1.Time{Time: time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)}},
			MachineCount:         1,
			DegradedMachineCount: 1,
			Conditions: []metav1.Condition{
				cond(v1alpha1.PoolUpdated, metav1.ConditionFalse, v1alpha1.ReasonPaused, "The pool is paused"),
				cond(v1alpha1.PoolUpdating, metav1.ConditionFalse, v1alpha1.ReasonPaused, "The pool is paused"),
				cond(v1alpha1.PoolDegraded, metav1.ConditionTrue, "ImageBuildDegradedAndNodeDegraded",
					"ImageBuildDegraded: build infra-os-2 failed at Build; NodeDegraded: node infra-0: bootc switch failed"),
			},
		},
	}
	empty := v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: "edge"}}
	mosc := func(name, pool, build, image string) v1alpha1.MachineOSConfig {
		m := v1alpha1.MachineOSConfig{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MachineOSConfigSpec{
				MachineConfigPool:       v1alpha1.LocalObjectReference{Name: pool},
				ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
				RenderedImagePushSecret: v1alpha1.SecretReference{Name: "push"},
				RenderedImagePushSpec:   "registry.example.com/strata/os:latest",
			},
			Status: v1alpha1.MachineOSConfigStatus{CurrentImagePullSpec: image},
		}
		if build != "" {
			m.Status.MachineOSBuild = &v1alpha1.LocalObjectReference{Name: build}
		}
		return m
	}
	build := func(name, mosc string, conds ...metav1.Condition) v1alpha1.MachineOSBuild {
		return v1alpha1.MachineOSBuild{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MachineOSBuildSpec{
				MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-x"},
				MachineOSConfig:       v1alpha1.LocalObjectReference{Name: mosc},
				RenderedImagePushSpec: "registry.example.com/strata/os:x",
			},
			Status: v1alpha1.MachineOSBuildStatus{Conditions: conds},
		}
	}
	workerB := node("worker-b", "worker", nil, v1alpha1.NodeStateWorking, imgBase, imgNew, "Pulling\tthe image\nstep 2 of 5")
	workerB.Annotations[v1alpha1.DisruptionAnnotation] = "SoftReboot: file /etc/chrony.conf changed, no policy names it: a soft reboot (the default)"
	workerA := node("worker-a", "worker", nil, v1alpha1.NodeStateDone, imgNew, imgNew, "")
	workerA.Annotations[v1alpha1.DesiredStageAnnotation] = imgOld
	workerA.Annotations[v1alpha1.StagedImageAnnotation] = imgOld
	infra0 := node("infra-0", "infra", nil, v1alpha1.NodeStateDegraded, imgOld, imgOld, "bootc switch failed: exit status 1")
	infra0.Annotations[v1alpha1.DesiredStageAnnotation] = imgNew
	return statusSnapshot{
		// Out of order on purpose: the table sorts.
		Pools: []v1alpha1.MachineConfigPool{worker, infra, empty},
		Configs: []v1alpha1.MachineOSConfig{
			mosc("worker-os", "worker", "worker-os-7c1d", imgNew),
			mosc("infra-os", "infra", "infra-os-2", imgOld),
		},
		Builds: []v1alpha1.MachineOSBuild{
			build("worker-os-7c1d", "worker-os",
				cond(v1alpha1.BuildPrepared, metav1.ConditionTrue, v1alpha1.ReasonBuildSucceeded, "done"),
				cond(v1alpha1.BuildSucceeded, metav1.ConditionTrue, v1alpha1.ReasonBuildSucceeded, "done")),
			build("infra-os-2", "infra-os",
				cond(v1alpha1.BuildPrepared, metav1.ConditionTrue, v1alpha1.ReasonBuildFailed, "failed"),
				cond(v1alpha1.BuildFailed, metav1.ConditionTrue, v1alpha1.ReasonBuildFailed, "failed")),
		},
		Nodes: []corev1.Node{
			workerB,
			workerA,
			// Selected by the pool's nodeSelector, not yet assigned.
			node("worker-c", "", map[string]string{"node-role.kubernetes.io/worker": ""}, "", "", "", ""),
			infra0,
			node("stray", "", nil, "", "", "", ""),
		},
	}
}

func TestRenderStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap statusSnapshot
		only []string
		want string
	}{{
		name: "all pools",
		snap: statusFixture(),
		want: `POOL    CONFIG                MACHINEOSCONFIG  BUILD                       IMAGE                                               UPDATED  DEGRADED  PAUSED  WINDOW                                 STATUS
edge    -                     -                -                           -                                                   0/0      0         false   -                                      Unknown
  (no nodes)
infra   rendered-infra-9e1d   infra-os         infra-os-2 (Failed)         registry.example.com/strata/os@sha256:111111111111  0/1      1         true    closed until Sat 2026-11-28 01:00 UTC  Degraded: ImageBuildDegraded: build infra-os-2 failed at Build; NodeDegraded: node infra-0: bootc switch failed
  NODE      STATE     CURRENT IMAGE                                       DESIRED IMAGE                                       REASON                              DISRUPTION                                                                                  STAGED AHEAD
  infra-0   Degraded  registry.example.com/strata/os@sha256:111111111111  =                                                   bootc switch failed: exit status 1  -                                                                                           downloading registry.example.com/strata/os@sha256:aaaaaaaaaaaa
worker  rendered-worker-5f3c  worker-os        worker-os-7c1d (Succeeded)  registry.example.com/strata/os@sha256:aaaaaaaaaaaa  1/2      0         false   open until Fri 2026-11-27 02:00 CET    Updating: 1 of 2 nodes run rendered-worker-5f3c (registry.example.com/strata/os@sha256:aaaaaaaaaaaa)
  NODE      STATE     CURRENT IMAGE                                       DESIRED IMAGE                                       REASON                              DISRUPTION                                                                                  STAGED AHEAD
  worker-a  Done      registry.example.com/strata/os@sha256:aaaaaaaaaaaa  =                                                   -                                   -                                                                                           staged registry.example.com/strata/os@sha256:111111111111
  worker-b  Working   quay.io/fedora/fedora-bootc@sha256:cccccccccccc     registry.example.com/strata/os@sha256:aaaaaaaaaaaa  Pulling the image …                 SoftReboot: file /etc/chrony.conf changed, no policy names it: a soft reboot (the default)  -
  worker-c  -         -                                                   -                                                   -                                   -                                                                                           -
`,
	}, {
		name: "one pool, one missing",
		snap: statusFixture(),
		only: []string{"worker", "gpu"},
		want: `POOL    CONFIG                MACHINEOSCONFIG  BUILD                       IMAGE                                               UPDATED  DEGRADED  PAUSED  WINDOW                               STATUS
worker  rendered-worker-5f3c  worker-os        worker-os-7c1d (Succeeded)  registry.example.com/strata/os@sha256:aaaaaaaaaaaa  1/2      0         false   open until Fri 2026-11-27 02:00 CET  Updating: 1 of 2 nodes run rendered-worker-5f3c (registry.example.com/strata/os@sha256:aaaaaaaaaaaa)
  NODE      STATE    CURRENT IMAGE                                       DESIRED IMAGE                                       REASON               DISRUPTION                                                                                  STAGED AHEAD
  worker-a  Done     registry.example.com/strata/os@sha256:aaaaaaaaaaaa  =                                                   -                    -                                                                                           staged registry.example.com/strata/os@sha256:111111111111
  worker-b  Working  quay.io/fedora/fedora-bootc@sha256:cccccccccccc     registry.example.com/strata/os@sha256:aaaaaaaaaaaa  Pulling the image …  SoftReboot: file /etc/chrony.conf changed, no policy names it: a soft reboot (the default)  -
  worker-c  -        -                                                   -                                                   -                    -                                                                                           -
no MachineConfigPool named gpu
`,
	}, {
		name: "no pools",
		snap: statusSnapshot{},
		want: "No MachineConfigPools found.\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := renderStatus(&out, tc.snap, tc.only); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestDescribeWindow(t *testing.T) {
	windows := []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{v1alpha1.Sunday}, Start: "22:00",
		Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "America/New_York"}}
	at := func(s string) *metav1.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: v}
	}
	for _, tc := range []struct {
		name    string
		windows []v1alpha1.MaintenanceWindow
		status  *v1alpha1.MaintenanceWindowStatus
		reason  string
		want    string
	}{
		{name: "no windows", want: "-"},
		{name: "closed, in the window's zone, across the DST change", windows: windows,
			status: &v1alpha1.MaintenanceWindowStatus{NextOpensAt: at("2026-11-02T03:00:00Z")}, want: "closed until Sun 2026-11-01 22:00 EST"},
		{name: "open", windows: windows,
			status: &v1alpha1.MaintenanceWindowStatus{Open: true, ClosesAt: at("2026-10-26T06:00:00Z")}, want: "open until Mon 2026-10-26 02:00 EDT"},
		{name: "open for good", windows: windows, status: &v1alpha1.MaintenanceWindowStatus{Open: true}, want: "open"},
		{name: "unreadable", windows: windows, reason: v1alpha1.ReasonInvalidMaintenanceWindow, want: "invalid"},
		{name: "not yet reported", windows: windows, reason: v1alpha1.ReasonRollingOut, want: "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.MachineConfigPool{Spec: v1alpha1.MachineConfigPoolSpec{MaintenanceWindows: tc.windows},
				Status: v1alpha1.MachineConfigPoolStatus{MaintenanceWindow: tc.status}}
			if tc.reason != "" {
				p.Status.Conditions = []metav1.Condition{cond(v1alpha1.PoolUpdated, metav1.ConditionFalse, tc.reason, "x")}
			}
			if got := describeWindow(p); got != tc.want {
				t.Errorf("describeWindow = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestShortImage(t *testing.T) {
	for in, want := range map[string]string{
		"":                                   "-",
		imgNew:                               "registry.example.com/strata/os@sha256:aaaaaaaaaaaa",
		"registry.example.com/os:latest":     "registry.example.com/os:latest",
		"registry.example.com/os@sha256:abc": "registry.example.com/os@sha256:abc",
	} {
		if got := shortImage(in); got != want {
			t.Errorf("shortImage(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeKubeconfig writes a kubeconfig for cfg, so that the test goes
// through the same loading as a person's run.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// createWithStatus creates obj, then writes the status it was given.
func createWithStatus(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	withStatus := obj.DeepCopyObject().(client.Object)
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	withStatus.SetResourceVersion(obj.GetResourceVersion())
	if err := c.Status().Update(ctx, withStatus); err != nil {
		t.Fatalf("status of %T %s: %v", obj, obj.GetName(), err)
	}
}

// syncBuffer is written by the watching command and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestStatusCommand(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	snap := statusFixture()
	for i := range snap.Pools {
		if snap.Pools[i].Name == "worker" {
			createWithStatus(ctx, t, env.Client, &snap.Pools[i])
		}
	}
	createWithStatus(ctx, t, env.Client, &snap.Configs[0])
	createWithStatus(ctx, t, env.Client, &snap.Builds[0])
	for i := range snap.Nodes {
		if strings.HasPrefix(snap.Nodes[i].Name, "worker-") && snap.Nodes[i].Name != "worker-c" {
			if err := env.Client.Create(ctx, &snap.Nodes[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	kubeconfig := writeKubeconfig(t, env.Config)

	// As in TestRenderStatus, without worker-c.
	wantLines := []string{
		"POOL    CONFIG                MACHINEOSCONFIG  BUILD                       IMAGE                                               UPDATED  DEGRADED  PAUSED  WINDOW                               STATUS\n",
		"worker  rendered-worker-5f3c  worker-os        worker-os-7c1d (Succeeded)  registry.example.com/strata/os@sha256:aaaaaaaaaaaa  1/2      0         false   open until Fri 2026-11-27 02:00 CET  Updating: 1 of 2 nodes run rendered-worker-5f3c (registry.example.com/strata/os@sha256:aaaaaaaaaaaa)\n",
		"  worker-a  Done     registry.example.com/strata/os@sha256:aaaaaaaaaaaa  =                                                   -                    -                                                                                           staged registry.example.com/strata/os@sha256:111111111111\n",
		"  worker-b  Working  quay.io/fedora/fedora-bootc@sha256:cccccccccccc     registry.example.com/strata/os@sha256:aaaaaaaaaaaa  Pulling the image …  SoftReboot: file /etc/chrony.conf changed, no policy names it: a soft reboot (the default)  -\n",
	}

	t.Run("once", func(t *testing.T) {
		cmd := newStatusCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--kubeconfig", kubeconfig})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatal(err)
		}
		for _, want := range wantLines {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})

	t.Run("missing pool", func(t *testing.T) {
		cmd := newStatusCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "gpu"})
		err := cmd.ExecuteContext(ctx)
		if err == nil || !strings.Contains(err.Error(), "no MachineConfigPool named gpu") {
			t.Errorf("error = %v, want one naming the missing pool", err)
		}
	})

	t.Run("watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cmd := newStatusCommand()
		out := &syncBuffer{}
		cmd.SetOut(out)
		cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "--watch", "worker"})
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(ctx) }()
		testenv.Eventually(t, 30*time.Second, "first table", func() error {
			if !strings.Contains(out.String(), wantLines[2]) {
				return errString("worker-a not shown yet")
			}
			return nil
		})
		var n corev1.Node
		if err := env.Client.Get(ctx, client.ObjectKey{Name: "worker-b"}, &n); err != nil {
			t.Fatal(err)
		}
		n.Annotations[v1alpha1.StateAnnotation] = v1alpha1.NodeStateRebooting
		if err := env.Client.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "table after the node changed", func() error {
			if !strings.Contains(out.String(), "  worker-b  Rebooting  quay.io/fedora/fedora-bootc@sha256:cccccccccccc") {
				return errString("worker-b not shown Rebooting yet")
			}
			return nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch ended with %v", err)
		}
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func TestDescribeBuildNamesTheStrategy(t *testing.T) {
	mosc := &v1alpha1.MachineOSConfig{Status: v1alpha1.MachineOSConfigStatus{MachineOSBuild: &v1alpha1.LocalObjectReference{Name: "worker-os-1"}}}
	b := v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: "worker-os-1"}, Status: v1alpha1.MachineOSBuildStatus{
		Strategy:   v1alpha1.ConfigLayerStrategy,
		Conditions: []metav1.Condition{{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue}},
	}}
	if got, want := describeBuild(mosc, []v1alpha1.MachineOSBuild{b}), "worker-os-1 (Succeeded, ConfigLayer)"; got != want {
		t.Errorf("describeBuild = %q, want %q", got, want)
	}
}

func TestDescribeBuildSaysWhereTheImageIsAtTheGate(t *testing.T) {
	succeeded := metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue}
	for _, tc := range []struct {
		name     string
		approval v1alpha1.ImageApproval
		conds    []metav1.Condition
		want     string
	}{
		{"gate off", v1alpha1.ImageApprovalAutomatic, []metav1.Condition{succeeded}, "b (Succeeded)"},
		{"awaiting", v1alpha1.ImageApprovalRequired, []metav1.Condition{succeeded}, "b (Succeeded, awaiting approval)"},
		{"still building", v1alpha1.ImageApprovalRequired, []metav1.Condition{{Type: v1alpha1.BuildBuilding, Status: metav1.ConditionTrue}}, "b (Building)"},
		{"approved", v1alpha1.ImageApprovalRequired, []metav1.Condition{succeeded, {Type: v1alpha1.BuildImageApproved, Status: metav1.ConditionTrue}}, "b (Succeeded, approved)"},
		{"rejected", v1alpha1.ImageApprovalRequired, []metav1.Condition{succeeded, {Type: v1alpha1.BuildImageApproved, Status: metav1.ConditionFalse}}, "b (Succeeded, rejected)"},
		{"rejected with the gate off", v1alpha1.ImageApprovalAutomatic, []metav1.Condition{succeeded, {Type: v1alpha1.BuildImageApproved, Status: metav1.ConditionFalse}}, "b (Succeeded, rejected)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mosc := &v1alpha1.MachineOSConfig{
				Spec:   v1alpha1.MachineOSConfigSpec{ImageApproval: tc.approval},
				Status: v1alpha1.MachineOSConfigStatus{MachineOSBuild: &v1alpha1.LocalObjectReference{Name: "b"}},
			}
			b := v1alpha1.MachineOSBuild{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: v1alpha1.MachineOSBuildStatus{Conditions: tc.conds}}
			if got := describeBuild(mosc, []v1alpha1.MachineOSBuild{b}); got != tc.want {
				t.Errorf("describeBuild = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDescribeNodeStateSaysHeldQuarantinedAndGroup(t *testing.T) {
	zoned := &v1alpha1.MachineConfigPool{Spec: v1alpha1.MachineConfigPoolSpec{Topology: &v1alpha1.RolloutTopology{Key: "topology.kubernetes.io/zone"}}}
	plain := &v1alpha1.MachineConfigPool{}
	node := func(labels, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: ann}}
	}
	for _, c := range []struct {
		name          string
		pool          *v1alpha1.MachineConfigPool
		node          *corev1.Node
		state, reason string
	}{
		{"plain", plain, node(nil, map[string]string{v1alpha1.StateAnnotation: "Done"}), "Done", ""},
		{"zoned", zoned, node(map[string]string{"topology.kubernetes.io/zone": "eu-1a"}, map[string]string{v1alpha1.StateAnnotation: "Done"}),
			"Done (topology.kubernetes.io/zone=eu-1a)", ""},
		{"held", plain, node(nil, map[string]string{v1alpha1.StateAnnotation: "Done", v1alpha1.HoldAnnotation: "disk swap"}), "Done (held: disk swap)", ""},
		{"quarantined", plain, node(map[string]string{v1alpha1.DrainBlockedLabel: "true"}, map[string]string{
			v1alpha1.StateAnnotation:        "Working",
			v1alpha1.DrainBlockedAnnotation: v1alpha1.DrainFailure("drain-k1", "pod app/db-0 (PodDisruptionBudget app/db)"),
		}), "Working (quarantined)", "pod app/db-0 (PodDisruptionBudget app/db)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, reason := describeNodeState(c.pool, c.node)
			if state != c.state || reason != c.reason {
				t.Errorf("got %q, %q; want %q, %q", state, reason, c.state, c.reason)
			}
		})
	}
}
