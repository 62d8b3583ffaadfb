package containerfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
	"github.com/strata-dev/strata/test/testconfigs"
)

func TestRenderRefusesBadInput(t *testing.T) {
	good := func() Input {
		return Input{ConfigName: "rendered-worker-1", Pool: "worker", Arch: "amd64", BaseImage: testBase, Spec: &v1alpha1.MachineConfigSpec{}}
	}
	tests := []struct {
		name   string
		mutate func(*Input)
		want   []string
	}{
		{name: "tag, not digest", mutate: func(in *Input) { in.BaseImage = "quay.io/fedora/fedora-bootc:42" },
			want: []string{`baseImage: Invalid value: "quay.io/fedora/fedora-bootc:42"`}},
		{name: "unknown arch", mutate: func(in *Input) { in.Arch = "mips" }, want: []string{`arch: Unsupported value: "mips"`}},
		{name: "64k pages on amd64", mutate: func(in *Input) { in.Spec.KernelType = v1alpha1.KernelType64kPages },
			want: []string{`spec.kernelType: Invalid value: "64k-pages"`}},
		{name: "containerfile syntax and FROM", mutate: func(in *Input) {
			in.Containerfiles = []v1alpha1.MachineOSContainerfile{
				{ContainerfileArch: "AMD64", Content: "RUN true\n\nFROM busybox\nFOO bar\nCOPY onlyone\n"},
				{ContainerfileArch: "AMD64", Content: "RUN true"},
				{ContainerfileArch: "NoArch", Content: "RUN <<EOF\nunterminated"},
			}
		}, want: []string{
			`spec.containerFile[0].content: Invalid value: "line 3": FROM is not allowed`,
			`spec.containerFile[0].content: Invalid value: "line 4": unknown instruction: FOO`,
			`spec.containerFile[0].content: Invalid value: "line 5": COPY requires at least two arguments`,
			`spec.containerFile[1].containerfileArch: Duplicate value: "AMD64"`,
			`spec.containerFile[2].content: Invalid value: "line 1": Containerfile syntax error: unterminated heredoc`,
		}},
		{name: "content that would change the lines around it", mutate: func(in *Input) {
			in.Containerfiles = []v1alpha1.MachineOSContainerfile{
				{ContainerfileArch: "AMD64", Content: "RUN echo a && \\\n  echo b \\\n\n"},
				{ContainerfileArch: "NoArch", Content: "# escape=`\nRUN true\n"},
			}
		}, want: []string{
			`spec.containerFile[0].content: Invalid value: "line 2": the last line ends with a line continuation`,
			`spec.containerFile[1].content: Invalid value: "line 1": the escape parser directive is not supported`,
		}},
		{name: "bad names", mutate: func(in *Input) { in.ConfigName = "Bad Name"; in.Pool = "" },
			want: []string{`configName: Invalid value: "Bad Name"`, `pool: Invalid value: ""`}},
		{name: "config and containerfile together", mutate: func(in *Input) {
			in.Spec = spec(ign35(`"storage":{"files":[{"path":"/boot/x"}]}`))
			in.Containerfiles = []v1alpha1.MachineOSContainerfile{{Content: "FROM x"}}
		}, want: []string{`spec.config.storage.files[0].path: Invalid value: "/boot/x"`, `spec.containerFile[0].content: Invalid value: "line 1": FROM`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := good()
			tt.mutate(&in)
			res, err := Render(in)
			if err == nil {
				t.Fatalf("rendered %s, want an error", res.Containerfile)
			}
			var verr *nodeconfig.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("error %T %v, want *nodeconfig.ValidationError", err, err)
			}
			if len(verr.Errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(verr.Errs), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(verr.Errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, verr.Errs[i].Error(), w)
				}
			}
		})
	}
}

