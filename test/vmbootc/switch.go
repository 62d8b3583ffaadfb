package vmbootc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/ostreeimage"
	"github.com/strata-dev/strata/rollout/bootc"
	"github.com/strata-dev/strata/test/bootcsim"
)

// ErrNotBooted: the system was not booted by ostree, or its booted
// deployment is not in the sysroot; bootc refuses to change such a host.
var ErrNotBooted = errors.New("Not booted into an ostree deployment") //nolint:staticcheck // bootc-like message

// SwitchOptions are the options of `bootc switch` this bootc has.
type SwitchOptions struct {
	// Transport is the image transport; only "registry" (or "").
	Transport string
	// DownloadOnly stages the image locked: no reboot boots it until
	// --from-downloaded (downloadonly.go).
	DownloadOnly bool
	// FromDownloaded unlocks the staged deployment of the image, staged
	// with DownloadOnly; nothing is fetched.
	FromDownloaded bool
}

// Switch is `bootc switch IMAGE`: pull the image, commit it and stage a
// deployment of it for the next boot, with bootc's origin and kernel
// arguments. Switching to the image the spec already names changes
// nothing (changed is false).
func (s *System) Switch(ctx context.Context, image string, o SwitchOptions) (changed bool, err error) {
	if o.Transport != "" && o.Transport != bootc.TransportRegistry {
		return false, fmt.Errorf("transport %q is not supported (only %s)", o.Transport, bootc.TransportRegistry)
	}
	ref, err := canonicalReference(image)
	if err != nil {
		return false, err
	}
	v, unlock, err := s.lockBooted()
	if err != nil {
		return false, err
	}
	defer unlock()
	if o.FromDownloaded {
		return false, s.applyDownloaded(v, ref.String())
	}
	if v.spec() == ref.String() {
		// A download-only switch to the image staged unlocked locks it:
		// the caller asked that no reboot boot it.
		if o.DownloadOnly && v.staged != nil {
			if _, err := s.lockStaging(); err != nil {
				return false, err
			}
		}
		fmt.Fprintln(s.out(), "Image specification is unchanged.")
		return false, nil
	}
	im, err := s.pull(ctx, ref)
	if err != nil {
		return false, err
	}
	oldKargs, err := deploymentKargs(v.booted.Dir)
	if err != nil {
		return false, fmt.Errorf("kernel arguments of the booted image: %w", err)
	}
	kargs := ostreeimage.MergeKargs(v.booted.Kargs, oldKargs, im.Kargs)
	if err := s.stage(ctx, v, im.Checksum, ostreeimage.Origin{Image: ref.String()}, kargs, o.DownloadOnly); err != nil {
		return false, err
	}
	if err := s.removeUnusedImages(ctx); err != nil {
		return false, err
	}
	if o.DownloadOnly {
		fmt.Fprintf(s.out(), "Image downloaded and staged, locked (apply with --from-downloaded): %s\n", ref)
	} else {
		fmt.Fprintf(s.out(), "Queued for next boot: %s\n", ref)
	}
	if im.Version != "" {
		fmt.Fprintf(s.out(), "  Version: %s\n", im.Version)
	}
	fmt.Fprintf(s.out(), "  Digest: %s\n", im.Digest)
	return true, nil
}

// stage deploys csum as the staged deployment, locked or not. Staged,
// booted and one rollback deployment stay; a staged deployment there was
// and older rollbacks go first, as bootc keeps no more.
//
// Locked, the finalization lock is created first (as ostree's own
// --lock-finalization does), so that the new staged deployment is never
// unlocked; a staged deployment there was may be locked by it a moment
// before it goes, which boots nothing new. A failed stage removes the
// lock it created. Unlocked, the lock of a staged deployment there was
// goes with it, after it.
func (s *System) stage(ctx context.Context, v *view, csum string, o ostreeimage.Origin, kargs []string, locked bool) (err error) {
	if locked {
		created, lockErr := s.lockStaging()
		if lockErr != nil {
			return lockErr
		}
		if created {
			// err is stage's result: a failed stage removes the lock.
			defer func() {
				if err != nil {
					_ = s.unlockStaging()
				}
			}()
		}
	}
	if err := s.prune(ctx, v); err != nil {
		return err
	}
	if !locked {
		if err := s.unlockStaging(); err != nil {
			return err
		}
	}
	originFile, cleanup, err := s.tempFile("origin-", []byte(o.String()))
	if err != nil {
		return err
	}
	defer cleanup()
	args := []string{"--os=" + v.booted.Stateroot, "--origin-file=" + originFile, "--karg-none"}
	for _, k := range kargs {
		args = append(args, "--karg-append="+k)
	}
	if s.Live {
		args = append(args, "--stage")
	} else {
		// No booted system to finalize at shutdown: deploy now (ostree
		// merges /etc from the first deployment, the booted one here)
		// and record it as staged, as ostree would.
		args = append(args, "--retain")
	}
	if _, err := s.admin(ctx, "deploy", append(args, csum)...); err != nil {
		return err
	}
	if s.Live {
		return nil
	}
	deps, err := s.Deployments()
	if err != nil {
		return err
	}
	if len(deps) == 0 || deps[0].Checksum != csum {
		return fmt.Errorf("ostree admin deploy %s: the new deployment is not the first one", csum)
	}
	return writeFileAtomic(filepath.Join(s.Run, stagedFile), []byte(deps[0].Name()+"\n"))
}

