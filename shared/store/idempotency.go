package store

import (
	"context"
	"time"
)

// Idempotency record states (spec 3.2).
const (
	IdemInProgress = "in_progress"
	IdemStored     = "stored"
)

// IdempotencyRecord is what an Idempotency-Key holds for an account.
type IdempotencyRecord struct {
	Fingerprint string // the canonical request the key was first used for
	RequestID   string // the request that claimed it
	State       string
	Status      int    // stored: the original HTTP status
	Body        []byte // stored: the original JSON body
	LeaseUntil  time.Time
	ExpiresAt   time.Time
}

// Idempotency keeps Idempotency-Key records, scoped to the account.
// Expiry and leases are checked against the caller's clock on every read.
type Idempotency interface {
	// ClaimIdempotency takes the key for requestID unless a live record
	// holds it: none, one whose lease ran out while in progress (its
	// request died), or one past expiresAt can be taken. It returns the
	// record and whether the caller now owns it; otherwise the record is
	// the holder's (in progress or stored).
	ClaimIdempotency(ctx context.Context, accountID, key, fingerprint, requestID string, now, leaseUntil, expiresAt time.Time) (IdempotencyRecord, bool, error)
	// CompleteIdempotency stores the outcome; only the owner may.
	CompleteIdempotency(ctx context.Context, accountID, key, requestID string, status int, body []byte, expiresAt time.Time) error
	// ReleaseIdempotency frees a key its owner will not complete (a
	// retryable failure), so a retry runs again.
	ReleaseIdempotency(ctx context.Context, accountID, key, requestID string) error
}
