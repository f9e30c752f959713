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

// lastUsedGather is how long a use due to be written waits for others, so
// that many keys' first uses (a burst of new keys) share one commit.
const lastUsedGather = 10 * time.Millisecond

type lastUses struct {
	mu      sync.Mutex
	seen    map[string]time.Time // key id -> latest use
	saved   map[string]time.Time // key id -> latest use written to the file
	pending map[string]time.Time // account id \x00 key id -> use to write
	writes  sync.WaitGroup
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
	if !save {
		u.mu.Unlock()
		return
	}
	u.saved[k.ID] = now
	first := u.pending == nil
	if first {
		u.pending = map[string]time.Time{}
		u.writes.Add(1)
	}
	u.pending[string(join(k.AccountID, k.ID))] = now
	u.mu.Unlock()
	if first {
		go s.writeUses()
	}
}

// writeUses writes the uses pending after lastUsedGather in one commit,
// each unless the file already holds a later one.
func (s *Store) writeUses() {
	u := &s.uses
	defer u.writes.Done()
	time.Sleep(lastUsedGather)
	u.mu.Lock()
	pending := u.pending
	u.pending = nil
	u.mu.Unlock()
	_ = s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bLastUsed)
		if err != nil {
			return err
		}
		for id, at := range pending {
			if old := b.Get([]byte(id)); old != nil {
				if t, err := time.Parse(time.RFC3339Nano, string(old)); err == nil && !at.After(t) {
					continue
				}
			}
			if err := b.Put([]byte(id), []byte(at.UTC().Format(time.RFC3339Nano))); err != nil {
				return err
			}
		}
		return nil
	})
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
