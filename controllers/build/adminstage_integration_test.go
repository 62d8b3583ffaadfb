package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/util/retry"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/provenance"
)

// digestOf asks the registry which digest ref (a tag) names.
func (f *fixture) digestOf(ref string) string {
	f.t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		f.t.Fatal(err)
	}
	desc, err := remote.Head(r, remote.WithAuth(f.reg.Auth()))
	if err != nil {
		f.t.Fatal(err)
	}
	return desc.Digest.String()
}

// waitEvent waits for an Event about the named object with reason and a
// note holding every one of words.
func waitEvent(t *testing.T, regarding, reason string, words ...string) {
	t.Helper()
	eventually(t, "a "+reason+" Event about "+regarding, func() error {
		var events eventsv1.EventList
		if err := env.Client.List(context.Background(), &events); err != nil {
			return err
		}
	next:
		for _, e := range events.Items {
			if e.Regarding.Name != regarding || e.Reason != reason {
				continue
			}
			for _, w := range words {
				if !strings.Contains(e.Note, w) {
					continue next
				}
			}
			if e.Type != corev1.EventTypeWarning {
				return fmt.Errorf("event %q is of type %s", e.Note, e.Type)
			}
			return nil
		}
		return errors.New("none yet")
	})
}

// recorded is the MachineOSConfig's record of the admin stage kept at tag.
func recorded(t *testing.T, mosc *v1alpha1.MachineOSConfig, tag string) *v1alpha1.AdminStageRecord {
	t.Helper()
	for _, r := range mosc.Status.AdminStages {
		if r.Tag == tag {
			return &r
		}
	}
	return nil
}

// provenanceMaterials are the resolved dependencies of the provenance
// attached to a build's image, by name.
func (f *fixture) provenanceMaterials(b *v1alpha1.MachineOSBuild) map[string]provenance.ResourceDescriptor {
	f.t.Helper()
	image := b.Status.DigestedImagePushSpec
	for _, r := range f.listReferrers(image) {
		if r.ArtifactType != provenance.ArtifactType {
			continue
		}
		data, err := f.referrers().Read(context.Background(), image, r, f.keychain())
		if err != nil {
			f.t.Fatal(err)
		}
		var st provenance.Statement
		if err := json.Unmarshal(data, &st); err != nil {
			f.t.Fatal(err)
		}
		out := map[string]provenance.ResourceDescriptor{}
		for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
			out[d.Name] = d
		}
		return out
	}
	f.t.Fatalf("%s has no provenance", image)
	return nil
}

// Whoever can push to the repository can move an admin stage's tag. A
// build reuses only the digest a build Job of its MachineOSConfig pushed
// and the controller recorded; a tag that points elsewhere is not used,
// and the build says so. With the recorded image gone, the stage is built
// again. Garbage collection takes the record with the image.
func TestAdminStageReusedOnlyByRecordedDigest(t *testing.T) {
	f := newFixture(t, "trust")
	startController(t, f.reg, 1)
	f.mosc(configLayer)

	a := waitNewBuild(t, "trust")
	tag := f.adminPushSpec(a)
	x := f.playAdminJob(a)
	a = waitCondition(t, a.Name, v1alpha1.BuildSucceeded)

	// Someone moves the tag; the recorded image is still there.
	y := f.digestOf(f.push(strings.TrimPrefix(tag, f.reg.Host+"/")))
	f.setRendered("2")
	b := waitCondition(t, waitNewBuild(t, "trust", a.Name).Name, v1alpha1.BuildSucceeded)
	st := machineosbuild.FindStage(b, v1alpha1.BuildStageAdmin)
	if st == nil || st.Image != x || !st.Reused {
		t.Fatalf("build B's admin stage %+v, want %s (which the Job built) reused, not %s, which someone pushed to %s", st, x, y, tag)
	}
	if !strings.Contains(st.Message, tag) || !strings.Contains(st.Message, y) {
		t.Errorf("admin stage message %q does not name the tag %s and the unexpected %s", st.Message, tag, y)
	}
	if _, ok := jobUID(t, b.Name); ok {
		t.Error("build B ran a Job though the recorded admin stage is there")
	}
	waitEvent(t, b.Name, "UntrustedAdminStage", tag, y)
	_, xDigest, _ := strings.Cut(x, "@")
	if m := f.provenanceMaterials(b)["adminStage"]; m.Digest["sha256"] != strings.TrimPrefix(xDigest, "sha256:") || m.URI != "oci://"+buildinputs.Repository(tag) {
		t.Errorf("the provenance's adminStage material is %+v, want %s", m, x)
	}
	if r := recorded(t, getMOSC(t, "trust"), tag); r == nil || r.Image != x || r.Build != a.Name {
		t.Errorf("status.adminStages entry of %s is %+v, want %s built by %s", tag, r, x, a.Name)
	}

	// The recorded image goes, and the tag is moved again: the stage is
	// built again, and the build says what it found at the tag.
	ref, _ := name.ParseReference(x, name.Insecure)
	if err := remote.Delete(ref, remote.WithAuth(f.reg.Auth())); err != nil {
		t.Fatal(err)
	}
	z := f.digestOf(f.push(strings.TrimPrefix(tag, f.reg.Host+"/")))
	f.setRendered("3")
	c := waitNewBuild(t, "trust", a.Name, b.Name)
	waitEvent(t, c.Name, "UntrustedAdminStage", tag, z)
	x2 := f.playAdminJob(c)
	c = waitCondition(t, c.Name, v1alpha1.BuildSucceeded)
	if st := machineosbuild.FindStage(c, v1alpha1.BuildStageAdmin); st == nil || st.Image != x2 || st.Reused || !strings.Contains(st.Message, z) {
		t.Errorf("build C's admin stage %+v, want %s built by its Job and a message naming %s", st, x2, z)
	}
	eventually(t, "the new admin stage recorded", func() error {
		if r := recorded(t, getMOSC(t, "trust"), tag); r == nil || r.Image != x2 || r.Build != c.Name {
			return fmt.Errorf("entry %+v", r)
		}
		return nil
	})

	// New admin inputs (E, then F on them) leave C's stage to no kept
	// build: garbage collection deletes it, and its record.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := getMOSC(t, "trust")
		m.Spec.ContainerFile[0].Content = "RUN echo two > /etc/two"
		return env.Client.Update(context.Background(), m)
	})
	if err != nil {
		t.Fatal(err)
	}
	e := waitNewBuild(t, "trust", a.Name, b.Name, c.Name)
	tag2 := f.adminPushSpec(e)
	x3 := f.playAdminJob(e)
	waitCondition(t, e.Name, v1alpha1.BuildSucceeded)
	f.setRendered("4")
	g := waitCondition(t, waitNewBuild(t, "trust", a.Name, b.Name, c.Name, e.Name).Name, v1alpha1.BuildSucceeded)
	if st := machineosbuild.FindStage(g, v1alpha1.BuildStageAdmin); st == nil || st.Image != x3 || !st.Reused {
		t.Errorf("build G's admin stage %+v, want %s reused", st, x3)
	}
	eventually(t, "C's admin stage and its record collected", func() error {
		if f.exists(x2) {
			return errors.New("image still in the registry")
		}
		if r := recorded(t, getMOSC(t, "trust"), tag); r != nil {
			return fmt.Errorf("still recorded: %+v", r)
		}
		return nil
	})
	if r := recorded(t, getMOSC(t, "trust"), tag2); r == nil || r.Image != x3 {
		t.Errorf("entry of %s is %+v, want %s", tag2, r, x3)
	}
}
