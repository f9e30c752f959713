package atproto

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/meridian-data/meridian/shared/upstream"
)

// xrpcError is the body of a failed XRPC call: {"error": "<Name>",
// "message": "<text>"}. Proxies in front of the AppView may answer with an
// HTML page instead, which leaves both fields empty.
type xrpcError struct {
	Name    string `json:"error"`
	Message string `json:"message"`
}

// readXRPCError decodes an error body; ok is false when it is not one.
func readXRPCError(resp *upstream.Response) (e xrpcError, ok bool) {
	if resp == nil || len(resp.Body) == 0 {
		return e, false
	}
	if err := json.Unmarshal(resp.Body, &e); err != nil || e.Name == "" {
		return xrpcError{}, false
	}
	return e, true
}

// maxReason caps the upstream text kept in a fault's reason.
const maxReason = 200

// classify refines the status classification of a failed call with what
// the upstream said: the XRPC error name and message for the logs, and the
// rate-limit reset when a 429 carries no Retry-After. Errors that are not
// upstream faults pass through.
func classify(resp *upstream.Response, err error, now time.Time) error {
	var f *upstream.Fault
	if !errors.As(err, &f) || resp == nil {
		return err
	}
	if e, ok := readXRPCError(resp); ok {
		f.Reason = e.reason()
	}
	if f.Kind == upstream.RateLimited && f.RetryAfter <= 0 {
		f.RetryAfter = upstream.UntilUnix(resp.Header.Get("ratelimit-reset"), now)
	}
	return f
}

func (e xrpcError) reason() string {
	r := "XRPC error " + e.Name
	if e.Message != "" {
		r += ": " + e.Message
	}
	if len(r) > maxReason {
		r = r[:maxReason] + "..."
	}
	return r
}
