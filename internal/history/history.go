// Package history orders the objects controllers keep a history of
// (rendered MachineConfigs, MachineOSBuilds) by when they were made.
// creationTimestamp has one-second resolution, and objects made within one
// second must still be ordered, so the controllers stamp them with the
// CreatedAnnotation to the nanosecond.
package history

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Stamp is the CreatedAnnotation value for an object made now.
func Stamp() string {
	return time.Now().UTC().Format(time.RFC3339Nano)
}

// CreatedAt is when the object was made: its stamp, or its
// creationTimestamp when it has none.
func CreatedAt(obj metav1.Object) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, obj.GetAnnotations()[v1alpha1.CreatedAnnotation]); err == nil {
		return t
	}
	return obj.GetCreationTimestamp().Time
}

// NewestFirst orders objects newest first, the name breaking ties so that
// every run agrees.
func NewestFirst(a, b metav1.Object) int {
	if c := CreatedAt(b).Compare(CreatedAt(a)); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}

// NamedByNodes is the set of values any node holds in the given
// annotations (a node's current and desired config or image), plus extra:
// what history must never delete.
func NamedByNodes(ctx context.Context, c client.Reader, annotations []string, extra ...string) (map[string]bool, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	named := map[string]bool{}
	for _, v := range extra {
		named[v] = true
	}
	for _, n := range nodes.Items {
		for _, a := range annotations {
			if v := n.Annotations[a]; v != "" {
				named[v] = true
			}
		}
	}
	return named, nil
}
