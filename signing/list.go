package signing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Attachments lists the sigstore signatures stored for image
// (repo@sha256:...) under its `sha256-<hex>.sig` tag, and that tag; none
// when the tag does not exist. It reads, it does not verify (VerifyEach).
func Attachments(ctx context.Context, image string, reg Registry) (tag string, sigs []Attached, err error) {
	repo, digest, ok := strings.Cut(image, "@")
	if !ok {
		return "", nil, fmt.Errorf("image %q is not a reference by digest", image)
	}
	repo = imageRepo(repo)
	var opts []name.Option
	if r, err := name.NewRepository(repo); err == nil && slices.Contains(reg.Insecure, r.RegistryStr()) {
		opts = append(opts, name.Insecure)
	}
	t, err := name.NewTag(repo+":"+strings.Replace(digest, ":", "-", 1)+".sig", opts...)
	if err != nil {
		return "", nil, err
	}
	ropts := []remote.Option{remote.WithContext(ctx)}
	if reg.Keychain != nil {
		ropts = append(ropts, remote.WithAuthFromKeychain(reg.Keychain))
	}
	img, err := remote.Image(t, ropts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return t.String(), nil, nil
	}
	if err != nil {
		return t.String(), nil, fmt.Errorf("read the signatures of %s: %w", image, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return t.String(), nil, err
	}
	for _, l := range m.Layers {
		if l.MediaType == "application/vnd.dev.cosign.simplesigning.v1+json" {
			sigs = append(sigs, Attached{Digest: l.Digest.String()})
		}
	}
	return t.String(), sigs, nil
}

// imageRepo drops a tag from repo (host/path[:tag]).
func imageRepo(repo string) string {
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		return repo[:i]
	}
	return repo
}
