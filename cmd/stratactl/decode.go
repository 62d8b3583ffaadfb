package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// OpenShift's group and role label: render reads OpenShift's MachineConfigs
// and MachineConfigPools as they are, so that their owners can try them
// before converting them.
var openShiftGroupVersion = schema.GroupVersion{Group: "machineconfiguration.openshift.io", Version: "v1"}

const openShiftRoleLabel = "machineconfiguration.openshift.io/role"

// object is one decoded document, with where it came from for messages.
type object struct {
	file string
	doc  int
	// src is the document's text and first line, for lines in messages.
	src document
	// item is the object's place in a List document, from 1; 0 outside one.
	item int
	mc   *v1alpha1.MachineConfig
	mcp  *v1alpha1.MachineConfigPool
	mosc *v1alpha1.MachineOSConfig
	// openShiftRole: the input wrote OpenShift's role label (on a
	// MachineConfig, or in a pool's selector), read as Strata's; messages
	// name it as written.
	openShiftRole bool
}

func (o object) where() string {
	switch {
	case o.mc != nil:
		return fmt.Sprintf("%s: MachineConfig %s", o.file, o.mc.Name)
	case o.mcp != nil:
		return fmt.Sprintf("%s: MachineConfigPool %s", o.file, o.mcp.Name)
	case o.mosc != nil:
		return fmt.Sprintf("%s: MachineOSConfig %s", o.file, o.mosc.Name)
	}
	return fmt.Sprintf("%s: %s", o.file, o.position())
}

func (o object) position() string {
	if o.item > 0 {
		return fmt.Sprintf("document %d, item %d", o.doc, o.item)
	}
	return fmt.Sprintf("document %d", o.doc)
}

// readObjects decodes every document of a file. Unknown kinds and fields
// are errors, so that a typo is not silently ignored.
func readObjects(file string) ([]object, error) {
	var r io.Reader
	if file == "-" {
		r = os.Stdin
		file = "<stdin>"
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	docs, err := splitDocuments(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var objs []object
	var problems []string
	n := 0
	for _, d := range docs {
		raw := d.raw
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		n++
		obj := object{file: file, doc: n, src: d}
		// As kubectl does: YAML to JSON without knowing the target type, so
		// that a number where a string belongs is refused here as by the
		// apiserver; duplicate keys are refused too.
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", obj.where(), err))
			continue
		}
		got, probs := decodeObject(obj, js)
		objs = append(objs, got...)
		problems = append(problems, probs...)
	}
	if len(problems) > 0 {
		return objs, errors.New(strings.Join(problems, "\n  "))
	}
	return objs, nil
}

// decodeObject decodes one JSON object, or the items of a List, into obj's
// place.
func decodeObject(obj object, js []byte) ([]object, []string) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", obj.where(), err)}
	}
	what := fmt.Sprintf("%s: %s %s", obj.file, head.Kind, head.Metadata.Name)
	gv, err := schema.ParseGroupVersion(head.APIVersion)
	if err != nil {
		gv = schema.GroupVersion{}
	}
	// `kubectl get -o yaml` prints several objects as a List.
	if obj.item == 0 && gv == (schema.GroupVersion{Version: "v1"}) && head.Kind == "List" {
		var objs []object
		var problems []string
		for i, item := range head.Items {
			o := obj
			o.item = i + 1
			got, probs := decodeObject(o, item)
			objs = append(objs, got...)
			problems = append(problems, probs...)
		}
		return objs, problems
	}
	if gv != v1alpha1.GroupVersion && gv != openShiftGroupVersion {
		return nil, []string{fmt.Sprintf("%s (%s): apiVersion: %q is not %s or %s", what, obj.position(), head.APIVersion, v1alpha1.GroupVersion, openShiftGroupVersion)}
	}
	if head.Metadata.Name == "" {
		return nil, []string{fmt.Sprintf("%s (%s): metadata.name: Required value", what, obj.position())}
	}
	var problems []string
	switch {
	case head.Kind == "MachineConfig":
		obj.mc = &v1alpha1.MachineConfig{}
		problems = decodeStrict(js, obj.mc, "")
		if gv == openShiftGroupVersion {
			obj.openShiftRole = fromOpenShiftLabels(obj.mc)
		}
	case head.Kind == "MachineConfigPool" && gv == v1alpha1.GroupVersion:
		obj.mcp = &v1alpha1.MachineConfigPool{}
		problems = decodeStrict(js, obj.mcp, "")
	case head.Kind == "MachineConfigPool":
		obj.mcp, obj.openShiftRole, problems = decodeOpenShiftPool(js)
	case head.Kind == "MachineOSConfig" && gv == v1alpha1.GroupVersion:
		obj.mosc = &v1alpha1.MachineOSConfig{}
		problems = decodeStrict(js, obj.mosc, "")
	default:
		kinds := "MachineConfig, MachineConfigPool or MachineOSConfig"
		if gv == openShiftGroupVersion {
			kinds = "MachineConfig or MachineConfigPool, the OpenShift kinds render reads"
		}
		return nil, []string{fmt.Sprintf("%s (%s): kind: %q is not %s", what, obj.position(), head.Kind, kinds)}
	}
	for i, p := range problems {
		problems[i] = what + ": " + p
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return []object{obj}, nil
}

