package machineosbuild

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The one way this reconciler makes and follows a Job, the build Job's
// and the boot disk Job's alike: builder/jobkit makes the Job and reads
// it back (job.Interpret, diskjob.Interpret); these find it and its pods.

// createOrGet creates jb, or reads into jb the Job of its name made
// before (by a reconcile before a restart, or for an earlier attempt, or
// size), and says whether it created it. The caller decides whether an
// existing Job is the one it wants.
func (r *Reconciler) createOrGet(ctx context.Context, jb *batchv1.Job) (bool, error) {
	err := r.Client.Create(ctx, jb)
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create Job %s/%s: %w", jb.Namespace, jb.Name, err)
	}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(jb), jb); err != nil {
		return false, fmt.Errorf("read Job %s/%s: %w", jb.Namespace, jb.Name, err)
	}
	return false, nil
}

// podsOf are jb's own pods, among those with labels: a Job of the same
// name deleted a moment ago (a rebuild) may still have pods with the
// same labels.
func (r *Reconciler) podsOf(ctx context.Context, jb *batchv1.Job, labels map[string]string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(jb.Namespace), client.MatchingLabels(labels)); err != nil {
		return nil, fmt.Errorf("list pods of Job %s: %w", jb.Name, err)
	}
	var own []corev1.Pod
	for _, p := range pods.Items {
		if metav1.IsControlledBy(&p, jb) {
			own = append(own, p)
		}
	}
	return own, nil
}
