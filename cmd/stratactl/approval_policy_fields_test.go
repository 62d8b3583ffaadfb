package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// TestApprovalPolicyCoversStatus: the policy strata-image-approval, as
// config/policy installs it, keeps an approver from changing every field
// of MachineOSBuildStatus, found by reflection so that a field added to
// the status fails here until the policy lists it. conditions are the
// conditions rule's: all of them but ImageApproved.
func TestApprovalPolicyCoversStatus(t *testing.T) {
	objs, err := testenv.Kustomize("config/policy")
	if err != nil {
		t.Fatal(err)
	}
	var policy *admissionregistrationv1.ValidatingAdmissionPolicy
	for _, o := range objs {
		if o.GetKind() == "ValidatingAdmissionPolicy" && o.GetName() == "strata-image-approval" {
			policy = &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, policy); err != nil {
				t.Fatal(err)
			}
		}
	}
	if policy == nil {
		t.Fatal("config/policy has no ValidatingAdmissionPolicy strata-image-approval")
	}

	// A field is protected by a clause that refuses its addition, its
	// removal and any change of it.
	clause := func(f string) string {
		return fmt.Sprintf("has(object.status.%[1]s) == has(oldObject.status.%[1]s) && (!has(object.status.%[1]s) || object.status.%[1]s == oldObject.status.%[1]s)", f)
	}
	mentioned := regexp.MustCompile(`\bobject\.status\.(\w+)`)
	protected, loose := map[string]bool{}, map[string]bool{}
	conditionsRule := false
	for _, v := range policy.Spec.Validations {
		expr := strings.Join(strings.Fields(v.Expression), " ")
		if expr == "variables.conditions == variables.oldConditions" {
			conditionsRule = true
		}
		for _, m := range mentioned.FindAllStringSubmatch(expr, -1) {
			if strings.Contains(expr, clause(m[1])) {
				protected[m[1]] = true
			} else {
				loose[m[1]] = true
			}
		}
	}
	if !conditionsRule {
		t.Error("strata-image-approval has no rule variables.conditions == variables.oldConditions")
	}
	for _, v := range policy.Spec.Variables {
		if v.Name == "conditions" && v.Expression != "has(object.status.conditions) ? object.status.conditions.filter(c, c.type != 'ImageApproved') : []" {
			t.Errorf("variable conditions is %q: it must leave out the ImageApproved condition only", v.Expression)
		}
	}

	var fields, missing []string
	st := reflect.TypeOf(v1alpha1.MachineOSBuildStatus{})
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Fatalf("MachineOSBuildStatus.%s has no json name", st.Field(i).Name)
		}
		fields = append(fields, name)
		if name != "conditions" && !protected[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("strata-image-approval lets an approver change status fields %s: add to its rule, for each, %q",
			strings.Join(missing, ", "), clause("FIELD"))
	}
	for f := range loose {
		if !protected[f] && f != "conditions" {
			t.Errorf("strata-image-approval reads status.%s but not as the clause %q", f, clause(f))
		}
	}
	for f := range protected {
		if !slices.Contains(fields, f) {
			t.Errorf("strata-image-approval protects status.%s, which MachineOSBuildStatus does not have", f)
		}
	}
}

