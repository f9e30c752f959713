package store

import (
	"context"
	"time"
)

// CanaryRetention is how long canary runs are kept: the recent baseline
// reads the last seven, /v1/status the last one.
const CanaryRetention = 30 * 24 * time.Hour

// MaxCanaryRunBytes bounds one run's document (DynamoDB items hold 400 KB).
const MaxCanaryRunBytes = 350 << 10

// CanaryRunTimeFormat orders runs by their time as text (fixed width).
const CanaryRunTimeFormat = "2006-01-02T15:04:05.000000000Z"

// CanaryRun is one canary run (shared/canary): its time and its report,
// an opaque document the canary package encodes.
type CanaryRun struct {
	At     time.Time
	Report []byte
}

// CanaryLog keeps the canary's runs for the deployment: written by the
// canary function, read by it (baselines, alarms) and by /v1/status.
type CanaryLog interface {
	// RecordCanaryRun stores a run, replacing one recorded at the same
	// instant. An empty report, one over MaxCanaryRunBytes or a zero time
	// is ErrInvalid.
	RecordCanaryRun(ctx context.Context, run CanaryRun) error
	// CanaryRuns returns up to limit runs, newest first, recorded within
	// CanaryRetention of now.
	CanaryRuns(ctx context.Context, limit int, now time.Time) ([]CanaryRun, error)
}

// CheckCanaryRun validates what both stores refuse.
func CheckCanaryRun(r CanaryRun) error {
	if r.At.IsZero() || len(r.Report) == 0 || len(r.Report) > MaxCanaryRunBytes {
		return ErrInvalid
	}
	return nil
}
