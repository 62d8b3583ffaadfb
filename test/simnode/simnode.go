package simnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Keys the harness, kwok's stages (hack/cluster/kwok-stages.yaml) and the
// test cluster agree on.
const (
	// SimulatedLabel marks a simulated Node; kwok manages the Nodes that
	// carry it with value "true".
	SimulatedLabel = "strata.dev/simulated"
	// SimulatedTaint keeps everything that does not tolerate it (build
	// pods, the registry) off simulated Nodes.
	SimulatedTaint = "strata.dev/simulated"
	// WorkerRoleLabel makes the Node a worker, as in a real cluster.
	WorkerRoleLabel = "node-role.kubernetes.io/worker"
	// RebootingAnnotation, while set, makes kwok post Ready=False.
	RebootingAnnotation = "sim.strata.dev/rebooting"
	// BootIDAnnotation is the simulated boot id; kwok reports it as
	// status.nodeInfo.bootID when it makes the Node Ready.
	BootIDAnnotation = "sim.strata.dev/boot-id"
)

// Files in a node's root that bootc-sim writes.
const (
	bootIDFile          = ".bootc-sim/boot_id"
	rebootRequestFile   = ".bootc-sim/reboot-requested"
	defaultNamespace    = "strata-nodes"
	defaultNamePrefix   = "sim"
	defaultTimeout      = 2 * time.Minute
	defaultPollInterval = 100 * time.Millisecond
)

// Config says how to run simulated nodes.
type Config struct {
	// Kubeconfig is the path of an admin kubeconfig of the test cluster:
	// the harness's own client and every daemon's KUBECONFIG.
	Kubeconfig string
	// Daemon is the strata-daemon binary (see Build).
	Daemon string
	// BootcSim is the bootc-sim binary (see Build). The daemon splits its
	// --bootc-command on whitespace, so the path must have none.
	BootcSim string
	// OriginalImage is the image every node is installed with
	// (`bootc-sim sim init`), as repo@sha256:digest.
	OriginalImage string
	// Dir holds one directory per node. Empty: a new directory, removed by
	// Stop: simnodes-* in the test cluster's state directory when
	// Kubeconfig is the one hack/cluster/up.sh wrote (so that make
	// cluster-down removes what a killed test leaves), else in $TMPDIR.
	Dir string
	// NamePrefix starts every Node name ("sim" when empty); a random part
	// follows, so that remains of an earlier run never collide.
	NamePrefix string
	// Namespace is the daemons' --namespace, where they read the node
	// pull secrets ("strata-nodes" when empty, the daemon's default).
	Namespace string
	// InsecureRegistries are registries (host:port) the daemons reach
	// over plain HTTP when they read image manifests for their
	// disruption decision (--insecure-registry): the test cluster's
	// registry is one. bootc-sim reaches registries on its own terms.
	// Without it such a daemon cannot tell a configuration change from a
	// new base, and every update takes a full reboot.
	InsecureRegistries []string
	// DaemonArgs are extra flags for every daemon.
	DaemonArgs []string
	// Log receives the daemons' output, each line prefixed with its node's
	// name, and the harness's own account of what it does. Nil: discarded.
	Log io.Writer
	// Timeout bounds each wait on the cluster (a Node becoming Ready or
	// NotReady) and each bootc-sim command (2m when zero).
	Timeout time.Duration
	// PollInterval is how often reboot requests and the cluster are
	// polled (100ms when zero).
	PollInterval time.Duration
	// RebootDuration is how long a (full) reboot keeps the node down,
	// between NotReady and Ready, beyond the harness's own work (none
	// when zero). A benchmark sets what a real machine takes.
	RebootDuration time.Duration
	// SoftRebootDuration is the same for a soft reboot (userspace only).
	SoftRebootDuration time.Duration
	// BootcVersion is the bootc release the nodes run (bootc-sim sim init
	// --bootc-version); empty: bootc-sim's default.
	BootcVersion string
	// MemoryDisks mounts a tmpfs on the nodes' directory (Dir must be
	// empty: the harness makes it, and Stop unmounts it). Each real node
	// has a disk of its own; simulated ones share the machine's, where
	// every node's ostree deploy (a syncfs) waits for every other node's
	// writes, a cost that grows with the pool and that no real pool pays.
	// A benchmark of many nodes sets it; the behaviour is the same.
	MemoryDisks bool
}

// Cluster is a set of simulated nodes and their daemons. Its methods are
// safe for concurrent use.
type Cluster struct {
	cfg     Config
	client  kubernetes.Interface
	prefix  string
	log     *syncWriter
	spawner *spawner
	ownDir  bool

	// ctx ends the supervisors; Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// shimDir holds the bootc and systemctl of boot-time processes.
	shimOnce sync.Once
	shimDir  string
	shimErr  error

	mu      sync.Mutex
	nodes   map[string]*node
	order   []string
	errs    []error
	stopped bool
}

