// Package testconfigs makes and reads the MachineConfigs that tests of
// several packages share: the benchmark's large configuration, and
// MachineConfig manifests kept as files.
package testconfigs

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// Large is the render benchmarks' configuration: 500 files in 7
// directories, 200 enabled units with a drop-in each, and 50 kernel
// arguments, as a large real pool carries.
func Large() (*v1alpha1.MachineConfigSpec, error) {
	var cfg ign.Config
	cfg.Ignition.Version = "3.5.0"
	src := "data:;base64,SGVsbG8sIFN0cmF0YSEgVGhpcyBpcyBhIGNvbmZpZ3VyYXRpb24gZmlsZS4K"
	for i := range 500 {
		mode := 0o644
		cfg.Storage.Files = append(cfg.Storage.Files, ign.File{
			Node:          ign.Node{Path: "/etc/strata/bench/d" + strconv.Itoa(i%7) + "/file-" + strconv.Itoa(i) + ".conf"},
			FileEmbedded1: ign.FileEmbedded1{Mode: &mode, Contents: ign.Resource{Source: &src}},
		})
	}
	yes := true
	for i := range 200 {
		c := "[Unit]\nDescription=bench " + strconv.Itoa(i) + "\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
		d := "[Service]\nEnvironment=N=" + strconv.Itoa(i) + "\n"
		cfg.Systemd.Units = append(cfg.Systemd.Units, ign.Unit{Name: "bench-" + strconv.Itoa(i) + ".service", Enabled: &yes, Contents: &c,
			Dropins: []ign.Dropin{{Name: "10-env.conf", Contents: &d}}})
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var kargs []string
	for i := range 50 {
		kargs = append(kargs, "bench.arg"+strconv.Itoa(i)+"=value")
	}
	return &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}, KernelArguments: kargs}, nil
}

// Load reads a MachineConfig manifest (YAML or JSON).
func Load(path string) (v1alpha1.MachineConfig, error) {
	var mc v1alpha1.MachineConfig
	raw, err := os.ReadFile(path)
	if err != nil {
		return mc, err
	}
	if err := yaml.Unmarshal(raw, &mc); err != nil {
		return mc, fmt.Errorf("%s: %w", path, err)
	}
	return mc, nil
}
