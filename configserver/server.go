package configserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/layering"
	"github.com/strata-dev/strata/nodeconfig"
)

// DefaultHealthCheckTimeout is the first boot's health timeout of a pool
// that sets none (the rollout's default).
const DefaultHealthCheckTimeout = 10 * time.Minute

// retryAfter is what a node is told to wait when its pool has nothing to
// give yet; Ignition retries a failed fetch on its own.
const retryAfter = "30"

// The server's rights: read, nothing else, and no Secret of
// strata-system (the push and build secrets): the tokens and its
// certificate are in a namespace of their own, strata-config-server; the
// node pull secrets in strata-nodes. Of strata-system it may get only
// the strata-daemon DaemonSet, for the daemon image the first boot runs.
//
// +kubebuilder:rbac:groups=machineconfiguration.strata.dev,resources=machineconfigpools;machineconfigs;machineosconfigs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-config-server,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=strata-nodes,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,namespace=strata-system,resources=daemonsets,resourceNames=strata-daemon,verbs=get

// Server serves the pools' first-boot Ignition.
type Server struct {
	// Client reads pools, rendered configs, MachineOSConfigs and Secrets
	// (a cache: a node's request costs the API server nothing).
	Client client.Reader
	// Namespace holds the bootstrap tokens (strata-config-server).
	Namespace string
	// NodeNamespace holds the node pull secrets (strata-nodes).
	NodeNamespace string
	// DaemonImage is the strata-daemon image the first boot runs.
	DaemonImage func(ctx context.Context) (string, error)
	// Log receives one line per request.
	Log logr.Logger
	// Now is the clock tokens expire by; nil is time.Now.
	Now func() time.Time
}

// Results counted and logged, one per request.
const (
	resultServed       = "served"
	resultUnauthorized = "unauthorized" // no token
	resultForbidden    = "forbidden"    // not the pool's token, or no such pool
	resultUnavailable  = "unavailable"  // the pool has nothing for new nodes yet
	resultNotFound     = "not_found"    // not a config path
	resultError        = "error"
)

