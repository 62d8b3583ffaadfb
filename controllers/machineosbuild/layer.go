package machineosbuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/direct"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/status"
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
// (one an earlier build's Job made, or built by a Job, or the base
// itself), then the configuration layer on top, made and pushed here.
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
	if admin.Image == in.Base {
		adminKC = s.baseKC
	}
	layer := in.Result.Stages.Layer
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
		Platform:     Platform(r.Config.Arch),
		Layer:        layer,
		Labels:       in.Result.Labels,
		Annotations:  in.Result.Annotations,
		CreatedBy:    v1alpha1.ConfigLayerCreatedBy + in.Rendered.Name,
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
	stage := in.Result.Stages.Admin
	if stage == nil {
		// No kernel type, extensions or Containerfile content: the admin
		// stage is the base image.
		reuse(admin, in.Base)
		return true, nil
	}
	tag := buildinputs.AdminTag(s.mosc, stage.InputHash, r.Config.BuilderImage)
	if admin.StartTime == nil {
		// Built before, by an earlier build of the same admin inputs?
		found, note, err := r.recordedAdminStage(ctx, s, tag)
		if err != nil {
			return false, err
		}
		if note != "" {
			admin.Message = status.Truncate(note, 1024)
			s.afterWrite(func() {
				r.Recorder.Eventf(b, s.mosc, corev1.EventTypeWarning, "UntrustedAdminStage", "Build", "%s", status.Truncate(note, 1024))
			})
		}
		if found != "" {
			reuse(admin, found)
			return true, nil
		}
	}
	st, jobName, err := r.driveJob(ctx, s, job.Request{Result: stage, PushSpec: tag})
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
		admin.Image = buildinputs.Repository(tag) + "@" + st.Digest
		endStage(admin)
		return true, nil
	case job.PhaseFailed:
		endStage(admin)
		failure := st.Failure
		failure.Stage = v1alpha1.BuildStageAdmin
		r.finish(ctx, s, stateFailed, failure, "")
		return false, nil
	case job.PhaseRunning:
		setBuildConditions(b, stateBuilding, withNote("Job "+jobName+" is building the admin stage "+tag, admin.Message))
	default:
		setBuildConditions(b, statePrepared, withNote("Job "+jobName+" is waiting for its pod to build the admin stage "+tag, admin.Message))
	}
	r.eventBuilding(s, jobName)
	return false, nil
}

// withNote is msg followed by what a stage noted, if anything.
func withNote(msg, note string) string {
	if note == "" {
		return msg
	}
	return msg + ". " + note
}

// recordedAdminStage returns the admin stage kept at tag that a build Job
// of this MachineOSConfig pushed, as recorded in its status.adminStages,
// while the registry still has it; "" when there is none, and the stage
// must be built. Whoever can push to the repository can move the tag, so
// the tag alone is never trusted: one that names another image is not
// used, and note says so, naming the tag and what it points to.
func (r *Reconciler) recordedAdminStage(ctx context.Context, s *scope, tag string) (image, note string, err error) {
	rec := findAdminStage(s.mosc, tag)
	found, err := r.Registry.Lookup(ctx, tag, s.pushKC)
	if err != nil {
		return "", "", err
	}
	if rec != nil && found != "" && digestOf(found) == digestOf(rec.Image) {
		return rec.Image, "", nil
	}
	if found != "" {
		recordedAs := "no image was recorded for it"
		if rec != nil {
			recordedAs = "build " + rec.Build + " recorded " + digestOf(rec.Image)
		}
		note = fmt.Sprintf("Admin stage tag %s points to %s, which no build Job of MachineOSConfig %s pushed (%s); it is not used",
			tag, digestOf(found), s.mosc.Name, recordedAs)
	}
	if rec == nil {
		return "", note, nil
	}
	ok, err := r.Registry.Exists(ctx, rec.Image, s.pushKC)
	if err != nil {
		return "", "", err
	}
	if !ok {
		// Gone from the registry: the stage is built again, and its new
		// record replaces this one.
		return "", note, nil
	}
	return rec.Image, note, nil
}

// findAdminStage is the MachineOSConfig's record of the admin stage kept
// at tag, or nil. The records are the MachineOSConfig reconciler's to
// write.
func findAdminStage(mosc *v1alpha1.MachineOSConfig, tag string) *v1alpha1.AdminStageRecord {
	for i := range mosc.Status.AdminStages {
		if mosc.Status.AdminStages[i].Tag == tag {
			return &mosc.Status.AdminStages[i]
		}
	}
	return nil
}

// digestOf is the digest of repository@sha256:digest.
func digestOf(image string) string {
	_, d, _ := strings.Cut(image, "@")
	return d
}

// reuse records an admin stage that needed no build.
func reuse(admin *v1alpha1.BuildStageStatus, image string) {
	now := metav1.Now()
	admin.Image, admin.Reused = image, true
	admin.StartTime, admin.Duration = &now, &metav1.Duration{}
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

// emptyTar is a tar with no entries.
func emptyTar() []byte {
	var buf bytes.Buffer
	_ = tar.NewWriter(&buf).Close() // writing to a buffer cannot fail
	return buf.Bytes()
}
