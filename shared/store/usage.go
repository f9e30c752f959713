package store

import (
	"fmt"
	"time"
)

// UsageRecord is one request's usage as the worker counts it, once per
// RequestID (Outcomes.RecordUsage).
type UsageRecord struct {
	RequestID string
	At        time.Time
	// Outcome is the platform's health (a served /v1 data call, what
	// /v1/status counts); nil otherwise.
	Outcome *Outcome
	// Account usage, counted when AccountID and Endpoint are both set:
	// one call of Endpoint (the registry path the ledger's endpoint shows)
	// charged Credits (0 while a charge is pending), an error when Failed.
	AccountID, Endpoint string
	Credits             int64
	Failed              bool
}

// Counts reports whether the record counts anywhere: a record with
// neither an outcome nor account usage changes nothing and is not marked.
func (r UsageRecord) Counts() bool { return r.Outcome != nil || r.AccountUsage() }

// AccountUsage reports whether the record counts as its account's call.
func (r UsageRecord) AccountUsage() bool { return r.AccountID != "" && r.Endpoint != "" }

// Check refuses what no caller should send: a record without a request
// id, an outcome without a platform, negative credits.
func (r UsageRecord) Check() error {
	switch {
	case r.RequestID == "":
		return fmt.Errorf("%w: a usage record without a request id", ErrInvalid)
	case r.Outcome != nil && r.Outcome.Platform == "":
		return fmt.Errorf("%w: an outcome without a platform (%s)", ErrInvalid, r.RequestID)
	case r.Credits < 0:
		return fmt.Errorf("%w: negative credits (%s)", ErrInvalid, r.RequestID)
	}
	return nil
}

// UsageDay is one account's usage of one endpoint on one UTC day.
type UsageDay struct {
	Date     string // YYYY-MM-DD, UTC
	Endpoint string
	Calls    int64
	Credits  int64
	Errors   int64
}

// AccountUsageRetention is how long an account's usage days are kept
// after the day ends: 62 days, so a whole calendar month (and the one
// before it, while it is still being looked at) stays readable.
const AccountUsageRetention = 62 * day

// UsageDate is the UTC day of t as account usage keys it.
func UsageDate(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// UsageDayStart is the start (UTC midnight) of t's day.
func UsageDayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
