package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/strata-dev/strata/rollout/bootc"
)

// fakeHost is an in-process bootc host for the state machine's tests:
// deployments booted, staged and rollback, a boot id, and counters of
// every call. The real simulator (test/bootcsim) is the e2e's.
type fakeHost struct {
	mu             sync.Mutex
	booted         string
	staged         string
	rollback       string
	rollbackQueued bool
	bootID         string
	// failing maps a digest to the output of its failing health check.
	failing map[string]string
	// onSwitch runs at the start of every Switch call.
	onSwitch func(image string)

	switches, rollbacks, reboots int
	rebootAsked                  bool
}

func newFakeHost(booted string) *fakeHost {
	return &fakeHost{booted: booted, bootID: newBootID(), failing: map[string]string{}}
}

func newBootID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func statusEntry(spec string) any {
	if spec == "" {
		return nil
	}
	return map[string]any{
		"image": map[string]any{
			"image":        map[string]any{"image": spec, "transport": "registry"},
			"imageDigest":  bootc.DigestOf(spec),
			"architecture": "amd64",
		},
		"incompatible": false,
		"pinned":       false,
		"store":        "ostreeContainer",
	}
}

// Status goes through bootc's JSON, so that the parser is exercised.
func (h *fakeHost) Status(context.Context) (*bootc.Host, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	order := "default"
	if h.rollbackQueued {
		order = "rollback"
	}
	doc := map[string]any{
		"apiVersion": bootc.APIVersionV1,
		"kind":       bootc.Kind,
		"metadata":   map[string]any{"name": "host"},
		"spec":       map[string]any{"image": map[string]any{"image": h.spec(), "transport": "registry"}, "bootOrder": order},
		"status": map[string]any{
			"booted":         statusEntry(h.booted),
			"staged":         statusEntry(h.staged),
			"rollback":       statusEntry(h.rollback),
			"rollbackQueued": h.rollbackQueued,
			"type":           "bootcHost",
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return bootc.Parse(data)
}

func (h *fakeHost) Switch(_ context.Context, image string) error {
	h.mu.Lock()
	hook := h.onSwitch
	h.mu.Unlock()
	if hook != nil {
		hook(image)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.switches++
	// As bootc's: the spec is the staged image, else the booted one; a
	// switch to another reference stages it, even the booted image's
	// digest (a new deployment of what runs).
	if image == h.spec() {
		return nil
	}
	h.staged = image
	h.rollbackQueued = false
	return nil
}

// spec is the image bootc's spec names: the staged one, else the booted
// one; h.mu is held.
func (h *fakeHost) spec() string {
	if h.staged != "" {
		return h.staged
	}
	return h.booted
}

// Rollback toggles, as bootc's does, and drops a staged deployment.
func (h *fakeHost) Rollback(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rollbacks++
	if h.rollback == "" {
		return errors.New("error: no rollback deployment")
	}
	h.staged = ""
	h.rollbackQueued = !h.rollbackQueued
	return nil
}

func (h *fakeHost) BootID() (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bootID, nil
}

func (h *fakeHost) Reboot(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reboots++
	h.rebootAsked = true
	return nil
}

func (h *fakeHost) CheckHealth(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if out, ok := h.failing[bootc.DigestOf(h.booted)]; ok {
		return fmt.Errorf("health check: %s", out)
	}
	return nil
}

// boot performs a reboot: the queued rollback or the staged deployment
// becomes booted, with a new boot id.
func (h *fakeHost) boot() {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.rollbackQueued:
		h.booted, h.rollback = h.rollback, h.booted
	case h.staged != "":
		h.booted, h.rollback = h.staged, h.booted
	}
	h.staged, h.rollbackQueued, h.rebootAsked = "", false, false
	h.bootID = newBootID()
}

type counts struct{ switches, rollbacks, reboots, softReboots, statuses int }

func (h *fakeHost) counts() counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return counts{switches: h.switches, rollbacks: h.rollbacks, reboots: h.reboots}
}

// The crash points of the kill-at-each-step tests are the actions that
// change the node, the host or the state file: a test kills the daemon
// right after one.
const (
	stepWorking           = string(actReportWorking)
	stepSwitched          = string(actStage)
	stepDrainRequested    = string(actRequestDrain)
	stepItemsWritten      = string(actWriteItems)
	stepRecorded          = string(actRecordReboot)
	stepRebootingReported = string(actReportRebooting)
	stepRollbackRecorded  = string(actRecordRollback)
	stepRolledBack        = string(actRollback)
)
