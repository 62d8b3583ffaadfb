package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// machineConfiguration reads a MachineConfiguration written as a user
// writes it, apiVersion included.
func machineConfiguration(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// An OpenShift node disruption policy, as OpenShift's own API tests write
// it, is accepted with only its apiVersion changed; so is SoftReboot.
func TestOpenShiftNodeDisruptionPolicyIsAccepted(t *testing.T) {
	const policy = `
apiVersion: machineconfiguration.strata.dev/v1alpha1
kind: MachineConfiguration
metadata:
  name: cluster
spec:
  nodeDisruptionPolicy:
    files:
    - path: /etc/my-file
      actions:
      - type: DaemonReload
      - type: Reload
        reload:
          serviceName: my.service
    - path: /etc/my-other-file
      actions:
      - type: Drain
      - type: Restart
        restart:
          serviceName: a.b.c.d.e.snapshot
    - path: /etc/chrony.conf
      actions:
      - type: SoftReboot
    units:
    - name: my.service
      actions:
      - type: Restart
        restart:
          serviceName: a:b_c-d\.e.swap
    sshkey:
      actions:
      - type: None
`
	if err := env.Client.Create(context.Background(), machineConfiguration(t, policy), client.DryRunAll); err != nil {
		t.Fatalf("an OpenShift policy is refused: %v", err)
	}
}

func TestInvalidNodeDisruptionPoliciesAreRejected(t *testing.T) {
	cases := []struct {
		name string
		// name of the object, and its spec.nodeDisruptionPolicy in YAML.
		object, policy string
		// want are substrings of the apiserver's message: the field and
		// what is wrong.
		want []string
	}{
		{
			name: "another name", object: "worker", policy: `{}`,
			want: []string{"must be named cluster"},
		},
		{
			name: "relative path",
			policy: `
files:
- path: etc/chrony.conf
  actions: [{type: None}]`,
			want: []string{"spec.nodeDisruptionPolicy.files[0].path", "absolute path"},
		},
		{
			name: "duplicate path",
			policy: `
files:
- path: /etc/my-file
  actions: [{type: None}]
- path: /etc/my-file
  actions: [{type: Drain}]`,
			want: []string{"spec.nodeDisruptionPolicy.files[1]", "Duplicate value"},
		},
		{
			name: "reload without its service",
			policy: `
files:
- path: /etc/my-file
  actions: [{type: DaemonReload}, {type: Reload}]`,
			want: []string{"spec.nodeDisruptionPolicy.files[0].actions[1]", "reload is required when type is Reload, and forbidden otherwise"},
		},
		{
			name: "restart block on a reload",
			policy: `
units:
- name: my.service
  actions: [{type: Reload, reload: {serviceName: my.service}, restart: {serviceName: my.service}}]`,
			want: []string{"spec.nodeDisruptionPolicy.units[0].actions[0]", "restart is required when type is Restart, and forbidden otherwise"},
		},
		{
			name: "reboot with another action",
			policy: `
files:
- path: /etc/my-file
  actions: [{type: Reboot}, {type: DaemonReload}]`,
			want: []string{"spec.nodeDisruptionPolicy.files[0].actions", "Reboot action can only be specified standalone"},
		},
		{
			name: "soft reboot with another action",
			policy: `
units:
- name: my.service
  actions: [{type: Drain}, {type: SoftReboot}]`,
			want: []string{"spec.nodeDisruptionPolicy.units[0].actions", "SoftReboot action can only be specified standalone"},
		},
		{
			name: "none with another action",
			policy: `
sshkey:
  actions: [{type: None}, {type: Drain}]`,
			want: []string{"spec.nodeDisruptionPolicy.sshkey.actions", "None action can only be specified standalone"},
		},
		{
			name: "unknown action",
			policy: `
files:
- path: /etc/my-file
  actions: [{type: Special}]`,
			want: []string{"spec.nodeDisruptionPolicy.files[0].actions[0].type", "Unsupported value"},
		},
		{
			name: "service name without a type",
			policy: `
files:
- path: /etc/my-file
  actions: [{type: Reload, reload: {serviceName: service}}]`,
			want: []string{"spec.nodeDisruptionPolicy.files[0].actions[0].reload.serviceName", "Invalid ${SERVICETYPE} in service name"},
		},
		{
			name: "service name without a name",
			policy: `
units:
- name: .service
  actions: [{type: None}]`,
			want: []string{"spec.nodeDisruptionPolicy.units[0].name", "Invalid ${NAME} in service name"},
		},
		{
			name: "too many actions",
			policy: `
files:
- path: /etc/my-file
  actions: [{type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}, {type: Drain}]`,
			want: []string{"spec.nodeDisruptionPolicy.files[0].actions", "must have at most 10 items"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			object := tc.object
			if object == "" {
				object = "cluster"
			}
			var y strings.Builder
			y.WriteString("apiVersion: machineconfiguration.strata.dev/v1alpha1\nkind: MachineConfiguration\nmetadata:\n  name: " + object + "\nspec:\n  nodeDisruptionPolicy:\n")
			for line := range strings.Lines(strings.TrimPrefix(tc.policy, "\n")) {
				y.WriteString("    " + line)
			}
			err := env.Client.Create(context.Background(), machineConfiguration(t, y.String()), client.DryRunAll)
			if err == nil {
				t.Fatalf("accepted:\n%s", y.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not say %q", err, w)
				}
			}
		})
	}
}
