package build

import (
	"archive/tar"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/strata-dev/strata/api/v1alpha1"
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
