package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/scheme"
)

type approveOptions struct {
	status  statusOptions
	reason  string
	approve bool
}

func newApproveCommand() *cobra.Command {
	return newVerdictCommand(true)
}

func newRejectCommand() *cobra.Command {
	return newVerdictCommand(false)
}

func newVerdictCommand(approve bool) *cobra.Command {
	o := &approveOptions{approve: approve}
	cmd := &cobra.Command{
		Use:   "approve MOSB [--reason TEXT]",
		Short: "Approve a built image: a pool with imageApproval Required rolls it out",
		Long: `approve sets the MachineOSBuild's ImageApproved condition to True (reason
Approved), through its status subresource, keeping every other condition.
A pool whose MachineOSConfig has imageApproval: Required rolls out an
image only once its build is approved. Only a build that succeeded can be
approved. The message names who approved it (from the API server's
SelfSubjectReview) and the reason given.

Scanners and CI jobs can set the same condition themselves; the
ClusterRole strata-image-approver allows that and nothing else.`,
		Example: `  stratactl approve worker-4f2c0a9d1e7b --reason "Trivy: no HIGH or CRITICAL findings"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	if !approve {
		cmd.Use = "reject MOSB --reason TEXT"
		cmd.Short = "Reject a built image: it never rolls out"
		cmd.Long = `reject sets the MachineOSBuild's ImageApproved condition to False (reason
Rejected) with the reason given, which is required: the pool's Updated
condition repeats it. A rejected image never reaches a node of a pool whose
MachineOSConfig has imageApproval: Required; the nodes keep the image they
run until a newer build is approved.`
		cmd.Example = `  stratactl reject worker-4f2c0a9d1e7b --reason "CVE-2026-1234 in openssl"`
	}
	f := cmd.Flags()
	f.StringVar(&o.status.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&o.reason, "reason", "", "why (shown in the condition's message and the pool's status)")
	return cmd
}

func (o *approveOptions) run(ctx context.Context, out io.Writer, name string) error {
	if !o.approve && o.reason == "" {
		return errors.New("--reason is required: say why the image is rejected")
	}
	cfg, err := o.status.restConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	who := "stratactl"
	if kube, err := kubernetes.NewForConfig(cfg); err == nil {
		// Who is asking, as the API server sees it; best effort.
		if r, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil && r.Status.UserInfo.Username != "" {
			who = r.Status.UserInfo.Username
		}
	}
	cond := metav1.Condition{Type: v1alpha1.BuildImageApproved, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApproved, Message: "Approved by " + who}
	verb := "approved"
	if !o.approve {
		cond.Status, cond.Reason, cond.Message, verb = metav1.ConditionFalse, v1alpha1.ReasonRejected, "Rejected by "+who, "rejected"
	}
	if o.reason != "" {
		cond.Message += ": " + o.reason
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &v1alpha1.MachineOSBuild{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, b); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("no MachineOSBuild named %s (kubectl get mosb lists them)", name)
			}
			return err
		}
		if o.approve && !meta.IsStatusConditionTrue(b.Status.Conditions, v1alpha1.BuildSucceeded) {
			return fmt.Errorf("MachineOSBuild %s has not succeeded (%s): only a built image can be approved", name, buildPhase(b))
		}
		// An update carries resourceVersion: a concurrent change is a
		// conflict, retried on a fresh read, never overwritten.
		meta.SetStatusCondition(&b.Status.Conditions, cond)
		return c.Status().Update(ctx, b)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "machineosbuild/%s %s\n", name, verb)
	return nil
}
