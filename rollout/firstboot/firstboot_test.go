package firstboot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/rollout"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/rollout/hostfs"
	"github.com/strata-dev/strata/signing"
	"github.com/strata-dev/strata/sigpolicy"
	"github.com/strata-dev/strata/test/bootcsim"
	"github.com/strata-dev/strata/test/bootcsim/sigverify"
	"github.com/strata-dev/strata/test/testregistry"
)

// simHost is the bootc simulator as the first boot's bootc and machine.
type simHost struct {
	sim               *bootcsim.Sim
	switches, reboots int
}

func (h *simHost) Status(ctx context.Context) (*bootc.Host, error) { return h.sim.Status(ctx) }
func (h *simHost) Switch(ctx context.Context, image string) error {
	h.switches++
	_, err := h.sim.Switch(ctx, image, bootcsim.SwitchOptions{Transport: bootc.TransportRegistry})
	return err
}
func (h *simHost) Capabilities(context.Context) (bootc.Capabilities, error) {
	return bootc.Capabilities{EnforceSigPolicy: true}, nil
}
func (h *simHost) SwitchWith(ctx context.Context, image string, o bootc.SwitchOptions) error {
	h.switches++
	_, err := h.sim.Switch(ctx, image, bootcsim.SwitchOptions{Transport: bootc.TransportRegistry, EnforceSigPolicy: o.EnforceSigPolicy})
	return err
}
func (h *simHost) Rollback(ctx context.Context) error    { return h.sim.Rollback(ctx) }
func (h *simHost) BootID() (string, error)               { return h.sim.BootID() }
func (h *simHost) CheckHealth(ctx context.Context) error { return h.sim.Health(ctx) }
func (h *simHost) Reboot(context.Context) error          { h.reboots++; return h.sim.RequestReboot() }

var _ rollout.Bootc = (*simHost)(nil)
var _ rollout.Machine = (*simHost)(nil)

// node is a simulated node installed with image, and its first boot to
// pool.
func node(t *testing.T, install, pool string) (*Boot, *simHost) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "node")
	t.Cleanup(func() {
		if err := bootcsim.Cleanup(dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	sim, err := bootcsim.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	sim.VerifySignatures = sigverify.Verify
	if err := sim.Init(context.Background(), install); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if err := root.WriteFile("/var/lib/strata/firstboot/auth.json", []byte(`{"auths":{}}`), 0o600, 0, 0); err != nil {
		t.Fatal(err)
	}
	h := &simHost{sim: sim}
	return &Boot{Bootc: h, Machine: h, Root: root, AuthFile: "/var/lib/strata/firstboot/auth.json",
		StateDir: filepath.Join(dir, "var/lib/strata"), Image: pool,
		HealthTimeout: time.Second, HealthPoll: 100 * time.Millisecond, Log: logr.Discard()}, h
}

func images(t *testing.T) (base, pool string) {
	t.Helper()
	reg := testregistry.Start(t, "")
	push := func(tag string) string {
		img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"etc/strata-image": tag + "\n"}))
		if err != nil {
			t.Fatal(err)
		}
		return reg.Push(t, "strata/os:"+tag, img)
	}
	return push("base"), push("pool")
}

func run(t *testing.T, b *Boot, want Outcome) {
	t.Helper()
	got, err := b.Run(context.Background())
	if err != nil || got != want {
		t.Fatalf("Run: %q, %v; want %q", got, err, want)
	}
}

// TestFirstBoot: from the base, one switch and one reboot, then done;
// the daemon's record keeps the install image as the original one.
func TestFirstBoot(t *testing.T) {
	base, pool := images(t)
	b, h := node(t, base, pool)
	run(t, b, Rebooting)
	if b, err := b.Root.ReadFile(rollout.AuthFile); err != nil || string(b) != `{"auths":{}}` {
		t.Errorf("bootc's auth file: %q, %v", b, err)
	}
	// The reboot did not happen (the unit runs again in the same boot):
	// ask again, without a second switch.
	run(t, b, Rebooting)
	if err := h.sim.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	run(t, b, Done)
	if h.switches != 1 || h.reboots != 2 {
		t.Errorf("%d switches, %d reboot requests; want 1 and 2", h.switches, h.reboots)
	}
	st, err := h.sim.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Booted.Digest() != bootc.DigestOf(pool) {
		t.Errorf("booted %s", st.Status.Booted.PullSpec())
	}
	if _, err := os.Stat(filepath.Join(Dir(b.StateDir), DoneName)); err != nil {
		t.Error(err)
	}
	if _, err := b.Root.ReadFile(b.AuthFile); !os.IsNotExist(err) {
		t.Errorf("the first boot's pull secret: %v, want it removed", err)
	}
	rec, err := rollout.LoadRecord(b.StateDir)
	if err != nil || rec.OriginalImage != base {
		t.Errorf("the daemon's original image %q (%v), want the install image %s", rec.OriginalImage, err, base)
	}
	run(t, b, Done) // and so it stays
	if h.switches != 1 {
		t.Errorf("a run after done switched")
	}
}

