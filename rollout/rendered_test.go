package rollout

import (
	"context"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/machineconfig"
)

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestRenderedConfigsKeptByContentName: a rendered config whose content
// hashes to its name is read once; one edited by hand (content and name
// disagree) is read at every use, so the edit is seen.
func TestRenderedConfigsKeptByContentName(t *testing.T) {
	ctx := context.Background()
	spec := v1alpha1.MachineConfigSpec{KernelArguments: []string{"memo=1"}}
	hash, err := machineconfig.Hash(spec)
	if err != nil {
		t.Fatal(err)
	}
	named := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: machineconfig.RenderedName("memo", hash)}, Spec: spec}
	edited := &v1alpha1.MachineConfig{ObjectMeta: metav1.ObjectMeta{Name: machineconfig.RenderedName("memo", "0123456789abcdef0123456789abcdef")}, Spec: spec}
	for _, mc := range []*v1alpha1.MachineConfig{named, edited} {
		if err := env.Client.Create(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	reader := &countingReader{Reader: env.Client}
	d := &Daemon{Client: env.Client, Reader: reader}
	for range 3 {
		got, err := d.renderedConfig(ctx, named.Name)
		if err != nil || got.KernelArguments[0] != "memo=1" {
			t.Fatalf("renderedConfig(%s) = %+v, %v", named.Name, got, err)
		}
	}
	if n := reader.gets.Load(); n != 1 {
		t.Errorf("a content-named rendered config was read %d times, want once", n)
	}

	reader.gets.Store(0)
	if _, err := d.renderedConfig(ctx, edited.Name); err != nil {
		t.Fatal(err)
	}
	edited.Spec.KernelArguments = []string{"memo=2"}
	if err := env.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	got, err := d.renderedConfig(ctx, edited.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := reader.gets.Load(); n != 2 || got.KernelArguments[0] != "memo=2" {
		t.Errorf("an edited rendered config: %d reads, kernel arguments %q; want 2 reads and the edit", n, got.KernelArguments)
	}
}
