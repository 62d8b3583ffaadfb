package nodeconfig

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// TestKernelArgumentEntryWithSeveralArguments is
// mco-real/repro/d5-karg-with-spaces (intel's 100-intel-iommu-on): one
// spec.kernelArguments entry holding three arguments becomes three
// arguments of the kargs.d file, as the Machine Config Daemon splits it.
func TestKernelArgumentEntryWithSeveralArguments(t *testing.T) {
	p, errs := BuildPlan(&v1alpha1.MachineConfigSpec{KernelArguments: []string{
		"intel_iommu=on,sm_on modules_load=vfio-pci vfio-pci.ids=8086:4941,8086:4943",
	}}, field.NewPath("spec"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := `kargs = ["intel_iommu=on,sm_on", "modules_load=vfio-pci", "vfio-pci.ids=8086:4941,8086:4943"]`
	if got := string(p.Entries[kargsPath].Data); !strings.Contains(got, want+"\n") {
		t.Errorf("kargs.d file:\n%s\nwant the line %s", got, want)
	}
}

func TestSplitKernelArguments(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"quiet", []string{"quiet"}},
		{"  a   b ", []string{"a", "b"}},
		// Quotes keep spaces in one argument and stay in it, as the
		// kernel's next_arg() and the Machine Config Daemon read them.
		{`dyndbg="file drivers/usb/* +p" quiet`, []string{`dyndbg="file drivers/usb/* +p"`, "quiet"}},
		{`"acpi_osi=!Windows 2012" x`, []string{`"acpi_osi=!Windows 2012"`, "x"}},
		{`a "b c`, []string{"a", `"b c`}},
		// Repeats mean something (one hugepages= per hugepagesz=): kept.
		{"hugepagesz=1G hugepages=4 hugepagesz=2M hugepages=4", []string{"hugepagesz=1G", "hugepages=4", "hugepagesz=2M", "hugepages=4"}},
		// Only the space separates here; other whitespace is a control
		// character and checkArg refuses it.
		{"a\tb", []string{"a\tb"}},
	}
	for _, tt := range tests {
		if got := splitKernelArguments(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("splitKernelArguments(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestKernelArgumentsRefused(t *testing.T) {
	tests := []struct {
		name string
		spec *v1alpha1.MachineConfigSpec
		want []string
	}{
		{name: "spec entries", spec: &v1alpha1.MachineConfigSpec{KernelArguments: []string{
			"ok two", `a "b`, "tab\there", "nl\n", "", "   ", "nb\u00a0sp", `q="in quotes" ok`,
		}}, want: []string{
			`spec.kernelArguments[1]: Invalid value: "\"b": must close its double quote`,
			`spec.kernelArguments[2]: Invalid value: "tab\there": must not contain control characters`,
			`spec.kernelArguments[3]: Invalid value: "nl\n": must not contain control characters`,
			`spec.kernelArguments[4]: Invalid value: "": must hold at least one argument`,
			`spec.kernelArguments[5]: Invalid value: "   ": must hold at least one argument`,
			`spec.kernelArguments[6]: Invalid value: "nb\u00a0sp": must not contain whitespace other than spaces outside double quotes`,
		}},
		// Ignition's shouldExist entries are one argument each, as
		// Ignition passes them: no splitting.
		{name: "ignition entries", spec: spec(ign35(`"kernelArguments":{"shouldExist":["ok","x y","dyndbg=\"a b\"","z\""]}`)),
			want: []string{
				`spec.config.kernelArguments.shouldExist[1]: Invalid value: "x y": must be one argument: spaces outside double quotes separate arguments`,
				`spec.config.kernelArguments.shouldExist[3]: Invalid value: "z\"": must close its double quote`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateMachineConfigSpec(tt.spec, field.NewPath("spec"))
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.want), errs)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to start with %q", i, errs[i].Error(), w)
				}
			}
		})
	}

	p, errs := BuildPlan(&v1alpha1.MachineConfigSpec{
		KernelArguments: []string{`a quiet dyndbg="x y"`},
		Config:          spec(ign35(`"kernelArguments":{"shouldExist":["quiet","dyndbg=\"x y\"","b"]}`)).Config,
	}, field.NewPath("spec"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if want := []string{"a", "quiet", `dyndbg="x y"`, "b"}; !slices.Equal(p.KernelArguments, want) {
		t.Errorf("kargs = %q, want %q: shouldExist adds only what the split entries do not have", p.KernelArguments, want)
	}
}

// FuzzSplitKernelArguments checks the splitter against its contract: every
// argument is non-empty and has no space outside quotes, splitting the
// arguments joined by one space gives them back, and without quotes it is
// a split on spaces.
func FuzzSplitKernelArguments(f *testing.F) {
	for _, s := range []string{"", "a b", ` "x y" z`, `a "b`, "intel_iommu=on,sm_on modules_load=vfio-pci", "\"\"\" \"", "a\tb c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := splitKernelArguments(s)
		for _, a := range args {
			if a == "" {
				t.Fatalf("%q: empty argument in %q", s, args)
			}
			in := false
			for _, r := range a {
				switch {
				case r == '"':
					in = !in
				case r == ' ' && !in:
					t.Fatalf("%q: argument %q has a space outside quotes", s, a)
				}
			}
		}
		if again := splitKernelArguments(strings.Join(args, " ")); !slices.Equal(again, args) {
			t.Fatalf("%q: split %q, joined and split again %q", s, args, again)
		}
		if !strings.Contains(s, `"`) {
			if want := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' }); !slices.Equal(args, want) {
				t.Fatalf("%q: split %q, want %q", s, args, want)
			}
		}
	})
}

