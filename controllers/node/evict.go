package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/drain"
)

// Checks for evicted pods start at firstGoneCheck and double up to
// lastGoneCheck.
const (
	firstGoneCheck = 25 * time.Millisecond
	lastGoneCheck  = time.Second
)

// evictPods evicts the pods kubectl drain would (helper's filters:
// DaemonSet and mirror pods stay, pods without a controller and emptyDir
// data go) and returns once every evicted pod is gone, within helper's
// Timeout.
//
// Why not the library's RunNodeDrain: it looks for the evicted pods again
// only once a second, so that every drain took at least a second even
// where the pods were gone in tens of milliseconds, and a soft reboot's
// whole slot is a few seconds. Here the checks start at 25 ms and back
// off to a second: a pod that takes long costs no more requests than
// before.
//
// An eviction a PodDisruptionBudget refuses is not retried within the
// attempt: the error names the pods, and the caller tries again.
func evictPods(ctx context.Context, helper *drain.Helper, nodeName string) error {
	list, errs := helper.GetPodsForDeletion(nodeName)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	pods := list.Pods()
	if len(pods) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, helper.Timeout)
	defer cancel()
	var evicted []corev1.Pod
	var refused []string
	for _, p := range pods {
		err := helper.EvictPod(p, policyv1.SchemeGroupVersion)
		switch {
		case err == nil:
			evicted = append(evicted, p)
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			refused = append(refused, p.Namespace+"/"+p.Name)
		default:
			return fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	if err := waitGone(ctx, helper, evicted); err != nil {
		return err
	}
	if len(refused) > 0 {
		return fmt.Errorf("cannot evict pods %s: their disruption budgets allow no disruption now", strings.Join(refused, ", "))
	}
	return nil
}

// waitGone waits until each pod is deleted (not found, or its name taken
// by a new pod), or ctx ends.
func waitGone(ctx context.Context, helper *drain.Helper, pods []corev1.Pod) error {
	for pause := firstGoneCheck; ; pause = min(2*pause, lastGoneCheck) {
		left := pods[:0]
		for _, p := range pods {
			cur, err := helper.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil, cur.UID == p.UID:
				// An error reading it: the deadline decides.
				left = append(left, p)
			}
		}
		pods = left
		if len(pods) == 0 {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			names := make([]string, 0, len(pods))
			for _, p := range pods {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			return fmt.Errorf("evicted pods not gone within %s: %s", helper.Timeout, strings.Join(names, ", "))
		case <-t.C:
		}
	}
}
