package vmbootc

import (
	"slices"
	"testing"
)

func TestMergeKargs(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		booted, oldImg, newImg []string
		want                   []string
	}{
		{"same image kargs", []string{"root=/dev/vda", "a"}, []string{"a"}, []string{"a"}, []string{"root=/dev/vda", "a"}},
		{"dropped and added", []string{"root=/dev/vda", "a", "b"}, []string{"a", "b"}, []string{"b", "c"}, []string{"root=/dev/vda", "b", "c"}},
		{"local karg equal to a dropped one goes too", []string{"a"}, []string{"a"}, nil, nil},
		{"local kargs stay", []string{"console=ttyS0", "x=1"}, nil, []string{"y"}, []string{"console=ttyS0", "x=1", "y"}},
		{"a new one the machine has already is not doubled", []string{"y"}, nil, []string{"y"}, []string{"y"}},
		{"repeated arguments keep their repetitions", []string{"console=tty0", "console=ttyS0"}, nil, nil, []string{"console=tty0", "console=ttyS0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeKargs(tc.booted, tc.oldImg, tc.newImg); !slices.Equal(got, tc.want) {
				t.Errorf("MergeKargs(%q, %q, %q) = %q, want %q", tc.booted, tc.oldImg, tc.newImg, got, tc.want)
			}
		})
	}
}

func TestParseOrigin(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Origin
	}{
		{"bootc's", "[origin]\ncontainer-image-reference=ostree-unverified-registry:127.0.0.1:5000/os@sha256:ab\n",
			Origin{Image: "127.0.0.1:5000/os@sha256:ab", Transport: "ostree-unverified-registry"}},
		{"docker transport", "[origin]\ncontainer-image-reference=ostree-unverified-image:docker://quay.io/x/os:1\n",
			Origin{Image: "quay.io/x/os:1", Transport: "ostree-unverified-image"}},
		{"remote", "[origin]\ncontainer-image-reference=ostree-remote-registry:fedora:quay.io/x/os:1\n",
			Origin{Image: "quay.io/x/os:1", Transport: "ostree-remote-registry:fedora"}},
		{"other groups ignored", "[bootc]\ncontainer-image-reference=no\n[origin]\nrefspec=abc\n", Origin{}},
		{"an ostree refspec origin has no image", "[origin]\nrefspec=0123abcd\n", Origin{}},
		{"empty", "", Origin{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseOrigin([]byte(tc.in)); got != tc.want {
				t.Errorf("ParseOrigin(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
	o := Origin{Image: "127.0.0.1:5000/os@sha256:ab"}
	if got := ParseOrigin([]byte(o.String())); got.Image != o.Image || got.Transport != unverifiedRegistry {
		t.Errorf("round trip of %+v: %+v", o, got)
	}
}

func TestParseGVariantString(t *testing.T) {
	for in, want := range map[string]string{
		`'sha256:abc'`: "sha256:abc",
		`"it's"`:       "it's",
		`'a\'b\\c\nd'`: "a'b\\c\nd",
		`'caf\u00e9'`:  "café",
		`''`:           "",
	} {
		got, err := parseGVariantString(in)
		if err != nil || got != want {
			t.Errorf("parseGVariantString(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "'abc", "uint32 1"} {
		if _, err := parseGVariantString(in); err == nil {
			t.Errorf("parseGVariantString(%q) took a non-string", in)
		}
	}
}

func TestSplitKargs(t *testing.T) {
	got := SplitKargs(` root=/dev/vda  rw quoted="a b"	console=ttyS0 `)
	want := []string{"root=/dev/vda", "rw", `quoted="a b"`, "console=ttyS0"}
	if !slices.Equal(got, want) {
		t.Errorf("SplitKargs = %q, want %q", got, want)
	}
}

func TestParseMetadataStrings(t *testing.T) {
	// ostree show --raw of a commit with ostree-ext's keys.
	raw := `commit d24c616a76c0f19ffb2adb0b118682052006853a71d11725e3bb083bbcf3cb0b
({'ostree.manifest-digest': <'sha256:abc'>, 'ostree.ref-binding': <['y', 'z>']>, 'version': <'1.2'>, 'n': <uint64 5>, 'ostree.container.image-config': <"{\"architecture\":\"amd64\",\"created\":\"2026-01-02T03:04:05Z\",\"config\":{\"Labels\":{\"org.opencontainers.image.version\":\"7\",\"q\":\"it's\"}}}">, 'last': <'x'>}, @ay [], @a(say) [], '', '', uint64 1795783912, [byte 0xde], [byte 0x44])`
	m := parseMetadataStrings(raw)
	want := map[string]string{
		"ostree.manifest-digest":        "sha256:abc",
		"version":                       "1.2",
		"ostree.container.image-config": `{"architecture":"amd64","created":"2026-01-02T03:04:05Z","config":{"Labels":{"org.opencontainers.image.version":"7","q":"it's"}}}`,
		"last":                          "x",
	}
	if len(m) != len(want) {
		t.Errorf("parsed %q, want %q", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
	im := imageOfCommit("c", map[string]string{metaDigest: "sha256:abc", metaImageConfig: want["ostree.container.image-config"]})
	if im.Version != "7" || im.Created != "2026-01-02T03:04:05Z" || im.Architecture != "amd64" || im.Digest != "sha256:abc" {
		t.Errorf("image of an ostree-ext commit: %+v", im)
	}
	for _, bad := range []string{"", "commit x\n", "({'a': <'unterminated", "({'a' <'b'>})"} {
		if got := parseMetadataStrings(bad); len(got) != 0 {
			t.Errorf("parseMetadataStrings(%q) = %q", bad, got)
		}
	}
}
