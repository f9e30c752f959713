// Package store defines Meridian's storage as domain operations: accounts,
// API keys, the wallet and its ledger. Two implementations satisfy it:
// shared/store/dynamostore (production) and shared/store/embedded (make
// run). One conformance suite (shared/store/storetest) runs against both.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxActiveKeys is the per-account cap on active keys (spec 2.6, 8).
const MaxActiveKeys = 5

// MaxCredits caps a balance, far above any real one, so that no grant can
// overflow it (ErrCreditCeiling).
const MaxCredits int64 = 1_000_000_000_000_000

// KeyStatus is a key's state (spec 3.1).
type KeyStatus string

const (
	KeyActive  KeyStatus = "active"
	KeyRevoked KeyStatus = "revoked"
	KeyDeleted KeyStatus = "deleted"
)

// Account is a wallet owner.
type Account struct {
	ID               string
	CreditsRemaining int64
	CreditsLifetime  int64 // every credit ever granted
	BalanceChangedAt time.Time
	ActiveKeys       int
	KeysCreated      int // every key ever created, deleted ones included
	CreatedAt        time.Time
}

// Key is an API key as stored: never the key itself, only its SHA-256
// hash, 7-character prefix and last 4 characters (spec 2.6).
type Key struct {
	ID          string
	AccountID   string
	Hash        string // hex SHA-256 of the full key
	Prefix      string
	Last4       string
	Name        string
	Status      KeyStatus
	CreditLimit *int64 // nil: uncapped
	CreditsUsed int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// LastUsedAt is when the key last authenticated a request (nil:
	// never). Listings fill it; a single key's lookup may not.
	LastUsedAt *time.Time
}

// EntryType is the kind of a ledger entry.
type EntryType string

const (
	EntryDebit  EntryType = "debit"
	EntryRefund EntryType = "refund"
	EntryGrant  EntryType = "grant"
)

// Entry is one ledger line. Amount is signed: a debit is negative.
type Entry struct {
	ID           string
	AccountID    string
	Type         EntryType
	Amount       int64
	BalanceAfter int64
	RequestID    string
	Endpoint     string // e.g. /v1/company_registry/search; empty for grants
	KeyID        string
	KeyPrefix    string
	Note         string
	CreatedAt    time.Time
}

// Charge asks to reserve Cost credits for one request.
type Charge struct {
	RequestID string
	AccountID string
	KeyID     string
	KeyPrefix string
	Endpoint  string
	Cost      int64
}

// Reservation is a charge that went through: the debit is written.
type Reservation struct {
	Charge
	CreditsRemaining int64
	DebitEntryID     string
}

// Reserved is one charge's outcome in ReserveMany: a reservation, or the
// refusal Reserve would have returned for it (Err).
type Reserved struct {
	Reservation
	Err error
}

// FirstReserved is the outcome of a one-charge ReserveMany as Reserve
// returns it: Reserve(ctx, c) is FirstReserved(ReserveMany(ctx, []Charge{c})).
func FirstReserved(out []Reserved, err error) (Reservation, error) {
	if err != nil {
		return Reservation{}, err
	}
	return out[0].Reservation, out[0].Err
}

// MaxReserveGroup bounds ReserveMany: a DynamoDB transaction holds at most
// 100 items, and a group writes two per charge, the account and each key.
const MaxReserveGroup = 32

// CheckGroup validates a ReserveMany group before any read: the whole group
// must be 1 to MaxReserveGroup charges of one account (else ErrInvalid).
// A charge without a positive cost, a request or a key gets ErrInvalid,
// and a request id repeated in the group ErrDuplicateRequest, in its
// result; the others are left for the store to decide.
func CheckGroup(charges []Charge) ([]Reserved, error) {
	if len(charges) == 0 || len(charges) > MaxReserveGroup || charges[0].AccountID == "" {
		return nil, ErrInvalid
	}
	out := make([]Reserved, len(charges))
	seen := make(map[string]bool, len(charges))
	for i, c := range charges {
		out[i].Charge = c
		switch {
		case c.AccountID != charges[0].AccountID:
			return nil, ErrInvalid
		case c.Cost <= 0 || c.RequestID == "" || c.KeyID == "":
			out[i].Err = ErrInvalid
		case seen[c.RequestID]:
			out[i].Err = ErrDuplicateRequest
		}
		seen[c.RequestID] = true
	}
	return out, nil
}

