package rollout

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/disruption"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
)

// pullLog counts the simulated bootc's downloads: it prints "Fetching"
// for an image it does not hold, and nothing for one it does.
type pullLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (p *pullLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Write(b)
}

func (p *pullLog) pulls(image string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range strings.Split(p.buf.String(), "\n") {
		if strings.HasPrefix(l, "Fetching ") && strings.HasSuffix(l, bootc.DigestOf(image)) {
			n++
		}
	}
	return n
}

// newStageAheadRig is a simulated node on bootc main (switch
// --download-only) that runs image one with a config, Done, and counts
// its downloads from then on.
func newStageAheadRig(t *testing.T) (r *rig, one, two, config string, log *pullLog) {
	t.Helper()
	r, one, two = newSimRig(t)
	if err := r.sim.sim.SetBootcVersion(bootcsim.VersionMain); err != nil {
		t.Fatal(err)
	}
	r.lock = r.sim
	r.restart()
	config = r.varConfig("one")
	r.desire(one, config)
	r.converge()
	log = &pullLog{}
	r.sim.sim.Out = log
	return r, one, two, config, log
}

// stageAhead plays the rollout controller asking for a stage ahead, and
// checks that the node staged it locked without updating.
func (r *rig) stageAhead(image string, log *pullLog, pulls int) {
	r.t.Helper()
	r.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: str(image)})
	r.sync()
	st, err := r.sim.Status(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if st.Status.Staged == nil || st.Status.Staged.Digest() != bootc.DigestOf(image) || !st.Status.Staged.DownloadOnly {
		r.t.Fatalf("staged %+v after desiredStage, want %s staged locked", st.Status.Staged, image)
	}
	if got := log.pulls(image); got != pulls {
		r.t.Errorf("%d downloads of %s, want %d", got, image, pulls)
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StagedImageAnnotation: image,
		v1alpha1.StateAnnotation:       v1alpha1.NodeStateDone,
	})
	if d := r.drains(); len(d) != 0 {
		r.t.Errorf("drain requests %q while staging ahead, want none", d)
	}
}

// turn plays the rollout controller taking the node: its desired pair,
// and its stage request removed in the same write.
func (r *rig) turn(image, config string) {
	r.t.Helper()
	r.desire(image, config)
	r.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: nil})
	r.converge()
	if _, booted := r.sim.entries(); booted != bootc.DigestOf(image) {
		r.t.Errorf("booted %s after the update, want %s", booted, bootc.DigestOf(image))
	}
	r.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:        v1alpha1.NodeStateDone,
		v1alpha1.CurrentImageAnnotation: image,
	})
	if v, ok := r.node().Annotations[v1alpha1.StagedImageAnnotation]; ok && v != "" {
		r.t.Errorf("stagedImage %q after the update, want none", v)
	}
}

// TestStageAheadOnTheSimulator (issue 21 point 6): a node asked to stage
// ahead downloads the image once, staged locked, with no drain and no
// reboot; at its turn the update downloads nothing more: drain and
// reboot only.
func TestStageAheadOnTheSimulator(t *testing.T) {
	r, _, two, config, log := newStageAheadRig(t)
	r.stageAhead(two, log, 1)
	if got := r.sim.counts(); got.reboots != 0 {
		t.Errorf("reboots %+v while staging ahead", got)
	}
	r.turn(two, config)
	if got := log.pulls(two); got != 1 {
		t.Errorf("%d downloads of %s, want the one ahead and none at its turn", got, two)
	}
	if got := r.sim.counts(); got.switches != 1 || got.reboots != 1 {
		t.Errorf("bootc and reboot calls %+v, want the one switch ahead and one reboot", got)
	}
	if d := r.drains(); len(d) != 1 {
		t.Errorf("drain requests %q, want one (the turn's)", d)
	}
}

