package node

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
)

func TestNewNodes(t *testing.T) {
	const one, two = "r.example.com/os@sha256:1111111111111111111111111111111111111111111111111111111111111111",
		"r.example.com/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	prev := &v1alpha1.NewNodeStatus{Image: one, Config: "rendered-a-1"}
	onTarget := &v1alpha1.NewNodeStatus{Image: two, Config: "rendered-a-2"}
	released := target{Target: plan.Target{Config: "rendered-a-2", Image: two}}
	for _, tc := range []struct {
		name           string
		prev           *v1alpha1.NewNodeStatus
		t              target
		paused, halted bool
		before         *v1alpha1.NewNodeStatus // previousRelease
		want           *v1alpha1.NewNodeStatus
	}{
		{"rolling out: the target", prev, released, false, false, nil, onTarget},
		{"first target", nil, released, false, false, nil, onTarget},
		{"awaiting approval keeps the released image", prev,
			target{Target: plan.Target{Config: "rendered-a-2", Waiting: "waits for approval"}}, false, false, nil, prev},
		{"nothing released yet, build running", nil,
			target{Target: plan.Target{Config: "rendered-a-2", Waiting: "build running"}}, false, false, nil, nil},
		{"no rendered config", nil, target{}, false, false, nil, nil},
		{"halted before new nodes got the target keeps the released image", prev, released, false, true, nil, prev},
		{"halted after new nodes got the target: the release before it", onTarget, released, false, true, prev, prev},
		{"halted, nothing released before the stuck image: nothing", onTarget, released, false, true, nil, nil},
		{"paused keeps the released image", prev, released, true, false, nil, prev},
		{"halted with nothing released: nothing", nil, released, false, true, nil, nil},
		{"paused with nothing released: the target", nil, released, true, false, nil, onTarget},
		{"each node's own image", prev, target{Target: plan.Target{Config: "rendered-a-3"}}, false, false, nil, &v1alpha1.NewNodeStatus{Config: "rendered-a-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newNodes(tc.prev, tc.t, tc.paused, tc.halted, tc.before); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("newNodes = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestReleasable: only a build the rollout itself would give nodes is a
// release new nodes may start from.
func TestReleasable(t *testing.T) {
	const image = "r.example.com/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	mosc := &v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "uid-m"}}
	build := func(conds ...string) *v1alpha1.MachineOSBuild {
		b := &v1alpha1.MachineOSBuild{Status: v1alpha1.MachineOSBuildStatus{DigestedImagePushSpec: image}}
		b.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(mosc, v1alpha1.GroupVersion.WithKind("MachineOSConfig"))}
		for _, c := range conds {
			b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
		}
		return b
	}
	signing := mosc.DeepCopy()
	signing.Spec.Signing = &v1alpha1.ImageSigning{}
	approving := mosc.DeepCopy()
	approving.Spec.ImageApproval = v1alpha1.ImageApprovalRequired
	other := build(v1alpha1.BuildSucceeded)
	other.OwnerReferences[0].UID = "uid-other"
	tag := build(v1alpha1.BuildSucceeded)
	tag.Status.DigestedImagePushSpec = "r.example.com/os:latest"
	for _, tc := range []struct {
		name string
		mosc *v1alpha1.MachineOSConfig
		b    *v1alpha1.MachineOSBuild
		want bool
	}{
		{"succeeded", mosc, build(v1alpha1.BuildSucceeded), true},
		{"failed", mosc, build(v1alpha1.BuildFailed), false},
		{"an image by tag", mosc, tag, false},
		{"another MachineOSConfig's", mosc, other, false},
		{"unsigned where the pool signs", signing, build(v1alpha1.BuildSucceeded), false},
		{"signed", signing, build(v1alpha1.BuildSucceeded, v1alpha1.BuildImageSigned), true},
		{"not approved where approval is required", approving, build(v1alpha1.BuildSucceeded), false},
		{"approved", approving, build(v1alpha1.BuildSucceeded, v1alpha1.BuildImageApproved), true},
	} {
		if got := releasable(tc.mosc, tc.b); got != tc.want {
			t.Errorf("%s: releasable = %v, want %v", tc.name, got, tc.want)
		}
	}
}
