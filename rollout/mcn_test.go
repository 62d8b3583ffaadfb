package rollout

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/testenv"
)

// mcnWrites records every status the daemon writes to its
// MachineConfigNode, in order.
type mcnWrites struct {
	mu       sync.Mutex
	statuses []v1alpha1.MachineConfigNodeStatus
}

// record makes r's daemons write through a client that records the
// MachineConfigNode statuses they write.
func (w *mcnWrites) record(r *rig) {
	r.client = interceptor.NewClient(r.client.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if m, ok := obj.(*v1alpha1.MachineConfigNode); ok && err == nil {
				w.mu.Lock()
				w.statuses = append(w.statuses, *m.Status.DeepCopy())
				w.mu.Unlock()
			}
			return err
		},
	})
	r.restart()
}

// sequence is the statuses condition t went through, one entry per
// change, with the time of each.
func (w *mcnWrites) sequence(t string) (statuses []metav1.ConditionStatus, times []time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, st := range w.statuses {
		c := meta.FindStatusCondition(st.Conditions, t)
		if c == nil {
			continue
		}
		if n := len(statuses); n > 0 && statuses[n-1] == c.Status {
			if !c.LastTransitionTime.Time.Equal(times[n-1]) {
				statuses = append(statuses, "lastTransitionTime changed without a status change")
				times = append(times, c.LastTransitionTime.Time)
			}
			continue
		}
		statuses = append(statuses, c.Status)
		times = append(times, c.LastTransitionTime.Time)
	}
	return statuses, times
}

func (r *rig) mcn() *v1alpha1.MachineConfigNode {
	r.t.Helper()
	m := &v1alpha1.MachineConfigNode{}
	if err := env.Client.Get(r.ctx, client.ObjectKey{Name: r.name}, m); err != nil {
		r.t.Fatalf("the node's MachineConfigNode: %v", err)
	}
	return m
}

func (r *rig) cordon(unschedulable bool) {
	r.t.Helper()
	n := r.node()
	n.Spec.Unschedulable = unschedulable
	if err := env.Client.Update(r.ctx, n); err != nil {
		r.t.Fatal(err)
	}
}

