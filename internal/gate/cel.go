package gate

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/strata-dev/strata/api/v1alpha1"
)

// celCostLimit bounds one evaluation, so that an expression over a large
// list cannot keep the controller busy (the API server's per-expression
// limit for validation rules is of the same order).
const celCostLimit = 1_000_000

// celEnv is the environment expressions are compiled in: `object`, any
// JSON value, with the standard library and the strings extension.
var celEnv = func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), ext.Strings())
	if err != nil {
		panic(fmt.Sprintf("gate: CEL environment: %v", err))
	}
	return env
}()

// compileCEL compiles an expression; it must be of type bool (or dyn,
// checked when it runs).
func compileCEL(expr string) (cel.Program, error) {
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("the expression is of type %s, want bool", t)
	}
	return celEnv.Program(ast, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))
}

// cel evaluates a CEL gate: "" when it passes, else why it holds, and
// the detail for the log. What it says of a failure is the kind only:
// an evaluation error may quote the object's data, so neither the
// message nor the detail carries its text.
func (e *Evaluator) cel(ctx context.Context, g *v1alpha1.CELGate) (msg, detail string) {
	if isSecret(g) {
		return secretRefused, ""
	}
	prg, err := compileCEL(g.Expression)
	if err != nil {
		// The text quotes the expression only, which the author wrote.
		return "the expression does not compile: " + err.Error(), ""
	}
	gv, err := schema.ParseGroupVersion(g.APIVersion)
	if err != nil {
		return "apiVersion: " + err.Error(), ""
	}
	ref := describeObject(g)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gv.WithKind(g.Kind))
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	if err := e.Reader.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, obj); err != nil {
		kind := apiFailure(ctx, err)
		msg := "could not be evaluated: cannot get " + ref + ": " + kind
		if apierrors.IsForbidden(err) {
			msg += " (the gate identity may get only the kinds an admin grants it: see Gates in the README)"
		}
		// An API error names the request, not the object's content.
		return msg, err.Error()
	}
	out, _, err := prg.ContextEval(ctx, map[string]any{"object": obj.Object})
	if err != nil {
		return fmt.Sprintf("could not be evaluated over %s: %s", ref, celFailure(ctx, err)), ""
	}
	b, ok := out.Value().(bool)
	if !ok {
		return fmt.Sprintf("the expression over %s returned %s, not a bool", ref, out.Type().TypeName()), ""
	}
	if !b {
		return fmt.Sprintf("%s is false for %s", g.Expression, ref), ""
	}
	return "", ""
}

// secretRefused is why a CEL gate over a Secret holds: the gate
// identity cannot read one, and no expression may see one.
const secretRefused = "a CEL gate may not read a Secret"

// isSecret says whether g names a core Secret (kinds are matched without
// case, as a person might write them).
func isSecret(g *v1alpha1.CELGate) bool {
	gv, err := schema.ParseGroupVersion(g.APIVersion)
	return err == nil && gv.Group == "" && strings.EqualFold(g.Kind, "Secret")
}

// describeObject names the object as a person would look it up: Kind
// namespace/name (apiVersion).
func describeObject(g *v1alpha1.CELGate) string {
	name := g.Name
	if g.Namespace != "" {
		name = g.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %s (%s)", g.Kind, name, g.APIVersion)
}
