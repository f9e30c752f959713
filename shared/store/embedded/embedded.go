// Package embedded is the Store for make run: in-process, persisted in one
// bbolt file under MERIDIAN_DATA_DIR, so a restart keeps accounts, keys,
// balances and the ledger. bbolt runs one write transaction at a time,
// which makes every operation atomic without further locking.
package embedded

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meridian-data/meridian/shared/store"
)

var (
	bAccounts     = []byte("accounts")     // account id -> account
	bConsole      = []byte("console")      // console token hash -> account id
	bKeys         = []byte("keys")         // account id \x00 key id -> key (written only in updateKeys)
	bKeyHash      = []byte("keyhash")      // key hash -> account id \x00 key id
	bLedger       = []byte("ledger")       // account id \x00 entry id -> entry
	bReservations = []byte("reservations") // account id \x00 request id -> reservation
	// leases indexes the reservations still reserved by the end of their
	// lease: zero-padded lease Unix nanos \x00 account id \x00 request id -> empty.
	bLeases = []byte("leases")
)

// Store is the embedded store.
type Store struct {
	// MemoryLimits are the per-key limits (store.Limits).
	store.MemoryLimits
	db         *bolt.DB
	now        func() time.Time
	cachePuts  atomic.Int64
	recallPuts atomic.Int64
	uses       lastUses
	keys       keyMemo
	byHash     *genMemo[store.Key]
	cached     *genMemo[store.CacheEntry]
	fills      fillMarkers
}

// Open opens (or creates) dir/meridian.db.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	db, err := bolt.Open(filepath.Join(dir, "meridian.db"), 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("embedded store: %w (is another make run using %s?)", err, dir)
	}
	// A cache write lands before its answer is sent: writes that arrive
	// together share a commit (bbolt Batch), but a lone one waits for no
	// company (bbolt's 10 ms default; any timer here costs a millisecond).
	db.MaxBatchDelay = 0
	err = db.Update(func(tx *bolt.Tx) error {
		leased := tx.Bucket(bLeases) != nil
		for _, b := range [][]byte{bAccounts, bConsole, bKeys, bKeyHash, bLedger, bReservations, bLeases, bCache, bIdempotency,
			bFairUse, bOutcomes, bOutcomeMarks, bOutcomeExpiry, bOutbox, bOutboxIDs, bAllowances, bRecalls, bCanary} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if leased {
			return nil
		}
		return backfillLeases(tx)
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, now: func() time.Time { return time.Now().UTC() }, byHash: newKeysByHash(), cached: newCacheMemo()}, nil
}

// InProcess: reads are served from this process's memory map.
func (s *Store) InProcess() bool { return true }

var _ store.InProcess = (*Store)(nil)

// Close releases the file, after the last-use writes under way.
func (s *Store) Close() error {
	s.uses.writes.Wait()
	return s.db.Close()
}

type account struct {
	store.Account
	ConsoleHash string
}

type reservation struct {
	store.Charge
	Status      string // reserved, settled, refunded
	DebitEntry  string
	RefundEntry string
	CreatedAt   time.Time
	// LeaseUntil: CreatedAt + store.ReservationLease, or later once a web
	// job extended it (ExtendReservation). While the reservation is
	// reserved, bLeases holds leaseKey(LeaseUntil, ...) for it.
	LeaseUntil time.Time
}

// nanos is t as zero-padded Unix nanoseconds, so that keys sort by time.
func nanos(t time.Time) string { return fmt.Sprintf("%020d", t.UnixNano()) }

// parseNanos reads what nanos wrote.
func parseNanos(b []byte) (time.Time, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("embedded store: bad time key %q: %w", b, err)
	}
	return time.Unix(0, n).UTC(), nil
}

func leaseKey(until time.Time, accountID, requestID string) []byte {
	return []byte(nanos(until) + "\x00" + accountID + "\x00" + requestID)
}

// endLease takes a reservation that leaves the reserved state out of bLeases.
func endLease(tx *bolt.Tx, r reservation) error {
	if r.LeaseUntil.IsZero() {
		return nil
	}
	return tx.Bucket(bLeases).Delete(leaseKey(r.LeaseUntil, r.AccountID, r.RequestID))
}