// TestMachineConfigNodeFollowsAnUpdateOnTheSimulator drives one image
// update with a reboot through the bootc simulator, playing the rollout
// controller's cordon, drain and uncordon, with the clock moved on
// between steps: the MachineConfigNode's conditions go through
// OpenShift's phases in order, each lastTransitionTime is the time of
// its step and changes only with its status, so the time each phase took
// can be read from it afterwards.
func TestMachineConfigNodeFollowsAnUpdateOnTheSimulator(t *testing.T) {
	r, _, two := newSimRig(t)
	var w mcnWrites
	w.record(r)
	config := r.varConfig("one")
	r.annotate(map[string]*string{v1alpha1.NodePoolAnnotation: str("worker")})
	r.desire(two, config)

	var at []time.Time
	step := func() {
		r.clock = r.clock.Add(10 * time.Second)
		at = append(at, r.clock.Truncate(time.Second))
	}
	step() // 0: reported Working, staged, decided, asked for the drain
	r.sync()
	step() // 1: the controller cordons
	r.cordon(true)
	r.sync()
	step() // 2: and drains; the files, the reboot
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	step() // 3: booted, verified, Done
	r.reboot()
	r.sync()
	step() // 4: the controller uncordons
	r.applyDrain()
	r.cordon(false)
	r.sync()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: two})

	const (
		F = metav1.ConditionFalse
		U = metav1.ConditionUnknown
		T = metav1.ConditionTrue
	)
	for _, c := range []struct {
		typ   string
		want  []metav1.ConditionStatus
		steps []int
	}{
		// The daemon reads the desired config before it takes the update
		// on: the first write says not yet.
		{v1alpha1.MCNUpdatePrepared, []metav1.ConditionStatus{F, U, T}, []int{0, 0, 0}},
		{v1alpha1.MCNImagePulledFromRegistry, []metav1.ConditionStatus{F, U, T}, []int{0, 0, 0}},
		{v1alpha1.MCNCordoned, []metav1.ConditionStatus{F, U, T}, []int{0, 0, 1}},
		{v1alpha1.MCNDrained, []metav1.ConditionStatus{F, U, T}, []int{0, 0, 2}},
		{v1alpha1.MCNUpdateExecuted, []metav1.ConditionStatus{F, U, T}, []int{0, 0, 2}},
		{v1alpha1.MCNAppliedFiles, []metav1.ConditionStatus{F, U, T}, []int{0, 2, 2}},
		{v1alpha1.MCNAppliedOSImage, []metav1.ConditionStatus{F, U, T}, []int{0, 2, 2}},
		{v1alpha1.MCNRebootedNode, []metav1.ConditionStatus{F, U, T}, []int{0, 2, 3}},
		{v1alpha1.MCNUpdateComplete, []metav1.ConditionStatus{F, U, T}, []int{0, 3, 3}},
		{v1alpha1.MCNUpdated, []metav1.ConditionStatus{F, T}, []int{0, 3}},
		{v1alpha1.MCNNodeDegraded, []metav1.ConditionStatus{F}, []int{0}},
	} {
		got, times := w.sequence(c.typ)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s went through %v, want %v", c.typ, got, c.want)
			continue
		}
		for i, s := range c.steps {
			if !times[i].Equal(at[s]) {
				t.Errorf("%s became %s at %s, want %s (step %d)", c.typ, got[i], times[i].Format(time.TimeOnly), at[s].Format(time.TimeOnly), s)
			}
		}
	}
	// Within a step, the order of the writes: the image is pulled before
	// the update is prepared, drained before its files are written.
	order := func(first, then string) {
		i := slices.IndexFunc(w.statuses, func(st v1alpha1.MachineConfigNodeStatus) bool {
			return meta.IsStatusConditionTrue(st.Conditions, first)
		})
		j := slices.IndexFunc(w.statuses, func(st v1alpha1.MachineConfigNodeStatus) bool { return meta.IsStatusConditionTrue(st.Conditions, then) })
		if i < 0 || j < 0 || i >= j {
			t.Errorf("%s became True at write %d, %s at write %d: want %s first", first, i, then, j, first)
		}
	}
	t.Logf("%d status writes for one update", len(w.statuses))
	order(v1alpha1.MCNImagePulledFromRegistry, v1alpha1.MCNUpdatePrepared)
	order(v1alpha1.MCNDrained, v1alpha1.MCNAppliedFiles)
	order(v1alpha1.MCNRebootedNode, v1alpha1.MCNUpdateComplete)

	m := r.mcn()
	n := r.node()
	if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Node" || m.OwnerReferences[0].UID != n.UID {
		t.Errorf("owner references %+v, want the Node %s (uid %s)", m.OwnerReferences, n.Name, n.UID)
	}
	wantSpec := v1alpha1.MachineConfigNodeSpec{
		Node: v1alpha1.LocalObjectReference{Name: r.name}, Pool: v1alpha1.MachineConfigNodePool{Name: "worker"},
		ConfigVersion: v1alpha1.MachineConfigNodeSpecConfigVersion{Desired: config},
		ConfigImage:   v1alpha1.MachineConfigNodeSpecConfigImage{DesiredImage: two},
	}
	if m.Spec != wantSpec {
		t.Errorf("spec %+v, want %+v", m.Spec, wantSpec)
	}
	st := m.Status
	if st.ConfigImage.CurrentImage != two || st.ConfigImage.DesiredImage != two || st.ConfigVersion.Current != config ||
		st.ConfigVersion.Desired != config || st.State != v1alpha1.NodeStateDone || st.ObservedGeneration != m.Generation {
		t.Errorf("status %+v (generation %d), want image %s and config %s current and desired, Done, generation observed", st, m.Generation, two, config)
	}
}

