package testenv

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize builds the kustomization in dir (relative to the repository
// root, e.g. "config/policy"), as kubectl kustomize does.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, filepath.FromSlash(dir))
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), path)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("kustomize %s: %s: %w", dir, r.CurId(), err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	return objs, nil
}

// Install creates what the kustomizations in dirs hold (Kustomize), as an
// installation from the repository's config/ would; objects that exist
// already are left as they are. The namespaces the objects live in are
// created first when missing: config/default brings each one, but a test
// installs parts of it (config/rbac holds Roles in several namespaces).
func (e *Env) Install(ctx context.Context, dirs ...string) error {
	for _, dir := range dirs {
		objs, err := Kustomize(dir)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if ns := obj.GetNamespace(); ns != "" {
				nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
				if err := e.Client.Create(ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("create namespace %s for %s %s from %s: %w", ns, obj.GetKind(), obj.GetName(), dir, err)
				}
			}
			if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s from %s: %w", obj.GetKind(), obj.GetName(), dir, err)
			}
		}
	}
	return nil
}
