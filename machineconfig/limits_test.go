package machineconfig

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

func gzipZeros(t *testing.T, n int) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return "data:;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

func gzipFile(path, source string) string {
	return fmt.Sprintf(`{"path":%q,"contents":{"source":%q,"compression":"gzip"}}`, path, source)
}

// TestMergedContentIsLimited: each MachineConfig is under
// nodeconfig.MaxContentSize, their merge is not; the rendered config is
// refused at the file that passes the limit.
func TestMergedContentIsLimited(t *testing.T) {
	src := gzipZeros(t, nodeconfig.MaxContentSize*5/8)
	configs := []v1alpha1.MachineConfig{
		mc("00-a", `{"ignition":{"version":"3.5.0"},"storage":{"files":[`+gzipFile("/etc/a", src)+`]}}`),
		mc("10-b", `{"ignition":{"version":"3.5.0"},"storage":{"files":[`+gzipFile("/etc/b", src)+`]}}`),
	}
	for i := range configs {
		if errs := nodeconfig.ValidateMachineConfigSpec(&configs[i].Spec, field.NewPath("spec")); len(errs) > 0 {
			t.Fatalf("setup: %s alone is invalid: %v", configs[i].Name, errs)
		}
	}
	spec, merged, err := MergeIgnition(configs)
	if err != nil {
		t.Fatal(err)
	}
	errs := nodeconfig.ValidateMergedSpec(&spec, merged, field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeTooLong || errs[0].Field != "spec.config.storage.files[1].contents" {
		t.Errorf("merged: %v, want Too long at spec.config.storage.files[1].contents", errs)
	}
}

// randomFile is a file of n random bytes as a plain base64 data URL:
// content gzip cannot shrink, as certificates and binaries are.
func randomFile(t *testing.T, path string, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"path":%q,"contents":{"source":"data:;base64,%s"}}`, path, base64.StdEncoding.EncodeToString(b))
}

// TestMergeRefusesWhatTheAPIServerCannotStore: two MachineConfigs of
// 800 KiB each can be stored, their merge cannot; Merge says so, naming
// them, instead of handing back a spec whose Create fails forever.
func TestMergeRefusesWhatTheAPIServerCannotStore(t *testing.T) {
	configs := []v1alpha1.MachineConfig{
		mc("00-a", `{"ignition":{"version":"3.5.0"},"storage":{"files":[`+randomFile(t, "/etc/a", 600<<10)+`]}}`),
		mc("10-b", `{"ignition":{"version":"3.5.0"},"storage":{"files":[`+randomFile(t, "/etc/b", 600<<10)+`]}}`),
	}
	one, err := Merge(configs[:1])
	if err != nil {
		t.Fatalf("one MachineConfig alone: %v", err)
	}
	if n := len(one.Config.Raw); n >= MaxRenderedSize || 2*n <= MaxRenderedSize {
		t.Fatalf("setup: one config renders to %d bytes; want each under and both over MaxRenderedSize (%d)", n, MaxRenderedSize)
	}
	_, err = Merge(configs)
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("Merge = %v, want a *TooLargeError", err)
	}
	if tooLarge.Size <= MaxRenderedSize {
		t.Errorf("reported size %d, want it over %d", tooLarge.Size, MaxRenderedSize)
	}
	for _, want := range []string{"00-a", "10-b", fmt.Sprint(MaxRenderedSize)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
