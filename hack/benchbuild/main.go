// Command benchbuild measures what a configuration-only change costs with
// each build strategy, on the test cluster (make bench-build): it pushes a
// synthetic base of the test os-base plus incompressible layers (1 GiB by
// default) to the cluster's registry, runs the strata-controller binary,
// builds one pool with SingleJob and one with ConfigLayer, then changes a
// file of each pool's configuration in turn and times the change from the
// update of the MachineConfig to the build's success as a watcher sees it.
// It prints both times, their ratio and the controller's peak memory
// during the ConfigLayer build (VmHWM, reset just before it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
)

const (
	namespace = "strata-system"
	layerMiB  = 256
)

func main() {
	kubeconfig := flag.String("kubeconfig", ".infra/cluster/kubeconfig", "the test cluster's kubeconfig")
	reg := flag.String("registry", "127.0.0.1:5000", "the test cluster's registry")
	baseMiB := flag.Int("base-mib", 1024, "incompressible data added to the os-base image, in MiB (multiples of 256)")
	timeout := flag.Duration("timeout", 20*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err := run(ctx, *kubeconfig, *reg, *baseMiB)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchbuild:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("benchbuild: "+format+"\n", args...)
}

func run(ctx context.Context, kubeconfig, reg string, baseMiB int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("no test cluster? run make cluster-up: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	base, err := pushBase(ctx, reg, baseMiB)
	if err != nil {
		return err
	}

	logf("installing the CRDs")
	if out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "config/crd/bases").CombinedOutput(); err != nil {
		return fmt.Errorf("install CRDs: %w\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfig, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s").CombinedOutput(); err != nil {
		return fmt.Errorf("wait for CRDs: %w\n%s", err, out)
	}
	if err := ensure(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	// The local registry takes any credentials; a push secret is required.
	if err := ensure(ctx, c, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "bench-push"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + reg + `":{"auth":"YmVuY2g6YmVuY2g="}}}`)},
	}); err != nil {
		return err
	}

	ctrl, err := startController(ctx, kubeconfig, reg)
	if err != nil {
		return err
	}
	defer ctrl.stop()

	strategies := []v1alpha1.BuildStrategy{v1alpha1.SingleJobStrategy, v1alpha1.ConfigLayerStrategy}
	for _, s := range strategies {
		if err := setUp(ctx, c, s, base, reg); err != nil {
			return err
		}
		defer tearDown(context.WithoutCancel(ctx), c, s)
	}
	for _, s := range strategies {
		logf("first build of pool %s (the base is pulled, the admin stage built)", pool(s))
		if _, err := waitBuilt(ctx, c, s, ""); err != nil {
			return err
		}
	}

	took := map[v1alpha1.BuildStrategy]time.Duration{}
	var peak, before int64
	for _, s := range strategies {
		m := &v1alpha1.MachineOSConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: pool(s)}, m); err != nil {
			return err
		}
		prev := m.Status.MachineOSBuild.Name
		if s == v1alpha1.ConfigLayerStrategy {
			if before, err = ctrl.resetPeak(); err != nil {
				return err
			}
		}
		logf("changing a file of pool %s", pool(s))
		mc := &v1alpha1.MachineConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: "50-" + pool(s)}, mc); err != nil {
			return err
		}
		start := time.Now()
		mc.Spec = machineConfig(s, "changed at "+start.Format(time.RFC3339Nano)).Spec
		if err := c.Update(ctx, mc); err != nil {
			return err
		}
		b, err := waitBuilt(ctx, c, s, prev)
		if err != nil {
			return err
		}
		took[s] = time.Since(start)
		if s == v1alpha1.ConfigLayerStrategy {
			if peak, err = ctrl.peak(); err != nil {
				return err
			}
		}
		logf("pool %s: %s, stages %s", pool(s), took[s].Round(time.Millisecond), stages(b))
	}

	size, err := sizeMiB(ctx, base)
	if err != nil {
		return err
	}
	job, layer := took[v1alpha1.SingleJobStrategy], took[v1alpha1.ConfigLayerStrategy]
	fmt.Printf("\nconfiguration-only change on a %d MiB base (os-base + %d MiB incompressible), MachineConfig update to image pushed:\n", size, baseMiB)
	fmt.Printf("  SingleJob    %10s\n", job.Round(time.Millisecond))
	fmt.Printf("  ConfigLayer  %10s\n", layer.Round(time.Millisecond))
	fmt.Printf("  ratio        %10.1fx\n", float64(job)/float64(layer))
	fmt.Printf("  controller peak RSS during the ConfigLayer build %.1f MiB (%.1f MiB before it: %+.1f MiB)\n",
		float64(peak)/(1<<20), float64(before)/(1<<20), float64(peak-before)/(1<<20))
	return nil
}

