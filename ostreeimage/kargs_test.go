package ostreeimage

import (
	"reflect"
	"slices"
	"strings"
	"testing"
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
	got := MergeKargs(
		[]string{"console=ttyS0", "strata.image=one", "local=1", "shared"},
		[]string{"console=ttyS0", "strata.image=one", "shared"},
		[]string{"console=ttyS0", "strata.image=two", "shared"})
	want := []string{"console=ttyS0", "local=1", "shared", "strata.image=two"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestSplitKargs(t *testing.T) {
	got := SplitKargs(` root=/dev/vda  rw quoted="a b"	console=ttyS0 ostree=/ostree/boot.1/strata/x/0 `)
	want := []string{"root=/dev/vda", "rw", `quoted="a b"`, "console=ttyS0", "ostree=/ostree/boot.1/strata/x/0"}
	if !slices.Equal(got, want) {
		t.Errorf("SplitKargs = %q, want %q", got, want)
	}
}
