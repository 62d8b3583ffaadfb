package build

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/diskartifact"
	strata "github.com/strata-dev/strata/internal/metrics"
)

const bootDiskImage = "127.0.0.1:5000/strata/strata-bootdisk@sha256:" + "d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0"

func withBootDiskImage(c *Config) { c.BootDiskImage = bootDiskImage }

func bootDiskOf(size int32) func(*v1alpha1.MachineOSConfig) {
	return func(m *v1alpha1.MachineOSConfig) { m.Spec.BootDisk = &v1alpha1.BootDisk{SizeMiB: size} }
}

// diskJob waits for the build's boot disk Job.
func diskJob(t *testing.T, b *v1alpha1.MachineOSBuild, check func(*batchv1.Job) error) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	eventually(t, "the boot disk Job of "+b.Name, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: diskjob.JobName(b.Name)}, j); err != nil {
			return err
		}
		if check != nil {
			return check(j)
		}
		return nil
	})
	return j
}

// finishDiskPod plays the boot disk Job's pod ending with report.
func finishDiskPod(t *testing.T, j *batchv1.Job, phase corev1.PodPhase, exit int32, report diskjob.Report) {
	t.Helper()
	ctx := context.Background()
	msg, _ := json.Marshal(report)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: j.Name + "-", Labels: j.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: diskjob.Container, Image: bootDiskImage}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		Name:  diskjob.Container,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: string(msg), StartedAt: now, FinishedAt: now}},
	}}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if phase == corev1.PodFailed {
		j.Status.StartTime, j.Status.Failed = &now, 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now},
		}
		if err := env.Client.Status().Update(ctx, j); err != nil {
			t.Fatalf("write Job status: %v", err)
		}
	}
}

// waitBootDisk waits for the build's BootDisk condition to have reason.
func waitBootDisk(t *testing.T, build, reason string) (*v1alpha1.MachineOSBuild, *metav1.Condition) {
	t.Helper()
	var b *v1alpha1.MachineOSBuild
	var c *metav1.Condition
	eventually(t, build+" BootDisk "+reason, func() error {
		var err error
		if b, err = getBuild(build); err != nil {
			return err
		}
		if c = meta.FindStatusCondition(b.Status.Conditions, v1alpha1.BuildBootDisk); c == nil || c.Reason != reason {
			return fmt.Errorf("BootDisk condition %+v", c)
		}
		return nil
	})
	return b, c
}

