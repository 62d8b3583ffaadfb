package vmbootc

import (
	"context"

	"github.com/strata-dev/strata/rollout/bootc"
)

// view is the sysroot as bootc status sees it.
type view struct {
	deps                     []Deployment
	booted, staged, rollback *Deployment
	// rollbackQueued: the rollback deployment boots before the booted
	// one, after `bootc rollback`.
	rollbackQueued bool
}

func (s *System) view() (*view, error) {
	deps, err := s.Deployments()
	if err != nil {
		return nil, err
	}
	v := &view{deps: deps}
	for i := range deps {
		d := &deps[i]
		switch {
		case d.Booted:
			v.booted = d
		case d.Staged:
			v.staged = d
		}
	}
	for i := range deps {
		d := &deps[i]
		if d != v.booted && d != v.staged {
			// bootc's rollback is ostree's: the first other deployment.
			v.rollback = d
			break
		}
	}
	v.rollbackQueued = v.booted != nil && v.rollback != nil && v.rollback.Index < v.booted.Index
	return v, nil
}

// spec is the image the host follows: the staged deployment's, else the
// booted one's.
func (v *view) spec() string {
	if v.staged != nil {
		return v.staged.Origin.Image
	}
	if v.booted != nil {
		return v.booted.Origin.Image
	}
	return ""
}

// Status is what `bootc status --format=json` prints. A system ostree
// did not boot has no booted entry (bootc: not a bootc host).
func (s *System) Status(ctx context.Context) (*bootc.Host, error) {
	h := &bootc.Host{
		APIVersion: bootc.APIVersionV1,
		Kind:       bootc.Kind,
		Metadata:   bootc.Metadata{Name: bootc.HostName},
		Spec:       bootc.HostSpec{BootOrder: bootc.BootOrderDefault},
	}
	v, err := s.view()
	if err != nil {
		return nil, err
	}
	if v.booted == nil {
		return h, nil
	}
	digests, err := s.imageDigests()
	if err != nil {
		return nil, err
	}
	entry := func(d *Deployment) (*bootc.BootEntry, error) {
		if d == nil {
			return nil, nil
		}
		store := bootc.StoreOstreeContainer
		e := &bootc.BootEntry{
			Store:  &store,
			Ostree: &bootc.OstreeStatus{Stateroot: d.Stateroot, Checksum: d.Checksum, DeploySerial: d.Serial},
			// Debian 12's systemd 252 has no soft-reboot.
			SoftRebootCapable: false,
		}
		// bootc: download-only is "staged and finalization locked"
		// (downloadonly.go).
		if d.Staged {
			locked, err := s.stagedLocked()
			if err != nil {
				return nil, err
			}
			e.DownloadOnly = locked
		}
		if d.Origin.Image == "" {
			return e, nil
		}
		e.Image = &bootc.ImageStatus{
			Image: bootc.ImageReference{Image: d.Origin.Image, Transport: bootc.TransportRegistry},
		}
		if im := s.describe(ctx, d.Checksum, digests); im != nil {
			e.Image.Version, e.Image.Timestamp = im.Version, im.Created
			e.Image.ImageDigest, e.Image.Architecture = im.Digest, im.Architecture
		}
		return e, nil
	}
	if h.Status.Booted, err = entry(v.booted); err != nil {
		return nil, err
	}
	if h.Status.Staged, err = entry(v.staged); err != nil {
		return nil, err
	}
	if h.Status.Rollback, err = entry(v.rollback); err != nil {
		return nil, err
	}
	h.Status.RollbackQueued = v.rollbackQueued
	if h.Status.Booted.Image != nil {
		t := bootc.HostTypeBootc
		h.Status.Type = &t
	}
	spec := h.Status.Booted
	if h.Status.Staged != nil {
		spec = h.Status.Staged
	}
	if spec.Image != nil {
		img := spec.Image.Image
		h.Spec.Image = &img
	}
	if v.rollbackQueued {
		h.Spec.BootOrder = bootc.BootOrderRollback
	}
	return h, nil
}
