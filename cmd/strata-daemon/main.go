// Command strata-daemon is the node agent: it stages the desired OS image
// with bootc, asks the controller to drain its node, writes the
// /var-bound configuration, reboots, verifies the booted image and the
// node's health, asks for the uncordon, and rolls back once a node that
// does not come back healthy.
package main

import (
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/strata-dev/strata/configserver"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/internal/version"
	"github.com/strata-dev/strata/rollout"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/rollout/unitaction"
)

type options struct {
	nodeName      string
	kubeconfig    string
	namespace     string
	hostRoot      string
	bootcCommand  string
	rebootCommand string
	healthCommand string
	bootIDFile    string
	bootcTimeouts bootc.Timeouts
	stateDir      string
	resync        time.Duration
	metricsAddr   string
	insecure      []string
	systemctl     string
	configServer  configServerClient
	zap           zap.Options
}

// configServerClient is where the daemon reads its rendered configs and
// pull secret: the config server, which serves a node only its own
// pool's (the daemon's RBAC has no get on either), or, with no URL, the
// API server (simulated nodes, whose daemons run with a kubeconfig that
// may read them).
type configServerClient struct {
	url, caFile, tokenFile string
}

func main() {
	o := options{}
	cmd := &cobra.Command{
		Use:   "strata-daemon",
		Short: "Strata's node agent: applies the desired OS image to its node with bootc",
		Long: `strata-daemon runs on every node (or, for simulated nodes, once per node)
and takes its own Node through updates: it watches only that Node's
annotations, stages the desired image with bootc switch while workloads
still run, asks the rollout controller for a drain, writes the /var-bound
configuration, reboots, verifies the booted digest and the node's health,
asks for the uncordon, and rolls the node back once if it does not come back
healthy. Its record of an update in progress lives in --state-dir, on /var,
which survives reboots.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("state-dir") {
				o.stateDir = filepath.Join(o.hostRoot, "var", "lib", "strata")
			}
			return run(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "the daemon's own Node (default $NODE_NAME)")
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG; without one, the in-cluster config)")
	f.StringVar(&o.namespace, "namespace", "strata-nodes", "namespace of the node pull secrets, which the controller copies there from each MachineOSConfig's renderedImagePullSecret (the daemon may read no Secret elsewhere)")
	f.StringVar(&o.hostRoot, "host-root", "/", "the host's root directory; every host path is under it")
	f.StringVar(&o.bootcCommand, "bootc-command", "bootc", "bootc command, split at white space (on a node from a pod: \"nsenter --target 1 --mount --pid -- bootc\")")
	f.StringVar(&o.rebootCommand, "reboot-command", "nsenter --target 1 --mount --pid -- systemctl reboot", "reboot command, split at white space")
	f.StringVar(&o.healthCommand, "health-check-command", "", "health check run after an update's reboot, split at white space; exit 0 means healthy (empty: only the Node's Ready condition counts)")
	f.DurationVar(&o.bootcTimeouts.Status, "bootc-status-timeout", bootc.DefaultTimeouts.Status, "how long one bootc status may take")
	f.DurationVar(&o.bootcTimeouts.Switch, "bootc-switch-timeout", bootc.DefaultTimeouts.Switch, "how long one bootc switch (the image's pull) may take")
	f.DurationVar(&o.bootcTimeouts.Rollback, "bootc-rollback-timeout", bootc.DefaultTimeouts.Rollback, "how long one bootc rollback may take")
	f.StringVar(&o.bootIDFile, "boot-id-file", "/proc/sys/kernel/random/boot_id", "file holding the id of the running boot")
	f.StringVar(&o.stateDir, "state-dir", "", "directory of the daemon's state file (default <host-root>/var/lib/strata)")
	f.DurationVar(&o.resync, "resync-period", rollout.DefaultResync, "how often to sync without a Node event")
	f.StringSliceVar(&o.insecure, "insecure-registry", nil, "registry host[:port] read over plain HTTP when the daemon reads image manifests for its disruption decision (repeatable; bootc has its own registries.conf)")
	f.StringVar(&o.systemctl, "systemctl-command", "nsenter --target 1 --mount --pid -- systemctl", "systemctl command, split at white space, for the actions of a live apply (daemon-reload, reload, restart)")
	f.StringVar(&o.configServer.url, "config-server", "", "https://host:port of the config server the daemon reads its node's rendered configs and pull secret from (empty: read them from the API server, which the daemon's ServiceAccount may not)")
	f.StringVar(&o.configServer.caFile, "config-server-ca-file", "/etc/strata/config-server-ca/ca.crt", "PEM CA of the config server's certificate (the ConfigMap strata-config-server-ca, mounted)")
	f.StringVar(&o.configServer.tokenFile, "config-server-token-file", "/var/run/secrets/strata/config-server/token", "the pod's ServiceAccount token for audience "+configserver.NodeTokenAudience+" (projected by the kubelet), sent to the config server")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "address the Prometheus metrics endpoint binds to; 0 disables it")
	zfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	o.zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	cmd.AddCommand(newFirstbootCommand())
	version.Apply(cmd)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata-daemon:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.nodeName == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	if o.resync <= 0 {
		return errors.New("--resync-period must be positive")
	}
	bc, err := bootc.NewCommand(o.bootcCommand)
	if err != nil {
		return fmt.Errorf("--bootc-command: %w", err)
	}
	if o.bootcTimeouts.Status <= 0 || o.bootcTimeouts.Switch <= 0 || o.bootcTimeouts.Rollback <= 0 {
		return errors.New("--bootc-*-timeout must be positive")
	}
	bc.Timeouts = o.bootcTimeouts
	systemctl := strings.Fields(o.systemctl)
	if len(systemctl) == 0 {
		return errors.New("--systemctl-command is empty")
	}
	reboot := strings.Fields(o.rebootCommand)
	if len(reboot) == 0 {
		return errors.New("--reboot-command is empty")
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	root, err := hostfs.Open(o.hostRoot)
	if err != nil {
		return fmt.Errorf("--host-root: %w", err)
	}
	defer root.Close()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: "0",
		Cache:                  rollout.CacheOptions(o.nodeName),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	d := &rollout.Daemon{
		Client:    mgr.GetClient(),
		Reader:    mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("strata-daemon"),
		NodeName:  o.nodeName,
		Namespace: o.namespace,
		Root:      root,
		StateDir:  o.stateDir,
		Bootc:     bc,
		Images: &rollout.RegistryImages{
			Registry: registry.Client{Insecure: o.insecure},
			AuthFile: filepath.Join(o.hostRoot, rollout.AuthFile),
		},
		Units: &unitaction.Systemd{Systemctl: systemctl},
		Soft:  &rollout.BootcSoftReboot{Bootc: bc, Systemctl: &bootc.Systemctl{Argv: systemctl}},
		Lock:  bc,
		Machine: &rollout.Commands{
			BootIDFile: o.bootIDFile,
			RebootArgv: reboot,
			HealthArgv: strings.Fields(o.healthCommand),
		},
	}
	if o.configServer.url != "" {
		d.Inputs = &configserver.NodeClient{URL: o.configServer.url, CAFile: o.configServer.caFile, TokenFile: o.configServer.tokenFile}
	}
	if err := (&rollout.Reconciler{Daemon: d, Resync: o.resync}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the daemon: %w", err)
	}
	log.Info("Starting", "node", o.nodeName, "hostRoot", o.hostRoot, "stateDir", o.stateDir, "configServer", o.configServer.url, "version", version.Version)
	ctx := ctrl.SetupSignalHandler()
	if _, err := d.SyncAtStart(ctx); err != nil {
		// The Reconciler syncs again once started, with its backoff.
		log.Error(err, "The first sync failed")
	}
	return mgr.Start(ctx)
}

// restConfig loads a kubeconfig file, or the in-cluster config without
// one.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}