// shuffled returns in with every list whose order does not matter
// shuffled: storage entries, units and their drop-ins, users, extensions
// and the containerFile entries. Kernel arguments and appends keep their
// order, which is meaningful.
func shuffled(t *testing.T, in Input, r *rand.Rand) Input {
	t.Helper()
	cfg, err := nodeconfig.ParseIgnition(in.Spec.Config.Raw)
	if err != nil {
		t.Fatal(err)
	}
	shuffle := func(n int, swap func(i, j int)) { r.Shuffle(n, swap) }
	s := &cfg.Storage
	shuffle(len(s.Files), func(i, j int) { s.Files[i], s.Files[j] = s.Files[j], s.Files[i] })
	shuffle(len(s.Directories), func(i, j int) { s.Directories[i], s.Directories[j] = s.Directories[j], s.Directories[i] })
	shuffle(len(s.Links), func(i, j int) { s.Links[i], s.Links[j] = s.Links[j], s.Links[i] })
	u := cfg.Systemd.Units
	shuffle(len(u), func(i, j int) { u[i], u[j] = u[j], u[i] })
	for k := range u {
		d := u[k].Dropins
		shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
	}
	us := cfg.Passwd.Users
	shuffle(len(us), func(i, j int) { us[i], us[j] = us[j], us[i] })
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := in
	sp := *in.Spec
	sp.Config = runtime.RawExtension{Raw: raw}
	sp.Extensions = slices.Clone(sp.Extensions)
	shuffle(len(sp.Extensions), func(i, j int) { sp.Extensions[i], sp.Extensions[j] = sp.Extensions[j], sp.Extensions[i] })
	out.Spec = &sp
	out.Containerfiles = slices.Clone(in.Containerfiles)
	shuffle(len(out.Containerfiles), func(i, j int) {
		out.Containerfiles[i], out.Containerfiles[j] = out.Containerfiles[j], out.Containerfiles[i]
	})
	return out
}

func TestDeterminism(t *testing.T) {
	cases, _ := filepath.Glob("testdata/golden/*.yaml")
	cases = append(cases, "bench")
	for _, path := range cases {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var in Input
			if path == "bench" {
				in = benchInput(t)
			} else {
				in = loadCase(t, path)
			}
			first, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			want := contextTar(t, first)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range 20 {
				cur := in
				if i%2 == 1 {
					cur = shuffled(t, in, r)
				}
				res, err := Render(cur)
				if err != nil {
					t.Fatal(err)
				}
				if res.InputHash != first.InputHash {
					t.Fatalf("render %d: hash %s, first was %s", i, res.InputHash, first.InputHash)
				}
				if got := contextTar(t, res); !bytes.Equal(got, want) {
					t.Fatalf("render %d: context differs", i)
				}
				a, _ := json.Marshal(first.NodeItems)
				b, _ := json.Marshal(res.NodeItems)
				if !bytes.Equal(a, b) {
					t.Fatalf("render %d: node items differ:\n%s\n%s", i, a, b)
				}
			}
		})
	}
}

