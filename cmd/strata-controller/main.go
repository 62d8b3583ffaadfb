// Command strata-controller is the controller manager: it renders pools'
// configurations, builds layered pools' images and rolls them out.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	goflag "flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"time"
	_ "time/tzdata" // maintenance windows name IANA zones; the image may carry no zoneinfo

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/bootstrap"
	"github.com/strata-dev/strata/controllers/build"
	"github.com/strata-dev/strata/controllers/degraded"
	"github.com/strata-dev/strata/controllers/disruption"
	"github.com/strata-dev/strata/controllers/node"
	"github.com/strata-dev/strata/controllers/nodemetrics"
	"github.com/strata-dev/strata/controllers/pullsecret"
	"github.com/strata-dev/strata/controllers/render"
	"github.com/strata-dev/strata/internal/gate"
	"github.com/strata-dev/strata/internal/memlimit"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/internal/version"
)

// namespace is where the controller keeps its lease and reads secrets.
// It is fixed: the admission policies (config/policy) exempt the
// controller's ServiceAccount in it by name, and the RBAC of
// config/rbac grants in it; see checkNamespace.
const namespace = "strata-system"

type options struct {
	metricsAddr     string
	secureMetrics   bool
	enableHTTP2     bool
	probeAddr       string
	leaderElect     bool
	renderedHistory int
	configFile      string
	nodeNamespace   string
	zap             zap.Options
}

// fileConfig is the controller's configuration file.
type fileConfig struct {
	// Build configures image builds; builderImage is required.
	Build build.Config `json:"build"`
}