// backfillLeases gives the reserved reservations of a file written before
// leases existed their lease (from CreatedAt), once, when bLeases is new.
func backfillLeases(tx *bolt.Tx) error {
	b := tx.Bucket(bReservations)
	var keys [][]byte
	var found []reservation
	err := b.ForEach(func(k, v []byte) error {
		var r reservation
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if r.Status == "reserved" && r.LeaseUntil.IsZero() {
			keys, found = append(keys, append([]byte{}, k...)), append(found, r)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, r := range found {
		r.LeaseUntil = r.CreatedAt.Add(store.ReservationLease)
		if err := put(b, keys[i], r); err != nil {
			return err
		}
		if err := tx.Bucket(bLeases).Put(leaseKey(r.LeaseUntil, r.AccountID, r.RequestID), []byte{}); err != nil {
			return err
		}
	}
	return nil
}

func join(a, b string) []byte { return []byte(a + "\x00" + b) }

func get[T any](b *bolt.Bucket, key []byte) (T, error) {
	var v T
	raw := b.Get(key)
	if raw == nil {
		return v, store.ErrNotFound
	}
	return v, json.Unmarshal(raw, &v)
}

func put(b *bolt.Bucket, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(fn)
}

// updateKeys is update for a transaction that may write key records: once
// it has committed (or failed), KeyByHash reads them afresh.
func (s *Store) updateKeys(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	defer s.byHash.moved()
	return s.update(ctx, fn)
}

func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// appendEntry writes a ledger entry and moves the account's balance by its amount.
func (s *Store) appendEntry(tx *bolt.Tx, a *account, e store.Entry) (store.Entry, error) {
	a.CreditsRemaining += e.Amount
	if e.Type == store.EntryGrant {
		a.CreditsLifetime += e.Amount
	}
	a.BalanceChangedAt = e.CreatedAt
	e.ID, e.AccountID, e.BalanceAfter = store.NewEntryID(), a.ID, a.CreditsRemaining
	if err := put(tx.Bucket(bAccounts), []byte(a.ID), a); err != nil {
		return e, err
	}
	return e, put(tx.Bucket(bLedger), join(a.ID, e.ID), e)
}

func (s *Store) CreateAccount(ctx context.Context, credits int64, consoleTokenHash, requestID string) (store.Account, error) {
	if credits < 0 || consoleTokenHash == "" {
		return store.Account{}, store.ErrInvalid
	}
	if credits > store.MaxCredits {
		return store.Account{}, store.ErrCreditCeiling
	}
	now := s.now()
	a := account{Account: store.Account{ID: store.NewAccountID(), CreatedAt: now, BalanceChangedAt: now}, ConsoleHash: consoleTokenHash}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bConsole).Get([]byte(consoleTokenHash)) != nil {
			return errors.New("embedded store: console token already in use")
		}
		if err := tx.Bucket(bConsole).Put([]byte(consoleTokenHash), []byte(a.ID)); err != nil {
			return err
		}
		if err := put(tx.Bucket(bAccounts), []byte(a.ID), a); err != nil {
			return err
		}
		if credits == 0 {
			return nil
		}
		_, err := s.appendEntry(tx, &a, store.Entry{Type: store.EntryGrant, Amount: credits, Note: "opening balance", RequestID: requestID, CreatedAt: now})
		return err
	})
	return a.Account, err
}

func (s *Store) Account(ctx context.Context, accountID string) (store.Account, error) {
	var a account
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		a, err = get[account](tx.Bucket(bAccounts), []byte(accountID))
		return err
	})
	return a.Account, err
}

func (s *Store) AccountByConsoleToken(ctx context.Context, tokenHash string) (store.Account, error) {
	var a account
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		id := tx.Bucket(bConsole).Get([]byte(tokenHash))
		if id == nil {
			return store.ErrNotFound
		}
		a, err = get[account](tx.Bucket(bAccounts), id)
		return err
	})
	return a.Account, err
}

func (s *Store) Grant(ctx context.Context, accountID string, amount int64, note, requestID string) (store.Account, error) {
	if amount <= 0 {
		return store.Account{}, store.ErrInvalid
	}
	var a account
	err := s.update(ctx, func(tx *bolt.Tx) (err error) {
		if a, err = get[account](tx.Bucket(bAccounts), []byte(accountID)); err != nil {
			return err
		}
		if a.CreditsRemaining > store.MaxCredits-amount {
			return store.ErrCreditCeiling
		}
		_, err = s.appendEntry(tx, &a, store.Entry{Type: store.EntryGrant, Amount: amount, Note: note, RequestID: requestID, CreatedAt: s.now()})
		return err
	})
	return a.Account, err
}

func (s *Store) CreateKey(ctx context.Context, k store.Key) (store.Key, error) {
	return s.createKey(ctx, k, false)
}

func (s *Store) CreateFirstKey(ctx context.Context, k store.Key) (store.Key, error) {
	return s.createKey(ctx, k, true)
}

