// Command benchrollout measures what a configuration change costs a pool's
// nodes under each disruption (make bench-rollout, issue 21 point 7), on
// the test cluster with Strata installed (hack/cluster/deploy.sh): a pool
// of simulated nodes (test/simnode, each with its real strata-daemon and
// bootc-sim's real ostree sysroot) whose full reboot takes 20 s and soft
// reboot 2 s, with pods on every node so that drains evict. It changes,
// one after the other, a file under a Restart policy, a file no policy
// names (the default: a soft reboot), a file under a Reboot policy, and a
// kernel argument, and prints per case the time from the MachineConfig's
// update to every node updated, drains, pods evicted, reboots by kind,
// node-seconds cordoned, node-seconds NotReady and the API server's write
// requests (anyone's) over the case. It exits non-zero when
// a case does not finish, and, unless -fail-on-missed-goal=false, when
// a goal is missed: the Restart case without drain, eviction or reboot,
// every node applied within 2 s of the image being pushed; the soft-reboot
// case at least 5x faster than the Reboot case.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/simnode"
)

const (
	namespace = "strata-system"
	pool      = "bench-rollout"
	mcName    = "50-bench-rollout"
	label     = "bench-rollout"

	restartFile = "/etc/bench/restart.conf"
	rebootFile  = "/etc/bench/reboot.conf"
	otherFile   = "/etc/bench/other.conf"
	service     = "bench.service"
)

// Goals of issue 21 point 7.
const (
	liveApplyGoal = 2 * time.Second
	softSpeedup   = 5.0
)

