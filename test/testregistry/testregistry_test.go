package testregistry

import (
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestRestartKeepsImages: a stopped registry refuses connections, and
// after Restart serves what it had.
func TestRestartKeepsImages(t *testing.T) {
	reg := Start(t, "pw")
	image := reg.Push(t, "strata/x:1", Busybox(t))
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	reg.Stop(t)
	if _, err := remote.Head(ref, remote.WithAuth(reg.Auth()), remote.WithRetryBackoff(remote.Backoff{Steps: 1})); err == nil {
		t.Fatal("a stopped registry answered")
	}
	reg.Restart(t)
	if _, err := remote.Head(ref, remote.WithAuth(reg.Auth())); err != nil {
		t.Errorf("after Restart: %v", err)
	}
}

// TestReferrersRegistryRequiresLogin: the registry with the referrers API
// challenges as distribution does and admits its user.
func TestReferrersRegistryRequiresLogin(t *testing.T) {
	reg := StartReferrers(t, "pw")
	resp, err := http.Get("http://" + reg.Host + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("anonymous /v2/: %d %v", resp.StatusCode, resp.Header)
	}
	image := reg.Push(t, "strata/x:1", Busybox(t))
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(ref, remote.WithAuth(reg.Auth())); err != nil {
		t.Errorf("with the password: %v", err)
	}
}