func (s *Store) createKey(ctx context.Context, k store.Key, first bool) (store.Key, error) {
	if k.AccountID == "" || k.Hash == "" || (k.CreditLimit != nil && *k.CreditLimit < 0) {
		return store.Key{}, store.ErrInvalid
	}
	err := s.updateKeys(ctx, func(tx *bolt.Tx) error {
		a, err := get[account](tx.Bucket(bAccounts), []byte(k.AccountID))
		if err != nil {
			return err
		}
		if first && a.KeysCreated > 0 {
			return store.ErrHasKeys
		}
		if a.ActiveKeys >= store.MaxActiveKeys {
			return store.ErrTooManyKeys
		}
		if tx.Bucket(bKeyHash).Get([]byte(k.Hash)) != nil {
			return errors.New("embedded store: key hash already stored")
		}
		now := s.now()
		if k.ID == "" {
			k.ID = store.NewKeyID()
		}
		k.Status, k.CreditsUsed, k.CreatedAt, k.UpdatedAt = store.KeyActive, 0, now, now
		a.ActiveKeys++
		a.KeysCreated++
		if err := put(tx.Bucket(bAccounts), []byte(a.ID), a); err != nil {
			return err
		}
		if err := tx.Bucket(bKeyHash).Put([]byte(k.Hash), join(k.AccountID, k.ID)); err != nil {
			return err
		}
		return put(tx.Bucket(bKeys), join(k.AccountID, k.ID), k)
	})
	return k, err
}

func (s *Store) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	if err := ctx.Err(); err != nil {
		return store.Key{}, err
	}
	gen := s.byHash.gen.Load()
	if k, ok := s.byHash.get(hash, gen); ok {
		return k, nil
	}
	var k store.Key
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		ref := tx.Bucket(bKeyHash).Get([]byte(hash))
		if ref == nil {
			return store.ErrNotFound
		}
		k, err = s.readKey(tx, ref)
		return err
	})
	if err == nil {
		s.byHash.keep(hash, gen, k)
	}
	return k, err
}

// readKey reads the key stored under id in bKeys.
func (s *Store) readKey(tx *bolt.Tx, id []byte) (store.Key, error) {
	raw := tx.Bucket(bKeys).Get(id)
	if raw == nil {
		return store.Key{}, store.ErrNotFound
	}
	return s.keys.decode(id, raw)
}

func (s *Store) Key(ctx context.Context, accountID, keyID string) (store.Key, error) {
	var k store.Key
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		k, err = s.readKey(tx, join(accountID, keyID))
		return err
	})
	return k, err
}

func (s *Store) Keys(ctx context.Context, accountID string) ([]store.Key, error) {
	keys := []store.Key{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		prefix := join(accountID, "")
		c := tx.Bucket(bKeys).Cursor()
		for raw, v := c.Seek(prefix); raw != nil && bytes.HasPrefix(raw, prefix); raw, v = c.Next() {
			var k store.Key
			if err := json.Unmarshal(v, &k); err != nil {
				return err
			}
			if k.Status != store.KeyDeleted {
				keys = append(keys, k)
			}
		}
		return nil
	})
	sort.SliceStable(keys, func(i, j int) bool {
		if !keys[i].CreatedAt.Equal(keys[j].CreatedAt) {
			return keys[i].CreatedAt.Before(keys[j].CreatedAt)
		}
		return keys[i].ID < keys[j].ID
	})
	if err != nil {
		return nil, err
	}
	return keys, s.fillLastUsed(ctx, keys)
}

// changeKey loads a key and its account inside a write transaction, lets
// fn edit them, and stores both.
func (s *Store) changeKey(ctx context.Context, accountID, keyID string, fn func(a *account, k *store.Key) error) (store.Key, error) {
	var k store.Key
	err := s.updateKeys(ctx, func(tx *bolt.Tx) (err error) {
		if k, err = get[store.Key](tx.Bucket(bKeys), join(accountID, keyID)); err != nil {
			return err
		}
		a, err := get[account](tx.Bucket(bAccounts), []byte(accountID))
		if err != nil {
			return err
		}
		if k.Status == store.KeyDeleted {
			return store.ErrKeyDeleted
		}
		if err := fn(&a, &k); err != nil {
			return err
		}
		k.UpdatedAt = s.now()
		if err := put(tx.Bucket(bAccounts), []byte(a.ID), a); err != nil {
			return err
		}
		return put(tx.Bucket(bKeys), join(accountID, keyID), k)
	})
	return k, err
}

func (s *Store) SetKeyStatus(ctx context.Context, accountID, keyID string, to store.KeyStatus) (store.Key, error) {
	return s.changeKey(ctx, accountID, keyID, func(a *account, k *store.Key) error {
		switch {
		case k.Status == to:
			return nil
		case to == store.KeyActive:
			if a.ActiveKeys >= store.MaxActiveKeys {
				return store.ErrTooManyKeys
			}
			a.ActiveKeys++
		case to == store.KeyRevoked || to == store.KeyDeleted:
			if k.Status == store.KeyActive {
				a.ActiveKeys--
			}
		default:
			return fmt.Errorf("embedded store: unknown status %q", to)
		}
		k.Status = to
		return nil
	})
}

func (s *Store) UpdateKey(ctx context.Context, accountID, keyID string, c store.KeyChange) (store.Key, error) {
	if c.SetLimit && c.CreditLimit != nil && *c.CreditLimit < 0 {
		return store.Key{}, store.ErrInvalid
	}
	return s.changeKey(ctx, accountID, keyID, func(_ *account, k *store.Key) error {
		if c.Name != nil {
			k.Name = *c.Name
		}
		if c.SetLimit {
			k.CreditLimit = c.CreditLimit
		}
		return nil
	})
}

