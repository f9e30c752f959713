package store

import (
	"context"
	"errors"
	"time"
)

// RecallTTL is how long records removed from an answer by AI-assist
// (exclude=engagement_bait, fit=goal) stay recallable (spec 4.5).
const RecallTTL = 24 * time.Hour

// MaxRecallBytes bounds one recall's document (DynamoDB items hold 400 KB).
// An answer whose removed records would not fit removes none.
const MaxRecallBytes = 350 << 10

// Recall holds the full records an answer removed or replaced with stubs,
// owned by the account whose call removed them.
type Recall struct {
	ID        string
	AccountID string
	// RequestID is the call that removed the records; Endpoint its path.
	RequestID string
	Endpoint  string
	// Data is the recall's JSON document, as the recall endpoint returns it.
	Data      []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Recalls keep AI-assist recall documents. Reads are owner-bound and check
// expiry themselves (DynamoDB's TTL deletion is lazy).
type Recalls interface {
	// PutRecall stores r until r.ExpiresAt. An empty id or account, a
	// document over MaxRecallBytes, or an expiry not after CreatedAt is
	// ErrInvalid; an id already stored is ErrRecallExists (ids are random, so
	// this never overwrites another call's records).
	PutRecall(ctx context.Context, r Recall) error
	// GetRecall returns the recall id of accountID, or ErrNotFound when
	// there is none, it expired by now, or another account owns it: the
	// caller cannot tell these apart.
	GetRecall(ctx context.Context, id, accountID string, now time.Time) (Recall, error)
}

// ErrRecallExists: PutRecall's id is already stored.
var ErrRecallExists = errors.New("store: the recall id is taken")

// CheckRecall validates what both stores refuse.
func CheckRecall(r Recall) error {
	if r.ID == "" || r.AccountID == "" || len(r.Data) == 0 || len(r.Data) > MaxRecallBytes || !r.ExpiresAt.After(r.CreatedAt) {
		return ErrInvalid
	}
	return nil
}
