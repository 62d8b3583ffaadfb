package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func TestDrainAndUncordonOnRequest(t *testing.T) {
	f := newFixture(t, "drain", 1, nil)
	logs := startController(t)
	f.annotate("drain-0", v1alpha1.NodePoolAnnotation, "drain", v1alpha1.DesiredDrainAnnotation, "drain-k1")
	eventually(t, "drained", func() error {
		n := f.node("drain-0")
		if !n.Spec.Unschedulable || n.Annotations[v1alpha1.LastAppliedDrainAnnotation] != "drain-k1" {
			return fmt.Errorf("unschedulable %v, lastAppliedDrain %q", n.Spec.Unschedulable, n.Annotations[v1alpha1.LastAppliedDrainAnnotation])
		}
		if s := n.Annotations[v1alpha1.DrainStartedAnnotation]; s != "" {
			return fmt.Errorf("drainStarted %q is left behind", s)
		}
		return nil
	})
	f.annotate("drain-0", v1alpha1.DesiredDrainAnnotation, "uncordon-k1")
	eventually(t, "uncordoned", func() error {
		n := f.node("drain-0")
		if n.Spec.Unschedulable || n.Annotations[v1alpha1.LastAppliedDrainAnnotation] != "uncordon-k1" {
			return fmt.Errorf("unschedulable %v, lastAppliedDrain %q", n.Spec.Unschedulable, n.Annotations[v1alpha1.LastAppliedDrainAnnotation])
		}
		return nil
	})
	for _, l := range []struct{ msg, request string }{
		{"Drain started", "drain-k1"}, {"Drain finished", "drain-k1"}, {"Node uncordoned", "uncordon-k1"},
	} {
		logs.Wait(t, timeout, l.msg, map[string]string{"name": "drain-0", "request": l.request})
	}
}

