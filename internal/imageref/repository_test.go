package imageref

import "testing"

func TestRepository(t *testing.T) {
	for in, want := range map[string]string{
		"registry.example.com:5000/os/worker:latest": "registry.example.com:5000/os/worker",
		"registry.example.com:5000/os/worker":        "registry.example.com:5000/os/worker",
		"127.0.0.1:5000/os@sha256:0123":              "127.0.0.1:5000/os",
		"127.0.0.1:5000/os:v1@sha256:0123":           "127.0.0.1:5000/os",
		"quay.io/strata/os:4.17":                     "quay.io/strata/os",
	} {
		if got := Repository(in); got != want {
			t.Errorf("Repository(%q) = %q, want %q", in, got, want)
		}
	}
}