// prune undeploys the staged deployment and every deployment after the
// first rollback one, from the last.
func (s *System) prune(ctx context.Context, v *view) error {
	keep := map[string]bool{v.booted.Dir: true}
	if v.rollback != nil {
		keep[v.rollback.Dir] = true
	}
	for i := len(v.deps) - 1; i >= 0; i-- {
		if keep[v.deps[i].Dir] {
			continue
		}
		if err := s.undeploy(ctx, v.deps[i]); err != nil {
			return err
		}
	}
	return nil
}

// undeploy removes d; the indices of the deployments after it shift.
func (s *System) undeploy(ctx context.Context, d Deployment) error {
	if _, err := s.admin(ctx, "undeploy", strconv.Itoa(d.Index)); err != nil {
		return err
	}
	if d.Staged && !s.Live {
		if err := os.Remove(filepath.Join(s.Run, stagedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// pull finds the image committed already (by digest) or pulls and
// imports it.
func (s *System) pull(ctx context.Context, ref name.Reference) (*ostreeimage.Image, error) {
	if d, ok := ref.(name.Digest); ok {
		im, found, err := s.images().Lookup(ctx, d.DigestStr())
		if err != nil {
			return nil, err
		}
		if found {
			s.remember(im)
			return im, nil
		}
	}
	kc, authFile, err := s.keychain()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(s.out(), "Fetching %s\n", ref)
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(kc),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	if err != nil {
		return nil, pullError(ref, authFile, err)
	}
	im, err := s.images().Import(ctx, img)
	if err != nil {
		return nil, pullError(ref, authFile, err)
	}
	s.remember(im)
	return im, nil
}

// authFiles are the credential files bootc reads as root, in order:
// the first that exists is used (BOOTC.md).
func (s *System) authFiles() []string {
	var files []string
	for _, rel := range bootcsim.AuthFiles {
		if r, ok := strings.CutPrefix(rel, "run/"); ok {
			files = append(files, filepath.Join(s.Run, r))
		} else {
			files = append(files, filepath.Join(s.Root, rel))
		}
	}
	return files
}

func (s *System) keychain() (authn.Keychain, string, error) {
	for _, f := range s.authFiles() {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		kc, err := registry.KeychainFromFile(f)
		return kc, f, err
	}
	return authn.NewMultiKeychain(), "", nil
}

// pullError says plainly when the registry wants credentials the node
// does not have or refuses the ones it has.
func pullError(ref name.Reference, authFile string, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		if authFile == "" {
			return fmt.Errorf("pulling %s: the registry requires authentication and there is no auth file: %w", ref, err)
		}
		return fmt.Errorf("pulling %s: the registry refused the credentials of %s: %w", ref, authFile, err)
	}
	return fmt.Errorf("pulling %s: %w", ref, err)
}

// canonicalReference parses an image reference as bootc records it: a
// tag+digest reference loses its tag. Loopback registries (the test
// registry the guest reaches at 127.0.0.1) are spoken to in plain HTTP.
func canonicalReference(image string) (name.Reference, error) {
	if image == "" {
		return nil, errors.New("no image given")
	}
	if before, digest, ok := strings.Cut(image, "@"); ok {
		if i := strings.LastIndex(before, ":"); i > strings.LastIndex(before, "/") {
			image = before[:i] + "@" + digest
		}
	}
	ref, err := name.ParseReference(image, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("invalid image reference %q: %w", image, err)
	}
	host := ref.Context().RegistryStr()
	if h, _, ok := strings.Cut(host, ":"); ok && !strings.HasPrefix(host, "[") {
		host = h
	}
	if host == "localhost" || strings.HasPrefix(host, "127.") || strings.HasPrefix(host, "[::1]") {
		return name.ParseReference(image, name.StrictValidation, name.Insecure)
	}
	return ref, nil
}

// tempFile writes data to a new file in Run, for ostree to read.
func (s *System) tempFile(prefix string, data []byte) (string, func(), error) {
	f, err := os.CreateTemp(s.Run, prefix)
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.Remove(f.Name()) }
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		cleanup()
		return "", nil, err
	}
	if err := f.Close(); err != nil {
		cleanup()
		return "", nil, err
	}
	return f.Name(), cleanup, nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