// ServeHTTP answers GET /config/<pool>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	pool, result, code, msg := s.serve(w, r)
	requests.WithLabelValues(result).Inc()
	duration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	// The path and remote address, never the headers: the token is in one.
	log := s.Log.WithValues("remote", r.RemoteAddr, "pool", pool, "result", result, "code", code)
	if code == http.StatusOK {
		log.Info("Served a first-boot config")
		return
	}
	log.Info("Refused a config request", "why", msg)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="strata-config-server"`)
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	// The answer says nothing a caller without the token could use.
	http.Error(w, http.StatusText(code), code)
}

// serve writes the config on success; otherwise it returns what to
// answer and why (for the log).
func (s *Server) serve(w http.ResponseWriter, r *http.Request) (pool, result string, code int, why string) {
	ctx := r.Context()
	name, ok := strings.CutPrefix(r.URL.Path, v1alpha1.ConfigServerPathPrefix)
	if !ok || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", resultNotFound, http.StatusNotFound, "not a config path"
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return name, resultNotFound, http.StatusMethodNotAllowed, "method " + r.Method
	}
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return name, resultUnauthorized, http.StatusUnauthorized, "no bearer token"
	}
	valid, err := s.tokens(ctx, name)
	if err != nil {
		return name, resultError, http.StatusInternalServerError, err.Error()
	}
	// Both slots compared even when the pool has no token, so that the
	// time taken does not tell an unknown pool from a wrong token.
	match := 0
	for _, want := range valid {
		if subtle.ConstantTimeCompare([]byte(token), want) == 1 && len(want) > 0 {
			match = 1
		}
	}
	if match != 1 {
		return name, resultForbidden, http.StatusForbidden, "not a valid bootstrap token of the pool"
	}
	in, why, err := s.input(ctx, name)
	switch {
	case err != nil:
		return name, resultError, http.StatusInternalServerError, err.Error()
	case why != "":
		return name, resultUnavailable, http.StatusServiceUnavailable, why
	}
	cfg, err := Render(*in)
	if err != nil {
		return name, resultError, http.StatusInternalServerError, err.Error()
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return name, resultError, http.StatusInternalServerError, err.Error()
	}
	w.Header().Set("Content-Type", "application/vnd.coreos.ignition+json;version="+IgnitionVersion)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
	return name, resultServed, http.StatusOK, ""
}

// bearer is the token of an "Authorization: Bearer <token>" header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// tokens are the pool's bootstrap tokens that work now, in two slots
// (the current token and the one it replaced, while the rotation's
// overlap lasts), either nil when it does not work: both nil when the
// pool takes no new nodes (no spec.bootstrapToken), whatever Secret
// there is.
func (s *Server) tokens(ctx context.Context, name string) ([2][]byte, error) {
	var none [2][]byte
	var pool v1alpha1.MachineConfigPool
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &pool); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("get pool %s: %w", name, err)
	}
	spec := pool.Spec.BootstrapToken
	if spec == nil {
		// The controller deletes the token of such a pool; until it has,
		// the token must not work.
		return none, nil
	}
	var sec corev1.Secret
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: v1alpha1.BootstrapTokenSecretName(name)}, &sec)
	if apierrors.IsNotFound(err) {
		return none, nil
	}
	if err != nil {
		return none, fmt.Errorf("get the bootstrap token of pool %s: %w", name, err)
	}
	// Only a Secret the controller made for this pool counts, not one a
	// user created under that name for another purpose.
	if sec.Labels[v1alpha1.BootstrapTokenLabel] != name {
		return none, nil
	}
	return validTokens(spec, &sec, s.now()), nil
}

// validTokens are the tokens of sec that work at now: the current one
// until rotationPeriod + overlap after it was made (the controller
// replaces it at rotationPeriod: this holds should it not), the previous
// one until its expiry annotation (absent or unreadable: never).
func validTokens(spec *v1alpha1.BootstrapToken, sec *corev1.Secret, now time.Time) [2][]byte {
	var valid [2][]byte
	if exp := spec.Expiry(sec.CreationTimestamp.Time); exp.IsZero() || now.Before(exp) {
		valid[0] = sec.Data[v1alpha1.BootstrapTokenKey]
	}
	if exp, err := time.Parse(time.RFC3339, sec.Annotations[v1alpha1.PreviousTokenExpiresAnnotation]); err == nil && now.Before(exp) {
		valid[1] = sec.Data[v1alpha1.PreviousBootstrapTokenKey]
	}
	return valid
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// input gathers what the pool's config is made of, or says why the pool
// has nothing to give yet.
func (s *Server) input(ctx context.Context, name string) (*Input, string, error) {
	var pool v1alpha1.MachineConfigPool
	if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "the pool is gone", nil
		}
		return nil, "", fmt.Errorf("get pool %s: %w", name, err)
	}
	nn := pool.Status.NewNodes
	if nn == nil || nn.Config == "" {
		return nil, "the pool has released no image or configuration for new nodes yet (status.newNodes)", nil
	}
	in := &Input{Pool: name, Image: nn.Image, HealthCheckTimeout: DefaultHealthCheckTimeout}
	if t := pool.Spec.HealthCheckTimeout; t != nil {
		in.HealthCheckTimeout = t.Duration
	}
	var mc v1alpha1.MachineConfig
	if err := s.Client.Get(ctx, client.ObjectKey{Name: nn.Config}, &mc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "rendered config " + nn.Config + " does not exist", nil
		}
		return nil, "", fmt.Errorf("get rendered config %s: %w", nn.Config, err)
	}
	split, err := nodeconfig.SplitForNode(&mc.Spec)
	if err != nil {
		return nil, "", fmt.Errorf("rendered config %s: %w", nn.Config, err)
	}
	in.NodeItems = split.NodeItems
	mosc, err := layering.Holder(ctx, s.Client, &pool)
	if err != nil {
		return nil, "", err
	}
	if mosc != nil && mosc.Spec.RenderedImagePullSecret != nil {
		secret := mosc.Spec.RenderedImagePullSecret.Name
		var sec corev1.Secret
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.NodeNamespace, Name: secret}, &sec); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, "the node pull secret " + s.NodeNamespace + "/" + secret + " is not copied yet", nil
			}
			return nil, "", fmt.Errorf("get node pull secret %s/%s: %w", s.NodeNamespace, secret, err)
		}
		in.PullSecret = sec.Data[corev1.DockerConfigJsonKey]
		if len(in.PullSecret) == 0 {
			// Without it the node could not pull the image: better no
			// config (Ignition retries) than a first boot bound to fail.
			return nil, "the node pull secret " + s.NodeNamespace + "/" + secret + " has no " + corev1.DockerConfigJsonKey, nil
		}
	}
	if mosc != nil && in.Image != "" {
		// Where the pool signs, the first boot verifies what it switches to.
		if in.SignaturePolicy, err = layering.SignaturePolicy(mosc); err != nil {
			return nil, "", err
		}
	}
	if in.Image != "" {
		if in.DaemonImage, err = s.DaemonImage(ctx); err != nil {
			return nil, "", err
		}
	}
	return in, "", nil
}
