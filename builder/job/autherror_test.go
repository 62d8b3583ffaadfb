package job

import (
	"errors"
	"os/exec"
	"regexp"
	"testing"
)

// TestIsAuthError runs build.sh's is_auth_error on messages buildah and
// skopeo print. The status code 401 must not match inside the registry's
// port or a digest: a registry on port 40167 once made every pull failure
// an Auth failure.
func TestIsAuthError(t *testing.T) {
	fn := regexp.MustCompile(`(?ms)^is_auth_error\(\) \{.*?^\}`).FindString(BuildScript())
	if fn == "" {
		t.Fatal("build.sh has no is_auth_error function")
	}
	cases := []struct {
		msg  string
		auth bool
	}{
		{`reading manifest latest in r/x: unauthorized: authentication required`, true},
		{`invalid status code from registry 401 (Unauthorized)`, true},
		{`received unexpected HTTP status: 401`, true},
		{`denied: requested access to the resource is denied`, true},
		{`pinging container registry 127.0.0.1:40167: Get "https://127.0.0.1:40167/v2/": http: server gave HTTP response to HTTPS client`, false},
		{`reading manifest sha256:ab401ab in 127.0.0.1:5000/test/x: manifest unknown`, false},
		{`reading manifest sha256:401abc in 10.0.0.401/x: manifest unknown`, false},
	}
	for _, c := range cases {
		err := exec.Command("bash", "-c", fn+"\nis_auth_error \"$1\"", "bash", c.msg).Run()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatalf("bash: %v", err)
		}
		if got := err == nil; got != c.auth {
			t.Errorf("is_auth_error(%q) = %v, want %v", c.msg, got, c.auth)
		}
	}
}
