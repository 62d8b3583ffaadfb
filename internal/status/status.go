// Package status holds what every Strata controller does when it writes
// status: keep messages within the API's limits, and patch with an
// optimistic lock, because several controllers own parts of one object's
// status (a pool's conditions come from render, build and rollout) and a
// merge patch replaces a whole conditions list.
package status

import (
	"context"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/client"
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
func Patch(ctx context.Context, c client.Client, before, after client.Object) error {
	return c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}