func main() {
	var o options
	cmd := &cobra.Command{
		Use:   "strata-controller",
		Short: "Strata's controller manager: renders, builds and rolls out node OS images",
		Long: `strata-controller runs Strata's reconcilers against the cluster in
KUBECONFIG (or the in-cluster config): render (MachineConfigs and a pool to
a rendered MachineConfig), build (a MachineOSConfig to MachineOSBuilds:
Jobs and configuration layers; --config must name the builder image),
rollout (each pool's nodes to its target image a few at a time, draining
them when their daemons ask), and the node disruption policy (the
MachineConfiguration's merged policy in its status).`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          func(*cobra.Command, []string) error { return run(o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address the Prometheus metrics endpoint binds to (:8443 for HTTPS, :8080 for HTTP); 0 disables it")
	f.BoolVar(&o.secureMetrics, "metrics-secure", true, "serve metrics over HTTPS, only to clients the API server authenticates and authorizes for GET /metrics; false serves plain HTTP to anyone")
	f.BoolVar(&o.enableHTTP2, "enable-http2", false, "allow HTTP/2 on the metrics server (off: HTTP/2 Stream Cancellation and Rapid Reset, CVE-2023-44487 and CVE-2023-39325)")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health and readiness probes bind to")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that only one replica reconciles at a time")
	f.IntVar(&o.renderedHistory, "rendered-config-history", render.DefaultHistory, "unused rendered MachineConfigs kept per pool")
	f.StringVar(&o.nodeNamespace, "node-pull-secret-namespace", pullsecret.DefaultNodeNamespace, "namespace the MachineOSConfigs' renderedImagePullSecrets are copied to, the only Secrets the node daemons may read")
	f.StringVar(&o.configFile, "config", "", "YAML configuration file (build: builderImage, namespace, placement, insecureRegistries, history, ...)")
	// controller-runtime's --zap-* flags: --zap-log-level=debug (or 1, 2)
	// shows the reconcilers' V(1) detail, --zap-encoder=console reads
	// better by eye than the default JSON, --zap-devel sets both.
	zfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	o.zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	cmd.AddCommand(newConfigServerCommand())
	version.Apply(cmd)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata-controller:", err)
		os.Exit(1)
	}
}

// loadConfig reads the --config file; no file is an empty configuration.
func loadConfig(path string) (fileConfig, error) {
	var fc fileConfig
	if path == "" {
		return fc, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fc, fmt.Errorf("read --config: %w", err)
	}
	if err := yaml.UnmarshalStrict(raw, &fc); err != nil {
		return fc, fmt.Errorf("--config %s: %w", path, err)
	}
	return fc, nil
}

func run(o options) error {
	if o.renderedHistory < 1 {
		return errors.New("--rendered-config-history must be at least 1")
	}
	if err := checkNamespace(os.Getenv("POD_NAMESPACE")); err != nil {
		return err
	}
	fc, err := loadConfig(o.configFile)
	if err != nil {
		return err
	}
	if o.nodeNamespace == fc.Build.Namespace || o.nodeNamespace == namespace {
		return fmt.Errorf("--node-pull-secret-namespace %s is where the push and build Secrets are: the node pull secrets need a namespace of their own", o.nodeNamespace)
	}
	if fc.Build.Namespace == "" {
		fc.Build.Namespace = namespace
	}
	// The config server may read every Secret there.
	for what, ns := range map[string]string{"build.namespace": fc.Build.Namespace, "--node-pull-secret-namespace": o.nodeNamespace} {
		if ns == v1alpha1.ConfigServerNamespace {
			return fmt.Errorf("%s %s is the config server's namespace, whose Secrets it reads: give another", what, ns)
		}
	}
	// Without a builder no MachineOSConfig can be built: refuse to start
	// rather than leave every layered pool waiting without a word.
	if fc.Build.BuilderImage == "" {
		return errors.New("no build.builderImage in --config: set it to the builder image (Debian with buildah, images/builder) in a registry the cluster pulls from; without it no MachineOSConfig can be built")
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")
	// Builds hold what they decode and make, four at once: below the
	// container's limit the collector must work harder rather than let
	// the heap double and the kernel kill the process on the same input
	// after every restart.
	if soft, err := memlimit.Set(memlimit.CgroupRoot); err != nil {
		log.Error(err, "Cannot read the container's memory limit; the Go runtime has none")
	} else if soft > 0 {
		log.Info("Set the Go runtime's soft memory limit", "bytes", soft, "fractionOfContainerLimit", memlimit.Fraction)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "strata-controller.machineconfiguration.strata.dev",
		LeaderElectionNamespace: namespace,
		// run returns as soon as the manager stops, so giving the lease
		// up at once is safe, and a replacement pod (a rollout, a drain)
		// takes over without waiting for it to expire.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cache.Options{ByObject: cacheByObject(fc.Build.Namespace, o.nodeNamespace)},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := (&render.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("strata-render"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the render controller: %w", err)
	}
	if err := (&render.GCReconciler{
		Client:  mgr.GetClient(),
		History: o.renderedHistory,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the rendered config garbage collector: %w", err)
	}
	if err := (&build.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("strata-build"),
		Config:   fc.Build,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the build controller: %w", err)
	}
	// The gates read kinds nobody watches (any CEL object, the pods of
	// blockingPods gates): uncached, so that no informer needs list and
	// watch on them, and as the gate identity, so that a pool's author
	// reads through a gate only what an admin granted for gates. The
	// Prometheus CA and token are the controller's own reads, of Secrets
	// labelled for gates only.
	gateReader, err := gate.NewReader(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()}, namespace)
	if err != nil {
		return err
	}
	if err := (&node.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("strata-rollout"),
		Gates:    &gate.Evaluator{Reader: gateReader, Credentials: mgr.GetAPIReader(), Namespace: namespace},
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the rollout controller: %w", err)
	}
	if err := (&node.DrainReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("strata-drain"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the drain controller: %w", err)
	}
	if err := (&nodemetrics.Tracker{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the node update metrics: %w", err)
	}
	if err := (&pullsecret.Reconciler{
		Client:          mgr.GetClient(),
		Recorder:        mgr.GetEventRecorder("strata-pullsecret"),
		SourceNamespace: fc.Build.Namespace,
		NodeNamespace:   o.nodeNamespace,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the node pull secret controller: %w", err)
	}
	if err := (&degraded.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the pool Degraded controller: %w", err)
	}
	if err := (&disruption.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the node disruption policy controller: %w", err)
	}
	if err := (&bootstrap.TokenReconciler{Client: mgr.GetClient(), Namespace: v1alpha1.ConfigServerNamespace}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the bootstrap token controller: %w", err)
	}
	if err := (&bootstrap.CertReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Namespace: namespace, SecretNamespace: v1alpha1.ConfigServerNamespace}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the config server certificate controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return err
	}
	log.Info("Starting", "version", version.Version, "buildNamespace", fc.Build.Namespace, "builds", fc.Build.BuilderImage != "")
	return mgr.Start(ctrl.SetupSignalHandler())
}

// metricsOptions serves metrics as the kubebuilder scaffold does: over
// HTTPS with a self-signed certificate, to clients whose bearer token the
// API server accepts (TokenReview) and who may GET /metrics
// (SubjectAccessReview), with HTTP/2 off unless asked for.
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.secureMetrics}
	if o.secureMetrics {
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if !o.enableHTTP2 {
		m.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return m
}

// cacheSyncTimeout bounds how long one readiness probe waits for the
// informers; a probe that has to wait longer fails and is asked again.
const cacheSyncTimeout = 200 * time.Millisecond

// cacheSynced is the readiness check: it fails until the manager's cache
// has started and every informer in it has listed its objects, so that a
// replica is Ready only once it can act on the whole state of the
// cluster (a replica that cannot list what it watches, for want of RBAC
// or a CRD, never becomes Ready).
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncTimeout)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informer caches have not synced yet")
		}
		return nil
	}
}

// cacheByObject merges the controllers' cache settings: the build
// controller's namespaced objects, the rollout's stripped Nodes, and the
// node pull secrets' copies and the config server's tokens and
// certificate beside the build namespace's Secrets.
func cacheByObject(buildNamespace, nodeNamespace string) map[client.Object]cache.ByObject {
	m := build.CacheByObject(buildNamespace)
	maps.Copy(m, node.CacheByObject())
	for obj, by := range m {
		if _, ok := obj.(*corev1.Secret); ok {
			by.Namespaces = maps.Clone(by.Namespaces)
			by.Namespaces[nodeNamespace] = cache.Config{}
			by.Namespaces[v1alpha1.ConfigServerNamespace] = cache.Config{}
			m[obj] = by
		}
	}
	return m
}

// checkNamespace refuses to run in another namespace than the one the
// install names (podNamespace is the pod's own, from the downward API;
// empty outside a pod). A renamed install would run with a ServiceAccount
// the admission policies do not know: the approval policy would refuse
// the controller's own status writes, one by one, far from the cause.
func checkNamespace(podNamespace string) error {
	if podNamespace == "" || podNamespace == namespace {
		return nil
	}
	return fmt.Errorf("strata-controller runs in namespace %s, but Strata's install namespace is %s: its admission policies (config/policy) and RBAC name the ServiceAccounts there, so the namespace cannot be renamed; install config/default as it is", podNamespace, namespace)
}
