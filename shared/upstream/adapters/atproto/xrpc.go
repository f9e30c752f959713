package atproto

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
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
		f.RetryAfter = resetWait(resp.Header.Get("ratelimit-reset"), now)
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

// resetWait reads the RateLimit-Reset header the network's services send
// with a 429: the Unix time, in seconds, when the window opens again.
func resetWait(v string, now time.Time) time.Duration {
	secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || secs <= 0 {
		return 0
	}
	if wait := time.Unix(secs, 0).Sub(now); wait > 0 {
		return wait
	}
	return 0
}