type options struct {
	kubeconfig, registry, nodeLog  string
	bootcVersion                   string
	nodes, podsPerNode, maxUnavail int
	stageAhead                     int
	memoryDisks                    bool
	daemonVerbosity                int
	reboot, softReboot             time.Duration
	// failOnMissedGoal: a missed goal is an exit status, not only a line.
	failOnMissedGoal bool
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", ".infra/cluster/kubeconfig", "the test cluster's kubeconfig")
	flag.StringVar(&o.registry, "registry", "127.0.0.1:5000", "the test cluster's registry (plain HTTP)")
	flag.IntVar(&o.nodes, "nodes", 10, "simulated nodes in the pool")
	flag.IntVar(&o.podsPerNode, "pods-per-node", 2, "pods bound to each node, for the drains to evict")
	flag.IntVar(&o.maxUnavail, "max-unavailable", 5, "the pool's maxUnavailable during the measured cases")
	flag.IntVar(&o.stageAhead, "stage-ahead", 5, "the pool's stageAhead during the measured cases (the same for every case)")
	// stageAhead needs bootc's switch --download-only, which only bootc's
	// main branch has (bootc-sim models both); with 1.16 every node stages
	// in its own slot.
	flag.StringVar(&o.bootcVersion, "bootc-version", string(bootcsim.VersionMain), "the bootc release the simulated nodes run")
	flag.IntVar(&o.daemonVerbosity, "daemon-verbosity", 0, "the daemons' log verbosity (2: every action of their state machine, with -node-log)")
	flag.BoolVar(&o.memoryDisks, "memory-disks", true, "keep the simulated nodes' disks in memory (a tmpfs), not on the one disk of this machine they would share (simnode.Config.MemoryDisks)")
	flag.StringVar(&o.nodeLog, "node-log", "", "keep the simulated nodes' log (their daemons' output) in this file")
	flag.DurationVar(&o.reboot, "reboot", 20*time.Second, "how long a simulated full reboot keeps a node down")
	flag.DurationVar(&o.softReboot, "soft-reboot", 2*time.Second, "how long a simulated soft reboot keeps a node down")
	flag.BoolVar(&o.failOnMissedGoal, "fail-on-missed-goal", true, "exit non-zero when a goal is missed (false: print the goals only)")
	timeout := flag.Duration("timeout", 15*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err := run(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrollout:", err)
		os.Exit(1)
	}
}

// daemonArgs: where a node's time goes shows in milliseconds, not
// seconds, and with verbosity 2 every action of the daemon's state
// machine is logged.
func daemonArgs(verbosity int) []string {
	args := []string{"--zap-time-encoding=rfc3339nano"}
	if verbosity > 0 {
		args = append(args, fmt.Sprintf("--zap-log-level=%d", verbosity))
	}
	return args
}

func logf(format string, args ...any) {
	fmt.Printf("%s benchrollout: "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// bench is one run's cluster, nodes and objects.
type bench struct {
	o     options
	c     client.WithWatch
	cs    kubernetes.Interface
	sims  *simnode.Cluster
	nodes []string
	ns    string
	image string // the pool's image now
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("run from the repository's root (make bench-rollout), not %s", root)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("no test cluster? make bench-rollout starts it: %w", err)
	}
	// The bench polls and watches a lot; client-go's default limiter
	// would blur the figures.
	cfg.QPS, cfg.Burst = 200, 400
	b := &bench{o: o}
	if b.c, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return err
	}
	if b.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if err := b.secrets(ctx); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "strata-benchrollout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf("building strata-daemon and bootc-sim")
	daemon, bootcSim, err := simnode.Build(ctx, root, dir)
	if err != nil {
		return err
	}
	original, err := digestOf(ctx, o.registry+"/strata/os-base:latest")
	if err != nil {
		return fmt.Errorf("os-base (make images): %w", err)
	}
	logPath := filepath.Join(dir, "nodes.log")
	if o.nodeLog != "" {
		logPath = o.nodeLog
	}
	nodeLog, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer nodeLog.Close()
	b.sims, err = simnode.New(ctx, simnode.Config{
		Kubeconfig: o.kubeconfig, Daemon: daemon, BootcSim: bootcSim, OriginalImage: original,
		NamePrefix: "bench", Log: nodeLog, InsecureRegistries: []string{o.registry},
		RebootDuration: o.reboot, SoftRebootDuration: o.softReboot, BootcVersion: o.bootcVersion,
		DaemonArgs: daemonArgs(o.daemonVerbosity),
		// Ten nodes on one disk would each wait for the others' syncs.
		MemoryDisks: o.memoryDisks,
	})
	if err != nil {
		return err
	}
	failed := true
	defer func() {
		if err := b.sims.Stop(context.WithoutCancel(ctx)); err != nil {
			logf("stopping the simulated nodes: %v", err)
		}
		if failed {
			tail(nodeLog, logPath)
		}
	}()
	logf("registering %d simulated nodes (full reboot %s, soft reboot %s)", o.nodes, o.reboot, o.softReboot)
	if b.nodes, err = b.sims.AddNodes(ctx, o.nodes, map[string]string{label: "true"}); err != nil {
		return err
	}
	if err := b.setUp(ctx, original); err != nil {
		return err
	}
	defer b.tearDown(context.WithoutCancel(ctx))

	logf("first image: every node reboots from its original image, all at once (not measured)")
	if b.image, err = b.waitImage(ctx, ""); err != nil {
		return err
	}
	if err := b.waitUpdated(ctx, b.image); err != nil {
		return err
	}
	if err := b.setRollout(ctx, o.maxUnavail, o.stageAhead); err != nil {
		return err
	}

	cases := []struct {
		name   string
		config config
	}{
		// The live apply last but one: a node that applied one live keeps
		// that image staged for its next boot, so it cannot stage the next
		// image ahead (the stage would replace it); the case after it
		// (the kernel argument) stages in its slots.
		{"SoftReboot (default)", config{restart: "1", reboot: "1", other: "2"}},
		{"Reboot (policy)", config{restart: "1", reboot: "2", other: "2"}},
		{"Restart (policy)", config{restart: "2", reboot: "2", other: "2"}},
		{"kernel argument", config{restart: "2", reboot: "2", other: "2", kargs: []string{"bench.karg=2"}}},
	}
	var results []result
	for _, k := range cases {
		r, err := b.measure(ctx, k.name, k.config)
		if err != nil {
			return fmt.Errorf("case %s: %w", k.name, err)
		}
		results = append(results, r)
	}
	if err := b.sims.Err(); err != nil {
		return err
	}
	failed = false

	fmt.Printf("\nrollout of one change to %d simulated nodes running bootc %s, maxUnavailable %d and stageAhead %d in every case (full reboot %s, soft reboot %s, %d pods per node); bench took %s\n",
		o.nodes, o.bootcVersion, o.maxUnavail, o.stageAhead, o.reboot, o.softReboot, o.podsPerNode, time.Since(start).Round(time.Second))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "case\tdecision\tapply→all updated\tpushed→all updated\tdrains\tevicted\tfull reboots\tsoft reboots\tlive\tnode-s cordoned\tnode-s NotReady\tAPI writes\t")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%.1fs\t%.1fs\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%d\t\n", r.name, r.decisions, r.total.Seconds(), r.fromPush.Seconds(),
			r.drains, r.evicted, r.reboots, r.softReboots, r.live, r.cordoned.Seconds(), r.notReady.Seconds(), r.writes.total())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := goals(results); err != nil && o.failOnMissedGoal {
		return err
	}
	return nil
}