// New checks cfg and connects to the cluster; it registers no node yet
// (AddNodes does). Stop undoes everything, also after a failed AddNodes.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Kubeconfig == "" || cfg.Daemon == "" || cfg.BootcSim == "" || cfg.OriginalImage == "" {
		return nil, errors.New("simnode: Kubeconfig, Daemon, BootcSim and OriginalImage are required")
	}
	if strings.ContainsAny(cfg.BootcSim, " \t\n") {
		return nil, fmt.Errorf("simnode: bootc-sim path %q contains whitespace; the daemon splits its commands on it", cfg.BootcSim)
	}
	for _, p := range []*string{&cfg.Kubeconfig, &cfg.Daemon, &cfg.BootcSim} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, fmt.Errorf("simnode: %w", err)
		}
		*p = abs
	}
	for _, b := range []string{cfg.Daemon, cfg.BootcSim} {
		if fi, err := os.Stat(b); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("simnode: %s is not an executable file", b)
		}
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = defaultNamePrefix
	}
	if cfg.Namespace == "" {
		cfg.Namespace = defaultNamespace
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = defaultPollInterval
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}

	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("simnode: kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	// The harness plays every node's kubelet and kwok's driver: a reboot
	// polls the Node and patches it and its pods, for many nodes at once.
	// client-go's default limiter (5 QPS, burst 10) then queues requests
	// for a second or more, which would count as the product's time.
	rc.QPS, rc.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("simnode: client: %w", err)
	}

	ownDir := false
	if cfg.Dir == "" {
		parent, pattern := "", "strata-simnode-"
		// up.sh's state directory has its undo journal next to the
		// kubeconfig; down.sh clears and removes simnodes-* in it.
		if state := filepath.Dir(cfg.Kubeconfig); fileExists(filepath.Join(state, "journal")) {
			parent, pattern = state, "simnodes-"
		}
		if cfg.Dir, err = os.MkdirTemp(parent, pattern); err != nil {
			return nil, fmt.Errorf("simnode: %w", err)
		}
		ownDir = true
		if cfg.MemoryDisks {
			if err := unix.Mount("tmpfs", cfg.Dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
				_ = os.Remove(cfg.Dir)
				return nil, fmt.Errorf("simnode: mount a tmpfs on %s: %w", cfg.Dir, err)
			}
		}
	} else if cfg.MemoryDisks {
		return nil, errors.New("simnode: MemoryDisks needs a directory the harness makes (Dir empty)")
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("simnode: %w", err)
	}

	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	c := &Cluster{
		cfg:     cfg,
		client:  cs,
		prefix:  cfg.NamePrefix + "-" + hex.EncodeToString(rnd[:]),
		log:     &syncWriter{w: cfg.Log},
		spawner: newSpawner(),
		ownDir:  ownDir,
		nodes:   map[string]*node{},
	}
	// The supervisors outlive the ctx of the call that started them (a
	// BeforeEach's); Stop ends them.
	c.ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return c, nil
}

