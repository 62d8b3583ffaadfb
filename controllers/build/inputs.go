package build

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/internal/buildinputs"
	"github.com/strata-dev/strata/internal/layering"
	"github.com/strata-dev/strata/internal/registry"
)

// inputs is everything a build is made from.
type inputs = buildinputs.Inputs

// gatherInputs reads and checks everything the build depends on, and
// names the build of the current inputs. Bad input sets s.problem (a
// condition naming the object and field) and ends the reconcile: nothing
// is built and no build is asked to stop.
func (r *Reconciler) gatherInputs(ctx context.Context, s *scope) error {
	in, err := r.currentInputs(ctx, s)
	if err != nil || in == nil {
		s.done = true
		return err
	}
	s.in, s.name = in, buildinputs.BuildName(s.mosc, in.Hash)
	log.FromContext(ctx).V(1).Info("Inputs", "build", s.name, "renderedConfig", in.Rendered.Name, "base", in.Base, "inputsHash", in.Hash)
	return nil
}

// currentInputs are the current inputs, or nil when there are none (a
// problem, or something waited for).
func (r *Reconciler) currentInputs(ctx context.Context, s *scope) (*inputs, error) {
	mosc := s.mosc
	pool := &v1alpha1.MachineConfigPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: mosc.Spec.MachineConfigPool.Name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			s.problem = &problem{v1alpha1.ReasonUnknownPool, fmt.Sprintf(
				"spec.machineConfigPool.name: MachineConfigPool %q not found", mosc.Spec.MachineConfigPool.Name)}
			return nil, nil
		}
		return nil, err
	}
	// A MachineOSConfig moved to another pool lets the old one go.
	if err := r.releasePools(ctx, mosc); err != nil {
		return nil, err
	}
	if other, err := r.claimPool(ctx, mosc, pool); err != nil || other != "" {
		if other != "" {
			s.problem = &problem{v1alpha1.ReasonPoolConflict, fmt.Sprintf(
				"spec.machineConfigPool.name: pool %s is already layered by MachineOSConfig %s; a pool takes one", pool.Name, other)}
		}
		return nil, err
	}
	s.pool = pool

	baseKC, err := r.keychain(ctx, s, "spec.baseImagePullSecret", mosc.Spec.BaseImagePullSecret)
	if err != nil || s.problem != nil {
		return nil, err
	}
	s.baseKC = baseKC
	pushRef := mosc.Spec.RenderedImagePushSecret
	if s.pushKC, err = r.keychain(ctx, s, "spec.renderedImagePushSecret", &pushRef); err != nil || s.problem != nil {
		return nil, err
	}
	// Nodes pull with this one; the build does not, but a missing Secret
	// would only show at rollout, so say it now.
	if _, err := r.keychain(ctx, s, "spec.renderedImagePullSecret", mosc.Spec.RenderedImagePullSecret); err != nil || s.problem != nil {
		return nil, err
	}

	if pool.Status.Configuration.Name == "" {
		s.waiting = fmt.Sprintf("MachineConfigPool %s has no rendered configuration yet", pool.Name)
		return nil, nil
	}
	rendered := &v1alpha1.MachineConfig{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: pool.Status.Configuration.Name}, rendered); err != nil {
		if apierrors.IsNotFound(err) {
			s.waiting = fmt.Sprintf("rendered MachineConfig %s of pool %s not found", pool.Status.Configuration.Name, pool.Name)
			return nil, nil
		}
		return nil, err
	}

	baseSpec, baseField := mosc.Spec.BaseImagePullSpec, "spec.baseImagePullSpec"
	if url := rendered.Spec.OSImageURL; url != "" {
		source, err := r.osImageURLSource(ctx, rendered)
		if err != nil {
			return nil, err
		}
		switch {
		case baseSpec == "":
			baseSpec, baseField = url, "spec.osImageURL of "+source
		case baseSpec != url:
			// The build proceeds: the MachineOSConfig's base is what the
			// admin asked for. But OpenShift would build on the osImageURL,
			// so say whose is not used.
			s.overrides = fmt.Sprintf("spec.baseImagePullSpec %q overrides spec.osImageURL %q of %s: the image is built FROM the MachineOSConfig's base image, where OpenShift would build on the osImageURL",
				baseSpec, url, source)
		}
	}
	if baseSpec == "" {
		s.problem = &problem{v1alpha1.ReasonNoBaseImage,
			"no base image: set spec.baseImagePullSpec or the osImageURL of a MachineConfig of pool " + pool.Name}
		return nil, nil
	}
	base := r.pinBase(ctx, s, baseSpec, baseField, baseKC)
	if base == "" {
		return nil, nil
	}

	in, err := buildinputs.Compute(buildinputs.Sources{
		MOSC:         mosc,
		Pool:         pool.Name,
		Rendered:     rendered,
		Base:         base,
		Arch:         r.Config.Arch,
		BuilderImage: r.Config.BuilderImage,
	})
	if err != nil {
		s.problem = &problem{v1alpha1.ReasonInvalidInput, err.Error()}
		return nil, nil
	}
	return in, nil
}