// goals checks issue 21's goals and says each.
func goals(rs []result) error {
	byName := map[string]result{}
	for _, r := range rs {
		byName[r.name] = r
	}
	live, soft, full := byName["Restart (policy)"], byName["SoftReboot (default)"], byName["Reboot (policy)"]
	var missed []string
	check := func(ok bool, format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		mark := "ok  "
		if !ok {
			mark = "MISS"
			missed = append(missed, s)
		}
		fmt.Printf("goal %s %s\n", mark, s)
	}
	fmt.Println()
	check(live.drains == 0 && live.evicted == 0 && live.reboots == 0 && live.softReboots == 0,
		"Restart: 0 drains, 0 evictions, 0 reboots (got %d, %d, %d+%d)", live.drains, live.evicted, live.reboots, live.softReboots)
	check(live.fromPush <= liveApplyGoal, "Restart: every node applied within %s of the image being pushed (got %.2fs)", liveApplyGoal, live.fromPush.Seconds())
	ratio := full.total.Seconds() / soft.total.Seconds()
	check(ratio >= softSpeedup, "SoftReboot at least %.0fx faster than Reboot (got %.1fx: %.1fs vs %.1fs)", softSpeedup, ratio, soft.total.Seconds(), full.total.Seconds())
	if len(missed) > 0 {
		return fmt.Errorf("%d goal(s) missed: %s", len(missed), strings.Join(missed, "; "))
	}
	return nil
}

// config is the pool's MachineConfig: the three files and kernel
// arguments.
type config struct {
	restart, reboot, other string
	kargs                  []string
}

func (k config) machineConfig() *v1alpha1.MachineConfig {
	file := func(path, content string) string {
		return fmt.Sprintf(`{"path":%q,"mode":420,"contents":{"source":"data:,%s"}}`, path, content)
	}
	ign := `{"ignition":{"version":"3.4.0"},"storage":{"files":[` +
		file(restartFile, k.restart) + "," + file(rebootFile, k.reboot) + "," + file(otherFile, k.other) + `]}}`
	return &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: mcName, Labels: map[string]string{label: "true"}},
		Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}, KernelArguments: k.kargs},
	}
}

func (b *bench) secrets(ctx context.Context) error {
	for name, auth := range map[string]string{"bench-push": "YmVuY2g6cHVzaA==", "bench-pull": "YmVuY2g6cHVsbA=="} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + b.o.registry + `":{"auth":"` + auth + `"}}}`)},
		}
		if err := b.c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("secret %s: %w", name, err)
		}
	}
	return nil
}

