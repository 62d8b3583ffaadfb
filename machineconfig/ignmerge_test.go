package machineconfig

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	ign "github.com/coreos/ignition/v2/config/v3_5"
	igntypes "github.com/coreos/ignition/v2/config/v3_5/types"
)

// randomConfig draws a config from a small key space, so that configs
// collide often: the same path as a file in one and a directory in
// another, the same unit and drop-in, the same user.
func randomConfig(r *rand.Rand) igntypes.Config {
	str := func(prefix string) *string {
		if r.IntN(3) == 0 {
			return nil
		}
		s := fmt.Sprintf("%s%d", prefix, r.IntN(4))
		return &s
	}
	boolp := func() *bool {
		if r.IntN(3) == 0 {
			return nil
		}
		b := r.IntN(2) == 0
		return &b
	}
	intp := func() *int {
		if r.IntN(3) == 0 {
			return nil
		}
		i := 0o600 + r.IntN(0o200)
		return &i
	}
	paths := []string{"/etc/a", "/etc/b", "/etc/c", "/etc/d", "/etc/e"}
	cfg := igntypes.Config{Ignition: igntypes.Ignition{Version: "3.5.0"}}
	for _, p := range paths {
		node := igntypes.Node{Path: p, Overwrite: boolp(), User: igntypes.NodeUser{Name: str("user")}}
		switch r.IntN(5) {
		case 0:
			f := igntypes.File{Node: node, FileEmbedded1: igntypes.FileEmbedded1{Mode: intp()}}
			f.Contents.Source = str("data:,c")
			for range r.IntN(3) {
				f.Append = append(f.Append, igntypes.Resource{Source: str("data:,a")})
			}
			cfg.Storage.Files = append(cfg.Storage.Files, f)
		case 1:
			cfg.Storage.Directories = append(cfg.Storage.Directories, igntypes.Directory{Node: node, DirectoryEmbedded1: igntypes.DirectoryEmbedded1{Mode: intp()}})
		case 2:
			cfg.Storage.Links = append(cfg.Storage.Links, igntypes.Link{Node: node, LinkEmbedded1: igntypes.LinkEmbedded1{Target: str("/usr/x"), Hard: boolp()}})
		}
	}
	r.Shuffle(len(cfg.Storage.Files), func(i, j int) {
		cfg.Storage.Files[i], cfg.Storage.Files[j] = cfg.Storage.Files[j], cfg.Storage.Files[i]
	})
	for _, name := range []string{"a.service", "b.service", "c.timer"} {
		if r.IntN(2) == 0 {
			continue
		}
		u := igntypes.Unit{Name: name, Contents: str("[Unit]\n#"), Enabled: boolp(), Mask: boolp()}
		for _, d := range []string{"10.conf", "20.conf"} {
			if r.IntN(2) == 0 {
				u.Dropins = append(u.Dropins, igntypes.Dropin{Name: d, Contents: str("[Service]\n#")})
			}
		}
		cfg.Systemd.Units = append(cfg.Systemd.Units, u)
	}
	for _, name := range []string{"core", "alice"} {
		if r.IntN(2) == 0 {
			continue
		}
		u := igntypes.PasswdUser{Name: name, Gecos: str("g"), UID: intp()}
		for _, k := range []string{"ssh-ed25519 AAAA1", "ssh-ed25519 AAAA2", "ssh-rsa AAAA3"} {
			if r.IntN(2) == 0 {
				u.SSHAuthorizedKeys = append(u.SSHAuthorizedKeys, igntypes.SSHAuthorizedKey(k))
			}
		}
		cfg.Passwd.Users = append(cfg.Passwd.Users, u)
	}
	for _, k := range []string{"quiet", "nosmt", "debug"} {
		switch r.IntN(3) {
		case 0:
			cfg.KernelArguments.ShouldExist = append(cfg.KernelArguments.ShouldExist, igntypes.KernelArgument(k))
		case 1:
			cfg.KernelArguments.ShouldNotExist = append(cfg.KernelArguments.ShouldNotExist, igntypes.KernelArgument(k))
		}
	}
	return cfg
}

// TestMergeMatchesIgnition checks the transcript-free balanced merge
// against Ignition's own Merge folded left, on thousands of colliding
// configs.
func TestMergeMatchesIgnition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 3000 {
		n := 1 + r.IntN(9)
		configs := make([]igntypes.Config, n)
		for i := range configs {
			configs[i] = randomConfig(r)
		}
		want := configs[0]
		for _, c := range configs[1:] {
			want = ign.Merge(want, c)
		}
		got := mergeAll(configs)
		wantJSON, _ := json.Marshal(want)
		gotJSON, _ := json.Marshal(got)
		if string(wantJSON) != string(gotJSON) {
			t.Fatalf("iteration %d (%d configs): merge differs from Ignition's\n got: %s\nwant: %s", iter, n, gotJSON, wantJSON)
		}
	}
}
