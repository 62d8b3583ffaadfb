package containerfile

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/strata-dev/strata/rollout/bootcheck"
)

// TestEveryImageMasksAutoUpdatesAndChecksItsBoot (issue 20 point 9):
// every image, the one of an empty configuration and the one of a
// configuration that tries to unmask the auto-update timer, masks it and
// carries the boot check, enabled; the two strategies' layers agree.
func TestEveryImageMasksAutoUpdatesAndChecksItsBoot(t *testing.T) {
	unmask := unitsSpec(t, map[string]any{"name": "bootc-fetch-apply-updates.timer", "enabled": true, "contents": "[Timer]\nOnCalendar=daily\n"})
	for name, in := range map[string]Input{
		"empty":   {ConfigName: "rendered-worker-1", Pool: "worker", Arch: "amd64", BaseImage: testBase},
		"unmasks": {ConfigName: "rendered-worker-2", Pool: "worker", Arch: "amd64", BaseImage: testBase, Spec: unmask},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			for what, layer := range map[string][]byte{"single Job": contextFile(t, res, RootfsName), "config layer": res.Stages.Layer} {
				got := map[string]*tar.Header{}
				data := map[string][]byte{}
				tr := tar.NewReader(bytes.NewReader(layer))
				for {
					h, err := tr.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					got["/"+h.Name] = h
					data["/"+h.Name], _ = io.ReadAll(tr)
				}
				if h := got[AutoUpdateTimer]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "/dev/null" {
					t.Errorf("%s: %s is not masked: %+v", what, AutoUpdateTimer, h)
				}
				if h := got[bootcheck.ScriptPath]; h == nil || h.Mode != 0o755 || !bytes.Equal(data[bootcheck.ScriptPath], bootcheck.Script) {
					t.Errorf("%s: no executable boot check at %s", what, bootcheck.ScriptPath)
				}
				if h := got[bootcheck.UnitPath]; h == nil || !bytes.Equal(data[bootcheck.UnitPath], bootcheck.Unit) {
					t.Errorf("%s: no unit at %s", what, bootcheck.UnitPath)
				}
				if h := got[bootcheck.WantsPath]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "../"+bootcheck.UnitName {
					t.Errorf("%s: the boot check is not enabled: %+v", what, h)
				}
			}
		})
	}
}
