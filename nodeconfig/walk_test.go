package nodeconfig

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/coreos/ignition/v2/config/util"
	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/ignition/v2/config/validate"
	vvalidate "github.com/coreos/vcontext/validate"
)

// FuzzValidationWalk holds the walk of walk.go to vcontext's: for any
// config that decodes, both give the same reports, entry for entry, with
// the same context paths.
func FuzzValidationWalk(f *testing.F) {
	f.Add(benchSpec(f).Config.Raw)
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a"},{"path":"/etc/a"}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"etc/relative","append":[{"source":"data:,a"},{"source":"data:,a"}]}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"a.service","dropins":[{"name":"x"},{"name":"x"}]}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"links":[{"path":"/etc/l"}],"files":[{"path":"/etc/l/f"}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"kernelArguments":{"shouldExist":["a","a"],"shouldNotExist":["a"]},"passwd":{"users":[{"name":"u"},{"name":"u"}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"storage":{"disks":[{"device":"/dev/sda","partitions":[{"number":1},{"number":1}]}],"raid":[{"name":"r","level":"raid1","devices":["/dev/a","/dev/a"]}],"luks":[{"name":"l","device":"/dev/b"}],"filesystems":[{"device":"/dev/c","format":"ext4","path":"/x"}]}}`))
	corpus, _ := filepath.Glob("testdata/ignition-corpus/*.yaml")
	for _, p := range corpus {
		mc := loadMachineConfig(f, p)
		f.Add(mc.Spec.Config.Raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var cfg ign.Config
		if _, err := util.HandleParseErrors(raw, &cfg); err != nil {
			return
		}
		if got, want := validateFields(cfg), vvalidate.Validate(cfg, "json"); !reflect.DeepEqual(got, want) {
			t.Fatalf("Validate:\nwalk     %v\nvcontext %v", got, want)
		}
		if got, want := validateDups(cfg), vvalidate.ValidateCustom(cfg, "json", validate.ValidateDups); !reflect.DeepEqual(got, want) {
			t.Fatalf("ValidateDups:\nwalk     %v\nvcontext %v", got, want)
		}
	})
}

// TestWalkTypes: every type of a 3.5 config can be walked, so that the
// fallback to vcontext is never taken for one.
func TestWalkTypes(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var visit func(reflect.Type)
	visit = func(rt reflect.Type) {
		if seen[rt] {
			return
		}
		seen[rt] = true
		if walkTypeOf(rt) == nil {
			t.Errorf("%v cannot be walked", rt)
			return
		}
		switch rt.Kind() {
		case reflect.Pointer, reflect.Slice:
			visit(rt.Elem())
		case reflect.Struct:
			for _, f := range walkTypeOf(rt).fields {
				visit(rt.FieldByIndex(f.index).Type)
			}
		}
	}
	visit(reflect.TypeFor[ign.Config]())
	if len(seen) < 50 {
		t.Errorf("walked only %d types", len(seen))
	}
}
