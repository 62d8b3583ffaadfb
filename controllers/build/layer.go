package build

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/direct"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/registry"
)

// layerTimeout bounds making and pushing the configuration layer. It is
// about a second when the base's layers are in the target registry; the
// first build on a base from another registry copies them once.
const layerTimeout = 15 * time.Minute

// baseTrees keeps what completing configuration layers learnt of their
// admin stages' file trees (the parent directories and symlinks on the
// layers' paths), so that a configuration change on the same stage reads
// none of its layers. It is keyed by image digest, which names content,
// so every Reconciler can share it.
var baseTrees = direct.NewBaseCache(16)

// runConfigLayer builds with the ConfigLayer strategy: the admin stage
// (found in the registry, or built by a Job, or the base itself), then the
// configuration layer on top, made and pushed here.
func (r *Reconciler) runConfigLayer(ctx context.Context, s *scope, in *inputs) error {
	b := s.build
	admin := stageStatus(b, v1alpha1.BuildStageAdmin)
	if admin.Image == "" || admin.Duration == nil {
		done, err := r.adminStage(ctx, s, in, admin)
		if err != nil || !done {
			return err
		}
	}
	if b.Status.BuildStart == nil {
		now := metav1.Now()
		b.Status.BuildStart = &now
	}

	// A layer pushed by an earlier reconcile whose attach step must be
	// tried again is not pushed again.
	st := stageStatus(b, v1alpha1.BuildStageConfigLayer)
	if st.Image == "" || st.Duration == nil {
		done, err := r.pushConfigLayer(ctx, s, in, admin, st)
		if err != nil || !done {
			return err
		}
	}
	return r.attachAndFinish(ctx, s, in, st.Image)
}

// pushConfigLayer appends the configuration layer to the admin stage and
// pushes the image, recording it in the stage's status; it says whether
// it did. A failure retrying cannot fix finishes the build.
func (r *Reconciler) pushConfigLayer(ctx context.Context, s *scope, in *inputs, admin, st *v1alpha1.BuildStageStatus) (bool, error) {
	b := s.build
	adminKC := s.pushKC
	if admin.Image == in.base {
		adminKC = s.baseKC
	}
	layer := in.result.Stages.Layer
	if layer == nil {
		// The configuration adds nothing to the image (only /var-bound
		// items): an empty layer keeps one shape for every build.
		layer = emptyTar()
	}
	now := metav1.Now()
	st.StartTime = &now
	lctx, cancel := context.WithTimeout(ctx, layerTimeout)
	defer cancel()
	res, err := direct.Build(lctx, direct.Request{
		Base:         admin.Image,
		BaseKeychain: adminKC,
		Platform:     platform(r.Config.Arch),
		Layer:        layer,
		Labels:       in.result.Labels,
		Annotations:  in.result.Annotations,
		CreatedBy:    "strata: configuration of " + in.rendered.Name,
		Target:       b.Spec.RenderedImagePushSpec,
		PushKeychain: s.pushKC,
		Insecure:     r.Registry.Insecure,
		Cache:        baseTrees,
	})
	if err != nil {
		failure, permanent := layerFailure(err)
		if !permanent {
			// A registry that did not answer may next time: say so and
			// retry with the controller's backoff.
			setBuildConditions(b, stateBuilding, "Adding the configuration layer failed, retrying: "+failure.Message)
			return false, fmt.Errorf("build %s: %s", b.Name, failure.Message)
		}
		endStage(st)
		r.finish(ctx, s, stateFailed, failure, "")
		return false, nil
	}
	st.Image = res.Image
	st.Duration = &metav1.Duration{Duration: (res.LayerTime + res.PushTime).Round(time.Millisecond)}
	return true, nil
}

