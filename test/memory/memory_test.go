package memory

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/direct"
	"github.com/strata-dev/strata/containerfile"
	"github.com/strata-dev/strata/nodeconfig"
	"github.com/strata-dev/strata/sbom"
	"github.com/strata-dev/strata/test/testregistry"
)

// The figures: the controller's memory limit is 512 MiB and it
// runs 4 builds at once; the goal for the worst input is under 200 MB.
const (
	builds   = 4
	boundRSS = 200e6
)

// childEnv carries a child's job (a JSON job) from the parent; a test
// binary started with it runs the builds and exits instead of the tests.
const childEnv = "STRATA_MEMORY_CHILD"

// job is what one child process builds.
type job struct {
	// Specs are the MachineConfig specs, one per concurrent build, each a
	// JSON file as the API server hands them to the controller.
	Specs []string
	// Base is the base image by digest; Registry its host, where the
	// builds push.
	Base, Registry string
}

// outcome is what a child reports on stdout.
type outcome struct {
	Built, Refused int
	Refusals       []string
}

func TestMain(m *testing.M) {
	if j := os.Getenv(childEnv); j != "" {
		os.Exit(child(j))
	}
	os.Exit(m.Run())
}

// TestFourWorstBuildsStayUnderBound: four builds of the largest content a
// MachineConfig may carry (gzipped zeros up to nodeconfig.MaxContentSize,
// one file each) on a base whose config is near the largest a base may
// have keep the process under 200 MB. Before the budget was lowered and
// the layer streamed, four such builds took the process past 1 GB.
func TestFourWorstBuildsStayUnderBound(t *testing.T) {
	env := setup(t)
	out, rss := env.run(t, nodeconfig.MaxContentSize)
	if out.Built != builds {
		t.Fatalf("built %d of %d: %v", out.Built, builds, out.Refusals)
	}
	t.Logf("peak RSS of %d concurrent builds of %d MiB of decoded content each: %.1f MB", builds, nodeconfig.MaxContentSize>>20, float64(rss)/1e6)
	if rss >= boundRSS {
		t.Errorf("peak RSS %.1f MB, want under %.0f MB", float64(rss)/1e6, boundRSS/1e6)
	}
}

// BenchmarkPeakRSS prints the peak RSS of a process running 4 builds at
// once of: 4 KiB (small, for the process's own size), the largest content a MachineConfig may carry (accepted-max),
// and the 80 KB MachineConfig of 60 MiB of gzipped zeros
// (issue-60MiB), which is refused now. Each operation is one child
// process; run it with -benchtime=1x.
func BenchmarkPeakRSS(b *testing.B) {
	env := setup(b)
	for _, c := range []struct {
		name string
		size int
	}{
		{"small", 4 << 10},
		{"accepted-max", nodeconfig.MaxContentSize},
		{"issue-60MiB", 60 << 20},
	} {
		b.Run(c.name, func(b *testing.B) {
			var peak int64
			var out outcome
			for range b.N {
				var rss int64
				out, rss = env.run(b, c.size)
				peak = max(peak, rss)
			}
			b.ReportMetric(float64(peak)/1e6, "peak-RSS-MB")
			b.ReportMetric(float64(out.Built), "built")
			b.ReportMetric(float64(out.Refused), "refused")
			if out.Refused > 0 {
				b.Logf("refused: %s", out.Refusals[0])
			}
		})
	}
}

// environment is a registry with the base image pushed to it.
type environment struct {
	reg  *testregistry.Registry
	base string
}

// baseConfigPad is how much the base's config is padded with a label, to
// near the largest config a base may have: a base image's config is
// read and written again by every build.
const baseConfigPad = direct.MaxBaseConfigSize - 64<<10

