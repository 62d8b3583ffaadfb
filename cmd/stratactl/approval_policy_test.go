package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/test/testenv"
)

// TestAPIRefusesApprovalBeforeSuccess: with config/policy installed, the
// API server itself refuses ImageApproved=True on a build that has not
// succeeded, whoever writes it and without stratactl: a scanner bound to
// strata-image-approver and a cluster admin alike. A rejection is let
// through, and so is the approval once the build succeeded.
func TestAPIRefusesApprovalBeforeSuccess(t *testing.T) {
	env, scanner := approverEnv(t)
	ctx := context.Background()
	b := &v1alpha1.MachineOSBuild{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-running"},
		Spec: v1alpha1.MachineOSBuildSpec{
			MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-1"},
			MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
			RenderedImagePushSpec: "registry.example.com/os/worker:latest",
		},
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildBuilding, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildRunning, Message: "building"})
	createWithStatus(ctx, t, env.Client, b)

	// verdict writes ImageApproved as c, straight to the API.
	verdict := func(c client.Client, status metav1.ConditionStatus) error {
		got := &v1alpha1.MachineOSBuild{}
		if err := c.Get(ctx, client.ObjectKey{Name: b.Name}, got); err != nil {
			return err
		}
		meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildImageApproved, Status: status, Reason: "Verdict", Message: "by the test"})
		return c.Status().Update(ctx, got)
	}
	unapprove := func() {
		got := &v1alpha1.MachineOSBuild{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: b.Name}, got); err != nil {
			t.Fatal(err)
		}
		meta.RemoveStatusCondition(&got.Status.Conditions, v1alpha1.BuildImageApproved)
		if err := env.Client.Status().Update(ctx, got); err != nil {
			t.Fatal(err)
		}
	}
	const want = "MachineOSBuild worker-running has not succeeded: only a built image can be approved"
	// The policy is loaded in the background.
	testenv.Eventually(t, 30*time.Second, "the scanner's approval refused", func() error {
		err := verdict(scanner, metav1.ConditionTrue)
		if err == nil {
			unapprove()
			return errors.New("the scanner approved a build that has not succeeded")
		}
		if !strings.Contains(err.Error(), want) {
			return err
		}
		return nil
	})
	if err := verdict(env.Client, metav1.ConditionTrue); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a cluster admin's approval of a running build: %v, want %q", err, want)
	}
	if err := verdict(scanner, metav1.ConditionFalse); err != nil {
		t.Errorf("the scanner's rejection of a running build: %v", err)
	}

	got := &v1alpha1.MachineOSBuild{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: b.Name}, got); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildBuilding, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
	meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
	got.Status.DigestedImagePushSpec = "registry.example.com/os/worker@sha256:" + strings.Repeat("a", 64)
	if err := env.Client.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := verdict(scanner, metav1.ConditionTrue); err != nil {
		t.Errorf("the scanner's approval of a built image: %v", err)
	}
}

// approverEnv starts an apiserver with config/policy and the approver
// role installed, and returns it with a client of the user "scanner",
// bound to strata-image-approver.
func approverEnv(t *testing.T) (*testenv.Env, client.Client) {
	t.Helper()
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
	scannerCfg := rest.CopyConfig(env.Config)
	scannerCfg.Impersonate = rest.ImpersonationConfig{UserName: "scanner"}
	scanner, err := client.New(scannerCfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return env, scanner
}
