package sbom

import (
	"archive/tar"
	"bytes"
	"runtime"
	"testing"
	"time"
	"unicode/utf8"
)

// TestReadLayerHoldsNoContent: the SBOM of a layer sums each file as it
// reads it; it used to read every file into memory first, a copy of the
// configuration's content (up to the decoded-content budget) for each
// build the controller attaches an SBOM to.
func TestReadLayerHoldsNoContent(t *testing.T) {
	const size = 32 << 20
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/zeros", Mode: 0o644, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer := buf.Bytes()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	entries, err := readLayer(layer)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("reading a layer of %d MiB allocated %d KiB", size>>20, got>>10)
	if got > size/16 {
		t.Errorf("reading a layer of %d MiB allocated %.1f MiB; it must not hold the content", size>>20, float64(got)/(1<<20))
	}
	if len(entries) != 1 || entries[0].sums.text {
		t.Errorf("entries %+v, want one binary file", entries)
	}
}

// textOf is what the SBOM called text before it streamed: the whole
// content at once.
func textOf(b []byte) bool { return utf8.Valid(b) && !bytes.ContainsRune(b, 0) }

// FuzzTextCheck: fed in pieces cut anywhere, textCheck says what textOf
// says of the whole.
func FuzzTextCheck(f *testing.F) {
	for _, seed := range []string{"", "plain", "é", "日本語", "🙂x", "\xff", "a\x00b", "\xe6\x97", "x\xf0\x9f\x99", "\xf0\x9f\x99\x82\xe6\x97\xa5"} {
		f.Add([]byte(seed), uint8(1), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut1, cut2 uint8) {
		c := &textCheck{}
		rest := b
		for _, cut := range []int{int(cut1), int(cut2)} {
			n := min(cut, len(rest))
			if _, err := c.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if _, err := c.Write(rest); err != nil {
			t.Fatal(err)
		}
		if got, want := c.text(), textOf(b); got != want {
			t.Errorf("%q cut at %d, %d: text %v, want %v", b, cut1, cut2, got, want)
		}
	})
}

// TestTextCheckByteByByte: every seed and more, one byte a write.
func TestTextCheckByteByByte(t *testing.T) {
	for _, s := range []string{"", "plain text\n", "é", "日本語", "🙂", "\xff", "a\x00b", "\xe6\x97", "x\xf0\x9f\x99", "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "ok 🙂 ok"} {
		c := &textCheck{}
		for i := range len(s) {
			if _, err := c.Write([]byte{s[i]}); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := c.text(), textOf([]byte(s)); got != want {
			t.Errorf("%q byte by byte: text %v, want %v", s, got, want)
		}
	}
}