// TestKernelArgumentsThatLeaveANormalBoot: issue 20 point 7. Arguments
// that boot a node into a shell, another init or another target leave no
// kubelet and no daemon to report or roll back; they are refused with the
// field, quoted or not. Those that only
// act on a failed boot, and the multi-user runlevels, are accepted.
func TestKernelArgumentsThatLeaveANormalBoot(t *testing.T) {
	refused := []string{
		"init=/bin/sh", `"init=/bin/bash"`, "rdinit=/bin/sh", "rd.break", "rd.break=pre-mount",
		"systemd.unit=rescue.target", "rd.systemd.unit=emergency.target",
		"emergency", "-b", "rescue", "single", "s", "S", "-s", "1",
		"ostree=/ostree/boot.1/x/0", "--",
	}
	accepted := []string{"rd.shell", "rd.emergency=reboot", "systemd.crash_shell=0", "3", "5", "quiet", "initcall_debug",
		"systemd.unit_x=1", "single_user=0", "rd.breakfast", "ostree.prepare-root.composefs=0"}
	entries := append(append([]string{}, refused...), strings.Join(accepted, " "))
	errs := ValidateMachineConfigSpec(&v1alpha1.MachineConfigSpec{KernelArguments: entries}, field.NewPath("spec"))
	if len(errs) != len(refused) {
		t.Fatalf("got %d errors, want %d: %v", len(errs), len(refused), errs)
	}
	for i, a := range refused {
		want := fmt.Sprintf("spec.kernelArguments[%d]: Invalid value: %q: must not take the node out of a normal boot", i, a)
		if !strings.HasPrefix(errs[i].Error(), want) {
			t.Errorf("error %d = %q, want it to start with %q", i, errs[i].Error(), want)
		}
	}
	// Ignition's shouldExist is held to the same rule.
	errs = ValidateMachineConfigSpec(spec(ign35(`"kernelArguments":{"shouldExist":["quiet","rd.break"]}`)), field.NewPath("spec"))
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), `spec.config.kernelArguments.shouldExist[1]: Invalid value: "rd.break": must not take the node out of a normal boot`) {
		t.Errorf("shouldExist: %v", errs)
	}
}

// TestKernelCommandLineIsCapped: issue 20 point 7. A megabyte of kernel
// arguments was accepted; the kernel cuts its command line at 2048 bytes
// and ostree= goes with the rest. The arguments of one config may take
// MaxKernelArgumentsBytes, and the refusal names the entry that passes
// it, in spec.kernelArguments or in Ignition's shouldExist.
func TestKernelCommandLineIsCapped(t *testing.T) {
	arg := func(n int) string { return "x=" + strings.Repeat("a", n-2) }
	// 4 arguments of 255 bytes take 4*256 = 1024 bytes with their spaces:
	// exactly the limit.
	fits := []string{arg(255), arg(255), arg(255), arg(255)}
	if errs := ValidateMachineConfigSpec(&v1alpha1.MachineConfigSpec{KernelArguments: fits}, field.NewPath("spec")); len(errs) > 0 {
		t.Fatalf("%d bytes refused: %v", CommandLineBytes(fits), errs)
	}
	tests := []struct {
		name  string
		spec  *v1alpha1.MachineConfigSpec
		field string
	}{
		{name: "one byte more", spec: &v1alpha1.MachineConfigSpec{KernelArguments: []string{arg(255), arg(255) + " " + arg(255), arg(256)}},
			field: "spec.kernelArguments[2]"},
		{name: "a megabyte", spec: &v1alpha1.MachineConfigSpec{KernelArguments: slices.Repeat([]string{arg(4096)}, 256)},
			field: "spec.kernelArguments[0]"},
		// arg(1000) is there already; b fits; the third passes the limit.
		{name: "shouldExist passes it", spec: &v1alpha1.MachineConfigSpec{KernelArguments: []string{arg(1000)},
			Config: spec(ign35(`"kernelArguments":{"shouldExist":["` + arg(1000) + `","b","` + arg(30) + `"]}`)).Config},
			field: "spec.config.kernelArguments.shouldExist[2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateMachineConfigSpec(tt.spec, field.NewPath("spec"))
			if len(errs) != 1 || errs[0].Type != field.ErrorTypeTooLong || errs[0].Field != tt.field {
				t.Fatalf("errors %v, want one Too long at %s", errs, tt.field)
			}
			if msg := errs[0].Error(); !strings.Contains(msg, fmt.Sprintf("more than the %d bytes", MaxKernelArgumentsBytes)) || !strings.Contains(msg, "2048") {
				t.Errorf("message %q does not give the limit and why", msg)
			}
		})
	}
}
