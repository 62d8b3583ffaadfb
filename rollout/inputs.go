package rollout

import (
	"bytes"
	"context"

	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/nodeconfig"
)

// AuthFile is where the daemon writes the pull secret on the host: the
// first place bootc looks, and gone at reboot.
const AuthFile = "/run/ostree/auth.json"

// healthPoll is how often the health of a freshly booted node is checked
// while its timeout runs.
const healthPoll = 5 * time.Second

// authMaxAge is how long a pull secret read is used for a stage
// (refresh): a rotated secret reaches the node's next stage at most this
// long after it was read, or at once when a switch failed.
const authMaxAge = time.Minute

// ensureAuth writes the pull secret the node names to AuthFile, or
// removes the file when it names none. A secret already written is not
// read again, unless refresh is set and it was read more than authMaxAge
// ago or a switch failed since: the stage of an update reads it again
// (it may have been rotated), but not one read a moment before by the
// update's first sync (under a rollout's load the read took 0.1-0.3 s,
// on the path of every node's update).
func (d *Daemon) ensureAuth(ctx context.Context, s *scope, refresh bool) error {
	name := s.annotation(v1alpha1.ImagePullSecretAnnotation)
	if d.authSecret != nil && *d.authSecret == name &&
		(!refresh || (!d.authSuspect && d.now().Sub(d.authReadAt) < authMaxAge)) {
		return nil
	}
	if name == "" {
		if err := d.Root.Remove(AuthFile); err != nil {
			return fmt.Errorf("remove %s: %w", AuthFile, err)
		}
		d.authSecret = &name
		return nil
	}
	readAt := d.now()
	data, err := d.inputs().PullSecret(ctx, name)
	if err != nil {
		return fmt.Errorf("get pull secret %s/%s: %w", d.Namespace, name, err)
	}
	if old, err := d.Root.ReadFile(AuthFile); err != nil || !bytes.Equal(old, data) {
		if err := d.Root.WriteFile(AuthFile, data, 0o600, 0, 0); err != nil {
			return fmt.Errorf("write the pull secret: %w", err)
		}
		s.log.Info("Wrote the pull secret for bootc", "secret", name, "path", AuthFile)
	}
	d.authSecret, d.authReadAt, d.authSuspect = &name, readAt, false
	return nil
}

// Inputs reads the node's rendered configs and its pull secret. Every
// daemon shares one ServiceAccount, so the API server cannot keep one
// node from reading another pool's: the daemon of a real node reads them
// from the config server (configserver.NodeClient), which serves only
// what the controller named on the daemon's own Node, or rendered
// configs of its pool, and the daemon's RBAC has no get on either.
type Inputs interface {
	// MachineConfig reads rendered config name.
	MachineConfig(ctx context.Context, name string) (*v1alpha1.MachineConfig, error)
	// PullSecret reads the .dockerconfigjson of pull secret name.
	PullSecret(ctx context.Context, name string) ([]byte, error)
}

// inputs is Inputs, or reads from the API server with reader() when
// nil (the simulated nodes' daemons, which run with a kubeconfig of
// their own, and the tests).
func (d *Daemon) inputs() Inputs {
	if d.Inputs != nil {
		return d.Inputs
	}
	return apiInputs{d}
}

// apiInputs reads the inputs from the API server.
type apiInputs struct{ d *Daemon }

func (a apiInputs) MachineConfig(ctx context.Context, name string) (*v1alpha1.MachineConfig, error) {
	var mc v1alpha1.MachineConfig
	if err := a.d.reader().Get(ctx, types.NamespacedName{Name: name}, &mc); err != nil {
		return nil, err
	}
	return &mc, nil
}

func (a apiInputs) PullSecret(ctx context.Context, name string) ([]byte, error) {
	var secret corev1.Secret
	if err := a.d.reader().Get(ctx, types.NamespacedName{Namespace: a.d.Namespace, Name: name}, &secret); err != nil {
		return nil, err
	}
	data, ok := secret.Data[corev1.DockerConfigJsonKey]
	if !ok {
		return nil, fmt.Errorf("no %s key", corev1.DockerConfigJsonKey)
	}
	return data, nil
}

// invalidConfigError is a desired image or rendered config the daemon
// cannot apply; retrying does not help.
type invalidConfigError struct {
	what string
	err  error
}

func (e *invalidConfigError) Error() string {
	return fmt.Sprintf("%s cannot be applied on the node: %v", e.what, e.err)
}

func (e *invalidConfigError) Unwrap() error { return e.err }

// readConfig reads rendered config and splits out its node items into
// s.items. A config the node cannot apply sets s.config to
// configInvalid; only an error reading it is returned.
func (d *Daemon) readConfig(ctx context.Context, s *scope, config string) error {
	s.items, s.configErr = nil, nil
	s.config = configValid
	if config == "" {
		return nil
	}
	spec, err := d.renderedConfig(ctx, config)
	if err != nil {
		s.config = configUnread
		return fmt.Errorf("get rendered config %s: %w", config, err)
	}
	split, err := nodeconfig.SplitForNode(spec)
	if err != nil {
		s.config, s.configErr = configInvalid, &invalidConfigError{what: "rendered config " + config, err: err}
		return nil
	}
	s.items = split.NodeItems
	return nil
}

// writeItems writes the node items read last and returns those left
// alone.
func (d *Daemon) writeItems(s *scope) ([]string, error) {
	skipped, err := d.Root.Apply(s.items)
	if err != nil {
		return nil, fmt.Errorf("write node items: %w", err)
	}
	for _, msg := range skipped {
		s.log.Info("Left a node item alone", "item", msg)
	}
	return skipped, nil
}

// healthCheckTimeout is the node's healthCheckTimeout annotation, or the
// default when it is missing or invalid.
func healthCheckTimeout(v string) (time.Duration, bool) {
	if v == "" {
		return DefaultHealthCheckTimeout, true
	}
	t, err := time.ParseDuration(v)
	if err != nil || t <= 0 {
		return DefaultHealthCheckTimeout, false
	}
	return t, true
}

// health says why the node is unhealthy, or "" when it is healthy: its
// Ready condition is True and the health check passes.
func (d *Daemon) health(ctx context.Context, s *scope) string {
	var why []string
	ready := false
	for _, c := range s.node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
			if !ready {
				why = append(why, strings.TrimSpace(fmt.Sprintf("the node is not Ready (%s) %s", c.Reason, c.Message)))
			}
		}
	}
	if !ready && len(why) == 0 {
		why = append(why, "the node has no Ready condition")
	}
	if err := d.Machine.CheckHealth(ctx); err != nil {
		why = append(why, err.Error())
	}
	return strings.Join(why, "; ")
}
