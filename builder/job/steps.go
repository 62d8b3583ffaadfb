package job

import (
	"bytes"
	"errors"
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

// BaseImage is an image a Containerfile's FROM names, with the FROM's
// line.
type BaseImage struct {
	Line  int
	Image string
}

// BaseImages returns the images the Containerfile's FROMs name, in order
// and each once: the build pod pulls them before the build, which pulls
// nothing. FROM scratch and FROM an earlier stage pull nothing; a FROM
// whose image is an ARG cannot be pulled before the build and is refused.
func BaseImages(containerfile []byte) ([]BaseImage, error) {
	res, err := parser.Parse(bytes.NewReader(containerfile))
	if err != nil {
		return nil, fmt.Errorf("parse Containerfile: %w", err)
	}
	var out []BaseImage
	stages := map[string]bool{}
	seen := map[string]bool{}
	for _, n := range res.AST.Children {
		if !strings.EqualFold(n.Value, "from") || n.Next == nil {
			continue
		}
		image := n.Next.Value
		pull := true
		switch {
		case strings.Contains(image, "$"):
			return nil, fmt.Errorf("the base image of FROM %s (Containerfile line %d) must be named without ARGs, so that it can be pulled before the build", image, n.StartLine)
		case strings.EqualFold(image, "scratch"), stages[strings.ToLower(image)], seen[image]:
			pull = false
		}
		if pull {
			seen[image] = true
			out = append(out, BaseImage{Line: n.StartLine, Image: image})
		}
		// A stage's name counts from the next FROM on.
		if as := n.Next.Next; as != nil && strings.EqualFold(as.Value, "as") && as.Next != nil {
			stages[strings.ToLower(as.Next.Value)] = true
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the Containerfile names no base image to pull")
	}
	return out, nil
}
