package main

import (
	"context"
	"crypto/tls"
	"errors"
	goflag "flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/configserver"
	"github.com/strata-dev/strata/controllers/pullsecret"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/internal/version"
)

// The config server is a mode of strata-controller rather than a binary
// of its own: it is a small HTTP front to objects the controller already
// knows, it ships in the controller's image (nothing more to build, push
// and pin), and it runs as its own Deployment with its own ServiceAccount
// whose rights are read-only (config/configserver), so the port nodes
// reach holds none of the controller's rights. The Secrets it reads are
// in a namespace of their own (strata-config-server) and strata-nodes:
// none of strata-system's push and build secrets is within its reach.
type configServerOptions struct {
	addr          string
	tlsSecret     string
	nodeNamespace string
	daemonSet     string
	daemonImage   string
	daemonAccount string
	metricsAddr   string
	probeAddr     string
	secureMetrics bool
	zap           zap.Options
}

func newConfigServerCommand() *cobra.Command {
	var o configServerOptions
	cmd := &cobra.Command{
		Use:   "config-server",
		Short: "Serve each pool's first-boot Ignition to new nodes that carry the pool's bootstrap token",
		Long: `config-server serves GET /config/<pool> over HTTPS: the pool's first-boot
Ignition (spec 3), to requests with "Authorization: Bearer <token>", the
token in strata-config-server/strata-bootstrap-<pool>. stratactl node-config POOL
prints the pointer Ignition that fetches it.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(*cobra.Command, []string) error { return runConfigServer(o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "bind-address", ":22623", "address the HTTPS server binds to (22623: OpenShift's machine-config-server port)")
	f.StringVar(&o.tlsSecret, "tls-secret", v1alpha1.ConfigServerTLSSecret, "kubernetes.io/tls Secret in strata-config-server with the serving certificate (default: the one strata-controller issues and renews)")
	f.StringVar(&o.nodeNamespace, "node-pull-secret-namespace", pullsecret.DefaultNodeNamespace, "namespace of the node pull secrets")
	f.StringVar(&o.daemonSet, "daemon-set", "strata-daemon", "the strata-daemon DaemonSet in strata-system, whose image the first boot runs (the server's Role may get only strata-daemon)")
	f.StringVar(&o.daemonAccount, "daemon-service-account", "strata-daemon", "the daemons' ServiceAccount in strata-system: only its tokens, bound to a pod on a Node, read that Node's rendered configs and pull secret at "+configserver.NodePathPrefix)
	f.StringVar(&o.daemonImage, "daemon-image", "", "the strata-daemon image the first boot runs (default: the --daemon-set's)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address the Prometheus metrics endpoint binds to; 0 disables it")
	f.BoolVar(&o.secureMetrics, "metrics-secure", true, "serve metrics over HTTPS to clients the API server authorizes for GET /metrics")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health and readiness probes bind to")
	zfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	o.zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	return cmd
}

func runConfigServer(o configServerOptions) error {
	if err := checkNamespace(os.Getenv("POD_NAMESPACE")); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("config-server")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsOptions(options{metricsAddr: o.metricsAddr, secureMetrics: o.secureMetrics}),
		HealthProbeBindAddress: o.probeAddr,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// The only Secrets it may read: its own namespace's (the
			// tokens, its certificate) and the node pull secrets.
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{
				v1alpha1.ConfigServerNamespace: {},
				o.nodeNamespace:                {},
			}},
		}},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	daemonImage := func(ctx context.Context) (string, error) {
		if o.daemonImage != "" {
			return o.daemonImage, nil
		}
		// Read, not cached: its Role may get this one DaemonSet by
		// name, not list or watch strata-system's.
		var ds appsv1.DaemonSet
		if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.daemonSet}, &ds); err != nil {
			return "", fmt.Errorf("get daemon set %s/%s for the first boot's daemon image: %w", namespace, o.daemonSet, err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			if c.Name == "daemon" {
				return c.Image, nil
			}
		}
		return "", fmt.Errorf("daemon set %s/%s has no container named daemon", namespace, o.daemonSet)
	}
	certs := &configserver.CertSource{Reader: mgr.GetAPIReader(), Key: client.ObjectKey{Namespace: v1alpha1.ConfigServerNamespace, Name: o.tlsSecret}}
	mux := http.NewServeMux()
	mux.Handle("/", &configserver.Server{
		Client:        mgr.GetClient(),
		Namespace:     v1alpha1.ConfigServerNamespace,
		NodeNamespace: o.nodeNamespace,
		DaemonImage:   daemonImage,
		Log:           log,
	})
	// Running nodes' daemons read their own inputs here, not from the
	// API server (configserver.NodeServer).
	mux.Handle(configserver.NodePathPrefix, &configserver.NodeServer{
		Client:        mgr.GetClient(),
		Nodes:         mgr.GetAPIReader(),
		Reviews:       mgr.GetClient(),
		NodeNamespace: o.nodeNamespace,
		DaemonUser:    configserver.DaemonUser(namespace, o.daemonAccount),
		Log:           log.WithName("node"),
	})
	srv := &http.Server{
		Addr:    o.addr,
		Handler: mux,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
			NextProtos:     []string{"http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- srv.ListenAndServeTLS("", "") }()
		log.Info("Serving first-boot Ignition", "address", o.addr, "tlsSecret", o.tlsSecret)
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		}
	})); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once the caches synced and a serving certificate is there.
	if err := mgr.AddReadyzCheck("certificate", func(req *http.Request) error {
		_, err := certs.Load(req.Context())
		return err
	}); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	log.Info("Starting", "version", version.Version)
	err = mgr.Start(ctrl.SetupSignalHandler())
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
