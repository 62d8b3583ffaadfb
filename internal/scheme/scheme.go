// Package scheme builds the runtime.Scheme every Strata binary and test
// uses: the built-in Kubernetes kinds plus Strata's.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// New returns a scheme with the built-in kinds and Strata's.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	// Both only fail on conflicting registrations, a programming error.
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
