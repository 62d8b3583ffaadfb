package ostreeimage_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-dev/strata/ostreeimage"
	"github.com/strata-dev/strata/test/testregistry"
)

// countingOstree is an ostree that logs each run's verb to a file.
func countingOstree(t *testing.T) (argv []string, runs func() []string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "runs")
	script := filepath.Join(dir, "ostree")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$1\" >>"+log+"\nexec ostree \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{script}, func() []string {
		data, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		_ = os.Remove(log)
		return strings.Fields(string(data))
	}
}

func TestFactsSpareOstreeRuns(t *testing.T) {
	ctx := context.Background()
	reg := testregistry.Start(t, "")
	base, derived := appImages(t, map[string]string{
		"usr/lib/bootc/kargs.d/30-derived.toml": "kargs = [\"derived\"]\n",
		// Replaces the base layer's file of that name.
		"usr/lib/bootc/kargs.d/10-app.toml": "kargs = [\"app=2\"]\n",
	})
	baseImg := remoteImage(t, reg, "os:base", base)
	derivedImg := remoteImage(t, reg, "os:derived", derived)

	plain := newRepo(t)
	want, err := plain.Import(ctx, derivedImg)
	if err != nil {
		t.Fatal(err)
	}

	r := newRepo(t)
	r.FactsDir = filepath.Join(t.TempDir(), "facts")
	var runs func() []string
	r.Ostree, runs = countingOstree(t)
	b, err := r.Import(ctx, baseImg)
	if err != nil {
		t.Fatal(err)
	}
	runs()
	d, err := r.Import(ctx, derivedImg)
	if err != nil {
		t.Fatal(err)
	}
	// The base layers' flags and kargs.d are known: the new layer's
	// commit and the image's only.
	if got := runs(); !slices.Equal(got, []string{"commit", "commit"}) {
		t.Errorf("importing the derived image ran ostree %q, want commit, commit", got)
	}
	if d.Checksum != want.Checksum || !slices.Equal(d.Kargs, want.Kargs) || !slices.Equal(d.Layers, want.Layers) {
		t.Errorf("with facts: %s %q %q; without: %s %q %q", d.Checksum, d.Kargs, d.Layers, want.Checksum, want.Kargs, want.Layers)
	}
	if !slices.Contains(d.Kargs, "app=2") || slices.Contains(d.Kargs, "app=1") {
		t.Errorf("kargs %q: the derived layer's 10-app.toml must replace the base's", d.Kargs)
	}

	found, ok, err := r.Lookup(ctx, d.Digest)
	if err != nil || !ok {
		t.Fatalf("Lookup: %v, %v", ok, err)
	}
	if got := runs(); len(got) != 0 {
		t.Errorf("Lookup ran ostree %q, want no run", got)
	}
	if found.Checksum != d.Checksum || !slices.Equal(found.Kargs, d.Kargs) || found.Flattened {
		t.Errorf("Lookup: %+v, imported %+v", found, d)
	}

	// The base image's refs and the caller's go without an ostree run
	// (a local ref is a file), with the facts of their commits; ostree
	// then lists the refs left.
	ostree(t, r, "refs", "--create=sim/extra", b.Checksum)
	runs()
	if err := r.RemoveUnused(ctx, []string{d.Digest}, "sim/extra"); err != nil {
		t.Fatal(err)
	}
	if got := runs(); len(got) != 0 {
		t.Errorf("RemoveUnused ran ostree %q, want no run", got)
	}
	if left, _ := filepath.Glob(filepath.Join(r.FactsDir, b.Checksum+".*")); len(left) != 0 {
		t.Errorf("facts of the removed base image left: %q", left)
	}
	if got := strings.Fields(ostree(t, r, "refs")); len(got) != 1+len(d.Layers) {
		t.Errorf("refs kept: %q, want the derived image's and its layers'", got)
	}
	if _, err := os.Stat(filepath.Join(r.FactsDir, d.Checksum+"."+ostreeimage.MetaConfig)); err != nil {
		t.Errorf("the kept image's configuration fact: %v", err)
	}
}
