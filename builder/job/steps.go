package job

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// StepMap maps buildah's step numbers to Containerfile lines, one
// "stage step line" triple a line (all 1-based). buildah numbers the
// steps of each stage from 1, the stage's FROM being step 1, and prints
// them as "STEP 3/5: RUN false", prefixed with "[2/2] " when there is more
// than one stage; ARG instructions before the first FROM are not steps.
func StepMap(containerfile []byte) (string, error) {
	res, err := parser.Parse(bytes.NewReader(containerfile))
	if err != nil {
		return "", fmt.Errorf("parse Containerfile: %w", err)
	}
	var b strings.Builder
	stage, step := 0, 0
	for _, n := range res.AST.Children {
		if strings.EqualFold(n.Value, "from") {
			stage++
			step = 0
		}
		if stage == 0 {
			continue
		}
		step++
		fmt.Fprintf(&b, "%d %d %d\n", stage, step, n.StartLine)
	}
	return b.String(), nil
}
