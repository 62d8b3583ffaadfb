package rollout

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/test/testregistry"
)

// TestRegistryImagesReadsOnce: the reads of one image by digest made
// while the first is at the registry (the daemon's read beside a stage,
// then the decision's) and after it reach the registry once, and all
// get its answer.
func TestRegistryImagesReadsOnce(t *testing.T) {
	reg := testregistry.Start(t, "")
	img, err := mutate.Append(testregistry.Busybox(t), mutate.Addendum{
		Layer:   testregistry.FilesLayer(t, map[string]string{"etc/once": "1\n"}),
		History: v1.History{CreatedBy: v1alpha1.ConfigLayerCreatedBy + "once"},
	})
	if err != nil {
		t.Fatal(err)
	}
	pushed := reg.Push(t, "strata/os:once", img)

	// A proxy in front of the registry counts the manifest reads and
	// holds the first until every reader has started.
	target, err := url.Parse("http://" + reg.Host)
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	var manifests atomic.Int32
	first, release := make(chan struct{}), make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.Contains(req.URL.Path, "/manifests/") && manifests.Add(1) == 1 {
			close(first)
			<-release
		}
		forward.ServeHTTP(w, req)
	}))
	t.Cleanup(proxy.Close)
	host := strings.TrimPrefix(proxy.URL, "http://")
	_, repo, _ := strings.Cut(pushed, "/")
	image := host + "/" + repo

	r := &RegistryImages{Registry: registry.Client{Insecure: []string{host}}}
	ctx := context.Background()
	const readers = 5
	answers := make([]string, readers)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	wg.Go(func() { answers[0], errs[0] = r.BelowConfigLayer(ctx, image) })
	<-first
	var started sync.WaitGroup
	for i := 1; i < readers; i++ {
		started.Add(1)
		wg.Go(func() {
			started.Done()
			answers[i], errs[i] = r.BelowConfigLayer(ctx, image)
		})
	}
	started.Wait()
	close(release)
	wg.Wait()
	later, err := r.BelowConfigLayer(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	for i := range readers {
		if errs[i] != nil || answers[i] == "" || answers[i] != later {
			t.Errorf("reader %d: %q, %v; want %q", i, answers[i], errs[i], later)
		}
	}
	if n := manifests.Load(); n != 1 {
		t.Errorf("the registry was asked for the manifest %d times, want once", n)
	}
}