// pushBase pushes os-base plus baseMiB of random layers, once: a base of
// the same size already there is reused.
func pushBase(ctx context.Context, reg string, baseMiB int) (string, error) {
	tag, err := name.ParseReference(fmt.Sprintf("%s/strata/bench-base:%dm", reg, baseMiB), name.Insecure)
	if err != nil {
		return "", err
	}
	if desc, err := remote.Head(tag, remote.WithContext(ctx)); err == nil {
		logf("reusing the base %s", tag)
		return tag.Context().Name() + "@" + desc.Digest.String(), nil
	}
	osBase, err := name.ParseReference(reg+"/strata/os-base:latest", name.Insecure)
	if err != nil {
		return "", err
	}
	img, err := remote.Image(osBase, remote.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("os-base (make images): %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return "", err
	}
	lt := types.DockerLayer
	if mt == types.OCIManifestSchema1 {
		lt = types.OCILayer
	}
	for i := 0; i < baseMiB/layerMiB; i++ {
		logf("making incompressible layer %d of %d MiB", i+1, layerMiB)
		l, err := random.Layer(layerMiB<<20, lt)
		if err != nil {
			return "", err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return "", err
		}
	}
	logf("pushing %s", tag)
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Name() + "@" + d.String(), nil
}

// sizeMiB is the compressed size of an image's layers.
func sizeMiB(ctx context.Context, image string) (int64, error) {
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		return 0, err
	}
	img, err := remote.Image(ref, remote.WithContext(ctx))
	if err != nil {
		return 0, err
	}
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range m.Layers {
		n += l.Size
	}
	return n >> 20, nil
}

func pool(s v1alpha1.BuildStrategy) string { return "bench-" + strings.ToLower(string(s)) }

func machineConfig(s v1alpha1.BuildStrategy, content string) *v1alpha1.MachineConfig {
	mc := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "50-" + pool(s), Labels: map[string]string{"bench": pool(s)}}}
	mc.Spec.Config = runtime.RawExtension{Raw: fmt.Appendf(nil,
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/strata/bench.conf","mode":420,"contents":{"source":"data:,%s"}}]}}`,
		strings.NewReplacer(":", "%3A", " ", "%20").Replace(content))}
	return mc
}

func setUp(ctx context.Context, c client.Client, s v1alpha1.BuildStrategy, base, reg string) error {
	p := pool(s)
	objs := []client.Object{
		&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: p}, Spec: v1alpha1.MachineConfigPoolSpec{
			MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": p}},
			// No node is selected: the benchmark builds, nothing rolls out.
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"strata.dev/bench": "none"}},
		}},
		machineConfig(s, "initial"),
		&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: p}, Spec: v1alpha1.MachineOSConfigSpec{
			MachineConfigPool:       v1alpha1.LocalObjectReference{Name: p},
			ImageBuilder:            v1alpha1.MachineOSImageBuilder{ImageBuilderType: v1alpha1.JobBuilder, Strategy: s},
			BaseImagePullSpec:       base,
			RenderedImagePushSecret: v1alpha1.SecretReference{Name: "bench-push"},
			RenderedImagePushSpec:   reg + "/strata/" + p + ":latest",
			ContainerFile:           []v1alpha1.MachineOSContainerfile{{Content: "RUN echo admin > /usr/share/strata-bench\n"}},
		}},
	}
	for _, o := range objs {
		if err := ensure(ctx, c, o); err != nil {
			return err
		}
	}
	return nil
}

