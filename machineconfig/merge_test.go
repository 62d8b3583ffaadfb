package machineconfig

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
)

func mc(name, ignition string, mutate ...func(*v1alpha1.MachineConfigSpec)) v1alpha1.MachineConfig {
	m := v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if ignition != "" {
		m.Spec.Config = runtime.RawExtension{Raw: []byte(ignition)}
	}
	for _, f := range mutate {
		f(&m.Spec)
	}
	return m
}

func file(path, source string) string {
	return `{"path":"` + path + `","contents":{"source":"` + source + `"}}`
}

func decode(t *testing.T, spec v1alpha1.MachineConfigSpec) igntypes.Config {
	t.Helper()
	var cfg igntypes.Config
	if err := json.Unmarshal(spec.Config.Raw, &cfg); err != nil {
		t.Fatalf("merged config is not JSON: %v", err)
	}
	return cfg
}

func TestMergeLaterWinsPerPathUnitAndDropin(t *testing.T) {
	a := mc("00-a", `{"ignition":{"version":"3.0.0"},"storage":{"files":[`+file("/etc/a", "data:,a0")+`,`+file("/etc/only-a", "data:,x")+`]},
		"systemd":{"units":[{"name":"u.service","contents":"[Service]\nExecStart=/a\n","dropins":[{"name":"10.conf","contents":"a"}]}]}}`)
	b := mc("10-b", `{"ignition":{"version":"3.4.0"},"storage":{"files":[`+file("/etc/a", "data:,b0")+`]},
		"systemd":{"units":[{"name":"u.service","contents":"[Service]\nExecStart=/b\n","dropins":[{"name":"10.conf","contents":"b"},{"name":"20.conf","contents":"b2"}]}]}}`)

	// Given in reverse: Merge must sort by name itself.
	got, err := Merge([]v1alpha1.MachineConfig{b, a})
	if err != nil {
		t.Fatal(err)
	}
	cfg := decode(t, got)
	if cfg.Ignition.Version != IgnitionVersion {
		t.Errorf("version = %q, want %q", cfg.Ignition.Version, IgnitionVersion)
	}
	files := map[string]string{}
	for _, f := range cfg.Storage.Files {
		files[f.Path] = *f.Contents.Source
	}
	want := map[string]string{"/etc/a": "data:,b0", "/etc/only-a": "data:,x"}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("files = %v, want %v", files, want)
	}
	if len(cfg.Systemd.Units) != 1 {
		t.Fatalf("units = %d, want 1", len(cfg.Systemd.Units))
	}
	u := cfg.Systemd.Units[0]
	if !strings.Contains(*u.Contents, "/b") {
		t.Errorf("unit contents = %q, want the later config's", *u.Contents)
	}
	dropins := map[string]string{}
	for _, d := range u.Dropins {
		dropins[d.Name] = *d.Contents
	}
	if !reflect.DeepEqual(dropins, map[string]string{"10.conf": "b", "20.conf": "b2"}) {
		t.Errorf("dropins = %v", dropins)
	}
}

func TestMergeScalarsAndLists(t *testing.T) {
	configs := []v1alpha1.MachineConfig{
		mc("30-c", "", func(s *v1alpha1.MachineConfigSpec) {
			s.KernelArguments = []string{"quiet", "nosmt"}
			s.Extensions = []string{"usbguard"}
			s.OSImageURL = "example.com/os@sha256:" + strings.Repeat("c", 64)
		}),
		mc("10-a", "", func(s *v1alpha1.MachineConfigSpec) {
			s.KernelArguments = []string{"nosmt", "mitigations=auto,nosmt"}
			s.Extensions = []string{"wireguard-tools", "kernel-devel"}
			s.KernelType = v1alpha1.KernelTypeRealtime
			s.OSImageURL = "example.com/os:a"
		}),
		mc("20-b", "", func(s *v1alpha1.MachineConfigSpec) {
			s.KernelArguments = []string{"nosmt=force"}
			s.Extensions = []string{"usbguard"}
		}),
	}
	got, err := Merge(configs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"nosmt", "mitigations=auto,nosmt", "nosmt=force", "quiet"}; !reflect.DeepEqual(got.KernelArguments, want) {
		t.Errorf("kernelArguments = %q, want %q", got.KernelArguments, want)
	}
	if want := []string{"kernel-devel", "usbguard", "wireguard-tools"}; !reflect.DeepEqual(got.Extensions, want) {
		t.Errorf("extensions = %q, want %q", got.Extensions, want)
	}
	if got.KernelType != v1alpha1.KernelTypeRealtime {
		t.Errorf("kernelType = %q: an empty later value must not clear it", got.KernelType)
	}
	if !strings.HasSuffix(got.OSImageURL, strings.Repeat("c", 64)) {
		t.Errorf("osImageURL = %q, want the last one in name order", got.OSImageURL)
	}
}

