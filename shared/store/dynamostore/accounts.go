package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/meridian-data/meridian/shared/store"
)

// ErrConsoleTokenInUse: CreateAccount with a console token hash that
// already opens another account.
var ErrConsoleTokenInUse = errors.New("dynamostore: console token already in use")

// CreateAccount writes the account, its console lookup and (when credits
// > 0) the opening grant naming requestID in one transaction.
func (s *Store) CreateAccount(ctx context.Context, credits int64, consoleTokenHash, requestID string) (store.Account, error) {
	if credits < 0 {
		return store.Account{}, errors.New("dynamostore: negative credits")
	}
	if credits > store.MaxCredits {
		return store.Account{}, store.ErrCreditCeiling
	}
	if consoleTokenHash == "" {
		return store.Account{}, errors.New("dynamostore: empty console token hash")
	}
	now := s.now()
	a := accountItem{
		PK: accountPK(store.NewAccountID()), SK: skAccount,
		Balance: credits, Lifetime: credits, BalanceChangedAt: now, CreatedAt: now, ConsoleHash: consoleTokenHash,
	}
	acct, err := marshal(a)
	if err != nil {
		return store.Account{}, err
	}
	console, err := marshal(consoleItem{PK: pfxConsole + consoleTokenHash, SK: skConsole, AccountID: a.account().ID})
	if err != nil {
		return store.Account{}, err
	}
	items := []types.TransactWriteItem{putNew(s, acct), putNew(s, console)}
	if credits > 0 {
		grant, err := marshal(ledgerItem{
			PK: a.PK, SK: pfxLedger + store.NewEntryID(), Type: string(store.EntryGrant),
			Amount: credits, BalanceAfter: credits, Note: "opening balance", RequestID: requestID, CreatedAt: now,
		})
		if err != nil {
			return store.Account{}, err
		}
		items = append(items, putNew(s, grant))
	}
	for attempt := 0; ; attempt++ {
		c, err := s.transact(ctx, items)
		if err != nil {
			return store.Account{}, err
		}
		if c == nil {
			return a.account(), nil
		}
		if bad, _ := c.failed(1); bad {
			return store.Account{}, ErrConsoleTokenInUse
		}
		if bad, _ := c.failed(0); bad {
			return store.Account{}, errors.New("dynamostore: account id collision")
		}
		if bad, _ := c.failed(2); bad {
			return store.Account{}, errors.New("dynamostore: ledger entry id collision")
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Account{}, err
		}
	}
}

func (s *Store) Account(ctx context.Context, accountID string) (store.Account, error) {
	a, err := get[accountItem](ctx, s, accountPK(accountID), skAccount)
	if err != nil {
		return store.Account{}, err
	}
	if a == nil {
		return store.Account{}, store.ErrNotFound
	}
	return a.account(), nil
}

func (s *Store) AccountByConsoleToken(ctx context.Context, tokenHash string) (store.Account, error) {
	c, err := get[consoleItem](ctx, s, pfxConsole+tokenHash, skConsole)
	if err != nil {
		return store.Account{}, err
	}
	if c == nil {
		return store.Account{}, store.ErrNotFound
	}
	return s.Account(ctx, c.AccountID)
}

// Grant adds amount to the balance and lifetime with a grant entry,
// optimistically: the balance write is conditioned on the balance read,
// and a mismatch retries with the balance the condition saw. The account
// returned is exact (balance_version is in the condition).
func (s *Store) Grant(ctx context.Context, accountID string, amount int64, note, requestID string) (store.Account, error) {
	if amount <= 0 {
		return store.Account{}, errors.New("dynamostore: a grant is positive")
	}
	a, err := get[accountItem](ctx, s, accountPK(accountID), skAccount)
	if err != nil {
		return store.Account{}, err
	}
	for attempt := 0; ; attempt++ {
		if a == nil {
			return store.Account{}, store.ErrNotFound
		}
		if a.Balance > store.MaxCredits-amount {
			return store.Account{}, store.ErrCreditCeiling
		}
		now, after := s.now(), a.Balance+amount
		entry, err := marshal(ledgerItem{
			PK: a.PK, SK: pfxLedger + store.NewEntryID(), Type: string(store.EntryGrant),
			Amount: amount, BalanceAfter: after, RequestID: requestID, Note: note, CreatedAt: now,
		})
		if err != nil {
			return store.Account{}, err
		}
		c, err := s.transact(ctx, []types.TransactWriteItem{
			moveBalance(s, a, after, now, amount),
			putNew(s, entry),
		})
		if err != nil {
			return store.Account{}, err
		}
		if c == nil {
			a.Balance, a.Lifetime, a.BalanceChangedAt = after, a.Lifetime+amount, now
			a.BalanceVersion++
			return a.account(), nil
		}
		if bad, old := c.failed(0); bad {
			if a, err = decode[accountItem](old); err != nil {
				return store.Account{}, err
			}
		}
		if bad, _ := c.failed(1); bad {
			return store.Account{}, fmt.Errorf("dynamostore: ledger entry id collision")
		}
		if err := backoff(ctx, attempt); err != nil {
			return store.Account{}, err
		}
	}
}