// TestUnplannedRebootAfterStagingAhead (issue 21 point 6): a clean reboot
// nobody asked Strata for between the stage ahead and the node's turn
// boots the current image (the stage was locked), ostree drops the
// download, the daemon stages ahead again while still asked, and the
// update then proceeds with no further download.
func TestUnplannedRebootAfterStagingAhead(t *testing.T) {
	r, one, two, config, log := newStageAheadRig(t)
	r.stageAhead(two, log, 1)

	r.reboot() // another reboot manager: no request from the daemon
	if staged, booted := r.sim.entries(); booted != bootc.DigestOf(one) || staged != "" {
		t.Fatalf("after an unplanned reboot booted %s, staged %q; want %s booted, nothing staged", booted, staged, bootc.DigestOf(one))
	}
	r.stageAhead(two, log, 2)
	r.turn(two, config)
	if got := log.pulls(two); got != 2 {
		t.Errorf("%d downloads of %s, want 2 (ahead, again ahead after the reboot) and none at its turn", got, two)
	}
	if got := r.sim.counts(); got.reboots != 1 {
		t.Errorf("reboot calls %+v, want the update's one", got)
	}
}

// TestStageAheadWithdrawn: a stage no longer asked for (the rollout took
// another node, or its target changed) is replaced by the booted image,
// so that nothing but the desired image is staged, and stagedImage goes.
func TestStageAheadWithdrawn(t *testing.T) {
	r, one, two, _, log := newStageAheadRig(t)
	r.stageAhead(two, log, 1)
	r.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: nil})
	r.sync()
	if staged, _ := r.sim.entries(); staged != "" && staged != bootc.DigestOf(one) {
		t.Errorf("staged %s after the stage was withdrawn, want nothing or %s", staged, bootc.DigestOf(one))
	}
	if v := r.ann(v1alpha1.StagedImageAnnotation); v != "" {
		t.Errorf("stagedImage %q after the stage was withdrawn", v)
	}
	r.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: one})
}

// TestNoStageAheadWithoutLockedStaging: on bootc 1.16 (no switch
// --download-only) a stage ahead would be unlocked, and any reboot
// would boot it without a drain: the daemon does not stage ahead.
func TestNoStageAheadWithoutLockedStaging(t *testing.T) {
	r, _, two, _, log := newStageAheadRig(t)
	if err := r.sim.sim.SetBootcVersion(bootcsim.Version116); err != nil {
		t.Fatal(err)
	}
	r.restart()
	r.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: str(two)})
	r.sync()
	if staged, _ := r.sim.entries(); staged != "" {
		t.Errorf("staged %s on a bootc that cannot stage locked", staged)
	}
	if got := log.pulls(two); got != 0 {
		t.Errorf("%d downloads of %s, want none", got, two)
	}
}

// TestLiveDecidedAheadOnTheSimulator (issue 21 points 3 and 6): a node
// asked to stage ahead with the stage's config decides the update's
// disruption once staged, and reports a Live one without a drain as
// stagedLive, leaving the disruption annotation (its current update's)
// alone; at its turn it applies live at once, without deciding again,
// downloading, draining or rebooting.
func TestLiveDecidedAheadOnTheSimulator(t *testing.T) {
	l := newLiveRig(t)
	if err := l.sim.sim.SetBootcVersion(bootcsim.VersionMain); err != nil {
		t.Fatal(err)
	}
	l.restart()
	before := l.ann(v1alpha1.DisruptionAnnotation)
	two, configB := l.chronyImage("two", "b"), l.chronyConfig("b")
	key := UpdateKey(two, configB)
	l.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: str(two), v1alpha1.DesiredStageConfigAnnotation: str(configB)})
	l.sync()
	l.expectAnnotations(map[string]string{
		v1alpha1.StagedImageAnnotation:   two,
		v1alpha1.StagedLiveAnnotation:    key,
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentConfigAnnotation: l.configA,
		v1alpha1.DisruptionAnnotation:    before,
	})
	d := l.record().Disruption
	if d == nil || d.Key != key || !d.Ahead || !d.live() || d.From != UpdateKey(l.one, l.configA) {
		t.Fatalf("state file disruption %+v, want Live without a drain for %s, decided ahead from %s", d, key, UpdateKey(l.one, l.configA))
	}
	if len(l.calls) != 0 {
		t.Errorf("systemctl calls %q before the node's turn", l.calls)
	}

	// Its turn: the controller's write sets the pair and drops the stage.
	l.desire(two, configB)
	l.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: nil, v1alpha1.DesiredStageConfigAnnotation: nil})
	l.converge()
	if d := l.record().Disruption; d == nil || !d.Ahead || d.Key != key {
		t.Errorf("state file disruption %+v after the turn, want the decision taken ahead, not a new one", d)
	}
	if got := l.sim.counts(); got.switches != 1 || got.reboots != 0 {
		t.Errorf("bootc and reboot calls %+v, want the one switch ahead and no reboot", got)
	}
	if dr := l.drains(); len(dr) != 0 {
		t.Errorf("drain requests %q, want none", dr)
	}
	if want := []string{"daemon-reload", "restart chronyd.service"}; !slices.Equal(l.calls, want) {
		t.Errorf("systemctl calls %q, want %q", l.calls, want)
	}
	if got := l.etc("etc/chrony.conf"); got != "b\n" {
		t.Errorf("live /etc/chrony.conf %q, want %q", got, "b\n")
	}
	l.expectAnnotations(map[string]string{
		v1alpha1.StateAnnotation:         v1alpha1.NodeStateDone,
		v1alpha1.CurrentConfigAnnotation: configB,
		v1alpha1.CurrentImageAnnotation:  two,
		v1alpha1.StagedLiveAnnotation:    "",
		v1alpha1.StagedImageAnnotation:   "",
	})
	if got := l.ann(v1alpha1.DisruptionAnnotation); !strings.HasPrefix(got, "Live: ") {
		t.Errorf("disruption annotation %q after the turn, want the Live decision", got)
	}
}