func tearDown(ctx context.Context, c client.Client, s v1alpha1.BuildStrategy) {
	p := pool(s)
	for _, o := range []client.Object{
		&v1alpha1.MachineOSConfig{ObjectMeta: metav1.ObjectMeta{Name: p}},
		&v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "50-" + p}},
		&v1alpha1.MachineConfigPool{ObjectMeta: metav1.ObjectMeta{Name: p}},
	} {
		_ = client.IgnoreNotFound(c.Delete(ctx, o))
	}
}

func ensure(ctx context.Context, c client.Client, o client.Object) error {
	if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
	}
	return nil
}

// waitBuilt waits for the pool's MachineOSConfig to have a succeeded
// build other than prev, polling fast enough that the poll does not
// blur a one-second figure.
func waitBuilt(ctx context.Context, c client.Client, s v1alpha1.BuildStrategy, prev string) (*v1alpha1.MachineOSBuild, error) {
	for {
		m := &v1alpha1.MachineOSConfig{}
		if err := c.Get(ctx, client.ObjectKey{Name: pool(s)}, m); err != nil {
			return nil, err
		}
		if d := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConfigDegraded); d != nil && d.Status == metav1.ConditionTrue {
			return nil, fmt.Errorf("MachineOSConfig %s is degraded: %s", m.Name, d.Message)
		}
		if ref := m.Status.MachineOSBuild; ref != nil && ref.Name != prev {
			b := &v1alpha1.MachineOSBuild{}
			if err := c.Get(ctx, client.ObjectKey{Name: ref.Name}, b); err == nil && meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded) {
				return b, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a build of %s: %w", pool(s), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func stages(b *v1alpha1.MachineOSBuild) string {
	var parts []string
	for _, st := range b.Status.Stages {
		d := "running"
		if st.Duration != nil {
			d = st.Duration.Duration.String()
		}
		if st.Reused {
			d += " (reused)"
		}
		parts = append(parts, string(st.Name)+" "+d)
	}
	return strings.Join(parts, ", ")
}

// controller is the strata-controller binary, run as in the e2e suite.
type controller struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startController(ctx context.Context, kubeconfig, reg string) (*controller, error) {
	dir, err := os.MkdirTemp("", "benchbuild-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "strata-controller")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/strata-controller").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build strata-controller: %w\n%s", err, out)
	}
	raw, err := yaml.Marshal(map[string]any{"build": map[string]any{
		"builderImage":       reg + "/strata/builder:latest",
		"namespace":          namespace,
		"backoffLimit":       0,
		"insecureRegistries": []string{reg},
		"placement":          map[string]any{"hostNetwork": true},
	}})
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", cfgPath, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	logf("strata-controller runs as pid %d, logging to %s", cmd.Process.Pid, logPath)
	c := &controller{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(c.done) }()
	return c, nil
}

func (c *controller) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// resetPeak resets the kernel's record of the controller's peak RSS and
// returns its RSS now.
func (c *controller) resetPeak() (int64, error) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", c.cmd.Process.Pid), []byte("5"), 0); err != nil {
		return 0, fmt.Errorf("reset peak RSS: %w", err)
	}
	return c.status("VmRSS")
}

// peak is the controller's peak RSS since resetPeak.
func (c *controller) peak() (int64, error) { return c.status("VmHWM") }

func (c *controller) status(field string) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New(field + " not in /proc/PID/status")
}
