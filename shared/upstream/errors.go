package upstream

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/registry"
)

// Error is the caller's typed error for an outcome that carries no data
// (spec 7): the final fault's mapping, or 503 with retry-after when a route
// that could have answered was resting (and no definitive answer came).
// Messages name the source neutrally, never the provider.
func (o Outcome) Error() *envelope.Error {
	f := o.Fault
	if f == nil || (o.Skipped > 0 && !f.Kind.definitive()) {
		// The shortest wait wins: a resting route, then a store that could
		// not count an allowance, then a spent one (next month).
		switch {
		case o.Skipped > 0:
			return withRetryAfter(envelope.New(envelope.UpstreamError, http.StatusServiceUnavailable,
				"The source is in a short cooldown after repeated failures and was not called; retry after the retry-after wait.", nil), o.Skipped)
		case o.AllowanceErr != nil:
			return withRetryAfter(envelope.New(envelope.UpstreamError, http.StatusServiceUnavailable,
				"This endpoint's shared monthly capacity cannot be checked right now, so the source was not called; retry after the retry-after wait.",
				map[string]any{"reason": "capacity_unavailable"}), AllowanceRetry)
		case !o.CapacityReset.IsZero():
			// Spec 7: an exhausted upstream rate limit is 429.
			resets := o.CapacityReset.UTC().Format(time.RFC3339)
			return withRetryAfter(envelope.New(envelope.UpstreamError, http.StatusTooManyRequests,
				"This endpoint's shared monthly capacity is used up; it resets at "+resets+".",
				map[string]any{"reason": "capacity_exhausted", "resets_at": resets}), o.CapacityWait)
		}
		return envelope.New(envelope.EndpointNotAvailable, http.StatusNotImplemented,
			"No live data source is configured for this endpoint.", nil)
	}
	switch f.Kind {
	case NotFound:
		return envelope.New(envelope.ResourceNotFound, http.StatusNotFound,
			"The source has no such record.", nil)
	case Timeout:
		return envelope.New(envelope.UpstreamTimeout, http.StatusGatewayTimeout,
			"The source did not answer within the adapter timeout; retry with backoff.", nil)
	case RateLimited:
		e := envelope.New(envelope.UpstreamError, http.StatusTooManyRequests,
			"The source's own rate limit is exhausted; retry later.", nil)
		return withRetryAfter(e, f.RetryAfter)
	case InvalidParameter:
		return envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity, f.Reason,
			map[string]any{"field": f.Field, "reason": f.Code})
	case Rejected:
		return envelope.New(envelope.UpstreamError, http.StatusBadGateway,
			"The source refused the request.", nil)
	case Malformed:
		return envelope.New(envelope.UpstreamError, http.StatusBadGateway,
			"The source's answer could not be read.", nil)
	}
	// ServerError, Transport.
	return envelope.New(envelope.UpstreamError, http.StatusBadGateway,
		"The source failed to answer; retry with backoff.", nil)
}

// AllowanceRetry is the wait a call asks for when the allowance store
// failed: the route was not called rather than called uncounted, since a
// scarce route's overuse costs money the count exists to bound.
const AllowanceRetry = 30 * time.Second

// URLRefusal is the caller's error for a URL parameter the policy refuses.
func URLRefusal(field string, err error) *envelope.Error {
	return Outcome{Fault: unsafeURL(field, err)}.Error()
}

// CheckURLParams refuses a call whose URL-typed parameter leads to a
// non-public address (422 naming the field), before any cache lookup,
// fetch or charge. A platform page URL (a parameter with Hosts) is not
// checked: validation already put it on the platform's own public hosts,
// and adapters fetch the platform's origin, never the URL as given.
func CheckURLParams(ctx context.Context, policy *URLPolicy, e *registry.Endpoint, values map[string]string) *envelope.Error {
	if policy == nil {
		return nil
	}
	for _, param := range e.Params {
		v, ok := values[param.Name]
		if param.Type != registry.URL || len(param.Hosts) > 0 || !ok {
			continue
		}
		if _, err := policy.Check(ctx, v); err != nil {
			return URLRefusal(param.Name, err)
		}
	}
	return nil
}

// withRetryAfter sets retry-after in whole seconds, rounded up, when known.
func withRetryAfter(e *envelope.Error, d time.Duration) *envelope.Error {
	if d <= 0 {
		return e
	}
	return e.WithHeader("retry-after", strconv.Itoa(int(math.Ceil(d.Seconds()))))
}
