// Package history orders the objects controllers keep a history of
// (rendered MachineConfigs, MachineOSBuilds) by when they were made.
// creationTimestamp has one-second resolution, and objects made within one
// second must still be ordered, so the controllers stamp them with the
// CreatedAnnotation to the nanosecond.
package history

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
