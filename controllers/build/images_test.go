package build

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// TestImagesOfNode: the images GC spares for a node include the one it
// booted while a live apply made the staged image current (issue 21).
func TestImagesOfNode(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		v1alpha1.CurrentImageAnnotation:  "r/os@sha256:staged",
		v1alpha1.DesiredImageAnnotation:  "r/os@sha256:staged",
		v1alpha1.OriginalImageAnnotation: "r/os@sha256:original",
		v1alpha1.BootedImageAnnotation:   "r/os@sha256:booted",
		v1alpha1.ReasonAnnotation:        "not an image",
	}}}
	got := imagesOfNode(n)
	slices.Sort(got)
	want := []string{"r/os@sha256:booted", "r/os@sha256:original", "r/os@sha256:staged", "r/os@sha256:staged"}
	if !slices.Equal(got, want) {
		t.Errorf("imagesOfNode = %q, want %q", got, want)
	}
}
