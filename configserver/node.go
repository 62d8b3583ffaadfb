package configserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// The paths of a running node's inputs: its daemon reads them here, not
// from the API server, because every daemon shares one ServiceAccount and
// RBAC cannot tell one node's reads from another's (nor does admission
// see reads): with get on MachineConfigs and on strata-nodes' Secrets,
// root on one node read every pool's configuration and pull secret by
// guessing names. Here the node is the one the API server bound the
// caller's token to.
const (
	// NodePathPrefix is where the node endpoints are.
	NodePathPrefix = "/node/"
	// NodeMachineConfigPath + <name> is a rendered MachineConfig (JSON,
	// name and spec).
	NodeMachineConfigPath = NodePathPrefix + "machineconfigs/"
	// NodePullSecretPath + <name> is a node pull secret's
	// .dockerconfigjson.
	NodePullSecretPath = NodePathPrefix + "pullsecrets/"
	// NodeTokenAudience is the audience of the tokens the daemon sends:
	// a token for the config server is no token for the API server, and
	// the API server's are not taken here.
	NodeTokenAudience = "strata-config-server"
	// NodeNameExtra is the user extra in which the API server names the
	// Node of the Pod a token is bound to.
	NodeNameExtra = "authentication.kubernetes.io/node-name"
)

// The node endpoints' rights: a TokenReview per request, and the
// caller's Node by name (uncached: the server holds no view of nodes).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// NodeServer serves a running node's daemon its own inputs: the rendered
// MachineConfigs of its pool and the pull secret its Node names, to a
// token of the daemon's ServiceAccount bound to a Pod on that Node.
//
// A rendered config is served when the Node's desiredConfig or
// desiredStageConfig annotation names it, or when its pool label is
// the Node's pool annotation (the current config an update compares
// with, a rollback's): all three annotations are the controller's, which
// the daemon may not write (config/policy). A pull secret is served only
// when the Node's imagePullSecret annotation names it. Anything else is
// 403, whether or not it exists, so names cannot be probed.
type NodeServer struct {
	// Client reads rendered MachineConfigs and the node pull secrets (a
	// cache).
	Client client.Reader
	// Nodes gets the caller's Node, uncached.
	Nodes client.Reader
	// Reviews creates TokenReviews.
	Reviews client.Writer
	// NodeNamespace holds the node pull secrets (strata-nodes).
	NodeNamespace string
	// DaemonUser is the daemon's ServiceAccount's user name
	// (system:serviceaccount:strata-system:strata-daemon); no other
	// identity is served.
	DaemonUser string
	// Log receives one line per request.
	Log logr.Logger
}

// DaemonUser is the user name of ServiceAccount name in namespace.
func DaemonUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// ServeHTTP answers GET NodeMachineConfigPath<name> and
// NodePullSecretPath<name>.
func (s *NodeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a := s.serve(w, r)
	nodeRequests.WithLabelValues(a.kind, a.result).Inc()
	nodeDuration.WithLabelValues(a.result).Observe(time.Since(start).Seconds())
	// Never the headers (the token) nor a served value.
	log := s.Log.WithValues("remote", r.RemoteAddr, "node", a.node, "kind", a.kind, "name", a.name, "result", a.result, "code", a.code)
	if a.code == http.StatusOK {
		log.V(1).Info("Served a node input")
		return
	}
	log.Info("Refused a node input request", "why", a.why)
	if a.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata-config-server"`)
	}
	http.Error(w, http.StatusText(a.code), a.code)
}

// answer is what a request got, for the log and the metrics.
type answer struct {
	node, kind, name, result string
	code                     int
	why                      string
}

