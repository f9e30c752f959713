package store

import (
	"context"
	"time"
)

// OutboxRetention is how long an unsent message is kept (as long as SQS
// keeps a message at most).
const OutboxRetention = 14 * 24 * time.Hour

// OutboxMessage is a queue message that could not be sent yet.
type OutboxMessage struct {
	ID        string // the message's own id; putting it twice keeps one
	Body      []byte
	CreatedAt time.Time
}

// Outbox keeps messages the queue did not accept until the worker (or the
// next flush) sends them, so an event that cannot be sent is not lost.
type Outbox interface {
	// PutOutbox stores messages; an ID already stored is kept once.
	PutOutbox(ctx context.Context, msgs []OutboxMessage) error
	// OutboxBatch returns up to limit stored messages, oldest first.
	OutboxBatch(ctx context.Context, limit int) ([]OutboxMessage, error)
	// DeleteOutbox removes messages once sent; unknown IDs are ignored.
	DeleteOutbox(ctx context.Context, ids []string) error
}
