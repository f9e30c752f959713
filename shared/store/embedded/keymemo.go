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

// genMemo remembers values read from the file while nothing they depend
// on has been written since. Every transaction that may write such a
// record moves gen on once it has committed (or failed), and a value is
// used only under the gen it was read at: a read that raced a write is
// kept under the old gen, so it is never served after that write
// returned. Past max entries the memo starts again empty.
type genMemo[V any] struct {
	gen  atomic.Uint64
	copy func(V) V // a value of the caller's own
	max  int

	mu sync.RWMutex
	m  map[string]genValue[V]
}

type genValue[V any] struct {
	gen uint64
	v   V
}

// moved marks a write of what the memo holds.
func (c *genMemo[V]) moved() { c.gen.Add(1) }

// get returns the value under k if it was read at gen.
func (c *genMemo[V]) get(k string, gen uint64) (V, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	if !ok || e.gen != gen {
		var zero V
		return zero, false
	}
	return c.copy(e.v), true
}

// keep remembers v, read at gen, unless a write has happened since.
func (c *genMemo[V]) keep(k string, gen uint64, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if c.m == nil || len(c.m) >= c.max {
		c.m = map[string]genValue[V]{}
	}
	c.m[k] = genValue[V]{gen: gen, v: c.copy(v)}
}

// newKeysByHash answers KeyByHash without a read transaction while no key
// has been written since (updateKeys moves it on after creation, status,
// limit, a charge or refund of a key's credits): revocation applies on
// the very next request. Unknown hashes are not kept (anyone can send
// those).
func newKeysByHash() *genMemo[store.Key] {
	return &genMemo[store.Key]{copy: copyKey, max: maxKeyMemo}
}

// maxCacheMemo bounds the response-cache memo (entries of at most
// store.MaxCachedBytes each).
const maxCacheMemo = 1 << 10

// newCacheMemo answers CacheGet without a read transaction while no cache
// entry has been written since (CachePut moves it on after its commit).
// Each caller gets data of its own. Missing and expired entries are not
// kept.
func newCacheMemo() *genMemo[store.CacheEntry] {
	return &genMemo[store.CacheEntry]{copy: func(e store.CacheEntry) store.CacheEntry {
		e.Data = bytes.Clone(e.Data)
		return e
	}, max: maxCacheMemo}
}
