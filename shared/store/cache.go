package store

import (
	"context"
	"time"
)

// MaxCachedBytes bounds a cached data object (DynamoDB items hold 400 KB);
// larger responses are served but not cached.
const MaxCachedBytes = 350 << 10

// CacheEntry is a cached success: the encoded data object of the envelope.
type CacheEntry struct {
	Data      []byte
	StoredAt  time.Time
	ExpiresAt time.Time
}

// Cache is the response cache, shared across accounts and keyed on the
// canonical request. Expiry is checked on every read (DynamoDB's TTL
// deletion is lazy), against the caller's clock.
type Cache interface {
	// CacheGet returns the entry for key, or ErrNotFound when there is none
	// or it expired by now.
	CacheGet(ctx context.Context, key string, now time.Time) (CacheEntry, error)
	// CachePut stores data under key until expiresAt, replacing any entry.
	CachePut(ctx context.Context, key string, data []byte, now, expiresAt time.Time) error
}