// decodeStrict decodes JSON into target as the apiserver's strict field
// validation does: field names are case-sensitive and an unknown field is
// an error. Each problem starts with the field's path, under prefix.
func decodeStrict(js []byte, target any, prefix string) []string {
	strictErrs, err := sigsjson.UnmarshalStrict(js, target)
	if err != nil {
		return []string{typeError(err, prefix)}
	}
	problems := make([]string, 0, len(strictErrs))
	for _, e := range strictErrs {
		var fe sigsjson.FieldError
		if errors.As(e, &fe) {
			what := "unknown field"
			if strings.HasPrefix(e.Error(), "duplicate field") {
				what = "duplicate field"
			}
			problems = append(problems, fmt.Sprintf("%s: %s", joinPath(prefix, fe.FieldPath()), what))
			continue
		}
		problems = append(problems, e.Error())
	}
	return problems
}

// typeErrorPattern takes apart encoding/json's message for a value of the
// wrong type, whose field path follows the Go struct's name.
var typeErrorPattern = regexp.MustCompile(`^json: cannot unmarshal (.+) into Go struct field [^.]*\.(\S+) of type (.+)$`)

func typeError(err error, prefix string) string {
	m := typeErrorPattern.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	return fmt.Sprintf("%s: Invalid value: %s: must be of type %s", joinPath(prefix, m[2]), m[1], m[3])
}

func joinPath(prefix, path string) string {
	if prefix == "" {
		return path
	}
	return prefix + "." + path
}

// fromOpenShiftLabels makes OpenShift's role label Strata's, so that pools
// select an OpenShift MachineConfig as OpenShift's would; it reports
// whether it did.
func fromOpenShiftLabels(mc *v1alpha1.MachineConfig) bool {
	role, ok := mc.Labels[openShiftRoleLabel]
	if _, set := mc.Labels[v1alpha1.RoleLabel]; !ok || set {
		return false
	}
	delete(mc.Labels, openShiftRoleLabel)
	mc.Labels[v1alpha1.RoleLabel] = role
	return true
}

// decodeOpenShiftPool reads what rendering needs of an OpenShift
// MachineConfigPool: its name and machineConfigSelector, with OpenShift's
// role label read as Strata's. The rest of its spec (node selection,
// rollout settings) and its status have no part in rendering and are
// ignored, so that a pool as `oc get mcp -o yaml` prints it is accepted.
// converted says whether the selector used OpenShift's role label.
func decodeOpenShiftPool(js []byte) (pool *v1alpha1.MachineConfigPool, converted bool, problems []string) {
	var in struct {
		Metadata metav1.ObjectMeta          `json:"metadata"`
		Spec     map[string]json.RawMessage `json:"spec"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &in); err != nil {
		return nil, false, []string{typeError(err, "")}
	}
	pool = &v1alpha1.MachineConfigPool{ObjectMeta: in.Metadata}
	raw, ok := in.Spec["machineConfigSelector"]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return pool, false, nil
	}
	sel := &metav1.LabelSelector{}
	if problems := decodeStrict(raw, sel, "spec.machineConfigSelector"); len(problems) > 0 {
		return nil, false, problems
	}
	if v, ok := sel.MatchLabels[openShiftRoleLabel]; ok {
		if _, set := sel.MatchLabels[v1alpha1.RoleLabel]; !set {
			delete(sel.MatchLabels, openShiftRoleLabel)
			sel.MatchLabels[v1alpha1.RoleLabel] = v
			converted = true
		}
	}
	for i := range sel.MatchExpressions {
		if sel.MatchExpressions[i].Key == openShiftRoleLabel {
			sel.MatchExpressions[i].Key = v1alpha1.RoleLabel
			converted = true
		}
	}
	pool.Spec.MachineConfigSelector = sel
	return pool, converted, nil
}

func isOnlyComments(raw []byte) bool {
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}
