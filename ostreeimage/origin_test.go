package ostreeimage

import (
	"strings"
	"testing"
)

func TestOrigin(t *testing.T) {
	o := Origin{Image: "127.0.0.1:5000/os@sha256:" + strings.Repeat("a", 64)}
	want := "[origin]\ncontainer-image-reference=ostree-unverified-registry:" + o.Image + "\n"
	if got := o.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	for in, want := range map[string]string{
		want: o.Image,
		"[origin]\ncontainer-image-reference=ostree-unverified-image:docker://quay.io/x/os:1\n\n[bootc-sim]\nstaged=true\n":            "quay.io/x/os:1",
		"# c\n[other]\ncontainer-image-reference=x\n[origin]\n container-image-reference = ostree-unverified-image:registry:q/os:2 \n": "q/os:2",
	} {
		got, err := ParseOrigin([]byte(in))
		if err != nil || got.Image != want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", in, got.Image, err, want)
		}
	}
	for _, in := range []string{
		"",
		"[origin]\nrefspec=fedora:x\n",
		"[origin]\ncontainer-image-reference=ostree-image-signed:docker://q/os:1\n",
		"[origin]\ncontainer-image-reference=ostree-unverified-registry:\n",
	} {
		if _, err := ParseOrigin([]byte(in)); err == nil {
			t.Errorf("ParseOrigin(%q) accepted", in)
		}
	}
}

func TestParseGVariantString(t *testing.T) {
	for in, want := range map[string]string{
		`''`:                           "",
		`'{"a": "b"}'`:                 `{"a": "b"}`,
		`"it's \"q\" \\ é\nnl"`:        "it's \"q\" \\ é\nnl",
		`'tab\there \u00e9\U0001F600'`: "tab\there é\U0001F600",
		`'a\'b'`:                       "a'b",
	} {
		got, err := parseGVariantString(in)
		if err != nil || got != want {
			t.Errorf("parseGVariantString(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{``, `'`, `'a"`, `'a\'`, `'a'b'`, `'\u12'`, `x`} {
		if got, err := parseGVariantString(in); err == nil {
			t.Errorf("parseGVariantString(%s) = %q, accepted", in, got)
		}
	}
}
