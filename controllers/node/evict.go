package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubectl/pkg/drain"
)

// Checks for evicted pods start at firstGoneCheck (watchedGoneCheck when
// a watch reports deletions) and double up to lastGoneCheck.
const (
	firstGoneCheck   = 25 * time.Millisecond
	watchedGoneCheck = 250 * time.Millisecond
	lastGoneCheck    = time.Second
)

// evictPods evicts the pods kubectl drain would (helper's filters:
// DaemonSet and mirror pods stay, pods without a controller and emptyDir
// data go) and returns once every evicted pod is gone, within helper's
// Timeout.
//
// Why not the library's RunNodeDrain: it looks for the evicted pods again
// only once a second, so that every drain took at least a second even
// where the pods were gone in tens of milliseconds, and a soft reboot's
// whole slot is a few seconds. Here a watch of the node's pods, started
// before the first eviction, sees each deletion as it happens; GETs,
// from 250 ms backing off to a second (from 25 ms when the watch could
// not be started), are the fallback if the watch ends. Polling alone
// found pods gone up to 0.8 s after they were (checks at 0.375 s, then
// 0.775 s, then 1.575 s).
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
	var deletions <-chan watch.Event
	w, err := helper.Client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String()})
	if err == nil {
		defer w.Stop()
		deletions = w.ResultChan()
	}
	// All at once, as kubectl drain evicts: one eviction's round trip
	// per drain, not one per pod.
	evictErrs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { evictErrs[i] = helper.EvictPod(p, policyv1.SchemeGroupVersion) })
	}
	wg.Wait()
	var evicted []corev1.Pod
	var refused []string
	var failed []error
	for i, p := range pods {
		switch err := evictErrs[i]; {
		case err == nil:
			evicted = append(evicted, p)
		case apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			refused = append(refused, p.Namespace+"/"+p.Name)
		default:
			failed = append(failed, fmt.Errorf("evict pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if err := waitGone(ctx, helper, evicted, deletions); err != nil {
		return err
	}
	if len(refused) > 0 {
		return fmt.Errorf("cannot evict pods %s: their disruption budgets allow no disruption now", strings.Join(refused, ", "))
	}
	return nil
}

// waitGone waits until each pod is deleted (not found, or its name taken
// by a new pod), or ctx ends: as deletions reports them (nil: none), and
// by reading the pods, at once and then backing off.
func waitGone(ctx context.Context, helper *drain.Helper, pods []corev1.Pod, deletions <-chan watch.Event) error {
	left := map[types.UID]corev1.Pod{}
	for _, p := range pods {
		left[p.UID] = p
	}
	pause := firstGoneCheck
	if deletions != nil {
		pause = watchedGoneCheck
	}
	check := time.NewTimer(0)
	defer check.Stop()
	for len(left) > 0 {
		select {
		case <-ctx.Done():
			names := make([]string, 0, len(left))
			for _, p := range left {
				names = append(names, p.Namespace+"/"+p.Name)
			}
			sort.Strings(names)
			return fmt.Errorf("evicted pods not gone within %s: %s", helper.Timeout, strings.Join(names, ", "))
		case ev, ok := <-deletions:
			if !ok {
				// The watch ended: the reads go on.
				deletions = nil
				continue
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type == watch.Deleted {
				delete(left, p.UID)
			}
		case <-check.C:
			for uid, p := range left {
				cur, err := helper.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				switch {
				case apierrors.IsNotFound(err), err == nil && cur.UID != uid:
					delete(left, uid)
				}
				// An error reading it: the deadline decides.
			}
			check.Reset(pause)
			pause = min(2*pause, lastGoneCheck)
		}
	}
	return nil
}