// TestDrainPastItsTimeoutRecordsTheVerdictAndNamesTheBudget: a drain a
// budget blocks past the pool's drainTimeout leaves the node cordoned,
// and the controller's verdict in drainFailure, naming the request, the
// pod and the budget. The controller writes no state or reason: the
// daemon, their one writer, reports the verdict as Degraded. While the
// node reports Degraded with the drain asked for, the drain is not tried
// again, also once a person removed the verdict; the daemon's Working
// report then has it tried again, and a verdict on an earlier request
// goes once another is carried out.
func TestDrainPastItsTimeoutRecordsTheVerdictAndNamesTheBudget(t *testing.T) {
	ctx := context.Background()
	// Three attempts' worth (each 2 s, see startController): the first
	// must end inside the timeout, also on a loaded machine, for the
	// "trying again" path to be seen.
	f := newFixture(t, "pdb", 1, func(p *v1alpha1.MachineConfigPool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 6 * time.Second}
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "drain-"}}
	must(t, env.Client.Create(ctx, ns))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "guarded", Labels: map[string]string{"app": "guarded"}},
		Spec:       corev1.PodSpec{NodeName: "pdb-0", Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app@sha256:" + digest('1')}}},
	}
	must(t, env.Client.Create(ctx, pod))
	// Evictions ignore budgets for pending pods: make it run, as a kubelet
	// would.
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	must(t, env.Client.Status().Update(ctx, pod))
	one := intstr.FromInt32(1)
	must(t, env.Client.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "keep-one"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
	}))
	logs := startController(t)
	// The daemon reports Working as it asks for the drain.
	f.annotate("pdb-0", v1alpha1.NodePoolAnnotation, "pdb", v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking,
		v1alpha1.DesiredDrainAnnotation, "drain-k2")
	var reason string
	eventually(t, "the drain timeout's verdict", func() error {
		value := f.node("pdb-0").Annotations[v1alpha1.DrainFailureAnnotation]
		request, why, ok := v1alpha1.ParseDrainFailure(value)
		if !ok || request != "drain-k2" {
			return fmt.Errorf("drainFailure %q does not name drain-k2", value)
		}
		for _, want := range []string{"Drain timed out after 6s", "pod " + ns.Name + "/guarded", "PodDisruptionBudget " + ns.Name + "/keep-one"} {
			if !strings.Contains(why, want) {
				return fmt.Errorf("drainFailure %q does not say %q", value, want)
			}
		}
		reason = why
		return nil
	})
	// Written in the verdict's patch, had the controller written them.
	n := f.node("pdb-0")
	if st, r := n.Annotations[v1alpha1.StateAnnotation], n.Annotations[v1alpha1.ReasonAnnotation]; st != v1alpha1.NodeStateWorking || r != "" {
		t.Errorf("the drain controller wrote the daemon's state %q and reason %q; the daemon alone reports them", st, r)
	}
	if !n.Spec.Unschedulable {
		t.Error("a node whose drain timed out was uncordoned; it must stay cordoned for a person")
	}
	if got := n.Annotations[v1alpha1.LastAppliedDrainAnnotation]; got == "drain-k2" {
		t.Error("a drain that timed out was acknowledged as done")
	}
	if s := n.Annotations[v1alpha1.DrainStartedAnnotation]; s != "" {
		t.Errorf("drainStarted %q is left behind: a retry would not get a whole drainTimeout", s)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp != nil {
		t.Errorf("the guarded pod was evicted despite its budget: %v", err)
	}
	logs.Wait(t, timeout, "Drain blocked; trying again", map[string]string{"name": "pdb-0", "request": "drain-k2", "level": "1"})
	timedOut := logs.Wait(t, timeout, "Drain timed out; the node is left cordoned and Degraded", map[string]string{"name": "pdb-0", "request": "drain-k2", "drainTimeout": "6s"})
	if b, _ := timedOut["blockers"].(string); !strings.Contains(b, "PodDisruptionBudget "+ns.Name+"/keep-one") {
		t.Errorf("the timeout's log names blockers %q, want the budget", b)
	}

	// The daemon reports the verdict; the cause is fixed (the pod gone),
	// and a person removes the verdict. The node still reports Degraded
	// for its drain, as one an older controller gave up on does: no
	// drain until the daemon reports Working.
	f.annotate("pdb-0", v1alpha1.StateAnnotation, v1alpha1.NodeStateDegraded, v1alpha1.ReasonAnnotation, reason)
	must(t, env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)))
	f.annotate("pdb-0", v1alpha1.DrainFailureAnnotation, "")
	logs.Wait(t, timeout, "Not draining a node whose drain failed; it is left cordoned for a person",
		map[string]string{"name": "pdb-0", "request": "drain-k2", "verdict": v1alpha1.StateAnnotation})
	if n := f.node("pdb-0"); n.Annotations[v1alpha1.LastAppliedDrainAnnotation] == "drain-k2" || n.Annotations[v1alpha1.DrainStartedAnnotation] != "" {
		t.Errorf("drained a node that reports Degraded for its drain: lastAppliedDrain %q, drainStarted %q",
			n.Annotations[v1alpha1.LastAppliedDrainAnnotation], n.Annotations[v1alpha1.DrainStartedAnnotation])
	}
	f.annotate("pdb-0", v1alpha1.StateAnnotation, v1alpha1.NodeStateWorking, v1alpha1.ReasonAnnotation, "")
	if n := f.acknowledged("pdb-0", "drain-k2"); n.Annotations[v1alpha1.DrainFailureAnnotation] != "" {
		t.Errorf("drainFailure %q after the drain tried again succeeded", n.Annotations[v1alpha1.DrainFailureAnnotation])
	}

	// A verdict on an earlier request goes with the next one.
	f.annotate("pdb-0", v1alpha1.DrainFailureAnnotation, v1alpha1.DrainFailure("drain-k1", "Drain timed out"),
		v1alpha1.DesiredDrainAnnotation, "drain-k3")
	if n := f.acknowledged("pdb-0", "drain-k3"); n.Annotations[v1alpha1.DrainFailureAnnotation] != "" {
		t.Errorf("drainFailure %q on an earlier request is left beside drain-k3", n.Annotations[v1alpha1.DrainFailureAnnotation])
	}
	if n := f.node("pdb-0"); n.Annotations[v1alpha1.StateAnnotation] != v1alpha1.NodeStateWorking {
		t.Errorf("state %q: the drain controller wrote the daemon's state", n.Annotations[v1alpha1.StateAnnotation])
	}
}

// cordon sets the node's unschedulable as a person with kubectl would.
func (f *fixture) cordon(name string, on bool) {
	f.t.Helper()
	raw := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on)
	must(f.t, env.Client.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch("application/merge-patch+json", raw)))
}

// acknowledged waits until the controller acknowledged request on node.
func (f *fixture) acknowledged(name, request string) *corev1.Node {
	f.t.Helper()
	var n *corev1.Node
	eventually(f.t, "acknowledged "+request, func() error {
		n = f.node(name)
		if got := n.Annotations[v1alpha1.LastAppliedDrainAnnotation]; got != request {
			return fmt.Errorf("lastAppliedDrain %q", got)
		}
		return nil
	})
	return n
}

