package rollout

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/configserver"
	"github.com/strata-dev/strata/test/testenv"
)

// nodeSecrets is config/nodes' namespace, where the controller copies
// the node pull secrets.
const nodeSecrets = "strata-nodes"

// viaConfigServer is Inputs as a real node's daemon has them: a config
// server's node endpoints (configserver.NodeServer, with the test's
// rights), read with a token of the daemon's ServiceAccount for the
// config server, bound to a pod on node.
func viaConfigServer(t *testing.T, node string) Inputs {
	t.Helper()
	srv := httptest.NewTLSServer(&configserver.NodeServer{
		Client:        env.Client,
		Nodes:         env.Client,
		Reviews:       env.Client,
		NodeNamespace: nodeSecrets,
		DaemonUser:    configserver.DaemonUser(ns, daemonAccount),
		Log:           testr.New(t),
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	caFile, tokenFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "token")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	writeFile(t, tokenFile, daemonToken(t, ns, node, configserver.NodeTokenAudience))
	return &configserver.NodeClient{URL: srv.URL, CAFile: caFile, TokenFile: tokenFile}
}

// TestDaemonReadsOnlyItsOwnInputs: with the RBAC config/ installs, a
// daemon's token reads no Secret (neither a node pull secret in
// strata-nodes, nor the push secret or a build context in
// strata-system, nor a list) and no MachineConfig: root on one node
// would read every pool's with them. It reads its own pull secret and
// rendered config through the config server, which refuses another
// node's. It writes Events about its Node in namespace default only.
func TestDaemonReadsOnlyItsOwnInputs(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	c := daemonClient(t, r.name)
	// RBAC loads in the background: wait until the daemon can read its
	// Node, which it always could.
	testenv.Eventually(t, 30*time.Second, "the daemon's RBAC in force", func() error {
		return c.Get(ctx, types.NamespacedName{Name: r.name}, &corev1.Node{})
	})

	auth := []byte(`{"auths":{"127.0.0.1:5000":{"auth":"cHVsbDpwdWxs"}}}`)
	secret := func(namespace, name string) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: auth},
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
		return s
	}
	push := secret(ns, "access-push-"+r.name)
	buildContext := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "access-build-" + r.name, Labels: map[string]string{v1alpha1.MachineOSConfigLabel: "other-pool"}},
		Data:       map[string][]byte{"context.tar.gz": []byte("another pool's /etc")},
	}
	if err := env.Client.Create(ctx, buildContext); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), buildContext) })
	pull := secret(nodeSecrets, "access-pull-"+r.name)
	otherPull := secret(nodeSecrets, "access-other-pull-"+r.name)
	config := r.renderedConfig("access")

	for _, s := range []*corev1.Secret{push, buildContext, pull} {
		err := c.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("the daemon's get of Secret %s/%s: %v, want Forbidden", s.Namespace, s.Name, err)
		}
	}
	if err := c.List(ctx, &corev1.SecretList{}, client.InNamespace(nodeSecrets)); !apierrors.IsForbidden(err) {
		t.Errorf("the daemon's list of Secrets in %s: %v, want Forbidden", nodeSecrets, err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: config}, &v1alpha1.MachineConfig{}); !apierrors.IsForbidden(err) {
		t.Errorf("the daemon's get of MachineConfig %s: %v, want Forbidden", config, err)
	}

	event := func(namespace string, regarding corev1.ObjectReference) *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{GenerateName: r.name + "-", Namespace: namespace},
			EventTime:           metav1.NewMicroTime(time.Now()),
			ReportingController: "strata-daemon",
			ReportingInstance:   "strata-daemon-" + r.name,
			Action:              "Update",
			Reason:              "Staged",
			Type:                corev1.EventTypeNormal,
			Regarding:           regarding,
		}
	}
	// An Event in strata-system, say about the controller's pod, would
	// tell its readers a story the daemon made up.
	controllerPod := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "strata-controller-0"}
	if err := c.Create(ctx, event(ns, controllerPod)); !apierrors.IsForbidden(err) {
		t.Errorf("the daemon's Event in %s: %v, want Forbidden", ns, err)
	}
	ownNode := corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: r.name}
	if err := c.Create(ctx, event(metav1.NamespaceDefault, ownNode)); err != nil {
		t.Errorf("the daemon's Event about its Node in %s: %v", metav1.NamespaceDefault, err)
	}

	// The daemon itself, with these rights, writes the pull secret the
	// node names for bootc, read through the config server, which
	// serves it nothing its Node does not name.
	r.client = c
	r.inputs = viaConfigServer(t, r.name)
	r.restart()
	r.d.Namespace = nodeSecrets
	r.annotate(map[string]*string{v1alpha1.ImagePullSecretAnnotation: str(pull.Name)})
	r.sync()
	if b, err := os.ReadFile(filepath.Join(r.dir, "run/ostree/auth.json")); err != nil || string(b) != string(auth) {
		t.Errorf("auth.json %q, %v; want the pull secret", b, err)
	}
	if _, err := r.d.renderedConfig(ctx, config); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("the daemon's read of config %s its Node does not name yet: %v, want 403", config, err)
	}
	r.desire(original, config)
	if _, err := r.d.renderedConfig(ctx, config); err != nil {
		t.Errorf("the daemon's read of its desired config %s: %v", config, err)
	}
	if _, err := r.inputs.PullSecret(ctx, otherPull.Name); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("the daemon's read of pull secret %s its Node does not name: %v, want 403", otherPull.Name, err)
	}
	other := newRig(t)
	otherConfig := other.renderedConfig("access-other")
	other.desire(original, otherConfig)
	if _, err := r.inputs.MachineConfig(ctx, otherConfig); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("the daemon's read of another node's config %s: %v, want 403", otherConfig, err)
	}
}