// setUp creates the disruption policy, the pods' namespace and the pool,
// its MachineConfig and MachineOSConfig; the first rollout takes every
// node at once.
func (b *bench) setUp(ctx context.Context, base string) error {
	ns, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-rollout-"}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	b.ns = ns.Name
	objs := []client.Object{
		&v1alpha1.MachineConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MachineConfigurationName},
			Spec: v1alpha1.MachineConfigurationSpec{NodeDisruptionPolicy: v1alpha1.NodeDisruptionPolicyConfig{
				Files: []v1alpha1.NodeDisruptionPolicyFile{
					{Path: restartFile, Actions: []v1alpha1.NodeDisruptionPolicyAction{
						{Type: v1alpha1.RestartAction, Restart: &v1alpha1.NodeDisruptionPolicyService{ServiceName: service}}}},
					{Path: rebootFile, Actions: []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.RebootAction}}},
				},
			}},
		},
		&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: pool}, Spec: v1alpha1.MachineConfigPoolSpec{
			NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
			MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "true"}},
			MaxUnavailable:        ptr.To(intstr.FromInt32(int32(len(b.nodes)))),
			HealthCheckTimeout:    &metav1.Duration{Duration: 2 * time.Minute},
			DrainTimeout:          &metav1.Duration{Duration: 5 * time.Minute},
		}},
		config{restart: "1", reboot: "1", other: "1"}.machineConfig(),
		&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: pool}, Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: pool},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder},
			BaseImagePullSpec:       base,
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "bench-push"},
			RenderedImagePullSecret: &v1alpha1.SecretReference{Name: "bench-pull"},
			RenderedImagePushSpec:   fmt.Sprintf("%s/strata/bench-rollout-%d:latest", b.o.registry, time.Now().Unix()),
		}},
	}
	for _, o := range objs {
		if err := b.c.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

func (b *bench) tearDown(ctx context.Context) {
	for _, o := range []client.Object{
		&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: pool}},
		&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: mcName}},
		&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: pool}},
		&v1alpha1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.MachineConfigurationName}},
	} {
		if err := client.IgnoreNotFound(b.c.Delete(ctx, o)); err != nil {
			logf("delete %T %s: %v", o, o.GetName(), err)
		}
	}
	if b.ns != "" {
		_ = b.cs.CoreV1().Namespaces().Delete(ctx, b.ns, metav1.DeleteOptions{})
	}
}

// setRollout sets the pool's maxUnavailable and stageAhead; the measured
// cases all run with the same ones.
func (b *bench) setRollout(ctx context.Context, maxUnavail, stageAhead int) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.MachineConfigPool{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: pool}, p); err != nil {
			return err
		}
		p.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(int32(maxUnavail)))
		p.Spec.StageAhead = ptr.To(int32(stageAhead))
		return b.c.Update(ctx, p)
	})
}

// result is one case's figures.
type result struct {
	name                       string
	decisions                  string
	total, fromPush            time.Duration
	drains, evicted            int
	reboots, softReboots, live int
	cordoned, notReady         time.Duration
	writes                     apiWrites
}

