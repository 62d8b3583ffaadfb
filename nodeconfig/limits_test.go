package nodeconfig

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// gzipZeros is a gzip data URL of n zero bytes: a thousandfold smaller
// than what it decodes to, as a hostile or careless config would be.
func gzipZeros(t testing.TB, n int) string {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return "data:;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

func gzipFiles(sources ...string) string {
	var files []string
	for i, s := range sources {
		files = append(files, fmt.Sprintf(`{"path":"/etc/big/%d","contents":{"source":%q,"compression":"gzip"}}`, i, s))
	}
	return ign35(`"storage":{"files":[` + strings.Join(files, ",") + `]}`)
}

// TestContentLimitStopsDecoding: sixty-four files each over half of
// MaxContentSize, under a megabyte of gzip data together, would decode to
// over 32 times the limit. The walk stops at the file that passes MaxContentSize,
// names it, and decodes nothing after it.
func TestContentLimitStopsDecoding(t *testing.T) {
	src := gzipZeros(t, MaxContentSize/2+1<<20)
	sources := make([]string, 64)
	for i := range sources {
		sources[i] = src
	}
	s := spec(gzipFiles(sources...))
	if len(s.Config.Raw) > 1<<20 {
		t.Fatalf("setup: the config is %d bytes, want it under a MiB", len(s.Config.Raw))
	}
	if _, err := ParseIgnition(s.Config.Raw); err != nil {
		t.Fatal(err) // parsed (and cached) outside the measurement
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	errs := ValidateMachineConfigSpec(s, field.NewPath("spec"))
	runtime.ReadMemStats(&after)

	if len(errs) != 1 {
		t.Fatalf("errors %v, want exactly one, at the file that passes the limit", errs)
	}
	e := errs[0]
	if e.Type != field.ErrorTypeTooLong || e.Field != "spec.config.storage.files[1].contents" {
		t.Errorf("error %q: want Too long at spec.config.storage.files[1].contents", e)
	}
	if !strings.Contains(e.Error(), fmt.Sprint(MaxContentSize)) {
		t.Errorf("error %q does not state the limit", e)
	}
	t.Logf("validation allocated %d MiB", (after.TotalAlloc-before.TotalAlloc)>>20)
	// Two files decoded, each read into a growing buffer: a few times the
	// limit at most. Decoding all sixty-four would allocate 32 times it.
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*MaxContentSize {
		t.Errorf("validation allocated %d MiB; it must stop decoding at the limit (%d MiB)", got>>20, MaxContentSize>>20)
	}

	// Render and the daemon's split walk the same plan.
	if _, err := SplitForNode(s); err == nil || !strings.Contains(err.Error(), "spec.config.storage.files[1].contents") {
		t.Errorf("SplitForNode: %v, want the same refusal", err)
	}
}

// TestContentLimitIsExact: the limit counts the decoded bytes of files
// and appends together; reaching it is fine, one byte more is not.
func TestContentLimitIsExact(t *testing.T) {
	appendOne := func(path, src string) string {
		return fmt.Sprintf(`{"path":%q,"append":[{"source":%q,"compression":"gzip"}]}`, path, src)
	}
	big := gzipZeros(t, MaxContentSize-1)
	one := gzipZeros(t, 1)
	at := spec(ign35(`"storage":{"files":[` + appendOne("/etc/a", big) + `,` + appendOne("/etc/b", one) + `]}`))
	if errs := ValidateMachineConfigSpec(at, field.NewPath("spec")); len(errs) != 0 {
		t.Errorf("exactly MaxContentSize: %v", errs)
	}
	over := spec(ign35(`"storage":{"files":[` + appendOne("/etc/a", big) + `,` + appendOne("/etc/b", gzipZeros(t, 2)) + `]}`))
	errs := ValidateMachineConfigSpec(over, field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Field != "spec.config.storage.files[1].append[0]" || errs[0].Type != field.ErrorTypeTooLong {
		t.Errorf("one byte over MaxContentSize: %v, want Too long at spec.config.storage.files[1].append[0]", errs)
	}
}

// TestIssueInputIsRefused: the 80 KB MachineConfig of issue 20, 60 MiB
// of gzipped zeros in one file, took the controller past its memory limit
// (four builds at once held several copies of it). Real configs decode to
// kilobytes; it is refused at the file, with the limit.
func TestIssueInputIsRefused(t *testing.T) {
	s := spec(gzipFiles(gzipZeros(t, 60<<20)))
	if n := len(s.Config.Raw); n > 100<<10 {
		t.Fatalf("setup: the config is %d bytes, want about 80 KB", n)
	}
	errs := ValidateMachineConfigSpec(s, field.NewPath("spec"))
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeTooLong || errs[0].Field != "spec.config.storage.files[0].contents" {
		t.Fatalf("errors %v, want Too long at spec.config.storage.files[0].contents", errs)
	}
	for _, want := range []string{fmt.Sprintf("%d bytes (%d MiB", MaxContentSize, MaxContentSize>>20), "containerFile"} {
		if !strings.Contains(errs[0].Error(), want) {
			t.Errorf("error %q does not say %q", errs[0], want)
		}
	}
}

// TestDecodingAllocatesTheContentOnce: gzip content is read into a buffer
// of the size its trailer gives, not a growing one, which allocated about
// twice the content; four builds at once each decode up to the limit.
func TestDecodingAllocatesTheContentOnce(t *testing.T) {
	const size = MaxContentSize * 3 / 4
	s := spec(gzipFiles(gzipZeros(t, size)))
	if _, err := ParseIgnition(s.Config.Raw); err != nil {
		t.Fatal(err) // parsed (and cached) outside the measurement
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	errs := ValidateMachineConfigSpec(s, field.NewPath("spec"))
	runtime.ReadMemStats(&after)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("validating %d MiB of gzipped content allocated %.1f MiB", size>>20, float64(got)/(1<<20))
	if got > size*5/4 {
		t.Errorf("validation allocated %.1f MiB for %d MiB of content, want at most 1.25 times the content", float64(got)/(1<<20), size>>20)
	}
}

// TestGunzipHintIsOnlyAHint: a trailer that lies (a second gzip member,
// or a forged length) changes what is allocated, never what is decoded
// or the limit.
func TestGunzipHintIsOnlyAHint(t *testing.T) {
	content := bytes.Repeat([]byte("strata "), 10000)
	for _, c := range []struct {
		name        string
		hint, limit int64
		want        int
	}{
		{"exact", int64(len(content)), 1 << 20, len(content)},
		{"short", 10, 1 << 20, len(content)},
		{"long", 1 << 40, 1 << 20, len(content)},
		{"over the limit", int64(len(content)), 1000, 1001},
		{"short, over the limit", 0, 1000, 1001},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			if _, err := zw.Write(content); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(&b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gunzip(zr, c.hint, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.want || !bytes.Equal(got, content[:c.want]) {
				t.Errorf("decoded %d bytes, want the first %d of the content", len(got), c.want)
			}
			if int64(cap(got)) > max(c.limit+1, 2*int64(len(content))) {
				t.Errorf("buffer of %d bytes for %d of content and a limit of %d", cap(got), len(content), c.limit)
			}
		})
	}
}