// osImageURLSource names the MachineConfig whose osImageURL the rendered
// config carries (buildinputs.OSImageURLSource) among the sources the
// rendered config lists. A source deleted or changed
// since the render, or a rendered config without its sources' list, is
// named as the rendered config.
func (r *Reconciler) osImageURLSource(ctx context.Context, rendered *v1alpha1.MachineConfig) (string, error) {
	fallback := "rendered MachineConfig " + rendered.Name
	var sources []v1alpha1.MachineConfig
	for name := range strings.SplitSeq(rendered.Annotations[v1alpha1.SourceMachineConfigsAnnotation], ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		mc := &v1alpha1.MachineConfig{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			if apierrors.IsNotFound(err) {
				return fallback, nil
			}
			return "", err
		}
		sources = append(sources, *mc)
	}
	return buildinputs.OSImageURLSource(rendered, sources), nil
}

// keychain reads a dockerconfigjson Secret named by a MachineOSConfig
// field. A nil reference is anonymous access; a missing or malformed
// Secret is a problem naming the field. Secret contents never leave this
// function except as credentials for registry calls.
func (r *Reconciler) keychain(ctx context.Context, s *scope, fieldName string, ref *v1alpha1.SecretReference) (authn.Keychain, error) {
	if ref == nil {
		return registry.Keychain(nil)
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Config.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			s.problem = &problem{v1alpha1.ReasonMissingSecret, fmt.Sprintf("%s.name: Secret %s/%s not found", fieldName, r.Config.Namespace, ref.Name)}
			return nil, nil
		}
		return nil, err
	}
	kc, err := registry.Keychain(secret)
	if err != nil {
		s.problem = &problem{v1alpha1.ReasonInvalidSecret, fmt.Sprintf("%s.name: %v", fieldName, err)}
		return nil, nil
	}
	return kc, nil
}

// claimPool makes mosc the one MachineOSConfig of the pool, unless
// another one holds it (layering.Holder, the rule the rollout reads too);
// it returns that one's name. The claim is an annotation on the pool
// written with an optimistic lock, so two MachineOSConfigs racing for a
// pool cannot both win.
func (r *Reconciler) claimPool(ctx context.Context, mosc *v1alpha1.MachineOSConfig, pool *v1alpha1.MachineConfigPool) (string, error) {
	holder, err := layering.Holder(ctx, r.Client, pool)
	switch {
	case err != nil:
		return "", err
	case holder != nil && holder.Name != mosc.Name:
		return holder.Name, nil
	case holder != nil:
		return "", nil
	}
	before := pool.DeepCopy()
	if pool.Annotations == nil {
		pool.Annotations = map[string]string{}
	}
	pool.Annotations[v1alpha1.LayeredByAnnotation] = mosc.Name
	if err := r.Client.Patch(ctx, pool, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return "", fmt.Errorf("claim pool %s: %w", pool.Name, err)
	}
	log.FromContext(ctx).Info("Claimed the pool", "pool", pool.Name)
	return "", nil
}

// pinBase returns the digest the builds use for the base image named by
// spec, recorded in the MachineOSConfig's status.baseImage. The tag is
// resolved again only when the pin is older than the resolve interval,
// when the spec names another image, or when the resolve-base annotation
// asks: any other event builds on the pinned digest, so a moved tag starts
// a build on the controller's schedule, never by accident. A registry that
// cannot be reached keeps the pinned digest (with an Event); without one it
// is a problem naming the field. It returns "" when there is no base.
func (r *Reconciler) pinBase(ctx context.Context, s *scope, spec, fieldName string, kc authn.Keychain) string {
	mosc := s.mosc
	pinned := mosc.Status.BaseImage
	if pinned != nil && pinned.PullSpec != spec {
		pinned = nil
	}
	_, asked := mosc.Annotations[v1alpha1.ResolveBaseAnnotation]
	if asked {
		s.removeAnnotations = append(s.removeAnnotations, v1alpha1.ResolveBaseAnnotation)
	}
	interval := r.Config.BaseResolveInterval.Duration
	if pinned != nil && !asked {
		if age := time.Since(pinned.ResolvedTime.Time); age < interval {
			s.requeue(interval - age)
			return pinned.DigestedPullSpec
		}
	}
	base, err := r.Registry.Resolve(ctx, spec, kc)
	if err != nil {
		if pinned != nil {
			r.Recorder.Eventf(mosc, nil, corev1.EventTypeWarning, "BaseImageUnresolved", "Resolve",
				"%s: %v; building on %s until it resolves", fieldName, err, pinned.DigestedPullSpec)
			s.requeue(r.Config.MaxRetryDelay.Duration)
			return pinned.DigestedPullSpec
		}
		s.problem = &problem{v1alpha1.ReasonBaseUnreachable, fmt.Sprintf("%s: %v", fieldName, err)}
		return ""
	}
	if !r.verifyBase(ctx, s, spec, base, fieldName, kc) {
		if pinned != nil && s.problem == nil {
			s.requeue(interval)
			return pinned.DigestedPullSpec
		}
		return ""
	}
	if pinned != nil && pinned.DigestedPullSpec != base {
		log.FromContext(ctx).Info("Base image updated", "pullSpec", spec, "from", pinned.DigestedPullSpec, "to", base)
		r.Recorder.Eventf(mosc, nil, corev1.EventTypeNormal, "BaseImageUpdated", "Resolve",
			"Base image %s updated from %s to %s", spec, pinned.DigestedPullSpec, base)
	}
	log.FromContext(ctx).V(1).Info("Resolved the base image", "pullSpec", spec, "digest", base)
	mosc.Status.BaseImage = &v1alpha1.ResolvedImage{PullSpec: spec, DigestedPullSpec: base, ResolvedTime: metav1.Now()}
	s.requeue(interval)
	return base
}
