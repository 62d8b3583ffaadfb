// Command strata-bootdisk makes the boot disk of a built image and
// publishes it beside the image: the program of the boot disk Job
// (builder/diskjob). It pulls the image by digest, makes a raw disk of it
// (package bootdisk: an ext4 file system holding an ostree sysroot with
// the image deployed), and attaches the disk, compressed, to the image as
// an OCI artifact (internal/diskartifact). It writes what it did, or what
// failed, as one JSON object (diskjob.Report) to its termination log.
//
// It reads registry credentials only from the authfile it is given (the
// push secret, mounted by the Job) and never prints them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/builder/diskjob"
	"github.com/strata-dev/strata/builder/job"
	"github.com/strata-dev/strata/internal/diskartifact"
	"github.com/strata-dev/strata/internal/referrers"
	"github.com/strata-dev/strata/internal/registry"
	"github.com/strata-dev/strata/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	image, workDir, authFile, terminationLog string
	sizeMiB                                  int
	insecure                                 stringList
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// run is the program; it returns the exit code: 0, job.ExitCodeFailed
// (worth retrying), or job.ExitCodePermanent (it would fail again).
func run(ctx context.Context, args []string, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("strata-bootdisk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.image, "image", "", "the image, repository@sha256:…")
	fs.IntVar(&o.sizeMiB, "size-mib", v1alpha1.DefaultBootDiskSizeMiB, "size of the raw disk in MiB")
	fs.StringVar(&o.workDir, "work-dir", os.TempDir(), "directory for the sysroot, the disk and its compressed copy")
	fs.StringVar(&o.authFile, "auth-file", "", "registry authfile (containers-auth.json) that reads the image and writes the artifact")
	fs.StringVar(&o.terminationLog, "termination-log", "", "where to write the report (JSON); none when empty")
	fs.Var(&o.insecure, "insecure-registry", "a registry host[:port] reached over plain HTTP (repeatable)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: strata-bootdisk --image=REPOSITORY@sha256:... [flags]\n\n"+
			"Makes the boot disk of an image and attaches it to the image as an OCI artifact (%s).\n\nFlags:\n", diskartifact.ArtifactType)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return job.ExitCodePermanent
	}
	if *showVersion {
		fmt.Fprintln(stderr, "strata-bootdisk", version.Version)
		return 0
	}
	if o.image == "" {
		fmt.Fprintln(stderr, "strata-bootdisk: --image is required")
		return job.ExitCodePermanent
	}
	l := &logger{w: stderr}
	report, code := makeAndPublish(ctx, o, l)
	if code != 0 {
		report.LogTail = l.tail(30)
		l.printf("Failed: %s: %s", report.Step, report.Message)
	}
	if o.terminationLog != "" {
		if err := writeReport(o.terminationLog, report); err != nil {
			l.printf("Cannot write the report: %v", err)
		}
	}
	return code
}

