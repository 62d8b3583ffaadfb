package nodeconfig

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/path"
	"github.com/coreos/vcontext/report"
	vvalidate "github.com/coreos/vcontext/validate"
)

// Ignition validates a config with vcontext's validate package: a walk by
// reflection over every value that calls each type's Validate method,
// and a second walk with ValidateDups. The walk itself, not the checks,
// was most of a cold render: for every struct it lists the fields anew,
// splits each json tag, and boxes every value (every string and int
// included) to ask whether it has a Validate method or duplicates. The
// walk below is the same walk, in the same order, with the same context
// paths, calling the same functions on the same values; what it knows of
// a type (its flattened fields and their names, whether it has Validate,
// whether it has a list that can hold duplicates) it works out once.
// FuzzValidationWalk holds it to vcontext's reports, entry for entry.

// validator is vcontext's interface of the types it validates.
type validator interface {
	Validate(path.ContextPath) report.Report
}

var validatorType = reflect.TypeFor[validator]()

// walkType is what the walk needs to know of a type.
type walkType struct {
	// validates: vcontext's DefaultValidator calls Validate on values of
	// this type (value receiver, not a pointer type).
	validates bool
	// dups: ValidateDups can report something on this type, a struct
	// with a list among its flattened fields; on any other type it
	// reports nothing.
	dups bool
	// fields are the struct's fields as vcontext's GetFields flattens
	// them (embedded structs' fields in place), with FieldName's name.
	fields []walkField
}

type walkField struct {
	index []int
	name  string
}

var walkTypes sync.Map // reflect.Type -> *walkType, or nil if the walk cannot stand in for vcontext's

// walkTypeOf describes t, or returns nil for a type whose walk depends on
// values (an embedded interface or pointer), which the caller then leaves
// to vcontext. Ignition's config types have none.
func walkTypeOf(t reflect.Type) *walkType {
	if w, ok := walkTypes.Load(t); ok {
		return w.(*walkType)
	}
	w := &walkType{validates: t.Kind() != reflect.Pointer && t.Implements(validatorType)}
	if t.Kind() == reflect.Struct {
		if !flattenFields(t, nil, &w.fields) {
			walkTypes.Store(t, (*walkType)(nil))
			return nil
		}
		for _, f := range w.fields {
			if t.FieldByIndex(f.index).Type.Kind() == reflect.Slice {
				w.dups = true
			}
		}
	}
	walkTypes.Store(t, w)
	return w
}

// flattenFields appends t's fields as GetFields lists them, or reports
// false for an embedded field that is not a struct.
func flattenFields(t reflect.Type, index []int, out *[]walkField) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		idx := slices.Concat(index, []int{i}) // a fresh slice: each field keeps its own index
		if f.Anonymous {
			if f.Type.Kind() != reflect.Struct || !flattenFields(f.Type, idx, out) {
				return false
			}
			continue
		}
		// vcontext's FieldName with the "json" tag.
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		*out = append(*out, walkField{index: idx, name: name})
	}
	return true
}

// walkCheck is what the walk calls on each value: vcontext's
// DefaultValidator or Ignition's ValidateDups, told about the type.
type walkCheck func(v reflect.Value, w *walkType, c path.ContextPath) report.Report

func checkValidate(v reflect.Value, w *walkType, c path.ContextPath) report.Report {
	if !w.validates {
		return report.Report{}
	}
	return v.Interface().(validator).Validate(c)
}

func checkDups(v reflect.Value, w *walkType, c path.ContextPath) report.Report {
	if !w.dups {
		return report.Report{}
	}
	return validate.ValidateDups(v, c)
}

// validateFields is vcontext's validate.Validate(thing, "json").
func validateFields(thing any) report.Report {
	if r, ok := walkRoot(thing, checkValidate); ok {
		return r
	}
	return vvalidate.Validate(thing, "json")
}

// validateDups is vcontext's validate.ValidateCustom(thing, "json",
// validate.ValidateDups).
func validateDups(thing any) report.Report {
	if r, ok := walkRoot(thing, checkDups); ok {
		return r
	}
	return vvalidate.ValidateCustom(thing, "json", validate.ValidateDups)
}

func walkRoot(thing any, check walkCheck) (report.Report, bool) {
	if thing == nil {
		return report.Report{}, true
	}
	return walkValue(path.ContextPath{Tag: "json"}, reflect.ValueOf(thing), check)
}

// walkValue is vcontext's validate(context, v, f); ok is false if it met
// a type it cannot walk, and then r is meaningless.
func walkValue(c path.ContextPath, v reflect.Value, check walkCheck) (r report.Report, ok bool) {
	if !v.IsValid() {
		return r, true
	}
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			return r, true
		}
		v = reflect.ValueOf(v.Interface())
	}
	w := walkTypeOf(v.Type())
	if w == nil {
		return r, false
	}
	r.Merge(check(v, w, c))
	switch v.Kind() {
	case reflect.Struct:
		for _, f := range w.fields {
			child, ok := walkValue(c.Append(f.name), v.FieldByIndex(f.index), check)
			if !ok {
				return r, false
			}
			r.Merge(child)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			child, ok := walkValue(c.Append(i), v.Index(i), check)
			if !ok {
				return r, false
			}
			r.Merge(child)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			child, ok := walkValue(c, v.Elem(), check)
			if !ok {
				return r, false
			}
			r.Merge(child)
		}
	}
	return r, true
}
