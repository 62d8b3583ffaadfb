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
			Spec:       v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(b.String())}},
		}
		// One in 25 adds a kernel argument: all of them together would
		// not fit the kernel command line (nodeconfig.MaxKernelArgumentsBytes).
		if i%25 == 0 {
			mcs[i].Spec.KernelArguments = []string{fmt.Sprintf("strata.mc%d=1", i)}
		}
	}
	return mcs
}

// BenchmarkRender500 measures the pure core of a render (validate each
// source, merge, validate the merge, hash) for a pool selecting 500
// MachineConfigs of 10 files each. The target is under 100 ms.
//
// "unchanged" is a reconcile with the same inputs (every parse remembered);
// "one-changed" is the common event, one MachineConfig edited, so one
// source and the merged config are new.
func BenchmarkRender500(b *testing.B) {
	sources := manyConfigs(500, 10)
	if _, _, err := Render("worker", sources); err != nil {
		b.Fatal(err)
	}
	b.Run("unchanged", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := Render("worker", sources); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one-changed", func(b *testing.B) {
		b.ReportAllocs()
		edit := 0
		for b.Loop() {
			edit++
			changed := sources[edit%len(sources)].DeepCopy()
			changed.Spec.KernelArguments = []string{fmt.Sprintf("strata.edit=%d", edit)}
			changed.Spec.Config.Raw = []byte(strings.Replace(string(changed.Spec.Config.Raw), "value%20", fmt.Sprintf("edit%d%%20", edit), 1))
			in := append(append([]v1alpha1.MachineConfig{}, sources[:edit%len(sources)]...), *changed)
			in = append(in, sources[edit%len(sources)+1:]...)
			if _, _, err := Render("worker", in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestRenderRefusesAConflictingMerge(t *testing.T) {
	link := v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "10-link"}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
		`{"ignition":{"version":"3.4.0"},"storage":{"links":[{"path":"/etc/conf.d","target":"/usr/share/conf"}]}}`)}}}
	file := v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: "20-file"}, Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(
		`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/conf.d/a.conf","contents":{"source":"data:,a"}}]}}`)}}}
	_, _, err := Render("worker", []v1alpha1.MachineConfig{link, file})
	if err == nil {
		t.Fatal("a file under another config's link was accepted")
	}
	if !isInputError(err) {
		t.Errorf("want an input error, got %T", err)
	}
	for _, want := range []string{"merged MachineConfigs 10-link,20-file", "spec.config.storage.files[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
