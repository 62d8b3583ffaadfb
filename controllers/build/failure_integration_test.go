package build

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/test/testregistry"
)

// A failure whose words come from a hostile base image (here a symlink
// /etc -> a 9000-byte path of two-byte characters, which the
// configuration layer cannot write under) is cut to the API's limit, at
// a character boundary and marked, so that the status write that says
// the build failed is not refused for its length.
func TestLongFailureIsCutToTheLimit(t *testing.T) {
	f := newFixture(t, "longfail")
	long := "/d/" + strings.Repeat(strings.Repeat("é", 100)+"/", 45) + "f"
	layer := testregistry.TarLayer(t, func(tw *tar.Writer) error {
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(long, "/"), Typeflag: tar.TypeReg, Mode: 0o644, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		return tw.WriteHeader(&tar.Header{Name: "etc", Typeflag: tar.TypeSymlink, Linkname: long, Mode: 0o777, ModTime: time.Unix(0, 0)})
	})
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	base := f.reg.Push(t, "strata/hostile:1", img)
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile, func(m *v1alpha1.MachineOSConfig) { m.Spec.BaseImagePullSpec = base })

	b := waitCondition(t, waitNewBuild(t, "longfail").Name, v1alpha1.BuildFailed)
	fl := b.Status.Failure
	if fl == nil || fl.Step != v1alpha1.BuildStepLayer {
		t.Fatalf("failure %+v, want step Layer", fl)
	}
	if len(fl.Message) > v1alpha1.MaxBuildFailureMessage || !utf8.ValidString(fl.Message) || !strings.HasSuffix(fl.Message, "...") {
		t.Errorf("failure message of %d bytes (valid UTF-8: %v), want at most %d ending in the marker: ...%q",
			len(fl.Message), utf8.ValidString(fl.Message), v1alpha1.MaxBuildFailureMessage, fl.Message[max(0, len(fl.Message)-40):])
	}
	if !strings.Contains(fl.Message, "the layer has entries under /d/éé") {
		t.Errorf("failure message %q... lost what failed", fl.Message[:min(len(fl.Message), 200)])
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildFailed); c == nil || !utf8.ValidString(c.Message) {
		t.Errorf("Failed condition %+v", c)
	}
}

// The image nodes are to run gone from the registry (deleted by someone,
// or a registry that lost it) is reported on the MachineOSConfig, its pool
// and in an Event naming it, and not rebuilt on its own: a rebuild would
// roll a new image to every node for no change of theirs. The rebuild
// annotation builds it again.
func TestMissingCurrentImageIsReportedNotRebuilt(t *testing.T) {
	f := newFixture(t, "missing")
	startController(t, f.reg, 0)
	f.mosc(configLayer, noContainerfile)
	a := waitCondition(t, waitNewBuild(t, "missing").Name, v1alpha1.BuildSucceeded)
	image := a.Status.DigestedImagePushSpec
	eventually(t, "image A current", func() error {
		if got := getMOSC(t, "missing").Status.CurrentImagePullSpec; got != image {
			return fmt.Errorf("current %q", got)
		}
		return nil
	})

	ref, _ := name.ParseReference(image, name.Insecure)
	if err := remote.Delete(ref, remote.WithAuth(f.reg.Auth())); err != nil {
		t.Fatal(err)
	}
	// Any event reconciles the MachineOSConfig: a label on its Secret.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "missing-push"}, s); err != nil {
			return err
		}
		s.Labels = map[string]string{"touched": "yes"}
		return env.Client.Update(context.Background(), s)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the missing image reported", func() error {
		m := getMOSC(t, "missing")
		d := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConfigDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != v1alpha1.ReasonCurrentImageMissing || !strings.Contains(d.Message, image) {
			return fmt.Errorf("Degraded %+v", d)
		}
		if m.Status.CurrentImagePullSpec != image {
			return fmt.Errorf("current image moved to %q", m.Status.CurrentImagePullSpec)
		}
		if c := poolCondition(t, "missing", v1alpha1.PoolImageBuildDegraded); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonCurrentImageMissing {
			return fmt.Errorf("pool ImageBuildDegraded %+v", c)
		}
		return nil
	})
	waitEvent(t, "missing", v1alpha1.ReasonCurrentImageMissing, image)
	if got, err := getBuild(a.Name); err != nil || got.UID != a.UID {
		t.Fatalf("build A was deleted or replaced (%v): the image was rebuilt without being asked", err)
	}
	if f.exists(image) {
		t.Error("the image is back in the registry: something rebuilt it")
	}

	annotate(t, "missing", v1alpha1.RebuildAnnotation)
	eventually(t, "rebuilt as asked, and no longer Degraded", func() error {
		b, err := getBuild(a.Name)
		if err != nil {
			return err
		}
		if b.UID == a.UID || !machineosbuild.IsTrue(b, v1alpha1.BuildSucceeded) {
			return errors.New("not rebuilt yet")
		}
		if d := meta.FindStatusCondition(getMOSC(t, "missing").Status.Conditions, v1alpha1.ConfigDegraded); d == nil || d.Status != metav1.ConditionFalse {
			return fmt.Errorf("Degraded %+v", d)
		}
		return nil
	})
}