// measure applies one change and follows it until every node is updated.
func (b *bench) measure(ctx context.Context, name string, k config) (result, error) {
	r := result{name: name}
	if err := b.pods(ctx); err != nil {
		return r, err
	}
	reboots, soft := map[string]int{}, map[string]int{}
	for _, n := range b.nodes {
		reboots[n], soft[n] = b.sims.Reboots(n), b.sims.SoftReboots(n)
	}
	w, err := b.watch(ctx)
	if err != nil {
		return r, err
	}
	defer w.stop()
	builds, err := b.watchBuilds(ctx, b.image)
	if err != nil {
		return r, err
	}
	defer builds.stop()
	writesBefore, err := b.apiWriteCounts(ctx)
	if err != nil {
		return r, err
	}
	logf("case %s: updating the MachineConfig", name)
	applied := time.Now()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &v1alpha1.MachineConfig{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: mcName}, mc); err != nil {
			return err
		}
		mc.Spec = k.machineConfig().Spec
		return b.c.Update(ctx, mc)
	}); err != nil {
		return r, err
	}
	image, err := b.waitImage(ctx, b.image)
	if err != nil {
		return r, err
	}
	// When the build's success was first seen: the poll above may see
	// it later on a loaded machine.
	pushed, ok := builds.succeeded(image)
	if !ok {
		if err := poll(ctx, 30*time.Second, "the watch to see the build of "+image, func() (bool, error) {
			pushed, ok = builds.succeeded(image)
			return ok, nil
		}); err != nil {
			return r, err
		}
	}
	b.image = image
	logf("case %s: image pushed %.2fs after the apply", name, pushed.Sub(applied).Seconds())
	// From the watch alone: polling every node through the API server
	// would load the machine the rollout runs on, and the watch's own
	// times are the figures.
	if err := poll(ctx, 10*time.Minute, "every node updated", func() (bool, error) {
		if err := b.sims.Err(); err != nil {
			return false, err
		}
		if err := w.degraded(); err != nil {
			return false, err
		}
		return w.updatedCount(image) == len(b.nodes), nil
	}); err != nil {
		return r, err
	}
	w.stop()
	writesAfter, err := b.apiWriteCounts(ctx)
	if err != nil {
		return r, err
	}
	r.writes = writesAfter.since(writesBefore)
	last := w.lastUpdated(image)
	r.total, r.fromPush = last.Sub(applied), last.Sub(pushed)
	r.drains, r.evicted = w.drains(), w.evicted()
	r.cordoned, r.notReady = w.cordoned(last), w.notReadyFor(last)
	kinds := map[string]int{}
	for _, n := range b.nodes {
		r.reboots += b.sims.Reboots(n) - reboots[n]
		r.softReboots += b.sims.SoftReboots(n) - soft[n]
		node, err := b.cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return r, err
		}
		kind, _, _ := strings.Cut(node.Annotations[v1alpha1.DisruptionAnnotation], ":")
		kinds[kind]++
		if kind == "Live" {
			r.live++
		}
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(ks)
	r.decisions = strings.Join(ks, ",")
	logf("case %s: every node updated %.1fs after the apply (%s)", name, r.total.Seconds(), r.decisions)
	logf("case %s: API writes: %s", name, r.writes)
	return r, nil
}

// pods makes sure each node runs its pods (the previous case's drains
// evicted them), and waits until they run. A pod still terminating is
// created again once it is gone.
func (b *bench) pods(ctx context.Context) error {
	return poll(ctx, time.Minute, "pods running", func() (bool, error) {
		pods, err := b.cs.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		have := map[string]*corev1.Pod{}
		for i := range pods.Items {
			have[pods.Items[i].Name] = &pods.Items[i]
		}
		running := 0
		for _, n := range b.nodes {
			for i := range b.o.podsPerNode {
				name := fmt.Sprintf("%s-%d", n, i)
				p, ok := have[name]
				switch {
				case !ok:
					if err := b.createPod(ctx, name, n); err != nil {
						return false, err
					}
				case p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil:
					running++
				}
			}
		}
		return running == len(b.nodes)*b.o.podsPerNode, nil
	})
}

func (b *bench) createPod(ctx context.Context, name, node string) error {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Tolerations:                   []corev1.Toleration{{Key: simnode.SimulatedTaint, Operator: corev1.TolerationOpExists}},
			Containers:                    []corev1.Container{{Name: "app", Image: b.o.registry + "/strata/busybox:latest"}},
		},
	}
	if _, err := b.cs.CoreV1().Pods(b.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("pod %s: %w", name, err)
	}
	return nil
}

// waitImage waits for the pool's build of its current rendered config to
// succeed with an image other than not, polling fast: the push time is
// one of the figures.
func (b *bench) waitImage(ctx context.Context, not string) (string, error) {
	var image string
	err := poll(ctx, 10*time.Minute, "the pool's image", func() (bool, error) {
		p := &v1alpha1.MachineConfigPool{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: pool}, p); err != nil {
			return false, err
		}
		m := &v1alpha1.MachineOSConfig{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: pool}, m); err != nil {
			return false, err
		}
		if m.Status.MachineOSBuild == nil {
			return false, nil
		}
		mosb := &v1alpha1.MachineOSBuild{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: m.Status.MachineOSBuild.Name}, mosb); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if meta.IsStatusConditionTrue(mosb.Status.Conditions, v1alpha1.BuildFailed) {
			return false, fmt.Errorf("build %s failed: %+v", mosb.Name, mosb.Status.Failure)
		}
		if mosb.Spec.MachineConfig.Name != p.Status.Configuration.Name || !meta.IsStatusConditionTrue(mosb.Status.Conditions, v1alpha1.BuildSucceeded) {
			return false, nil
		}
		image = mosb.Status.DigestedImagePushSpec
		return image != "" && image != not, nil
	})
	return image, err
}

