package status

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456..."},
		// "é" is two bytes; the cut must not split it.
		{"aaaéxyz", 7, "aaa..."},
	} {
		got := Truncate(tc.in, tc.n)
		if got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
		if len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q: too long or not UTF-8", tc.in, tc.n, got)
		}
	}
	if got := Message(strings.Repeat("x", MaxMessage+10)); len(got) != MaxMessage {
		t.Errorf("Message is %d bytes, want %d", len(got), MaxMessage)
	}
}
