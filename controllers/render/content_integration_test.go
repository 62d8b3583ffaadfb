package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

// TestDecodedContentOverBudgetIsACondition: the 80 KB MachineConfig of
// issue 20, 60 MiB of gzipped zeros, took the controller past its memory
// limit when it was built. It is refused: RenderDegraded names the
// MachineConfig, the field and the limit, and the pool's configuration
// does not have it.
func TestDecodedContentOverBudgetIsACondition(t *testing.T) {
	startController(t, 0)
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	for range 60 {
		if _, err := zw.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"zeros": "true"}
	mc := &v1alpha1.MachineConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "zeros-10-a", Labels: labels},
		Spec: v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: fmt.Appendf(nil,
			`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/zeros","contents":{"source":"data:;base64,%s","compression":"gzip"}}]}}`,
			base64.StdEncoding.EncodeToString(gz.Bytes()))}},
	}
	if err := env.Client.Create(context.Background(), mc); err != nil {
		t.Fatal(err)
	}
	newPool(t, "zeros", labels)
	eventually(t, "RenderDegraded names the MachineConfig, the field and the limit", func() error {
		c := meta.FindStatusCondition(getPool(t, "zeros").Status.Conditions, v1alpha1.PoolRenderDegraded)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("RenderDegraded %v", c)
		}
		for _, want := range []string{"MachineConfig zeros-10-a", "spec.config.storage.files[0].contents", fmt.Sprintf("%d bytes", nodeconfig.MaxContentSize)} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("message %q lacks %q", c.Message, want)
			}
		}
		return nil
	})
	// The controller's cache may see the pool before the MachineConfig
	// and render nothing for it; no rendered config has the content.
	for _, s := range getPool(t, "zeros").Status.Configuration.Source {
		if s.Name == mc.Name {
			t.Errorf("the pool's configuration is rendered from %s", mc.Name)
		}
	}
}
