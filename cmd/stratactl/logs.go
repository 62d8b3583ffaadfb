package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
)

// jobNameLabel is the label the Job controller puts on a Job's pods.
const jobNameLabel = "batch.kubernetes.io/job-name"

type logsOptions struct {
	status    statusOptions
	follow    bool
	container string
	// pollInterval is how often -f looks whether a container has started.
	pollInterval time.Duration
}

func newLogsCommand() *cobra.Command {
	o := &logsOptions{pollInterval: time.Second}
	cmd := &cobra.Command{
		Use:   "logs MOSB [-f] [-c CONTAINER] [--kubeconfig FILE]",
		Short: "Show a MachineOSBuild's build log through the API",
		Long: `logs shows the log of a MachineOSBuild's build pod, read through the API
server: every pod of the Job the build's status names (the whole image for
the SingleJob strategy, the admin stage for ConfigLayer), and in each pod
every container in the order they ran (pull, build, push), each under a
header line. A build made entirely in the controller (a configuration
layer on the base, or a reused admin stage) has no pod and says so. The
build's stages and its failure, if any, follow.

With -f, logs waits for each container in turn to start and follows it to
its end, so a build that is still pulling is followed through the build and
the push; the summary is read again at the end.

A build's Job, its pods and the Secret of its inputs are deleted once the
build ends; the failure's last log lines stay in the MachineOSBuild's
status. Follow a running build (-f) to keep its whole log.`,
		Example: `  stratactl logs worker-4f2c0a9d1e7b
  stratactl logs worker-4f2c0a9d1e7b -f     # follow a running build
  stratactl logs worker-4f2c0a9d1e7b -c build`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.status.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.BoolVarP(&o.follow, "follow", "f", false, "wait for each container to start and follow its log to the end")
	f.StringVarP(&o.container, "container", "c", "", "show only this container's log (pull, build or push)")
	return cmd
}

func (o *logsOptions) run(ctx context.Context, out io.Writer, name string) error {
	cfg, err := o.status.restConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b := &v1alpha1.MachineOSBuild{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no MachineOSBuild named %s (kubectl get mosb lists them)", name)
		}
		return err
	}
	sources, note, err := logSources(ctx, c, b)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(out, note)
	}
	if sources, err = only(sources, o.container); err != nil {
		return fmt.Errorf("MachineOSBuild %s: %w", name, err)
	}
	for _, s := range sources {
		fmt.Fprintf(out, "==> pod %s/%s, container %s <==\n", s.namespace, s.pod, s.container)
		follow := o.follow && s.running
		if o.follow && !s.running {
			if follow, err = o.waitStarted(ctx, c, s); err != nil {
				return err
			}
		}
		req := kube.CoreV1().Pods(s.namespace).GetLogs(s.pod, &corev1.PodLogOptions{Container: s.container, Follow: follow})
		stream, err := req.Stream(ctx)
		if err != nil {
			// A container that has not started has no log yet: say so
			// and go on with the others.
			fmt.Fprintf(out, "(no log: %v)\n", err)
			continue
		}
		_, err = io.Copy(out, stream)
		stream.Close()
		if err != nil {
			return err
		}
	}
	if o.follow {
		// The build went on while its log was followed.
		if err := c.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
			return err
		}
	}
	printBuildSummary(out, b)
	return nil
}

// only keeps the sources of the named container ("" keeps all); a name
// no pod has is an error that lists the ones there are.
func only(sources []logSource, container string) ([]logSource, error) {
	if container == "" || len(sources) == 0 {
		return sources, nil
	}
	var kept []logSource
	var names []string
	for _, s := range sources {
		if s.container == container {
			kept = append(kept, s)
		}
		if !slices.Contains(names, s.container) {
			names = append(names, s.container)
		}
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("its build pods have no container %q; they have %s", container, strings.Join(names, ", "))
	}
	return kept, nil
}

// waitStarted waits until the source's container runs (follow it) or has
// ended, or its pod ended or went away without running it (read what there
// is, if anything).
func (o *logsOptions) waitStarted(ctx context.Context, c client.Reader, s logSource) (follow bool, err error) {
	for {
		pod := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.pod}, pod); err != nil {
			if ctx.Err() != nil {
				// The caller gave up: say so, not how the request failed
				// (client-go's rate limiter refuses a wait it predicts
				// would pass the deadline, with an error of its own).
				return false, ctx.Err()
			}
			return false, client.IgnoreNotFound(err)
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return false, nil
		}
		for _, st := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
			if st.Name != s.container {
				continue
			}
			switch {
			case st.State.Running != nil:
				return true, nil
			case st.State.Terminated != nil:
				return false, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(o.pollInterval):
		}
	}
}

// logSource is one container whose log is shown.
type logSource struct {
	namespace, pod, container string
	running                   bool
}

// logSources lists the containers of the build's pods, in the order they
// ran: pods by creation, init containers then containers. note says why
// there is nothing to show, when there is not.
func logSources(ctx context.Context, c client.Reader, b *v1alpha1.MachineOSBuild) ([]logSource, string, error) {
	if b.Status.Builder == nil || b.Status.Builder.Job == nil {
		return nil, fmt.Sprintf("MachineOSBuild %s ran no build pod: it was made in the controller (strategy %s), so there is no build log.",
			b.Name, orDashStr(string(b.Status.Strategy))), nil
	}
	job := b.Status.Builder.Job
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{jobNameLabel: job.Name}); err != nil {
		return nil, "", fmt.Errorf("list the pods of Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Sprintf("Job %s/%s of MachineOSBuild %s has no pod (any more): a build's Job goes when the build ends; the status below keeps the failure's last log lines.",
			job.Namespace, job.Name, b.Name), nil
	}
	slices.SortStableFunc(pods.Items, func(x, y corev1.Pod) int {
		if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	var out []logSource
	for _, p := range pods.Items {
		running := map[string]bool{}
		for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
			running[s.Name] = s.State.Running != nil
		}
		for _, ctr := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			out = append(out, logSource{namespace: p.Namespace, pod: p.Name, container: ctr.Name, running: running[ctr.Name]})
		}
	}
	return out, "", nil
}

// printBuildSummary writes the build's stages and failure.
func printBuildSummary(out io.Writer, b *v1alpha1.MachineOSBuild) {
	fmt.Fprintf(out, "==> MachineOSBuild %s: %s <==\n", b.Name, buildPhase(b))
	for _, s := range b.Status.Stages {
		line := "  stage " + string(s.Name)
		switch {
		case s.Reused:
			line += ": reused"
		case s.Duration != nil:
			line += ": " + s.Duration.Round(100*time.Millisecond).String()
		}
		if s.Image != "" {
			line += ", " + s.Image
		}
		fmt.Fprintln(out, line)
	}
	if f := b.Status.Failure; f != nil {
		fmt.Fprintf(out, "  failed at stage %s, step %s: %s\n", orDashStr(string(f.Stage)), f.Step, f.Message)
		if f.LogTail != "" {
			fmt.Fprintf(out, "  last lines of the log:\n%s\n", indent(f.LogTail, "    "))
		}
	}
}

func buildPhase(b *v1alpha1.MachineOSBuild) string {
	for _, t := range []string{v1alpha1.BuildSucceeded, v1alpha1.BuildFailed, v1alpha1.BuildInterrupted, v1alpha1.BuildBuilding, v1alpha1.BuildPrepared} {
		for _, c := range b.Status.Conditions {
			if c.Type == t && c.Status == "True" {
				return t
			}
		}
	}
	return "Pending"
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n")
}

func orDashStr(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