func (s *Store) Reserve(ctx context.Context, c store.Charge) (store.Reservation, error) {
	return store.FirstReserved(s.ReserveMany(ctx, []store.Charge{c}))
}

// ReserveMany decides and writes every charge of the group in one bbolt
// transaction, in order.
func (s *Store) ReserveMany(ctx context.Context, charges []store.Charge) ([]store.Reserved, error) {
	out, err := store.CheckGroup(charges)
	if err != nil {
		return nil, err
	}
	err = s.updateKeys(ctx, func(tx *bolt.Tx) error {
		now := s.now()
		for i := range out {
			if out[i].Err != nil {
				continue
			}
			r, refused, failed := s.reserveIn(tx, out[i].Charge, now)
			if failed != nil {
				return failed
			}
			if out[i].Err = refused; refused == nil {
				out[i].Reservation = r
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// reserveIn decides one charge inside tx and writes it: a refusal is
// returned as refused with nothing written; failed aborts the transaction.
func (s *Store) reserveIn(tx *bolt.Tx, c store.Charge, now time.Time) (res store.Reservation, refused, failed error) {
	resKey := join(c.AccountID, c.RequestID)
	if tx.Bucket(bReservations).Get(resKey) != nil {
		return res, store.ErrDuplicateRequest, nil
	}
	k, err := get[store.Key](tx.Bucket(bKeys), join(c.AccountID, c.KeyID))
	if errors.Is(err, store.ErrNotFound) {
		return res, err, nil
	} else if err != nil {
		return res, nil, err
	}
	if k.Status != store.KeyActive {
		return res, store.ErrKeyInactive, nil
	}
	if k.CreditLimit != nil && k.CreditsUsed+c.Cost > *k.CreditLimit {
		return res, &store.KeyLimitError{CreditLimit: *k.CreditLimit, CreditsUsed: k.CreditsUsed}, nil
	}
	a, err := get[account](tx.Bucket(bAccounts), []byte(c.AccountID))
	if errors.Is(err, store.ErrNotFound) {
		return res, err, nil
	} else if err != nil {
		return res, nil, err
	}
	if a.CreditsRemaining < c.Cost {
		return res, &store.InsufficientCreditsError{Required: c.Cost, Remaining: a.CreditsRemaining}, nil
	}
	k.CreditsUsed += c.Cost
	if err := put(tx.Bucket(bKeys), join(k.AccountID, k.ID), k); err != nil {
		return res, nil, err
	}
	e, err := s.appendEntry(tx, &a, store.Entry{Type: store.EntryDebit, Amount: -c.Cost, RequestID: c.RequestID,
		Endpoint: c.Endpoint, KeyID: c.KeyID, KeyPrefix: c.KeyPrefix, CreatedAt: now})
	if err != nil {
		return res, nil, err
	}
	res = store.Reservation{Charge: c, CreditsRemaining: a.CreditsRemaining, DebitEntryID: e.ID}
	lease := now.Add(store.ReservationLease)
	if err := tx.Bucket(bLeases).Put(leaseKey(lease, c.AccountID, c.RequestID), []byte{}); err != nil {
		return res, nil, err
	}
	return res, nil, put(tx.Bucket(bReservations), resKey, reservation{Charge: c, Status: "reserved", DebitEntry: e.ID, CreatedAt: now, LeaseUntil: lease})
}

func (s *Store) Settle(ctx context.Context, accountID, requestID string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		key := join(accountID, requestID)
		r, err := get[reservation](tx.Bucket(bReservations), key)
		if err != nil {
			return err
		}
		switch r.Status {
		case "settled":
			return nil
		case "refunded":
			return store.ErrRefunded
		}
		r.Status = "settled"
		if err := endLease(tx, r); err != nil {
			return err
		}
		return put(tx.Bucket(bReservations), key, r)
	})
}

func (s *Store) Refund(ctx context.Context, accountID, requestID string) (int64, error) {
	return s.refund(ctx, accountID, requestID, time.Time{})
}

// RefundExpired refunds only a reservation whose lease ended by now; the
// check and the refund are one transaction.
func (s *Store) RefundExpired(ctx context.Context, accountID, requestID string, now time.Time) (int64, error) {
	if now.IsZero() {
		return 0, store.ErrInvalid
	}
	return s.refund(ctx, accountID, requestID, now)
}

// ExtendReservation moves a reserved reservation's lease (and its bLeases
// key) to until, unless it already ends later.
func (s *Store) ExtendReservation(ctx context.Context, accountID, requestID string, until time.Time) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		key := join(accountID, requestID)
		r, err := get[reservation](tx.Bucket(bReservations), key)
		if err != nil {
			return err
		}
		switch r.Status {
		case "settled":
			return store.ErrSettled
		case "refunded":
			return store.ErrRefunded
		}
		if !until.After(r.LeaseUntil) {
			return nil
		}
		if err := endLease(tx, r); err != nil {
			return err
		}
		r.LeaseUntil = until.UTC()
		if err := tx.Bucket(bLeases).Put(leaseKey(r.LeaseUntil, accountID, requestID), []byte{}); err != nil {
			return err
		}
		return put(tx.Bucket(bReservations), key, r)
	})
}

