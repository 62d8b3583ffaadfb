package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testenv"
)

// These tests run the daemon as the strata-daemon ServiceAccount with the
// RBAC and the admission policy that config/ installs, its token bound to
// a pod on its node, as the kubelet gives the DaemonSet's pod one: every
// write of a whole update passes, and every write outside the daemon's
// own Node's Strata annotations is refused, saying why.

const daemonAccount = "strata-daemon"

var installAccess = sync.OnceValue(func() error {
	return env.Install(context.Background(), "config/nodes", "config/rbac/daemon", "config/policy")
})

// daemonClient returns a client with a token of the daemon's
// ServiceAccount; bound to a pod on nodeName unless nodeName is empty.
func daemonClient(t *testing.T, nodeName string) client.Client {
	t.Helper()
	return daemonClientIn(t, ns, nodeName)
}

// daemonClientIn is daemonClient for the ServiceAccount strata-daemon of
// namespace.
func daemonClientIn(t *testing.T, namespace, nodeName string) client.Client {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = daemonToken(t, namespace, nodeName)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// daemonToken is a token of the ServiceAccount strata-daemon of
// namespace for audiences (none: the API server's), bound to a pod on
// nodeName unless nodeName is empty.
func daemonToken(t *testing.T, namespace, nodeName string, audiences ...string) string {
	t.Helper()
	if err := installAccess(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}
	if nodeName != "" {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "strata-daemon-", Namespace: namespace},
			Spec: corev1.PodSpec{
				NodeName:           nodeName,
				ServiceAccountName: daemonAccount,
				Containers:         []corev1.Container{{Name: "daemon", Image: "strata/strata-daemon"}},
			},
		}
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod) })
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tok, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, daemonAccount, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// mergePatch merge-patches Node name with patch as c.
func mergePatch(ctx context.Context, c client.Client, name string, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, body))
}

func annotations(values map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": values}}
}

// expectRefused checks that err is the policy's refusal and that its
// message says each of want.
func expectRefused(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
		return
	}
	for _, w := range append([]string{"strata-daemon-node"}, want...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: refusal %q does not say %q", what, err, w)
		}
	}
}

// waitForPolicy waits until the API server enforces the policy (it loads
// policies and bindings in the background): until the policy refuses a
// label change by the daemon.
func waitForPolicy(t *testing.T, c client.Client, node string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the node policy in force", func() error {
		err := mergePatch(context.Background(), c, node, map[string]any{"metadata": map[string]any{"labels": map[string]any{"strata-policy-probe": "x"}}})
		// RBAC, loaded in the background too, refuses at first as well.
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "strata-daemon-node") {
			return nil
		}
		if err == nil {
			// Let through before the policy loaded: undo.
			_ = mergePatch(context.Background(), env.Client, node, map[string]any{"metadata": map[string]any{"labels": map[string]any{"strata-policy-probe": nil}}})
			return errors.New("a label change was let through")
		}
		return err
	})
}

// TestUpdateWithinNodePolicy: a whole update, and one that fails its
// health check and is rolled back, with only the daemon's own rights.
func TestUpdateWithinNodePolicy(t *testing.T) {
	r := newRig(t)
	r.client = daemonClient(t, r.name)
	r.inputs = viaConfigServer(t, r.name)
	waitForPolicy(t, r.client, r.name)
	r.restart()

	config := r.renderedConfig("one")
	r.desire(newImage, config)
	r.converge()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: newImage, v1alpha1.CurrentConfigAnnotation: config})

	r.host.failing[third[len(repo)+1:]] = "unit strata-test.service failed"
	r.desire(third, config)
	r.sync()
	r.applyDrain()
	if !r.sync().Rebooting {
		t.Fatal("no reboot")
	}
	r.reboot()
	r.sync()
	r.clock = r.clock.Add(2 * time.Minute)
	r.converge()
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDegraded, v1alpha1.CurrentImageAnnotation: newImage})
	if reason := r.ann(v1alpha1.ReasonAnnotation); !strings.Contains(reason, "strata-test.service") {
		t.Errorf("reason %q", reason)
	}
}

