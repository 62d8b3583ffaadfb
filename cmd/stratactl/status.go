package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
)

type statusOptions struct {
	kubeconfig string
	watch      bool
}

func newStatusCommand() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status [POOL...] [--watch] [--kubeconfig FILE]",
		Short: "Show pools, their rendered config, image build and nodes in one table",
		Long: `status shows, for each MachineConfigPool (all of them, or the ones named), in
name order:

  - a pool line: the rendered configuration, the MachineOSConfig that layers
    the pool, its newest MachineOSBuild and that build's state, the image
    nodes are sent to (digests shortened to 12 hex digits), updated/total
    machines, degraded machines, whether the pool is paused, whether its
    maintenance windows are open and until when (in the zone of its first
    window; "-" when it has none, so updates may start at any time), and a summary
    of the Updated, Updating and Degraded conditions with the message that
    explains a degraded or waiting pool;
  - one indented line per node of the pool (the nodes the rollout
    controller assigned to it and the nodes its nodeSelector selects): the
    daemon's state, the image the node runs and the image it is sent to
    ("=" when they are the same), the daemon's reason, and what the node's
    latest image update costs it and why (Live, SoftReboot or Reboot, as
    the daemon decided from the MachineConfiguration's disruption policy).

With --watch, the table is printed again whenever a pool, node,
MachineOSConfig or MachineOSBuild changes, until interrupted.

The kubeconfig is --kubeconfig, else $KUBECONFIG, else ~/.kube/config.`,
		Example: `  # Every pool and its nodes
  stratactl status

  # The worker pool only, printed again on every change
  stratactl status worker --watch`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.BoolVarP(&o.watch, "watch", "w", false, "print the table again on every change, until interrupted")
	return cmd
}

func (o *statusOptions) run(ctx context.Context, out io.Writer, pools []string) error {
	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	// Listed directly first, also before a watch: a wrong kubeconfig or a
	// missing permission then fails with the API's error instead of an
	// informer retrying in silence.
	snap, err := gatherStatus(ctx, c)
	if err != nil {
		return err
	}
	if !o.watch {
		if err := renderStatus(out, snap, pools); err != nil {
			return err
		}
		if missing := snap.missingPools(pools); len(missing) > 0 {
			return fmt.Errorf("no MachineConfigPool named %s", strings.Join(missing, ", "))
		}
		return nil
	}
	// The informers retry failed watches by themselves; their logs are
	// for controllers, not for a person watching a table.
	crlog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return watchStatus(ctx, cfg, out, pools)
}

// restConfig follows kubectl's loading rules, with --kubeconfig in place
// of $KUBECONFIG when given.
func (o *statusOptions) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// statusSnapshot is everything the table is made of.
type statusSnapshot struct {
	Pools   []v1alpha1.MachineConfigPool
	Configs []v1alpha1.MachineOSConfig
	Builds  []v1alpha1.MachineOSBuild
	Nodes   []corev1.Node
}

func gatherStatus(ctx context.Context, c client.Reader) (statusSnapshot, error) {
	var (
		pools   v1alpha1.MachineConfigPoolList
		configs v1alpha1.MachineOSConfigList
		builds  v1alpha1.MachineOSBuildList
		nodes   corev1.NodeList
	)
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{
		{"MachineConfigPools", &pools},
		{"MachineOSConfigs", &configs},
		{"MachineOSBuilds", &builds},
		{"Nodes", &nodes},
	} {
		if err := c.List(ctx, l.list); err != nil {
			return statusSnapshot{}, fmt.Errorf("list %s: %w", l.what, err)
		}
	}
	return statusSnapshot{Pools: pools.Items, Configs: configs.Items, Builds: builds.Items, Nodes: nodes.Items}, nil
}

func (s statusSnapshot) missingPools(names []string) []string {
	var missing []string
	for _, n := range names {
		if !slices.ContainsFunc(s.Pools, func(p v1alpha1.MachineConfigPool) bool { return p.Name == n }) {
			missing = append(missing, n)
		}
	}
	return missing
}