// refund is Refund, or with a non-zero expiredBy RefundExpired.
func (s *Store) refund(ctx context.Context, accountID, requestID string, expiredBy time.Time) (int64, error) {
	var balance int64
	err := s.updateKeys(ctx, func(tx *bolt.Tx) error {
		key := join(accountID, requestID)
		r, err := get[reservation](tx.Bucket(bReservations), key)
		if err != nil {
			return err
		}
		a, err := get[account](tx.Bucket(bAccounts), []byte(accountID))
		if err != nil {
			return err
		}
		balance = a.CreditsRemaining
		switch r.Status {
		case "refunded":
			return nil
		case "settled":
			return store.ErrSettled
		}
		if !expiredBy.IsZero() && r.LeaseUntil.After(expiredBy) {
			return store.ErrLeaseHeld
		}
		k, err := get[store.Key](tx.Bucket(bKeys), join(accountID, r.KeyID))
		if err != nil {
			return err
		}
		k.CreditsUsed -= r.Cost
		if err := put(tx.Bucket(bKeys), join(accountID, k.ID), k); err != nil {
			return err
		}
		e, err := s.appendEntry(tx, &a, store.Entry{Type: store.EntryRefund, Amount: r.Cost, RequestID: requestID,
			Endpoint: r.Endpoint, KeyID: r.KeyID, KeyPrefix: r.KeyPrefix, CreatedAt: s.now()})
		if err != nil {
			return err
		}
		balance = a.CreditsRemaining
		r.Status, r.RefundEntry = "refunded", e.ID
		if err := endLease(tx, r); err != nil {
			return err
		}
		return put(tx.Bucket(bReservations), key, r)
	})
	return balance, err
}

func (s *Store) Ledger(ctx context.Context, accountID string, q store.LedgerQuery) (store.LedgerPage, error) {
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = 20
	case limit > 100:
		limit = 100
	}
	prefix := join(accountID, "")
	start := append(append([]byte{}, prefix...), 0xff) // past the last entry of the account
	if q.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		if err != nil || !bytes.HasPrefix(raw, prefix) {
			return store.LedgerPage{}, store.ErrBadCursor
		}
		start = raw
	}
	page := store.LedgerPage{Entries: []store.Entry{}}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bLedger).Cursor()
		k, v := before(c, start)
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			var e store.Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if q.RequestID != "" && e.RequestID != q.RequestID {
				continue
			}
			if len(page.Entries) == limit {
				page.NextCursor = base64.RawURLEncoding.EncodeToString(join(accountID, page.Entries[limit-1].ID))
				return nil
			}
			page.Entries = append(page.Entries, e)
		}
		return nil
	})
	return page, err
}

// ExpiredReservations reads bLeases from its oldest lease: every key
// there is a reservation still reserved.
func (s *Store) ExpiredReservations(ctx context.Context, now time.Time, limit int) ([]store.ReservationRef, error) {
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	refs := []store.ReservationRef{}
	end := nanos(now)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bLeases).Cursor()
		for k, _ := c.First(); k != nil && len(refs) < limit; k, _ = c.Next() {
			parts := strings.SplitN(string(k), "\x00", 3)
			if len(parts) != 3 {
				return fmt.Errorf("embedded store: bad lease key %q", k)
			}
			if parts[0] > end {
				break
			}
			until, err := parseNanos([]byte(parts[0]))
			if err != nil {
				return err
			}
			refs = append(refs, store.ReservationRef{AccountID: parts[1], RequestID: parts[2], LeaseUntil: until})
		}
		return nil
	})
	return refs, err
}

var _ store.Store = (*Store)(nil)

var bCache = []byte("cache") // cache key -> entry (encodeCacheEntry)

// cacheEntryV1 starts a cache entry in the binary form: the version byte,
// StoredAt and ExpiresAt as Unix nanoseconds (big-endian), then the data
// as it is. Entries written as JSON before it (starting with '{') are
// still read.
const cacheEntryV1 = 1

func encodeCacheEntry(e store.CacheEntry) []byte {
	out := make([]byte, 17, 17+len(e.Data))
	out[0] = cacheEntryV1
	binary.BigEndian.PutUint64(out[1:9], uint64(e.StoredAt.UnixNano()))
	binary.BigEndian.PutUint64(out[9:17], uint64(e.ExpiresAt.UnixNano()))
	return append(out, e.Data...)
}