// TestMachineConfigNodeWriteFailureDoesNotHoldTheUpdate: with every
// write of the MachineConfigNode refused, the update runs to Done as
// before; once writes pass again, the next sync writes it.
func TestMachineConfigNodeWriteFailureDoesNotHoldTheUpdate(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	refuse := true
	refused := 0
	fail := func(obj client.Object) error {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := obj.(*v1alpha1.MachineConfigNode); ok && refuse {
			refused++
			return apierrors.NewServiceUnavailable("test: the API server refuses MachineConfigNodes")
		}
		return nil
	}
	r.client = interceptor.NewClient(r.client.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := fail(obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	r.restart()
	config := r.renderedConfig("one")
	r.desire(newImage, config)
	r.converge()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: newImage})
	mu.Lock()
	tried := refused
	mu.Unlock()
	if tried == 0 {
		t.Fatal("no MachineConfigNode write was tried")
	}
	if err := env.Client.Get(r.ctx, client.ObjectKey{Name: r.name}, &v1alpha1.MachineConfigNode{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the MachineConfigNode: %v, want none while writes fail", err)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	r.sync()
	if m := r.mcn(); !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.MCNUpdated) || m.Status.ConfigImage.CurrentImage != newImage {
		t.Errorf("after writes pass again: %+v, want Updated with image %s", m.Status, newImage)
	}
}

// TestMachineConfigNodePolicy: with the RBAC and admission policy
// config/ installs, a daemon's token bound to its node writes that
// node's MachineConfigNode through a whole update, and no other node's,
// whatever the write.
func TestMachineConfigNodePolicy(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	other := newRig(t)
	c := daemonClient(t, r.name)
	mcnOf := func(node string, owner *corev1.Node) *v1alpha1.MachineConfigNode {
		m := &v1alpha1.MachineConfigNode{
			ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec:       v1alpha1.MachineConfigNodeSpec{Node: v1alpha1.LocalObjectReference{Name: node}},
		}
		if owner != nil {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner.Name, UID: owner.UID}}
		}
		return m
	}
	// RBAC and the policy load in the background: wait until the policy
	// refuses another node's MachineConfigNode.
	testenv.Eventually(t, 30*time.Second, "the MachineConfigNode policy in force", func() error {
		err := c.Create(ctx, mcnOf(other.name, nil))
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "strata-daemon-machineconfignode") {
			return nil
		}
		if err == nil {
			_ = env.Client.Delete(ctx, mcnOf(other.name, nil))
			return errors.New("another node's MachineConfigNode was let through")
		}
		return err
	})
	refused := func(what string, err error, want ...string) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
			return
		}
		for _, w := range append([]string{"strata-daemon-machineconfignode"}, want...) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: refusal %q does not say %q", what, err, w)
			}
		}
	}
	refused("creating another node's MachineConfigNode", c.Create(ctx, mcnOf(other.name, nil)),
		"strata-daemon of node "+r.name+" may not write MachineConfigNode "+other.name)

	// The daemon, with these rights, through a whole update.
	r.client = c
	r.inputs = viaConfigServer(t, r.name)
	r.restart()
	config := r.renderedConfig("one")
	r.desire(newImage, config)
	r.converge()
	own := r.mcn()
	if !meta.IsStatusConditionTrue(own.Status.Conditions, v1alpha1.MCNUpdated) || own.Status.ConfigImage.CurrentImage != newImage {
		t.Fatalf("the daemon's own MachineConfigNode: %+v, want Updated with image %s", own.Status, newImage)
	}

	// Another node's, made by its own daemon (here, an admin): neither its
	// spec nor its status.
	theirs := mcnOf(other.name, other.node())
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Spec.Pool.Name = "forged"
	refused("updating another node's MachineConfigNode", c.Update(ctx, theirs), "may not write MachineConfigNode "+other.name)
	theirs.Status.State = v1alpha1.NodeStateDegraded
	refused("updating another node's MachineConfigNode status", c.Status().Update(ctx, theirs), "may not write MachineConfigNode "+other.name)

	// Its own, hung on another object or held by a finalizer.
	own.OwnerReferences = append(own.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: other.name, UID: other.node().UID})
	refused("its own MachineConfigNode owned by another Node", c.Update(ctx, own), "an owner other than its Node "+r.name)
	own = r.mcn()
	own.Finalizers = []string{"example.com/keep"}
	refused("a finalizer on its own MachineConfigNode", c.Update(ctx, own), "may not put finalizers")

	unbound := daemonClient(t, "")
	refused("a token bound to no pod", unbound.Status().Update(ctx, r.mcn()), "these credentials name no node")

	// An admin's token is not the daemon's: the policy leaves it alone.
	if err := env.Client.Delete(ctx, mcnOf(other.name, nil)); err != nil {
		t.Fatal(err)
	}
}