// TestBootDiskPublished: a succeeded build of a MachineOSConfig with
// spec.bootDisk gets a Job that makes the disk (the image by digest, the
// push secret as a mounted file), and once the pod reports the artifact
// it published, the build's status names it as the registry has it; the
// build and its MachineOSConfig stay as they were.
func TestBootDiskPublished(t *testing.T) {
	f := newFixture(t, "disk")
	startController(t, f.reg, 0, withBootDiskImage)
	published := testutil.ToFloat64(strata.BootDisks.WithLabelValues("Published"))
	f.mosc(bootDiskOf(1024))
	b := waitBuild(t, f.name)
	image := f.succeed(b)
	waitCondition(t, b.Name, v1alpha1.BuildSucceeded)

	j := diskJob(t, b, nil)
	c := j.Spec.Template.Spec.Containers[0]
	if c.Image != bootDiskImage || !slices.Contains(c.Args, "--image="+image) || !slices.Contains(c.Args, "--size-mib=1024") {
		t.Errorf("disk container %s %q", c.Image, c.Args)
	}
	if metav1.GetControllerOf(j).Name != b.Name {
		t.Errorf("the Job's controller is %v, want the build", metav1.GetControllerOf(j))
	}
	var secret string
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	if secret != f.name+"-push" {
		t.Errorf("the Job mounts Secret %q, want the push secret", secret)
	}
	_, cond := waitBootDisk(t, b.Name, v1alpha1.ReasonBootDiskBuilding)
	if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, j.Name) {
		t.Errorf("BootDisk while the Job runs: %+v", cond)
	}

	// The pod publishes a disk, as strata-bootdisk does, and reports it.
	path := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(path, append([]byte("a disk"), make([]byte, 1<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, err := diskartifact.Publish(context.Background(), f.referrers(), image, f.keychain(), path)
	if err != nil {
		t.Fatal(err)
	}
	finishDiskPod(t, j, corev1.PodSucceeded, 0, diskjob.Report{Artifact: pub.Artifact, Size: pub.Size, RawDigest: pub.RawDigest, CompressedSize: pub.CompressedSize})

	got, cond := waitBootDisk(t, b.Name, v1alpha1.ReasonBootDiskPublished)
	bd := got.Status.BootDisk
	if cond.Status != metav1.ConditionTrue || bd == nil || bd.Artifact != pub.Artifact || bd.Image != image || bd.Size != pub.Size ||
		bd.CompressedSize != pub.CompressedSize || bd.RawDigest != pub.RawDigest || bd.SizeMiB != 1024 || bd.Failure != nil || bd.Duration == nil {
		t.Errorf("status.bootDisk %+v, condition %+v; want %+v", bd, cond, pub)
	}
	if !machineosbuild.IsTrue(got, v1alpha1.BuildSucceeded) || got.Status.DigestedImagePushSpec != image || len(got.Status.Referrers) != 2 {
		t.Errorf("the build changed: conditions %+v, image %s, referrers %+v", got.Status.Conditions, got.Status.DigestedImagePushSpec, got.Status.Referrers)
	}
	if m := getMOSC(t, f.name); m.Status.CurrentImagePullSpec != image || !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConfigReady) {
		t.Errorf("MachineOSConfig status %+v", m.Status)
	}
	// The disk is listed beside the SBOM and the provenance.
	var types []string
	for _, r := range f.listReferrers(image) {
		types = append(types, r.ArtifactType)
	}
	if !slices.Contains(types, v1alpha1.BootDiskArtifactType) || len(types) != 3 {
		t.Errorf("referrers of the image: %v", types)
	}
	f.assertNoSecret(got)
	if n := testutil.ToFloat64(strata.BootDisks.WithLabelValues("Published")) - published; n != 1 {
		t.Errorf("strata_boot_disks_total{result=Published} grew by %v, want 1", n)
	}
}

// TestBootDiskFailure: a disk that cannot be made fails only the BootDisk
// condition, naming the MachineOSConfig and the field, while the image
// stays Succeeded and current; asking for another size makes it again.
func TestBootDiskFailure(t *testing.T) {
	f := newFixture(t, "disk-fail")
	startController(t, f.reg, 0, withBootDiskImage)
	f.mosc(bootDiskOf(512))
	b := waitBuild(t, f.name)
	image := f.succeed(b)
	j := diskJob(t, b, nil)
	finishDiskPod(t, j, corev1.PodFailed, job.ExitCodePermanent, diskjob.Report{
		Step: v1alpha1.BuildStepDisk, Message: "the image " + image + " does not fit in a disk of 512 MiB: raise the MachineOSConfig's spec.bootDisk.sizeMiB",
		LogTail: "mkfs.ext4: Could not allocate block in ext2 filesystem",
	})
	got, cond := waitBootDisk(t, b.Name, v1alpha1.ReasonBootDiskFailed)
	for _, want := range []string{"MachineOSConfig disk-fail spec.bootDisk", "spec.bootDisk.sizeMiB", "Disk failed", "Could not allocate block"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("BootDisk message %q does not say %q", cond.Message, want)
		}
	}
	if f := got.Status.BootDisk.Failure; cond.Status != metav1.ConditionFalse || f == nil || f.Step != v1alpha1.BuildStepDisk || got.Status.BootDisk.Artifact != "" {
		t.Errorf("status.bootDisk %+v, condition %+v", got.Status.BootDisk, cond)
	}
	if !machineosbuild.IsTrue(got, v1alpha1.BuildSucceeded) || machineosbuild.IsTrue(got, v1alpha1.BuildFailed) || got.Status.Failure != nil {
		t.Errorf("the build's own conditions changed: %+v", got.Status.Conditions)
	}
	if m := getMOSC(t, f.name); m.Status.CurrentImagePullSpec != image || meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.ConfigDegraded) {
		t.Errorf("MachineOSConfig status %+v", m.Status)
	}

	// A larger disk: the failed Job goes and a Job of the new size comes.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := getMOSC(t, f.name)
		m.Spec.BootDisk.SizeMiB = 2048
		return env.Client.Update(context.Background(), m)
	})
	if err != nil {
		t.Fatal(err)
	}
	diskJob(t, b, func(j *batchv1.Job) error {
		if !slices.Contains(j.Spec.Template.Spec.Containers[0].Args, "--size-mib=2048") {
			return errors.New("still the Job of the old size")
		}
		return nil
	})
	waitBootDisk(t, b.Name, v1alpha1.ReasonBootDiskBuilding)
}

// TestBootDiskWithoutImage: a controller with no boot disk image says so
// on the build, naming the MachineOSConfig's field and the setting, and
// builds and rolls out the image all the same.
func TestBootDiskWithoutImage(t *testing.T) {
	f := newFixture(t, "disk-noimage")
	startController(t, f.reg, 0)
	failed := testutil.ToFloat64(strata.BootDisks.WithLabelValues("Failed"))
	f.mosc(bootDiskOf(512))
	b := waitBuild(t, f.name)
	image := f.succeed(b)
	got, cond := waitBootDisk(t, b.Name, v1alpha1.ReasonBootDiskFailed)
	if !strings.Contains(cond.Message, "MachineOSConfig disk-noimage spec.bootDisk") || !strings.Contains(cond.Message, "build.bootDiskImage") {
		t.Errorf("BootDisk message %q", cond.Message)
	}
	if !machineosbuild.IsTrue(got, v1alpha1.BuildSucceeded) || getMOSC(t, f.name).Status.CurrentImagePullSpec != image {
		t.Errorf("the image did not roll out: %+v", got.Status.Conditions)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: diskjob.JobName(b.Name)}, &batchv1.Job{}); err == nil {
		t.Error("a boot disk Job exists without a boot disk image")
	}
	// Looked at again on later reconciles (a controller configured later
	// makes the disk), but counted once.
	before := reconciles(t, machineosbuild.ControllerName)
	annotate(t, f.name, "test.strata.dev/poke")
	eventually(t, "a reconcile after the poke", func() error {
		if reconciles(t, machineosbuild.ControllerName) <= before {
			return errors.New("no reconcile yet")
		}
		return nil
	})
	if n := testutil.ToFloat64(strata.BootDisks.WithLabelValues("Failed")) - failed; n != 1 {
		t.Errorf("strata_boot_disks_total{result=Failed} grew by %v, want 1", n)
	}
}
