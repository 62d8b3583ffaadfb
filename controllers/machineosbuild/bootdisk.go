package machineosbuild

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/metrics"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/status"
)

// bootDisk makes the boot disk of a succeeded build's image when the
// MachineOSConfig asks for one (spec.bootDisk), in a Job of its own
// (builder/diskjob says why there), and records it in the build's
// status.bootDisk and BootDisk condition. It never changes the build's
// other conditions: the image rolls out while its disk is made, and a
// disk that cannot be made fails only the BootDisk condition. With
// imageApproval Required it waits for the approval, so that no disk of an
// image that may never roll out is published for new nodes.
//
// What the Job reports is checked against the registry: the artifact must
// be a boot disk whose subject is the build's image, and the status is
// written from its manifest.
func (r *Reconciler) bootDisk(ctx context.Context, s *scope) error {
	spec, b := s.mosc.Spec.BootDisk, s.build
	if spec == nil || !IsTrue(s.buildBefore, v1alpha1.BuildSucceeded) {
		// A succeeded build's disk is made once its success is written.
		return nil
	}
	size := spec.SizeMiB
	if size == 0 {
		size = v1alpha1.DefaultBootDiskSizeMiB
	}
	if bd := b.Status.BootDisk; bd != nil && bd.SizeMiB != 0 && bd.SizeMiB != size {
		// Asked again with another size (after one that did not fit):
		// the old Job goes, and the next reconcile makes the disk anew.
		if err := deleteDiskJob(ctx, r.Client, r.Config.Namespace, b); err != nil {
			return err
		}
		b.Status.BootDisk = nil
		setBootDisk(b, metav1.ConditionFalse, v1alpha1.ReasonBootDiskBuilding,
			fmt.Sprintf("MachineOSConfig %s spec.bootDisk.sizeMiB changed from %d to %d: making the disk again", s.mosc.Name, bd.SizeMiB, size))
		s.requeue(time.Second)
		return nil
	}
	if isBootDiskDone(b) {
		return nil
	}
	if s.mosc.Spec.ImageApproval == v1alpha1.ImageApprovalRequired && !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildImageApproved) {
		setBootDisk(b, metav1.ConditionFalse, v1alpha1.ReasonAwaitingImageApproval,
			"The boot disk is made once the image is approved (MachineOSConfig "+s.mosc.Name+" spec.imageApproval is Required)")
		return nil
	}
	image := b.Status.DigestedImagePushSpec
	field := fmt.Sprintf("MachineOSConfig %s spec.bootDisk", s.mosc.Name)
	cfg := r.Config.diskJob()
	if cfg.Image == "" {
		r.failBootDisk(s, &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPrepare,
			Message: field + ": the controller has no boot disk image (build.bootDiskImage in its configuration), so no disk can be made"})
		return nil
	}
	jb, err := diskjob.Objects(cfg, diskjob.Request{Build: b, Image: image, SizeMiB: size, PushSecret: s.mosc.Spec.RenderedImagePushSecret.Name})
	if err != nil {
		r.failBootDisk(s, &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPrepare, Message: field + ": " + err.Error()})
		return nil
	}
	for _, labels := range []map[string]string{jb.Labels, jb.Spec.Template.Labels} {
		labels[v1alpha1.MachineOSConfigLabel] = s.mosc.Name
	}
	jb.Annotations = map[string]string{diskSizeAnnotation: strconv.Itoa(int(size))}
	created, err := r.createOrGet(ctx, jb)
	switch {
	case err != nil:
		return err
	case created:
		log.FromContext(ctx).Info("Created boot disk Job", "build", b.Name, "job", jb.Name, "image", image)
		r.Recorder.Eventf(b, jb, corev1.EventTypeNormal, "BootDiskJobCreated", "BootDisk", "Created Job %s/%s to make the boot disk of %s", jb.Namespace, jb.Name, image)
	case jb.Annotations[diskSizeAnnotation] != strconv.Itoa(int(size)) || !jb.DeletionTimestamp.IsZero():
		// Made before a restart, it is adopted; not the Job of another
		// size, still going.
		if err := deleteDiskJob(ctx, r.Client, r.Config.Namespace, b); err != nil {
			return err
		}
		s.requeue(time.Second)
		return nil
	}
	own, err := r.podsOf(ctx, jb, diskjob.PodLabels(b.Name))
	if err != nil {
		return err
	}
	st := diskjob.Interpret(jb, own)
	if st.RetryAfter > 0 {
		s.requeue(st.RetryAfter)
	}
	if st.StopJob {
		// The pod cannot start (its image, the scheduler): the Job would
		// wait for it until its deadline.
		if err := deleteDiskJob(ctx, r.Client, r.Config.Namespace, b); err != nil {
			return err
		}
	}
	if b.Status.BootDisk == nil {
		b.Status.BootDisk = &v1alpha1.BootDiskStatus{}
	}
	bd := b.Status.BootDisk
	bd.Image, bd.SizeMiB = image, size
	bd.Job = &v1alpha1.ObjectReference{Group: batchv1.GroupName, Resource: "jobs", Namespace: jb.Namespace, Name: jb.Name}
	if bd.StartTime == nil {
		t := jb.CreationTimestamp
		if t.IsZero() {
			t = metav1.Now()
		}
		bd.StartTime = &t
	}
	switch st.Phase {
	case job.PhaseSucceeded:
		d, err := diskjob.Published(ctx, r.Registry, st.Report.Artifact, s.pushKC)
		switch {
		case err != nil && (registry.IsNotFound(err) || registry.IsUnauthorized(err)):
			r.failBootDisk(s, &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPush,
				Message: fmt.Sprintf("the boot disk Job reported %s, which cannot be read: %v", st.Report.Artifact, registry.Explain(err))})
			return nil
		case err != nil:
			setBootDisk(b, metav1.ConditionFalse, v1alpha1.ReasonBootDiskBuilding, "Reading the published boot disk "+st.Report.Artifact+" failed, retrying: "+registry.Explain(err).Error())
			return fmt.Errorf("build %s: read boot disk %s: %w", b.Name, st.Report.Artifact, err)
		case d.Image != image:
			r.failBootDisk(s, &v1alpha1.BuildFailure{Step: v1alpha1.BuildStepPush,
				Message: fmt.Sprintf("the boot disk Job reported %s, whose subject is %s, not the build's image %s", st.Report.Artifact, d.Image, image)})
			return nil
		}
		bd.Artifact, bd.Size, bd.CompressedSize, bd.RawDigest, bd.Failure = d.Artifact, d.Size, d.CompressedSize, d.RawDigest, nil
		bd.Duration = &metav1.Duration{Duration: time.Since(bd.StartTime.Time).Round(time.Second)}
		msg := fmt.Sprintf("Published the boot disk of %s: %s (%d MiB, %d MiB compressed)", image, d.Artifact, d.Size>>20, d.CompressedSize>>20)
		setBootDisk(b, metav1.ConditionTrue, v1alpha1.ReasonBootDiskPublished, msg)
		took := bd.Duration.Duration
		s.afterWrite(func() {
			log.FromContext(ctx).Info("Boot disk published", "build", b.Name, "artifact", d.Artifact, "size", d.Size, "compressedSize", d.CompressedSize)
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, v1alpha1.ReasonBootDiskPublished, "BootDisk", "%s", status.Truncate(msg, 1024))
			metrics.BootDiskEnded("Published", took, true)
		})
	case job.PhaseFailed:
		f := st.Failure
		f.Message = field + ": the boot disk of " + image + " could not be made: " + f.Message
		r.failBootDisk(s, f)
	case job.PhaseRunning:
		setBootDisk(b, metav1.ConditionFalse, v1alpha1.ReasonBootDiskBuilding, "Job "+jb.Namespace+"/"+jb.Name+" is making the boot disk of "+image)
	default:
		setBootDisk(b, metav1.ConditionFalse, v1alpha1.ReasonBootDiskBuilding, "Job "+jb.Namespace+"/"+jb.Name+" is waiting for its pod")
	}
	return nil
}

