package signing_test

import (
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
)

func emptyOCI() v1.Image { return empty.Image }