// TestPolicyChangedAfterDecidingAhead: a node decides Live ahead under a
// Restart policy, then the admin changes the policy to Reboot before the
// node's turn. At its turn the node follows the policy in force, not the
// one it decided under: it decides again, drains and reboots, and says
// why; nothing is restarted live.
func TestPolicyChangedAfterDecidingAhead(t *testing.T) {
	l := newLiveRig(t)
	if err := l.sim.sim.SetBootcVersion(bootcsim.VersionMain); err != nil {
		t.Fatal(err)
	}
	l.restart()
	two, configB := l.chronyImage("two", "b"), l.chronyConfig("b")
	key := UpdateKey(two, configB)
	l.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: str(two), v1alpha1.DesiredStageConfigAnnotation: str(configB)})
	l.sync()
	if d := l.record().Disruption; d == nil || d.Key != key || !d.Ahead || !d.live() || d.Policy == "" {
		t.Fatalf("state file disruption %+v, want Live decided ahead for %s under a recorded policy", d, key)
	}

	var mc v1alpha1.MachineConfiguration
	if err := env.Client.Get(l.ctx, client.ObjectKey{Name: v1alpha1.MachineConfigurationName}, &mc); err != nil {
		t.Fatal(err)
	}
	reboot := []v1alpha1.NodeDisruptionPolicyAction{{Type: v1alpha1.RebootAction}}
	mc.Spec.NodeDisruptionPolicy.Files = []v1alpha1.NodeDisruptionPolicyFile{
		{Path: "/etc/chrony.conf", Actions: reboot}, {Path: "/etc/systemd/system/chronyd.service.d", Actions: reboot}}
	if err := env.Client.Update(l.ctx, &mc); err != nil {
		t.Fatal(err)
	}

	l.desire(two, configB)
	l.annotate(map[string]*string{v1alpha1.DesiredStageAnnotation: nil, v1alpha1.DesiredStageConfigAnnotation: nil})
	l.converge()
	d := l.record().Disruption
	if d == nil || d.Key != key || d.Ahead || d.Kind != disruption.Reboot || !strings.Contains(d.Reason, "policy changed since it was decided ahead") {
		t.Errorf("state file disruption %+v after the turn, want Reboot decided again for the changed policy", d)
	}
	if got := l.sim.counts(); got.reboots != 1 {
		t.Errorf("bootc and reboot calls %+v, want one reboot", got)
	}
	if dr := l.drains(); len(dr) != 1 {
		t.Errorf("drain requests %q, want the turn's", dr)
	}
	if len(l.calls) != 0 {
		t.Errorf("systemctl calls %q, want none: the update rebooted", l.calls)
	}
	if _, booted := l.sim.entries(); booted != bootc.DigestOf(two) {
		t.Errorf("booted %s after the update, want %s", booted, bootc.DigestOf(two))
	}
	l.expectAnnotations(map[string]string{v1alpha1.StateAnnotation: v1alpha1.NodeStateDone, v1alpha1.CurrentImageAnnotation: two})
	if got := l.ann(v1alpha1.DisruptionAnnotation); !strings.HasPrefix(got, "Reboot: ") {
		t.Errorf("disruption annotation %q after the turn, want the Reboot decision", got)
	}
}
