package render

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// manyConfigs makes n MachineConfigs of files files each, all distinct.
func manyConfigs(n, files int) []v1alpha1.MachineConfig {
	mcs := make([]v1alpha1.MachineConfig, n)
	for i := range mcs {
		var b strings.Builder
		b.WriteString(`{"ignition":{"version":"3.4.0"},"storage":{"files":[`)
		for j := range files {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"path":"/etc/strata/mc-%03d/file-%02d.conf","mode":420,"contents":{"source":"data:,value%%20%d%%20%d"}}`, i, j, i, j)
		}
		b.WriteString(`]}}`)
		mcs[i] = v1alpha1.MachineConfig{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%03d-config", i)},
			Spec: v1alpha1.MachineConfigSpec{
				Config:          runtime.RawExtension{Raw: []byte(b.String())},
				KernelArguments: []string{fmt.Sprintf("strata.mc%d=1", i)},
			},
		}
	}
	return mcs
}

// BenchmarkRender500 measures the pure core of a render (validate each
// source, merge, validate the merge, hash) for a pool selecting 500
// MachineConfigs of 10 files each. The target is under 100 ms.
func BenchmarkRender500(b *testing.B) {
	sources := manyConfigs(benchN, 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Render("worker", sources); err != nil {
			b.Fatal(err)
		}
	}
}

var benchN = 500