func makeAndPublish(ctx context.Context, o options, l *logger) (diskjob.Report, int) {
	fail := func(step v1alpha1.BuildStep, code int, format string, a ...any) (diskjob.Report, int) {
		return diskjob.Report{Step: step, Message: fmt.Sprintf(format, a...)}, code
	}
	reg := registry.Client{Insecure: o.insecure}
	ref, err := reg.ParseReference(o.image)
	if err != nil {
		return fail(v1alpha1.BuildStepPrepare, job.ExitCodePermanent, "image %q: %v", o.image, err)
	}
	dref, ok := ref.(name.Digest)
	if !ok {
		return fail(v1alpha1.BuildStepPrepare, job.ExitCodePermanent, "image %s is not by digest", o.image)
	}
	if o.sizeMiB <= 0 {
		return fail(v1alpha1.BuildStepPrepare, job.ExitCodePermanent, "size %d MiB is not a size", o.sizeMiB)
	}
	kc := authn.NewMultiKeychain()
	if o.authFile != "" {
		if kc, err = registry.KeychainFromFile(o.authFile); err != nil {
			// The error names the file and what is wrong with it, never
			// its content.
			return fail(v1alpha1.BuildStepAuth, job.ExitCodePermanent, "the push secret's authfile: %v", err)
		}
	}
	start := time.Now()
	img, err := remote.Image(dref, registry.Options(ctx, kc)...)
	if err != nil {
		return registryFailure(err, "read image %s", o.image)
	}
	work, err := os.MkdirTemp(o.workDir, "disk-")
	if err != nil {
		return fail(v1alpha1.BuildStepDisk, job.ExitCodeFailed, "work directory: %v", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	out := filepath.Join(work, diskartifact.FileName)
	l.printf("Making a %d MiB disk of %s", o.sizeMiB, o.image)
	if err := makeDisk(ctx, out, diskOptions{Image: img, Reference: dref.String(), Size: int64(o.sizeMiB) << 20, WorkDir: work}); err != nil {
		l.printf("%v", err)
		if registry.IsUnauthorized(err) {
			return fail(v1alpha1.BuildStepAuth, job.ExitCodePermanent, "read image %s: %v", o.image, registry.Explain(err))
		}
		if full(err) {
			return fail(v1alpha1.BuildStepDisk, job.ExitCodePermanent,
				"the image %s does not fit in a disk of %d MiB: raise the MachineOSConfig's spec.bootDisk.sizeMiB", o.image, o.sizeMiB)
		}
		return fail(v1alpha1.BuildStepDisk, job.ExitCodeFailed, "make the disk of %s: %v", o.image, err)
	}
	made := time.Since(start)
	l.printf("Made the disk in %s; compressing and publishing it", made.Round(time.Second))
	d, err := diskartifact.Publish(ctx, referrers.Client{Registry: reg}, dref.String(), kc, out)
	if err != nil {
		return registryFailure(err, "publish the disk of %s", o.image)
	}
	l.printf("Published %s (%d bytes, %d compressed) in %s", d.Artifact, d.Size, d.CompressedSize, (time.Since(start) - made).Round(time.Second))
	return diskjob.Report{Artifact: d.Artifact, Size: d.Size, RawDigest: d.RawDigest, CompressedSize: d.CompressedSize}, 0
}

// registryFailure reports a registry's error: refused credentials fail
// for good, anything else may pass.
func registryFailure(err error, format string, a ...any) (diskjob.Report, int) {
	msg := fmt.Sprintf(format, a...) + ": " + registry.Explain(err).Error()
	if registry.IsUnauthorized(err) {
		return diskjob.Report{Step: v1alpha1.BuildStepAuth, Message: msg}, job.ExitCodePermanent
	}
	return diskjob.Report{Step: v1alpha1.BuildStepPush, Message: msg}, job.ExitCodeFailed
}

// full says whether err is a file system that ran out of room: the
// disk's (mkfs.ext4's words) or the work directory's.
func full(err error) bool {
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"No space left on device", "Could not allocate block", "Could not allocate inode", "is too small", "too small for"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// writeReport writes r as JSON, under the kubelet's 4096-byte limit of a
// termination message: the message and log tail are cut to fit.
func writeReport(path string, r diskjob.Report) error {
	if len(r.Message) > 1500 {
		r.Message = r.Message[:1500] + "…"
	}
	if len(r.LogTail) > 2000 {
		r.LogTail = "…" + r.LogTail[len(r.LogTail)-2000:]
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// logger prints progress lines with their time and keeps the last ones
// for the report.
type logger struct {
	mu    sync.Mutex
	w     io.Writer
	lines []string
}

func (l *logger) printf(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s %s\n", time.Now().UTC().Format(time.TimeOnly), line)
	l.lines = append(l.lines, strings.Split(strings.TrimRight(line, "\n"), "\n")...)
	if len(l.lines) > 200 {
		l.lines = l.lines[len(l.lines)-200:]
	}
}

func (l *logger) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-n):], "\n")
}