// decodeCacheEntry reads an entry; its Data is a copy, since bbolt's
// bytes live only as long as the transaction.
func decodeCacheEntry(raw []byte) (store.CacheEntry, error) {
	var e store.CacheEntry
	if len(raw) > 0 && raw[0] == '{' {
		return e, json.Unmarshal(raw, &e)
	}
	if len(raw) < 17 || raw[0] != cacheEntryV1 {
		return e, fmt.Errorf("embedded: cache entry of unknown form (%d bytes)", len(raw))
	}
	e.StoredAt, e.ExpiresAt = unixNanos(raw[1:9]), unixNanos(raw[9:17])
	e.Data = bytes.Clone(raw[17:])
	return e, nil
}

// unixNanos reads a big-endian Unix time in nanoseconds.
func unixNanos(b []byte) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC() }

// cacheEntryExpiry is an entry's ExpiresAt, without copying its data;
// false when the entry cannot be read.
func cacheEntryExpiry(raw []byte) (time.Time, bool) {
	if len(raw) >= 17 && raw[0] == cacheEntryV1 {
		return unixNanos(raw[9:17]), true
	}
	e, err := decodeCacheEntry(raw)
	return e.ExpiresAt, err == nil
}

func (s *Store) CacheGet(ctx context.Context, key string, now time.Time) (store.CacheEntry, error) {
	if err := ctx.Err(); err != nil {
		return store.CacheEntry{}, err
	}
	gen := s.cached.gen.Load()
	if e, ok := s.cached.get(key, gen); ok && now.Before(e.ExpiresAt) {
		return e, nil
	}
	var e store.CacheEntry
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		raw := tx.Bucket(bCache).Get([]byte(key))
		if raw == nil {
			return store.ErrNotFound
		}
		if e, err = decodeCacheEntry(raw); err == nil && !now.Before(e.ExpiresAt) {
			err = store.ErrNotFound
		}
		return err
	})
	if err == nil {
		s.cached.keep(key, gen, e)
	}
	return e, err
}

func (s *Store) CachePut(ctx context.Context, key string, data []byte, now, expiresAt time.Time) error {
	if len(data) > store.MaxCachedBytes || !expiresAt.After(now) {
		return store.ErrInvalid
	}
	sweep := s.cachePuts.Add(1)%256 == 0
	if err := ctx.Err(); err != nil {
		return err
	}
	entry := encodeCacheEntry(store.CacheEntry{Data: data, StoredAt: now, ExpiresAt: expiresAt})
	// Grouped with concurrent cache writes into one commit (bbolt Batch):
	// a cache entry is not money, and the function may run twice.
	defer s.cached.moved()
	return s.db.Batch(func(tx *bolt.Tx) error {
		b := tx.Bucket(bCache)
		// Every 256th put drops what has expired (or cannot be read), so
		// the file does not grow for ever.
		c := b.Cursor()
		for k, v := c.First(); sweep && k != nil; k, v = c.Next() {
			if until, ok := cacheEntryExpiry(v); !ok || !now.Before(until) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return b.Put([]byte(key), entry)
	})
}

var _ store.Cache = (*Store)(nil)

var bIdempotency = []byte("idempotency") // account id \x00 key -> record

func (s *Store) ClaimIdempotency(ctx context.Context, accountID, key, fingerprint, requestID string, now, leaseUntil, expiresAt time.Time) (store.IdempotencyRecord, bool, error) {
	var rec store.IdempotencyRecord
	var claimed bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bIdempotency)
		old, err := get[store.IdempotencyRecord](b, join(accountID, key))
		live := err == nil && now.Before(old.ExpiresAt) && (old.State == store.IdemStored || now.Before(old.LeaseUntil))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if live {
			rec = old
			return nil
		}
		rec = store.IdempotencyRecord{Fingerprint: fingerprint, RequestID: requestID, State: store.IdemInProgress, LeaseUntil: leaseUntil, ExpiresAt: expiresAt}
		claimed = true
		return put(b, join(accountID, key), rec)
	})
	return rec, claimed, err
}

func (s *Store) CompleteIdempotency(ctx context.Context, accountID, key, requestID string, status int, body []byte, expiresAt time.Time) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bIdempotency)
		rec, err := get[store.IdempotencyRecord](b, join(accountID, key))
		if err != nil {
			return err
		}
		if rec.RequestID != requestID || rec.State != store.IdemInProgress {
			return store.ErrNotFound // another request took the key over
		}
		rec.State, rec.Status, rec.Body, rec.ExpiresAt = store.IdemStored, status, body, expiresAt
		return put(b, join(accountID, key), rec)
	})
}

func (s *Store) ReleaseIdempotency(ctx context.Context, accountID, key, requestID string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bIdempotency)
		rec, err := get[store.IdempotencyRecord](b, join(accountID, key))
		if err != nil || rec.RequestID != requestID || rec.State != store.IdemInProgress {
			return nil // nothing of ours to free
		}
		return b.Delete(join(accountID, key))
	})
}

var _ store.Idempotency = (*Store)(nil)

