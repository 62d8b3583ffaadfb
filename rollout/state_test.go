package rollout

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStateFileOfEarlierDaemon: a state file written mid-update by the
// daemon before decide existed is read by this one, which carries on
// where it stopped. The phases and field names are the file format:
// renaming one would strand every node upgraded mid-update.
func TestStateFileOfEarlierDaemon(t *testing.T) {
	for _, tc := range []struct {
		file string
		o    observed
		want action
	}{{
		file: `{"originalImage": "` + original + `", "update": {"key": "k", "image": "` + newImage + `", "config": "c", "phase": "rebooting", "bootID": "b1", "skipped": ["x"]}}`,
		o:    observed{BootID: "b2", Booted: newImage[len(repo)+1:]},
		want: actStartVerify,
	}, {
		file: `{"update": {"key": "k", "image": "` + newImage + `", "config": "c", "phase": "verifying", "bootID": "b1", "verifyStarted": "2025-01-01T00:00:00Z"}}`,
		o:    observed{BootID: "b2", Booted: newImage[len(repo)+1:]},
		want: actCheckHealth,
	}, {
		file: `{"update": {"key": "k", "image": "` + newImage + `", "config": "c", "phase": "rollingBack", "bootID": "b1", "failure": "sick", "rollbackIssued": true}}`,
		o:    observed{BootID: "b2", Booted: original[len(repo)+1:]},
		want: actFailRolledBack,
	}, {
		file: `{"currentConfig": "c0", "currentImage": "` + original + `", "update": {"key": "k", "image": "` + newImage + `", "config": "c", "phase": "failed", "reason": "bad"}}`,
		o:    observed{BootID: "b1", Booted: original[len(repo)+1:]},
		want: actReportFailed,
	}} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := LoadRecord(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The desired pair is the recorded one, whatever its key.
		rec.Update.Key = UpdateKey(newImage, "c")
		tc.o.Image, tc.o.Config = newImage, "c"
		if got := decide(&tc.o, rec); got != tc.want {
			t.Errorf("%s: decide = %s, want %s", tc.file, got, tc.want)
		}
	}
}
