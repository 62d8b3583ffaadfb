package direct

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/strata-dev/strata/internal/registry"
)

// Stage names the part of a direct build that failed.
type Stage string

const (
	// StageBase: the base image's manifest, config or (to complete the
	// layer) layers could not be read, or the base is not usable (not by
	// digest, no image for the platform).
	StageBase Stage = "Base"
	// StageLayer: the configuration layer is not a valid tar, or cannot
	// be unpacked into the base (an entry above the root, or a file or a
	// symlink to nothing on an entry's path).
	StageLayer Stage = "Layer"
	// StagePush: the target could not be written, including the copy of
	// the base's layers into it.
	StagePush Stage = "Push"
)

// StageError is a failed Build: the stage and the cause. Refused
// credentials are recognisable with registry.IsUnauthorized, which sees
// through it to the registry's answer.
type StageError struct {
	Stage Stage
	Err   error
}

func (e *StageError) Error() string { return fmt.Sprintf("%s: %v", e.Stage, e.Err) }

func (e *StageError) Unwrap() error { return e.Err }

func stageErr(s Stage, format string, args ...any) *StageError {
	return &StageError{Stage: s, Err: fmt.Errorf(format, args...)}
}

// explained shows a registry error as registry.Explain words it (short,
// and plain about refused credentials) while keeping the original in the
// chain, so that registry.IsUnauthorized still recognises it. A push to
// another registry also reads the base's: when the answer came from a
// registry other than the one the message names, it says whose.
type explained struct {
	err   error
	named string
}

func (e explained) Error() string {
	msg := registry.Explain(e.err).Error()
	var terr *transport.Error
	if errors.As(e.err, &terr) && terr.Request != nil && terr.Request.URL != nil &&
		terr.Request.URL.Host != e.named && !strings.Contains(msg, terr.Request.URL.Host) {
		msg = terr.Request.URL.Host + ": " + msg
	}
	return msg
}

func (e explained) Unwrap() error { return e.err }

// explain wraps err from a call about a reference on registry named.
func explain(err error, named string) error {
	if err == nil {
		return nil
	}
	return explained{err: err, named: named}
}
