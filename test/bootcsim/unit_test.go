package bootcsim

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestAuthKeychain(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	kc, err := parseAuthFile([]byte(`{"auths": {
		"reg.example:5000": {"auth": "` + b64("host:h") + `"},
		"reg.example:5000/team": {"auth": "` + b64("team:t") + `"},
		"https://index.docker.io/v1/": {"username": "hub", "password": "p"},
		"other.example": {"auth": "` + b64("o:o") + `"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	for ref, wantUser := range map[string]string{
		"reg.example:5000/team/os:1":                             "team",
		"reg.example:5000/teamx/os:1":                            "host",
		"reg.example:5000/os:1":                                  "host",
		"docker.io/library/busybox:1":                            "hub",
		"unknown.example/os:1":                                   "",
		"other.example:443/os@sha256:" + strings.Repeat("0", 64): "",
	} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(r.Context())
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Username != wantUser {
			t.Errorf("%s: user %q, want %q", ref, cfg.Username, wantUser)
		}
		if wantUser == "" && a != authn.Anonymous {
			t.Errorf("%s: not anonymous", ref)
		}
	}
	if _, err := parseAuthFile([]byte(`{"auths": {"x": {"auth": "!!"}}}`)); err == nil {
		t.Error("bad base64 accepted")
	}
}

func TestCanonicalReference(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	for in, want := range map[string]string{
		"127.0.0.1:5000/os:tag@" + d: "127.0.0.1:5000/os@" + d,
		"127.0.0.1:5000/os@" + d:     "127.0.0.1:5000/os@" + d,
		"quay.io/x/os:tag":           "quay.io/x/os:tag",
	} {
		got, err := canonicalReference(in)
		if err != nil || got != want {
			t.Errorf("canonicalReference(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := canonicalReference("UPPER/case"); err == nil {
		t.Error("invalid reference accepted")
	}
	r, err := parseReference("127.0.0.1:5000/os:1")
	if err != nil || r.Context().Scheme() != "http" {
		t.Errorf("loopback scheme = %v, %v", r, err)
	}
}

// FuzzParseAuthFile checks that any auth file either fails to parse or
// resolves credentials without panicking.
func FuzzParseAuthFile(f *testing.F) {
	f.Add([]byte(`{"auths": {"reg.example:5000/team": {"auth": "dTpw"}}}`))
	f.Add([]byte(`{"auths": {"https://index.docker.io/v1/": {"username": "u", "password": "p"}}}`))
	ref, err := name.ParseReference("reg.example:5000/team/os:1")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kc, err := parseAuthFile(data)
		if err != nil {
			return
		}
		a, err := kc.Resolve(ref.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authorization(); err != nil {
			t.Fatal(err)
		}
	})
}