// Client is the harness's client of the test cluster.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// AddNodes registers n simulated Nodes with the extra labels, installs each
// (`bootc-sim sim init` with the original image), waits until the cluster
// sees them Ready and schedulable (no not-ready taint) and starts their
// daemons. It returns the new nodes' names.
func (c *Cluster) AddNodes(ctx context.Context, n int, labels map[string]string) ([]string, error) {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, errors.New("simnode: AddNodes after Stop")
	}
	var added []*node
	for range n {
		name := fmt.Sprintf("%s-%d", c.prefix, len(c.order))
		nd := &node{name: name, root: filepath.Join(c.cfg.Dir, name)}
		nd.logs = &lineWriter{prefix: name + ": ", out: c.log}
		c.nodes[name] = nd
		c.order = append(c.order, name)
		added = append(added, nd)
	}
	c.mu.Unlock()

	errs := make([]error, len(added))
	var wg sync.WaitGroup
	for i, nd := range added {
		wg.Go(func() { errs[i] = c.install(ctx, nd, labels) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	names := make([]string, 0, len(added))
	for _, nd := range added {
		if err := c.run(nd); err != nil {
			return nil, err
		}
		names = append(names, nd.name)
	}
	return names, nil
}

// run starts what runs on a booted, registered node: its boot check,
// its daemon and the harness's watch for its reboot requests.
func (c *Cluster) run(nd *node) error {
	nd.mu.Lock()
	err := c.startBootCheck(nd)
	nd.mu.Unlock()
	if err != nil {
		return err
	}
	if err := c.StartDaemon(nd.name); err != nil {
		return err
	}
	c.wg.Go(func() { c.supervise(nd) })
	return nil
}

// install makes the node's root, installs the original image into it and
// registers the Node, Ready.
func (c *Cluster) install(ctx context.Context, nd *node, labels map[string]string) error {
	if err := os.MkdirAll(nd.root, 0o755); err != nil {
		return fmt.Errorf("simnode: %w", err)
	}
	if err := c.installImage(ctx, nd, c.cfg.OriginalImage); err != nil {
		return err
	}
	return c.register(ctx, nd, labels)
}

// installImage installs image into nd's root (`bootc-sim sim init`).
func (c *Cluster) installImage(ctx context.Context, nd *node, image string) error {
	c.logf(nd, "installing %s", image)
	args := []string{"sim", "init", image}
	if c.cfg.BootcVersion != "" {
		args = append(args, "--bootc-version", c.cfg.BootcVersion)
	}
	_, err := c.Sim(ctx, nd.name, args...)
	return err
}

// register registers nd's Node, Ready, as its kubelet would.
func (c *Cluster) register(ctx context.Context, nd *node, labels map[string]string) error {
	bootID, err := readBootID(nd.root)
	if err != nil {
		return err
	}
	// The labels a kubelet sets, then the test's; ours win.
	all := map[string]string{
		corev1.LabelHostname:   nd.name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
		WorkerRoleLabel:        "",
	}
	maps.Copy(all, labels)
	all[SimulatedLabel] = "true"
	if err := c.registerNode(ctx, nd.name, all, bootID); err != nil {
		return err
	}
	c.logf(nd, "registered, Ready")
	return nil
}

// Nodes returns the names of all nodes, in the order they were added.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.order)
}

// Root returns the node's directory: its host root (the daemon's
// --host-root) and bootc-sim's BOOTC_SIM_ROOT.
func (c *Cluster) Root(name string) string {
	nd, err := c.node(name)
	if err != nil {
		return ""
	}
	return nd.root
}

// Reboots returns how many times the node has been rebooted fully
// (crashes included).
func (c *Cluster) Reboots(name string) int {
	nd, err := c.node(name)
	if err != nil {
		return 0
	}
	return int(nd.reboots.Load())
}

// SoftReboots returns how many times the node has been soft-rebooted.
func (c *Cluster) SoftReboots(name string) int {
	nd, err := c.node(name)
	if err != nil {
		return 0
	}
	return int(nd.softReboots.Load())
}

// DaemonLog returns all the node's daemons have written so far (every
// start of it, one after the other).
func (c *Cluster) DaemonLog(name string) string {
	nd, err := c.node(name)
	if err != nil {
		return ""
	}
	return nd.logs.String()
}

// Err returns what went wrong behind the tests' back so far: a reboot
// that failed, a daemon that exited by itself.
func (c *Cluster) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.errs...)
}

func (c *Cluster) node(name string) (*node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd, ok := c.nodes[name]
	if !ok {
		return nil, fmt.Errorf("simnode: no node %q", name)
	}
	return nd, nil
}

func (c *Cluster) record(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
}

func (c *Cluster) logf(nd *node, format string, args ...any) {
	name := "-"
	if nd != nil {
		name = nd.name
	}
	fmt.Fprintf(c.log, "%s simnode %s: %s\n", time.Now().Format("15:04:05.000"), name, fmt.Sprintf(format, args...))
}

// Stop stops every daemon and supervisor, deletes the Nodes and removes
// the nodes' directories (first clearing the immutable flag ostree puts on
// deployments). It does all it can even when a step fails, and returns
// every error, including Err's. Calling it again does nothing.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	nodes := make([]*node, 0, len(c.order))
	for _, name := range c.order {
		nodes = append(nodes, c.nodes[name])
	}
	c.mu.Unlock()

	// A failed spec's ctx may be cancelled already; cleaning up must not.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()

	c.cancel()
	c.wg.Wait()
	var errs []error
	for _, nd := range nodes {
		nd.mu.Lock()
		if err := c.killDaemon(nd); err != nil {
			errs = append(errs, err)
		}
		if err := c.killBootCheck(nd); err != nil {
			errs = append(errs, err)
		}
		nd.mu.Unlock()
	}
	c.spawner.close()
	for _, nd := range nodes {
		if err := c.deleteNode(ctx, nd.name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, nd := range nodes {
		if err := removeRoot(ctx, nd.root); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ownDir {
		if c.cfg.MemoryDisks {
			if err := unix.Unmount(c.cfg.Dir, unix.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("simnode: unmount %s: %w", c.cfg.Dir, err))
			}
		}
		if err := os.RemoveAll(c.cfg.Dir); err != nil {
			errs = append(errs, fmt.Errorf("simnode: %w", err))
		}
	}
	return errors.Join(append([]error{c.Err()}, errs...)...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
