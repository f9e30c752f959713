package embedded

import (
	"bytes"
	"context"
	"encoding/json"

	bolt "go.etcd.io/bbolt"

	"github.com/meridian-data/meridian/shared/store"
)

// Reservations implements store.Auditor: the account's reservations, by
// request id.
func (s *Store) Reservations(ctx context.Context, accountID string) ([]store.ReservationRecord, error) {
	var out []store.ReservationRecord
	prefix := join(accountID, "")
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bReservations).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r reservation
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			out = append(out, store.ReservationRecord{Charge: r.Charge, Status: r.Status, DebitEntryID: r.DebitEntry,
				RefundEntryID: r.RefundEntry, LeaseUntil: r.LeaseUntil})
		}
		return nil
	})
	return out, err
}

// HeldSlots implements store.Auditor: the limits live in this process.
func (s *Store) HeldSlots(_ context.Context, id string) ([]store.Slot, error) {
	return s.MemoryLimits.Slots(id), nil
}

var _ store.Auditor = (*Store)(nil)