// LedgerQuery pages the ledger, newest first.
type LedgerQuery struct {
	Limit     int
	Cursor    string // opaque, from the previous page
	RequestID string // only entries caused by this request
}

// LedgerPage is one page of entries, newest first.
type LedgerPage struct {
	Entries    []Entry
	NextCursor string // empty when there is no further page
}

// KeyChange is a console edit of a key. Nil fields are left alone.
type KeyChange struct {
	Name *string
	// CreditLimit: set SetLimit to change it; a nil CreditLimit then removes the cap.
	SetLimit    bool
	CreditLimit *int64
}

// Store is every storage operation Meridian performs.
type Store interface {
	// CreateAccount opens an account whose console is reached with the
	// token hashing to consoleTokenHash, holding credits granted by a ledger
	// entry that names requestID, all in one atomic write.
	CreateAccount(ctx context.Context, credits int64, consoleTokenHash, requestID string) (Account, error)
	Account(ctx context.Context, accountID string) (Account, error)
	AccountByConsoleToken(ctx context.Context, tokenHash string) (Account, error)
	// Grant adds credits with a grant entry; returns the account after it.
	Grant(ctx context.Context, accountID string, amount int64, note, requestID string) (Account, error)

	// CreateKey stores a new active key; ErrTooManyKeys when the account
	// already holds MaxActiveKeys active keys.
	CreateKey(ctx context.Context, k Key) (Key, error)
	// CreateFirstKey is CreateKey for an account that never had a key
	// (spec 3.1, the first console overview); otherwise ErrHasKeys, so
	// concurrent first visits create one key between them.
	CreateFirstKey(ctx context.Context, k Key) (Key, error)
	// KeyByHash finds a key by the hash of the presented key, reading the
	// latest state (no caching: revocation applies on the next request).
	KeyByHash(ctx context.Context, hash string) (Key, error)
	Key(ctx context.Context, accountID, keyID string) (Key, error)
	// Keys lists an account's keys that are not deleted, oldest first.
	Keys(ctx context.Context, accountID string) ([]Key, error)
	// SetKeyStatus moves a key between states (spec 3.1). Reactivating
	// past the cap is ErrTooManyKeys; a deleted key cannot change (ErrKeyDeleted).
	SetKeyStatus(ctx context.Context, accountID, keyID string, to KeyStatus) (Key, error)
	UpdateKey(ctx context.Context, accountID, keyID string, c KeyChange) (Key, error)

	// Reserve atomically checks and charges the key's budget and the
	// wallet and writes the debit. Errors: *KeyLimitError,
	// *InsufficientCreditsError, ErrKeyInactive, ErrDuplicateRequest.
	Reserve(ctx context.Context, c Charge) (Reservation, error)
	// ReserveMany reserves charges of one account together (at most
	// MaxReserveGroup): each is decided as Reserve would decide it, one
	// after the other in order, and the accepted ones are written at once.
	// A refusal is that charge's Err and does not stop the others. A
	// returned error leaves every charge's outcome unknown, as Reserve's
	// own errors do.
	ReserveMany(ctx context.Context, charges []Charge) ([]Reserved, error)
	// Settle records that the reserved call succeeded and keeps the charge.
	// Settling twice is fine; a refunded reservation is ErrRefunded.
	Settle(ctx context.Context, accountID, requestID string) error
	// Refund returns a reservation to the key and the wallet with a refund
	// entry. Refunding twice refunds once; a settled reservation is
	// ErrSettled. Returns the balance after.
	Refund(ctx context.Context, accountID, requestID string) (int64, error)
	Ledger(ctx context.Context, accountID string, q LedgerQuery) (LedgerPage, error)
	// ExpiredReservations lists up to limit reservations still "reserved"
	// whose lease (ReservationLease from the reservation) ended at or
	// before now, oldest lease first: calls whose process died between
	// reserve and settle. Reconciliation refunds them.
	ExpiredReservations(ctx context.Context, now time.Time, limit int) ([]ReservationRef, error)
	// ExtendReservation holds a reservation still reserved until at least
	// until: its lease then ends no earlier than until, so the sweep
	// (RefundExpired) leaves it while the web job that starts with it runs
	// and bills. A lease already longer stays. ErrRefunded when it was
	// refunded (the sweep got there first), ErrSettled when settled,
	// ErrNotFound when there is none.
	ExtendReservation(ctx context.Context, accountID, requestID string, until time.Time) error
	// RefundExpired is Refund for the sweep: it refunds a reservation only
	// while its lease ended at or before now (the lease ExtendReservation
	// set, if any), else ErrLeaseHeld; in one conditional write, so a job
	// that extends the lease after the sweep listed it keeps its charge.
	RefundExpired(ctx context.Context, accountID, requestID string, now time.Time) (int64, error)
}