// watchStatus prints the table, then again after every change that alters
// it, until ctx ends. Informers, not polling: they list once, then only
// receive changes, and resume by themselves after a dropped connection.
func watchStatus(ctx context.Context, cfg *rest.Config, out io.Writer, pools []string) error {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("create cache: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cacheErr := make(chan error, 1)
	go func() { cacheErr <- c.Start(ctx) }()

	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, obj := range []client.Object{&v1alpha1.MachineConfigPool{}, &v1alpha1.MachineOSConfig{}, &v1alpha1.MachineOSBuild{}, &corev1.Node{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch %T: %w", obj, err)
		}
	}
	if !c.WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("watch: caches did not sync")
	}

	clearScreen := isTerminal(out)
	var last string
	for {
		snap, err := gatherStatus(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var buf bytes.Buffer
		if err := renderStatus(&buf, snap, pools); err != nil {
			return err
		}
		// Nodes change every few seconds (heartbeats) without changing
		// the table; print only what a person has not seen yet.
		if text := buf.String(); text != last {
			last = text
			prefix := "\n"
			if clearScreen {
				prefix = "\x1b[H\x1b[2J"
			}
			if _, err := fmt.Fprintf(out, "%s%s\n%s", prefix, time.Now().Format(time.TimeOnly), text); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-cacheErr:
			if err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			return nil
		case <-changed:
			// A rollout changes several objects at once: one table for
			// the burst, not one per event.
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// describeNodeState is a node's state as its daemon reports it, with
// what the rollout makes of it: held by an admin (the hold annotation),
// quarantined with a blocked drain (its reason then says what blocks
// it), and the node's topology group; and the reason to show.
func describeNodeState(p *v1alpha1.MachineConfigPool, n *corev1.Node) (string, string) {
	a := n.Annotations
	state, reason := orDash(a[v1alpha1.StateAnnotation]), a[v1alpha1.ReasonAnnotation]
	var notes []string
	if t := p.Spec.Topology; t != nil {
		notes = append(notes, t.Key+"="+orDash(n.Labels[t.Key]))
	}
	if hold := a[v1alpha1.HoldAnnotation]; hold != "" {
		notes = append(notes, "held: "+oneLine(hold))
	}
	if _, blockedBy, ok := v1alpha1.ParseDrainFailure(a[v1alpha1.DrainBlockedAnnotation]); ok && n.Labels[v1alpha1.DrainBlockedLabel] == "true" {
		notes = append(notes, "quarantined")
		if reason == "" {
			reason = blockedBy
		}
	}
	if len(notes) > 0 {
		state += " (" + strings.Join(notes, ", ") + ")"
	}
	return state, reason
}

// describeStage is a node's stage-ahead state: the image it holds staged
// ahead of its update (locked: no reboot boots it), or that it was asked
// to download one and has not yet.
func describeStage(a map[string]string) string {
	asked, staged := a[v1alpha1.DesiredStageAnnotation], a[v1alpha1.StagedImageAnnotation]
	switch {
	case staged != "" && (asked == "" || asked == staged):
		return "staged " + shortImage(staged)
	case asked != "":
		return "downloading " + shortImage(asked)
	}
	return "-"
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// renderStatus writes the table of the pools named in only (every pool
// when only is empty), in name order, each followed by its nodes. It reads
// nothing but its arguments.
func renderStatus(w io.Writer, s statusSnapshot, only []string) error {
	pools := slices.Clone(s.Pools)
	slices.SortFunc(pools, func(a, b v1alpha1.MachineConfigPool) int { return strings.Compare(a.Name, b.Name) })
	if len(only) > 0 {
		pools = slices.DeleteFunc(pools, func(p v1alpha1.MachineConfigPool) bool { return !slices.Contains(only, p.Name) })
	}
	nodes := slices.Clone(s.Nodes)
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })

	// Two tables interleaved: pool lines aligned with each other under one
	// header, node lines aligned with each other across all pools.
	poolTable, nodeTable := newTable(), newTable()
	poolTable.row("POOL", "CONFIG", "MACHINEOSCONFIG", "BUILD", "IMAGE", "UPDATED", "DEGRADED", "PAUSED", "WINDOW", "STATUS")
	nodeCount := make([]int, len(pools))
	for i := range pools {
		p := &pools[i]
		mosc, others := layeredBy(p, s.Configs)
		moscName, build, image := "-", "-", "-"
		if mosc != nil {
			moscName = mosc.Name
			if others > 0 {
				moscName += fmt.Sprintf(" (+%d more)", others)
			}
			build = describeBuild(mosc, s.Builds)
			image = shortImage(mosc.Status.CurrentImagePullSpec)
		}
		poolTable.row(p.Name, orDash(p.Status.Configuration.Name), moscName, build, image,
			fmt.Sprintf("%d/%d", p.Status.UpdatedMachineCount, p.Status.MachineCount),
			fmt.Sprint(p.Status.DegradedMachineCount), fmt.Sprint(p.Spec.Paused), describeWindow(p), poolSummary(p))

		for _, n := range nodes {
			if !inPool(p, &n) {
				continue
			}
			if nodeCount[i] == 0 {
				nodeTable.row("  NODE", "STATE", "CURRENT IMAGE", "DESIRED IMAGE", "REASON", "DISRUPTION", "STAGED AHEAD")
			}
			nodeCount[i]++
			a := n.Annotations
			current, desired := a[v1alpha1.CurrentImageAnnotation], a[v1alpha1.DesiredImageAnnotation]
			desiredCell := shortImage(desired)
			if desired != "" && desired == current {
				desiredCell = "="
			}
			state, reason := describeNodeState(p, &n)
			nodeTable.row("  "+n.Name, state, shortImage(current), desiredCell,
				orDash(oneLine(reason)), orDash(oneLine(a[v1alpha1.DisruptionAnnotation])), describeStage(a))
		}
	}
	poolLines, err := poolTable.lines()
	if err != nil {
		return err
	}
	nodeLines, err := nodeTable.lines()
	if err != nil {
		return err
	}

	var b strings.Builder
	if len(pools) > 0 {
		b.WriteString(poolLines[0])
	}
	for i := range pools {
		b.WriteString(poolLines[i+1])
		if nodeCount[i] == 0 {
			b.WriteString("  (no nodes)\n")
			continue
		}
		// The node header and the pool's nodes.
		for _, l := range nodeLines[:nodeCount[i]+1] {
			b.WriteString(l)
		}
		nodeLines = nodeLines[nodeCount[i]+1:]
	}
	for _, name := range s.missingPools(only) {
		fmt.Fprintf(&b, "no MachineConfigPool named %s\n", name)
	}
	if len(s.Pools) == 0 && len(only) == 0 {
		b.WriteString("No MachineConfigPools found.\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// table is a tabwriter whose aligned lines are handed back one by one.
type table struct {
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable() *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

func (t *table) row(cells ...string) {
	// Writes to a bytes.Buffer do not fail.
	_, _ = io.WriteString(t.tw, strings.Join(cells, "\t")+"\n")
}

func (t *table) lines() ([]string, error) {
	if err := t.tw.Flush(); err != nil {
		return nil, fmt.Errorf("format table: %w", err)
	}
	lines := strings.SplitAfter(t.buf.String(), "\n")
	return lines[:len(lines)-1], nil // the empty string after the last newline
}

// layeredBy returns the MachineOSConfig of the pool: the one the pool's
// layered-by annotation names, else the first by name of those naming the
// pool, and how many others name it too (the build controller refuses
// them, but a person should see they exist).
func layeredBy(p *v1alpha1.MachineConfigPool, configs []v1alpha1.MachineOSConfig) (*v1alpha1.MachineOSConfig, int) {
	var mine []*v1alpha1.MachineOSConfig
	for i := range configs {
		if configs[i].Spec.MachineConfigPool.Name == p.Name {
			mine = append(mine, &configs[i])
		}
	}
	if len(mine) == 0 {
		return nil, 0
	}
	slices.SortFunc(mine, func(a, b *v1alpha1.MachineOSConfig) int { return strings.Compare(a.Name, b.Name) })
	chosen := mine[0]
	if name := p.Annotations[v1alpha1.LayeredByAnnotation]; name != "" {
		if i := slices.IndexFunc(mine, func(m *v1alpha1.MachineOSConfig) bool { return m.Name == name }); i >= 0 {
			chosen = mine[i]
		}
	}
	return chosen, len(mine) - 1
}

func describeBuild(mosc *v1alpha1.MachineOSConfig, builds []v1alpha1.MachineOSBuild) string {
	ref := mosc.Status.MachineOSBuild
	if ref == nil || ref.Name == "" {
		return "-"
	}
	i := slices.IndexFunc(builds, func(b v1alpha1.MachineOSBuild) bool { return b.Name == ref.Name })
	if i < 0 {
		return ref.Name + " (not found)"
	}
	state := buildState(&builds[i])
	if st := builds[i].Status.Strategy; st != "" {
		state += ", " + string(st)
	}
	if a := approvalState(mosc, &builds[i]); a != "" {
		state += ", " + a
	}
	return ref.Name + " (" + state + ")"
}

// approvalState says where a build stands at the approval gate, so that
// a pool held by it reads as such in the BUILD column: "" when the gate is
// off and nobody approved or rejected the build anyway.
func approvalState(mosc *v1alpha1.MachineOSConfig, b *v1alpha1.MachineOSBuild) string {
	c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildImageApproved)
	switch {
	case c != nil && c.Status == metav1.ConditionTrue:
		return "approved"
	case c != nil && c.Status == metav1.ConditionFalse:
		return "rejected"
	case mosc.Spec.ImageApproval == v1alpha1.ImageApprovalRequired && meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded):
		return "awaiting approval"
	default:
		return ""
	}
}

// buildState names the condition the build controller set true; a build
// it has not looked at yet has none.
func buildState(b *v1alpha1.MachineOSBuild) string {
	for _, t := range []string{v1alpha1.BuildFailed, v1alpha1.BuildInterrupted, v1alpha1.BuildSucceeded, v1alpha1.BuildBuilding, v1alpha1.BuildPrepared} {
		if meta.IsStatusConditionTrue(b.Status.Conditions, t) {
			return t
		}
	}
	return "Pending"
}

// poolSummary says in a few words where the pool is, with the message
// that explains why it is not Updated: Degraded's first, since it blocks
// progress, else Updated's (rolling out, paused, waiting for an image).
func poolSummary(p *v1alpha1.MachineConfigPool) string {
	conds := p.Status.Conditions
	var words []string
	for _, t := range []string{v1alpha1.PoolUpdated, v1alpha1.PoolUpdating, v1alpha1.PoolDegraded} {
		if meta.IsStatusConditionTrue(conds, t) {
			words = append(words, t)
		}
	}
	if len(words) == 0 {
		if meta.FindStatusCondition(conds, v1alpha1.PoolUpdated) == nil {
			return "Unknown"
		}
		words = append(words, "NotUpdated")
	}
	summary := strings.Join(words, ",")
	var why *metav1.Condition
	if c := meta.FindStatusCondition(conds, v1alpha1.PoolDegraded); c != nil && c.Status == metav1.ConditionTrue {
		why = c
	} else if c := meta.FindStatusCondition(conds, v1alpha1.PoolUpdated); c != nil && c.Status != metav1.ConditionTrue {
		why = c
	}
	if why != nil && why.Message != "" {
		summary += ": " + oneLine(why.Message)
	}
	return summary
}

// windowTime is how describeWindow tells an instant: the weekday first,
// since windows are weekly.
const windowTime = "Mon 2006-01-02 15:04 MST"

// describeWindow says whether the pool's maintenance windows are open, as
// the rollout controller last wrote it, and until when, in the zone of
// the pool's first window: "-" when the pool has none (always open).
func describeWindow(p *v1alpha1.MachineConfigPool) string {
	if len(p.Spec.MaintenanceWindows) == 0 {
		return "-"
	}
	w := p.Status.MaintenanceWindow
	if w == nil {
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PoolUpdated); c != nil && c.Reason == v1alpha1.ReasonInvalidMaintenanceWindow {
			return "invalid"
		}
		return "unknown"
	}
	loc, err := time.LoadLocation(p.Spec.MaintenanceWindows[0].TimeZone)
	if err != nil {
		loc = time.UTC
	}
	switch {
	case w.Open && w.ClosesAt != nil:
		return "open until " + w.ClosesAt.In(loc).Format(windowTime)
	case w.Open:
		return "open"
	case w.NextOpensAt != nil:
		return "closed until " + w.NextOpensAt.In(loc).Format(windowTime)
	default:
		return "closed"
	}
}

// inPool says whether the node belongs under the pool: the rollout
// controller assigned it, or the pool's nodeSelector selects it (a node
// not yet assigned, or one several pools select, shows under each).
func inPool(p *v1alpha1.MachineConfigPool, n *corev1.Node) bool {
	if n.Annotations[v1alpha1.NodePoolAnnotation] == p.Name {
		return true
	}
	if p.Spec.NodeSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(n.Labels))
}

// shortImage keeps 12 hex digits of an image's sha256 digest.
func shortImage(image string) string {
	if image == "" {
		return "-"
	}
	repo, digest, ok := strings.Cut(image, "@sha256:")
	if !ok || len(digest) <= 12 {
		return image
	}
	return repo + "@sha256:" + digest[:12]
}

var longDigest = regexp.MustCompile(`@sha256:([a-f0-9]{12})[a-f0-9]{52}`)

// oneLine keeps the first line of s, with tabs made spaces so that they
// do not break the table's columns, and digests shortened as in the
// image columns.
func oneLine(s string) string {
	s = longDigest.ReplaceAllString(strings.TrimSpace(s), "@sha256:$1")
	if first, _, ok := strings.Cut(s, "\n"); ok {
		s = strings.TrimSpace(first) + " …"
	}
	return strings.ReplaceAll(s, "\t", " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
