package build

import (
	"context"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/controllers/machineosbuild"
	"github.com/strata-dev/strata/internal/buildinputs"
)

// maxAdminStages is how many admin stages a MachineOSConfig's status
// records (the API's limit); the oldest is forgotten first, and is then
// built again if asked for.
const maxAdminStages = 8

// recordAdminStage records the current build's admin stage in the
// MachineOSConfig's status once the build's Job has pushed it, so that
// later builds reuse it by this digest. It runs on every reconcile, so a
// record lost with a failed status write is made again.
func (r *Reconciler) recordAdminStage(_ context.Context, s *scope) error {
	in := s.in
	st := machineosbuild.FindStage(s.build, v1alpha1.BuildStageAdmin)
	stage := in.Result.Stages.Admin
	if st == nil || stage == nil || st.Reused || st.Image == "" || st.Duration == nil || st.StartTime == nil {
		return nil
	}
	tag := buildinputs.AdminTag(s.mosc, stage.InputHash, r.Config.BuilderImage)
	if !strings.HasPrefix(st.Image, buildinputs.Repository(tag)+"@") {
		return nil
	}
	if rec := findAdminStage(s.mosc, tag); rec != nil && rec.Image == st.Image && rec.Build == s.build.Name {
		return nil
	}
	rec := v1alpha1.AdminStageRecord{Tag: tag, Image: st.Image, Build: s.build.Name, BuiltTime: metav1.NewTime(st.StartTime.Add(st.Duration.Duration))}
	list := []v1alpha1.AdminStageRecord{rec}
	for _, old := range s.mosc.Status.AdminStages {
		if old.Tag != tag && len(list) < maxAdminStages {
			list = append(list, old)
		}
	}
	s.mosc.Status.AdminStages = list
	return nil
}

// findAdminStage is the MachineOSConfig's record of the admin stage kept
// at tag, or nil.
func findAdminStage(mosc *v1alpha1.MachineOSConfig, tag string) *v1alpha1.AdminStageRecord {
	for i := range mosc.Status.AdminStages {
		if mosc.Status.AdminStages[i].Tag == tag {
			return &mosc.Status.AdminStages[i]
		}
	}
	return nil
}

// forgetAdminStage removes the records of an admin stage image that is
// no longer in the registry.
func forgetAdminStage(mosc *v1alpha1.MachineOSConfig, image string) {
	mosc.Status.AdminStages = slices.DeleteFunc(mosc.Status.AdminStages, func(r v1alpha1.AdminStageRecord) bool { return r.Image == image })
	if len(mosc.Status.AdminStages) == 0 {
		mosc.Status.AdminStages = nil
	}
}