// diskSizeAnnotation on a boot disk Job is the size it makes, in MiB.
const diskSizeAnnotation = v1alpha1.Prefix + "bootdisk-size-mib"

// isBootDiskDone: the disk is published, or its Job failed; it is made
// again only for another size or a rebuild (the rebuild annotation). A
// disk that could not even be asked for (Prepare: no boot disk image
// configured) is looked at again on every reconcile, so that a
// controller configured later makes it.
func isBootDiskDone(b *v1alpha1.MachineOSBuild) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildBootDisk)
	if c == nil {
		return false
	}
	if c.Status == metav1.ConditionTrue {
		return true
	}
	bd := b.Status.BootDisk
	return c.Reason == v1alpha1.ReasonBootDiskFailed && bd != nil && bd.Failure != nil && bd.Failure.Step != v1alpha1.BuildStepPrepare
}

// isBootDiskFailed says whether b's BootDisk condition says it failed.
func isBootDiskFailed(b *v1alpha1.MachineOSBuild) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildBootDisk)
	return c != nil && c.Reason == v1alpha1.ReasonBootDiskFailed
}

// deleteDiskJob deletes a build's boot disk Job with its pods.
func deleteDiskJob(ctx context.Context, c client.Client, namespace string, b *v1alpha1.MachineOSBuild) error {
	jb := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: diskjob.JobName(b.Name)}}
	if err := c.Delete(ctx, jb, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s: %w", jb.Name, err)
	}
	return nil
}

// failBootDisk records a disk that cannot be made, and says so once.
func (r *Reconciler) failBootDisk(s *scope, f *v1alpha1.BuildFailure) {
	b := s.build
	if b.Status.BootDisk == nil {
		b.Status.BootDisk = &v1alpha1.BootDiskStatus{}
	}
	bd := b.Status.BootDisk
	bd.Failure = job.BoundFailure(f)
	if bd.StartTime != nil && bd.Duration == nil {
		bd.Duration = &metav1.Duration{Duration: time.Since(bd.StartTime.Time).Round(time.Second)}
	}
	msg := FailureMessage(bd.Failure)
	// Counted once: a failure found again (no boot disk image configured,
	// looked at on every reconcile) is not a new one.
	again := isBootDiskFailed(s.buildBefore)
	setBootDisk(b, metav1.ConditionFalse, v1alpha1.ReasonBootDiskFailed, msg)
	if again {
		return
	}
	var took time.Duration
	if bd.Duration != nil {
		took = bd.Duration.Duration
	}
	s.afterWrite(func() {
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, v1alpha1.ReasonBootDiskFailed, "BootDisk", "%s", status.Truncate(msg, 1024))
		metrics.BootDiskEnded("Failed", took, bd.Duration != nil)
	})
}

// setBootDisk sets the build's BootDisk condition, the boot disk's own
// (the build's other conditions are setBuildConditions').
func setBootDisk(b *v1alpha1.MachineOSBuild, st metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: v1alpha1.BuildBootDisk, Status: st, Reason: reason,
		Message: status.Message(msg), ObservedGeneration: b.Generation,
	})
}
