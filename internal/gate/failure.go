package gate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a gate's message says of a failure is its kind, in words of this
// package, never the error's own text: a CEL error quotes the value it
// failed on (`{}[object.data.key]` fails with the key's value), and an
// API or HTTP error may quote what the server answered. The text goes to
// the controller's log only where it cannot hold object data (Detail).

// failTimeout is the kind of a gate that ran out of time.
const failTimeout = "timed out"

// detailed is an error whose message is safe for status (a kind of
// failure) and whose detail is for the log only.
type detailed struct {
	msg, detail string
}

func (d *detailed) Error() string { return d.msg }

// safeError is an error whose message says what failed and its kind
// only; the full error goes to its detail.
func safeError(what string, err error, kind string) error {
	return &detailed{msg: what + ": " + kind, detail: err.Error()}
}

// apiFailure names the kind of an error of the API server.
func apiFailure(ctx context.Context, err error) string {
	switch {
	case timedOut(ctx, err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return failTimeout
	case apierrors.IsNotFound(err):
		return "not found"
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	case meta.IsNoMatchError(err):
		return "no such kind is served"
	}
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return "API error (" + string(r) + ")"
	}
	return "API error"
}

// timedOut says whether err is (or was caused by) the gate's deadline.
func timedOut(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)
}

// celFailures are the CEL runtime errors a message may name by kind: what
// follows each prefix in the error (a key, a value) is not shown.
var celFailures = []struct{ prefix, kind string }{
	{"no such key", "a key is missing (guard it with has() or in)"},
	{"no such attribute", "a field is missing (guard it with has())"},
	{"no such overload", "an operator or function does not apply to its operands' types"},
	{"division by zero", "division by zero"},
	{"modulus by zero", "modulus by zero"},
	{"index out of range", "an index is out of range"},
	{"operation cancelled: actual cost limit exceeded", "the expression costs more than the limit"},
}

// celFailure names the kind of a CEL evaluation error.
func celFailure(ctx context.Context, err error) string {
	if timedOut(ctx, err) {
		return failTimeout
	}
	msg := err.Error()
	for _, f := range celFailures {
		if strings.HasPrefix(msg, f.prefix) {
			return "evaluation error: " + f.kind
		}
	}
	return "evaluation error"
}

// httpFailure names the kind of an error of a request to Prometheus.
func httpFailure(ctx context.Context, err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		dns       *net.DNSError
		netErr    net.Error
	)
	switch {
	case timedOut(ctx, err):
		return failTimeout
	case errors.As(err, &unknownCA):
		return "TLS: certificate signed by unknown authority (set ca)"
	case errors.As(err, &host):
		return "TLS: the certificate is not valid for the URL's host"
	case errors.As(err, &invalid):
		return "TLS: the certificate is not valid (expired, or not yet valid)"
	case errors.As(err, &record):
		return "TLS: the server did not answer TLS"
	case errors.As(err, &dns):
		return "the host name does not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &netErr) && netErr.Timeout():
		return failTimeout
	}
	return "unreachable"
}