// TestNodeConditions: the MachineConfigNode's conditions for each step
// of the updates the daemon runs, from its state alone.
func TestNodeConditions(t *testing.T) {
	const config = "rendered-worker-2"
	key := UpdateKey(newImage, config)
	reboot := &DisruptionRecord{Key: key, Kind: "Reboot", Drain: true, Reason: "a new image"}
	live := &DisruptionRecord{Key: key, Kind: "Live", Reason: "files only"}
	base := func(f func(v *nodeView)) *nodeView {
		v := &nodeView{Node: "n", DesiredImage: newImage, DesiredConfig: config, Image: newImage, Config: config,
			CurrentImage: original, CurrentConfig: "rendered-worker-1", State: v1alpha1.NodeStateDone, Booted: bootc.DigestOf(original)}
		f(v)
		return v
	}
	// Statuses in the order Updated, NodeDegraded, UpdatePrepared,
	// ImagePulledFromRegistry, Cordoned, Drained, AppliedFiles,
	// AppliedOSImage, UpdateExecuted, RebootedNode, UpdateComplete.
	for _, c := range []struct {
		name string
		v    *nodeView
		want string
	}{
		{"no desired image", &nodeView{Node: "n", State: v1alpha1.NodeStateDone, Booted: bootc.DigestOf(original)}, "FFFFFFFFFFF"},
		{"not taken on yet", base(func(*nodeView) {}), "FFFFFFFFFFF"},
		{"staging", base(func(v *nodeView) { v.State = v1alpha1.NodeStateWorking }), "FFUUFFFFFFF"},
		{"deciding", base(func(v *nodeView) { v.State, v.Staged = v1alpha1.NodeStateWorking, bootc.DigestOf(newImage) }), "FFUTFFFFFFF"},
		{"drain asked", base(func(v *nodeView) {
			v.State, v.Staged, v.Decision, v.DrainRequested = v1alpha1.NodeStateWorking, bootc.DigestOf(newImage), reboot, true
		}), "FFTTUUFFUFF"},
		{"cordoned", base(func(v *nodeView) {
			v.State, v.Staged, v.Decision, v.DrainRequested, v.Cordoned = v1alpha1.NodeStateWorking, bootc.DigestOf(newImage), reboot, true, true
		}), "FFTTTUFFUFF"},
		{"drained", base(func(v *nodeView) {
			v.State, v.Staged, v.Decision, v.DrainRequested, v.DrainApplied = v1alpha1.NodeStateWorking, bootc.DigestOf(newImage), reboot, true, true
		}), "FFTTTTUUUFF"},
		{"rebooting", base(func(v *nodeView) {
			v.State, v.Staged, v.Decision, v.Phase, v.RebootAsked = v1alpha1.NodeStateRebooting, bootc.DigestOf(newImage), reboot, PhaseRebooting, true
		}), "FFTTTTTTTUF"},
		{"verifying", base(func(v *nodeView) {
			v.State, v.Booted, v.Decision, v.Phase, v.RebootAsked = v1alpha1.NodeStateWorking, bootc.DigestOf(newImage), reboot, PhaseVerifying, true
		}), "FFTTTTTTTTU"},
		{"rolling back", base(func(v *nodeView) {
			v.State, v.Booted, v.Decision, v.Phase, v.RebootAsked = v1alpha1.NodeStateRebooting, bootc.DigestOf(newImage), reboot, PhaseRollingBack, true
		}), "FFTTTTTTTTF"},
		{"rolled back", base(func(v *nodeView) {
			v.State, v.Decision, v.Phase, v.RebootAsked = v1alpha1.NodeStateDegraded, reboot, PhaseFailed, true
		}), "FTTTTTTTTTF"},
		{"rejected", base(func(v *nodeView) { v.State, v.Phase = v1alpha1.NodeStateDegraded, PhaseFailed }), "FTFFFFFFFFF"},
		{"done", base(func(v *nodeView) {
			v.Booted, v.Decision, v.Completed, v.CurrentImage, v.CurrentConfig = bootc.DigestOf(newImage), reboot, true, newImage, config
		}), "TFTTTTTTTTT"},
		{"live, done", base(func(v *nodeView) {
			v.Staged, v.Decision, v.Completed, v.CurrentImage, v.CurrentConfig = bootc.DigestOf(newImage), live, true, newImage, config
		}), "TFTTFFTTTFT"},
		{"config change, applying", base(func(v *nodeView) { v.Image, v.DesiredImage = original, original }), "FFUFFFUFUFU"},
		{"config change, done", base(func(v *nodeView) {
			v.Image, v.DesiredImage, v.Completed, v.CurrentImage, v.CurrentConfig = original, original, true, original, config
		}), "TFTFFFTFTFT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conds := nodeConditions(c.v)
			var got strings.Builder
			for _, typ := range []string{
				v1alpha1.MCNUpdated, v1alpha1.MCNNodeDegraded, v1alpha1.MCNUpdatePrepared, v1alpha1.MCNImagePulledFromRegistry,
				v1alpha1.MCNCordoned, v1alpha1.MCNDrained, v1alpha1.MCNAppliedFiles, v1alpha1.MCNAppliedOSImage,
				v1alpha1.MCNUpdateExecuted, v1alpha1.MCNRebootedNode, v1alpha1.MCNUpdateComplete,
			} {
				cond := meta.FindStatusCondition(conds, typ)
				if cond == nil {
					t.Fatalf("no %s condition", typ)
				}
				got.WriteString(string(cond.Status)[:1])
			}
			if len(conds) != 11 {
				t.Errorf("%d conditions, want 11", len(conds))
			}
			if got.String() != c.want {
				t.Errorf("conditions %s, want %s (%+v)", got.String(), c.want, conds)
			}
		})
	}
}
