package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/test/testenv"
)

// TestApproveAndReject runs stratactl approve and reject as a user bound
// only to the shipped ClusterRole strata-image-approver, with the shipped
// admission policy in force: the verdicts land, and the same user cannot
// touch anything else of a build's status.
func TestApproveAndReject(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	if err := env.Install(ctx, "config/rbac/approver", "config/policy"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scanner-approves"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "strata-image-approver"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "scanner"}},
	}); err != nil {
		t.Fatal(err)
	}
	img := "registry.example.com/os/worker@sha256:" + strings.Repeat("a", 64)
	mosb := func(name string, succeeded bool) {
		b := &v1alpha1.MachineOSBuild{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MachineOSBuildSpec{
				MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-1"},
				MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
				RenderedImagePushSpec: "registry.example.com/os/worker:latest",
			},
		}
		if succeeded {
			b.Status.DigestedImagePushSpec = img
			meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
		}
		createWithStatus(ctx, t, env.Client, b)
	}
	mosb("worker-built", true)
	mosb("worker-running", false)

	// The scanner's kubeconfig: the test's admin, impersonating "scanner".
	kubeconfig := writeKubeconfig(t, env.Config)
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos["envtest"].Impersonate = "scanner"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	scannerCfg := rest.CopyConfig(env.Config)
	scannerCfg.Impersonate = rest.ImpersonationConfig{UserName: "scanner"}
	scanner, err := client.New(scannerCfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}

	// The policy is loaded in the background: wait until it refuses the
	// scanner's rewrite of a build's image.
	forge := func() error {
		b := &v1alpha1.MachineOSBuild{}
		if err := scanner.Get(ctx, client.ObjectKey{Name: "worker-built"}, b); err != nil {
			return err
		}
		b.Status.DigestedImagePushSpec = "registry.example.com/evil@sha256:" + strings.Repeat("e", 64)
		return scanner.Status().Update(ctx, b)
	}
	testenv.Eventually(t, 30*time.Second, "the approval policy in force", func() error {
		err := forge()
		if err == nil {
			// Let through before the policy loaded: undo.
			b := &v1alpha1.MachineOSBuild{}
			if gerr := env.Client.Get(ctx, client.ObjectKey{Name: "worker-built"}, b); gerr == nil {
				b.Status.DigestedImagePushSpec = img
				_ = env.Client.Status().Update(ctx, b)
			}
			return errors.New("the scanner rewrote the build's image")
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return err
		}
		if !strings.Contains(err.Error(), "may change only the ImageApproved condition, not the build's image, outcome, stages, referrers, signatures, boot disk or attempt") {
			return err
		}
		return nil
	})

	run := func(cmd string, args ...string) (string, error) {
		c := newApproveCommand()
		if cmd == "reject" {
			c = newRejectCommand()
		}
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&bytes.Buffer{})
		c.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
		err := c.ExecuteContext(ctx)
		return out.String(), err
	}
	condition := func(name string) *metav1.Condition {
		b := &v1alpha1.MachineOSBuild{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildImageApproved)
	}

	if out, err := run("approve", "worker-built", "--reason", "no HIGH findings"); err != nil || out != "machineosbuild/worker-built approved\n" {
		t.Fatalf("approve: %q, %v", out, err)
	}
	if c := condition("worker-built"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonApproved || c.Message != "Approved by scanner: no HIGH findings" {
		t.Errorf("after approve: %+v", c)
	}
	if _, err := run("approve", "worker-running"); err == nil || !strings.Contains(err.Error(), "MachineOSBuild worker-running has not succeeded (Pending)") {
		t.Errorf("approving an unbuilt image: %v", err)
	}
	if _, err := run("reject", "worker-built"); err == nil || !strings.Contains(err.Error(), "--reason is required") {
		t.Errorf("reject without a reason: %v", err)
	}
	if _, err := run("reject", "worker-built", "--reason", "CVE-2026-0001"); err != nil {
		t.Fatal(err)
	}
	if c := condition("worker-built"); c == nil || c.Status != metav1.ConditionFalse || c.Message != "Rejected by scanner: CVE-2026-0001" {
		t.Errorf("after reject: %+v", c)
	}

	// The scanner may not mark a build succeeded, even with the verbs.
	b := &v1alpha1.MachineOSBuild{}
	if err := scanner.Get(ctx, client.ObjectKey{Name: "worker-running"}, b); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: "Forged", Message: "x"})
	if err := scanner.Status().Update(ctx, b); err == nil || !strings.Contains(err.Error(), "may change only the ImageApproved condition; the other conditions are the build controller's") {
		t.Errorf("the scanner set Succeeded: %v", err)
	}
	if _, err := run("approve", "nothing"); err == nil || !strings.Contains(err.Error(), "no MachineOSBuild named nothing") {
		t.Errorf("approving a missing build: %v", err)
	}
}
