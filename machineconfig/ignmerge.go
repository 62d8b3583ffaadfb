package machineconfig

// The functions below merge Ignition configs by the rules of Ignition's own
// merge (github.com/coreos/ignition/v2/config/merge, Apache-2.0), whose
// code they follow. Ignition merges two configs at a time and records a
// transcript of every leaf on every merge, so folding n configs costs
// O(n²) in their total size: 500 MachineConfigs of 10 files took a minute.
// Here all configs are folded at once, each entry visited once.
// TestMergeMatchesIgnition checks the result against Ignition's own Merge
// folded left, on thousands of colliding configs.

import (
	"reflect"

	"github.com/coreos/ignition/v2/config/util"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
)

// mergeAll merges configs in order, later ones winning: the same result
// as folding Ignition's Merge left over them, but each entry is visited
// once (see foldStruct).
func mergeAll(configs []igntypes.Config) igntypes.Config {
	if len(configs) == 0 {
		return igntypes.Config{}
	}
	vals := make([]reflect.Value, len(configs))
	for i := range configs {
		vals[i] = reflect.ValueOf(configs[i])
	}
	return foldStruct(vals).Interface().(igntypes.Config)
}

// foldStruct merges values of one struct type in order, with the result
// of merging them pairwise from the left with mergeStruct, in time linear
// in their size:
//   - a primitive is the last value's (a child always wins);
//   - a pointer is the last non-nil one (pointers to structs merge);
//   - a struct merges the non-zero ones (merging into a zero struct gives
//     the child);
//   - lists that ignore duplicates are concatenated;
//   - keyed lists keep each key at the place it entered its list, merge
//     its entries in order, and lose it when a later value has the key in
//     another list sharing its handle (a directory where a file was).
func foldStruct(vals []reflect.Value) reflect.Value {
	t := vals[0].Type()
	result := reflect.New(t).Elem()
	var ignoreDups map[string]struct{}
	if ignorer, ok := vals[0].Interface().(util.IgnoresDups); ok {
		ignoreDups = ignorer.IgnoreDuplicates()
	}
	var mergedKeys map[string]string
	if merger, ok := vals[0].Interface().(util.MergesKeys); ok {
		mergedKeys = merger.MergedKeys()
	}
	var keyed []int // indexes of keyed list fields, folded together below
	for i := 0; i < t.NumField(); i++ {
		r := result.Field(i)
		switch kind := r.Kind(); {
		case util.IsPrimitive(kind):
			r.Set(vals[len(vals)-1].Field(i))
		case kind == reflect.Pointer:
			var set []reflect.Value
			for _, v := range vals {
				if f := v.Field(i); !f.IsNil() {
					set = append(set, f)
				}
			}
			switch {
			case len(set) == 0:
			case len(set) > 1 && r.Type().Elem().Kind() == reflect.Struct:
				elems := make([]reflect.Value, len(set))
				for j, p := range set {
					elems[j] = p.Elem()
				}
				r.Set(foldStruct(elems).Addr())
			default:
				r.Set(set[len(set)-1])
			}
		case kind == reflect.Struct:
			var set []reflect.Value
			for _, v := range vals {
				if f := v.Field(i); !f.IsZero() {
					set = append(set, f)
				}
			}
			switch len(set) {
			case 0:
			case 1:
				r.Set(set[0])
			default:
				r.Set(foldStruct(set))
			}
		case kind == reflect.Slice && isIgnored(ignoreDups, t.Field(i).Name):
			n := 0
			for _, v := range vals {
				n += v.Field(i).Len()
			}
			if n == 0 {
				continue
			}
			out := reflect.MakeSlice(r.Type(), 0, n)
			for _, v := range vals {
				out = reflect.AppendSlice(out, v.Field(i))
			}
			r.Set(out)
		case kind == reflect.Slice:
			keyed = append(keyed, i)
		default:
			panic("unreachable: unexpected kind " + kind.String() + " in an Ignition config")
		}
	}
	if len(keyed) > 0 {
		foldKeyedLists(t, vals, result, keyed, mergedKeys)
	}
	return result
}

// keyedEntry is one key of one list during a fold: the values to merge,
// in order, and whether a later value took the key away.
type keyedEntry struct {
	values  []reflect.Value
	removed bool
}

type keyedList struct {
	name    string
	handle  string
	order   []*keyedEntry
	current map[string]*keyedEntry
}

func foldKeyedLists(t reflect.Type, vals []reflect.Value, result reflect.Value, fields []int, mergedKeys map[string]string) {
	lists := make([]*keyedList, len(fields))
	for j, i := range fields {
		name := t.Field(i).Name
		handle := name
		if h, ok := mergedKeys[name]; ok {
			handle = h
		}
		lists[j] = &keyedList{name: name, handle: handle, current: map[string]*keyedEntry{}}
	}
	// siblings[j] are the other lists sharing list j's handle: a key that
	// a later value puts in list j leaves them.
	siblings := make([][]*keyedList, len(lists))
	for j, l := range lists {
		for k, other := range lists {
			if k != j && other.handle == l.handle {
				siblings[j] = append(siblings[j], other)
			}
		}
	}
	for _, v := range vals {
		for j := range lists {
			f := v.Field(fields[j])
			for k := 0; k < f.Len(); k++ {
				key := util.CallKey(f.Index(k))
				for _, other := range siblings[j] {
					if e, ok := other.current[key]; ok {
						e.removed = true
						delete(other.current, key)
					}
				}
			}
		}
		for j, l := range lists {
			f := v.Field(fields[j])
			for k := 0; k < f.Len(); k++ {
				item := f.Index(k)
				key := util.CallKey(item)
				if e, ok := l.current[key]; ok {
					// An HTTP header without a value removes the header.
					if l.name == "HTTPHeaders" && item.FieldByName("Value").IsNil() {
						e.removed = true
						delete(l.current, key)
						continue
					}
					e.values = append(e.values, item)
					continue
				}
				e := &keyedEntry{values: []reflect.Value{item}}
				l.current[key] = e
				l.order = append(l.order, e)
			}
		}
	}
	for j, i := range fields {
		l := lists[j]
		r := result.Field(i)
		out := reflect.MakeSlice(r.Type(), 0, len(l.current))
		for _, e := range l.order {
			if e.removed {
				continue
			}
			last := e.values[len(e.values)-1]
			if len(e.values) > 1 && last.Kind() == reflect.Struct {
				last = foldStruct(e.values)
			}
			out = reflect.Append(out, last)
		}
		if out.Len() > 0 {
			r.Set(out)
		}
	}
}

func isIgnored(ignoreDups map[string]struct{}, name string) bool {
	_, ok := ignoreDups[name]
	return ok
}
