package gate

import (
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccount is the gate identity: the ServiceAccount, in the
// controller's namespace, that CEL and blockingPods gates read the
// cluster as (config/rbac/gate_reader_role.yaml). It may list pods and
// namespaces, and get what an admin grants it through the aggregated
// ClusterRole strata-gate-reader; it can read no Secret. No pod runs as
// it: the controller impersonates it, and may impersonate nothing else.
const ServiceAccount = "strata-gates"

// Username is the gate identity's user name, as the API server knows it.
func Username(namespace string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", namespace, ServiceAccount)
}

// NewReader returns an uncached reader that impersonates the gate
// identity of namespace, for Evaluator.Reader: a gate's author (whoever
// may write a pool) can then read only what the gate identity may, not
// what the controller may (its Secrets). opts.HTTPClient is ignored: the
// impersonation is in the client's own transport, built from cfg.
func NewReader(cfg *rest.Config, opts client.Options, namespace string) (client.Reader, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: Username(namespace)}
	opts.HTTPClient = nil
	c, err := client.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("the gates' client, as %s: %w", Username(namespace), err)
	}
	return c, nil
}
