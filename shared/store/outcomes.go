package store

import (
	"context"
	"sort"
	"time"
)

// StatusWindow is how far back /v1/status looks (spec 8).
const StatusWindow = 15 * time.Minute

// LatencyBucketsMS are the upper bounds of the latency histogram; the
// last bucket holds everything slower. Percentiles report bucket bounds.
var LatencyBucketsMS = []int64{10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// Outcome is the result of one call that reached a data source (or the
// cache), as status counts it.
type Outcome struct {
	Platform string
	Status   int
	// ErrorType is the failure's error type, empty on success.
	ErrorType string
	Latency   time.Duration
}

// Error reports whether the outcome counts against the platform's health:
// the source failed or timed out, or serving it failed.
func (o Outcome) Error() bool {
	switch o.ErrorType {
	case "UPSTREAM_ERROR", "UPSTREAM_TIMEOUT", "INTERNAL_ERROR":
		return true
	}
	return false
}

// MinuteStats are one platform's counts for one minute.
type MinuteStats struct {
	Minute    int64 // Unix minute
	Requests  int64
	Errors    int64
	Histogram []int64 // len(LatencyBucketsMS)+1
}

// OutcomeDedupWindow is how long a request id stays remembered, so a
// usage event delivered twice counts once.
const OutcomeDedupWindow = 24 * time.Hour

// Outcomes is what the worker aggregates from usage events: request
// outcomes per platform and minute, read back for the status window, and
// each account's usage per day and endpoint (usage.go). Recording only adds
// to counters (and marks the request id counted).
type Outcomes interface {
	// RecordUsage counts a batch of requests, each at most once per
	// RequestID within OutcomeDedupWindow of now (a second record of the
	// same id, in this batch or a later one, changes nothing): a record's
	// Outcome in the minute of its At, its account usage in the UTC day of
	// its At. recorded is how many records were newly counted. On an error
	// some records may be counted and others not; each is counted exactly
	// when it is marked, so the same batch again counts the rest (the
	// stores document what residual window remains). A record without a
	// RequestID is ErrInvalid, and then nothing is counted.
	RecordUsage(ctx context.Context, records []UsageRecord, now time.Time) (recorded int, err error)
	// OutcomesSince returns each platform's minutes from since to now.
	OutcomesSince(ctx context.Context, since, now time.Time) (map[string][]MinuteStats, error)
	// AccountUsage returns the account's usage of the UTC days from..to
	// (both included), one row per day and endpoint with any calls,
	// ordered by date, then endpoint. Days are kept AccountUsageRetention.
	AccountUsage(ctx context.Context, accountID string, from, to time.Time) ([]UsageDay, error)
}

// Bucket is the histogram bucket of a latency.
func Bucket(latency time.Duration) int {
	ms := latency.Milliseconds()
	return sort.Search(len(LatencyBucketsMS), func(i int) bool { return ms <= LatencyBucketsMS[i] })
}

// PlatformStatus is one platform's line of /v1/status.
type PlatformStatus struct {
	Platform  string  `json:"platform"`
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	P50MS     *int64  `json:"p50_ms"`
	P95MS     *int64  `json:"p95_ms"`
	State     string  `json:"state"`
}

// Summarize folds a platform's minutes into its status line. States:
// no_data (no requests), operational (error rate below 5%), degraded
// (5% to 25%), down (25% or more).
func Summarize(platform string, minutes []MinuteStats) PlatformStatus {
	ps := PlatformStatus{Platform: platform, State: "no_data"}
	hist := make([]int64, len(LatencyBucketsMS)+1)
	for _, m := range minutes {
		ps.Requests += m.Requests
		ps.Errors += m.Errors
		for i, n := range m.Histogram {
			if i < len(hist) {
				hist[i] += n
			}
		}
	}
	if ps.Requests == 0 {
		return ps
	}
	ps.ErrorRate = float64(ps.Errors) / float64(ps.Requests)
	ps.P50MS, ps.P95MS = percentile(hist, 0.50), percentile(hist, 0.95)
	switch {
	case ps.ErrorRate >= 0.25:
		ps.State = "down"
	case ps.ErrorRate >= 0.05:
		ps.State = "degraded"
	default:
		ps.State = "operational"
	}
	return ps
}

// percentile is the upper bound of the bucket holding the q-th request
// (the last bucket reports twice the largest bound).
func percentile(hist []int64, q float64) *int64 {
	var total int64
	for _, n := range hist {
		total += n
	}
	if total == 0 {
		return nil
	}
	rank := int64(q*float64(total) + 0.999999)
	var seen int64
	for i, n := range hist {
		seen += n
		if seen >= rank {
			bound := 2 * LatencyBucketsMS[len(LatencyBucketsMS)-1]
			if i < len(LatencyBucketsMS) {
				bound = LatencyBucketsMS[i]
			}
			return &bound
		}
	}
	return nil
}
