package embedded

import (
	"context"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meridian-data/meridian/shared/store"
)

// bLastUsed holds when each key last authenticated: account id \x00 key
// id -> RFC 3339 time. It is written at most once a minute per key, in a
// grouped commit off the request's path: "last used" is a console figure,
// not money, and the exact time lives in memory while the process runs.
var bLastUsed = []byte("lastused")

// lastUsedEvery is how stale the file's copy of a key's last use may get.
const lastUsedEvery = time.Minute

type lastUses struct {
	mu     sync.Mutex
	seen   map[string]time.Time // key id -> latest use
	saved  map[string]time.Time // key id -> latest use written to the file
	writes sync.WaitGroup
}

// noteUse records that k authenticated a request at now.
func (s *Store) noteUse(k store.Key, now time.Time) {
	u := &s.uses
	u.mu.Lock()
	if u.seen == nil {
		u.seen, u.saved = map[string]time.Time{}, map[string]time.Time{}
	}
	if now.After(u.seen[k.ID]) {
		u.seen[k.ID] = now
	}
	save := now.Sub(u.saved[k.ID]) >= lastUsedEvery
	if save {
		u.saved[k.ID] = now
	}
	u.mu.Unlock()
	if !save {
		return
	}
	u.writes.Add(1)
	go func() {
		defer u.writes.Done()
		_ = s.db.Batch(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bLastUsed)
			if err != nil {
				return err
			}
			id := join(k.AccountID, k.ID)
			if old := b.Get(id); old != nil {
				if t, err := time.Parse(time.RFC3339Nano, string(old)); err == nil && !now.After(t) {
					return nil
				}
			}
			return b.Put(id, []byte(now.UTC().Format(time.RFC3339Nano)))
		})
	}()
}

// fillLastUsed sets each key's LastUsedAt from the file and from memory,
// whichever is later.
func (s *Store) fillLastUsed(ctx context.Context, keys []store.Key) error {
	err := s.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bLastUsed)
		if b == nil {
			return nil
		}
		for i, k := range keys {
			if raw := b.Get(join(k.AccountID, k.ID)); raw != nil {
				if t, err := time.Parse(time.RFC3339Nano, string(raw)); err == nil {
					keys[i].LastUsedAt = &t
				}
			}
		}
		return nil
	})
	s.uses.mu.Lock()
	defer s.uses.mu.Unlock()
	for i, k := range keys {
		if t, ok := s.uses.seen[k.ID]; ok && (keys[i].LastUsedAt == nil || t.After(*keys[i].LastUsedAt)) {
			t := t.UTC()
			keys[i].LastUsedAt = &t
		}
	}
	return err
}
