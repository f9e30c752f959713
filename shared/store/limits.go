package store

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// LimitRules are the per-key limits of spec 8.
type LimitRules struct {
	Rate        int           // requests per window
	Window      time.Duration // sliding window (one minute)
	Concurrency int           // requests in flight
	Lease       time.Duration // how long a slot outlives a request that died
}

// DefaultLimits are spec 8's: 600 a minute, 25 in flight.
var DefaultLimits = LimitRules{Rate: 600, Window: time.Minute, Concurrency: 25, Lease: 2 * time.Minute}

// Admission is the answer to one request's admission.
type Admission struct {
	Admitted bool
	// Refused is "rate" or "concurrency" when not admitted.
	Refused    string
	RetryAfter time.Duration
	// The state the rate headers report (spec 4.9).
	RateLimit     int
	RateRemaining int       // in the window, this request included
	RateReset     time.Time // when the oldest entry ages out
	Concurrency   int
	SlotsFree     int // free in-flight slots once this request took one
	// Stale names entries of the key's record that have expired (a store's
	// own names); the slot's release removes them in the same write.
	Stale []string
}

// Limits admits requests per key against a sliding window and in-flight
// slots, shared by every instance. A key's limits are named by the key's
// hash (id), so the one record that authenticates a key also counts it
// (Gate).
type Limits interface {
	// Admit records requestID as a request of id at now and, with slot,
	// gives it an in-flight slot; or refuses it (recording nothing) when
	// the window, or the slots it asked for, are full.
	Admit(ctx context.Context, id, requestID string, now time.Time, rules LimitRules, slot bool) (Admission, error)
	// TakeSlot gives an admitted request its in-flight slot later (after
	// its Idempotency-Key was claimed), or refuses it.
	TakeSlot(ctx context.Context, id, requestID string, now time.Time, rules LimitRules) (Admission, error)
	// ReleaseSlots frees the in-flight slots the requests hold, in one
	// write (a batch's items are released together), and removes the stale
	// entries their admissions reported (Admission.Stale). Freeing a slot
	// that is not held is fine.
	ReleaseSlots(ctx context.Context, id string, requestIDs []string, now time.Time, rules LimitRules, stale ...string) error
}

// Gate authenticates a key and admits its request in one step: the
// store's record of a key, found by the key's hash, holds both the key's
// status and its limits, so one read-modify-write of it does both, read
// fresh (a revocation applies to the very next request).
type Gate interface {
	// Enter returns the key (its account, id, prefix and status; other
	// fields may be empty) and the admission of requestID (Limits.Admit).
	// An unknown hash is ErrNotFound and a key that is not active
	// ErrKeyInactive; neither counts against any limit.
	Enter(ctx context.Context, hash, requestID string, now time.Time, rules LimitRules, slot bool) (Key, Admission, error)
}

// GroupGate is a Gate that also admits several requests of one key in one
// step (a batch's items): each is decided as Enter would decide it, one
// after the other in order.
type GroupGate interface {
	Gate
	EnterMany(ctx context.Context, hash string, requestIDs []string, now time.Time, rules LimitRules, slot bool) (Key, []Admission, error)
}

// LimitState is one key's admissions: per-second counts of the sliding
// window (second resolution, so a refusal's wait is exact to the second)
// and the in-flight slots with their leases. Both stores keep it as one
// record and change it atomically with these methods.
type LimitState struct {
	Seconds []SecondCount `json:"seconds"`
	Slots   []Slot        `json:"slots"`
}

// SecondCount is how many requests were admitted in one Unix second.
type SecondCount struct {
	Second int64 `json:"s"`
	Count  int   `json:"n"`
}

// Slot is an in-flight request and when its lease runs out.
type Slot struct {
	RequestID  string `json:"r"`
	LeaseUntil int64  `json:"l"` // Unix milliseconds
}

// Admit applies the rules at now and, when admitted, records the request
// in the window and, with slot, in an in-flight slot.
func (s *LimitState) Admit(requestID string, now time.Time, r LimitRules, slot bool) Admission {
	s.prune(now, r)
	total := 0
	for _, c := range s.Seconds {
		total += c.Count
	}
	a := Admission{RateLimit: r.Rate, Concurrency: r.Concurrency}
	windowSecs := int64(r.Window / time.Second)
	switch {
	case total >= r.Rate && len(s.Seconds) > 0:
		a.Refused = "rate"
		reset := s.reset(now, windowSecs)
		a.RetryAfter, a.RateReset = reset.Sub(now), reset
		return a
	case slot && len(s.Slots) >= r.Concurrency:
		a.Refused, a.RetryAfter = "concurrency", time.Second
		a.RateRemaining, a.RateReset = r.Rate-total, s.reset(now, windowSecs)
		return a
	}
	if sec, n := now.Unix(), len(s.Seconds); n > 0 && s.Seconds[n-1].Second == sec {
		s.Seconds[n-1].Count++
	} else {
		s.Seconds = append(s.Seconds, SecondCount{Second: sec, Count: 1})
	}
	a.Admitted = true
	a.RateRemaining, a.RateReset = r.Rate-total-1, s.reset(now, windowSecs)
	if slot {
		s.Slots = append(s.Slots, Slot{RequestID: requestID, LeaseUntil: now.Add(r.Lease).UnixMilli()})
	}
	a.SlotsFree = r.Concurrency - len(s.Slots)
	return a
}