func contextTar(t testing.TB, r *Result) []byte {
	var buf bytes.Buffer
	if err := r.WriteTar(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestHashChangesWithInput(t *testing.T) {
	base := Input{ConfigName: "rendered-worker-1", Pool: "worker", Arch: "amd64", BaseImage: testBase,
		Spec: &v1alpha1.MachineConfigSpec{KernelArguments: []string{"a", "b"}}}
	seen := map[string]string{}
	for name, mutate := range map[string]func(*Input){
		"base":       func(*Input) {},
		"karg order": func(in *Input) { in.Spec = &v1alpha1.MachineConfigSpec{KernelArguments: []string{"b", "a"}} },
		"arch":       func(in *Input) { in.Arch = "arm64" },
		"pool":       func(in *Input) { in.Pool = "infra" },
		"base image": func(in *Input) { in.BaseImage = strings.Replace(testBase, "0123", "3210", 1) },
		"var file": func(in *Input) {
			in.Spec = &v1alpha1.MachineConfigSpec{KernelArguments: []string{"a", "b"}, Config: spec(ign35(`"storage":{"files":[{"path":"/var/x"}]}`)).Config}
		},
		"admin":       func(in *Input) { in.Containerfiles = []v1alpha1.MachineOSContainerfile{{Content: "ENV A=1"}} },
		"config name": func(in *Input) { in.ConfigName = "rendered-worker-2" },
	} {
		in := base
		in.Spec = &v1alpha1.MachineConfigSpec{KernelArguments: slices.Clone(base.Spec.KernelArguments)}
		mutate(&in)
		res, err := Render(in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if other, ok := seen[res.InputHash]; ok {
			t.Errorf("%s and %s have the same hash", name, other)
		}
		seen[res.InputHash] = name
	}
	if _, err := Render(Input{ConfigName: "a", Pool: "b", Arch: "x86_64", BaseImage: testBase}); err != nil {
		t.Fatal(err)
	}
}

// benchInput is the benchmark's configuration (testconfigs.Large).
func benchInput(t testing.TB) Input {
	spec, err := testconfigs.Large()
	if err != nil {
		t.Fatal(err)
	}
	return Input{ConfigName: "rendered-worker-bench", Pool: "worker", Arch: "amd64", BaseImage: testBase, Spec: spec}
}

func FuzzRender(f *testing.F) {
	cases, _ := filepath.Glob("testdata/golden/*.yaml")
	for _, path := range cases {
		in := loadCase(f, path)
		f.Add(in.Spec.Config.Raw)
	}
	f.Add([]byte(`{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:;base64,H4sIAAAAAAAA/8tIzcnJBwCGphA2BQAAAA==","compression":"gzip"}}]}}`))
	f.Add([]byte(`{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"a@.service","enabled":true,"contents":"[Install]\nWantedBy=x.target\nDefaultInstance=1\nAlso=a@.service"}]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		in := Input{ConfigName: "rendered-worker-fuzz", Pool: "worker", Arch: "amd64", BaseImage: testBase,
			Spec: &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}}}
		res, err := Render(in)
		verrs := nodeconfig.ValidateMachineConfigSpec(in.Spec, nil)
		if err != nil {
			if verr := (*nodeconfig.ValidationError)(nil); !errors.As(err, &verr) {
				t.Fatalf("error is %T, want *nodeconfig.ValidationError: %v", err, err)
			}
			if len(verrs) == 0 {
				t.Fatalf("Render refused what nodeconfig.ValidateMachineConfigSpec accepts: %v", err)
			}
			return
		}
		if len(verrs) > 0 {
			t.Fatalf("Render accepted what nodeconfig.ValidateMachineConfigSpec refuses: %v", verrs)
		}
		again, err := Render(in)
		if err != nil || again.InputHash != res.InputHash {
			t.Fatalf("second render differs: %v", err)
		}
	})
}

// TestAnnotations: the image's manifest names its base as the OCI image
// spec says, by digest, and repeats every label; an admin stage, no
// node's image, gets none.
func TestAnnotations(t *testing.T) {
	res, err := Render(Input{ConfigName: "rendered-worker-1", Pool: "worker", Arch: "amd64", BaseImage: testBase,
		Spec:           spec(ign35(`"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}`)),
		Containerfiles: []v1alpha1.MachineOSContainerfile{{Content: "RUN true\n"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, digest, _ := strings.Cut(testBase, "@")
	if got := res.Annotations[AnnotationBaseName]; got != testBase {
		t.Errorf("%s = %q, want %q", AnnotationBaseName, got, testBase)
	}
	if got := res.Annotations[AnnotationBaseDigest]; got != digest {
		t.Errorf("%s = %q, want %q", AnnotationBaseDigest, got, digest)
	}
	for k, v := range res.Labels {
		if res.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want the label's %q", k, res.Annotations[k], v)
		}
	}
	if len(res.Annotations) != len(res.Labels)+2 {
		t.Errorf("annotations %v: want the labels and the base's two", res.Annotations)
	}
	if res.Stages.Admin == nil || res.Stages.Admin.Annotations != nil {
		t.Errorf("admin stage %+v: want one, without annotations", res.Stages.Admin)
	}
}

func spec(ignJSON string) *v1alpha1.MachineConfigSpec {
	return &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(ignJSON)}}
}

func ign35(body string) string {
	if body == "" {
		return `{"ignition":{"version":"3.5.0"}}`
	}
	return `{"ignition":{"version":"3.5.0"},` + body + `}`
}
