package nodeconfig

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidationError is every problem found in one set of inputs. The renderer
// refuses all of them at once, so that a person can fix a configuration in
// one round instead of one error per build.
type ValidationError struct {
	Errs field.ErrorList
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// short keeps a bad value printable in a condition message: data URLs can be
// megabytes long.
func short(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