// waitUpdated waits until every node runs image's config: image current,
// config current, Done. One List a poll: it runs beside what it waits for.
func (b *bench) waitUpdated(ctx context.Context, image string) error {
	return poll(ctx, 10*time.Minute, "every node updated", func() (bool, error) {
		if err := b.sims.Err(); err != nil {
			return false, err
		}
		nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: label + "=true"})
		if err != nil {
			return false, err
		}
		if len(nodes.Items) != len(b.nodes) {
			return false, fmt.Errorf("the pool has %d nodes, want %d", len(nodes.Items), len(b.nodes))
		}
		for i := range nodes.Items {
			node, n := &nodes.Items[i], nodes.Items[i].Name
			if !updated(node, image) {
				a := node.Annotations
				if a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded {
					return false, fmt.Errorf("node %s Degraded: %s", n, a[v1alpha1.ReasonAnnotation])
				}
				return false, nil
			}
		}
		return true, nil
	})
}

func updated(n *corev1.Node, image string) bool {
	a := n.Annotations
	return a[v1alpha1.CurrentImageAnnotation] == image && a[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDone &&
		a[v1alpha1.CurrentConfigAnnotation] != "" && a[v1alpha1.CurrentConfigAnnotation] == a[v1alpha1.DesiredConfigAnnotation] &&
		!n.Spec.Unschedulable
}

func poll(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := done()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// buildWatch records when each image's build was first seen succeeded.
type buildWatch struct {
	mu     sync.Mutex
	seen   map[string]time.Time
	cancel context.CancelFunc
	done   sync.WaitGroup
	once   sync.Once
}

// watchBuilds watches the MachineOSBuilds for images other than not.
func (b *bench) watchBuilds(ctx context.Context, not string) (*buildWatch, error) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := b.c.Watch(wctx, &v1alpha1.MachineOSBuildList{})
	if err != nil {
		cancel()
		return nil, err
	}
	bw := &buildWatch{seen: map[string]time.Time{}, cancel: cancel}
	bw.done.Go(func() {
		for ev := range w.ResultChan() {
			m, ok := ev.Object.(*v1alpha1.MachineOSBuild)
			if !ok || !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.BuildSucceeded) {
				continue
			}
			image := m.Status.DigestedImagePushSpec
			bw.mu.Lock()
			if _, dup := bw.seen[image]; !dup && image != not {
				bw.seen[image] = time.Now()
			}
			bw.mu.Unlock()
		}
	})
	go func() {
		<-wctx.Done()
		w.Stop()
	}()
	return bw, nil
}

func (bw *buildWatch) succeeded(image string) (time.Time, bool) {
	bw.mu.Lock()
	defer bw.mu.Unlock()
	t, ok := bw.seen[image]
	return t, ok
}

func (bw *buildWatch) stop() {
	bw.once.Do(func() {
		bw.cancel()
		bw.done.Wait()
	})
}

// watcher follows the pool's nodes and the bench's pods during one case.
type watcher struct {
	mu   sync.Mutex
	once sync.Once
	// per node: when its current cordon and NotReady spell began (zero:
	// none), the total so far, the drain requests seen, and the last
	// time it changed to updated for an image.
	cordonSince, notReadySince map[string]time.Time
	cordonTotal, notReadyTotal time.Duration
	drainReqs                  map[string]bool
	updatedAt                  map[string]map[string]time.Time
	// degradedWhy is each Degraded node's reason.
	degradedWhy map[string]string
	deleted     int
	cancel      context.CancelFunc
	done        sync.WaitGroup
}

