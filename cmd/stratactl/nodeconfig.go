package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/configserver"
	"github.com/strata-dev/strata/controllers/bootstrap"
	"github.com/strata-dev/strata/internal/scheme"
)

const strataNamespace = "strata-system"

type nodeConfigOptions struct {
	status    statusOptions
	server    string
	caFile    string
	tlsSecret string
}

func newNodeConfigCommand() *cobra.Command {
	o := &nodeConfigOptions{}
	cmd := &cobra.Command{
		Use:   "node-config POOL [--server URL]",
		Short: "Print the pointer Ignition that makes a new node fetch its pool's first-boot config",
		Long: `node-config prints an Ignition config (spec 3.4.0) for an installer or a
cloud's user data: it tells Ignition to fetch and merge the pool's first-boot
config from the config server (https://SERVER/config/POOL), trusting the
server's CA, with the pool's bootstrap token in an Authorization header.

The pool must take new nodes (spec.bootstrapToken): only then does it have a
token. The output holds the token: whoever has it can fetch the pool's
configuration and node pull secret, so keep it out of the pods' reach (on a
cloud, block pods from the instance metadata service that serves user data).
Rotate it by annotating strata-config-server/strata-bootstrap-POOL (the old
token works on for the pool's rotationOverlap) or revoke it by deleting that
Secret, then print the pointer config again; spec.bootstrapToken.rotationPeriod
replaces it on a schedule.

--server defaults to https://NAME:22623 with the first name in the config
server Service's machineconfiguration.strata.dev/server-names annotation.
The CA is the one in the serving certificate's Secret (ca.crt), or
--ca-file for a certificate of your own.`,
		Example: `  stratactl node-config worker --server https://config.example.com:22623 > worker.ign`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.status.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&o.server, "server", "", "the config server's URL as new nodes reach it, https://HOST:PORT")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA that signed the server's certificate (default: ca.crt of --tls-secret)")
	f.StringVar(&o.tlsSecret, "tls-secret", v1alpha1.ConfigServerTLSSecret, "the server's serving certificate Secret in strata-config-server, for its ca.crt")
	return cmd
}

func (o *nodeConfigOptions) run(ctx context.Context, out io.Writer, pool string) error {
	cfg, err := o.status.restConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	var mcp v1alpha1.MachineConfigPool
	if err := c.Get(ctx, client.ObjectKey{Name: pool}, &mcp); err != nil {
		return fmt.Errorf("get pool %s: %w", pool, err)
	}
	var tok corev1.Secret
	key := client.ObjectKey{Namespace: v1alpha1.ConfigServerNamespace, Name: v1alpha1.BootstrapTokenSecretName(pool)}
	if err := c.Get(ctx, key, &tok); err != nil {
		if mcp.Spec.BootstrapToken == nil {
			return fmt.Errorf("pool %s takes no new nodes: set its spec.bootstrapToken, and strata-controller makes the token %s", pool, key)
		}
		return fmt.Errorf("get the bootstrap token %s (strata-controller makes one for each pool that sets spec.bootstrapToken): %w", key, err)
	}
	token := tok.Data[v1alpha1.BootstrapTokenKey]
	if len(token) == 0 {
		return fmt.Errorf("bootstrap token %s has no %q", key, v1alpha1.BootstrapTokenKey)
	}
	server := o.server
	if server == "" {
		if server, err = defaultServer(ctx, c); err != nil {
			return err
		}
	}
	if !strings.HasPrefix(server, "https://") {
		return fmt.Errorf("--server %q: the config server speaks HTTPS only; give https://HOST:PORT", server)
	}
	var ca []byte
	if o.caFile != "" {
		if ca, err = os.ReadFile(o.caFile); err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
	} else {
		var sec corev1.Secret
		key := client.ObjectKey{Namespace: v1alpha1.ConfigServerNamespace, Name: o.tlsSecret}
		if err := c.Get(ctx, key, &sec); err != nil {
			return fmt.Errorf("get the serving certificate %s for its CA (or give --ca-file): %w", key, err)
		}
		if ca = sec.Data[bootstrap.CAKey]; len(ca) == 0 {
			return fmt.Errorf("serving certificate %s has no %s: give --ca-file", key, bootstrap.CAKey)
		}
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(configserver.Pointer(server, pool, ca, token))
}

// defaultServer is https://<first server name>:22623.
func defaultServer(ctx context.Context, c client.Client) (string, error) {
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: strataNamespace, Name: bootstrap.ServiceName}, &svc); err != nil {
		return "", fmt.Errorf("get the config server's Service to find its address (or give --server): %w", err)
	}
	for n := range strings.SplitSeq(svc.Annotations[bootstrap.ServerNamesAnnotation], ",") {
		if n = strings.TrimSpace(n); n != "" {
			if strings.Contains(n, ":") { // an IPv6 address
				n = "[" + n + "]"
			}
			return "https://" + n + ":22623", nil
		}
	}
	return "", fmt.Errorf("service %s/%s has no %s annotation: give --server, the URL new nodes reach the config server by", strataNamespace, bootstrap.ServiceName, bootstrap.ServerNamesAnnotation)
}
