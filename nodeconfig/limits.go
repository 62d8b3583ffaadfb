package nodeconfig

import (
	"fmt"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxContentSize bounds the decoded contents of one config's files and
// appends together: a MachineConfig's, and a rendered config's, which
// merges many. etcd keeps a MachineConfig under about 1.5 MiB, but gzip
// lets that expand a thousandfold, and every controller that validates a
// config decodes it, and the build controller holds what it decodes while
// it makes the configuration layer, for several builds at once: an 80 KB
// MachineConfig of 60 MiB of gzipped zeros took the controller past its
// memory limit, and again after every restart. Decoding stops as soon as
// the bound is passed.
//
// What real configs carry is far below it: the largest of the 40 public
// MachineConfigs in the corpus (shared/corpus/mco-real) decodes to 23 KB,
// and content that is not gzipped cannot pass the 1.4 MiB a rendered
// config may take in etcd (machineconfig.MaxRenderedSize). 4 MiB leaves
// that content room to be gzipped text at a ratio of almost three, and
// keeps four builds of the largest content under 200 MB of controller
// memory (test/memory); an image is the place for anything larger (the
// MachineOSConfig's containerFile).
const MaxContentSize = 4 << 20

// contentTooLarge is the refusal of the resource at fldPath, whose decoded
// contents take the config past MaxContentSize.
func contentTooLarge(fldPath *field.Path) *field.Error {
	return &field.Error{
		Type:     field.ErrorTypeTooLong,
		Field:    fldPath.String(),
		BadValue: field.OmitValueType{},
		Detail: fmt.Sprintf("decoded, the contents of the config's files and appends pass %d bytes (%d MiB, the limit for one config) here; "+
			"large content belongs in the image: add it in the MachineOSConfig's containerFile", MaxContentSize, MaxContentSize>>20),
	}
}

// contentBudget is what is left of MaxContentSize in one walk of a config.
// Once it is spent, the walk decodes nothing more: the refusal is reported
// once, at the entry that passed it.
type contentBudget struct {
	left  int64
	spent bool
}

func newContentBudget() contentBudget { return contentBudget{left: MaxContentSize} }

// decode is decodeResource within the budget; ok is false when the
// resource was refused (fail has the reason) or the budget was already
// spent.
func (b *contentBudget) decode(r ign.Resource, fldPath *field.Path, fail func(*field.Error)) (data []byte, ok bool) {
	if b.spent {
		return nil, false
	}
	data, ferr := decodeResource(r, fldPath, b.left)
	if ferr != nil {
		b.spent = ferr.Type == field.ErrorTypeTooLong
		fail(ferr)
		return nil, false
	}
	b.left -= int64(len(data))
	return data, true
}