// TestNodePolicyRefuses: what a daemon's token may not do, and the one
// thing it may.
func TestNodePolicyRefuses(t *testing.T) {
	ctx := context.Background()
	own := newRig(t).name
	other := newRig(t).name
	c := daemonClient(t, own)
	waitForPolicy(t, c, own)
	// An annotation the daemon owns.
	strata := v1alpha1.ReasonAnnotation

	expectRefused(t, "another Node's Strata annotation",
		mergePatch(ctx, c, other, annotations(map[string]any{strata: "x"})),
		"strata-daemon of node "+own+" may not change Node "+other, "only its own Node")
	expectRefused(t, "a label of its own Node",
		mergePatch(ctx, c, own, map[string]any{"metadata": map[string]any{"labels": map[string]any{"node-role.kubernetes.io/worker": nil, "evil": "yes"}}}),
		"may not change the labels of Node "+own, "evil", "it changes only its own annotations "+v1alpha1.Prefix+"{currentConfig, currentImage, originalImage, state, reason, desiredDrain, disruption, bootedImage, stagedImage, stagedLive}")
	expectRefused(t, "another annotation of its own Node",
		mergePatch(ctx, c, own, annotations(map[string]any{"example.com/owner": "daemon"})),
		"may not change the annotations example.com/owner of Node "+own)
	expectRefused(t, "a Strata and another annotation at once",
		mergePatch(ctx, c, own, annotations(map[string]any{strata: "x", "example.com/owner": "daemon"})),
		"example.com/owner")
	expectRefused(t, "cordoning its own Node",
		mergePatch(ctx, c, own, map[string]any{"spec": map[string]any{"unschedulable": true}}),
		"may not change the spec of Node "+own)
	expectRefused(t, "tainting its own Node",
		mergePatch(ctx, c, own, map[string]any{"spec": map[string]any{"taints": []any{map[string]any{"key": "evil", "effect": "NoSchedule"}}}}),
		"may not change the spec of Node "+own)
	expectRefused(t, "a finalizer on its own Node",
		mergePatch(ctx, c, own, map[string]any{"metadata": map[string]any{"finalizers": []string{"example.com/keep"}}}),
		"may not change the finalizers")

	unbound := daemonClient(t, "")
	expectRefused(t, "a token bound to no pod",
		mergePatch(ctx, unbound, own, annotations(map[string]any{strata: "x"})),
		"these credentials name no node")

	// Its own Node's Strata annotations: set, changed, removed.
	for _, v := range []any{"one", "two", nil} {
		if err := mergePatch(ctx, c, own, annotations(map[string]any{strata: v})); err != nil {
			t.Errorf("set %s to %v on its own Node: %v", strata, v, err)
		}
	}
	n := &corev1.Node{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: own}, n); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Annotations[strata]; ok || n.Labels["evil"] != "" || n.Spec.Unschedulable || len(n.Finalizers) != 0 {
		t.Errorf("node %s changed by refused writes or kept the annotation: %+v", own, n.ObjectMeta)
	}
}

// TestNodePolicyRefusesControllerKeys: of Strata's annotations, a daemon
// may write only its own; the controller's (which would let it forge a
// drain's acknowledgement, the record of a cordon, or its own desired
// image) and unknown ones are refused, set or removed.
func TestNodePolicyRefusesControllerKeys(t *testing.T) {
	ctx := context.Background()
	own := newRig(t).name
	c := daemonClient(t, own)
	waitForPolicy(t, c, own)
	for _, key := range []string{
		v1alpha1.DesiredConfigAnnotation, v1alpha1.DesiredImageAnnotation, v1alpha1.ImagePullSecretAnnotation,
		v1alpha1.HealthCheckTimeoutAnnotation, v1alpha1.NodePoolAnnotation, v1alpha1.LastAppliedDrainAnnotation,
		v1alpha1.DrainStartedAnnotation, v1alpha1.CordonedForAnnotation, v1alpha1.DesiredStageAnnotation, v1alpha1.Prefix + "policy-test",
	} {
		expectRefused(t, "setting "+key,
			mergePatch(ctx, c, own, annotations(map[string]any{key: "uncordon-forged"})),
			"may not change the annotations "+key+" of Node "+own, "its own annotations")
		if err := mergePatch(ctx, env.Client, own, annotations(map[string]any{key: "set-by-the-controller"})); err != nil {
			t.Fatal(err)
		}
		expectRefused(t, "removing "+key,
			mergePatch(ctx, c, own, annotations(map[string]any{key: nil})),
			"may not change the annotations "+key+" of Node "+own)
	}
	for _, key := range []string{
		v1alpha1.CurrentConfigAnnotation, v1alpha1.CurrentImageAnnotation, v1alpha1.OriginalImageAnnotation,
		v1alpha1.StateAnnotation, v1alpha1.ReasonAnnotation, v1alpha1.DesiredDrainAnnotation, v1alpha1.StagedImageAnnotation,
	} {
		if err := mergePatch(ctx, c, own, annotations(map[string]any{key: "x"})); err != nil {
			t.Errorf("the daemon's own %s: %v", key, err)
		}
	}
}

// TestNodePolicyConfinesARenamedDaemon: the policy confines the
// ServiceAccount strata-daemon of whatever namespace it was installed
// in, not only strata-system's.
func TestNodePolicyConfinesARenamedDaemon(t *testing.T) {
	ctx := context.Background()
	if err := installAccess(); err != nil {
		t.Fatal(err)
	}
	const renamed = "renamed-system"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: renamed}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: renamed, Name: daemonAccount}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "strata-daemon-" + renamed},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: daemonAccount},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: renamed, Name: daemonAccount}},
		},
	} {
		if err := env.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	own := newRig(t).name
	c := daemonClientIn(t, renamed, own)
	waitForPolicy(t, c, own)
	expectRefused(t, "the renamed daemon cordoning its own Node",
		mergePatch(ctx, c, own, map[string]any{"spec": map[string]any{"unschedulable": true}}),
		"may not change the spec of Node "+own)
}