// Enter reads the key by its hash and admits the request under its
// limits, which live in this process (store.MemoryLimits): the store is
// opened by one process only, so they need no write.
func (s *Store) Enter(ctx context.Context, hash, requestID string, now time.Time, rules store.LimitRules, slot bool) (store.Key, store.Admission, error) {
	k, err := s.KeyByHash(ctx, hash)
	if err != nil {
		return store.Key{}, store.Admission{}, err
	}
	if k.Status != store.KeyActive {
		return store.Key{}, store.Admission{}, store.ErrKeyInactive
	}
	s.noteUse(k, now)
	a, err := s.Admit(ctx, hash, requestID, now, rules, slot)
	return k, a, err
}

// EnterMany is Enter of several requests: one key lookup, admissions in
// order (the limits live in memory).
func (s *Store) EnterMany(ctx context.Context, hash string, requestIDs []string, now time.Time, rules store.LimitRules, slot bool) (store.Key, []store.Admission, error) {
	if len(requestIDs) == 0 {
		return store.Key{}, nil, store.ErrInvalid
	}
	k, err := s.KeyByHash(ctx, hash)
	if err != nil {
		return store.Key{}, nil, err
	}
	if k.Status != store.KeyActive {
		return store.Key{}, nil, store.ErrKeyInactive
	}
	s.noteUse(k, now)
	as := make([]store.Admission, len(requestIDs))
	for i, rid := range requestIDs {
		if as[i], err = s.Admit(ctx, hash, rid, now, rules, slot); err != nil {
			return store.Key{}, nil, err
		}
	}
	return k, as, nil
}

var _ store.GroupGate = (*Store)(nil)

var _ store.Limits = (*Store)(nil)

var bFairUse = []byte("fairuse") // account id \x00 endpoint -> state

func (s *Store) FairUseUsed(ctx context.Context, accountID, endpoint string, now time.Time) (int64, error) {
	var used int64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		st, err := get[store.FairUseState](tx.Bucket(bFairUse), join(accountID, endpoint))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		used = st.Used(now)
		return err
	})
	return used, err
}

func (s *Store) AddFairUse(ctx context.Context, accountID, endpoint string, attempts int64, now time.Time) (int64, error) {
	var total int64
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bFairUse)
		st, err := get[store.FairUseState](b, join(accountID, endpoint))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		total = st.Add(attempts, now)
		return put(b, join(accountID, endpoint), st)
	})
	return total, err
}

var _ store.FairUse = (*Store)(nil)

var bAllowances = []byte("allowances") // provider name \x00 month -> allowanceCount