func setup(t testing.TB) *environment {
	t.Helper()
	reg := testregistry.Start(t, "")
	img := testregistry.Busybox(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	cf.Config.Labels["strata.dev/padding"] = strings.Repeat("p", baseConfigPad)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return &environment{reg: reg, base: reg.Push(t, "memory/base:latest", img)}
}

// run starts a child that runs 4 builds at once, each of a MachineConfig
// of one file of size zero bytes, gzipped, and returns what it reported
// and its peak RSS in bytes.
func (e *environment) run(t testing.TB, size int) (outcome, int64) {
	t.Helper()
	dir := t.TempDir()
	j := job{Base: e.base, Registry: e.reg.Host}
	for i := range builds {
		spec := worstSpec(t, fmt.Sprintf("/etc/strata-memory/%d", i), size)
		p := filepath.Join(dir, fmt.Sprintf("spec-%d.json", i))
		if err := os.WriteFile(p, spec, 0o600); err != nil {
			t.Fatal(err)
		}
		j.Specs = append(j.Specs, p)
	}
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var out outcome
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("child's report %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatalf("no rusage for the child")
	}
	return out, ru.Maxrss << 10 // KiB on Linux
}

// worstSpec is a MachineConfig spec of one file at path of size zero
// bytes as a gzip data URL, made without holding the zeros.
func worstSpec(t testing.TB, path string, size int) []byte {
	t.Helper()
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(zw, zeros{}, int64(size)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	ign := fmt.Sprintf(`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":%q,"mode":420,"contents":{"source":"data:;base64,%s","compression":"gzip"}}]}}`,
		path, base64.StdEncoding.EncodeToString(gz.Bytes()))
	spec, err := json.Marshal(v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ign)}})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// child runs the builds of job j at once, as the build controller's
// workers would, and prints an outcome; its exit code is 0 when every
// build was either pushed or refused as invalid.
func child(j string) int {
	var jb job
	if err := json.Unmarshal([]byte(j), &jb); err != nil {
		fmt.Fprintln(os.Stderr, "job:", err)
		return 2
	}
	var (
		mu   sync.Mutex
		out  outcome
		errs []error
		wg   sync.WaitGroup
	)
	cache := direct.NewBaseCache(16)
	for i, path := range jb.Specs {
		wg.Go(func() {
			refused, err := build(jb, i, path, cache)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case refused != "":
				out.Refused++
				out.Refusals = append(out.Refusals, refused)
			default:
				out.Built++
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// build is one build as the controllers make it: the render controller's
// validation, the build controller's render, its configuration layer and
// the image's SBOM.
// It returns the refusal of an invalid config.
func build(jb job, i int, path string, cache *direct.BaseCache) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var spec v1alpha1.MachineConfigSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return "", err
	}
	if errs := nodeconfig.ValidateMachineConfigSpec(&spec, field.NewPath("spec")); len(errs) > 0 {
		return errs.ToAggregate().Error(), nil
	}
	res, err := containerfile.Render(containerfile.Input{
		ConfigName: fmt.Sprintf("rendered-worker-%d", i), Pool: "worker",
		Spec: &spec, BaseImage: jb.Base, Arch: "amd64",
	})
	if err != nil {
		return "", fmt.Errorf("render %d: %w", i, err)
	}
	repo := fmt.Sprintf("%s/memory/build-%d", jb.Registry, i)
	built, err := direct.Build(context.Background(), direct.Request{
		Base:      jb.Base,
		Layer:     res.Stages.Layer,
		Labels:    res.Labels,
		CreatedBy: "strata: memory test",
		Target:    repo + ":latest",
		Insecure:  []string{jb.Registry},
		Cache:     cache,
	})
	if err != nil {
		return "", fmt.Errorf("build %d: %w", i, err)
	}
	// The build controller then attaches the image's SBOM, made from the
	// same layer.
	if _, err := sbom.Generate(sbom.Input{
		Image: repo, ImageDigest: built.Digest.String(), BaseImage: jb.Base,
		Pool: "worker", RenderedConfig: fmt.Sprintf("rendered-worker-%d", i), InputHash: res.InputHash,
		Layer: res.Stages.Layer, Spec: &spec,
	}); err != nil {
		return "", fmt.Errorf("SBOM %d: %w", i, err)
	}
	return "", nil
}
