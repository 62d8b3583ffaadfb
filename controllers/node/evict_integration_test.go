package node

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestWaitGone: evicted pods count as gone when deleted or replaced by a
// new pod of the same name, seen through the watch alone (the helper's
// reads all fail) or through the reads alone (no watch), and those left
// at the deadline are named.
func TestWaitGone(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gone-"}}
	must(t, env.Client.Create(ctx, ns))
	pods := func(node string, names ...string) []corev1.Pod {
		var out []corev1.Pod
		for _, n := range names {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: n},
				Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app@sha256:" + digest('1')}}},
			}
			must(t, env.Client.Create(ctx, p))
			// Deleted gracefully: a pod bound to a node stays,
			// terminating, as an evicted pod does until its kubelet is
			// done with it (here no kubelet ever is).
			must(t, env.Client.Delete(ctx, p))
			out = append(out, *p)
		}
		return out
	}
	// release deletes the pod at once, as its kubelet does once the
	// containers stopped.
	release := func(p corev1.Pod) {
		must(t, client.IgnoreNotFound(env.Client.Delete(ctx, &p, client.GracePeriodSeconds(0))))
	}
	watchNode := func(node string) <-chan watch.Event {
		w, err := kube.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		must(t, err)
		t.Cleanup(w.Stop)
		return w.ResultChan()
	}
	helper := func(c kubernetes.Interface, timeout time.Duration) *drain.Helper {
		return &drain.Helper{Ctx: ctx, Client: c, Timeout: timeout}
	}
	wait := func(h *drain.Helper, ps []corev1.Pod, deletions <-chan watch.Event) <-chan error {
		done := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, h.Timeout)
			defer cancel()
			done <- waitGone(wctx, h, ps, deletions)
		}()
		return done
	}

	t.Run("the watch alone", func(t *testing.T) {
		ps := pods("gone-watch", "a", "b")
		deletions := watchNode("gone-watch")
		// Every read fails: only the watch can tell.
		broken := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1"})
		done := wait(helper(broken, time.Minute), ps, deletions)
		for _, p := range ps {
			release(p)
		}
		if err := <-done; err != nil {
			t.Fatalf("waitGone: %v", err)
		}
	})
	t.Run("the reads alone, a pod replaced by another of its name", func(t *testing.T) {
		ps := pods("gone-reads", "c", "d")
		done := wait(helper(kube, time.Minute), ps, nil)
		release(ps[0])
		release(ps[1])
		must(t, env.Client.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "d"},
			Spec:       corev1.PodSpec{NodeName: "gone-reads", Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app@sha256:" + digest('1')}}},
		}))
		if err := <-done; err != nil {
			t.Fatalf("waitGone: %v", err)
		}
	})
	t.Run("the deadline names the pods left", func(t *testing.T) {
		ps := pods("gone-never", "e")
		t.Cleanup(func() { release(ps[0]) })
		err := <-wait(helper(kube, 500*time.Millisecond), ps, watchNode("gone-never"))
		if err == nil || !strings.Contains(err.Error(), ns.Name+"/e") {
			t.Fatalf("waitGone = %v, want an error naming %s/e", err, ns.Name)
		}
	})
}