// TestAPIRefusesApproverBootDiskAndSignatures: with config/policy
// installed, a user bound to strata-image-approver cannot point a build at
// another boot disk, give it one, take it away, forge or drop its
// signatures, or change its attempt; it can still approve it.
func TestAPIRefusesApproverBootDiskAndSignatures(t *testing.T) {
	env, scanner := approverEnv(t)
	ctx := context.Background()

	const repo = "registry.example.com/os/worker"
	img := repo + "@sha256:" + strings.Repeat("a", 64)
	mosb := func(name string, bd *v1alpha1.BootDiskStatus) {
		b := &v1alpha1.MachineOSBuild{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.MachineOSBuildSpec{
				MachineConfig:         v1alpha1.LocalObjectReference{Name: "rendered-worker-1"},
				MachineOSConfig:       v1alpha1.LocalObjectReference{Name: "worker"},
				RenderedImagePushSpec: repo + ":latest",
			},
		}
		b.Status.Attempt = 1
		b.Status.DigestedImagePushSpec = img
		b.Status.Signatures = []v1alpha1.ImageSignature{{KeyFingerprint: "SHA256:" + strings.Repeat("1", 64)}}
		b.Status.BootDisk = bd
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildSucceeded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBuildSucceeded, Message: "built"})
		createWithStatus(ctx, t, env.Client, b)
	}
	disk := &v1alpha1.BootDiskStatus{Artifact: repo + "@sha256:" + strings.Repeat("b", 64), Image: img, Size: 1 << 30, RawDigest: "sha256:" + strings.Repeat("c", 64)}
	mosb("worker-disk", disk)
	mosb("worker-nodisk", nil)

	// forge has the scanner change the status of build name with change;
	// when that is let through, the build controller's status is put back
	// so that each forgery starts from it.
	forge := func(name string, change func(*v1alpha1.MachineOSBuildStatus)) error {
		orig := &v1alpha1.MachineOSBuild{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, orig); err != nil {
			t.Fatal(err)
		}
		b := orig.DeepCopy()
		change(&b.Status)
		err := scanner.Status().Update(ctx, b)
		if err == nil {
			orig.ResourceVersion = b.ResourceVersion
			if err := env.Client.Status().Update(ctx, orig); err != nil {
				t.Fatal(err)
			}
		}
		return err
	}
	const want = "may change only the ImageApproved condition, not the build's"
	// The policy is loaded in the background: wait until it refuses what
	// it always did, the rewrite of the build's image.
	testenv.Eventually(t, 30*time.Second, "the approval policy in force", func() error {
		err := forge("worker-disk", func(s *v1alpha1.MachineOSBuildStatus) {
			s.DigestedImagePushSpec = "registry.example.com/evil@sha256:" + strings.Repeat("e", 64)
		})
		if err == nil {
			return errors.New("the scanner rewrote the build's image")
		}
		if !strings.Contains(err.Error(), want) {
			return err
		}
		return nil
	})

	for _, tc := range []struct {
		what   string
		build  string
		change func(*v1alpha1.MachineOSBuildStatus)
	}{
		{"point status.bootDisk at another artifact", "worker-disk", func(s *v1alpha1.MachineOSBuildStatus) {
			s.BootDisk.Artifact = "registry.example.com/evil@sha256:" + strings.Repeat("e", 64)
		}},
		{"change status.bootDisk's raw digest", "worker-disk", func(s *v1alpha1.MachineOSBuildStatus) {
			s.BootDisk.RawDigest = "sha256:" + strings.Repeat("e", 64)
		}},
		{"remove status.bootDisk", "worker-disk", func(s *v1alpha1.MachineOSBuildStatus) { s.BootDisk = nil }},
		{"set status.bootDisk on a build without one", "worker-nodisk", func(s *v1alpha1.MachineOSBuildStatus) {
			s.BootDisk = disk.DeepCopy()
		}},
		{"add a signature to status.signatures", "worker-disk", func(s *v1alpha1.MachineOSBuildStatus) {
			s.Signatures = append(s.Signatures, v1alpha1.ImageSignature{KeyFingerprint: "SHA256:" + strings.Repeat("e", 64)})
		}},
		{"replace status.signatures", "worker-disk", func(s *v1alpha1.MachineOSBuildStatus) {
			s.Signatures = []v1alpha1.ImageSignature{{KeyFingerprint: "SHA256:" + strings.Repeat("e", 64)}}
		}},
		{"remove status.signatures", "worker-disk", func(s *v1alpha1.MachineOSBuildStatus) { s.Signatures = nil }},
		{"change status.attempt", "worker-disk", func(s *v1alpha1.MachineOSBuildStatus) { s.Attempt = 2 }},
	} {
		err := forge(tc.build, tc.change)
		switch {
		case err == nil:
			t.Errorf("the scanner could %s of MachineOSBuild %s", tc.what, tc.build)
		case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err), !strings.Contains(err.Error(), want):
			t.Errorf("the scanner's attempt to %s: %v, want %q", tc.what, err, want)
		}
	}

	// The approval itself still lands, on a build with a disk and
	// signatures, and leaves them as they were.
	b := &v1alpha1.MachineOSBuild{}
	if err := scanner.Get(ctx, client.ObjectKey{Name: "worker-disk"}, b); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: v1alpha1.BuildImageApproved, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApproved, Message: "Approved by scanner"})
	if err := scanner.Status().Update(ctx, b); err != nil {
		t.Fatalf("the scanner's approval: %v", err)
	}
	got := &v1alpha1.MachineOSBuild{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "worker-disk"}, got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.BuildImageApproved) {
		t.Errorf("after the approval: %+v", got.Status.Conditions)
	}
	if !reflect.DeepEqual(got.Status.BootDisk, disk) || len(got.Status.Signatures) != 1 || got.Status.Attempt != 1 {
		t.Errorf("after the approval: bootDisk %+v, signatures %+v, attempt %d", got.Status.BootDisk, got.Status.Signatures, got.Status.Attempt)
	}
}