// TestFirstBootCurrent (issue 25 point 5): installed with the pool's
// image, no switch and no reboot.
func TestFirstBootCurrent(t *testing.T) {
	_, pool := images(t)
	b, h := node(t, pool, pool)
	run(t, b, Done)
	if h.switches != 0 || h.reboots != 0 {
		t.Errorf("%d switches, %d reboots; want none", h.switches, h.reboots)
	}
}

// TestFirstBootFailures: a node whose new image is unhealthy, or that
// boots another image than the one switched to, stays out: every later
// run fails too.
func TestFirstBootFailures(t *testing.T) {
	base, pool := images(t)
	t.Run("unhealthy", func(t *testing.T) {
		b, h := node(t, base, pool)
		if err := h.sim.FailBoot(pool); err != nil {
			t.Fatal(err)
		}
		run(t, b, Rebooting)
		if err := h.sim.Reboot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "not healthy") {
			t.Fatalf("Run on an unhealthy image: %v", err)
		}
		if _, err := b.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "stays out") {
			t.Fatalf("Run after the failure: %v", err)
		}
	})
	t.Run("another image booted", func(t *testing.T) {
		b, h := node(t, base, pool)
		run(t, b, Rebooting)
		// Power lost before the shutdown: nothing finalized, the base boots.
		if err := h.sim.Crash(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "did not boot") {
			t.Fatalf("Run after booting the base again: %v", err)
		}
	})
}

type keychain struct{ a authn.Authenticator }

func (k keychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

// Issue 37 finding 3: where the pool signs, a new node's first boot
// writes the signature policy and switches with
// --enforce-container-sigpolicy, as the daemon's stage does. An unsigned
// image is refused: nothing is staged, no reboot, and the node stays
// out of the cluster. A signed one boots, verified by bootc, with the
// policy in /etc byte for byte what the image carries.
func TestFirstBootEnforcesTheSignaturePolicy(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	key, err := signing.GenerateKeyPair([]byte("pass"))
	if err != nil {
		t.Fatal(err)
	}
	push := func(tag string) string {
		img, err := mutate.AppendLayers(testregistry.Busybox(t), testregistry.FilesLayer(t, map[string]string{"etc/strata-image": tag + "\n"}))
		if err != nil {
			t.Fatal(err)
		}
		return reg.Push(t, "strata/os:"+tag, img)
	}
	base, unsigned, signed := push("base"), push("hand"), push("signed")
	if err := signing.Sign(ctx, signed, key.Private, signing.Registry{Keychain: keychain{reg.Auth()}, Insecure: []string{reg.Host}}); err != nil {
		t.Fatal(err)
	}
	policy := &v1alpha1.NodeSignaturePolicy{Repository: reg.Host + "/strata/os", PublicKeys: []string{string(key.Public)}}

	t.Run("unsigned", func(t *testing.T) {
		b, h := node(t, base, unsigned)
		b.SignaturePolicy, b.Enforcing = policy, h
		if _, err := b.Run(ctx); err == nil || !strings.Contains(err.Error(), "refused by the signature policy") || !strings.Contains(err.Error(), "stays out") {
			t.Fatalf("Run to an unsigned image: %v, want refused by the signature policy", err)
		}
		st, err := h.sim.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.Staged != nil || h.reboots != 0 {
			t.Fatalf("staged %+v, %d reboots after the refusal; want nothing", st.Status.Staged, h.reboots)
		}
		if _, err := b.Run(ctx); err == nil || !strings.Contains(err.Error(), "refused by the signature policy") {
			t.Fatalf("Run after the refusal: %v", err)
		}
	})
	t.Run("signed", func(t *testing.T) {
		b, h := node(t, base, signed)
		b.SignaturePolicy, b.Enforcing = policy, h
		run(t, b, Rebooting)
		st, err := h.sim.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Status.Staged.Verified() {
			t.Fatalf("staged %+v, want it verified by bootc", st.Status.Staged)
		}
		files, err := sigpolicy.NodePolicy(policy.Repository, [][]byte{key.Public})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if got, err := b.Root.ReadFile(f.Path); err != nil || string(got) != string(f.Data) {
				t.Fatalf("%s on the node: %v; want the policy's bytes", f.Path, err)
			}
		}
		if err := h.sim.Reboot(ctx); err != nil {
			t.Fatal(err)
		}
		run(t, b, Done)
	})
}
