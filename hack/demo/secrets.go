package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// nodeSecrets is where the controller copies the node pull secrets: the
// only Secrets the daemons may read.
const nodeSecrets = "strata-nodes"

// checkNodeSecrets checks what the samples promise about credentials: the
// nodes get the MachineOSConfig's pull secret, copied to strata-nodes,
// and never its push secret.
func checkNodeSecrets(ctx context.Context, c client.Client) (string, error) {
	mosc := &v1alpha1.MachineOSConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: pool}, mosc); err != nil {
		return "", err
	}
	push := mosc.Spec.RenderedImagePushSecret.Name
	if mosc.Spec.RenderedImagePullSecret == nil {
		return "", fmt.Errorf("MachineOSConfig %s names no renderedImagePullSecret", pool)
	}
	pull := mosc.Spec.RenderedImagePullSecret.Name
	if err := c.Get(ctx, client.ObjectKey{Namespace: nodeSecrets, Name: pull}, &corev1.Secret{}); err != nil {
		return "", fmt.Errorf("the nodes' pull secret %s/%s: %w", nodeSecrets, pull, err)
	}
	err := c.Get(ctx, client.ObjectKey{Namespace: nodeSecrets, Name: push}, &corev1.Secret{})
	if err == nil {
		return "", fmt.Errorf("the push secret %s is in %s, where every node can read it", push, nodeSecrets)
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	return fmt.Sprintf("the nodes pull with %s (copied to %s); the push secret %s stays in strata-system", pull, nodeSecrets, push), nil
}
