package containerfile

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/strata-dev/strata/api/v1alpha1"
)

const stagesBase = "registry.example.com/os/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func stagesInput(cfg string, admin string, extensions ...string) Input {
	in := Input{
		ConfigName: "rendered-worker-1", Pool: "worker", Arch: "amd64", BaseImage: stagesBase,
		Spec: &v1alpha1.MachineConfigSpec{Config: runtime.RawExtension{Raw: []byte(cfg)}, Extensions: extensions},
	}
	if admin != "" {
		in.Containerfiles = []v1alpha1.MachineOSContainerfile{{Content: admin}}
	}
	return in
}

type layerEntry struct {
	typ      byte
	mode     int64
	uid, gid int
	data     string
}

func layerEntries(t *testing.T, layer []byte) map[string]layerEntry {
	t.Helper()
	out := map[string]layerEntry{}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(h.Name, "/")] = layerEntry{h.Typeflag, h.Mode, h.Uid, h.Gid, string(data)}
	}
}

func TestStagesSplitAdminFromConfiguration(t *testing.T) {
	const files = `{"ignition":{"version":"3.5.0"},"storage":{
	  "files":[{"path":"/etc/strata/conf.d/a.conf","contents":{"source":"data:,a"}},
	           {"path":"/var/lib/strata-test/node-only","contents":{"source":"data:,v"}}],
	  "directories":[{"path":"/etc/strata","mode":448}]}}`
	res, err := Render(stagesInput(files, "RUN echo admin > /etc/admin\n", "usbguard"))
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stages
	if st == nil || st.Admin == nil {
		t.Fatalf("no admin stage: %+v", st)
	}
	cf := string(st.Admin.Containerfile)
	for _, want := range []string{"FROM " + stagesBase + "\n", "dnf -y install 'usbguard'", "RUN echo admin > /etc/admin\n"} {
		if !strings.Contains(cf, want) {
			t.Errorf("admin Containerfile lacks %q:\n%s", want, cf)
		}
	}
	for _, not := range []string{"ADD ", "LABEL ", RootfsName} {
		if strings.Contains(cf, not) {
			t.Errorf("admin Containerfile has %q, which belongs to the configuration:\n%s", not, cf)
		}
	}
	if st.NeedsJob != "" {
		t.Errorf("NeedsJob = %q for files only", st.NeedsJob)
	}

	got := layerEntries(t, st.Layer)
	// The parents the configuration does not declare are the admin
	// stage's: the builder adds them as the stage has them.
	for _, p := range []string{"etc", "etc/strata/conf.d"} {
		if g, ok := got[p]; ok {
			t.Errorf("layer has %s (%+v), a parent the configuration does not declare", p, g)
		}
	}
	for p, w := range map[string]layerEntry{
		"etc/strata":               {typ: tar.TypeDir, mode: 0o700},
		"etc/strata/conf.d/a.conf": {typ: tar.TypeReg, mode: 0o644, data: "a"},
	} {
		if g, ok := got[p]; !ok || g != w {
			t.Errorf("layer entry %s = %+v (present %v), want %+v", p, g, ok, w)
		}
	}
	for p := range got {
		if p == "var" || strings.HasPrefix(p, "var/") {
			t.Errorf("layer has %s: /var belongs to the node", p)
		}
	}
}

// The admin stage's hash moves with its own inputs only: a configuration
// change must reuse it.
func TestAdminStageHash(t *testing.T) {
	hash := func(cfg, admin string, ext ...string) string {
		t.Helper()
		res, err := Render(stagesInput(cfg, admin, ext...))
		if err != nil {
			t.Fatal(err)
		}
		if res.Stages.Admin == nil {
			return ""
		}
		return res.Stages.Admin.InputHash
	}
	cfgA := `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}}`
	cfgB := `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,b"}}]}}`
	base := hash(cfgA, "RUN true\n")
	if base == "" {
		t.Fatal("no admin stage for Containerfile content")
	}
	if got := hash(cfgB, "RUN true\n"); got != base {
		t.Errorf("a configuration change moved the admin stage hash: %s, %s", base, got)
	}
	if got := hash(cfgA, "RUN false\n"); got == base {
		t.Error("a Containerfile change kept the admin stage hash")
	}
	if got := hash(cfgA, "RUN true\n", "usbguard"); got == base {
		t.Error("an extension kept the admin stage hash")
	}
	if got := hash(cfgA, ""); got != "" {
		t.Errorf("an admin stage (%s) without content, extensions or kernel type: it is the base itself", got)
	}
}

func TestStagesNeedsJob(t *testing.T) {
	for _, c := range []struct{ cfg, want string }{
		{`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/motd","append":[{"source":"data:,x"}]}]}}`, "appends to /etc/motd"},
		{`{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/x","user":{"name":"core"},"contents":{"source":"data:,x"}}]}}`, "gives /etc/x to core by name"},
		{`{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"sshd.service","enabled":true}]}}`, "enables sshd.service"},
		{`{"ignition":{"version":"3.5.0"},"systemd":{"units":[{"name":"sshd.service","enabled":false}]}}`, "disables sshd.service"},
	} {
		res, err := Render(stagesInput(c.cfg, ""))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Stages.NeedsJob, c.want) {
			t.Errorf("NeedsJob = %q, want it to say %q", res.Stages.NeedsJob, c.want)
		}
	}
}
