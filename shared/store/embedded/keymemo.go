package embedded

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/meridian-data/meridian/shared/store"
)

// maxKeyMemo bounds the memo; past it the memo starts again empty.
const maxKeyMemo = 1 << 14

// keyMemo remembers the last decoding of each key record together with
// the bytes it was decoded from. Every request reads its key; a record
// that is byte for byte the one decoded before reuses that decoding,
// while any write to the key (a revocation, a limit, a charge) changes
// its bytes and is decoded afresh. So a read is never stale: revocation
// still applies on the very next request.
type keyMemo struct {
	mu   sync.RWMutex
	byID map[string]memoizedKey // bKeys key -> last decoding
}

type memoizedKey struct {
	raw []byte
	key store.Key
}

// decode returns the key stored as raw under id in bKeys.
func (m *keyMemo) decode(id, raw []byte) (store.Key, error) {
	m.mu.RLock()
	e, ok := m.byID[string(id)]
	m.mu.RUnlock()
	if ok && bytes.Equal(e.raw, raw) {
		return copyKey(e.key), nil
	}
	var k store.Key
	if err := json.Unmarshal(raw, &k); err != nil {
		return k, err
	}
	m.mu.Lock()
	if m.byID == nil || len(m.byID) >= maxKeyMemo {
		m.byID = map[string]memoizedKey{}
	}
	m.byID[string(id)] = memoizedKey{raw: bytes.Clone(raw), key: k}
	m.mu.Unlock()
	return copyKey(k), nil
}

// copyKey is k with pointers of its own, so no caller shares the memo's.
func copyKey(k store.Key) store.Key {
	if k.CreditLimit != nil {
		limit := *k.CreditLimit
		k.CreditLimit = &limit
	}
	if k.LastUsedAt != nil {
		at := *k.LastUsedAt
		k.LastUsedAt = &at
	}
	return k
}

// keysByHash answers KeyByHash without a read transaction while no key
// has been written since: every write of a key record (creation, status,
// limit, a charge or refund of its credits) goes through updateKeys,
// which moves gen on once its transaction has committed, and an entry is
// used only under the gen it was read at. A read that raced a write is
// kept under the old gen, so it is never served after that write
// returned: revocation applies on the very next request. Unknown hashes
// are not kept (anyone can send those).
type keysByHash struct {
	gen atomic.Uint64
	mu  sync.RWMutex
	m   map[string]genKey
}

type genKey struct {
	gen uint64
	key store.Key
}

// get returns the key under hash if it was read at gen.
func (c *keysByHash) get(hash string, gen uint64) (store.Key, bool) {
	c.mu.RLock()
	e, ok := c.m[hash]
	c.mu.RUnlock()
	if !ok || e.gen != gen {
		return store.Key{}, false
	}
	return copyKey(e.key), true
}

// keep remembers k, read at gen, unless a key was written since.
func (c *keysByHash) keep(hash string, gen uint64, k store.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if c.m == nil || len(c.m) >= maxKeyMemo {
		c.m = map[string]genKey{}
	}
	c.m[hash] = genKey{gen: gen, key: copyKey(k)}
}
