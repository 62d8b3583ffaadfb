package machineosbuild

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/status"
)

// buildState is where a build is; the conditions follow from it.
type buildState string

const (
	statePrepared    buildState = "Prepared"
	stateBuilding    buildState = "Building"
	stateSucceeded   buildState = "Succeeded"
	stateFailed      buildState = "Failed"
	stateInterrupted buildState = "Interrupted"
)

// setBuildConditions sets all five conditions of a build from its state,
// every time, so that kubectl's columns and `kubectl wait` always find
// them. It leaves every other condition alone: ImageApproved belongs to
// an approver, and status.Patch's optimistic lock keeps a write computed
// before the approver's from dropping it.
func setBuildConditions(b *v1alpha1.MachineOSBuild, state buildState, message string) {
	message = status.Message(message)
	set := func(t string, on bool, reason string) {
		cs := metav1.ConditionFalse
		if on {
			cs = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
			Type: t, Status: cs, Reason: reason, Message: message, ObservedGeneration: b.Generation,
		})
	}
	reason := map[buildState]string{
		statePrepared:    v1alpha1.ReasonBuildPending,
		stateBuilding:    v1alpha1.ReasonBuildRunning,
		stateSucceeded:   v1alpha1.ReasonBuildSucceeded,
		stateFailed:      v1alpha1.ReasonBuildFailed,
		stateInterrupted: v1alpha1.ReasonBuildInterrupted,
	}[state]
	set(v1alpha1.BuildPrepared, true, reason)
	set(v1alpha1.BuildBuilding, state == stateBuilding, reason)
	set(v1alpha1.BuildSucceeded, state == stateSucceeded, reason)
	set(v1alpha1.BuildFailed, state == stateFailed, reason)
	set(v1alpha1.BuildInterrupted, state == stateInterrupted, reason)
}

// IsTrue says whether the build's condition t is True.
func IsTrue(b *v1alpha1.MachineOSBuild, t string) bool {
	return meta.IsStatusConditionTrue(b.Status.Conditions, t)
}

// Terminal builds never change again, unless an interrupted one's
// inputs become current again (a new attempt).
func Terminal(b *v1alpha1.MachineOSBuild) bool {
	return IsTrue(b, v1alpha1.BuildSucceeded) || IsTrue(b, v1alpha1.BuildFailed) || IsTrue(b, v1alpha1.BuildInterrupted)
}
