// Package status holds what every Strata controller does when it writes
// status: keep messages within the API's limits, and patch with an
// optimistic lock where an object's status has a writer besides its
// controller (a MachineOSBuild's ImageApproved condition is an
// approver's) and a merge patch replaces a whole conditions list. A
// pool's status, shared by several controllers, is server-side applied
// instead (internal/poolstatus).
package status

import (
	"context"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MaxMessage is the API's limit on a condition message.
const MaxMessage = 32768

// Truncate cuts s to at most n bytes, ending in "..." when cut, without
// splitting a UTF-8 character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Message is s cut to fit a condition message.
func Message(s string) string {
	return Truncate(s, MaxMessage)
}

// Patch writes after's status, computed from before, and fails with a
// conflict when someone else wrote the object in between, so that the
// caller's reconcile retries on fresh data instead of overwriting.
// Nothing is sent when the status did not change: a reconcile that finds
// the world as it was costs no write.
func Patch(ctx context.Context, c client.Client, before, after client.Object) error {
	diff, err := client.MergeFrom(before).Data(after)
	if err != nil {
		return err
	}
	if string(diff) == "{}" {
		return nil
	}
	return c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// conflictRetry is soon: the cache catches up within milliseconds.
const conflictRetry = 200 * time.Millisecond

// QuietConflict turns a conflict into a plain requeue. A conflict means
// the reconcile worked on an object someone else has written since (often
// this controller's own earlier write, not yet in the cache): the next
// reconcile sees the fresh object, and nothing is wrong that an operator
// should read about.
func QuietConflict(ctx context.Context, res reconcile.Result, err error) (reconcile.Result, error) {
	if err != nil && apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("Conflict, reconciling again", "error", err.Error())
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	}
	return res, err
}
