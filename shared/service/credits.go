package service

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/meridian-data/meridian/shared/envelope"
	"github.com/meridian-data/meridian/shared/store"
)

// The credit endpoints of spec 4.2, both free.

// balanceData is GET /v1/credits/balance; balance_changed_at is the last
// time the balance moved (RFC 3339, UTC).
type balanceData struct {
	CreditsRemaining int64     `json:"credits_remaining"`
	CreditsLifetime  int64     `json:"credits_lifetime"`
	BalanceChangedAt time.Time `json:"balance_changed_at"`
}

func balanceHandler(s store.Store) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		a, err := s.Account(ctx, c.Principal.AccountID)
		if err != nil {
			return nil, envelope.Internal()
		}
		c.CreditsRemaining = envelope.Amount(a.CreditsRemaining)
		return balanceData{a.CreditsRemaining, a.CreditsLifetime, a.BalanceChangedAt.UTC()}, nil
	}
}

// ledgerEntry is one item of GET /v1/credits/transactions.
type ledgerEntry struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Amount       int64     `json:"amount"`
	BalanceAfter int64     `json:"balance_after"`
	RequestID    string    `json:"request_id"`
	Endpoint     *string   `json:"endpoint"`
	KeyPrefix    *string   `json:"key_prefix"`
	Note         *string   `json:"note,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

type ledgerData struct {
	Items   []ledgerEntry `json:"items"`
	Count   int           `json:"count"`
	Cursor  *string       `json:"cursor"`
	HasMore bool          `json:"has_more"`
}

func transactionsHandler(s store.Store) Handler {
	return func(ctx context.Context, c *Call) (any, *envelope.Error) {
		limit, _ := strconv.Atoi(c.Values["limit"])
		return ledgerPage(ctx, s, c.Principal.AccountID, store.LedgerQuery{
			Limit: limit, Cursor: c.Values["cursor"], RequestID: c.Values["request_id"],
		})
	}
}

// ledgerPage is one page of an account's ledger, as both
// /v1/credits/transactions and the console show it.
func ledgerPage(ctx context.Context, s store.Store, accountID string, q store.LedgerQuery) (ledgerData, *envelope.Error) {
	page, err := s.Ledger(ctx, accountID, q)
	if errors.Is(err, store.ErrBadCursor) {
		return ledgerData{}, envelope.New(envelope.InvalidParameters, http.StatusUnprocessableEntity,
			"cursor is not a cursor from this ledger; pass back the value a previous page returned.",
			map[string]any{"field": "cursor", "reason": "invalid_cursor"})
	}
	if err != nil {
		return ledgerData{}, envelope.Internal()
	}
	out := ledgerData{Items: make([]ledgerEntry, 0, len(page.Entries)), Count: len(page.Entries), HasMore: page.NextCursor != ""}
	if page.NextCursor != "" {
		out.Cursor = &page.NextCursor
	}
	for _, e := range page.Entries {
		out.Items = append(out.Items, ledgerEntry{
			ID: e.ID, Type: string(e.Type), Amount: e.Amount, BalanceAfter: e.BalanceAfter, RequestID: e.RequestID,
			Endpoint: optional(e.Endpoint), KeyPrefix: optional(e.KeyPrefix), Note: optional(e.Note), CreatedAt: e.CreatedAt.UTC(),
		})
	}
	return out, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
