package store

import (
	"context"
	"time"
)

// Allowances keep the shared monthly allowances of scarce upstream
// providers (spec 2.4, "limited capacity"): one counter per provider and
// calendar month (UTC), shared by every account and every instance.
// Months are "YYYY-MM", as the runner names them (upstream.Month). A
// counter is kept through the month after its own (AllowanceExpiry), so
// operators can still read last month's use; reads check that expiry
// themselves (DynamoDB's TTL deletion is lazy).
type Allowances interface {
	// TakeAllowance atomically counts one attempt against name's allowance
	// for month unless limit attempts were already counted: ok reports
	// whether the unit was taken, used is the count after the call. A
	// limit of 0 takes nothing. A month whose counter has expired by now,
	// or a malformed one, is ErrInvalid.
	TakeAllowance(ctx context.Context, name, month string, limit int64, now time.Time) (used int64, ok bool, err error)
	// AllowanceUsed is the attempts counted for name in month (0 once the
	// counter expired by now).
	AllowanceUsed(ctx context.Context, name, month string, now time.Time) (int64, error)
}

const allowanceMonthLayout = "2006-01"

// AllowanceExpiry is when month's counter may be dropped: the end of the
// following month, so a counter outlives its month by a whole month and
// never expires while it is counted.
func AllowanceExpiry(month string) (time.Time, error) {
	start, err := time.Parse(allowanceMonthLayout, month)
	if err != nil {
		return time.Time{}, ErrInvalid
	}
	return start.AddDate(0, 2, 0), nil
}

// CheckAllowance validates the arguments both stores take and returns the
// month's expiry.
func CheckAllowance(name, month string, limit int64, now time.Time) (time.Time, error) {
	exp, err := AllowanceExpiry(month)
	if err != nil || name == "" || limit < 0 || !now.Before(exp) {
		return time.Time{}, ErrInvalid
	}
	return exp, nil
}
