package embedded

import (
	"context"
	"sync"
	"time"

	"github.com/meridian-data/meridian/shared/store"
)

// fillMarkers are the cache's fill markers. The file is open in one
// process only (bbolt's lock), so the markers live in its memory, like
// the per-key limits.
type fillMarkers struct {
	mu     sync.Mutex
	owners map[string]fillMarker
}

type fillMarker struct {
	owner string
	until time.Time
}

func (s *Store) ClaimFill(ctx context.Context, key, owner string, now time.Time, lease time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	f := &s.fills
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.owners[key]; ok && m.owner != owner && now.Before(m.until) {
		return false, nil
	}
	if f.owners == nil {
		f.owners = map[string]fillMarker{}
	}
	// Lapsed markers go as new ones come, so the map does not grow.
	for k, m := range f.owners {
		if !now.Before(m.until) {
			delete(f.owners, k)
		}
	}
	f.owners[key] = fillMarker{owner: owner, until: now.Add(lease)}
	return true, nil
}

func (s *Store) ReleaseFill(ctx context.Context, key, owner string) error {
	f := &s.fills
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.owners[key]; ok && m.owner == owner {
		delete(f.owners, key)
	}
	return ctx.Err()
}

var _ store.Fills = (*Store)(nil)