// Take gives requestID an in-flight slot, or refuses with a one-second wait.
func (s *LimitState) Take(requestID string, now time.Time, r LimitRules) Admission {
	s.prune(now, r)
	a := Admission{RateLimit: r.Rate, Concurrency: r.Concurrency}
	if len(s.Slots) >= r.Concurrency {
		a.Refused, a.RetryAfter = "concurrency", time.Second
		return a
	}
	s.Slots = append(s.Slots, Slot{RequestID: requestID, LeaseUntil: now.Add(r.Lease).UnixMilli()})
	a.Admitted, a.SlotsFree = true, r.Concurrency-len(s.Slots)
	return a
}

// Release frees requestID's slot; it reports whether there was one.
func (s *LimitState) Release(requestID string) bool {
	for i, slot := range s.Slots {
		if slot.RequestID == requestID {
			s.Slots = append(s.Slots[:i], s.Slots[i+1:]...)
			return true
		}
	}
	return false
}

// Idle reports whether the state holds nothing live, so it may be dropped.
func (s *LimitState) Idle(now time.Time, r LimitRules) bool {
	s.prune(now, r)
	return len(s.Seconds) == 0 && len(s.Slots) == 0
}

// ExpiresAt is when the state holds nothing any more if nothing happens.
func (s *LimitState) ExpiresAt(r LimitRules) time.Time {
	var last int64
	if n := len(s.Seconds); n > 0 {
		last = (s.Seconds[n-1].Second + int64(r.Window/time.Second) + 1) * 1000
	}
	for _, slot := range s.Slots {
		last = max(last, slot.LeaseUntil)
	}
	return time.UnixMilli(last)
}

// prune drops seconds that left the window and slots whose lease ran out
// (their request died without releasing). A second stays until a whole
// window has passed since its last instant, so no request counts for less
// than a window: a second S leaves at S+window+1.
func (s *LimitState) prune(now time.Time, r LimitRules) {
	oldest := now.Unix() - int64(r.Window/time.Second) - 1 // seconds <= oldest are out
	bySecond := func(a, b SecondCount) int { return cmp.Compare(a.Second, b.Second) }
	if !slices.IsSortedFunc(s.Seconds, bySecond) { // seconds are nearly always added in order
		slices.SortFunc(s.Seconds, bySecond)
	}
	keep := s.Seconds[:0]
	for _, c := range s.Seconds {
		if c.Second > oldest {
			keep = append(keep, c)
		}
	}
	s.Seconds = keep
	live := s.Slots[:0]
	for _, slot := range s.Slots {
		if slot.LeaseUntil > now.UnixMilli() {
			live = append(live, slot)
		}
	}
	s.Slots = live
}

// reset is when the oldest counted second leaves the window.
func (s *LimitState) reset(now time.Time, windowSecs int64) time.Time {
	if len(s.Seconds) == 0 {
		return time.Unix(now.Unix()+windowSecs+1, 0)
	}
	return time.Unix(s.Seconds[0].Second+windowSecs+1, 0)
}

// MemoryLimits keeps every key's LimitState in this process. It is exact
// for a store that only one process opens (the embedded store holds its
// file's lock): no write, no fsync, no contention but a mutex.
type MemoryLimits struct {
	mu     sync.Mutex
	states map[string]*LimitState
	ops    int
}

// memorySweepEvery is how many operations pass between drops of idle states.
const memorySweepEvery = 4096

func (m *MemoryLimits) change(id string, now time.Time, rules LimitRules, fn func(*LimitState) Admission) Admission {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states == nil {
		m.states = map[string]*LimitState{}
	}
	if m.ops++; m.ops%memorySweepEvery == 0 {
		for k, st := range m.states {
			if st.Idle(now, rules) {
				delete(m.states, k)
			}
		}
	}
	st := m.states[id]
	if st == nil {
		st = &LimitState{}
		m.states[id] = st
	}
	return fn(st)
}

// Admit implements Limits.
func (m *MemoryLimits) Admit(_ context.Context, id, requestID string, now time.Time, rules LimitRules, slot bool) (Admission, error) {
	return m.change(id, now, rules, func(st *LimitState) Admission { return st.Admit(requestID, now, rules, slot) }), nil
}

// TakeSlot implements Limits.
func (m *MemoryLimits) TakeSlot(_ context.Context, id, requestID string, now time.Time, rules LimitRules) (Admission, error) {
	return m.change(id, now, rules, func(st *LimitState) Admission { return st.Take(requestID, now, rules) }), nil
}

// ReleaseSlots implements Limits.
func (m *MemoryLimits) ReleaseSlots(_ context.Context, id string, requestIDs []string, now time.Time, rules LimitRules, _ ...string) error {
	m.change(id, now, rules, func(st *LimitState) Admission {
		for _, rid := range requestIDs {
			st.Release(rid)
		}
		return Admission{}
	})
	return nil
}

var _ Limits = (*MemoryLimits)(nil)