func (s *NodeServer) serve(w http.ResponseWriter, r *http.Request) answer {
	ctx := r.Context()
	var a answer
	var ok bool
	if a.name, ok = strings.CutPrefix(r.URL.Path, NodeMachineConfigPath); ok {
		a.kind = "machineconfig"
	} else if a.name, ok = strings.CutPrefix(r.URL.Path, NodePullSecretPath); ok {
		a.kind = "pullsecret"
	}
	fail := func(result string, code int, why string) answer {
		a.result, a.code, a.why = result, code, why
		return a
	}
	if !ok || len(validation.IsDNS1123Subdomain(a.name)) > 0 {
		a.kind, a.name = "", ""
		return fail(resultNotFound, http.StatusNotFound, "not a node input path")
	}
	if r.Method != http.MethodGet {
		return fail(resultNotFound, http.StatusMethodNotAllowed, "method "+r.Method)
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return fail(resultUnauthorized, http.StatusUnauthorized, "no bearer token")
	}
	node, code, why := s.authenticate(ctx, token)
	if code != 0 {
		result := map[int]string{http.StatusUnauthorized: resultUnauthorized, http.StatusForbidden: resultForbidden}[code]
		if result == "" {
			result = resultError
		}
		return fail(result, code, why)
	}
	a.node = node
	var n corev1.Node
	if err := s.Nodes.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return fail(resultForbidden, http.StatusForbidden, "the token's node is gone")
		}
		return fail(resultError, http.StatusInternalServerError, fmt.Sprintf("get node %s: %v", node, err))
	}
	var body []byte
	var err error
	switch a.kind {
	case "machineconfig":
		body, code, why, err = s.machineConfig(ctx, &n, a.name)
	default:
		body, code, why, err = s.pullSecret(ctx, &n, a.name)
	}
	switch {
	case err != nil:
		return fail(resultError, http.StatusInternalServerError, err.Error())
	case code == http.StatusForbidden:
		return fail(resultForbidden, code, why)
	case code == http.StatusNotFound:
		return fail(resultNotFound, code, why)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	a.result, a.code = resultServed, http.StatusOK
	return a
}

// authenticate asks the API server whose token it is: the node it is
// bound to, or the code to refuse with (401: not a valid token for this
// audience; 403: valid, but not the daemon's or bound to no node; 503:
// the review failed, the caller retries) and why.
func (s *NodeServer) authenticate(ctx context.Context, token string) (node string, code int, why string) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{NodeTokenAudience}}}
	if err := s.Reviews.Create(ctx, tr); err != nil {
		return "", http.StatusServiceUnavailable, "token review: " + err.Error()
	}
	st := tr.Status
	if !st.Authenticated {
		// st.Error says why; it never holds the token.
		return "", http.StatusUnauthorized, "token not authenticated: " + st.Error
	}
	if !slices.Contains(st.Audiences, NodeTokenAudience) {
		return "", http.StatusUnauthorized, "token not for audience " + NodeTokenAudience
	}
	if st.User.Username != s.DaemonUser {
		return "", http.StatusForbidden, "user " + st.User.Username + " is not " + s.DaemonUser
	}
	nodes := st.User.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return "", http.StatusForbidden, "the token is bound to no node (a token bound to the daemon's pod carries " + NodeNameExtra + ")"
	}
	return nodes[0], 0, ""
}

// machineConfig is rendered config name if the node may read it.
func (s *NodeServer) machineConfig(ctx context.Context, n *corev1.Node, name string) ([]byte, int, string, error) {
	named := n.Annotations[v1alpha1.DesiredConfigAnnotation] == name || n.Annotations[v1alpha1.DesiredStageConfigAnnotation] == name
	pool := n.Annotations[v1alpha1.NodePoolAnnotation]
	refused := "rendered config " + name + " is neither named on node " + n.Name + " nor of its pool " + pool
	var mc v1alpha1.MachineConfig
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &mc); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, 0, "", fmt.Errorf("get rendered config %s: %w", name, err)
		}
		if !named {
			return nil, http.StatusForbidden, refused, nil
		}
		return nil, http.StatusNotFound, "rendered config " + name + " does not exist", nil
	}
	if !named && (pool == "" || mc.Labels[v1alpha1.PoolLabel] != pool) {
		return nil, http.StatusForbidden, refused, nil
	}
	body, err := json.Marshal(&v1alpha1.MachineConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Labels: mc.Labels},
		Spec:       mc.Spec,
	})
	return body, 0, "", err
}

// pullSecret is pull secret name's .dockerconfigjson if the node names
// it.
func (s *NodeServer) pullSecret(ctx context.Context, n *corev1.Node, name string) ([]byte, int, string, error) {
	if n.Annotations[v1alpha1.ImagePullSecretAnnotation] != name {
		return nil, http.StatusForbidden, "pull secret " + name + " is not the one node " + n.Name + " names", nil
	}
	var sec corev1.Secret
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.NodeNamespace, Name: name}, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, http.StatusNotFound, "pull secret " + s.NodeNamespace + "/" + name + " does not exist", nil
		}
		return nil, 0, "", fmt.Errorf("get pull secret %s/%s: %w", s.NodeNamespace, name, err)
	}
	data, ok := sec.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, http.StatusNotFound, "pull secret " + s.NodeNamespace + "/" + name + " has no " + corev1.DockerConfigJsonKey, nil
	}
	return data, 0, "", nil
}