func (b *bench) watch(ctx context.Context) (*watcher, error) {
	w := &watcher{
		cordonSince: map[string]time.Time{}, notReadySince: map[string]time.Time{},
		drainReqs: map[string]bool{}, updatedAt: map[string]map[string]time.Time{}, degradedWhy: map[string]string{},
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	nodes, err := b.cs.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{LabelSelector: label + "=true"})
	if err != nil {
		cancel()
		return nil, err
	}
	pods, err := b.cs.CoreV1().Pods(b.ns).Watch(wctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, err
	}
	first := map[string]bool{}
	w.done.Go(func() {
		for ev := range nodes.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				// The watch starts with every node as it is: a drain
				// request already there is the previous case's.
				w.observe(n, time.Now(), !first[n.Name])
				first[n.Name] = true
			}
		}
	})
	w.done.Go(func() {
		for ev := range pods.ResultChan() {
			if ev.Type == watch.Deleted {
				w.mu.Lock()
				w.deleted++
				w.mu.Unlock()
			}
		}
	})
	return w, nil
}

func (w *watcher) observe(n *corev1.Node, now time.Time, initial bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	spell := func(since map[string]time.Time, total *time.Duration, on bool) {
		switch s, ok := since[n.Name]; {
		case on && !ok:
			since[n.Name] = now
		case !on && ok:
			*total += now.Sub(s)
			delete(since, n.Name)
		}
	}
	spell(w.cordonSince, &w.cordonTotal, n.Spec.Unschedulable)
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	spell(w.notReadySince, &w.notReadyTotal, !ready)
	if d := n.Annotations[v1alpha1.DesiredDrainAnnotation]; !initial && strings.HasPrefix(d, v1alpha1.DrainRequestPrefix) {
		w.drainReqs[n.Name+"/"+d] = true
	}
	if n.Annotations[v1alpha1.StateAnnotation] == v1alpha1.NodeStateDegraded {
		w.degradedWhy[n.Name] = n.Annotations[v1alpha1.ReasonAnnotation]
	} else {
		delete(w.degradedWhy, n.Name)
	}
	image := n.Annotations[v1alpha1.CurrentImageAnnotation]
	if w.updatedAt[image] == nil {
		w.updatedAt[image] = map[string]time.Time{}
	}
	if _, seen := w.updatedAt[image][n.Name]; updated(n, image) && !seen {
		w.updatedAt[image][n.Name] = now
	} else if !updated(n, image) {
		delete(w.updatedAt[image], n.Name)
	}
}

func (w *watcher) stop() {
	w.once.Do(func() {
		w.cancel()
		w.done.Wait()
	})
}

// lastUpdated is when the last node became updated on image.
func (w *watcher) lastUpdated(image string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, t := range w.updatedAt[image] {
		if t.After(last) {
			last = t
		}
	}
	return last
}

func (w *watcher) updatedCount(image string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.updatedAt[image])
}

// degraded names a node the watch last saw Degraded, and why.
func (w *watcher) degraded() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, why := range w.degradedWhy {
		return fmt.Errorf("node %s Degraded: %s", n, why)
	}
	return nil
}

func (w *watcher) drains() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.drainReqs)
}

func (w *watcher) evicted() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.deleted
}

// cordoned and notReadyFor are the node-seconds, spells still open
// counted up to end.
func (w *watcher) cordoned(end time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cordonTotal + open(w.cordonSince, end)
}

func (w *watcher) notReadyFor(end time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notReadyTotal + open(w.notReadySince, end)
}

func open(since map[string]time.Time, end time.Time) time.Duration {
	var d time.Duration
	for _, s := range since {
		if end.After(s) {
			d += end.Sub(s)
		}
	}
	return d
}

func digestOf(ctx context.Context, ref string) (string, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(r, remote.WithContext(ctx))
	if err != nil {
		return "", err
	}
	return r.Context().Name() + "@" + desc.Digest.String(), nil
}

// tail prints the end of the nodes' log after a failure.
func tail(f *os.File, path string) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 80 {
		lines = lines[len(lines)-80:]
	}
	fmt.Fprintf(os.Stderr, "last lines of the simulated nodes' log (%s):\n%s\n", path, strings.Join(lines, "\n"))
}
