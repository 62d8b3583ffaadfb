package vmbootc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoRollback is bootc's refusal when there is no rollback deployment.
var ErrNoRollback = errors.New("No rollback available") //nolint:staticcheck // bootc's own message, word for word

// Rollback is `bootc rollback`: the rollback deployment boots next and
// the staged one is dropped. Run while a rollback is queued, it reverts
// the queued rollback: the booted deployment boots next again.
//
// ostree 2022.7 cannot reorder deployments from its command line, so
// the rollback deployment R is deployed again (its commit, origin and
// kernel arguments, and a copy of its /etc) where it must go, and R
// itself is undeployed (doc.go).
func (s *System) Rollback(ctx context.Context) error {
	v, unlock, err := s.lockBooted()
	if err != nil {
		return err
	}
	defer unlock()
	if v.rollback == nil {
		return ErrNoRollback
	}
	r := *v.rollback
	// Read now: the origin file goes with its deployment.
	origin, err := os.ReadFile(r.Dir + ".origin")
	if err != nil {
		return fmt.Errorf("origin of the rollback deployment: %w", err)
	}
	reverting := v.rollbackQueued
	if reverting {
		fmt.Fprintln(s.out(), "notice: Reverting queued rollback state")
	}
	if v.staged != nil {
		if err := s.undeploy(ctx, *v.staged); err != nil {
			return err
		}
		// Its finalization lock would lock the next staged deployment.
		if err := s.unlockStaging(); err != nil {
			return err
		}
	}
	if reverting {
		err = s.revert(ctx, r, origin)
	} else {
		err = s.redeploy(ctx, r, origin, true, filepath.Join(r.Dir, "etc"))
		if err == nil {
			err = s.undeployDir(ctx, r.Dir)
		}
	}
	if err != nil {
		return err
	}
	if err := s.removeUnusedImages(ctx); err != nil {
		return err
	}
	if reverting {
		fmt.Fprintln(s.out(), "Next boot: current deployment")
	} else {
		fmt.Fprintf(s.out(), "Next boot: rollback deployment (%s)\n", r.Origin.Image)
	}
	return nil
}

// revert puts the queued rollback r back after the booted deployment:
// r's /etc is kept aside, r undeployed, its commit deployed again after
// the booted one (ostree's --not-as-default puts it after the first
// deployment, which is then the booted one) with that /etc.
func (s *System) revert(ctx context.Context, r Deployment, origin []byte) error {
	keep, err := os.MkdirTemp(filepath.Dir(filepath.Dir(r.Dir)), "bootc-rollback-etc-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(keep) }()
	if err := copyTree(ctx, filepath.Join(r.Dir, "etc"), keep); err != nil {
		return err
	}
	if err := s.undeployDir(ctx, r.Dir); err != nil {
		return err
	}
	return s.redeploy(ctx, r, origin, false, keep)
}

// redeploy deploys r's commit again with r's origin and kernel
// arguments, first or after the first deployment, and gives the new
// deployment a copy of the directory etcFrom (r's /etc) instead of a
// merged /etc.
func (s *System) redeploy(ctx context.Context, r Deployment, origin []byte, first bool, etcFrom string) error {
	before, err := s.Deployments()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, d := range before {
		known[d.Dir] = true
	}
	originFile, cleanup, err := s.tempFile("origin-", origin)
	if err != nil {
		return err
	}
	defer cleanup()
	args := []string{"--os=" + r.Stateroot, "--retain", "--no-merge", "--karg-none", "--origin-file=" + originFile}
	for _, k := range r.Kargs {
		args = append(args, "--karg-append="+k)
	}
	if !first {
		args = append(args, "--not-as-default")
	}
	if _, err := s.admin(ctx, "deploy", append(args, r.Checksum)...); err != nil {
		return err
	}
	after, err := s.Deployments()
	if err != nil {
		return err
	}
	for _, d := range after {
		if !known[d.Dir] && d.Checksum == r.Checksum {
			if err := replaceEtc(ctx, filepath.Join(d.Dir, "etc"), etcFrom); err != nil {
				return fmt.Errorf("restore /etc of the rollback deployment: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("ostree admin deploy %s: no new deployment of it", r.Checksum)
}

// undeployDir undeploys the deployment in dir, found again by its
// directory: indices move with every change.
func (s *System) undeployDir(ctx context.Context, dir string) error {
	deps, err := s.Deployments()
	if err != nil {
		return err
	}
	for _, d := range deps {
		if d.Dir == dir {
			return s.undeploy(ctx, d)
		}
	}
	return fmt.Errorf("deployment %s is gone", dir)
}

// replaceEtc makes dst (a new deployment's etc) a copy of src: a
// deployment's root is immutable, so dst stays and its content goes.
func replaceEtc(ctx context.Context, dst, src string) error {
	entries, err := os.ReadDir(dst)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return copyTree(ctx, src, dst)
}

// copyTree copies the content of directory src into directory dst with
// coreutils' cp -a: owners, modes, times, links and extended attributes
// (SELinux labels) as they are.
func copyTree(ctx context.Context, src, dst string) error {
	out, err := exec.CommandContext(ctx, "cp", "-a", src+"/.", dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s %s: %w: %s", src, dst, err, strings.TrimSpace(string(out)))
	}
	return nil
}
