package configserver

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	ign "github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/strata-dev/strata/nodeconfig"
)

const image = "registry.example.com/os/worker@sha256:9b1e0000000000000000000000000000000000000000000000000000000000aa"

// parse reads a config as Ignition does, failing on any error it reports.
func parse(t *testing.T, c *ign.Config) ign.Config {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, rpt, err := v34.Parse(raw)
	if err != nil || rpt.IsFatal() {
		t.Fatalf("Ignition refuses the config: %v %s\n%s", err, rpt.String(), raw)
	}
	return got
}

func decode(t *testing.T, r ign.Resource) string {
	t.Helper()
	b64, ok := strings.CutPrefix(*r.Source, "data:;base64,")
	if !ok {
		t.Fatalf("source %q is not a base64 data URL", *r.Source)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRender(t *testing.T) {
	mode := 0o640
	uid := 1000
	in := Input{
		Pool:               "worker",
		Image:              image,
		PullSecret:         []byte(`{"auths":{"registry.example.com":{"auth":"eDp5"}}}`),
		DaemonImage:        "registry.example.com/strata/strata-daemon@sha256:0000000000000000000000000000000000000000000000000000000000000001",
		HealthCheckTimeout: 7 * time.Minute,
		NodeItems: []nodeconfig.NodeItem{
			{Kind: nodeconfig.NodeDirectory, Path: "/var/lib/app", Mode: &mode},
			{Kind: nodeconfig.NodeFile, Path: "/var/lib/app/conf", Mode: &mode, Replace: true, Overwrite: true, Contents: []byte("a=1\n"), User: &nodeconfig.Owner{ID: &uid}},
			{Kind: nodeconfig.NodeFile, Path: "/var/log/app.log", Append: [][]byte{[]byte("x\n")}},
			{Kind: nodeconfig.NodeLink, Path: "/var/lib/app/current", Target: "/var/lib/app/conf"},
			{Kind: nodeconfig.NodeSSHAuthorizedKeys, UserName: "core", SSHAuthorizedKeys: []string{"ssh-ed25519 AAAA one", "ssh-ed25519 AAAA two"}},
		},
	}
	cfg, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	got := parse(t, cfg)
	if got.Ignition.Version != "3.4.0" {
		t.Errorf("version %q", got.Ignition.Version)
	}
	files := map[string]ign.File{}
	for _, f := range got.Storage.Files {
		files[f.Path] = f
	}
	auth, ok := files[FirstbootAuthFile]
	if !ok || *auth.Mode != 0o600 || decode(t, auth.Contents) != string(in.PullSecret) {
		t.Errorf("pull secret file %+v, want mode 0600 with the secret", auth)
	}
	if f := files["/var/lib/app/conf"]; decode(t, f.Contents) != "a=1\n" || *f.Mode != mode || *f.User.ID != uid || !*f.Overwrite {
		t.Errorf("/var/lib/app/conf %+v", f)
	}
	if f := files["/var/log/app.log"]; f.Contents.Source != nil || len(f.Append) != 1 || decode(t, f.Append[0]) != "x\n" {
		t.Errorf("append-only file %+v: want no contents (keep what is there) and one append", f)
	}
	if len(got.Storage.Directories) != 1 || len(got.Storage.Links) != 1 || *got.Storage.Links[0].Target != "/var/lib/app/conf" {
		t.Errorf("directories %+v, links %+v", got.Storage.Directories, got.Storage.Links)
	}
	if len(got.Passwd.Users) != 1 || got.Passwd.Users[0].Name != "core" || len(got.Passwd.Users[0].SSHAuthorizedKeys) != 2 {
		t.Errorf("users %+v", got.Passwd.Users)
	}
	if len(got.Systemd.Units) != 1 {
		t.Fatalf("units %+v, want the first-boot unit", got.Systemd.Units)
	}
	u := got.Systemd.Units[0]
	if u.Name != FirstbootUnit || !*u.Enabled {
		t.Errorf("unit %s enabled %v", u.Name, u.Enabled)
	}
	for _, want := range []string{
		"Before=kubelet.service", "RequiredBy=kubelet.service", "ConditionPathExists=!" + FirstbootDoneFile,
		" " + in.DaemonImage + " firstboot ", "--image=" + image, "--health-check-timeout=7m0s", "--auth-file=" + FirstbootAuthFile,
		"--authfile=" + FirstbootAuthFile,
	} {
		if !strings.Contains(*u.Contents, want) {
			t.Errorf("unit lacks %q:\n%s", want, *u.Contents)
		}
	}
}

// TestRenderNoImage: a pool that runs each node's own image gives new
// nodes their files and no first-boot unit: nothing to switch to, no
// reboot.
func TestRenderNoImage(t *testing.T) {
	cfg, err := Render(Input{Pool: "plain", NodeItems: []nodeconfig.NodeItem{{Kind: nodeconfig.NodeFile, Path: "/var/x", Replace: true, Contents: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	got := parse(t, cfg)
	if len(got.Systemd.Units) != 0 || len(got.Storage.Files) != 1 {
		t.Errorf("units %+v files %+v: want only the /var file", got.Systemd.Units, got.Storage.Files)
	}
	if _, err := Render(Input{Pool: "p", Image: image}); err == nil || !strings.Contains(err.Error(), "strata-daemon image") {
		t.Errorf("an image without a daemon image: %v, want an error naming it", err)
	}
}

func TestPointer(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	got := parse(t, Pointer("https://config.example.com:22623/", "worker", ca, []byte("tok")))
	m := got.Ignition.Config.Merge
	if len(m) != 1 || *m[0].Source != "https://config.example.com:22623/config/worker" {
		t.Fatalf("merge %+v", m)
	}
	if h := m[0].HTTPHeaders; len(h) != 1 || h[0].Name != "Authorization" || *h[0].Value != "Bearer tok" {
		t.Errorf("headers %+v", h)
	}
	if cas := got.Ignition.Security.TLS.CertificateAuthorities; len(cas) != 1 || decode(t, cas[0]) != string(ca) {
		t.Errorf("CAs %+v", cas)
	}
}

// TestRenderSignaturePolicy: a new node of a pool that signs gets the
// pool's signature policy and a first boot that enforces it; a pool that
// does not sign gets neither.
func TestRenderSignaturePolicy(t *testing.T) {
	daemon := "registry.example.com/strata/strata-daemon@sha256:0000000000000000000000000000000000000000000000000000000000000001"
	policy := `{"repository":"registry.example.com/os","publicKeys":["-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n"]}`
	for _, c := range []struct {
		name   string
		policy string
	}{{"signed", policy}, {"unsigned", ""}} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Render(Input{Pool: "worker", Image: image, DaemonImage: daemon, SignaturePolicy: c.policy})
			if err != nil {
				t.Fatal(err)
			}
			got := parse(t, cfg)
			var file *ign.File
			for i := range got.Storage.Files {
				if got.Storage.Files[i].Path == FirstbootSignaturePolicyFile {
					file = &got.Storage.Files[i]
				}
			}
			flag := strings.Contains(*got.Systemd.Units[0].Contents, "--signature-policy-file="+FirstbootSignaturePolicyFile)
			if c.policy == "" {
				if file != nil || flag {
					t.Fatalf("an unsigned pool's first boot has a signature policy: file %v, flag %v", file != nil, flag)
				}
				return
			}
			if file == nil || decode(t, file.Contents) != c.policy || *file.Mode != 0o644 {
				t.Fatalf("policy file %+v, want the pool's policy, mode 0644", file)
			}
			if !flag {
				t.Fatalf("the first boot does not enforce the policy:\n%s", *got.Systemd.Units[0].Contents)
			}
		})
	}
}