func TestMergeErrorNamesMachineConfig(t *testing.T) {
	_, err := Merge([]v1alpha1.MachineConfig{
		mc("00-good", `{"ignition":{"version":"3.2.0"}}`),
		mc("50-bad", `{"ignition":{"version":"2.2.0"},"networkd":{"units":[{"name":"10-eth0.network"}]}}`),
	})
	if err == nil {
		t.Fatal("want an error for an Ignition 2.x config that cannot be translated")
	}
	for _, want := range []string{"MachineConfig 50-bad", "spec.config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestHashCoversContentOnly(t *testing.T) {
	content := `{"ignition":{"version":"3.1.0"},"storage":{"files":[` + file("/etc/motd", "data:,hi") + `]}}`
	one, err := Merge([]v1alpha1.MachineConfig{mc("a", content)})
	if err != nil {
		t.Fatal(err)
	}
	// Same content under another name and an older spec version.
	renamed, err := Merge([]v1alpha1.MachineConfig{mc("zz-renamed", strings.Replace(content, "3.1.0", "3.0.0", 1))})
	if err != nil {
		t.Fatal(err)
	}
	other, err := Merge([]v1alpha1.MachineConfig{mc("a", strings.Replace(content, "data:,hi", "data:,ho", 1))})
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := Hash(one)
	h2, _ := Hash(renamed)
	h3, _ := Hash(other)
	if h1 != h2 {
		t.Errorf("renamed MachineConfig with the same content hashed %s, want %s", h2, h1)
	}
	if h1 == h3 {
		t.Errorf("different content hashed the same: %s", h1)
	}
	if len(h1) != hashLength {
		t.Errorf("hash %q has %d hex digits, want %d", h1, len(h1), hashLength)
	}
	if got := RenderedName("worker", h1); got != "rendered-worker-"+h1 {
		t.Errorf("RenderedName = %q", got)
	}
}

func TestMergeEmpty(t *testing.T) {
	got, err := Merge(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := decode(t, got); cfg.Ignition.Version != IgnitionVersion {
		t.Errorf("empty merge version = %q", cfg.Ignition.Version)
	}
}

// TestOSImageURLSource names the MachineConfig whose osImageURL the merge
// takes, whatever the order they are given in.
func TestOSImageURLSource(t *testing.T) {
	mc := func(name, url string) v1alpha1.MachineConfig {
		m := v1alpha1.MachineConfig{}
		m.Name, m.Spec.OSImageURL = name, url
		return m
	}
	for _, tc := range []struct {
		configs []v1alpha1.MachineConfig
		want    string
	}{
		{nil, ""},
		{[]v1alpha1.MachineConfig{mc("10-a", "")}, ""},
		{[]v1alpha1.MachineConfig{mc("99-z", "b"), mc("10-a", "a"), mc("50-m", "")}, "99-z"},
		{[]v1alpha1.MachineConfig{mc("99-z", ""), mc("10-a", "a"), mc("20-b", "b")}, "20-b"},
	} {
		if got := OSImageURLSource(tc.configs); got != tc.want {
			t.Errorf("OSImageURLSource = %q, want %q", got, tc.want)
		}
		spec, err := Merge(tc.configs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range tc.configs {
			if c.Name == tc.want && spec.OSImageURL != c.Spec.OSImageURL {
				t.Errorf("merge took %q, not %s's", spec.OSImageURL, c.Name)
			}
		}
	}
}