// adminStage finds or builds the admin stage image and records it in the
// stage's status; it says whether the stage is done. A stage that is still
// building has its progress recorded in the build's status.
func (r *Reconciler) adminStage(ctx context.Context, s *scope, in *inputs, admin *v1alpha1.BuildStageStatus) (bool, error) {
	b := s.build
	stage := in.result.Stages.Admin
	if stage == nil {
		// No kernel type, extensions or Containerfile content: the admin
		// stage is the base image.
		reuse(admin, in.base)
		return true, nil
	}
	tag := adminTag(s.mosc, stage.InputHash, r.Config.BuilderImage)
	if admin.StartTime == nil {
		// Built before, by this or another build of the same admin inputs?
		found, err := r.Registry.Lookup(ctx, tag, s.pushKC)
		if err != nil {
			return false, err
		}
		if found != "" {
			reuse(admin, found)
			return true, nil
		}
	}
	st, jobName, err := r.driveJob(ctx, s, stage, tag)
	if err != nil {
		return false, err
	}
	if admin.StartTime == nil {
		// Set as the Job is made, so that later reconciles do not mistake
		// the image the Job pushes for one found in the registry.
		admin.StartTime = st.StartTime
		if admin.StartTime == nil {
			now := metav1.Now()
			admin.StartTime = &now
		}
	}
	switch st.Phase {
	case job.PhaseSucceeded:
		admin.Image = repository(tag) + "@" + st.Digest
		endStage(admin)
		return true, nil
	case job.PhaseFailed:
		endStage(admin)
		failure := st.Failure
		failure.Stage = v1alpha1.BuildStageAdmin
		r.finish(ctx, s, stateFailed, failure, "")
		return false, nil
	case job.PhaseRunning:
		setBuildConditions(b, stateBuilding, "Job "+jobName+" is building the admin stage "+tag)
	default:
		setBuildConditions(b, statePrepared, "Job "+jobName+" is waiting for its pod to build the admin stage "+tag)
	}
	r.eventBuilding(s, jobName)
	return false, nil
}

// reuse records an admin stage that needed no build.
func reuse(admin *v1alpha1.BuildStageStatus, image string) {
	now := metav1.Now()
	admin.Image, admin.Reused = image, true
	admin.StartTime, admin.Duration = &now, &metav1.Duration{}
}

// adminTag is where an admin stage is kept: the MachineOSConfig's
// repository, tagged with a hash of the stage's inputs and the builder
// image, so that any build of the same admin inputs finds it.
func adminTag(mosc *v1alpha1.MachineOSConfig, stageHash, builderImage string) string {
	h := sha256.New()
	for _, part := range []string{stageHash, builderImage} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return repository(mosc.Spec.RenderedImagePushSpec) + ":admin-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// layerFailure turns a direct build's error into the build's failure, and
// says whether retrying cannot help: refused credentials, a base that is
// not there, a layer that cannot be made.
func layerFailure(err error) (*v1alpha1.BuildFailure, bool) {
	f := &v1alpha1.BuildFailure{Stage: v1alpha1.BuildStageConfigLayer, Step: v1alpha1.BuildStepPush, Message: registry.Explain(err).Error()}
	var se *direct.StageError
	if errors.As(err, &se) {
		switch se.Stage {
		case direct.StageBase:
			f.Step = v1alpha1.BuildStepPullBase
		case direct.StageLayer:
			f.Step = v1alpha1.BuildStepLayer
		}
	}
	if registry.IsUnauthorized(err) {
		f.Step = v1alpha1.BuildStepAuth
		return f, true
	}
	return f, f.Step == v1alpha1.BuildStepLayer || registry.IsNotFound(err)
}

// platform is the image platform of the nodes' architecture, in Go's or
// the kernel's spelling.
func platform(arch string) v1.Platform {
	switch arch {
	case "x86_64":
		arch = "amd64"
	case "aarch64":
		arch = "arm64"
	}
	return v1.Platform{OS: "linux", Architecture: arch}
}

// emptyTar is a tar with no entries.
func emptyTar() []byte {
	var buf bytes.Buffer
	_ = tar.NewWriter(&buf).Close() // writing to a buffer cannot fail
	return buf.Bytes()
}
