package build

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/machineosbuild"
)

// The protocol between the two reconcilers, A -> B -> A within a build's
// run: the MachineOSConfig reconciler asks A's build to stop (the
// interrupt annotation, naming B's), and the MachineOSBuild reconciler
// ends it Interrupted without its Job. When A's inputs are current again
// the annotation is taken off A and put on B, and A starts again as
// attempt 2 with a new Job, and ends Succeeded as the current image.
func TestRevertedChangeRestartsTheInterruptedBuild(t *testing.T) {
	f := newFixture(t, "revert")
	startController(t, f.reg, 3)
	f.mosc()
	a := waitBuild(t, "revert")
	firstJob, _ := jobUID(t, a.Name)

	f.setRendered("2")
	b := waitBuild(t, "revert", a.Name)
	eventually(t, "the first build asked to stop and Interrupted without its Job", func() error {
		got, err := getBuild(a.Name)
		switch {
		case err != nil:
			return err
		case got.Annotations[v1alpha1.InterruptAnnotation] != b.Name:
			return fmt.Errorf("annotations %v, want %s naming %s", got.Annotations, v1alpha1.InterruptAnnotation, b.Name)
		case !machineosbuild.IsTrue(got, v1alpha1.BuildInterrupted):
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		if _, ok := jobUID(t, a.Name); ok {
			return errors.New("its Job is still there")
		}
		return nil
	})

	f.setRendered("1")
	eventually(t, "the first build started again and the second asked to stop", func() error {
		got, err := getBuild(a.Name)
		if err != nil {
			return err
		}
		if _, asked := got.Annotations[v1alpha1.InterruptAnnotation]; asked {
			return errors.New("the first build is still asked to stop")
		}
		if got.Status.Attempt != 2 || machineosbuild.Terminal(got) {
			return fmt.Errorf("attempt %d, conditions %+v; want attempt 2 running", got.Status.Attempt, got.Status.Conditions)
		}
		if uid, ok := jobUID(t, a.Name); !ok || uid == firstJob {
			return errors.New("no new Job for the second attempt")
		}
		other, err := getBuild(b.Name)
		if err != nil {
			return err
		}
		if other.Annotations[v1alpha1.InterruptAnnotation] != a.Name || !machineosbuild.IsTrue(other, v1alpha1.BuildInterrupted) {
			return fmt.Errorf("second build: annotations %v, conditions %+v", other.Annotations, other.Status.Conditions)
		}
		return nil
	})

	a, err := getBuild(a.Name)
	if err != nil {
		t.Fatal(err)
	}
	image := f.succeed(a)
	eventually(t, "the first build's second attempt is the current image", func() error {
		if got := getMOSC(t, "revert").Status.CurrentImagePullSpec; got != image {
			return fmt.Errorf("current image %q, want %s", got, image)
		}
		return nil
	})
}
