package node

import (
	"reflect"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/node/plan"
)

func TestNewNodes(t *testing.T) {
	const one, two = "r.example.com/os@sha256:1111111111111111111111111111111111111111111111111111111111111111",
		"r.example.com/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	prev := &v1alpha1.NewNodeStatus{Image: one, Config: "rendered-a-1"}
	released := target{Target: plan.Target{Config: "rendered-a-2", Image: two}}
	for _, tc := range []struct {
		name           string
		prev           *v1alpha1.NewNodeStatus
		t              target
		paused, halted bool
		nodes          []plan.Node
		want           *v1alpha1.NewNodeStatus
	}{
		{"rolling out: the target", prev, released, false, false, nil, &v1alpha1.NewNodeStatus{Image: two, Config: "rendered-a-2"}},
		{"first target", nil, released, false, false, nil, &v1alpha1.NewNodeStatus{Image: two, Config: "rendered-a-2"}},
		{"awaiting approval keeps the released image", prev,
			target{Target: plan.Target{Config: "rendered-a-2", Waiting: "waits for approval"}}, false, false, nil, prev},
		{"nothing released yet, build running", nil,
			target{Target: plan.Target{Config: "rendered-a-2", Waiting: "build running"}}, false, false, nil, nil},
		{"no rendered config", nil, target{}, false, false, nil, nil},
		{"halted before new nodes got the target keeps the released image", prev, released, false, true, nil, prev},
		{"halted: the image the pool is moving away from", &v1alpha1.NewNodeStatus{Image: two, Config: "rendered-a-2"}, released, false, true, []plan.Node{
			{Name: "n0", CurrentImage: two, CurrentConfig: "rendered-a-2"},
			{Name: "n1", CurrentImage: one, CurrentConfig: "rendered-a-1", State: "Degraded"},
			{Name: "n2", CurrentImage: one, CurrentConfig: "rendered-a-1"},
			{Name: "n3", CurrentImage: "r.example.com/os@sha256:0", CurrentConfig: "rendered-a-0"},
		}, prev},
		{"halted, every node on the stuck image: nothing", &v1alpha1.NewNodeStatus{Image: two, Config: "rendered-a-2"}, released, false, true, []plan.Node{
			{Name: "n0", CurrentImage: two, CurrentConfig: "rendered-a-2"},
		}, nil},
		{"paused keeps the released image", prev, released, true, false, nil, prev},
		{"halted with nothing released: nothing", nil, released, false, true, nil, nil},
		{"paused with nothing released: the target", nil, released, true, false, nil, &v1alpha1.NewNodeStatus{Image: two, Config: "rendered-a-2"}},
		{"each node's own image", prev, target{Target: plan.Target{Config: "rendered-a-3"}}, false, false, nil, &v1alpha1.NewNodeStatus{Config: "rendered-a-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := newNodes(tc.prev, tc.t, tc.paused, tc.halted, tc.nodes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("newNodes = %+v, want %+v", got, tc.want)
			}
		})
	}
}