// ReservationLease is how long a reservation may stay "reserved": far
// longer than any call (the pipeline's 90-second request deadline plus its
// billing writes), so only a reservation whose process died outlives it,
// and long enough for a settle reconciliation delayed by a queue backlog
// to land before the sweep would refund a delivered call.
const ReservationLease = 30 * time.Minute

// ReservationRef names a reservation whose lease ended.
type ReservationRef struct {
	AccountID  string
	RequestID  string
	LeaseUntil time.Time
}

// Errors a Store returns.
var (
	ErrNotFound         = errors.New("store: not found")
	ErrTooManyKeys      = fmt.Errorf("store: an account holds at most %d active keys", MaxActiveKeys)
	ErrKeyDeleted       = errors.New("store: the key is deleted")
	ErrKeyInactive      = errors.New("store: the key is not active")
	ErrDuplicateRequest = errors.New("store: this request id was already charged")
	ErrBadCursor        = errors.New("store: the cursor is not valid")
	ErrHasKeys          = errors.New("store: the account already has keys")
	ErrCreditCeiling    = fmt.Errorf("store: a balance holds at most %d credits", MaxCredits)
	// ErrInvalid: an argument no caller should send (a cost or grant of 0
	// or less, a negative limit, a missing id).
	ErrInvalid = errors.New("store: invalid argument")
	// ErrSettled: the reservation's call succeeded and keeps its charge; it
	// cannot be refunded.
	ErrSettled = errors.New("store: the reservation is settled")
	// ErrRefunded: the reservation was refunded (by the call's failure or
	// by reconciliation); it cannot be settled any more.
	ErrRefunded = errors.New("store: the reservation was refunded")
	// ErrLeaseHeld: RefundExpired of a reservation whose lease has not
	// ended (a web job extended it): it is not refunded.
	ErrLeaseHeld = errors.New("store: the reservation's lease has not ended")
	// ErrContended: too many writers on one record at once (optimistic
	// retries exhausted, or the database throttling that hot item). The
	// store is up; the caller refuses rather than proceeds uncounted.
	ErrContended = errors.New("store: the record is contended")
)

// KeyLimitError: the key's credit_limit would be exceeded (402 KEY_LIMIT_EXCEEDED).
type KeyLimitError struct {
	CreditLimit int64
	CreditsUsed int64
}

func (e *KeyLimitError) Error() string {
	return fmt.Sprintf("store: key limit %d reached (%d used)", e.CreditLimit, e.CreditsUsed)
}

// InsufficientCreditsError: the balance is below the cost (402 INSUFFICIENT_CREDITS).
type InsufficientCreditsError struct {
	Required  int64
	Remaining int64
}

func (e *InsufficientCreditsError) Error() string {
	return fmt.Sprintf("store: %d credits required, %d remaining", e.Required, e.Remaining)
}
