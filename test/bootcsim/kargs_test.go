package bootcsim

import (
	"encoding/base64"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestParseKargsFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want KargsFile
		err  string
	}{
		{name: "bootc docs example", in: "kargs = [\"nosmt\", \"mitigations=auto,nosmt\"]\nmatch-architectures = [\"x86_64\"]\n",
			want: KargsFile{Kargs: []string{"nosmt", "mitigations=auto,nosmt"}, MatchArchitectures: []string{"x86_64"}}},
		{name: "multi-line array, comments, trailing comma", in: "# c\n\nkargs = [ # open\n  'console=ttyS0,115200n8', # literal\n  \"quiet\",\n]  # end\r\n",
			want: KargsFile{Kargs: []string{"console=ttyS0,115200n8", "quiet"}}},
		{name: "escapes and quoted key", in: "\"kargs\" = [\"a=\\\"b c\\\"\", \"\\u00e9\\t\"]",
			want: KargsFile{Kargs: []string{`a="b c"`, "é\t"}}},
		{name: "empty", in: "kargs = []\n", want: KargsFile{Kargs: []string{}}},
		{name: "missing kargs", in: "match-architectures = [\"x86_64\"]\n", err: "missing field kargs"},
		{name: "unknown field", in: "kargs = []\nfoo = [\"x\"]\n", err: `unknown field "foo"`},
		{name: "not an array", in: "kargs = \"nosmt\"\n", err: "expected an array"},
		{name: "not strings", in: "kargs = [1]\n", err: "expected a string"},
		{name: "table", in: "[kargs]\n", err: "tables are not allowed"},
		{name: "duplicate", in: "kargs = []\nkargs = []\n", err: "duplicate key"},
		{name: "two on a line", in: "kargs = [] match-architectures = []\n", err: "expected a newline"},
		{name: "unterminated", in: "kargs = [\"a", err: "unterminated string"},
		{name: "bad escape", in: "kargs = [\"\\q\"]", err: "invalid escape"},
		{name: "multi-line string", in: "kargs = [\"\"\"a\"\"\"]", err: "multi-line strings"},
		{name: "dotted key", in: "kargs.x = []", err: "dotted keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKargsFile([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// FuzzParseKargsFile checks that the parser never panics and that what it
// accepts survives a round trip through FormatKargsFile.
func FuzzParseKargsFile(f *testing.F) {
	f.Add([]byte("kargs = [\"nosmt\", \"mitigations=auto,nosmt\"]\nmatch-architectures = [\"x86_64\"]\n"))
	f.Add([]byte("kargs = [\n 'a', # c\n \"b\\u0041\",\n]\n"))
	f.Add([]byte("\"kargs\"=[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseKargsFile(data)
		if err != nil {
			return
		}
		again, err := ParseKargsFile(FormatKargsFile(got))
		if err != nil {
			t.Fatalf("formatted %#v does not parse: %v\n%s", got, err, FormatKargsFile(got))
		}
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("round trip: %#v became %#v", got, again)
		}
	})
}

func TestMergeKargs(t *testing.T) {
	got := mergeKargs(
		[]string{"console=ttyS0", "strata.image=one", "local=1", "shared"},
		[]string{"console=ttyS0", "strata.image=one", "shared"},
		[]string{"console=ttyS0", "strata.image=two", "shared"})
	want := []string{"console=ttyS0", "local=1", "shared", "strata.image=two"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestSplitKargs(t *testing.T) {
	got := splitKargs(`a=1  b="x y" c ostree=/ostree/boot.1/strata/x/0`)
	want := []string{"a=1", `b="x y"`, "c", "ostree=/ostree/boot.1/strata/x/0"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

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
