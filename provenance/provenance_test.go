package provenance_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/strata-dev/strata/provenance"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func input() provenance.Input {
	return provenance.Input{
		Image:                     "registry.example.com/os/worker",
		ImageDigest:               "sha256:" + strings.Repeat("2", 64),
		BaseImage:                 "registry.example.com/os/base@sha256:" + strings.Repeat("1", 64),
		AdminStage:                "registry.example.com/os/worker@sha256:" + strings.Repeat("3", 64),
		Pool:                      "worker",
		RenderedConfig:            "rendered-worker-abc",
		MachineOSConfig:           "worker",
		MachineOSConfigGeneration: 3,
		Strategy:                  "ConfigLayer",
		Containerfile:             []byte("FROM registry.example.com/os/base@sha256:" + strings.Repeat("1", 64) + "\n"),
		InputHash:                 "0123abcd",
		BuilderID:                 "https://strata.dev/strata-controller",
		BuilderVersion:            "v0.1.0",
	}
}

func TestGolden(t *testing.T) {
	out, err := provenance.Generate(input())
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "worker.intoto.json")
	if *update {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Errorf("the statement differs from %s (go test ./provenance -update rewrites it):\n%s", golden, out)
	}
}

func TestDeterministicAndSensitive(t *testing.T) {
	a, _ := provenance.Generate(input())
	b, _ := provenance.Generate(input())
	if !bytes.Equal(a, b) {
		t.Fatal("the same input gave two statements")
	}
	for name, edit := range map[string]func(*provenance.Input){
		"containerfile": func(in *provenance.Input) { in.Containerfile = append(in.Containerfile, "RUN true\n"...) },
		"generation":    func(in *provenance.Input) { in.MachineOSConfigGeneration++ },
		"base": func(in *provenance.Input) {
			in.BaseImage = "registry.example.com/os/base@sha256:" + strings.Repeat("4", 64)
		},
		"admin stage": func(in *provenance.Input) {
			in.AdminStage = "registry.example.com/os/worker@sha256:" + strings.Repeat("5", 64)
		},
		"no admin stage": func(in *provenance.Input) { in.AdminStage = "" },
	} {
		in := input()
		edit(&in)
		c, err := provenance.Generate(in)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(a, c) {
			t.Errorf("another %s gave the same statement", name)
		}
	}
}

func TestSchema(t *testing.T) {
	out, err := provenance.Generate(input())
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile("testdata/slsa-provenance-v1.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(doc []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}
	if err := check(out); err != nil {
		t.Fatalf("the statement does not validate: %v\n%s", err, out)
	}
	// The schema is strict enough to catch a statement without a subject
	// digest.
	var st map[string]any
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{}
	b, _ := json.Marshal(st)
	if check(b) == nil {
		t.Fatal("the schema accepted a subject without a digest")
	}

	var got provenance.Statement
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	deps := map[string]provenance.ResourceDescriptor{}
	for _, d := range got.Predicate.BuildDefinition.ResolvedDependencies {
		deps[d.Name] = d
	}
	if deps["baseImage"].Digest["sha256"] != strings.Repeat("1", 64) || deps["Containerfile"].Digest["sha256"] == "" {
		t.Errorf("resolved dependencies %+v", deps)
	}
	if a := deps["adminStage"]; a.Digest["sha256"] != strings.Repeat("3", 64) || a.URI != "oci://registry.example.com/os/worker" {
		t.Errorf("adminStage material %+v, want the admin stage by digest", a)
	}
	if p := got.Predicate.BuildDefinition.ExternalParameters; p.MachineOSConfig.Generation != 3 || p.RenderedConfig != "rendered-worker-abc" {
		t.Errorf("external parameters %+v", p)
	}
}

func TestBadInput(t *testing.T) {
	for field, edit := range map[string]func(*provenance.Input){
		"image":                     func(in *provenance.Input) { in.Image = "" },
		"imageDigest":               func(in *provenance.Input) { in.ImageDigest = "latest" },
		"baseImage":                 func(in *provenance.Input) { in.BaseImage = "registry.example.com/os/base:42" },
		"machineOSConfigGeneration": func(in *provenance.Input) { in.MachineOSConfigGeneration = 0 },
		"builderID":                 func(in *provenance.Input) { in.BuilderID = "" },
		"strategy":                  func(in *provenance.Input) { in.Strategy = "Kaniko" },
		"inputHash":                 func(in *provenance.Input) { in.InputHash = "" },
		"adminStage":                func(in *provenance.Input) { in.AdminStage = "registry.example.com/os/worker:admin-1" },
	} {
		in := input()
		edit(&in)
		if _, err := provenance.Generate(in); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v, want one naming it", field, err)
		}
	}
}

// Without an admin stage of its own (SingleJob, or a stage that is the
// base) the statement has no adminStage material.
func TestNoAdminStage(t *testing.T) {
	in := input()
	in.AdminStage = ""
	out, err := provenance.Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	var got provenance.Statement
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, d := range got.Predicate.BuildDefinition.ResolvedDependencies {
		if d.Name == "adminStage" {
			t.Errorf("adminStage material %+v without an admin stage", d)
		}
	}
}
