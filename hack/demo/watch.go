package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
)

// watcher follows the sample pool's build and its nodes, and prints a line
// for each change a person would want to see.
type watcher struct {
	c       client.Client
	nodes   []string
	started time.Time
	seen    map[string]string
	// notImage, when set, is an image follow does not stop at: the one
	// the pool ran before a change.
	notImage string
}

func newWatcher(kubeconfig string, nodes []string, started time.Time) (*watcher, error) {
	// The demo's output is its progress lines: controller-runtime would
	// print a stack trace for a logger never set, and client-go the API
	// server's deprecation warnings.
	ctrllog.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.WarningHandler = rest.NoWarnings{}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	return &watcher{c: c, nodes: nodes, started: started, seen: map[string]string{}}, nil
}

// show prints line under key when it differs from the last one shown.
func (w *watcher) show(key, line string) {
	if w.seen[key] == line {
		return
	}
	w.seen[key] = line
	say(w.started, "%s", line)
}

// follow polls until every node runs the MachineOSConfig's current image
// (other than notImage) and returns that image. A failed build, the
// demo's nodes going away or the deadline end it with an error.
func (w *watcher) follow(ctx context.Context, served <-chan error) (string, error) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		image, done, err := w.poll(ctx)
		if err != nil || done {
			return image, err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the pool did not reach its image in time: %w", ctx.Err())
		case err := <-served:
			return "", fmt.Errorf("the simulated nodes stopped: %w", err)
		case <-tick.C:
		}
	}
}

func (w *watcher) poll(ctx context.Context) (string, bool, error) {
	mosc := &v1alpha1.MachineOSConfig{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: pool}, mosc); err != nil {
		return "", false, client.IgnoreNotFound(err)
	}
	builds := &v1alpha1.MachineOSBuildList{}
	if err := w.c.List(ctx, builds); err != nil {
		return "", false, err
	}
	var current *v1alpha1.MachineOSBuild
	for i := range builds.Items {
		b := &builds.Items[i]
		if b.Spec.MachineOSConfig.Name != pool {
			continue
		}
		w.show("build/"+b.Name, "build "+b.Name+": "+buildLine(b))
		if f := b.Status.Failure; f != nil && meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildFailed) {
			return "", false, fmt.Errorf("build %s failed: %s", b.Name, f.Message)
		}
		if mosc.Status.MachineOSBuild != nil && mosc.Status.MachineOSBuild.Name == b.Name {
			current = b
		}
	}
	image := mosc.Status.CurrentImagePullSpec
	if image != "" {
		w.show("mosc", "MachineOSConfig worker: current image "+image)
	}
	done := image != "" && image != w.notImage && current != nil && meta.IsStatusConditionTrue(current.Status.Conditions, v1alpha1.BuildSucceeded)
	for _, name := range w.nodes {
		n := &corev1.Node{}
		if err := w.c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return "", false, err
		}
		a := n.Annotations
		state := a[v1alpha1.StateAnnotation]
		line := fmt.Sprintf("node %s: %-9s current %s desired %s", name, orDash(state),
			short(a[v1alpha1.CurrentImageAnnotation]), short(a[v1alpha1.DesiredImageAnnotation]))
		if n.Spec.Unschedulable {
			line += " (cordoned)"
		}
		if r := a[v1alpha1.ReasonAnnotation]; r != "" {
			line += ": " + r
		}
		w.show("node/"+name, line)
		if state == v1alpha1.NodeStateDegraded {
			return "", false, fmt.Errorf("node %s is Degraded: %s", name, a[v1alpha1.ReasonAnnotation])
		}
		if state != v1alpha1.NodeStateDone || a[v1alpha1.CurrentImageAnnotation] != image || n.Spec.Unschedulable {
			done = false
		}
	}
	return image, done, nil
}

// buildLine is a build's phase and its stages.
func buildLine(b *v1alpha1.MachineOSBuild) string {
	phase := "Pending"
	for _, t := range []string{v1alpha1.BuildSucceeded, v1alpha1.BuildFailed, v1alpha1.BuildInterrupted, v1alpha1.BuildBuilding} {
		if meta.IsStatusConditionTrue(b.Status.Conditions, t) {
			phase = t
			break
		}
	}
	var stages []string
	for _, s := range b.Status.Stages {
		st := string(s.Name)
		switch {
		case s.Reused:
			st += " reused"
		case s.Duration != nil:
			st += " " + s.Duration.Round(100*time.Millisecond).String()
		default:
			st += " running"
		}
		stages = append(stages, st)
	}
	slices.Sort(stages)
	line := phase
	if b.Status.Strategy != "" {
		line += " (" + string(b.Status.Strategy) + ")"
	}
	if len(stages) > 0 {
		line += ", stages: " + strings.Join(stages, ", ")
	}
	if b.Status.DigestedImagePushSpec != "" {
		line += ", image " + short(b.Status.DigestedImagePushSpec)
	}
	return line
}

// short keeps an image reference readable: the repository's last part
// and the digest's first 12 digits.
func short(ref string) string {
	if ref == "" {
		return "-"
	}
	repo, digest, ok := strings.Cut(ref, "@sha256:")
	if i := strings.LastIndexByte(repo, '/'); i >= 0 {
		repo = repo[i+1:]
	}
	if !ok {
		return repo
	}
	if len(digest) > 12 {
		digest = digest[:12]
	}
	return repo + "@" + digest
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
