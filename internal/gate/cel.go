package gate

import (
	"context"
	"errors"
	"fmt"

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

// cel evaluates a CEL gate: "" when it passes, else why it holds.
func (e *Evaluator) cel(ctx context.Context, g *v1alpha1.CELGate) string {
	prg, err := compileCEL(g.Expression)
	if err != nil {
		return "the expression does not compile: " + err.Error()
	}
	gv, err := schema.ParseGroupVersion(g.APIVersion)
	if err != nil {
		return "apiVersion: " + err.Error()
	}
	ref := describeObject(g)
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gv.WithKind(g.Kind))
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	if err := e.Reader.Get(ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, obj); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return ref + " not found"
		case apierrors.IsForbidden(err):
			return "the controller may not get " + ref + " (grant it get on the kind: see Gates in the README): " + err.Error()
		}
		return "cannot get " + ref + ": " + err.Error()
	}
	out, _, err := prg.ContextEval(ctx, map[string]any{"object": obj.Object})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Sprintf("the expression over %s did not finish in %s", ref, e.timeout())
		}
		return fmt.Sprintf("the expression over %s fails: %v", ref, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return fmt.Sprintf("the expression over %s returned %s, not a bool", ref, out.Type().TypeName())
	}
	if !b {
		return fmt.Sprintf("%s is false for %s", g.Expression, ref)
	}
	return ""
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
