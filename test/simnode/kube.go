package simnode

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// kwokHint ends the errors of waits on kwok.
const kwokHint = "is kwok running? (make cluster-up starts it; log in .infra/cluster-logs/kwok.log)"

// registerNode creates the simulated Node and waits until it is Ready and
// the node lifecycle controller has lifted the not-ready taint every new
// Node gets, so that pods can be scheduled onto it at once.
func (c *Cluster) registerNode(ctx context.Context, name string, labels map[string]string, bootID string) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{BootIDAnnotation: bootID},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: SimulatedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if _, err := c.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("simnode: create node %s: %w", name, err)
	}
	return c.waitNode(ctx, name, "Ready and schedulable", readyAndUntainted)
}

// SetReady makes the node NotReady (ready false) or Ready again through
// kwok, as a reboot does, without touching its daemon, and waits until the
// cluster sees it: Ready=False and the not-ready taint, or Ready=True and
// no such taint.
func (c *Cluster) SetReady(ctx context.Context, name string, ready bool) error {
	nd, err := c.node(name)
	if err != nil {
		return err
	}
	bootID, err := readBootID(nd.root)
	if err != nil {
		return err
	}
	return c.setReady(ctx, name, ready, bootID)
}

// setReady sets or removes the rebooting annotation (kwok's stages act on
// it), records bootID on the way up, and waits as SetReady says.
func (c *Cluster) setReady(ctx context.Context, name string, ready bool, bootID string) error {
	ann := map[string]any{RebootingAnnotation: "true"}
	if ready {
		ann = map[string]any{RebootingAnnotation: nil, BootIDAnnotation: bootID}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("simnode: annotate node %s: %w", name, err)
	}
	if ready {
		return c.waitNode(ctx, name, "Ready", readyAndUntainted)
	}
	return c.waitNode(ctx, name, "NotReady", notReadyAndTainted)
}

// readyAndUntainted: kwok posted Ready=True and the node lifecycle
// controller has seen it (it removes the not-ready taint).
func readyAndUntainted(n *corev1.Node) bool {
	return readyStatus(n) == corev1.ConditionTrue &&
		!hasTaint(n, corev1.TaintNodeNotReady) && !hasTaint(n, corev1.TaintNodeUnreachable)
}

// notReadyAndTainted: kwok posted Ready=False and the node lifecycle
// controller has seen it (it adds the not-ready taint).
func notReadyAndTainted(n *corev1.Node) bool {
	return readyStatus(n) == corev1.ConditionFalse && hasTaint(n, corev1.TaintNodeNotReady)
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return corev1.ConditionUnknown
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// waitNode polls the Node until ok says yes or the timeout runs out.
func (c *Cluster) waitNode(ctx context.Context, name, what string, ok func(*corev1.Node) bool) error {
	var (
		last    *corev1.Node
		lastErr error
	)
	err := wait.PollUntilContextTimeout(ctx, c.cfg.PollInterval, c.cfg.Timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			// The API server may blink; the deadline decides.
			lastErr = err
			return false, nil
		}
		last = n
		return ok(n), nil
	})
	if err != nil {
		state := fmt.Sprintf("last error: %v", lastErr)
		if last != nil {
			state = fmt.Sprintf("Ready=%s, taints %v", readyStatus(last), last.Spec.Taints)
		}
		return fmt.Errorf("simnode: node %s not %s after %s (%s); %s", name, what, c.cfg.Timeout, state, kwokHint)
	}
	return nil
}

// restorePods marks the running pods bound to the node Ready again after a
// reboot. The node lifecycle controller marked them not Ready when the
// Node went NotReady; a kubelet would restart them at boot and report them
// Ready, but kwok's stages only start pods that are Pending.
func (c *Cluster) restorePods(ctx context.Context, name string) error {
	pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String(),
	})
	if err != nil {
		return fmt.Errorf("simnode: pods on %s: %w", name, err)
	}
	now := metav1.NewTime(time.Now())
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || podReady(&p) {
			continue
		}
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}})
		if err != nil {
			return err
		}
		_, err = c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("simnode: mark pod %s/%s Ready: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteNode deletes the Node and waits until it is gone. kwok made the
// Node the owner of its Lease, so the garbage collector removes that.
func (c *Cluster) deleteNode(ctx context.Context, name string) error {
	err := c.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("simnode: delete node %s: %w", name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, c.cfg.PollInterval, c.cfg.Timeout, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("simnode: node %s still there after delete: %w", name, err)
	}
	return nil
}
