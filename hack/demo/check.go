package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

const (
	// sampleConfig is the MachineConfig the demo's closing words tell a
	// user to edit.
	sampleConfig = "50-worker-chrony"
	// checkArgument is the kernel argument check adds.
	checkArgument = "strata.demo-check=1"
)

// check does what the demo's closing words invite a user to do, after
// `make demo` has returned: it edits the sample MachineConfig (a kernel
// argument) and waits until every node runs the image built for it. That
// proves the simulated nodes outlived `make demo`, and that the image's
// configuration is the edited one. Then it runs the commands the README,
// docs/ and the demo's closing words print (runDocCommands).
func check(p statePaths) error {
	started := time.Now()
	pid, ok := running(p)
	if !ok {
		return errors.New("the demo's simulated nodes are not running (make demo starts them)")
	}
	raw, err := os.ReadFile(p.ready)
	if err != nil {
		return fmt.Errorf("the demo's nodes: %w", err)
	}
	nodes := strings.Fields(string(raw))
	w, err := newWatcher(p.kubeconfig, nodes, started)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), rolloutLimit)
	defer cancel()

	mosc := &v1alpha1.MachineOSConfig{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: pool}, mosc); err != nil {
		return err
	}
	before := mosc.Status.CurrentImagePullSpec
	if before == "" {
		return errors.New("MachineOSConfig worker has no image: run make demo first")
	}
	mc := &v1alpha1.MachineConfig{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: sampleConfig}, mc); err != nil {
		return err
	}
	if slices.Contains(mc.Spec.KernelArguments, checkArgument) {
		return fmt.Errorf("MachineConfig %s already has kernel argument %s: the check runs once per make demo", sampleConfig, checkArgument)
	}
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.KernelArguments = append(mc.Spec.KernelArguments, checkArgument)
	if err := w.c.Patch(ctx, mc, patch); err != nil {
		return err
	}
	say(started, "added kernel argument %s to MachineConfig %s; following the new build and rollout", checkArgument, sampleConfig)

	w.notImage = before
	image, err := w.follow(ctx, exitedWhenGone(ctx, pid))
	if err != nil {
		return fmt.Errorf("%w\nthe simulated nodes' log: %s", err, p.log)
	}
	if err := w.c.Get(ctx, client.ObjectKey{Name: pool}, mosc); err != nil {
		return err
	}
	b := &v1alpha1.MachineOSBuild{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: mosc.Status.MachineOSBuild.Name}, b); err != nil {
		return err
	}
	rendered := &v1alpha1.MachineConfig{}
	if err := w.c.Get(ctx, client.ObjectKey{Name: b.Spec.MachineConfig.Name}, rendered); err != nil {
		return err
	}
	if !slices.Contains(rendered.Spec.KernelArguments, checkArgument) {
		return fmt.Errorf("every node runs %s, built from %s, whose kernel arguments %q lack %s", image, rendered.Name, rendered.Spec.KernelArguments, checkArgument)
	}
	say(started, "every node runs %s, built from %s with %s", image, rendered.Name, checkArgument)

	cmds, err := docCommands(p.root, closingHints(p.kubeconfig, image))
	if err != nil {
		return err
	}
	return runDocCommands(ctx, p, cmds, demoValues{image: image, build: b.Name, node: nodes[0]}, started)
}

// exitedWhenGone reports when process pid (the detached serve) is gone.
func exitedWhenGone(ctx context.Context, pid int) <-chan error {
	gone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if !alive(pid) {
					gone <- fmt.Errorf("process %d exited", pid)
					return
				}
			}
		}
	}()
	return gone
}
