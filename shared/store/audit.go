package store

import (
	"context"
	"time"
)

// Reservation states, as Auditor reports them.
const (
	ReservationReserved = "reserved"
	ReservationSettled  = "settled"
	ReservationRefunded = "refunded"
)

// ReservationRecord is a reservation as stored: the charge, its state and
// the ledger entries it wrote.
type ReservationRecord struct {
	Charge
	Status        string // ReservationReserved, ReservationSettled or ReservationRefunded
	DebitEntryID  string
	RefundEntryID string // set once refunded
	LeaseUntil    time.Time
}

// Auditor reads what an audit of the books needs beyond Store: every
// reservation of an account in any state, and the in-flight slots a key's
// limits hold. No request path uses it; the soak suite's audit does.
type Auditor interface {
	// Reservations lists the account's reservations still kept (settled
	// and refunded ones age out after the store's retention).
	Reservations(ctx context.Context, accountID string) ([]ReservationRecord, error)
	// HeldSlots lists the in-flight slots recorded for a key's limits (id:
	// the key's hash, as Limits names it), expired leases included: only
	// a later write of that key removes those.
	HeldSlots(ctx context.Context, id string) ([]Slot, error)
}

// Slots lists the in-flight slots MemoryLimits holds for id, expired
// leases included.
func (m *MemoryLimits) Slots(id string) []Slot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.states[id]; st != nil {
		return append([]Slot(nil), st.Slots...)
	}
	return nil
}