type allowanceCount struct {
	N         int64     `json:"n"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TakeAllowance checks and counts in one write transaction, so concurrent
// takes never pass the limit.
func (s *Store) TakeAllowance(ctx context.Context, name, month string, limit int64, now time.Time) (int64, bool, error) {
	exp, err := store.CheckAllowance(name, month, limit, now)
	if err != nil {
		return 0, false, err
	}
	var used int64
	var ok bool
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bAllowances)
		c, err := get[allowanceCount](b, join(name, month))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if used = c.N; used >= limit {
			return nil
		}
		used, ok = used+1, true
		return put(b, join(name, month), allowanceCount{N: used, ExpiresAt: exp})
	})
	if err != nil {
		return 0, false, err
	}
	return used, ok, nil
}

func (s *Store) AllowanceUsed(ctx context.Context, name, month string, now time.Time) (int64, error) {
	exp, err := store.AllowanceExpiry(month)
	if err != nil || name == "" {
		return 0, store.ErrInvalid
	}
	if !now.Before(exp) {
		return 0, nil
	}
	var used int64
	err = s.view(ctx, func(tx *bolt.Tx) error {
		c, err := get[allowanceCount](tx.Bucket(bAllowances), join(name, month))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		used = c.N
		return err
	})
	return used, err
}

var _ store.Allowances = (*Store)(nil)

var (
	// bOutbox holds the messages, oldest first: zero-padded CreatedAt Unix
	// nanos \x00 message id -> message; bOutboxIDs finds them by id:
	// message id -> its key in bOutbox.
	bOutbox    = []byte("outbox")
	bOutboxIDs = []byte("outboxids")
)

func outboxKey(m store.OutboxMessage) []byte { return []byte(nanos(m.CreatedAt) + "\x00" + m.ID) }

// outboxExpired: a message kept past store.OutboxRetention is dropped.
func outboxExpired(key []byte, now time.Time) bool {
	created, _, _ := strings.Cut(string(key), "\x00")
	return created <= nanos(now.Add(-store.OutboxRetention))
}

// PutOutbox stores the messages whose id is not stored yet (a message
// without CreatedAt is created now), and drops the ones past retention.
func (s *Store) PutOutbox(ctx context.Context, msgs []store.OutboxMessage) error {
	for _, m := range msgs {
		if m.ID == "" {
			return store.ErrInvalid
		}
	}
	now := s.now()
	return s.update(ctx, func(tx *bolt.Tx) error {
		box, ids := tx.Bucket(bOutbox), tx.Bucket(bOutboxIDs)
		c := box.Cursor()
		for k, v := c.First(); k != nil && outboxExpired(k, now); k, v = c.First() {
			var old store.OutboxMessage
			if err := json.Unmarshal(v, &old); err != nil {
				return err
			}
			if err := c.Delete(); err != nil {
				return err
			}
			if err := ids.Delete([]byte(old.ID)); err != nil {
				return err
			}
		}
		for _, m := range msgs {
			if ids.Get([]byte(m.ID)) != nil {
				continue // kept once
			}
			if m.CreatedAt.IsZero() {
				m.CreatedAt = now
			}
			m.CreatedAt = m.CreatedAt.UTC()
			key := outboxKey(m)
			if outboxExpired(key, now) {
				continue
			}
			if err := put(box, key, m); err != nil {
				return err
			}
			if err := ids.Put([]byte(m.ID), key); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) OutboxBatch(ctx context.Context, limit int) ([]store.OutboxMessage, error) {
	if limit <= 0 {
		return nil, store.ErrInvalid
	}
	now := s.now()
	out := []store.OutboxMessage{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bOutbox).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			if outboxExpired(k, now) {
				continue
			}
			var m store.OutboxMessage
			if err := json.Unmarshal(v, &m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

func (s *Store) DeleteOutbox(ctx context.Context, ids []string) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		box, byID := tx.Bucket(bOutbox), tx.Bucket(bOutboxIDs)
		for _, id := range ids {
			key := byID.Get([]byte(id))
			if key == nil {
				continue
			}
			if err := box.Delete(append([]byte{}, key...)); err != nil {
				return err
			}
			if err := byID.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

var _ store.Outbox = (*Store)(nil)

var bRecalls = []byte("recalls") // recall id -> recall

func (s *Store) PutRecall(ctx context.Context, r store.Recall) error {
	if err := store.CheckRecall(r); err != nil {
		return err
	}
	sweep := s.recallPuts.Add(1)%64 == 0
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bRecalls)
		if b.Get([]byte(r.ID)) != nil {
			return store.ErrRecallExists
		}
		// Every 64th put drops what has expired, so the file does not grow for ever.
		c := b.Cursor()
		for k, v := c.First(); sweep && k != nil; k, v = c.Next() {
			var old store.Recall
			if json.Unmarshal(v, &old) == nil && !r.CreatedAt.Before(old.ExpiresAt) {
				if err := c.Delete(); err != nil {
					return err
				}
			}
		}
		return put(b, []byte(r.ID), r)
	})
}

func (s *Store) GetRecall(ctx context.Context, id, accountID string, now time.Time) (store.Recall, error) {
	var r store.Recall
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		r, err = get[store.Recall](tx.Bucket(bRecalls), []byte(id))
		if err == nil && (r.AccountID != accountID || !now.Before(r.ExpiresAt)) {
			r, err = store.Recall{}, store.ErrNotFound
		}
		return err
	})
	return r, err
}

var _ store.Recalls = (*Store)(nil)

// before positions c on the last key before start (newest-first paging
// from a cursor); nil when there is none.
func before(c *bolt.Cursor, start []byte) (k, v []byte) {
	k, v = c.Seek(start)
	if k == nil {
		k, v = c.Last()
	}
	// Seek lands on start or after it; step back to the first key before it.
	for k != nil && bytes.Compare(k, start) >= 0 {
		k, v = c.Prev()
	}
	return k, v
}

var bCanary = []byte("canary") // run time (store.CanaryRunTimeFormat) -> report

func (s *Store) RecordCanaryRun(ctx context.Context, r store.CanaryRun) error {
	if err := store.CheckCanaryRun(r); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bCanary)
		// Runs past the retention go as new ones come.
		cutoff := []byte(r.At.Add(-store.CanaryRetention).UTC().Format(store.CanaryRunTimeFormat))
		c := b.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = c.Next() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return b.Put([]byte(r.At.UTC().Format(store.CanaryRunTimeFormat)), bytes.Clone(r.Report))
	})
}

func (s *Store) CanaryRuns(ctx context.Context, limit int, now time.Time) ([]store.CanaryRun, error) {
	var runs []store.CanaryRun
	from := []byte(now.Add(-store.CanaryRetention).UTC().Format(store.CanaryRunTimeFormat))
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bCanary).Cursor()
		for k, v := c.Last(); k != nil && len(runs) < limit && bytes.Compare(k, from) >= 0; k, v = c.Prev() {
			at, err := time.Parse(store.CanaryRunTimeFormat, string(k))
			if err != nil {
				return err
			}
			runs = append(runs, store.CanaryRun{At: at, Report: bytes.Clone(v)})
		}
		return nil
	})
	return runs, err
}

var _ store.CanaryLog = (*Store)(nil)