// TestUncordonOnlyWhatStrataCordoned: a node a person cordoned stays
// cordoned whatever uncordon the daemon asks for, also through an update
// of its own; Strata uncordons a node it cordoned, for that update or
// the node's current one; a person's uncordon makes Strata forget its
// cordon, so that the person's next cordon is theirs.
func TestUncordonOnlyWhatStrataCordoned(t *testing.T) {
	f := newFixture(t, "quarantine", 0, nil)
	// Nodes of no pool: only the drain controller acts on them.
	other := map[string]string{"test-pool": "none"}
	admin := f.addNode("quarantine-admin", other, image('0'))
	logs := startController(t)

	// A quarantined node and a forged uncordon.
	f.cordon(admin, true)
	f.annotate(admin, v1alpha1.DesiredDrainAnnotation, "uncordon-forged")
	if n := f.acknowledged(admin, "uncordon-forged"); !n.Spec.Unschedulable {
		t.Errorf("the daemon's uncordon-forged uncordoned node %s, which a person had cordoned", admin)
	}

	// An update of the quarantined node: drained, and left cordoned.
	f.annotate(admin, v1alpha1.DesiredImageAnnotation, image('1'), v1alpha1.DesiredConfigAnnotation, "rendered-quarantine-1")
	key := v1alpha1.UpdateKey(image('1'), "rendered-quarantine-1")
	f.annotate(admin, v1alpha1.DesiredDrainAnnotation, "drain-"+key)
	if n := f.acknowledged(admin, "drain-"+key); n.Annotations[v1alpha1.CordonedForAnnotation] != "" {
		t.Errorf("Strata claimed the cordon of node %s a person set: cordonedFor %q", admin, n.Annotations[v1alpha1.CordonedForAnnotation])
	}
	f.annotate(admin, v1alpha1.DesiredDrainAnnotation, "uncordon-"+key)
	if n := f.acknowledged(admin, "uncordon-"+key); !n.Spec.Unschedulable {
		t.Errorf("node %s, cordoned by a person before its update, was uncordoned after it", admin)
	}
	logs.Wait(t, timeout, "Leaving the node cordoned: Strata did not cordon it for this update", map[string]string{"name": admin})

	// Strata's own cordon, lifted for the update it was made for.
	own := f.addNode("quarantine-own", other, image('0'))
	f.annotate(own, v1alpha1.DesiredDrainAnnotation, "drain-k1")
	if n := f.acknowledged(own, "drain-k1"); !n.Spec.Unschedulable || n.Annotations[v1alpha1.CordonedForAnnotation] != "k1" {
		t.Fatalf("node %s after drain-k1: unschedulable %v, cordonedFor %q", own, n.Spec.Unschedulable, n.Annotations[v1alpha1.CordonedForAnnotation])
	}
	f.annotate(own, v1alpha1.DesiredDrainAnnotation, "uncordon-other")
	if n := f.acknowledged(own, "uncordon-other"); !n.Spec.Unschedulable {
		t.Errorf("node %s uncordoned for an update it was not cordoned for and that is not its current one", own)
	}
	// The current update (a newer one that replaced the drained one)
	// uncordons it.
	f.annotate(own, v1alpha1.DesiredImageAnnotation, image('2'), v1alpha1.DesiredConfigAnnotation, "rendered-quarantine-2")
	current := v1alpha1.UpdateKey(image('2'), "rendered-quarantine-2")
	f.annotate(own, v1alpha1.DesiredDrainAnnotation, "uncordon-"+current)
	if n := f.acknowledged(own, "uncordon-"+current); n.Spec.Unschedulable || n.Annotations[v1alpha1.CordonedForAnnotation] != "" {
		t.Errorf("node %s after uncordon of its current update: unschedulable %v, cordonedFor %q", own, n.Spec.Unschedulable, n.Annotations[v1alpha1.CordonedForAnnotation])
	}

	// A person's uncordon of Strata's cordon, then the person's own cordon.
	f.annotate(own, v1alpha1.DesiredDrainAnnotation, "drain-k3")
	f.acknowledged(own, "drain-k3")
	f.cordon(own, false)
	eventually(t, "the cordon forgotten", func() error {
		if r := f.node(own).Annotations[v1alpha1.CordonedForAnnotation]; r != "" {
			return fmt.Errorf("cordonedFor %q", r)
		}
		return nil
	})
	f.cordon(own, true)
	f.annotate(own, v1alpha1.DesiredDrainAnnotation, "uncordon-k3")
	if n := f.acknowledged(own, "uncordon-k3"); !n.Spec.Unschedulable {
		t.Errorf("node %s, cordoned by a person after Strata's cordon was lifted by hand, was uncordoned", own)
	}
}
