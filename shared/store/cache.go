package store

import (
	"context"
	"errors"
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

// InProcess is implemented by a store whose reads are served in the
// calling process (the embedded store): a lookup costs microseconds, so
// the pipeline makes it in line rather than beside authentication.
type InProcess interface{ InProcess() bool }

// IsInProcess reports whether v says it is served in process.
func IsInProcess(v any) bool {
	ip, ok := v.(InProcess)
	return ok && ip.InProcess()
}

// Memo keeps small values in a Cache under keys of their own (upstream's
// Memory: a site's remembered text-to-id resolutions), so both stores keep
// them, shared by every instance, with the cache's expiry.
type Memo struct{ Cache Cache }

// Recall returns the value under key, or ok false when none is live.
func (m Memo) Recall(ctx context.Context, key string, now time.Time) (string, bool, error) {
	e, err := m.Cache.CacheGet(ctx, key, now)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(e.Data), true, nil
}

// Keep stores value under key until until.
func (m Memo) Keep(ctx context.Context, key, value string, now, until time.Time) error {
	return m.Cache.CachePut(ctx, key, []byte(value), now, until)
}

// Fills are the response cache's fill markers: while one request fetches
// what a cache key will hold, its marker tells requests in other
// processes and instances to wait for the entry instead of fetching too
// (request collapsing). A marker is a lease: its owner renews it while it
// fetches, and one that died leaves a marker that lapses.
type Fills interface {
	// ClaimFill makes owner the filler of key until now+lease: claimed is
	// true when the key had no live marker, or owner's own (a renewal),
	// and false when another owner's marker is live.
	ClaimFill(ctx context.Context, key, owner string, now time.Time, lease time.Duration) (claimed bool, err error)
	// ReleaseFill removes owner's marker of key (another owner's stays).
	ReleaseFill(ctx context.Context, key, owner string) error
}
